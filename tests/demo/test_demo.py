"""`chainlat demo`, run as a user runs it: a subprocess on the embedded default."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from chainlat.demo import lookup_order, open_store, search


def test_demo_exits_0_and_writes_a_traces_file(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["CHAINLAT_TRACES_FILE"] = str(tmp_path / "traces.jsonl")
    done = subprocess.run(
        [sys.executable, "-m", "chainlat.cli", "demo", "--requests", "4", "--concurrency", "2"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "support-agent" in done.stdout
    assert "small-planner" in done.stdout
    names = set()
    variants = set()
    for line in (tmp_path / "traces.jsonl").read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    names.add(span["name"])
                    for kv in span.get("attributes", []):
                        if kv["key"] == "chainlat.variant":
                            variants.add(kv["value"]["stringValue"])
    assert {
        "invoke_workflow support-agent",
        "data retrieve-docs",
        "chat sim-large",
        "execute_tool order-status",
        "chat sim-small",
    } <= names
    assert variants == {"large-planner", "small-planner"}
    _first_output_is_the_answers_first_token(tmp_path / "traces.jsonl")


def _first_output_is_the_answers_first_token(traces: Path) -> None:
    """Every run has its first output and split, and the first output is, within 2 ms, the
    answer's first token computed by hand from the raw spans (its start plus its ttft)."""
    spans: dict[str, list[dict[str, object]]] = {}
    for line in traces.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    span["attrs"] = {
                        kv["key"]: next(iter(kv["value"].values())) for kv in span["attributes"]
                    }
                    spans.setdefault(span["traceId"], []).append(span)
    runs = [
        m for m in spans.values() if any(s["name"] == "invoke_workflow support-agent" for s in m)
    ]
    assert len(runs) == 8  # 4 requests for each of the two variants; the warm-up is no run
    for members in runs:
        (root,) = [s for s in members if s["name"] == "invoke_workflow support-agent"]
        (answer,) = [s for s in members if _attrs(s).get("chainlat.step.name") == "answer"]
        root_attrs, answer_attrs = _attrs(root), _attrs(answer)
        by_hand = (
            int(str(answer["startTimeUnixNano"])) - int(str(root["startTimeUnixNano"]))
        ) / 1e6 + float(answer_attrs["chainlat.latency.ttft_ms"])
        reported = float(root_attrs["chainlat.chain.first_output_ms"])
        assert abs(reported - by_hand) <= 2.0, (reported, by_hand)
        parts = [
            float(root_attrs[f"chainlat.chain.first_output.{kind}_ms"])
            for kind in ("inference", "data", "tool", "overhead")
        ]
        assert abs(sum(parts) - reported) < 1e-6
        assert min(parts) >= 0


def test_demo_with_budgets_marks_each_run_over_a_per_run_limit(tmp_path: Path) -> None:
    """``--budgets FILE`` judges every run as it ends: ``chainlat.budget.ok`` on each
    workflow span, false exactly on the runs over the file's per-run total (1 s)."""
    budgets = Path(__file__).resolve().parents[2] / "collector" / "demo.chainlat.toml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["CHAINLAT_TRACES_FILE"] = str(tmp_path / "traces.jsonl")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "chainlat.cli",
            "demo",
            "--requests",
            "4",
            "--budgets",
            str(budgets),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    roots = [
        {kv["key"]: next(iter(kv["value"].values())) for kv in span["attributes"]}
        for line in (tmp_path / "traces.jsonl").read_text().splitlines()
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
        if span["name"] == "invoke_workflow support-agent"
    ]
    assert len(roots) == 8
    for attrs in roots:
        over = float(str(attrs["chainlat.chain.total_ms"])) > 1000
        assert attrs["chainlat.budget.ok"] is (not over), attrs


def test_demo_with_a_bad_budget_file_exits_2_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[workflows.support-agent]\ntotal = "fast"\n')
    done = subprocess.run(
        [sys.executable, "-m", "chainlat.cli", "demo", "--requests", "1", "--budgets", str(bad)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "bad.toml" in done.stderr


def test_demo_bad_arguments_exit_2_without_traceback(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "chainlat.cli", "demo", "--requests", "0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "--requests" in done.stderr


def test_the_store_really_searches_and_looks_up() -> None:
    store = open_store()
    assert search(store.db, "How do I reset my password?")[0].startswith("Reset a password")
    assert lookup_order(store.db, "Where is A-1002?") == "order A-1002 is delivered, eta 0 days"
    assert lookup_order(store.db, "Where is my parcel?") == "no order number given"


def _attrs(span: dict[str, object]) -> dict[str, Any]:
    found = span["attrs"]
    assert isinstance(found, dict)
    return found
