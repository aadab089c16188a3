"""A workflow's finished SDK spans read into the rollup's records (:class:`SpanRecord`),
when its rollup is computed: on the export worker, mostly (see ``deferred.py``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from opentelemetry.sdk.trace import ReadableSpan, Span

from chainlat._core.conventions import classify
from chainlat._core.records import apply_events, named_record
from chainlat._core.rollup import SpanRecord, call_record
from chainlat._runtime.otel_compat import attribute_dict, event_count_source, span_slots
from chainlat._runtime.span_attributes import attributes_of


def to_records(spans: Iterable[ReadableSpan]) -> list[SpanRecord]:
    """The rollup's view of finished spans.

    A workflow's rollup reads each of its spans once, on the export thread: for the SDK's own
    spans (the ``ReadableSpan`` it hands to ``on_end``, or a ``Span``), whose public
    properties are Python calls (``events`` copies the list under a lock), the fields are
    read from their slots in one C call; any other span type through its public properties.
    Both give the same record (tests/runtime/test_span_records.py).
    """
    records: list[SpanRecord] = []
    append = records.append
    for span in spans:
        if type(span) in _SDK_SPANS:
            context, parent, name, start, end, bounded, events = span_slots(span)
            found = attribute_dict(bounded)
            attributes = found if found is not None else span.attributes or {}
        else:
            context, parent, name = span.context, span.parent, span.name
            start, end, events = span.start_time, span.end_time, span.events
            attributes = attributes_of(span)
        if context is None or start is None or end is None:
            continue
        # Tokens, first token, model and source as any convention writes them. SpanContext
        # is a tuple whose second member is the span id (its ``span_id``).
        record = call_record(
            context[1],
            None if parent is None else parent[1],
            name,
            start,
            end,
            classify(attributes),
            attributes,
        )
        # First-token events of other conventions; events after the end. (The SDK's
        # BoundedList answers its length in Python: its deque is asked instead.)
        if event_count_source(events):
            apply_events(record, ((e.name, e.timestamp) for e in events))
        if record.kind is None:
            # Known by its name alone, as the readers know it.
            record = named_record(record, attributes) or record
        append(record)
    return records


_SDK_SPANS: Final = frozenset((ReadableSpan, Span))
