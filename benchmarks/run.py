"""``make bench``: run chainlat's benchmarks and write the results to BENCHMARKS.md.

Usage::

    python benchmarks/run.py                 # everything, full size (tens of minutes)
    python benchmarks/run.py --quick         # smaller sizes: benchmarks/out/BENCHMARKS-quick.md
    python benchmarks/run.py --only overhead,memory

Each benchmark runs in its own processes; raw results go to ``benchmarks/out/``
(pyperf JSON for the timing benchmarks: ``python -m pyperf show`` reads them).
Ratios are always against a baseline measured in the same run. The hand-written
notes between the ``notes`` markers of BENCHMARKS.md are kept from one run to
the next.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
RESULTS = ROOT / "BENCHMARKS.md"
NOTES_START = "<!-- notes: kept by benchmarks/run.py -->"
NOTES_END = "<!-- /notes -->"
BENCHMARKS = ("overhead", "httpx", "check", "memory", "peers")

TARGET_STEP_RATIO = 1.1
TARGET_WORKFLOW_RATIO = 1.25
TARGET_CALL_ADDED_US = 150.0
TARGET_CHUNK_ADDED_US = 20.0
TARGET_CHECK_RATIO = 1.5
TARGET_CHECK_MEMORY_RATIO = 1.5


@dataclass
class Section:
    title: str
    lines: list[str] = field(default_factory=list)
    verdicts: list[tuple[str, bool | None, str]] = field(default_factory=list)
    """(target, met / missed / pending, measured)."""
    measured: str = ""
    """When, at which commit, under which load: each section may come from another run."""

    def save(self, name: str, kind: str = "") -> None:
        (OUT / f"section-{kind}{name}.json").write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, name: str, kind: str = "") -> Section | None:
        path = OUT / f"section-{kind}{name}.json"
        if not path.exists():
            return cls.from_results(TITLES[name])
        data = json.loads(path.read_text())
        data["verdicts"] = [tuple(v) for v in data["verdicts"]]
        return cls(**data)

    @classmethod
    def from_results(cls, title: str) -> Section | None:
        """The section as BENCHMARKS.md last showed it (``benchmarks/out`` is not kept in
        the repository: a run of some benchmarks keeps the others' published results)."""
        if not RESULTS.exists():
            return None
        text = RESULTS.read_text().split("\n## Notes\n", 1)[0]
        heading = f"\n## {title}\n"
        if heading not in text:
            return None
        body = text.split(heading, 1)[1].split("\n## ", 1)[0].strip("\n").splitlines()
        measured = next((line for line in body if line.startswith("*Measured")), "")
        lines = body[body.index(measured) + 1 :] if measured else body
        while lines and not lines[0].strip():
            lines.pop(0)
        verdicts: list[tuple[str, bool | None, str]] = []
        for row in text.split("\n## Targets\n", 1)[-1].split("\n## ", 1)[0].splitlines():
            cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
            if len(cells) == 3 and cells[0].startswith(f"{title}: "):
                met = {"met": True, "**missed**": False}.get(cells[2])
                verdicts.append((cells[0][len(title) + 2 :], met, cells[1]))
        return cls(title, lines, verdicts, measured)


TITLES = {
    "overhead": "1. Step overhead",
    "httpx": "2. Instrumented model call",
    "check": "3. Analyzer throughput",
    "memory": "4. Memory under load",
    "peers": "5. Peers side by side",
}


# -- helpers ----------------------------------------------------------------------------


def _run(args: Sequence[str], *, timeout_s: float | None = None) -> None:
    print("+", " ".join(args), flush=True)
    subprocess.run(list(args), check=True, cwd=ROOT, timeout=timeout_s)


def _pyperf(script: str, output: Path, extra: Sequence[str], quick: bool) -> None:
    output.unlink(missing_ok=True)
    processes = "3" if quick else "6"
    sizes = ["--processes", processes, "--values", "3"]
    _run([sys.executable, str(HERE / script), "--quiet", "--warmups", "1", *sizes, *extra,
          "-o", str(output)])  # fmt: skip


def _values_by_name(path: Path) -> dict[str, list[float]]:
    import pyperf

    suite = pyperf.BenchmarkSuite.load(str(path))
    return {bench.get_name(): list(bench.get_values()) for bench in suite.get_benchmarks()}


def _rounds(values: dict[str, list[float]], variant: str) -> list[list[float]]:
    found = sorted(
        (int(name.rsplit("#", 1)[1]), v)
        for name, v in values.items()
        if name.rsplit("#", 1)[0] == variant
    )
    return [v for _, v in found]


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f}"


