"""A Pipecat speech-to-speech pipeline's turns (tests/data/foreign/pipecat/realtime-observer.jsonl,
recorded from the interop case ``pipecat-realtime``, with the agent's truth beside): no
``stt`` span says where the caller stopped; chainlat's observer wrote it on each turn, and
the turn starts there, its first output at the first audio frame at the output transport."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chainlat.traces import read_runs
from support.tracegen import DATA_DIR, Spans, spans_rewritten

FOREIGN = DATA_DIR / "foreign" / "pipecat"
TRACES = FOREIGN / "realtime-observer.jsonl"
TRUTH = json.loads((FOREIGN / "realtime-observer.truth.json").read_text())


def _with_the_end_of_words(tmp_path: Path, value: dict[str, object] | None) -> Path:
    """The traces with each turn's ``chainlat.workflow.speech_end_ms`` set to ``value`` (an
    OTLP JSON value), or without it (None)."""

    def edit(spans: Spans) -> Spans:
        for span in spans:
            kept = [
                kv
                for kv in span.get("attributes", [])
                if kv["key"] != "chainlat.workflow.speech_end_ms"
            ]
            if value is not None and len(kept) < len(span.get("attributes", [])):
                kept.append({"key": "chainlat.workflow.speech_end_ms", "value": value})
            span["attributes"] = kept
        return spans

    return spans_rewritten(TRACES, tmp_path / "changed.jsonl", edit)


def test_each_turn_starts_at_the_end_of_the_words_and_waits_to_the_first_frame() -> None:
    runs = sorted(read_runs([TRACES]), key=lambda r: r.start_ns)
    assert [r.workflow for r in runs] == ["turn"] * 3
    for run, words, frame in zip(runs, TRUTH["words_end_ns"], TRUTH["first_frame_ns"], strict=True):
        # The observer's stamp is the agent's, in µs of a float: within 1 µs.
        assert abs(run.start_ns - words) < 1_000
        assert run.first_output_ms is not None
        wait_ms = (frame - words) / 1e6
        # The observer's mark: the frame's push once written less its playing time.
        assert run.first_output_ms == pytest.approx(wait_ms, abs=10.0)
        assert run.first_output_ms >= wait_ms
        assert [(s.name, s.kind) for s in run.steps] == [("llm_response", "inference")]
        assert run.incomplete is None


def test_without_the_observer_a_turn_starts_where_pipecat_opened_it(tmp_path: Path) -> None:
    """The first turn at the pipeline's start, the others when the caller began."""
    runs = sorted(read_runs([_with_the_end_of_words(tmp_path, None)]), key=lambda r: r.start_ns)
    early_ms = [(w - r.start_ns) / 1e6 for r, w in zip(runs, TRUTH["words_end_ns"], strict=True)]
    assert all(ms > 700 for ms in early_ms), early_ms


@pytest.mark.parametrize(
    "value",
    [{"doubleValue": -5.0}, {"doubleValue": 1e9}, {"stringValue": "800"}, {"boolValue": True}],
)
def test_an_end_of_words_outside_its_turn_or_no_number_moves_nothing(
    tmp_path: Path, value: dict[str, object]
) -> None:
    plain = sorted(read_runs([_with_the_end_of_words(tmp_path, None)]), key=lambda r: r.start_ns)
    runs = sorted(read_runs([_with_the_end_of_words(tmp_path, value)]), key=lambda r: r.start_ns)
    assert [r.start_ns for r in runs] == [r.start_ns for r in plain]


def test_the_end_of_words_is_read_in_ms_from_the_turns_start(tmp_path: Path) -> None:
    plain = sorted(read_runs([_with_the_end_of_words(tmp_path, None)]), key=lambda r: r.start_ns)
    moved = _with_the_end_of_words(tmp_path, {"doubleValue": 100.25})
    runs = sorted(read_runs([moved]), key=lambda r: r.start_ns)
    assert [r.start_ns - p.start_ns for r, p in zip(runs, plain, strict=True)] == [100_250_000] * 3
