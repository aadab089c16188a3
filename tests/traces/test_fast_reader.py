"""The quick OTLP/JSON path (``chainlat.traces._fast``) against the validating path.

Where the quick path answers, its spans are the validating path's, field for field and
attribute for attribute; anything else it hands back (None) for the validating path to
read and name. Checked on every trace file the tests ship, on files written by the
real pipeline, and on fuzzed and hostile lines.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainlat import report
from chainlat._core import runs as runs_module
from chainlat._core import steps as steps_module
from chainlat._core.errors import TraceSourceError
from chainlat._core.rollup import SpanRecord
from chainlat._core.runs import TracedSpan, WorkflowRun, runs_of_trace
from chainlat.budgets import Budgets, evaluate
from chainlat.cli import main
from chainlat.testing import capture
from chainlat.traces import FileSource, ReadCounters, _fast, _files, _parse, read_traces
from chainlat.traces._fast import quick_spans
from chainlat.traces._parse import BadSpan, Parsed, loads_lenient, otlp_spans
from support.fuzz_traces import ANY_VALUE, FUZZ, KEYS, OTLP_LINE, TIME, VALID_TIME
from support.tracegen import DATA_DIR, ChatRun, graded_file, write_runs

ORIGIN = "t.jsonl:1"


def validating(line: bytes) -> list[Parsed] | str:
    """The validating path's spans of one line, or its problem."""
    try:
        doc = loads_lenient(line)
        if not isinstance(doc, dict) or "resourceSpans" not in doc:
            return "not an OTLP request"
        if isinstance(doc.get("result"), dict):
            return "an api/v3 response"
        return list(otlp_spans(doc, ORIGIN))
    except (ValueError, BadSpan, RecursionError) as exc:
        return f"{type(exc).__name__}: {exc}"


def assert_agree(line: bytes) -> bool:
    """Both paths agree on ``line``; True when the quick path answered."""
    quick = quick_spans(line, ORIGIN)
    if quick is None:
        return False
    assert quick == validating(line)
    return True


def _lines(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        yield from (line for line in f if line.strip())


def _no_quick_path(line: bytes, origin: str) -> None:
    return None


def _runs(path: Path) -> tuple[list[WorkflowRun], ReadCounters]:
    counters = ReadCounters()
    return list(FileSource(path).runs(counters)), counters


def _run_fields(run: WorkflowRun) -> tuple[Any, ...]:
    """Everything in a run, the spans and attributes it carries (not compared by ==) too."""
    return (run, run.root, run.spans)


# --- the files the tests ship, and the pipeline's own output -----------------------------


def test_every_line_of_the_collectors_file_is_read_quickly_and_alike() -> None:
    lines = list(_lines(DATA_DIR / "collector-traces.jsonl"))
    assert lines
    assert all(assert_agree(line) for line in lines)


def test_the_jaeger_download_is_left_to_the_validating_path() -> None:
    data = (DATA_DIR / "jaeger-traces.json").read_bytes()
    assert quick_spans(data, ORIGIN) is None
    for line in data.splitlines():
        assert not assert_agree(line)


@pytest.mark.parametrize("path", sorted(DATA_DIR.iterdir()), ids=lambda p: p.name)
def test_every_data_file_gives_the_same_runs_by_either_path(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    quick, quick_counters = _runs(path)
    monkeypatch.setattr(_files, "quick_spans", _no_quick_path)
    slow, slow_counters = _runs(path)
    assert quick
    assert [_run_fields(r) for r in quick] == [_run_fields(r) for r in slow]
    assert quick_counters == slow_counters


def test_the_pipelines_own_file_is_read_quickly_and_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "runs.jsonl"
    write_runs(path, [ChatRun(), ChatRun(tool_ms=20.0, cached=True), ChatRun(fail=True)] * 3)
    lines = list(_lines(path))
    assert all(assert_agree(line) for line in lines)
    quick, quick_counters = _runs(path)
    monkeypatch.setattr(_files, "quick_spans", _no_quick_path)
    slow, slow_counters = _runs(path)
    assert len(quick) == 9
    assert [_run_fields(r) for r in quick] == [_run_fields(r) for r in slow]
    assert quick_counters == slow_counters


def test_traces_with_outcomes_are_the_same_by_either_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with capture(fake_clock=True) as cap:
        path = graded_file(cap, tmp_path / "graded.jsonl", gap_lines=3)
    quick = list(read_traces([path]))
    monkeypatch.setattr(_files, "quick_spans", _no_quick_path)
    assert quick == list(read_traces([path]))


# --- attributes are carried generically -------------------------------------------------


def _line(attributes: list[dict[str, Any]], **fields: Any) -> bytes:
    span = {
        "traceId": "ab" * 16,
        "spanId": "00000000000000a1",
        "name": "invoke_workflow w",
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000001000000000",
        "attributes": attributes,
        **fields,
    }
    return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})


