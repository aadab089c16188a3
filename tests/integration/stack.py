"""Start and stop chainlat's trace pipeline for tests, through collector/run.sh.

Each process gets its own run directory (pid file, log) and free ports on 127.0.0.1.
The fixtures in conftest.py are the way to use this; the types here are what they
yield, for annotations in tests.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from support import free_block, free_ports

REPO_ROOT = Path(__file__).resolve().parents[2]
COLLECTOR_DIR = REPO_ROOT / "collector"
BUILD_SH = COLLECTOR_DIR / "build.sh"
RUN_SH = COLLECTOR_DIR / "run.sh"

Process = Literal["jaeger", "collector", "lb", "prometheus", "tier"] | str
"""A process (or group) of collector/run.sh: also ``replica-K``."""

_RUN_SH_TIMEOUT_S = 120
# A cold build compiles about 2,300 packages: about 5 minutes on 2 cores; allow for slower machines.
BUILD_TIMEOUT_S = 40 * 60


class BinaryUnavailable(Exception):
    """A pipeline binary is not built and could not be (message: one line why)."""


class StackError(Exception):
    """collector/run.sh could not start or stop a process (message: its output)."""


@dataclass(frozen=True)
class Jaeger:
    """A running Jaeger v2 (collector/jaeger.yaml): in-memory store and query API."""

    query_url: str
    """``http://127.0.0.1:PORT``: UI and HTTP APIs (``/api/...``, ``/api/v3/...``)."""
    otlp_http_endpoint: str
    """``http://127.0.0.1:PORT``: OTLP/HTTP straight into the store, unsampled."""
    otlp_grpc_endpoint: str
    """``127.0.0.1:PORT``: OTLP/gRPC, what the Collector tier exports to."""
    health_url: str
    run_dir: Path
    env: dict[str, str] = field(default_factory=dict, compare=False)
    """The settings it was started with (start_jaeger_again reuses them)."""

    @property
    def log_path(self) -> Path:
        return self.run_dir / "jaeger.log"


@dataclass(frozen=True)
class Sampling:
    """The Collector tier's knobs (CHAINLAT_SAMPLING_*, CHAINLAT_SPANMETRICS_*)."""

    percent: float = 0.0
    """Share of plain traces kept; 0 and 100 make the outcome exact."""
    latency_ms: int = 2000
    decision_wait_s: float = 2.0
    spanmetrics_flush_s: float = 1.0


@dataclass(frozen=True)
class CollectorTier:
    """A running Collector tier (collector/otelcol.yaml) exporting to a Jaeger."""

    otlp_http_endpoint: str
    """``http://127.0.0.1:PORT``: the value for ``OTEL_EXPORTER_OTLP_ENDPOINT``."""
    otlp_grpc_endpoint: str
    """``127.0.0.1:PORT``."""
    metrics_url: str
    """``http://127.0.0.1:PORT/metrics``: span-latency histograms (Prometheus text)."""
    telemetry_url: str
    """``http://127.0.0.1:PORT/metrics``: the Collector's own metrics."""
    sampling: Sampling
    run_dir: Path
    health_port: int = 0

    @property
    def log_path(self) -> Path:
        return self.run_dir / "collector.log"

    def otel_env(self) -> dict[str, str]:
        """Environment that points an OpenTelemetry SDK (or ``chainlat demo``) here."""
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.otlp_http_endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        }


