"""The timeline of a run rebuilt with some steps' durations changed and some dropped.

Dependency rule, inferred from timestamps: among the children of one span, step
B *waited on* step A when A ended before B started (``A.end <= B.start``). In the
rebuilt run B starts at the latest new end among the steps it waited on, plus
the gap it had after the last of them ended (the glue code between them); a step
that waited on nothing keeps its offset from its parent's start. A parent ends
at its last child's new end plus the time it ran after its last child. A changed
step's own children are stretched with it. So steps that overlapped stay
parallel, a sequence stays a sequence, and a shorter step moves everything that
waited on it earlier. The rule is conservative: a step that merely happened to
end before another started counts as a dependency, so lengthening it can delay
a step that did not really wait for it.

Example::

    new_root, new_spans = rebuild_timeline(run.root_record, run.records, {7: StepOverride(MS)})
    print(compute_rollup(new_root, new_spans).total_ms)
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chainlat._core.rollup import SpanRecord
    from chainlat._core.runs import WorkflowRun

__all__ = ["StepOverride", "counted_steps", "rebuild_timeline"]


@dataclass(frozen=True, slots=True)
class StepOverride:
    """The new duration of one step, and what else changes on its span."""

    duration_ns: int
    name: str | None = None
    cache_hit: bool | None = None
    input_tokens: int | None = None
    ttft_ms: float | None = None
    """The new time to first token, for a streamed call."""


def counted_steps(run: WorkflowRun) -> dict[int, SpanRecord]:
    """The run's steps by span id: spans of a kind, not nested in a step of the same kind."""
    children: dict[int, list[SpanRecord]] = {}
    for span in run.spans:
        if span.record.parent_id is not None:
            children.setdefault(span.record.parent_id, []).append(span.record)
    steps: dict[int, SpanRecord] = {}
    stack: list[tuple[SpanRecord, str | None]] = [(run.root_record, None)]
    while stack:
        rec, around = stack.pop()
        for kid in children.get(rec.span_id, ()):
            if kid.kind is not None and (kid.kind == "workflow" or kid.kind != around):
                steps[kid.span_id] = kid
                stack.append((kid, kid.kind if kid.kind != "workflow" else around))
            else:
                stack.append((kid, around))
    return steps


def rebuild_timeline(
    root: SpanRecord,
    spans: Iterable[SpanRecord],
    overrides: Mapping[int, StepOverride],
    dropped: Collection[int] = (),
) -> tuple[SpanRecord, list[SpanRecord]]:
    """The run's spans re-timed with some steps' durations changed and some dropped.

    Applies the dependency rule of this module's docstring; children are first
    clipped to their parent's interval, as in the rollup. Returns the new root and
    the new descendants (dropped steps and their subtrees left out), ready for
    :func:`~chainlat._core.rollup.compute_rollup`.
    """
    rebuild = _Rebuild(root, spans, overrides, dropped)
    root_end = max(root.end_ns, root.start_ns)
    new_root_end = rebuild.place(root, root.start_ns, root_end, root.start_ns, True)
    return replace(root, end_ns=new_root_end), rebuild.out


_Kid = tuple["SpanRecord", int, int]
"""A child span with its start and end clipped to its parent's interval."""


class _Rebuild:
    """One rebuild: the spans by parent, and the re-timed spans emitted so far."""

    def __init__(
        self,
        root: SpanRecord,
        spans: Iterable[SpanRecord],
        overrides: Mapping[int, StepOverride],
        dropped: Collection[int],
    ) -> None:
        self.root = root
        self.overrides = overrides
        self.gone = set(dropped)
        self.by_parent: dict[int, list[SpanRecord]] = {}
        for rec in spans:
            if rec.parent_id is not None and rec.span_id != root.span_id:
                self.by_parent.setdefault(rec.parent_id, []).append(rec)
        self.out: list[SpanRecord] = []
        self.seen: set[int] = {root.span_id}

    def kids_of(self, rec: SpanRecord, start: int, end: int) -> list[_Kid]:
        kids = []
        for kid in self.by_parent.get(rec.span_id, ()):
            if kid.span_id in self.seen:  # a cycle in a malformed trace
                continue
            self.seen.add(kid.span_id)
            kid_start = min(max(kid.start_ns, start), end)
            kids.append((kid, kid_start, max(min(kid.end_ns, end), kid_start)))
        kids.sort(key=lambda k: (k[1], k[2], k[0].span_id))
        return kids

    def emit(self, rec: SpanRecord, start: int, end: int, override: StepOverride | None) -> None:
        if override is None:
            self.out.append(replace(rec, start_ns=start, end_ns=end))
            return
        self.out.append(
            replace(
                rec,
                start_ns=start,
                end_ns=end,
                name=override.name or rec.name,
                cache_hit=rec.cache_hit if override.cache_hit is None else override.cache_hit,
                input_tokens=rec.input_tokens
                if override.input_tokens is None or rec.input_tokens is None
                else override.input_tokens,
                ttft_ms=rec.ttft_ms
                if override.ttft_ms is None or rec.ttft_ms is None
                else override.ttft_ms,
            )
        )

    def stretch(
        self,
        rec: SpanRecord,
        start: int,
        end: int,
        to: Callable[[int], int],
        visible: bool,
        override: StepOverride | None,
    ) -> None:
        for kid, kid_start, kid_end in self.kids_of(rec, start, end):
            if visible:
                # The same-kind spans inside a changed call are that call.
                inner = override if kid.kind == rec.kind else None
                self.emit(kid, to(kid_start), to(kid_end), inner)
            self.stretch(kid, kid_start, kid_end, to, visible, override)

    def place(self, rec: SpanRecord, start: int, end: int, new_start: int, visible: bool) -> int:
        """Re-time ``rec`` (clipped to ``start``..``end``) from ``new_start``; its new end."""
        override = self.overrides.get(rec.span_id)
        if rec.span_id in self.gone or override is not None:
            return self.changed(rec, start, end, new_start, visible, override)
        kids = self.kids_of(rec, start, end)
        if not kids:
            new_end = new_start + (end - start)
        else:
            ends: list[int] = []
            for i, (kid, kid_start, kid_end) in enumerate(kids):
                waited = [j for j in range(i) if kids[j][2] <= kid_start]
                if waited:
                    last = max(kids[j][2] for j in waited)
                    kid_new_start = max(ends[j] for j in waited) + (kid_start - last)
                else:
                    kid_new_start = new_start + (kid_start - start)
                ends.append(self.place(kid, kid_start, kid_end, kid_new_start, visible))
            new_end = max(ends) + (end - max(k[2] for k in kids))
        if visible and rec is not self.root:
            self.emit(rec, new_start, new_end, None)
        return new_end

    def changed(
        self,
        rec: SpanRecord,
        start: int,
        end: int,
        new_start: int,
        visible: bool,
        override: StepOverride | None,
    ) -> int:
        """A changed or dropped step: its new length, its children stretched with it."""
        dropped = rec.span_id in self.gone
        new_length = 0 if dropped else max(override.duration_ns if override else 0, 0)
        factor = new_length / (end - start) if end > start else 0.0

        def to(t: int) -> int:
            return new_start + round((t - start) * factor)

        keep = visible and not dropped
        self.stretch(rec, start, end, to, keep, override)
        new_end = new_start + new_length
        if keep and rec is not self.root:
            self.emit(rec, new_start, new_end, override)
        return new_end
