"""Token totals that leave calls out say how many (``Rollup.uncounted_calls``,
``chainlat.chain.uncounted_calls``; docs/attributes.md, rule 21): a call the trace gives
no usage for, or a usage of nothing, is counted; a cache hit and a speech call are not."""

from __future__ import annotations

import chainlat
from chainlat._core import attributes as attr
from chainlat._core.chain import Rollup
from chainlat.testing import Capture
from chainlat.traces import read_runs
from chainlat.traces.sdk import runs_from_spans
from support.tracegen import DATA_DIR


def _call(cap: Capture, model: str, tokens: tuple[int, int] | None, **kinds: bool) -> None:
    p = cap.provider
    operation = "text_to_speech" if kinds.get("speech") else "chat"
    with chainlat.inference(model, tracer_provider=p, operation=operation) as call:
        cap.clock.advance(10)
        if kinds.get("cached"):
            call.cache_hit()
        if tokens is not None:
            call.record_usage(input_tokens=tokens[0], output_tokens=tokens[1])


def test_a_call_without_usage_is_counted_and_left_out_of_the_totals(cap: Capture) -> None:
    with chainlat.workflow("chat", tracer_provider=cap.provider) as run:
        _call(cap, "gpt-x", (100, 20))
        _call(cap, "gpt-x", None)  # no usage
        _call(cap, "gpt-x", (0, 0))  # a usage of nothing
        _call(cap, "gpt-x", None, cached=True)  # answered from a cache: nothing to count
        _call(cap, "tts-1", None, speech=True)  # counted in characters, not tokens
    assert run.rollup is not None
    assert (run.rollup.input_tokens, run.rollup.output_tokens) == (100, 20)
    assert run.rollup.uncounted_calls == 2
    [workflow] = [s for s in cap.spans() if s.name == "invoke_workflow chat"]
    assert workflow.attributes is not None
    assert workflow.attributes[attr.CHAIN_UNCOUNTED_CALLS] == 2
    [read] = runs_from_spans(cap.spans())
    assert read.rollup.uncounted_calls == 2


def test_no_uncounted_call_writes_no_attribute(cap: Capture) -> None:
    with chainlat.workflow("chat", tracer_provider=cap.provider) as run:
        _call(cap, "gpt-x", (100, 20))
        _call(cap, "gpt-x", (0, 5))  # the output counted: the call is
    assert run.rollup is not None and run.rollup.uncounted_calls == 0
    [workflow] = [s for s in cap.spans() if s.name == "invoke_workflow chat"]
    assert workflow.attributes is not None
    assert attr.CHAIN_UNCOUNTED_CALLS not in workflow.attributes


def test_a_nested_workflows_uncounted_calls_are_the_outer_ones_too(cap: Capture) -> None:
    p = cap.provider
    with chainlat.workflow("outer", tracer_provider=p) as outer:
        _call(cap, "gpt-x", None)
        with chainlat.workflow("inner", tracer_provider=p) as inner:
            _call(cap, "gpt-x", None)
            _call(cap, "gpt-x", (7, 3))
    assert inner.rollup is not None and inner.rollup.uncounted_calls == 1
    assert outer.rollup is not None and outer.rollup.uncounted_calls == 2
    assert (outer.rollup.input_tokens, outer.rollup.output_tokens) == (7, 3)
    by_name = {r.workflow: r.rollup.uncounted_calls for r in runs_from_spans(cap.spans())}
    assert by_name == {"outer": 2, "inner": 1}


def test_the_count_reads_back_and_a_negative_one_is_none() -> None:
    base = Rollup(10.0, 5.0, 0.0, 0.0, 5.0).to_attributes()
    assert Rollup.from_attributes({**base, attr.CHAIN_UNCOUNTED_CALLS: 3}) == Rollup(
        10.0, 5.0, 0.0, 0.0, 5.0, uncounted_calls=3
    )
    assert Rollup.from_attributes({**base, attr.CHAIN_UNCOUNTED_CALLS: "x"}) is None


def test_the_agents_sdks_streamed_answer_is_uncounted() -> None:
    """Logfire writes the Agents SDK's usage of nothing for the streamed answer
    (tests/data/foreign/logfire): 340 and 65 tokens are the other four calls'."""
    [run] = read_runs([DATA_DIR / "foreign" / "logfire" / "openai-agents.jsonl"], roots=True)
    assert (run.rollup.input_tokens, run.rollup.output_tokens) == (340, 65)
    assert (run.rollup.inference_count, run.rollup.uncounted_calls) == (5, 1)
