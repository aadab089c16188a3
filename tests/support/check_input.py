"""Feeding ``chainlat check`` in the fuzz tests: a valid budget file, a valid OTLP/JSON
request with edits of its spans, and the check that bad input gives one clear line."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

import chainlat
from chainlat._runtime.otlp_json import encode_request
from chainlat.cli import main
from chainlat.testing import capture

VALID_TOML = """\
min_runs = 2
exclude_cache_hits = false

[workflows.answer]
total = "2s"
inference = "1500ms"
p95 = { total = "1800ms", data = "250ms" }
p50 = "900ms"

[workflows.answer.steps."chat gpt-4o"]
max = "1s"
p95 = "800ms"
ttft = 300
ttft_p95 = "0.25s"

[workflows.answer.steps."data retrieve-docs"]
max = "250000us"
"""


def workflow_request(runs: int = 3) -> dict[str, Any]:
    """Runs of the ``answer`` workflow through the real pipeline, as one OTLP/JSON request."""
    with capture(fake_clock=True) as cap:
        p = cap.provider
        for _ in range(runs):
            with chainlat.workflow("answer", tracer_provider=p):
                with chainlat.data_stage("retrieve-docs", tracer_provider=p):
                    cap.clock.advance(ms=40)
                with chainlat.inference("gpt-4o", tracer_provider=p) as call:
                    cap.clock.advance(ms=120)
                    call.first_token()
                    cap.clock.advance(ms=200)
                cap.clock.advance(ms=5)
        return encode_request(cap.spans())


def spans_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The spans of the first scope of the first resource of an OTLP/JSON request."""
    spans: list[dict[str, Any]] = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    return spans


def edited(edit: Callable[[list[dict[str, Any]]], None]) -> str:
    """One traces-file line: `workflow_request` with ``edit`` applied to its spans."""
    doc = copy.deepcopy(workflow_request())
    edit(spans_of(doc))
    return json.dumps(doc) + "\n"


def set_field(index: int, key: str, value: object) -> Callable[[list[dict[str, Any]]], None]:
    """An edit that sets ``key`` of the span at ``index`` to ``value``."""

    def edit(spans: list[dict[str, Any]]) -> None:
        spans[index][key] = value

    return edit


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``chainlat check --no-progress ARGS``: exit code, stdout, stderr."""
    code = main(["check", "--no-progress", *args])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_clear_line(code: int, err: str, *, mentions: str = "") -> str:
    """Exit code 2 and one short ``chainlat: `` line mentioning ``mentions``: that line."""
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err[:2000]
    (line,) = lines
    assert line.startswith("chainlat: "), line
    assert len(line) < 1000, f"{len(line)} characters"
    assert "Traceback" not in err
    assert mentions in line
    return line