def test_every_kept_key_is_kept_a_new_chain_attribute_too() -> None:
    line = _line(
        [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}},
            {"key": "chainlat.chain.first_output_ms", "value": {"doubleValue": 12.5}},
            {"key": "chainlat.chain.cost_usd", "value": {"doubleValue": 0.002}},
            {"key": "chainlat.latency.queue_ms", "value": {"intValue": "3"}},
            {"key": "not.read", "value": {"stringValue": "dropped"}},
        ]
    )
    quick = quick_spans(line, ORIGIN)
    assert quick is not None
    assert quick == validating(line)
    attributes = quick[0][2].attributes
    assert attributes["chainlat.chain.first_output_ms"] == 12.5
    assert attributes["chainlat.chain.cost_usd"] == 0.002
    assert attributes["chainlat.latency.queue_ms"] == 3
    assert "not.read" not in attributes


@pytest.fixture
def fresh_caches() -> Iterator[None]:
    """The readers' caches of keys and of what an attribute list gives, empty for a test
    and after it: the very dicts the readers look in (bound to their functions at import,
    so replacing the module's name would not reach them)."""
    caches: tuple[dict[Any, Any], ...] = (_parse.key_cache, _fast._derived_cache)
    for cache in caches:
        cache.clear()
    yield
    for cache in caches:
        cache.clear()


def _forget_cached_reads() -> None:
    _parse.key_cache.clear()
    _fast._derived_cache.clear()


def test_a_key_the_validating_path_keeps_is_kept_whatever_its_name(
    monkeypatch: pytest.MonkeyPatch, fresh_caches: None
) -> None:
    """The quick path reads keys through the validating path's filter, not a list of its own:
    a key added there (``chainlat.step.name``) is carried here with no change."""
    line = _line([{"key": "example.added", "value": {"stringValue": "plan"}}])
    before = quick_spans(line, ORIGIN)
    assert before is not None
    assert before[0][2].attributes == {}
    # Both caches now say the key is not kept: a test that adds it must start without them.
    assert _parse.key_cache["example.added"] is None
    assert len(_fast._derived_cache) == 1
    monkeypatch.setitem(_parse._KEYS, "example.added", "example.added")
    _forget_cached_reads()
    quick = quick_spans(line, ORIGIN)
    assert quick is not None
    assert quick[0][2].attributes == {"example.added": "plan"}


def test_spans_with_the_same_attribute_list_share_what_it_gives(fresh_caches: None) -> None:
    """An attribute list is worked out once and remembered: the next span with the same
    list gets the same attributes (one object), until the cache is emptied."""
    line = _line([{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}])
    first = quick_spans(line, ORIGIN)
    again = quick_spans(line, ORIGIN)
    assert first is not None and again is not None
    assert len(_fast._derived_cache) == 1
    assert again[0][2].attributes is first[0][2].attributes
    _forget_cached_reads()
    fresh = quick_spans(line, ORIGIN)
    assert fresh is not None
    assert fresh[0][2].attributes is not first[0][2].attributes
    assert fresh == first


# --- what the quick path leaves to the validating path ----------------------------------

