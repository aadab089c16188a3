"""Benchmark 4: memory under load, through the full pipeline that configure() builds.

``python benchmarks/bench_memory.py --workflows 1000000 --steps 5 -o out/memory.json``
runs that many workflows of that many steps, with a dropping exporter behind
configure()'s batch processor, and samples the resident set size at regular
checkpoints. A leak of rollup state would show as RSS growing with the number
of workflows run; the slope between the first and the last checkpoints says it
in bytes per workflow.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _pipeline

import chainlat
from chainlat._runtime.processor import processor_for


def rss_bytes() -> int:
    """Current resident set size (Linux /proc; falls back to the peak elsewhere)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return peak_rss_bytes()


def peak_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--workflows", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--checkpoints", type=int, default=20)
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)

    exporter = _pipeline.DroppingExporter()
    provider = chainlat.configure(exporter=exporter, set_global=False, metric_readers=[])
    processor = processor_for(provider, install=False)
    assert processor is not None
    kinds = [_pipeline.KINDS[i % len(_pipeline.KINDS)] for i in range(args.steps)]

    def one() -> None:
        with chainlat.workflow("load", tracer_provider=provider):
            for kind in kinds:
                if kind == "inference":
                    with chainlat.inference("gpt-4o", tracer_provider=provider) as call:
                        call.record_usage(120, 40)
                elif kind == "data":
                    with chainlat.data_stage("retrieve", tracer_provider=provider):
                        pass
                else:
                    with chainlat.tool("lookup", tracer_provider=provider):
                        pass

    every = max(args.workflows // args.checkpoints, 1)
    samples: list[dict[str, float]] = []
    gc.collect()
    baseline = rss_bytes()
    samples.append({"workflows": 0, "rss": baseline, "seconds": 0.0})
    started = time.perf_counter()
    done = 0
    while done < args.workflows:
        batch = min(every, args.workflows - done)
        for _ in range(batch):
            one()
        done += batch
        samples.append(
            {"workflows": done, "rss": rss_bytes(), "seconds": time.perf_counter() - started}
        )
    elapsed = time.perf_counter() - started
    open_workflows = processor.open_workflows()
    final_rss = rss_bytes()
    gc.collect()
    final_rss_after_gc = rss_bytes()
    peak = peak_rss_bytes()
    ok = chainlat.shutdown()

    # Slope over the second half, after allocator and interpreter caches have settled.
    tail = [s for s in samples if s["workflows"] >= args.workflows / 2]
    slope = (
        (tail[-1]["rss"] - tail[0]["rss"]) / (tail[-1]["workflows"] - tail[0]["workflows"])
        if len(tail) >= 2 and tail[-1]["workflows"] > tail[0]["workflows"]
        else 0.0
    )
    result = {
        "workflows": args.workflows,
        "steps": args.steps,
        "spans": args.workflows * (args.steps + 1),
        "seconds": elapsed,
        "baseline_rss": baseline,
        "peak_rss": peak,
        "final_rss": final_rss,
        "final_rss_after_gc": final_rss_after_gc,
        "slope_bytes_per_workflow": slope,
        "open_workflows_at_end": open_workflows,
        "exported_spans": exporter.spans,
        "shutdown_ok": ok,
        "samples": samples,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
