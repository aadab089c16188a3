"""Benchmark 3: ``chainlat check`` over a large OTLP JSON lines file, against parsing it.

``python benchmarks/bench_check.py -o out/check.json`` writes two files (100,000 and
1,000,000 spans; 10 spans per workflow) and, in alternating rounds, times two fresh
processes over each: ``chainlat check FILE --budgets FILE`` and the floor, a loop that
reads the file line by line and parses every line with orjson. Each process is timed
by its own CPU time and wall time and its peak RSS, from ``os.wait4``.

The file looks like chainlat's own output: one workflow run through the real SDK
pipeline (chainlat's processor, the rollup, the OTLP JSON encoder) on a fake clock,
then copied with fresh ids and shifted times, 50 workflows (500 spans) per line as a
batch processor writes them. What differs from run to run in a real file differs between
the copies too: each model call's first token and token counts, and the workflow's
rollup (a reader that remembers repeated attribute lists must not be flattered).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

import chainlat
from chainlat._runtime.otlp_json import encode_request
from chainlat.testing import capture

WORKFLOWS_PER_LINE = 50
STEPS = ("data", "inference", "tool", "inference", "data", "tool", "inference", "data", "tool")
"""Nine steps: with the workflow span, ten spans per workflow."""

BUDGETS = """\
min_runs = 20

[workflows.answer]
total = "2s"
p95 = { total = "1500ms", inference = "1s" }

[workflows.answer.steps."chat gpt-4o"]
p95 = "400ms"
ttft_p95 = "200ms"
"""

FLOOR = """\
import sys, orjson
count = 0
with open(sys.argv[1], "rb") as f:
    for line in f:
        if line.strip():
            count += len(orjson.loads(line)["resourceSpans"])
