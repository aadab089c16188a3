"""Prometheus's HTTP API as a source of verdicts: budgets judged from metrics, not traces.

The queries are those of the generated rules (:func:`chainlat.prometheus.queries.limit_queries`),
run as instant queries, so ``chainlat check --prometheus`` and the alerts agree. Metrics
count every run before sampling: the verdict is unbiased by the tail sampler and costs
the same for a thousand runs as for a billion.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

from chainlat._core.errors import TraceSourceError
from chainlat._core.runs import Unit
from chainlat._core.stats import Stats
from chainlat.budgets import (
    BudgetReport,
    Budgets,
    LimitVerdict,
    NotJudgedReason,
    VerdictStatus,
    apply_opt_outs,
)
from chainlat.prometheus.queries import LimitQuery, limit_queries

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
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        if not timeout_s > 0:
            raise TraceSourceError(f"--timeout {timeout_s}: expected a positive number of seconds")
        self.timeout_s = timeout_s
        self._transport = transport

    def query(self, expr: str, at: float | None = None) -> list[tuple[dict[str, str], float]]:
        """The instant vector of ``expr`` (at ``at``, epoch seconds; default now)."""
        import httpx

        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        try:
            with httpx.Client(transport=self._transport, timeout=self.timeout_s) as client:
                response = client.post(f"{self.url}/api/v1/query", data=params)
        except httpx.TimeoutException:
            raise TraceSourceError(
                f"{self.url}: Prometheus did not answer within {self.timeout_s:g} s"
            ) from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise TraceSourceError(f"{self.url}: cannot reach Prometheus: {detail}") from None
        if len(response.content) > MAX_RESPONSE_BYTES:
            raise TraceSourceError(f"{self.url}: the answer is over {MAX_RESPONSE_BYTES} bytes")
        try:
            body = json.loads(response.content)
        except (ValueError, RecursionError):
            body = None
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else None
            detail = f": {error}" if isinstance(error, str) else ""
            raise TraceSourceError(
                f"{self.url}: /api/v1/query: HTTP {response.status_code}{detail}"
            )
        return _vector(body.get("data"), self.url)

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


def _verdict(query: LimitQuery, value: float | None, runs: float | None) -> LimitVerdict:
    count = round(runs) if runs is not None and math.isfinite(runs) else 0
    status: VerdictStatus = "not_judged"
    reason: NotJudgedReason | None = None
    why: str | None = None
    if count <= 0 or value is None:
        reason, why = "no_data", "Prometheus has no sample of it in the window"
    elif math.isnan(value):
        reason, why = "not_finite", f"Prometheus answered {value} for it"
    elif query.measure == "percentile" and count < query.min_runs:
        reason = "not_enough_runs"
        why = f"{count} of the {query.min_runs} runs min_runs asks for in the window"
    else:
        status = "broken" if value > query.threshold else "ok"
    if query.measure == "per_run":
        over = round(value) if value is not None and math.isfinite(value) else 0
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
    actual = value if reason != "no_data" else None
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


def _unit(unit: str) -> Unit:
    return "USD" if unit == "USD" else "%" if unit == "%" else "ms"


def judge_prometheus(
    budgets: Budgets,
    reader: PrometheusReader,
    *,
    window: str = "1h",
    at: float | None = None,
    allow: Iterable[NotJudgedReason] = (),
) -> BudgetReport:
    """Every limit metrics can express, judged over ``window`` ending at ``at`` (default now).

    Per-run limits count the runs the application reported over the limit; percentiles
    are read from the histograms (exact verdicts when the limit is a bucket boundary).
    The report has verdicts and no per-run statistics.

    Example::

        report = judge_prometheus(load_budgets("chainlat.toml"),
                                  PrometheusReader("http://localhost:9090"), window="1h")
        print(report.ok)
    """
    at = time.time() if at is None else at
    verdicts: list[LimitVerdict] = []
    for query in limit_queries(budgets, window=window):
        value = reader.scalar(query.value, at)
        runs = reader.scalar(query.runs, at)
        verdicts.append(_verdict(query, value, runs))
    return BudgetReport(apply_opt_outs(verdicts, budgets, allow), Stats(), budgets.source)
