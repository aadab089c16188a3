"""Where chainlat's extra work goes, function by function, in executed Python bytecodes.

A profile that machine load cannot move: ``sys.settrace`` with opcode events counts the
bytecodes each Python function executes (its own, not its callees'), per workflow or
per call, for chainlat's variant and its baseline in the same process, and prints the
functions that account for the difference. C work (the SDK's locks, JSON decoding) is
not in it: instruction totals are ``callgrind_workflow.py``'s and ``callgrind_httpx.py``'s;
this says which Python functions they come from::

    python benchmarks/opcode_profile.py workflow --top 25   # ten-step workflow vs 11 bare spans
    python benchmarks/opcode_profile.py call --top 25       # instrumented vs plain httpx call
    python benchmarks/opcode_profile.py stream --top 25     # the same, 64 streamed chunks
    python benchmarks/opcode_profile.py rollup --top 25     # a ten-step workflow's deferred
                                                            # rollup, as the export computes it
    python benchmarks/opcode_profile.py check --file F --budgets B --top 25  # per span, vs
                                                                  # the orjson floor's loop
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _pipeline

Key = tuple[str, int, str]
_counts: collections.Counter[Key] = collections.Counter()


def _opcodes(frame: FrameType, event: str, arg: Any) -> Any:
    if event == "opcode":
        code = frame.f_code
        _counts[(code.co_filename, code.co_firstlineno, code.co_name)] += 1
    return _opcodes


def _calls(frame: FrameType, event: str, arg: Any) -> Any:
    if event != "call":
        return None
    frame.f_trace_opcodes = True
    frame.f_trace_lines = False
    return _opcodes


def count(body: Callable[[], object], times: int, per: int = 1) -> dict[Key, float]:
    """Bytecodes per run of ``body`` (per ``per``-th of a run), by function (this thread
    only)."""
    _counts.clear()
    sys.settrace(_calls)
    try:
        for _ in range(times):
            body()
    finally:
        sys.settrace(None)
    return {key: value / times / per for key, value in _counts.items()}


def _short(key: Key) -> str:
    path = key[0]
    for marker in ("site-packages/", "src/", "/lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{path}:{key[1]}({key[2]})"


def _rollup_of(run: Any) -> None:
    """What the export does for one workflow span: its rollup, then its attributes."""
    deferred = run._deferred
    assert deferred is not None and deferred._rollup is None, "the rollup was computed already"
    deferred.rollup().to_attributes()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("what", choices=("workflow", "call", "stream", "check", "rollup"))
    parser.add_argument("--times", type=int, default=50)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--file", type=Path, help="check: a bench_check.py file")
    parser.add_argument("--budgets", type=Path, help="check: its budgets")
    args = parser.parse_args(argv)
    server = None
    warm_up, per = 20, 1
    ours: Callable[[], object]
    base: Callable[[], object]
    if args.what == "check":
        import breakdown_check

        from chainlat.budgets import evaluate, load_budgets
        from chainlat.traces import FileSource, ReadCounters, _fast

        budgets = load_budgets(args.budgets)
        counters = ReadCounters()
        evaluate(FileSource(args.file).runs(counters), budgets)
        warm_up, per, args.times = 0, counters.spans, 1

        def ours() -> None:
            # The warm-up filled the reader's cache of attribute lists: emptied, so that the
            # count is of a first reading, as a `chainlat check` process makes it.
            _fast._derived_cache.clear()
            evaluate(FileSource(args.file).runs(ReadCounters()), budgets)

        base = lambda: breakdown_check._floor(args.file)  # noqa: E731
    elif args.what == "rollup":
        # No export until the end: every rollup is still left to compute when counted.
        os.environ["OTEL_BSP_SCHEDULE_DELAY"] = "86400000"
        os.environ["OTEL_BSP_MAX_QUEUE_SIZE"] = os.environ["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"] = str(
            11 * (warm_up + args.times) + 100
        )
        provider = _pipeline.provider()
        runs = iter([_pipeline.chainlat_workflow(provider) for _ in range(warm_up + args.times)])
        ours = lambda: _rollup_of(next(runs))  # noqa: E731
        base = lambda: None  # noqa: E731
    elif args.what == "workflow":
        provider = _pipeline.provider()
        tracer = provider.get_tracer("bench")
        ours = lambda: _pipeline.chainlat_workflow(provider)  # noqa: E731
        base = lambda: _pipeline.bare_workflow(tracer)  # noqa: E731
    else:
        import bench_httpx

        server = subprocess.Popen(
            [sys.executable, bench_httpx.__file__, "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        kind = bench_httpx._stream if args.what == "stream" else bench_httpx._call
        traced, plain = bench_httpx._client(url, True), bench_httpx._client(url, False)
        ours = lambda: kind(traced)  # noqa: E731
        base = lambda: kind(plain)  # noqa: E731
    try:
        for _ in range(warm_up):  # warm-up: caches filled, first-use imports done
            ours()
            base()
        a, b = count(ours, args.times, per), count(base, args.times, per)
    finally:
        if server is not None:
            assert server.stdin is not None
            server.stdin.close()
            server.wait(30)
    total_a, total_b = sum(a.values()), sum(b.values())
    if args.what == "check":
        print(f"bytecodes per span: check {total_a:,.0f}, the floor's loop {total_b:,.1f}")
    elif args.what == "rollup":
        print(f"bytecodes per ten-step workflow's rollup and its attributes: {total_a:,.0f}")
    else:
        print(f"bytecodes per run: chainlat {total_a:,.0f}, baseline {total_b:,.0f} "
              f"(ratio {total_a / total_b:.2f}, +{total_a - total_b:,.0f})")  # fmt: skip
    diff = collections.Counter({k: a.get(k, 0.0) - b.get(k, 0.0) for k in set(a) | set(b)})
    for key, value in diff.most_common(args.top):
        print(f"{value:9,.0f}  {_short(key)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
