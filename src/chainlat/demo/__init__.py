"""``chainlat demo``: a small support agent, traced end to end on this machine.

Each request runs the workflow ``support-agent``: a data stage that searches a
SQLite full-text index of the shipped FAQ, a planning call to ``sim-large``, a
tool call that looks the order up in SQLite, and an answer streamed from
``sim-small``. The models are served by :mod:`chainlat.sim` on 127.0.0.1 and
called through the real ``openai`` SDK, traced automatically by
:func:`chainlat.instrument_httpx`. The batch runs twice: as built, and
with the small model swapped into the planning step, so the trade-off shows.

Traces go to ``chainlat-traces.jsonl`` (the embedded default), or over OTLP
when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set. Each run starts a fresh file: the one
an earlier run left is kept, renamed with the time it was last written
(``chainlat-traces.20261203T121500Z.jsonl``), so that ``chainlat check
chainlat-traces.jsonl`` judges this run's traces alone.
"""

from __future__ import annotations

import argparse
import asyncio
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import chainlat
from chainlat._core.error_lines import Parser
from chainlat._core.errors import InputError
from chainlat._core.exits import EXIT_CODES_HELP, EXIT_INPUT, EXIT_OK
from chainlat.demo.files import keep_previous as keep_previous
from chainlat.demo.files import print_destination as print_destination
from chainlat.demo.files import traces_path as traces_path
from chainlat.demo.store import Store as Store
from chainlat.demo.store import lookup_order as lookup_order
from chainlat.demo.store import open_store as open_store
from chainlat.demo.store import search as search

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from rich.console import Console

WORKFLOW = "support-agent"
LARGE = "sim-large"
SMALL = "sim-small"
PRICES: dict[str, dict[str, float]] = {
    # The simulator's own models, priced for the demo (US dollars per million tokens);
    # a real application passes its provider's current prices, never built-in ones.
    LARGE: {"input_per_mtok": 2.5, "output_per_mtok": 10.0},
    SMALL: {"input_per_mtok": 0.15, "output_per_mtok": 0.6},
}
_KIND_STYLE = {"inference": "magenta", "data": "cyan", "tool": "yellow", "workflow": "white"}


@dataclass(frozen=True)
class Run:
    """One finished workflow run of the demo."""

    variant: str
    trace_id: int
    rollup: chainlat.Rollup


async def answer(
    client: AsyncOpenAI,
    store: Store,
    question: str,
    planner: str,
    variant: str,
    rng: random.Random,
) -> Run | None:
    """One run of the support-agent workflow."""
    async with chainlat.workflow(WORKFLOW, variant=variant) as run:
        async with chainlat.data_stage("retrieve-docs", source="faq-fts5"):
            docs = search(store.db, question)
        context = "\n".join(docs)
        # Model calls are traced by chainlat.instrument_httpx(): each becomes a
        # `chat {model}` inference span with usage, TTFT and the latency breakdown;
        # chainlat.step_name names them, so the planner and the answer stay two steps
        # when both run on the same model.
        async with chainlat.step_name("plan"):
            plan = await client.chat.completions.create(
                model=planner,
                messages=[
                    {"role": "system", "content": "Plan the answer; name the tools to call."},
                    {"role": "user", "content": f"{question}\n\nContext:\n{context}"},
                ],
                max_tokens=48,
            )
        async with chainlat.tool("order-status"):
            status = lookup_order(store.db, question)
            # The order system is a remote API in production; its latency is
            # simulated here (20-45 ms), the lookup itself is a real query.
            await asyncio.sleep(rng.uniform(0.020, 0.045))
        # The answer streams: its first token is the run's first output (the user
        # starts reading), chainlat.chain.first_output_ms on the workflow span.
        async with chainlat.step_name("answer"):
            stream = await client.chat.completions.create(
                model=SMALL,
                messages=[
                    {"role": "system", "content": "Answer briefly from the plan and the facts."},
                    {
                        "role": "user",
                        "content": f"{question}\n{status}\n{plan.choices[0].message.content}",
                    },
                ],
                max_tokens=40,
                stream=True,
                stream_options={"include_usage": True},
            )
            async for _chunk in stream:
                pass  # a real app would forward each chunk to the user here
    if run.rollup is None:
        return None
    return Run(variant, run.span.get_span_context().trace_id, run.rollup)


