"""Everything that leaves chainlat is scrubbed and shown as text: attribute values of every
shape, names, URLs; names in charts are text (never markup, never LaTeX), bidirectional
controls are escaped in a terminal, and long names are cut, saying so."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chainlat
from chainlat._runtime.otlp_json import encode_request
from chainlat.cli import main
from chainlat.testing import capture

pytest.importorskip("plotly", reason="the page needs plotly (pip install 'chainlat[html]')")

SECRET = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789"


def _trace_file(path: Path, *, workflow: str = "chat", step: str = "gpt-4o", runs: int = 1) -> Path:
    with capture(fake_clock=True) as cap:
        for _ in range(runs):
            with chainlat.workflow(workflow, tracer_provider=cap.provider):
                with chainlat.inference(step, tracer_provider=cap.provider):
                    cap.clock.advance(ms=10)
        path.write_text(json.dumps(encode_request(cap.spans())) + "\n", encoding="utf-8")
    return path


def _set_attribute(path: Path, key: str, value: dict[str, Any]) -> None:
    """Give every span ``key`` = ``value`` (an OTLP AnyValue the SDK would not write)."""
    document = json.loads(path.read_text(encoding="utf-8"))
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                span["attributes"] = [a for a in span["attributes"] if a["key"] != key]
                span["attributes"].append({"key": key, "value": value})
    path.write_text(json.dumps(document) + "\n", encoding="utf-8")


def _page(tmp_path: Path, trace: Path, *options: str) -> str:
    page = tmp_path / "page.html"
    assert main(["report", str(trace), "--html", str(page), *options]) == 0
    return page.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "value",
    [
        {"arrayValue": {"values": [{"stringValue": f"Bearer {SECRET}"}, {"intValue": "1"}]}},
        {
            "arrayValue": {
                "values": [{"arrayValue": {"values": [{"stringValue": f"Bearer {SECRET}"}]}}]
            }
        },
    ],
    ids=["mixed-type", "nested"],
)
def test_a_credential_in_an_array_attribute_never_reaches_the_page(
    value: dict[str, Any], tmp_path: Path
) -> None:
    trace = _trace_file(tmp_path / "leak.jsonl")
    _set_attribute(trace, "gen_ai.request.model", value)
    page = _page(tmp_path, trace)
    assert SECRET not in page
    assert "[REDACTED]" in page


def test_jaeger_ui_userinfo_never_reaches_the_page(tmp_path: Path) -> None:
    trace = _trace_file(tmp_path / "t.jsonl")
    page = _page(tmp_path, trace, "--jaeger-ui", "http://admin:s3cret@jaeger.example:16686")
    assert "s3cret" not in page
    assert "admin:" not in page
    assert "http://jaeger.example:16686" in page


def test_a_credential_in_a_name_is_scrubbed_in_the_page_and_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _trace_file(tmp_path / "t.jsonl", workflow=f"chat api_key={SECRET}", step="gpt-4o")
    assert SECRET not in _page(tmp_path, trace)
    main(["report", str(trace)])
    out = capsys.readouterr().out
    assert "chat api_key=[REDACTED]" in out
    assert SECRET not in out


def test_names_in_charts_are_text_not_markup_or_latex(tmp_path: Path) -> None:
    link = '<a href="https://evil.example">x</a>'
    trace = _trace_file(tmp_path / "t.jsonl", workflow="$x$", step=link)
    page = _page(tmp_path, trace)
    charts = page[page.index('id="chart-distribution"') :]
    assert "evil.example" in charts  # the step is charted
    assert '<a href=\\"https://evil.example\\">' not in charts  # never as plotly markup
    assert "&lt;a href=" in charts
    assert '"typesetMath": false' in page


def test_bidirectional_controls_are_escaped_in_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _trace_file(tmp_path / "t.jsonl", workflow="invoice\u202etxt.exe")
    main(["report", str(trace)])
    out = capsys.readouterr().out
    assert "\u202e" not in out
    assert "invoice\\u202etxt.exe" in out


def test_megabyte_names_are_cut_in_the_page_saying_so(tmp_path: Path) -> None:
    name = "w" * 1_000_000
    trace = _trace_file(tmp_path / "t.jsonl", workflow=name, step="s" * 1_000_000, runs=3)
    page = _page(tmp_path, trace)
    assert len(page) < 8_000_000, len(page)  # plotly.js itself is about 4.7 MB
    assert "more chars]" in page


def test_a_credential_in_a_name_is_scrubbed_in_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _trace_file(tmp_path / "t.jsonl", workflow=f"chat api_key={SECRET}")
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text(f'[workflows."chat api_key={SECRET}"]\ntotal = "1s"\n', encoding="utf-8")
    main(["report", str(trace), "--format", "json"])
    main(["check", str(trace), "--budgets", str(budgets), "--format", "json"])
    out = capsys.readouterr().out
    assert SECRET not in out
    assert "chat api_key=[REDACTED]" in out


# --- fuzzed names: a credential in any form, wherever it sits in a name --------------------

SHAPES = [
    "api_key={s}",
    "Bearer {s}",
    "https://user:{s}@host.example/x",
    "https://host.example/?token={s}",
    '{{"password": "{s}"}}',
]


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    before=st.text(st.characters(exclude_categories=["Cs"]), max_size=8),
    after=st.text(st.characters(exclude_categories=["Cs"]), max_size=8),
    shape=st.sampled_from(SHAPES),
    where=st.sampled_from(["workflow", "step"]),
)
def test_a_credential_in_any_name_never_leaves_chainlat(
    before: str, after: str, shape: str, where: str
) -> None:
    import tempfile

    name = before + " " + shape.format(s=SECRET) + " " + after
    with tempfile.TemporaryDirectory() as directory:
        tmp_path = Path(directory)
        if where == "workflow":
            trace = _trace_file(tmp_path / "t.jsonl", workflow=name)
        else:
            trace = _trace_file(tmp_path / "t.jsonl", step=name)
        page = tmp_path / "page.html"
        outputs = []
        for args in (["--html", str(page)], ["--format", "json"], ["--format", "markdown"], []):
            with contextlib.redirect_stdout(io.StringIO()) as out:
                main(["report", str(trace), *args])
            outputs.append(out.getvalue())
        outputs.append(page.read_text(encoding="utf-8"))
    for text in outputs:
        assert SECRET not in text
