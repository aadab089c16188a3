"""Budgets as PromQL: every limit metrics can express as one query over a window.

Every limit that metrics can express becomes one PromQL query over a window
(:func:`limit_queries`); :func:`chainlat.prometheus.rules.prometheus_rules` turns them
into a rules file
and ``chainlat check --prometheus`` runs the same queries through Prometheus's
HTTP API, so the alert and the CI verdict cannot disagree.

Where each kind of limit is read from:

- **workflow percentiles of the total** (``p95 = "800ms"``): the span-metrics
  histogram of the workflow spans (``invoke_workflow NAME``), computed by the
  Collector tier from every span before sampling;
- **workflow percentiles of the split and of other per-run quantities**
  (``p95 = { data = "250ms" }``): chainlat's own histogram
  ``chainlat.chain.duration`` (label ``chainlat.chain.kind``), emitted by the
  application with the rollup (:mod:`chainlat._runtime.metrics`);
- **step percentiles** (``steps."chat gpt-4o".p95``): the span-metrics histogram
  of the step's spans within the workflow;
- **per-run limits** (``total``, ``data``, ``steps."x".max``, ...): chainlat's
  counter ``chainlat.budget.exceeded`` per workflow and limit, counted by the
  application that judged each run; any increase in the window breaks it;
- **the error rate** (``error_rate = "2%"``): span-metrics call counts of the
  workflow spans with status ERROR over all of them.

A percentile read from buckets is only as exact as its buckets. With the limit
itself a bucket boundary, "the histogram's p95 is above the limit" holds exactly
when fewer than 95 % of the observations are at or below the limit, which is the
nearest-rank verdict of ``chainlat check``; the value shown in between two
boundaries is interpolated. :func:`bucket_boundaries` lists the boundaries the
span metrics need (``CHAINLAT_SPANMETRICS_BUCKETS`` in collector/otelcol.yaml);
the application's own histograms get every limit as a boundary automatically.

Failed runs (status ERROR) are left out of the latency percentiles and counted
in the error rate. Voice turns the caller interrupted (barge-in) are left out of the
workflow percentiles too, and of the runs each is read from, unless the budget says
``include_interrupted``, as ``chainlat check`` leaves them out: both histograms label an
interrupted turn ``gen_ai_agent_invocation_end_reason="interrupted"`` (the span metrics
by the Collector's dimension, chainlat's own histogram as it records the run). A step's
series cannot tell which turn it was in (the end reason is on the turn's span), so a step
percentile cannot leave them out: ``chainlat check --prometheus`` does not judge it over a
window with an interrupted turn of its workflow (`LimitQuery.interrupted`), and says so;
the rules' alert for it counts their steps.

Example::

    budgets = chainlat.budgets.load_budgets("chainlat.toml")
    text = chainlat.prometheus.prometheus_rules(budgets, window="1h")
    pathlib.Path("chainlat.rules.yml").write_text(text)
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final, Literal

from chainlat._core.errors import InputError
from chainlat._core.runs import step_key
from chainlat.budgets import Budgets
from chainlat.budgets.targets import PER_RUN_KEYS, per_run_targets

__all__ = [
    "DEFAULT_SPANMETRICS_BUCKETS_MS",
    "NOT_EXPRESSIBLE",
    "LimitQuery",
    "Unexpressed",
    "bucket_boundaries",
    "buckets_setting",
    "limit_queries",
    "parse_duration",
    "parse_window",
    "unexpressed_limits",
]

# --- the series, as the Collector's prometheus exporter names them -------------------------

SPAN_DURATION: Final = "traces_span_metrics_duration_milliseconds"
"""The span-metrics histogram (``_bucket``, ``_count``, ``_sum``); labels ``span_name``,
``status_code``, ``chainlat_step_kind``, ``chainlat_workflow_name``, ``chainlat_step_name``
and, on a voice turn's workflow span, ``gen_ai_agent_invocation_end_reason``."""
SPAN_CALLS: Final = "traces_span_metrics_duration_milliseconds_count"
"""Spans counted, as the histogram's count: the same number as ``calls_total``, from the
series the percentiles read, so that a ratio and a percentile never see different scrapes."""
CHAIN_DURATION: Final = "chainlat_chain_duration_milliseconds"
"""chainlat's per-run histogram (:mod:`chainlat._runtime.metrics`); labels
``gen_ai_workflow_name``, ``chainlat_chain_kind``, ``error_type`` (failed runs only) and
``gen_ai_agent_invocation_end_reason`` (interrupted voice turns only)."""
BUDGET_EXCEEDED: Final = "chainlat_budget_exceeded_total"
"""chainlat's counter of runs over a per-run limit; labels ``gen_ai_workflow_name`` and
``chainlat_budget_target``."""

