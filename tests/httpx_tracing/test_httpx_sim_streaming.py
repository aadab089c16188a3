"""chainlat.httpx over real HTTP on 127.0.0.1, against chainlat.sim: a traced stream reaches
the application chunk by chunk, at the server's pace, its bytes unchanged."""

from __future__ import annotations

import itertools
import time

import httpx
from opentelemetry.sdk.trace import ReadableSpan

from chainlat._core import attributes as attr
from chainlat.httpx import TracingTransport
from chainlat.sim import SimServer
from chainlat.testing import Capture
from support.httpx_sim import (
    DECODE_MS,
    EARLY_MS,
    FIRST_TOKEN_MS,
    GENERATION_MS,
    LATE_MS,
    MESSAGES,
    SHIFT_MS,
    TOKENS,
    openai_client,
    runs,
    within,
)


def spread_ms(times: list[int]) -> float:
    """First to last of the instants (ns) an application got the tokens, in ms."""
    return (times[-1] - times[0]) / 1e6


def at_the_servers_pace(times: list[int]) -> bool:
    """Tokens spread over the whole generation, most gaps a whole decode step.

    A buffered stream would show a spread near 0. The spread runs from the first token,
    which may be read late, so it may look short by `SHIFT_MS`.
    """
    gaps_ms = [(b - a) / 1e6 for a, b in itertools.pairwise(times)]
    whole_steps = sum(1 for g in gaps_ms if g >= DECODE_MS - EARLY_MS - 1)
    return (
        within(spread_ms(times), GENERATION_MS, early=SHIFT_MS) and whole_steps >= len(gaps_ms) // 2
    )


def test_a_stream_reaches_the_application_chunk_by_chunk_at_the_servers_pace(
    sim: SimServer, live: Capture
) -> None:
    """Each chunk is in the application's hands when the server sends it, not at the end."""
    seen: list[list[int]] = []  # per run, when the application got each token (epoch ns)
    with openai_client(sim, live) as client:

        def call() -> None:
            stream = client.chat.completions.create(
                model="sim-test", messages=MESSAGES, stream=True
            )
            seen.append(
                [time.time_ns() for c in stream if c.choices and c.choices[0].delta.content]
            )

        def lag_ms(times: list[int], span: ReadableSpan) -> float:
            """From chainlat seeing the first token to the application getting it."""
            [event] = [e for e in span.events if e.name == attr.FIRST_TOKEN_EVENT]
            assert event.timestamp is not None
            return (times[0] - event.timestamp) / 1e6

        def done(spans: list[ReadableSpan]) -> bool:
            return any(at_the_servers_pace(times) for times in seen) and any(
                lag_ms(times, span) <= LATE_MS for times, span in zip(seen, spans, strict=True)
            )

        spans = runs(live, call, done)
    assert all(len(times) == TOKENS for times in seen)
    # The last token came a whole generation after the first token was sent: never earlier.
    assert all(
        (times[-1] - span.start_time) / 1e6 >= FIRST_TOKEN_MS + GENERATION_MS - EARLY_MS
        for times, span in zip(seen, spans, strict=True)
        if span.start_time is not None
    )
    assert any(at_the_servers_pace(times) for times in seen), [spread_ms(t) for t in seen]
    # The application gets the first token after chainlat saw it, within ms in the best run.
    lags_ms = [lag_ms(times, span) for times, span in zip(seen, spans, strict=True)]
    assert all(lag >= 0 for lag in lags_ms) and min(lags_ms) <= LATE_MS, lags_ms


def test_raw_httpx_stream_chunks_are_passed_on_unchanged_and_unbatched(
    sim: SimServer, live: Capture
) -> None:
    transport = TracingTransport(httpx.HTTPTransport(), tracer_provider=live.provider)
    body = {"model": "sim-test", "messages": MESSAGES, "stream": True}
    url = sim.base_url + "/v1/chat/completions"
    reads: list[list[tuple[int, bytes]]] = []

    def token_times(traced: list[tuple[int, bytes]]) -> list[int]:
        return [t for t, raw in traced if b'"content":"' in raw]

    with httpx.Client(transport=transport) as client:

        def call() -> None:
            with client.stream("POST", url, json=body) as response:
                reads.append([(time.time_ns(), raw) for raw in response.iter_raw()])

        def done(spans: list[ReadableSpan]) -> bool:
            spreads = [spread_ms(token_times(traced)) for traced in reads]
            return any(within(s, GENERATION_MS, early=SHIFT_MS) for s in spreads)

        spans = runs(live, call, done)
    with httpx.Client() as plain, plain.stream("POST", url, json=body) as response:
        untraced = b"".join(response.iter_raw())
    for traced, span in zip(reads, spans, strict=True):
        data = b"".join(raw for _, raw in traced)
        # The same events as without chainlat (ids and timestamps differ).
        assert data.count(b"data: ") == untraced.count(b"data: ") == TOKENS + 2
        tokens = token_times(traced)
        assert len(tokens) >= TOKENS // 2  # read as they come, not all at the end
        # The last token never comes before a whole generation after the request started.
        assert span.start_time is not None
        assert (tokens[-1] - span.start_time) / 1e6 >= FIRST_TOKEN_MS + GENERATION_MS - EARLY_MS
    spreads = [spread_ms(token_times(traced)) for traced in reads]
    # Spread over the generation in the best run (from a first token that may be read late).
    assert any(within(spread, GENERATION_MS, early=SHIFT_MS) for spread in spreads), spreads
