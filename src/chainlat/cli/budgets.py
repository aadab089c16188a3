"""``chainlat check``, ``report``, ``diff`` and ``budgets``: thin commands over budgets,
traces, diff and report.

Their common options come from :mod:`chainlat.cli.options`, their output goes through
:mod:`chainlat.cli.output`, and their exit codes are :mod:`chainlat._core.exits`'s: 0 ok, 1
a budget broken or a regression found, 2 bad input, an unreachable source or nothing to
judge.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import TYPE_CHECKING, Any

from chainlat._core.errors import InputError, shown
from chainlat._core.exits import EXIT_BROKEN, EXIT_OK
from chainlat.cli import prometheus as _cli_prometheus
from chainlat.cli.formats import emit as emit_result
from chainlat.cli.judging import (
    add_allow,
    allowed_reasons,
    chosen_budgets,
    require_budgets,
    warn_unjudged,
)
from chainlat.cli.options import (
    BUDGETS_FOUND,
    RunFilter,
    add_budgets,
    add_command,
    add_format,
    add_jaeger_ui,
    add_reading,
    add_run_filter,
    add_sources,
)
from chainlat.cli.output import emit, emit_or_write, print_warnings, write_file
from chainlat.cli.sources import describe, file_source, nothing_read, read, settle, sources_from

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from chainlat._core.runs import WorkflowRun
    from chainlat._core.stats import Stats
    from chainlat.analysis.tradeoff import ComparisonTally
    from chainlat.budgets import Budgets
    from chainlat.report import RunExplorer
    from chainlat.traces import ReadCounters, TraceSource


def add_commands(sub: Any) -> None:
    """Add the budget commands to the ``chainlat`` parser's subparsers."""
    _add_check(sub)
    _add_report(sub)
    _add_diff(sub)
    _add_budgets(sub)


def _add_check(sub: Any) -> None:
    """``chainlat check``."""
    check = add_command(
        sub,
        "check",
        _check,
        help="judge traces against latency budgets (exit 1 when one is broken)",
        description="Judge workflow runs in trace files or Jaeger against a budget file.",
    )
    add_sources(check)
    add_budgets(check, "the limits to judge")
    add_format(check, "check", "prometheus")
    check.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report")
    add_allow(check)
    add_run_filter(check)
    _cli_prometheus.add_check_options(check)
    add_reading(check)


def _add_report(sub: Any) -> None:
    """``chainlat report``."""
    report = add_command(
        sub,
        "report",
        _report,
        help="latency statistics and waterfalls of trace files or Jaeger",
        description="Statistics per workflow, kind and step, and the slowest and median run.",
    )
    add_sources(report)
    add_format(report, "stats")
    report.add_argument(
        "--html", metavar="FILE", help="also write a self-contained HTML page with charts"
    )
    add_budgets(report, "with --html, mark the limits each run broke")
    add_jaeger_ui(report)
    add_run_filter(report)
    add_reading(report)


def _add_diff(sub: Any) -> None:
    """``chainlat diff``."""
    diff = add_command(
        sub,
        "diff",
        _diff,
        help="compare two trace files per workflow and step (exit 1 on a regression)",
        description="Compare p50/p95 per workflow and step; flag changes beyond run-to-run "
        "noise (Mann-Whitney U and a tail test, Holm-adjusted) that exceed --threshold. "
        "One variant at a time: runs of several variants are not pooled (--variant NAME).",
    )
    diff.add_argument("baseline", metavar="BASELINE", help="trace file before")
    diff.add_argument("current", metavar="CURRENT", help="trace file after")
    add_format(diff, "diff")
    diff.add_argument(
        "--threshold",
        default="10%",
        metavar="PERCENT",
        help="slowdown of p50 or p95 that counts as a regression (default 10%%)",
    )
    diff.add_argument(
        "--alpha",
        type=float,
        default=0.01,
        metavar="P",
        help="significance level for 'beyond noise' (default 0.01)",
    )
    add_run_filter(diff)
    add_reading(diff, jaeger=False)


