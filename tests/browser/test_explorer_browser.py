"""The run explorer of ``chainlat report --html``, used in a real browser (Debian's Chromium).

Playwright drives the system's Chromium (``scripts/system-deps.sh`` installs it); no
browser is ever downloaded. Where Chromium or Playwright is missing the tests skip with
one reason, except under ``CHAINLAT_REQUIRE_INTEGRATION=1`` (CI), where they fail.

``CHAINLAT_WRITE_SCREENSHOT=1`` also writes the screenshot to docs/img/explorer.png.
"""

from __future__ import annotations

import http.server
import json
import math
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from agent import WORKFLOW, write_agent_traces

import chainlat
from chainlat._core.runs import WorkflowRun
from chainlat._core.stats import percentile
from chainlat._runtime.otlp_json import encode_request
from chainlat.cli import main
from chainlat.testing import capture
from chainlat.traces import read_runs
from support.sdk_traces import foreign_chat

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

REQUIRED = os.environ.get("CHAINLAT_REQUIRE_INTEGRATION") == "1"
CHROMIUM = os.environ.get("CHAINLAT_CHROMIUM") or shutil.which("chromium")
DOCS_IMG = Path(__file__).parents[2] / "docs" / "img"


def _unavailable() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright not installed (pip install -e '.[dev]'): explorer not checked"
    if CHROMIUM is None:
        return "chromium not installed (scripts/system-deps.sh): explorer not checked in a browser"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    reason = _unavailable()
    if reason is not None:
        if REQUIRED:
            pytest.fail(f"{reason} (CHAINLAT_REQUIRE_INTEGRATION=1)", pytrace=False)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        found = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            yield found
        finally:
            found.close()


