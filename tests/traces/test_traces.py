"""Reading runs from chainlat's own files, a Collector's, Jaeger JSON and Jaeger's HTTP API."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import chainlat
from chainlat.testing import Capture
from chainlat.traces import (
    KEPT_ATTRIBUTES,
    FileSource,
    JaegerSource,
    ReadCounters,
    parse_lookback,
    read_runs,
    read_traces,
)
from support import FakeJaeger, StartFakeJaeger
from support.tracegen import DATA_DIR, ChatRun, graded_file, write_runs

RUNS = [
    ChatRun(retrieve_ms=100, ttft_ms=80, chat_ms=300, glue_ms=10),
    ChatRun(retrieve_ms=50, ttft_ms=40, chat_ms=200, tool_ms=30, glue_ms=5, cached=True),
    ChatRun(retrieve_ms=70, ttft_ms=60, chat_ms=250, glue_ms=20, fail=True),
]


@pytest.mark.parametrize(
    "batch", [None, 3, 512], ids=["span-per-line", "batches-of-3", "one-batch"]
)
def test_chainlat_files_give_exact_runs(tmp_path: Path, batch: int | None) -> None:
    path = write_runs(tmp_path / "t.jsonl", RUNS, batch=batch)
    runs = list(read_runs([path]))
    assert [r.total_ms for r in runs] == [410.0, 285.0, 340.0]
    first, second, third = runs
    assert (first.rollup.data_ms, first.rollup.inference_ms, first.rollup.overhead_ms) == (
        100.0,
        300.0,
        10.0,
    )
    assert [(s.name, s.kind, s.duration_ms, s.ttft_ms) for s in first.steps] == [
        ("data retrieve-docs", "data", 100.0, None),
        ("chat gpt-4o", "inference", 300.0, 80.0),
    ]
    assert second.rollup.tool_ms == 30.0
    assert second.steps[1].cache_hit and second.rollup.cache_hits == 1
    assert third.error and not first.error
    assert all(r.workflow == "support-chat" and len(r.trace_id) == 32 for r in runs)


def test_gzip_files_are_recognised_by_their_content(tmp_path: Path) -> None:
    path = write_runs(tmp_path / "traces.data", RUNS, compress=True)
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert [r.total_ms for r in read_runs([path])] == [410.0, 285.0, 340.0]


def test_rollup_is_rebuilt_when_the_attributes_are_missing(tmp_path: Path) -> None:
    """The hand-written Collector file comes from another instrumentation: no chainlat.chain.*"""
    runs = list(read_runs([DATA_DIR / "collector-traces.jsonl"]))
    assert [r.trace_id for r in runs] == [
        "5b8efff798038103d269b633813fc60c",
        "0af7651916cd43dd8448eb211c80319c",
    ]
    first, second = runs
    # inside an HTTP server span; the HTTP client span under the model call is transparent
    assert (first.total_ms, first.rollup.data_ms, first.rollup.inference_ms) == (
        500.0,
        120.0,
        330.0,
    )
    assert first.rollup.overhead_ms == 50.0
    assert [(s.name, s.kind, s.ttft_ms) for s in first.steps] == [
        ("SELECT docs", "data", None),
        ("chat gpt-4o", "inference", 100.0),
    ]
    assert first.rollup.input_tokens == 812
    assert (second.total_ms, second.rollup.inference_ms, second.error) == (300.0, 200.0, True)


def test_jaeger_json_download(tmp_path: Path) -> None:
    runs = list(read_runs([DATA_DIR / "jaeger-traces.json"]))
    assert [(r.total_ms, r.rollup.data_ms, r.rollup.inference_ms) for r in runs] == [
        (400.0, 100.0, 280.0),  # rebuilt from the spans
        (900.0, 250.0, 600.0),  # read from the chainlat.chain.* tags
    ]
    assert runs[0].steps[1].ttft_ms == 60.0  # from the chainlat.first_token log
    assert runs[1].steps[1].ttft_ms == 150.5


def test_memory_holds_open_traces_not_the_file(tmp_path: Path) -> None:
    """Spans are dropped once their trace is judged: the peak does not grow with the file."""
    path = write_runs(tmp_path / "t.jsonl", [ChatRun()] * 200, batch=None)
    counters = ReadCounters()
    runs = sum(1 for _ in read_runs([path], counters=counters))
    assert (runs, counters.spans, counters.workflows, counters.late_spans) == (200, 600, 200, 0)
    # one span per line; a trace is judged DEFAULT_SETTLE_LINES lines after its root
    assert counters.peak_open_spans <= 3 + 8
    assert counters.peak_open_traces <= 4


def test_late_spans_are_counted_when_the_settle_window_is_too_short(tmp_path: Path) -> None:
    path = tmp_path / "late.jsonl"
    lines = (DATA_DIR / "collector-traces.jsonl").read_text().splitlines()
    # the root first, its children three lines later
    path.write_text("\n".join([lines[1], "", "", lines[0]]) + "\n")
    counters = ReadCounters()
    runs = list(read_runs([path], settle_lines=1, counters=counters))
    assert counters.late_spans == 3
    assert runs[0].steps == ()
    counters = ReadCounters()
    runs = list(read_runs([path], settle_lines=8, counters=counters))
    assert counters.late_spans == 0 and len(runs[0].steps) == 2


def test_pretty_printed_otlp_document(tmp_path: Path) -> None:
    line = (DATA_DIR / "collector-traces.jsonl").read_text().splitlines()[2]
    path = tmp_path / "v3-answer.json"
    path.write_text(json.dumps({"result": json.loads(line)}, indent=2))
    (run,) = read_runs([path])
    assert run.total_ms == 300.0


# --- whole traces -------------------------------------------------------------------------


def test_each_trace_gets_its_outcome_spans_however_late(cap: Capture, tmp_path: Path) -> None:
    path = graded_file(cap, tmp_path / "t.jsonl", gap_lines=50)
    counters = ReadCounters()
    traces = list(read_traces([path], counters=counters))
    assert [sorted(s.record.name for s in t.spans) for t in traces] == [
        ["chat big", "invoke_workflow agent", "record_outcome"]
    ] * 2
    outcomes = [s.attributes for t in traces for s in t.spans if s.record.name == "record_outcome"]
    assert [o["chainlat.outcome.success"] for o in outcomes] == [True, False]
    assert counters.late_spans == 0 and counters.spans == 6
    assert counters.peak_open_spans == 4  # the runs' spans: both judged before the outcomes came


def test_read_runs_does_not_look_for_late_outcome_spans(cap: Capture, tmp_path: Path) -> None:
    path = graded_file(cap, tmp_path / "t.jsonl", gap_lines=50)
    counters = ReadCounters()
    assert [r.total_ms for r in read_runs([path], counters=counters)] == [6.0, 6.0]
    assert counters.late_spans == 2  # the settle rule, unchanged: they came after their trace


def test_trace_spans_keep_the_attributes_the_analyses_read(cap: Capture, tmp_path: Path) -> None:
    (trace, _) = read_traces([graded_file(cap, tmp_path / "t.jsonl", gap_lines=0)])
    spans = {s.record.name: s for s in trace.spans}
    call = spans["chat big"].attributes
    assert (call["gen_ai.request.model"], call["gen_ai.usage.input_tokens"]) == ("big", 100)
    assert "gen_ai.provider.name" not in call  # not read by any analysis
    workflow = spans["invoke_workflow agent"].attributes
    assert workflow["chainlat.variant"] == "large"
    assert workflow["chainlat.chain.total_ms"] == 6.0
    assert spans["invoke_workflow agent"].origin == f"{tmp_path / 't.jsonl'}:2"
    (collector, _) = read_traces([DATA_DIR / "collector-traces.jsonl"])
    keys = {k for s in collector.spans for k in s.attributes}
    assert "db.system.name" in keys and "db.query.text" not in keys
    assert all(
        k in KEPT_ATTRIBUTES or k.startswith(("chainlat.chain.", "chainlat.latency."))
        for t in (trace, collector)
        for s in t.spans
        for k in s.attributes
    )


def test_the_quick_path_reads_spans_as_the_full_one_does(tmp_path: Path) -> None:
    """Every line the typed reader takes gives the spans the validating reader gives."""
    from support.fast_reader import assert_agree

    lines = write_runs(tmp_path / "t.jsonl", RUNS, batch=None).read_bytes().splitlines()
    lines += (DATA_DIR / "collector-traces.jsonl").read_bytes().splitlines()
    taken = sum(assert_agree(line) for line in lines)
    assert taken == len(lines) >= 10


def test_traces_and_runs_of_a_jaeger_download_agree() -> None:
    traces = list(read_traces([DATA_DIR / "jaeger-traces.json"]))
    runs = list(read_runs([DATA_DIR / "jaeger-traces.json"]))
    assert [r for t in traces for r in t.workflow_runs()] == runs
    assert [t.trace_id for t in traces] == [r.trace_id for r in runs]


# --- bad input ----------------------------------------------------------------------------


def _error(path: Path) -> str:
    with pytest.raises(chainlat.TraceSourceError) as caught:
        list(read_runs([path]))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_corrupt_line_is_skipped_counted_and_named(tmp_path: Path) -> None:
    """One bad line costs its own spans, not the file (issue 11, item 16)."""
    good = (DATA_DIR / "collector-traces.jsonl").read_text().splitlines()
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([good[0], '{"resourceSpans": [}', good[1]]) + "\n")
    counters = ReadCounters()
    runs = list(read_runs([path], counters=counters))
    assert runs and counters.bad_lines == 1
    assert counters.first_bad_line.startswith(f"{path}:2: not valid JSON (")


def test_a_file_where_no_line_parses_names_the_first(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"resourceSpans": [}\n{"nope": 1}\n')
    assert _error(path).startswith(f"{path}:1: not valid JSON (")


def test_a_document_the_standard_library_reads_is_refused_where_orjson_stops(
    tmp_path: Path,
) -> None:
    """NaN is JSON to the standard library, not to chainlat: the line and column it is at."""
    lines = ["{", ' "resourceSpans": [', "  {", '   "x": NaN', "  }", " ]", "}"]
    path = tmp_path / "t.json"
    path.write_text("\n".join(lines) + "\n")
    assert _error(path).startswith(f"{path}:4: not valid JSON (")
    assert "at column 9" in _error(path)


def test_bad_utf8_in_a_document_is_named_at_its_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b'{\n "resourceSpans": [\n  "ab\xffc"\n ]\n}\n')
    assert _error(path) == f"{path}:3: not valid JSON (not UTF-8 text: byte 0xff at column 6)"


def test_truncated_file_is_named_as_such(tmp_path: Path) -> None:
    text = (DATA_DIR / "collector-traces.jsonl").read_text()
    path = tmp_path / "t.jsonl"
    path.write_text(text[: len(text) - 40])
    assert _error(path) == (
        f"{path}:3: truncated: the file ends in the middle of a record "
        "(was it still being written?)"
    )


def test_truncated_gzip_is_named_as_such(tmp_path: Path) -> None:
    data = gzip.compress((DATA_DIR / "collector-traces.jsonl").read_bytes())
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    assert "truncated or corrupt gzip data" in _error(path)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("\n\n")
    assert _error(path) == f"{path}: empty file: no spans to read"


def test_missing_file(tmp_path: Path) -> None:
    assert _error(tmp_path / "nope.jsonl") == f"{tmp_path / 'nope.jsonl'}: no such file"


def test_json_that_is_not_a_trace(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"hello": 1}\n')
    assert _error(path).startswith(f"{path}:1: expected an OTLP/JSON request")


def test_bad_span_id_names_its_key_path(tmp_path: Path) -> None:
    line = json.loads((DATA_DIR / "collector-traces.jsonl").read_text().splitlines()[2])
    line["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["spanId"] = "xyz"
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(line) + "\n")
    assert _error(path) == (
        f"{path}:1: resourceSpans[0].scopeSpans[0].spans[1].spanId: "
        "expected 16 hex digits, got 'xyz'"
    )


# --- Jaeger's HTTP API --------------------------------------------------------------------


def test_jaeger_api_v3(fake_jaeger: StartFakeJaeger) -> None:
    jaeger: FakeJaeger = fake_jaeger(v3=True)
    source = JaegerSource(jaeger.url, "support-api", lookback="2h", limit=20)
    runs = list(source.runs())
    assert [r.total_ms for r in runs] == [500.0, 300.0]
    assert source.api == "v3"
    path, query = jaeger.requests[0]
    assert path == "/api/v3/traces"
    assert query["query.service_name"] == ["support-api"]
    assert query["query.num_traces"] == ["20"]
    assert query["query.start_time_min"][0].endswith("Z")
    assert len(jaeger.requests) == 1
    assert [r.total_ms for r in source.runs()] == [500.0, 300.0]  # read again, not fetched again
    assert len(jaeger.requests) == 1


def test_jaeger_v3_without_traces_is_an_empty_answer(fake_jaeger: StartFakeJaeger) -> None:
    jaeger: FakeJaeger = fake_jaeger(v3=True)
    assert list(JaegerSource(jaeger.url, "quiet").runs()) == []
    assert [p for p, _ in jaeger.requests] == ["/api/v3/traces"]


def test_jaeger_falls_back_to_the_v1_api(fake_jaeger: StartFakeJaeger) -> None:
    jaeger: FakeJaeger = fake_jaeger(v3=False)
    source = JaegerSource(jaeger.url, "support-bot", lookback="30m", limit=5)
    assert [r.total_ms for r in source.runs()] == [400.0, 900.0]
    assert source.api == "v1"
    path, query = jaeger.requests[1]
    assert (path, query["service"], query["limit"], query["lookback"]) == (
        "/api/traces",
        ["support-bot"],
        ["5"],
        ["30m"],
    )


def test_unreachable_jaeger_is_one_clear_line() -> None:
    source = JaegerSource("http://127.0.0.1:9", "x", timeout_s=2)
    with pytest.raises(
        chainlat.TraceSourceError, match=r"^http://127\.0\.0\.1:9 \(service x\): cannot reach"
    ):
        list(source.runs())


def test_lookback_parsing() -> None:
    assert parse_lookback("90m").total_seconds() == 5400
    assert parse_lookback("2d").total_seconds() == 172800
    with pytest.raises(chainlat.InputError, match="--lookback 'soon'"):
        parse_lookback("soon")


def test_file_source_can_be_read_twice(tmp_path: Path) -> None:
    source = FileSource(write_runs(tmp_path / "t.jsonl", RUNS))
    assert len(list(source.runs())) == len(list(source.runs())) == 3


def test_judged_trace_ids_are_remembered_for_one_to_two_generations() -> None:
    """A judged id is known (late spans are counted) for at least a generation of later
    judged traces, early ones can be opened again, and ids never share a key."""
    from chainlat.traces._assemble import _JudgedIds

    judged = _JudgedIds(generation=4)
    ids = [f"{n:032x}" for n in range(1, 11)]
    for n, trace_id in enumerate(ids):
        judged.add(trace_id, early=n == 9)
    # 10 judged by generations of 4: the first four dropped, the next six kept
    assert [judged.get(t) for t in ids] == [None] * 4 + [False] * 5 + [True]
    judged.discard(ids[9])
    judged.discard(ids[4])
    assert judged.get(ids[9]) is None and judged.get(ids[4]) is None
    # Ids that int() reads alike are different ids.
    judged.add("0x" + "0" * 29 + "1", early=False)
    assert judged.get("0" * 31 + "1") is None
    judged.add("A" * 32, early=True)
    assert judged.get("a" * 32) is True  # the readers lower-case ids: one trace


def test_a_lone_path_is_one_source_not_its_letters(tmp_path: Path) -> None:
    """``read_runs("file.jsonl")`` reads the file, as ``read_runs(["file.jsonl"])`` does."""
    path = write_runs(tmp_path / "t.jsonl", [ChatRun(chat_ms=100.0 * i) for i in (1, 2, 3)])
    from chainlat.traces import load_runs, read_runs

    listed = [run.trace_id for run in read_runs([path], roots=True)]
    assert len(listed) == 3
    assert [run.trace_id for run in read_runs(str(path), roots=True)] == listed
    assert [run.trace_id for run in read_runs(path)] == listed
    assert sorted(run.trace_id for run in load_runs(str(path))) == sorted(listed)
