"""OTLP/gRPC: ``TraceService/Export``, served by grpcio with opentelemetry-proto's servicer.

grpcio keeps the bounds: a message over ``max_body_bytes`` (decompressed) is refused with
RESOURCE_EXHAUSTED before it reaches the servicer, at most ``max_grpc_calls`` calls run at
once (more are refused the same way) on ``grpc_threads`` threads, and a connection idle for
``idle_timeout_s`` is closed. The servicer parses the request itself (grpcio hands it the
bytes), so that a message that is not an OTLP trace request is counted as refused and
answered INVALID_ARGUMENT with a one-line reason, not logged by grpcio with a traceback.
"""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from chainlat.receiver.decoding import BadBody, from_protobuf, span_count
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
        server.add_generic_rpc_handlers((_handler(self._sink),))
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


def _handler(sink: Sink) -> grpc.GenericRpcHandler:
    """``TraceService/Export`` on the request's bytes; the answer is an empty
    ``ExportTraceServiceResponse`` (no bytes)."""
    import grpc

    def export(body: bytes, context: grpc.ServicerContext) -> bytes:
        sink.started()
        try:
            document = from_protobuf(body)
            sink.write(document, span_count(document))
        except BadBody as bad:
            sink.refused(bad.status, bad.reason)
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, bad.reason)
        except Unwritten as exc:  # counted by the sink; an exporter retries UNAVAILABLE
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        except Exception as exc:  # chainlat's fault: counted and answered, not a traceback
            sink.refused(500, f"{type(exc).__name__}: {exc}")
            context.abort(grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")
        finally:
            sink.ended()
        return b""

    method: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(export)
    return grpc.method_handlers_generic_handler(_SERVICE, {"Export": method})