STATUS_ERROR: Final = "STATUS_CODE_ERROR"
END_REASON_LABEL: Final = "gen_ai_agent_invocation_end_reason"
"""How a voice turn ended, on both histograms (``gen_ai.agent.invocation.end_reason``)."""
NOT_INTERRUPTED: Final = f'{END_REASON_LABEL}!="interrupted"'
"""The matcher that leaves interrupted voice turns out (a series without the label, every
run that is no voice turn, passes it)."""
WORKFLOW_LABEL: Final = "workflow"
TARGET_LABEL: Final = "target"

DEFAULT_SPANMETRICS_BUCKETS_MS: Final = (
    10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0, 1280.0, 2560.0, 5120.0, 10240.0, 20480.0,
    40960.0, 81920.0,
)  # fmt: skip
"""The span-metrics buckets collector/otelcol.yaml ships (the GenAI conventions' grid)."""

Measure = Literal["percentile", "per_run", "ratio"]


@dataclass(frozen=True, slots=True)
class LimitQuery:
    """One limit of a budget file as PromQL over a window.

    ``value`` is what the limit bounds (a percentile in ms, runs over a per-run
    limit, a ratio); ``runs`` is how many runs (or step occurrences) it was
    computed from. The limit is broken when ``value > threshold`` and
    ``runs >= min_runs``.
    """

    workflow: str
    target: str
    """The limit's key path inside the workflow's budget (``p95.total``, ``steps."x".max``)."""
    measure: Measure
    limit: float
    """The limit as written: ms, a share (0.02), USD."""
    threshold: float
    """What ``value`` is compared with: the limit, or 0 for a per-run limit's count."""
    value: str
    runs: str
    min_runs: int = 1
    percentile: float | None = None
    unit: str = "ms"
    interrupted: str | None = None
    """For a limit whose value counts interrupted voice turns that the budget leaves out (a
    step's percentile): the count of those turns over the window. Where it is above 0 the
    value is not the budget's, and the limit is not judged."""


@dataclass(frozen=True, slots=True)
class Unexpressed:
    """A limit that metrics cannot express, and why."""

    workflow: str
    target: str
    reason: str
    limit: float | None = None
    """The limit as written (None for a setting such as ``exclude_cache_hits``)."""
    percentile: float | None = None
    unit: str = "ms"


# --- how each budget key is read ---------------------------------------------------------------
#
# Adding a budget key is one entry: a percentile quantity in PERCENTILE_SOURCES (its
# histogram), a per-run key in PER_RUN_KEYS (counted by the application), a share of runs
# in RATIO_KEYS (its query), or a reason in NOT_EXPRESSIBLE. A percentile quantity
# missing from PERCENTILE_SOURCES is listed as not expressible, never dropped.


def _workflow_span(workflow: str) -> dict[str, str]:
    return {"span_name": f"invoke_workflow {workflow}", "chainlat_step_kind": "workflow"}


def _chain(kind: str) -> Callable[[str], tuple[str, dict[str, str], str]]:
    def selector(workflow: str) -> tuple[str, dict[str, str], str]:
        return (
            CHAIN_DURATION,
            {"gen_ai_workflow_name": workflow, "chainlat_chain_kind": kind},
            'error_type=""',
        )

    return selector


def _span_total(workflow: str) -> tuple[str, dict[str, str], str]:
    return SPAN_DURATION, _workflow_span(workflow), f'status_code!="{STATUS_ERROR}"'


PERCENTILE_SOURCES: Final[dict[str, Callable[[str], tuple[str, dict[str, str], str]]]] = {
    "total": _span_total,
    "inference": _chain("inference"),
    "data": _chain("data"),
    "tool": _chain("tool"),
    "overhead": _chain("overhead"),
    "first_output": _chain("first_output"),
}
"""Percentile quantity -> (histogram, its labels for a workflow, the filter that leaves
failed runs out). Interrupted voice turns are left out of each by `NOT_INTERRUPTED`, the
same label on both histograms."""

NOT_EXPRESSIBLE: Final[dict[str, str]] = {
    "ttft_percentiles": "no histogram of time to first token per step and workflow "
    "(gen_ai.client.operation.time_to_first_chunk is per model only)",
    "cost_percentiles": "no histogram of cost per run",
    "exclude_cache_hits": "metrics do not tell cache hits apart; the percentiles include them",
    "operations": "no histogram of a workflow's calls by operation (span metrics carry the "
    "span name, not the workflow; gen_ai.client.operation.duration not the workflow either)",
}


