"""Bounded HTTP for every source chainlat queries (Prometheus's API, Jaeger's API).

A server is not trusted to end its answer: ``fetch`` holds one deadline for the whole
request (connecting, the headers, every byte of the body) and a cap on the answer once
decompressed. httpx's timeouts bound each socket operation, so a server that sends a
byte a second (in its headers or its body) would hold a read for as long as it likes: a
watchdog shuts the request's sockets down at the deadline, which ends any read in
progress. The body is read raw and decompressed here, in pieces of at most what the cap
leaves, so a gzip bomb never holds more than the cap in memory.

Example::

    with httpx.Client() as client:
        response = fetch(client, "GET", url, deadline=time.monotonic() + 30,
                         max_bytes=1 << 24, timed_out=lambda: TimeoutError(url),
                         too_big=lambda: ValueError(url))
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from chainlat._core.errors import TraceSourceError

if TYPE_CHECKING:
    import httpx

Decode = Callable[[bytes, int], tuple[bytes, bytes]]

__all__ = ["decoder", "fetch"]


class _Watchdog:
    """Shuts the request's sockets down at the deadline (httpx's trace extension names
    each socket as it connects)."""

    def __init__(self, deadline: float) -> None:
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.fired = False
        self._timer = threading.Timer(max(deadline - time.monotonic(), 0.0), self._fire)
        self._timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def trace(self, event: str, info: Mapping[str, Any]) -> None:
        if event != "connection.connect_tcp.complete":
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            with self._lock:
                self._sockets.append(sock)
                if self.fired:
                    self._shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._sockets:
                self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def fetch(
    client: httpx.Client,
    method: str,
    url: str,
    *,
    deadline: float,
    max_bytes: int,
    timed_out: Callable[[], Exception],
    too_big: Callable[[], Exception],
    params: Mapping[str, str] | None = None,
    data: Mapping[str, str] | None = None,
    where: str = "",
) -> httpx.Response:
    """``method url`` finished by ``deadline`` (``time.monotonic()``), with at most
    ``max_bytes`` of answer once decompressed; ``timed_out()`` or ``too_big()`` raised
    otherwise. The response returned holds the decoded body."""
    import httpx

    def left() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise timed_out()
        return remaining

    headers = {"Accept-Encoding": "gzip, deflate"}
    with _Watchdog(deadline) as watchdog:
        try:
            with client.stream(
                method,
                url,
                params=params,
                data=data,
                headers=headers,
                timeout=httpx.Timeout(left()),
                extensions={"trace": watchdog.trace},
            ) as response:
                body = bytearray()
                encoding = response.headers.get("content-encoding", "")
                chunks: Iterable[bytes]
                if response.is_stream_consumed:
                    # An answer already in memory (httpx.MockTransport), already decoded.
                    chunks, encoding = [response.content], ""
                else:
                    chunks = response.iter_raw()
                decode, finish = decoder(encoding, where or url)
                for chunk in chunks:
                    left()
                    while chunk:
                        piece, chunk = decode(chunk, max_bytes + 1 - len(body))
                        body += piece
                        if len(body) > max_bytes:
                            raise too_big()
                body += finish()
                if len(body) > max_bytes:
                    raise too_big()
                left()
        except (httpx.TransportError, httpx.StreamError):
            if watchdog.fired or deadline - time.monotonic() <= 0:
                raise timed_out() from None
            raise
    # The body as read, without its encoding: a response's text and JSON are ours.
    return httpx.Response(
        response.status_code,
        headers={"content-type": response.headers.get("content-type", "")},
        content=bytes(body),
        request=response.request,
    )


def decoder(encoding: str, where: str) -> tuple[Decode, Callable[[], bytes]]:
    """Functions decoding one raw chunk into at most ``room`` bytes (returning those and the
    chunk's unused rest), and the last bytes at the end."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return (lambda chunk, room: (chunk, b"")), bytes
    if encoding in ("gzip", "x-gzip", "deflate"):
        state = zlib.decompressobj(zlib.MAX_WBITS | 32)  # a gzip or zlib header, detected

        def decode(chunk: bytes, room: int) -> tuple[bytes, bytes]:
            try:
                data = state.decompress(chunk, max(room, 1))
            except zlib.error as exc:
                raise TraceSourceError(f"{where}: a corrupt {encoding} answer ({exc})") from None
            return data, state.unconsumed_tail

        def finish() -> bytes:
            try:
                return state.flush()
            except zlib.error as exc:
                raise TraceSourceError(f"{where}: a corrupt {encoding} answer ({exc})") from None

        return decode, finish
    raise TraceSourceError(f"{where}: an answer in an encoding chainlat cannot read: {encoding}")
