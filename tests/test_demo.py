"""`chainlat demo`, run as a user runs it: a subprocess on the embedded default."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