# --- PromQL ----------------------------------------------------------------------------------


def _quote(value: str) -> str:
    """A PromQL string literal (Go escapes, which JSON's are a subset of)."""
    return json.dumps(value, ensure_ascii=False)


def matchers(labels: dict[str, str], *extra: str) -> str:
    parts = [f"{k}={_quote(v)}" for k, v in labels.items()]
    parts.extend(e for e in extra if e)
    return "{" + ", ".join(parts) + "}"


def prom_number(value: float) -> str:
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def _increase(series: str, window: str) -> str:
    """How much each counter in ``series`` grew over ``window``, exactly, counting a series
    born within the window from 0 and a series that has since gone stale up to its last
    sample.

    Every counter the rules read starts at 0 with the process that counts it and never
    resets: a span-metrics series is one Collector process's (``collector_instance_id``),
    an application's series one application process's (``instance``, from its
    ``service.instance.id``). So what a series counted in the window is its last value in
    the window less its last value before it, or the whole last value for a series born
    within it. ``last_over_time`` reads the samples a series left in the window also once
    it is stale: a sampling replica restarted or killed, a series its exporter expired,
    an application exported once and gone. Neither the current sample nor two samples in
    the window are needed (``X unless X offset W`` and ``increase()`` were: a restarted
    replica took its counts out of the window). No extrapolation either, so a count of
    runs is a whole number. A series that does reset in the window (an application
    without ``service.instance.id`` restarted) falls back to ``increase()``.
    """
    last = f"last_over_time({series}[{window}])"
    before = f"last_over_time({series}[{window}] offset {window})"
    return (
        f"((({last} - ({before} or 0 * {last})) >= 0 unless resets({series}[{window}]) > 0) "
        f"or increase({series}[{window}]))"
    )


# Prometheus's own duration grammar (model.ParseDuration): units in this order, each at
# most once, ASCII digits only (Python's \d also takes "١"), and the whole within an int64
# of nanoseconds, or Prometheus refuses the file.
_DURATION_RE: Final = re.compile(
    r"(?:(?P<y>[0-9]+)y)?(?:(?P<w>[0-9]+)w)?(?:(?P<d>[0-9]+)d)?(?:(?P<h>[0-9]+)h)?"
    r"(?:(?P<m>[0-9]+)m)?(?:(?P<s>[0-9]+)s)?(?:(?P<ms>[0-9]+)ms)?",
    re.ASCII,
)
_UNIT_MS: Final = {
    "y": 365 * 86_400_000,
    "w": 7 * 86_400_000,
    "d": 86_400_000,
    "h": 3_600_000,
    "m": 60_000,
    "s": 1_000,
    "ms": 1,
}
_MAX_DURATION_MS: Final = (2**63 - 1) // 1_000_000
_MAX_DURATION_DIGITS: Final = 20


def parse_duration(text: str, *, what: str = "duration") -> int:
    """A Prometheus duration (``1h``, ``1h30m``, ``90s``) in milliseconds, as Prometheus
    reads it; InputError for anything Prometheus would refuse, and for 0.

    Example::

        assert parse_duration("1h30m") == 5_400_000
    """
    match = _DURATION_RE.fullmatch(text) if text.isascii() else None
    if match is None or not any(match.groupdict().values()):
        raise InputError(
            f"{what} {text!r}: expected a Prometheus duration like 1h, 30m, 90s or 1h30m"
        )
    total = 0
    for unit, digits in match.groupdict().items():
        if digits is not None:
            if len(digits) > _MAX_DURATION_DIGITS:
                total = _MAX_DURATION_MS + 1
                break
            total += int(digits) * _UNIT_MS[unit]
    if total > _MAX_DURATION_MS:
        raise InputError(f"{what} {text!r}: too long for Prometheus (at most about 292 years)")
    if total == 0:
        raise InputError(f"{what} {text!r}: expected a duration above 0")
    return total


def parse_window(text: str, *, what: str = "window") -> str:
    """A Prometheus range (``1h``, ``30m``, ``90s``), checked as Prometheus reads it
    (:func:`parse_duration`); InputError otherwise."""
    cleaned = text.strip(" \t")
    parse_duration(cleaned, what=what)
    return cleaned


def _percentile(key: str) -> float:
    """``p95`` -> 95.0 (the budget model has checked the key)."""
    return float(key.removeprefix("p"))


