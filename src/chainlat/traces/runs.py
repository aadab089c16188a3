"""Workflow runs as span trees with their attributes: what profiles, what-if and compare read.

Pure and stdlib only. The budget statistics need a run's timings; the trade-off
analysis needs more: the model, tokens and latency breakdown of every call, the
run's variant and its outcome. A :class:`RunTree` keeps the run's
:class:`~chainlat._core.rollup.SpanRecord` tree (so :func:`compute_rollup` can be
run on it, as recorded or rebuilt) and each span's attributes.

Outcomes recorded after the fact (``chainlat.record_outcome(trace_id=...)``) are
small ``record_outcome`` spans in the run's trace; :func:`runs_of_trace` merges
them onto the workflow: the workflow span they are a child of, else the trace's
only top-level workflow. An outcome on the workflow span itself comes first;
later outcome spans override it, in order of their end time.

Reading is :mod:`chainlat.traces`'s job: :func:`read_run_trees` turns the traces
its streaming reader hands out into runs, so budgets and the trade-off analysis
read files and Jaeger the same way.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from chainlat._core import attributes as attr
from chainlat._core.rollup import Rollup, SpanRecord, classify, compute_rollup

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from chainlat.traces import ReadCounters, TraceSource

Attributes = Mapping[str, object]
NO_VARIANT = "(none)"
"""The variant label of runs recorded without one."""


@dataclass(slots=True)
class TracedSpan:
    """One span of a trace: the rollup's record and the span's attributes.

    Treated as immutable; not frozen for the reader's speed (see ``SpanRecord``).
    """

    record: SpanRecord
    attributes: Attributes = field(default_factory=dict)
    error: bool = False
    """The span ended with status ERROR."""
    origin: str = ""
    """Where the span was read: ``traces.jsonl:17``, a Jaeger URL; empty for live spans."""


@dataclass(frozen=True)
class RunTree:
    """One finished run of a workflow with every span of it."""

    workflow: str
    """``gen_ai.workflow.name``."""
    root: TracedSpan
    spans: tuple[TracedSpan, ...]
    """The workflow span's descendants, in any order."""
    trace_id: str = ""
    variant: str | None = None
    success: bool | None = None
    """``chainlat.outcome.success``, merged from outcome spans; None when not recorded."""
    score: float | None = None
    """``chainlat.outcome.score``, merged from outcome spans; None when not recorded."""
    origin: str = ""
    """Where the run was read (its workflow span's origin), for messages."""

    @property
    def variant_label(self) -> str:
        """The variant, or ``(none)``."""
        return self.variant if self.variant is not None else NO_VARIANT

    @property
    def records(self) -> list[SpanRecord]:
        """The descendants' records, for :func:`compute_rollup`."""
        return [s.record for s in self.spans]

    def rollup(self) -> Rollup:
        """The run's rollup, computed from its spans."""
        return compute_rollup(self.root.record, self.records)


def record_of(
    span_id: int,
    parent_id: int | None,
    name: str,
    start_ns: int,
    end_ns: int,
    attributes: Attributes,
) -> SpanRecord:
    """The rollup's record of a span, from its attributes."""
    input_tokens = attributes.get(attr.GEN_AI_USAGE_INPUT_TOKENS)
    output_tokens = attributes.get(attr.GEN_AI_USAGE_OUTPUT_TOKENS)
    return SpanRecord(
        span_id=span_id,
        parent_id=parent_id,
        name=name,
        start_ns=start_ns,
        end_ns=end_ns,
        kind=classify(attributes),
        cache_hit=attributes.get(attr.CACHE_HIT) is True,
        input_tokens=_int_or_none(input_tokens),
        output_tokens=_int_or_none(output_tokens),
    )


def _int_or_none(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)  # OTLP JSON carries 64-bit integers as strings
    return None


def _outcome(attributes: Attributes) -> tuple[bool | None, float | None]:
    success = attributes.get(attr.OUTCOME_SUCCESS)
    score = attributes.get(attr.OUTCOME_SCORE)
    number: float | None = None
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        number = float(score)
    return (success if isinstance(success, bool) else None), number


