"""Estimating runs: each changed step's new duration, and the run re-timed around it.

A changed model call's new duration is::

    queue + connect + send + network (as recorded) + new profile's prediction * residual

The rules for the prediction and the residual are in :mod:`chainlat.analysis.whatif`'s
docstring and, with the measurements behind them, in ``docs/tradeoffs.md``.

Example::

    estimator = Estimator(changes, profiles, seed=0, hit_ms_by_step={})
    print(estimator.run(run).after.total_ms)
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from chainlat._core.rollup import compute_rollup
from chainlat.analysis.whatif.basis import (
    BasisTally,
    PrefillSlope,
    StreamingCost,
    borrowed_slope,
    robust_decode_rate,
    robust_prefill_slope,
    streaming_cost,
)
from chainlat.analysis.whatif.result import RunEstimate
from chainlat.analysis.whatif.timeline import StepOverride, counted_steps, rebuild_timeline

if TYPE_CHECKING:
    from chainlat._core.latency import LatencyProfile
    from chainlat._core.prices import Prices
    from chainlat._core.rollup import SpanRecord
    from chainlat._core.runs import WorkflowRun
    from chainlat.analysis.profiles import ModelCall
    from chainlat.analysis.whatif.changes import Change

__all__ = ["MIN_NOISE_CALLS", "Estimator", "Noise", "hit_ms_by_step", "noise_of"]

_NS_PER_MS: Final = 1_000_000

_Service = Callable[[int, bool], float]
"""A service time by output tokens and mode (True: streamed), at a set prompt size."""


def _draw(seed: int, trace_id: str, span_id: int) -> float:
    digest = hashlib.blake2b(f"{seed}:{trace_id}:{span_id:016x}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big") / 2.0**64


def _renamed(name: str, old_model: str, new_model: str) -> str:
    if name.endswith(" " + old_model):
        return name[: -len(old_model)] + new_model
    return name


class Estimator:
    """Re-estimates runs under a set of changes; counts the assumptions it makes."""

    def __init__(
        self,
        changes: Sequence[Change],
        profiles: Mapping[str, LatencyProfile],
        seed: int,
        hit_ms_by_step: Mapping[str, float],
        noise: Noise | None = None,
        prices: Prices | None = None,
    ) -> None:
        self.noise = noise or Noise()
        self.prices = prices
        self.by_step: dict[str, list[Change]] = {}
        for change in changes:
            self.by_step.setdefault(change.step, []).append(change)
        self.profiles = profiles
        self.seed = seed
        self.hit_ms_by_step = hit_ms_by_step
        self.notes: dict[str, int] = {}
        self.basis = BasisTally()

    def note(self, text: str) -> None:
        self.notes[text] = self.notes.get(text, 0) + 1

    def counted_notes(self) -> tuple[str, ...]:
        """Each assumption made, once, with the number of calls it was made for."""
        return tuple(
            f"{text} ({count} call{'s' if count != 1 else ''})"
            for text, count in self.notes.items()
        )

    def run(self, run: WorkflowRun) -> RunEstimate:
        from chainlat.analysis.profiles import calls_of

        steps = counted_steps(run)
        calls = {c.span_id: c for c in calls_of(run)}
        overrides: dict[int, StepOverride] = {}
        dropped: set[int] = set()
        for span_id, rec in steps.items():
            changes = self.by_step.get(rec.label)
            if not changes:
                continue
            if any(c.kind == "drop" for c in changes):
                dropped.add(span_id)
                continue
            call = calls.get(span_id)
            override = (
                self.call(run, call, changes) if call is not None else self.step(run, rec, changes)
            )
            if override is not None:
                overrides[span_id] = override
        new_root, new_spans = rebuild_timeline(run.root_record, run.records, overrides, dropped)
        before = run.recomputed_rollup(prices=self.prices)
        if not self.prices and run.rollup.cost_usd is not None:
            # Without prices the cost recorded on the run stands, as the judge takes it.
            before = replace(before, cost_usd=run.rollup.cost_usd)
        return RunEstimate(
            workflow=run.workflow,
            variant=run.variant,
            trace_id=run.trace_id,
            before=before,
            after=compute_rollup(new_root, new_spans),
            changed_steps=len(overrides) + len(dropped),
            run=run,
            after_root=new_root,
            after_spans=tuple(new_spans),
        )

    def step(self, run: WorkflowRun, rec: SpanRecord, changes: list[Change]) -> StepOverride | None:
        rate = next((c.value for c in changes if c.kind == "cache_hit_rate"), None)
        if rate is None:
            return None
        if _draw(self.seed, run.trace_id, rec.span_id) >= rate:
            if rec.cache_hit:
                self.note(f'"{rec.label}": recorded cache hits drawn as misses keep their time')
            return StepOverride(rec.end_ns - rec.start_ns, cache_hit=rec.cache_hit)
        hit_ms = self.hit_ms_by_step.get(rec.label)
        if hit_ms is None:
            self.note(f'"{rec.label}": no recorded cache hit; a hit is taken to cost 0 ms')
            hit_ms = 0.0
        return StepOverride(round(hit_ms * _NS_PER_MS), cache_hit=True)

    def call(self, run: WorkflowRun, call: ModelCall, changes: list[Change]) -> StepOverride | None:
        swap = next((c.model for c in changes if c.kind == "swap"), None)
        scale = next((c.value for c in changes if c.kind == "prompt_scale"), None)
        rate = next((c.value for c in changes if c.kind == "cache_hit_rate"), None)
        model = swap or call.model
        new_name = _renamed(call.step, call.model, model) if swap else None
        old = self.profiles.get(call.model)
        new = self.profiles[model]
        if call.speech_input is not None and new.speech_input is not None and not call.error:
            return self.speech_call(call, old, new, new_name, scale) if swap or scale else None
        tokens_in, tokens_out = call.input_tokens, call.output_tokens
        if tokens_in is None or tokens_out is None:
            self.note(f'"{call.step}": calls without token counts are estimated at typical sizes')
            ref = old or new
            if tokens_in is None:
                low, high = ref.input_tokens_range or (0, 0)
                tokens_in = (low + high) // 2
            if tokens_out is None:
                low, high = ref.output_tokens_range or (1, 1)
                tokens_out = (low + high) // 2
        new_in = max(round(tokens_in * scale), 0) if scale is not None else tokens_in
        streamed = call.ttft_ms is not None
        predicted = new.service_ms(new_in, tokens_out, streamed=streamed)

        hit = rate is not None and _draw(self.seed, run.trace_id, call.span_id) < rate
        if hit:
            hit_ms = self.hit_ms(call, model, new)
            return StepOverride(
                round(hit_ms * _NS_PER_MS), name=new_name, cache_hit=True, input_tokens=new_in
            )
        if call.cache_hit:
            if rate is None:
                self.note(f'"{call.step}": recorded cache hits keep their time')
                return StepOverride(
                    round(call.duration_ms * _NS_PER_MS), name=new_name, input_tokens=new_in
                )
            self.note(f'"{call.step}": recorded cache hits drawn as misses get no residual')
            return StepOverride(
                round((call.env_ms + predicted) * _NS_PER_MS),
                name=new_name,
                cache_hit=False,
                input_tokens=new_in,
            )
        if call.error:
            self.note(f'"{call.step}": failed calls keep their time')
            return StepOverride(round(call.duration_ms * _NS_PER_MS), name=new_name)
        if swap is None and scale is None:
            return None  # a cache miss with nothing else changed
        residual = 1.0
        expected = old.service_ms(tokens_in, tokens_out, streamed=streamed) if old else 0.0
        if old is None:
            self.note(f"{call.model}: no profile, so its calls get no residual")
        elif expected > 0 and call.service_ms > 0:
            residual = call.service_ms / expected
        ttft_ms = new.ttft_ms(new_in)
        if model != call.model:
            predicted, ttft_ms, new = self.swapped(
                call.step, model, new, new_in, tokens_out, streamed
            )
            residual = self.new_residual(run, call, model, new, residual)
        new_ms = call.env_ms + predicted * residual
        ttft = call.env_ms + ttft_ms * residual if streamed else None
        return StepOverride(
            round(new_ms * _NS_PER_MS), name=new_name, input_tokens=new_in, ttft_ms=ttft
        )

    def swapped(
        self,
        step: str,
        model: str,
        profile: LatencyProfile,
        input_tokens: int,
        output_tokens: int,
        streamed: bool,
    ) -> tuple[float, float, LatencyProfile]:
        """A swapped call's service time and time to first token on the new model (without
        queue and network), and the profile they came from.

        From the closest fit of the new model's calls of the swapped call's mode when
        the runs have enough of them; else from the profile, when it holds both modes;
        else from the mode the new model was seen in, with the cost of streaming
        (:func:`~chainlat.analysis.whatif.basis.streaming_cost`) taken off or added.
        Beyond the prompt sizes a closest fit was made from, it is extrapolated at a
        robust slope (:func:`~chainlat.analysis.whatif.basis.robust_prefill_slope`).
        What each swapped call rested on is counted in ``self.basis``.
        """
        mode = "streamed" if streamed else "not streamed"
        own = self.noise.profiles.get((model, streamed))
        if own is not None:
            service, ttft, slope = self.extrapolated(own, (model, streamed), input_tokens)
            self.basis.add(
                step, model, streamed, input_tokens,
                fit=f"the closest fit of its calls {mode}", profile=own,
                prefill=slope, streaming=None,
            )  # fmt: skip
            return service(output_tokens, streamed), ttft, own
        seen = _modes_seen(profile)
        other = self.noise.profiles.get((model, not streamed))
        if other is None and (seen is None or streamed in seen):
            fit = "its profile" if profile.calls else "its profile (written by hand)"
            if model in self.noise.called and seen == {True, False}:
                fit = "its profile, fitted from its calls of both modes"
            self.basis.add(
                step, model, streamed, input_tokens,
                fit=fit, profile=profile, prefill=None, streaming=None,
            )  # fmt: skip
            service_ms = profile.service_ms(input_tokens, output_tokens, streamed=streamed)
            return service_ms, profile.ttft_ms(input_tokens), profile
        seen_mode = "streamed" if not streamed else "not streamed"
        if other is not None:
            service, ttft, slope = self.extrapolated(other, (model, not streamed), input_tokens)
            base, fit = other, f"the closest fit of its calls {seen_mode}"
        else:
            base, fit, slope = profile, f"its profile, from calls {seen_mode}", None
            service, ttft = self.flat(profile, input_tokens), profile.ttft_ms(input_tokens)
        predicted = service(output_tokens, not streamed)
        cost = self.noise.streaming
        if cost is None:
            self.note(
                f"{model}: known from calls {seen_mode} only, and nothing in the runs shows "
                f"what streaming costs here; its calls {mode} are estimated at that mode's "
                f"rate, so {'high' if not streamed else 'low'} (a profile file with calls of "
                "both modes, or runs with a model called both ways, fixes it: "
                "docs/tradeoffs.md)"
            )
        else:
            extra = cost.ms(output_tokens)
            predicted = predicted + extra if streamed else predicted - extra
            # A cost of streaming above the call itself is no time at all: keep its prefill.
            predicted = max(predicted, ttft, 0.0)
        self.basis.add(
            step, model, streamed, input_tokens,
            fit=fit, profile=base, prefill=slope, streaming=cost,
        )  # fmt: skip
        return predicted, ttft, base

    def extrapolated(
        self, fit: LatencyProfile, key: tuple[str, bool], input_tokens: int
    ) -> tuple[_Service, float, PrefillSlope | None]:
        """A closest fit's prediction at ``input_tokens``: as it is within the prompt sizes
        it was made from; beyond them, from the nearest size it saw plus the robust prefill
        slope of those calls for every token past it (its own slope without one)."""
        low, high = fit.input_tokens_range or (input_tokens, input_tokens)
        edge = min(max(input_tokens, low), high)
        slope = self.noise.prefill.get(key)
        per_token = slope.ms_per_token if slope is not None else fit.ttft_per_input_token_ms
        beyond = per_token * (input_tokens - edge)

        def service(output_tokens: int, streamed: bool) -> float:
            return fit.service_ms(edge, output_tokens, streamed=streamed) + beyond

        return service, fit.ttft_ms(edge) + beyond, slope

    @staticmethod
    def flat(profile: LatencyProfile, input_tokens: int) -> _Service:
        def service(output_tokens: int, streamed: bool) -> float:
            return profile.service_ms(input_tokens, output_tokens, streamed=streamed)

        return service

    def speech_call(
        self,
        call: ModelCall,
        old: LatencyProfile | None,
        new: LatencyProfile,
        new_name: str | None,
        scale: float | None,
    ) -> StepOverride:
        """A speech call, on its speech input (characters or seconds of audio, scaled by
        ``--prompt-scale``): the new profile's first output and duration, times the call's
        own residual against its old profile."""
        amount = call.speech_input or 0.0
        new_amount = amount * scale if scale is not None else amount
        residual = 1.0
        if old is None or old.speech_input is None:
            self.note(f"{call.model}: no speech profile, so its calls get no residual")
        elif (expected := old.speech_service_ms(amount)) > 0 and call.service_ms > 0:
            residual = call.service_ms / expected
        new_ms = call.env_ms + new.speech_service_ms(new_amount) * residual
        ttft = None
        if call.ttft_ms is not None:
            ttft = call.env_ms + new.speech_ttft_ms(new_amount) * residual
        return StepOverride(round(new_ms * _NS_PER_MS), name=new_name, ttft_ms=ttft)

    def hit_ms(self, call: ModelCall, model: str, profile: LatencyProfile) -> float:
        """A cache hit's time: the profile's, else the step's recorded hits', else 0 ms."""
        hit_ms = profile.cache_hit_ms
        if hit_ms is None:
            hit_ms = self.hit_ms_by_step.get(call.step)
        if hit_ms is None:
            self.note(f"{model}: no cache_hit_ms in its profile; a cache hit costs 0 ms")
            hit_ms = 0.0
        return hit_ms

    def new_residual(
        self,
        run: WorkflowRun,
        call: ModelCall,
        model: str,
        profile: LatencyProfile,
        recorded: float,
    ) -> float:
        """The swapped call's residual on the new model: its rank, the new model's noise.

        A call slow for its size on the old model stays as slow among the new
        model's calls: the residual at the same quantile of the new model's own
        residuals, from its calls streamed (or not) like this one; for a model the
        runs never called, of a log-normal with its profile's ``residual_sigma``.
        When the new model has fewer than ``MIN_NOISE_CALLS`` calls of this kind,
        the call keeps its own residual (measured against the closest fit of the
        old model's calls when its profile was fitted from them): the new model's
        calls of the other kind are slower or faster, and noisier or not, by an
        amount the runs cannot tell (docs/tradeoffs.md).
        """
        key = (run.trace_id, call.span_id)
        rank = self.noise.ranks.get(key)
        streamed = call.ttft_ms is not None
        same = self.noise.residuals.get((model, streamed), [])
        if rank is not None and len(same) >= MIN_NOISE_CALLS:
            return math.exp(_quantile(same, rank))
        if rank is not None and model not in self.noise.called and profile.residual_sigma:
            return math.exp(profile.residual_sigma * statistics.NormalDist().inv_cdf(rank))
        if model in self.noise.called:
            mode = "streamed" if streamed else "not streamed"
            self.note(
                f"{model}: fewer than {MIN_NOISE_CALLS} calls {mode} in the runs; swapped "
                f"calls {mode} keep their recorded residual (see docs/tradeoffs.md)"
            )
        closest = self.noise.closest.get(key)
        return recorded if closest is None else math.exp(closest)


MIN_NOISE_CALLS: Final = 5
"""Calls of a model, of one mode, from which its own residuals are taken as its noise."""


@dataclass(frozen=True)
class Noise:
    """How the calls of each model deviate from its profile, for swaps.

    Streamed and non-streamed calls apart: on one machine a streamed call of the
    same size takes longer (the client reads every chunk, the stream's tail), so a
    profile fitted from one kind mispredicts the other by as much.
    """

    profiles: dict[tuple[str, bool], LatencyProfile] = field(default_factory=dict)
    """By (model, streamed): the closest fit of those calls alone (every slope kept), for
    models fitted from the runs with enough calls of that kind; it predicts a swapped
    call of that kind within the prompt sizes it was fitted on."""
    residuals: dict[tuple[str, bool], list[float]] = field(default_factory=dict)
    """By (model, streamed): log(service time / prediction) of those calls, sorted; the
    prediction of the closest fit of those calls, or of the given profile."""
    called: set[str] = field(default_factory=set)
    """Models with usable calls in the runs."""
    ranks: dict[tuple[str, int], float] = field(default_factory=dict)
    """Each usable call's quantile (0..1) among its model's calls streamed like it, by
    (trace id, span id)."""
    prefill: dict[tuple[str, bool], PrefillSlope] = field(default_factory=dict)
    """By (model, streamed): the robust prefill slope of those calls, weighed with one
    borrowed from another model on the same server (:func:`borrowed_slope`), for the
    models in ``profiles``: what a swapped call is extrapolated at beyond their prompt
    sizes."""
    streaming: StreamingCost | None = None
    """What a streamed call costs more than one not streamed here (None: nothing shows it)."""
    closest: dict[tuple[str, int], float] = field(default_factory=dict)
    """Each usable call's log residual against the closest fit of its model's calls
    streamed like it (:func:`fit_profile` ``in_sample``: every slope kept), for models
    fitted from the runs: a prompt-size effect the profile had to leave out is not the
    call's own slowness."""


def noise_of(
    runs: Sequence[WorkflowRun],
    profiles: Mapping[str, LatencyProfile],
    fitted: Collection[str],
) -> Noise:
    from chainlat.analysis.profiles import calls_of, fit_profile

    by_mode: dict[tuple[str, bool], list[tuple[str, ModelCall]]] = {}
    servers: dict[str, set[str]] = {}
    for run in runs:
        for call in calls_of(run):
            if (
                not call.cache_hit
                and not call.error
                and call.input_tokens is not None
                and call.output_tokens is not None
                and call.service_ms > 0
            ):
                key = (call.model, call.ttft_ms is not None)
                by_mode.setdefault(key, []).append((run.trace_id, call))
                if call.server is not None:
                    servers.setdefault(call.model, set()).add(call.server)
    noise = Noise(called={model for model, _ in by_mode})
    for (model, streamed), calls in by_mode.items():
        # Against the closest fit: against a profile flattened by the three-standard-errors
        # rule, long prompts would rank as slow calls and widen the noise.
        closest = fit_profile((c for _, c in calls), in_sample=True)
        if model not in fitted or closest is None:
            closest = profiles.get(model)
        elif len(calls) >= MIN_NOISE_CALLS:
            noise.profiles[(model, streamed)] = closest
            decode = closest.decode_ms_per_token or 0.0
            if not streamed and closest.unstreamed_base_ms is not None:
                decode = closest.unstreamed_decode_ms_per_token or 0.0
            slope = robust_prefill_slope([c for _, c in calls], decode)
            if slope is not None:
                noise.prefill[(model, streamed)] = slope
        if closest is None:
            continue
        logs = (_log_residual(closest, c) for _, c in calls)
        noise.residuals[(model, streamed)] = sorted(v for v in logs if v is not None)
        ranked = sorted(
            (log, trace_id, call.span_id)
            for trace_id, call in calls
            if (log := _log_residual(closest, call)) is not None
        )
        for i, (log, trace_id, span_id) in enumerate(ranked):
            noise.ranks[(trace_id, span_id)] = (i + 0.5) / len(ranked)
            if model in fitted:
                noise.closest[(trace_id, span_id)] = log
    own = dict(noise.prefill)
    rates: dict[tuple[str, bool], PrefillSlope | None] = {}

    def rate_of(key: tuple[str, bool]) -> PrefillSlope | None:
        """The decode rate of a model's calls of one mode, fitted when a borrowing needs it
        (its pairs grow with the square of the calls, as the prefill slope's do)."""
        if key not in rates:
            found = own.get(key)
            prefill = found.ms_per_token if found else noise.profiles[key].ttft_per_input_token_ms
            rates[key] = robust_decode_rate([c for _, c in by_mode[key]], prefill)
        return rates[key]

    for key in noise.profiles:
        near = servers.get(key[0], set())
        others = [o for o in own if o[0] != key[0] and near & servers.get(o[0], set())]
        if not others:
            continue  # no other model on its server: nothing to borrow
        donors = [(o, own[o], rate) for o in others if (rate := rate_of(o)) is not None]
        weighed = borrowed_slope(own.get(key), rate_of(key), donors)
        if weighed is not None:
            noise.prefill[key] = weighed
    counts = {key: len(calls) for key, calls in by_mode.items()}
    return replace(noise, streaming=streaming_cost(runs, noise.profiles, counts))


def _modes_seen(profile: LatencyProfile) -> set[bool] | None:
    """The modes a fitted profile's calls were made in (True: streamed); None by hand."""
    if not profile.calls:
        return None
    if profile.unstreamed_base_ms is not None or 0 < profile.ttft_calls < profile.calls:
        return {True, False}
    return {True} if profile.ttft_calls else {False}


def _log_residual(profile: LatencyProfile, call: ModelCall) -> float | None:
    streamed = call.ttft_ms is not None
    predicted = profile.service_ms(
        call.input_tokens or 0, call.output_tokens or 0, streamed=streamed
    )
    return math.log(call.service_ms / predicted) if predicted > 0 else None


def _quantile(ordered: Sequence[float], rank: float) -> float:
    """The value at quantile ``rank`` (0..1) of sorted values, the i-th at (i + 0.5) / n."""
    position = min(max(rank * len(ordered) - 0.5, 0.0), len(ordered) - 1.0)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def hit_ms_by_step(runs: Sequence[WorkflowRun]) -> dict[str, float]:
    hits: dict[str, list[float]] = {}
    for run in runs:
        for rec in counted_steps(run).values():
            if rec.cache_hit:
                hits.setdefault(rec.label, []).append((rec.end_ns - rec.start_ns) / 1e6)
    return {name: sorted(values)[len(values) // 2] for name, values in hits.items()}
