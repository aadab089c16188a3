"""``chainlat check``, ``report``, ``diff`` and ``budgets``: thin commands over budgets,
traces, diff and report.

Exit codes follow :mod:`chainlat.cli`: 0 ok, 1 a budget broken or a regression
found, 2 bad input, an unreachable source or nothing to judge.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chainlat._core.errors import InputError, shown
from chainlat.cli import prometheus as _cli_prometheus
from chainlat.cli.sources import (
    RunFilter,
    add_filter_arguments,
    add_reader_options,
    add_source_arguments,
    describe,
    file_source,
    sources_from,
    warn,
    warn_limits,
    warn_sampling,
)

if TYPE_CHECKING:
    from chainlat._core.runs import WorkflowRun
    from chainlat._core.stats import Stats
    from chainlat.analysis.tradeoff import Tally
    from chainlat.budgets import BudgetReport, NotJudgedReason
    from chainlat.traces import ReadCounters, TraceSource

EXIT_OK = 0
EXIT_BROKEN = 1
EXIT_INPUT = 2

_FORMATS = ("text", "json", "markdown")


def add_commands(sub: Any) -> None:
    """Add the budget commands to the ``chainlat`` parser's subparsers."""
    check = sub.add_parser(
        "check",
        help="judge traces against latency budgets (exit 1 when one is broken)",
        description="Judge workflow runs in trace files or Jaeger against a budget file.",
    )
    add_source_arguments(check)
    add_filter_arguments(check)
    check.add_argument(
        "--budgets",
        metavar="FILE",
        help="budget file (default: chainlat.toml, chainlat.yaml or [tool.chainlat] "
        "in pyproject.toml in the working directory)",
    )
    check.add_argument("--format", choices=_FORMATS, default="text")
    check.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report")
    check.add_argument(
        "--allow-missing",
        action="store_true",
        help="a budgeted workflow or step that no run has is not an error (default: it is, "
        "exit 2, as a misspelled name would otherwise pass)",
    )
    check.add_argument(
        "--allow-unjudged",
        action="store_true",
        help="a limit that cannot be judged for any other reason (too few runs, no price, "
        "an incomplete run, ...) is shown but not an error (default: exit 2)",
    )
    _cli_prometheus.add_check_options(check)
    check.set_defaults(func=_check)

    report = sub.add_parser(
        "report",
        help="latency statistics and waterfalls of trace files or Jaeger",
        description="Statistics per workflow, kind and step, and the slowest and median run.",
    )
    add_source_arguments(report)
    add_filter_arguments(report)
    report.add_argument("--format", choices=_FORMATS, default="text")
    report.add_argument(
        "--html", metavar="FILE", help="also write a self-contained HTML page with charts"
    )
    report.add_argument(
        "--budgets", metavar="FILE", help="with --html: mark the limits each run broke"
    )
    report.add_argument(
        "--jaeger-ui", metavar="URL", help="with --html: link each run to its trace in Jaeger"
    )
    report.set_defaults(func=_report)

    diff = sub.add_parser(
        "diff",
        help="compare two trace files per workflow and step (exit 1 on a regression)",
        description="Compare p50/p95 per workflow and step; flag changes beyond run-to-run "
        "noise (Mann-Whitney U and a tail test, Holm-adjusted) that exceed --threshold.",
    )
    diff.add_argument("baseline", metavar="BASELINE", help="trace file before")
    diff.add_argument("current", metavar="CURRENT", help="trace file after")
    diff.add_argument(
        "--threshold",
        default="10%",
        help="slowdown of p50 or p95 that counts as a regression (default 10%%)",
    )
    diff.add_argument(
        "--alpha",
        type=float,
        default=0.01,
        help="significance level for 'beyond noise' (default 0.01)",
    )
    diff.add_argument("--format", choices=_FORMATS, default="text")
    add_reader_options(diff)
    diff.set_defaults(func=_diff)

    budgets = sub.add_parser("budgets", help="budget files: JSON schema, validation")
    budgets_sub = budgets.add_subparsers(dest="budgets_command", required=True)
    schema = budgets_sub.add_parser("schema", help="print the JSON schema of budget files")
    schema.add_argument("--output", "-o", metavar="FILE", help="write it to FILE")
    schema.set_defaults(func=_schema)
    validate = budgets_sub.add_parser("validate", help="check a budget file")
    validate.add_argument("file", nargs="?", metavar="FILE", help="default: found in the cwd")
    validate.set_defaults(func=_validate)
    _cli_prometheus.add_budgets_commands(budgets_sub)


def _runs(sources: list[TraceSource], counters: ReadCounters, roots: bool = False) -> Any:
    from chainlat.traces import read_runs

    return read_runs(sources, counters=counters, roots=roots)


def _nothing_read(sources: list[TraceSource], counters: ReadCounters) -> InputError:
    if counters.spans == 0:
        return InputError(f"nothing to judge: no spans in {describe(sources)}")
    return InputError(
        f"nothing to judge: {counters.spans} spans in {describe(sources)}, "
        "none of them a workflow span (gen_ai.operation.name=invoke_workflow)"
    )


