"""Runs whose values depend on a model call's end the trace does not record (rule 13 of
docs/attributes.md), on a first token it gives by a value that is no time (rule 15) or does
not give for a call that may have streamed (rule 17), or on a voice turn's start that is no
end of the caller's words (rule 16): what the judge says of the limits those values
decide."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from chainlat._core.call_readings import STREAM_UNKNOWN
from chainlat._core.stats import FIRST_OUTPUT, QUANTITIES
from chainlat._core.voice import SPEECH_QUANTITIES, UNKNOWN_START_QUANTITIES

if TYPE_CHECKING:
    from chainlat._core.runs import WorkflowRun
    from chainlat.budgets.verdict import LimitVerdict, NotJudgedReason

JUDGED_QUANTITIES = (*QUANTITIES, FIRST_OUTPUT, *SPEECH_QUANTITIES)
"""Every workflow quantity a limit can name."""


def unrecorded_why(run: WorkflowRun) -> str:
    """Why a run's values that depend on a model call's end are not judged (rule 13 of
    docs/attributes.md), naming the call."""
    names = ", ".join(f"`{name}`" for name in run.rollup.unrecorded)
    return (
        f"{names} ended before its own events (a stream handed back before it was read): "
        "its end is not recorded; instrument the HTTP client "
        "(`chainlat.instrument_httpx()`) to time it"
    )


def unusable_why(run: WorkflowRun) -> str:
    """Why a run's values that depend on a call's first token are not judged (rules 15 and
    17 of docs/attributes.md), naming the call and what it gives."""
    rollup = run.rollup
    pairs = list(zip(rollup.unusable, rollup.unusable_values, strict=False))
    if not any(value in STREAM_UNKNOWN for _, value in pairs):
        calls = "; ".join(f"`{name}` gives {value}" for name, value in pairs)
        return (
            f"{calls}, which is no time: its first token is not known, and a first output "
            "that depends on it is a lower bound (docs/attributes.md, rule 15)"
        )
    calls = "; ".join(
        f"`{name}` {value}" if value in STREAM_UNKNOWN else f"`{name}` gives {value}, no time"
        for name, value in pairs
    )
    return (
        f"{calls}: its first token is not known, and a first output that depends on it is a "
        "lower bound; instrument the HTTP client (`chainlat.instrument_httpx()`) or mark the "
        "output (`run.first_output()`) to time it (docs/attributes.md, rules 15 and 17)"
    )


def unknown_start_why(run: WorkflowRun) -> str:
    """Why a run's values that count from its start are not judged (rule 16)."""
    return (
        f"{run.unknown_start}: the turn's start is no end of the caller's words, so its "
        "first output and total are bounds, not measurements (docs/attributes.md, rule 16)"
    )


@dataclass(slots=True)
class Unrecorded:
    """The runs of a workflow whose values depend on a model call's end not in the trace."""

    runs: int = 0
    quantities: set[str] = field(default_factory=set)
    steps: set[str] = field(default_factory=set)
    why: str = ""
    reason: NotJudgedReason = "unrecorded_end"

    def add(self, run: WorkflowRun) -> None:
        self.runs += 1
        rollup = run.rollup
        self.quantities.update(q for q in JUDGED_QUANTITIES if rollup.unrecorded_in(q))
        self.steps.update(rollup.unrecorded)
        if not self.why:
            self.why = unrecorded_why(run)

    def verdict(self, verdict: LimitVerdict, depends: bool) -> LimitVerdict:
        """A percentile over runs one of which only bounds it: not judged, kept or broken
        (a bound on one sample can move the percentile either way)."""
        if not depends:
            return verdict
        return replace(
            verdict,
            status="not_judged",
            reason=self.reason,
            why=f"{self.runs} of its runs: {self.why}",
            worst_run=None,
        )


@dataclass(slots=True)
class Unusable(Unrecorded):
    """The runs of a workflow whose values depend on a first token that is no time (rule 15):
    ``quantities`` the first output and its parts, ``steps`` the calls whose time to first
    token is not known."""

    reason: NotJudgedReason = "unusable_value"

    def add(self, run: WorkflowRun) -> None:
        self.runs += 1
        rollup = run.rollup
        self.quantities.update(q for q in JUDGED_QUANTITIES if rollup.unusable_in(q))
        self.steps.update(rollup.unusable)
        if not self.why:
            self.why = unusable_why(run)


@dataclass(slots=True)
class UnknownStart(Unrecorded):
    """The voice turns of a workflow whose start is no end of the caller's words, which
    their trace does not hold (rule 16): ``quantities`` what counts from the start."""

    reason: NotJudgedReason = "unknown_start"

    def add(self, run: WorkflowRun) -> None:
        self.runs += 1
        self.quantities |= _FROM_THE_START
        if not self.why:
            self.why = unknown_start_why(run)


_FROM_THE_START: Final = frozenset(q for q in JUDGED_QUANTITIES if q in UNKNOWN_START_QUANTITIES)
"""The limits' quantities a start that is no end of the words leaves a bound (rule 16)."""
