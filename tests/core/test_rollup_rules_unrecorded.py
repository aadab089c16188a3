"""A model call that ended before its own events has an unrecorded end: the figures it
leaves unknown are bounds, by both readers, in the rollup, the waterfall and the
statistics (OpenInference's ``OpenAI.astream_chat``, from tests/support/streams.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from chainlat._core.rollup import SpanRecord, compute_rollup
from chainlat._core.runs import WorkflowRun
from chainlat._core.stats import Stats
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat.report.common import stat_rows
from chainlat.report.waterfall import waterfall
from chainlat.testing import Capture
from chainlat.traces import _files, read_runs
from support import streams
from support.records import MS

# --- a model call that ended before its own events has an unrecorded end ----------------


def _both_readers(
    path: Path, monkeypatch: pytest.MonkeyPatch, *, roots: bool = False
) -> list[WorkflowRun]:
    """The run read by the quick reader and by the validating one."""
    [quick] = read_runs([path], roots=roots)
    with monkeypatch.context() as m:
        m.setattr(_files, "quick_spans", lambda line, origin: None)
        [slow] = read_runs([path], roots=roots)
    assert (quick, quick.spans) == (slow, slow.spans)
    return [quick, slow]


def test_a_model_call_that_ended_before_its_first_token_has_an_unrecorded_end(
    cap: Capture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Timed to its first token (rule 8) the stream is 60 ms; it was read for 60 ms more, and
    nothing in the trace says so: inference and overhead are bounds, not measurements; the
    data stage before it and the first output (a recorded event) are measured."""
    handle = streams.agent_with_stream(cap)
    assert handle is not None and handle.rollup is not None
    path = streams.write_traces(cap, tmp_path / "traces.jsonl")
    for r in (handle.rollup, *(run.rollup for run in _both_readers(path, monkeypatch))):
        assert (r.total_ms, r.inference_ms, r.data_ms, r.overhead_ms) == (165, 60, 30, 75)
        assert r.unrecorded == ("OpenAI.astream_chat",)
        assert r.unrecorded_parts == ("inference", "overhead")
        assert (r.first_output_ms, r.first_output_inference_ms) == (95, 60)
        assert [r.unrecorded_in(q) for q in ("total", "inference", "data", "overhead")] == [
            False, True, False, True,
        ]  # fmt: skip
        assert not r.unrecorded_in("first_output") and r.unrecorded_in("speech_to_text")


