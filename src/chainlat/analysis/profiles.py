"""Latency profiles per model: fitted from traces, or written by hand.

A profile says how long a model takes for a given amount of work, apart from
the queueing and network around it::

    service time = ttft_base_ms + ttft_per_input_token_ms * input tokens      (prefill)
                 + decode_ms_per_token * (output tokens - 1)                   (decode)

The keys are those of :class:`chainlat.sim.ModelProfile`, so a simulator
profile and a latency profile can be read side by side. Durations are
milliseconds.

Fitting (:func:`fit_profiles`), per model, over the model calls of the runs
(failed calls and cache hits left out):

* **Service time** is the call's duration less the parts that do not depend on
  the model: ``chainlat.latency.queue_ms`` (waiting for a connection),
  ``connect_ms``, ``send_ms`` (writing the request: a busy client takes hundreds
  of milliseconds at it) and ``network_ms``, when the httpx instrumentation
  recorded them.
* **Time to first token**, when calls streamed (``chainlat.latency.ttft_ms`` or
  ``gen_ai.response.time_to_first_chunk``): a least-squares line of TTFT
  (less queue and network) against input tokens gives ``ttft_base_ms`` and
  ``ttft_per_input_token_ms``; ``decode_ms_per_token`` is the least-squares
  slope, through the origin, of (duration - TTFT) against (output tokens - 1).
* **Streamed calls and calls not streamed**, both among a model's calls: the
  ones not streamed are fitted apart (``unstreamed_base_ms`` and
  ``unstreamed_decode_ms_per_token``, against the service time less the prefill
  slope), because a streamed call also pays for reading every chunk: one line
  for both kinds predicts the calls not streamed too slow and the streamed ones
  too fast, and its residuals mix the two (docs/tradeoffs.md).
* **Without first-token times** the service time is fitted as one linear model
  of input and output tokens. When the output length never varied, decode time
  cannot be told apart from prefill: ``decode_ms_per_token`` is then left out
  (None) and ``ttft_base_ms`` holds the whole service time at that length; the
  profile says so in ``note``.
* A slope that is negative, or within three standard errors of 0, is set to 0 (the
  line flat at the mean): over a narrow range of input tokens the noise decides
  the slope, and extrapolating a noisy slope to other prompt sizes does more
  harm than assuming none. The profile's ``note`` says so, with the range.
* **Residual**: each call's service time divided by the profile's prediction
  for its own tokens; ``residual_sigma`` is the standard deviation of its
  logarithm (0.1 is about +/-10 %).
* **Shares**: ``queue_share`` and ``network_share`` are the summed queue and
  network times over the summed durations of the calls that recorded them.
* ``cache_hit_ms``: the median duration of the calls marked as cache hits.

Example::

    profiles = fit_profiles(runs)
    save_profiles("profiles.toml", profiles)
    print(profiles["gpt-4o"].service_ms(input_tokens=1200, output_tokens=300))

The model and its files live in :mod:`chainlat._core.latency`, shared with the
simulator; they are re-exported here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from chainlat._core import attributes as attr
from chainlat._core import conventions
from chainlat._core.errors import ProfileError
from chainlat._core.latency import (
    LatencyProfile,
    dumps_profiles,
    load_profiles,
    parse_profiles,
    save_profiles,
)
from chainlat._core.rollup import find_twins
from chainlat.analysis.fitting import fit_line, rounded
from chainlat.analysis.speech import fit_speech_profile, speech_input_of

if TYPE_CHECKING:
    from chainlat._core.runs import TracedSpan, WorkflowRun

__all__ = [
    "STREAM_USAGE",
    "LatencyProfile",
    "ModelCall",
    "ProfileFileError",
    "calls_by_model",
    "calls_of",
    "dumps_profiles",
    "fit_by_model",
    "fit_profile",
    "fit_profiles",
    "load_profiles",
    "parse_profiles",
    "save_profiles",
    "usage_gaps",
]

_ENV_KEYS: Final = (
    attr.LATENCY_QUEUE_MS,
    attr.LATENCY_CONNECT_MS,
    attr.LATENCY_SEND_MS,
    attr.LATENCY_NETWORK_MS,
)
"""Parts of a model call's duration that do not depend on the model."""
_NS_PER_MS: Final = 1_000_000
MAX_TOKENS: Final = 10**9
"""Token counts above this (a billion) are not a call's: a hostile or corrupt trace, left
out of fits so that their squares stay finite floats."""


