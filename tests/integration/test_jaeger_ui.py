"""Jaeger's own UI (jaeger-ui v2.20.0, built from source) showing a chainlat trace.

Jaeger (memstore) serves a built jaeger-ui (``collector/run.sh`` passes it as
``extensions.jaeger_query.ui.assets_path``); a run of the demo's workflow goes to it
over OTLP; Playwright drives Debian's Chromium (``scripts/system-deps.sh``), never a
downloaded browser, to ``/trace/<id>`` and reads from the page the GenAI kind the UI
gave each span. jaeger-ui maps ``gen_ai.operation.name`` to a kind
(``packages/jaeger-ui/src/utils/genai/detect.ts``: chat -> LLM_CALL, execute_tool ->
TOOL_CALL, invoke_workflow -> AGENT, retrieval -> RETRIEVAL) and draws one icon per
kind on the span's row, ``<span role="img" aria-label=LABEL class="GenAISpanIcon">``
(``.../TraceTimelineViewer/GenAISpanIcon.tsx``: "AI Agent", "LLM call", "MCP Tool
call", "Retrieval"); a trace with such a span opens in its "GenAI View".

The UI is the first of ``CHAINLAT_JAEGER_UI``, ``../shared/jaeger-ui/dist`` beside the
repository (CI), and ``~/.cache/chainlat/jaeger-ui/dist`` (``collector/build.sh
jaeger-ui``) that holds an ``index.html``. Without a UI, Chromium or Playwright the
test skips with one line saying which, and fails instead under
``CHAINLAT_REQUIRE_INTEGRATION=1``. ``CHAINLAT_WRITE_SCREENSHOT=1`` also writes the
screenshot to docs/img/jaeger-ui-genai.png.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

import chainlat
from chainlat.sim import SimServer

from .apps import jaeger_spans, otlp_app
from .otlp import wait_for
from .stack import REPO_ROOT, Jaeger, StackError, start_jaeger, stop

if TYPE_CHECKING:
    from openai import OpenAI
    from opentelemetry.sdk.trace import TracerProvider
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.integration

REQUIRED = os.environ.get("CHAINLAT_REQUIRE_INTEGRATION") == "1"
CHROMIUM = os.environ.get("CHAINLAT_CHROMIUM") or shutil.which("chromium")
UI_CANDIDATES = (
    *([Path(os.environ["CHAINLAT_JAEGER_UI"])] if os.environ.get("CHAINLAT_JAEGER_UI") else []),
    REPO_ROOT.parent / "shared" / "jaeger-ui" / "dist",
    Path.home() / ".cache" / "chainlat" / "jaeger-ui" / "dist",
)
SCREENSHOT = REPO_ROOT / "docs" / "img" / "jaeger-ui-genai.png"
ARRIVAL_TIMEOUT_S = 30.0
PAGE_TIMEOUT_MS = 30_000

# jaeger-ui's labels for its GenAI span kinds (GenAISpanIcon.tsx, KIND_META).
AGENT = "AI Agent"
LLM_CALL = "LLM call"
TOOL_CALL = "MCP Tool call"
RETRIEVAL = "Retrieval"


def _skip_or_fail(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason} (CHAINLAT_REQUIRE_INTEGRATION=1)", pytrace=False)
    pytest.skip(reason)


def _built_ui() -> Path | None:
    return next((d for d in UI_CANDIDATES if (d / "index.html").is_file()), None)


@pytest.fixture(scope="module")
def ui_dir() -> Path:
    """The built jaeger-ui to serve; skips (or fails, in CI) without one."""
    found = _built_ui()
    if found is None:
        _skip_or_fail(
            "no built Jaeger UI (collector/build.sh jaeger-ui, or CHAINLAT_JAEGER_UI=DIR): "
            "Jaeger's UI not checked"
        )
    assert found is not None
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium under Playwright; skips (or fails, in CI) without them."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _skip_or_fail("playwright not installed (pip install -e '.[dev]'): Jaeger's UI not checked")
    if CHROMIUM is None:
        _skip_or_fail("chromium not installed (scripts/system-deps.sh): Jaeger's UI not checked")
    with sync_playwright() as playwright:
        found = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            yield found
        finally:
            found.close()


@pytest.fixture(scope="module")
def jaeger_with_ui(
    jaeger_binary: Path, ui_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Jaeger]:
    """A Jaeger (memstore) serving the built UI, stopped at the end of the module."""
    run_dir = tmp_path_factory.mktemp("jaeger-ui")
    try:
        started = start_jaeger(run_dir, ui=ui_dir)
    except StackError as exc:
        stop(run_dir, "jaeger")
        pytest.fail(str(exc), pytrace=False)
    try:
        yield started
    finally:
        stop(run_dir, "jaeger")


@dataclass(frozen=True)
class SentRun:
    """One demo-like run, as chainlat exported it to Jaeger."""

    trace_id: str
    span_names: tuple[str, ...]
    """Every span's name, in the order the spans started."""


