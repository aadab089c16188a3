"""A rollup recorded on a workflow span, checked against the span before it is trusted."""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

from chainlat._core import attributes as attr
from chainlat._core.records import SpanRecord
from chainlat._core.rollup import Rollup, compute_rollup
from chainlat._core.steps import StepTiming, more_steps

_NS_PER_MS: Final = 1_000_000


def with_first_output(recorded: Rollup, computed: Rollup) -> Rollup:
    return replace(
        recorded,
        first_output_ms=computed.first_output_ms,
        first_output_inference_ms=computed.first_output_inference_ms,
        first_output_data_ms=computed.first_output_data_ms,
        first_output_tool_ms=computed.first_output_tool_ms,
        first_output_overhead_ms=computed.first_output_overhead_ms,
        first_output_speech_to_text_ms=computed.first_output_speech_to_text_ms,
        first_output_text_to_speech_ms=computed.first_output_text_to_speech_ms,
        first_output_end_of_turn_ms=computed.first_output_end_of_turn_ms,
    )


_TOLERANCE_MS: Final = 0.001
"""Rounding allowed in a recorded rollup's sums: a microsecond."""


def inconsistency(recorded: Rollup, root: SpanRecord) -> str:
    """What makes a rollup recorded on a workflow span impossible for that span, or "".

    Every part non-negative, the total within the span's duration, the four kinds summing to
    the total (and the first output's four parts to it): a rollup written by an older
    chainlat, by hand or by a runtime given a negative price fails one of these, and would
    otherwise pass every limit (a 5,000 ms span recording ``total_ms = -100``).
    """
    # Read once per run: the parts checked in C first, named only when one is negative.
    if not (
        min(_REQUIRED_PARTS(recorded)) >= 0
        and min(filter(_KNOWN, _OPTIONAL_PARTS(recorded)), default=0.0) >= 0
    ):
        negative = _negative_part(recorded)
        if negative:
            return negative
    duration_ms = max(root.end_ns - root.start_ns, 0) / _NS_PER_MS
    if recorded.total_ms > duration_ms + _TOLERANCE_MS:
        return (
            f"{attr.CHAIN_TOTAL_MS} {recorded.total_ms:g} is longer than the span "
            f"({duration_ms:g} ms)"
        )
    kinds = recorded.inference_ms + recorded.data_ms + recorded.tool_ms + recorded.overhead_ms
    if abs(kinds - recorded.total_ms) > _TOLERANCE_MS:
        return (
            f"inference + data + tool + overhead is {kinds:g} ms, not "
            f"{attr.CHAIN_TOTAL_MS} {recorded.total_ms:g}"
        )
    split = recorded.first_output_split()
    if split is not None and recorded.first_output_ms is not None:
        if recorded.first_output_ms > recorded.total_ms + _TOLERANCE_MS:
            return f"{attr.CHAIN_FIRST_OUTPUT_MS} {recorded.first_output_ms:g} is after the end"
        if abs(sum(split.values()) - recorded.first_output_ms) > _TOLERANCE_MS:
            return f"the parts of {attr.CHAIN_FIRST_OUTPUT_MS} do not sum to it"
    return _speech_inconsistency(recorded)


_REQUIRED_PARTS: Final = operator.attrgetter(
    "total_ms", "inference_ms", "data_ms", "tool_ms", "overhead_ms", "inference_sum_ms",
    "data_sum_ms", "tool_sum_ms", "parallelism", "step_count", "inference_count", "data_count",
    "tool_count", "cache_hits", "input_tokens", "output_tokens", "uncounted_calls",
)  # fmt: skip
_OPTIONAL_PARTS: Final = operator.attrgetter(
    "cost_usd", "first_output_ms", "first_output_inference_ms", "first_output_data_ms",
    "first_output_tool_ms", "first_output_overhead_ms", "speech_to_text_ms",
    "text_to_speech_ms", "first_output_speech_to_text_ms", "first_output_text_to_speech_ms",
    "first_output_end_of_turn_ms",
)  # fmt: skip


_KNOWN: Final = functools.partial(operator.is_not, None)


