"""Workflow runs as span trees with their attributes: what profiles, what-if and compare read.

Pure and stdlib only. The budget statistics need a run's timings; the trade-off
analysis needs more: the model, tokens and latency breakdown of every call, the
run's variant and its outcome. A :class:`RunTree` keeps the run's
:class:`~chainlat._rollup.SpanRecord` tree (so :func:`compute_rollup` can be
run on it, as recorded or rebuilt) and each span's attributes.

Outcomes recorded after the fact (``chainlat.record_outcome(trace_id=...)``) are
small ``record_outcome`` spans in the run's trace; :func:`runs_of_trace` merges
them onto the workflow: the workflow span they are a child of, else the trace's
only top-level workflow. An outcome on the workflow span itself comes first;
later outcome spans override it, in order of their end time.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from chainlat import _attributes as attr
from chainlat._errors import TraceSourceError
from chainlat._rollup import Rollup, SpanRecord, classify, compute_rollup

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

Attributes = Mapping[str, object]
NO_VARIANT = "(none)"
"""The variant label of runs recorded without one."""


@dataclass(frozen=True, slots=True)
class TracedSpan:
    """One span of a trace: the rollup's record and the span's attributes."""

    record: SpanRecord
    attributes: Attributes = field(default_factory=dict)
    error: bool = False
    """The span ended with status ERROR."""


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
    """Where the run was read from, for messages."""

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
                origin=origin,
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


# -- files ----------------------------------------------------------------------------------

_KEPT_KEYS: Final = frozenset(
    {
        attr.STEP_KIND,
        attr.GEN_AI_OPERATION_NAME,
        attr.GEN_AI_WORKFLOW_NAME,
        attr.GEN_AI_REQUEST_MODEL,
        attr.GEN_AI_RESPONSE_MODEL,
        attr.GEN_AI_USAGE_INPUT_TOKENS,
        attr.GEN_AI_USAGE_OUTPUT_TOKENS,
        attr.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
        attr.LATENCY_TTFT_MS,
        attr.CACHE_HIT,
        attr.DB_SYSTEM,
        attr.DB_SYSTEM_NAME,
        attr.ERROR_TYPE,
        attr.VARIANT,
        attr.OUTCOME_SUCCESS,
        attr.OUTCOME_SCORE,
    }
)
"""Attributes the trade-off analysis reads (besides every ``chainlat.latency.*``)."""


def _kept(key: object) -> bool:
    return isinstance(key, str) and (key in _KEPT_KEYS or key.startswith("chainlat.latency."))


def read_run_trees(sources: Iterable[str | os.PathLike[str]]) -> Iterator[RunTree]:
    """The workflow runs of trace files, as span trees with attributes.

    Takes what :class:`chainlat.traces.FileSource` takes (OTLP/JSON lines, plain
    or gzip, one OTLP/JSON document, a Jaeger JSON download) and parses spans
    with the same code, so the same files are accepted and the same errors given.
    Unlike ``read_runs`` it holds a file's spans until the file ends: the
    analysis needs every run anyway.

    Raises:
        TraceSourceError: the file is missing, empty, truncated or has a corrupt line.
    """
    for source in sources:
        yield from _read_file(os.fspath(source))


def _read_file(name: str) -> Iterator[RunTree]:
    from chainlat import traces

    by_trace: dict[str, list[TracedSpan]] = {}
    for doc, origin in _documents(name):
        try:
            for trace_id, span in _spans_of(doc, origin):
                by_trace.setdefault(trace_id, []).append(span)
        except traces._BadSpan as exc:
            raise TraceSourceError(f"{origin}: {exc}") from None
    runs: list[RunTree] = []
    for trace_id, spans in by_trace.items():
        runs.extend(runs_of_trace(trace_id, spans, origin=name))
    runs.sort(key=lambda r: r.root.record.start_ns)
    yield from runs


def _documents(name: str) -> Iterator[tuple[object, str]]:
    from chainlat import traces

    try:
        raw = Path(name).read_bytes()
    except FileNotFoundError:
        raise TraceSourceError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise TraceSourceError(f"{name}: is a directory, not a trace file") from None
    except OSError as exc:
        raise TraceSourceError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as exc:
            raise TraceSourceError(f"{name}: truncated or corrupt gzip data ({exc})") from None
    if not raw.strip():
        raise TraceSourceError(f"{name}: empty file: no spans to read")
    lines = raw.splitlines(keepends=True)
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = traces._loads(line)
        except ValueError as exc:
            if number == 1 and line.lstrip()[:1] in (b"{", b"["):
                break  # one pretty-printed document rather than JSON lines
            if number == len(lines) and not line.endswith(b"\n"):
                raise TraceSourceError(
                    f"{name}:{number}: truncated: the file ends in the middle of a record"
                ) from None
            raise TraceSourceError(
                f"{name}:{number}: not valid JSON ({traces._json_problem(exc)})"
            ) from None
        yield doc, f"{name}:{number}"
    else:
        return
    try:
        whole = json.loads(raw)
    except ValueError as exc:
        raise TraceSourceError(f"{name}: not valid JSON ({traces._json_problem(exc)})") from None
    for doc in whole if isinstance(whole, list) else [whole]:
        yield doc, f"{name}:1"


def _spans_of(doc: object, origin: str) -> Iterator[tuple[str, TracedSpan]]:
    from chainlat import traces

    if isinstance(doc, dict) and isinstance(doc.get("result"), dict):
        doc = doc["result"]  # a saved api/v3 response
    if isinstance(doc, dict) and "resourceSpans" in doc:
        resources = doc["resourceSpans"]
        for i, resource in enumerate(resources if isinstance(resources, list) else ()):
            scopes = resource.get("scopeSpans") if isinstance(resource, dict) else None
            for j, scope in enumerate(scopes or ()):
                spans = scope.get("spans") if isinstance(scope, dict) else None
                for k, raw in enumerate(spans or ()):
                    where = f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"
                    parsed = traces._otlp_span(raw, where, origin)
                    attributes = {
                        item["key"]: traces._any_value(item.get("value"))
                        for item in raw.get("attributes") or ()
                        if isinstance(item, dict) and _kept(item.get("key"))
                    }
                    yield parsed.trace_id, _traced(parsed.record, attributes, parsed.error)
        return
    found = traces._jaeger_traces(doc)
    if found is None:
        raise traces._BadSpan(
            "expected an OTLP/JSON request (resourceSpans) or a Jaeger trace", "got another object"
        )
    for index, trace in enumerate(found):
        parsed_spans = traces._jaeger_trace(trace, f"data[{index}]", origin)
        for raw, parsed in zip(trace.get("spans") or (), parsed_spans, strict=True):
            attributes = {}
            for tag in raw.get("tags") or ():
                if isinstance(tag, dict) and _kept(tag.get("key")):
                    attributes[tag["key"]] = _jaeger_value(tag)
            yield parsed.trace_id, _traced(parsed.record, attributes, parsed.error)


def _jaeger_value(tag: Mapping[str, object]) -> object:
    value, kind = tag.get("value"), tag.get("type")
    try:
        if kind == "int64" and isinstance(value, (str, int)):
            return int(value)
        if kind == "float64" and isinstance(value, (str, int, float)):
            return float(value)
    except ValueError:
        return None
    if kind == "bool" and isinstance(value, str):
        return value == "true"
    return value


def _traced(record: SpanRecord, attributes: dict[str, object], error: bool) -> TracedSpan:
    # The record's step kind and tokens come from the reader; the rest from attributes.
    return TracedSpan(record, attributes, error=error)