def _percentile_query(
    workflow: str,
    target: str,
    q: float,
    limit: float,
    histogram: str,
    labels: dict[str, str],
    keep: tuple[str, ...],
    window: str,
    min_runs: int,
) -> LimitQuery:
    # The runs read the same series as the percentile: min_runs counts the runs judged.
    selector = matchers(labels, *keep)
    value = (
        f"histogram_quantile({prom_number(q / 100)}, "
        f"sum by (le) ({_increase(f'{histogram}_bucket{selector}', window)}))"
    )
    runs = f"sum({_increase(f'{histogram}_count{selector}', window)})"
    return LimitQuery(
        workflow, target, "percentile", limit, limit, value, runs, min_runs, percentile=q
    )


def _step_selector(workflow: str, step: str) -> list[dict[str, str]]:
    # A step is keyed by its step name when it has one, else by its span name.
    return [
        {"chainlat_workflow_name": workflow, "chainlat_step_name": step},
        {"chainlat_workflow_name": workflow, "chainlat_step_name": "", "span_name": step},
    ]


def _step_percentile(
    workflow: str,
    step: str,
    key: str,
    q: float,
    limit: float,
    window: str,
    min_runs: int,
    include_errors: bool,
    include_interrupted: bool,
) -> LimitQuery:
    keep = "" if include_errors else f'status_code!="{STATUS_ERROR}"'
    buckets = " or ".join(
        _increase(f"{SPAN_DURATION}_bucket{matchers(s, keep)}", window)
        for s in _step_selector(workflow, step)
    )
    counts = " or ".join(
        _increase(f"{SPAN_DURATION}_count{matchers(s, keep)}", window)
        for s in _step_selector(workflow, step)
    )
    value = f"histogram_quantile({prom_number(q / 100)}, sum by (le) ({buckets}))"
    return LimitQuery(
        workflow,
        f"steps.{step_key(step)}.{key}",
        "percentile",
        limit,
        limit,
        value,
        f"sum({counts})",
        min_runs,
        percentile=q,
        interrupted=None if include_interrupted else _interrupted_turns(workflow, window),
    )


def _interrupted_turns(workflow: str, window: str) -> str:
    """The workflow's voice turns ended by barge-in over ``window``, from the span metrics
    of its workflow spans (the series the step percentiles come from)."""
    turns = matchers(_workflow_span(workflow), f'{END_REASON_LABEL}="interrupted"')
    return f"sum({_increase(f'{SPAN_CALLS}{turns}', window)})"


def _per_run(
    workflow: str, target: str, limit: float, window: str, include_interrupted: bool
) -> LimitQuery:
    labels = {"gen_ai_workflow_name": workflow, "chainlat_budget_target": target}
    value = f"sum({_increase(f'{BUDGET_EXCEEDED}{matchers(labels)}', window)})"
    # The runs the application judged: it does not judge an interrupted turn either.
    runs_labels = {"gen_ai_workflow_name": workflow, "chainlat_chain_kind": "total"}
    keep = "" if include_interrupted else NOT_INTERRUPTED
    runs = f"sum({_increase(f'{CHAIN_DURATION}_count{matchers(runs_labels, keep)}', window)})"
    unit = PER_RUN_KEYS.get(target, "ms")
    return LimitQuery(workflow, target, "per_run", limit, 0.0, value, runs, 1, unit=unit)


def _error_rate(workflow: str, percent: float, window: str, min_runs: int) -> LimitQuery:
    labels = _workflow_span(workflow)
    errors = matchers(labels, f"status_code={_quote(STATUS_ERROR)}")
    failed = f"sum({_increase(f'{SPAN_CALLS}{errors}', window)})"
    runs = f"sum({_increase(f'{SPAN_CALLS}{matchers(labels)}', window)})"
    value = f"(({failed}) or vector(0)) / {runs}"
    return LimitQuery(
        workflow, "error_rate", "ratio", percent, percent / 100, value, runs, min_runs, unit="%"
    )


RATIO_KEYS: Final[dict[str, Callable[[str, float, str, int], LimitQuery]]] = {
    "error_rate": _error_rate,
}
"""Budget keys that bound a share of runs (in percent, as the budget model holds them),
and the query of each."""


