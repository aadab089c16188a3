"""Outcomes: how a run went (success, score), recorded on its trace during or after it."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from chainlat._core import attributes as attr
from chainlat._core.errors import internal_errors, shown, warn_once
from chainlat._runtime.processor import default_provider, tracer_for

if TYPE_CHECKING:
    from opentelemetry.util.types import AttributeValue


def outcome_attributes(success: bool | None, score: float | None) -> dict[str, AttributeValue]:
    """The ``chainlat.outcome.*`` attributes; ValueError on a call that records nothing or NaN."""
    if success is None and score is None:
        raise ValueError("record_outcome needs success=..., score=... or both")
    values: dict[str, AttributeValue] = {}
    if success is not None:
        if not isinstance(success, bool):
            raise ValueError(f"success must be True or False, got {shown(success)}")
        values[attr.OUTCOME_SUCCESS] = success
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, (int, float)) or score != score:
            raise ValueError(f"score must be a number, got {shown(score)}")
        values[attr.OUTCOME_SCORE] = float(score)
    return values


def _parse_id(value: int | str, bits: int, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value, 16)
        except ValueError:
            raise ValueError(f"{what} must be hex or an int, got {shown(value)}") from None
    else:
        raise ValueError(f"{what} must be hex or an int, got {shown(value)}")
    if not 0 < number < 1 << bits:
        raise ValueError(f"{what} out of range: {shown(value)}")
    return number


def emit_outcome(
    trace_id: int,
    parent_span_id: int,
    values: Mapping[str, AttributeValue],
    tracer_provider: trace.TracerProvider | None,
) -> None:
    with internal_errors("recording an outcome"):
        parent = trace.SpanContext(
            trace_id,
            parent_span_id,
            is_remote=True,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
        )
        provider = tracer_provider or default_provider()
        context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
        span = tracer_for(provider).start_span(
            attr.OUTCOME_SPAN_NAME, context=context, kind=SpanKind.INTERNAL, attributes=values
        )
        span.end()


def record_outcome(
    trace_id: int | str,
    *,
    success: bool | None = None,
    score: float | None = None,
    span_id: int | str | None = None,
    tracer_provider: trace.TracerProvider | None = None,
) -> None:
    """Attach an outcome to a finished run, by trace id: for offline evaluation.

    Adds a ``record_outcome`` span carrying ``chainlat.outcome.success`` and
    ``chainlat.outcome.score`` to the trace. chainlat's readers give it to the
    workflow span it is a child of (pass the workflow's ``span_id`` for that),
    or else to the trace's only top-level workflow. Without ``span_id`` the
    span's parent is a placeholder id, which some trace viewers flag as missing.

    Example::

        for trace_id, answer in graded_answers:
            chainlat.record_outcome(trace_id, success=answer.correct, score=answer.score)

    Args:
        trace_id: The run's trace id, 32 hex digits or an int.
        success: Whether the run did its job.
        score: A quality score, higher is better.
        span_id: The workflow span's id (16 hex digits or an int), when known.
        tracer_provider: Where to send the span; the global provider when None.

    Like ``run.record_outcome()``, it never raises: a call that records nothing, a value
    that is not a bool / a number (NaN included) or a malformed id is logged once and
    ignored.
    """
    try:
        values = outcome_attributes(success, score)
        trace_number = _parse_id(trace_id, 128, "trace_id")
        parent = (
            random.getrandbits(64) or 1 if span_id is None else _parse_id(span_id, 64, "span_id")
        )
    except ValueError as exc:
        # Once per kind of mistake (the argument named first), not once per distinct value.
        kind = str(exc).split(" ", 1)[0]
        warn_once(f"record_outcome:{kind}", "chainlat: record_outcome: %s; not recorded", exc)
        return
    emit_outcome(trace_number, parent, values, tracer_provider)
