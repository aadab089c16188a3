"""The trade-off commands' output: latency profiles, what-if estimates, variant comparisons.

Text as rich renderables for a terminal (the CLI prints them), and JSON documents
(finite numbers only). Renderers never print.

Example::

    Console().print(whatif_text(result, "traces.jsonl"))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chainlat._core.redact import visible
from chainlat._core.stats import FIRST_OUTPUT_PARTS
from chainlat.report.common import (
    DASH,
    count,
    json_ready,
    ms,
    pct,
    printed_source,
    share,
    unjudged_lines,
    whole_ms,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from rich.console import RenderableType
    from rich.table import Table
    from rich.text import Text

    from chainlat._core.latency import LatencyProfile
    from chainlat.analysis.tradeoff import Comparison, PartChange, SplitPart, VariantSummary
    from chainlat.analysis.whatif import Basis, Percentiles, WhatIfResult, WorkflowEffect
    from chainlat.budgets import BudgetReport

_KINDS = ("inference", "data", "tool", "overhead")


def _cell(text: str, style: str = "") -> Text:
    """Text from a trace as a rich cell: never read as markup, controls made visible."""
    from rich.text import Text

    return Text(visible(text, newline=True), style=style)


def _table(title: str, heads: tuple[str, ...], left: tuple[str, ...] = ("",)) -> Table:
    from rich.table import Table

    table = Table(title=_cell(title), title_justify="left")
    for head in heads:
        table.add_column(head, justify="left" if head in left else "right")
    return table


def _group(*parts: RenderableType) -> RenderableType:
    from rich.console import Group

    return Group(*parts)


def usage_gap_lines(gaps: Mapping[str, int]) -> list[str]:
    """One line per model left without a profile because its calls streamed without
    token counts, naming the option that brings them."""
    from chainlat.analysis.profiles import STREAM_USAGE

    return [
        f"{model}: no profile: its {count(n, 'call')} streamed without token counts "
        f"(stream with {STREAM_USAGE})"
        for model, n in gaps.items()
        if n
    ]


def profiles_text(
    profiles: dict[str, LatencyProfile],
    runs: int,
    where: str,
    gaps: Mapping[str, int] | None = None,
) -> RenderableType:
    """The fitted profiles as a table, each profile's note below it, and the models left
    without one because their streamed calls carried no token counts (``gaps``)."""
    heads = ("model", "calls", "ttft base ms", "ms / input tok", "ms / output tok",
             "residual", "queue", "network", "input tokens")  # fmt: skip
    title = f"latency profiles from {count(runs, 'run')} in {printed_source(where)}"
    table = _table(title, heads, left=("model",))
    notes: list[RenderableType] = []
    for model, p in profiles.items():
        low, high = p.input_tokens_range or (0, 0)
        per_input, per_output = p.ttft_per_input_token_ms, p.decode_ms_per_token
        sizes = f"{low}-{high}"
        if p.speech_input is not None:
            # A speech model: the same columns, per character or second of audio.
            unit = "char" if p.speech_input == "characters" else "s audio"
            per_input, per_output = p.ttft_per_speech_input_ms, p.ms_per_speech_input
            s_low, s_high = p.speech_input_range or (0.0, 0.0)
            sizes = f"{s_low:g}-{s_high:g} {unit}"
        table.add_row(
            _cell(model),
            f"{p.calls} ({p.ttft_calls} ttft)",
            f"{p.ttft_base_ms:.1f}",
            f"{per_input:.4f}" + (f" /{unit}" if p.speech_input else ""),
            DASH
            if per_output is None
            else f"{per_output:.3f}" + (f" /{unit}" if p.speech_input else ""),
            DASH if p.residual_sigma is None else f"±{p.residual_sigma:.0%}",
            share(p.queue_share),
            share(p.network_share),
            sizes,
        )
        if p.note:
            notes.append(_cell(f"note: {model}: {p.note}"))
    notes.extend(_cell(f"note: {line}") for line in usage_gap_lines(gaps or {}))
    return _group(table, *notes)


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
                    "first_output_bound_runs": w.first_output_bounds,
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
            "budget_before": _budget_json(result.budget_before),
            "budget_after": _budget_json(result.budget_after),
            "notes": list(result.notes),
            "basis": [_basis_json(b) for b in result.basis],
        }
    )
    return document


def _basis_json(basis: Basis) -> dict[str, Any]:
    streaming = basis.streaming
    return {
        "step": basis.step,
        "model": basis.model,
        "streamed": basis.streamed,
        "calls": basis.calls,
        "fit": basis.fit,
        "fitted_calls": basis.fitted_calls,
        "input_tokens_range": basis.input_tokens_range,
        "output_tokens_range": basis.output_tokens_range,
        "swapped_input_tokens_range": basis.swapped_input_range,
        "extrapolated_calls": basis.extrapolated,
        "prefill_ms_per_input_token": basis.prefill_slope_ms,
        "extrapolated_at_ms_per_input_token": None
        if basis.prefill is None
        else {
            "median": basis.prefill.ms_per_token,
            "low": basis.prefill.low,
            "high": basis.prefill.high,
        },
        "streaming_cost": None
        if streaming is None
        else {
            "base_ms": streaming.base_ms,
            "per_output_token_ms": streaming.per_output_token_ms,
            "source": streaming.source,
            "calls": streaming.calls,
        },
        "line": basis.line(),
    }


def _percentiles_json(p: Percentiles | None) -> dict[str, float] | None:
    return None if p is None else {"p50": p.p50, "p95": p.p95, "p99": p.p99}


def _budget_json(report: BudgetReport | None) -> dict[str, Any] | None:
    """A budget verdict as ``chainlat check --format json`` ends: its exit code, summary,
    and the limits broken and not judged by key path."""
    if report is None:
        return None
    return {
        "exit_code": report.exit_code,
        "summary": report.summary,
        "broken": [v.key_path for v in report.broken],
        "not_judged": [
            {"key_path": v.key_path, "reason": v.reason, "why": v.why, "allowed": v.allowed}
            for v in report.verdicts
            if v.status == "not_judged"
        ],
    }


_SHOWN_BROKEN = 3


def budget_lines(report: BudgetReport, when: str) -> list[str]:
    """``budget, estimated runs: FAILED: 1 of 3 limits broken, 1 not judged``, then the
    limits broken (the first three) and each limit not judged, with why."""
    lines = [f"budget, {when} runs: {report.summary}"]
    broken = report.broken
    lines.extend(f"  BROKEN: {v.violation()}" for v in broken[:_SHOWN_BROKEN])
    if len(broken) > _SHOWN_BROKEN:
        lines.append(f"  ... and {len(broken) - _SHOWN_BROKEN} more broken")
    lines.extend(f"  {line}" for line in unjudged_lines(report.verdicts))
    return lines


def whatif_text(result: WhatIfResult, where: str) -> RenderableType:
    """Per workflow: totals before and after, then each step; budgets, notes and the method."""
    changes = " ".join(c.spec for c in result.changes)
    parts: list[RenderableType] = [
        _cell(
            f"what-if over {count(len(result.runs), 'run')} from {printed_source(where)}: {changes}"
        )
    ]
    for w in result.workflows:
        parts.extend((_totals_table(w), _steps_table(w)))
        if w.first_output_bounds:
            parts.append(_cell(_bounds_line("first output", w.first_output_bounds, w.runs)))
    for report, when in ((result.budget_before, "recorded"), (result.budget_after, "estimated")):
        if report is not None:
            parts.extend(_cell(line) for line in budget_lines(report, when))
    parts.extend(_cell(f"basis: {basis.line()}") for basis in result.basis)
    parts.extend(_cell(f"note: {note}") for note in result.notes)
    parts.append(
        _cell(
            "method: changed calls re-estimated from latency profiles with each run's own "
            "tokens and residual; timelines rebuilt; queueing not re-simulated "
            "(docs/tradeoffs.md)",
            style="dim",
        )
    )
    return _group(*parts)


def _bounds_line(label: str, bounds: int, runs: int) -> str:
    """What the first output's columns leave out (``whatif``'s and ``compare``'s): the runs
    whose first output is a bound (`WorkflowRun.first_output_bound`)."""
    return (
        f"{label}: {bounds} of {count(runs, 'run')}' is a bound, not a measurement, and is "
        "left out of its percentiles (docs/attributes.md, rules 13, 15, 16 and 17)"
    )


def _totals_table(w: WorkflowEffect) -> Table:
    label = w.workflow + (f" [{w.variant}]" if w.variant else "")
    heads = ("", "p50", "p95", "p99", "1st out p50", "1st out p95", *_KINDS, "cost/run")
    table = _table(f"{label}: {count(w.runs, 'run')} (ms)", heads)
    for name, p, first, shares, cost in (
        ("recorded", w.before, w.first_output_before, w.share_before, w.cost_before),
        ("estimated", w.after, w.first_output_after, w.share_after, w.cost_after),
    ):
        table.add_row(
            name,
            whole_ms(p.p50),
            whole_ms(p.p95),
            whole_ms(p.p99),
            whole_ms(None if first is None else first.p50),
            whole_ms(None if first is None else first.p95),
            *(share(shares[k]) for k in _KINDS),
            DASH if cost is None else f"${cost:.4f}",
        )
    first_before, first_after = w.first_output_before, w.first_output_after
    table.add_row(
        "change",
        _change(w.after.p50, w.before.p50),
        _change(w.after.p95, w.before.p95),
        _change(w.after.p99, w.before.p99),
        _change(_p(first_after, 50), _p(first_before, 50)),
        _change(_p(first_after, 95), _p(first_before, 95)),
        *("" for _ in _KINDS),
        _change(w.cost_after, w.cost_before),
    )
    return table


def _p(p: Percentiles | None, q: int) -> float | None:
    return None if p is None else (p.p50 if q == 50 else p.p95)


def _change(after: float | None, before: float | None) -> str:
    """The relative change, ``+12.5%``; a dash without both values."""
    return pct(after / before - 1 if after is not None and before else None)


def _steps_table(w: WorkflowEffect) -> Table:
    heads = ("step", "after", "p50 before", "p50 after", "critical before", "critical after")
    table = _table(
        "per step: p50 ms, share of runs on the critical path", heads, left=("step", "after")
    )
    for s in w.steps:
        table.add_row(
            _cell(s.step),
            "" if s.after_name == s.step else _cell(s.after_name),
            f"{s.before_p50_ms:,.1f}",
            f"{s.after_p50_ms:,.1f}",
            share(s.critical_before),
            share(s.critical_after),
        )
    return table


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
                    "first_output_bound_runs": v.first_output_bounds,
                    "cost_mean_usd": v.cost_mean,
                    "costed_runs": v.costed,
                    "pareto": v.pareto,
                    "first_output_split": {
                        part: _split_part_json(found)
                        for part, found in v.first_output_split.items()
                    }
                    or None,
                }
                for v in comparison.variants
            ],
            "first_output_split_changes": [
                {
                    "workflow": v.workflow,
                    "baseline": comparison.of(v.workflow)[0].variant,
                    "variant": v.variant,
                    "parts": {c.part: _change_json(c) for c in changes},
                }
                for v in comparison.variants
                if (changes := comparison.split_changes(v))
            ],
        }
    )
    return document


def _split_part_json(part: SplitPart) -> dict[str, float]:
    return {"runs": part.runs, "p50": part.p50, "p95": part.p95, "p99": part.p99}


def _change_json(change: PartChange) -> dict[str, float | None]:
    """A stage before (the baseline variant), after (this one) and the difference, in ms."""
    before, after = change.before, change.after
    return {
        "p50_before": None if before is None else before.p50,
        "p50_after": None if after is None else after.p50,
        "p50_delta": change.p50_delta,
        "p95_before": None if before is None else before.p95,
        "p95_after": None if after is None else after.p95,
        "p95_delta": change.p95_delta,
    }


def compare_text(comparison: Comparison) -> RenderableType:
    """Per workflow, a table of its variants; the columns explained below."""
    parts: list[RenderableType] = []
    for workflow in comparison.workflows():
        heads = ("variant", "runs", "p50", "p95", "p99", "1st out p95", *_KINDS, "success",
                 "95% CI", "score", "cost/run", "Pareto")  # fmt: skip
        table = _table(f"{workflow}: variants (ms)", heads, left=("variant",))
        for v in comparison.of(workflow):
            p = v.success
            table.add_row(
                _cell(v.variant),
                str(v.runs),
                whole_ms(v.total.p50),
                whole_ms(v.total.p95),
                whole_ms(v.total.p99),
                whole_ms(None if v.first_output is None else v.first_output.p95),
                *(share(v.share[k]) for k in _KINDS),
                DASH if p is None else f"{p.successes}/{p.trials} {p.rate:.0%}",
                DASH if p is None else f"{p.low:.0%}-{p.high:.0%}",
                DASH if v.score_mean is None else f"{v.score_mean:.2f}",
                DASH if v.cost_mean is None else f"${v.cost_mean:.4f}",
                "yes" if v.pareto else ("" if p is not None else DASH),
            )
        parts.append(table)
        parts.extend(
            _cell(_bounds_line(f"first output, {v.variant}", v.first_output_bounds, v.runs))
            for v in comparison.of(workflow)
            if v.first_output_bounds
        )
        parts.extend(_split_tables(comparison, workflow))
    parts.append(
        _cell(
            "kind columns: share of critical-path time; success: runs with a recorded outcome; "
            "1st out: time to first output; cost/run: mean, from model prices; "
            "Pareto: no other variant is as fast at p95, as successful and (with prices) as "
            "cheap",
            style="dim",
        )
    )
    if any(v.first_output_split for v in comparison.variants):
        parts.append(
            _cell(
                "first output by stage: the wait for the first audio of the voice runs, "
                "each run split by stage as report and check split it; change: the "
                "variant's value less the workflow's first variant's (docs/voice.md)",
                style="dim",
            )
        )
    return _group(*parts)


_PART_LABELS: dict[str, str] = {part: part.replace("_", " ") for part in FIRST_OUTPUT_PARTS}


def _split_tables(comparison: Comparison, workflow: str) -> list[Table]:
    """The first output of a workflow's voice runs by stage: one variant's percentiles, or
    each later variant before (the first variant), after and the change."""
    variants = comparison.of(workflow)
    if not any(v.first_output_split for v in variants):
        return []
    if len(variants) == 1:
        (only,) = variants
        heads: tuple[str, ...] = ("stage", "runs", "p50", "p95", "p99")
        table = _table(f"{workflow}: first output by stage (ms)", heads, left=("stage",))
        for part in FIRST_OUTPUT_PARTS:
            found = only.first_output_split.get(part)
            table.add_row(
                _PART_LABELS[part],
                "0" if found is None else str(found.runs),
                *(ms(None if found is None else getattr(found, q)) for q in ("p50", "p95", "p99")),
            )
        return [table]
    baseline = variants[0]
    tables: list[Table] = []
    for variant in variants[1:]:
        title = (
            f"{workflow}: first output by stage, {variant.variant} against {baseline.variant} (ms)"
        )
        heads = ("stage", "p50 before", "p50 after", "p50 change", "p95 before", "p95 after",
                 "p95 change")  # fmt: skip
        table = _table(title, heads, left=("stage",))
        table.add_row(*_first_output_row(baseline, variant))
        for change in comparison.split_changes(variant):
            before, after = change.before, change.after
            table.add_row(
                _PART_LABELS[change.part],
                ms(None if before is None else before.p50),
                ms(None if after is None else after.p50),
                _delta(change.p50_delta),
                ms(None if before is None else before.p95),
                ms(None if after is None else after.p95),
                _delta(change.p95_delta),
            )
        tables.append(table)
    return tables


def _first_output_row(before: VariantSummary, after: VariantSummary) -> tuple[str, ...]:
    """The whole wait (every run with a first output), above its stages."""
    b, a = before.first_output, after.first_output
    return (
        "first output (all stages)",
        ms(_p(b, 50)),
        ms(_p(a, 50)),
        _delta(_difference(_p(a, 50), _p(b, 50))),
        ms(_p(b, 95)),
        ms(_p(a, 95)),
        _delta(_difference(_p(a, 95), _p(b, 95))),
    )


def _difference(after: float | None, before: float | None) -> float | None:
    return None if after is None or before is None else after - before


def _delta(value: float | None) -> str:
    """A change in ms with its sign, ``+255.1``; a dash without both sides."""
    return DASH if value is None else f"{value:+,.1f}"
