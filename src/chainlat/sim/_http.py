"""HTTP/1.1 over asyncio streams, just enough for the simulator.

Keep-alive, ``Content-Length`` and chunked request bodies, ``Content-Length`` and
chunked responses. One request at a time per connection; nothing here knows about
models or providers (that is ``_sim_engine``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus

MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 32 * 1024 * 1024

logger = logging.getLogger("chainlat.sim")

Headers = list[tuple[str, str]]


class HttpError(Exception):
    """A request the wire layer cannot accept; answered, then the connection is closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Request:
    """One parsed request; header names are lower-cased, repeats joined with ", "."""

    method: str
    target: str
    version: str
    headers: dict[str, str]
    body: bytes
    received_ns: int
    """``perf_counter_ns`` when the last byte of the request was read."""

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def keep_alive(self) -> bool:
        tokens = {t.strip().lower() for t in self.headers.get("connection", "").split(",")}
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens


async def read_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter | None = None
) -> Request | None:
    """Read one request; None on a clean end of stream between requests.

    With a ``writer``, ``Expect: 100-continue`` is answered at once (curl asks for it
    on larger bodies and would otherwise wait a second before sending the prompt).
    """
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise HttpError(400, "incomplete request head") from None
    except asyncio.LimitOverrunError:
        raise HttpError(431, "request head too large") from None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[0].isalpha():
        raise HttpError(400, "malformed request line")
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise HttpError(505, f"unsupported protocol version {version}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise HttpError(400, "malformed header line")
        key = name.lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    if writer is not None and headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    body = await _read_body(reader, headers)
    return Request(method, target, version, headers, body, time.perf_counter_ns())


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    encoding = headers.get("transfer-encoding", "").strip().lower()
    if encoding:
        if encoding != "chunked":
            raise HttpError(501, f"unsupported transfer-encoding {encoding}")
        return await _read_chunked(reader)
    length_text = headers.get("content-length")
    if length_text is None:
        return b""
    if not length_text.isdigit():
        raise HttpError(400, "invalid content-length")
    length = int(length_text)
    if length > MAX_BODY_BYTES:
        raise HttpError(413, f"request body over {MAX_BODY_BYTES} bytes")
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise HttpError(400, "incomplete request body") from None


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    try:
        while True:
            size_line = await reader.readuntil(b"\r\n")
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise HttpError(400, "malformed chunk size") from None
            if size == 0:
                # Trailers, if any, end with an empty line; they carry nothing we use.
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                return bytes(body)
            if len(body) + size > MAX_BODY_BYTES:
                raise HttpError(413, f"request body over {MAX_BODY_BYTES} bytes")
            body += await reader.readexactly(size)
            if await reader.readexactly(2) != b"\r\n":
                raise HttpError(400, "malformed chunk")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        raise HttpError(400, "incomplete chunked body") from None


def _head(status: int, headers: Headers) -> bytes:
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class Responder:
    """Writes the one response to a request: whole, chunked, or not at all (abort)."""

    def __init__(self, writer: asyncio.StreamWriter, *, keep_alive: bool) -> None:
        self._writer = writer
        self.keep_alive = keep_alive
        self.started = False
        self.finished = False
        self.aborted = False
        self.status = 0

    def _connection_headers(self) -> Headers:
        return [] if self.keep_alive else [("connection", "close")]

    async def send(self, status: int, headers: Headers, body: bytes) -> None:
        """Send a complete response with a ``Content-Length`` body."""
        self._begin(status)
        all_headers = [*headers, *self._connection_headers(), ("content-length", str(len(body)))]
        self._writer.write(_head(status, all_headers) + body)
        await self._writer.drain()
        self.finished = True

    async def start_chunked(self, status: int, headers: Headers) -> None:
        """Send the head of a chunked response; the body follows with `chunk`."""
        self._begin(status)
        all_headers = [*headers, *self._connection_headers(), ("transfer-encoding", "chunked")]
        self._writer.write(_head(status, all_headers))
        await self._writer.drain()

    async def chunk(self, data: bytes) -> None:
        """Send one chunk now; ``drain`` so a stalled client is noticed here, not later."""
        if data:
            self._writer.write(b"%x\r\n%b\r\n" % (len(data), data))
            await self._writer.drain()

    async def end_chunked(self) -> None:
        """Send the last (empty) chunk."""
        self._writer.write(b"0\r\n\r\n")
        await self._writer.drain()
        self.finished = True

    def abort(self) -> None:
        """Drop the connection at once, mid-response if need be (a reset, not a clean close)."""
        self.aborted = True
        self.keep_alive = False
        self._writer.transport.abort()

    def _begin(self, status: int) -> None:
        if self.started:
            raise RuntimeError("response already started")
        self.started = True
        self.status = status


Handler = Callable[[Request, Responder], Awaitable[None]]
ErrorRenderer = Callable[[int, str], tuple[Headers, bytes]]


async def serve_connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    handle: Handler,
    render_error: ErrorRenderer,
) -> None:
    """Serve requests on one connection until it closes, is not kept alive, or is cancelled."""
    sock = writer.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        # Tokens go out as small writes; Nagle plus delayed ACKs would hold them back by
        # up to 40 ms, which is larger than the latencies this server exists to model.
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            try:
                request = await read_request(reader, writer)
            except HttpError as exc:
                headers, body = render_error(exc.status, exc.message)
                await Responder(writer, keep_alive=False).send(exc.status, headers, body)
                return
            if request is None:
                return
            responder = Responder(writer, keep_alive=request.keep_alive)
            try:
                await handle(request, responder)
            except (ConnectionError, asyncio.IncompleteReadError):
                return
            except Exception:
                logger.exception(
                    "chainlat.sim: error while serving %s %s", request.method, request.path
                )
                if not responder.started:
                    headers, body = render_error(500, "internal error in the simulator")
                    responder.keep_alive = False
                    await responder.send(500, headers, body)
                return
            if not (responder.keep_alive and responder.finished):
                return
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    except asyncio.CancelledError:
        # Server shutdown: drop the connection now rather than wait for a polite close.
        writer.transport.abort()
        raise
    finally:
        writer.close()