def _spread(samples: Sequence[float]) -> str:
    """Median, and the interquartile range, in µs."""
    if len(samples) < 4:
        return f"{_us(statistics.median(samples))} µs"
    q1, _, q3 = statistics.quantiles(samples, n=4)
    return f"{_us(statistics.median(samples))} µs (IQR {_us(q1)}–{_us(q3)})"


def _round_ratios(chainlat: list[list[float]], base: list[list[float]]) -> list[float]:
    return [
        statistics.median(c) / statistics.median(b) for c, b in zip(chainlat, base, strict=True)
    ]


def _ratio(chainlat: list[list[float]], base: list[list[float]]) -> float:
    ratios = _round_ratios(chainlat, base)
    return statistics.median(ratios) if ratios else float("nan")


def _ratio_range(chainlat: list[list[float]], base: list[list[float]]) -> str:
    ratios = _round_ratios(chainlat, base)
    if not ratios:
        return "n/a"
    return f"{statistics.median(ratios):.2f} (rounds: {min(ratios):.2f}–{max(ratios):.2f})"


def _verdict(met: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "pending"}[met]


# -- 1. step overhead -----------------------------------------------------------------------


def overhead(quick: bool, rounds: int) -> Section:
    output = OUT / "overhead.json"
    _pyperf("bench_overhead.py", output, ["--rounds", str(rounds)], quick)
    values = _values_by_name(output)
    variants = ("step-otel", "step-bare", "step-chainlat", "workflow-bare", "workflow-chainlat")
    per_round = {v: _rounds(values, v) for v in variants}
    pooled = {v: [x for r in per_round[v] for x in r] for v in variants}

    step_ratio = _ratio(per_round["step-chainlat"], per_round["step-bare"])
    wf_ratio = _ratio(per_round["workflow-chainlat"], per_round["workflow-bare"])
    section = Section("1. Step overhead")
    section.lines += [
        f"`benchmarks/bench_overhead.py`, pyperf, {rounds} interleaved rounds; in each round "
        "every variant runs in its own worker processes (pyperf calibrates the loop count, "
        "one warm-up, three values per process). Pipeline: a TracerProvider with chainlat's "
        "processor and configure()'s batch processor over an exporter that drops every "
        "batch; no meter provider. Medians over all values, IQR in brackets; the ratio is "
        "the median of the per-round ratios (range over rounds in brackets).",
        "",
        "| variant | per call |",
        "|---|---|",
        f"| bare SDK span, plain OpenTelemetry pipeline (no chainlat) | {_spread(pooled['step-otel'])} |",  # noqa: E501
        f"| bare SDK span, through chainlat's pipeline (**baseline**) | {_spread(pooled['step-bare'])} |",  # noqa: E501
        f'| `with chainlat.inference("gpt-4o")` | {_spread(pooled["step-chainlat"])} |',
        f"| 11 bare spans: a root and ten children (**baseline**) | {_spread(pooled['workflow-bare'])} |",  # noqa: E501
        f"| `chainlat.workflow` with ten steps, rollup included | {_spread(pooled['workflow-chainlat'])} |",  # noqa: E501
        "",
        f"- step: chainlat / bare = {_ratio_range(per_round['step-chainlat'], per_round['step-bare'])}",  # noqa: E501
        f"  ({_us(statistics.median(pooled['step-chainlat']) - statistics.median(pooled['step-bare']))} µs added per step)",  # noqa: E501
        f"- ten-step workflow: chainlat / 11 bare spans = {_ratio_range(per_round['workflow-chainlat'], per_round['workflow-bare'])}",  # noqa: E501
        f"  ({_us(statistics.median(pooled['workflow-chainlat']) - statistics.median(pooled['workflow-bare']))} µs added per workflow)",  # noqa: E501
        f"- chainlat's processor on a bare span: {_ratio_range(per_round['step-bare'], per_round['step-otel'])}"  # noqa: E501
        " × a plain OpenTelemetry pipeline",
    ]
    counted = None if quick else _workflow_instructions()
    if counted is None:
        section.lines += ["", "- instructions: not counted (a quick run, or no valgrind)"]
        section.verdicts += [
            (f"step ratio ≤ {TARGET_STEP_RATIO} (wall time)", step_ratio <= TARGET_STEP_RATIO,
             f"{step_ratio:.2f}"),
            (f"ten-step workflow ratio ≤ {TARGET_WORKFLOW_RATIO} (wall time)",
             wf_ratio <= TARGET_WORKFLOW_RATIO, f"{wf_ratio:.2f}"),
        ]  # fmt: skip
        return section
    lines, verdicts = counted
    section.lines += ["", *lines]
    # Instructions decide (load cannot move them); the wall-time ratios above stand beside.
    section.verdicts += verdicts
    return section