def limit_queries(budgets: Budgets, *, window: str = "1h") -> list[LimitQuery]:
    """Every limit of ``budgets`` that metrics can express, as PromQL over ``window``.

    Example::

        for query in limit_queries(load_budgets("chainlat.toml"), window="1h"):
            print(query.workflow, query.target, query.value)
    """
    window = parse_window(window)
    found: list[LimitQuery] = []
    for workflow, budget in budgets.workflows.items():
        min_runs = budgets.min_runs_for(workflow)
        interrupted = budgets.includes_interrupted(workflow)
        for target, limit in per_run_targets(budget):
            found.append(_per_run(workflow, target, limit, window, interrupted))
        for key in sorted(budget.percentiles, key=lambda k: _percentile(k)):
            q = _percentile(key)
            for quantity, limit in budget.percentiles[key].items():
                source = PERCENTILE_SOURCES.get(quantity)
                if source is None:
                    continue
                histogram, labels, not_failed = source(workflow)
                keep = (
                    "" if budgets.includes_errors(workflow) else not_failed,
                    "" if interrupted else NOT_INTERRUPTED,
                )
                found.append(
                    _percentile_query(
                        workflow,
                        f"{key}.{quantity}",
                        q,
                        limit,
                        histogram,
                        labels,
                        keep,
                        window,
                        min_runs,
                    )
                )
        for step, limits in budget.steps.items():
            for key in sorted(limits.percentiles, key=lambda k: _percentile(k)):
                q = _percentile(key)
                found.append(
                    _step_percentile(
                        workflow,
                        step,
                        key,
                        q,
                        limits.percentiles[key],
                        window,
                        min_runs,
                        budgets.includes_errors(workflow),
                        interrupted,
                    )
                )
        for key, ratio in RATIO_KEYS.items():
            percent = getattr(budget, key, None)
            if isinstance(percent, (int, float)) and not isinstance(percent, bool):
                found.append(ratio(workflow, float(percent), window, min_runs))
    return found


def unexpressed_limits(budgets: Budgets) -> list[Unexpressed]:
    """The limits of ``budgets`` that metrics cannot express, with the reason."""
    found: list[Unexpressed] = []
    for workflow, budget in budgets.workflows.items():
        for key, limits in budget.percentiles.items():
            for quantity, limits_of_key in limits.items():
                if quantity not in PERCENTILE_SOURCES:
                    found.append(
                        Unexpressed(
                            workflow,
                            f"{key}.{quantity}",
                            f"no histogram of {quantity}",
                            limits_of_key,
                            _percentile(key),
                        )
                    )
        for step, step_limits in budget.steps.items():
            for key, ttft in step_limits.ttft_percentiles.items():
                found.append(
                    Unexpressed(
                        workflow,
                        f"steps.{step_key(step)}.{key}",
                        NOT_EXPRESSIBLE["ttft_percentiles"],
                        ttft,
                        _percentile(key.removeprefix("ttft_")),
                    )
                )
        for operation, op_limits in budget.operations.items():
            for key, per_call in op_limits.percentiles.items():
                for name, limit in (
                    ("latency", per_call.latency),
                    ("first_output", per_call.first_output),
                ):
                    if limit is not None:
                        found.append(
                            Unexpressed(
                                workflow,
                                f"operations.{operation}.{key}.{name}",
                                NOT_EXPRESSIBLE["operations"],
                                limit,
                                _percentile(key),
                            )
                        )
        for key, cost in budget.cost_percentiles.items():
            found.append(
                Unexpressed(
                    workflow,
                    key,
                    NOT_EXPRESSIBLE["cost_percentiles"],
                    cost,
                    _percentile(key.removeprefix("cost_")),
                    "USD",
                )
            )
        if budgets.excludes_cache_hits(workflow) and (
            budget.percentiles or any(s.percentiles for s in budget.steps.values())
        ):
            found.append(
                Unexpressed(workflow, "exclude_cache_hits", NOT_EXPRESSIBLE["exclude_cache_hits"])
            )
    return found


def bucket_boundaries(
    budgets: Budgets, base: Iterable[float] = DEFAULT_SPANMETRICS_BUCKETS_MS
) -> list[float]:
    """Span-metrics bucket boundaries (ms) with every limit the span metrics judge: ``base``
    plus the workflow ``total`` percentiles and the step percentiles and maxima."""
    found = {float(b) for b in base}
    for budget in budgets.workflows.values():
        for limits in budget.percentiles.values():
            if limits.total is not None:
                found.add(limits.total)
        for step in budget.steps.values():
            found.update(step.percentiles.values())
            if step.max is not None:
                found.add(step.max)
    return sorted(b for b in found if math.isfinite(b) and b > 0)


def buckets_setting(boundaries: Iterable[float]) -> str:
    """The boundaries as collector/otelcol.yaml reads them (``[10ms, 20ms, ...]``)."""
    return "[" + ", ".join(f"{prom_number(b)}ms" for b in boundaries) + "]"
