"""The runs of the traces received, each once its trace looks complete, for a line each.

A trace looks complete once its local root (a span without a parent, or whose parent is
remote) has arrived and no span of it has for ``settle_s`` seconds: the spans of a run end
before its root, so they come in the root's batch or an earlier one. The trace's spans are
then read by :func:`chainlat.traces.read_runs`, the one reader, so that a line and the
final summary agree. Only what is shown live is bounded here: past ``max_open_traces``
traces, ``max_open_spans`` spans or ``max_open_bytes`` bytes (as the file's lines hold
them) waiting, the oldest are dropped from the live view (counted); the file and the final
summary have every span.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from chainlat._core.amounts import amount
from chainlat._core.errors import shorten
from chainlat._core.redact import visible

if TYPE_CHECKING:
    from chainlat._core.runs import WorkflowRun
    from chainlat.budgets import Budgets

Json = dict[str, Any]

DEFAULT_SETTLE_S: Final = 0.5
_REMOTE_PARENT: Final = 0x200
_SWEEP_S: Final = 0.1
_NAME_CHARS: Final = 200
"""A name (or a verdict naming a step) longer than this is cut on a run's line: a span can
carry a name of megabytes."""


@dataclass
class _Open:
    lines: list[Json] = field(default_factory=list)
    spans: int = 0
    size: int = 0
    rooted: bool = False
    last_s: float = 0.0


class LiveRuns:
    """Hands each run of the traces received to ``on_run``, once its trace looks complete.

    Example::

        live = LiveRuns(lambda run: print(run.workflow, run.total_ms))
        live.add(document, size)  # each request received, and its size in bytes
        live.close()        # the traces still open, with their roots, are handed out
    """

    def __init__(
        self,
        on_run: Callable[[WorkflowRun], None],
        *,
        settle_s: float = DEFAULT_SETTLE_S,
        max_open_traces: int = 10_000,
        max_open_spans: int = 1_000_000,
        max_open_bytes: int = 128 * 1024 * 1024,
    ) -> None:
        self._on_run = on_run
        self._settle_s = settle_s
        self._max_traces = max_open_traces
        self._max_spans = max_open_spans
        self._max_bytes = max_open_bytes
        self._open: dict[str, _Open] = {}
        self._spans = 0
        self._bytes = 0
        self.dropped_traces = 0
        """Traces left out of the live view by its bounds (the file has them)."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._dir = tempfile.TemporaryDirectory(prefix="chainlat-live-")
        self._thread = threading.Thread(target=self._sweep, name="chainlat-live", daemon=True)
        self._thread.start()

    def add(self, document: Json, size: int = 0) -> None:
        """A request received: its spans, split by trace; ``size`` its bytes, each trace's
        share of them counted by its spans (an orphan span of a megabyte weighs a megabyte:
        a count of spans alone would let traces that never complete hold gigabytes)."""
        now = time.monotonic()
        pieces = _by_trace(document)
        total = sum(spans for _, _, spans, _ in pieces) or 1
        with self._lock:
            for trace_id, line, spans, rooted in pieces:
                entry = self._open.pop(trace_id, None) or _Open()
                self._open[trace_id] = entry  # moved to the end: the most recently extended
                entry.lines.append(line)
                entry.spans += spans
                entry.size += size * spans // total
                entry.rooted = entry.rooted or rooted
                entry.last_s = now
                self._spans += spans
                self._bytes += size * spans // total
            while self._open and (
                len(self._open) > self._max_traces
                or self._spans > self._max_spans
                or self._bytes > self._max_bytes
            ):
                oldest = self._open.pop(next(iter(self._open)))
                self._spans -= oldest.spans
                self._bytes -= oldest.size
                self.dropped_traces += 1

    def _due(self, everything: bool) -> list[_Open]:
        now = time.monotonic()
        with self._lock:
            due = [
                tid
                for tid, entry in self._open.items()
                if entry.rooted and (everything or now - entry.last_s >= self._settle_s)
            ]
            found = [self._open.pop(tid) for tid in due]
            self._spans -= sum(entry.spans for entry in found)
            self._bytes -= sum(entry.size for entry in found)
        return found

    def _sweep(self) -> None:
        while not self._stop.wait(_SWEEP_S):
            self._hand_out(self._due(everything=False))

    def _hand_out(self, traces: list[_Open]) -> None:
        """The runs of ``traces`` to ``on_run``, in the order they started. They are read
        together, in one file by one read (a read's set-up costs milliseconds: 5,000 traces
        still open at the end, read one by one, held ``serve`` 18 s after Ctrl-C); if the
        reader refuses them together, each alone, so that a trace it refuses costs only its
        own runs (judged, and warned of, at the end)."""
        if not traces:
            return
        runs = self._runs(traces)
        if runs is None:
            runs = [run for entry in traces for run in self._runs([entry]) or ()]
        for run in sorted(runs, key=lambda r: r.start_ns):
            self._on_run(run)

    def _runs(self, traces: list[_Open]) -> list[WorkflowRun] | None:
        from chainlat.traces import FileSource, read_runs

        path = os.path.join(self._dir.name, "traces.jsonl")
        with open(path, "w", encoding="utf-8") as file:
            for entry in traces:
                for line in entry.lines:
                    file.write(json.dumps(line, separators=(",", ":")) + "\n")
        try:
            return [run for run in read_runs([FileSource(path)]) if not run.nested]
        except Exception:
            return None

    def close(self) -> None:
        """Stop sweeping; hand out every trace still open that has its root."""
        self._stop.set()
        self._thread.join()
        self._hand_out(self._due(everything=True))
        self._dir.cleanup()