async def run_batches(
    base_url: str,
    store: Store,
    *,
    requests: int,
    concurrency: int,
    variants: tuple[tuple[str, str], ...],
    seed: int,
) -> dict[str, list[Run]]:
    """``requests`` runs of the workflow per ``(variant, planner)``, ``concurrency`` at a time.

    The variants take turns run by run (large, small, large, ...), so a burst of load on
    a shared machine lands on both alike: recorded one batch after the other, a burst
    during one batch moved that variant's runs only, and the comparison of the two (and
    the what-if estimate checked against it) measured the machine, not the model swap.
    """
    from openai import AsyncOpenAI

    questions = store.questions
    rngs = {variant: random.Random(seed) for variant, _ in variants}
    gate = asyncio.Semaphore(concurrency)
    async with AsyncOpenAI(base_url=base_url + "/v1", api_key="sk-demo", max_retries=0) as client:

        async def one(i: int, variant: str, planner: str) -> Run | None:
            async with gate:
                question = questions[i % len(questions)]
                return await answer(client, store, question, planner, variant, rngs[variant])

        jobs = [(i, v, p) for i in range(requests) for v, p in variants]
        done = await asyncio.gather(*(one(*job) for job in jobs))
    return {
        variant: [r for r in done if r is not None and r.variant == variant]
        for variant, _ in variants
    }