def _negative_part(recorded: Rollup) -> str:
    """The first part of ``recorded`` that is negative, named, or "" (NaN is not)."""
    parts = {
        attr.CHAIN_TOTAL_MS: recorded.total_ms,
        attr.CHAIN_INFERENCE_MS: recorded.inference_ms,
        attr.CHAIN_DATA_MS: recorded.data_ms,
        attr.CHAIN_TOOL_MS: recorded.tool_ms,
        attr.CHAIN_OVERHEAD_MS: recorded.overhead_ms,
        attr.CHAIN_INFERENCE_SUM_MS: recorded.inference_sum_ms,
        attr.CHAIN_DATA_SUM_MS: recorded.data_sum_ms,
        attr.CHAIN_TOOL_SUM_MS: recorded.tool_sum_ms,
        attr.CHAIN_PARALLELISM: recorded.parallelism,
        attr.CHAIN_STEP_COUNT: recorded.step_count,
        attr.CHAIN_INFERENCE_COUNT: recorded.inference_count,
        attr.CHAIN_DATA_COUNT: recorded.data_count,
        attr.CHAIN_TOOL_COUNT: recorded.tool_count,
        attr.CHAIN_CACHE_HITS: recorded.cache_hits,
        attr.CHAIN_INPUT_TOKENS: recorded.input_tokens,
        attr.CHAIN_OUTPUT_TOKENS: recorded.output_tokens,
        attr.CHAIN_UNCOUNTED_CALLS: recorded.uncounted_calls,
        attr.CHAIN_COST_USD: recorded.cost_usd,
        attr.CHAIN_FIRST_OUTPUT_MS: recorded.first_output_ms,
        attr.CHAIN_FIRST_OUTPUT_INFERENCE_MS: recorded.first_output_inference_ms,
        attr.CHAIN_FIRST_OUTPUT_DATA_MS: recorded.first_output_data_ms,
        attr.CHAIN_FIRST_OUTPUT_TOOL_MS: recorded.first_output_tool_ms,
        attr.CHAIN_FIRST_OUTPUT_OVERHEAD_MS: recorded.first_output_overhead_ms,
        attr.CHAIN_SPEECH_TO_TEXT_MS: recorded.speech_to_text_ms,
        attr.CHAIN_TEXT_TO_SPEECH_MS: recorded.text_to_speech_ms,
        attr.CHAIN_FIRST_OUTPUT_SPEECH_TO_TEXT_MS: recorded.first_output_speech_to_text_ms,
        attr.CHAIN_FIRST_OUTPUT_TEXT_TO_SPEECH_MS: recorded.first_output_text_to_speech_ms,
        attr.CHAIN_FIRST_OUTPUT_END_OF_TURN_MS: recorded.first_output_end_of_turn_ms,
    }
    for key, value in parts.items():
        if value is not None and value < 0:
            return f"{key} {value:g} is negative"
    return ""


def _speech_inconsistency(recorded: Rollup) -> str:
    """The speech parts are parts of the inference time (docs/voice.md): never more."""
    if (
        recorded.speech_to_text_ms is None
        and recorded.text_to_speech_ms is None
        and recorded.first_output_speech_to_text_ms is None
        and recorded.first_output_text_to_speech_ms is None
    ):
        return _end_of_turn_inconsistency(recorded)  # no speech: the common case, per run read
    for inference, parts, key in (
        (recorded.inference_ms, (recorded.speech_to_text_ms, recorded.text_to_speech_ms),
         attr.CHAIN_INFERENCE_MS),
        (recorded.first_output_inference_ms,
         (recorded.first_output_speech_to_text_ms, recorded.first_output_text_to_speech_ms),
         attr.CHAIN_FIRST_OUTPUT_INFERENCE_MS),
    ):  # fmt: skip
        speech = sum(p for p in parts if p is not None)
        if speech > (inference or 0.0) + _TOLERANCE_MS:
            return f"the speech parts of {key} are {speech:g} ms, more than it"
    return _end_of_turn_inconsistency(recorded)


def _end_of_turn_inconsistency(recorded: Rollup) -> str:
    """The end-of-turn wait is a part of the first output's overhead (docs/voice.md)."""
    waited = recorded.first_output_end_of_turn_ms
    if waited is not None and waited > (recorded.first_output_overhead_ms or 0.0) + _TOLERANCE_MS:
        return (
            f"{attr.CHAIN_FIRST_OUTPUT_END_OF_TURN_MS} {waited:g} is more than "
            f"{attr.CHAIN_FIRST_OUTPUT_OVERHEAD_MS}"
        )
    return ""


_UNRECORDED_END: Final = operator.attrgetter("unrecorded_end")


def _unmarked(recorded: Rollup, records: list[SpanRecord]) -> bool:
    """Whether ``recorded`` says every end is recorded while a model call's span ended before
    its own events (a rollup written before rule 13; the rebuilt one may find the wire
    timed it)."""
    if recorded.unrecorded or not any(map(_UNRECORDED_END, records)):  # C loops: per run read
        return False
    return any(r.unrecorded_end and r.kind == "inference" for r in records)


def recorded_rollup(
    attributes: Mapping[str, object],
    root: SpanRecord,
    records: list[SpanRecord],
    steps: Sequence[StepTiming],
    first_output_ns: int | None,
) -> tuple[Rollup | None, str]:
    """The rollup recorded on a workflow span, when it can be trusted (None: rebuild it from
    the spans), and why an impossible one was not (see :func:`inconsistency`)."""
    if attr.CHAIN_TOTAL_MS not in attributes:
        return None, ""
    recorded = Rollup.from_attributes(attributes)
    if recorded is None:
        return None, ""
    rebuilt = inconsistency(recorded, root)
    if rebuilt or more_steps(steps, recorded) or _unmarked(recorded, records):
        # Impossible for its span; or steps the live rollup never saw: spans written after
        # the workflow ended, with times inside it (LiteLLM logs a streamed call from a
        # worker thread, later); or recorded before chainlat marked a call whose end the
        # trace does not hold (rule 13).
        return None, rebuilt
    if recorded.first_output_ms is None and records:
        # Recorded before chainlat measured the first output: that part from the spans.
        computed = compute_rollup(root, records, first_output_ns=first_output_ns)
        recorded = with_first_output(recorded, computed)
    return recorded, ""