def _add_budgets(sub: Any) -> None:
    """``chainlat budgets schema``, ``validate`` and ``rules``."""
    budgets = sub.add_parser(
        "budgets", help="budget files: JSON schema, validation, Prometheus rules"
    )
    budgets_sub = budgets.add_subparsers(dest="budgets_command", required=True)
    schema = add_command(
        budgets_sub, "schema", _schema, help="print the JSON schema of budget files"
    )
    schema.add_argument("--output", "-o", metavar="FILE", help="write it to FILE")
    validate = add_command(budgets_sub, "validate", _validate, help="check a budget file")
    validate.add_argument("file", nargs="?", metavar="FILE", help=BUDGETS_FOUND)
    _cli_prometheus.add_budgets_commands(budgets_sub)


def _runs(sources: list[TraceSource], counters: ReadCounters, roots: bool = False) -> Any:
    from chainlat.traces import read_runs

    return read_runs(sources, counters=counters, roots=roots)


def _check(args: argparse.Namespace) -> int:
    from chainlat.budgets import load_budgets

    if args.prometheus:
        return _cli_prometheus.check(args)
    return check_sources(args, sources_from(args), load_budgets(args.budgets))


def check_sources(args: argparse.Namespace, sources: list[TraceSource], budgets: Budgets) -> int:
    """``chainlat check`` over ``sources``: judged, printed in ``args.format`` (and
    ``--junit``), its exit code returned; ``serve`` and ``run`` judge what they received
    with it."""
    from chainlat import report
    from chainlat.budgets import evaluate
    from chainlat.traces import ReadCounters

    if not budgets.workflows:
        raise InputError(f"{budgets.source}: no workflows to judge (add [workflows.NAME])")
    counters = ReadCounters()
    chosen = RunFilter(args)
    budgeted = list(budgets.workflows)
    budgets = chosen_budgets(budgets, chosen)
    result = evaluate(
        read(sources, counters, chosen, roots=args.roots),
        budgets,
        allow=allowed_reasons(args),
        late_spans=counters.late_workflows,
        dropped_runs=counters.dropped_workflows,
    )
    settle(sources, counters, chosen)
    require_budgets(budgets, chosen, budgeted)
    where = _where(sources, chosen)
    emit_result("check", args.format, result, sources=where, warnings=counters.warnings())
    if args.junit:
        write_file(args.junit, report.junit_xml(result), "JUnit report")
    warn_unjudged(result)
    return result.exit_code


def _report(args: argparse.Namespace) -> int:
    return report_sources(args, sources_from(args))


def report_sources(args: argparse.Namespace, sources: list[TraceSource]) -> int:
    """``chainlat report`` over ``sources``, printed in ``args.format``; ``serve`` and
    ``run`` report with it what they received when there is no budget file."""
    from chainlat import report
    from chainlat._core.stats import Stats, aggregate
    from chainlat.traces import ReadCounters

    counters = ReadCounters()
    chosen = RunFilter(args)
    tally = None
    explorer = None
    if (args.budgets or args.jaeger_ui) and not args.html:
        raise InputError("--budgets and --jaeger-ui mark the runs of the HTML page: add --html")
    if args.html:
        from chainlat.analysis.tradeoff import ComparisonTally

        tally = ComparisonTally()
        explorer = report.RunExplorer(
            budgets=found_budgets(args.budgets),
            jaeger_ui=report.jaeger_ui_url(args.jaeger_ui) if args.jaeger_ui else None,
        )
    selected = read(sources, counters, chosen, roots=args.roots)
    judged = None
    if explorer is not None and explorer.budgets is not None:
        judged = chosen_budgets(explorer.budgets, chosen)
    if explorer is not None and judged is not None and judged.workflows:
        # The page's budget verdict is check's: every run read, through the same evaluate;
        # the page's own runs are counted on the way.
        from chainlat.budgets import evaluate

        stats = Stats()
        explorer.verdict = evaluate(
            _counted(selected, chosen, stats, tally, explorer),
            judged,
            late_spans=counters.late_workflows,
            dropped_runs=counters.dropped_workflows,
        )
    else:
        if not chosen.workflows:
            # A run inside another run is a step of it (docs/attributes.md, rule 14): shown
            # as a workflow of its own only when --workflow names it.
            selected = (run for run in selected if not run.nested)
        if tally is not None:
            selected = _tallied(selected, tally)
        stats = aggregate(selected if explorer is None else explorer.watch(selected))
    settle(sources, counters, chosen, "report")
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
        write_file(args.html, page, "HTML report")
    emit_result(
        "stats",
        args.format,
        stats,
        sources=where,
        waterfalls=waterfalls,
        warnings=counters.warnings(),
    )
    return EXIT_OK