STREAM_USAGE: Final = 'stream_options={"include_usage": True}'
"""What an OpenAI-style streamed request needs for its answer to carry token counts."""

ProfileFileError = ProfileError
"""The name this module has always raised; the one profile error of chainlat."""


# -- model calls -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model call of a run: an inference step with its tokens and latency parts."""

    span_id: int
    """The inference step's span (the outermost, when instrumentations nest)."""
    step: str
    """The step's span name (``chat gpt-4o``)."""
    model: str
    duration_ms: float
    input_tokens: int | None = None
    output_tokens: int | None = None
    ttft_ms: float | None = None
    """From the step's start to the first token, when it streamed."""
    generation_ms: float | None = None
    """A stream's first output chunk to its last (``chainlat.latency.generation_ms``):
    what is left after it, to the call's end, is the client finishing the stream."""
    env_ms: float = 0.0
    """Queue, connect and network time recorded on the call (0 when not recorded)."""
    queue_ms: float | None = None
    network_ms: float | None = None
    cache_hit: bool = False
    error: bool = False
    operation: str | None = None
    """``speech_to_text`` or ``text_to_speech`` for a speech call, else None."""
    speech_input: float | None = None
    """A speech call's input: characters spoken (TTS) or seconds of audio heard (STT)."""
    server: str | None = None
    """Where it was sent (``server.address``, ``:server.port`` when recorded); None when
    no span of the call says."""

    @property
    def service_ms(self) -> float:
        """The duration less queue and network."""
        return max(self.duration_ms - self.env_ms, 0.0)


