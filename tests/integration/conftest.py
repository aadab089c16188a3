"""Fixtures that run Jaeger and the Collector tier on free 127.0.0.1 ports per session.

    jaeger_binary        Path          the built binary, or skip (fail under CI)
    jaeger               Jaeger        one Jaeger for the session
    collector            CollectorTier the default tier: keeps errors, over-budget and
                                       slow (> 2 s) traces, 0 % of the rest
    collector_keep_all   CollectorTier a tier that keeps 100 % (for end-to-end runs
                                       whose traces must all reach Jaeger)
    collector_factory    (Sampling) -> CollectorTier, more tiers into the same Jaeger
    scaled               Scaled        per test module: the scaled tier (load balancer, 2
                                       sampling replicas, Jaeger on Badger, Prometheus)
                                       with the workload of tests/support/scaled_tier.py
                                       sent; a module's tests may stop and kill its parts

All tiers use a 2 s decision wait and flush span metrics every second. Point a
subprocess at a tier with ``env={**os.environ, **tier.otel_env()}``; read back from
``jaeger.query_url``.

Every process started here is stopped at the end of the session, whatever the tests
did; a killed session takes them down too (CHAINLAT_STOP_WITH_PID). The binary comes
from ${CHAINLAT_BIN_DIR:-~/.cache/chainlat/bin}; when it is missing the tests that
need it are skipped with the reason, unless CHAINLAT_REQUIRE_INTEGRATION=1, which builds
it (about 5 minutes cold) and turns any failure to get it into a test failure.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import httpx
import pytest

from chainlat.budgets import load_budgets
from chainlat.prometheus import bucket_boundaries, buckets_setting, prometheus_rules
from support.scaled_tier import (
    BUDGET_TOML,
    SAMPLING,
    Scaled,
    add_late_spans,
    jaeger_count,
    poll,
    send_workload,
)

from .stack import (
    BinaryUnavailable,
    CollectorTier,
    Jaeger,
    Sampling,
    ScaledTier,
    StackError,
    find_binary,
    start_collector,
    start_jaeger,
    start_scaled_tier,
    stop,
    stop_in_tier,
)

CollectorFactory = Callable[[Sampling], CollectorTier]

SKIP_PREFIX = "integration tests need the pipeline binaries: "
_SKIP_LINE = next(
    number
    for number, line in enumerate(Path(__file__).read_text().splitlines(), start=1)
    if line.startswith("def jaeger_binary(")
)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Report every skip for want of the binary at one place, so `-ra` folds them to one line."""
    report = yield
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple) and SKIP_PREFIX in longrepr[2]:
        report.longrepr = (__file__, _SKIP_LINE, longrepr[2])
    return report


def _required() -> bool:
    return os.environ.get("CHAINLAT_REQUIRE_INTEGRATION") == "1"


@pytest.fixture(scope="session")
def jaeger_binary() -> Path:
    """The Jaeger v2 binary collector/build.sh made; skips (or fails, in CI) without it."""
    try:
        return find_binary(build=_required())
    except BinaryUnavailable as exc:
        if _required():
            pytest.fail(f"{SKIP_PREFIX}{exc} (CHAINLAT_REQUIRE_INTEGRATION=1)", pytrace=False)
        pytest.skip(f"{SKIP_PREFIX}{exc}")


@pytest.fixture(scope="session")
def jaeger(jaeger_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jaeger]:
    """A Jaeger v2 with in-memory storage, stopped at the end of the session."""
    run_dir = tmp_path_factory.mktemp("jaeger")
    try:
        started = start_jaeger(run_dir)
    except StackError as exc:
        stop(run_dir, "jaeger")
        pytest.fail(str(exc), pytrace=False)
    try:
        yield started
    finally:
        stop(run_dir, "jaeger")


@pytest.fixture(scope="session")
def collector_factory(
    jaeger: Jaeger, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CollectorFactory]:
    """Start Collector tiers with given sampling settings; all stop with the session."""
    run_dirs: list[Path] = []

    def start(sampling: Sampling) -> CollectorTier:
        run_dir = tmp_path_factory.mktemp("collector")
        run_dirs.append(run_dir)
        try:
            return start_collector(run_dir, jaeger, sampling)
        except StackError as exc:
            pytest.fail(str(exc), pytrace=False)

    try:
        yield start
    finally:
        errors = []
        for run_dir in run_dirs:
            try:
                stop(run_dir, "collector")
            except StackError as exc:
                errors.append(str(exc))
        if errors:
            raise StackError("\n".join(errors))


@pytest.fixture(scope="session")
def collector(collector_factory: CollectorFactory) -> CollectorTier:
    """The Collector tier with test settings: 2 s decision wait, 0 % of plain traces."""
    return collector_factory(Sampling())


@pytest.fixture(scope="session")
def collector_keep_all(collector_factory: CollectorFactory) -> CollectorTier:
    """A Collector tier that keeps every trace (baseline share 100 %)."""
    return collector_factory(Sampling(percent=100))


@pytest.fixture(scope="module")
def scaled(jaeger_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scaled]:
    """The scaled tier with its workload sent, one per test module (its tests may stop and
    kill the tier's processes), stopped at the end of the module."""
    base = tmp_path_factory.mktemp("scaled")
    budgets_file = base / "chainlat.toml"
    budgets_file.write_text(BUDGET_TOML)
    budgets = load_budgets(budgets_file)
    rules = base / "chainlat.rules.yml"
    rules.write_text(prometheus_rules(budgets, window="10m", evaluation_interval="1s"))
    jaeger_dir = base / "jaeger"
    tier_dir = base / "tier"
    jaeger: Jaeger | None = None
    tier: ScaledTier | None = None
    try:
        jaeger = start_jaeger(jaeger_dir, storage="badger")
        tier = start_scaled_tier(
            tier_dir,
            jaeger,
            SAMPLING,
            rules=rules,
            spanmetrics_buckets=buckets_setting(bucket_boundaries(budgets)),
        )
        workload = send_workload(tier, budgets_file, base / "traces.jsonl")
        with httpx.Client(timeout=10) as client:
            # Decided: every over-budget trace has reached Jaeger.
            poll(
                "over-budget traces in Jaeger",
                lambda: (
                    True
                    if all(jaeger_count(client, jaeger, t) > 0 for t in workload.over_budget)
                    else None
                ),
            )
            add_late_spans(tier, workload)
            yield Scaled(jaeger, tier, rules, budgets_file, workload, client)
    except StackError as exc:
        pytest.fail(str(exc), pytrace=False)
    finally:
        if tier is not None:
            stop_in_tier(tier, "tier")
        if jaeger is not None:
            stop(jaeger_dir, "jaeger")
