"""An exporter that retries a batch the receiver already took (its request timed out on the
client's side, or a 503 then a resend) sends the same spans twice: each is counted once,
in the live lines, the counters and the file ``check`` and ``report`` read back."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest

from chainlat._core.runs import WorkflowRun
from chainlat.cli import main
from chainlat.receiver import Limits, Receiver
from chainlat.receiver.sink import RecentSpans
from chainlat.traces import read_runs
from support import grpc_export, received_span_ids, until

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
TRACE = b"\x5b" * 16
ROOT, STEP = b"\x01" * 8, b"\x02" * 8


def _request(*span_ids: bytes) -> bytes:
    """An ExportTraceServiceRequest (protobuf) of one run: a workflow and a 30 ms step, the
    spans named by ``span_ids`` (ROOT, STEP) only."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    if STEP in span_ids:
        step = spans.add()
        step.trace_id, step.span_id, step.parent_span_id = TRACE, STEP, ROOT
        step.name = "retrieve docs"
        step.start_time_unix_nano, step.end_time_unix_nano = T0 + MS, T0 + 31 * MS
    if ROOT in span_ids:
        root = spans.add()
        root.trace_id, root.span_id, root.name = TRACE, ROOT, "invoke_workflow support"
        root.start_time_unix_nano, root.end_time_unix_nano = T0, T0 + 32 * MS
        for key, value in (
            ("gen_ai.operation.name", "invoke_workflow"),
            ("gen_ai.workflow.name", "support"),
        ):
            attribute = root.attributes.add()
            attribute.key, attribute.value.string_value = key, value
    return request.SerializeToString()


def _post(receiver: Receiver, body: bytes, status: int = 200) -> None:
    url = f"http://127.0.0.1:{receiver.port}/v1/traces"
    headers = {"Content-Type": "application/x-protobuf"}
    assert httpx.post(url, content=body, headers=headers, timeout=10).status_code == status


def _export_grpc(receiver: Receiver, body: bytes) -> None:
    with grpc_export(receiver.grpc_port) as export:
        assert export(body, timeout=10) == b""


def test_the_same_request_posted_twice_is_one_run_everywhere(tmp_path: Path) -> None:
    """Posted twice at once (the client timed out on an answer already on its way): the
    file, the counters and the live lines held it twice, and check and report read two
    runs (the readers keep a span id read twice)."""
    runs: list[WorkflowRun] = []
    out = tmp_path / "received.jsonl"
    with Receiver(out, port=0, grpc_port=0, on_run=runs.append, settle_s=0.05) as receiver:
        body = _request(ROOT, STEP)
        _post(receiver, body)
        _post(receiver, body)  # the exporter's retry
    assert receiver.counters.spans == 2
    assert receiver.counters.requests == 1
    assert [run.workflow for run in runs] == ["support"]
    assert sorted(received_span_ids(receiver.out)) == [ROOT.hex(), STEP.hex()]
    (run,) = read_runs([receiver.out])
    assert run.total_ms == 32.0
    assert receiver.counters.warnings() == [
        "2 spans received again (an exporter's retry, the same trace and span id): counted once"
    ]


def test_a_retry_after_the_run_was_shown_is_not_shown_again(tmp_path: Path) -> None:
    runs: list[WorkflowRun] = []
    out = tmp_path / "received.jsonl"
    with Receiver(out, port=0, grpc_port=0, on_run=runs.append, settle_s=0.05) as receiver:
        body = _request(ROOT, STEP)
        _post(receiver, body)
        assert until(lambda: len(runs) == 1)
        _export_grpc(receiver, body)  # resent over the other protocol, which changes nothing
    assert len(runs) == 1
    assert receiver.counters.spans == 2 and receiver.counters.resent_spans == 2
    assert len(list(read_runs([receiver.out]))) == 1


def test_a_batch_holding_spans_sent_before_and_new_ones_writes_the_new_ones(
    tmp_path: Path,
) -> None:
    with Receiver(tmp_path / "received.jsonl", port=0, grpc_port=0) as receiver:
        _post(receiver, _request(STEP))
        _post(receiver, _request(ROOT, STEP))  # a re-batched resend, with the root now
    assert received_span_ids(receiver.out) == [STEP.hex(), ROOT.hex()]
    assert (receiver.counters.spans, receiver.counters.resent_spans) == (2, 1)
    (run,) = read_runs([receiver.out])
    assert run.total_ms == 32.0