HANDED_BACK = {
    "two kinds in one value": _line(
        [{"key": "gen_ai.operation.name", "value": {"intValue": "1", "stringValue": "chat"}}]
    ),
    "a null value": _line(
        [{"key": "gen_ai.operation.name", "value": {"stringValue": None, "intValue": "1"}}]
    ),
    "an empty value": _line([{"key": "gen_ai.operation.name", "value": {}}]),
    "an unknown kind of value": _line(
        [{"key": "gen_ai.operation.name", "value": {"kvlistValue": {"values": []}}}]
    ),
    "base64 ids": _line([], traceId="q83vEjRWeJCrze8SNFZ4kA==", spanId="AAAAAAAAAKE="),
    "times as numbers": _line([], startTimeUnixNano=1_700_000_000_000_000_000),
    "a negative duration": _line([], endTimeUnixNano="1600000000000000000"),
    "a lone surrogate": _line([]).replace(b"invoke_workflow w", b"w\\ud800"),
    "invalid UTF-8 in a field not read": _line([], kind="x").replace(b'"x"', b'"\xff"'),
    "an api/v3 response": orjson.dumps({"result": {"resourceSpans": []}, "resourceSpans": []}),
    "an old request": orjson.dumps(
        {"resourceSpans": [{"instrumentationLibrarySpans": [{"spans": []}]}]}
    ),
    "not JSON": b'{"resourceSpans": [',
    "nested too deep": b'{"resourceSpans": [{"x": ' + b"[" * 5000 + b"]" * 5000 + b"}]}",
}


@pytest.mark.parametrize("line", HANDED_BACK.values(), ids=HANDED_BACK.keys())
def test_what_is_not_the_common_layout_is_handed_back(line: bytes) -> None:
    assert quick_spans(line, ORIGIN) is None


def test_a_file_of_odd_lines_keeps_every_message_of_the_validating_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "odd.jsonl"
    good = _line([{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}}])
    path.write_bytes(b"\n".join([good, *HANDED_BACK.values(), good]) + b"\n")
    quick, quick_counters = _runs(path)
    monkeypatch.setattr(_files, "quick_spans", _no_quick_path)
    slow, slow_counters = _runs(path)
    assert [_run_fields(r) for r in quick] == [_run_fields(r) for r in slow]
    assert quick_counters == slow_counters
    assert quick_counters.bad_lines > 0
    assert quick_counters.warnings() == slow_counters.warnings()


def test_a_number_beyond_a_double_in_a_field_not_read_is_the_one_known_difference() -> None:
    """The decoder skips fields chainlat does not read without parsing their numbers: a
    ``1e999`` there is read past by the quick path, refused by the validating path."""
    line = _line([], kind="x").replace(b'"x"', b"1e999")
    assert isinstance(validating(line), str)
    assert quick_spans(line, ORIGIN) is not None


# --- fuzzed lines -------------------------------------------------------------------------


@FUZZ
@given(OTLP_LINE)
def test_fuzzed_lines_get_the_same_spans_or_are_handed_back(doc: Any) -> None:
    line = json.dumps(doc).encode()
    assert_agree(line)


@FUZZ
@given(OTLP_LINE)
def test_fuzzed_lines_compact_as_orjson_writes_them(doc: Any) -> None:
    try:
        line = orjson.dumps(doc)
    except TypeError:  # an integer beyond 64 bits: orjson does not write it
        return
    assert_agree(line)


# Well-formed spans whose attribute values, events and status are drawn from the hostile
# ones: the lines the quick path answers for, mostly.
_SPAN = st.fixed_dictionaries(
    {
        "traceId": st.sampled_from(["ab" * 16, "CD" * 16]),
        "spanId": st.sampled_from(["00000000000000a1", "00000000000000a2"]),
        "name": st.sampled_from(["invoke_workflow w", "chat m", "record_outcome"]),
        "startTimeUnixNano": VALID_TIME.map(str),
        "endTimeUnixNano": VALID_TIME.map(str),
        "attributes": st.lists(st.fixed_dictionaries({"key": KEYS, "value": ANY_VALUE})),
    },
    optional={
        "parentSpanId": st.sampled_from(["00000000000000a1", "", None]),
        "events": st.lists(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["chainlat.first_token", "other"]), "timeUnixNano": TIME}
            ),
            max_size=2,
        ),
        "status": st.none() | st.fixed_dictionaries({"code": st.sampled_from([0, 2, "x"])}),
        "flags": st.sampled_from([0, 0x300, 0x100, -1]),
        "kind": st.integers(0, 5),
    },
)


