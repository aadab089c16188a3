"""The outcome of a check: one verdict per limit (kept, broken or not judged, and why), and
the report that holds them with its exit code and summary line.

Every format (text, JSON, JUnit, markdown, HTML, the pytest plugin) renders these and never
re-derives a status.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field, replace
from typing import Final, Literal

from chainlat._core.exits import EXIT_BROKEN, EXIT_INPUT, EXIT_OK
from chainlat._core.runs import BudgetViolation, Unit, WorkflowRun
from chainlat._core.stats import Stats
from chainlat.budgets.messages import key_path_of

VerdictStatus = Literal["ok", "broken", "not_judged"]
"""What became of one limit: kept (``ok``), broken, or not judged (see its ``reason``)."""

NotJudgedReason = Literal[
    "unknown_workflow",
    "unknown_step",
    "no_runs",
    "not_enough_runs",
    "no_data",
    "no_price",
    "no_tokens",
    "impossible_value",
    "not_expressible",
    "no_series",
    "not_finite",
    "incomplete_run",
    "unrecorded_end",
    "unusable_value",
    "unknown_start",
]
"""Why a limit was not judged: a name no run has (``unknown_workflow``, ``unknown_step``), too
few runs or samples (``no_runs``, ``not_enough_runs``, ``no_data``), a cost without a price or
token counts (``no_price``, ``no_tokens``), a recorded value that cannot be true
(``impossible_value``), a limit a Prometheus source cannot read (``not_expressible``,
``no_series``, ``not_finite``), a run a reader could not read whole (``incomplete_run``), or a
value that depends on a model call whose span ended before its own events, so that its end is
not in the trace (``unrecorded_end``: the value is a bound, not a measurement), or a value
that depends on a call's first token the trace gives by a value that is no time
(``unusable_value``: ``metrics.ttfb = -1``, a first token before the call's start, a streamed
TTS's first audio no span marks; docs/attributes.md, rule 15), or a value that counts from
a voice turn's start where the trace does not hold the end of the caller's words
(``unknown_start``: a LiveKit realtime turn without a VAD of its own, a Pipecat
speech-to-speech turn without chainlat's observer, a turn a ``semantic_vad`` server
detected; rule 16)."""

ABSENT_REASONS: Final[frozenset[NotJudgedReason]] = frozenset({"unknown_workflow", "unknown_step"})
"""Reasons ``--allow-missing`` opts out of: a budgeted name no run has."""
UNJUDGED_REASONS: Final[frozenset[NotJudgedReason]] = (
    frozenset(typing.get_args(NotJudgedReason)) - ABSENT_REASONS
)
"""Reasons ``--allow-unjudged`` opts out of: every other one."""


@dataclass(frozen=True, slots=True)
class LimitVerdict:
    """The verdict on one limit of one workflow's budget."""

    workflow: str
    target: str
    """The limit's key path inside the workflow's budget (``p95.total``, ``steps."x".max``)."""
    limit_ms: float
    actual_ms: float | None
    """Per-run limits: the worst run's value; percentiles: the percentile over the runs."""
    status: VerdictStatus
    runs: int
    """Runs (or step occurrences, for a step percentile) judged."""
    broken_runs: int = 0
    """Per-run limits: how many runs broke it."""
    percentile: float | None = None
    """For percentile limits: which one (95.0)."""
    min_runs: int = 1
    worst_run: WorkflowRun | None = field(default=None, compare=False)
    """Per-run limits: the run with the worst value."""
    unit: Unit = "ms"
    """What ``limit_ms`` and ``actual_ms`` are in: ms, % (error_rate) or USD (cost)."""
    reason: NotJudgedReason | None = None
    """Why the limit was not judged (``status == "not_judged"``); None otherwise."""
    why: str | None = None
    """One line saying why it was not judged and what to do (or which flag opts out)."""
    allowed: bool = False
    """The user opted out for this limit (``optional = true``, ``--allow-missing``,
    ``--allow-unjudged``): shown, but it does not fail the gate."""
    unjudged_runs: int = 0
    """Per-run limits: runs that have the measure but whose value could not be judged (a
    call without a price, a run a reader could not read whole)."""

    @property
    def kind(self) -> Literal["run", "percentile", "share"]:
        """What the limit holds: every run, a percentile over the runs, or the share of runs
        that failed (``error_rate``)."""
        if self.percentile is not None:
            return "percentile"
        return "share" if self.target == "error_rate" else "run"

    @property
    def key_path(self) -> str:
        """The limit's full key path in the budget file."""
        return key_path_of(("workflows", self.workflow)) + "." + self.target

    def not_judged(self, reason: NotJudgedReason, why: str) -> LimitVerdict:
        """This limit, not judged for ``reason``: no value, no runs, ``why`` said."""
        return replace(
            self,
            actual_ms=None,
            status="not_judged",
            runs=0,
            broken_runs=0,
            worst_run=None,
            reason=reason,
            why=why,
        )

    def violation(self) -> BudgetViolation | None:
        """This verdict as a violation, when broken."""
        if self.status != "broken" or self.actual_ms is None:
            return None
        return BudgetViolation(self.workflow, self.target, self.limit_ms, self.actual_ms, self.unit)


@dataclass(slots=True)
class BudgetReport:
    """Every limit's verdict, with the statistics they were computed from.

    Example::

        report = evaluate(runs, budgets)
        print(report.summary)
        raise SystemExit(report.exit_code)
    """

    verdicts: list[LimitVerdict]
    stats: Stats
    budgets_source: str = "<inline>"

    @property
    def broken(self) -> list[LimitVerdict]:
        """The limits that were broken."""
        return [v for v in self.verdicts if v.status == "broken"]

    @property
    def unjudged(self) -> list[LimitVerdict]:
        """The limits that could not be judged and were not opted out of: they fail the gate."""
        return [v for v in self.verdicts if v.status == "not_judged" and not v.allowed]

    @property
    def allowed(self) -> list[LimitVerdict]:
        """The limits that could not be judged and were opted out of."""
        return [v for v in self.verdicts if v.status == "not_judged" and v.allowed]

    @property
    def exit_code(self) -> int:
        """``EXIT_BROKEN`` (1) if a limit is broken, else ``EXIT_INPUT`` (2) if one could not
        be judged and was not opted out of, or if no limit was judged at all, else
        ``EXIT_OK`` (0): a gate that judged nothing never passes."""
        if self.broken:
            return EXIT_BROKEN
        if self.unjudged or not self.judged:
            return EXIT_INPUT
        return EXIT_OK

    @property
    def ok(self) -> bool:
        """Every limit judged and kept, or opted out of: the exit code is 0."""
        return self.exit_code == EXIT_OK

    @property
    def judged(self) -> bool:
        """At least one limit was judged (kept or broken)."""
        return any(v.status in ("ok", "broken") for v in self.verdicts)

    @property
    def summary(self) -> str:
        """The one line every format ends with; it says ``OK`` only when the exit code is 0.

        ``FAILED: 1 of 7 limits broken, 2 not judged``, ``FAILED: no limit judged, 3 not
        judged (allowed)`` or ``OK: all 7 limits judged and kept``.
        """
        total = len(self.verdicts)
        allowed = len(self.allowed)
        opted = f", {allowed} not judged (allowed)" if allowed else ""
        if self.exit_code != EXIT_OK:
            if not self.broken and not self.unjudged:
                return f"FAILED: no limit judged{opted or ' (no limits)'}"
            return (
                f"FAILED: {len(self.broken)} of {_limits(total)} broken, "
                f"{len(self.unjudged)} not judged{opted}"
            )
        if not allowed:
            return f"OK: all {_limits(total)} judged and kept"
        return f"OK: {total - allowed} of {_limits(total)} judged and kept{opted}"

    def verdicts_of(self, workflow: str) -> list[LimitVerdict]:
        """The verdicts on one workflow's limits."""
        return [v for v in self.verdicts if v.workflow == workflow]


def _limits(n: int) -> str:
    return f"{n} limit" + ("" if n == 1 else "s")
