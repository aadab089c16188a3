"""The trade-off commands' output: latency profiles, what-if estimates, variant comparisons.

Text tables with rich for a terminal, and JSON documents (finite numbers only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chainlat.report._common import count, json_ready, source_name, visible

if TYPE_CHECKING:
    from rich.console import Console

    from chainlat._core.latency import LatencyProfile
    from chainlat.analysis.tradeoff import Comparison
    from chainlat.analysis.whatif import Percentiles, WhatIfResult


def _x(text: str) -> str:
    """Text from a trace as rich markup that shows it literally, controls made visible."""
    from rich.markup import escape

    return escape(visible(text, newline=True))


def _ms(value: float) -> str:
    return f"{value:,.0f}"


def print_profiles(
    console: Console, profiles: dict[str, LatencyProfile], runs: int, where: str
) -> None:
    from rich.table import Table

    table = Table(
        title=_x(f"latency profiles from {count(runs, 'run')} in {source_name(where)}"),
        title_justify="left",
    )
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


def whatif_json(result: WhatIfResult) -> dict[str, Any]:
    """The what-if estimate as a JSON-ready dict (non-finite numbers as None)."""
    document: dict[str, Any] = json_ready(
        {
            "changes": [c.spec for c in result.changes],
            "workflows": [
                {
                    "workflow": w.workflow,
                    "variant": w.variant,
                    "runs": w.runs,
                    "before": {"p50": w.before.p50, "p95": w.before.p95, "p99": w.before.p99},
                    "after": {"p50": w.after.p50, "p95": w.after.p95, "p99": w.after.p99},
                    "first_output_before": _percentiles_json(w.first_output_before),
                    "first_output_after": _percentiles_json(w.first_output_after),
                    "cost_mean_before_usd": w.cost_before,
                    "cost_mean_after_usd": w.cost_after,
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
    )
    return document


def _percentiles_json(p: Percentiles | None) -> dict[str, float] | None:
    return None if p is None else {"p50": p.p50, "p95": p.p95, "p99": p.p99}


def print_whatif(console: Console, result: WhatIfResult, where: str) -> None:
    from rich.table import Table

    console.print(
        _x(f"what-if over {count(len(result.runs), 'run')} from {source_name(where)}: ")
        + _x(" ".join(c.spec for c in result.changes)),
        soft_wrap=True,
    )
    for w in result.workflows:
        label = _x(w.workflow + (f" [{w.variant}]" if w.variant else ""))
        table = Table(title=f"{label}: {count(w.runs, 'run')} (ms)", title_justify="left")
        heads = ("", "p50", "p95", "p99", "1st out p50", "1st out p95", "inference", "data",
                 "tool", "overhead", "cost/run")  # fmt: skip
        for head in heads:
            table.add_column(head, justify="left" if not head else "right")
        for name, p, first, share, cost in (
            ("recorded", w.before, w.first_output_before, w.share_before, w.cost_before),
            ("estimated", w.after, w.first_output_after, w.share_after, w.cost_after),
        ):
            table.add_row(
                name,
                _ms(p.p50),
                _ms(p.p95),
                _ms(p.p99),
                "-" if first is None else _ms(first.p50),
                "-" if first is None else _ms(first.p95),
                *(f"{share[k]:.0%}" for k in ("inference", "data", "tool", "overhead")),
                "-" if cost is None else f"${cost:.4f}",
            )
        table.add_row(
            "change",
            *(
                f"{(a / b - 1) * 100:+.1f}%" if b else "-"
                for a, b in (
                    (w.after.p50, w.before.p50),
                    (w.after.p95, w.before.p95),
                    (w.after.p99, w.before.p99),
                    (
                        w.first_output_after.p50 if w.first_output_after else 0.0,
                        w.first_output_before.p50 if w.first_output_before else 0.0,
                    ),
                    (
                        w.first_output_after.p95 if w.first_output_after else 0.0,
                        w.first_output_before.p95 if w.first_output_before else 0.0,
                    ),
                )
            ),
            "",
            "",
            "",
            "",
            f"{(w.cost_after / w.cost_before - 1) * 100:+.1f}%"
            if w.cost_after is not None and w.cost_before
            else "-",
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
                else f"{count(len(broken), 'limit')} broken: "
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


def compare_json(comparison: Comparison) -> dict[str, Any]:
    """The variant comparison as a JSON-ready dict (non-finite numbers as None)."""
    document: dict[str, Any] = json_ready(
        {
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
                    "first_output_p50": v.first_output.p50 if v.first_output else None,
                    "first_output_p95": v.first_output.p95 if v.first_output else None,
                    "cost_mean_usd": v.cost_mean,
                    "costed_runs": v.costed,
                    "pareto": v.pareto,
                }
                for v in comparison.variants
            ]
        }
    )
    return document


def print_compare(console: Console, comparison: Comparison) -> None:
    from rich.table import Table

    kinds = ("inference", "data", "tool", "overhead")
    for workflow in comparison.workflows():
        table = Table(title=f"{_x(workflow)}: variants (ms)", title_justify="left")
        heads = ("variant", "runs", "p50", "p95", "p99", "1st out p95", *kinds, "success",
                 "95% CI", "score", "cost/run", "Pareto")  # fmt: skip
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
                "-" if v.first_output is None else _ms(v.first_output.p95),
                *(f"{v.share[k]:.0%}" for k in kinds),
                "-" if p is None else f"{p.successes}/{p.trials} {p.rate:.0%}",
                "-" if p is None else f"{p.low:.0%}-{p.high:.0%}",
                "-" if v.score_mean is None else f"{v.score_mean:.2f}",
                "-" if v.cost_mean is None else f"${v.cost_mean:.4f}",
                "yes" if v.pareto else ("" if p is not None else "-"),
            )
        console.print(table)
    console.print(
        "kind columns: share of critical-path time; success: runs with a recorded outcome; "
        "1st out: time to first output; cost/run: mean, from model prices; "
        "Pareto: no other variant is as fast at p95, as successful and (with prices) as cheap",
        soft_wrap=True,
        style="dim",
    )