def find_binary(*, build: bool) -> Path:
    """The cached Jaeger binary, with chainlat-otelcol, prometheus and promtool beside it;
    with ``build``, build what is missing first."""
    args = [str(BUILD_SH), "--print" if build else "--check", "all"]
    try:
        done = subprocess.run(
            args,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S if build else 60,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise BinaryUnavailable(f"collector/build.sh took over {exc.timeout:g}s") from exc
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise BinaryUnavailable(lines[-1] if lines else f"build.sh exited {done.returncode}")
    return Path(done.stdout.strip().splitlines()[0])


def start_jaeger(
    run_dir: Path,
    *,
    max_traces: int = 100_000,
    storage: Literal["memstore", "badger"] = "memstore",
    ui: Path | None = None,
) -> Jaeger:
    """Start Jaeger on free ports; raise StackError with its log if it is not ready.

    ``memstore`` keeps traces in memory (the tests that need no restart); ``badger``
    on disk in ``run_dir``, as shipped. ``ui`` is a built jaeger-ui for it to serve
    (``CHAINLAT_JAEGER_UI``); without it, run.sh's choice (the environment's, the one
    ``build.sh jaeger-ui`` cached, or the placeholder page).
    """
    otlp_grpc, otlp_http, query, query_grpc, health = free_ports(5)
    env = {
        "CHAINLAT_JAEGER_HOST": "127.0.0.1",
        "CHAINLAT_JAEGER_OTLP_GRPC_PORT": str(otlp_grpc),
        "CHAINLAT_JAEGER_OTLP_HTTP_PORT": str(otlp_http),
        "CHAINLAT_JAEGER_QUERY_PORT": str(query),
        "CHAINLAT_JAEGER_QUERY_GRPC_PORT": str(query_grpc),
        "CHAINLAT_JAEGER_HEALTH_PORT": str(health),
        "CHAINLAT_JAEGER_MAX_TRACES": str(max_traces),
        "CHAINLAT_JAEGER_STORAGE": storage,
        "CHAINLAT_JAEGER_DATA_DIR": str(run_dir / "jaeger-data"),
    }
    if ui is not None:
        env["CHAINLAT_JAEGER_UI"] = str(ui)
    _run_sh("start", "jaeger", run_dir=run_dir, env=env)
    return Jaeger(
        query_url=f"http://127.0.0.1:{query}",
        otlp_http_endpoint=f"http://127.0.0.1:{otlp_http}",
        otlp_grpc_endpoint=f"127.0.0.1:{otlp_grpc}",
        health_url=f"http://127.0.0.1:{health}/status",
        run_dir=run_dir,
        env=env,
    )


def start_jaeger_again(jaeger: Jaeger) -> None:
    """Start a stopped Jaeger again: same ports, same storage (its data directory)."""
    _run_sh("start", "jaeger", run_dir=jaeger.run_dir, env=jaeger.env)


def start_collector(run_dir: Path, jaeger: Jaeger, sampling: Sampling) -> CollectorTier:
    """Start a Collector tier that exports to ``jaeger``; raise StackError if not ready."""
    otlp_grpc, otlp_http, prometheus, telemetry, health = free_ports(5)
    tier = CollectorTier(
        otlp_http_endpoint=f"http://127.0.0.1:{otlp_http}",
        otlp_grpc_endpoint=f"127.0.0.1:{otlp_grpc}",
        metrics_url=f"http://127.0.0.1:{prometheus}/metrics",
        telemetry_url=f"http://127.0.0.1:{telemetry}/metrics",
        sampling=sampling,
        run_dir=run_dir,
        health_port=health,
    )
    start_tier(tier, jaeger)
    return tier


def start_tier(tier: CollectorTier, jaeger: Jaeger) -> None:
    """Start the tier ``tier`` describes: the first time, or again after ``stop``.

    Same ports and settings each time, so applications that point at the tier reach
    it again at the same endpoint. Raises StackError if it is not ready.
    """
    sampling = tier.sampling
    env = {
        **_sampling_env(sampling),
        "CHAINLAT_COLLECTOR_HEALTH_PORT": str(tier.health_port or free_ports(1)[0]),
        "CHAINLAT_COLLECTOR_HOST": "127.0.0.1",
        "CHAINLAT_COLLECTOR_OTLP_GRPC_PORT": _port(tier.otlp_grpc_endpoint),
        "CHAINLAT_COLLECTOR_OTLP_HTTP_PORT": _port(tier.otlp_http_endpoint),
        "CHAINLAT_COLLECTOR_PROMETHEUS_PORT": _port(tier.metrics_url),
        "CHAINLAT_COLLECTOR_METRICS_PORT": _port(tier.telemetry_url),
        "CHAINLAT_COLLECTOR_JAEGER_ENDPOINT": jaeger.otlp_grpc_endpoint,
    }
    _run_sh("start", "collector", run_dir=tier.run_dir, env=env)


def _sampling_env(sampling: Sampling) -> dict[str, str]:
    return {
        "CHAINLAT_SAMPLING_PERCENT": f"{sampling.percent:g}",
        "CHAINLAT_SAMPLING_PROBABILITY": f"{sampling.percent / 100:g}",
        "CHAINLAT_SAMPLING_LATENCY_MS": str(sampling.latency_ms),
        "CHAINLAT_SAMPLING_DECISION_WAIT": f"{sampling.decision_wait_s:g}s",
        "CHAINLAT_SPANMETRICS_FLUSH_INTERVAL": f"{sampling.spanmetrics_flush_s:g}s",
    }


@dataclass(frozen=True)
class ScaledTier:
    """The scaled tier (``run.sh start tier``): a load balancer, sampling replicas and a
    Prometheus scraping them and evaluating a rules file, in front of a Jaeger."""

    otlp_http_endpoint: str
    """The load balancer's OTLP/HTTP: the value for ``OTEL_EXPORTER_OTLP_ENDPOINT``."""
    prometheus_url: str
    replica_metrics_urls: tuple[str, ...]
    """Each replica's span metrics, ``http://127.0.0.1:PORT/metrics``."""
    replica_telemetry_urls: tuple[str, ...]
    """Each replica's own metrics (tail sampling counts)."""
    lb_telemetry_url: str
    """The load balancer's own metrics (spans it could not deliver)."""
    sampling: Sampling
    run_dir: Path
    env: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def replicas(self) -> int:
        return len(self.replica_metrics_urls)

    def otel_env(self) -> dict[str, str]:
        """Environment that points an OpenTelemetry SDK here."""
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.otlp_http_endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        }


