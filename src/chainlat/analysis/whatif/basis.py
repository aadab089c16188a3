"""What a swap's estimate rests on: the fit that predicts the new model, and how far it reaches.

A swapped call is predicted from what the runs (or a profile file) show of the new
model. Two gaps are modelled rather than noted:

* **A mode the new model was not seen in.** A streamed call costs more than one not
  streamed of the same tokens on the machine that makes it (the client reads every
  chunk; the stream ends after its last one). That cost, :class:`StreamingCost`, is
  taken from the models the runs show both ways (each mode fitted alone, the
  difference as a base and a rate per output token), else from the streamed calls'
  tails (their end less their last chunk, ``chainlat.latency.generation_ms``), and
  taken off (or added to) the new model's prediction in the mode it was seen in.
* **Prompt sizes outside the ones the new model was seen at.** Its closest fit is
  extrapolated from the nearest prompt size it saw at a robust slope of those calls
  (:func:`robust_prefill_slope`, the median of the slopes between every two calls),
  never set to 0 by the three-standard-errors rule (which is low for every longer
  prompt), and the estimate says how far, with the slope's interval. A slope seen over a
  narrow range of prompts is uncertain, and ten times past it ten times as much: another
  model on the same server, seen over a wider range, lends its slope scaled by the two
  models' decode rates, weighed with the model's own by their errors
  (:func:`borrowed_slope`).

:class:`Basis` holds, per swapped step, new model and mode, which fit predicted the
calls, on how many calls, over which token range, and how many swapped calls lay
outside it; :meth:`Basis.line` says it in one line for the report.

Example::

    cost = streaming_cost(runs, noise)
    print(cost.line() if cost else "no cost of streaming measured")
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from chainlat._core.latency import LatencyProfile
    from chainlat._core.runs import WorkflowRun
    from chainlat.analysis.profiles import ModelCall

__all__ = [
    "AGREE_ERRORS",
    "Basis",
    "BasisTally",
    "Borrowed",
    "PrefillSlope",
    "StreamingCost",
    "borrowed_slope",
    "robust_decode_rate",
    "robust_prefill_slope",
    "streaming_cost",
]

MIN_MODE_CALLS: Final = 5
"""Calls of each mode a model needs for the difference of its two fits to count."""


@dataclass(frozen=True, slots=True)
class StreamingCost:
    """What a streamed call costs more than one not streamed, of the same tokens, here.

    ``base_ms + per_output_token_ms * (output tokens - 1)``.
    """

    base_ms: float
    per_output_token_ms: float
    source: str
    """What it was measured from, for the report."""
    calls: int
    """Calls it was measured from."""

    def ms(self, output_tokens: int) -> float:
        """The cost for an answer of this many tokens."""
        return self.base_ms + self.per_output_token_ms * max(output_tokens - 1, 0)

    def line(self) -> str:
        """``1.2 ms + 0.31 ms a token, from ...``."""
        return (
            f"{self.base_ms:.1f} ms + {self.per_output_token_ms:.2f} ms an output token, "
            f"from {self.source}"
        )


def streaming_cost(
    runs: Sequence[WorkflowRun],
    fits: Mapping[tuple[str, bool], LatencyProfile],
    calls_by_mode: Mapping[tuple[str, bool], int],
) -> StreamingCost | None:
    """The cost of streaming on the machine of the runs; None when nothing shows it.

    From every model with at least :data:`MIN_MODE_CALLS` calls of each mode (``fits``:
    its closest fit per mode): the streamed fit less the other, at the model's median
    prompt, as a base and a rate per output token, weighted by the calls of the rarer
    mode. Without such a model, from the streamed calls that recorded when their last
    chunk came: the median of what each took after it (a base, no rate).
    """
    both = [
        model
        for (model, streamed) in fits
        if streamed
        and (model, False) in fits
        and min(calls_by_mode.get((model, True), 0), calls_by_mode.get((model, False), 0))
        >= MIN_MODE_CALLS
    ]
    if both:
        bases: list[tuple[float, float]] = []
        rates: list[tuple[float, float]] = []
        for model in sorted(both):
            streamed, plain = fits[(model, True)], fits[(model, False)]
            low, high = streamed.input_tokens_range or (0, 0)
            middle = (low + high) // 2
            weight = float(min(calls_by_mode[(model, True)], calls_by_mode[(model, False)]))
            first = streamed.service_ms(middle, 1, streamed=True) - plain.service_ms(
                middle, 1, streamed=False
            )
            rate = (streamed.decode_ms_per_token or 0.0) - _plain_rate(plain)
            bases.append((first, weight))
            rates.append((rate, weight))
        total = math.fsum(w for _, w in bases)
        counted = sum(calls_by_mode[(m, s)] for m in both for s in (True, False))
        named = ", ".join(
            f"{m} ({calls_by_mode[(m, True)]} streamed, {calls_by_mode[(m, False)]} not)"
            for m in sorted(both)
        )
        return StreamingCost(
            base_ms=math.fsum(v * w for v, w in bases) / total,
            per_output_token_ms=math.fsum(v * w for v, w in rates) / total,
            source=f"the calls of {named}, each mode fitted alone",
            calls=counted,
        )
    tails = sorted(
        call.duration_ms - call.ttft_ms - call.generation_ms
        for run in runs
        for call in _calls(run)
        if call.ttft_ms is not None and call.generation_ms is not None and not call.error
    )
    if not tails:
        return None
    return StreamingCost(
        base_ms=max(statistics.median(tails), 0.0),
        per_output_token_ms=0.0,
        source=(
            f"what {len(tails)} streamed call{'s' if len(tails) != 1 else ''} took after "
            "their last chunk (no model was called both ways: a cost per chunk is not seen)"
        ),
        calls=len(tails),
    )


def _plain_rate(profile: LatencyProfile) -> float:
    if profile.unstreamed_base_ms is not None:
        return profile.unstreamed_decode_ms_per_token or 0.0
    return profile.decode_ms_per_token or 0.0


def _calls(run: WorkflowRun) -> list[ModelCall]:
    from chainlat.analysis.profiles import calls_of

    return calls_of(run)


@dataclass(frozen=True, slots=True)
class PrefillSlope:
    """A robust time per token (Theil-Sen: the median of the slopes between every two
    calls), with Sen's interval of about one standard error either way: the time per
    input token a model's calls are extrapolated at beyond the prompts it was seen at
    (and, in :class:`Borrowed`, a time per output token)."""

    ms_per_token: float
    low: float
    high: float
    borrowed: Borrowed | None = None
    """When another model's slope was weighed in: whose, and how (:func:`borrowed_slope`)."""

    @property
    def error(self) -> float:
        """About one standard error: half the interval."""
        return (self.high - self.low) / 2

    def span(self) -> str:
        """``0.1 (0.05-0.2)``."""
        return f"{self.ms_per_token:.3g} ({self.low:.3g}-{self.high:.3g})"


