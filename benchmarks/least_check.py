"""The least a Python ``chainlat check`` could do on a ``bench_check.py`` file: a lower bound.

Not a checker: a skeleton that does only what any reader in Python must do to judge the
benchmark's budgets, and none of what makes chainlat's verdicts trustworthy. It decodes
each line with chainlat's own msgspec structs, makes one tuple a span, decodes each
distinct attribute list once (as chainlat does) and reads from it only the kind and a
model call's first token or a workflow's recorded total, groups the spans by trace, and
works out each run's total and inference time (a plain sum, not the overlap-aware rollup)
and the percentiles the budgets ask for. On the benchmark's files its figures equal
``chainlat check``'s (``tests/benchmarks/test_least_check.py``).

It checks no id, time or value, keeps no attribute, builds no rollup, critical path or
first-output split, reads no convention but chainlat's, and never falls back to a
validating reader. Its instructions per span are therefore a practical floor for a
checker in Python that decodes every span (per-run arrays included): not a proof, an
estimate of what is left when every duty is dropped.

Two of chainlat's duties can be added, one at a time, to price them:

* ``attributes``: each distinct attribute list read as chainlat reads it (every kept
  attribute checked into a dict, then every convention's readings, ``derive``);
* ``reader``: chainlat's whole quick reader (``quick_spans``: ids, times and values
  checked, a record and a traced span a span), the attributes included.

``breakdown_check.py`` runs them as the stages ``least``, ``least_attributes`` and
``least_reader``; ``callgrind_check.py --stages`` counts them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from msgspec import UNSET

from chainlat.traces._fast import _decode, _decode_attributes, _derive, quick_spans

DUTIES = ("attributes", "reader")

_KIND = "chainlat.step.kind"
_TTFT = "chainlat.latency.ttft_ms"
_TOTAL = "chainlat.chain.total_ms"

Facts = tuple[Any, Any]
"""A span's kind, and a model call's first token or a workflow's recorded total (ms)."""

Row = tuple[Any, str, int, int, Any, Any]
"""A span as the skeleton keeps it: parent, name, start and end (ns), and its facts."""


def _least_facts(blob: bytes) -> Facts:
    kind = number = None
    for item in _decode_attributes(blob) or ():
        key = item.key
        if key == _KIND:
            kind = item.value.stringValue
        elif key in (_TTFT, _TOTAL):
            number = item.value.doubleValue
    return kind, number


def _chainlat_facts(blob: bytes) -> Facts:
    readings, _ = _derive(_decode_attributes(blob))
    ttft = readings.ttft_ms
    return readings.kind, ttft if ttft is not None else readings.attributes.get(_TOTAL)


def _skeleton_traces(path: Path, facts_of: Callable[[bytes], Facts]) -> dict[str, list[Row]]:
    traces: dict[str, list[Row]] = {}
    cache: dict[bytes, Facts] = {}  # as chainlat's reader, bounded
    nothing: Facts = (None, None)
    with path.open("rb") as f:
        for line in f:
            if not line.strip():
                continue
            for resource in _decode(line).resourceSpans:
                for scope in resource.scopeSpans or ():
                    for span in scope.spans or ():
                        facts = nothing
                        if span.attributes is not UNSET:
                            blob = bytes(span.attributes)
                            found = cache.get(blob)
                            if found is None:
                                found = cache[blob] = facts_of(blob)
                                if len(cache) > 4096:
                                    cache.clear()
                            facts = found
                        traces.setdefault(span.traceId, []).append(
                            (
                                span.parentSpanId,
                                span.name,
                                int(span.startTimeUnixNano),
                                int(span.endTimeUnixNano),
                                *facts,
                            )
                        )
    return traces


def _reader_traces(path: Path) -> dict[str, list[Row]]:
    traces: dict[str, list[Row]] = {}
    with path.open("rb") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            spans = quick_spans(line, f"{path}:{number}")
            if spans is None:
                raise ValueError(f"{path}:{number}: not in the common layout")
            for trace_id, _, traced in spans:
                rec = traced.record
                ttft = rec.ttft_ms
                traces.setdefault(trace_id, []).append(
                    (
                        rec.parent_id,
                        rec.name,
                        rec.start_ns,
                        rec.end_ns,
                        rec.kind,
                        ttft if ttft is not None else traced.attributes.get(_TOTAL),
                    )
                )
    return traces


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)]


def least(path: Path, duty: str | None = None) -> dict[str, float]:
    """The benchmark budgets' figures (p95 and maximum total, p95 inference, the model
    step's p95 and first token p95), worked out with the least work, or with one of
    chainlat's ``DUTIES`` added; see the module's text."""
    if duty == "reader":
        traces = _reader_traces(path)
    else:
        traces = _skeleton_traces(path, _chainlat_facts if duty == "attributes" else _least_facts)
    totals: list[float] = []
    inference: list[float] = []
    step: list[float] = []
    ttfts: list[float] = []
    for spans in traces.values():
        spent = 0.0
        for parent, name, start, end, kind, number in spans:
            if not parent:
                totals.append((end - start) / 1e6 if number is None else number)
            elif kind == "inference":
                spent += (end - start) / 1e6
                if name == "chat gpt-4o":
                    step.append((end - start) / 1e6)
                    if number is not None:
                        ttfts.append(number)
        inference.append(spent)
    return {
        "total_p95": _p95(totals),
        "total_max": max(totals),
        "inference_p95": _p95(inference),
        "step_p95": _p95(step),
        "ttft_p95": _p95(ttfts),
    }
