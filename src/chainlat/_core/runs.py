"""Plain records of finished workflow runs: what budgets, statistics and reports consume.

Pure and stdlib only. A :class:`WorkflowRun` is built the same way from a live
workflow (the span processor's records) and from a trace file (the readers'
records), so a run judged in the application and the same run judged in CI
get the same numbers.

Which spans are *steps* here follows the rollup: a span classified as
inference, data or tool counts, unless it sits inside a step of the same kind
(the HTTP-level model span inside a hand-written ``chainlat.inference`` is the
same call seen twice). A nested workflow counts as a step of the outer one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

from chainlat._core.rollup import Rollup, SpanRecord, compute_rollup

StepKindName = Literal["inference", "data", "tool", "workflow"]

_NS_PER_MS: Final = 1_000_000
_COUNTED: Final = frozenset({"inference", "data", "tool"})


@dataclass(frozen=True, slots=True)
class StepTiming:
    """One step of a run: a model call, data stage, tool call or nested workflow."""

    name: str
    """The span name, which budgets key steps by (``chat gpt-4o``, ``data retrieve-docs``)."""
    kind: StepKindName
    start_ns: int
    end_ns: int
    depth: int = 0
    """0 for a step directly in the workflow, 1 for a step inside that step, ..."""
    ttft_ms: float | None = None
    """Time to first token, for streamed model calls."""
    cache_hit: bool = False

    @property
    def duration_ms(self) -> float:
        """Wall time of the step."""
        return (self.end_ns - self.start_ns) / _NS_PER_MS


@dataclass(frozen=True, slots=True)
class WorkflowRun:
    """One finished run of a workflow: its rollup and its steps in start order."""

    workflow: str
    """``gen_ai.workflow.name``."""
    rollup: Rollup
    steps: tuple[StepTiming, ...]
    start_ns: int
    end_ns: int
    trace_id: str = ""
    """Hex trace id, when known."""
    span_id: str = ""
    """Hex span id of the workflow span, when known."""
    error: bool = False
    """The workflow span ended with status ERROR."""
    origin: str = ""
    """Where the run was seen: ``traces.jsonl:17``, a Jaeger URL, a test id."""

    @property
    def total_ms(self) -> float:
        """Wall time of the run."""
        return self.rollup.total_ms


@dataclass(frozen=True, slots=True)
class BudgetViolation:
    """One limit a run (or a set of runs) broke.

    ``target`` is the limit's key path inside the workflow's budget, as written
    in the budget file: ``total``, ``p95.data``, ``steps."chat gpt-4o".ttft``.
    """

    workflow: str
    target: str
    limit_ms: float
    actual_ms: float

    def __str__(self) -> str:
        return (
            f"{self.workflow}: {self.target} {self.actual_ms:.1f} ms > limit {self.limit_ms:g} ms"
        )


def step_key(name: str) -> str:
    """A step name as it appears in a key path: quoted when it is not a bare key."""
    bare = name.replace("-", "").replace("_", "")
    if bare.isascii() and bare.isalnum():
        return name
    escaped = name.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def steps_of(root: SpanRecord, spans: Iterable[SpanRecord]) -> tuple[StepTiming, ...]:
    """The steps under a workflow span, in start order (ties: outer first)."""
    by_parent: dict[int, list[SpanRecord]] = {}
    for rec in spans:
        if rec.parent_id is not None and rec.span_id != root.span_id:
            by_parent.setdefault(rec.parent_id, []).append(rec)
    found: list[StepTiming] = []
    # Each frame: a span, the kind of the innermost step around it ("" for
    # none), the depth a step found below it gets, and the index in ``found``
    # of the step that owns it (-1: the workflow itself).
    stack: list[tuple[SpanRecord, str, int, int]] = [(root, "", 0, -1)]
    seen = {root.span_id}
    while stack:
        parent, around, depth, owner = stack.pop()
        for rec in by_parent.get(parent.span_id, ()):
            if rec.span_id in seen:  # a cycle in a malformed trace
                continue
            seen.add(rec.span_id)
            kind = rec.kind
            if kind == "workflow" or (kind in _COUNTED and kind != around):
                assert kind is not None
                found.append(
                    StepTiming(
                        name=rec.name,
                        kind=kind,
                        start_ns=rec.start_ns,
                        end_ns=max(rec.end_ns, rec.start_ns),
                        depth=depth,
                        ttft_ms=rec.ttft_ms,
                        cache_hit=rec.cache_hit,
                    )
                )
                # As in the rollup, a nested workflow takes the kind around it.
                inner = kind if kind in _COUNTED else around
                stack.append((rec, inner, depth + 1, len(found) - 1))
                continue
            if kind is not None and kind == around and owner >= 0 and found[owner].kind == kind:
                # The same operation seen twice: its first token and cache hit
                # belong to the step around it.
                outer = found[owner]
                ttft = outer.ttft_ms
                if ttft is None and rec.ttft_ms is not None:
                    ttft = (rec.start_ns - outer.start_ns) / _NS_PER_MS + rec.ttft_ms
                if ttft != outer.ttft_ms or (rec.cache_hit and not outer.cache_hit):
                    found[owner] = StepTiming(
                        outer.name,
                        outer.kind,
                        outer.start_ns,
                        outer.end_ns,
                        outer.depth,
                        ttft,
                        outer.cache_hit or rec.cache_hit,
                    )
            stack.append((rec, around, depth, owner))
    found.sort(key=_start_then_depth)  # stable: ties keep the order found
    return tuple(found)


def _start_then_depth(step: StepTiming) -> tuple[int, int]:
    return step.start_ns, step.depth


def build_run(
    workflow: str,
    root: SpanRecord,
    spans: Iterable[SpanRecord],
    *,
    rollup: Rollup | None = None,
    trace_id: str = "",
    error: bool = False,
    origin: str = "",
) -> WorkflowRun:
    """A run from its workflow span and descendants; the rollup is computed when not given."""
    records = list(spans)
    if rollup is None:
        rollup = compute_rollup(root, records)
    return WorkflowRun(
        workflow=workflow,
        rollup=rollup,
        steps=steps_of(root, records),
        start_ns=root.start_ns,
        end_ns=max(root.end_ns, root.start_ns),
        trace_id=trace_id,
        span_id=f"{root.span_id:016x}",
        error=error,
        origin=origin,
    )