def found_budgets(path: str | None) -> Budgets | None:
    """The budget file named, else the one found in the working directory as ``check``
    finds it, else None."""
    from chainlat.budgets import discover_budgets, load_budgets

    if path is None and discover_budgets() is None:
        return None
    return load_budgets(path)


def _where(sources: list[TraceSource], chosen: RunFilter) -> str:
    """The sources, and which of their runs were selected, for a report's title."""
    if not chosen.active:
        return describe(sources)
    read = f"{chosen.read} run" + ("" if chosen.read == 1 else "s")
    return f"{describe(sources)} ({chosen.described()}; {read} read)"


def _tallied(runs: Iterable[WorkflowRun], tally: ComparisonTally) -> Iterator[WorkflowRun]:
    """The runs; on the way, the variants and outcomes of those that are not steps of
    another counted into ``tally``."""
    for run in runs:
        if not run.nested:
            tally.add(run)
        yield run


def _counted(
    runs: Iterable[WorkflowRun],
    chosen: RunFilter,
    stats: Stats,
    tally: ComparisonTally | None,
    explorer: RunExplorer,
) -> Iterator[WorkflowRun]:
    """Every run, for the judge; on the way, those the report shows (not a step of another
    run unless --workflow names it) counted into ``stats``, ``tally`` and ``explorer``."""
    for run in runs:
        if chosen.workflows or not run.nested:
            if tally is not None and not run.nested:
                tally.add(run)
            explorer.add(run)
            stats.add(run)
        yield run


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
    from chainlat.analysis.diff import diff_runs
    from chainlat.traces import ReadCounters

    threshold = _threshold(args.threshold)
    if not 0 < args.alpha < 1:  # False for NaN too
        raise InputError(f"--alpha {args.alpha}: expected a probability between 0 and 1")
    sides = [file_source(path, args) for path in (args.baseline, args.current)]
    counters = [ReadCounters(), ReadCounters()]
    chosen = RunFilter(args)
    variants: list[dict[str, dict[str, None]]] = [{}, {}]
    result = diff_runs(
        *(
            _noting_variants(read([side], count, chosen, roots=args.roots), seen)
            for side, count, seen in zip(sides, counters, variants, strict=True)
        ),
        threshold=threshold,
        alpha=args.alpha,
    )
    for side, count in zip(sides, counters, strict=True):
        if count.workflows == 0:
            raise nothing_read([side], count, "compare")
    chosen.check_names()
    _one_variant_each(sides, variants)
    print_warnings(*counters, runs=chosen)
    emit_result("diff", args.format, result)
    if result.regressions:
        return EXIT_BROKEN
    if result.judged == 0:
        raise InputError("nothing to compare: no workflow or step has enough runs on both sides")
    return EXIT_OK


def _noting_variants(
    runs: Iterable[WorkflowRun], seen: dict[str, dict[str, None]]
) -> Iterator[WorkflowRun]:
    for run in runs:
        seen.setdefault(run.workflow, {})[run.variant_label] = None
        yield run


def _one_variant_each(sides: list[TraceSource], variants: list[dict[str, dict[str, None]]]) -> None:
    """InputError when a side holds runs of one workflow in several variants: pooled, their
    percentiles move with the mix of variants, not with a change of either."""
    for side, seen in zip(sides, variants, strict=True):
        for workflow, labels in seen.items():
            if len(labels) > 1:
                raise InputError(
                    f"{side.name}: the runs of {shown(workflow)} are of "
                    f"{len(labels)} variants ({', '.join(shown(v) for v in labels)}); diff "
                    "compares one at a time: choose it with --variant NAME"
                )


def _schema(args: argparse.Namespace) -> int:
    from chainlat.budgets import json_schema

    text = json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"
    emit_or_write(args.output, text, "schema")
    return EXIT_OK


def _validate(args: argparse.Namespace) -> int:
    from chainlat._core.redact import visible
    from chainlat.budgets import load_budgets

    budgets = load_budgets(args.file)
    names = ", ".join(budgets.workflows) or "no workflows"
    emit(visible(f"{budgets.source}: ok ({names})"))  # the whole line cleaned, once
    return EXIT_OK
