"""The latency breakdown (chainlat.httpx._timing): instants in, exact parts out."""

from __future__ import annotations

import pytest

from chainlat._core import attributes as attr
from chainlat.httpx._timing import (
    MAX_SERVER_TIMING_ENTRIES,
    Timeline,
    breakdown,
    parse_server_timing,
    server_time_ms,
)

MS = 1_000_000


def timeline(*events: tuple[int, str], start_ms: int = 0) -> Timeline:
    line = Timeline(start_ms * MS)
    for at_ms, event in events:
        line.on_trace(event, at_ms * MS)
    return line


def phases_ms(line: Timeline, end_ms: int, *, pooled: bool = True) -> tuple[float, ...]:
    return tuple(p / MS for p in line.phases_ns(end_ms * MS, pooled=pooled))


NEW_CONNECTION = (
    (2, "connection.connect_tcp.started"),
    (5, "connection.connect_tcp.complete"),
    (6, "connection.start_tls.started"),
    (9, "connection.start_tls.complete"),
    (10, "http11.send_request_headers.started"),
    (11, "http11.send_request_body.complete"),
    (50, "http11.receive_response_headers.complete"),
)


def test_a_call_on_a_new_connection_splits_into_five_parts() -> None:
    # queue 2, connect (TCP + TLS) 8, send 1, wait 39, receive 30
    assert phases_ms(timeline(*NEW_CONNECTION), 80) == (2, 8, 1, 39, 30)


def test_a_reused_connection_has_no_connect_time() -> None:
    line = timeline(
        (4, "http2.send_request_headers.started"),
        (5, "http2.send_request_body.complete"),
        (20, "http2.receive_response_headers.complete"),
    )
    assert phases_ms(line, 21) == (4, 0, 1, 15, 1)


def test_a_refused_connection_is_all_connect_after_the_queue() -> None:
    line = timeline((1, "connection.connect_tcp.started"), (7, "connection.connect_tcp.failed"))
    assert phases_ms(line, 7) == (1, 6, 0, 0, 0)


def test_a_read_timeout_ends_the_wait() -> None:
    line = timeline(*NEW_CONNECTION[:-1])
    assert phases_ms(line, 211) == (2, 8, 1, 200, 0)


def test_a_call_that_never_got_a_connection_is_all_queue() -> None:
    assert phases_ms(Timeline(0), 30, pooled=True) == (30, 0, 0, 0, 0)


def test_without_trace_events_everything_before_the_headers_is_wait() -> None:
    line = Timeline(0)
    line.on_headers(12 * MS)
    assert phases_ms(line, 15, pooled=False) == (0, 0, 0, 12, 3)
    assert phases_ms(Timeline(0), 9, pooled=False) == (0, 0, 0, 9, 0)


def test_a_send_before_a_later_connect_belongs_to_a_failed_first_try() -> None:
    line = timeline(
        (1, "http11.send_request_headers.started"),  # a stale pooled connection
        (3, "connection.connect_tcp.started"),  # the retry on a new one
    )
    assert phases_ms(line, 10) == (3, 7, 0, 0, 0)


def test_instants_out_of_order_still_add_up_to_the_duration() -> None:
    line = timeline(
        (10, "http11.send_request_headers.started"),
        (9, "http11.send_request_body.complete"),
        (8, "http11.receive_response_headers.complete"),
    )
    parts = phases_ms(line, 12)
    assert sum(parts) == 12
    assert all(p >= 0 for p in parts)


def test_the_headers_instant_from_the_trace_wins_over_the_transport_return() -> None:
    line = timeline(*NEW_CONNECTION)
    line.on_headers(52 * MS)
    assert line.headers_ns == 50 * MS


def stream(line: Timeline, *chunk_ms: int) -> Timeline:
    line.chunk_times.extend(ms * MS for ms in chunk_ms)
    return line


def test_stream_parts_use_the_servers_token_count_when_it_gave_one() -> None:
    line = stream(timeline(*NEW_CONNECTION), 60, 70, 80, 100)
    found = breakdown(line, 120 * MS, pooled=True, server_ms=None, output_tokens=9)
    assert line.stream_ns(9) == (60 * MS, 40 * MS, 5 * MS)
    assert attr.LATENCY_TTFT_MS not in found  # the first chunk's first_token() set it
    assert found[attr.LATENCY_GENERATION_MS] == 40
    assert found[attr.LATENCY_TPOT_MS] == 5  # 40 ms over 8 tokens after the first


def test_stream_parts_count_chunks_without_usage() -> None:
    line = stream(timeline(*NEW_CONNECTION), 60, 70, 80, 100)
    found = breakdown(line, 120 * MS, pooled=True, server_ms=None, output_tokens=None)
    assert found[attr.LATENCY_TPOT_MS] == pytest.approx(40 / 3)
    assert line.chunk_gaps_s() == [0.01, 0.01, 0.02]


def test_one_chunk_has_a_ttft_but_no_tpot() -> None:
    line = stream(timeline(*NEW_CONNECTION), 60)
    found = breakdown(line, 61 * MS, pooled=True, server_ms=None, output_tokens=1)
    assert found[attr.LATENCY_GENERATION_MS] == 0
    assert attr.LATENCY_TPOT_MS not in found


def test_server_time_splits_the_wait_and_network_is_the_rest() -> None:
    found = breakdown(
        timeline(*NEW_CONNECTION), 80 * MS, pooled=True, server_ms=30.0, output_tokens=None
    )
    assert found[attr.LATENCY_WAIT_MS] == 39
    assert found[attr.LATENCY_SERVER_MS] == 30
    assert found[attr.LATENCY_NETWORK_MS] == 9


def test_a_server_that_reports_more_than_the_wait_leaves_no_negative_network() -> None:
    found = breakdown(
        timeline(*NEW_CONNECTION), 80 * MS, pooled=True, server_ms=45.0, output_tokens=None
    )
    assert found[attr.LATENCY_SERVER_MS] == 45
    assert found[attr.LATENCY_NETWORK_MS] == 0


def test_without_headers_there_is_no_server_split() -> None:
    line = timeline(*NEW_CONNECTION[:-1])
    found = breakdown(line, 90 * MS, pooled=True, server_ms=30.0, output_tokens=None)
    assert attr.LATENCY_SERVER_MS not in found


def test_server_timing_keeps_durations_and_drops_descriptions() -> None:
    header = 'queue;dur=1.5, prefill;desc="secret text";dur=20, cache;desc=hit, Decode;dur="7.25"'
    assert parse_server_timing(header) == {"queue": 1.5, "prefill": 20.0, "decode": 7.25}


def test_server_timing_ignores_malformed_entries_and_caps_the_count() -> None:
    assert parse_server_timing("a b;dur=1, ;dur=2, x;dur=abc, y;dur=-1") == {}
    many = ", ".join(f"m{i};dur=1" for i in range(40))
    assert len(parse_server_timing(many)) == MAX_SERVER_TIMING_ENTRIES


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"server-timing": "total;dur=12.5, a;dur=3", "openai-processing-ms": "99"}, 12.5),
        ({"server-timing": "a;dur=3, b;dur=4", "openai-processing-ms": "99"}, 99.0),
        ({"server-timing": "a;dur=3, b;dur=4"}, 7.0),
        ({"x-envoy-upstream-service-time": "41"}, 41.0),
        ({"openai-processing-ms": "soon"}, None),
        ({"openai-processing-ms": "-3"}, None),
        ({}, None),
    ],
)
def test_the_servers_own_time_comes_from_the_best_header_present(
    headers: dict[str, str], expected: float | None
) -> None:
    assert server_time_ms(headers)[0] == expected