@FUZZ
@given(st.lists(_SPAN, min_size=1, max_size=4))
def test_fuzzed_attributes_of_well_formed_spans_agree(spans: list[Any]) -> None:
    assert_agree(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode())


def test_records_and_attributes_are_compared_field_by_field() -> None:
    """The agreement above compares every field: a record that differs in one is unequal."""
    line = _line([{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}}])
    quick = quick_spans(line, ORIGIN)
    assert quick is not None
    trace_id, root, span = quick[0]
    moved = dataclasses.replace(span.record, end_ns=span.record.end_ns + 1)
    assert [(trace_id, root, dataclasses.replace(span, record=moved))] != validating(line)


def test_spans_that_repeat_their_attributes_are_counted_as_often_as_they_repeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The quick path works out a repeated attribute list once; what the validating path
    counts per span (a NaN dropped from an array) is still counted per span."""
    nan = {"arrayValue": {"values": [{"doubleValue": "NaN"}, {"doubleValue": 1.5}]}}
    attributes = [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}},
        {"key": "chainlat.chain.critical_path", "value": nan},
    ]
    path = tmp_path / "nan.jsonl"
    lines = [
        _line(attributes, spanId=f"00000000000000a{n}", traceId=f"{n:032x}") for n in range(1, 4)
    ]
    path.write_bytes(b"\n".join(lines * 2) + b"\n")
    assert all(assert_agree(line) for line in lines)
    quick, quick_counters = _runs(path)
    monkeypatch.setattr(_files, "quick_spans", _no_quick_path)
    slow, slow_counters = _runs(path)
    assert [_run_fields(r) for r in quick] == [_run_fields(r) for r in slow]
    assert quick_counters == slow_counters
    assert quick_counters.nonfinite_values == 6


def test_named_steps_and_the_first_output_reach_the_records_as_the_validating_path_reads_them(
    monkeypatch: pytest.MonkeyPatch, fresh_caches: None
) -> None:
    """``chainlat.step.name``, ``chainlat.step.user_facing`` and cache-read tokens, read
    field by field as the validating path proper (``_otlp_span``, through ``call_record``)
    reads them, whether or not the key filter already keeps them."""

    for key in (
        "chainlat.step.name",
        "chainlat.step.user_facing",
        "gen_ai.usage.cache_read.input_tokens",
    ):
        monkeypatch.setitem(_parse._KEYS, key, key)
    _forget_cached_reads()  # what was read before the keys were added
    call = [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
        {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}},
        {"key": "chainlat.step.name", "value": {"stringValue": "plan"}},
        {"key": "chainlat.step.user_facing", "value": {"boolValue": True}},
        {"key": "gen_ai.usage.cache_read.input_tokens", "value": {"intValue": "40"}},
    ]
    tool = [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
        {"key": "chainlat.step.name", "value": {"stringValue": "  "}},
    ]
    for attributes in (call, tool):
        line = _line(attributes, name="chat gpt-4o")
        quick = quick_spans(line, ORIGIN)
        assert quick is not None
        raw = orjson.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
        assert quick == [_parse._otlp_span(raw, "spans[0]", ORIGIN)]
    found = quick_spans(_line(call), ORIGIN)
    assert found is not None
    record = found[0][2].record
    assert (record.step_name, record.user_facing, record.cache_read_tokens) == ("plan", True, 40)


# --- what check prints, by either path -----------------------------------------------------


def _check_outputs(
    path: Path, budgets: Path, capsys: pytest.CaptureFixture[str]
) -> list[tuple[int, str]]:
    found = []
    for form in ("text", "json"):
        code = main(["check", str(path), "--budgets", str(budgets), "--format", form])
        found.append((code, capsys.readouterr().out))
    return found


def _budgets_for(path: Path, tmp_path: Path) -> Path:
    """A budget for every workflow of ``path`` and every step seen, tight enough to break."""
    runs, _ = _runs(path)
    text = ["min_runs = 1"]
    for name in sorted({r.workflow for r in runs}):
        text += [f"[workflows.{json.dumps(name)}]", 'total = "1ms"', 'p95 = { total = "1s" }']
        for step in sorted({s.name for r in runs if r.workflow == name for s in r.steps}):
            text += [f"[workflows.{json.dumps(name)}.steps.{json.dumps(step)}]", 'p50 = "1ms"']
    budgets = tmp_path / "budgets.toml"
    budgets.write_text("\n".join(text) + "\n")
    return budgets


@pytest.mark.parametrize("path", sorted(DATA_DIR.iterdir()), ids=lambda p: p.name)
def test_check_prints_the_same_by_the_quick_path_the_validating_path_and_the_full_walk(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``chainlat check`` (text and JSON) is the same whichever reader and step walk run."""
    budgets = _budgets_for(path, tmp_path)
    quick = _check_outputs(path, budgets, capsys)
    assert [code for code, _ in quick] == [1, 1] and all(out for _, out in quick)
    monkeypatch.setattr(_files, "quick_spans", _no_quick_path)
    assert _check_outputs(path, budgets, capsys) == quick
    monkeypatch.setattr(steps_module, "_flat_steps", lambda root_id, records: None)
    monkeypatch.setattr(runs_module, "_flat_run", lambda spans: None)
    assert _check_outputs(path, budgets, capsys) == quick


