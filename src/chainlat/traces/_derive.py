"""What a span's kept attributes give its record, worked out once for every reader of trace
files, and the one place those readers make a :class:`~chainlat._core.rollup.SpanRecord`
from it.

The typed msgspec reader (:mod:`chainlat.traces._fast`) reads a span's attributes into
:class:`Readings` with :func:`derive`, once per distinct attribute list, and builds its
record with :func:`span_record`: a field added to ``SpanRecord`` is added here once. The
validating reader (:mod:`chainlat.traces._parse`), which reads whatever the typed one
refuses, builds its records with the reference,
:func:`~chainlat._core.records.call_record`, apart on purpose:
``tests/traces/test_derive_rules.py`` holds :func:`derive` to it, and
``tests/traces/test_fast_reader_*.py`` the two readers' records to each other.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from chainlat._core import attributes as attr
from chainlat._core.call_readings import GIVES_INSTANT, first_token_at
from chainlat._core.conventions import classify
from chainlat._core.records import STEP_NAME_KEYS, SpanKindLabel, call_fields, step_name_of
from chainlat._core.rollup import SpanRecord

NO_ATTRIBUTES: Final[Mapping[str, object]] = types.MappingProxyType({})
"""The attributes of a span that has none chainlat keeps (shared, read-only)."""


_CACHE_HIT: Final = attr.CACHE_HIT


@dataclass(slots=True)
class Readings:
    """What a span's kept attributes give its record, each field named as the
    :class:`~chainlat._core.rollup.SpanRecord` field it becomes; read once per distinct
    attribute list and shared by the spans that carry it (treated as immutable).

    A model call's fields are read by its convention's rules
    (:func:`~chainlat._core.records.call_fields`); every other kind of span leaves them
    unset, as :func:`~chainlat._core.records.call_record` does.
    """

    attributes: Mapping[str, object]
    """The kept attributes themselves (the span's ``TracedSpan.attributes``)."""
    kind: SpanKindLabel | None = None
    cache_hit: bool = False
    step_name: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    ttft_ms: float | None = None
    model: str | None = None
    source: str | None = None
    user_facing: bool = False
    cache_read_tokens: int | None = None
    has_output: bool = False
    ttft_marked: bool = False
    operation: str | None = None
    ttft_unusable: str | None = None
    streamed: bool | None = None
    asked_tools: bool = False
    instant: bool = False
    """Its first token is given as an instant (`call_readings.INSTANT_KEYS`), read against
    each span's own start by :func:`span_record`."""


NO_READINGS: Final = Readings(NO_ATTRIBUTES)
"""What a span without kept attributes gives: nothing (shared)."""


def derive(
    found: dict[str, object],
    _classify: Callable[[Mapping[str, object]], Any] = classify,
    _new: Any = object.__new__,
) -> Readings:
    """What the kept attributes ``found`` of a span give, as :func:`call_record` reads them
    (``tests/traces/test_fast_reader_attributes.py`` holds the quick paths to the validating
    one, ``tests/traces/test_derive_rules.py`` to :func:`call_record`)."""
    if not found:
        return NO_READINGS
    # Every field set here, without the class's __init__: a call of the class costs three
    # thousand instructions, a tenth of them the stores, and this runs for every span
    # whose attributes differ from the ones read before (a model call's tokens, a rollup).
    readings: Readings = _new(Readings)
    readings.attributes = found
    kind = readings.kind = _classify(found)
    readings.cache_hit = found.get(_CACHE_HIT) is True
    # Most spans name no step: asked in C before the loop over the keys.
    readings.step_name = None if found.keys().isdisjoint(STEP_NAME_KEYS) else step_name_of(found)
    if kind != "inference":
        readings.input_tokens = readings.output_tokens = readings.ttft_ms = None
        readings.model = readings.source = readings.cache_read_tokens = None
        readings.operation = readings.ttft_unusable = readings.streamed = None
        readings.user_facing = readings.has_output = readings.ttft_marked = False
        readings.asked_tools = readings.instant = False
        return readings
    # Tokens, first token, model and source by any convention, by its one rule for each,
    # and what call_marks says: a read span gets the record a live one gets.
    (
        readings.input_tokens,
        readings.output_tokens,
        readings.ttft_ms,
        readings.model,
        readings.source,
        readings.user_facing,
        readings.cache_read_tokens,
        readings.has_output,
        readings.ttft_marked,
        readings.operation,
        readings.ttft_unusable,
        readings.streamed,
        readings.asked_tools,
    ) = call_fields(found)
    readings.instant = (
        readings.ttft_ms is None
        and readings.ttft_unusable is None
        and not found.keys().isdisjoint(GIVES_INSTANT)
    )
    return readings


def span_record(
    readings: Readings,
    span_id: int,
    parent_id: int | None,
    name: str,
    start_ns: int,
    end_ns: int,
    _new: Any = object.__new__,
    _record: type[SpanRecord] = SpanRecord,
) -> SpanRecord:
    """The record of a span read from a trace file, from its ids, name, times and what its
    attributes give; the one place the file readers' quick paths make a record."""
    # Every field set here, without the class's __init__: a call of it costs a thousand
    # instructions more per span (tests/traces/test_fast_reader_*.py compare each field
    # with the validating path's records, made by the constructor).
    record: SpanRecord = _new(_record)
    record.span_id = span_id
    record.parent_id = parent_id
    record.name = name
    record.start_ns = start_ns
    record.end_ns = end_ns
    record.kind = readings.kind
    record.cache_hit = readings.cache_hit
    record.input_tokens = readings.input_tokens
    record.output_tokens = readings.output_tokens
    record.ttft_ms = readings.ttft_ms
    record.model = readings.model
    record.source = readings.source
    record.step_name = readings.step_name
    record.user_facing = readings.user_facing
    record.cache_read_tokens = readings.cache_read_tokens
    record.extended = record.failed = record.unrecorded_end = False
    record.has_output = readings.has_output
    record.ttft_marked = readings.ttft_marked
    record.operation = readings.operation
    record.ttft_unusable = readings.ttft_unusable
    record.streamed = readings.streamed
    record.asked_tools = readings.asked_tools
    if readings.instant:  # a first token given as an instant: against this span's start
        record.ttft_ms, record.ttft_unusable = first_token_at(readings.attributes, start_ns, end_ns)
    return record
