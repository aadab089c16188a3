"""Assembling parsed spans into complete traces, and the source protocol every reader follows."""

from __future__ import annotations

import collections
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from chainlat._core import attributes as attr
from chainlat._core import clock, conventions, tree, turn_start
from chainlat._core.records import WIRE, SpanRecord
from chainlat._core.runs import TracedSpan, WorkflowRun
from chainlat._core.trace_runs import is_outcome, runs_of_trace, workflow_name
from chainlat.traces._parse import Parsed

DEFAULT_SETTLE_LINES: Final = 8
_OWN_SOURCES: Final = frozenset(("chainlat", None))
"""Sources of model calls timed by the application itself (``chainlat.inference``), and
the None of every record that is no model call."""
_RECORD: Final = operator.attrgetter("record")
_SOURCE: Final = operator.attrgetter("source")
_START: Final = operator.attrgetter("start_ns")
_END: Final = operator.attrgetter("end_ns")
DEFAULT_IDLE_LINES: Final[int | None] = None
"""By default a trace is never judged on a line count alone (see :class:`Assembler`)."""
DEFAULT_MAX_OPEN_TRACES: Final = 100_000
DEFAULT_MAX_OPEN_BYTES: Final = 512 * 1024 * 1024
_JUDGED_GENERATION: Final = 32_768
"""Judged trace ids are remembered by generations of this many: the last 32,768 to 65,536."""