def start_scaled_tier(
    run_dir: Path,
    jaeger: Jaeger,
    sampling: Sampling,
    *,
    rules: Path,
    replicas: int = 2,
    spanmetrics_buckets: str | None = None,
    scrape_interval_s: float = 1.0,
    lb_retry_s: float = 3.0,
) -> ScaledTier:
    """Start ``replicas`` sampling Collectors, the load balancer and Prometheus (with
    ``rules``) exporting to ``jaeger``; raise StackError if one is not ready."""
    base = free_block(10 * replicas)
    lb_grpc, lb_http, lb_health, lb_metrics, prometheus = free_ports(
        5, avoid=range(base, base + 10 * replicas)
    )
    env = {
        **_sampling_env(sampling),
        "CHAINLAT_SAMPLING_REPLICAS": str(replicas),
        "CHAINLAT_REPLICA_BASE_PORT": str(base),
        "CHAINLAT_COLLECTOR_HOST": "127.0.0.1",
        "CHAINLAT_COLLECTOR_JAEGER_ENDPOINT": jaeger.otlp_grpc_endpoint,
        "CHAINLAT_LB_HOST": "127.0.0.1",
        "CHAINLAT_LB_OTLP_GRPC_PORT": str(lb_grpc),
        "CHAINLAT_LB_OTLP_HTTP_PORT": str(lb_http),
        "CHAINLAT_LB_HEALTH_PORT": str(lb_health),
        "CHAINLAT_LB_METRICS_PORT": str(lb_metrics),
        "CHAINLAT_PROMETHEUS_PORT": str(prometheus),
        "CHAINLAT_PROMETHEUS_RULES": str(rules),
        "CHAINLAT_PROMETHEUS_SCRAPE_INTERVAL": f"{scrape_interval_s:g}s",
        # A stopped replica's share is dropped (and counted) after this, not after 30 s.
        "CHAINLAT_LB_RETRY_MAX_ELAPSED": f"{lb_retry_s:g}s",
    }
    if spanmetrics_buckets is not None:
        env["CHAINLAT_SPANMETRICS_BUCKETS"] = spanmetrics_buckets
    # Jaeger already runs in its own run directory; the tier's processes start here.
    for name in [*(f"replica-{k}" for k in range(1, replicas + 1)), "lb", "prometheus"]:
        _run_sh("start", name, run_dir=run_dir, env=env)
    return ScaledTier(
        otlp_http_endpoint=f"http://127.0.0.1:{lb_http}",
        prometheus_url=f"http://127.0.0.1:{prometheus}",
        replica_metrics_urls=tuple(
            f"http://127.0.0.1:{base + 10 * k + 2}/metrics" for k in range(replicas)
        ),
        replica_telemetry_urls=tuple(
            f"http://127.0.0.1:{base + 10 * k + 3}/metrics" for k in range(replicas)
        ),
        lb_telemetry_url=f"http://127.0.0.1:{lb_metrics}/metrics",
        sampling=sampling,
        run_dir=run_dir,
        env=env,
    )


