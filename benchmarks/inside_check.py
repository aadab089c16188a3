"""What ``chainlat check`` spends its time and memory on, inside one process.

``python benchmarks/inside_check.py FILE --budgets FILE --profile`` runs
``evaluate(FileSource(FILE).runs(), budgets)`` under cProfile (the garbage collector set
as the CLI sets it) and prints the functions with the most own time;
``--memory`` runs it under tracemalloc instead and prints the Python heap at the end of
the read, after ``evaluate`` and at its peak, with the allocation sites that grew most.
Under either, the run is several times slower than without: read the shares, not the
seconds.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

from chainlat._core.runs import WorkflowRun
from chainlat.budgets import evaluate, load_budgets
from chainlat.traces import FileSource, ReadCounters

_MIB = 2**20


def _memory(path: Path, budgets_path: Path, top: int) -> None:
    budgets = load_budgets(budgets_path)
    snapshots: list[tracemalloc.Snapshot] = []
    at_end: list[tuple[int, int]] = []

    def runs() -> Iterator[WorkflowRun]:
        yield from FileSource(path).runs(ReadCounters())
        gc.collect()
        snapshots.append(tracemalloc.take_snapshot())
        at_end.append(tracemalloc.get_traced_memory())

    tracemalloc.start(3)
    before = tracemalloc.take_snapshot()
    report = evaluate(runs(), budgets)  # kept: what it holds counts
    current, peak = tracemalloc.get_traced_memory()
    del report
    read_current, read_peak = at_end[0]
    print(f"end of the read: {read_current / _MIB:.1f} MiB (peak {read_peak / _MIB:.1f} MiB)")
    print(f"after evaluate:  {current / _MIB:.1f} MiB (peak {peak / _MIB:.1f} MiB)")
    for stat in snapshots[0].compare_to(before, "traceback")[:top]:
        print(stat)
        for line in stat.traceback.format()[-6:]:
            print("   ", line)


def _profile(path: Path, budgets_path: Path, top: int) -> None:
    budgets = load_budgets(budgets_path)
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    profiler = cProfile.Profile()
    profiler.runcall(lambda: evaluate(FileSource(path).runs(ReadCounters()), budgets))
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("file", type=Path)
    parser.add_argument("--budgets", type=Path, required=True)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--profile", action="store_true", help="cProfile: own time by function")
    mode.add_argument("--memory", action="store_true", help="tracemalloc: the Python heap")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    if args.profile:
        _profile(args.file, args.budgets, args.top)
    else:
        _memory(args.file, args.budgets, args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
