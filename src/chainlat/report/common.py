"""What every format of the report shares: number formats, table rows, verdict labels, and
the cleaning of names that come from traces before any format prints them.

Names (workflows, steps, sources) come from trace files and so from anyone: they may
hold rich markup (``load [/mnt/data]``), control characters (tab, ESC, NUL), lone
surrogates, or a credential in a source URL. Every renderer passes them through
:func:`~chainlat._core.redact.visible`, the output boundary the CLI's error lines share (and
source names through :func:`printed_source`) once, where it puts them in its text; a JSON
document's strings are scrubbed by :func:`json_ready`, except those scrubbed already.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from chainlat._core.amounts import agreeing, amount
from chainlat._core.redact import Scrubbed, visible
from chainlat._core.stats import (
    FIRST_OUTPUT,
    FIRST_OUTPUT_SPLIT,
    QUANTITIES,
    Summary,
    WorkflowStats,
)

if TYPE_CHECKING:
    from chainlat.analysis.diff import DiffResult
    from chainlat.budgets import LimitVerdict

DASH: Final = "-"

MAX_NAME_CHARS: Final = 200
"""The longest name a page or chart shows whole; longer ones are cut, saying so."""


def shown_name(text: str, limit: int = MAX_NAME_CHARS) -> str:
    """A name (workflow, variant, step, span) as a page shows it: :func:`visible`, cut to
    ``limit`` characters with a visible marker (a 1 MB name would make a page no browser
    loads)."""
    if len(text) > 4 * limit:
        cut = len(text) - limit
        text = text[:limit]  # no scrubbing of 1 MB to show 200 characters of it
    else:
        cut = 0
    shown = visible(text)
    if len(shown) > limit:
        cut += len(shown) - limit
        shown = shown[:limit]
    return f"{shown}…[{cut} more chars]" if cut else shown


def printed_source(text: str) -> str:
    """Where the runs came from (a trace file, a Jaeger URL with its password), as printed:
    :func:`visible`, scrubbed once. For the name of a source object, see
    :func:`chainlat.traces.source_name`."""
    return visible(text)


def finite(value: float | None) -> bool:
    """A measured value that can be judged and written as a JSON number."""
    return value is not None and math.isfinite(value)


def json_ready(value: Any) -> Any:
    """A JSON document with every non-finite float (NaN, infinities) as None: JSON has no
    such numbers, and ``json.dumps`` would write bare ``NaN`` that parsers reject; every
    string, keys included (workflow and step names), scrubbed of credentials."""
    if isinstance(value, str):
        return _scrubbed(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {_scrubbed(k) if isinstance(k, str) else k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value


def _scrubbed(text: str) -> str:
    if isinstance(text, Scrubbed):
        return text  # a document made ready already, or a name a renderer cleaned: once
    # Names repeat in a document (every verdict names its workflow): short ones once each.
    return _scrub_short(text) if len(text) <= 256 else _scrub(text)


def _scrub(text: str) -> str:
    from chainlat._core.redact import scrub_once

    return scrub_once(text)


_scrub_short: Final = functools.lru_cache(maxsize=4096)(_scrub)


def dumps(document: Any) -> str:
    """A JSON document as text: non-finite numbers as null, never bare NaN."""
    import json

    return json.dumps(json_ready(document), indent=2, allow_nan=False)


def ms(value: float | None) -> str:
    if value is None:
        return DASH
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return f"{value:,.1f}"


def whole_ms(value: float | None) -> str:
    """Milliseconds to the unit, ``1,234``, for tables of totals; a dash for none."""
    if value is None or not math.isfinite(value):
        return ms(value)
    return f"{value:,.0f}"


def share(value: float | None) -> str:
    """A share of 0..1 as a whole percentage, ``42%``; a dash for none."""
    return DASH if value is None or not math.isfinite(value) else f"{value:.0%}"


def count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def limit_text(value: float, unit: str = "ms") -> str:
    return amount(value, unit, limit=True)


def actual_text(value: float | None, unit: str = "ms", *, against: float | None = None) -> str:
    """A measured value with its unit; a dash when there is none. ``against``: its limit
    (the value then shows the decimals it takes to agree with the verdict)."""
    if value is None or not math.isfinite(value):
        return ms(value) + (" ms" if value is not None and unit == "ms" else "")
    return amount(value, unit, against=against)


# --- rows shared by every format ----------------------------------------------------------


@dataclass(frozen=True)
class StatRow:
    label: str
    kind: str
    summary: Summary


def runs_heading(workflow: WorkflowStats) -> str:
    """``12 runs``, and how many failed and how many were voice turns interrupted by
    barge-in: neither is in the percentiles unless asked, and every format says so."""
    text = count(workflow.runs, "run")
    if workflow.errors:
        where = "in" if workflow.include_errors else "not in"
        text += f" ({workflow.errors} failed, {where} the percentiles)"
    if workflow.interrupted:
        text += f" ({workflow.interrupted} interrupted (barge-in), " + (
            "in the percentiles)"
            if workflow.include_interrupted
            else "not in the percentiles or the per-run limits: an interrupted answer "
            "was cut; include_interrupted = true counts them)"
        )
    return text


def stat_rows(workflow: WorkflowStats) -> list[StatRow]:
    """The rows of a workflow's statistics: the total, the first output and, for voice
    runs, its split by stage (indented, kind ``first output``), the critical-path split,
    each step's duration, each step's time to first token."""
    rows = [
        StatRow(
            _bound(workflow, q, q if q == "total" else f"{q} (critical path)"),
            "",
            workflow.quantities[q].summary(),
        )
        for q in QUANTITIES
    ]
    first_output = workflow.quantities[FIRST_OUTPUT]
    if len(first_output):
        label = _bound(workflow, FIRST_OUTPUT, "first output")
        rows.insert(1, StatRow(label, "", first_output.summary()))
        rows[2:2] = [
            StatRow(
                _bound(workflow, FIRST_OUTPUT_SPLIT, f"first output: {part.replace('_', ' ')}"),
                "first output",
                samples.summary(),
            )
            for part, samples in workflow.first_output_split.items()
        ]
    for step in workflow.steps.values():
        rows.append(
            StatRow(_bound(workflow, step.name, step.name), step.kind, step.duration.summary())
        )
    for step in workflow.steps.values():
        if len(step.ttft):
            rows.append(StatRow(f"{step.name} (ttft)", "ttft", step.ttft.summary()))
    return rows


def _bound(workflow: WorkflowStats, key: str, label: str) -> str:
    """``label``, marked when some runs' value of ``key`` is a bound, not a measurement: it
    depends on a model call whose end the trace does not record, on a first token the trace
    gives by a value that is no time or does not give for a call that may have streamed, or
    on a turn's start that is no end of the caller's words (docs/attributes.md, rules 13, 15,
    16 and 17)."""
    runs = workflow.unrecorded.get(key, 0)
    if not runs:
        return label
    return f"{label} [a bound in {runs}/{workflow.sampled} runs]"


def summary_json(summary: Summary) -> dict[str, Any]:
    return {
        "count": summary.count,
        "p50_ms": summary.p50,
        "p90_ms": summary.p90,
        "p95_ms": summary.p95,
        "p99_ms": summary.p99,
        "max_ms": summary.max,
        "mean_ms": summary.mean,
    }


_REASON_LABELS: Final = {
    "unknown_workflow": "unknown workflow",
    "unknown_step": "unknown step",
    "no_runs": "no runs",
    "no_data": "no data",
    "no_price": "no price",
    "no_tokens": "no token counts",
    "impossible_value": "impossible recorded value",
    "not_expressible": "not expressible in metrics",
    "no_series": "no series",
    "not_finite": "not a finite number",
    "incomplete_run": "incomplete run",
    "unrecorded_end": "a model call's end not recorded",
    "unusable_value": "a first token not known",
    "unknown_start": "the end of the words not in the trace",
}


def reason_label(verdict: LimitVerdict) -> str:
    """Why a limit was not judged, in a few words (from the verdict's reason)."""
    if verdict.reason == "not_enough_runs":
        return f"{verdict.runs} < min_runs {verdict.min_runs}"
    return _REASON_LABELS.get(verdict.reason or "", "not judged")


def verdict_label(verdict: LimitVerdict) -> str:
    """The verdict column: ``ok``, ``BROKEN``, ``NOT JUDGED: <reason>`` (fails the gate) or
    ``not judged: <reason> (allowed)``."""
    if verdict.status == "broken":
        return "BROKEN"
    if verdict.status == "ok":
        return "ok"
    if verdict.allowed:
        return f"not judged: {reason_label(verdict)} (allowed)"
    return f"NOT JUDGED: {reason_label(verdict)}"


def verdict_style(verdict: LimitVerdict) -> str:
    """A rich style for the verdict column."""
    if verdict.status == "broken" or (verdict.status == "not_judged" and not verdict.allowed):
        return "bold red"
    return "green" if verdict.status == "ok" else "yellow"


_LIMIT_KEY: Final = re.compile(r"\.(?:max|ttft|(?:ttft_)?p[0-9.]+)$")


def unjudged_key(verdict: LimitVerdict) -> str:
    """The key path a not-judged verdict is about: the workflow or the step for a name no
    run has (one message for all its limits), else the limit."""
    if verdict.reason == "unknown_workflow":
        return verdict.key_path[: -len(verdict.target) - 1]
    if verdict.reason == "unknown_step":
        return _LIMIT_KEY.sub("", verdict.key_path)
    return verdict.key_path


def unjudged_lines(verdicts: Sequence[LimitVerdict]) -> list[str]:
    """One line per limit not judged (per workflow or step, for a name no run has): its key
    path and why, ``NOT JUDGED`` when it fails the gate."""
    lines = (
        f"{'not judged (allowed)' if v.allowed else 'NOT JUDGED'}: {unjudged_key(v)}: {v.why}"
        for v in verdicts
        if v.status == "not_judged"
    )
    return list(dict.fromkeys(lines))


def verdict_runs(verdict: LimitVerdict) -> str:
    if verdict.runs < 0 or verdict.broken_runs < 0:
        return DASH  # no count of runs is negative: shown as unknown, never "-1/-1 over"
    unjudged = f", {verdict.unjudged_runs} not judged" if verdict.unjudged_runs else ""
    if verdict.kind != "percentile" and (verdict.runs or verdict.unjudged_runs):
        what = "failed" if verdict.kind == "share" else "over"
        return f"{verdict.broken_runs}/{verdict.runs} {what}{unjudged}"
    return f"{verdict.runs}{unjudged}"


def limit_label(verdict: LimitVerdict) -> str:
    return f"{verdict.target} (each run)" if verdict.kind == "run" else verdict.target


def pct(change: float | None, *, against: float | None = None) -> str:
    """A relative change, ``+12.3%``; beside a threshold (``against``, a fraction), with the
    decimals it takes to read on the same side of it."""
    if change is None:
        return DASH
    if math.isinf(change):
        return "new"
    if against is None:
        return f"{change:+.1%}"
    return agreeing(change * 100, against * 100, "+.{}f", 1) + "%"


def threshold_text(threshold: float) -> str:
    """A threshold (a fraction) as a percentage, as precise as given: ``12.5%``."""
    return f"{threshold * 100:.6g}%"


def diff_rows(result: DiffResult) -> list[list[str]]:
    rows = []
    for c in result.comparisons:
        item = c.item if c.kind != "quantity" or c.item == "total" else f"{c.item} (critical path)"
        verdict = c.verdict.upper() + " (REGRESSION)" if c.regression else c.verdict
        rows.append(
            [
                c.workflow,
                item,
                f"{c.n_before}/{c.n_after}",
                f"{ms(c.p50_before)} -> {ms(c.p50_after)}",
                pct(c.p50_change, against=result.threshold),
                f"{ms(c.p95_before)} -> {ms(c.p95_after)}",
                pct(c.p95_change, against=result.threshold),
                DASH if c.p_value is None else agreeing(c.p_value, result.alpha, ".{}g", 2),
                verdict,
            ]
        )
    return rows


diff_header: Final = [
    "workflow",
    "quantity / step",
    "runs",
    "p50 ms",
    "p50",
    "p95 ms",
    "p95",
    "p (Holm)",
    "verdict",
]


def diff_conclusion(result: DiffResult) -> str:
    rule = (
        f"beyond noise: Mann-Whitney U and tail test, Holm-adjusted p < {result.alpha:g}; "
        "regression: beyond noise and p50 or p95 slower by more than "
        + threshold_text(result.threshold)
    )
    found = result.regressions
    if found:
        names = ", ".join(f"{c.workflow}: {c.item}" for c in found)
        return f"REGRESSION: {len(found)} ({names})\n{rule}"
    if not result.judged:  # exit 2: nothing was compared, so nothing is OK
        return f"NOT COMPARED: no workflow or step has enough runs on both sides\n{rule}"
    return f"OK: no regression in {result.judged} comparisons\n{rule}"
