"""``chainlat budgets rules`` and ``chainlat check --prometheus``: budgets enforced from metrics.

Exit codes are :mod:`chainlat._core.exits`'s: 0 ok, 1 a budget broken, 2 bad input, an
unreachable Prometheus or a limit not judged. Output goes through :mod:`chainlat.cli.output`.
"""

from __future__ import annotations

import argparse
from typing import Any

from chainlat._core.errors import InputError
from chainlat._core.exits import EXIT_OK
from chainlat.cli.options import BUDGETS_FOUND, add_command
from chainlat.cli.output import emit_or_write, write_file


def add_check_options(check: argparse.ArgumentParser) -> None:
    """``--prometheus URL --window 1h`` on ``chainlat check``."""
    group = check.add_argument_group("Prometheus's HTTP API (instead of traces)")
    group.add_argument(
        "--prometheus",
        metavar="URL",
        help="judge the budgets from the span-metrics and chainlat histograms in "
        "Prometheus, e.g. http://host:9090 (no trace is read)",
    )
    group.add_argument(
        "--window",
        default="1h",
        metavar="DURATION",
        help="the range the metrics cover, ending now (default 1h)",
    )


def add_budgets_commands(budgets_sub: Any) -> None:
    """``chainlat budgets rules FILE``."""
    rules = add_command(
        budgets_sub,
        "rules",
        rules_command,
        help="write Prometheus recording and alerting rules for a budget file",
        description="Prometheus rules (YAML) that enforce every limit metrics can express; "
        "the others are listed in a comment.",
    )
    rules.add_argument("file", nargs="?", metavar="FILE", help=BUDGETS_FOUND)
    rules.add_argument(
        "--window", default="1h", metavar="DURATION", help="range of each rule (default 1h)"
    )
    rules.add_argument(
        "--for",
        dest="for_",
        default="",
        metavar="DURATION",
        help="how long a limit stays broken before the alert fires (default: at once)",
    )
    rules.add_argument(
        "--evaluation-interval",
        default="30s",
        metavar="DURATION",
        help="the rule groups' interval (default 30s)",
    )
    rules.add_argument("--output", "-o", metavar="FILE", help="write the rules to FILE")
    rules.add_argument(
        "--spanmetrics-buckets",
        action="store_true",
        help="print only the span-metrics bucket boundaries these limits need, as "
        "CHAINLAT_SPANMETRICS_BUCKETS takes them",
    )


def rules_command(args: argparse.Namespace) -> int:
    """``chainlat budgets rules``."""
    from chainlat.budgets import load_budgets
    from chainlat.prometheus import bucket_boundaries, buckets_setting, prometheus_rules

    budgets = load_budgets(args.file)
    if not budgets.workflows:
        raise InputError(f"{budgets.source}: no workflows (add [workflows.NAME])")
    if args.spanmetrics_buckets:
        text = buckets_setting(bucket_boundaries(budgets))
    else:
        text = prometheus_rules(
            budgets,
            window=args.window,
            for_=args.for_,
            evaluation_interval=args.evaluation_interval,
        )
    emit_or_write(args.output, text, "rules")
    return EXIT_OK


def check(args: argparse.Namespace) -> int:
    """``chainlat check --prometheus URL``: the verdict table, read from metrics."""
    from chainlat import report
    from chainlat.budgets import load_budgets
    from chainlat.cli.formats import emit as emit_result
    from chainlat.cli.judging import allowed_reasons, warn_unjudged
    from chainlat.prometheus import PrometheusReader, judge_prometheus

    if args.sources or args.jaeger:
        raise InputError("--prometheus reads metrics: give no trace files and no --jaeger")
    budgets = load_budgets(args.budgets)
    if not budgets.workflows:
        raise InputError(f"{budgets.source}: no workflows to judge (add [workflows.NAME])")
    reader = PrometheusReader(args.prometheus, timeout_s=args.timeout)
    result = judge_prometheus(budgets, reader, window=args.window, allow=allowed_reasons(args))
    where = report.prometheus_source(reader.url, args.window)
    emit_result("prometheus", args.format, result, source=where)
    if args.junit:
        write_file(args.junit, report.junit_xml(result), "JUnit report")
    warn_unjudged(result)
    return result.exit_code
