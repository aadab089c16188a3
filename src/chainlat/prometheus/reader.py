"""Prometheus's HTTP API as a source of verdicts: budgets judged from metrics, not traces.

The queries are those of the generated rules (:func:`chainlat.prometheus.queries.limit_queries`),
run as instant queries, so ``chainlat check --prometheus`` and the alerts agree. Metrics
count every run before sampling: the verdict is unbiased by the tail sampler and costs
the same for a thousand runs as for a billion.
"""

from __future__ import annotations

import difflib
import json
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from chainlat._core.errors import TraceSourceError, shown
from chainlat._core.redact import scrub, scrub_url
from chainlat._core.runs import Unit
from chainlat._core.stats import Stats
from chainlat._net import fetch
from chainlat.budgets import (
    BudgetReport,
    Budgets,
    LimitVerdict,
    NotJudgedReason,
    VerdictStatus,
    apply_opt_outs,
)
from chainlat.prometheus.queries import (
    CHAIN_DURATION,
    SPAN_DURATION,
    LimitQuery,
    Unexpressed,
    limit_queries,
    parse_window,
    unexpressed_limits,
)

if TYPE_CHECKING:
    import httpx

DEFAULT_TIMEOUT_S: Final = 30.0
MAX_RESPONSE_BYTES: Final = 16 * 1024 * 1024