async def warm_up(base_url: str) -> None:
    """One call outside any workflow before the batches.

    The SDK's first request in a process pays for lazy imports and setup (about
    200 ms here); without this the first runs of the first batch carry it, and
    the comparison of the two variants (and the what-if made from the first)
    would be skewed by a cold start.
    """
    from openai import AsyncOpenAI

    async with AsyncOpenAI(base_url=base_url + "/v1", api_key="sk-demo", max_retries=0) as client:
        await client.chat.completions.create(
            model=SMALL, messages=[{"role": "user", "content": "warm up"}], max_tokens=1
        )


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def waterfall(console: Console, spans: list[ReadableSpan], width: int = 28) -> None:
    """One bar per step, positioned on the workflow's timeline and coloured by kind."""
    from rich.table import Table
    from rich.text import Text

    root = next(s for s in spans if s.parent is None)
    start, end = root.start_time or 0, root.end_time or 0
    total = max(end - start, 1)
    table = Table(box=None, show_header=True, header_style="bold")
    table.add_column("step", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("timeline", no_wrap=True, min_width=width)
    table.add_column("ms", justify="right", no_wrap=True)
    for span in sorted(spans, key=lambda s: (s.start_time or 0, s.parent is not None)):
        kind = str((span.attributes or {}).get("chainlat.step.kind", ""))
        s, e = (span.start_time or 0) - start, (span.end_time or 0) - start
        left = round(s / total * width)
        length = max(1, round((e - s) / total * width))
        bar = Text(" " * left) + Text("█" * length, style=_KIND_STYLE.get(kind, "white"))
        table.add_row(span.name, kind, bar, f"{(e - s) / 1e6:.1f}")
    console.print(table)


def summary(console: Console, runs: list[Run], spans: list[ReadableSpan]) -> None:
    """Per-step p50/p95 and the chain rollup of a batch."""
    from rich.table import Table

    trace_ids = {r.trace_id for r in runs}
    steps: dict[str, list[float]] = {}
    for span in spans:
        if span.parent is None or span.context is None or span.context.trace_id not in trace_ids:
            continue
        ms = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
        step_name = (span.attributes or {}).get("chainlat.step.name")
        label = f"{step_name} ({span.name})" if isinstance(step_name, str) else span.name
        steps.setdefault(label, []).append(ms)
    table = Table(title="per step (ms)", title_justify="left")
    for column in ("step", "runs", "p50", "p95"):
        table.add_column(column, justify="left" if column == "step" else "right")
    for name, values in steps.items():
        p50, p95 = percentile(values, 50), percentile(values, 95)
        table.add_row(name, str(len(values)), f"{p50:.1f}", f"{p95:.1f}")
    console.print(table)

    chain = Table(title="chain rollup (ms; critical-path split)", title_justify="left")
    for column in ("", "p50", "p95", "share of p50 total"):
        chain.add_column(column, justify="left" if not column else "right")
    p50_total = percentile([r.rollup.total_ms for r in runs], 50)
    for kind in ("total", "inference", "data", "tool", "overhead"):
        values = [r.rollup.kind_ms(kind) for r in runs]
        p50 = percentile(values, 50)
        chain.add_row(kind, f"{p50:.1f}", f"{percentile(values, 95):.1f}", f"{p50 / p50_total:.0%}")
    waits = [r.rollup.first_output_ms for r in runs if r.rollup.first_output_ms is not None]
    if waits:
        p50 = percentile(waits, 50)
        chain.add_row(
            "first output", f"{p50:.1f}", f"{percentile(waits, 95):.1f}", f"{p50 / p50_total:.0%}"
        )
    console.print(chain)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    """The demo's arguments, checked; ``--requests`` defaults by mode."""
    parser = Parser(
        prog="chainlat demo", description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP
    )
    parser.add_argument(
        "--requests", type=int, help="runs per variant (default 24; 8 turns with --voice)"
    )
    parser.add_argument("--concurrency", type=int, default=4, help="runs at once (default 4)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the model simulator")
    parser.add_argument(
        "--traces-file",
        help="where to write traces (default chainlat-traces.jsonl, chainlat-voice-traces.jsonl "
        "with --voice; a file left by an earlier run is kept under a name with its time)",
    )
    parser.add_argument(
        "--budgets",
        metavar="FILE",
        help="a budget file to judge every run against as it ends (configure(budgets=...)): "
        "a run over a per-run limit is marked chainlat.budget.ok=false",
    )
    parser.add_argument(
        "--voice", action="store_true", help="a cascade voice agent instead (docs/voice.md)"
    )
    parser.add_argument(
        "--realtime",
        action="store_true",
        help="with --voice: the same turns spoken to a realtime (speech-to-speech) model too, "
        "side by side (needs chainlat[realtime])",
    )
    args = parser.parse_args(argv)
    if args.realtime and not args.voice:
        raise InputError("--realtime goes with --voice: chainlat demo --voice --realtime")
    if args.requests is None:
        args.requests = 8 if args.voice else 24
    if args.requests < 1 or args.concurrency < 1:
        raise InputError("--requests and --concurrency must be at least 1")
    try:
        import openai  # noqa: F401
    except ImportError as exc:
        raise InputError("the demo needs the openai SDK: pip install 'chainlat[demo]'") from exc
    if args.realtime:
        try:
            import websockets  # noqa: F401
        except ImportError as exc:
            raise InputError(
                "--realtime needs websockets: pip install 'chainlat[realtime]'"
            ) from exc
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit code.

    Example::

        from chainlat.demo import main
        main(["--requests", "8"])
    """
    args = _arguments(argv)
    if args.voice:
        from chainlat.demo.voice import voice_main

        return voice_main(args)

    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from rich.console import Console

    from chainlat.httpx import instrument_httpx, uninstrument_httpx
    from chainlat.sim import SimServer

    console = Console()
    destination = traces_path(args.traces_file)
    kept = keep_previous(destination) if destination is not None else None
    if kept is not None:
        console.print(f"the previous traces are kept in [bold]{kept}[/]", soft_wrap=True)
    provider: TracerProvider = chainlat.configure(
        "chainlat-demo", traces_file=args.traces_file, prices=PRICES, budgets=args.budgets
    )
    seen = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(seen))
    instrument_httpx()
    store = open_store()
    with SimServer(seed=args.seed) as sim:
        console.print(
            f"[bold]chainlat demo[/]: {args.requests} runs of [bold]{WORKFLOW}[/] per variant, "
            f"{args.concurrency} at a time; models simulated at {sim.base_url}"
        )
        asyncio.run(warm_up(sim.base_url))
        batches = asyncio.run(
            run_batches(
                sim.base_url,
                store,
                requests=args.requests,
                concurrency=args.concurrency,
                variants=(("large-planner", LARGE), ("small-planner", SMALL)),
                seed=args.seed,
            )
        )
    spans = list(seen.get_finished_spans())
    baseline = batches["large-planner"]
    if not baseline:
        console.print("[red]no workflow finished[/]")
        return EXIT_INPUT
    median = sorted(baseline, key=lambda r: r.rollup.total_ms)[len(baseline) // 2]
    console.rule(f"median run of {WORKFLOW} (large planner): {median.rollup.total_ms:.0f} ms")
    waterfall(
        console,
        [s for s in spans if s.context is not None and s.context.trace_id == median.trace_id],
    )
    summary(console, baseline, spans)

    console.rule("trade-off: the small model in the planning step")
    table = _tradeoff_table(batches)
    console.print(table)
    from chainlat.demo.tradeoff import tradeoff_section

    tradeoff_section(console, list(seen.get_finished_spans()), provider=provider, seed=args.seed)
    uninstrument_httpx()
    chainlat.shutdown()
    print_destination(console, args.traces_file)
    return EXIT_OK


def _tradeoff_table(batches: dict[str, list[Run]]) -> Any:
    from rich.table import Table

    table = Table()
    for column in ("variant", "runs", "p50 total", "p95 total", "p50 inference", "p50 overhead"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for variant, runs in batches.items():
        if not runs:
            continue
        totals = [r.rollup.total_ms for r in runs]
        table.add_row(
            variant,
            str(len(runs)),
            f"{percentile(totals, 50):.0f} ms",
            f"{percentile(totals, 95):.0f} ms",
            f"{percentile([r.rollup.inference_ms for r in runs], 50):.0f} ms",
            f"{percentile([r.rollup.overhead_ms for r in runs], 50):.0f} ms",
        )
    return table
