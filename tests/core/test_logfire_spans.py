"""Logfire's streamed calls: the call's span ends with the response's headers, and a record
beside it, written when the stream was read to its end, is the call's end, not a call.

Logfire's ``instrument_openai()`` (logfire 5.4.0, ``llm_provider.py``) ends a streamed
call's ``Chat Completion with {request_data[model]!r}`` span when the openai SDK hands the
stream back, and writes ``streaming response from {request_data[model]!r} took
{duration:.2f}s``, a zero-length log record under the call's parent, when the stream has
been read. Before the rule (docs/attributes.md, rule 20) the interop matrix's ``logfire``
stack read the streamed answer as a 2 ms call and the record as a sixth call of 0 ms.
"""

from __future__ import annotations

from chainlat._core import conventions
from chainlat._core.records import SpanRecord, call_record
from chainlat._core.rollup import compute_rollup
from chainlat._core.twins import join_stream_ends

_MS = 1_000_000
CALL_NAME = "Chat Completion with {request_data[model]!r}"
END_NAME = "streaming response from {request_data[model]!r} took {duration:.2f}s"


def _call(model: str, *, answered: bool) -> dict[str, object]:
    """A ``Chat Completion`` span's attributes; ``answered``: a call not streamed, whose
    span carries its answer and usage."""
    found: dict[str, object] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "openai",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
        "logfire.span_type": "span",
        "request_data": f'{{"model":"{model}"}}',
        "async": False,
    }
    if answered:
        found |= {
            "gen_ai.response.model": model,
            "gen_ai.response.id": "chatcmpl-1",
            "gen_ai.usage.input_tokens": 111,
            "gen_ai.usage.output_tokens": 5,
            "gen_ai.response.finish_reasons": '["stop"]',
        }
    else:  # a stream's span: what the SDK said before the first chunk
        found["gen_ai.response.model"] = model
    return found


def _end(model: str, seconds: float) -> dict[str, object]:
    """The record at a stream's end: the call's request, and the answer as streamed."""
    return {
        "logfire.span_type": "log",
        "logfire.level_num": 9,
        "duration": seconds,
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": model,
        "gen_ai.response.model": model,
        "gen_ai.response.id": "chatcmpl-2",
        "gen_ai.response.finish_reasons": '["stop"]',
        "gen_ai.usage.input_tokens": 53,
        "gen_ai.usage.output_tokens": 20,
    }


ROOT = call_record(
    1, None, "agent", 0, 480 * _MS, "workflow", {"gen_ai.operation.name": "invoke_workflow"}
)


def _record(
    span_id: int,
    name: str,
    start_ms: float,
    end_ms: float,
    attributes: dict[str, object],
    parent: int = 1,
) -> SpanRecord:
    return call_record(
        span_id,
        parent,
        name,
        int(start_ms * _MS),
        int(end_ms * _MS),
        conventions.classify(attributes),
        attributes,
    )


def test_the_row_names_logfires_record_of_a_streams_end() -> None:
    assert END_NAME in conventions.STREAM_ENDS
    assert conventions.classify(_end("sim-answer", 0.118)) == "inference"


def test_a_streamed_call_is_timed_to_the_record_of_its_end() -> None:
    call = _record(2, CALL_NAME, 357.0, 359.0, _call("sim-answer", answered=False))
    end = _record(3, END_NAME, 477.0, 477.0, _end("sim-answer", 0.118))
    joined = join_stream_ends(1, [ROOT, call, end])
    assert [(r.span_id, r.kind, r.start_ns, r.end_ns) for r in joined] == [
        (1, "workflow", 0, 480 * _MS),
        (2, "inference", 357 * _MS, 477 * _MS),
        (3, None, 477 * _MS, 477 * _MS),
    ]
    assert joined[1].extended
    assert (joined[1].input_tokens, joined[1].output_tokens, joined[1].has_output) == (53, 20, True)


def test_the_rollup_counts_one_call_of_the_streams_whole_time() -> None:
    spans = [
        ROOT,
        _record(2, CALL_NAME, 33.0, 132.0, _call("sim-plan", answered=True)),
        _record(3, CALL_NAME, 357.0, 359.0, _call("sim-answer", answered=False)),
        _record(4, END_NAME, 477.0, 477.0, _end("sim-answer", 0.118)),
    ]
    rollup = compute_rollup(ROOT, spans)
    assert rollup.inference_count == 2
    assert rollup.inference_ms == 99.0 + 120.0
    assert (rollup.input_tokens, rollup.output_tokens) == (111 + 53, 5 + 20)
    assert rollup.overhead_ms == 480.0 - 219.0


