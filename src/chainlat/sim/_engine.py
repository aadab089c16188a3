"""The simulator's request pipeline: routing, fault injection, the latency timeline, spans.

Every request runs: network delay -> (x-sim-delay-ms stall) -> (x-sim-status fault) ->
parse -> queue for a model slot -> prefill -> decode. Deadlines are absolute
``perf_counter_ns`` instants, so a late wake-up on a busy machine never accumulates
into the later tokens of a stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import random
import time
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chainlat._core import attributes as attrs
from chainlat._core.errors import internal_errors
from chainlat.sim._anthropic import Messages
from chainlat.sim._audio import AUDIO_PATHS, AudioRoutes, VoiceProfile
from chainlat.sim._formats import (
    Api,
    ApiError,
    Job,
    generate_tokens,
    load_json,
    openai_error,
)
from chainlat.sim._http import Headers, Request, Responder
from chainlat.sim._openai import ChatCompletions, Completions, Embeddings
from chainlat.sim._tools import plan_tool_calls

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from chainlat.sim._profiles import ModelProfile

FAULT_STATUSES = (429, 500, 503)
"""Statuses ``x-sim-status`` may ask for."""
MAX_TOOL_CALLS = 64
"""The most parallel tool calls ``x-sim-tool-calls`` may ask for."""

_JSON = ("content-type", "application/json")


async def sleep_until(deadline_ns: int) -> None:
    """Sleep until ``perf_counter_ns() >= deadline_ns``; never wakes early."""
    while (remaining_ns := deadline_ns - time.perf_counter_ns()) > 0:
        await asyncio.sleep(remaining_ns / 1e9)


class Slots:
    """A FIFO counting semaphore: the concurrent requests one model can work on."""

    def __init__(self, size: int) -> None:
        self._free = size
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> None:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                # Handed a slot in the same tick as the cancellation: pass it on.
                self.release()
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1


class _Lease:
    """One held slot; `release` is idempotent so the happy path can free it early."""

    def __init__(self, slots: Slots) -> None:
        self._slots: Slots | None = slots

    def release(self) -> None:
        if self._slots is not None:
            self._slots.release()
            self._slots = None


@dataclass(frozen=True)
class _Faults:
    status: int | None = None
    cut_after: int | None = None
    delay_ns: int = 0
    retry_after_ms: float = 1000.0

    @classmethod
    def parse(cls, headers: dict[str, str]) -> _Faults:
        status = _header_number(headers, "x-sim-status", integer=True)
        if status is not None and status not in FAULT_STATUSES:
            allowed = ", ".join(map(str, FAULT_STATUSES))
            raise ApiError(400, f"x-sim-status must be one of {allowed}")
        cut_after = _header_number(headers, "x-sim-cut-after", integer=True)
        delay_ms = _header_number(headers, "x-sim-delay-ms") or 0.0
        retry_after_ms = _header_number(headers, "x-sim-retry-after-ms")
        return cls(
            status=None if status is None else int(status),
            cut_after=None if cut_after is None else int(cut_after),
            delay_ns=round(delay_ms * 1e6),
            retry_after_ms=1000.0 if retry_after_ms is None else retry_after_ms,
        )


def _header_number(headers: dict[str, str], name: str, *, integer: bool = False) -> float | None:
    text = headers.get(name)
    if text is None:
        return None
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        value = -1
    if not math.isfinite(value) or value < 0:
        kind = "an integer" if integer else "a number"
        raise ApiError(400, f"{name} must be {kind} >= 0, got {text!r}")
    return value


@dataclass(frozen=True)
class _Plan:
    """The drawn durations for one request, before any sleeping."""

    network_ns: int
    prefill_ns: int = 0
    decode_ns_per_token: float = 0.0
    output_tokens: int = 0

    def token_offset_ns(self, index: int) -> int:
        """When token ``index`` is due, counted from the slot being acquired."""
        return self.prefill_ns + round(index * self.decode_ns_per_token)

    @property
    def decode_ns(self) -> int:
        return round(max(self.output_tokens - 1, 0) * self.decode_ns_per_token)


@dataclass
class _Record:
    """What happened to one request, as ``perf_counter_ns`` stamps (0 = did not happen)."""

    request: Request
    request_id: str
    plan: _Plan
    api: Api | None = None
    job: Job | None = None
    start_ns: int = 0
    stalled: bool = False
    stall_end_ns: int = 0
    queued_ns: int = 0
    slot_ns: int = 0
    first_token_ns: int = 0
    done_ns: int = 0
    end_ns: int = 0
    status: int = 0
    error: str | None = None
    finished: bool = False


class _Cut(Exception):
    """The x-sim-cut-after budget is spent; the connection is already aborted."""


class Engine:
    """Routes requests and plays each one's latency timeline."""

    def __init__(
        self,
        profiles: Sequence[ModelProfile],
        *,
        network_delay_ms: float,
        network_jitter_ms: float,
        seed: int,
        tracer: Tracer | None,
        voices: Sequence[VoiceProfile] = (),
    ) -> None:
        self._profiles = {p.name: p for p in profiles}
        self._audio = AudioRoutes(voices, seed)
        self._slots = {p.name: Slots(p.slots) for p in profiles}
        self._model_counters = {p.name: itertools.count() for p in profiles}
        self._request_counter = itertools.count()
        self._network_delay_ms = network_delay_ms
        self._network_jitter_ms = network_jitter_ms
        self._seed = seed
        apis: list[Api] = [ChatCompletions(), Completions(), Embeddings(seed), Messages()]
        self._apis = {api.path: api for api in apis}
        self._tracer = tracer
        # One fixed offset maps perf_counter stamps to span timestamps, so span
        # durations are exactly the measured sleeps (no wall-clock steps inside).
        self._epoch_offset_ns = time.time_ns() - time.perf_counter_ns()

    def render_error(self, status: int, message: str) -> tuple[Headers, bytes]:
        """Body and headers for errors found before routing (malformed HTTP)."""
        return [_JSON], openai_error(status, message)

    # -- timing draws -------------------------------------------------------------------

    def _network_ns(self, sequence: int) -> int:
        delay_ms = self._network_delay_ms
        if self._network_jitter_ms > 0:
            rng = random.Random(f"{self._seed}:network:{sequence}")
            delay_ms = max(0.0, delay_ms + rng.gauss(0.0, self._network_jitter_ms))
        return round(delay_ms * 1e6)

    def _plan(self, network_ns: int, profile: ModelProfile, job: Job) -> _Plan:
        prefill_factor = decode_factor = 1.0
        if profile.jitter > 0:
            # Seeded by the model's own request count, so a run's n-th request to a model
            # draws the same factors whatever else runs beside it.
            n = next(self._model_counters[profile.name])
            rng = random.Random(f"{self._seed}:{profile.name}:{n}")
            prefill_factor = math.exp(rng.gauss(0.0, profile.jitter))
            decode_factor = math.exp(rng.gauss(0.0, profile.jitter))
        prefill_ms = profile.ttft_base_ms + profile.ttft_per_input_token_ms * job.input_tokens
        return _Plan(
            network_ns=network_ns,
            prefill_ns=round(prefill_ms * prefill_factor * 1e6),
            decode_ns_per_token=profile.decode_ms_per_token * decode_factor * 1e6,
            output_tokens=job.output_tokens,
        )

    # -- request handling ---------------------------------------------------------------

    async def handle(self, request: Request, responder: Responder) -> None:
        """Serve one request (the `serve_connection` handler)."""
        record = _Record(
            request=request,
            request_id=f"req_{uuid.uuid4().hex}",
            plan=_Plan(network_ns=self._network_ns(next(self._request_counter))),
            api=self._apis.get(request.path),
        )
        try:
            await sleep_until(request.received_ns + record.plan.network_ns)
            record.start_ns = time.perf_counter_ns()
            await self._serve(record, responder)
        except _Cut:
            record.error = "connection_cut"
        except asyncio.CancelledError:
            record.error = "cancelled"
            raise
        except Exception as exc:
            record.error = type(exc).__qualname__
            raise
        finally:
            self._finish(record, responder.status)

    def _finish(self, record: _Record, status: int) -> None:
        """End the request's spans; idempotent.

        Called just before the last bytes of a response are written, so that a client
        that has read a whole response finds the server's spans already ended (and, with
        a synchronous span processor, exported); failed requests end in `handle`.
        """
        if record.finished:
            return
        record.finished = True
        record.end_ns = time.perf_counter_ns()
        record.status = status
        if self._tracer is not None and record.start_ns:
            with internal_errors("emitting simulator spans"):
                self._emit_spans(record)

    async def _serve(self, record: _Record, responder: Responder) -> None:
        request = record.request
        api = record.api
        try:
            faults = _Faults.parse(request.headers)
        except ApiError as exc:
            await self._send_error(record, responder, exc)
            return
        if faults.delay_ns:
            record.stalled = True
            await sleep_until(record.start_ns + faults.delay_ns)
        record.stall_end_ns = time.perf_counter_ns()
        if faults.status is not None:
            extra: Headers = []
            if faults.status == 429:
                seconds = max(1, math.ceil(faults.retry_after_ms / 1000))
                extra = [
                    ("retry-after", str(seconds)),
                    ("retry-after-ms", str(round(faults.retry_after_ms))),
                ]
            message = f"simulated {faults.status} (x-sim-status)"
            await self._send_error(record, responder, ApiError(faults.status, message), extra)
            return
        if request.path in AUDIO_PATHS:
            try:
                await self._audio.serve(
                    request,
                    responder,
                    record.start_ns,
                    sleep_until,
                    lambda: self._headers(record),
                    lambda status: self._finish(record, status),
                )
            except ApiError as exc:
                await self._send_error(record, responder, exc)
            return
        if api is not None:
            if request.method != "POST":
                await self._send_error(record, responder, ApiError(405, "use POST"))
            else:
                await self._generate(record, responder, api, faults)
            return
        try:
            body = self._simple_route(request)
        except ApiError as exc:
            await self._send_error(record, responder, exc)
            return
        headers = [_JSON, *self._headers(record)]
        self._finish(record, 200)
        await responder.send(200, headers, json.dumps(body).encode())

    def _simple_route(self, request: Request) -> object:
        path = request.path.rstrip("/")
        known = path in ("/health", "/v1/models") or path.startswith("/v1/models/")
        if not known:
            raise ApiError(404, f"no route for {request.path}", "not_found")
        if request.method != "GET":
            raise ApiError(405, "use GET")
        if path == "/health":
            return {"status": "ok"}
        if path == "/v1/models":
            return {"object": "list", "data": [self._model_entry(m) for m in self._profiles]}
        name = path.removeprefix("/v1/models/")
        if name not in self._profiles:
            raise ApiError(404, _unknown_model(name), "model_not_found")
        return self._model_entry(name)

    @staticmethod
    def _model_entry(name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": 0, "owned_by": "chainlat-sim"}

    async def _send_error(
        self, record: _Record, responder: Responder, error: ApiError, extra: Headers | None = None
    ) -> None:
        if record.api is not None:
            body = record.api.error(error.status, error.message, error.code, error.param)
        else:
            body = openai_error(error.status, error.message, error.code, error.param)
        headers = [_JSON, *self._headers(record), *(extra or [])]
        self._finish(record, error.status)
        await responder.send(error.status, headers, body)

    async def _generate(
        self, record: _Record, responder: Responder, api: Api, faults: _Faults
    ) -> None:
        request = record.request
        try:
            raw = load_json(request.body)
            job = api.parse(raw, record.request_id.removeprefix("req_"))
            profile = self._profiles.get(job.model)
            if profile is None:
                raise ApiError(404, _unknown_model(job.model), "model_not_found")
            tool_calls = _header_number(request.headers, "x-sim-tool-calls", integer=True)
            if tool_calls is not None and not 1 <= tool_calls <= MAX_TOOL_CALLS:
                raise ApiError(400, f"x-sim-tool-calls must be 1..{MAX_TOOL_CALLS}")
        except ApiError as exc:
            await self._send_error(record, responder, exc)
            return
        job.created = int(time.time())
        # Made before queueing: the deadlines below are absolute, so this work
        # is off the measured path.
        plan_tool_calls(job, self._seed, None if tool_calls is None else int(tool_calls))
        if not isinstance(api, Embeddings):
            # A tool-call answer's tokens are its arguments' tokens: one latency formula.
            job.output_tokens = len(job.pieces) if job.tool_calls else profile.output_tokens
            if job.max_tokens is not None and job.max_tokens < job.output_tokens:
                job.output_tokens = job.max_tokens
                job.truncated = True
        record.job = job
        record.plan = self._plan(record.plan.network_ns, profile, job)
        if job.tool_calls:
            tokens = [piece.text for piece in job.pieces[: job.output_tokens]]
        else:
            tokens = generate_tokens(self._seed, job.model, job.prompt, job.output_tokens)
        slots = self._slots[job.model]
        record.queued_ns = time.perf_counter_ns()
        await slots.acquire()
        lease = _Lease(slots)
        try:
            record.slot_ns = time.perf_counter_ns()
            if job.stream and not isinstance(api, Embeddings):
                await self._stream(record, responder, api, job, tokens, lease, faults)
            else:
                await self._complete(record, responder, api, job, tokens, lease, faults)
        finally:
            lease.release()

    async def _complete(
        self,
        record: _Record,
        responder: Responder,
        api: Api,
        job: Job,
        tokens: list[str],
        lease: _Lease,
        faults: _Faults,
    ) -> None:
        plan = record.plan
        await sleep_until(record.slot_ns + plan.prefill_ns)
        record.first_token_ns = time.perf_counter_ns()
        if plan.decode_ns:
            await sleep_until(record.slot_ns + plan.prefill_ns + plan.decode_ns)
        record.done_ns = time.perf_counter_ns()
        lease.release()
        if faults.cut_after is not None:
            responder.abort()
            raise _Cut
        body = json.dumps(api.response(job, tokens), separators=(",", ":")).encode()
        headers = [_JSON, *self._headers(record)]
        self._finish(record, 200)
        await responder.send(200, headers, body)

    async def _stream(
        self,
        record: _Record,
        responder: Responder,
        api: Api,
        job: Job,
        tokens: list[str],
        lease: _Lease,
        faults: _Faults,
    ) -> None:
        sent = 0
        budget = faults.cut_after

        async def send(events: list[bytes]) -> None:
            nonlocal sent
            for event in events:
                await responder.chunk(event)
                sent += 1
                if budget is not None and sent >= budget:
                    responder.abort()
                    raise _Cut

        headers = [
            ("content-type", "text/event-stream; charset=utf-8"),
            ("cache-control", "no-cache"),
            *self._headers(record),
        ]
        await responder.start_chunked(200, headers)
        if budget == 0:
            responder.abort()
            raise _Cut
        await send(api.stream_open(job))
        plan = record.plan
        for index, token in enumerate(tokens):
            await sleep_until(record.slot_ns + plan.token_offset_ns(index))
            if index == 0:
                record.first_token_ns = time.perf_counter_ns()
            await send(api.stream_token(job, index, token))
        record.done_ns = time.perf_counter_ns()
        lease.release()
        closing = api.stream_close(job)
        if budget is None or sent + len(closing) < budget:
            self._finish(record, 200)  # else the cut below ends the spans, as an error
        await send(closing)
        await responder.end_chunked()

    def _headers(self, record: _Record) -> Headers:
        """Timing and id headers, as far as the timeline has got."""
        now = time.perf_counter_ns()
        phases: list[tuple[str, int]] = []
        if record.stalled:
            phases.append(("stall", record.stall_end_ns - record.start_ns))
        if record.slot_ns:
            phases.append(("queue", record.slot_ns - record.queued_ns))
        if record.first_token_ns:
            phases.append(("prefill", record.first_token_ns - record.slot_ns))
        if record.done_ns and record.plan.output_tokens:
            phases.append(("decode", record.done_ns - record.first_token_ns))
        plan = record.plan
        planned = [("network", plan.network_ns)]
        if record.job is not None:
            planned.append(("prefill", plan.prefill_ns))
            if plan.output_tokens:
                planned.append(("decode", plan.decode_ns))
        headers: Headers = [
            ("x-request-id", record.request_id),
            ("openai-processing-ms", str(round((now - record.start_ns) / 1e6))),
            ("server-timing", _server_timing(phases)),
            ("x-sim-plan", _server_timing(planned)),
        ]
        if record.api is not None and record.api.provider == "anthropic":
            headers.append(("request-id", record.request_id))
        return [(k, v) for k, v in headers if v]

    # -- tracing ------------------------------------------------------------------------

    def _emit_spans(self, record: _Record) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        assert self._tracer is not None
        request, job, api = record.request, record.job, record.api
        offset = self._epoch_offset_ns
        parent = TraceContextTextMapPropagator().extract(request.headers)
        route = api.path if api is not None else _simple_route_name(request.path)
        attributes: dict[str, Any] = {
            "http.request.method": request.method,
            "url.path": request.path,
            "chainlat.sim.network_delay_ms": record.plan.network_ns / 1e6,
        }
        if record.status:
            attributes["http.response.status_code"] = record.status
        model_attributes: dict[str, Any] = {}
        if job is not None and api is not None:
            model_attributes[attrs.GEN_AI_REQUEST_MODEL] = job.model
            attributes.update(model_attributes)
            attributes[attrs.GEN_AI_OPERATION_NAME] = api.operation
            attributes[attrs.GEN_AI_PROVIDER_NAME] = api.provider
            attributes[attrs.GEN_AI_USAGE_INPUT_TOKENS] = job.input_tokens
            attributes[attrs.GEN_AI_USAGE_OUTPUT_TOKENS] = job.output_tokens
            if job.max_tokens is not None:
                attributes["gen_ai.request.max_tokens"] = job.max_tokens
        server = self._tracer.start_span(
            f"{request.method} {route}" if route else request.method,
            context=parent,
            kind=SpanKind.SERVER,
            start_time=record.start_ns + offset,
            attributes=attributes,
        )
        context = trace.set_span_in_context(server)
        phases: list[tuple[str, int, int, dict[str, Any]]] = []
        if record.slot_ns:
            phases.append(("queue", record.queued_ns, record.slot_ns, {}))
        if record.first_token_ns and job is not None:
            usage = {attrs.GEN_AI_USAGE_INPUT_TOKENS: job.input_tokens}
            phases.append(("prefill", record.slot_ns, record.first_token_ns, usage))
            if record.done_ns and job.output_tokens:
                usage = {attrs.GEN_AI_USAGE_OUTPUT_TOKENS: job.output_tokens}
                phases.append(("decode", record.first_token_ns, record.done_ns, usage))
        for name, start_ns, end_ns, extra in phases:
            child = self._tracer.start_span(
                name,
                context=context,
                start_time=start_ns + offset,
                attributes={**model_attributes, **extra},
            )
            child.end(end_time=end_ns + offset)
        error = record.error or (str(record.status) if record.status >= 500 else None)
        if error is not None:
            server.set_attribute(attrs.ERROR_TYPE, error)
            server.set_status(Status(StatusCode.ERROR, error))
        server.end(end_time=record.end_ns + offset)


def _simple_route_name(path: str) -> str | None:
    """The low-cardinality route of a GET endpoint, None for an unknown path."""
    path = path.rstrip("/")
    if path in ("/health", "/v1/models") or path in AUDIO_PATHS:
        return path
    return "/v1/models/{model}" if path.startswith("/v1/models/") else None


def _unknown_model(name: str) -> str:
    return f"The model `{name}` does not exist or you do not have access to it."


def _server_timing(entries: list[tuple[str, int]]) -> str:
    return ", ".join(f"{name};dur={ns / 1e6:.3f}" for name, ns in entries)