@dataclass
class ReadCounters:
    """What a read saw; filled in while the runs are iterated."""

    lines: int = 0
    spans: int = 0
    traces: int = 0
    workflows: int = 0
    """Workflow runs handed out."""
    late_spans: int = 0
    """Spans that arrived after their trace was judged (see ``settle_lines``)."""
    late_workflows: dict[str, int] = field(default_factory=dict)
    """Late spans by the workflow of their trace: runs of these were judged without a span
    of theirs, so the judge does not pass their limits (``incomplete_run``)."""
    peak_open_traces: int = 0
    peak_open_spans: int = 0
    """The most spans held at once: what memory grows with."""
    peak_open_bytes: int = 0
    """The most input bytes (the JSON of the spans) held at once."""
    evicted_traces: int = 0
    """Traces judged before their end because ``max_open_traces`` or ``max_open_bytes`` was
    reached: their later spans are late."""
    reopened_traces: int = 0
    """Traces judged early that got more spans, read as a trace again (a late root is still
    a run)."""
    evicted_by: str = ""
    """The option whose bound was reached first (``--max-open-traces``, ``--max-open-bytes``)."""
    skewed_spans: int = 0
    """Spans that start before their parent (clock skew between hosts); the rollup clips
    them to the parent."""
    orphan_spans: int = 0
    """Spans whose parent is not in their trace (sampling, a partial Jaeger answer); a
    span marked as having a remote parent is not counted."""
    bad_lines: int = 0
    """Lines skipped because they are not JSON or not a trace (a half-written record)."""
    first_bad_line: str = ""
    """Where the first skipped line is and what is wrong with it."""
    nonfinite_values: int = 0
    """NaN, infinite or out-of-range numbers in span attributes, ignored; a recorded rollup
    holding one is recomputed from the spans."""
    negative_spans: int = 0
    """Spans that end before they start, dropped alone (their line's other spans are read)."""
    negative_span_example: str = ""
    """Where one of them is, and what it says."""
    dropped_workflows: dict[str, int] = field(default_factory=dict)
    """Workflow spans among them, by workflow: runs that could not be read at all, so the
    judge does not pass the limits of their workflow (``incomplete_run``)."""

    side_by_side_traces: int = 0
    """Traces whose top-level runs lie side by side under a span that is no run (an agent
    framework's calls under a plain request span): each is judged apart, not the request."""
    side_by_side_runs: int = 0
    partial_traces: int = 0
    """Traces whose top-level runs lie under a span that is no run and leave steps of the
    trace outside them (a framework's task inside a request, beside the request's own
    retrieval and calls): the runs are not the whole request, and nothing judges it."""
    steps_outside: int = 0
    coarse_clock_runs: int = 0
    """Runs whose spans' starts are whole milliseconds or microseconds and their ends finer
    (OpenTelemetry JS): siblings that overlap by no more than that are taken as one after
    the other."""
    coarse_clock_ns: int = 0
    """The coarsest such resolution seen."""
    framework_timed_runs: int = 0
    """Runs with a model call traced by a framework and by no HTTP-level span: their
    inference includes the framework's own time inside its model-call spans."""
    uncounted_runs: int = 0
    """Runs whose token totals are partial: some model calls counted, another the trace
    gives no token counts for (``Rollup.uncounted_calls``), left out. A run with no count
    at all says nothing of its tokens and is not counted here."""

    rebuilt_rollups: int = 0
    """Rollups recorded on workflow spans that are impossible for their span (a negative
    part, a total longer than the span, parts that do not sum), rebuilt from the spans."""
    first_rebuilt: str = ""
    """Where the first such rollup is and what is wrong with it."""
    incomplete_runs: int = 0
    """Runs that could not be read whole (a step that ended after its workflow, a root that
    is its own parent): the judge does not pass their workflow's limits."""
    first_incomplete: str = ""
    """Where the first of them is and why."""

    def add(self, other: ReadCounters) -> None:
        """Add ``other``'s counts (peaks: the larger) to these."""
        for name, value in vars(other).items():
            mine = getattr(self, name)
            if name.startswith("peak_") or name == "coarse_clock_ns":
                setattr(self, name, max(mine, value))
            elif isinstance(value, dict):
                for key, count in value.items():
                    mine[key] = mine.get(key, 0) + count
            elif isinstance(value, str):
                setattr(self, name, mine or value)
            else:
                setattr(self, name, mine + value)

    def warnings(self) -> list[str]:
        """One line per kind of oddity seen, for the CLI to print on stderr."""
        found = []
        if self.bad_lines:
            found.append(
                f"{self.bad_lines} lines are not spans and were skipped "
                f"(the first: {self.first_bad_line})"
            )
        if self.evicted_traces:
            found.append(
                f"{self.evicted_traces} traces were judged before their end because too many "
                f"were open at once ({self.reopened_traces} got more spans later, judged "
                f"apart); raise {self.evicted_by or '--max-open-traces'}"
            )
        if self.late_spans:
            also = f" (or {self.evicted_by}, above)" if self.evicted_traces else ""
            found.append(
                f"{self.late_spans} spans arrived after their trace was judged; "
                f"raise --settle-lines{also}"
            )
        if self.skewed_spans:
            found.append(
                f"{self.skewed_spans} spans start before their parent (clock skew); "
                "clipped to the parent"
            )
        if self.orphan_spans:
            found.append(
                f"{self.orphan_spans} spans have a parent missing from their trace "
                "(sampling or a partial trace); read without it"
            )
        if self.side_by_side_traces:
            found.append(
                f"{self.side_by_side_traces} traces hold {self.side_by_side_runs} runs side by "
                "side under a span that is no run (an agent's calls in one request): each is "
                "judged as a run of its own; --roots judges the request around them"
            )
        if self.partial_traces:
            found.append(
                f"{self.partial_traces} traces hold {self.steps_outside} steps outside their "
                "runs, beside a run under a span that is no run (a framework's task inside a "
                "request): the runs are not the whole request; --roots judges the request"
            )
        if self.coarse_clock_runs:
            found.append(
                f"{self.coarse_clock_runs} runs were timed by a clock that rounds span starts to "
                f"{clock.describe(self.coarse_clock_ns)} and writes ends finer (OpenTelemetry "
                "JS): steps that overlap by no more than that are taken as one after the other"
            )
        if self.framework_timed_runs:
            found.append(
                f"{self.framework_timed_runs} runs have model calls that no HTTP-level span "
                "timed: their inference includes the framework's own time inside its model-call "
                "spans (trace the HTTP client to time them at the wire)"
            )
        if self.uncounted_runs:
            found.append(
                f"{self.uncounted_runs} runs count the tokens of some model calls and not of "
                "others (no usage recorded, or a usage of 0 and 0): their token totals leave "
                "those calls out and their cost is not known (a stream's usage comes when asked "
                'for: stream_options={"include_usage": True})'
            )
        if self.rebuilt_rollups:
            found.append(
                f"{self.rebuilt_rollups} rollups recorded on workflow spans are impossible for "
                f"their span and were rebuilt from the spans (the first: {self.first_rebuilt})"
            )
        if self.incomplete_runs:
            found.append(
                f"{self.incomplete_runs} runs could not be read whole and their workflow's "
                f"limits are not judged (the first: {self.first_incomplete})"
            )
        if self.negative_spans:
            found.append(
                f"{self.negative_spans} spans end before they start and were dropped, the "
                f"rest of their lines read (one: {self.negative_span_example})"
            )
        if self.nonfinite_values:
            found.append(
                f"{self.nonfinite_values} NaN, infinite or out-of-range numbers in span "
                "attributes were ignored; a recorded rollup holding one is recomputed from the "
                "spans"
            )
        return found


