"""The runtime end to end on whatever OpenTelemetry SDK is installed: run by
``test_sdk_floor.py`` in an environment pinned to one SDK version, not collected itself.

``python sdk_floor_smoke.py OUT_DIR`` runs two configurations, each writing its own trace
file with chainlat's file exporter and reading it back with ``chainlat.traces.read_runs``:

- ``batch``: ``configure()`` as an application calls it (the batching processor, the
  global provider): a workflow with a data stage, a tool (sync and async decorators), an
  inference step, and two model calls (one streamed) through the real ``openai`` SDK,
  traced by ``instrument_httpx()``, against ``chainlat.sim.SimServer`` on 127.0.0.1; then
  a voice turn whose start moves (``user_stopped_speaking``).
- ``simple``: ``configure(batch=False, metric_readers=[...])`` on a provider of its own
  (the simple processor, the SDK processors' own metrics, chainlat's GenAI metrics), the
  same workflow again.

It prints one JSON document: the SDK's version, what chainlat's version-dependent checks
found on it, each run live and as read back, the GenAI metrics seen, and every warning
logged by chainlat or OpenTelemetry. chainlat's own errors are raised, not logged, as in
chainlat's test suite.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from dataclasses import asdict
from importlib.metadata import version
from pathlib import Path
from typing import Any

import openai
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

import chainlat
import chainlat._core.errors
from chainlat._core.rollup import Rollup
from chainlat._runtime.handover import sampler_is_blind
from chainlat._runtime.otel_compat import BLIND_SAMPLERS
from chainlat.sim import ModelProfile, SimServer
from chainlat.traces import read_runs

chainlat._core.errors.RAISE_INTERNAL_ERRORS = True

MODEL = "sim-fast"
PROFILE = ModelProfile(MODEL, ttft_base_ms=2, decode_ms_per_token=1, output_tokens=4)
"""A model call of about 5 ms: the smoke is about what is recorded, not how long it took."""


class Warnings(logging.Handler):
    """Every record at WARNING or above from chainlat and OpenTelemetry."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage()}")


def chat(provider: TracerProvider | None, client: openai.OpenAI) -> chainlat.WorkflowHandle:
    """One workflow: data stage, tool (sync and async), inference step, two model calls."""

    @chainlat.tool("lookup", tracer_provider=provider)
    def lookup() -> str:
        return "found"

    @chainlat.tool("fetch", tracer_provider=provider)
    async def fetch() -> str:
        await asyncio.sleep(0.001)
        return "fetched"

    async def fetched() -> str:
        return await fetch()

    messages: Any = [{"role": "user", "content": "What is the floor?"}]
    with chainlat.workflow("floor-chat", tracer_provider=provider) as run:
        with chainlat.data_stage("retrieve", tracer_provider=provider):
            pass
        lookup()
        asyncio.run(fetched())
        with chainlat.inference(MODEL, provider="openai", tracer_provider=provider) as call:
            call.first_token()
        client.chat.completions.create(model=MODEL, messages=messages)
        stream = client.chat.completions.create(model=MODEL, messages=messages, stream=True)
        for _ in stream:
            pass
    return run


def voice(provider: TracerProvider | None) -> chainlat.WorkflowHandle:
    """A voice turn whose start moves to where the caller stopped speaking."""
    with chainlat.workflow("floor-voice", tracer_provider=provider) as turn:
        with chainlat.inference("stt", operation="speech_to_text", tracer_provider=provider):
            turn.user_stopped_speaking()
        with chainlat.inference(MODEL, tracer_provider=provider):
            pass
    return turn


def rollup_of(rollup: Rollup | None) -> dict[str, Any] | None:
    return None if rollup is None else asdict(rollup)


def runs_in(path: Path) -> list[dict[str, Any]]:
    return [
        {
            "workflow": run.workflow,
            "rollup": asdict(run.rollup),
            "steps": [step.kind for step in run.steps],
            "duration_ns": run.end_ns - run.start_ns,
        }
        for run in read_runs([str(path)])
    ]


def live(handle: chainlat.WorkflowHandle) -> dict[str, Any]:
    return {"workflow": handle.name, "rollup": rollup_of(handle.rollup)}


def main(out: Path) -> dict[str, Any]:
    seen = Warnings()
    for name in ("chainlat", "opentelemetry"):
        logging.getLogger(name).addHandler(seen)
    report: dict[str, Any] = {
        "sdk": version("opentelemetry-sdk"),
        "blind_samplers": sorted(kind.__name__ for kind in BLIND_SAMPLERS),
    }
    batch_file, simple_file = out / "batch.jsonl", out / "simple.jsonl"
    with SimServer([PROFILE], seed=1) as sim:
        client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0)
        chainlat.instrument_httpx(client)

        provider = chainlat.configure(
            "sdk-floor", exporter=chainlat.JsonLinesSpanExporter(batch_file)
        )
        report["default_sampler_is_blind"] = sampler_is_blind(provider.sampler)
        handles = [chat(None, client), voice(None)]
        report["batch_shutdown"] = chainlat.shutdown()
        report["batch_live"] = [live(handle) for handle in handles]

        reader = InMemoryMetricReader()
        own = TracerProvider()
        chainlat.configure(
            "sdk-floor",
            exporter=chainlat.JsonLinesSpanExporter(simple_file),
            tracer_provider=own,
            batch=False,
            metric_readers=[reader],
        )
        handles = [chat(own, client)]
        data = reader.get_metrics_data()
        report["simple_shutdown"] = chainlat.shutdown()
        own.shutdown()
        report["simple_live"] = [live(handle) for handle in handles]
    report["batch_read"] = runs_in(batch_file)
    report["simple_read"] = runs_in(simple_file)
    report["metrics"] = sorted(
        {
            metric.name
            for resource in (data.resource_metrics if data is not None else ())
            for scope in resource.scope_metrics
            for metric in scope.metrics
        }
    )
    report["warnings"] = seen.lines
    return report


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
