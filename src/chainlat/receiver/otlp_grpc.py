"""OTLP/gRPC: ``TraceService/Export``, served by grpcio with opentelemetry-proto's servicer.

grpcio keeps the bounds: a message over ``max_body_bytes`` (decompressed) is refused with
RESOURCE_EXHAUSTED before it reaches the servicer, at most ``max_grpc_calls`` calls run at
once (more are refused the same way, counted by `_Refusals`) on ``grpc_threads`` threads,
and a connection idle for ``idle_timeout_s`` is closed. The servicer parses the request
itself (grpcio hands it the bytes), so that a message that is not an OTLP trace request is
counted as refused and answered INVALID_ARGUMENT with a one-line reason, not logged by
grpcio with a traceback.

``Export`` is served as a call whose request is a stream (the same bytes on the wire as a
unary call's): a unary handler is not called at all when grpcio refuses the message, so
the refusal could not be counted. The handler reads the one message; when none comes,
grpcio refused it over the cap (and answered the client RESOURCE_EXHAUSTED itself), or its
client gave up or sent none: grpcio tells the handler no more than that, and the call is
counted as too large (HTTP's 413).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from chainlat.receiver.decoding import (
    PROTOBUF,
    BadBody,
    export_response,
    from_protobuf,
    span_count,
    unread,
)
from chainlat.receiver.sink import Unwritten

if TYPE_CHECKING:
    import grpc

    from chainlat.receiver.limits import Limits
    from chainlat.receiver.sink import Sink


class GrpcReceiver:
    """The OTLP/gRPC server; :meth:`start` binds and returns the port, :meth:`stop` ends it.

    Example::

        server = GrpcReceiver(sink, "127.0.0.1", 0, Limits())
        port = server.start()
        server.stop()
    """

    def __init__(self, sink: Sink, host: str, port: int, limits: Limits) -> None:
        self._sink = sink
        self._host, self._port = host, port
        self._address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self._limits = limits
        self._server: grpc.Server | None = None
        self._refusals = _Refusals(sink)
        self.port = 0

    def start(self) -> int:
        """Bind and serve; the port (a free one for port 0). OSError when it cannot bind."""
        import grpc

        if self._port:
            # Bound here first: grpcio would print its own error on stderr for a port in use.
            self._check_free()
        limits = self._limits
        refusals = self._refusals
        server = grpc.server(
            _CallThreads(limits.grpc_threads, refusals.ran),
            maximum_concurrent_rpcs=limits.max_grpc_calls,
            options=[
                ("grpc.max_receive_message_length", limits.max_body_bytes),
                ("grpc.max_connection_idle_ms", int(limits.idle_timeout_s * 1000)),
                ("grpc.so_reuseport", 0),
            ],
        )
        server.add_generic_rpc_handlers(
            (_export_handler(_export(self._sink, limits.max_body_bytes), refusals.offered),)
        )
        try:
            port = server.add_insecure_port(self._address)
        except RuntimeError as exc:  # grpcio raises where it once returned 0
            raise OSError(f"cannot listen on {self._address}: {exc}") from None
        if not port:
            raise OSError(f"cannot listen on {self._address}")
        server.start()
        self._server = server
        self.port = port
        return port

    def _check_free(self) -> None:
        try:
            socket.create_server((self._host, self._port), family=self._family()).close()
        except OSError as exc:
            raise OSError(f"cannot listen on {self._address}: {exc.strerror or exc}") from None

    def _family(self) -> socket.AddressFamily:
        return socket.AF_INET6 if ":" in self._host else socket.AF_INET

    def stop(self) -> None:
        """Stop accepting; let the calls in progress end (a second at most)."""
        if self._server is not None:
            self._server.stop(1.0).wait()
            self._server = None
            self._refusals.settle()


_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
_EXPORT = f"/{_SERVICE}/Export"


def _export(sink: Sink, max_bytes: int) -> grpc.RpcMethodHandler[bytes, bytes]:
    """``TraceService/Export`` on the request's bytes; the answer is an
    ``ExportTraceServiceResponse``, empty (no bytes) unless spans of it are not read."""
    import grpc

    def export(requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
        sink.started()
        try:
            taken = _take(sink, requests, max_bytes)
        finally:
            sink.ended()
        if isinstance(taken, tuple):
            context.abort(*taken)
        return taken

    return grpc.stream_unary_rpc_method_handler(export)


_P = ParamSpec("_P")
_T = TypeVar("_T")


class _Refusals:
    """The calls grpcio refused because ``max_grpc_calls`` were in progress, counted in
    the sink's ``busy_calls``.

    grpcio answers such a call RESOURCE_EXHAUSTED itself: the handler never runs, and
    grpcio says nothing of it. What it does is seen on both sides of its decision: it asks
    the handler for the call's method (:meth:`offered`), then runs the call as one task on
    the server's threads (:meth:`ran`) or refuses it. Its one serving thread does both for
    a call before it asks for the next, so when a call is offered, every call before it
    has been run or refused: the difference is counted then, and once more when the server
    has stopped. A refusal is counted when the next call arrives (checked against grpcio
    1.85.4, whose ``_server._handle_call`` asks the handler, then runs or refuses)."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self._offered = 0
        self._ran = 0
        self._counted = 0

    def offered(self) -> None:
        self.settle()
        self._offered += 1

    def ran(self) -> None:
        self._ran += 1

    def settle(self) -> None:
        """Count the calls offered and neither run nor counted yet."""
        refused = self._offered - self._ran - self._counted
        if refused > 0:
            self._counted += refused
            self._sink.busy(refused)


