"""compare: grouping by variant, Wilson intervals, the Pareto front, outcomes files, the chart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import chainlat
from chainlat._core.rollup import SpanRecord
from chainlat._core.runs import TracedSpan, WorkflowRun
from chainlat.analysis.tradeoff import (
    Outcome,
    SplitPart,
    compare,
    load_outcomes,
    wilson_interval,
)
from chainlat.report import tradeoff_figure
from chainlat.report import tradeoff_page as html_page
from chainlat.testing import Capture
from support.voice import voice_turn

MS = 1_000_000


def run(
    index: int, variant: str | None, total_ms: float, success: bool | None, score: float = 0.5
) -> WorkflowRun:
    start = index * 10_000 * MS
    root = TracedSpan(
        SpanRecord(1, None, "invoke_workflow w", start, start + round(total_ms * MS), "workflow")
    )
    step = TracedSpan(
        SpanRecord(2, 1, "chat m", start, start + round(total_ms * 0.8 * MS), "inference")
    )
    return WorkflowRun.from_spans(
        "w",
        root,
        (step,),
        trace_id=f"{index:032x}",
        variant=variant,
        success=success,
        score=score if success is not None else None,
    )


def batch(
    variant: str | None, totals: list[float], successes: int, start: int = 0
) -> list[WorkflowRun]:
    return [run(start + i, variant, total, i < successes) for i, total in enumerate(totals)]


def test_wilson_interval_matches_published_values() -> None:
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert wilson_interval(50, 100) == pytest.approx((0.4038, 0.5962), abs=1e-4)
    with pytest.raises(ValueError, match="at least one trial"):
        wilson_interval(0, 0)


def test_variants_get_percentiles_split_and_success_rate() -> None:
    runs = batch("large", [100.0 + i for i in range(20)], 18) + batch(
        "small", [40.0 + i for i in range(20)], 15, start=20
    )
    comparison = compare(runs)
    large, small = comparison.variants
    assert (large.variant, large.runs) == ("large", 20)
    assert (large.total.p50, large.total.p95, large.total.p99) == (109, 118, 119)
    assert large.success is not None and small.success is not None
    assert (large.success.successes, large.success.trials) == (18, 20)
    assert large.success.rate == 0.9
    assert (large.success.low, large.success.high) == pytest.approx(wilson_interval(18, 20))
    assert large.share["inference"] == pytest.approx(0.8)
    assert large.share["overhead"] == pytest.approx(0.2)
    assert large.split_p50["inference"] == pytest.approx(109 * 0.8)
    assert large.score_mean == 0.5
    # The small planner is faster, the large more successful: both on the front.
    assert large.pareto and small.pareto


def test_a_dominated_variant_is_off_the_front() -> None:
    runs = (
        batch("a", [100.0] * 10, 9)
        + batch("b", [200.0] * 10, 8, start=10)  # slower and less successful than a
        + batch("c", [50.0] * 10, 5, start=20)
        + [run(30 + i, None, 10.0, None) for i in range(5)]
    )
    by_name = {v.variant: v for v in compare(runs).variants}
    assert (by_name["a"].pareto, by_name["b"].pareto, by_name["c"].pareto) == (True, False, True)
    assert by_name["(none)"].success is None
    assert not by_name["(none)"].pareto


def test_an_outcomes_file_overrides_the_traces(tmp_path: Path) -> None:
    runs = batch("v", [10.0, 20.0, 30.0], 0)
    file = tmp_path / "outcomes.jsonl"
    file.write_text(
        json.dumps({"trace_id": f"{0:032x}", "success": True, "score": 1})
        + "\n\n"
        + json.dumps({"trace_id": f"{1:032X}", "success": True})
        + "\n"
    )
    assert load_outcomes(file)[f"{1:032x}"] == Outcome(True, None)
    [v] = compare(runs, outcomes=file).variants
    assert v.success is not None and (v.success.successes, v.success.trials) == (2, 3)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{nope", "outcomes.jsonl:1: not valid JSON"),
        ('{"trace_id": "abc", "success": true}', "trace_id: expected 32 hex digits"),
        ('{"trace_id": "' + "0" * 32 + '", "success": "yes"}', "success: expected true or false"),
        ('{"trace_id": "' + "0" * 32 + '", "score": "high"}', "score: expected a number"),
        ('{"trace_id": "' + "0" * 32 + '"}', "expected success, score or both"),
        ('{"trace_id": "' + "0" * 32 + '", "ok": true}', "ok: unknown key"),
        ("[1]", "expected an object"),
    ],
)
def test_a_bad_outcomes_line_names_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    file = tmp_path / "outcomes.jsonl"
    file.write_text(line + "\n")
    with pytest.raises(chainlat.InputError) as caught:
        load_outcomes(file)
    assert message in str(caught.value)
    assert str(caught.value).startswith(str(file))


def test_no_run_is_an_input_error() -> None:
    with pytest.raises(chainlat.InputError, match="no workflow run of workflow 'x'"):
        compare(batch("v", [1.0], 1), workflow="x")


def test_the_chart_marks_the_front_and_skips_variants_without_outcomes() -> None:
    runs = batch("a", [100.0] * 4, 3) + batch("b", [50.0] * 4, 2, start=4)
    runs += [run(9, "c", 10.0, None)]
    figure = tradeoff_figure(compare(runs))
    points, front = figure.data
    assert list(points.text) == ["a", "b"]
    assert list(points.marker.symbol) == ["star", "star"]
    assert list(front.x) == [50.0, 100.0]
    assert list(front.y) == [50.0, 75.0]
    page = html_page(compare(runs), sources="t.jsonl")
    assert page.startswith("<!DOCTYPE html>")
    assert 'id="chart-tradeoff"' in page
    assert "https://cdn" not in page.split("<script", 1)[0]  # plotly.js is inlined, not fetched


# -- the first output of voice runs by stage -------------------------------------------------


def _voice_variants(cap: Capture) -> list[WorkflowRun]:
    """Two variants of the support voice turn (tests/support/voice.py): ``fast`` with 120 ms
    of speech to text, ``slow`` with 200 ms; every other stage the same."""
    from chainlat.traces.sdk import runs_from_spans

    for variant, stt_ms in (("fast", 120), ("slow", 200)):
        for _ in range(3):
            voice_turn(cap, stt_ms=stt_ms, variant=variant)
    return list(runs_from_spans(cap.spans()))


def test_each_variant_has_the_first_output_split_of_first_output_parts(cap: Capture) -> None:
    """The parts are each run's first_output_parts, never recomputed: the same numbers."""
    from chainlat._core.stats import first_output_parts

    runs = _voice_variants(cap)
    fast, slow = compare(runs).variants
    expected = first_output_parts(runs[0].rollup)
    assert expected is not None
    assert {part: found.p50 for part, found in fast.first_output_split.items()} == expected
    assert fast.first_output_split["speech_to_text"] == SplitPart(3, 120.0, 120.0, 120.0)
    assert slow.first_output_split["speech_to_text"].p95 == 200.0
    assert fast.first_output_split["model"].p50 == 220.0
    assert fast.first_output_split["text_to_speech"].p50 == 120.0
    assert "end_of_turn" not in fast.first_output_split  # the trace does not say when