def _support_agent_run(provider: TracerProvider, client: OpenAI) -> str:
    """The demo's workflow (``chainlat.demo.answer``, synchronous here: Playwright's sync
    API holds this thread's event loop), with a nested workflow that makes a model call
    seen twice: ``chainlat.inference`` around the wire span of the same call."""
    with chainlat.workflow("support-agent", tracer_provider=provider) as run:
        with chainlat.data_stage("retrieve-docs", source="faq-fts5", tracer_provider=provider):
            time.sleep(0.005)
        with chainlat.step_name("plan"):
            client.chat.completions.create(
                model="sim-large",
                messages=[{"role": "user", "content": "Where is my order A-1001?"}],
                max_tokens=12,
            )
        with chainlat.tool("order-status", tracer_provider=provider):
            time.sleep(0.02)
        with chainlat.workflow("escalation", tracer_provider=provider):
            with chainlat.inference("sim-small", provider="openai", tracer_provider=provider):
                client.chat.completions.create(
                    model="sim-small",
                    messages=[{"role": "user", "content": "Should a human take over?"}],
                    max_tokens=8,
                )
        with chainlat.step_name("answer"):
            stream = client.chat.completions.create(
                model="sim-small",
                messages=[{"role": "user", "content": "Answer briefly."}],
                max_tokens=12,
                stream=True,
                stream_options={"include_usage": True},
            )
            for _chunk in stream:
                pass
    return f"{run.span.get_span_context().trace_id:032x}"


@pytest.fixture(scope="module")
def sent_run(jaeger_with_ui: Jaeger) -> SentRun:
    """A demo-like run sent to Jaeger over OTLP/HTTP, once all of it has arrived."""
    from openai import OpenAI

    # The demo's service name: this Jaeger is the module's own, so it is unique here.
    with (
        SimServer(seed=7) as sim,
        otlp_app(jaeger_with_ui.otlp_http_endpoint, "chainlat-demo") as app,
        OpenAI(base_url=f"{sim.base_url}/v1", api_key="sk-test", max_retries=0) as client,
    ):
        chainlat.instrument_httpx(client, tracer_provider=app.provider)
        trace_id = _support_agent_run(app.provider, client)
        app.flush()
        local = sorted(app.spans_of({trace_id}), key=lambda s: s.start_time or 0)
    with httpx.Client(timeout=10.0) as http:
        wait_for(
            lambda: len(jaeger_spans(http, jaeger_with_ui.query_url, trace_id)) == len(local),
            timeout_s=ARRIVAL_TIMEOUT_S,
            what=f"the {len(local)} spans of trace {trace_id} in Jaeger",
        )
    return SentRun(trace_id, tuple(s.name for s in local))


