"""What ``chainlat check`` prints (text and JSON) is the same by the quick reader and the
validating one, by the one-loop step and run walks and the full ones: on every shipped
file, the pipeline's own file, and fuzzed runs and files."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainlat import report
from chainlat._core import steps as steps_module
from chainlat._core import trace_runs as runs_module
from chainlat._core.errors import TraceSourceError
from chainlat._core.rollup import SpanRecord
from chainlat._core.runs import TracedSpan
from chainlat._core.trace_runs import runs_of_trace
from chainlat.budgets import Budgets, evaluate
from chainlat.cli import main
from chainlat.traces import _files
from support.fast_reader import (
    file_runs,
    no_quick_path,
    run_fields,
)
from support.fuzz_traces import ANY_VALUE, FUZZ, KEYS
from support.tracegen import DATA_DIR, ChatRun, write_runs

# --- what check prints, by either path -----------------------------------------------------


def _check_outputs(
    path: Path, budgets: Path, capsys: pytest.CaptureFixture[str], *, roots: bool = False
) -> list[tuple[int, str]]:
    found = []
    for form in ("text", "json"):
        argv = ["check", str(path), "--budgets", str(budgets), "--format", form]
        code = main([*argv, "--roots"] if roots else argv)
        found.append((code, capsys.readouterr().out))
    return found


def _no_workflow_span(path: Path) -> bool:
    """A file with no workflow span (Langfuse's request, an @observe span): read as --roots
    reads it, each trace's top span a run."""
    runs, _ = file_runs(path)
    return not runs


def _budgets_for(path: Path, tmp_path: Path, *, roots: bool = False) -> Path:
    """A budget for every workflow of ``path`` and every step seen, tight enough to break."""
    runs, _ = file_runs(path, roots=roots)
    text = ["min_runs = 1"]
    for name in sorted({r.workflow for r in runs}):
        text += [f"[workflows.{json.dumps(name)}]", 'total = "1ms"', 'p95 = { total = "1s" }']
        for step in sorted({s.name for r in runs if r.workflow == name for s in r.steps}):
            text += [f"[workflows.{json.dumps(name)}.steps.{json.dumps(step)}]", 'p50 = "1ms"']
    budgets = tmp_path / "budgets.toml"
    budgets.write_text("\n".join(text) + "\n")
    return budgets


@pytest.mark.parametrize(
    "path",
    # Every trace file; a recording's truth (``*.truth.json``, what happened) is no trace.
    sorted(
        p
        for p in DATA_DIR.rglob("*")
        if p.suffix in (".json", ".jsonl") and not p.name.endswith(".truth.json")
    ),
    ids=lambda p: str(p.relative_to(DATA_DIR)),
)
def test_check_prints_the_same_by_the_quick_path_the_validating_path_and_the_full_walk(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``chainlat check`` (text and JSON) is the same whichever reader and step walk run."""
    roots = _no_workflow_span(path)
    budgets = _budgets_for(path, tmp_path, roots=roots)
    quick = _check_outputs(path, budgets, capsys, roots=roots)
    assert [code for code, _ in quick] == [1, 1] and all(out for _, out in quick)
    monkeypatch.setattr(_files, "quick_spans", no_quick_path)
    assert _check_outputs(path, budgets, capsys, roots=roots) == quick
    monkeypatch.setattr(steps_module, "_flat_steps", lambda root_id, records: None)
    monkeypatch.setattr(runs_module, "_flat_run", lambda spans: None)
    assert _check_outputs(path, budgets, capsys, roots=roots) == quick


def test_the_pipelines_own_file_checks_the_same_by_either_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.jsonl"
    write_runs(path, [ChatRun(), ChatRun(tool_ms=20.0, cached=True), ChatRun(fail=True)] * 30)
    budgets = _budgets_for(path, tmp_path)
    quick = _check_outputs(path, budgets, capsys)
    monkeypatch.setattr(_files, "quick_spans", no_quick_path)
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
    assert [run_fields(r) for r in fast] == [run_fields(r) for r in slow]
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


# The fuzzed-file test below keeps the helper names it was written with: hypothesis draws
# its derandomized examples from a digest of the test's source, and a renamed body tries
# other files (among them an intValue below -2**63, which the two readers read differently).
_runs, _no_quick_path, _run_fields = file_runs, no_quick_path, run_fields


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
