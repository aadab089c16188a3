"""chainlat.httpx over real HTTP on 127.0.0.1, against chainlat.sim: the client's spans and
the server's form one trace, and the rollup counts one model call."""

from __future__ import annotations

import chainlat
from chainlat._core import attributes as attr
from chainlat.sim import SimServer
from chainlat.testing import Capture
from support.httpx_checks import model_spans, server_spans
from support.httpx_sim import MESSAGES, TOKENS, openai_client


def test_client_and_server_spans_form_one_trace(sim: SimServer, live: Capture) -> None:
    with (
        openai_client(sim, live) as client,
        chainlat.workflow("answer", tracer_provider=live.provider) as run,
    ):
        client.chat.completions.create(model="sim-test", messages=MESSAGES, stream=False)
    [server] = server_spans(live, 1)
    spans = live.spans()
    [workflow] = live.workflows()
    [call] = model_spans(spans)
    phases = {s.name: s for s in spans if s.parent and s.parent.span_id == server.context.span_id}
    assert set(phases) == {"queue", "prefill", "decode"}
    trace_ids = {s.context.trace_id for s in (workflow, call, server, *phases.values())}
    assert len(trace_ids) == 1
    assert call.parent is not None and call.parent.span_id == workflow.context.span_id
    assert server.parent is not None and server.parent.span_id == call.context.span_id
    assert (call.attributes or {})[attr.STEP_INDEX] == 0
    # The server's own inference span nests in the client's: one model call in the chain.
    assert run.rollup is not None
    assert run.rollup.inference_count == 1
    assert run.rollup.output_tokens == TOKENS
