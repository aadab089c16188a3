"""Peak memory of the trace reader on generated OTLP JSON lines files (100k and 1M spans).

Usage: python benchmarks/reader_memory.py [OUT_DIR]

Writes support-chat traces (4 spans each, no chainlat.chain.* attributes, so
every rollup is rebuilt from the spans) in exporter-like batches of 512 spans,
children before their workflow; then reads each file in a fresh process per
reader and reports its peak RSS, wall time and (for the run reader) the peak of
spans held:

- ``runs``: what ``chainlat check`` does, ``read_runs`` into ``budgets.evaluate``;
- ``trees``: the span trees the trade-off commands read (``read_run_trees``), each
  dropped once counted: the reader alone;
- ``compare``: ``chainlat.compare`` on the file, which keeps every run's spans.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def _attr(key: str, value: str) -> dict[str, object]:
    return {"key": key, "value": {"stringValue": value}}


def write(path: Path, spans: int, *, batch: int = 512, seed: int = 1) -> None:
    rng = random.Random(seed)
    pending: list[dict[str, object]] = []
    with open(path, "w") as out:

        def flush() -> None:
            request = {
                "resourceSpans": [
                    {"resource": {}, "scopeSpans": [{"scope": {"name": "bench"}, "spans": pending}]}
                ]
            }
            out.write(json.dumps(request, separators=(",", ":")) + "\n")
            pending.clear()

        for n in range(spans // 4):
            trace = f"{n + 1:032x}"
            start = T0 + n * 2000 * MS
            retrieve = rng.randint(80, 160) * MS
            chat = rng.randint(300, 500) * MS
            tool = rng.randint(40, 80) * MS
            root = f"{4 * n + 1:016x}"
            steps = [
                ("data retrieve-docs", "data", start + 5 * MS, retrieve),
                ("chat gpt-4o", "inference", start + 10 * MS + retrieve, chat),
                ("execute_tool lookup-order", "tool", start + 15 * MS + retrieve + chat, tool),
            ]
            end = start + 20 * MS + retrieve + chat + tool
            for i, (name, kind, begin, took) in enumerate(steps):
                pending.append(
                    {
                        "traceId": trace,
                        "spanId": f"{4 * n + 2 + i:016x}",
                        "parentSpanId": root,
                        "name": name,
                        "kind": 1,
                        "startTimeUnixNano": str(begin),
                        "endTimeUnixNano": str(begin + took),
                        "attributes": [_attr("chainlat.step.kind", kind)],
                    }
                )
            workflow = [
                _attr("gen_ai.operation.name", "invoke_workflow"),
                _attr("gen_ai.workflow.name", "support-chat"),
            ]
            pending.append(
                {
                    "traceId": trace,
                    "spanId": root,
                    "name": "invoke_workflow support-chat",
                    "kind": 1,
                    "startTimeUnixNano": str(start),
                    "endTimeUnixNano": str(end),
                    "attributes": workflow,
                }
            )
            if len(pending) >= batch:
                flush()
        if pending:
            flush()


MEASURE = """
import resource, sys, time
started = time.perf_counter()
reader, path = sys.argv[1], sys.argv[2]
spans = held = "-"
if reader == "runs":
    from chainlat.budgets import evaluate, parse_budgets
    from chainlat.traces import ReadCounters, read_runs
    counters = ReadCounters()
    budgets = parse_budgets({"workflows": {"support-chat": {"total": "1s", "p95": "900ms"}}})
    report = evaluate(read_runs([path], counters=counters), budgets)
    runs, spans, held = counters.workflows, counters.spans, counters.peak_open_spans
elif reader == "trees":
    from chainlat.traces import read_runs
    runs = sum(1 for _ in read_runs([path], outcomes=True))
else:
    from chainlat.analysis.tradeoff import compare
    runs = sum(v.runs for v in compare(path).variants)
seconds = time.perf_counter() - started
rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{spans} {runs} {held} {rss_mib:.0f} {seconds:.1f}")
"""
READERS = ("runs", "trees", "compare")


def main() -> None:
    base = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    base.mkdir(parents=True, exist_ok=True)
    print("| spans | file MiB | reader | runs | peak spans held | peak RSS MiB | seconds |")
    print("|--:|--:|:--|--:|--:|--:|--:|")
    for spans in (100_000, 1_000_000):
        path = base / f"traces-{spans}.jsonl"
        if not path.exists():
            write(path, spans)
        size = path.stat().st_size / 2**20
        for reader in READERS:  # one at a time: each peak is its own process's
            done = subprocess.run(
                [sys.executable, "-c", MEASURE, reader, str(path)],
                capture_output=True,
                text=True,
                check=True,
            )
            _, runs, held, rss, seconds = done.stdout.split()
            print(f"| {spans} | {size:.0f} | {reader} | {runs} | {held} | {rss} | {seconds} |")


if __name__ == "__main__":
    main()
