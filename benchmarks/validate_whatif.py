"""How far ``chainlat whatif --swap`` is from the truth, on workloads of several shapes.

Usage::

    python benchmarks/validate_whatif.py                # every shape, seeds 1-3, 30 runs each
    python benchmarks/validate_whatif.py --quick        # every shape, one seed, 12 runs each
    python benchmarks/validate_whatif.py --shapes parallel,mixed --seeds 4 --runs 30
    python benchmarks/validate_whatif.py --estimate-only   # the kept trace files again
    python benchmarks/validate_whatif.py --synthetic model   # no simulator: seconds, exact
    python benchmarks/validate_whatif.py --synthetic client  # plus the client's costs

The recorded run takes about 10 minutes on a busy 2-core machine (``--quick``
about 2); ``--synthetic`` about 20 s (see :func:`synthetic_runs`).

For every shape and seed, the workflow runs against ``chainlat sim`` (in its own
process, seeded), traced by :func:`chainlat.instrument_httpx` through the real
``openai`` SDK, into one trace file: variant ``A`` with the swapped step on
``sim-large``, then variant ``B`` with it on ``sim-small``, then ``B`` again as
variant ``B2``, all with the same prompts (the same sizes, drawn from the
seed). The what-if estimates B from A's runs alone
(``whatif(load_runs([file]), workflow=shape, variant="A", swap={"chat sim-large": "sim-small"})``)
and its p50 and p95 are compared with B's measured runs. ``B2`` against ``B`` is
the control: the error a perfect estimate would show, from measuring two
batches of the same variant (sampling and the machine's drift). Two sources of
profiles:

* ``own``: fitted from A's runs only (what ``chainlat whatif --variant A`` does):
  sim-small is known from the steps that use it in A, at their sizes and modes.
* ``file``: fitted from the whole file (``chainlat profile FILE -o p.toml``, then
  ``--profiles p.toml``): sim-small is also known from B's swapped calls.

Every run's trace file is kept (``--out``, default ``benchmarks/out/whatif``), so
one row is reproduced by the CLI, e.g.::

    chainlat whatif benchmarks/out/whatif/parallel-1.jsonl --variant A \\
        --swap "chat sim-large=sim-small"

The simulator's jitter is seeded; the machine's load is not, so figures move by
a few per cent from one run of the script to the next. Results are printed as a
Markdown table and written to ``benchmarks/out/whatif/results.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import random
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import chainlat
from chainlat._core.rollup import SpanRecord
from chainlat._core.runs import TracedSpan, WorkflowRun
from chainlat._core.stats import percentile
from chainlat.analysis.profiles import LatencyProfile, fit_profiles
from chainlat.sim import ModelProfile
from chainlat.traces import load_runs

if TYPE_CHECKING:
    from openai import AsyncOpenAI

HERE = Path(__file__).resolve().parent
LARGE, SMALL = "sim-large", "sim-small"
SWAPPED_STEP = f"chat {LARGE}"

# The simulator's defaults, with long answers allowed (max_tokens sets each call's length)
# and a small model twice as variable as the large one: its noise is its own.
PROFILES = (
    ModelProfile(
        LARGE,
        ttft_base_ms=350.0,
        ttft_per_input_token_ms=0.25,
        decode_ms_per_token=10.0,
        output_tokens=400,
        slots=4,
        jitter=0.1,
    ),
    ModelProfile(
        SMALL,
        ttft_base_ms=90.0,
        ttft_per_input_token_ms=0.1,
        decode_ms_per_token=3.5,
        output_tokens=400,
        slots=16,
        jitter=0.2,
    ),
)


@dataclass(frozen=True)
class Call:
    """One model call of a run: its prompt size, answer length and mode."""

    input_tokens: int
    max_tokens: int
    stream: bool


@dataclass(frozen=True)
class Shape:
    """A workload: how one run is built, and how many run at once."""

    name: str
    description: str
    concurrency: int
    plan: Callable[[random.Random, int], dict[str, Call]]
    """The calls of run i: ``swapped`` (the step swapped), ``other`` and ``final`` (sim-small)."""
    body: str
    """``sequential``, ``parallel`` or ``both`` (parallel, both on the swapped model): how
    the calls are arranged."""


def _tokens(rng: random.Random, low: int, high: int) -> int:
    return rng.randint(low, high)


def _plan_sequential(rng: random.Random, i: int) -> dict[str, Call]:
    return {
        "swapped": Call(_tokens(rng, 40, 400), rng.randint(10, 60), stream=False),
        "final": Call(_tokens(rng, 40, 400), rng.randint(10, 60), stream=True),
    }


def _plan_parallel(rng: random.Random, i: int) -> dict[str, Call]:
    return {
        "swapped": Call(_tokens(rng, 40, 400), rng.randint(10, 60), stream=False),
        "other": Call(_tokens(rng, 40, 400), rng.randint(10, 60), stream=True),
    }


def _plan_streamed(rng: random.Random, i: int) -> dict[str, Call]:
    return {
        "swapped": Call(_tokens(rng, 40, 400), rng.randint(10, 60), stream=True),
        "other": Call(_tokens(rng, 40, 400), rng.randint(10, 60), stream=False),
    }


def _plan_mixed(rng: random.Random, i: int) -> dict[str, Call]:
    return {
        "swapped": Call(_tokens(rng, 40, 400), rng.randint(10, 60), stream=i % 2 == 0),
        "other": Call(_tokens(rng, 40, 400), rng.randint(10, 60), stream=i % 2 == 1),
    }


def _plan_long(rng: random.Random, i: int) -> dict[str, Call]:
    return {
        "swapped": Call(_tokens(rng, 40, 400), rng.randint(5, 200), stream=False),
        "final": Call(_tokens(rng, 40, 400), rng.randint(5, 200), stream=True),
    }


def _plan_varied(rng: random.Random, i: int) -> dict[str, Call]:
    # The swapped call's prompts range ten times wider than the sim-small calls beside it,
    # the only ones A shows of sim-small (and streamed): its estimate extrapolates both.
    return {
        "swapped": Call(_tokens(rng, 40, 4000), rng.randint(10, 60), stream=False),
        "other": Call(_tokens(rng, 40, 400), rng.randint(10, 60), stream=True),
    }


def _plan_one_model(rng: random.Random, i: int) -> dict[str, Call]:
    # Both calls on the swapped model: A never calls sim-small, so its profile (and
    # noise) can only come from the other variant's runs (``file``).
    return {
        "swapped": Call(_tokens(rng, 40, 400), rng.randint(10, 60), stream=False),
        "also": Call(_tokens(rng, 40, 400), rng.randint(10, 60), stream=True),
    }


SHAPES = {
    shape.name: shape
    for shape in (
        Shape(
            "sequential",
            "data, swapped call (not streamed), tool, answer streamed by sim-small",
            4,
            _plan_sequential,
            "sequential",
        ),
        Shape(
            "parallel",
            "swapped call (not streamed) in parallel with a streamed sim-small call, then a tool",
            4,
            _plan_parallel,
            "parallel",
        ),
        Shape(
            "streamed",
            "swapped call streamed, in parallel with a sim-small call not streamed",
            4,
            _plan_streamed,
            "parallel",
        ),
        Shape(
            "mixed",
            "parallel; each call streamed in every other run",
            4,
            _plan_mixed,
            "parallel",
        ),
        Shape(
            "long-answers",
            "sequential; answers of 5-200 tokens",
            4,
            _plan_long,
            "sequential",
        ),
        Shape(
            "varied",
            "parallel; the swapped call's prompts 40-4000 tokens, the streamed sim-small "
            "call's 40-400",
            4,
            _plan_varied,
            "parallel",
        ),
        Shape(
            "one-model",
            "two calls of the swapped model in parallel, one streamed, one not, then a tool; "
            "2 runs at once (sim-large's 4 slots: no queue)",
            2,
            _plan_one_model,
            "both",
        ),
        Shape(
            "concurrent",
            "parallel, 8 runs at once (sim-large has 4 slots: A's calls queue)",
            8,
            _plan_parallel,
            "parallel",
        ),
    )
}


def _prompt(tokens: int) -> str:
    # The simulator counts ceil(characters / 4) over the messages' text.
    return "abc " * tokens


async def _model(client: AsyncOpenAI, model: str, call: Call) -> None:
    messages: Any = [{"role": "user", "content": _prompt(call.input_tokens)}]
    if call.stream:
        stream = await client.chat.completions.create(
            model=model,
            messages=messages,
            max_tokens=call.max_tokens,
            stream=True,
            stream_options={"include_usage": True},
        )
        async for _chunk in stream:
            pass
    else:
        await client.chat.completions.create(
            model=model, messages=messages, max_tokens=call.max_tokens
        )


async def _one_run(
    client: AsyncOpenAI,
    shape: Shape,
    calls: dict[str, Call],
    pause_ms: tuple[float, float],
    swapped_model: str,
    variant: str,
) -> None:
    async with chainlat.workflow(shape.name, variant=variant):
        if shape.body == "sequential":
            async with chainlat.data_stage("retrieve"):
                await asyncio.sleep(pause_ms[0] / 1000)
            await _model(client, swapped_model, calls["swapped"])
            async with chainlat.tool("lookup"):
                await asyncio.sleep(pause_ms[1] / 1000)
            await _model(client, SMALL, calls["final"])
        else:
            second = (
                (swapped_model, calls["also"]) if shape.body == "both" else (SMALL, calls["other"])
            )
            await asyncio.gather(
                _model(client, swapped_model, calls["swapped"]), _model(client, *second)
            )
            async with chainlat.tool("lookup"):
                await asyncio.sleep(pause_ms[1] / 1000)


VARIANTS = (("A", LARGE), ("B", SMALL), ("B2", SMALL))
"""Variant label and the swapped step's model; B2 measures B again (the control)."""