def _open(browser: Browser, url: str, allowed: str) -> tuple[Page, list[str]]:
    """A page on ``url`` that can reach nothing but ``allowed``; the requests it tried
    elsewhere and its errors."""
    page = browser.new_context(viewport={"width": 1440, "height": 860}).new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))

    def only_local(route: Any) -> None:
        target = route.request.url
        if target.startswith(("data:", allowed)):
            route.continue_()
        else:
            problems.append(f"request to {target}")
            route.abort()

    page.context.route("**/*", only_local)
    page.goto(url)
    return page, problems


@dataclass(frozen=True)
class Row:
    """One span's row in the trace timeline, as the page shows it."""

    name: str
    depth: int
    """Its ancestors in the tree, counted by the indent guides drawn before it."""
    genai: str | None
    """The label of its GenAI icon, None without one."""


def _rows(page: Page) -> list[Row]:
    """Each span row of the timeline, top to bottom."""
    found: list[list[Any]] = page.evaluate(
        """() => [...document.querySelectorAll('.span-row .span-name-wrapper')].map(row => [
             row.querySelector('.endpoint-name').textContent,
             row.querySelectorAll('.SpanTreeOffset--indentGuide[data-ancestor-id]').length,
             row.querySelector('.GenAISpanIcon[role=img]')?.getAttribute('aria-label') ?? null,
           ])"""
    )
    return [Row(name, depth, genai) for name, depth, genai in found]


def _details(page: Page, row: int, tab: str) -> str:
    """Open the span detail of the row'th span on ``tab``; the text it shows."""
    page.locator(".span-row .span-name").nth(row).click()
    detail = page.locator(".detail-row").first
    detail.get_by_role("tab", name=tab).click()
    return detail.text_content(timeout=PAGE_TIMEOUT_MS) or ""


def test_each_chainlat_span_gets_its_genai_kind_in_jaegers_ui(
    browser: Browser, jaeger_with_ui: Jaeger, sent_run: SentRun, tmp_path: Path
) -> None:
    """Workflow and nested workflow are agents, the data stage a retrieval, the tool a
    tool call, every model call an LLM call (both spans of the call seen twice)."""
    page, problems = _open(
        browser, f"{jaeger_with_ui.query_url}/trace/{sent_run.trace_id}", jaeger_with_ui.query_url
    )
    page.locator(".span-row .GenAISpanIcon").first.wait_for(timeout=PAGE_TIMEOUT_MS)
    # A trace with GenAI spans opens in the GenAI view.
    assert page.locator("button.AltViewOptions").inner_text().strip() == "GenAI View"
    rows = _rows(page)
    assert [r.name for r in rows] == list(sent_run.span_names)
    assert rows == [
        Row("invoke_workflow support-agent", 0, AGENT),
        Row("data retrieve-docs", 1, RETRIEVAL),
        Row("chat sim-large", 1, LLM_CALL),
        Row("execute_tool order-status", 1, TOOL_CALL),
        Row("invoke_workflow escalation", 1, AGENT),
        Row("chat sim-small", 2, LLM_CALL),  # chainlat.inference: the call as the app saw it
        Row("chat sim-small", 3, LLM_CALL),  # the same call on the wire, inside it
        Row("chat sim-small", 1, LLM_CALL),  # the streamed answer
    ]
    # One icon per span: jaeger-ui leaves its namespace icon (http, db) off GenAI spans.
    assert page.locator(".span-row .SpanBarRow--spanTypeIcon").count() == 0
    # The wire span of the call seen twice says it is the twin (collector/README.md,
    # "Span metrics"); the span the application opened around it does not.
    assert "chainlat.step.twin" in _details(page, 6, "Details")
    page.locator(".span-row .span-name").nth(6).click()  # closes it
    assert "chainlat.step.twin" not in _details(page, 5, "Details")
    page.locator(".span-row .span-name").nth(5).click()
    # The planning call's GenAI tab: its model and token counts, for the screenshot.
    genai = _details(page, 2, "GenAI")
    assert "sim-large" in genai and "Tokens" in genai

    shot = tmp_path / "jaeger-ui.png"
    page.screenshot(path=str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("CHAINLAT_WRITE_SCREENSHOT") == "1":
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)
    assert problems == []
