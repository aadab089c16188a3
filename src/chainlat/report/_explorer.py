"""The run explorer of the HTML pages: every run as a row of a compact table, and the span
tree of each, drawn one run at a time by a small script embedded in the page.

The page stays one file that opens offline: the runs are a JSON document in a
``<script type="application/json">`` element, the script and the style sheet are
this package's ``_explorer.js`` and ``_explorer.css``, inlined. Strings repeat
(span names, attribute keys, models), so the document keeps one copy of each in a
string table; attributes are (key, value) pairs kept once each as well.

What a span shows: its timing, the part of it on the critical path
(:mod:`chainlat.report._critical`), or for a run with a first output, on the path to it
(the first audio of a voice turn: a toggle above the waterfall), for a model call its
latency parts (the ``chainlat.latency.*`` breakdown of ``docs/httpx.md``, or time to first
token and generation for a call timed by hand), its first token, the limits the run broke
on it, and its attributes as the trace reader kept them, without any that could hold a
credential.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit, urlunsplit

from chainlat._core import attributes as attr
from chainlat._core.errors import InputError
from chainlat._core.redact import is_secret_header, scrub_url, scrub_value, visible
from chainlat._core.runs import TracedSpan, WorkflowRun
from chainlat._core.stats import Stats
from chainlat.report._critical import CriticalPath, run_path, step_spans
from chainlat.report._page_verdict import set_limits, verdict_section
from chainlat.report.common import shown_name
from chainlat.report.waterfall import first_output_ms, row_of

if TYPE_CHECKING:
    from chainlat.budgets import BudgetReport, Budgets


_KINDS: Final = {"workflow": 0, "inference": 1, "data": 2, "tool": 3}
_OTHER: Final = 4
_MAX_VALUE_CHARS: Final = 1000
_ERROR: Final = 1
_ON_PATH: Final = 2
_CACHED: Final = 4
_TO_OUTPUT: Final = 8


def _ms(ns: int) -> float:
    return round(ns / 1e6, 3)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def call_parts(
    attributes: Mapping[str, object], duration_ms: float, ttft_ms: float | None
) -> list[tuple[str, float]]:
    """A model call's duration split into consecutive parts that sum to it, in ms.

    From the ``chainlat.latency.*`` breakdown when the call has it: queue, connect,
    send, then server and network (or wait, when the server did not say what it
    spent), then for a stream the rest up to the first token, the generation and the
    stream's tail (``receive``), else the whole body (``receive``). A call timed by
    hand splits at its first token. Empty when there is nothing to split.
    """
    phases = [
        _number(attributes.get(key))
        for key in (
            attr.LATENCY_QUEUE_MS,
            attr.LATENCY_CONNECT_MS,
            attr.LATENCY_SEND_MS,
            attr.LATENCY_WAIT_MS,
            attr.LATENCY_RECEIVE_MS,
        )
    ]
    if all(p is not None for p in phases):
        queue, connect, send, wait, receive = (p or 0.0 for p in phases)
        parts = [("queue", queue), ("connect", connect), ("send", send)]
        server = _number(attributes.get(attr.LATENCY_SERVER_MS))
        if server is None:
            parts.append(("wait", wait))
        else:
            server = min(server, wait)
            parts += [("server", server), ("network", wait - server)]
        first = _number(attributes.get(attr.LATENCY_TTFT_MS))
        if first is None:
            parts.append(("receive", receive))
            return parts
        to_first = min(max(first - (queue + connect + send + wait), 0.0), receive)
        generation = min(_number(attributes.get(attr.LATENCY_GENERATION_MS)) or 0.0, receive)
        generation = min(generation, receive - to_first)
        parts += [
            ("first token", to_first),
            ("generation", generation),
            ("receive", receive - to_first - generation),
        ]
        return parts
    if ttft_ms is not None and duration_ms > 0:
        first = min(ttft_ms, duration_ms)
        return [("first token", first), ("generation", duration_ms - first)]
    return []


def _shown_value(value: object) -> object:
    if isinstance(value, str):
        extra = max(len(value) - 4 * _MAX_VALUE_CHARS, 0)  # scrub no megabytes to show 1,000
        text = visible(value[: len(value) - extra], newline=True)
        if len(text) > _MAX_VALUE_CHARS or extra:
            more = max(len(text) - _MAX_VALUE_CHARS, 0) + extra
            text = text[:_MAX_VALUE_CHARS] + f"... ({more} more chars)"
        return text
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return [_shown_value(v) for v in value[:50]]
    return visible(str(value))


def jaeger_ui_url(text: str) -> str:
    """The base URL of a Jaeger UI as given to ``--jaeger-ui``, checked: http(s), a host."""
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InputError(
            f"--jaeger-ui {visible(text)!r}: expected a URL like http://localhost:16686"
        )
    return text.strip().rstrip("/")


def _public_url(url: str) -> str:
    """A URL to put in a page: no userinfo (a browser asks for it), secret query values and
    key shapes scrubbed."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return scrub_url(urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment)))


