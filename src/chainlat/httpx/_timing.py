"""The latency breakdown of one HTTP model call: instants in, ``chainlat.latency.*`` out.

Pure and stdlib-only. The transport feeds a `Timeline` with httpcore's request ``trace``
events (``connection.connect_tcp.started``, ``http11.send_request_headers.started``, ...),
the instant the response headers came back, every output chunk of a stream and the end.
All instants come from one clock (the span processor's), so the parts are exact
differences of the same numbers the span's start and end are made of:

    t0  the transport got the request (the span's start)
    tC  a new connection started (first ``connect_tcp``/``connect_unix_socket`` start)
    tS  the request started going out (last ``send_request_headers`` start)
    tW  the request was written (last ``send_request_body`` end)
    tH  the response headers were received
    tE  the end: body fully read, stream closed, or the error (the span's end)

    queue_ms   = (tC, else tS) - t0     waiting for a connection from the pool
    connect_ms = tS - tC                TCP connect and TLS handshake; 0 on a reused connection
    send_ms    = tW - tS                writing the request
    wait_ms    = tH - tW                request written to response headers
    receive_ms = tE - tH                reading the body (the whole stream, for a stream)

    queue_ms + connect_ms + send_ms + wait_ms + receive_ms == duration of the span

An instant that never came (no connection was made, the call failed midway) takes the
value of the next one that did, so a phase that did not happen lasts 0 and a failure ends
the phase in progress. A transport that emits no trace events (not httpcore's) counts the
request as written at t0: everything before the headers is ``wait_ms``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping
from typing import Final

from chainlat._core import attributes as attr

_CONNECT: Final = frozenset({"connect_tcp.started", "connect_unix_socket.started"})
_SEND_START: Final = "send_request_headers.started"
_SEND_END: Final = frozenset({"send_request_body.complete", "send_request_body.failed"})
_HEADERS: Final = "receive_response_headers.complete"

_NS_PER_MS: Final = 1_000_000

_OTHER_KIND, _CONNECT_KIND, _SEND_START_KIND, _SEND_END_KIND, _HEADERS_KIND = range(5)
_EVENTS: dict[str, int] = {}
"""Each trace event name seen -> what it marks: httpcore has a few dozen names."""
_MAX_EVENTS: Final = 1024


def _event_kind(event: str) -> int:
    step = event.split(".", 1)[-1]
    if step in _CONNECT:
        kind = _CONNECT_KIND
    elif step == _SEND_START:
        kind = _SEND_START_KIND
    elif step in _SEND_END:
        kind = _SEND_END_KIND
    elif step == _HEADERS:
        kind = _HEADERS_KIND
    else:
        kind = _OTHER_KIND
    if len(_EVENTS) < _MAX_EVENTS:  # another transport's names: bounded all the same
        _EVENTS[event] = kind
    return kind


def _reraise() -> None:
    raise


class Timeline:
    """Instants of one call, in clock nanoseconds; `breakdown` turns them into the parts."""

    __slots__ = ("at", "chunk_times", "end_ns", "start_ns", "traced")

    def __init__(self, start_ns: int) -> None:
        self.start_ns = start_ns
        self.at: list[int | None] = [None] * 5
        """The instant of each kind of event (`_CONNECT_KIND` ...); index 0 unused."""
        self.end_ns: int | None = None
        self.traced = False
        """True once any trace event arrived."""
        self.chunk_times: list[int] = []
        """Arrival of each output chunk of a stream (an event that carried output)."""

    @property
    def connect_ns(self) -> int | None:
        return self.at[_CONNECT_KIND]

    @property
    def send_start_ns(self) -> int | None:
        return self.at[_SEND_START_KIND]

    @property
    def send_end_ns(self) -> int | None:
        return self.at[_SEND_END_KIND]

    @property
    def headers_ns(self) -> int | None:
        return self.at[_HEADERS_KIND]

    def recorder(
        self, clock: Callable[[], int], failed: Callable[[], None]
    ) -> Callable[[str, object], None]:
        """httpcore's request ``trace`` extension for this call (sync): records each event,
        ``{prefix}.{step}.{started|complete|failed}``, at ``clock()``, read only for the four
        kinds of event the parts are made of (a call gets about ten events). ``failed`` is
        called in the ``except`` block of an error: the transport never sees one."""
        at, kinds, timeline = self.at, _EVENTS, self

        def record(event: str, info: object = None) -> None:
            try:
                timeline.traced = True
                kind = kinds.get(event)
                if kind is None:
                    kind = _event_kind(event)
                if kind and (kind != _CONNECT_KIND or at[_CONNECT_KIND] is None):
                    at[kind] = clock()  # the first connect; the last of the others
            except Exception:
                failed()

        return record

    def on_trace(self, event: str, now_ns: int) -> None:
        """One httpcore trace event at ``now_ns``."""
        self.recorder(lambda: now_ns, _reraise)(event, None)

    def on_headers(self, now_ns: int) -> None:
        """The inner transport returned a response; the trace event, if any, was more exact."""
        if self.at[_HEADERS_KIND] is None:
            self.at[_HEADERS_KIND] = now_ns

    def phases_ns(self, end_ns: int, *, pooled: bool) -> tuple[int, int, int, int, int]:
        """(queue, connect, send, wait, receive) in ns; they sum to ``end_ns - start_ns``.

        Args:
            end_ns: The span's end.
            pooled: The inner transport is httpcore's pool, so a call that failed before
                any trace event never left the pool's queue (a pool timeout, or a cancel).
        """
        t0 = self.start_ns
        if end_ns < t0:
            end_ns = t0
        _, connect, send_start, send_end, headers = self.at
        if not self.traced and (headers is not None or not pooled):
            connect = send_start = send_end = t0
        elif connect is not None and send_start is not None and send_start < connect:
            send_start = None  # a retry on a new connection: this send came before it
        # Missing instants take the next present one; then time order, within [t0, end].
        h = end_ns if headers is None else headers
        w = h if send_end is None else send_end
        s = w if send_start is None else send_start
        c = s if connect is None else connect
        c = t0 if c < t0 else end_ns if c > end_ns else c
        s = c if s < c else end_ns if s > end_ns else s
        w = s if w < s else end_ns if w > end_ns else w
        h = w if h < w else end_ns if h > end_ns else h
        return c - t0, s - c, w - s, h - w, end_ns - h

    def stream_ns(self, output_tokens: int | None) -> tuple[int, int, float | None] | None:
        """(ttft, generation, tpot) in ns for a stream with output; None without.

        tpot is generation / (tokens - 1): the tokens are the server's output count when
        it reported one, else the output chunks counted; None with fewer than two.
        """
        if not self.chunk_times:
            return None
        first, last = self.chunk_times[0], self.chunk_times[-1]
        ttft = first - self.start_ns
        generation = last - first
        tokens = output_tokens if output_tokens is not None else len(self.chunk_times)
        tpot = generation / (tokens - 1) if tokens >= 2 else None
        return ttft, generation, tpot

    def chunk_gaps_s(self) -> list[float]:
        """Seconds between consecutive output chunks (``time_per_output_chunk`` samples)."""
        times = self.chunk_times
        return [(b - a) / 1e9 for a, b in itertools.pairwise(times)]


def breakdown(
    timeline: Timeline,
    end_ns: int,
    *,
    pooled: bool,
    server_ms: float | None,
    output_tokens: int | None,
) -> dict[str, float]:
    """The ``chainlat.latency.*`` attributes of a finished call, but ``ttft_ms`` (set by the
    call's ``first_token``, with ``gen_ai.response.time_to_first_chunk``)."""
    queue, connect, send, wait, receive = timeline.phases_ns(end_ns, pooled=pooled)
    out = {
        attr.LATENCY_QUEUE_MS: queue / _NS_PER_MS,
        attr.LATENCY_CONNECT_MS: connect / _NS_PER_MS,
        attr.LATENCY_SEND_MS: send / _NS_PER_MS,
        attr.LATENCY_WAIT_MS: wait / _NS_PER_MS,
        attr.LATENCY_RECEIVE_MS: receive / _NS_PER_MS,
    }
    if server_ms is not None and timeline.headers_ns is not None:
        out[attr.LATENCY_SERVER_MS] = server_ms
        out[attr.LATENCY_NETWORK_MS] = max(wait / _NS_PER_MS - server_ms, 0.0)
    stream = timeline.stream_ns(output_tokens)
    if stream is not None:
        # ttft_ms is not here: the first chunk's first_token() wrote it, once, as it came.
        _, generation, tpot = stream
        out[attr.LATENCY_GENERATION_MS] = generation / _NS_PER_MS
        if tpot is not None:
            out[attr.LATENCY_TPOT_MS] = tpot / _NS_PER_MS
    return out


# --- what the server says it spent --------------------------------------------------------
_TIMING_WITH_DUR: Final = re.compile(
    r"^\s*([!#$%&'*+.^_`|~0-9A-Za-z-]{1,40})\s*;(?:.*?;)??"
    r"[^\S\n]*dur[^\S\n]*=[^\S\n]*\"?([0-9]+(?:\.[0-9]+)?)\"?[^\S\n]*(?:;.*)?$"
)
"""One ``Server-Timing`` entry with a duration: its name, then its first ``dur`` parameter.
Its parameters hold no line break but a last one (``.`` and ``$``, as they always read):
the whitespace around ``dur`` is any but ``\n``."""
MAX_SERVER_TIMING_ENTRIES: Final = 16


def parse_server_timing(value: str) -> dict[str, float]:
    """``Server-Timing`` metrics with a duration, in ms (``desc`` is never kept)."""
    out: dict[str, float] = {}
    if not value:
        return out
    # Each entry matched in C; only the entries with a duration cost bytecode.
    for found in filter(None, map(_TIMING_WITH_DUR.match, value.split(","))):
        name, duration = found.groups()
        name = name.lower()
        out[name] = out.get(name, 0.0) + float(duration)
        if len(out) >= MAX_SERVER_TIMING_ENTRIES:
            break
    return out


def server_time_ms(headers: Mapping[str, str]) -> tuple[float | None, dict[str, float]]:
    """The server's own processing time up to the headers, and its ``Server-Timing`` metrics.

    In order: a ``total`` metric in ``Server-Timing``; ``openai-processing-ms``; the sum of
    the ``Server-Timing`` durations; Envoy's ``x-envoy-upstream-service-time``.
    """
    timing = parse_server_timing(headers.get("server-timing", ""))
    if "total" in timing:
        return timing["total"], timing
    for name in ("openai-processing-ms",):
        value = _ms(headers.get(name))
        if value is not None:
            return value, timing
    if timing:
        return sum(timing.values()), timing
    return _ms(headers.get("x-envoy-upstream-service-time")), timing


def _ms(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if value >= 0 and value == value and value != float("inf") else None