def stop_in_tier(tier: ScaledTier, process: Process) -> None:
    """Stop one process of the scaled tier (``replica-2``, ``lb``, ``tier`` for all)."""
    _run_sh("stop", process, run_dir=tier.run_dir, env=tier.env)


def kill_in_tier(tier: ScaledTier, process: Process, timeout_s: float = 30.0) -> None:
    """SIGKILL one process of the scaled tier, as the kernel's OOM killer would: by the pid
    run.sh recorded, once its command line shows it is still that process."""
    pid = int((tier.run_dir / f"{process}.pid").read_text())
    command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    if not any(arg.startswith(b"--config=") for arg in command):
        raise StackError(f"{process}: pid {pid} is no longer the process run.sh started")
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while Path(f"/proc/{pid}").exists() and _state(pid) != "Z":
        if time.monotonic() > deadline:
            raise StackError(f"{process}: pid {pid} still there {timeout_s:g}s after SIGKILL")
        time.sleep(0.1)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def start_in_tier(tier: ScaledTier, process: Process, **settings: str) -> None:
    """Start one process of the scaled tier again, with ``settings`` (environment
    variables the configs read) over the tier's own."""
    _run_sh("start", process, run_dir=tier.run_dir, env={**tier.env, **settings})


def restart_in_tier(tier: ScaledTier, process: Process) -> None:
    """``run.sh start PROCESS`` with no setting but the run directory, as an operator
    restarts one process by hand: run.sh restores what it was last started with."""
    _run_sh("start", process, run_dir=tier.run_dir, env={})


def _port(address: str) -> str:
    """The port of ``http://127.0.0.1:PORT/...`` or ``127.0.0.1:PORT``."""
    return address.split("//")[-1].split("/")[0].rsplit(":", 1)[1]


def stop(run_dir: Path, process: Process) -> None:
    """Stop what start_* started in ``run_dir`` (a no-op if it is not running)."""
    _run_sh("stop", process, run_dir=run_dir, env={})


def validate(*configs: Path) -> subprocess.CompletedProcess[str]:
    """``collector/run.sh validate CONFIG...`` with the real binary; never raises."""
    return subprocess.run(
        [str(RUN_SH), "validate", *map(str, configs)],
        capture_output=True,
        text=True,
        timeout=_RUN_SH_TIMEOUT_S,
        check=False,
    )


def _run_sh(*args: str, run_dir: Path, env: dict[str, str]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    full_env = {
        **os.environ,
        **env,
        "CHAINLAT_RUN_DIR": str(run_dir),
        # The processes stop with this test session even if it is killed.
        "CHAINLAT_STOP_WITH_PID": str(os.getpid()),
    }
    try:
        done = subprocess.run(
            [str(RUN_SH), *args],
            capture_output=True,
            text=True,
            env=full_env,
            timeout=_RUN_SH_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise StackError(
            f"collector/run.sh {' '.join(args)}: no answer in {exc.timeout:g}s"
        ) from exc
    if done.returncode != 0:
        raise StackError(f"collector/run.sh {' '.join(args)} failed:\n{done.stderr}")