def test_each_record_joins_the_call_that_ended_last_before_it() -> None:
    """Two streams read one after the other, then two read side by side: each record takes
    the latest-ending call not yet joined."""
    spans = [
        ROOT,
        _record(2, CALL_NAME, 10.0, 12.0, _call("m", answered=False)),
        _record(3, END_NAME, 50.0, 50.0, _end("m", 0.037)),
        _record(4, CALL_NAME, 60.0, 61.0, _call("m", answered=False)),
        _record(5, END_NAME, 90.0, 90.0, _end("m", 0.028)),
        _record(6, CALL_NAME, 100.0, 102.0, _call("m", answered=False)),
        _record(7, CALL_NAME, 101.0, 104.0, _call("m", answered=False)),
        _record(8, END_NAME, 140.0, 140.0, _end("m", 0.036)),
        _record(9, END_NAME, 150.0, 150.0, _end("m", 0.045)),
    ]
    joined = {r.span_id: r for r in join_stream_ends(1, spans)}
    assert [(i, joined[i].start_ns // _MS, joined[i].end_ns // _MS) for i in (2, 4, 6, 7)] == [
        (2, 10, 50),
        (4, 60, 90),
        (6, 100, 150),
        (7, 101, 140),
    ]
    assert [joined[i].kind for i in (3, 5, 8, 9)] == [None, None, None, None]


def test_a_record_joins_no_call_that_answered_or_is_another_models_or_parents() -> None:
    spans = [
        ROOT,
        _record(2, CALL_NAME, 10.0, 40.0, _call("m", answered=True)),  # not streamed
        _record(3, CALL_NAME, 45.0, 46.0, _call("other", answered=False)),  # another model
        _record(4, CALL_NAME, 47.0, 48.0, _call("m", answered=False), parent=9),  # elsewhere
        _record(5, CALL_NAME, 90.0, 92.0, _call("m", answered=False)),  # after the record
        _record(6, END_NAME, 80.0, 80.0, _end("m", 0.03)),
    ]
    joined = join_stream_ends(1, spans)
    assert joined is spans  # nothing to join: the same list, the record a call of its own
    assert (spans[-1].kind, spans[-1].end_ns - spans[-1].start_ns) == ("inference", 0)


def test_a_run_with_no_such_record_is_returned_as_it_is() -> None:
    spans = [ROOT, _record(2, CALL_NAME, 357.0, 359.0, _call("sim-answer", answered=False))]
    assert join_stream_ends(1, spans) is spans


def test_a_function_tools_span_of_the_agents_sdk_is_a_tool_by_its_name() -> None:
    """``logfire.instrument_openai_agents()`` writes a function tool's call as ``Function:
    {name}`` with no key that says what it is (``name``, ``input``, ``output``,
    ``gen_ai.system``): the tool's 26 ms were overhead."""
    function = {
        "logfire.msg_template": "Function: {name}",
        "logfire.span_type": "span",
        "name": "lookup_order",
        "input": '{"order_id":"two"}',
        "gen_ai.system": "openai",
    }
    assert conventions.classify(function) is None
    assert conventions.kind_by_name("Function: {name}") == ("tool", "logfire")
    # Its agent runs, turns and tasks say nothing either, and stay transparent.
    for name in ("Agent run: {name!r}", "Turn {turn} for agent planner", "Task: Agent workflow"):
        assert conventions.kind_by_name(name) is None


def test_thousands_of_streams_under_one_parent_each_join_their_own_call() -> None:
    """2,000 streams read one after the other under one parent (the join takes each call
    from a stack, not by comparing every pair)."""
    spans = [ROOT]
    for i in range(2_000):
        start = 10.0 + i
        spans.append(
            _record(10 + 2 * i, CALL_NAME, start, start + 0.01, _call("m", answered=False))
        )
        spans.append(_record(11 + 2 * i, END_NAME, start + 0.5, start + 0.5, _end("m", 0.25)))
    joined = join_stream_ends(1, spans)
    calls = [r for r in joined if r.kind == "inference"]
    assert len(calls) == 2_000
    assert all(r.end_ns - r.start_ns == _MS // 2 for r in calls)