async def _batches(base_url: str, shape: Shape, runs: int, seed: int) -> None:
    """Every variant's runs, in rounds: one round of each variant, in turn.

    Rounds of ``concurrency`` runs, variant after variant, so that the machine's
    drift (other work on it) falls on every variant alike rather than on one batch.
    """
    from openai import AsyncOpenAI

    # The same draws for every variant: the same prompts, answers and pauses.
    rng = random.Random(f"{shape.name}:{seed}")
    plans = [(shape.plan(rng, i), (rng.uniform(5, 30), rng.uniform(20, 45))) for i in range(runs)]
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                AsyncOpenAI(base_url=base_url + "/v1", api_key="sk-sim", max_retries=0)
            )
            for _ in VARIANTS
        ]
        # A client's first requests pay for lazy imports and new connections: outside any run.
        warm = Call(input_tokens=8, max_tokens=1, stream=False)
        for client in clients:
            for _ in range(2):
                await asyncio.gather(*(_model(client, m, warm) for m in (LARGE, SMALL, SMALL)))
        for first in range(0, runs, shape.concurrency):
            for client, (variant, model) in zip(clients, VARIANTS, strict=True):
                await asyncio.gather(
                    *(
                        _one_run(client, shape, *plans[i], model, variant)
                        for i in range(first, min(first + shape.concurrency, runs))
                    )
                )