def test_the_pipelines_own_file_checks_the_same_by_either_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.jsonl"
    write_runs(path, [ChatRun(), ChatRun(tool_ms=20.0, cached=True), ChatRun(fail=True)] * 30)
    budgets = _budgets_for(path, tmp_path)
    quick = _check_outputs(path, budgets, capsys)
    monkeypatch.setattr(_files, "quick_spans", _no_quick_path)
    monkeypatch.setattr(steps_module, "_flat_steps", lambda root_id, records: None)
    monkeypatch.setattr(runs_module, "_flat_run", lambda spans: None)
    assert _check_outputs(path, budgets, capsys) == quick


_KINDS = st.sampled_from([None, "inference", "data", "tool", "workflow"])


@given(
    st.lists(
        st.tuples(
            st.integers(1, 6),  # span id: repeats happen
            st.sampled_from([0, 0, 0, 0, 1, 2]),  # parent: mostly the workflow (id 0)
            _KINDS,
            st.integers(0, 50),
            st.integers(-5, 50),
            st.booleans(),
        ),
        max_size=8,
    )
)
def test_the_one_loop_step_walk_finds_the_steps_of_the_full_walk(
    rows: list[tuple[int, int, str | None, int, int, bool]],
) -> None:
    """Flat workflows take the one-loop walk; its steps are the full walk's, to the field."""
    root = SpanRecord(0, None, "wf", 0, 100, "workflow")
    records = [
        SpanRecord(
            span_id,
            parent,
            f"s{span_id}",
            start,
            start + length,
            kind,  # type: ignore[arg-type]
            cached,
            ttft_ms=1.5 if kind == "inference" else None,
            step_name="named" if span_id == 3 else None,
        )
        for span_id, parent, kind, start, length, cached in rows
    ]
    fast = steps_module.steps_of(root, records)
    original = steps_module._flat_steps
    try:
        steps_module._flat_steps = lambda root_id, records: None
        assert steps_module.steps_of(root, records) == fast
    finally:
        steps_module._flat_steps = original


