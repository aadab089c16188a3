"""One agent run, traced by one peer (or by nothing), in a fresh process: its CPU per run.

``python agent_run.py PEER --url URL --runs 200`` prints one JSON object: the CPU time
(``time.process_time``: every thread of the process, the batch processor's export
too) of ``--runs`` agent runs after ``--warm-up`` runs, per run in milliseconds.

The run, with the real ``openai`` SDK against ``chainlat sim`` at zero latency
(``URL``, a simulator in a process of its own, not counted): a chat completion, a tool
(a function that builds its answer), a chat completion streamed and read to the end
(with ``stream_options={"include_usage": True}``), and a last chat completion. Every
peer's pipeline ends in a BatchSpanProcessor over an exporter that drops every batch.
Peers, each as its documentation sets it up for an agent:

* ``plain``: that pipeline, nothing instrumented (the baseline);
* ``chainlat``: ``chainlat.configure()`` and ``instrument_httpx()``; the run is a
  ``chainlat.workflow``, the tool a ``chainlat.tool`` step;
* ``chainlat-calls``: ``instrument_httpx()`` alone (no workflow, no tool step), to split
  chainlat's cost between its model calls and the run around them;
* ``openai-v2``: ``opentelemetry-instrumentation-openai-v2`` (``OpenAIInstrumentor``),
  which records the model calls (no run or tool span: it has none);
* ``traceloop``: OpenLLMetry's ``Traceloop.init()`` (its OpenAI instrumentation); the
  run a ``@workflow``, the tool a ``@tool``;
* ``logfire``: ``logfire.configure()`` sending nothing, ``logfire.instrument_openai()``;
  the run and the tool ``logfire.span``\\ s.

Self-contained (the standard library, OpenTelemetry and openai): it runs in each peer's
own environment, which need not have chainlat.
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

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

MODEL = "bench-zero"
MESSAGES = [{"role": "user", "content": "How long does my order take to arrive?"}]


class DroppingExporter(SpanExporter):
    """Accepts every batch and keeps nothing; counts the spans it was given."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


def lookup(order: str) -> str:
    """The tool: a little work of its own, the same in every variant."""
    return json.dumps({"order": order, "eta_days": len(order) % 5 + 1})


def _calls(client: Any) -> tuple[Callable[[], object], Callable[[], object]]:
    def chat() -> object:
        return client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=16)

    def streamed() -> object:
        stream = client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            max_tokens=16,
            stream=True,
            stream_options={"include_usage": True},
        )
        for _ in stream:
            pass
        return None

    return chat, streamed


Run = Callable[[], object]


def _client(url: str) -> Any:
    from openai import OpenAI

    return OpenAI(base_url=url + "/v1", api_key="sk-bench", max_retries=0)


def _bare_agent(url: str) -> Run:
    """The agent's run with no span of the application's own: two chat calls, the tool's
    body, one streamed call (what an instrumentation of the calls alone sees)."""
    chat, streamed = _calls(_client(url))

    def run() -> None:
        chat()
        lookup("A-1042")
        streamed()
        chat()

    return run


def setup_plain(url: str, exporter: DroppingExporter) -> tuple[Run, str]:
    from opentelemetry import trace

    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    run = _bare_agent(url)
    return run, "-"


def setup_chainlat(url: str, exporter: DroppingExporter) -> tuple[Run, str]:
    import chainlat

    chainlat.configure("bench", exporter=exporter, metric_readers=[])
    chainlat.instrument_httpx()
    chat, streamed = _calls(_client(url))

    def run() -> None:
        with chainlat.workflow("agent"):
            chat()
            with chainlat.tool("lookup"):
                lookup("A-1042")
            streamed()
            chat()

    return run, _version("chainlat")


def setup_chainlat_calls(url: str, exporter: DroppingExporter) -> tuple[Run, str]:
    """chainlat's model calls alone (``instrument_httpx()``, no workflow or tool step): with
    ``chainlat``, where its added CPU goes, the calls or the run around them."""
    import chainlat

    chainlat.configure("bench", exporter=exporter, metric_readers=[])
    chainlat.instrument_httpx()
    run = _bare_agent(url)
    return run, _version("chainlat")


def setup_openai_v2(url: str, exporter: DroppingExporter) -> tuple[Run, str]:
    from opentelemetry import trace
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    OpenAIInstrumentor().instrument(tracer_provider=provider)  # type: ignore[no-untyped-call]
    run = _bare_agent(url)
    return run, _version("opentelemetry-instrumentation-openai-v2")


def setup_traceloop(url: str, exporter: DroppingExporter) -> tuple[Run, str]:
    os.environ.setdefault("TRACELOOP_TELEMETRY", "false")
    from traceloop.sdk import Traceloop  # type: ignore[import-not-found]
    from traceloop.sdk.decorators import tool, workflow  # type: ignore[import-not-found]

    Traceloop.init(
        app_name="bench", exporter=exporter, disable_batch=False, telemetry_enabled=False
    )
    chat, streamed = _calls(_client(url))
    traced_lookup = tool(name="lookup")(lookup)

    @workflow(name="agent")  # type: ignore[untyped-decorator]
    def run() -> None:
        chat()
        traced_lookup("A-1042")
        streamed()
        chat()

    return run, _version("traceloop-sdk")


def setup_logfire(url: str, exporter: DroppingExporter) -> tuple[Run, str]:
    import logfire  # type: ignore[import-not-found]

    logfire.configure(
        send_to_logfire=False,
        console=False,
        service_name="bench",
        additional_span_processors=[BatchSpanProcessor(exporter)],
        inspect_arguments=False,
    )
    logfire.instrument_openai()
    chat, streamed = _calls(_client(url))

    def run() -> None:
        with logfire.span("agent"):
            chat()
            with logfire.span("tool lookup"):
                lookup("A-1042")
            streamed()
            chat()

    return run, _version("logfire")


PEERS: dict[str, Callable[[str, DroppingExporter], tuple[Run, str]]] = {
    "plain": setup_plain,
    "chainlat": setup_chainlat,
    "chainlat-calls": setup_chainlat_calls,
    "openai-v2": setup_openai_v2,
    "traceloop": setup_traceloop,
    "logfire": setup_logfire,
}


def _flush() -> None:
    from opentelemetry import trace

    flush = getattr(trace.get_tracer_provider(), "force_flush", None)
    if flush is not None:
        flush()


def _version(distribution: str) -> str:
    from importlib.metadata import version

    return version(distribution)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("peer", choices=sorted(PEERS))
    parser.add_argument("--url", required=True, help="the simulator's base URL")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--warm-up", type=int, default=20)
    parser.add_argument("--profile", help="write a cProfile of the measured runs here")
    args = parser.parse_args(argv)
    exporter = DroppingExporter()
    run, version = PEERS[args.peer](args.url, exporter)
    for _ in range(args.warm_up):  # lazy imports, connections, the first batches
        run()
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    per_run: list[float] = []
    start = time.process_time()
    for _ in range(args.runs):
        before = time.process_time()
        run()
        per_run.append(time.process_time() - before)
    _flush()  # the spans still queued are exported inside the measurement
    total = time.process_time() - start
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile)
    print(
        json.dumps(
            {
                "peer": args.peer,
                "version": version,
                "opentelemetry_sdk": _version("opentelemetry-sdk"),
                "openai": _version("openai"),
                "python": sys.version.split()[0],
                "runs": args.runs,
                "cpu_ms_per_run": total / args.runs * 1e3,
                "median_ms": statistics.median(per_run) * 1e3,
                "spans_per_run": exporter.spans / (args.runs + args.warm_up),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