MAX_SLOPE_CALLS: Final = 400
"""Calls a robust slope is taken over (evenly spaced by prompt size beyond that): the pairs
grow with the square of the calls."""


def robust_prefill_slope(
    calls: Sequence[ModelCall], decode_ms_per_token: float
) -> PrefillSlope | None:
    """The prefill slope of a model's calls of one mode, robust to calls slowed by the
    machine: of time to first token against input tokens for streamed calls, of the service
    time less ``decode_ms_per_token`` per output token after the first for the others. At
    least 0; None with fewer than three calls or one prompt size.

    A few calls held up by a busy client move a least-squares slope far enough to double
    a prediction made at ten times the prompts seen; the median of pairwise slopes moves
    only when more than about a third of the calls are.
    """
    return _theil_sen(
        (
            float(c.input_tokens or 0),
            (c.ttft_ms or 0.0) - c.env_ms
            if c.ttft_ms is not None
            else c.service_ms - decode_ms_per_token * max((c.output_tokens or 0) - 1, 0),
        )
        for c in calls
        if c.input_tokens is not None and c.output_tokens is not None
    )


def robust_decode_rate(
    calls: Sequence[ModelCall], prefill_ms_per_token: float
) -> PrefillSlope | None:
    """A model's time per output token after the first, over its calls of one mode, as
    robust as :func:`robust_prefill_slope`: of a streamed call's time after its first
    token, of another call's service time less ``prefill_ms_per_token`` per input token,
    against its output tokens less one. None with fewer than three calls or one length."""
    return _theil_sen(
        (
            float(max((c.output_tokens or 0) - 1, 0)),
            c.duration_ms - c.ttft_ms
            if c.ttft_ms is not None
            else c.service_ms - prefill_ms_per_token * (c.input_tokens or 0),
        )
        for c in calls
        if c.input_tokens is not None and c.output_tokens is not None
    )


def _theil_sen(pairs: Iterable[tuple[float, float]]) -> PrefillSlope | None:
    """The median of the slopes between every two points (at least 0), with Sen's interval;
    None with fewer than three points or one x."""
    points = sorted(pairs)
    if len(points) > MAX_SLOPE_CALLS:
        step = len(points) / MAX_SLOPE_CALLS
        points = [points[int(i * step)] for i in range(MAX_SLOPE_CALLS)]
    n = len(points)
    slopes = sorted(
        (y2 - y1) / (x2 - x1)
        for i, (x1, y1) in enumerate(points)
        for x2, y2 in points[i + 1 :]
        if x2 != x1
    )
    if n < 3 or not slopes:
        return None
    # Sen (1968): the ranks of the interval's ends, one standard deviation of Kendall's S.
    spread = math.sqrt(n * (n - 1) * (2 * n + 5) / 18)
    count = len(slopes)
    low = slopes[max(int((count - spread) / 2), 0)]
    high = slopes[min(math.ceil((count + spread) / 2), count - 1)]
    return PrefillSlope(max(statistics.median(slopes), 0.0), max(low, 0.0), max(high, 0.0))


