"""chainlat's exceptions, and the guard that keeps its own failures out of user code.

::

    ChainlatError
    ├── ConfigError            bad arguments or environment for configure()
    ├── InputError             a file or source the user gave is unusable (exit code 2)
    │   ├── BudgetFileError    a budget file is malformed
    │   ├── TraceSourceError   a trace file or Jaeger source cannot be read
    │   ├── ProfileError       a latency profile or profile file (also a ValueError)
    │   └── SpecError          a what-if change spec such as --swap (also a ValueError)
    └── LatencyBudgetExceeded  raised on purpose by on_exceed="raise"
    LatencyBudgetWarning       (a UserWarning) issued by on_exceed="warn"
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

    from chainlat._core.rollup import Rollup

logger: Final = logging.getLogger("chainlat")

SHOWN_CHARS: Final = 60
"""How much of a value an error message quotes: a 100 MB wrong-typed field still gives a
short line."""

_reported: set[str] = set()

RAISE_INTERNAL_ERRORS = False
"""Set by chainlat's own test suite, so that its bugs stay loud there."""


class ChainlatError(Exception):
    """Base of every error chainlat raises."""


class ConfigError(ChainlatError):
    """configure() was given arguments or environment variables it cannot use."""


class InputError(ChainlatError):
    """A file or source named by the user cannot be used; the message names it and where."""


class BudgetFileError(InputError):
    """A budget file is malformed: the message names the file, key path and what was expected."""


class TraceSourceError(InputError):
    """A trace file or Jaeger source cannot be read: the message names it and the location."""


class ProfileError(InputError, ValueError):
    """A latency profile, or a profile file, cannot be used; the message names the file and key.

    Also a ``ValueError``: a bad argument to ``ModelProfile`` or ``SimServer``.
    """


class SpecError(InputError, ValueError):
    """A what-if change (``--swap``, ``--prompt-scale``, ...) cannot be parsed or applied."""


class LatencyBudgetExceeded(ChainlatError):
    """A workflow run broke its latency budget and the policy is ``on_exceed="raise"``.

    Raised when the workflow block exits, after its span has ended.
    """

    def __init__(self, message: str, rollup: Rollup, violations: Sequence[object]) -> None:
        super().__init__(message)
        self.rollup = rollup
        self.violations = list(violations)


class LatencyBudgetWarning(UserWarning):
    """A workflow run broke its latency budget and the policy is ``on_exceed="warn"``."""


def shorten(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[:limit] + "…"


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """A value as an error message quotes it: its repr, cut to ``limit`` characters."""
    if isinstance(value, (str, bytes)) and len(value) > 4 * limit:
        value = value[: 4 * limit]  # no repr of 100 MB just to cut it
    return shorten(repr(value), limit)


_warned: set[str] = set()
"""The warnings already logged by :func:`warn_once`."""


def warn_once(key: str, message: str, *args: object, level: int = logging.WARNING) -> None:
    """Log a line about the application's input once per ``key``, not once per call."""
    if key not in _warned:
        _warned.add(key)
        logger.log(level, message, *args)


def forget_warnings() -> None:
    """Log each :func:`warn_once` warning again on its next use, as in a fresh process.

    A test hook: a test that asserts a one-time warning calls it first (the suite's
    ``fresh_warnings`` fixture does), whatever ran before it in the process.
    """
    _warned.clear()


def undecodable(exc: UnicodeDecodeError) -> tuple[int, str]:
    """Where text stopped decoding, as the line of its first bad byte and a phrase naming the
    byte and its column: ``(3, "not UTF-8 text: byte 0xff at column 6")``."""
    data, start = exc.object, exc.start
    line = data.count(b"\n", 0, start) + 1
    column = start - data.rfind(b"\n", 0, start)
    encoding = exc.encoding.upper()
    return line, f"not {encoding} text: byte 0x{data[start]:02x} at column {column}"


@contextmanager
def reading(
    name: object, error: type[InputError], missing: str, directory: str | None = None
) -> Iterator[None]:
    """An OS error while opening or reading the file ``name`` as one line of ``error``:
    ``name: missing`` when it does not exist, ``name: directory`` when it is a directory
    (None: as any other error), else ``name: cannot read: <the system's reason>``."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            why = missing
        elif isinstance(exc, IsADirectoryError) and directory is not None:
            why = directory
        else:
            why = f"cannot read: {exc.strerror or exc}"
        raise error(f"{name}: {why}") from None


@contextmanager
def internal_errors(what: str) -> Iterator[None]:
    """Swallow and log (once per ``what``) any exception from chainlat's own code."""
    try:
        yield
    except Exception:
        if RAISE_INTERNAL_ERRORS:
            raise
        if what not in _reported:
            _reported.add(what)
            logger.exception("chainlat: internal error while %s; telemetry may be incomplete", what)
