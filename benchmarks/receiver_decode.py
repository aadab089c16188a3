"""What ``chainlat serve`` spends a span on before it writes it: the body decoded into
OTLP/JSON, and the check of what the reader would leave out.

One request of ``--workflows`` of chainlat's own ten-span runs (``bench_check.py``'s
template, as a batch processor sends them), as OTLP/JSON and as protobuf. Each step is
timed in rounds that take turns, each round the best of ``--repeat`` runs, in µs a span;
the median over rounds is printed, the range beside it::

    python benchmarks/receiver_decode.py                # 50 workflows (500 spans), 7 rounds

Steps: ``json``, the JSON body decoded and checked for its shape (``from_json``);
``protobuf``, the protobuf body parsed and converted field by field (``from_protobuf``);
``protobuf-reflected``, the same parsed request converted by ``MessageToDict``
(``decoding.reflected``, what the receiver did before and does for a newer
opentelemetry-proto); ``unread``, the check of what the reader would leave out
(``decoding.unread``: the quick path, then the validating walk); ``unread-walked``, the
validating walk alone (what it was).
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_check


def _request(workflows: int) -> dict[str, Any]:
    """``workflows`` copies of the template run in one OTLP/JSON request, each its own
    trace."""
    template = bench_check.template()
    originals = template["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans = []
    for n in range(workflows):
        for span in originals:
            copied = copy.deepcopy(span)
            copied["traceId"] = f"{n + 1:032x}"
            spans.append(copied)
    template["resourceSpans"][0]["scopeSpans"][0]["spans"] = spans
    return template


def _protobuf(document: dict[str, Any]) -> bytes:
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    wire = copy.deepcopy(document)
    for resource in wire["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    request: Any = ParseDict(wire, ExportTraceServiceRequest())
    return bytes(request.SerializeToString())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--workflows", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from chainlat.receiver import decoding
    from chainlat.traces._parse import walked_unread_spans

    document = _request(args.workflows)
    body = json.dumps(document).encode()
    wire = _protobuf(document)
    parsed = ExportTraceServiceRequest()
    parsed.ParseFromString(wire)
    spans = decoding.span_count(document)
    assert decoding.from_protobuf(wire) == decoding.reflected(parsed) == document
    steps: dict[str, Callable[[], object]] = {
        "json": lambda: decoding.from_json(body),
        "protobuf": lambda: decoding.from_protobuf(wire),
        "protobuf-reflected": lambda: decoding.reflected(parsed),
        "unread": lambda: decoding.unread(document),
        "unread-walked": lambda: walked_unread_spans(document),
    }
    found: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, step in steps.items():
            best = float("inf")
            for _ in range(args.repeat):
                started = time.perf_counter()
                step()
                best = min(best, time.perf_counter() - started)
            found[name].append(best / spans * 1e6)
    print(f"{spans} spans a request, {args.rounds} rounds of the best of {args.repeat}:")
    for name, values in found.items():
        print(
            f"  {name:<20} {statistics.median(values):6.2f} µs a span "
            f"({min(values):.2f}-{max(values):.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
