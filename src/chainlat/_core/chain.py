"""The rollup of one workflow run: where its wall time went, and its ``chainlat.chain.*``
span attributes (written by the runtime, read back by every reader)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from chainlat._core import attributes as attr

_PART_OF: Final = {
    "speech_to_text": "inference",
    "text_to_speech": "inference",
    "first_output_speech_to_text": "first_output_split",
    "first_output_text_to_speech": "first_output_split",
    "first_output_end_of_turn": "first_output_split",
}
"""The part of the rollup a budget quantity is read from, where the names differ."""
_KIND_FIELDS: Final = {
    "total": "total_ms",
    "inference": "inference_ms",
    "data": "data_ms",
    "tool": "tool_ms",
    "overhead": "overhead_ms",
}


@dataclass(slots=True, unsafe_hash=True)
class Rollup:
    """Where the wall time of one workflow run went, in milliseconds.

    ``inference_ms + data_ms + tool_ms + overhead_ms == total_ms``: the split
    follows the critical path, so time spent in parallel branches that did not
    decide the end is not in it. The ``*_sum_ms`` fields are plain sums of step
    durations instead, and exceed the wall time when steps overlap.

    Treated as immutable; not frozen for the reader's speed (see ``WorkflowRun``).
    """

    total_ms: float
    """Wall time of the workflow."""
    inference_ms: float
    """Critical-path time inside model calls."""
    data_ms: float
    """Critical-path time inside data stages (retrieval, feature fetch, ETL)."""
    tool_ms: float
    """Critical-path time inside tool calls."""
    overhead_ms: float
    """Critical-path time outside every step: glue code and waiting."""
    inference_sum_ms: float = 0.0
    data_sum_ms: float = 0.0
    tool_sum_ms: float = 0.0
    parallelism: float = 0.0
    """Sum of the top-level step durations divided by the total (0 when empty)."""
    step_count: int = 0
    inference_count: int = 0
    data_count: int = 0
    tool_count: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    critical_path: tuple[str, ...] = field(default=())
    """Names of the steps on the critical path, in time order."""
    first_output_ms: float | None = None
    """From the start to the first output the user saw (see :func:`compute_rollup`)."""
    first_output_inference_ms: float | None = None
    """The critical-path split of the wait for the first output; the four sum to it."""
    first_output_data_ms: float | None = None
    first_output_tool_ms: float | None = None
    first_output_overhead_ms: float | None = None
    cost_usd: float | None = None
    """What the run's model calls cost, when prices were given; None otherwise."""
    speech_to_text_ms: float | None = None
    """Critical-path time in ``speech_to_text`` calls, a part of ``inference_ms``; None
    when the run made no speech call (also the three below; see `chainlat._core.voice`)."""
    text_to_speech_ms: float | None = None
    first_output_speech_to_text_ms: float | None = None
    first_output_text_to_speech_ms: float | None = None
    first_output_end_of_turn_ms: float | None = None
    """The part of ``first_output_overhead_ms`` the caller waited for the end of their turn to
    be detected (endpointing): from the end of their words, the run's start, to the instant
    the framework decided the turn was over; None when the trace does not say when that was
    (see `chainlat._core.voice.end_of_turn_cut` and docs/voice.md)."""
    unrecorded: tuple[str, ...] = ()
    """Model calls (step keys) whose end the trace does not record (their span ended before
    their own events): the parts named in ``unrecorded_parts`` are lower or upper bounds,
    not measurements (docs/attributes.md, rule 13)."""
    unrecorded_parts: tuple[str, ...] = ()
    """What those ends leave unknown: ``inference``, ``overhead``, and ``data``, ``tool``,
    ``first_output`` (the instant), ``first_output_split`` (its wait by kind) when they
    depend on one; empty when every end is recorded."""
    unusable: tuple[str, ...] = ()
    """Model calls (step keys) whose first token the trace gives by a value that is no time
    (negative, not a number, a first token before the call's start, or an instant no span
    marks): their first token, and their time to it, are not known (docs/attributes.md,
    rule 15)."""
    unusable_values: tuple[str, ...] = ()
    """What each of those calls gives, in the order of ``unusable`` (``metrics.ttfb = -1``)."""
    unusable_parts: tuple[str, ...] = ()
    """What those first tokens leave unknown: ``first_output`` and ``first_output_split``
    when the first output depends on one, its value then a lower bound (the later of the
    call's start and the output the rule gives without the call); empty otherwise."""
    uncounted_calls: int = 0
    """How many model calls the trace gives no token counts for (no usage, or a usage of
    nothing: docs/attributes.md, rule 21): ``input_tokens`` and ``output_tokens`` are the
    other calls' alone. Cache hits and speech calls are not counted."""

    def kind_ms(self, kind: str) -> float:
        """The critical-path share of ``inference``, ``data``, ``tool`` or ``overhead``."""
        value: float = getattr(self, _KIND_FIELDS[kind])
        return value

    def unrecorded_in(self, quantity: str) -> bool:
        """Whether a budget quantity (``inference``, ``first_output``, ``speech_to_text``...)
        depends on a model call's end that the trace does not record (``unrecorded_parts``):
        the run's value for it is a bound, not a measurement."""
        if not self.unrecorded_parts:
            return False
        return _PART_OF.get(quantity, quantity) in self.unrecorded_parts

    def unusable_in(self, quantity: str) -> bool:
        """Whether a budget quantity (``first_output``, ``first_output_text_to_speech``...)
        depends on a first token the trace gives by a value that is no time
        (``unusable_parts``): the run's value for it is a lower bound, not a measurement."""
        if not self.unusable_parts:
            return False
        return _PART_OF.get(quantity, quantity) in self.unusable_parts

    def bound_in(self, quantity: str) -> bool:
        """Whether the run's value of a budget quantity is a bound, not a measurement: it
        depends on an unrecorded end (rule 13) or on a first token not known (rules 15 and
        17)."""
        return self.unrecorded_in(quantity) or self.unusable_in(quantity)

    def first_output_split(self) -> dict[str, float] | None:
        """The wait for the first output by kind (inference, data, tool, overhead), if known."""
        if self.first_output_ms is None:
            return None
        return {
            "inference": self.first_output_inference_ms or 0.0,
            "data": self.first_output_data_ms or 0.0,
            "tool": self.first_output_tool_ms or 0.0,
            "overhead": self.first_output_overhead_ms or 0.0,
        }

    def to_attributes(self) -> dict[str, float | int | tuple[str, ...]]:
        """The ``chainlat.chain.*`` span attributes."""
        found: dict[str, float | int | tuple[str, ...]] = {
            attr.CHAIN_TOTAL_MS: self.total_ms,
            attr.CHAIN_INFERENCE_MS: self.inference_ms,
            attr.CHAIN_DATA_MS: self.data_ms,
            attr.CHAIN_TOOL_MS: self.tool_ms,
            attr.CHAIN_OVERHEAD_MS: self.overhead_ms,
            attr.CHAIN_INFERENCE_SUM_MS: self.inference_sum_ms,
            attr.CHAIN_DATA_SUM_MS: self.data_sum_ms,
            attr.CHAIN_TOOL_SUM_MS: self.tool_sum_ms,
            attr.CHAIN_PARALLELISM: self.parallelism,
            attr.CHAIN_STEP_COUNT: self.step_count,
            attr.CHAIN_INFERENCE_COUNT: self.inference_count,
            attr.CHAIN_DATA_COUNT: self.data_count,
            attr.CHAIN_TOOL_COUNT: self.tool_count,
            attr.CHAIN_CACHE_HITS: self.cache_hits,
            attr.CHAIN_INPUT_TOKENS: self.input_tokens,
            attr.CHAIN_OUTPUT_TOKENS: self.output_tokens,
            attr.CHAIN_CRITICAL_PATH: self.critical_path,
        }
        if self.first_output_ms is not None:
            found[attr.CHAIN_FIRST_OUTPUT_MS] = self.first_output_ms
            found[attr.CHAIN_FIRST_OUTPUT_INFERENCE_MS] = self.first_output_inference_ms or 0.0
            found[attr.CHAIN_FIRST_OUTPUT_DATA_MS] = self.first_output_data_ms or 0.0
            found[attr.CHAIN_FIRST_OUTPUT_TOOL_MS] = self.first_output_tool_ms or 0.0
            found[attr.CHAIN_FIRST_OUTPUT_OVERHEAD_MS] = self.first_output_overhead_ms or 0.0
        if self.cost_usd is not None:
            found[attr.CHAIN_COST_USD] = self.cost_usd
        for key, value in (
            (attr.CHAIN_SPEECH_TO_TEXT_MS, self.speech_to_text_ms),
            (attr.CHAIN_TEXT_TO_SPEECH_MS, self.text_to_speech_ms),
            (attr.CHAIN_FIRST_OUTPUT_SPEECH_TO_TEXT_MS, self.first_output_speech_to_text_ms),
            (attr.CHAIN_FIRST_OUTPUT_TEXT_TO_SPEECH_MS, self.first_output_text_to_speech_ms),
            (attr.CHAIN_FIRST_OUTPUT_END_OF_TURN_MS, self.first_output_end_of_turn_ms),
        ):
            if value is not None:
                found[key] = value
        if self.unrecorded:
            found[attr.CHAIN_UNRECORDED] = self.unrecorded
            found[attr.CHAIN_UNRECORDED_PARTS] = self.unrecorded_parts
        if self.unusable:
            found[attr.CHAIN_UNUSABLE] = self.unusable
            found[attr.CHAIN_UNUSABLE_VALUES] = self.unusable_values
            if self.unusable_parts:
                found[attr.CHAIN_UNUSABLE_PARTS] = self.unusable_parts
        if self.uncounted_calls:
            found[attr.CHAIN_UNCOUNTED_CALLS] = self.uncounted_calls
        return found

    @classmethod
    def from_attributes(cls, attributes: Mapping[str, object]) -> Rollup | None:
        """Read a rollup back from span attributes; None when they are absent or malformed."""
        try:
            get = attributes.get
            path = get(attr.CHAIN_CRITICAL_PATH, ())
            # Positional, in the order of the fields: this runs once per run read.
            return cls(
                _as_float(attributes[attr.CHAIN_TOTAL_MS]),
                _as_float(attributes[attr.CHAIN_INFERENCE_MS]),
                _as_float(attributes[attr.CHAIN_DATA_MS]),
                _as_float(attributes[attr.CHAIN_TOOL_MS]),
                _as_float(attributes[attr.CHAIN_OVERHEAD_MS]),
                _as_float(get(attr.CHAIN_INFERENCE_SUM_MS, 0.0)),
                _as_float(get(attr.CHAIN_DATA_SUM_MS, 0.0)),
                _as_float(get(attr.CHAIN_TOOL_SUM_MS, 0.0)),
                _as_float(get(attr.CHAIN_PARALLELISM, 0.0)),
                _as_int(get(attr.CHAIN_STEP_COUNT, 0)),
                _as_int(get(attr.CHAIN_INFERENCE_COUNT, 0)),
                _as_int(get(attr.CHAIN_DATA_COUNT, 0)),
                _as_int(get(attr.CHAIN_TOOL_COUNT, 0)),
                _as_int(get(attr.CHAIN_CACHE_HITS, 0)),
                _as_int(get(attr.CHAIN_INPUT_TOKENS, 0)),
                _as_int(get(attr.CHAIN_OUTPUT_TOKENS, 0)),
                tuple(map(str, path)) if isinstance(path, (list, tuple)) else (),
                _optional_float(get(attr.CHAIN_FIRST_OUTPUT_MS)),
                _optional_float(get(attr.CHAIN_FIRST_OUTPUT_INFERENCE_MS)),
                _optional_float(get(attr.CHAIN_FIRST_OUTPUT_DATA_MS)),
                _optional_float(get(attr.CHAIN_FIRST_OUTPUT_TOOL_MS)),
                _optional_float(get(attr.CHAIN_FIRST_OUTPUT_OVERHEAD_MS)),
                _optional_float(get(attr.CHAIN_COST_USD)),
                _optional_float(get(attr.CHAIN_SPEECH_TO_TEXT_MS)),
                _optional_float(get(attr.CHAIN_TEXT_TO_SPEECH_MS)),
                _optional_float(get(attr.CHAIN_FIRST_OUTPUT_SPEECH_TO_TEXT_MS)),
                _optional_float(get(attr.CHAIN_FIRST_OUTPUT_TEXT_TO_SPEECH_MS)),
                _optional_float(get(attr.CHAIN_FIRST_OUTPUT_END_OF_TURN_MS)),
                _strings(unrecorded) if (unrecorded := get(attr.CHAIN_UNRECORDED)) else (),
                _strings(parts) if (parts := get(attr.CHAIN_UNRECORDED_PARTS)) else (),
                _strings(unusable) if (unusable := get(attr.CHAIN_UNUSABLE)) else (),
                _strings(values) if (values := get(attr.CHAIN_UNUSABLE_VALUES)) else (),
                _strings(parts) if (parts := get(attr.CHAIN_UNUSABLE_PARTS)) else (),
                _as_int(get(attr.CHAIN_UNCOUNTED_CALLS, 0)),
            )
        except (KeyError, TypeError, ValueError, OverflowError):
            return None


def _as_float(value: object) -> float:
    if type(value) is float:  # the common case, checked first: a finite double
        if value - value == 0.0:  # False for NaN and the infinities
            return value
        raise ValueError(value)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(value)
    number = float(value)
    if not math.isfinite(number):
        # "NaN" is how protobuf's JSON mapping writes a NaN double: a rollup holding one
        # is no rollup (the readers rebuild it from the spans), never a number that
        # passes every limit.
        raise ValueError(value)
    return number


def _strings(value: object) -> tuple[str, ...]:
    return tuple(map(str, value)) if isinstance(value, (list, tuple)) else ()


def _optional_float(value: object) -> float | None:
    return None if value is None else _as_float(value)


def _as_int(value: object) -> int:
    if type(value) is int:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(value)
    return int(value)  # int("nan") and int(float("inf")) raise ValueError / OverflowError
