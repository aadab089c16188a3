"""One peer's step against a bare SDK span, in one process and one pipeline.

``python step.py PEER --rounds 7 --loops 2000`` prints one JSON object: the CPU time
per call (µs), in interleaved rounds, of

* the peer's step;
* a bare SDK span started from the tracer provider the peer set up (``bare``: the same
  processors and the same batch queue over an exporter that drops every batch);
* a bare SDK span on a plain OpenTelemetry pipeline in the same process (``plain``: a
  TracerProvider with one BatchSpanProcessor over the dropping exporter), what the step
  costs against not adopting the peer at all;

and the ratios per round, peer / bare and peer / plain.

Self-contained (the standard library and OpenTelemetry): it runs in each peer's own
environment, which need not have chainlat. Peers:

* ``chainlat``: ``with chainlat.inference("gpt-4o")`` on ``chainlat.configure()``'s pipeline.
* ``logfire``: ``with logfire.span("chat gpt-4o")``, ``logfire.configure()`` with nothing
  sent and the batch processor as an additional span processor.
* ``traceloop``: a function decorated with OpenLLMetry's ``@task``, ``Traceloop.init()``
  with the dropping exporter, batching on.
* ``util-genai``: ``opentelemetry-util-genai``'s ``TelemetryHandler.inference()``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind

STEP_ATTRIBUTES = {"app.operation": "chat", "app.model": "gpt-4o", "app.kind": "inference"}
"""As ``benchmarks/_pipeline.py``: a bare span with as many attributes as a model-call step."""


class DroppingExporter(SpanExporter):
    """Accepts every batch and keeps nothing; counts the spans it was given."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


Step = Callable[[], object]


def _bare(provider: Any) -> Step:
    tracer = provider.get_tracer("bench")

    def step() -> None:
        with tracer.start_as_current_span(
            "chat gpt-4o", kind=SpanKind.CLIENT, attributes=STEP_ATTRIBUTES
        ):
            pass

    return step


def setup_chainlat(exporter: DroppingExporter) -> tuple[Step, Step, str]:
    import chainlat

    provider = chainlat.configure("bench", exporter=exporter, set_global=False, metric_readers=[])

    def step() -> None:
        with chainlat.inference("gpt-4o", tracer_provider=provider):
            pass

    return step, _bare(provider), _version("chainlat")


def setup_logfire(exporter: DroppingExporter) -> tuple[Step, Step, str]:
    import logfire  # type: ignore[import-not-found]  # in its own environment

    logfire.configure(
        send_to_logfire=False,
        console=False,
        service_name="bench",
        additional_span_processors=[BatchSpanProcessor(exporter)],
        inspect_arguments=False,
    )

    def step() -> None:
        with logfire.span("chat gpt-4o"):
            pass

    return step, _bare(trace.get_tracer_provider()), _version("logfire")


def setup_traceloop(exporter: DroppingExporter) -> tuple[Step, Step, str]:
    os.environ.setdefault("TRACELOOP_TELEMETRY", "false")
    from traceloop.sdk import Traceloop  # type: ignore[import-not-found]
    from traceloop.sdk.decorators import task  # type: ignore[import-not-found]

    Traceloop.init(
        app_name="bench",
        exporter=exporter,
        disable_batch=False,
        telemetry_enabled=False,
    )

    @task(name="chat")  # type: ignore[untyped-decorator]
    def chat() -> None:
        pass

    return chat, _bare(trace.get_tracer_provider()), _version("traceloop-sdk")


def setup_util_genai(exporter: DroppingExporter) -> tuple[Step, Step, str]:
    from opentelemetry.util.genai.handler import TelemetryHandler

    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    handler = TelemetryHandler(tracer_provider=provider)

    def step() -> None:
        with handler.inference("openai", request_model="gpt-4o"):
            pass

    return step, _bare(provider), _version("opentelemetry-util-genai")


PEERS = {
    "chainlat": setup_chainlat,
    "logfire": setup_logfire,
    "traceloop": setup_traceloop,
    "util-genai": setup_util_genai,
}


def _version(distribution: str) -> str:
    from importlib.metadata import version

    return version(distribution)


def _cpu_per_call_us(body: Step, loops: int) -> float:
    start = time.process_time()
    for _ in range(loops):
        body()
    return (time.process_time() - start) / loops * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("peer", choices=sorted(PEERS))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--loops", type=int, default=2000)
    args = parser.parse_args(argv)
    exporter = DroppingExporter()
    plain_provider = TracerProvider(shutdown_on_exit=False)
    plain_provider.add_span_processor(BatchSpanProcessor(DroppingExporter()))
    peer, bare, version = PEERS[args.peer](exporter)
    plain = _bare(plain_provider)
    for body in (peer, bare, plain):  # warm-up
        _cpu_per_call_us(body, max(args.loops // 10, 1))
    rounds: list[dict[str, float]] = []
    variants = [("peer", peer), ("bare", bare), ("plain", plain)]
    for number in range(args.rounds):
        # Rotate which goes first, so that none always follows another's garbage.
        shift = number % len(variants)
        order = variants[shift:] + variants[:shift]
        found = {name: _cpu_per_call_us(body, args.loops) for name, body in order}
        found["ratio"] = found["peer"] / found["bare"]
        found["ratio_plain"] = found["peer"] / found["plain"]
        rounds.append(found)
    result = {
        "peer": args.peer,
        "version": version,
        "opentelemetry_sdk": _version("opentelemetry-sdk"),
        "python": sys.version.split()[0],
        "loops": args.loops,
        "rounds": rounds,
        "peer_us": statistics.median(r["peer"] for r in rounds),
        "bare_us": statistics.median(r["bare"] for r in rounds),
        "ratio": statistics.median(r["ratio"] for r in rounds),
        "plain_us": statistics.median(r["plain"] for r in rounds),
        "ratio_range": [min(r["ratio"] for r in rounds), max(r["ratio"] for r in rounds)],
        "ratio_plain": statistics.median(r["ratio_plain"] for r in rounds),
        "ratio_plain_range": [
            min(r["ratio_plain"] for r in rounds),
            max(r["ratio_plain"] for r in rounds),
        ],
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