def _number(attributes: Mapping[str, object], key: str) -> float | None:
    value = attributes.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _tokens(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKENS:
        return None
    return value


def _model_of(span: TracedSpan) -> str | None:
    # The model asked for first: what-if swaps name the requested model.
    value = span.attributes.get(attr.GEN_AI_REQUEST_MODEL)
    if isinstance(value, str) and value:
        return value
    return conventions.model_of(span.attributes)


def _server_of(span: TracedSpan) -> str | None:
    address = span.attributes.get(attr.SERVER_ADDRESS)
    if not isinstance(address, str) or not address:
        return None
    port = span.attributes.get(attr.SERVER_PORT)
    if isinstance(port, int) and not isinstance(port, bool):
        return f"{address}:{port}"
    return address


def _ttft_of(span: TracedSpan) -> float | None:
    ttft = conventions.ttft_ms_of(span.attributes)
    # The trace readers also take it from the chainlat.first_token event.
    return ttft if ttft is not None else span.record.ttft_ms


def calls_of(run: WorkflowRun) -> list[ModelCall]:
    """The model calls of a run, in start order.

    An inference span inside an inference step is the same call seen twice (the
    HTTP-level span inside a hand-written ``chainlat.inference``): its model,
    tokens and latency parts fill in what the outer span lacks.
    """
    twins = find_twins(run.root_record.span_id, run.records)
    seen_twice: dict[int, list[TracedSpan]] = {}
    children: dict[int, list[TracedSpan]] = {}
    for span in run.spans:
        primary = twins.get(span.record.span_id)
        if primary is not None:  # the same call seen by a second instrumentation
            seen_twice.setdefault(primary.span_id, []).append(span)
        if span.record.parent_id is not None:
            children.setdefault(span.record.parent_id, []).append(span)
    calls: list[ModelCall] = []
    if run.root is None:
        return calls  # a run without its span tree (built live, not read)
    stack: list[tuple[TracedSpan, bool]] = [(run.root, False)]
    while stack:
        span, in_inference = stack.pop()
        for child in children.get(span.record.span_id, ()):
            kind = child.record.kind
            if twins and child.record.span_id in twins:
                kind = None
            if kind == "inference" and not in_inference:
                calls.append(_call_of(child, children, seen_twice.get(child.record.span_id, ())))
                stack.append((child, True))
            else:
                # A data stage, tool or workflow inside a model call is a step of its own.
                stack.append((child, in_inference and kind not in ("data", "tool", "workflow")))
    start = {s.record.span_id: s.record.start_ns for s in run.spans}
    calls.sort(key=lambda c: start.get(c.span_id, 0))
    return calls


def _call_of(
    step: TracedSpan,
    children: Mapping[int, list[TracedSpan]],
    twins: Sequence[TracedSpan] = (),
) -> ModelCall:
    # The step and the same-kind spans nested in it, outer first, then its twins.
    group = [step]
    stack = [step]
    while stack:
        for child in children.get(stack.pop().record.span_id, ()):
            if child.record.kind in ("data", "tool", "workflow"):
                continue
            if child.record.kind == "inference":
                group.append(child)
            stack.append(child)
    group.extend(twins)
    model = next((m for m in map(_model_of, group) if m is not None), None)
    if model is None:
        model = step.record.name.split(" ", 1)[-1]
    ttft: float | None = None
    for span in group:
        found = _ttft_of(span)
        if found is not None:
            ttft = found + (span.record.start_ns - step.record.start_ns) / _NS_PER_MS
            break
    tokens_in = [t for s in group if (t := _tokens(s.record.input_tokens)) is not None]
    tokens_out = [t for s in group if (t := _tokens(s.record.output_tokens)) is not None]
    env: float = 0.0
    parts: dict[str, float] = {}
    for key in _ENV_KEYS:
        value = next(
            (v for v in (_number(s.attributes, key) for s in group) if v is not None), None
        )
        if value is not None:
            parts[key] = value
            env += value
    record = step.record
    operation, speech_input = speech_input_of(s.attributes for s in group)
    generations = (_number(s.attributes, attr.LATENCY_GENERATION_MS) for s in group)
    generation = next((g for g in generations if g is not None and g > 0), None)
    return ModelCall(
        span_id=record.span_id,
        step=record.label,
        model=model,
        duration_ms=max(record.end_ns - record.start_ns, 0) / _NS_PER_MS,
        input_tokens=max(tokens_in) if tokens_in else None,
        output_tokens=max(tokens_out) if tokens_out else None,
        ttft_ms=ttft,
        generation_ms=generation if ttft is not None else None,
        env_ms=env,
        queue_ms=parts.get(attr.LATENCY_QUEUE_MS),
        network_ms=parts.get(attr.LATENCY_NETWORK_MS),
        cache_hit=any(s.record.cache_hit for s in group),
        error=any(s.error or attr.ERROR_TYPE in s.attributes for s in group),
        operation=operation,
        speech_input=speech_input,
        server=next((s for s in map(_server_of, group) if s is not None), None),
    )


# -- fitting -----------------------------------------------------------------------------


def _plane(
    xs: Sequence[float], zs: Sequence[float], ys: Sequence[float]
) -> tuple[float, float, float] | None:
    """Least squares y = a + b x + c z; None when x and z are collinear or a slope is negative."""
    mx, mz, my = statistics.fmean(xs), statistics.fmean(zs), statistics.fmean(ys)
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    szz = math.fsum((z - mz) ** 2 for z in zs)
    sxz = math.fsum((x - mx) * (z - mz) for x, z in zip(xs, zs, strict=True))
    sxy = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    szy = math.fsum((z - mz) * (y - my) for z, y in zip(zs, ys, strict=True))
    det = sxx * szz - sxz * sxz
    if det <= 1e-9 * max(sxx * szz, 1e-300):
        return None
    b = (sxy * szz - szy * sxz) / det
    c = (szy * sxx - sxy * sxz) / det
    if b < 0 or c < 0:
        return None
    return my - b * mx - c * mz, b, c


def fit_profile(calls: Iterable[ModelCall], *, in_sample: bool = False) -> LatencyProfile | None:
    """The latency profile of one model from its calls; None when no call can be used.

    ``in_sample=True`` skips the three-standard-errors rule: a positive slope is
    kept however noisy. The result describes these calls best (what each call's
    residual should be measured against) but is not meant for other prompt sizes.
    """
    every = list(calls)
    hits = [c.duration_ms for c in every if c.cache_hit and not c.error]
    usable = [
        c
        for c in every
        if not c.cache_hit
        and not c.error
        and c.input_tokens is not None
        and c.output_tokens is not None
    ]
    if not usable:
        return None
    streamed = [c for c in usable if c.ttft_ms is not None]
    notes: list[str] = []
    if streamed:
        base, per_input, decode_ms = _fit_streamed(streamed, in_sample, notes)
    else:
        base, per_input, decode_ms = _fit_unstreamed(usable, in_sample, notes)
    if not all(math.isfinite(v) for v in (base, per_input, decode_ms or 0.0)):
        return None  # no fit: a profile holds finite numbers only
    profile = LatencyProfile(
        ttft_base_ms=rounded(base),
        ttft_per_input_token_ms=rounded(per_input),
        decode_ms_per_token=rounded(decode_ms) if decode_ms is not None else None,
    )
    plain = [c for c in usable if c.ttft_ms is None]
    if streamed and plain:
        profile = _with_unstreamed(profile, plain, in_sample)
    logs = [
        math.log(c.service_ms / predicted)
        for c in usable
        if c.service_ms > 0 and (predicted := _predicted(profile, c)) > 0
    ]
    ins = [c.input_tokens or 0 for c in usable]
    outs = [c.output_tokens or 0 for c in usable]
    queue = [(c.queue_ms, c.duration_ms) for c in every if c.queue_ms is not None]
    network = [(c.network_ms, c.duration_ms) for c in every if c.network_ms is not None]
    return profile.model_copy(
        update={
            "cache_hit_ms": rounded(statistics.median(hits)) if hits else None,
            "residual_sigma": rounded(statistics.stdev(logs)) if len(logs) > 1 else None,
            "queue_share": _share(queue),
            "network_share": _share(network),
            "calls": len(usable),
            "ttft_calls": len(streamed),
            "input_tokens_range": (min(ins), max(ins)),
            "output_tokens_range": (max(min(outs), 1), max(max(outs), 1)),
            "note": "; ".join(notes),
        }
    )


def _predicted(profile: LatencyProfile, call: ModelCall) -> float:
    """The profile's service time for the call's tokens, and its mode (streamed or not)."""
    streamed = call.ttft_ms is not None
    return profile.service_ms(call.input_tokens or 0, call.output_tokens or 0, streamed=streamed)


def _fit_streamed(
    streamed: Sequence[ModelCall], in_sample: bool, notes: list[str]
) -> tuple[float, float, float | None]:
    """Prefill from the first-token times, decode from the time after the first token."""
    x_ttft = [float(c.input_tokens or 0) for c in streamed]
    base, per_input, kept = fit_line(
        x_ttft, [max((c.ttft_ms or 0.0) - c.env_ms, 0.0) for c in streamed], in_sample=in_sample
    )
    if not kept and len(set(x_ttft)) > 1:
        notes.append(_flat_note(x_ttft))
    pairs = [
        (float((c.output_tokens or 0) - 1), c.duration_ms - (c.ttft_ms or 0.0))
        for c in streamed
        if (c.output_tokens or 0) > 1
    ]
    sxx = math.fsum(k * k for k, _ in pairs)
    decode_ms = max(math.fsum(k * g for k, g in pairs) / sxx, 0.0) if sxx > 0 else None
    if decode_ms is None:
        notes.append("no streamed call produced more than one token: decode time not fitted")
    return base, per_input, decode_ms


def _fit_unstreamed(
    usable: Sequence[ModelCall], in_sample: bool, notes: list[str]
) -> tuple[float, float, float | None]:
    """Service time as a plane of input and output tokens, when the two can be told apart."""
    ins = [float(c.input_tokens or 0) for c in usable]
    decodes = [float(max((c.output_tokens or 0) - 1, 0)) for c in usable]
    service = [c.service_ms for c in usable]
    decode_ms: float | None
    plane = _plane(ins, decodes, service) if len(set(decodes)) > 1 else None
    if plane is not None:
        base, per_input, decode_ms = plane
    elif len(set(decodes)) > 1 and len(set(ins)) <= 1:
        base, decode_ms, _ = fit_line(decodes, service, in_sample=in_sample)
        per_input = 0.0
    else:
        base, per_input, kept = fit_line(ins, service, in_sample=in_sample)
        if not kept and len(set(ins)) > 1:
            notes.append(_flat_note(ins))
        decode_ms = None
        lengths = sorted({int(d) + 1 for d in decodes})
        shown = str(lengths[0]) if len(lengths) == 1 else f"{lengths[0]}-{lengths[-1]}"
        notes.append(
            "no first-token times and output length not separable "
            f"(output tokens {shown}): ttft_base_ms includes the decode time"
        )
    return max(base, 0.0), per_input, decode_ms


def _with_unstreamed(
    profile: LatencyProfile, plain: Sequence[ModelCall], in_sample: bool
) -> LatencyProfile:
    """The profile with the calls not streamed fitted apart: same prefill slope, their own
    base and time per output token (a streamed call also pays for reading every chunk)."""
    decodes = [float(max((c.output_tokens or 0) - 1, 0)) for c in plain]
    rest = [c.service_ms - profile.ttft_per_input_token_ms * (c.input_tokens or 0) for c in plain]
    if len(set(decodes)) > 1:
        base, per_token, _ = fit_line(decodes, rest, in_sample=in_sample)
    else:  # one answer length: the streamed calls' rate, the base from these calls
        per_token = profile.decode_ms_per_token or 0.0
        base = statistics.fmean(r - per_token * d for r, d in zip(rest, decodes, strict=True))
    if not (math.isfinite(base) and math.isfinite(per_token)):
        return profile
    return profile.model_copy(
        update={
            "unstreamed_base_ms": rounded(max(base, 0.0)),
            "unstreamed_decode_ms_per_token": rounded(per_token),
        }
    )


def _flat_note(xs: Sequence[float]) -> str:
    return (
        f"input tokens {min(xs):.0f}-{max(xs):.0f}: too narrow a range to fit a slope "
        "above the noise; taken as flat"
    )


def _share(parts: Sequence[tuple[float | None, float]]) -> float | None:
    total = math.fsum(d for _, d in parts)
    if not parts or total <= 0:
        return None
    return rounded(min(max(math.fsum(p or 0.0 for p, _ in parts) / total, 0.0), 1.0))


def usage_gaps(calls: Iterable[ModelCall]) -> dict[str, int]:
    """Models with no call a profile can be fitted from, by the count of their calls that
    streamed without token counts (the cause, when it is not 0).

    Example::

        for model, n in usage_gaps(c for run in runs for c in calls_of(run)).items():
            print(f"{model}: {n} calls streamed without usage; stream with {STREAM_USAGE}")
    """
    gaps: dict[str, int] = {}
    usable: set[str] = set()
    for call in calls:
        if call.error or call.cache_hit or call.speech_input is not None:
            continue  # never fitted, or fitted on its speech input
        if call.input_tokens is not None and call.output_tokens is not None:
            usable.add(call.model)
        elif call.ttft_ms is not None:
            gaps[call.model] = gaps.get(call.model, 0) + 1
    return {model: n for model, n in sorted(gaps.items()) if model not in usable}


def fit_profiles(runs: Iterable[WorkflowRun]) -> dict[str, LatencyProfile]:
    """A latency profile for every model called in the runs, by model name (sorted).

    Example::

        profiles = fit_profiles(runs)
        print(profiles["gpt-4o-mini"].decode_ms_per_token)
    """
    return fit_by_model(calls_by_model(runs))


def calls_by_model(runs: Iterable[WorkflowRun]) -> dict[str, list[ModelCall]]:
    """The model calls of the runs, by model name (sorted)."""
    by_model: dict[str, list[ModelCall]] = {}
    for run in runs:
        for call in calls_of(run):
            by_model.setdefault(call.model, []).append(call)
    return dict(sorted(by_model.items()))


def fit_by_model(calls: Mapping[str, Iterable[ModelCall]]) -> dict[str, LatencyProfile]:
    """A profile for every model whose calls can be fitted (:func:`fit_profile`)."""
    fitted = {model: _fit_any(list(found)) for model, found in calls.items()}
    return {model: profile for model, profile in fitted.items() if profile is not None}


def _fit_any(calls: list[ModelCall]) -> LatencyProfile | None:
    """A speech model's calls are fitted on their speech input, others on their tokens."""
    if any(c.speech_input is not None for c in calls):
        return fit_speech_profile(calls)
    return fit_profile(calls)