class RunExplorer:
    """Collects runs for the explorer of an HTML page, and the per-variant statistics.

    Example::

        explorer = RunExplorer(jaeger_ui="http://localhost:16686")
        stats = aggregate(explorer.watch(read_runs(["traces.jsonl"])))
        page = html_page(stats, explorer=explorer)
    """

    def __init__(self, *, budgets: Budgets | None = None, jaeger_ui: str | None = None) -> None:
        self.budgets = budgets
        self._prices = budgets.model_prices() if budgets is not None else None
        self.jaeger_ui = jaeger_ui
        self.verdict: BudgetReport | None = None
        """What ``chainlat check`` finds for the same runs and budget file
        (:func:`chainlat.budgets.evaluate`, run by whoever reads the runs): the page shows it
        above the table, limits over the set of runs (percentiles) included, which the
        budget column, one run at a time, cannot show."""
        self.by_variant: dict[str, Stats] = {}
        """Statistics per variant label, for charts that keep variants apart."""
        self._strings: dict[str, int] = {}
        self._raw: dict[Any, int] = {}
        self._pair_list: list[list[Any]] = []
        self._columns: dict[str, list[Any]] = {
            key: [] for key in ("wf", "var", "total", "fo", "fb", "err", "ok", "verdict", "trace")
        }
        self._trees: list[dict[str, Any]] = []

    @property
    def runs(self) -> int:
        """Runs collected."""
        return len(self._trees)

    @property
    def variants(self) -> list[str]:
        """The variant labels seen, in order of first appearance."""
        return list(self.by_variant)

    def watch(self, runs: Iterable[WorkflowRun]) -> Iterator[WorkflowRun]:
        """The runs, unchanged, each collected on the way."""
        for run in runs:
            self.add(run)
            yield run

    def add(self, run: WorkflowRun) -> None:
        """Collect one run."""
        stats = self.by_variant.get(run.variant_label)
        if stats is None:
            stats = self.by_variant[run.variant_label] = Stats()
        stats.add(run)
        violations = None
        unjudged = False
        if self.budgets is not None:
            budget = self.budgets.workflows.get(run.workflow)
            if budget is not None:
                from chainlat.budgets import check_run, unjudged_in_run

                violations = check_run(run, budget)
                if not violations and unjudged_in_run(run, budget, self._prices) is not None:
                    unjudged = True
        tree = self._tree(run, violations or [])
        first_output = tree.get("fo")
        c = self._columns
        c["wf"].append(self._sid(shown_name(run.workflow)))
        c["var"].append(self._sid(shown_name(run.variant_label)))
        c["total"].append(round(run.total_ms, 3) if math.isfinite(run.total_ms) else None)
        c["fo"].append(first_output)
        c["fb"].append(tree.get("fb", 0))
        c["err"].append(1 if run.error else 0)
        c["ok"].append(None if run.success is None else int(run.success))
        # The budget column: None (no budget), -1 (not judged), 0 (kept), n (limits broken).
        c["verdict"].append(None if violations is None else -1 if unjudged else len(violations))
        c["trace"].append(run.trace_id)
        self._trees.append(tree)

    def _sid(self, text: str) -> int:
        found = self._strings.get(text)
        if found is None:
            found = self._strings[text] = len(self._strings)
        return found

    def _attributes(self, attributes: Mapping[str, object]) -> list[int]:
        """The ids of a span's shown (key, value) pairs, each pair cleaned once: none whose
        name could hold a credential, strings scrubbed, controls made visible, long values cut.
        """
        ids: list[int] = []
        for key, value in attributes.items():
            # The type too: True == 1, and a flag is not a count.
            raw = (key, type(value), tuple(value) if isinstance(value, list) else value)
            hashable = True
            try:
                found = self._raw.get(raw)
            except TypeError:  # an unhashable value: clean it every time
                hashable, found = False, None
            if found is None:
                found = -1 if is_secret_header(key) else self._pair(key, value)
                if hashable:
                    self._raw[raw] = found
            if found >= 0:
                ids.append(found)
        return ids

    def _pair(self, key: str, value: object) -> int:
        if isinstance(value, str):
            value = _shown_value(value)  # visible scrubs it, once
        elif not isinstance(value, (int, float)):
            value = _shown_value(scrub_value(value))  # a secret header's key in a mapping too
        elif not math.isfinite(value):
            value = str(value)
        self._pair_list.append([self._sid(shown_name(key)), value])
        return len(self._pair_list) - 1

    def _tree(self, run: WorkflowRun, violations: Sequence[Any]) -> dict[str, Any]:
        root = run.root
        if root is None:  # a run judged live: its steps, without their spans
            return self._steps_tree(run, violations)
        spans = _in_tree_order(root, run.spans)
        index = {span.record.span_id: i for i, span in enumerate(spans)}
        path = run_path(run)
        assert path is not None  # the run has its spans
        pieces: dict[int, list[list[float]]] = {}
        for piece in path.pieces:
            # A call seen twice is one step: its twin's stretch of the path is drawn on it.
            pieces.setdefault(piece.shown_on, []).append(
                [_ms(piece.start_ns - run.start_ns), _ms(piece.end_ns - run.start_ns)]
            )
        on_path = set(path.steps)
        to_output = set(path.output_steps)
        rows: list[list[Any]] = []
        for span in spans:
            rec = span.record
            parent = index.get(rec.parent_id, 0) if rec.parent_id is not None else -1
            if span is root:
                parent = -1
            duration_ms = _ms(max(rec.end_ns - rec.start_ns, 0))
            parts = (
                call_parts(span.attributes, duration_ms, rec.ttft_ms)
                if rec.kind == "inference"
                else []
            )
            flags = (
                (_ERROR if span.error else 0)
                | (_ON_PATH if rec.span_id in on_path else 0)
                | (_CACHED if rec.cache_hit else 0)
                | (_TO_OUTPUT if rec.span_id in to_output else 0)
            )
            rows.append(
                [
                    self._sid(shown_name(_label(span))),
                    _KINDS.get(rec.kind or "", _OTHER),
                    parent,
                    _ms(rec.start_ns - run.start_ns),
                    duration_ms,
                    self._attributes(span.attributes) or 0,
                    pieces.get(rec.span_id, 0),
                    [[self._sid(label), round(ms, 3)] for label, ms in parts] or 0,
                    None if rec.ttft_ms is None else round(rec.ttft_ms, 3),
                    flags,
                    f"{rec.span_id:016x}",
                ]
            )
        steps = [path.twins.get(s, s) if s is not None else None for s in step_spans(run)]
        marks: list[list[Any]] = []
        for violation in violations:
            row = row_of(run, violation)
            span_id = steps[row - 1] if row else root.record.span_id
            marks.append(
                [index.get(span_id, 0) if span_id is not None else 0, shown_name(str(violation))]
            )
        tree: dict[str, Any] = {
            "s": rows,
            "p": [
                [index[s], self._sid(shown_name(path.names[s]))] for s in path.steps if s in index
            ],
            "v": marks,
        }
        first_output = _first_output(run)
        if first_output is not None:
            tree["fo"] = first_output
            if run.first_output_bound:  # the page says so wherever it shows it
                tree["fb"] = 1
            if path.to_output:
                tree.update(self._output_path(path, index, run.start_ns))
        return tree

    def _output_path(
        self, path: CriticalPath, index: Mapping[int, int], start_ns: int
    ) -> dict[str, Any]:
        """The path to the first output, drawn instead of the whole run's on demand: its
        stretches on the rows that draw them (``q``), its steps in path order (``o``)."""
        return {
            "q": [
                [index[p.shown_on], _ms(p.start_ns - start_ns), _ms(p.end_ns - start_ns)]
                for p in path.to_output
                if p.shown_on in index
            ],
            "o": [
                [index[s], self._sid(shown_name(path.names[s]))]
                for s in path.output_steps
                if s in index
            ],
        }

    def _steps_tree(self, run: WorkflowRun, violations: Sequence[Any]) -> dict[str, Any]:
        from chainlat.report._critical import critical_steps

        on_path = critical_steps(run)
        rows: list[list[Any]] = [
            [self._sid(shown_name(run.workflow)), 0, -1, 0.0, _ms(run.end_ns - run.start_ns),
             0, 0, 0, None, _ERROR if run.error else 0, run.span_id]
        ]  # fmt: skip
        parents = [0]
        for i, step in enumerate(run.steps):
            del parents[step.depth + 1 :]
            duration_ms = _ms(step.end_ns - step.start_ns)
            parts = call_parts({}, duration_ms, step.ttft_ms) if step.kind == "inference" else []
            rows.append(
                [
                    self._sid(shown_name(step.name)),
                    _KINDS.get(step.kind, _OTHER),
                    parents[-1],
                    _ms(step.start_ns - run.start_ns),
                    duration_ms,
                    0,
                    0,
                    [[self._sid(label), round(ms, 3)] for label, ms in parts] or 0,
                    step.ttft_ms,
                    (_ON_PATH if i in on_path else 0) | (_CACHED if step.cache_hit else 0),
                    "",
                ]
            )
            parents.append(len(rows) - 1)
        marks = [[row_of(run, v), str(v)] for v in violations]
        ordered = sorted(on_path, key=lambda i: (run.steps[i].start_ns, run.steps[i].depth))
        path = [[i + 1, self._sid(shown_name(run.steps[i].name))] for i in ordered]
        tree: dict[str, Any] = {"s": rows, "p": path, "v": marks}
        first_output = _first_output(run)
        if first_output is not None:
            tree["fo"] = first_output
            if run.first_output_bound:  # the page says so wherever it shows it
                tree["fb"] = 1
        return tree

    def document(self) -> dict[str, Any]:
        """The JSON document the page's script reads."""
        document: dict[str, Any] = {
            "version": 1,
            "strings": list(self._strings),
            "pairs": self._pair_list,
            "runs": self._columns,
            "trees": self._trees,
            "jaeger": None if self.jaeger_ui is None else _public_url(self.jaeger_ui),
            "kinds": ["workflow", "inference", "data", "tool", "other"],
        }
        if self.verdict is not None:
            # Per workflow (its string id), the limits over the set of runs check found
            # broken and not judged: the budget column says so beside each run's verdict.
            document["set"] = {
                str(sid): counts
                for name, counts in set_limits(self.verdict).items()
                if (sid := self._strings.get(shown_name(name))) is not None
            }
        return document

    def html(self) -> str:
        """The explorer's section of a page: markup, style, data and script, all inline."""
        data = json.dumps(
            self.document(), ensure_ascii=False, allow_nan=False, separators=(",", ":")
        )
        # "<" only ever appears inside JSON strings, where \u003c is the same character:
        # then no name from a trace can end the <script> element or open a comment in it.
        data = data.replace("<", "\\u003c")
        verdict = verdict_section(self.verdict) if self.verdict is not None else ""
        return (
            f"<style>{_asset('_explorer.css')}</style>"
            + _MARKUP.replace("<!-- verdict -->", verdict)
            + f'<script type="application/json" id="chainlat-runs">{data}</script>'
            + f"<script>{_asset('_explorer.js')}</script>"
        )


