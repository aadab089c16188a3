"""``chainlat profile``, ``chainlat whatif`` and ``chainlat compare``: thin over the modules.

Usage::

    chainlat profile traces.jsonl [--output profiles.toml] [--format text|json|markdown]
    chainlat whatif traces.jsonl --swap "chat gpt-4o=gpt-4o-mini" --prompt-scale "chat gpt-4o=0.5"
        --cache-hit-rate "chat gpt-4o=0.3" --drop "data rerank" [--profiles FILE]
        [--budgets FILE] [--prices FILE] [--seed N] [--format text|json|markdown]
    chainlat compare traces.jsonl [--outcomes outcomes.jsonl] [--budgets FILE] [--prices FILE]
        [--html FILE] [--format text|json|markdown]

Each takes the common options of :mod:`chainlat.cli.options` (trace files or Jaeger, the
run filter ``--workflow NAME --variant NAME``, the reading bounds) and prints the readers'
warnings as ``chainlat check`` does. ``whatif`` judges the estimated runs as ``check`` judges
recorded ones when a budget file is given: exit 1 when they break it, 2 when a limit
cannot be judged (``--allow-missing``, ``--allow-unjudged`` as ``check``'s).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from chainlat._core.exits import EXIT_OK
from chainlat.cli.formats import emit as emit_result
from chainlat.cli.judging import (
    add_allow,
    allowed_reasons,
    chosen_budgets,
    require_budgets,
    warn_unjudged,
)
from chainlat.cli.options import (
    RunFilter,
    add_budgets,
    add_command,
    add_format,
    add_jaeger_ui,
    add_reading,
    add_run_filter,
    add_sources,
)
from chainlat.cli.output import write_file
from chainlat.cli.sources import describe, load, read, settle, sources_from

if TYPE_CHECKING:
    from collections.abc import Iterator

    from chainlat._core.prices import Price
    from chainlat._core.runs import WorkflowRun
    from chainlat.traces import TraceSource


def add_commands(sub: Any) -> None:
    """Add ``profile``, ``whatif`` and ``compare`` to the ``chainlat`` subparsers."""
    _add_profile(sub)
    _add_whatif(sub)
    _add_compare(sub)


def _add_profile(sub: Any) -> None:
    """``chainlat profile``."""
    profile = add_command(
        sub,
        "profile",
        _profile,
        help="fit a latency profile per model from traces",
        description="Fit, for every model called in the traces, time to first token against "
        "input tokens, time per output token, queue and network shares and residual spread.",
    )
    add_sources(profile)
    profile.add_argument(
        "--output", "-o", metavar="FILE", help="write the profiles to FILE (.toml or .json)"
    )
    add_format(profile, "profiles")
    add_run_filter(profile)
    add_reading(profile)


def _add_whatif(sub: Any) -> None:
    """``chainlat whatif``."""
    whatif = add_command(
        sub,
        "whatif",
        _whatif,
        help="re-estimate recorded runs with a model swapped, a prompt shortened, ...",
        description="Re-estimate every recorded run with the changes applied, rebuild its "
        "timeline and recompute the chain total along the new critical path.",
    )
    add_sources(whatif)
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
    add_budgets(
        whatif,
        "judge the runs before and after (exit 1 when the estimate breaks it, 2 when a "
        "limit cannot be judged, as check)",
        found=False,
    )
    add_allow(whatif)
    whatif.add_argument(
        "--prices",
        metavar="FILE",
        help="model prices: a budget file's [prices] table; default: --budgets' own, if any",
    )
    whatif.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seed of the cache-hit draws"
    )
    add_format(whatif, "whatif")
    add_run_filter(whatif)
    add_reading(whatif)


def _add_compare(sub: Any) -> None:
    """``chainlat compare``."""
    compare = add_command(
        sub,
        "compare",
        _compare,
        help="compare variants: latency against success rate",
        description="Group runs by workflow and chainlat.variant: latency percentiles, the "
        "critical-path split, success rate with a Wilson 95% interval, the Pareto front.",
    )
    add_sources(compare)
    compare.add_argument(
        "--outcomes", metavar="FILE", help="outcomes by trace id, JSON lines (override traces')"
    )
    add_budgets(
        compare, "its [prices] give the cost per run of each variant, its limits mark the "
        "runs of the --html page",
    )  # fmt: skip
    compare.add_argument(
        "--prices",
        metavar="FILE",
        help="model prices: a budget file's [prices] table (US dollars per million tokens); "
        "default: the budget file's own, if any",
    )
    compare.add_argument("--html", metavar="FILE", help="also write the chart and table to FILE")
    add_jaeger_ui(compare)
    add_format(compare, "comparison")
    add_run_filter(compare)
    add_reading(compare)


def _read(args: argparse.Namespace, sources: list[TraceSource], purpose: str) -> list[WorkflowRun]:
    """The selected runs that are not steps of another, once the filter's names are checked
    and the readers' warnings printed."""
    from chainlat.traces import ReadCounters

    counters = ReadCounters()
    chosen = RunFilter(args)
    runs = load(sources, counters, chosen, roots=args.roots)
    settle(sources, counters, chosen, purpose)
    return runs