def _workflow_instructions() -> tuple[list[str], list[tuple[str, bool | None, str]]] | None:
    """Section 1 in instructions (callgrind): lines and the verdicts they decide."""
    if shutil.which("valgrind") is None:
        return None
    output = OUT / "callgrind-workflow.json"
    _run([sys.executable, str(HERE / "callgrind_workflow.py"), "--small", "50", "--large", "250",
          "--metrics", "-o", str(output)])  # fmt: skip
    data = json.loads(output.read_text())
    per_unit, app = data["per_unit"], data["app_thread_per_unit"]
    metrics = per_unit["workflow-chainlat-metrics"] / per_unit["workflow-bare"]
    app_metrics = app["workflow-chainlat-metrics"] / app["workflow-bare"]
    lines = [
        "- in instructions (`benchmarks/callgrind_workflow.py --small 50 --large 250 "
        "--metrics`, callgrind, every thread counted; the marginal instructions per step and "
        "per workflow between the two counts, so that starting Python is taken out):",
        "",
        "| variant | instructions, all threads | on the application's thread |",
        "|---|---|---|",
        *(
            f"| {name} | {per_unit[key]:,.0f} | {app[key]:,.0f} |"
            for key, name in (
                ("step-bare", "bare SDK span with three attributes (**baseline**)"),
                ("step-chainlat", '`with chainlat.inference("gpt-4o")`'),
                ("workflow-bare", "11 bare spans (**baseline**)"),
                ("workflow-chainlat", "`chainlat.workflow` with ten steps"),
                ("workflow-chainlat-metrics", "the same, `configure()` with a metrics reader"),
            )
        ),
        "",
        f"- step / bare span: {data['step_ratio']:.2f} (application's thread "
        f"{data['app_thread_step_ratio']:.2f})",
        f"- ten-step workflow / 11 bare spans: {data['workflow_ratio']:.2f} (application's "
        f"thread {data['app_thread_workflow_ratio']:.2f}); with a metrics reader "
        f"{metrics:.2f} ({app_metrics:.2f})",
    ]  # fmt: skip
    verdicts: list[tuple[str, bool | None, str]] = [
        (f"step ratio ≤ {TARGET_STEP_RATIO} (instructions)",
         data["step_ratio"] <= TARGET_STEP_RATIO, f"{data['step_ratio']:.2f}"),
        (f"ten-step workflow ratio ≤ {TARGET_WORKFLOW_RATIO} (instructions, all threads)",
         data["workflow_ratio"] <= TARGET_WORKFLOW_RATIO, f"{data['workflow_ratio']:.2f}"),
        (f"ten-step workflow ratio ≤ {TARGET_WORKFLOW_RATIO} (instructions, application's thread)",
         data["app_thread_workflow_ratio"] <= TARGET_WORKFLOW_RATIO,
         f"{data['app_thread_workflow_ratio']:.2f}"),
    ]  # fmt: skip
    return lines, verdicts


# -- 2. instrumented model call ---------------------------------------------------------------


def _has_httpx_instrumentation() -> bool:
    if importlib.util.find_spec("chainlat.httpx") is None:
        return False
    return hasattr(importlib.import_module("chainlat.httpx"), "instrument_httpx")