def runs_of_trace(trace_id: str, spans: Iterable[TracedSpan], *, origin: str = "") -> list[RunTree]:
    """The top-level workflow runs of one trace, with outcomes merged, in start order.

    A workflow nested in another is a step of the outer run, not a run of its own.
    """
    every = list(spans)
    by_id = {s.record.span_id: s for s in every}
    children: dict[int, list[TracedSpan]] = {}
    for span in every:
        if span.record.parent_id is not None:
            children.setdefault(span.record.parent_id, []).append(span)

    def inside_workflow(span: TracedSpan) -> bool:
        seen = {span.record.span_id}
        parent = by_id.get(span.record.parent_id) if span.record.parent_id is not None else None
        while parent is not None and parent.record.span_id not in seen:
            if parent.record.kind == "workflow":
                return True
            seen.add(parent.record.span_id)
            pid = parent.record.parent_id
            parent = by_id.get(pid) if pid is not None else None
        return False

    tops = [s for s in every if s.record.kind == "workflow" and not inside_workflow(s)]
    tops.sort(key=lambda s: (s.record.start_ns, s.record.span_id))
    outcomes: dict[int, tuple[bool | None, float | None]] = {
        t.record.span_id: _outcome(t.attributes) for t in tops
    }
    late = sorted(
        (s for s in every if s.record.name == attr.OUTCOME_SPAN_NAME and s.record.kind is None),
        key=lambda s: s.record.end_ns,
    )
    for span in late:
        parent_id = span.record.parent_id
        if parent_id in outcomes:
            target: int | None = parent_id
        elif len(tops) == 1:
            target = tops[0].record.span_id
        else:
            continue
        assert target is not None
        success, score = _outcome(span.attributes)
        old_success, old_score = outcomes[target]
        outcomes[target] = (
            success if success is not None else old_success,
            score if score is not None else old_score,
        )

    runs: list[RunTree] = []
    for top in tops:
        descendants: list[TracedSpan] = []
        stack = [top.record.span_id]
        seen = set(stack)
        while stack:
            for child in children.get(stack.pop(), ()):
                if child.record.span_id in seen:
                    continue
                seen.add(child.record.span_id)
                if child.record.name == attr.OUTCOME_SPAN_NAME and child.record.kind is None:
                    continue
                descendants.append(child)
                stack.append(child.record.span_id)
        variant = top.attributes.get(attr.VARIANT)
        success, score = outcomes[top.record.span_id]
        name = top.attributes.get(attr.GEN_AI_WORKFLOW_NAME)
        runs.append(
            RunTree(
                workflow=str(name) if name is not None else top.record.name,
                root=top,
                spans=tuple(descendants),
                trace_id=trace_id,
                variant=str(variant) if variant is not None else None,
                success=success,
                score=score,
                origin=origin or top.origin,
            )
        )
    return runs


def traced_span(span: ReadableSpan) -> TracedSpan | None:
    """An SDK span as a :class:`TracedSpan`; None when it has not ended."""
    from opentelemetry.trace import StatusCode

    context = span.context
    if context is None or span.start_time is None or span.end_time is None:
        return None
    attributes = dict(span.attributes or {})
    return TracedSpan(
        record_of(
            context.span_id,
            span.parent.span_id if span.parent is not None else None,
            span.name,
            span.start_time,
            span.end_time,
            attributes,
        ),
        attributes,
        error=span.status.status_code is StatusCode.ERROR,
    )


def runs_from_spans(spans: Iterable[ReadableSpan]) -> list[RunTree]:
    """The workflow runs among finished SDK spans (an in-memory exporter's), by trace."""
    traces: dict[int, list[TracedSpan]] = {}
    for span in spans:
        traced = traced_span(span)
        if traced is not None and span.context is not None:
            traces.setdefault(span.context.trace_id, []).append(traced)
    runs: list[RunTree] = []
    for trace_id, members in traces.items():
        runs.extend(runs_of_trace(f"{trace_id:032x}", members))
    runs.sort(key=lambda r: r.root.record.start_ns)
    return runs


# -- reading ------------------------------------------------------------------------------


def read_run_trees(
    sources: Iterable[str | os.PathLike[str] | TraceSource],
    *,
    counters: ReadCounters | None = None,
) -> Iterator[RunTree]:
    """The workflow runs of trace files or sources, as span trees with attributes, streamed.

    Reads what :func:`chainlat.traces.read_traces` reads (OTLP/JSON lines, plain
    or gzip, one OTLP/JSON document, a Jaeger JSON download, a
    :class:`~chainlat.traces.JaegerSource`) with the same completeness rule, and
    hands out the runs of each trace once it is complete, with the outcome spans
    of its source merged (:func:`runs_of_trace`), in the order traces complete.

    Raises:
        TraceSourceError: a file is missing, empty, truncated or has a corrupt line;
            Jaeger cannot be reached.
    """
    from chainlat.traces import read_traces

    for trace in read_traces(sources, counters=counters):
        runs = runs_of_trace(trace.trace_id, trace.spans)
        if counters is not None:
            counters.workflows += len(runs)
        yield from runs


def load_run_trees(sources: Iterable[str | os.PathLike[str] | TraceSource]) -> list[RunTree]:
    """Every run of the sources, one source after the other, each source's in start order."""
    runs: list[RunTree] = []
    for source in sources:
        found = sorted(read_run_trees([source]), key=lambda r: r.root.record.start_ns)
        runs.extend(found)
    return runs


def source_name(source: str | os.PathLike[str] | TraceSource) -> str:
    """A trace file's path or a source's name, for messages."""
    return os.fspath(source) if isinstance(source, (str, os.PathLike)) else source.name
