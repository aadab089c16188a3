"""The quick OTLP/JSON path (``chainlat.traces._fast``) against the validating path on every
trace file the tests ship and on files the real pipeline writes. Where the quick path
answers, its spans are the validating path's, field for field and attribute for attribute;
anything else it hands back (None) for the validating path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chainlat.testing import capture
from chainlat.traces import _files, read_traces
from chainlat.traces._fast import quick_spans
from support.fast_reader import (
    ORIGIN,
    assert_agree,
    file_runs,
    no_quick_path,
    run_fields,
)
from support.tracegen import DATA_DIR, ChatRun, graded_file, write_runs


def _lines(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        yield from (line for line in f if line.strip())


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
def test_every_data_file_gives_the_same_runs_by_either_path(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    quick, quick_counters = file_runs(path)
    # A file with no workflow span (Langfuse's request, an @observe span) is read as
    # --roots reads it: each trace's top span is a run.
    roots = not quick
    if roots:
        quick, quick_counters = file_runs(path, roots=True)
    monkeypatch.setattr(_files, "quick_spans", no_quick_path)
    slow, slow_counters = file_runs(path, roots=roots)
    assert quick
    assert [run_fields(r) for r in quick] == [run_fields(r) for r in slow]
    assert quick_counters == slow_counters


def test_the_pipelines_own_file_is_read_quickly_and_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "runs.jsonl"
    write_runs(path, [ChatRun(), ChatRun(tool_ms=20.0, cached=True), ChatRun(fail=True)] * 3)
    lines = list(_lines(path))
    assert all(assert_agree(line) for line in lines)
    quick, quick_counters = file_runs(path)
    monkeypatch.setattr(_files, "quick_spans", no_quick_path)
    slow, slow_counters = file_runs(path)
    assert len(quick) == 9
    assert [run_fields(r) for r in quick] == [run_fields(r) for r in slow]
    assert quick_counters == slow_counters


def test_traces_with_outcomes_are_the_same_by_either_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with capture(fake_clock=True) as cap:
        path = graded_file(cap, tmp_path / "graded.jsonl", gap_lines=3)
    quick = list(read_traces([path]))
    monkeypatch.setattr(_files, "quick_spans", no_quick_path)
    assert quick == list(read_traces([path]))
