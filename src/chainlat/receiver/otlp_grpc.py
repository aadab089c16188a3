"""OTLP/gRPC: ``TraceService/Export``, served by grpcio with opentelemetry-proto's servicer.

grpcio keeps the bounds: a message over ``max_body_bytes`` (decompressed) is refused with
RESOURCE_EXHAUSTED before it reaches the servicer, at most ``max_grpc_calls`` calls run at
once (more are refused the same way) on ``grpc_threads`` threads, and a connection idle for
``idle_timeout_s`` is closed.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from chainlat.receiver.decoding import from_message, span_count

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
        self._address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self._limits = limits
        self._server: grpc.Server | None = None
        self.port = 0

    def start(self) -> int:
        """Bind and serve; the port (a free one for port 0). OSError when it cannot bind."""
        import grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

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
        add = trace_service_pb2_grpc.add_TraceServiceServicer_to_server
        add(_servicer(self._sink), server)  # type: ignore[no-untyped-call]
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

    def stop(self) -> None:
        """Stop accepting; let the calls in progress end (a second at most)."""
        if self._server is not None:
            self._server.stop(1.0).wait()
            self._server = None


def _servicer(sink: Sink) -> Any:
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    class Servicer(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            sink.started()
            try:
                document = from_message(request)
                sink.write(document, span_count(document))
            finally:
                sink.ended()
            return trace_service_pb2.ExportTraceServiceResponse()

    return Servicer()