# -- profile -------------------------------------------------------------------------------


def _profile(args: argparse.Namespace) -> int:
    from chainlat._core.errors import InputError
    from chainlat.analysis.profiles import (
        STREAM_USAGE,
        calls_by_model,
        fit_by_model,
        save_profiles,
        usage_gaps,
    )
    from chainlat.traces import ReadCounters

    sources = sources_from(args)
    where = describe(sources)
    counters = ReadCounters()
    chosen = RunFilter(args)

    def runs() -> Iterator[WorkflowRun]:
        # Streamed: the fit keeps each model call's few numbers, not the runs. Every trace's
        # root is a run too: model calls are fitted whatever is around them.
        for run in read(sources, counters, chosen, roots=True):
            if not run.nested:  # else a step of the run around it
                yield run

    calls = calls_by_model(runs())
    profiles = fit_by_model(calls)
    gaps = usage_gaps(c for found in calls.values() for c in found)
    settle(sources, counters, chosen, "fit")
    if not profiles:
        streamed = f" ({sum(gaps.values())} streamed without them: {STREAM_USAGE})"
        raise InputError(
            f"{where}: no model call with token counts to fit a profile from"
            + (streamed if gaps else "")
        )
    if args.output:
        save_profiles(args.output, profiles)
    selected = sum(sampled.runs for sampled in chosen.sampled.values())
    emit_result(
        "profiles",
        args.format,
        profiles,
        selected=selected,
        sources=where,
        gaps=gaps,
        written=args.output,
    )
    return EXIT_OK


# -- whatif --------------------------------------------------------------------------------


def _whatif(args: argparse.Namespace) -> int:
    from chainlat.analysis.profiles import load_profiles
    from chainlat.analysis.whatif import whatif

    budgets = None
    if args.budgets:
        from chainlat.budgets import load_budgets

        budgets = load_budgets(args.budgets)
    sources = sources_from(args)
    profiles = load_profiles(args.profiles) if args.profiles else None
    runs = _read(args, sources, "estimate")
    if budgets is not None:
        budgeted = list(budgets.workflows)
        chosen = RunFilter(args)
        budgets = chosen_budgets(budgets, chosen)
        require_budgets(budgets, chosen, budgeted)
    result = whatif(
        runs,
        swap=args.swap,
        prompt_scale=args.prompt_scale,
        cache_hit_rate=args.cache_hit_rate,
        drop=args.drop,
        profiles=profiles,
        budgets=budgets,
        allow=allowed_reasons(args),
        seed=args.seed,
        source=describe(sources),
        prices=load_prices(args.prices)
        if args.prices
        else (budgets.model_prices() if budgets is not None else None),
    )
    emit_result("whatif", args.format, result, sources=describe(sources))
    if result.budget_after is None:
        return EXIT_OK
    # The estimate is the gate, judged as check judges: broken 1, not judged 2.
    warn_unjudged(result.budget_after)
    return result.budget_after.exit_code


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
    from chainlat.cli.budgets import found_budgets
    from chainlat.report import tradeoff_page

    budgets = found_budgets(args.budgets)
    prices = load_prices(args.prices)
    if prices is None and budgets is not None:
        prices = budgets.model_prices()
    sources = sources_from(args)
    runs = _read(args, sources, "compare")
    comparison = compare(runs, outcomes=args.outcomes, prices=prices)
    if args.html:
        from chainlat._core.errors import InputError
        from chainlat.report import RunExplorer, jaeger_ui_url

        explorer = RunExplorer(
            budgets=budgets,
            jaeger_ui=jaeger_ui_url(args.jaeger_ui) if args.jaeger_ui else None,
        )
        for run in runs:
            explorer.add(run)
        if budgets is not None and budgets.workflows:
            from chainlat.budgets import evaluate

            # The page's budget verdict is check's over the same runs.
            explorer.verdict = evaluate(runs, chosen_budgets(budgets, RunFilter(args)))
        try:
            page = tradeoff_page(comparison, sources=describe(sources), explorer=explorer)
        except ImportError:
            raise InputError("--html needs plotly: pip install 'chainlat[html]'") from None
        write_file(args.html, page, "chart")
    emit_result("comparison", args.format, comparison, chart=args.html)
    return EXIT_OK