@dataclass(slots=True, unsafe_hash=True)
class Trace:
    """One complete trace: its spans as read, each with the attributes chainlat reads.

    Treated as immutable; not frozen for the reader's speed (see ``WorkflowRun``).
    """

    trace_id: str
    """32 lower-case hex digits."""
    spans: tuple[TracedSpan, ...]
    """In the order read."""

    def workflow_runs(self, *, roots: bool = False) -> list[WorkflowRun]:
        """A run for every workflow span in the trace (nested ones too), in start order;
        with ``roots``, also for every local root (see :func:`runs_of_trace`)."""
        return runs_of_trace(self.trace_id, self.spans, roots=roots)


class TraceSource(Protocol):
    """Anything traces can be read from, any number of times."""

    name: str

    def traces(self, counters: ReadCounters | None = None) -> Iterator[Trace]:
        """The traces of the source, each once it is complete."""
        ...

    def runs(self, counters: ReadCounters | None = None) -> Iterator[WorkflowRun]:
        """The workflow runs of the source, in the order their traces completed."""
        ...


def runs_of(
    traces: Iterable[Trace], counters: ReadCounters, *, roots: bool = False
) -> Iterator[WorkflowRun]:
    """The runs of each trace in turn, counted (see :meth:`Trace.workflow_runs`)."""
    for trace in traces:
        runs = trace.workflow_runs(roots=roots)
        counters.workflows += len(runs)
        for run in runs:
            if run.rebuilt:
                counters.rebuilt_rollups += 1
                if not counters.first_rebuilt:
                    counters.first_rebuilt = f"{run.origin or run.workflow}: {run.rebuilt}"
            if run.incomplete is not None:
                counters.incomplete_runs += 1
                if not counters.first_incomplete:
                    counters.first_incomplete = f"{run.origin or run.workflow}: {run.incomplete}"
            if not run.nested:
                _count_clock(run, counters)
                rollup = run.rollup
                if rollup.uncounted_calls and (rollup.input_tokens or rollup.output_tokens):
                    counters.uncounted_runs += 1
        if len(runs) > 1 and not roots:
            beside = side_by_side(trace, runs)
            if beside:
                counters.side_by_side_traces += 1
                counters.side_by_side_runs += beside
        if runs and not roots:
            outside = steps_outside(trace, runs)
            if outside:
                counters.partial_traces += 1
                counters.steps_outside += outside
        yield from runs


def side_by_side(trace: Trace, runs: list[WorkflowRun]) -> int:
    """How many top-level runs of ``trace`` lie under a span of the trace that is no run (0
    when fewer than two do): the request around them is not judged. A session's turns lie
    side by side by design (a container: LiveKit's ``agent_session``): 0."""
    if any(conventions.is_container(span.record.name) for span in trace.spans):
        return 0
    ids = {span.record.span_id for span in trace.spans}
    under = 0
    for run in runs:
        root = run.root
        if not run.nested and root is not None and root.record.parent_id in ids:
            under += 1
    return under if under > 1 else 0


_STEP_KINDS: Final = frozenset(attr.STEP_KINDS)


