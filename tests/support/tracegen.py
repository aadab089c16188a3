"""Trace files for the reader, CLI, report and diff tests, written by the real SDK pipeline.

Each run of the ``support-chat`` workflow is timed on a fake clock, so every
duration in the file is known exactly; a seeded random generator adds
run-to-run noise where a test wants it.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

import chainlat
from chainlat._runtime.otlp_json import JsonLinesSpanExporter, encode_request
from chainlat.testing import Capture, capture

DATA_DIR = Path(__file__).parent.parent / "data"


@dataclass(frozen=True)
class ChatRun:
    """Exact durations (ms) of one support-chat run: overhead, retrieval, model call, tool."""

    retrieve_ms: float = 100.0
    ttft_ms: float = 80.0
    chat_ms: float = 300.0
    tool_ms: float | None = None
    glue_ms: float = 10.0
    cached: bool = False
    fail: bool = False


@dataclass
class Profile:
    """Median durations per step and the relative run-to-run noise."""

    retrieve_ms: float = 120.0
    ttft_ms: float = 90.0
    chat_ms: float = 400.0
    tool_ms: float = 60.0
    glue_ms: float = 15.0
    noise: float = 0.08
    slowdown: dict[str, float] = field(default_factory=dict)
    """Factor per step (``retrieve``, ``chat``, ``tool``, ``glue``)."""

    def sample(self, rng: random.Random) -> ChatRun:
        def draw(name: str, ms: float) -> float:
            jitter = rng.lognormvariate(0.0, self.noise)
            return round(ms * jitter * self.slowdown.get(name, 1.0), 3)

        chat = draw("chat", self.chat_ms)
        return ChatRun(
            retrieve_ms=draw("retrieve", self.retrieve_ms),
            ttft_ms=min(draw("ttft", self.ttft_ms), chat),
            chat_ms=chat,
            tool_ms=draw("tool", self.tool_ms),
            glue_ms=draw("glue", self.glue_ms),
        )


def play(cap: Capture, run: ChatRun, *, workflow: str = "support-chat") -> None:
    """One run of the workflow on the capture's fake clock."""
    provider = cap.provider
    try:
        with chainlat.workflow(workflow, tracer_provider=provider):
            cap.clock.advance(ms=run.glue_ms)
            with chainlat.data_stage("retrieve-docs", tracer_provider=provider):
                cap.clock.advance(ms=run.retrieve_ms)
            with chainlat.inference("gpt-4o", provider="openai", tracer_provider=provider) as call:
                cap.clock.advance(ms=run.ttft_ms)
                call.first_token()
                cap.clock.advance(ms=run.chat_ms - run.ttft_ms)
                if run.cached:
                    call.cache_hit()
            if run.tool_ms is not None:
                with chainlat.tool("lookup-order", tracer_provider=provider):
                    cap.clock.advance(ms=run.tool_ms)
            if run.fail:
                raise RuntimeError("the tool failed")
    except RuntimeError:
        pass
    cap.clock.advance(ms=1000)  # a pause between runs


def write_runs(
    path: Path,
    runs: list[ChatRun],
    *,
    batch: int | None = 64,
    compress: bool = False,
    workflow: str = "support-chat",
) -> Path:
    """Write the runs through the SDK pipeline and chainlat's OTLP JSON lines exporter.

    ``batch=None`` exports every span on its own line (children before their
    workflow); otherwise batches of up to ``batch`` spans per line.
    """
    target = path.with_suffix(path.suffix + ".plain") if compress else path
    exporter = JsonLinesSpanExporter(target)
    with capture(fake_clock=True) as cap:
        processor: SpanProcessor = (
            SimpleSpanProcessor(exporter)
            if batch is None
            else BatchSpanProcessor(
                exporter, max_export_batch_size=batch, schedule_delay_millis=60_000
            )
        )
        cap.provider.add_span_processor(processor)
        for run in runs:
            play(cap, run, workflow=workflow)
        cap.provider.force_flush()
    if compress:
        with open(target, "rb") as plain, gzip.open(path, "wb") as packed:
            shutil.copyfileobj(plain, packed)
        target.unlink()
    return path


def write_profile(
    path: Path, profile: Profile, *, runs: int, seed: int, batch: int | None = 64
) -> Path:
    """``runs`` runs drawn from a profile with a seeded generator."""
    rng = random.Random(seed)
    return write_runs(path, [profile.sample(rng) for _ in range(runs)], batch=batch)


def graded_file(cap: Capture, path: Path, *, gap_lines: int) -> Path:
    """Two runs, one span per line; ``gap_lines`` lines later, their outcome spans.

    As when answers are graded after the runs, in the same process: the outcome
    spans reach the file long after their traces' roots.
    """
    p = cap.provider
    for variant in ("large", "small"):
        with chainlat.workflow("agent", variant=variant, tracer_provider=p) as run:
            cap.clock.advance(1)
            with chainlat.inference("big", tracer_provider=p) as call:
                cap.clock.advance(5)
                call.record_usage(100, 10)
        context = run.span.get_span_context()
        chainlat.record_outcome(
            context.trace_id, success=variant == "large", score=0.5, tracer_provider=p
        )
    runs = [s for s in cap.spans() if s.name != "record_outcome"]
    outcomes = [s for s in cap.spans() if s.name == "record_outcome"]
    lines = [json.dumps(encode_request([span])) for span in runs]
    lines += [""] * gap_lines + [json.dumps(encode_request(outcomes))]
    path.write_text("\n".join(lines) + "\n")
    return path


Spans = list[dict[str, Any]]


def spans_rewritten(source: Path, dest: Path, edit: Callable[[Spans], Spans]) -> Path:
    """``dest``: the OTLP/JSON lines of ``source`` with each scope's spans replaced by
    ``edit(spans)`` (which may change them in place and return them)."""
    lines = []
    for line in source.read_text().splitlines():
        batch = json.loads(line)
        for resource in batch["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                scope["spans"] = edit(scope["spans"])
        lines.append(json.dumps(batch))
    dest.write_text("\n".join(lines) + "\n")
    return dest
