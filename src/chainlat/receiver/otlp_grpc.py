"""OTLP/gRPC: ``TraceService/Export``, served by grpcio with opentelemetry-proto's servicer.

grpcio keeps the bounds: a message over ``max_body_bytes`` (decompressed) is refused with
RESOURCE_EXHAUSTED before it reaches the servicer, at most ``max_grpc_calls`` calls run at
once (more are refused the same way) on ``grpc_threads`` threads, and a connection idle for
``idle_timeout_s`` is closed. The servicer parses the request itself (grpcio hands it the
bytes), so that a message that is not an OTLP trace request is counted as refused and
answered INVALID_ARGUMENT with a one-line reason, not logged by grpcio with a traceback.

``Export`` is served as a call whose request is a stream (the same bytes on the wire as a
unary call's): a unary handler is not called at all when grpcio refuses the message, so
the refusal could not be counted. The handler reads the one message; when none comes,
grpcio refused it over the cap (and answered the client RESOURCE_EXHAUSTED itself), or its
client gave up or sent none: grpcio tells the handler no more than that, and the call is
counted as too large (HTTP's 413).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

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
        self.port = 0

    def start(self) -> int:
        """Bind and serve; the port (a free one for port 0). OSError when it cannot bind."""
        import grpc

        if self._port:
            # Bound here first: grpcio would print its own error on stderr for a port in use.
            self._check_free()
        limits = self._limits
        server = grpc.server(
            ThreadPoolExecutor(limits.grpc_threads, thread_name_prefix="chainlat-grpc"),
            maximum_concurrent_rpcs=limits.max_grpc_calls,
            options=[
                ("grpc.max_receive_message_length", limits.max_body_bytes),
                ("grpc.max_connection_idle_ms", int(limits.idle_timeout_s * 1000)),
                ("grpc.so_reuseport", 0),
            ],
        )
        server.add_generic_rpc_handlers((_handler(self._sink, limits.max_body_bytes),))
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


_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"


def _handler(sink: Sink, max_bytes: int) -> grpc.GenericRpcHandler:
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

    method: grpc.RpcMethodHandler[bytes, bytes] = grpc.stream_unary_rpc_method_handler(export)
    return grpc.method_handlers_generic_handler(_SERVICE, {"Export": method})


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
        sink.write(document, span_count(document))
        sink.unread(rejected)
    except BadBody as bad:
        sink.refused(bad.status, bad.reason)
        return grpc.StatusCode.INVALID_ARGUMENT, bad.reason
    except Unwritten as exc:  # counted by the sink; an exporter retries UNAVAILABLE
        return grpc.StatusCode.UNAVAILABLE, str(exc)
    except Exception as exc:  # chainlat's fault: counted and answered, not a traceback
        sink.refused(500, f"{type(exc).__name__}: {exc}")
        return grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}"
    return export_response(PROTOBUF, rejected, message)
