"""A Pipecat speech-to-speech turn with a function call
(tests/data/foreign/pipecat/realtime-tool-observer.jsonl, recorded from the interop case
``pipecat-realtime`` ``local-vad+tool``, with the agent's truth beside): the answer that
called the function is an inference step of its own with no first token, the tool a step,
the spoken answer a step from the result; the first output's split is the end-of-turn wait,
the model, the tool and the rest, summing to it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chainlat import WorkflowRun
from chainlat.traces import read_runs
from support.tracegen import DATA_DIR, spans_rewritten

FOREIGN = DATA_DIR / "foreign" / "pipecat"
TRACES = FOREIGN / "realtime-tool-observer.jsonl"
TRUTH = json.loads((FOREIGN / "realtime-tool-observer.truth.json").read_text())
ANSWER = ("realtime sim-realtime", "inference")
TOOL = ("execute_tool lookup_order", "tool")


def _runs() -> list[WorkflowRun]:
    return sorted(read_runs([TRACES]), key=lambda r: r.start_ns)


def test_each_answer_that_called_a_function_is_a_step_with_no_first_token() -> None:
    """Steps as (name, kind, start from the turn's, length, first token), in ns and ms:
    the model called the function twice in the first turn. Pipecat's llm_response of each
    answer is the same call seen twice: no step of its own, and its metrics.ttfb (the
    service's last, 302-312 ms) gives no first token to a step of 0.3 s."""
    found = [
        [
            (s.name, s.kind, s.start_ns - run.start_ns, s.end_ns - s.start_ns, s.ttft_ms)
            for s in run.steps
        ]
        for run in _runs()
    ]
    assert found == [
        [
            (*ANSWER, 415_864_246, 306_805_754, None),
            (*TOOL, 728_442_993, 123_389_772, None),
            (*ANSWER, 851_832_765, 321_098_039, None),
            (*TOOL, 1_174_202_092, 121_966_458, None),
            (*ANSWER, 1_296_168_550, 1_060_398_410, 309.632797),
        ],
        [
            (*ANSWER, 463_823_118, 332_670_167, None),
            (*TOOL, 797_665_140, 121_308_868, None),
            (*ANSWER, 918_974_008, 1_061_295_593, 312.160209),
        ],
        [
            (*ANSWER, 404_325_023, 305_442_803, None),
            (*TOOL, 710_986_888, 123_624_446, None),
            (*ANSWER, 834_611_334, 1_066_984_050, 317.118035),
        ],
    ]


def test_the_first_outputs_split_is_end_of_turn_model_tool_and_the_rest() -> None:
    """(first output, end of turn, model, tool, overhead) in ms; the end-of-turn wait (from
    the end of the words to the first answer's ask) is a part of the overhead."""
    split = [
        (
            run.first_output_ms,
            run.rollup.first_output_end_of_turn_ms,
            run.rollup.first_output_inference_ms,
            run.rollup.first_output_tool_ms,
            run.rollup.first_output_overhead_ms,
        )
        for run in _runs()
    ]
    assert split == [
        (1610.350842, 415.864246, 942.086085, 245.35623, 422.908527),
        (1233.981952, 463.823118, 647.678111, 121.308868, 464.994973),
        (1154.529415, 404.325023, 625.360884, 123.624446, 405.544085),
    ]
    for first, _, model, tool, overhead in split:
        assert model is not None and tool is not None and overhead is not None
        assert model + tool + overhead == pytest.approx(first, abs=1e-6)


def test_the_turns_are_the_agents_and_their_tokens_pipecats_usage() -> None:
    runs = _runs()
    for run, words, frame in zip(runs, TRUTH["words_end_ns"], TRUTH["first_frame_ns"], strict=True):
        assert abs(run.start_ns - words) < 1_000  # the observer's stamp: µs of a float
        assert run.first_output_ms is not None
        assert run.first_output_ms == pytest.approx((frame - words) / 1e6, abs=10.0)
    # The sums of each turn's llm_response usages (two function calls in the first turn).
    assert [(r.rollup.input_tokens, r.rollup.output_tokens) for r in runs] == [
        (558, 82),
        (607, 78),
        (701, 78),
    ]
    bodies = TRUTH["tool_ns"]
    tools = [s for r in runs for s in r.steps if s.kind == "tool"]
    assert all(t.start_ns <= b[0] and b[1] <= t.end_ns for t, b in zip(tools, bodies, strict=True))


def test_without_the_calling_answers_steps_no_end_of_turn_is_split_out(tmp_path: Path) -> None:
    """An earlier observer wrote no step for an answer that called a function: the first
    answer step then starts at a result, after the tool, and is no decision."""
    path = spans_rewritten(
        TRACES, tmp_path / "earlier.jsonl", lambda spans: [s for s in spans if not _calling(s)]
    )
    runs = sorted(read_runs([path]), key=lambda r: r.start_ns)
    assert [r.rollup.first_output_end_of_turn_ms for r in runs] == [None, None, None]
    assert [r.first_output_ms for r in runs] == [1610.350842, 1233.981952, 1154.529415]


def _calling(span: dict[str, Any]) -> bool:
    """The observer's step of an answer that called a function: no first token."""
    keys = {kv["key"] for kv in span.get("attributes", [])}
    return span["name"] == "realtime sim-realtime" and "chainlat.latency.ttft_ms" not in keys