print(count)
"""


def template() -> dict[str, Any]:
    """One workflow of ten spans as an OTLP/JSON request, from the real pipeline."""
    rng = random.Random(1)
    with capture(fake_clock=True) as cap:
        p = cap.provider
        with chainlat.workflow("answer", tracer_provider=p):
            for kind in STEPS:
                cap.clock.advance(ms=rng.uniform(1, 5))
                if kind == "inference":
                    with chainlat.inference("gpt-4o", provider="openai", tracer_provider=p) as c:
                        cap.clock.advance(ms=rng.uniform(50, 150))
                        c.first_token()
                        cap.clock.advance(ms=rng.uniform(100, 300))
                        c.record_usage(input_tokens=300, output_tokens=80)
                elif kind == "data":
                    with chainlat.data_stage("retrieve-docs", tracer_provider=p):
                        cap.clock.advance(ms=rng.uniform(10, 60))
                else:
                    with chainlat.tool("lookup-order", tracer_provider=p):
                        cap.clock.advance(ms=rng.uniform(5, 40))
        return encode_request(cap.spans())


def _varied(attributes: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """A copy's attributes with what differs from run to run in a real file varied: a model
    call's first token and token counts, the workflow's rollup (its total and its overhead
    shortened alike, so that it still sums and fits its span); the same list for the
    others (a data stage's or a tool's attributes repeat on every run)."""
    keys = {a["key"] for a in attributes}
    if "gen_ai.usage.input_tokens" in keys:
        scale = rng.uniform(0.8, 1.0)  # an earlier first token, inside the same span
        tokens = {"gen_ai.usage.input_tokens": rng.randint(200, 400),
                  "gen_ai.usage.output_tokens": rng.randint(50, 120)}  # fmt: skip
        varied = []
        for a in attributes:
            key, value = a["key"], a["value"]
            if key in tokens:
                value = {"intValue": str(tokens[key])}
            elif key in ("chainlat.latency.ttft_ms", "gen_ai.response.time_to_first_chunk"):
                value = {"doubleValue": round(value["doubleValue"] * scale, 9)}
            varied.append({"key": key, "value": value})
        return varied
    if "chainlat.chain.total_ms" in keys:
        less = round(rng.uniform(0, 20), 6)  # the template's overhead is 29.6 ms
        return [
            {"key": a["key"], "value": {"doubleValue": round(a["value"]["doubleValue"] - less, 6)}}
            if a["key"] in ("chainlat.chain.total_ms", "chainlat.chain.overhead_ms")
            else a
            for a in attributes
        ]
    return attributes


def generate(path: Path, spans: int, seed: int = 0, *, varied: bool = True) -> dict[str, int]:
    """Write ``spans`` spans (a multiple of ten) as copies of the template; returns sizes.
    ``varied=False``: every copy repeats the template's attributes (nothing differs from
    run to run but ids and times), to price what the varied values cost."""
    base = template()
    scope_spans = base["resourceSpans"][0]["scopeSpans"][0]
    originals = scope_spans["spans"]
    assert len(originals) == 10
    rng = random.Random(seed)
    workflows = spans // 10
    written = 0
    with path.open("wb") as out:
        for first in range(0, workflows, WORKFLOWS_PER_LINE):
            batch: list[dict[str, Any]] = []
            for number in range(first, min(first + WORKFLOWS_PER_LINE, workflows)):
                trace_id = f"{rng.getrandbits(128):032x}"
                ids = {s["spanId"]: f"{rng.getrandbits(64) | 1:016x}" for s in originals}
                shift = number * 5_000_000_000 + rng.randrange(1_000_000_000)
                for span in originals:
                    new = copy.copy(span)
                    new["traceId"] = trace_id
                    new["spanId"] = ids[span["spanId"]]
                    if "parentSpanId" in span:
                        new["parentSpanId"] = ids[span["parentSpanId"]]
                    new["startTimeUnixNano"] = str(int(span["startTimeUnixNano"]) + shift)
                    new["endTimeUnixNano"] = str(int(span["endTimeUnixNano"]) + shift)
                    if "attributes" in span and varied:
                        new["attributes"] = _varied(span["attributes"], rng)
                    batch.append(new)
            scope_spans["spans"] = batch
            out.write(orjson.dumps(base) + b"\n")
            written += len(batch)
    return {"spans": written, "workflows": workflows, "bytes": path.stat().st_size}


def timed(args: list[str]) -> dict[str, float]:
    """Run a fresh process; its CPU time, wall time and peak RSS (bytes), from wait4."""
    started = time.perf_counter()
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode() if process.stderr else ""
    if process.returncode not in (0, 1):  # check: 1 is a broken budget, still a full run
        raise RuntimeError(f"{args[:3]} exited {process.returncode}: {stderr[-2000:]}")
    peak = usage.ru_maxrss if sys.platform == "darwin" else usage.ru_maxrss * 1024
    return {"cpu": usage.ru_utime + usage.ru_stime, "wall": wall, "peak_rss": float(peak)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--small", type=int, default=100_000, help="spans in the small file")
    parser.add_argument("--large", type=int, default=1_000_000, help="spans in the large file")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path(__file__).parent / "out")
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    budgets = args.workdir / "check-budgets.toml"
    budgets.write_text(BUDGETS)
    floor = args.workdir / "check-floor.py"
    floor.write_text(FLOOR)
    chainlat_cli = [sys.executable, "-m", "chainlat.cli", "check", "--no-progress"]
    result: dict[str, Any] = {"orjson": orjson.__version__, "rounds": args.rounds}
    for label, spans in (("small", args.small), ("large", args.large)):
        path = args.workdir / f"check-{spans}.jsonl"
        sizes = generate(path, spans)
        runs: dict[str, list[dict[str, float]]] = {"parse": [], "check": []}
        for _ in range(args.rounds):
            runs["parse"].append(timed([sys.executable, str(floor), str(path)]))
            runs["check"].append(timed([*chainlat_cli, str(path), "--budgets", str(budgets)]))
        result[label] = {
            **sizes,
            "parse_s": [r["cpu"] for r in runs["parse"]],
            "check_s": [r["cpu"] for r in runs["check"]],
            "parse_wall_s": [r["wall"] for r in runs["parse"]],
            "check_wall_s": [r["wall"] for r in runs["check"]],
            "parse_peak_rss": max(r["peak_rss"] for r in runs["parse"]),
            "check_peak_rss": max(r["peak_rss"] for r in runs["check"]),
        }
        path.unlink()
    args.output.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