AGREE_ERRORS: Final = 3.0
"""How many standard errors (of their difference) a model's own prefill slope and one
borrowed may differ by and still be weighed together (the rule of three standard errors
the profiles' slopes follow): further apart, the runs contradict the borrowing."""


@dataclass(frozen=True, slots=True)
class Borrowed:
    """A prefill slope borrowed from another model on the same server: its slope times the
    two models' decode rates' ratio, on the assumption that on one server a model's time
    per input token and its time per output token scale alike (both with its size)."""

    donor: str
    donor_streamed: bool
    """The mode of the other model's calls the slope and rate are of."""
    donor_slope: PrefillSlope
    """The other model's own time per input token."""
    donor_decode: PrefillSlope
    """The other model's time per output token."""
    own_decode: PrefillSlope
    """This model's time per output token."""
    slope: PrefillSlope
    """The slope borrowed: ``donor_slope * own_decode / donor_decode``."""
    own: PrefillSlope | None
    """This model's own robust slope (None: its calls show none)."""
    weighed: bool
    """Whether the two were weighed together (by the inverse of their squared errors);
    False: they differ by more than :data:`AGREE_ERRORS` standard errors, and the own
    slope is kept alone."""

    def line(self) -> str:
        """What the slope rests on, for the basis line."""
        mode = "streamed" if self.donor_streamed else "not streamed"
        borrowed = (
            f"{self.donor}'s (its calls {mode}) {self.donor_slope.span()} times the ratio "
            f"of the two decode rates ({self.own_decode.ms_per_token:.3g} and "
            f"{self.donor_decode.ms_per_token:.3g} ms an output token), {self.slope.span()}"
        )
        if self.own is None:
            return f"borrowed: {borrowed} (its own calls show no slope)"
        own = f"its own calls' {self.own.span()}"
        if self.weighed:
            return f"{own} weighed with {borrowed}"
        return (
            f"{own}, kept alone: {borrowed}, further than {AGREE_ERRORS:g} standard errors from it"
        )


def borrowed_slope(
    own: PrefillSlope | None,
    own_decode: PrefillSlope | None,
    donors: Iterable[tuple[tuple[str, bool], PrefillSlope, PrefillSlope]],
) -> PrefillSlope | None:
    """The prefill slope a model is extrapolated at: its own (``own``), weighed with the
    most certain one borrowed from ``donors`` (other models on its server: (name, streamed),
    own slope, decode rate of those calls); ``own`` when nothing can be borrowed.

    A model seen at a narrow range of prompts has a slope as uncertain as that range is
    narrow, and a prediction ten times past it is ten times as uncertain. Another model on
    the same server, seen over a wide range, knows its slope better; on one server a
    model's prefill and decode times per token both scale with the model's work per token,
    so that slope times the two decode rates' ratio is a second estimate. The two are
    weighed by the inverse of their squared standard errors (the borrowed one's from the
    three figures it is made of), unless they differ by more than :data:`AGREE_ERRORS`
    standard errors of their difference, when the runs say the assumption does not hold
    here and the own slope is kept. The result says which (:attr:`PrefillSlope.borrowed`).
    """
    if own_decode is None or own_decode.ms_per_token <= 0:
        return own
    best: Borrowed | None = None
    least = math.inf  # the best one's error (its interval is cut at 0)
    for (name, streamed), slope, decode in donors:
        if slope.ms_per_token <= 0 or decode.ms_per_token <= 0:
            continue
        value = slope.ms_per_token * own_decode.ms_per_token / decode.ms_per_token
        relative = math.sqrt(
            sum((part.error / part.ms_per_token) ** 2 for part in (slope, decode, own_decode))
        )
        error = value * relative
        candidate = Borrowed(
            name,
            streamed,
            slope,
            decode,
            own_decode,
            PrefillSlope(value, max(value - error, 0.0), value + error),
            own,
            weighed=False,
        )
        if error < least:
            best, least = candidate, error
    if best is None:
        return own
    borrowed = best.slope
    if own is None:
        return replace(borrowed, borrowed=best)
    apart = abs(own.ms_per_token - borrowed.ms_per_token)
    if apart > AGREE_ERRORS * math.hypot(own.error, least):
        return replace(own, borrowed=best)
    if own.error <= 0 or least <= 0:  # one is exact: it decides
        kept = own if own.error <= 0 else borrowed
        return replace(kept, borrowed=replace(best, weighed=True))
    weights = (1 / own.error**2, 1 / least**2)
    value = (own.ms_per_token * weights[0] + borrowed.ms_per_token * weights[1]) / sum(weights)
    error = 1 / math.sqrt(sum(weights))
    return PrefillSlope(value, max(value - error, 0.0), value + error, replace(best, weighed=True))