class PrometheusReader:
    """Instant queries against Prometheus's HTTP API (``/api/v1/query``).

    Example::

        reader = PrometheusReader("http://localhost:9090")
        print(reader.scalar('sum(up)'))
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.name = repr(scrub_url(self.url))[1:-1]
        """The URL as printed: credentials scrubbed, control characters escaped."""
        if not timeout_s > 0:
            raise TraceSourceError(f"--timeout {timeout_s}: expected a positive number of seconds")
        self.timeout_s = timeout_s
        """The whole of each query: connecting, waiting, every byte of the answer."""
        self.max_response_bytes = max_response_bytes
        """The largest answer read, decompressed."""
        self._transport = transport

    def _timed_out(self) -> TraceSourceError:
        return TraceSourceError(
            f"{self.name}: Prometheus did not answer in full within {self.timeout_s:g} s; "
            "raise --timeout"
        )

    def _too_big(self) -> TraceSourceError:
        return TraceSourceError(
            f"{self.name}: /api/v1/query: the answer is over {self.max_response_bytes} bytes "
            "(decompressed)"
        )

    def query(self, expr: str, at: float | None = None) -> list[tuple[dict[str, str], float]]:
        """The instant vector of ``expr`` (at ``at``, epoch seconds; default now)."""
        import httpx

        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        try:
            with httpx.Client(transport=self._transport) as client:
                response = fetch(
                    client,
                    "POST",
                    f"{self.url}/api/v1/query",
                    data=params,
                    deadline=time.monotonic() + self.timeout_s,
                    max_bytes=self.max_response_bytes,
                    timed_out=self._timed_out,
                    too_big=self._too_big,
                    where=f"{self.name}: /api/v1/query",
                )
        except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError) as exc:
            detail = scrub(" ".join(str(exc).split())) or type(exc).__name__
            raise TraceSourceError(f"{self.name}: cannot reach Prometheus: {detail}") from None
        try:
            body = json.loads(response.content)
        except (ValueError, RecursionError):
            body = None
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else None
            detail = f": {error}" if isinstance(error, str) else ""
            raise TraceSourceError(
                f"{self.name}: /api/v1/query: HTTP {response.status_code}{scrub(detail)}"
            )
        return _vector(body.get("data"), self.name)

    def scalar(self, expr: str, at: float | None = None) -> float | None:
        """The single value of ``expr``; None when the result is empty."""
        found = self.query(expr, at)
        if not found:
            return None
        return found[0][1]


def _vector(data: object, url: str) -> list[tuple[dict[str, str], float]]:
    if not isinstance(data, Mapping):
        raise TraceSourceError(f"{url}: /api/v1/query: unexpected answer")
    kind = data.get("resultType")
    result = data.get("result")
    if kind == "scalar" and isinstance(result, list) and len(result) == 2:
        return [({}, _float(result[1], url))]
    if kind != "vector" or not isinstance(result, list):
        raise TraceSourceError(f"{url}: /api/v1/query: expected a vector, got {kind!r}")
    found: list[tuple[dict[str, str], float]] = []
    for item in result:
        if not isinstance(item, Mapping):
            raise TraceSourceError(f"{url}: /api/v1/query: unexpected sample")
        metric = item.get("metric")
        value = item.get("value")
        if not isinstance(metric, Mapping) or not isinstance(value, list) or len(value) != 2:
            raise TraceSourceError(f"{url}: /api/v1/query: unexpected sample")
        found.append(({str(k): str(v) for k, v in metric.items()}, _float(value[1], url)))
    return found


def _float(value: object, url: str) -> float:
    try:
        return float(str(value))
    except ValueError:
        raise TraceSourceError(f"{url}: /api/v1/query: not a number: {value!r}") from None


Sample = tuple[dict[str, str], float]

_WORKFLOW_NAMES: Final = (
    # chainlat's own histogram, and the span metrics of workflow spans.
    ("gen_ai_workflow_name", "", f"{CHAIN_DURATION}_count"),
    ("span_name", "invoke_workflow ", f'{SPAN_DURATION}_count{{chainlat_step_kind="workflow"}}'),
)
_STATUS_ORDER: Final = {"broken": 0, "not_judged": 1, "ok": 2}


def _verdict(
    query: LimitQuery, value: float | None, runs: float | None, where: str
) -> LimitVerdict:
    count = round(runs) if runs is not None and math.isfinite(runs) else 0
    status: VerdictStatus = "not_judged"
    reason: NotJudgedReason | None = None
    why: str | None = None
    negative = count < 0 or (
        value is not None and value < 0 and query.measure in ("per_run", "ratio")
    )
    if negative:
        # Counts never go down within a window: a negative one is a broken query or series.
        reason, why = "impossible_value", f"{where} answered a negative count for it"
        count, value = 0, None
    elif count <= 0:
        reason, why = "no_runs", f"no run of {shown(query.workflow)} counted in {where}"
    elif value is None:
        reason, why = "no_series", f"{where} has no series for it: {_no_series(query)}"
    elif not math.isfinite(value):
        reason, why = "not_finite", f"{where} answered {value:+} for it{_infinite(query, value)}"
    elif query.measure == "percentile" and count < query.min_runs:
        reason = "not_enough_runs"
        why = f"{count} of the {query.min_runs} runs min_runs asks for in {where}"
    else:
        status = "broken" if value > query.threshold else "ok"
    if query.measure == "per_run":
        over = round(value) if status != "not_judged" and value is not None else 0
        return LimitVerdict(
            query.workflow,
            query.target,
            query.limit,
            None,
            status,
            count,
            broken_runs=over,
            unit=_unit(query.unit),
            reason=reason,
            why=why,
        )
    actual = value if status != "not_judged" else None
    if query.measure == "ratio" and actual is not None:
        actual *= 100  # a share, shown in percent as the limit is
    return LimitVerdict(
        query.workflow,
        query.target,
        query.limit,
        actual,
        status,
        count,
        percentile=query.percentile,
        min_runs=query.min_runs,
        unit=_unit(query.unit),
        reason=reason,
        why=why,
    )


def _no_series(query: LimitQuery) -> str:
    if query.measure == "per_run":
        return (
            "the application does not count runs over this limit "
            "(configure(budgets=...) with this budget file)"
        )
    if query.measure == "percentile":
        return "no histogram of it (is the Collector tier's span-metrics connector running?)"
    return "no count of runs"


def _infinite(query: LimitQuery, value: float) -> str:
    if query.measure == "percentile" and value > 0:
        return " (the percentile is above the histogram's highest bucket boundary)"
    return ""


def _unit(unit: str) -> Unit:
    return "USD" if unit == "USD" else "%" if unit == "%" else "ms"


def _series_verdicts(
    query: LimitQuery, values: list[Sample], runs: list[Sample], where: str
) -> list[LimitVerdict]:
    """One verdict per series of the value (several when Prometheus keeps several, say per
    instance), each named by its labels, worst first; one verdict when there is none."""
    if not values:
        total = sum(r for _, r in runs) if runs else None
        return [_verdict(query, None, total, where)]
    runs_of = {_label_text(labels): r for labels, r in runs}
    only = runs[0][1] if len(runs) == 1 else None
    verdicts: list[LimitVerdict] = []
    for labels, value in values:
        name = _label_text(labels)
        verdict = _verdict(query, value, runs_of.get(name, only), where)
        if len(values) > 1:
            verdict = replace(verdict, target=f"{query.target} {name}")
        verdicts.append(verdict)
    return sorted(verdicts, key=_worst_first)


def _worst_first(verdict: LimitVerdict) -> tuple[int, float]:
    value = verdict.actual_ms if verdict.actual_ms is not None else float(verdict.broken_runs)
    return _STATUS_ORDER[verdict.status], -value if math.isfinite(value) else 0.0


def _label_text(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items())) + "}"


def _not_expressible(item: Unexpressed) -> LimitVerdict:
    return LimitVerdict(
        item.workflow,
        item.target,
        item.limit if item.limit is not None else 0.0,
        None,
        "not_judged",
        0,
        percentile=item.percentile,
        unit=_unit(item.unit),
        reason="not_expressible",
        why=f"Prometheus cannot judge it: {item.reason}; judge it with chainlat check on traces",
    )


def _interrupted_why(
    reader: PrometheusReader, query: LimitQuery, at: float, where: str
) -> str | None:
    """Why ``query``'s value is not the budget's: it counts the steps of interrupted voice
    turns that the budget leaves out (or Prometheus's count of them is no count); None
    when there are none, or the limit has no such turns to count."""
    if query.interrupted is None:
        return None
    turns = reader.scalar(query.interrupted, at)
    if turns is None or (math.isfinite(turns) and 0 <= turns < 0.5):
        return None
    if not math.isfinite(turns) or turns < 0:
        return f"{where} answered {turns} for its interrupted voice turns, which is no count"
    count = round(turns)
    return (
        f"{count} interrupted voice turn{'s' if count != 1 else ''} of its workflow in "
        f"{where}, whose steps a step's series cannot leave out "
        "(include_interrupted = true counts them)"
    )


def _unknown_workflow(verdict: LimitVerdict, seen: list[str], where: str) -> LimitVerdict:
    close = difflib.get_close_matches(verdict.workflow, seen, n=3, cutoff=0.6)
    hint = " (did you mean " + " or ".join(shown(c) for c in close) + "?)" if close else ""
    # A Prometheus verdict has no worst run: not_judged() clears nothing more than this did.
    return verdict.not_judged(
        "unknown_workflow", f"no series of workflow {shown(verdict.workflow)} in {where}{hint}"
    )


def workflow_names(reader: PrometheusReader, window: str, at: float | None = None) -> list[str]:
    """The workflows Prometheus has series of over ``window`` (chainlat's histogram or the
    span metrics of workflow spans)."""
    found: set[str] = set()
    for label, prefix, series in _WORKFLOW_NAMES:
        expr = f"group by ({label}) (last_over_time({series}[{window}]))"
        for labels, _ in reader.query(expr, at):
            name = labels.get(label, "")
            if name.startswith(prefix) and name[len(prefix) :]:
                found.add(name[len(prefix) :])
    return sorted(found)


def judge_prometheus(
    budgets: Budgets,
    reader: PrometheusReader,
    *,
    window: str = "1h",
    at: float | None = None,
    allow: Iterable[NotJudgedReason] = (),
) -> BudgetReport:
    """Every limit of ``budgets`` judged from metrics over ``window`` ending at ``at``
    (default now), as the trace source judges it: a workflow Prometheus has no series of
    is not judged (``unknown_workflow``), nor is a limit metrics cannot express
    (``not_expressible``, never dropped), a value that is not finite (``not_finite``) or
    without a series (``no_series``); a query answered by several series gets one verdict
    per series, worst first.

    Per-run limits count the runs the application reported over the limit; percentiles
    are read from the histograms (exact verdicts when the limit is a bucket boundary).
    The report has verdicts and no per-run statistics.

    Example::

        report = judge_prometheus(load_budgets("chainlat.toml"),
                                  PrometheusReader("http://localhost:9090"), window="1h")
        print(report.summary)
    """
    window = parse_window(window)
    at = time.time() if at is None else at
    where = f"Prometheus over the last {window}"
    seen = workflow_names(reader, window, at)
    unexpressed = unexpressed_limits(budgets)
    verdicts: list[LimitVerdict] = []
    queries = limit_queries(budgets, window=window)
    for workflow in budgets.workflows:
        found: list[LimitVerdict] = []
        cache_hits = next(
            (u for u in unexpressed if u.workflow == workflow and u.limit is None), None
        )
        for query in queries:
            if query.workflow != workflow:
                continue
            if cache_hits is not None and query.measure == "percentile":
                found.append(
                    _not_expressible(
                        Unexpressed(
                            workflow,
                            query.target,
                            f"{cache_hits.target} = true: {cache_hits.reason}",
                            query.limit,
                            query.percentile,
                        )
                    )
                )
            elif workflow not in seen:
                found.append(_verdict(query, None, 0, where))
            elif (why := _interrupted_why(reader, query, at, where)) is not None:
                unjudged = Unexpressed(workflow, query.target, why, query.limit, query.percentile)
                found.append(_not_expressible(unjudged))
            else:
                values = reader.query(query.value, at)
                runs = reader.query(query.runs, at)
                found.extend(_series_verdicts(query, values, runs, where))
        found += [
            _not_expressible(u)
            for u in unexpressed
            if u.workflow == workflow and u.limit is not None
        ]
        if workflow not in seen:
            found = [_unknown_workflow(v, seen, where) for v in found]
        verdicts += found
    return BudgetReport(apply_opt_outs(verdicts, budgets, allow), Stats(), budgets.source)