class _CallThreads(ThreadPoolExecutor):
    """The threads gRPC calls run on; ``ran`` is told of each call grpcio runs (one task
    a call)."""

    def __init__(self, threads: int, ran: Callable[[], None]) -> None:
        super().__init__(threads, thread_name_prefix="chainlat-grpc")
        self._ran = ran

    def submit(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> Future[_T]:
        self._ran()
        return super().submit(fn, *args, **kwargs)


def _export_handler(
    method: grpc.RpcMethodHandler[bytes, bytes], offered: Callable[[], None]
) -> grpc.GenericRpcHandler:
    """The service's one method, ``Export``; ``offered`` is told of each call for it."""
    import grpc

    class ExportHandler(grpc.GenericRpcHandler):
        def service(
            self, handler_call_details: grpc.HandlerCallDetails
        ) -> grpc.RpcMethodHandler[bytes, bytes] | None:
            if handler_call_details.method != _EXPORT:
                return None  # grpcio answers UNIMPLEMENTED
            offered()
            return method

    return ExportHandler()


def _take(
    sink: Sink, requests: Iterator[bytes], max_bytes: int
) -> tuple[grpc.StatusCode, str] | bytes:
    """The call's one message written, and the answer (a partial success when the reader
    leaves spans of it out), or the status and reason it is refused with (counted); more
    messages (not OTLP's) are not read."""
    import grpc

    try:
        body = next(requests, None)
    except grpc.RpcError:  # the call ended as the message came (grpcio's refusal, or the client)
        body = None
    if body is None:
        reason = f"no message received: over {max_bytes} bytes, or none sent"
        sink.refused(413, reason)
        return grpc.StatusCode.RESOURCE_EXHAUSTED, reason
    try:
        document = from_protobuf(body)
        rejected, message = unread(document)
        sink.write(document, span_count(document), rejected)
    except BadBody as bad:
        sink.refused(bad.status, bad.reason)
        return grpc.StatusCode.INVALID_ARGUMENT, bad.reason
    except Unwritten as exc:  # counted by the sink; an exporter retries UNAVAILABLE
        return grpc.StatusCode.UNAVAILABLE, str(exc)
    except Exception as exc:  # chainlat's fault: counted and answered, not a traceback
        sink.refused(500, f"{type(exc).__name__}: {exc}")
        return grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}"
    return export_response(PROTOBUF, rejected, message)