def steps_outside(trace: Trace, runs: list[WorkflowRun]) -> int:
    """How many steps of ``trace`` (model calls, data stages, tools) lie outside its
    top-level runs, when one of those runs lies under a span of the trace that is no run;
    0 otherwise. An unwrapped CrewAI agent under a request span: the crew's task is a run,
    the request's own retrieval and its calls after the task are not in it, and the run
    reads half the request. A session's turns leave its own spans out by design (a
    container: LiveKit's ``agent_session``): 0."""
    # Most traces read (chainlat's own, a framework's root): every run is a root, asked
    # without a set of the trace's ids.
    for run in runs:
        root = run.root
        if not run.nested and root is not None and root.record.parent_id is not None:
            break
    else:
        return 0
    top = [run.root for run in runs if not run.nested and run.root is not None]
    ids = {span.record.span_id for span in trace.spans}
    if not any(root.record.parent_id in ids for root in top):
        return 0  # under a parent that is not in the trace: the request is elsewhere
    if any(conventions.is_container(span.record.name) for span in trace.spans):
        return 0
    inside = {root.record.span_id for root in top}
    for run in runs:
        if not run.nested:
            inside.update(span.record.span_id for span in run.spans)
    return sum(
        1
        for span in trace.spans
        if span.record.kind in _STEP_KINDS and span.record.span_id not in inside
    )


def _count_clock(run: WorkflowRun, counters: ReadCounters) -> None:
    """What a run's spans say of how it was timed: its clock's resolution, and whether a
    framework's span alone times a model call."""
    root = run.root
    if root is None:
        return
    # Per run read: the loops over its spans run in C (map, the resolution's gcd), and only
    # for a run whose root's start leaves a coarse clock possible.
    records = list(map(_RECORD, run.spans))
    start_ns = root.record.start_ns
    if clock.may_be_coarse(start_ns):
        starts = list(map(_START, records))
        starts.append(start_ns)
        slack = clock.slack_ns(starts, [*map(_END, records), root.record.end_ns])
        if slack:
            counters.coarse_clock_runs += 1
            counters.coarse_clock_ns = max(counters.coarse_clock_ns, slack)
    if framework_timed(records):
        counters.framework_timed_runs += 1


def framework_timed(records: list[SpanRecord]) -> bool:
    """Whether a model call of a framework (not chainlat's own) has no HTTP-level span in
    the run to time it at the wire (only a model call's record has a source): none at all,
    or only another instrumentation's, which may have seen a stream's headers alone and
    times no call (docs/attributes.md, rule 18: Genkit's calls under Go's otelhttp)."""
    sources = set(map(_SOURCE, records))
    if sources <= _OWN_SOURCES:
        return False
    if WIRE not in sources:
        return True
    foreign = [r for r in records if r.source == WIRE and r.streamed is None]
    if not foreign:  # chainlat's wire, which says whether each call streamed
        return False
    by_id = {r.span_id: r for r in records}
    return any(tree.saw_headers_only(wire, by_id) for wire in foreign)


# --- assembling spans into traces ---------------------------------------------------------


_Judged = tuple[bool, tuple[str, ...]]
"""Whether a trace was judged early (by a bound), and the workflows of its runs."""


class _JudgedIds:
    """The ids of the traces judged lately, each with whether it was judged early.

    Kept to tell a late span (its trace was judged) from the first span of a new trace,
    for the last ``generation`` to ``2 * generation`` traces judged: the newest in one
    dict, the generation before in another, the one before that dropped. An id is kept
    as a 128-bit int (48 bytes where the string takes 88), so that this memory stays
    small beside the statistics.
    """

    __slots__ = ("_generation", "_older", "_recent", "_shared")

    def __init__(self, generation: int) -> None:
        self._generation = max(generation, 1)
        self._recent: dict[int | str, _Judged] = {}
        self._older: dict[int | str, _Judged] = {}
        self._shared: dict[_Judged, _Judged] = {}

    def get(self, trace_id: str) -> bool | None:
        """Whether the trace was judged early; None if it was not judged lately."""
        found = self._find(trace_id)
        return found[0] if found is not None else None

    def workflows(self, trace_id: str) -> tuple[str, ...]:
        """The workflows of the runs of a trace judged lately."""
        found = self._find(trace_id)
        return found[1] if found is not None else ()

    def _find(self, trace_id: str) -> _Judged | None:
        key = _id_key(trace_id)
        found = self._recent.get(key)
        return self._older.get(key) if found is None else found

    def add(self, trace_id: str, early: bool, workflows: tuple[str, ...] = ()) -> None:
        if len(self._recent) >= self._generation:
            self._older = self._recent
            self._recent = {}
        # One shared value per (early, workflows): a trace costs its key and a reference.
        value = (early, workflows)
        self._recent[_id_key(trace_id)] = self._shared.setdefault(value, value)

    def discard(self, trace_id: str) -> None:
        key = _id_key(trace_id)
        self._recent.pop(key, None)
        self._older.pop(key, None)


