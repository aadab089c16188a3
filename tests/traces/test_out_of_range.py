"""A number out of range (1e308 ms recorded on a workflow span) costs its attribute, counted in
one warning, never the file (``OverflowError: intermediate overflow in fsum`` before); an
event time out of range costs the event."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import chainlat
from chainlat._runtime.otlp_json import encode_request
from chainlat.cli import main
from chainlat.testing import capture
from chainlat.traces._fast import quick_spans
from support.fast_reader import ORIGIN, one_line


def _file(path: Path, key: str, value: dict[str, object]) -> Path:
    with capture(fake_clock=True) as cap:
        for _ in range(2):
            with chainlat.workflow("chat", tracer_provider=cap.provider):
                with chainlat.inference("gpt-4o", tracer_provider=cap.provider):
                    cap.clock.advance(ms=10)
        document = encode_request(cap.spans())
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                span["attributes"] = [a for a in span["attributes"] if a["key"] != key]
                span["attributes"].append({"key": key, "value": value})
    path.write_text(json.dumps(document) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("chainlat.chain.total_ms", {"doubleValue": 1e308}),
        ("chainlat.chain.total_ms", {"doubleValue": -1e308}),
        ("gen_ai.usage.input_tokens", {"doubleValue": 1e308}),
        ("chainlat.sampling.probability", {"doubleValue": 5e-324}),
        ("gen_ai.usage.input_tokens", {"intValue": "9" * 400}),
    ],
    ids=["total-1e308", "total-minus-1e308", "tokens-1e308", "probability-5e-324", "400-digits"],
)
def test_a_number_out_of_range_costs_its_attribute_not_the_file(
    key: str, value: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path / "t.jsonl", key, value)
    assert main(["report", str(path), "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["workflows"]["chat"]["runs"] == 2
    assert "Traceback" not in captured.err and "Overflow" not in captured.err


@pytest.mark.parametrize("event", ["gen_ai.content.first_token", "exception", "other"])
@pytest.mark.parametrize("at", ["9" * 400, str(2**64), "-1"])
def test_an_event_time_out_of_range_costs_the_event_not_the_file(
    event: str, at: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An event after a span's end extends the span to it: a time past uint64 made the
    # total an integer too large for a float (OverflowError, the file not read).
    workflow = [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}}]
    line = one_line(workflow, events=[{"name": event, "timeUnixNano": at}])
    assert quick_spans(line, ORIGIN) is None  # left to the checking path
    path = tmp_path / "t.jsonl"
    path.write_bytes(line + b"\n")
    code = main(["report", str(path), "--format", "json"])
    captured = capsys.readouterr()
    assert "OverflowError" not in captured.err
    assert code == 0, captured.err
    assert json.loads(captured.out)["workflows"]["w"]["quantities"]["total"]["max_ms"] == 1000.0
