"""What chainlat records about an exception, and what it logs, goes through the scrubber.

An exception's text comes from the outside world: h11 puts a whole header value in its
message (``Illegal header value b'Bearer sk-...\\n'``), httpx puts the URL with its query
string, a provider echoes the key it refused. Every exception event, status description
and chainlat log line is therefore passed through `chainlat._core.redact.scrub` first.
"""

from __future__ import annotations

import logging
import traceback
from typing import TYPE_CHECKING, Final

from opentelemetry.trace import Status, StatusCode

from chainlat._core.errors import logger
from chainlat._core.redact import scrub

if TYPE_CHECKING:
    from opentelemetry.trace import Span

_EXCEPTION_EVENT: Final = "exception"


def exception_type(exc: BaseException) -> str:
    """``error.type`` and ``exception.type``: the qualified class name (builtins bare)."""
    cls = type(exc)
    module = cls.__module__
    if module == "builtins" or not module:
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def exception_message(exc: BaseException) -> str:
    """``str(exc)`` with every credential redacted; never raises."""
    try:
        text = str(exc)
    except Exception:
        return f"<unprintable {type(exc).__name__}>"
    return scrub(text)


def describe(exc: BaseException) -> str:
    """``Type: message`` for a status description or a log line, scrubbed."""
    message = exception_message(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def record_error(span: Span, exc: BaseException, timestamp: int | None) -> None:
    """Record ``exc`` on ``span`` as the SDK's ``record_exception`` does, scrubbed.

    The same event (``exception.type``, ``.message``, ``.stacktrace``, ``.escaped``),
    status ERROR and ``error.type``; the stack trace includes chained exceptions, whose
    messages (an ``APIConnectionError`` caused by a ``LocalProtocolError``) hold the same
    secrets, so it is scrubbed as a whole.
    """
    try:
        stacktrace = "".join(traceback.format_exception(exc))
    except Exception:
        stacktrace = ""
    span.add_event(
        _EXCEPTION_EVENT,
        {
            "exception.type": exception_type(exc),
            "exception.message": exception_message(exc),
            "exception.stacktrace": scrub(stacktrace),
            "exception.escaped": "True",
        },
        timestamp=timestamp,
    )
    span.set_status(Status(StatusCode.ERROR, describe(exc)))


class ScrubbingFilter(logging.Filter):
    """Scrubs a record's message and its exception text before any handler sees them."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True  # the logging module reports a malformed record itself
        record.msg = scrub(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            # The traceback's last lines repeat the exception's message: format it here,
            # scrubbed, and drop the raw exception so that no handler formats it again.
            formatted = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
            record.exc_text = scrub(formatted)
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub(record.stack_info)
        return True


_filter: Final = ScrubbingFilter()


def install_log_scrubber(target: logging.Logger = logger) -> None:
    """Scrub every record logged through ``target`` (chainlat's logger); idempotent."""
    if _filter not in target.filters:
        target.addFilter(_filter)


install_log_scrubber()