def _id_key(trace_id: str) -> int | str:
    """32 hex digits as their number; anything else (an id int() would read with a prefix,
    an underscore or a space) as itself, so that two ids never share a key."""
    if len(trace_id) == 32 and trace_id.isalnum() and trace_id[1] not in "xX":
        try:
            return int(trace_id, 16)
        except ValueError:
            pass
    return trace_id


@dataclass(slots=True)
class _Trace:
    spans: list[TracedSpan] = field(default_factory=list)
    last_line: int = 0
    root_line: int | None = None
    remote_parents: int = 0
    """Local roots whose parent is in another service: not orphans."""
    size: int = 0
    """Input bytes of its spans."""


class Assembler:
    """Holds open traces; hands out each trace once it is judged complete.

    A trace is judged ``settle_lines`` lines after a local root of it arrived, or at
    the end of the input. A trace whose root has not arrived is kept however long it
    takes (a slow run written span by span ends with its root, thousands of lines
    after its first step), unless ``idle_lines`` is given; memory is bounded instead by
    ``max_open_traces`` and ``max_open_bytes``: past either, the least recently
    extended traces are judged early and counted (``evicted_traces``); a span that comes
    for one later opens it again (``reopened_traces``) rather than being dropped.

    ``outcomes``: the outcome spans of the whole input by trace id, found by a scan
    before the read; each trace gets its own, and one that arrives after its trace
    was judged is expected, not late.
    """

    def __init__(
        self,
        counters: ReadCounters,
        settle_lines: int,
        idle_lines: int | None = DEFAULT_IDLE_LINES,
        outcomes: Mapping[str, list[TracedSpan]] | None = None,
        *,
        max_open_traces: int = DEFAULT_MAX_OPEN_TRACES,
        max_open_bytes: int = DEFAULT_MAX_OPEN_BYTES,
    ) -> None:
        self._open: collections.OrderedDict[str, _Trace] = collections.OrderedDict()
        self._rooted: collections.deque[tuple[int, str]] = collections.deque()
        self._judged = _JudgedIds(_JUDGED_GENERATION)
        """Trace ids judged, and whether early (by a bound): those are opened again."""
        self._counters = counters
        self._settle = max(settle_lines, 0)
        self._idle = None if idle_lines is None else max(idle_lines, 1)
        self._max_traces = max(max_open_traces, 1)
        self._max_bytes = max(max_open_bytes, 1)
        self._held = 0
        self._held_bytes = 0
        self._outcomes = outcomes or {}
        self._unclaimed = set(self._outcomes)

    def add(self, parsed: Parsed, line: int, size: int = 0) -> None:
        """One span read on ``line``; ``size``: its share of the line's bytes."""
        self.add_line((parsed,), line, size)

    def add_line(self, spans: Sequence[Parsed], line: int, size: int = 0) -> None:
        """The spans read on ``line``, each given ``size`` bytes: as :meth:`add` on each, in
        one loop (the open traces and spans only grow within a line, so their peaks are
        taken once, at its end)."""
        counters = self._counters
        counters.spans += len(spans)
        open_traces = self._open
        get = open_traces.get
        added = 0
        # The spans of a trace mostly come one after another, with one trace id string
        # (the quick path shares it): the trace is looked up once for them.
        current: str | None = None
        trace = _Trace()  # replaced before its first use: current is None
        for trace_id, local_root, span in spans:
            if trace_id is not current:
                found = get(trace_id)
                if found is None:
                    early = self._judged.get(trace_id)
                    if early:
                        # Judged early to keep within the bounds: its later spans (a slow
                        # run's root among them) make a trace again rather than be dropped,
                        # so that the run is still judged, by its recorded rollup if not by
                        # all its spans.
                        self._judged.discard(trace_id)
                        counters.reopened_traces += 1
                    elif early is not None:
                        if not (trace_id in self._outcomes and is_outcome(span)):
                            counters.late_spans += 1
                            late = counters.late_workflows
                            for name in self._judged.workflows(trace_id):
                                late[name] = late.get(name, 0) + 1
                        continue
                    found = open_traces[trace_id] = _Trace()
                elif found.last_line != line:
                    # least recently extended first, for eviction
                    open_traces.move_to_end(trace_id)
                found.last_line = line
                trace, current = found, trace_id
            trace.spans.append(span)
            trace.size += size
            added += 1
            if local_root:
                if span.record.parent_id is not None:
                    trace.remote_parents += 1
                if trace.root_line is None:
                    trace.root_line = line
                    self._rooted.append((line, trace_id))
        if len(open_traces) > counters.peak_open_traces:
            counters.peak_open_traces = len(open_traces)
        self._held += added
        self._held_bytes += added * size
        if self._held > counters.peak_open_spans:
            counters.peak_open_spans = self._held
        if self._held_bytes > counters.peak_open_bytes:
            counters.peak_open_bytes = self._held_bytes

    def complete(self, line: int) -> Iterator[Trace]:
        """The traces complete once ``line`` has been read, and those judged early to keep
        within the bounds."""
        while self._rooted and self._rooted[0][0] + self._settle <= line:
            _, trace_id = self._rooted.popleft()
            yield from self._flush(trace_id)
        if self._idle is not None:
            while self._open:
                trace_id, trace = next(iter(self._open.items()))
                if trace.last_line + self._idle > line:
                    break
                yield from self._flush(trace_id, early=trace.root_line is None)
        while len(self._open) > self._max_traces or (
            self._held_bytes > self._max_bytes and self._open
        ):
            counters = self._counters
            counters.evicted_traces += 1
            if not counters.evicted_by:
                too_many = len(self._open) > self._max_traces
                counters.evicted_by = "--max-open-traces" if too_many else "--max-open-bytes"
            yield from self._flush(next(iter(self._open)), early=True)

    def add_whole(self, spans: Sequence[Parsed]) -> Iterator[Trace]:
        """Traces given whole (Jaeger), grouped by trace id."""
        by_trace: dict[str, list[TracedSpan]] = {}
        for trace_id, _, span in spans:
            self._counters.spans += 1
            by_trace.setdefault(trace_id, []).append(span)
        for trace_id, trace_spans in by_trace.items():
            yield self._trace(trace_id, trace_spans)

    def drain(self) -> Iterator[Trace]:
        """Every trace still open, at the end of the input; then outcomes of unseen traces."""
        self._rooted.clear()
        while self._open:
            yield from self._flush(next(iter(self._open)))
        for trace_id in [t for t in self._outcomes if t in self._unclaimed]:
            yield self._trace(trace_id, [])

    def _flush(self, trace_id: str, *, early: bool = False) -> Iterator[Trace]:
        trace = self._open.pop(trace_id, None)
        if trace is None:
            return
        self._held -= len(trace.spans)
        self._held_bytes -= trace.size
        workflows = tuple(
            sorted({workflow_name(s) for s in trace.spans if s.record.kind == "workflow"})
        )
        self._judged.add(trace_id, early, workflows)
        yield self._trace(trace_id, trace.spans, trace.remote_parents)

    def _trace(self, trace_id: str, spans: list[TracedSpan], remote_parents: int = 0) -> Trace:
        counters = self._counters
        counters.traces += 1
        self._count_oddities(spans, remote_parents)
        outcomes = self._outcomes.get(trace_id)
        if outcomes:
            self._unclaimed.discard(trace_id)
            present = {s.record.span_id for s in spans}
            spans = spans + [s for s in outcomes if s.record.span_id not in present]
        return Trace(trace_id, tuple(spans))

    def _count_oddities(self, spans: list[TracedSpan], remote_parents: int) -> None:
        """Count children that start before their parent, and spans whose parent is missing.

        Both are common in real traces (skewed clocks, sampling, partial answers), so
        they are counted and reported once, not errors.
        """
        by_id = {s.record.span_id: s for s in spans}
        orphans = skewed = 0
        for span in spans:
            parent_id = span.record.parent_id
            if parent_id is None:
                continue
            parent = by_id.get(parent_id)
            if parent is None:
                orphans += 1
            elif span.record.start_ns < parent.record.start_ns and not (
                turn_start.backdated_on_purpose(span, parent)  # Pipecat's stt: no skew
            ):
                skewed += 1
        self._counters.orphan_spans += max(orphans - remote_parents, 0)
        self._counters.skewed_spans += skewed
