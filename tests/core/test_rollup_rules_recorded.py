"""A rollup recorded on a workflow span is checked against the span: an impossible one (a
negative part, parts that do not sum or outlast the span) is rebuilt from the spans."""

from __future__ import annotations

import math
from dataclasses import fields, replace
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from opentelemetry import trace

from chainlat._core.recorded import _negative_part
from chainlat._core.rollup import Rollup, SpanRecord
from chainlat._core.runs import inconsistency
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat.testing import Capture
from chainlat.traces import ReadCounters, read_runs
from support.records import MS

# --- a recorded rollup is checked against its span ---------------------------------------


def test_an_impossible_recorded_rollup_is_rebuilt_from_the_spans_with_a_warning(
    cap: Capture, tmp_path: Path
) -> None:
    """A 5,000 ms workflow span recording ``total_ms = -100`` and ``cost_usd = -5`` (as a
    runtime given a negative price writes it) passed every limit; the spans say 5,000 ms."""
    p, clock = cap.provider, cap.clock
    tracer = p.get_tracer("hand-written")
    start = clock()
    recorded = {
        "chainlat.chain.total_ms": -100.0,
        "chainlat.chain.inference_ms": 0.0,
        "chainlat.chain.data_ms": 0.0,
        "chainlat.chain.tool_ms": 0.0,
        "chainlat.chain.overhead_ms": -100.0,
        "chainlat.chain.inference_count": 1,
        "chainlat.chain.cost_usd": -5.0,
    }
    root = tracer.start_span("invoke_workflow w", start_time=start, attributes={
        "chainlat.step.kind": "workflow", "gen_ai.workflow.name": "w", **recorded})  # fmt: skip
    call = tracer.start_span(
        "chat m",
        context=trace.set_span_in_context(root),
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
        start_time=start + 1000 * MS,
    )
    call.end(end_time=start + 4000 * MS)
    root.end(end_time=start + 5000 * MS)
    path = tmp_path / "traces.jsonl"
    exporter = JsonLinesSpanExporter(str(path))
    exporter.export(cap.spans())
    exporter.shutdown()
    counters = ReadCounters()
    [run] = read_runs([path], counters=counters)
    assert (run.rollup.total_ms, run.rollup.inference_ms, run.rollup.cost_usd) == (5000, 3000, None)
    assert run.rebuilt == "chainlat.chain.total_ms -100 is negative"
    [warning] = [w for w in counters.warnings() if "rollups recorded" in w]
    assert warning.startswith("1 rollups recorded on workflow spans are impossible")
    assert "chainlat.chain.total_ms -100 is negative" in warning


_PARTS = [
    f.name
    for f in fields(Rollup)
    if f.name
    not in (
        "critical_path",
        "unrecorded",
        "unrecorded_parts",
        "unusable",
        "unusable_values",
        "unusable_parts",
    )  # names, not parts
]


@given(st.dictionaries(st.sampled_from(_PARTS), st.sampled_from([-1.0, -0.0, 0.0, 2.0, math.nan])))
def test_a_negative_part_is_found_whatever_the_others_hold(values: dict[str, float]) -> None:
    """The parts are checked at once first: a negative part anywhere, NaN or not beside it,
    is still named, the first in the order of the chain attributes."""
    recorded = replace(Rollup(0.0, 0.0, 0.0, 0.0, 0.0), **values)  # type: ignore[arg-type]
    root = SpanRecord(1, None, "invoke_workflow w", 0, 100 * MS, "workflow")
    found = inconsistency(recorded, root)
    negative = _negative_part(recorded)
    assert bool(negative) == any(v < 0 for v in values.values())
    if negative:
        assert found == negative
    else:
        assert not found.endswith("is negative")


def test_a_recorded_rollup_whose_parts_do_not_sum_or_outlast_the_span_is_rebuilt() -> None:
    root = SpanRecord(1, None, "invoke_workflow w", 0, 100 * MS, "workflow")
    whole = Rollup(100.0, 60.0, 10.0, 0.0, 30.0)
    assert inconsistency(whole, root) == ""
    assert inconsistency(replace(whole, overhead_ms=0.0), root) == (
        "inference + data + tool + overhead is 70 ms, not chainlat.chain.total_ms 100"
    )
    assert inconsistency(replace(whole, total_ms=200.0, overhead_ms=130.0), root) == (
        "chainlat.chain.total_ms 200 is longer than the span (100 ms)"
    )
    assert inconsistency(replace(whole, cost_usd=-5.0), root) == (
        "chainlat.chain.cost_usd -5 is negative"
    )