def httpx_calls(quick: bool, rounds: int) -> Section:
    section = Section("2. Instrumented model call")
    if not _has_httpx_instrumentation():
        section.lines.append("**Pending**: `chainlat.httpx` is not in this tree yet.")
        section.verdicts += [
            (f"added per call < {TARGET_CALL_ADDED_US:g} µs", None, "pending"),
            (f"added per streamed chunk < {TARGET_CHUNK_ADDED_US:g} µs", None, "pending"),
        ]
        return section
    output = OUT / "httpx.json"
    _pyperf("bench_httpx.py", output, ["--rounds", str(rounds)], quick)
    values = _values_by_name(output)
    meta = json.loads((OUT / "httpx-meta.json").read_text())
    chunks = int(meta["chunks"])
    variants = ("call-plain", "call-chainlat", "stream-plain", "stream-chainlat")
    per_round = {v: _rounds(values, v) for v in variants}
    pooled = {v: [x for r in per_round[v] for x in r] for v in variants}

    def added(a: str, b: str) -> list[float]:
        return [
            statistics.median(x) - statistics.median(y)
            for x, y in zip(per_round[a], per_round[b], strict=True)
        ]

    call_added = added("call-chainlat", "call-plain")
    stream_added = added("stream-chainlat", "stream-plain")
    per_call_us = statistics.median(call_added) * 1e6
    # The fixed cost of a call is paid by a stream too; what is left is per chunk.
    per_chunk_us = (statistics.median(stream_added) - statistics.median(call_added)) * 1e6 / chunks
    section.lines += [
        "`benchmarks/bench_httpx.py`, pyperf, "
        f"{rounds} interleaved rounds. An `httpx.Client` against `chainlat.sim` on 127.0.0.1 "
        "with every latency set to zero, plain and through `chainlat.instrument_httpx` "
        "(chainlat's pipeline with the dropping exporter). Non-streaming: one chat "
        f"completion; streaming: one streamed chat completion of {chunks} content chunks, "
        "read to the end.",
        "",
        "| variant | per call |",
        "|---|---|",
        f"| non-streaming, plain | {_spread(pooled['call-plain'])} |",
        f"| non-streaming, instrumented | {_spread(pooled['call-chainlat'])} |",
        f"| streaming, plain | {_spread(pooled['stream-plain'])} |",
        f"| streaming, instrumented | {_spread(pooled['stream-chainlat'])} |",
        "",
        f"- added per call: {per_call_us:.1f} µs (rounds: "
        f"{min(call_added) * 1e6:.1f}–{max(call_added) * 1e6:.1f})",
        f"- added per streamed chunk: {per_chunk_us:.2f} µs "
        "((added per stream − added per call) / chunks)",
    ]
    counted = None if quick else _call_instructions()
    if counted is None:
        section.lines += ["", "- instructions: not counted (a quick run, or no valgrind)"]
        section.verdicts += [
            (f"added per call < {TARGET_CALL_ADDED_US:g} µs (wall time)",
             per_call_us < TARGET_CALL_ADDED_US, f"{per_call_us:.1f} µs"),
            (f"added per streamed chunk < {TARGET_CHUNK_ADDED_US:g} µs (wall time)",
             per_chunk_us < TARGET_CHUNK_ADDED_US, f"{per_chunk_us:.2f} µs"),
        ]  # fmt: skip
        return section
    lines, verdicts = counted
    section.lines += ["", *lines]
    section.verdicts += verdicts
    return section


def _call_instructions() -> tuple[list[str], list[tuple[str, bool | None, str]]] | None:
    """Section 2 in instructions (callgrind), as time at the plain client's rate."""
    if shutil.which("valgrind") is None:
        return None
    output = OUT / "callgrind-httpx.json"
    _run([sys.executable, str(HERE / "callgrind_httpx.py"), "--small", "20", "--large", "100",
          "-o", str(output)])  # fmt: skip
    data = json.loads(output.read_text())
    ns = data["us_per_instruction"] * 1e3
    call_us, chunk_us = data["added_per_call_us"], data["added_per_chunk_us"]
    lines = [
        "- in instructions (`benchmarks/callgrind_httpx.py --small 20 --large 100`, callgrind, "
        "every thread of the client counted, the marginal instructions per call between the "
        f"two counts): **+{data['added_per_call']:,.0f} per call** and "
        f"**+{data['added_per_chunk']:,.0f} per streamed chunk**; at the rate the plain client "
        f"runs here outside valgrind ({ns:.3f} ns per instruction, its CPU time per call over "
        f"its instructions), {call_us:.1f} µs per call and {chunk_us:.2f} µs per chunk",
    ]
    verdicts: list[tuple[str, bool | None, str]] = [
        (f"added per call < {TARGET_CALL_ADDED_US:g} µs (instructions at the client's rate)",
         call_us < TARGET_CALL_ADDED_US, f"{call_us:.1f} µs"),
        (f"added per streamed chunk < {TARGET_CHUNK_ADDED_US:g} µs (instructions at the "
         "client's rate)", chunk_us < TARGET_CHUNK_ADDED_US, f"{chunk_us:.2f} µs"),
    ]  # fmt: skip
    return lines, verdicts


