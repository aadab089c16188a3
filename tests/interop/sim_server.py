"""``chainlat sim`` for the matrix, with its server spans written to a file.

Run inside a stack's environment by ``run.py``: ``python sim_server.py --profiles FILE
--seed N --spans FILE``. It prints ``serving URL`` and serves until its standard input
closes. Each request's SERVER span (the sim's own processing of it: queue, prefill,
decode, the streamed chunks written) becomes one JSON line ``{"start_ns", "end_ns",
"model", "input_tokens", "output_tokens"}``: the model's time of every call, measured on
the server's side, and the tokens the sim counted, whether or not its response said them.
The judge compares a client's model-call spans with it (what the client does while a call
is open is the client's, not the model's), and a run's token totals.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind

from chainlat.sim import SimServer, load_profiles


class ServerSpans(SpanExporter):
    """Appends each SERVER span's interval, model and token counts to a JSON lines file."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "w")  # noqa: SIM115  # closed in shutdown
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = [
            json.dumps(
                {
                    "start_ns": s.start_time,
                    "end_ns": s.end_time,
                    "model": (s.attributes or {}).get("gen_ai.request.model"),
                    # What the sim counted, whether or not the response said it.
                    "input_tokens": (s.attributes or {}).get("gen_ai.usage.input_tokens"),
                    "output_tokens": (s.attributes or {}).get("gen_ai.usage.output_tokens"),
                }
            )
            for s in spans
            if s.kind == SpanKind.SERVER
        ]
        with self._lock:
            self._file.write("".join(line + "\n" for line in lines))
            self._file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            self._file.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until standard input closes; see the module docstring."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--profiles", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--spans", required=True)
    args = parser.parse_args(argv)
    provider = TracerProvider()
    # Batching: the export runs off the server's event loop.
    provider.add_span_processor(BatchSpanProcessor(ServerSpans(args.spans)))
    sim = SimServer(load_profiles(args.profiles), port=0, seed=args.seed, tracer_provider=provider)
    sim.start()
    print(f"serving {sim.base_url}", flush=True)
    sys.stdin.read()
    sim.stop()
    provider.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