def _run_async(coroutine: Awaitable[None]) -> None:
    async def wrapper() -> None:
        await coroutine

    asyncio.run(wrapper())


@contextlib.contextmanager
def simulator(seed: int, out: Path) -> Iterator[str]:
    """``chainlat sim`` in a process of its own (no GIL shared with the client); its URL."""
    profiles = out / "sim-profiles.toml"
    lines = []
    for p in PROFILES:
        lines.append(f'[models."{p.name}"]')
        for key in ("ttft_base_ms", "ttft_per_input_token_ms", "decode_ms_per_token"):
            lines.append(f"{key} = {getattr(p, key)!r}")
        lines.append(f"output_tokens = {p.output_tokens}\nslots = {p.slots}\njitter = {p.jitter}")
    profiles.write_text("\n".join(lines) + "\n")
    command = [sys.executable, "-m", "chainlat.cli", "sim", "--port", "0", "--seed", str(seed)]
    process = subprocess.Popen(
        [*command, "--profiles", str(profiles)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        found = re.search(r"serving (http://\S+)", first)
        if found is None:
            raise RuntimeError(f"chainlat sim did not start: {first!r}")
        yield found[1]
    finally:
        process.terminate()
        process.wait(timeout=10)


@dataclass
class Row:
    shape: str
    seed: int
    profiles: str
    runs: int
    p50_estimated: float
    p50_measured: float
    p95_estimated: float
    p95_measured: float
    p50_control: float
    p95_control: float
    """B2's percentiles: a second measured batch of B."""

    @property
    def p50_error(self) -> float:
        return self.p50_estimated / self.p50_measured - 1

    @property
    def p95_error(self) -> float:
        return self.p95_estimated / self.p95_measured - 1

    @property
    def p50_control_error(self) -> float:
        return self.p50_control / self.p50_measured - 1

    @property
    def p95_control_error(self) -> float:
        return self.p95_control / self.p95_measured - 1


def record(shape: Shape, seed: int, runs: int, out: Path) -> Path:
    """Run both variants of a shape against a fresh simulator; returns the trace file."""
    from chainlat.httpx import instrument_httpx, uninstrument_httpx

    path = out / f"{shape.name}-{seed}.jsonl"
    path.unlink(missing_ok=True)
    provider = chainlat.configure("whatif-validation", traces_file=path)
    instrument_httpx(tracer_provider=provider)
    try:
        with simulator(seed, out) as base_url:
            _run_async(_batches(base_url, shape, runs, seed))
    finally:
        uninstrument_httpx()
        chainlat.shutdown()
    return path


def estimate(shape: Shape, seed: int, runs: list[WorkflowRun]) -> list[Row]:
    """The what-if's p50 and p95 for B, from A's runs, against B's measured runs."""
    runs = [r for r in runs if r.workflow == shape.name and not r.nested]
    measured = sorted(r.recomputed_rollup().total_ms for r in runs if r.variant_label == "B")
    control = sorted(r.recomputed_rollup().total_ms for r in runs if r.variant_label == "B2")
    runs = [r for r in runs if r.variant_label != "B2"]
    rows = []
    sources: list[tuple[str, dict[str, LatencyProfile] | None]] = [
        ("own", None),
        ("file", fit_profiles(runs)),
    ]
    if shape.body == "both":  # A's runs never call sim-small: only the file knows it
        sources = sources[1:]
    for label, profiles in sources:
        result = chainlat.whatif(
            runs,
            workflow=shape.name,
            variant="A",
            swap={SWAPPED_STEP: SMALL},
            profiles=profiles,
        )
        estimated = sorted(e.after.total_ms for e in result.runs)
        rows.append(
            Row(
                shape.name,
                seed,
                label,
                len(estimated),
                percentile(estimated, 50),
                percentile(measured, 50),
                percentile(estimated, 95),
                percentile(measured, 95),
                percentile(control, 50),
                percentile(control, 95),
            )
        )
    return rows


# -- synthetic runs: the method alone, without the machine ----------------------------------

_T0 = 1_700_000_000_000_000_000
_NS_PER_MS = 1_000_000
CLIENT_MS = 30.0
"""Environment ``client``: mean of an exponential per-call cost outside the model."""
STREAM_MS_PER_TOKEN, STREAM_TAIL_MS = 0.7, 15.0
"""Environment ``client``: what a streamed call costs more than one not streamed, per output
token and once (about what the streamed sim-small calls of the recorded traces show)."""


class _Builder:
    """The spans of one synthetic run, timed by the simulator's latency model."""

    def __init__(self, rng: random.Random, environment: str) -> None:
        self.rng, self.environment = rng, environment
        self.spans: list[TracedSpan] = []

    def step(self, name: str, kind: str, start_ms: float, end_ms: float) -> float:
        record = SpanRecord(
            len(self.spans) + 2,
            1,
            name,
            _T0 + round(start_ms * _NS_PER_MS),
            _T0 + round(end_ms * _NS_PER_MS),
            kind,  # type: ignore[arg-type]
        )
        self.spans.append(TracedSpan(record, {"chainlat.step.kind": kind}))
        return end_ms

    def model(self, model: str, call: Call, start_ms: float) -> float:
        profile = next(p for p in PROFILES if p.name == model)
        x, y, rng = call.input_tokens, call.max_tokens, self.rng
        prefill = profile.ttft_ms(x) * math.exp(rng.gauss(0, profile.jitter))
        decode = profile.decode_ms_per_token * (y - 1) * math.exp(rng.gauss(0, profile.jitter))
        generation = decode  # a stream's first chunk to its last, as the client reads them
        if self.environment == "client":
            prefill += rng.expovariate(1 / CLIENT_MS)
            if call.stream:
                # Reading each chunk paces the stream; its tail comes after the last chunk.
                generation += STREAM_MS_PER_TOKEN * (y - 1)
                decode = generation + STREAM_TAIL_MS
        end_ms = start_ms + prefill + decode
        attributes: dict[str, Any] = {
            "chainlat.step.kind": "inference",
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.usage.input_tokens": x,
            "gen_ai.usage.output_tokens": y,
        }
        if call.stream:
            attributes["chainlat.latency.ttft_ms"] = prefill
            attributes["chainlat.latency.generation_ms"] = generation
        record = SpanRecord(
            len(self.spans) + 2,
            1,
            f"chat {model}",
            _T0 + round(start_ms * _NS_PER_MS),
            _T0 + round(end_ms * _NS_PER_MS),
            "inference",
            input_tokens=x,
            output_tokens=y,
            ttft_ms=prefill if call.stream else None,
        )
        self.spans.append(TracedSpan(record, attributes))
        return end_ms


def synthetic_runs(shape: Shape, seed: int, runs: int, environment: str) -> list[WorkflowRun]:
    """A, B and B2 runs of a shape built from the simulator's latency model, without time.

    The same plans as the recorded workloads; each call's prefill and decode drawn
    with the profile's log-normal jitter, as the simulator does, plus the costs of
    the ``client`` environment (none for ``model``). Runs do not queue for slots.
    """
    rng = random.Random(f"{shape.name}:{seed}")
    plans = [(shape.plan(rng, i), (rng.uniform(5, 30), rng.uniform(20, 45))) for i in range(runs)]
    noise = random.Random(f"noise:{shape.name}:{seed}:{environment}")
    out = []
    for variant, model in VARIANTS:
        for i, (calls, (pause, tool_ms)) in enumerate(plans):
            run = _Builder(noise, environment)
            if shape.body == "sequential":
                t = run.step("data retrieve", "data", 1, 1 + pause) + 1
                t = run.model(model, calls["swapped"], t) + 1
                t = run.step("execute_tool lookup", "tool", t, t + tool_ms) + 1
                t = run.model(SMALL, calls["final"], t) + 1
            else:
                second = (model, calls["also"]) if shape.body == "both" else (SMALL, calls["other"])
                t = max(run.model(model, calls["swapped"], 1), run.model(*second, 1))
                t = run.step("execute_tool lookup", "tool", t + 1, t + 1 + tool_ms) + 1
            root = TracedSpan(
                SpanRecord(1, None, f"invoke_workflow {shape.name}", _T0,
                           _T0 + round(t * _NS_PER_MS), "workflow"),
                {"chainlat.step.kind": "workflow", "gen_ai.workflow.name": shape.name},
            )  # fmt: skip
            out.append(
                WorkflowRun.from_spans(
                    shape.name, root, run.spans, trace_id=f"{variant}-{i}", variant=variant
                )
            )
    return out


def table(rows: list[Row]) -> str:
    lines = [
        "| shape | seed | profiles | p50 est. | p50 meas. | p50 error | p50 control "
        "| p95 est. | p95 meas. | p95 error | p95 control |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.shape} | {r.seed} | {r.profiles} | {r.p50_estimated:.0f} | "
            f"{r.p50_measured:.0f} | {r.p50_error:+.1%} | {r.p50_control_error:+.1%} | "
            f"{r.p95_estimated:.0f} | {r.p95_measured:.0f} | {r.p95_error:+.1%} | "
            f"{r.p95_control_error:+.1%} |"
        )
    return "\n".join(lines)


def _mean_worst(values: list[float]) -> str:
    return f"{statistics.fmean(values):+.1%} / {max(values, key=abs):+.1%}"


def summary(rows: list[Row]) -> str:
    """Per shape and profile source: mean and worst error over the seeds, and the control's."""
    lines = [
        "| shape | profiles | seeds | p50 error, mean / worst | p95 error, mean / worst "
        "| control p50, mean / worst | control p95, mean / worst |",
        "|---|---|---|---|---|---|---|",
    ]
    keys = dict.fromkeys((r.shape, r.profiles) for r in rows)
    for shape, profiles in keys:
        group = [r for r in rows if r.shape == shape and r.profiles == profiles]
        lines.append(
            f"| {shape} | {profiles} | {len(group)} | "
            f"{_mean_worst([r.p50_error for r in group])} | "
            f"{_mean_worst([r.p95_error for r in group])} | "
            f"{_mean_worst([r.p50_control_error for r in group])} | "
            f"{_mean_worst([r.p95_control_error for r in group])} |"
        )
    for profiles in dict.fromkeys(r.profiles for r in rows):
        group = [r for r in rows if r.profiles == profiles]
        mae = [statistics.fmean(abs(getattr(r, k)) for r in group) for k in _ERRORS]
        lines.append(
            f"| all (mean absolute) | {profiles} | {len(group)} | {mae[0]:.1%} | {mae[1]:.1%} "
            f"| {mae[2]:.1%} | {mae[3]:.1%} |"
        )
    return "\n".join(lines)


_ERRORS = ("p50_error", "p95_error", "p50_control_error", "p95_control_error")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="one seed, 12 runs per variant")
    parser.add_argument("--shapes", help=f"comma-separated, of: {', '.join(SHAPES)}")
    parser.add_argument("--seeds", help="comma-separated simulator seeds (default 1,2,3)")
    parser.add_argument("--runs", type=int, help="runs per variant (default 30)")
    parser.add_argument(
        "--estimate-only",
        action="store_true",
        help="re-estimate the trace files already in --out, without running the workloads",
    )
    parser.add_argument(
        "--synthetic",
        choices=("model", "client"),
        help="no simulator: runs built from its latency model (seeds 1-20 by default), with "
        "model noise only, or with the client's costs too; deterministic, in seconds",
    )
    parser.add_argument("--out", type=Path, default=HERE / "out" / "whatif")
    args = parser.parse_args(argv)
    names = args.shapes.split(",") if args.shapes else list(SHAPES)
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        parser.error(f"unknown shape(s): {', '.join(unknown)}")
    seeds = (
        [int(s) for s in args.seeds.split(",")]
        if args.seeds
        else ([1] if args.quick else list(range(1, 21)) if args.synthetic else [1, 2, 3])
    )
    runs = args.runs or (12 if args.quick else 30)
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    started = time.perf_counter()
    if args.synthetic:  # no slots to queue for: "concurrent" is "parallel" again
        names = [n for n in names if n != "concurrent"]
    for name in names:
        for seed in seeds:
            shape = SHAPES[name]
            if args.synthetic:
                found = estimate(shape, seed, synthetic_runs(shape, seed, runs, args.synthetic))
            else:
                path = args.out / f"{name}-{seed}.jsonl"
                if not args.estimate_only:
                    record(shape, seed, runs, args.out)
                found = estimate(shape, seed, load_runs([path]))
            rows.extend(found)
            for row in found:
                print(
                    f"{name:<13} seed {seed} {row.profiles:<4}  p50 {row.p50_estimated:6.0f} "
                    f"vs {row.p50_measured:6.0f} ({row.p50_error:+6.1%}, control "
                    f"{row.p50_control_error:+6.1%})   p95 {row.p95_estimated:6.0f} vs "
                    f"{row.p95_measured:6.0f} ({row.p95_error:+6.1%}, control "
                    f"{row.p95_control_error:+6.1%})",
                    flush=True,
                )
    elapsed = time.perf_counter() - started
    print()
    print(table(rows))
    print()
    print(summary(rows))
    print(f"\n{len(names)} shapes x {len(seeds)} seeds x {runs} runs per variant, {elapsed:.0f} s")
    results = f"results-{args.synthetic}.json" if args.synthetic else "results.json"
    (args.out / results).write_text(
        json.dumps(
            [asdict(r) | {k: getattr(r, k) for k in _ERRORS} for r in rows],
            indent=2,
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