# -- 3. analyzer throughput ------------------------------------------------------------------


def _has_check_command() -> bool:
    try:
        from chainlat.cli import build_parser
    except ImportError:
        return False
    parser = build_parser()
    # argparse has no public accessor for its subcommands.
    return any("check" in (getattr(a, "choices", None) or {}) for a in parser._actions)


def check(quick: bool, rounds: int) -> Section:
    section = Section("3. Analyzer throughput")
    if not _has_check_command():
        section.lines.append("**Pending**: `chainlat check` is not in this tree yet.")
        section.verdicts += [
            (f"check ≤ {TARGET_CHECK_RATIO}× the orjson parse floor", None, "pending"),
            ("peak memory at 1M spans < 10× the peak at 100k", None, "pending"),
        ]
        return section
    output = OUT / "check.json"
    sizes = ["--small", "10000", "--large", "100000"] if quick else []
    _run([sys.executable, str(HERE / "bench_check.py"), "--rounds", str(rounds), *sizes,
          "-o", str(output)])  # fmt: skip
    data = json.loads(output.read_text())
    large, small = data["large"], data["small"]
    ratio = statistics.median(large["check_s"]) / statistics.median(large["parse_s"])
    memory_ratio = large["check_peak_rss"] / small["check_peak_rss"]
    section.lines += [
        "`benchmarks/bench_check.py`: a generated OTLP JSON lines file "
        f"({large['spans']:,} spans, {large['workflows']:,} workflows, "
        f"{large['bytes'] / 1e6:.0f} MB, 50 workflows per line), `chainlat check FILE "
        "--budgets FILE` in a fresh process against the floor of reading the file line by "
        f"line and parsing every line with orjson ({data['orjson']}), also in a fresh "
        f"process; {rounds} alternating rounds, medians (range over rounds). Peak memory "
        "is the peak RSS of the `chainlat check` process.",
        "",
        "| input | orjson floor | `chainlat check` | ratio | peak RSS of check |",
        "|---|---|---|---|---|",
    ]
    for run in (small, large):
        r = statistics.median(run["check_s"]) / statistics.median(run["parse_s"])
        section.lines.append(
            f"| {run['spans']:,} spans | {statistics.median(run['parse_s']):.2f} s "
            f"({min(run['parse_s']):.2f}–{max(run['parse_s']):.2f}) | "
            f"{statistics.median(run['check_s']):.2f} s "
            f"({min(run['check_s']):.2f}–{max(run['check_s']):.2f}) | {r:.2f} | "
            f"{run['check_peak_rss'] / 2**20:.0f} MiB |"
        )
    section.lines += [
        "",
        f"- peak memory, {large['spans']:,} spans / {small['spans']:,} spans: "
        f"{memory_ratio:.2f}× for {large['spans'] / small['spans']:.0f}× the spans",
    ]
    counted = None if quick else _check_instructions()
    if counted is not None:
        section.lines += ["", *counted[0]]
        # Instructions decide (load cannot move them); the times above stand beside.
        section.verdicts.append(
            (f"check ≤ {TARGET_CHECK_RATIO}× the orjson parse floor (instructions)",
             counted[1] <= TARGET_CHECK_RATIO, f"{counted[1]:.2f}×"),
        )  # fmt: skip
    else:
        section.verdicts.append(
            (f"check ≤ {TARGET_CHECK_RATIO}× the orjson parse floor (time)",
             ratio <= TARGET_CHECK_RATIO, f"{ratio:.2f}×"),
        )  # fmt: skip
    section.verdicts += [
        (f"peak memory at 10× the spans ≤ {TARGET_CHECK_MEMORY_RATIO}× the peak",
         memory_ratio <= TARGET_CHECK_MEMORY_RATIO, f"{memory_ratio:.2f}×"),
    ]  # fmt: skip
    return section


