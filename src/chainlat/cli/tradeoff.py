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

if TYPE_CHECKING:
    from collections.abc import Iterator

    from rich.console import Console

    from chainlat._core.runs import WorkflowRun
    from chainlat.analysis.profiles import LatencyProfile
    from chainlat.analysis.tradeoff import Comparison
    from chainlat.analysis.whatif import WhatIfResult

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
    compare.add_argument("--html", metavar="FILE", help="write the chart and table to FILE")
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


def _x(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _ms(value: float) -> str:
    return f"{value:,.0f}"


# -- profile -------------------------------------------------------------------------------


def _profile(args: argparse.Namespace) -> int:
    from chainlat._core.errors import InputError
    from chainlat.analysis.profiles import dumps_profiles, fit_profiles, save_profiles
    from chainlat.traces import read_runs

    sources = sources_from(args)
    where = describe(sources)
    selected = 0

    def runs() -> Iterator[WorkflowRun]:
        # Streamed: the fit keeps each model call's few numbers, not the runs.
        nonlocal selected
        for run in read_runs(sources, outcomes=True):
            if run.nested:
                continue  # a step of the run around it
            if (args.workflow is None or run.workflow == args.workflow) and (
                args.variant is None or run.variant_label == args.variant
            ):
                selected += 1
                yield run

    profiles = fit_profiles(runs())
    if not selected:
        raise InputError(f"{where}: no workflow run to fit profiles from")
    if not profiles:
        raise InputError(f"{where}: no model call with token counts to fit a profile from")
    if args.output:
        save_profiles(args.output, profiles)
    if args.format == "json":
        print(dumps_profiles(profiles, fmt="json"), end="")
        return EXIT_OK
    _print_profiles(_console(), profiles, selected, where)
    if args.output:
        print(f"profiles written to {args.output}")
    return EXIT_OK


def _print_profiles(
    console: Console, profiles: dict[str, LatencyProfile], runs: int, where: str
) -> None:
    from rich.table import Table

    table = Table(title=_x(f"latency profiles from {runs} runs in {where}"), title_justify="left")
    heads = ("model", "calls", "ttft base ms", "ms / input tok", "ms / output tok",
             "residual", "queue", "network", "input tokens")  # fmt: skip
    for head in heads:
        table.add_column(head, justify="left" if head == "model" else "right")
    notes = []
    for model, p in profiles.items():
        low, high = p.input_tokens_range or (0, 0)
        table.add_row(
            _x(model),
            f"{p.calls} ({p.ttft_calls} ttft)",
            f"{p.ttft_base_ms:.1f}",
            f"{p.ttft_per_input_token_ms:.4f}",
            "-" if p.decode_ms_per_token is None else f"{p.decode_ms_per_token:.3f}",
            "-" if p.residual_sigma is None else f"±{p.residual_sigma:.0%}",
            "-" if p.queue_share is None else f"{p.queue_share:.0%}",
            "-" if p.network_share is None else f"{p.network_share:.0%}",
            f"{low}-{high}",
        )
        if p.note:
            notes.append(f"{model}: {p.note}")
    console.print(table)
    for note in notes:
        console.print(f"note: {_x(note)}", soft_wrap=True)


# -- whatif --------------------------------------------------------------------------------


def _whatif(args: argparse.Namespace) -> int:
    from chainlat.analysis.whatif import whatif

    budgets = None
    if args.budgets:
        from chainlat.budgets import load_budgets

        budgets = load_budgets(args.budgets)
    sources = sources_from(args)
    result = whatif(
        sources,
        swap=args.swap,
        prompt_scale=args.prompt_scale,
        cache_hit_rate=args.cache_hit_rate,
        drop=args.drop,
        profiles=args.profiles,
        budgets=budgets,
        workflow=args.workflow,
        variant=args.variant,
        seed=args.seed,
    )
    after_ok = result.budget_after is None or result.budget_after.ok
    if args.format == "json":
        json.dump(_whatif_json(result), sys.stdout, indent=2)
        print()
    else:
        _print_whatif(_console(), result, describe(sources))
    return EXIT_OK if after_ok else EXIT_BUDGET


def _whatif_json(result: WhatIfResult) -> dict[str, Any]:
    return {
        "changes": [c.spec for c in result.changes],
        "workflows": [
            {
                "workflow": w.workflow,
                "variant": w.variant,
                "runs": w.runs,
                "before": {"p50": w.before.p50, "p95": w.before.p95, "p99": w.before.p99},
                "after": {"p50": w.after.p50, "p95": w.after.p95, "p99": w.after.p99},
                "share_before": w.share_before,
                "share_after": w.share_after,
                "steps": [
                    {
                        "step": s.step,
                        "after": s.after_name,
                        "kind": s.kind,
                        "occurrences": s.occurrences,
                        "p50_before_ms": s.before_p50_ms,
                        "p50_after_ms": s.after_p50_ms,
                        "critical_before": s.critical_before,
                        "critical_after": s.critical_after,
                    }
                    for s in w.steps
                ],
            }
            for w in result.workflows
        ],
        "budget_ok_before": None if result.budget_before is None else result.budget_before.ok,
        "budget_ok_after": None if result.budget_after is None else result.budget_after.ok,
        "notes": list(result.notes),
    }


def _print_whatif(console: Console, result: WhatIfResult, where: str) -> None:
    from rich.table import Table

    console.print(
        _x(f"what-if over {len(result.runs)} runs from {where}: ")
        + _x(" ".join(c.spec for c in result.changes)),
        soft_wrap=True,
    )
    for w in result.workflows:
        label = _x(w.workflow + (f" [{w.variant}]" if w.variant else ""))
        table = Table(title=f"{label}: {w.runs} runs (ms)", title_justify="left")
        for head in ("", "p50", "p95", "p99", "inference", "data", "tool", "overhead"):
            table.add_column(head, justify="left" if not head else "right")
        for name, p, share in (
            ("recorded", w.before, w.share_before),
            ("estimated", w.after, w.share_after),
        ):
            table.add_row(
                name,
                _ms(p.p50),
                _ms(p.p95),
                _ms(p.p99),
                *(f"{share[k]:.0%}" for k in ("inference", "data", "tool", "overhead")),
            )
        table.add_row(
            "change",
            *(
                f"{(a / b - 1) * 100:+.1f}%" if b else "-"
                for a, b in (
                    (w.after.p50, w.before.p50),
                    (w.after.p95, w.before.p95),
                    (w.after.p99, w.before.p99),
                )
            ),
            "",
            "",
            "",
            "",
        )
        console.print(table)
        steps = Table(
            title="per step: p50 ms, share of runs on the critical path", title_justify="left"
        )
        for head in ("step", "after", "p50 before", "p50 after", "critical before", "after"):
            steps.add_column(head, justify="left" if head in ("step", "after") else "right")
        for s in w.steps:
            steps.add_row(
                _x(s.step),
                "" if s.after_name == s.step else _x(s.after_name),
                f"{s.before_p50_ms:,.1f}",
                f"{s.after_p50_ms:,.1f}",
                f"{s.critical_before:.0%}",
                f"{s.critical_after:.0%}",
            )
        console.print(steps)
    for report, when in ((result.budget_before, "recorded"), (result.budget_after, "estimated")):
        if report is not None:
            broken = getattr(report, "broken", [])
            verdict = (
                "within budget"
                if not broken
                else f"{len(broken)} limit(s) broken: "
                + ("; ".join(str(v.violation()) for v in broken[:3]))
            )
            console.print(f"budget, {when} runs: {_x(verdict)}", soft_wrap=True)
    for note in result.notes:
        console.print(f"note: {_x(note)}", soft_wrap=True)
    console.print(
        "method: changed calls re-estimated from latency profiles with each run's own tokens "
        "and residual; timelines rebuilt; queueing not re-simulated (docs/tradeoffs.md)",
        soft_wrap=True,
        style="dim",
    )


# -- compare -------------------------------------------------------------------------------


def _compare(args: argparse.Namespace) -> int:
    from chainlat.analysis.tradeoff import compare, html_page

    sources = sources_from(args)
    comparison = compare(sources, workflow=args.workflow, outcomes=args.outcomes)
    if args.html:
        from chainlat._core.errors import InputError

        try:
            page = html_page(comparison, sources=describe(sources))
        except ImportError:
            raise InputError("--html needs plotly: pip install 'chainlat[html]'") from None
        try:
            with open(args.html, "w", encoding="utf-8") as out:
                out.write(page)
        except OSError as exc:
            raise InputError(f"{args.html}: cannot write: {exc.strerror or exc}") from None
    if args.format == "json":
        json.dump(_compare_json(comparison), sys.stdout, indent=2)
        print()
        return EXIT_OK
    _print_compare(_console(), comparison)
    if args.html:
        print(f"chart written to {args.html}")
    return EXIT_OK


def _compare_json(comparison: Comparison) -> dict[str, Any]:
    return {
        "variants": [
            {
                "workflow": v.workflow,
                "variant": v.variant,
                "runs": v.runs,
                "p50": v.total.p50,
                "p95": v.total.p95,
                "p99": v.total.p99,
                "split_p50": v.split_p50,
                "share": v.share,
                "success": None
                if v.success is None
                else {
                    "successes": v.success.successes,
                    "trials": v.success.trials,
                    "rate": v.success.rate,
                    "low": v.success.low,
                    "high": v.success.high,
                },
                "score_mean": v.score_mean,
                "pareto": v.pareto,
            }
            for v in comparison.variants
        ]
    }


def _print_compare(console: Console, comparison: Comparison) -> None:
    from rich.table import Table

    kinds = ("inference", "data", "tool", "overhead")
    for workflow in comparison.workflows():
        table = Table(title=f"{_x(workflow)}: variants (ms)", title_justify="left")
        heads = ("variant", "runs", "p50", "p95", "p99", *kinds, "success", "95% CI", "score",
                 "Pareto")  # fmt: skip
        for head in heads:
            table.add_column(head, justify="left" if head == "variant" else "right")
        for v in comparison.of(workflow):
            p = v.success
            table.add_row(
                _x(v.variant),
                str(v.runs),
                _ms(v.total.p50),
                _ms(v.total.p95),
                _ms(v.total.p99),
                *(f"{v.share[k]:.0%}" for k in kinds),
                "-" if p is None else f"{p.successes}/{p.trials} {p.rate:.0%}",
                "-" if p is None else f"{p.low:.0%}-{p.high:.0%}",
                "-" if v.score_mean is None else f"{v.score_mean:.2f}",
                "yes" if v.pareto else ("" if p is not None else "-"),
            )
        console.print(table)
    console.print(
        "kind columns: share of critical-path time; success: runs with a recorded outcome; "
        "Pareto: no other variant is both as fast at p95 and as successful",
        soft_wrap=True,
        style="dim",
    )