def test_an_unrecorded_end_is_found_under_a_plain_root_span_too(
    cap: Capture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    streams.agent_with_stream(cap, wrapped=False)
    path = streams.write_traces(cap, tmp_path / "traces.jsonl")
    for run in _both_readers(path, monkeypatch, roots=True):
        assert run.workflow == "agent"
        assert run.rollup.unrecorded == ("OpenAI.astream_chat",)
        assert run.rollup.inference_ms == 60


def test_a_call_timed_at_the_wire_has_its_end_recorded(
    cap: Capture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``instrument_httpx()`` the wire span is the stream's twin (rule 10) and times it
    (rule 3): 118 ms of inference, measured."""
    handle = streams.agent_with_stream(cap, wire=True)
    assert handle is not None and handle.rollup is not None
    path = streams.write_traces(cap, tmp_path / "traces.jsonl")
    for r in (handle.rollup, *(run.rollup for run in _both_readers(path, monkeypatch))):
        assert (r.inference_count, r.inference_ms) == (1, 118)
        assert (r.unrecorded, r.unrecorded_parts) == ((), ())


def test_a_step_running_past_the_recorded_end_leaves_data_and_tool_time_unknown_too(
    cap: Capture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A data stage beside the stream, to 120 ms: the trace's path goes through it (80 ms of
    data, no inference); had the stream's end been recorded (155 ms), the path would have
    gone through the stream. The first output (95 ms) still comes before any unknown."""
    handle = streams.agent_with_stream(cap, data_until_ms=120)
    assert handle is not None and handle.rollup is not None
    path = streams.write_traces(cap, tmp_path / "traces.jsonl")
    for r in (handle.rollup, *(run.rollup for run in _both_readers(path, monkeypatch))):
        assert (r.inference_ms, r.data_ms) == (0, 110)
        assert r.unrecorded_parts == ("inference", "overhead", "data", "tool")


def test_a_rollup_recorded_without_the_mark_is_rebuilt_from_the_spans(
    cap: Capture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trace written before the rule: the rollup on the workflow span says nothing of the
    unrecorded end; the readers rebuild it from the spans, which do."""
    streams.agent_with_stream(cap)
    spans = cap.spans()
    path = tmp_path / "old.jsonl"
    exporter = JsonLinesSpanExporter(str(path))
    exporter.export(spans)
    exporter.shutdown()
    text = path.read_text()
    for key in ("chainlat.chain.unrecorded", "chainlat.chain.unrecorded_parts"):
        assert f'"{key}"' in text
    lines = [_without_mark(line) for line in text.splitlines()]
    path.write_text("\n".join(lines) + "\n")
    for run in _both_readers(path, monkeypatch):
        assert run.rollup.unrecorded == ("OpenAI.astream_chat",)


def _without_mark(line: str) -> str:
    doc = json.loads(line)
    for resource in doc["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                span["attributes"] = [
                    a
                    for a in span.get("attributes", [])
                    if not a["key"].startswith("chainlat.chain.unrecorded")
                ]
    return json.dumps(doc)


def test_the_report_shows_an_unrecorded_end_as_a_bound(cap: Capture, tmp_path: Path) -> None:
    """The waterfall and the statistics say which figures are bounds, and what times them."""
    streams.agent_with_stream(cap)
    [run] = read_runs([streams.write_traces(cap, tmp_path / "traces.jsonl")])
    text = waterfall(run)
    assert "ended before its own events: took at least this" in text
    assert "inference at least 60.0 ms, data 30.0 ms, tool 0.0 ms, overhead at most 75.0 ms" in text
    assert "the end of OpenAI.astream_chat is not recorded" in text
    stats = Stats()
    stats.add(run)
    labels = [row.label for row in stat_rows(stats.workflows["agent"])]
    assert "inference (critical path) [a bound in 1/1 runs]" in labels
    assert "data (critical path)" in labels and "first output" in labels


def _stream_record(span_id: int, start_ms: int, first_token_ms: int) -> SpanRecord:
    """A stream span ended 1 ms in, timed to its first token (rule 8): end not recorded."""
    return SpanRecord(
        span_id, 1, f"stream {span_id}", start_ms * MS, (start_ms + first_token_ms) * MS,
        "inference", ttft_ms=first_token_ms, model="m", source="openinference",
        extended=True, unrecorded_end=True,
    )  # fmt: skip


def test_two_unrecorded_ends_leave_the_whole_split_and_a_later_wait_unknown() -> None:
    """Stream A's real end may fall anywhere up to the run's end, past stream B's start: the
    path before B may differ too. The first output, B's first token, is a recorded instant;
    its wait runs past A's recorded end, so its split is not."""
    root = SpanRecord(1, None, "agent", 0, 200 * MS, "workflow")
    r = compute_rollup(root, [_stream_record(2, 10, 10), _stream_record(3, 50, 10)])
    assert r.unrecorded == ("stream 2", "stream 3")
    assert r.unrecorded_parts == ("inference", "overhead", "data", "tool", "first_output_split")
    assert r.first_output_ms == 60
    assert not r.unrecorded_in("first_output")
    assert r.unrecorded_in("first_output_speech_to_text")


def test_a_first_output_taken_from_an_unrecorded_end_is_not_known() -> None:
    """No first token at all (another event came after the end), and the call says it did
    not stream: the first output is the end of the call that ended last, which the trace
    does not hold."""
    root = SpanRecord(1, None, "agent", 0, 200 * MS, "workflow")
    call = replace(_stream_record(2, 10, 10), ttft_ms=None, streamed=False)
    r = compute_rollup(root, [call])
    assert r.first_output_ms == 20
    assert r.unrecorded_parts == ("inference", "overhead", "first_output")
    assert r.unusable == ()


def test_a_call_that_may_have_streamed_bounds_the_first_output_at_its_start() -> None:
    """The same call, saying nothing of streaming (rule 17): its first token may have come
    any time after its start, before its recorded end too, so the first output is at least
    its start, 10 ms, and not the recorded end."""
    root = SpanRecord(1, None, "agent", 0, 200 * MS, "workflow")
    call = replace(_stream_record(2, 10, 10), ttft_ms=None)
    r = compute_rollup(root, [call])
    assert r.first_output_ms == 10
    assert r.unusable == ("stream 2",)
    assert r.unusable_parts == ("first_output", "first_output_split")
    assert r.bound_in("first_output")
