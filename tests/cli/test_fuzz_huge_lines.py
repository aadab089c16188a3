"""100 MB lines to ``chainlat check``: garbage or a truncated line gives one short line,
a valid line (a big prompt captured on a span) is read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.check_input import assert_one_clear_line, check, spans_of, workflow_request

HUNDRED_MB = 100 * 2**20


@pytest.fixture
def huge_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "huge.jsonl"
    yield path
    path.unlink(missing_ok=True)


def test_a_100_mb_line_of_garbage_gives_one_short_line(
    capsys: pytest.CaptureFixture[str], budgets: Path, huge_file: Path
) -> None:
    with huge_file.open("wb") as out:
        out.write(b'{"resourceSpans": [')
        out.write(b"x" * HUNDRED_MB)
        out.write(b"\n")
    code, _, err = check(capsys, str(huge_file), "--budgets", str(budgets))
    assert_one_clear_line(code, err, mentions=":1: not valid JSON")


def test_a_truncated_100_mb_line_gives_one_short_line(
    capsys: pytest.CaptureFixture[str], budgets: Path, huge_file: Path
) -> None:
    with huge_file.open("wb") as out:
        out.write(b'{"resourceSpans": [{"resource": {"attributes": [{"key": "k", "value": ')
        out.write(b'{"stringValue": "' + b"y" * HUNDRED_MB)
    code, _, err = check(capsys, str(huge_file), "--budgets", str(budgets))
    assert_one_clear_line(code, err, mentions=":1: truncated")


def test_a_valid_100_mb_line_is_read(
    capsys: pytest.CaptureFixture[str], budgets: Path, huge_file: Path
) -> None:
    """A 100 MB prompt captured on a span is a big line, not a bad one."""
    doc = workflow_request()
    spans_of(doc)[1].setdefault("attributes", []).append(
        {"key": "gen_ai.input.messages", "value": {"stringValue": "z" * HUNDRED_MB}}
    )
    huge_file.write_text(json.dumps(doc) + "\n")
    del doc
    code, out, err = check(capsys, str(huge_file), "--budgets", str(budgets))
    assert code == 0, err[:2000]
    assert "answer" in out