def test_a_span_sent_again_past_the_window_is_written_again(tmp_path: Path) -> None:
    """The bound is what it says: with 1 span id remembered, STEP is forgotten once ROOT
    came, and STEP's resend is written."""
    limits = Limits(recent_spans=1)
    with Receiver(tmp_path / "r.jsonl", port=0, grpc_port=None, limits=limits) as receiver:
        _post(receiver, _request(STEP))
        _post(receiver, _request(STEP))
        _post(receiver, _request(ROOT))
        _post(receiver, _request(STEP))
    assert received_span_ids(receiver.out) == [STEP.hex(), ROOT.hex(), STEP.hex()]
    assert receiver.counters.resent_spans == 1


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full (a disk always full)")
def test_a_batch_the_file_refused_is_refused_again_when_resent_not_dropped() -> None:
    """The resend of a 503 is taken as new: remembered as written, it was answered 200 and
    its spans lost."""
    with Receiver("/dev/full", port=0, grpc_port=None) as receiver:
        _post(receiver, _request(ROOT, STEP), status=503)
        _post(receiver, _request(ROOT, STEP), status=503)
    assert (receiver.counters.unwritten, receiver.counters.resent_spans) == (2, 0)


def test_run_and_its_out_file_count_a_retried_batch_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``chainlat run`` end to end: CMD posts its batch twice; the live line, the summary
    and ``check`` of the --out file say one run."""
    monkeypatch.chdir(tmp_path)
    Path("budgets.toml").write_text('[workflows.support]\ntotal = "100ms"\n')
    Path("batch.bin").write_bytes(_request(ROOT, STEP))
    app = (
        "import os, httpx\n"
        "url = os.environ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']\n"
        "headers = {'Content-Type': 'application/x-protobuf'}\n"
        "for _ in range(2):\n"
        "    body = open('batch.bin', 'rb').read()\n"
        "    httpx.post(url, content=body, headers=headers, timeout=10).raise_for_status()\n"
    )
    Path("app.py").write_text(app)
    options = ["--budgets", "budgets.toml", "--wait", "0.2", "--out", "received.jsonl"]
    assert main(["run", *options, "--format", "json", "--", sys.executable, "app.py"]) == 0
    captured = capsys.readouterr()
    assert captured.err.count("support, total 32.0 ms") == 1, captured.err
    assert "2 spans received again" in captured.err
    assert json.loads(captured.out)["verdicts"][0]["runs"] == 1
    assert main(["check", "received.jsonl", "--budgets", "budgets.toml", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdicts"][0]["runs"] == 1


def test_recent_spans_forgets_the_oldest_and_what_was_not_written() -> None:
    recent = RecentSpans(3)

    def document(*span_ids: str) -> dict[str, object]:
        spans = [{"traceId": "ab" * 16, "spanId": span_id} for span_id in span_ids]
        return {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}

    first = document("01" * 8, "02" * 8, "02" * 8)
    taken, resent = recent.take(first)
    assert (len(taken), resent) == (2, 1)
    assert first["resourceSpans"] == [
        {"scopeSpans": [{"spans": [{"traceId": "ab" * 16, "spanId": "01" * 8},
                                   {"traceId": "ab" * 16, "spanId": "02" * 8}]}]}
    ]  # fmt: skip
    again = document("02" * 8)
    assert recent.take(again) == ([], 1) and again == {"resourceSpans": []}
    recent.forget(taken)  # not written: the resend is taken
    assert recent.take(document("01" * 8, "02" * 8))[1] == 0
    assert recent.take(document("01" * 8))[1] == 1
    # Upper-case hex is the same id; an id that is not hex is compared as text; a span
    # without an id is kept.
    assert recent.take(document("0" * 15 + "A"))[1] == 0
    assert recent.take(document("0" * 15 + "a"))[1] == 1
    assert recent.take(document("", "not hex", "not hex", ""))[1] == 1
    # The oldest go first: 3 ids held, "01" * 8 among the first taken and gone.
    assert recent.take(document("01" * 8))[1] == 0
