"""Instructions per workflow, counted by callgrind: a measure that machine load cannot move.

Usage (the marginal cost of a ten-step workflow is the difference of two sizes)::

    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.50 \\
        .venv/bin/python benchmarks/callgrind_workflow.py 50
    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.250 \\
        .venv/bin/python benchmarks/callgrind_workflow.py 250
    # (instructions at 250 - instructions at 50) / 200 = instructions per workflow

Compare two trees by running it with ``PYTHONPATH=<tree>/src``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import chainlat


class _Drop(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def main(workflows: int) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_Drop()))
    for _ in range(workflows):
        with chainlat.workflow("w", tracer_provider=provider):
            for _ in range(10):
                with chainlat.inference("m", tracer_provider=provider):
                    pass


if __name__ == "__main__":
    main(int(sys.argv[1]))