@given(
    st.lists(
        st.tuples(
            st.integers(0, 6),  # span id: repeats happen, the workflow's (0) too
            st.sampled_from([None, 0, 0, 0, 0, 1, 7]),  # parent: mostly the workflow
            _KINDS,
            st.integers(0, 50),
            st.booleans(),
        ),
        max_size=8,
    )
)
def test_the_one_loop_run_is_the_run_of_the_full_index(
    rows: list[tuple[int, int | None, str | None, int, bool]],
) -> None:
    """A trace of one workflow and its children takes the one-loop path; any trace gets
    the runs of the full index and walk, to the field, the spans they carry too."""
    spans = [TracedSpan(SpanRecord(0, None, "wf", 0, 100, "workflow"))]
    spans += [
        TracedSpan(
            SpanRecord(
                span_id,
                parent,
                f"s{span_id}",
                start,
                start + 5,
                kind,  # type: ignore[arg-type]
                ttft_ms=1.5,
            ),
            error=error,
        )
        for span_id, parent, kind, start, error in rows
    ]
    fast = runs_of_trace("ab" * 16, spans)
    original = runs_module._flat_run
    try:
        runs_module._flat_run = lambda spans: None
        slow = runs_of_trace("ab" * 16, spans)
    finally:
        runs_module._flat_run = original
    assert [_run_fields(r) for r in fast] == [_run_fields(r) for r in slow]
    flat = all(parent == 0 and kind not in (None, "workflow") for _, parent, kind, _, _ in rows)
    if flat and len({0, *(row[0] for row in rows)}) == len(rows) + 1:
        assert runs_module._flat_run(spans) is not None


_ROOT_ID = "00000000000000f0"
_START = 1_700_000_000_000_000_000
_FUZZED_ATTRIBUTE = st.fixed_dictionaries({"key": KEYS, "value": ANY_VALUE})
_KIND = st.fixed_dictionaries(
    {
        "key": st.just("chainlat.step.kind"),
        "value": st.builds(
            lambda v: {"stringValue": v}, st.sampled_from(["inference", "data", "tool", "x"])
        ),
    }
)
# A workflow (recorded rollup or not, hostile attributes beside) with steps of every kind,
# mostly its children, some nested, ids repeated: the runs the step walks are built for.
_WORKFLOW_ROOT = st.builds(
    lambda extra: {
        "traceId": "ab" * 16,
        "spanId": _ROOT_ID,
        "name": "invoke_workflow w",
        "startTimeUnixNano": str(_START),
        "endTimeUnixNano": str(_START + 10_000_000_000),
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}},
            *extra,
        ],
    },
    st.lists(_FUZZED_ATTRIBUTE, max_size=3),
)
_STEP = st.builds(
    lambda span_id, parent, name, start, length, attributes: {
        "traceId": "ab" * 16,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "startTimeUnixNano": str(_START + start),
        "endTimeUnixNano": str(_START + start + length),
        "attributes": attributes,
    },
    st.sampled_from([f"00000000000000a{n}" for n in range(1, 5)]),
    st.sampled_from([_ROOT_ID] * 3 + ["00000000000000a1"]),
    st.sampled_from(["chat m", "data d", "tool t"]),
    st.integers(-1_000_000, 9_000_000_000),
    st.integers(0, 2_000_000_000),
    st.lists(_KIND, min_size=1, max_size=1) | st.lists(_KIND | _FUZZED_ATTRIBUTE, max_size=3),
)


@FUZZ
@given(_WORKFLOW_ROOT, st.lists(st.lists(_STEP, min_size=1, max_size=4), max_size=3))
def test_fuzzed_files_check_the_same_by_either_path_and_either_step_walk(
    root: Any, steps: list[list[Any]]
) -> None:
    """Fuzzed well-formed spans, a line of them at a time: the runs and check's report are
    the same by the quick reader and the one-loop step walk as by the validating reader
    and the full walk."""
    budgets = Budgets.model_validate(
        {"min_runs": 1, "workflows": {"w": {"total": "1ms", "p95": {"total": "1s"}}}}
    )
    lines = [*steps, [root]]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.jsonl"
        path.write_bytes(
            b"".join(
                json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode() + b"\n"
                for spans in lines
            )
        )
        found: list[object] = []
        with pytest.MonkeyPatch.context() as patch:
            for slow in (False, True):
                if slow:
                    patch.setattr(_files, "quick_spans", _no_quick_path)
                    patch.setattr(steps_module, "_flat_steps", lambda root_id, records: None)
                    patch.setattr(runs_module, "_flat_run", lambda spans: None)
                try:
                    runs, counters = _runs(path)
                except TraceSourceError as exc:
                    found.append(str(exc))
                    continue
                text = report.check_text(evaluate(runs, budgets)) if runs else ""
                found.append(([_run_fields(r) for r in runs], counters, text))
        assert found[0] == found[1]
