"""collector/README.md, "The scaled tier in three commands", run as written: the commands
are read from the README, with the addresses moved to free 127.0.0.1 ports and the rules
file to a temporary directory (the only edits, each checked to apply), then the claims
that follow them are checked: the over-budget alert fires for the demo's workflow, and
``chainlat check --prometheus`` judges both of the demo's limits, ``p95.data`` with data.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from support import free_block, free_ports

from .stack import REPO_ROOT

pytestmark = pytest.mark.integration

README = REPO_ROOT / "collector" / "README.md"
SECTION = "## The scaled tier in three commands"
T = TypeVar("T")
POLL_S = 180.0
"""Bound on the wait for the alert: span metrics flush every 15 s, Prometheus scrapes
every 5 s and evaluates the rules every 30 s; on a loaded machine, several times that."""


def _commands() -> list[str]:
    """The README's commands, one per entry (continuation lines joined)."""
    text = README.read_text()
    block = re.search(re.escape(SECTION) + r"\n\n```sh\n(.*?)\n```", text, re.S)
    assert block is not None, f"{README}: no sh block under {SECTION!r}"
    commands, current = [], ""
    for line in block.group(1).splitlines():
        current += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            commands.append(re.sub(r"\s+#.*$", "", current).strip())
            current = ""
    return commands


def _replace(command: str, old: str, new: str) -> str:
    assert old in command, f"the README's command no longer holds {old!r}: {command}"
    return command.replace(old, new)