class _FakeJaegerUI(http.server.BaseHTTPRequestHandler):
    """Answers ``/trace/<id>`` with a page naming the trace, as Jaeger's UI shows one."""

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        if not path.startswith("/trace/"):
            self.send_error(404)
            return
        trace = path.removeprefix("/trace/")
        body = (
            f'<!DOCTYPE html><title>Jaeger</title><h1 id="trace">{trace}</h1>'
            f'<p id="find">{query}</p>'
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def jaeger_ui() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeJaegerUI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def agent_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_agent_traces(tmp_path_factory.mktemp("agent") / "agent.jsonl", runs=12)


def _open(browser: Browser, url: str, allowed: str, **context: Any) -> tuple[Page, list[str]]:
    """A page on ``url`` that can reach nothing but files and ``allowed``; its errors."""
    page = browser.new_context(viewport={"width": 1280, "height": 900}, **context).new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on(
        "console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None
    )

    def only_local(route: Any) -> None:
        target = route.request.url
        if target.startswith(("file:", "data:", allowed)):
            route.continue_()
        else:
            problems.append(f"request to {target}")
            route.abort()

    page.context.route("**/*", only_local)
    page.goto(url)
    return page, problems


def _report_page(
    browser: Browser,
    traces: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    **context: Any,
) -> tuple[Page, list[str]]:
    """``chainlat report TRACES --html`` (its JSON output swallowed), opened in Chromium."""
    report = tmp_path / "report.html"
    assert main(["report", str(traces), "--html", str(report), "--format", "json"]) == 0
    capsys.readouterr()
    return _open(browser, report.as_uri(), "file:", **context)


def _slowest(runs: list[WorkflowRun]) -> WorkflowRun:
    return max(runs, key=lambda r: r.total_ms)


def test_explorer_draws_the_slowest_runs_critical_path_and_call_parts(
    browser: Browser,
    jaeger_ui: str,
    agent_traces: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Pick the slowest run, check its drawn critical path against the recorded one, open a
    model call and add its parts up, follow the Jaeger link, and take the screenshot."""
    runs = list(read_runs([agent_traces]))
    slowest = _slowest(runs)
    assert slowest.root is not None
    # A limit the slowest run breaks (the p50 of totals), to see it marked on its row.
    limit = percentile(sorted(r.total_ms for r in runs), 50)
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text(f'[workflows.{WORKFLOW}]\ntotal = "{limit:.3f}ms"\n')
    report = tmp_path / "report.html"
    code = main(
        ["report", str(agent_traces), "--html", str(report), "--budgets", str(budgets),
         "--jaeger-ui", jaeger_ui, "--format", "json"]
    )  # fmt: skip
    capsys.readouterr()
    assert code == 0

    page, problems = _open(browser, report.as_uri(), jaeger_ui)
    page.click("button[data-pick=slowest]")
    head = page.locator("#cl-run")
    assert head.get_attribute("data-run") is not None
    assert slowest.trace_id in head.inner_text()

    # The critical path drawn is the one chainlat recorded on the workflow span.
    recorded = slowest.root.attributes["chainlat.chain.critical_path"]
    assert isinstance(recorded, (list, tuple)) and len(recorded) >= 3
    assert page.locator("#cl-path li").all_inner_texts() == list(recorded)
    marked = page.locator("#cl-waterfall .cl-row[data-critical=true] .cl-name").all_inner_texts()
    assert sorted(marked) == sorted(recorded)
    # Its pieces cover the whole run: their widths add up to the width of a track.
    track = page.locator("#cl-waterfall .cl-row[data-span] .cl-track").first.bounding_box()
    widths = [box["width"] for box in _boxes(page, "#cl-waterfall .cl-cp")]
    assert track is not None
    assert sum(widths) == pytest.approx(track["width"], abs=len(widths) * 1.0)
    # Of the two calls made at once, the path goes through the one that ended last.
    calls = [s for s in slowest.steps if s.kind == "inference"]
    assert (
        len(calls) == 2
        and calls[0].start_ns < calls[1].end_ns
        and calls[1].start_ns < calls[0].end_ns
    )
    last = max(calls, key=lambda s: s.end_ns)
    other = min(calls, key=lambda s: s.end_ns)
    assert last.name in recorded and other.name not in recorded
    # The limit the run broke is marked on the workflow's row.
    assert "total" in page.locator("#cl-waterfall .cl-row[data-span='0'] .cl-mark").inner_text()

    # Open the streamed model call from the keyboard and read its parts.
    stream = next(s for s in slowest.spans if s.record.name == "chat sim-write")
    page.locator("#cl-waterfall .cl-row[data-span='0']").focus()
    for _ in range(10):
        name = page.evaluate("document.activeElement.querySelector('.cl-name').textContent")
        if name == "chat sim-write":
            break
        page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    detail = page.locator("#cl-detail")
    assert detail.locator("h3").inner_text() == "chat sim-write"
    parts = {
        row.get_attribute("data-part"): float(row.get_attribute("data-ms") or "nan")
        for row in detail.locator("#cl-parts tr[data-part]").all()
    }
    assert set(parts) == {
        "queue", "connect", "send", "server", "network", "first token", "generation", "receive"
    }  # fmt: skip
    duration_ms = (stream.record.end_ns - stream.record.start_ns) / 1e6
    shown = float(detail.locator("#cl-duration").get_attribute("data-ms") or "nan")
    assert shown == pytest.approx(duration_ms, abs=0.001)
    assert sum(parts.values()) == pytest.approx(duration_ms, abs=0.001 * len(parts))
    assert parts["first token"] > 0 and parts["generation"] > 0
    assert page.locator("#cl-waterfall .cl-row[aria-selected=true] .cl-part").count() == len(parts)
    assert page.locator("#cl-waterfall .cl-row[aria-selected=true] .cl-ttft").count() == 1

    # The Jaeger link opens the same trace in the Jaeger UI.
    link = page.locator("#cl-jaeger-run")
    assert link.get_attribute("href") == f"{jaeger_ui}/trace/{slowest.trace_id}"
    with page.context.expect_page() as opened:
        link.click()
    jaeger = opened.value
    jaeger.wait_for_load_state()
    assert jaeger.locator("#trace").inner_text() == slowest.trace_id
    assert detail.locator("#cl-jaeger-span").get_attribute("href") == (
        f"{jaeger_ui}/trace/{slowest.trace_id}?uiFind={stream.record.span_id:016x}"
    )

    shot = tmp_path / "explorer.png"
    page.locator("#explorer").screenshot(path=str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("CHAINLAT_WRITE_SCREENSHOT") == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, DOCS_IMG / "explorer.png")
    assert problems == []


def _boxes(page: Page, selector: str) -> list[dict[str, float]]:
    found = []
    for element in page.locator(selector).all():
        box = element.bounding_box()
        if box is not None:
            found.append({"x": box["x"], "width": box["width"]})
    return found


def test_explorer_filters_sorts_and_picks_by_percentile(
    browser: Browser, agent_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table filters by variant, sorts by total both ways, and p50 picks the median run."""
    runs = list(read_runs([agent_traces]))
    page, problems = _report_page(browser, agent_traces, tmp_path, capsys)
    rows = page.locator("#cl-runs tbody tr[data-run]")
    assert rows.count() == len(runs)
    page.select_option("#cl-f-variant", label="fast-plan")
    fast = [r for r in runs if r.variant == "fast-plan"]
    assert rows.count() == len(fast)
    assert set(page.locator("#cl-runs tbody tr[data-run] td:nth-child(2)").all_inner_texts()) == {
        "fast-plan"
    }
    totals = [float(t.replace(",", "")) for t in page.locator(
        "#cl-runs tbody tr[data-run] td:nth-child(3)").all_inner_texts()]  # fmt: skip
    assert totals == sorted(totals, reverse=True)
    page.click("#cl-runs th button[data-sort=total]")
    totals = [float(t.replace(",", "")) for t in page.locator(
        "#cl-runs tbody tr[data-run] td:nth-child(3)").all_inner_texts()]  # fmt: skip
    assert totals == sorted(totals)
    assert page.locator("#cl-runs th[aria-sort=ascending]").inner_text().startswith("total")
    page.click("button[data-pick=p50]")
    # The page holds totals to the microsecond (its data): the median of those, ties to the
    # run read first, as its nearest rank sorts them.
    shown = sorted((round(r.total_ms, 3), n) for n, r in enumerate(fast))
    chosen = fast[shown[math.ceil(50 * len(shown) / 100 - 1e-9) - 1][1]]
    assert round(chosen.total_ms, 3) == round(percentile(sorted(r.total_ms for r in fast), 50), 3)
    assert chosen.trace_id in page.locator("#cl-run").inner_text()
    assert page.locator("#cl-run h3").inner_text().startswith("p50 run")
    # The charts keep the two variants apart: a box per workflow and variant.
    labels = page.evaluate("document.getElementById('chart-distribution').data.map(t => t.name)")
    assert sorted(labels) == sorted(f"{WORKFLOW} · {v}" for v in ("fast-plan", "slow-plan"))
    assert problems == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_explorer_is_readable_in_light_and_dark_mode(
    browser: Browser,
    agent_traces: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    scheme: str,
) -> None:
    """Text and background follow the system's colour scheme, with strong contrast."""
    page, problems = _report_page(browser, agent_traces, tmp_path, capsys, color_scheme=scheme)
    colours = page.evaluate(
        """() => { const s = getComputedStyle(document.body);
                   const n = document.querySelector('#cl-waterfall .cl-row[data-span] .cl-name');
                   return [s.backgroundColor, s.color, getComputedStyle(n).color]; }"""
    )
    background, text, name = (_luminance(c) for c in colours)
    if scheme == "dark":
        assert background < 0.05 < 0.6 < text
    else:
        assert text < 0.05 < 0.9 < background
    assert _contrast(background, name) >= 7  # WCAG AAA for the span names
    # The charts are redrawn for the scheme: the page's background shows through them.
    ink = "#e6e6e6" if scheme == "dark" else "#2a3f5f"
    page.wait_for_function(
        "ink => { const l = document.getElementById('chart-distribution')._fullLayout;"
        " return l.paper_bgcolor === 'rgba(0,0,0,0)' && l.font.color === ink; }",
        arg=ink,
        timeout=30_000,
    )
    assert problems == []


def test_explorer_is_used_from_the_keyboard_alone(
    browser: Browser, agent_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tab reaches the table, arrows move between runs, Enter shows one: one tab stop."""
    page, problems = _report_page(browser, agent_traces, tmp_path, capsys)
    assert page.locator("#cl-runs tbody tr[tabindex='0']").count() == 1
    page.locator("#cl-runs th button[data-sort=trace]").focus()
    page.keyboard.press("Tab")
    focused = page.evaluate("document.activeElement.getAttribute('data-run')")
    assert focused == page.locator("#cl-run").get_attribute("data-run")  # the slowest run
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    second = page.locator("#cl-runs tbody tr[data-run]").nth(2).get_attribute("data-run")
    assert page.evaluate("document.activeElement.getAttribute('data-run')") == second
    page.keyboard.press("Enter")
    assert page.locator("#cl-run").get_attribute("data-run") == second
    assert page.locator("#cl-runs tbody tr[tabindex='0']").get_attribute("data-run") == second
    assert problems == []


def test_the_first_output_is_marked_across_the_waterfall(
    browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with capture(fake_clock=True) as cap:
        with chainlat.workflow("chat", tracer_provider=cap.provider) as handle:
            with chainlat.inference("m", tracer_provider=cap.provider) as call:
                cap.clock.advance(ms=30)
                call.first_token()
                cap.clock.advance(ms=10)
                handle.first_output()  # what the application marked wins over the token
                cap.clock.advance(ms=40)
            cap.clock.advance(ms=20)
        traces = tmp_path / "t.jsonl"
        traces.write_text(json.dumps(encode_request(cap.spans())) + "\n")
    page, problems = _report_page(browser, traces, tmp_path, capsys)
    assert page.locator("#cl-runs tbody tr[data-run] td:nth-child(4)").inner_text() == "40.0"
    assert "first output at 40.0 ms" in page.locator("#cl-run").inner_text()
    markers = page.locator("#cl-waterfall .cl-row[data-span] .cl-fo")
    assert markers.count() == 2  # a line across both rows
    for i in range(2):
        track = page.locator("#cl-waterfall .cl-row[data-span] .cl-track").nth(i).bounding_box()
        marker = markers.nth(i).bounding_box()
        assert track is not None and marker is not None
        assert marker["x"] - track["x"] == pytest.approx(0.4 * track["width"], abs=1.5)
    ttft = page.locator("#cl-waterfall .cl-row[data-span='1'] .cl-ttft").bounding_box()
    track = page.locator("#cl-waterfall .cl-row[data-span='1'] .cl-track").bounding_box()
    assert ttft is not None and track is not None
    assert ttft["x"] - track["x"] == pytest.approx(0.3 * track["width"], abs=1.5)
    assert problems == []


def test_a_first_output_that_is_a_bound_says_so_on_the_page(
    browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another instrumentation's chat call says nothing of streaming (rule 17 of
    docs/attributes.md): the run's first output, its start, is a bound in the table, the
    run's facts and the marker's title."""
    with capture(fake_clock=True) as cap:
        with chainlat.workflow("chat", tracer_provider=cap.provider):
            foreign_chat(cap, after_ms=10, took_ms=40)
        traces = tmp_path / "t.jsonl"
        traces.write_text(json.dumps(encode_request(cap.spans())) + "\n")
    page, problems = _report_page(browser, traces, tmp_path, capsys)
    cell = page.locator("#cl-runs tbody tr[data-run] td:nth-child(4)").inner_text()
    assert cell == "10.0 (a bound)"
    facts = page.locator("#cl-run").inner_text()
    assert "first output at 10.0 ms (a bound, not a measurement)" in facts
    marker = page.locator("#cl-waterfall .cl-row[data-span] .cl-fo").first
    assert marker.get_attribute("title") == "first output (a bound)"
    assert problems == []


def _luminance(css: str) -> float:
    """Relative luminance (WCAG) of ``rgb(r, g, b)``."""
    channels = [int(v) / 255 for v in css[css.index("(") + 1 : css.index(")")].split(",")[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: float, b: float) -> float:
    return (max(a, b) + 0.05) / (min(a, b) + 0.05)


def test_the_path_to_the_first_audio_is_drawn_beside_the_whole_turns(
    browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A voice turn (tests/support/voice.py, first audio at 520 ms of 1,100): the toggle
    draws the path to the first audio, which ends at the first-output line and runs through
    the first sentence's speech, not the second's; its pieces add up to 520/1,100 of a track,
    and the span detail counts a call's time on it."""
    from support.voice import voice_turn

    with capture(fake_clock=True, sequential_ids=True) as cap:
        voice_turn(cap)
        traces = tmp_path / "voice.jsonl"
        traces.write_text(json.dumps(encode_request(cap.spans())) + "\n")
    page, problems = _report_page(browser, traces, tmp_path, capsys)
    steps = ["speech_to_text stt-1", "data kb", "answer", "text_to_speech tts-1"]
    assert page.locator("#cl-path").get_attribute("data-path") == "turn"
    assert page.locator(".cl-cp-fo").count() == 0
    page.click("button[data-path=output]")
    assert page.locator("button[data-path=output]").get_attribute("aria-pressed") == "true"
    backgrounds = [
        page.evaluate(
            f"getComputedStyle(document.querySelector('button[data-path={which}]')).backgroundColor"
        )
        for which in ("output", "turn")
    ]
    assert backgrounds[0] != backgrounds[1]  # the path drawn is the button that looks pressed
    assert page.locator("#cl-path").get_attribute("data-path") == "output"
    assert page.locator("#cl-path li").all_inner_texts() == steps
    rows = page.locator("#cl-waterfall .cl-row[data-span]")
    marked = page.locator("#cl-waterfall .cl-row[data-critical=true] .cl-name").all_inner_texts()
    assert marked == steps
    speech = [i for i in range(rows.count()) if "tts-1" in rows.nth(i).inner_text()]
    assert len(speech) == 2
    assert rows.nth(speech[0]).locator(".cl-cp-fo").count() == 1
    assert rows.nth(speech[1]).locator(".cl-cp").count() == 0  # the second sentence's
    track = rows.first.locator(".cl-track").bounding_box()
    widths = [box["width"] for box in _boxes(page, "#cl-waterfall .cl-cp-fo")]
    assert track is not None
    assert sum(widths) == pytest.approx(520 / 1100 * track["width"], abs=len(widths) * 1.0)
    # The path's last piece ends on the first-output line.
    last = _boxes(page, "#cl-waterfall .cl-cp-fo")[-1]
    line = rows.nth(speech[0]).locator(".cl-fo").bounding_box()
    assert line is not None
    assert last["x"] + last["width"] == pytest.approx(line["x"], abs=2.0)
    rows.nth(speech[0]).click()
    on_path = page.locator("#cl-on-path").get_attribute("data-ms")
    assert on_path is not None and float(on_path) == pytest.approx(120.0, abs=0.001)
    assert "to the first output" in page.locator("#cl-detail").inner_text()
    # Back to the whole turn: its path runs through the second sentence's speech to 1,100.
    page.click("button[data-path=turn]")
    assert page.locator("#cl-path").get_attribute("data-path") == "turn"
    assert rows.nth(speech[1]).locator(".cl-cp").count() == 1
    assert page.locator(".cl-cp-fo").count() == 0
    assert problems == []


def test_the_budget_summary_and_column_say_what_check_says(
    browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every turn keeps the per-run limits, while their p95 of text to speech breaks its
    limit: check exits 1, and the page says the same above the table and in the column."""
    from support.voice import voice_turn

    with capture(fake_clock=True, sequential_ids=True) as cap:
        for stt_ms in (100, 120, 140):
            voice_turn(cap, stt_ms=stt_ms)
        traces = tmp_path / "voice.jsonl"
        traces.write_text(json.dumps(encode_request(cap.spans())) + "\n")
    budgets = tmp_path / "budget.toml"
    budgets.write_text(
        '[workflows.voice-turn]\ntotal = "5s"\n\n'
        '[workflows.voice-turn.p95]\nfirst_output_text_to_speech = "100ms"\n'
    )
    assert main(["check", str(traces), "--budgets", str(budgets)]) == 1
    report = tmp_path / "report.html"
    args = ["report", str(traces), "--html", str(report), "--budgets", str(budgets)]
    assert main([*args, "--format", "json"]) == 0
    capsys.readouterr()
    page, problems = _open(browser, report.as_uri(), "file:")
    summary = page.locator("#cl-budget-summary")
    assert summary.inner_text() == "FAILED: 1 of 2 limits broken, 0 not judged"
    assert summary.is_visible()
    broken = page.locator("#cl-budget tr[data-status=broken] td")
    assert broken.first.inner_text() == "p95.first_output_text_to_speech"
    cells = page.locator("#cl-runs tbody tr[data-run] td:nth-child(5)").all_inner_texts()
    assert cells == ["kept; set: 1 broken"] * 3
    assert "per-run limits kept; set: 1 broken" in page.locator("#cl-run").inner_text()
    heading = page.locator("#cl-runs thead th:nth-child(5)").inner_text()
    assert heading.startswith("budget (per-run limits)")
    assert problems == []
