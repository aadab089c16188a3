"""What the chainlat.httpx tests against chainlat.sim share: the profile served, the
latencies it injects, repeated runs of a call, and clients traced by chainlat.

Every measured part of the breakdown is compared with the latency the simulator was told
to inject, in two ways:

* Floors, in every run. A duration from an instant the client recorded before the server
  acted (the span's start, the request starting to go out) to one it recorded after
  (headers, a chunk, the end) is never shorter than the injected delay, less `EARLY_MS`
  (clock reads on both sides of a loopback socket, the whole-millisecond
  ``openai-processing-ms``). Load cannot break these: they are the real assertions.
* Windows, in the best run. Load only makes a run slower, and it can shift time between
  adjacent parts: a late first chunk shortens ``generation``, a late "request written"
  shortens ``wait``. So each part must come within [expected - early, expected +
  `LATE_MS`] in one run at least, and the call is repeated (`MIN_RUNS`, then up to
  `MAX_RUNS` while a window is still unmet): a busy moment on the shared two-core
  machine costs a retry, not a failure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx2
import openai
from opentelemetry.sdk.trace import ReadableSpan

from chainlat.httpx import AsyncTracingTransport, TracingTransport
from chainlat.sim import ModelProfile, SimServer
from chainlat.testing import Capture
from support.httpx_checks import check_identity, model_spans

EARLY_MS = 2.0
"""A floor may look early by this much: clock reads on both sides of a socket, whole ms."""
LATE_MS = 50.0
"""The best run may be this much late: room for a shared two-core machine under load."""
SHIFT_MS = 20.0
"""How much earlier a part starting at a late client instant may look in its best run."""
MIN_RUNS = 3
MAX_RUNS = 8

NETWORK_MS = 40.0
TTFT_MS = 120.0
DECODE_MS = 15.0
TOKENS = 20
PROFILE = ModelProfile(
    "sim-test",
    ttft_base_ms=TTFT_MS,
    decode_ms_per_token=DECODE_MS,
    output_tokens=TOKENS,
    slots=16,
)
GENERATION_MS = DECODE_MS * (TOKENS - 1)  # 285
SERVER_MS = TTFT_MS + GENERATION_MS  # 405: openai-processing-ms of a whole answer
WAIT_MS = NETWORK_MS + SERVER_MS  # 445
FIRST_TOKEN_MS = NETWORK_MS + TTFT_MS  # 160
MESSAGES: list[Any] = [{"role": "user", "content": "Say something."}]


def within(value: float, expected: float, *, early: float = EARLY_MS) -> bool:
    """``value`` is in the window [expected - early, expected + `LATE_MS`]."""
    return expected - early <= value <= expected + LATE_MS


Done = Callable[[list[ReadableSpan]], bool]
"""Whether the model spans of the runs so far are enough (see `more_runs`)."""


def more_runs(spans: list[ReadableSpan], done: Done) -> bool:
    """`MIN_RUNS` at least, then more up to `MAX_RUNS` until ``done``."""
    return len(spans) < MIN_RUNS or (len(spans) < MAX_RUNS and not done(spans))


def runs(cap: Capture, call: Callable[[], object], done: Done) -> list[ReadableSpan]:
    """Make the call until `done` (see `more_runs`); the model span of each run, checked."""
    spans: list[ReadableSpan] = []
    while more_runs(spans, done):
        before = len(model_spans(cap.spans()))
        call()
        new = model_spans(cap.spans())[before:]
        assert len(new) == 1, [s.name for s in new]
        check_identity(new[0])
        spans.append(new[0])
    return spans


def openai_client(sim: SimServer, cap: Capture, **options: Any) -> openai.OpenAI:
    """An OpenAI client of ``sim`` traced into ``cap`` (``options``: the transport's)."""
    transport = TracingTransport(httpx2.HTTPTransport(), tracer_provider=cap.provider, **options)
    return openai.OpenAI(
        base_url=sim.base_url + "/v1",
        api_key="sk-test",
        http_client=httpx2.Client(transport=transport),
        max_retries=0,
    )


def async_openai_client(sim: SimServer, cap: Capture) -> openai.AsyncOpenAI:
    """An async OpenAI client of ``sim`` traced into ``cap``."""
    transport = AsyncTracingTransport(httpx2.AsyncHTTPTransport(), tracer_provider=cap.provider)
    return openai.AsyncOpenAI(
        base_url=sim.base_url + "/v1",
        api_key="sk-test",
        http_client=httpx2.AsyncClient(transport=transport),
        max_retries=0,
    )