def _run(command: str, env: dict[str, str], cwd: Path, timeout_s: float) -> str:
    done = subprocess.run(
        ["bash", "-c", f"set -euo pipefail; {command}"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done.stdout


def _alerts(prometheus: str) -> list[dict[str, Any]]:
    try:
        response = httpx.get(f"{prometheus}/api/v1/alerts", timeout=10)
        response.raise_for_status()
    except httpx.HTTPError:
        return []
    alerts: list[dict[str, Any]] = response.json()["data"]["alerts"]
    return alerts


def _check_prometheus(prometheus: str, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "chainlat.cli",
            "check",
            "--prometheus",
            prometheus,
            "--budgets",
            "collector/demo.chainlat.toml",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_the_three_commands_of_the_readme_fire_the_demo_alert(
    jaeger_binary: Path, tmp_path: Path
) -> None:
    """``jaeger_binary`` stands for all the binaries: it skips (or fails, in CI) unless
    ``collector/build.sh all`` has built them, so the README's first command is cached."""
    build, start, demo = _commands()
    base = free_block(20)
    ports = free_ports(10, avoid=range(base, base + 20))
    prometheus = f"http://127.0.0.1:{ports[9]}"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "CHAINLAT_RUN_DIR": str(tmp_path / "run"),
        "CHAINLAT_STOP_WITH_PID": str(os.getpid()),
        "CHAINLAT_REPLICA_BASE_PORT": str(base),
        "CHAINLAT_JAEGER_OTLP_GRPC_PORT": str(ports[0]),
        "CHAINLAT_JAEGER_OTLP_HTTP_PORT": str(ports[1]),
        "CHAINLAT_JAEGER_QUERY_PORT": str(ports[2]),
        "CHAINLAT_JAEGER_QUERY_GRPC_PORT": str(ports[3]),
        "CHAINLAT_JAEGER_HEALTH_PORT": str(ports[4]),
        "CHAINLAT_LB_OTLP_GRPC_PORT": str(ports[5]),
        "CHAINLAT_LB_OTLP_HTTP_PORT": str(ports[6]),
        "CHAINLAT_LB_HEALTH_PORT": str(ports[7]),
        "CHAINLAT_LB_METRICS_PORT": str(ports[8]),
        "CHAINLAT_PROMETHEUS_PORT": str(ports[9]),
    }
    rules = tmp_path / "demo.rules.yml"
    try:
        _run(build, env, REPO_ROOT, timeout_s=90 * 60)
        _run(_replace(start, "/tmp/demo.rules.yml", str(rules)), env, REPO_ROOT, 300)
        assert rules.is_file()
        demo = _replace(demo, "http://127.0.0.1:4318", f"http://127.0.0.1:{ports[6]}")
        demo = _replace(demo, "collector/demo.chainlat.toml", str(DEMO_BUDGETS))
        _run(demo, env, tmp_path, timeout_s=600)

        # "curl -s http://127.0.0.1:9090/api/v1/alerts shows ChainlatBudgetBroken firing
        # for support-agent, target p95.total". The two limits' alerts can start firing at
        # different evaluations (a percentile's waits for its least number of runs, a
        # per-run limit's for one): wait for both.
        expected = {("support-agent", "p95.total"), ("support-agent", "total")}

        def firing() -> list[dict[str, Any]] | None:
            alerts = [
                a
                for a in _alerts(prometheus)
                if a["state"] == "firing" and a["labels"].get("alertname") == "ChainlatBudgetBroken"
            ]
            pairs = {(a["labels"].get("workflow"), a["labels"].get("target")) for a in alerts}
            return alerts if pairs >= expected else None

        found = _poll(firing)
        assert {(a["labels"]["workflow"], a["labels"]["target"]) for a in found} == expected, found

        # "chainlat check --prometheus ... prints the same verdict as a table and exits 1",
        # with both limits judged: p95.data has data (and keeps its 5 s limit).
        def judged() -> tuple[int, dict[str, Any]] | None:
            code, report = _check_prometheus(prometheus, env)
            verdicts = {v["target"]: v for v in report["verdicts"]}
            ready = all(verdicts[t]["actual_ms"] is not None for t in ("p95.total", "p95.data"))
            return (code, verdicts) if ready else None

        code, verdicts = _poll(judged)

        # The recording rule the p95.data alert reads has data as well.
        def recorded() -> list[dict[str, Any]] | None:
            response = httpx.get(
                f"{prometheus}/api/v1/query",
                params={"query": 'chainlat_budget:value_ms{target="p95.data"}'},
                timeout=10,
            )
            result: list[dict[str, Any]] = response.json()["data"]["result"]
            return result or None

        (sample,) = _poll(recorded)
        assert sample["metric"]["workflow"] == "support-agent"
        assert 0 < float(sample["value"][1]) <= 5000
        assert code == 1
        assert verdicts["p95.total"]["status"] == "broken"
        assert verdicts["p95.data"]["status"] == "ok"
        assert 0 < verdicts["p95.data"]["actual_ms"] <= 5000

        # The runs over the per-run total are what the over-budget policy keeps: as many
        # as the demo counted over it, each with its outcome and probability 1; a run
        # within budget only as the baseline's 10 % share, never as "slow" for an
        # outcome recorded seconds after it.
        over_count = _query(prometheus, f"sum({EXCEEDED})")
        assert over_count is not None and over_count > 0
        jaeger = f"http://127.0.0.1:{ports[2]}"

        def kept() -> dict[str, DemoRun] | None:
            held = _jaeger_runs(jaeger)
            over = [run for run in held.values() if run.budget_ok is False]
            return held if len(over) >= over_count else None

        held = _poll(kept)
        over = {t for t, run in held.items() if run.budget_ok is False}
        assert len(over) == over_count, (len(over), over_count)
        for trace_id, run in held.items():
            assert run.outcome, (trace_id, run)
            assert run.probability == (1.0 if trace_id in over else 0.1), (trace_id, run)
        assert len(held) - len(over) <= 12, (len(held), len(over))
    finally:
        subprocess.run(
            [str(REPO_ROOT / "collector" / "run.sh"), "stop", "tier"],
            capture_output=True,
            env=env,
            timeout=120,
            check=False,
        )


DEMO_BUDGETS = REPO_ROOT / "collector" / "demo.chainlat.toml"
EXCEEDED = (
    'chainlat_budget_exceeded_total{gen_ai_workflow_name="support-agent", '
    'chainlat_budget_target="total"}'
)
"""The demo's own count of its runs over the per-run total."""


@dataclass(frozen=True)
class DemoRun:
    """One demo run as Jaeger holds it: what its workflow span says, whether it has its
    outcome span."""

    budget_ok: object
    probability: object
    outcome: bool


def _query(prometheus: str, query: str) -> float | None:
    response = httpx.get(f"{prometheus}/api/v1/query", params={"query": query}, timeout=10)
    result = response.json()["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def _jaeger_runs(query_url: str) -> dict[str, DemoRun]:
    """The demo's ``support-agent`` runs Jaeger holds (v1 search), by trace id."""
    try:
        response = httpx.get(
            f"{query_url}/api/traces",
            params={"service": "chainlat-demo", "limit": 10_000, "lookback": "1h"},
            timeout=10,
        )
    except httpx.HTTPError:
        return {}
    if response.status_code != 200:
        return {}
    found = {}
    for trace in response.json()["data"]:
        names = {span["operationName"] for span in trace["spans"]}
        for span in trace["spans"]:
            if span["operationName"] == "invoke_workflow support-agent":
                tags = {tag["key"]: tag["value"] for tag in span["tags"]}
                found[trace["traceID"]] = DemoRun(
                    tags.get("chainlat.budget.ok"),
                    tags.get("chainlat.sampling.probability"),
                    "record_outcome" in names,
                )
    return found


def _poll(probe: Callable[[], T | None]) -> T:
    """``probe()`` until it returns something truthy, for at most POLL_S."""
    deadline = time.monotonic() + POLL_S
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"not within {POLL_S:g}s: {probe.__name__}", pytrace=False)
        time.sleep(1.0)