@dataclass(frozen=True, slots=True)
class Basis:
    """What the swapped calls of one step, to one model, in one mode, were predicted from."""

    step: str
    model: str
    streamed: bool
    """The swapped calls' mode."""
    calls: int
    """Swapped calls predicted this way."""
    fit: str
    """Which fit: ``its calls streamed``, ``its calls not streamed, plus the cost of
    streaming``, ``the profile file``, ..."""
    fitted_calls: int
    """Calls of the new model that fit was made from (0: written by hand)."""
    input_tokens_range: tuple[int, int] | None
    """The input tokens the fit saw."""
    output_tokens_range: tuple[int, int] | None
    swapped_input_range: tuple[int, int]
    """The input tokens of the swapped calls (after a prompt scale)."""
    extrapolated: int
    """Swapped calls with input tokens outside the fit's range."""
    prefill_slope_ms: float
    """The fit's time per input token."""
    prefill: PrefillSlope | None = None
    """The robust slope it is extrapolated at, when the fit was made from the runs."""
    streaming: StreamingCost | None = None
    """The cost of streaming taken off or added, when the mode was not seen."""

    def line(self) -> str:
        """The basis in one line for the report."""
        mode = "streamed" if self.streamed else "not streamed"
        text = (
            f'"{self.step}" -> {self.model}, {self.calls} call{"s" if self.calls != 1 else ""} '
            f"{mode}: {self.fit}"
        )
        if self.fitted_calls:
            text += f" ({self.fitted_calls} calls"
            if self.input_tokens_range is not None:
                low, high = self.input_tokens_range
                text += f", input {low}-{high} tokens"
            if self.output_tokens_range is not None:
                low, high = self.output_tokens_range
                text += f", output {low}-{high}"
            text += ")"
        if self.streaming is not None:
            sign = "plus" if self.streamed else "less"
            text += f", {sign} the cost of streaming ({self.streaming.line()})"
        if self.extrapolated:
            low, high = self.swapped_input_range
            text += f"; extrapolated for {self.extrapolated} of them (input {low}-{high} tokens)"
            prefill = self.prefill
            if prefill is not None:
                text += (
                    f" at {prefill.ms_per_token:.3g} ms an input token "
                    f"({prefill.low:.3g}-{prefill.high:.3g}, about one standard error either "
                    f"way{': ' + prefill.borrowed.line() if prefill.borrowed else ''})"
                )
            else:
                text += f" at {self.prefill_slope_ms:.3g} ms an input token"
        return text


class BasisTally:
    """Counts, per (step, model, mode), the swapped calls and how they were predicted."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str, bool], _Tally] = {}

    def add(
        self,
        step: str,
        model: str,
        streamed: bool,
        input_tokens: int,
        *,
        fit: str,
        profile: LatencyProfile,
        prefill: PrefillSlope | None,
        streaming: StreamingCost | None,
    ) -> None:
        key = (step, model, streamed)
        tally = self._seen.get(key)
        if tally is None:
            tally = self._seen[key] = _Tally(fit, profile, prefill, streaming)
        tally.inputs.append(input_tokens)
        low, high = profile.input_tokens_range or (input_tokens, input_tokens)
        if not low <= input_tokens <= high:
            tally.outside += 1

    def bases(self) -> tuple[Basis, ...]:
        """One :class:`Basis` per (step, model, mode), in the order first seen."""
        return tuple(
            Basis(
                step=step,
                model=model,
                streamed=streamed,
                calls=len(t.inputs),
                fit=t.fit,
                fitted_calls=t.profile.calls,
                input_tokens_range=t.profile.input_tokens_range,
                output_tokens_range=t.profile.output_tokens_range,
                swapped_input_range=(min(t.inputs), max(t.inputs)),
                extrapolated=t.outside,
                prefill_slope_ms=t.profile.ttft_per_input_token_ms,
                prefill=t.prefill,
                streaming=t.streaming,
            )
            for (step, model, streamed), t in self._seen.items()
        )


class _Tally:
    __slots__ = ("fit", "inputs", "outside", "prefill", "profile", "streaming")

    def __init__(
        self,
        fit: str,
        profile: LatencyProfile,
        prefill: PrefillSlope | None,
        streaming: StreamingCost | None,
    ) -> None:
        self.fit, self.profile, self.prefill, self.streaming = fit, profile, prefill, streaming
        self.inputs: list[int] = []
        self.outside = 0