def _label(span: TracedSpan) -> str:
    return span.record.step_name or span.record.name


def _first_output(run: WorkflowRun) -> float | None:
    number = first_output_ms(run)
    return None if number is None else round(number, 3)


def _in_tree_order(root: TracedSpan, spans: Iterable[TracedSpan]) -> list[TracedSpan]:
    """The workflow span, then its descendants depth first, siblings in start order."""
    children: dict[int, list[TracedSpan]] = {}
    for span in spans:
        if span.record.parent_id is not None:
            children.setdefault(span.record.parent_id, []).append(span)
    for siblings in children.values():
        siblings.sort(key=lambda s: (s.record.start_ns, s.record.span_id))
    ordered: list[TracedSpan] = []
    seen: set[int] = set()
    stack = [root]
    while stack:
        span = stack.pop()
        if span.record.span_id in seen:
            continue
        seen.add(span.record.span_id)
        ordered.append(span)
        stack.extend(reversed(children.get(span.record.span_id, [])))
    return ordered


def _asset(name: str) -> str:
    text = resources.files("chainlat.report").joinpath(name).read_text(encoding="utf-8")
    return text.replace("</", "<\\/") if name.endswith(".js") else text


_MARKUP: Final = """
<section id="explorer" aria-labelledby="explorer-title">
<h2 id="explorer-title">Runs</h2>
<!-- verdict -->
<p class="hint">Pick a run to see its waterfall: filter and sort the table, or jump to the
slowest, p50 or p95 run of the runs shown. Arrow keys move in the table and in the
waterfall; Enter opens a row.</p>
<div class="cl-filters" role="group" aria-label="Filter runs">
<label>workflow <select id="cl-f-workflow"></select></label>
<label>variant <select id="cl-f-variant"></select></label>
<label>budget <select id="cl-f-verdict">
<option value="">any</option><option value="broken">broken</option>
<option value="ok">kept</option><option value="unjudged">not judged</option>
<option value="none">no budget</option></select></label>
<label>status <select id="cl-f-status"><option value="">any</option>
<option value="ok">ok</option><option value="error">error</option></select></label>
<label>trace <input id="cl-f-trace" type="search" placeholder="trace id" size="18"></label>
<span class="cl-jump" role="group" aria-label="Pick a run">
<button type="button" data-pick="slowest">slowest</button>
<button type="button" data-pick="p95">p95</button>
<button type="button" data-pick="p50">p50</button></span>
<span id="cl-count" aria-live="polite"></span>
</div>
<div class="cl-table-wrap"><table id="cl-runs" aria-label="Runs">
<thead><tr>
<th aria-sort="none"><button type="button" data-sort="wf">workflow</button></th>
<th aria-sort="none"><button type="button" data-sort="var">variant</button></th>
<th aria-sort="descending" class="n"><button type="button" data-sort="total">total ms</button></th>
<th aria-sort="none" class="n"><button type="button" data-sort="fo">first output ms</button></th>
<th aria-sort="none" title="each run against the per-run limits; the limits over the set
of runs (percentiles) are judged above the table"><button type="button"
data-sort="verdict">budget (per-run limits)</button></th>
<th aria-sort="none"><button type="button" data-sort="ok">outcome</button></th>
<th aria-sort="none"><button type="button" data-sort="trace">trace</button></th>
</tr></thead><tbody></tbody></table></div>
<div id="cl-run" aria-live="polite"></div>
<div id="cl-waterfall" role="tree" aria-label="Waterfall of the selected run"></div>
<p class="cl-legend" aria-label="Legend">
<span><i class="cl-swatch cl-k-workflow"></i>workflow</span>
<span><i class="cl-swatch cl-k-inference"></i>model call</span>
<span><i class="cl-swatch cl-k-data"></i>data</span>
<span><i class="cl-swatch cl-k-tool"></i>tool</span>
<span><i class="cl-swatch cl-k-other"></i>other span</span>
<span><i class="cl-swatch cl-legend-path"></i>critical path</span>
<span><i class="cl-swatch cl-legend-path-fo"></i>critical path to the first output</span>
<span><i class="cl-swatch cl-legend-ttft"></i>first token</span>
<span><i class="cl-swatch cl-legend-fo"></i>first output</span>
<span>model call parts: <i class="cl-swatch cl-p-queue"></i>queue
<i class="cl-swatch cl-p-connect"></i>connect <i class="cl-swatch cl-p-send"></i>send
<i class="cl-swatch cl-p-wait"></i>wait <i class="cl-swatch cl-p-server"></i>server
<i class="cl-swatch cl-p-network"></i>network <i class="cl-swatch cl-p-first-token"></i>to first
token <i class="cl-swatch cl-p-generation"></i>generation
<i class="cl-swatch cl-p-receive"></i>receive</span></p>
<aside id="cl-detail" aria-live="polite"></aside>
</section>
"""
