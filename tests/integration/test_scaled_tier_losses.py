"""What the scaled tier loses when a sampling replica fails, and how its own metrics count
it: a replica stopped mid-workload (the load balancer counts what it could not deliver), a
replica killed (Prometheus's last scrape holds its loss; the tier's rule reads it after a
restart), and the tier's rule counting, span for span, what no replica accepted.

The ``scaled`` fixture (conftest.py) runs the tier and sends its workload once for the
module; the tests run in the order written, each from the tier as the one before left it
(replica 2 stopped, then killed and started again).
Every wait is a bounded poll, never a sleep on a guess.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from support.scaled_tier import Scaled, jaeger_count, poll, prometheus, send_workload

from .stack import ScaledTier, kill_in_tier, start_in_tier, stop_in_tier

pytestmark = pytest.mark.integration


def _telemetry_sum(url: str, prefix: str, *labels: str) -> float:
    """The sum of a Collector's own metric (``prefix``) over the series whose line holds
    every one of ``labels``."""
    text = httpx.get(url, timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(prefix) and all(label in line for label in labels):
            total += float(line.rsplit(" ", 1)[1])
    return total


ACCEPTED = "otelcol_receiver_accepted_spans"
SENT = "otelcol_exporter_sent_spans"
SEND_FAILED = "otelcol_exporter_send_failed_spans"
ENQUEUE_FAILED = "otelcol_exporter_enqueue_failed_spans"
DECIDED = "otelcol_processor_tail_sampling_count_spans_sampled"
IN_MEMORY = "otelcol_processor_tail_sampling_sampling_traces_on_memory"
LB = 'exporter="loadbalancing/traces"'
RELEASED = "otelcol_processor_outgoing_items"
KEPT = 'processor="attributes/kept-'
"""The processors right after each sampler: what they pass on is what the samplers kept."""
TO_JAEGER = 'exporter="otlp/jaeger"'
BASELINE = 'policy="baseline.baseline"'
"""The baseline sampler has one policy (``baseline``, labelled with its sampler's name),
so its span counts per decision add up to every span it decided on, once."""


@dataclass(frozen=True)
class Tally:
    """The tier's own counts at one moment: the load balancer's and each replica's."""

    lb_accepted: float
    lb_sent: float
    lb_failed: float
    lb_enqueue_failed: float
    accepted: tuple[float, ...]
    decided: tuple[float, ...]
    released: tuple[float, ...]
    """Spans the samplers kept and passed on towards Jaeger."""
    to_jaeger: tuple[float, ...]

    @staticmethod
    def read(tier: ScaledTier, replicas: tuple[int, ...]) -> Tally:
        urls = [tier.replica_telemetry_urls[k] for k in replicas]
        lb = tier.lb_telemetry_url
        return Tally(
            _telemetry_sum(lb, ACCEPTED),
            _telemetry_sum(lb, SENT, LB),
            _telemetry_sum(lb, SEND_FAILED, LB),
            _telemetry_sum(lb, ENQUEUE_FAILED, LB),
            tuple(_telemetry_sum(u, ACCEPTED) for u in urls),
            tuple(_telemetry_sum(u, DECIDED, BASELINE) for u in urls),
            tuple(_telemetry_sum(u, RELEASED, KEPT) for u in urls),
            tuple(_telemetry_sum(u, SENT, TO_JAEGER) for u in urls),
        )


def _in_memory(url: str) -> float:
    return _telemetry_sum(url, IN_MEMORY)


def _idle(url: str) -> bool | None:
    """True once the replica holds no trace and has sent (or failed to send) Jaeger every
    span its samplers kept."""
    pending = (
        _telemetry_sum(url, RELEASED, KEPT)
        - _telemetry_sum(url, SENT, TO_JAEGER)
        - _telemetry_sum(url, SEND_FAILED, TO_JAEGER)
    )
    return True if _in_memory(url) == 0 and pending == 0 else None


def test_a_stopped_replica_loses_only_what_the_load_balancer_counts(scaled: Scaled) -> None:
    """Replica 2 stops in the middle of a workload, holding traces it has not decided
    on; the rest of the workload is routed to it all the same.

    - The traces replica 2 held are not lost: stopping, it decides on each of them and
      exports the kept ones (every over-budget and failed trace of the first half is in
      Jaeger whole).
    - What the load balancer could not deliver afterwards it counts, span for span, in
      ``otelcol_exporter_send_failed_spans``: every span the application sent was
      accepted by a replica or counted failed there; the over-budget and failed traces
      missing from Jaeger are among those counted.

    Replica 2 runs here with a decision wait longer than the test (the shipped default
    is 30 s), so that what it holds when it stops does not depend on timing. The
    application sends each span in its own request, so that the failed count is exactly
    the spans for the stopped replica (with batches, the load balancer counts a whole
    request that was in part for it: collector/README.md)."""
    tier = scaled.tier
    stop_in_tier(tier, "replica-2")
    start_in_tier(tier, "replica-2", CHAINLAT_SAMPLING_DECISION_WAIT="600s")
    # Nothing of the module's workload is still in flight at replica 1.
    poll("replica 1 idle", lambda: _idle(tier.replica_telemetry_urls[0]))
    before = Tally.read(tier, (0, 1))

    first = send_workload(
        tier, scaled.budgets_file, tier.run_dir / "before-stop.jsonl", over=16, batch=False
    )

    def delivered() -> Tally | None:
        now = Tally.read(tier, (0, 1))
        accepted = now.lb_accepted - before.lb_accepted
        done = accepted == len(first.spans) and now.lb_sent - before.lb_sent == accepted
        return now if done else None

    held = poll(
        "the first half delivered to both replicas",
        delivered,
        state=lambda: (len(first.spans), before, Tally.read(tier, (0, 1))),
    )
    replica_2_accepted = held.accepted[1] - before.accepted[1]
    # Replica 2 has decided on nothing: it holds every span it accepted.
    assert held.decided[1] == before.decided[1] and replica_2_accepted > 0
    replica_2_traces = _in_memory(tier.replica_telemetry_urls[1])
    stop_in_tier(tier, "replica-2")

    second = send_workload(
        tier, scaled.budgets_file, tier.run_dir / "after-stop.jsonl", over=16, batch=False
    )
    sent = len(first.spans) + len(second.spans)

    def settled() -> Tally | None:
        now = Tally.read(tier, (0,))
        accepted = now.lb_accepted - before.lb_accepted
        done = now.lb_sent - before.lb_sent + now.lb_failed - before.lb_failed
        # Replica 1 has decided on every span it accepted (it counts a tick's decisions
        # after it has released their traces, so this is polled, not read once), and
        # sent Jaeger every span it kept.
        decided = now.decided[0] - before.decided[0] == now.accepted[0] - before.accepted[0]
        exported = now.to_jaeger[0] - before.to_jaeger[0] == now.released[0] - before.released[0]
        return now if accepted == sent and done == accepted and decided and exported else None

    after = poll(
        "every span delivered or counted failed, and decided on at replica 1",
        settled,
        state=lambda: Tally.read(tier, (0,)),
    )
    lost_at_lb = after.lb_failed - before.lb_failed
    replica_1_accepted = after.accepted[0] - before.accepted[0]
    replica_1_kept = after.to_jaeger[0] - before.to_jaeger[0]

    # The load balancer: every span accepted went to a replica, or is counted failed.
    assert after.lb_enqueue_failed == before.lb_enqueue_failed
    assert after.lb_accepted - before.lb_accepted == sent
    assert replica_1_accepted + replica_2_accepted + lost_at_lb == sent
    assert lost_at_lb > 0
    # Kept traces: replica 1's, plus what replica 2 kept of what it held as it stopped.
    traces = set(first.spans_by_trace()) | set(second.spans_by_trace())
    in_jaeger = poll(
        "the kept spans in Jaeger",
        lambda: _jaeger_total(scaled, traces, replica_1_kept),
        state=lambda: (_jaeger_sum(scaled, traces), replica_1_kept),
    )
    kept_at_stop = in_jaeger - replica_1_kept
    assert 0 < kept_at_stop <= replica_2_accepted
    # Over-budget and failed traces: the first half's all whole, though replica 2 held
    # some of them undecided; the second half's whole, or lost whole at the load balancer.
    expected = first.spans_by_trace()
    for trace_id in first.over_budget | first.failed:
        found = jaeger_count(scaled.client, scaled.jaeger, trace_id)
        assert found == expected[trace_id], (trace_id, found, expected[trace_id])
    expected = second.spans_by_trace()
    missing = 0
    for trace_id in second.over_budget | second.failed:
        found = jaeger_count(scaled.client, scaled.jaeger, trace_id)
        assert found in (0, expected[trace_id]), (trace_id, found, expected[trace_id])
        missing += expected[trace_id] if found == 0 else 0
    assert 0 < missing <= lost_at_lb
    decided_against = replica_1_accepted + replica_2_accepted - in_jaeger
    print(
        f"\nsent {sent} spans: {in_jaeger:g} in Jaeger ({kept_at_stop:g} kept by replica 2 as "
        f"it stopped, holding {replica_2_accepted:g} spans of {replica_2_traces:g} traces), "
        f"{decided_against:g} decided against, {lost_at_lb:g} counted failed by the load "
        f"balancer ({missing} of them of over-budget or failed traces)"
    )


def _jaeger_sum(scaled: Scaled, traces: set[str]) -> int:
    return sum(jaeger_count(scaled.client, scaled.jaeger, t) for t in traces)


def _jaeger_total(scaled: Scaled, traces: set[str], at_least: float) -> float | None:
    """Spans of ``traces`` in Jaeger, once at least ``at_least`` and unchanged over two reads."""
    found = _jaeger_sum(scaled, traces)
    if found < at_least:
        return None
    time.sleep(1.0)
    return found if _jaeger_sum(scaled, traces) == found else None


def _last_scraped(
    scaled: Scaled, metric: str, url: str, since: float, *labels: str
) -> float | None:
    """The sum of ``metric``'s series from the target ``url`` as Prometheus last scraped
    them since ``since`` (epoch seconds; also after the target is gone), so that an
    earlier process on the same address does not count; None before Prometheus has any."""
    instance = url.split("//")[1].split("/")[0]
    matchers = ", ".join([f'__name__=~"{metric}(_total)?"', f'instance="{instance}"', *labels])
    window = math.ceil(time.time() - since)
    result = prometheus(
        scaled, "/api/v1/query", query=f"sum(last_over_time({{{matchers}}}[{window}s]))"
    )["result"]
    return float(result[0]["value"][1]) if result else None


def test_a_killed_replica_loses_what_prometheus_last_counted_it_holding(scaled: Scaled) -> None:
    """Replica 2, killed (SIGKILL, as by the OOM killer) while it holds undecided traces,
    loses them: exactly the spans Prometheus last scraped it as having accepted and not
    decided on. Every span sent is in Jaeger (all by replica 1), decided against by
    replica 1, held by replica 2 when it died, or counted failed by the load balancer."""
    tier = scaled.tier
    replica_2 = tier.replica_telemetry_urls[1]
    # Replica 2 is stopped (the test before stopped it): what Prometheus scraped from it
    # since now comes from the process started here.
    restarted = time.time()
    start_in_tier(tier, "replica-2", CHAINLAT_SAMPLING_DECISION_WAIT="600s")
    # A fresh load balancer: its connection to replica 2 had failed until now, and gRPC
    # backs off reconnecting (up to 2 min), during which replica 2's share would fail.
    stop_in_tier(tier, "lb")
    start_in_tier(tier, "lb")
    poll("replica 1 idle", lambda: _idle(tier.replica_telemetry_urls[0]))
    before = Tally.read(tier, (0, 1))
    workload = send_workload(
        tier, scaled.budgets_file, tier.run_dir / "before-kill.jsonl", over=16, batch=False
    )
    sent = len(workload.spans)

    def delivered() -> Tally | None:
        now = Tally.read(tier, (0, 1))
        accepted = now.lb_accepted - before.lb_accepted
        done = now.lb_sent - before.lb_sent + now.lb_failed - before.lb_failed
        return now if accepted == sent and done == accepted else None

    held = poll(
        "the workload delivered (or counted failed)",
        delivered,
        state=lambda: (sent, before, Tally.read(tier, (0, 1))),
    )
    replica_2_accepted = held.accepted[1] - before.accepted[1]
    assert held.decided[1] == before.decided[1] and replica_2_accepted > 0

    # Prometheus has scraped replica 2 holding all of it (nothing changes there now: no
    # traffic, no decision for 600 s).
    def scraped() -> float | None:
        found = _last_scraped(scaled, ACCEPTED, replica_2, restarted)
        return found if found == held.accepted[1] else None

    poll(
        "Prometheus scraping replica 2's accepted spans",
        scraped,
        state=lambda: (_last_scraped(scaled, ACCEPTED, replica_2, restarted), held),
    )
    killed_id = _instance_id(replica_2)
    kill_in_tier(tier, "replica-2")
    # After the kill, from Prometheus alone: spans replica 2 accepted and never decided on.
    accepted_2 = _last_scraped(scaled, ACCEPTED, replica_2, restarted)
    decided_2 = _last_scraped(scaled, DECIDED, replica_2, restarted, BASELINE) or 0.0
    assert accepted_2 is not None
    lost_at_replica = accepted_2 - decided_2 - (before.accepted[1] - before.decided[1])
    assert lost_at_replica == replica_2_accepted

    def settled() -> Tally | None:
        now = Tally.read(tier, (0,))
        decided = now.decided[0] - before.decided[0] == now.accepted[0] - before.accepted[0]
        exported = now.to_jaeger[0] - before.to_jaeger[0] == now.released[0] - before.released[0]
        return now if decided and exported else None

    after = poll(
        "replica 1 decided on all it accepted, and sent Jaeger what it kept",
        settled,
        state=lambda: (before, Tally.read(tier, (0,))),
    )
    lost_at_lb = held.lb_failed - before.lb_failed
    replica_1_accepted = after.accepted[0] - before.accepted[0]
    replica_1_decided = after.decided[0] - before.decided[0]
    replica_1_kept = after.to_jaeger[0] - before.to_jaeger[0]
    assert replica_1_accepted + replica_2_accepted + lost_at_lb == sent
    traces = set(workload.spans_by_trace())
    in_jaeger = poll(
        "replica 1's kept spans in Jaeger",
        lambda: _jaeger_total(scaled, traces, replica_1_kept),
        state=lambda: (_jaeger_sum(scaled, traces), replica_1_kept),
    )
    # Replica 2 exported nothing: Jaeger holds exactly what replica 1 kept.
    assert in_jaeger == replica_1_kept
    decided_against = replica_1_decided - replica_1_kept
    assert in_jaeger + decided_against + lost_at_replica + lost_at_lb == sent
    # The over-budget and failed traces missing from Jaeger are among the counted losses.
    expected = workload.spans_by_trace()
    missing = 0
    for trace_id in workload.over_budget | workload.failed:
        found = jaeger_count(scaled.client, scaled.jaeger, trace_id)
        assert found in (0, expected[trace_id]), (trace_id, found, expected[trace_id])
        missing += expected[trace_id] if found == 0 else 0
    assert 0 < missing <= lost_at_replica + lost_at_lb
    # The operator's recipe, the tier's recording rule, still reads the killed process's
    # loss once a new one runs on its address (its own service_instance_id), and reads
    # nothing for the new one.
    start_in_tier(tier, "replica-2", CHAINLAT_SAMPLING_DECISION_WAIT="600s")
    restarted_id = poll("replica 2 answering again", lambda: _safe_instance_id(replica_2))
    assert restarted_id != killed_id

    def recorded() -> dict[str, float] | None:
        lost = _lost_with_process(scaled, replica_2)
        scraped_again = prometheus(
            scaled, "/api/v1/query", query=f'target_info{{service_instance_id="{restarted_id}"}}'
        )["result"]
        return lost if killed_id in lost and scraped_again else None

    def seen() -> object:
        instance = replica_2.split("//")[1].split("/")[0]
        raw = prometheus(
            scaled,
            "/api/v1/query",
            query=f'{{__name__=~"{ACCEPTED}(_total)?", instance="{instance}"}}',
        )["result"]
        rule = prometheus(scaled, "/api/v1/query", query="chainlat_tier:undecided_spans")
        return (killed_id, restarted_id, [r["metric"] for r in raw], rule["result"])

    lost = poll("the tier's rule reading replica 2's loss after its restart", recorded, state=seen)
    # Earlier replica 2 processes of this module, stopped, have figures of their own.
    assert lost[killed_id] == held.accepted[1] - held.decided[1], (lost, held)
    assert restarted_id not in lost
    print(
        f"\nsent {sent} spans: {in_jaeger:g} in Jaeger, {decided_against:g} decided against, "
        f"{lost_at_replica:g} lost with replica 2 (killed; Prometheus's last scrape), "
        f"{lost_at_lb:g} counted failed by the load balancer ({missing} of them of "
        f"over-budget or failed traces); after its restart the tier's rule reads "
        f"{lost[killed_id]:g} lost with the killed process"
    )


def _instance_id(url: str) -> str:
    """The ``service_instance_id`` a Collector labels its own metrics with (one per process)."""
    for line in httpx.get(url, timeout=10).text.splitlines():
        found = re.search(r'service_instance_id="([^"]+)"', line)
        if found:
            return found.group(1)
    raise AssertionError(f"{url}: no service_instance_id label")


def _safe_instance_id(url: str) -> str | None:
    try:
        return _instance_id(url)
    except httpx.HTTPError:
        return None


def _lost_with_process(scaled: Scaled, url: str) -> dict[str, float]:
    """``chainlat_tier:spans_lost_with_process`` (collector/rules/tier-losses.yml) for the
    address of ``url``, by process."""
    instance = url.split("//")[1].split("/")[0]
    result = prometheus(
        scaled,
        "/api/v1/query",
        query=f'chainlat_tier:spans_lost_with_process{{instance="{instance}"}}',
    )["result"]
    return {r["metric"].get("service_instance_id", ""): float(r["value"][1]) for r in result}


TIER_RULES = Path(__file__).resolve().parents[2] / "collector" / "rules" / "tier-losses.yml"


def _tier_rule(name: str) -> str:
    """The expression of one of the tier's recording rules, as shipped."""
    document = yaml.safe_load(TIER_RULES.read_text())
    (expr,) = [r["expr"] for g in document["groups"] for r in g["rules"] if r["record"] == name]
    return str(expr)


def _live_sum(scaled: Scaled, metric: str, url: str) -> float:
    """``metric`` summed over the live series Prometheus scraped from ``url``'s address."""
    instance = url.split("//")[1].split("/")[0]
    query = f'sum({{__name__=~"{metric}(_total)?", instance="{instance}"}})'
    result = prometheus(scaled, "/api/v1/query", query=query)["result"]
    return float(result[0]["value"][1]) if result else 0.0


def _not_accepted(scaled: Scaled, replica_1: float, lb: float) -> float | None:
    """The tier's ``chainlat_tier:spans_not_accepted_by_a_replica``, evaluated now, once
    Prometheus has scraped the load balancer's and replica 1's accepted counts as given."""
    tier = scaled.tier
    if _live_sum(scaled, ACCEPTED, tier.lb_telemetry_url) != lb:
        return None
    if _live_sum(scaled, ACCEPTED, tier.replica_telemetry_urls[0]) != replica_1:
        return None
    expr = _tier_rule("chainlat_tier:spans_not_accepted_by_a_replica")
    result = prometheus(scaled, "/api/v1/query", query=expr)["result"]
    return float(result[0]["value"][1]) if result else None


def test_the_tiers_rule_counts_per_span_what_no_replica_accepted(scaled: Scaled) -> None:
    """With replica 2 down and the SDK's batches, the load balancer counts each request
    with a share for replica 2 failed whole, also the spans replica 1 took; the tier's
    rule counts, span for span, those no replica accepted."""
    tier = scaled.tier
    stop_in_tier(tier, "replica-2")
    poll("replica 1 idle", lambda: _idle(tier.replica_telemetry_urls[0]))
    before = Tally.read(tier, (0,))
    rule_before = poll(
        "Prometheus caught up before the workload",
        lambda: _not_accepted(scaled, before.accepted[0], before.lb_accepted),
    )
    workload = send_workload(tier, scaled.budgets_file, tier.run_dir / "batched.jsonl")
    sent = len(workload.spans)

    def delivered() -> Tally | None:
        now = Tally.read(tier, (0,))
        accepted = now.lb_accepted - before.lb_accepted
        done = now.lb_sent - before.lb_sent + now.lb_failed - before.lb_failed
        return now if accepted == sent and done == accepted else None

    after = poll("the workload delivered (or counted failed)", delivered)
    not_accepted = sent - (after.accepted[0] - before.accepted[0])
    counted_failed = after.lb_failed - before.lb_failed
    assert not_accepted > 0

    def recorded() -> float | None:
        now = _not_accepted(scaled, after.accepted[0], after.lb_accepted)
        return now if now is not None and now - rule_before == not_accepted else None

    poll(
        "the rule counting the spans no replica accepted",
        recorded,
        state=lambda: (
            _not_accepted(scaled, after.accepted[0], after.lb_accepted),
            rule_before,
            not_accepted,
            counted_failed,
        ),
    )
    assert counted_failed >= not_accepted
    print(
        f"\nbatched, replica 2 down: {sent} spans sent, {not_accepted:g} accepted by no "
        f"replica (the rule: the same), {counted_failed:g} counted failed by the load "
        "balancer (whole requests)"
    )