@dataclass
class _Piece:
    """The spans of one trace in one request, under their resources and scopes."""

    scopes: dict[tuple[int, int], tuple[Json, Json, list[Json]]] = field(default_factory=dict)
    spans: int = 0
    rooted: bool = False

    def document(self) -> Json:
        groups: dict[int, Json] = {}
        for (resource_key, _), (resource, scope, spans) in self.scopes.items():
            group = groups.setdefault(
                resource_key, {"resource": resource.get("resource", {}), "scopeSpans": []}
            )
            group["scopeSpans"].append({"scope": scope.get("scope", {}), "spans": spans})
        return {"resourceSpans": list(groups.values())}


def _by_trace(document: Json) -> list[tuple[str, Json, int, bool]]:
    """A request's spans as one document per trace: (trace id, document, spans, has a root)."""
    found: dict[str, _Piece] = {}
    for resource in document.get("resourceSpans", ()):
        for scope in resource.get("scopeSpans", ()):
            for span in scope.get("spans", ()):
                piece = found.setdefault(str(span.get("traceId", "")), _Piece())
                key = (id(resource), id(scope))
                piece.scopes.setdefault(key, (resource, scope, []))[2].append(span)
                piece.spans += 1
                flags = span.get("flags", 0)
                remote = isinstance(flags, int) and bool(flags & _REMOTE_PARENT)
                piece.rooted = piece.rooted or not span.get("parentSpanId") or remote
    return [(tid, p.document(), p.spans, p.rooted) for tid, p in found.items()]


def run_line(run: WorkflowRun, budgets: Budgets | None) -> str:
    """One line for a run received: its workflow, total, first output, and the verdict of the
    per-run limits of its workflow's budget, if it has one.

    The verdict is ``check``'s own (:func:`chainlat.budgets.evaluate` on this run alone), so
    that the line and the summary agree: a cost is priced with the budget file's
    ``[prices]``, which win over a cost recorded on the run, and a value that depends on a
    model call's unrecorded end is not judged. A step this run does not have is no verdict."""
    from chainlat._core.runs import BudgetViolation
    from chainlat.budgets import ABSENT_REASONS, evaluate, unjudged_in_run

    first = run.first_output_ms
    parts = [
        shorten(visible(run.workflow), _NAME_CHARS),
        f"total {amount(run.total_ms, 'ms')}",
        f"first output {amount(first, 'ms') if first is not None else '-'}"
        + (" (a bound)" if first is not None and run.first_output_bound else ""),
    ]
    if budgets is not None and run.workflow in budgets.workflows:
        verdicts = [
            v
            for v in evaluate([run], budgets).verdicts
            if v.workflow == run.workflow and v.kind == "run"
        ]
        broken = [
            BudgetViolation(v.workflow, v.target, v.limit_ms, v.actual_ms, v.unit)
            for v in verdicts
            if v.status == "broken" and v.actual_ms is not None
        ]
        unjudged = [
            v for v in verdicts if v.status == "not_judged" and v.reason not in ABSENT_REASONS
        ]
        if broken:
            parts.append(
                "broken: " + "; ".join(shorten(visible(str(v)), _NAME_CHARS) for v in broken)
            )
        elif unjudged:
            # The run's own reason reads better on its line than the summary's "1 of 1 runs".
            budget = budgets.workflows[run.workflow]
            why = unjudged_in_run(run, budget, budgets.model_prices()) or unjudged[0].why
            reason = visible(why or str(unjudged[0].reason))
            parts.append(f"not judged: {shorten(reason, _NAME_CHARS)}")
        else:
            parts.append("kept")
    return ", ".join(parts[:3]) + (f": {parts[3]}" if len(parts) > 3 else "")
