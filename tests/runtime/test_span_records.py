"""A workflow's spans read from the SDK's slots (`span_records.to_records`) give the records
the public properties give (the same spans, as a span type of another library).

The rollup left to the export reads every span of a workflow; for the SDK's own spans it
reads the slots behind ``context``, ``parent``, ``name``, the times, the attributes and
``events`` in one call. Real spans, ended through a real provider (the ``ReadableSpan`` the
SDK hands to ``on_end`` and exporters, and the ``Span`` itself), with first-token and
exception events, events after the end, model-call attributes of several conventions and
step names, must give equal records both ways; a span of another type is read through
the public properties.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span

from chainlat._core.attributes import FIRST_TOKEN_EVENT, OPENINFERENCE_FIRST_TOKEN_EVENT
from chainlat._runtime.span_records import to_records


def spans() -> tuple[list[ReadableSpan], list[Span]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    ended: list[Span] = []
    root = tracer.start_span("invoke_workflow w", start_time=1_000)
    inside = trace.set_span_in_context(root)
    cases: Sequence[tuple[str, dict[str, object], list[tuple[str, int]], int, int]] = [
        ("chat gpt-4o", {"chainlat.step.kind": "inference", "gen_ai.request.model": "gpt-4o",
                         "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 3,
                         "chainlat.latency.ttft_ms": 4.5, "chainlat.step.name": "plan",
                         "gen_ai.response.id": "r1"}, [], 2_000, 9_000),
        ("retrieve", {"chainlat.step.kind": "data", "chainlat.cache.hit": True}, [], 9_000, 9_500),
        ("tool", {"chainlat.step.kind": "tool", "chainlat.step.name": "  "}, [], 9_500, 9_600),
        ("llm", {"openinference.span.kind": "LLM", "llm.model_name": "m",
                 "llm.token_count.prompt": 7},
         [(OPENINFERENCE_FIRST_TOKEN_EVENT, 3_000)], 2_500, 4_000),
        ("streamed", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "x"},
         [(FIRST_TOKEN_EVENT, 5_100), ("later", 12_000)], 5_000, 6_000),
        ("failed", {"chainlat.step.kind": "inference"}, [("exception", 7_000)], 6_500, 8_000),
        ("glue", {}, [], 1_500, 1_600),
    ]  # fmt: skip
    for name, attributes, events, start, end in cases:
        span = tracer.start_span(name, inside, attributes=attributes, start_time=start)  # type: ignore[arg-type]
        for event, at in events:
            span.add_event(event, timestamp=at)
        span.end(end_time=end)
        ended.append(span)
    root.end(end_time=20_000)
    ended.append(root)
    return list(exporter.get_finished_spans()), ended


def test_the_slots_give_the_records_the_properties_give() -> None:
    exported, ended = spans()
    assert {type(s) for s in exported} == {ReadableSpan}
    for group in (exported, ended):
        records = to_records(group)  # type: ignore[arg-type]
        assert records == to_records([_foreign(s) for s in group])  # type: ignore[arg-type]
        assert len(records) == 8
    by_name = {r.name: r for r in to_records(exported)}
    # The cases are read as the cases say: not a comparison of two empty readings.
    assert by_name["chat gpt-4o"].input_tokens == 12 and by_name["chat gpt-4o"].step_name == "plan"
    assert by_name["llm"].ttft_ms == 0.0005 and by_name["failed"].failed
    assert by_name["streamed"].unrecorded_end and by_name["streamed"].end_ns == 12_000
    assert by_name["retrieve"].cache_hit and by_name["tool"].step_name is None
    assert by_name["invoke_workflow w"].parent_id is None
    root_id = by_name["invoke_workflow w"].span_id
    assert {r.parent_id for r in by_name.values() if r.span_id != root_id} == {root_id}


class _Foreign(ReadableSpan):
    """A span type of another library: read through its public properties."""


class _Wrapped(_Foreign):
    @property
    def name(self) -> str:
        return "wrapped " + super().name


def _foreign(span: ReadableSpan, kind: type[_Foreign] = _Foreign) -> _Foreign:
    return kind(
        name=span.name,
        context=span.context,
        parent=span.parent,
        attributes=span.attributes,
        events=span.events,
        start_time=span.start_time,
        end_time=span.end_time,
    )


def test_a_span_of_another_type_is_read_through_its_properties() -> None:
    exported, _ = spans()
    (record,) = to_records([_foreign(exported[0], _Wrapped)])
    assert record.name == "wrapped chat gpt-4o"
    assert record == replace(to_records([exported[0]])[0], name="wrapped chat gpt-4o")


def test_a_span_that_has_not_ended_has_no_record() -> None:
    tracer = TracerProvider().get_tracer("t")
    open_span = tracer.start_span("open")
    assert to_records([open_span]) == []  # type: ignore[list-item]
    open_span.end()
    assert len(to_records([open_span])) == 1  # type: ignore[list-item]
