"""The scaled tier's kept traces in Jaeger: every over-budget and failed trace whole (with
a span a second process added after the decision), within-budget traces only as the
sampled share, and every kept trace still there after Jaeger restarts on its Badger store.

The ``scaled`` fixture (conftest.py) runs the tier and sends its workload once for the
module; each test checks one claim of collector/README.md about it.
"""

from __future__ import annotations

import httpx
import pytest

from support.scaled_tier import Scaled, jaeger_count, poll, prometheus

from .apps import attributes, jaeger_spans
from .stack import start_jaeger_again, stop

pytestmark = pytest.mark.integration


def test_every_over_budget_and_failed_trace_is_in_jaeger_whole(scaled: Scaled) -> None:
    """Each kept trace holds every span the application ended, plus the span a second
    process sent after the decision (it followed the kept decision, on the same replica)."""
    expected = scaled.workload.spans_by_trace()
    keep = scaled.workload.over_budget | scaled.workload.failed
    assert len(scaled.workload.over_budget) >= 6 and len(scaled.workload.failed) == 4

    def whole() -> dict[str, int] | None:
        counts = {t: jaeger_count(scaled.client, scaled.jaeger, t) for t in keep}
        return counts if all(counts[t] == expected[t] for t in keep) else None

    counts = poll("kept traces whole in Jaeger", whole)
    assert sum(counts.values()) == sum(expected[t] for t in keep)
    assert all(scaled.workload.late_spans[t] == 1 for t in scaled.workload.over_budget)


def _probability(scaled: Scaled, trace_id: str) -> object:
    """chainlat.sampling.probability on the trace's workflow span."""
    spans = jaeger_spans(scaled.client, scaled.jaeger.query_url, trace_id)
    (workflow,) = [s for s in spans if attributes(s).get("chainlat.step.kind") == "workflow"]
    return attributes(workflow).get("chainlat.sampling.probability")


def test_within_budget_traces_are_kept_only_as_the_sampled_share(scaled: Scaled) -> None:
    """A within-budget trace in Jaeger was kept by the baseline sampler, which says so
    with its probability (0.2), and about 20 % of them are; every over-budget and failed
    trace was kept with probability 1."""
    kept = [t for t in scaled.workload.within if jaeger_count(scaled.client, scaled.jaeger, t)]
    for trace_id in kept:
        assert _probability(scaled, trace_id) == pytest.approx(0.2), trace_id
    # 50 within-budget traces at 20 %: P(more than 25 kept) < 1e-6.
    assert len(kept) <= 25, len(kept)
    for trace_id in scaled.workload.over_budget | scaled.workload.failed:
        assert _probability(scaled, trace_id) == 1.0, trace_id


def test_jaeger_restarted_loses_no_stored_trace(scaled: Scaled) -> None:
    """Badger keeps every trace through a stop and start of Jaeger."""
    keep = scaled.workload.over_budget | scaled.workload.failed
    before = {t: jaeger_count(scaled.client, scaled.jaeger, t) for t in keep}
    assert all(before.values())
    stop(scaled.jaeger.run_dir, "jaeger")
    start_jaeger_again(scaled.jaeger)
    after = poll(
        "Jaeger answering again",
        lambda: _safe_counts(scaled, keep),
    )
    assert after == before


def _safe_counts(scaled: Scaled, keep: set[str]) -> dict[str, int] | None:
    try:
        return {t: jaeger_count(scaled.client, scaled.jaeger, t) for t in keep}
    except httpx.HTTPError:
        return None


def test_spans_after_their_traces_decision_are_counted_late_not_undecided(scaled: Scaled) -> None:
    """The fixture's late spans (one added to each over-budget trace after the decision
    wait): each replica's samplers release them by their cached decisions, and the tier's
    accounting counts them in ``chainlat_tier:late_spans``, not as undecided (before, they
    stayed undecided for good: 6 of them, with nothing held)."""
    late = sum(scaled.workload.late_spans.values())
    assert late == len(scaled.workload.over_budget) >= 6

    def counted() -> tuple[float, float] | None:
        found = []
        for rule in ("late_spans", "undecided_spans"):
            result = prometheus(
                scaled, "/api/v1/query", query=f"sum(chainlat_tier:{rule}) or vector(0)"
            )["result"]
            found.append(float(result[0]["value"][1]) if result else -1.0)
        return (found[0], found[1]) if found == [late, 0.0] else None

    assert poll("the late spans counted late", counted) == (late, 0.0)
