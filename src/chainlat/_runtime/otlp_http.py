"""A requests session for the OTLP/HTTP exporters that bounds each request as a whole.

``requests`` applies its timeout to each socket read, not to the request: a collector
that sends its headers and then one byte of body every few seconds holds an export for
as long as it likes. The exporters pass every request the time left until their own
deadline; this session reads the answer in pieces, giving each read only what remains of
that time, and gives up with a ``ReadTimeout`` (which the exporter counts as a failed
export) once it has run out. Imported only when an OTLP/HTTP exporter is built, so that
``import chainlat`` does not import requests.
"""

from __future__ import annotations

import os
import time
from typing import Any, Final

import requests

MAX_RESPONSE_BYTES: Final = 1 << 20
"""An OTLP answer is a few bytes (partial success, an error status); more is not kept."""
_READ_BYTES: Final = 16_384
_CREDENTIAL_PROVIDERS: Final = (
    "OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
    "OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER",
    "OTEL_PYTHON_EXPORTER_OTLP_HTTP_METRICS_CREDENTIAL_PROVIDER",
)


class DeadlineSession(requests.Session):
    """A session whose ``timeout`` bounds the whole request, the body's last byte included."""

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        timeout = kwargs.get("timeout")
        if not isinstance(timeout, int | float) or kwargs.get("stream"):
            return super().request(method, url, *args, **kwargs)
        deadline = time.monotonic() + max(float(timeout), 0.0)
        kwargs["stream"] = True
        response = super().request(method, url, *args, **kwargs)
        try:
            response._content = _read_by(response, deadline)
        except BaseException:
            response.close()  # not returned to the pool: the connection is in an unknown state
            raise
        return response


def _read_by(response: requests.Response, deadline: float) -> bytes:
    raw = response.raw
    read = getattr(raw, "read1", None) or raw.read  # read1: what has arrived, not amt bytes
    sock = getattr(getattr(raw, "connection", None), "sock", None)
    chunks: list[bytes] = []
    kept = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise requests.exceptions.ReadTimeout(
                f"the collector did not finish its answer within the request timeout "
                f"({kept} bytes received)"
            )
        if sock is not None:
            # Each read waits at most what is left of the request's time, not a full timeout.
            sock.settimeout(remaining)
        try:
            chunk = read(_READ_BYTES)
        except Exception as exc:
            if time.monotonic() >= deadline:
                raise requests.exceptions.ReadTimeout(
                    "the collector did not finish its answer within the request timeout"
                ) from exc
            raise requests.exceptions.ConnectionError(str(exc)) from exc
        if not chunk:
            break
        if kept < MAX_RESPONSE_BYTES:
            chunks.append(chunk[: MAX_RESPONSE_BYTES - kept])
            kept += len(chunks[-1])
    response._content_consumed = True
    return b"".join(chunks)


def deadline_session() -> DeadlineSession | None:
    """A fresh session, or None when a credential provider supplies the exporter's own."""
    if any(os.environ.get(name, "").strip() for name in _CREDENTIAL_PROVIDERS):
        return None
    return DeadlineSession()