def test_split_changes_are_before_after_and_delta_against_the_first_variant(
    cap: Capture,
) -> None:
    comparison = compare(_voice_variants(cap))
    fast, slow = comparison.variants
    assert comparison.split_changes(fast) == []  # the baseline itself
    changes = {c.part: c for c in comparison.split_changes(slow)}
    assert list(changes) == [
        "speech_to_text", "model", "text_to_speech", "end_of_turn", "data", "tool", "overhead",
    ]  # fmt: skip
    stt = changes["speech_to_text"]
    assert (stt.before, stt.after) == (
        fast.first_output_split["speech_to_text"],
        slow.first_output_split["speech_to_text"],
    )
    assert (stt.p50_delta, stt.p95_delta) == (80.0, 80.0)
    assert changes["text_to_speech"].p95_delta == 0.0
    assert changes["end_of_turn"].p50_delta is None


def test_a_variant_without_voice_runs_has_no_split() -> None:
    comparison = compare(batch("a", [100.0] * 3, 2) + batch("b", [90.0] * 3, 2, start=3))
    assert all(not v.first_output_split for v in comparison.variants)
    assert comparison.split_changes(comparison.variants[1]) == []


def test_text_json_and_markdown_show_each_stage_before_after_and_change(cap: Capture) -> None:
    from chainlat.report.tables import renderables_markdown
    from chainlat.report.text import render_text
    from chainlat.report.tradeoff import compare_json, compare_text

    comparison = compare(_voice_variants(cap))
    text = render_text([compare_text(comparison)], width=200)
    assert "voice-turn: first output by stage, slow against fast (ms)" in text
    markdown = renderables_markdown([compare_text(comparison)])
    assert "| speech to text | 120.0 | 200.0 | +80.0 | 120.0 | 200.0 | +80.0 |" in markdown
    assert "| text to speech | 120.0 | 120.0 | +0.0 | 120.0 | 120.0 | +0.0 |" in markdown
    assert "| end of turn | - | - | - | - | - | - |" in markdown
    document = compare_json(comparison)
    assert document["variants"][0]["first_output_split"]["model"] == {
        "runs": 3, "p50": 220.0, "p95": 220.0, "p99": 220.0,
    }  # fmt: skip
    (change,) = document["first_output_split_changes"]
    assert (change["baseline"], change["variant"]) == ("fast", "slow")
    assert change["parts"]["speech_to_text"] == {
        "p50_before": 120.0, "p50_after": 200.0, "p50_delta": 80.0,
        "p95_before": 120.0, "p95_after": 200.0, "p95_delta": 80.0,
    }  # fmt: skip


