"""A Pipecat turn with no ``conversation`` above it (a trace of one turn, as a sampler or a
split export leaves it) starts by the same rules as one inside its conversation
(`chainlat._core.turn_start`): the recorded turns of tests/data/foreign/pipecat, each cut
out of its conversation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chainlat.traces import read_runs
from support.tracegen import DATA_DIR

FOREIGN = DATA_DIR / "foreign" / "pipecat"


def _lone_turn(source: Path, number: str, tmp_path: Path) -> tuple[Path, int]:
    """The turn numbered ``number`` of ``source`` and the spans under it, the turn made the
    root of its trace (its parent, the conversation, left out), and where Pipecat opened
    it."""
    spans: list[dict[str, object]] = []
    for line in source.read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                spans += scope["spans"]
    turn = next(s for s in spans if s["name"] == "turn" and _number(s) == number)
    kept = [dict(turn, parentSpanId="")]
    kept += [s for s in spans if s.get("parentSpanId") == turn["spanId"]]
    batch = {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "pipecat"}, "spans": kept}]}]}
    path = tmp_path / f"turn-{number}.jsonl"
    path.write_text(json.dumps(batch) + "\n")
    return path, int(str(turn["startTimeUnixNano"]))


def _number(span: dict[str, object]) -> str | None:
    """A span's ``turn.number``, as text (OTLP JSON writes it as an ``intValue``)."""
    for kv in span.get("attributes", []):  # type: ignore[attr-defined]
        if kv["key"] == "turn.number":
            return str(next(iter(kv["value"].values())))
    return None


def _in_conversation(source: Path, number: str) -> int:
    (run,) = [
        r for r in read_runs([source]) if r.root is not None
        and str(r.root.attributes.get("turn.number")) == number
    ]  # fmt: skip
    return run.start_ns


def test_a_lone_realtime_turn_starts_at_the_observers_end_of_the_words(tmp_path: Path) -> None:
    source = FOREIGN / "realtime-observer.jsonl"
    path, opened_ns = _lone_turn(source, "2", tmp_path)
    (run,) = read_runs([path])
    # The turn opened at 1796581414911224514; the observer's mark is 798.264382 ms later.
    assert opened_ns == 1796581414911224514
    assert run.start_ns == opened_ns + 798_264_382
    assert run.start_ns == _in_conversation(source, "2")


@pytest.mark.parametrize("number", ["1", "2", "3"])
def test_a_lone_cascade_turn_starts_at_its_stt_spans_first_byte(
    number: str, tmp_path: Path
) -> None:
    """No mark of the observer's on these turns: the end of the last ``stt`` less its
    ``metrics.ttfb``, as inside the conversation."""
    source = FOREIGN / "bargein-observer.jsonl"
    path, opened_ns = _lone_turn(source, number, tmp_path)
    (run,) = read_runs([path])
    assert run.start_ns == _in_conversation(source, number)
    assert run.start_ns > opened_ns  # moved from where Pipecat opened it
