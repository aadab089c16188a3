"""Odd but common traces to ``chainlat check``: skewed clocks, sampled-out or remote parents
and attribute values of the wrong type are judged, with one warning line per kind of oddity."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.check_input import check, edited, set_field


def _parent_of(spans: list[dict[str, Any]], index: int) -> dict[str, Any]:
    parent_id = spans[index]["parentSpanId"]
    return next(s for s in spans if s["spanId"] == parent_id)


def _skew(spans: list[dict[str, Any]]) -> None:
    """The first span starts 50 ms before its parent, as on a host whose clock is behind."""
    parent_start = int(_parent_of(spans, 0)["startTimeUnixNano"])
    spans[0]["startTimeUnixNano"] = str(parent_start - 50_000_000)


ODD_BUT_COMMON: dict[str, tuple[Callable[[list[dict[str, Any]]], None], str]] = {
    # name: (edit, the one warning line)
    "child starts before its parent": (
        _skew,
        "chainlat: warning: 1 spans start before their parent (clock skew); clipped to the parent",
    ),
    "missing parent": (
        set_field(0, "parentSpanId", "00000000000000ff"),
        "chainlat: warning: 1 spans have a parent missing from their trace (sampling or a "
        "partial trace); read without it",
    ),
}


@pytest.mark.parametrize("name", list(ODD_BUT_COMMON))
def test_skewed_and_orphan_spans_pass_with_one_warning(
    capsys: pytest.CaptureFixture[str], budgets: Path, tmp_path: Path, name: str
) -> None:
    """Real traces have skewed clocks and sampled-out parents: judged, counted, warned once."""
    edit, warning = ODD_BUT_COMMON[name]
    path = tmp_path / "odd.jsonl"
    path.write_text(edited(edit))
    code, out, err = check(capsys, str(path), "--budgets", str(budgets))
    assert code == 0, err
    assert err.splitlines() == [warning]
    assert "answer" in out


def test_each_kind_of_oddity_is_one_line_with_its_count(
    capsys: pytest.CaptureFixture[str], budgets: Path, tmp_path: Path
) -> None:
    def edit(spans: list[dict[str, Any]]) -> None:
        _skew(spans)
        spans[3]["startTimeUnixNano"] = str(int(_parent_of(spans, 3)["startTimeUnixNano"]) - 1)
        spans[1]["parentSpanId"] = "00000000000000fe"
        spans[4]["parentSpanId"] = "00000000000000fd"

    path = tmp_path / "odd.jsonl"
    path.write_text(edited(edit))
    # A step read without its parent leaves one run short of min_runs: allowed here, since
    # the warnings are what is looked at.
    code, _, err = check(capsys, str(path), "--budgets", str(budgets), "--allow-unjudged")
    assert code == 0, err
    assert [line.split(" spans ")[0] for line in err.splitlines()] == [
        "chainlat: warning: 2",
        "chainlat: warning: 2",
    ]
    assert "clock skew" in err
    assert "missing" in err


def test_a_parent_in_another_service_is_not_missing(
    capsys: pytest.CaptureFixture[str], budgets: Path, tmp_path: Path
) -> None:
    """A workflow span flagged with a remote parent (OTLP flags 0x300) is a local root."""

    def edit(spans: list[dict[str, Any]]) -> None:
        for span in spans:
            if "parentSpanId" not in span:
                span["parentSpanId"] = "00000000000000aa"
                span["flags"] = 0x300

    path = tmp_path / "remote.jsonl"
    path.write_text(edited(edit))
    code, _, err = check(capsys, str(path), "--budgets", str(budgets))
    assert code == 0, err
    assert err == ""


def test_an_attribute_value_of_the_wrong_type_is_ignored(
    capsys: pytest.CaptureFixture[str], budgets: Path, tmp_path: Path
) -> None:
    """A value that does not parse is left out, as an unknown attribute would be."""
    path = tmp_path / "odd.jsonl"
    path.write_text(
        edited(
            set_field(0, "attributes", [{"key": "chainlat.step.kind", "value": {"intValue": "x"}}])
        )
    )
    code, _, err = check(capsys, str(path), "--budgets", str(budgets))
    assert code == 0, err
    assert err == ""
