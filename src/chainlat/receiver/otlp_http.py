"""OTLP/HTTP: ``POST /v1/traces`` with a protobuf or JSON body, gzip or not, chunked or
not, served by aiohttp on an event loop of its own thread.

aiohttp parses the requests (chunked bodies included); what is bounded here, and how:

- a body over ``max_body_bytes``, as sent or decompressed, is answered 413 without being
  held or inflated past the cap (``Content-Length`` is checked first, the rest as it comes);
  a client that waits for ``100 Continue`` (``Expect: 100-continue``) before sending a
  ``Content-Length`` over the cap gets the 413 at once, not an invitation to send it;
- a body that has not all arrived ``body_timeout_s`` after its headers is answered 408 and
  its connection closed (after at most a second more of the body read and dropped, so
  that the client reads the answer); a connection that sends no complete request head for
  ``idle_timeout_s`` (before its first request or after its last) is closed by aiohttp's
  keep-alive timer, which starts when the connection opens;
- past ``max_connections`` open connections, a new one is closed at once (counted);
- decoding runs on a pool of ``decode_threads`` threads, beside the event loop;
- a request aiohttp cannot parse (a bad header, a line too long, not HTTP at all) is
  counted as refused with a one-line reason, not logged with aiohttp's traceback.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final

from chainlat.receiver.decoding import (
    JSON,
    PROTOBUF,
    BadBody,
    decode,
    export_response,
    span_count,
    unread,
)
from chainlat.receiver.sink import Unwritten

if TYPE_CHECKING:
    from aiohttp import web

    from chainlat.receiver.limits import Limits
    from chainlat.receiver.sink import Sink

TRACES_PATH: Final = "/v1/traces"
_CHUNK: Final = 64 * 1024
_LINGER_S: Final = 1.0


class HttpReceiver:
    """The OTLP/HTTP server; :meth:`start` binds and returns the port, :meth:`stop` ends it.

    Example::

        server = HttpReceiver(sink, "127.0.0.1", 0, Limits())
        port = server.start()
        server.stop()
    """

    def __init__(self, sink: Sink, host: str, port: int, limits: Limits) -> None:
        self._sink = sink
        self._host = host
        self._port = port
        self._limits = limits
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="chainlat-otlp-http", daemon=True)
        self._pool = ThreadPoolExecutor(limits.decode_threads, thread_name_prefix="chainlat-decode")
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None
        self.port = 0

    def start(self) -> int:
        """Bind and serve; the port (a free one for port 0). OSError when it cannot bind."""
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            self._thread.join()
            raise self._failure
        return self.port

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._open())
        except BaseException as exc:
            self._failure = exc
            self._ready.set()
            self._loop.close()
            return
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _open(self) -> None:
        from aiohttp import web

        app = web.Application()
        app.router.add_post(TRACES_PATH, self._traces, expect_handler=self._expect)
        self._runner = web.AppRunner(
            app,
            access_log=None,
            shutdown_timeout=1.0,
            keepalive_timeout=self._limits.idle_timeout_s,
            # After a refusal, what is left of the body is read and dropped this long at
            # most, so that the client can read the answer before the connection closes.
            lingering_time=_LINGER_S,
            auto_decompress=False,  # decompressed here, with a cap (decoding.decompress)
            logger=_refusals_logger(self._sink),
        )
        await self._runner.setup()
        handler_factory = self._runner.server
        assert handler_factory is not None
        limit = self._limits.max_connections
        loop = self._loop
        accepting = [0]
        """Connections accepted whose handler aiohttp has not listed yet: a burst of them is
        accepted in one go, before any is made."""

        def listed() -> None:
            accepting[0] -= 1

        def factory() -> asyncio.BaseProtocol:
            if len(handler_factory.connections) + accepting[0] >= limit:
                self._sink.connection_refused()
                return _Closing()
            # The transport made for this handler calls its connection_made (which lists it)
            # at the loop's next turn; listed() runs at the turn after.
            accepting[0] += 1
            loop.call_soon(loop.call_soon, listed)
            return handler_factory()

        self._server = await self._loop.create_server(factory, self._host, self._port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _traces(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import ClientPayloadError, web

        self._sink.started()
        try:
            try:
                async with asyncio.timeout(self._limits.body_timeout_s):
                    body = await _body(request, self._limits.max_body_bytes)
                document, (rejected, message) = await self._loop.run_in_executor(
                    self._pool,
                    _decoded,
                    body,
                    request.headers.get("Content-Type", ""),
                    request.headers.get("Content-Encoding", ""),
                    self._limits.max_body_bytes,
                )
            except TimeoutError:
                return self._refuse(408, "the body did not arrive in time")
            except BadBody as bad:
                return self._refuse(bad.status, bad.reason)
            except (ClientPayloadError, ConnectionError) as exc:  # cut short by the client
                return self._refuse(400, f"the body was cut short: {exc}")
            spans = span_count(document)
            try:
                await self._loop.run_in_executor(
                    self._pool, self._sink.write, document, spans, rejected
                )
            except Unwritten as exc:  # counted by the sink; an exporter retries a 503
                return web.Response(status=503, text=f"{exc}\n")
        finally:
            self._sink.ended()
        kind = JSON if request.content_type == JSON else PROTOBUF
        return web.Response(body=export_response(kind, rejected, message), content_type=kind)

    async def _expect(self, request: web.Request) -> web.StreamResponse | None:
        """``Expect`` (before the body is read): a length over the cap is refused before the
        body is invited; else ``100-continue`` is answered as aiohttp's own handler does (it
        answers 100 Continue to any length)."""
        from aiohttp import HttpVersion11, web

        length = request.content_length
        limit = self._limits.max_body_bytes
        if length is not None and length > limit:
            return self._refuse(413, f"body of {length} bytes over {limit}")
        if request.version != HttpVersion11:
            return None
        expect = request.headers.get("Expect", "")
        if expect.lower() != "100-continue":
            raise web.HTTPExpectationFailed(text=f"Unknown Expect: {expect}")
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # the answer's own size starts after the interim one
        return None

    def _refuse(self, status: int, reason: str) -> web.StreamResponse:
        from aiohttp import web

        self._sink.refused(status, reason)
        response = web.Response(status=status, text=reason + "\n")
        if status in (408, 413):
            response.force_close()  # the rest of the body is not read
        return response

    def stop(self) -> None:
        """Stop accepting, let the requests being answered end (about a second at most),
        close the connections."""
        if not self._thread.is_alive():
            return
        future = asyncio.run_coroutine_threadsafe(self._close(), self._loop)
        future.result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._pool.shutdown()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._runner is not None:
            await self._runner.cleanup()


def _decoded(
    body: bytes, content_type: str, encoding: str, max_bytes: int
) -> tuple[dict[str, Any], tuple[int, str]]:
    """The body as a document, and the spans of it chainlat's reader leaves out with the
    message saying so (:func:`unread`)."""
    document = decode(body, content_type, encoding, max_bytes)
    return document, unread(document)


async def _body(request: web.Request, max_bytes: int) -> bytes:
    """The body as sent (chunked or not), BadBody 413 past ``max_bytes``."""
    length = request.content_length
    if length is not None and length > max_bytes:
        raise BadBody(413, f"body of {length} bytes over {max_bytes}")
    body = bytearray()
    async for chunk in request.content.iter_chunked(_CHUNK):
        body += chunk
        if len(body) > max_bytes:
            raise BadBody(413, f"body over {max_bytes} bytes")
    return bytes(body)


def _refusals_logger(sink: Sink) -> logging.Logger:
    """The logger aiohttp's request handlers report to: a request it could not parse (logged
    with a traceback that would reach the terminal through logging's last resort) is counted
    as refused instead, with the first line of aiohttp's reason."""
    logger = logging.Logger("chainlat.receiver.http")  # apart from the logging tree
    logger.addHandler(_Refusals(sink))
    return logger


class _Refusals(logging.Handler):
    def __init__(self, sink: Sink) -> None:
        super().__init__()
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        from aiohttp.http_exceptions import HttpProcessingError

        exc = record.exc_info[1] if record.exc_info else None
        if exc is None:
            return  # aiohttp's debug lines
        if isinstance(exc, HttpProcessingError):
            self._sink.refused(400, f"not a well-formed HTTP request: {_reason(exc.message)}")
        else:
            self._sink.refused(500, f"{type(exc).__name__}: {exc}")


def _reason(message: str) -> str:
    """aiohttp's reason without the bytes it quotes (a header's value may be a token)."""
    first = message.strip().splitlines()[0] if message.strip() else "unparsable"
    return first.split(": b'")[0].split(': b"')[0].rstrip(":. ")


class _Closing(asyncio.Protocol):
    """A connection over the limit: closed as soon as it is made."""

    def connection_made(self, transport: Any) -> None:
        transport.close()