def test_one_voice_variant_shows_its_stages_without_a_change(cap: Capture) -> None:
    from chainlat.report.tables import renderables_markdown
    from chainlat.report.tradeoff import compare_json, compare_text

    runs = [r for r in _voice_variants(cap) if r.variant == "fast"]
    comparison = compare(runs)
    markdown = renderables_markdown([compare_text(comparison)])
    assert "**voice-turn: first output by stage (ms)**" in markdown
    assert "| model | 3 | 220.0 | 220.0 | 220.0 |" in markdown
    assert "| end of turn | 0 | - | - | - |" in markdown
    assert compare_json(comparison)["first_output_split_changes"] == []


def test_a_plain_workflow_json_has_no_split() -> None:
    from chainlat.report.tradeoff import compare_json

    document = compare_json(compare(batch("a", [100.0] * 3, 2)))
    assert document["variants"][0]["first_output_split"] is None
    assert document["first_output_split_changes"] == []


def test_the_compare_page_shows_each_stage_before_after_and_change(cap: Capture) -> None:
    page = html_page(compare(_voice_variants(cap)))
    section = page[page.index('<section id="first-output-split">') :]
    assert "<caption>voice-turn: slow against fast (ms)</caption>" in section
    assert (
        '<tr><td>speech to text</td><td class="n">120.0</td><td class="n">200.0</td>'
        '<td class="n">+80.0</td><td class="n">120.0</td><td class="n">200.0</td>'
        '<td class="n">+80.0</td></tr>'
    ) in section
    assert 'id="first-output-split"' not in html_page(compare(batch("a", [100.0] * 3, 2)))


def test_compare_prints_the_split_of_a_voice_trace_file(
    cap: Capture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the command: variants recorded on the workflow span, read back from a file."""
    from chainlat._runtime.otlp_json import encode_request
    from chainlat.cli import main

    lines = []
    for variant, stt_ms in (("fast", 120), ("slow", 200)):
        for _ in range(3):
            voice_turn(cap, stt_ms=stt_ms, variant=variant)
        lines.append(json.dumps(encode_request(cap.spans())))
        cap.clear()
    traces = tmp_path / "voice.jsonl"
    traces.write_text("\n".join(lines) + "\n")
    assert main(["compare", str(traces), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    (change,) = document["first_output_split_changes"]
    assert change["parts"]["speech_to_text"]["p95_delta"] == 80.0
    assert main(["compare", str(traces), "--format", "markdown"]) == 0
    assert "| speech to text | 120.0 | 200.0 | +80.0 |" in capsys.readouterr().out


def test_a_first_output_that_is_a_bound_is_in_no_variants_percentiles(cap: Capture) -> None:
    """Variant ``own``: chainlat's call, its end the first output (measured, 40 ms). Variant
    ``foreign``: another instrumentation's call that says nothing of streaming (rule 17 of
    docs/attributes.md), its first output a bound: left out of the percentiles, counted."""
    from chainlat.report.text import render_text
    from chainlat.report.tradeoff import compare_json, compare_text
    from chainlat.traces.sdk import runs_from_spans
    from support.sdk_traces import foreign_chat

    for _ in range(2):
        with chainlat.workflow("w", variant="own", tracer_provider=cap.provider):
            with chainlat.inference("m", tracer_provider=cap.provider):
                cap.clock.advance(ms=40)
        with chainlat.workflow("w", variant="foreign", tracer_provider=cap.provider):
            foreign_chat(cap, after_ms=5, took_ms=40)
    comparison = compare(list(runs_from_spans(cap.spans())))
    by_name = {v.variant: v for v in comparison.variants}
    assert by_name["own"].first_output is not None
    assert (by_name["own"].first_output.p95, by_name["own"].first_output_bounds) == (40.0, 0)
    assert (by_name["foreign"].first_output, by_name["foreign"].first_output_bounds) == (None, 2)
    rows = {v["variant"]: v for v in compare_json(comparison)["variants"]}
    assert rows["foreign"]["first_output_bound_runs"] == 2
    text = render_text([compare_text(comparison)], width=200)
    assert "first output, foreign: 2 of 2 runs' is a bound, not a measurement" in text


def test_a_turn_whose_start_is_unknown_is_a_bound_in_its_variant(cap: Capture) -> None:
    """Rule 16 of docs/attributes.md: a turn that says its start is no end of the caller's
    words (``chainlat.workflow.start_unknown``) has a first output that is a bound, which
    the run carries and its rollup does not: left out of its variant's percentiles too."""
    from chainlat._core import attributes as attr
    from chainlat.traces.sdk import runs_from_spans

    for variant in ("known", "unknown", "known", "unknown"):
        with chainlat.workflow("w", variant=variant, tracer_provider=cap.provider) as turn:
            if variant == "unknown":
                turn.set_attribute(attr.WORKFLOW_START_UNKNOWN, "semantic_vad")
            cap.clock.advance(ms=30)
            turn.first_output()
            cap.clock.advance(ms=10)
    by_name = {v.variant: v for v in compare(list(runs_from_spans(cap.spans()))).variants}
    assert by_name["known"].first_output is not None
    assert (by_name["known"].first_output.p95, by_name["known"].first_output_bounds) == (30.0, 0)
    assert (by_name["unknown"].first_output, by_name["unknown"].first_output_bounds) == (None, 2)
