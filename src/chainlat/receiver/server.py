"""One receiver: the OTLP/HTTP and OTLP/gRPC servers writing into one file, and the runs
seen live."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from chainlat.receiver.limits import Limits
from chainlat.receiver.live import DEFAULT_SETTLE_S, LiveRuns
from chainlat.receiver.sink import ReceiverCounters, Sink

if TYPE_CHECKING:
    from types import TracebackType

    from chainlat._core.runs import WorkflowRun
    from chainlat.receiver.otlp_grpc import GrpcReceiver
    from chainlat.receiver.otlp_http import HttpReceiver

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_HTTP_PORT: Final = 4318
DEFAULT_GRPC_PORT: Final = 4317


class Receiver:
    """An OTLP receiver writing every request it takes to ``out`` as OTLP/JSON lines.

    ``port`` and ``grpc_port`` 0 choose free ports (read :attr:`port` and
    :attr:`grpc_port` once started); ``grpc_port=None`` serves HTTP only. ``on_run`` gets
    each run once its trace looks complete (:class:`~chainlat.receiver.live.LiveRuns`).

    Example::

        with Receiver("received.jsonl", port=0, grpc_port=0) as receiver:
            print(receiver.port, receiver.grpc_port)
        print(receiver.counters.spans)
    """

    def __init__(
        self,
        out: str | os.PathLike[str],
        *,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_HTTP_PORT,
        grpc_port: int | None = DEFAULT_GRPC_PORT,
        limits: Limits | None = None,
        on_run: Callable[[WorkflowRun], None] | None = None,
        settle_s: float = DEFAULT_SETTLE_S,
    ) -> None:
        self.out = os.fspath(out)
        self.host = host
        self.port = port
        self.grpc_port = grpc_port
        self.limits = limits or Limits()
        self._live = LiveRuns(on_run, settle_s=settle_s) if on_run is not None else None
        self._sink: Sink | None = None
        self._http: HttpReceiver | None = None
        self._grpc: GrpcReceiver | None = None

    @property
    def counters(self) -> ReceiverCounters:
        """What was received and refused so far."""
        return self._sink.counters if self._sink is not None else ReceiverCounters()

    def start(self) -> None:
        """Open the file and serve. OSError when the file cannot be written or a port bound."""
        from chainlat.receiver.otlp_grpc import GrpcReceiver
        from chainlat.receiver.otlp_http import HttpReceiver

        live = self._live
        self._sink = Sink(
            self.out,
            on_document=live.add if live is not None else None,
            recent_spans=self.limits.recent_spans,
        )
        try:
            self._http = HttpReceiver(self._sink, self.host, self.port, self.limits)
            self.port = self._http.start()
            if self.grpc_port is not None:
                self._grpc = GrpcReceiver(self._sink, self.host, self.grpc_port, self.limits)
                self.grpc_port = self._grpc.start()
        except BaseException:
            self.stop()
            raise

    def wait_quiet(self, quiet_s: float, most_s: float) -> None:
        """Return once no request is arriving and none has for ``quiet_s`` seconds, or after
        ``most_s`` seconds whatever comes."""
        deadline = time.monotonic() + most_s
        counters = self.counters
        while (now := time.monotonic()) < deadline:
            if not counters.in_flight and now - counters.last_request_s >= quiet_s:
                return
            time.sleep(min(0.05, quiet_s))

    def stop(self) -> None:
        """Stop both servers (the requests being answered end first), hand out the runs
        still open and close the file. Safe to call twice."""
        for server in (self._grpc, self._http):
            if server is not None:
                server.stop()
        self._grpc = self._http = None
        if self._live is not None:
            self._live.close()
            self._live = None
        if self._sink is not None:
            self._sink.close()

    def __enter__(self) -> Receiver:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
