"""pytest plugin: latency budgets asserted in tests. Loaded through the ``pytest11`` entry
point and inert unless used: nothing is imported, no provider is touched and no hook is
installed until a test asks for it.

- Fixture ``chainlat_traces``: the workflow runs of the test, captured in memory through
  the real SDK pipeline on the real clock, with their rollups;
  ``chainlat_traces.assert_within_budget("support-chat")`` (a budget from the file) or
  ``assert_within_budget("support-chat", total="800ms", p95="700ms")`` (inline limits).
- Marker ``@pytest.mark.latency_budget("support-chat", total="800ms", steps={...})``:
  the test fails when a run of the workflow inside it breaks the limits.
- ``--chainlat-budgets PATH`` (ini ``chainlat_budgets``): every workflow run of the
  session is judged against the file, percentiles over the whole session; the terminal
  summary shows a table per workflow and the session fails on a broken limit.

When code under test runs its workflows on the global tracer provider and none is set,
the fixture, marker and option set an SDK ``TracerProvider`` as the global one (the
only global change, and only when they are used).

Example::

    def test_answer_is_fast(chainlat_traces):
        answer("What is the refund policy?")
        chainlat_traces.assert_within_budget("support-chat", total="800ms")
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from chainlat._core.rollup import Rollup
    from chainlat._core.runs import WorkflowRun
    from chainlat._runtime.interface import WorkflowHandle
    from chainlat.budgets import BudgetReport, Budgets, WorkflowBudget

__all__ = ["ChainlatTraces"]

_MARKER = "latency_budget"
_SESSION_PLUGIN = "chainlat-session-budgets"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chainlat", "chainlat latency budgets")
    group.addoption(
        "--chainlat-budgets",
        metavar="PATH",
        default=None,
        help="judge every workflow run of the session against this budget file",
    )
    parser.addini(
        "chainlat_budgets",
        help="budget file every workflow run of the session is judged against",
        default="",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{_MARKER}(workflow, total=None, p95=None, steps=None, ...): fail the test when a "
        "run of the workflow inside it breaks these latency limits (chainlat budget keys)",
    )
    path = _session_budget_path(config)
    if path is not None:
        config.pluginmanager.register(_SessionBudgets(_load(path)), _SESSION_PLUGIN)


def _session_budget_path(config: pytest.Config) -> Path | None:
    option = config.getoption("chainlat_budgets", default=None)
    if option:
        return Path(option)
    ini = config.getini("chainlat_budgets")
    if ini:
        return config.rootpath / str(ini)
    return None


def _load(path: Path | None, *, root: Path | None = None) -> Budgets:
    from chainlat._core.errors import BudgetFileError
    from chainlat.budgets import load_budgets

    try:
        return load_budgets(path, directory=root)
    except BudgetFileError as exc:
        raise pytest.UsageError(f"chainlat budgets: {exc}") from None


# --- capturing runs ------------------------------------------------------------------------------


def _ensure_sdk_provider() -> TracerProvider:
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    provider = TracerProvider(resource=Resource.create({"service.name": "pytest"}))
    trace.set_tracer_provider(provider)  # OpenTelemetry allows this once per process
    current = trace.get_tracer_provider()
    return current if isinstance(current, TracerProvider) else provider


class _Recorder:
    """Keeps every workflow run that ends while it is active, from any provider."""

    def __init__(self, origin: str = "") -> None:
        self.runs: list[WorkflowRun] = []
        self.origin = origin
        self.provider: TracerProvider | None = None
        self._remove: Callable[[], None] | None = None

    def __enter__(self) -> _Recorder:
        from chainlat._runtime.interface import on_workflow_end

        self.provider = _ensure_sdk_provider()
        self._remove = on_workflow_end(self._record)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._remove is not None:
            self._remove()
            self._remove = None

    def _record(self, handle: WorkflowHandle) -> None:
        from chainlat._core.errors import internal_errors
        from chainlat._runtime.budgets import run_from_handle

        with internal_errors("capturing a workflow run for pytest"):
            run = run_from_handle(handle, origin=self.origin)
            if run is not None:
                self.runs.append(run)


def _judge(
    runs: list[WorkflowRun], limits: dict[str, WorkflowBudget], defaults: Budgets | None = None
) -> BudgetReport:
    from chainlat.budgets import Budgets, evaluate

    budgets = Budgets(
        min_runs=defaults.min_runs if defaults is not None else 1,
        exclude_cache_hits=defaults.exclude_cache_hits if defaults is not None else False,
        workflows=limits,
    )
    if defaults is not None:
        budgets._source = defaults.source
    return evaluate(runs, budgets)


def _failure(report: BudgetReport, what: str) -> str | None:
    """The failure message of a report whose exit code is not 0: the limits broken, those
    not judged and why, a waterfall, and the summary line."""
    from chainlat._core.amounts import over
    from chainlat._core.redact import visible
    from chainlat._core.runs import BudgetViolation
    from chainlat.report import waterfall
    from chainlat.report.common import unjudged_lines

    broken = report.broken
    if not broken and not report.unjudged:
        return None  # a limit of an optional step no run had: nothing failed
    lines = [f"latency budget {'broken' if broken else 'not judged'} ({what}):"]
    for v in broken:
        assert v.actual_ms is not None
        if v.kind == "run":
            how = f"in {v.broken_runs} of {_runs_label(v.runs)}"
        elif v.kind == "share":
            how = f"({v.broken_runs} of {_runs_label(v.runs)} failed)"
        else:
            how = f"over {_runs_label(v.runs)}"
        # Names come from the code under test: shown with their control characters escaped.
        name = visible(f"{v.workflow}: {v.target}")
        lines.append(f"  {name} {over(v.actual_ms, v.limit_ms, v.unit)} {how}")
    lines.extend(f"  {visible(line)}" for line in unjudged_lines(report.unjudged))
    shown: set[int] = set()
    for v in broken:
        run = v.worst_run
        if run is None:
            stats = report.stats.workflows.get(v.workflow)
            run = stats.slowest if stats is not None else None
        if run is None or id(run) in shown:
            continue
        shown.add(id(run))
        marked = [
            BudgetViolation(b.workflow, b.target, b.limit_ms, b.actual_ms, b.unit)
            for b in broken
            if b.actual_ms is not None
            and b.workflow == run.workflow
            and (b.worst_run is run or (b.worst_run is None and b.percentile is not None))
        ]
        lines.extend(["", waterfall(run, marked)])
    lines.extend(["", report.summary])
    return "\n".join(lines)


def _runs_label(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def _inline_budget(limits: dict[str, Any], source: str) -> WorkflowBudget:
    from chainlat._core.errors import BudgetFileError
    from chainlat.budgets import parse_workflow_budget

    try:
        return parse_workflow_budget(limits, source=source)
    except BudgetFileError as exc:
        pytest.fail(str(exc), pytrace=False)


def _not_selected(report: BudgetReport) -> BudgetReport:
    """A budgeted workflow no test of the session ran is allowed (the selection of tests may
    leave it out), unless a workflow that ran has a name close to it: that is a typo."""
    import difflib
    from dataclasses import replace

    seen = list(report.stats.workflows)
    report.verdicts = [
        replace(v, allowed=True)
        if v.reason == "unknown_workflow"
        and not difflib.get_close_matches(v.workflow, seen, cutoff=0.6)
        else v
        for v in report.verdicts
    ]
    return report


def _ran(report: BudgetReport) -> bool:
    """A budgeted workflow ran in the session, or one is misspelled."""
    return any(not (v.reason == "unknown_workflow" and v.allowed) for v in report.verdicts)


class ChainlatTraces:
    """The workflow runs captured during one test; what the ``chainlat_traces`` fixture gives."""

    def __init__(self, recorder: _Recorder, config: pytest.Config) -> None:
        self._recorder = recorder
        self._config = config
        self._budgets: Budgets | None = None

    @property
    def runs(self) -> list[WorkflowRun]:
        """Every workflow run that ended so far in this test, in the order they ended."""
        return list(self._recorder.runs)

    def runs_of(self, workflow: str) -> list[WorkflowRun]:
        """The runs of one workflow."""
        return [r for r in self._recorder.runs if r.workflow == workflow]

    def rollups(self, workflow: str | None = None) -> list[Rollup]:
        """The rollups of the runs (of one workflow, when given)."""
        runs = self.runs if workflow is None else self.runs_of(workflow)
        return [r.rollup for r in runs]

    @property
    def provider(self) -> TracerProvider:
        """The global SDK provider the runs are recorded on, for code that takes one."""
        assert self._recorder.provider is not None
        return self._recorder.provider

    def clear(self) -> None:
        """Forget the runs captured so far."""
        self._recorder.runs.clear()

    def assert_within_budget(self, workflow: str | None = None, /, **limits: Any) -> None:
        """Fail the test when the captured runs break a budget.

        With only a workflow name, its budget comes from the budget file
        (``--chainlat-budgets``, ini ``chainlat_budgets``, else ``chainlat.toml`` /
        ``chainlat.yaml`` / ``[tool.chainlat]`` in the rootdir). With limits (the keys
        of a workflow budget: ``total="800ms"``, ``p95="700ms"``, ``steps={...}``), they
        apply to the named workflow, or to every workflow captured. Percentiles are
        judged over the runs of this test.

        Example::

            chainlat_traces.assert_within_budget("support-chat", total="800ms", p95="600ms")
        """
        __tracebackhide__ = True
        defaults: Budgets | None = None
        if limits:
            budget = _inline_budget(limits, "assert_within_budget()")
            names = (
                [workflow]
                if workflow is not None
                else list(dict.fromkeys(r.workflow for r in self._recorder.runs))
            )
            selected = {name: budget for name in names}
        else:
            if workflow is None:
                raise TypeError("assert_within_budget() needs a workflow name or limits")
            defaults = self._file_budgets()
            found = defaults.workflows.get(workflow)
            if found is None:
                pytest.fail(
                    f"no budget for workflow {workflow!r} in {defaults.source} "
                    f"(budgeted: {', '.join(defaults.workflows) or 'none'})",
                    pytrace=False,
                )
            selected = {workflow: found}
        runs = [r for r in self._recorder.runs if r.workflow in selected]
        if not runs:
            captured = ", ".join(sorted({r.workflow for r in self._recorder.runs})) or "none"
            pytest.fail(
                f"no run of {', '.join(selected) or 'any workflow'} was captured "
                f"(captured: {captured})",
                pytrace=False,
            )
        message = _failure(_judge(runs, selected, defaults), _runs_label(len(runs)))
        if message is not None:
            pytest.fail(message, pytrace=False)

    def _file_budgets(self) -> Budgets:
        if self._budgets is None:
            path = _session_budget_path(self._config)
            self._budgets = _load(path, root=self._config.rootpath)
        return self._budgets


@pytest.fixture
def chainlat_traces(request: pytest.FixtureRequest) -> Iterator[ChainlatTraces]:
    """The workflow runs of this test, with ``assert_within_budget``."""
    with _Recorder(origin=request.node.nodeid) as recorder:
        yield ChainlatTraces(recorder, request.config)


# --- the marker -----------------------------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    marks = list(item.iter_markers(_MARKER))
    if not marks:
        return (yield)
    specs: list[tuple[str, WorkflowBudget]] = []
    for mark in marks:
        kwargs = dict(mark.kwargs)
        workflow = mark.args[0] if mark.args else kwargs.pop("workflow", None)
        if not isinstance(workflow, str) or len(mark.args) > 1:
            pytest.fail(
                f"@pytest.mark.{_MARKER}(workflow, **limits): expected one workflow name",
                pytrace=False,
            )
        specs.append((workflow, _inline_budget(kwargs, f"@pytest.mark.{_MARKER}({workflow!r})")))
    with _Recorder(origin=item.nodeid) as recorder:
        result = yield
    messages = []
    for workflow, budget in specs:
        runs = [r for r in recorder.runs if r.workflow == workflow]
        if not runs:
            captured = ", ".join(sorted({r.workflow for r in recorder.runs})) or "none"
            messages.append(
                f"@pytest.mark.{_MARKER}({workflow!r}): no run of {workflow!r} ran in the test "
                f"(captured: {captured})"
            )
            continue
        message = _failure(
            _judge(runs, {workflow: budget}), f"{_runs_label(len(runs))} of {workflow}"
        )
        if message is not None:
            messages.append(message)
    if messages:
        pytest.fail("\n\n".join(messages), pytrace=False)
    return result


# --- the whole session --------------------------------------------------------------------------


class _SessionBudgets:
    """Judges every workflow run of the session against a budget file."""

    def __init__(self, budgets: Budgets) -> None:
        self.budgets = budgets
        self.recorder = _Recorder()
        self.report: BudgetReport | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.recorder.__enter__()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        self.recorder.origin = item.nodeid
        try:
            return (yield)
        finally:
            self.recorder.origin = ""

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from chainlat.budgets import evaluate

        self.recorder.__exit__()
        # A step no run of its workflow had is a misspelled key; a workflow that did not
        # run at all may be one this session's selection of tests left out.
        self.report = _not_selected(evaluate(self.recorder.runs, self.budgets))
        if self._failed(self.report) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _failed(self, report: BudgetReport) -> bool:
        """The session fails as ``chainlat check`` would, but for budgeted workflows that no
        test of this session ran (a selection of the tests may leave them out)."""
        return _ran(report) and report.exit_code != 0

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        report = self.report
        if report is None:
            return
        terminalreporter.section("chainlat latency budgets")
        if not _ran(report):
            ran = "no workflow" if not report.stats.runs else "no budgeted workflow"
            terminalreporter.line(f"{ran} ran in the session (budgets from {self.budgets.source})")
            return
        width = getattr(getattr(terminalreporter, "_tw", None), "fullwidth", 80)
        for line in session_lines(report, width=width):
            terminalreporter.line(line)
        if self._failed(report):
            terminalreporter.line(f"chainlat: {report.summary}: failing the session", red=True)


# --- the session summary, laid out for a log ------------------------------------------------------


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _columns(
    head: list[str], rows: list[list[str]], width: int, *, left_last: bool = False
) -> list[str]:
    """Rows as fixed columns within ``width``: the first (a name) takes the room the others
    leave, and a name longer than that room gets a line of its own, its values below it.
    Nothing is wrapped mid-cell, so a log 80 columns wide shows every row whole."""
    indent, gap = "  ", "  "
    others = [max(len(r[i]) for r in [head, *rows]) for i in range(1, len(head))]
    room = width - len(indent) - sum(others) - len(gap) * len(others)
    name_width = max(min(max(len(r[0]) for r in [head, *rows]), room), 12)

    def values(row: list[str]) -> str:
        cells = [
            cell.ljust(w) if left_last and i == len(others) - 1 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row[1:], others, strict=True))
        ]
        return gap.join(cells).rstrip()

    lines = [f"{indent}{head[0]:<{name_width}}{gap}{values(head)}"]
    for row in rows:
        if len(row[0]) > name_width:
            lines.append(f"{indent}{row[0]}")
            lines.append(f"{indent}{'':<{name_width}}{gap}{values(row)}")
        else:
            lines.append(f"{indent}{row[0]:<{name_width}}{gap}{values(row)}")
    return lines


def session_lines(report: BudgetReport, *, width: int = 80) -> list[str]:
    """The session's verdicts as plain lines that fit ``width`` columns (at least 60): one
    block per budgeted workflow, its statistics then its limits, then the worst run of each
    broken per-run limit and the conclusion."""
    from chainlat._core.redact import visible
    from chainlat.report import waterfall
    from chainlat.report.common import (
        actual_text,
        limit_label,
        limit_text,
        ms,
        printed_source,
        stat_rows,
        verdict_label,
        verdict_runs,
    )
    from chainlat.report.text import conclusion_lines

    width = max(width, 60)
    stats = report.stats
    lines = [
        f"{_count(stats.runs, 'run')} of {_count(len(stats.workflows), 'workflow')} "
        f"in this session; budgets from {printed_source(report.budgets_source)}",
        "",
    ]
    budgeted = list(dict.fromkeys(v.workflow for v in report.verdicts))
    for name in budgeted:
        workflow = stats.workflows.get(name)
        if workflow is None:
            lines.append(f"{visible(name)}: no runs in the session")
        else:
            lines.append(
                f"{visible(name)}: {_count(workflow.runs, 'run')}"
                + (f", {workflow.errors} with errors" if workflow.errors else "")
            )
            rows = [
                [visible(r.label), str(r.summary.count)]
                + [ms(v) for v in (r.summary.p50, r.summary.p90, r.summary.p95, r.summary.p99)]
                + [ms(r.summary.max)]
                for r in stat_rows(workflow)
            ]
            head = ["quantity / step (ms)", "count", "p50", "p90", "p95", "p99", "max"]
            lines.extend(_columns(head, rows, width))
        lines.append("")
        verdicts = [
            [
                visible(limit_label(v)),
                limit_text(v.limit_ms, v.unit),
                actual_text(v.actual_ms, v.unit, against=v.limit_ms),
                verdict_runs(v),
                verdict_label(v),
            ]
            for v in report.verdicts_of(name)
        ]
        head = ["limit", "budget", "actual", "runs", "verdict"]
        lines.extend(_columns(head, verdicts, width, left_last=True))
        lines.append("")
    others = [w for w in stats.workflows if w not in budgeted]
    if others:
        listed = ", ".join(
            f"{visible(w)} ({_count(stats.workflows[w].runs, 'run')})" for w in others
        )
        lines.extend([f"not budgeted: {listed}", ""])
    for verdict in report.broken:
        violation = verdict.violation()
        if verdict.worst_run is not None and violation is not None:
            lines.append(f"worst run for {visible(verdict.key_path)}:")
            # The bars take the room the step names leave (a note past a bar may still run
            # over: it is one line, never cut).
            drawn = waterfall(verdict.worst_run, [violation], width=10)
            bars = max(10, width - drawn.splitlines()[1].index("|") - 2)
            lines.extend(waterfall(verdict.worst_run, [violation], width=bars).splitlines())
            lines.append("")
    for line in conclusion_lines(report):
        lines.extend(textwrap.wrap(line, width, subsequent_indent="  ", break_on_hyphens=False))
    return lines
