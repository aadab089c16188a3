"""``chainlat profile``, ``chainlat whatif`` and ``chainlat compare``: thin over the modules.

Usage::

    chainlat profile traces.jsonl [--output profiles.toml] [--workflow W] [--variant V]
    chainlat whatif traces.jsonl --swap "chat gpt-4o=gpt-4o-mini" --prompt-scale "chat gpt-4o=0.5"
        --cache-hit-rate "chat gpt-4o=0.3" --drop "data rerank" [--profiles FILE]
        [--budgets FILE] [--workflow W] [--variant V] [--seed N] [--format text|json]
    chainlat compare traces.jsonl [--outcomes outcomes.jsonl] [--html FILE] [--format text|json]

Each reads trace files or Jaeger (``--jaeger URL --service NAME [--lookback 1h]
[--limit 100]``) as ``chainlat check`` does. ``whatif`` exits 1 when a budget
file is given and the estimated runs break it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from chainlat.cli.sources import add_source_arguments, describe, sources_from
from chainlat.report import tradeoff as tradeoff_report

if TYPE_CHECKING:
    from collections.abc import Iterator

    from rich.console import Console

    from chainlat._core.prices import Price
    from chainlat._core.runs import WorkflowRun

EXIT_OK = 0
EXIT_BUDGET = 1


def add_commands(sub: Any) -> None:
    """Add ``profile``, ``whatif`` and ``compare`` to the ``chainlat`` subparsers."""
    profile = sub.add_parser(
        "profile",
        help="fit a latency profile per model from traces",
        description="Fit, for every model called in the traces, time to first token against "
        "input tokens, time per output token, queue and network shares and residual spread.",
    )
    _sources(profile)
    profile.add_argument(
        "--output", "-o", metavar="FILE", help="write the profiles to FILE (.toml or .json)"
    )
    profile.add_argument("--format", choices=("text", "json"), default="text")
    profile.set_defaults(func=_profile)

    whatif = sub.add_parser(
        "whatif",
        help="re-estimate recorded runs with a model swapped, a prompt shortened, ...",
        description="Re-estimate every recorded run with the changes applied, rebuild its "
        "timeline and recompute the chain total along the new critical path.",
    )
    _sources(whatif)
    whatif.add_argument(
        "--swap", action="append", default=[], metavar='"STEP=MODEL"',
        help='use another model in a step: "chat gpt-4o=gpt-4o-mini"',
    )  # fmt: skip
    whatif.add_argument(
        "--prompt-scale", action="append", default=[], metavar='"STEP=FACTOR"',
        help='scale a step\'s input tokens: "chat gpt-4o=0.5"',
    )  # fmt: skip
    whatif.add_argument(
        "--cache-hit-rate", action="append", default=[], metavar='"STEP=RATE"',
        help='serve a share of a step\'s calls from a cache: "chat gpt-4o=0.3"',
    )  # fmt: skip
    whatif.add_argument(
        "--drop", action="append", default=[], metavar='"STEP"',
        help='remove a step: "data rerank"',
    )  # fmt: skip
    whatif.add_argument(
        "--profiles", metavar="FILE", help="latency profiles that override the fitted ones"
    )
    whatif.add_argument("--budgets", metavar="FILE", help="judge the runs before and after")
    whatif.add_argument("--seed", type=int, default=0, help="seed of the cache-hit draws")
    whatif.add_argument(
        "--prices",
        metavar="FILE",
        help="model prices: a budget file's [prices] table; default: --budgets' own, if any",
    )
    whatif.add_argument("--format", choices=("text", "json"), default="text")
    whatif.set_defaults(func=_whatif)

    compare = sub.add_parser(
        "compare",
        help="compare variants: latency against success rate",
        description="Group runs by workflow and chainlat.variant: latency percentiles, the "
        "critical-path split, success rate with a Wilson 95%% interval, the Pareto front.",
    )
    add_source_arguments(compare)
    compare.add_argument("--workflow", metavar="NAME", help="only this workflow")
    compare.add_argument(
        "--outcomes", metavar="FILE", help="outcomes by trace id, JSON lines (override traces')"
    )
    compare.add_argument(
        "--prices",
        metavar="FILE",
        help="model prices: a budget file's [prices] table (US dollars per million tokens), "
        "for the cost per run of each variant",
    )
    compare.add_argument("--html", metavar="FILE", help="write the chart and table to FILE")
    compare.add_argument(
        "--jaeger-ui", metavar="URL", help="with --html: link each run to its trace in Jaeger"
    )
    compare.add_argument("--format", choices=("text", "json"), default="text")
    compare.set_defaults(func=_compare)


def _sources(parser: argparse.ArgumentParser) -> None:
    add_source_arguments(parser)
    parser.add_argument("--workflow", metavar="NAME", help="only the runs of this workflow")
    parser.add_argument("--variant", metavar="LABEL", help="only the runs of this variant")


def _console() -> Console:
    from rich.console import Console

    # Wide enough for the tables in a CI log or a pipe, where rich would assume 80.
    return Console(width=None if sys.stdout.isatty() else 140)


# -- profile -------------------------------------------------------------------------------


def _profile(args: argparse.Namespace) -> int:
    from chainlat._core.errors import InputError
    from chainlat.analysis.profiles import (
        STREAM_USAGE,
        calls_by_model,
        dumps_profiles,
        fit_by_model,
        save_profiles,
        usage_gaps,
    )
    from chainlat.traces import read_runs

    sources = sources_from(args)
    where = describe(sources)
    selected = 0

    def runs() -> Iterator[WorkflowRun]:
        # Streamed: the fit keeps each model call's few numbers, not the runs.
        nonlocal selected
        # Every trace's root is a run too: model calls are fitted whatever is around them.
        for run in read_runs(sources, outcomes=True, roots=True):
            if run.nested:
                continue  # a step of the run around it
            if (args.workflow is None or run.workflow == args.workflow) and (
                args.variant is None or run.variant_label == args.variant
            ):
                selected += 1
                yield run

    calls = calls_by_model(runs())
    profiles = fit_by_model(calls)
    gaps = usage_gaps(c for found in calls.values() for c in found)
    if not selected:
        raise InputError(f"{where}: no workflow run to fit profiles from")
    if not profiles:
        streamed = f" ({sum(gaps.values())} streamed without them: {STREAM_USAGE})"
        raise InputError(
            f"{where}: no model call with token counts to fit a profile from"
            + (streamed if gaps else "")
        )
    if args.output:
        save_profiles(args.output, profiles)
    if args.format == "json":
        print(dumps_profiles(profiles, fmt="json"), end="")
        for line in tradeoff_report.usage_gap_lines(gaps):
            print(f"chainlat: warning: {line}", file=sys.stderr)
        return EXIT_OK
    _console().print(tradeoff_report.profiles_text(profiles, selected, where, gaps))
    if args.output:
        print(f"profiles written to {args.output}")
    return EXIT_OK


# -- whatif --------------------------------------------------------------------------------


def _whatif(args: argparse.Namespace) -> int:
    from chainlat.analysis.profiles import load_profiles
    from chainlat.analysis.whatif import whatif
    from chainlat.traces import load_runs

    budgets = None
    if args.budgets:
        from chainlat.budgets import load_budgets

        budgets = load_budgets(args.budgets)
    sources = sources_from(args)
    profiles = load_profiles(args.profiles) if args.profiles else None
    result = whatif(
        load_runs(sources, roots=args.roots),
        swap=args.swap,
        prompt_scale=args.prompt_scale,
        cache_hit_rate=args.cache_hit_rate,
        drop=args.drop,
        profiles=profiles,
        budgets=budgets,
        workflow=args.workflow,
        variant=args.variant,
        seed=args.seed,
        source=describe(sources),
        prices=load_prices(args.prices)
        if args.prices
        else (budgets.model_prices() if budgets is not None else None),
    )
    after_ok = result.budget_after is None or result.budget_after.ok
    if args.format == "json":
        print(json.dumps(tradeoff_report.whatif_json(result), indent=2, allow_nan=False))
    else:
        _console().print(tradeoff_report.whatif_text(result, describe(sources)))
    return EXIT_OK if after_ok else EXIT_BUDGET


# -- compare -------------------------------------------------------------------------------


def load_prices(path: str | None) -> dict[str, Price] | None:
    """The ``[prices]`` table of a budget file; None without ``--prices``."""
    if path is None:
        return None
    from chainlat._core.errors import InputError
    from chainlat.budgets import load_budgets

    prices = load_budgets(path).model_prices()
    if prices is None:
        raise InputError(f'{path}: no [prices] table (add [prices."MODEL"] input_per_mtok = ...)')
    return prices


def _compare(args: argparse.Namespace) -> int:
    from chainlat.analysis.tradeoff import compare
    from chainlat.report import tradeoff_page

    sources = sources_from(args)
    comparison = compare(
        sources,
        workflow=args.workflow,
        outcomes=args.outcomes,
        roots=args.roots,
        prices=load_prices(args.prices),
    )
    if args.html:
        from chainlat._core.errors import InputError
        from chainlat.report import RunExplorer, jaeger_ui_url
        from chainlat.traces import read_runs

        explorer = RunExplorer(jaeger_ui=jaeger_ui_url(args.jaeger_ui) if args.jaeger_ui else None)
        for run in read_runs(sources, outcomes=True, roots=args.roots):
            if args.workflow is None or run.workflow == args.workflow:
                explorer.add(run)
        try:
            page = tradeoff_page(comparison, sources=describe(sources), explorer=explorer)
        except ImportError:
            raise InputError("--html needs plotly: pip install 'chainlat[html]'") from None
        try:
            with open(args.html, "w", encoding="utf-8") as out:
                out.write(page)
        except OSError as exc:
            raise InputError(f"{args.html}: cannot write: {exc.strerror or exc}") from None
    if args.format == "json":
        print(json.dumps(tradeoff_report.compare_json(comparison), indent=2, allow_nan=False))
        return EXIT_OK
    _console().print(tradeoff_report.compare_text(comparison))
    if args.html:
        print(f"chart written to {args.html}")
    return EXIT_OK