def to_json(document: dict[str, Any]) -> str:
    """A report document as JSON: non-finite numbers as null, never a bare NaN."""
    from chainlat.report.jsondoc import to_json as dumps

    return dumps(document)


def _emit(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _write(path: str, text: str, what: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot write the {what}: {exc.strerror or exc}") from None


def _check(args: argparse.Namespace) -> int:
    from chainlat import report
    from chainlat.budgets import evaluate, load_budgets
    from chainlat.traces import ReadCounters

    if args.prometheus:
        return _cli_prometheus.check(args)
    budgets = load_budgets(args.budgets)
    if not budgets.workflows:
        raise InputError(f"{budgets.source}: no workflows to judge (add [workflows.NAME])")
    sources = sources_from(args)
    counters = ReadCounters()
    chosen = RunFilter(args)
    budgeted = list(budgets.workflows)
    if chosen.workflows:
        # Only the budgets of the workflows asked for are judged.
        budgets = budgets.model_copy(
            update={
                "workflows": {k: budgets.workflows[k] for k in budgeted if k in chosen.workflows}
            }
        )
    result = evaluate(
        chosen.select(_runs(sources, counters, args.roots)),
        budgets,
        allow=allowed_reasons(args),
        late_spans=counters.late_workflows,
    )
    if counters.workflows == 0:
        raise _nothing_read(sources, counters)
    chosen.check_names()
    if not budgets.workflows:
        raise InputError(
            f"--workflow {', '.join(chosen.workflows)}: no budget for it in {budgets.source} "
            f"(budgeted: {', '.join(budgeted)})"
        )
    where = _where(sources, chosen)
    if args.format == "json":
        _emit(to_json(report.check_json(result)))
    elif args.format == "markdown":
        _emit(report.check_markdown(result, sources=where))
    else:
        _emit(report.check_text(result, sources=where))
    if args.junit:
        _write(args.junit, report.junit_xml(result), "JUnit report")
    warn(counters)
    warn_limits(sources, counters)
    warn_sampling(result.stats)
    warn_unjudged(result)
    return result.exit_code


def allowed_reasons(args: argparse.Namespace) -> frozenset[NotJudgedReason]:
    """The reasons for not judging a limit that ``--allow-missing`` and ``--allow-unjudged``
    opt out of."""
    from chainlat.budgets import ABSENT_REASONS, UNJUDGED_REASONS

    allowed: frozenset[NotJudgedReason] = frozenset()
    if getattr(args, "allow_missing", False):
        allowed |= ABSENT_REASONS
    if getattr(args, "allow_unjudged", False):
        allowed |= UNJUDGED_REASONS
    return allowed


def warn_unjudged(result: BudgetReport) -> None:
    """One line on stderr per limit that could not be judged and fails the gate (one per
    workflow or step for a name no run has), or one saying nothing was judged."""
    from chainlat.report._common import source_name, unjudged_key, visible

    source = source_name(result.budgets_source)
    lines = dict.fromkeys(
        f"chainlat: {source}: {unjudged_key(v)}: {visible(v.why or '')}" for v in result.unjudged
    )
    if not lines and not result.broken and not result.judged:
        budgeted = ", ".join(dict.fromkeys(v.workflow for v in result.verdicts)) or "none"
        ran = ", ".join(result.stats.workflows) or "none"
        lines[
            f"chainlat: nothing to judge: no limit could be judged (budgeted: {budgeted}; "
            f"in the traces: {ran})"
        ] = None
    for line in lines:
        sys.stderr.write(visible(line) + "\n")


def _report(args: argparse.Namespace) -> int:
    from chainlat import report
    from chainlat._core.stats import aggregate
    from chainlat.traces import ReadCounters

    sources = sources_from(args)
    counters = ReadCounters()
    chosen = RunFilter(args)
    tally = None
    explorer = None
    if (args.budgets or args.jaeger_ui) and not args.html:
        raise InputError("--budgets and --jaeger-ui mark the runs of the HTML page: add --html")
    if args.html:
        from chainlat.analysis.tradeoff import Tally
        from chainlat.budgets import load_budgets

        tally = Tally()
        explorer = report.RunExplorer(
            budgets=load_budgets(args.budgets) if args.budgets else None,
            jaeger_ui=report.jaeger_ui_url(args.jaeger_ui) if args.jaeger_ui else None,
        )
    selected = chosen.select(
        _runs(sources, counters, args.roots)
        if tally is None
        else _tallied(sources, counters, tally, args.roots, chosen)
    )
    stats = aggregate(selected if explorer is None else explorer.watch(selected))
    if counters.workflows == 0:
        raise _nothing_read(sources, counters)
    chosen.check_names()
    warn(counters)
    warn_limits(sources, counters)
    warn_sampling(stats)
    waterfalls = _waterfalls(stats, sources, args.roots, chosen)
    where = _where(sources, chosen)
    if args.html:
        tradeoff = tally.comparison() if tally is not None and tally.labelled else None
        try:
            page = report.html_page(
                stats, sources=where, waterfalls=waterfalls, tradeoff=tradeoff, explorer=explorer
            )
        except ImportError:
            raise InputError("--html needs plotly: pip install 'chainlat[html]'") from None
        _write(args.html, page, "HTML report")
    if args.format == "json":
        _emit(to_json(report.stats_json(stats)))
    elif args.format == "markdown":
        _emit(report.stats_markdown(stats, sources=where, waterfalls=waterfalls))
    else:
        _emit(report.stats_text(stats, sources=where, waterfalls=waterfalls))
    return EXIT_OK


def _where(sources: list[TraceSource], chosen: RunFilter) -> str:
    """The sources, and which of their runs were selected, for a report's title."""
    if not chosen.active:
        return describe(sources)
    read = f"{chosen.read} run" + ("" if chosen.read == 1 else "s")
    return f"{describe(sources)} ({chosen.described()}; {read} read)"


def _tallied(
    sources: list[TraceSource],
    counters: ReadCounters,
    tally: Tally,
    roots: bool,
    chosen: RunFilter | None = None,
) -> Any:
    """The runs of the sources; on the way, their variants and outcomes counted into ``tally``
    (of the runs ``chosen`` selects, when given)."""
    wanted = RunFilter(argparse.Namespace()) if chosen is None else chosen
    for source in sources:
        for trace in source.traces(counters):
            runs = trace.workflow_runs(roots=roots)
            counters.workflows += len(runs)
            for run in runs:
                if not run.nested and wanted.matches(run):
                    tally.add(run)
            yield from runs


def _waterfalls(
    stats: Stats, sources: list[TraceSource], roots: bool, chosen: RunFilter | None = None
) -> dict[str, list[tuple[str, WorkflowRun]]]:
    """The slowest run (kept while aggregating) and the median run (a second pass) per workflow."""
    medians = {name: w.quantities["total"].percentile(50) for name, w in stats.workflows.items()}
    found: dict[str, WorkflowRun] = {}
    runs = _runs(sources, _quiet_counters(), roots)
    for run in runs if chosen is None else (r for r in runs if chosen.matches(r)):
        if run.workflow not in found and run.total_ms == medians.get(run.workflow):
            found[run.workflow] = run
            if len(found) == len(medians):
                break
    out: dict[str, list[tuple[str, WorkflowRun]]] = {}
    for name, workflow in stats.workflows.items():
        pairs: list[tuple[str, WorkflowRun]] = []
        if workflow.slowest is not None:
            pairs.append((f"{name}: slowest run", workflow.slowest))
        if name in found:
            pairs.append((f"{name}: median run (p50 of total)", found[name]))
        out[name] = pairs
    return out


def _quiet_counters() -> ReadCounters:
    from chainlat.traces import ReadCounters

    return ReadCounters()


def _threshold(text: str) -> float:
    raw = text.strip().removesuffix("%")
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"--threshold {shown(text)}: expected a percentage like 10%") from None
    # float() reads "nan" and "inf" too; a NaN threshold would turn every regression off.
    if not math.isfinite(value) or value < 0:
        raise InputError(f"--threshold {shown(text)}: expected a finite percentage of 0 or more")
    return value / 100


def _diff(args: argparse.Namespace) -> int:
    from chainlat import report
    from chainlat.analysis.diff import compare
    from chainlat.traces import ReadCounters

    threshold = _threshold(args.threshold)
    if not 0 < args.alpha < 1:  # False for NaN too
        raise InputError(f"--alpha {args.alpha}: expected a probability between 0 and 1")
    sides = [file_source(path, args) for path in (args.baseline, args.current)]
    counters = [ReadCounters(), ReadCounters()]
    result = compare(
        _runs([sides[0]], counters[0], args.roots),
        _runs([sides[1]], counters[1], args.roots),
        threshold=threshold,
        alpha=args.alpha,
    )
    for side, count in zip(sides, counters, strict=True):
        if count.workflows == 0:
            raise _nothing_read([side], count)
    warn(*counters)
    if args.format == "json":
        _emit(to_json(report.diff_json(result)))
    elif args.format == "markdown":
        _emit(report.diff_markdown(result))
    else:
        _emit(report.diff_text(result))
    if result.regressions:
        return EXIT_BROKEN
    if result.judged == 0:
        raise InputError("nothing to compare: no workflow or step has enough runs on both sides")
    return EXIT_OK


def _schema(args: argparse.Namespace) -> int:
    from chainlat.budgets import json_schema

    text = json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
    if args.output:
        _write(args.output, text, "schema")
    else:
        _emit(text)
    return EXIT_OK


def _validate(args: argparse.Namespace) -> int:
    from chainlat.budgets import load_budgets
    from chainlat.report._common import source_name, visible

    budgets = load_budgets(args.file)
    names = ", ".join(budgets.workflows) or "no workflows"
    _emit(visible(f"{source_name(budgets.source)}: ok ({names})"))
    return EXIT_OK
