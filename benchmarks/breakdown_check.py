"""Where ``chainlat check``'s time goes, stage by stage, on a ``bench_check.py`` file.

``python benchmarks/breakdown_check.py FILE --budgets FILE [--rounds 3]`` times in one
process (CPU time, the garbage collector set as the CLI sets it), each stage including
the ones before it:

* ``floor``: read every line and parse it with orjson (the benchmark's floor);
* ``read``: the spans of every line (``FileSource``'s reader, quick path included);
* ``traces``: ... assembled into complete traces;
* ``runs``: ... and each trace's workflow runs built (steps, rollup);
* ``check``: ... and judged against the budgets (statistics, verdicts);
* ``least``: on its own, the least a Python checker could do for the same budgets'
  figures (``least_check.py``): a practical floor for a checker in Python;
* ``least_attributes``, ``least_reader``: the same with one of chainlat's duties added
  (its attribute reading; its whole quick reader), to price each.

``--stage NAME`` runs that one stage once, untimed (``callgrind_check.py --stages`` counts
each stage's instructions this way, a process each).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import orjson
from least_check import least

from chainlat.budgets import evaluate, load_budgets
from chainlat.traces import FileSource, ReadCounters
from chainlat.traces._fast import quick_spans
from chainlat.traces._parse import loads_lenient, otlp_spans


def _floor(path: Path) -> None:
    with path.open("rb") as f:
        for line in f:
            if line.strip():
                orjson.loads(line)


def _read(path: Path) -> None:
    with path.open("rb") as f:
        for number, line in enumerate(f, 1):
            if line.strip() and quick_spans(line, f"{path}:{number}") is None:
                list(otlp_spans(loads_lenient(line), f"{path}:{number}"))


STAGES = (
    "floor", "read", "traces", "runs", "check", "least", "least_attributes", "least_reader"
)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("file", type=Path)
    parser.add_argument("--budgets", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stage", choices=STAGES)
    args = parser.parse_args(argv)
    budgets = load_budgets(args.budgets)
    stages: dict[str, Callable[[], object]] = {
        "floor": lambda: _floor(args.file),
        "read": lambda: _read(args.file),
        "traces": lambda: sum(1 for _ in FileSource(args.file).traces(ReadCounters())),
        "runs": lambda: sum(1 for _ in FileSource(args.file).runs(ReadCounters())),
        "check": lambda: evaluate(FileSource(args.file).runs(ReadCounters()), budgets),
        "least": lambda: least(args.file),
        "least_attributes": lambda: least(args.file, "attributes"),
        "least_reader": lambda: least(args.file, "reader"),
    }
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    if args.stage is not None:
        stages[args.stage]()
        return 0
    times: dict[str, list[float]] = {name: [] for name in stages}
    for _ in range(args.rounds):
        for name, stage in stages.items():
            start = time.process_time()
            stage()
            times[name].append(time.process_time() - start)
    floor = statistics.median(times["floor"])
    for name, found in times.items():
        median = statistics.median(found)
        print(f"{name:<7} {median:6.2f} s  {median / floor:5.2f}x the floor")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
