"""A streamed model call whose span ends before its stream, as OpenInference's LlamaIndex
instrumentation (4.6.1) writes ``OpenAI.astream_chat``: ended when the generator is handed
back, with its one event, the first token, after that end (docs/attributes.md, rule 13).

Every instant is on the capture's fake clock: the numbers in the tests are exact.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Final

from opentelemetry import trace

import chainlat
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat.testing import Capture

MS = 1_000_000
OPENINFERENCE = "openinference.instrumentation.llama_index"
STREAM = "OpenAI.astream_chat"


WIRE_CHAT: Final[dict[str, str | int]] = {
    "chainlat.step.kind": "inference",
    "gen_ai.operation.name": "chat",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.usage.input_tokens": 22,
    "gen_ai.usage.output_tokens": 20,
    "http.request.method": "POST",
}
"""chainlat.httpx's span of the streamed request: 22 tokens in, 20 out."""


def llm_attributes(model: str = "gpt-4o-mini") -> dict[str, str | int]:
    """What OpenInference writes on a LlamaIndex model call."""
    return {
        "openinference.span.kind": "LLM",
        "llm.model_name": model,
        "llm.token_count.prompt": 22,
        "llm.token_count.completion": 20,
    }


def agent_with_stream(
    cap: Capture,
    *,
    wire: bool = False,
    data_until_ms: float | None = None,
    wrapped: bool = True,
) -> chainlat.WorkflowHandle | None:
    """One run of 165 ms: a 30 ms retrieval, 5 ms of glue, then the stream, whose span lasts
    1 ms while its first token comes at +60 ms (95 ms into the run); the stream is read until
    +120 ms and the run ends 10 ms later.

    ``wire``: chainlat's HTTP span of the request, +2 to +120 ms, beside the framework's.
    ``data_until_ms``: a data stage from 40 ms into the run to that instant, beside the
    stream. ``wrapped``: inside ``chainlat.workflow("agent")`` (returned); else under a
    plain root span ``agent``, read with ``--roots``.
    """
    p, clock = cap.provider, cap.clock
    t0 = clock.now_ns
    handle: chainlat.WorkflowHandle | None = None
    root = None
    with ExitStack() as stack:
        if wrapped:
            handle = stack.enter_context(chainlat.workflow("agent", tracer_provider=p))
        else:
            root = p.get_tracer("app").start_span("agent", start_time=t0)
            stack.enter_context(trace.use_span(root, end_on_exit=False))
        with chainlat.data_stage("retrieve", tracer_provider=p):
            clock.advance(30)
        start = clock.advance(5)
        if data_until_ms is not None:
            side = p.get_tracer("chainlat").start_span(
                "fetch", attributes={"chainlat.step.kind": "data"}, start_time=t0 + 40 * MS
            )
            side.end(end_time=t0 + round(data_until_ms * MS))
        span = p.get_tracer(OPENINFERENCE).start_span(
            STREAM, attributes=llm_attributes(), start_time=start
        )
        span.add_event("First Token Stream Event", timestamp=start + 60 * MS)
        span.end(end_time=start + 1 * MS)
        if wire:
            call = p.get_tracer("chainlat").start_span(
                "chat gpt-4o-mini",
                attributes=WIRE_CHAT,
                start_time=start + 2 * MS,
            )
            call.end(end_time=start + 120 * MS)
        clock.advance(130)
    if root is not None:
        root.end(end_time=clock.now_ns)
    return handle


def write_traces(cap: Capture, path: Path) -> Path:
    """The capture's spans as an OTLP JSON lines file."""
    exporter = JsonLinesSpanExporter(str(path))
    exporter.export(cap.spans())
    exporter.shutdown()
    return path