def _check_instructions() -> tuple[list[str], float] | None:
    """The same comparison in instructions, which load cannot move (callgrind): the line
    and the ratio."""
    if shutil.which("valgrind") is None:
        return None
    output = OUT / "callgrind-check.json"
    _run([sys.executable, str(HERE / "callgrind_check.py"), "--small", "2000", "--large",
          "10000", "-o", str(output)])  # fmt: skip
    data = json.loads(output.read_text())
    per_span = data["per_span"]
    return [
        "- in instructions (`benchmarks/callgrind_check.py`, callgrind, the marginal "
        "instructions per span between a 2,000- and a 10,000-span file, so that starting "
        f"Python is taken out): check {per_span['check']:,.0f}, orjson floor "
        f"{per_span['floor']:,.0f}, ratio {data['ratio']:.2f}",
    ], float(data["ratio"])


# -- 5. peers side by side -------------------------------------------------------------------


def peers(quick: bool, rounds: int) -> Section:
    output = OUT / "peers.json"
    loops = "500" if quick else "2000"
    _run([sys.executable, str(HERE / "bench_peers.py"), "--rounds", str(max(rounds, 3)),
          "--loops", loops, "-o", str(output)])  # fmt: skip
    data = json.loads(output.read_text())
    names = {
        "chainlat": '`with chainlat.inference("gpt-4o")`',
        "logfire": "`with logfire.span(...)`",
        "traceloop": "OpenLLMetry `@task` (traceloop-sdk)",
        "util-genai": "`opentelemetry-util-genai` `TelemetryHandler.inference()`",
    }
    section = Section("5. Peers side by side")
    section.lines += [
        "`benchmarks/bench_peers.py` runs `benchmarks/peers/step.py` once per peer, each in "
        "its own process (logfire and traceloop-sdk each in a venv of their own, from pinned "
        "requirements). In that process, in interleaved rounds of "
        f"{data[0]['loops']:,} calls (CPU time per call, medians; the ratio is the median "
        "of the per-round ratios, range over rounds in brackets): the peer's step; a bare SDK "
        "span from the tracer provider the peer set up (**same pipeline**: its processors "
        "and a BatchSpanProcessor over an exporter that drops every batch); a bare SDK span "
        "on a plain OpenTelemetry pipeline (one BatchSpanProcessor over the dropping "
        "exporter), what the step costs against not adopting the peer at all.",
        "",
        "| step | version | per call | bare span, same pipeline | step / bare | "
        "bare span, plain pipeline | step / plain |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in data:
        low, high = r["ratio_range"]
        plow, phigh = r["ratio_plain_range"]
        section.lines.append(
            f"| {names.get(r['peer'], r['peer'])} | {r['version']} | {r['peer_us']:.1f} µs | "
            f"{r['bare_us']:.1f} µs | {r['ratio']:.2f} ({low:.2f}–{high:.2f}) | "
            f"{r['plain_us']:.1f} µs | {r['ratio_plain']:.2f} ({plow:.2f}–{phigh:.2f}) |"
        )
    _agent_lines(section, quick, rounds)
    return section


AGENT_NAMES = {
    "chainlat": "chainlat: `chainlat.workflow` around the run, `instrument_httpx()`, "
    "a `chainlat.tool` step",
    "openai-v2": "`opentelemetry-instrumentation-openai-v2` (`OpenAIInstrumentor`)",
    "traceloop": "OpenLLMetry (traceloop-sdk): `Traceloop.init()`, `@workflow`, `@tool`",
    "logfire": "logfire: `instrument_openai()`, `logfire.span` around the run and the tool",
}


def _agent_lines(section: Section, quick: bool, rounds: int) -> None:
    """The agent workload: CPU per run with each peer against its environment's plain run."""
    output = OUT / "peers-agent.json"
    runs = "50" if quick else "200"
    _run([sys.executable, str(HERE / "bench_peers.py"), "--agent", "--rounds", str(rounds),
          "--repeats", "1" if quick else "2", "--runs", runs, "-o", str(output)])  # fmt: skip
    data = json.loads(output.read_text())
    rows = data["summary"]
    section.lines += [
        "",
        "**One agent workload.** `benchmarks/bench_peers.py --agent` runs "
        "`benchmarks/peers/agent_run.py`: the real `openai` SDK against `chainlat sim` at zero "
        "latency (in a process of its own, not counted), one run = a chat completion, a tool, "
        "a chat completion streamed and read to the end, a last chat completion. Every "
        "peer's pipeline ends in a BatchSpanProcessor over an exporter that drops every "
        f"batch. CPU time per run (every thread: the exports too), {data['runs']} runs after "
        "20 warm-up runs, each measurement in a fresh process, in the peer's own environment "
        "(openai-v2 and traceloop-sdk from the interop matrix's pins, logfire from "
        "`benchmarks/peers/logfire.txt`, chainlat in this one), beside the same workload "
        "with nothing instrumented (**plain**) in that same environment; "
        f"{data['rounds']} interleaved rounds (the processes' order rotates), run "
        f"{data['repeats']} time{'s' if data['repeats'] != 1 else ''}. Added = the peer's "
        "run less its environment's plain run in the same round: the median over rounds, "
        "the range in brackets.",
        "",
        "| peer | version | spans per run | repeat | per run | plain, same environment "
        "| added | peer / plain |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        low, high = r["added_range"]
        rlow, rhigh = r["ratio_range"]
        section.lines.append(
            f"| {AGENT_NAMES.get(r['peer'], r['peer'])} | {r['version']} | "
            f"{r['spans_per_run']:.0f} | {r['repeat'] + 1} | {r['peer_ms']:.2f} ms | "
            f"{r['plain_ms']:.2f} ms | {r['added_ms']:+.2f} ms ({low:+.2f} to {high:+.2f}) | "
            f"{r['ratio']:.2f} ({rlow:.2f}–{rhigh:.2f}) |"
        )
    ours = [r["added_ms"] for r in rows if r["peer"] == "chainlat"]
    others = {r["peer"] for r in rows if r["peer"] != "chainlat"}
    if ours and others:
        # The cheapest peer by its median over the repeats; chainlat's worst repeat against
        # its best, so that the verdict cannot rest on one lucky repeat.
        def added(peer: str) -> list[float]:
            return [r["added_ms"] for r in rows if r["peer"] == peer]

        cheapest_peer = min(others, key=lambda p: statistics.median(added(p)))
        theirs = added(cheapest_peer)
        met = max(ours) <= min(theirs)
        section.verdicts.append(
            (
                "agent workload: chainlat adds no more CPU per run than the cheapest peer",
                met,
                f"chainlat +{min(ours):.2f} to +{max(ours):.2f} ms, {cheapest_peer} "
                f"+{min(theirs):.2f} to +{max(theirs):.2f} ms (medians of each repeat)",
            )
        )


# -- 4. memory under load --------------------------------------------------------------------


def memory(quick: bool, workflows: int | None) -> Section:
    output = OUT / "memory.json"
    count = workflows or (20_000 if quick else 1_000_000)
    _run([sys.executable, str(HERE / "bench_memory.py"), "--workflows", str(count),
          "--steps", "5", "-o", str(output)])  # fmt: skip
    data = json.loads(output.read_text())
    mib = 2**20
    samples = data["samples"]
    early = next((s for s in samples if s["workflows"] >= count / 10), samples[-1])
    section = Section("4. Memory under load")
    section.lines += [
        f"`benchmarks/bench_memory.py`: {data['workflows']:,} workflows of {data['steps']} "
        f"steps ({data['spans']:,} spans) through `chainlat.configure(exporter=...)` with an "
        f"exporter that drops every batch, in {data['seconds']:.0f} s "
        f"({data['seconds'] / data['workflows'] * 1e6:.0f} µs per workflow). RSS sampled "
        f"every {samples[1]['workflows']:,} workflows.",
        "",
        "| | RSS |",
        "|---|---|",
        f"| before the first workflow | {data['baseline_rss'] / mib:.1f} MiB |",
        f"| after {early['workflows']:,} workflows | {early['rss'] / mib:.1f} MiB |",
        f"| after {data['workflows']:,} workflows (final) | {data['final_rss'] / mib:.1f} MiB |",
        f"| peak | {data['peak_rss'] / mib:.1f} MiB |",
        "",
        f"- growth over the second half of the run: {data['slope_bytes_per_workflow']:.2f} "
        "bytes per workflow",
        f"- workflows still tracked by the processor at the end: {data['open_workflows_at_end']}",
        f"- spans that reached the exporter: {data['exported_spans']:,} of {data['spans']:,}",
        "",
        "RSS curve (workflows → MiB): "
        + ", ".join(f"{s['workflows'] // 1000:,}k → {s['rss'] / mib:.1f}" for s in samples),
    ]
    # No leak: what the second half adds is noise, far from a record per workflow (~100 B).
    no_growth = data["slope_bytes_per_workflow"] < 1.0 and data["open_workflows_at_end"] == 0
    section.verdicts.append(
        (
            "no growth with the number of workflows (< 1 byte per workflow, 0 open at the end)",
            no_growth,
            f"{data['slope_bytes_per_workflow']:.2f} B/workflow, "
            f"{data['open_workflows_at_end']} open",
        )
    )
    return section


# -- the results file -----------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _versions() -> str:
    from importlib.metadata import version

    names = ("opentelemetry-api", "opentelemetry-sdk", "pyperf", "orjson", "msgspec", "httpx")
    found = []
    for name in names:
        try:
            found.append(f"{name} {version(name)}")
        except Exception:
            continue
    return ", ".join(found)


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"], cwd=ROOT, capture_output=True,
            text=True,
        )  # fmt: skip
        return out.stdout.strip() + (" (src/ has uncommitted changes)" if dirty.stdout else "")
    except OSError:
        return "unknown"


def _load() -> str:
    try:
        return " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _kept_notes() -> str:
    if RESULTS.exists():
        text = RESULTS.read_text()
        if NOTES_START in text and NOTES_END in text:
            return text.split(NOTES_START, 1)[1].split(NOTES_END, 1)[0].strip("\n")
    return "(Notes on the figures: why a target is met or missed, what was changed.)"


def write_results(sections: list[Section], results: Path = RESULTS) -> None:
    lines = [
        "# Benchmarks",
        "",
        "What chainlat costs, measured with `make bench` (`benchmarks/run.py`). Every ratio",
        "is against a baseline measured in the same run. This file is written by the",
        "harness; the notes section is kept between runs. `make bench` runs everything",
        "(about 30 minutes on the machine below, the 1,000,000-workflow memory run and the",
        "1,000,000-span check included); `--only NAME,...` for some of it (the other",
        "sections keep their last results, with their own date). `make bench-quick`",
        "(`--quick`: smaller sizes, fewer rounds) writes `benchmarks/out/BENCHMARKS-quick.md`",
        "instead, to try the harness without replacing these figures. Where instructions",
        "are counted (callgrind, every thread), they decide a target's verdict: machine load",
        "cannot move them; the times stand beside them.",
        "",
        "## Machine",
        "",
        f"- CPU: {_cpu_model()}, `nproc` = {os.cpu_count()}",
        f"- Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.system()} {platform.release()}",
        f"- {_versions()}",
        "- the machine is shared: other processes ran during the measurements (see the "
        "load average under each section), which is why the variants are interleaved and "
        "the spread is reported.",
        "",
        "## Targets",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
    ]
    for section in sections:
        for target, met, measured in section.verdicts:
            lines.append(f"| {section.title}: {target} | {measured} | {_verdict(met)} |")
    for section in sections:
        lines += ["", f"## {section.title}", "", section.measured, "", *section.lines]
    lines += ["", "## Notes", "", NOTES_START, _kept_notes(), NOTES_END, ""]
    results.write_text("\n".join(lines))
    print(f"wrote {results.relative_to(ROOT)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run chainlat's benchmarks.")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer rounds")
    parser.add_argument("--only", default=",".join(BENCHMARKS), help="comma-separated subset")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds")
    parser.add_argument("--workflows", type=int, default=None, help="memory benchmark size")
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = set(chosen) - set(BENCHMARKS)
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    rounds = args.rounds or (2 if args.quick else 5)
    OUT.mkdir(exist_ok=True)
    given = list(sys.argv[1:] if argv is None else argv)
    command = " ".join(["python benchmarks/run.py", *given])
    # A quick run keeps its sections and its page apart: its sizes cannot meet the targets'.
    kind = "quick-" if args.quick else ""
    results = OUT / "BENCHMARKS-quick.md" if args.quick else RESULTS
    for name in chosen:
        date, commit, load = time.strftime("%Y-%m-%d %H:%M %Z"), _git_commit(), _load()
        if name == "overhead":
            section = overhead(args.quick, rounds)
        elif name == "httpx":
            section = httpx_calls(args.quick, rounds)
        elif name == "check":
            section = check(args.quick, rounds)
        elif name == "peers":
            section = peers(args.quick, rounds)
        else:
            section = memory(args.quick, args.workflows)
        section.measured = (
            f"*Measured {date} at commit {commit} with `{command}`; load average "
            f"(1/5/15 min) {load} before, {_load()} after.*"
        )
        section.save(name, kind)
    # Sections not run this time keep their last results, each with its own date and commit.
    sections = [s for s in (Section.load(name, kind) for name in BENCHMARKS) if s is not None]
    write_results(sections, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
