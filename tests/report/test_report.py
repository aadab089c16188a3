"""Waterfalls, the report formats, ``chainlat report``, and the HTML page rendered offline."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import chainlat
from chainlat._core.runs import BudgetViolation
from chainlat._core.stats import aggregate
from chainlat._runtime.otlp_json import encode_request
from chainlat.cli import main
from chainlat.report import html_page, stats_json, stats_markdown, waterfall
from chainlat.testing import capture
from chainlat.traces import read_runs
from support.tracegen import DATA_DIR, ChatRun, Profile, write_profile, write_runs


def test_waterfall_marks_the_broken_limits_on_their_rows(tmp_path: Path) -> None:
    path = write_runs(tmp_path / "t.jsonl", [ChatRun(retrieve_ms=100, ttft_ms=80, chat_ms=300)])
    (run,) = read_runs([path])
    text = waterfall(
        run,
        [
            BudgetViolation("support-chat", "total", 400, 410),
            BudgetViolation("support-chat", 'steps."chat gpt-4o".ttft', 50, 80),
        ],
        width=41,
    )
    lines = text.splitlines()
    assert lines[0].startswith("support-chat run ") and lines[0].endswith(": total 410.0 ms")
    assert lines[1].split("|")[1] == "0" + " " * 34 + "410 ms"
    assert lines[2] == (
        "   invoke_workflow support-chat  workflow        0.0     410.0  |"
        + "#" * 41
        + "|  first output 190.0 ms  <-- total 410.0 ms > 400 ms"
    )
    assert lines[3] == " *   data retrieve-docs          data           10.0     100.0  |" + (
        " " + "#" * 10 + " " * 30 + "|"
    )
    assert lines[4].startswith(" *   chat gpt-4o ")  # both steps are on the critical path
    assert lines[4].endswith("|  ttft 80.0 ms  <-- ttft 80.0 ms > 50 ms")
    assert lines[5] == (
        "   critical path (*): inference 300.0 ms, data 100.0 ms, tool 0.0 ms, overhead 10.0 ms"
    )
    assert text.isascii()


def test_stats_json_and_markdown_agree() -> None:
    stats = aggregate(read_runs([DATA_DIR / "jaeger-traces.json"]))
    data = stats_json(stats)
    workflow = data["workflows"]["support-chat"]
    assert data["percentile_method"] == "nearest-rank"
    assert workflow["quantities"]["total"]["p50_ms"] == 400.0
    assert workflow["quantities"]["total"]["max_ms"] == 900.0
    assert workflow["steps"]["chat gpt-4o"]["ttft"]["p95_ms"] == 150.5
    markdown = stats_markdown(stats)
    assert "| total |  | 2 | 400.0 | 900.0 | 900.0 | 900.0 | 900.0 |" in markdown


def test_report_command_shows_slowest_and_median_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [ChatRun(chat_ms=ms) for ms in (300, 500, 400, 900, 350)]
    path = write_runs(tmp_path / "t.jsonl", runs)
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "support-chat: slowest run:" in out
    slowest = out.split("support-chat: slowest run:")[1].splitlines()[1]
    assert slowest.endswith("total 1010.0 ms")
    median = out.split("support-chat: median run (p50 of total):")[1].splitlines()[1]
    assert median.endswith("total 510.0 ms")  # nearest rank: the 3rd of 5


def test_report_json_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(DATA_DIR / "collector-traces.jsonl"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["runs"] == 2
    assert data["workflows"]["support-chat"]["errors"] == 1


def test_report_of_an_empty_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    assert main(["report", str(path)]) == 2
    assert capsys.readouterr().err == f"chainlat: {path}: empty file: no spans to read\n"


# --- HTML ---------------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_NO_CHROMIUM = "chromium not installed (apt-get install -y chromium): HTML rendering not checked"


def test_html_page_embeds_plotly_and_loads_nothing_from_the_network(tmp_path: Path) -> None:
    stats = aggregate(read_runs([write_profile(tmp_path / "t.jsonl", Profile(), runs=30, seed=3)]))
    page = html_page(stats)
    assert page.count("<script") >= 5
    assert 'src="http' not in page and "src='http" not in page
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=[\"']?https?:", page)
    assert len(page) > 1_000_000  # plotly.js itself is inline


def write_graded(path: Path, runs: int = 20) -> Path:
    """An ``agent`` workflow in two variants, each run graded once it is over."""
    with capture(fake_clock=True) as cap:
        p = cap.provider
        for i in range(runs):
            large = i % 2 == 0
            variant = "large" if large else "small"
            with chainlat.workflow("agent", variant=variant, tracer_provider=p) as run:
                with chainlat.inference(variant, tracer_provider=p):
                    cap.clock.advance(ms=(200 if large else 50) + i)
            run.record_outcome(success=large or i % 3 == 0, score=0.5)
        path.write_text(json.dumps(encode_request(cap.spans())) + "\n")
    return path


def test_report_html_has_the_trade_off_chart_only_for_runs_with_variants_or_outcomes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = write_runs(tmp_path / "plain.jsonl", [ChatRun(chat_ms=ms) for ms in (300, 500)])
    graded = write_graded(tmp_path / "graded.jsonl")
    page = tmp_path / "report.html"
    assert main(["report", str(plain), "--html", str(page), "--format", "json"]) == 0
    assert 'id="chart-tradeoff"' not in page.read_text()
    capsys.readouterr()
    assert main(["report", str(plain), str(graded), "--html", str(page), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == 22
    text = page.read_text()
    assert 'id="chart-tradeoff"' in text
    assert '"text":["large","small"]' in text.replace(" ", "")  # a point per variant


@pytest.mark.skipif(CHROMIUM is None, reason=_NO_CHROMIUM)
def test_html_report_opens_offline_and_draws_its_charts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = write_profile(tmp_path / "t.jsonl", Profile(), runs=40, seed=7)
    graded = write_graded(tmp_path / "graded.jsonl")  # variants and outcomes: the trade-off
    page = tmp_path / "report.html"
    assert main(["report", str(traces), str(graded), "--html", str(page), "--format", "json"]) == 0
    capsys.readouterr()
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory() as profile_dir:
        done = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                # every request that is not file:// goes to a closed port: offline
                "--proxy-server=http://127.0.0.1:9",
                f"--user-data-dir={profile_dir}",
                "--virtual-time-budget=10000",
                "--dump-dom",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    dom = done.stdout
    assert done.returncode == 0, done.stderr[-2000:]
    for chart in ("distribution", "split", "steps", "ttft", "tradeoff"):
        start = dom.index(f'id="chart-{chart}"')
        element = dom[start : start + 400]
        assert "js-plotly-plot" in element, chart  # plotly ran and took over the div
    assert dom.count('class="main-svg"') >= 10  # two SVG layers per chart at least
    start = dom.index('id="chart-tradeoff"')
    tradeoff = dom[start : dom.index("</section>", start)]
    assert tradeoff.count('class="point plotly-customdata"') == 2  # a marker per variant
    assert tradeoff.count('class="errorbar"') == 2  # with its success-rate interval
    assert dom.count('class="trace boxes"') >= 2  # the distribution and ttft box plots
    assert dom.count('class="trace bars"') >= 7  # 4 kinds in the split, 3 percentiles per step
