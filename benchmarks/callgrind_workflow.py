"""Instructions per workflow, counted by callgrind: a measure that machine load cannot move.

``python benchmarks/callgrind_workflow.py --small 50 --large 250 -o out/callgrind-workflow.json``
runs each variant of ``bench_overhead.py`` through the same pipeline (``_pipeline.provider()``:
chainlat's processor and a batch processor over a dropping exporter) in a process of its own
under ``valgrind --tool=callgrind`` (every thread counted), at two sizes; the marginal
instructions per workflow (or per step), (large - small) / (large - small count), take out
starting Python. The ratios are the targets' (ten-step workflow against 11 bare spans, a
step against a bare span), in instructions: all threads, and the application's thread
alone (``app_thread_*``; the rest is the batch processor's thread, where exports run).
``--metrics`` adds the ten-step workflow through ``configure()`` with a metrics reader
(``workflow-chainlat-metrics``), where the rollup is still computed as the workflow ends.

The single-process form counts one tree's ten-step workflow on a provider with a simple
processor, as the earlier notes did (compare trees with ``PYTHONPATH=<tree>/src``)::

    valgrind --tool=callgrind .venv/bin/python benchmarks/callgrind_workflow.py 50
    valgrind --tool=callgrind .venv/bin/python benchmarks/callgrind_workflow.py 250
    # (instructions at 250 - instructions at 50) / 200 = instructions per workflow
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _pipeline
from _callgrind import thread_instructions

import chainlat

WARM_UP = 20


class _Drop(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def legacy(workflows: int) -> None:
    """The earlier notes' measure: ten-step workflows on a provider with a simple processor."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_Drop()))
    for _ in range(workflows):
        with chainlat.workflow("w", tracer_provider=provider):
            for _ in range(10):
                with chainlat.inference("m", tracer_provider=provider):
                    pass


_exporter = _pipeline.DroppingExporter()
"""Where every variant's spans go: counted, so that a run that lost spans (and so did not
pay for their export, nor for a workflow's rollup) fails instead of counting low."""


def _setup(variant: str) -> tuple[Callable[[], object], TracerProvider]:
    """The variant's body, and the provider its spans go to."""
    if variant == "workflow-chainlat-metrics":
        # configure() with a metrics reader: the GenAI and chain metrics read the rollup as
        # the workflow ends, so it is computed on the application's thread.
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        metered = chainlat.configure(
            "bench",
            exporter=_exporter,
            set_global=False,
            metric_readers=[InMemoryMetricReader()],
        )
        return (lambda: _pipeline.chainlat_workflow(metered)), metered
    provider = _pipeline.provider(exporter=_exporter)
    tracer = provider.get_tracer("bench")
    bodies: dict[str, Callable[[], object]] = {
        "workflow-chainlat": lambda: _pipeline.chainlat_workflow(provider),
        "workflow-bare": lambda: _pipeline.bare_workflow(tracer),
        "step-chainlat": lambda: _pipeline.chainlat_step(provider),
        "step-bare": lambda: _pipeline.bare_step(tracer),
    }
    return bodies[variant], provider


VARIANTS = ("workflow-chainlat", "workflow-bare", "step-chainlat", "step-bare")
METRICS_VARIANT = "workflow-chainlat-metrics"


def run_variant(variant: str, count: int) -> None:
    expected = (WARM_UP + count) * (1 if variant.startswith("step") else 1 + len(_pipeline.KINDS))
    # A queue that holds every span of the run: under valgrind the batch processor's thread
    # falls behind, and a full queue drops spans (and, for a workflow, its rollup), so the
    # count would depend on how far behind it fell. Batches stay the SDK's size.
    os.environ["OTEL_BSP_MAX_QUEUE_SIZE"] = str(max(2048, expected))
    body, provider = _setup(variant)
    for _ in range(WARM_UP):
        body()
    for _ in range(count):
        body()
    provider.force_flush()
    if _exporter.spans != expected:
        raise SystemExit(f"{variant}: {_exporter.spans} of {expected} spans reached the exporter")


def variant_instructions(variant: str, count: int) -> tuple[int, int]:
    """All threads' instructions and the application thread's (the batch processor's
    thread, where the export runs, is the rest)."""
    threads = thread_instructions(
        [sys.executable, __file__, "--variant", variant, "--count", str(count)]
    )
    return sum(threads), threads[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("workflows", type=int, nargs="?", help="the single-process form")
    parser.add_argument("--small", type=int, default=50)
    parser.add_argument("--large", type=int, default=250)
    parser.add_argument(
        "--metrics",
        action="store_true",
        help=f"also count {METRICS_VARIANT}: the ten-step workflow with a metrics reader",
    )
    parser.add_argument("--variant", choices=(*VARIANTS, METRICS_VARIANT), help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args(argv)
    if args.workflows is not None:
        legacy(args.workflows)
        return 0
    if args.variant:
        run_variant(args.variant, args.count)
        return 0
    if args.output is None:
        parser.error("-o is required")
    per_unit: dict[str, float] = {}
    app_per_unit: dict[str, float] = {}
    for variant in (*VARIANTS, METRICS_VARIANT) if args.metrics else VARIANTS:
        # A step is about a tenth of a workflow: ten times the count, for the same precision.
        scale = 10 if variant.startswith("step") else 1
        small, app_small = variant_instructions(variant, args.small * scale)
        large, app_large = variant_instructions(variant, args.large * scale)
        per_unit[variant] = (large - small) / ((args.large - args.small) * scale)
        app_per_unit[variant] = (app_large - app_small) / ((args.large - args.small) * scale)
    result = {
        "counts": [args.small, args.large],
        "per_unit": per_unit,
        "workflow_ratio": per_unit["workflow-chainlat"] / per_unit["workflow-bare"],
        "step_ratio": per_unit["step-chainlat"] / per_unit["step-bare"],
        "app_thread_per_unit": app_per_unit,
        "app_thread_workflow_ratio": app_per_unit["workflow-chainlat"]
        / app_per_unit["workflow-bare"],
        "app_thread_step_ratio": app_per_unit["step-chainlat"] / app_per_unit["step-bare"],
    }
    args.output.write_text(json.dumps(result, indent=1))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
