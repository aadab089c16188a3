"""chainlat.realtime under a hostile (or merely concurrent) session: events out of order,
impossible audio positions and formats, unknown event types, a send stamped before a
receive handed over during its await. Nothing raises into the caller (chainlat's own
suite re-raises its internal errors, so a failure here is loud), and no span ends before
it starts."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainlat.realtime import RealtimeTurns
from chainlat.testing import capture
from chainlat.traces.sdk import runs_from_spans

MS = 1_000_000


def test_a_send_stamped_before_a_receive_it_awaited_does_not_end_a_turn_before_its_start() -> None:
    """The client stamps a truncate, the SDK awaits the socket, the receiving task hands
    over a speech_stopped 3 ms later (a turn starts), then the truncate: it is taken at the
    speech_stopped's instant, not 3 ms before the turn it ends."""
    with capture(fake_clock=True) as cap:
        turns = RealtimeTurns(tracer_provider=cap.provider, clock=cap.clock)
        turns.sent({"type": "input_audio_buffer.append", "audio": "AAAA"})
        cap.clock.advance(ns=10 * MS)
        asked_ns = cap.clock()
        cap.clock.advance(ns=3 * MS)
        turns.received({"type": "input_audio_buffer.speech_stopped", "audio_end_ms": 600})
        truncate = {"type": "conversation.item.truncate", "item_id": "i", "audio_end_ms": 0}
        turns.sent(truncate, asked_ns)
        spans = cap.spans()
        assert [(s.name, s.end_time - s.start_time) for s in spans] == [  # type: ignore[operator]
            ("realtime unknown", 0),
            ("invoke_workflow realtime-turn", 0),
        ]


_NUMBERS: st.SearchStrategy[object] = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([True, "12", None, [1], {}]),
)
_IDS = st.sampled_from(["r1", "r2", "", None, 5, "item1", "c1"])
_SESSION = st.fixed_dictionaries(
    {},
    optional={
        "model": st.one_of(st.text(max_size=3), st.none(), st.integers()),
        "turn_detection": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {},
                optional={
                    "type": st.sampled_from(["server_vad", "semantic_vad", 3]),
                    "silence_duration_ms": _NUMBERS,
                    "create_response": st.sampled_from([True, False, "yes"]),
                },
            ),
        ),
        "audio": st.one_of(
            st.none(),
            st.just("x"),
            st.fixed_dictionaries(
                {},
                optional={
                    "output": st.fixed_dictionaries(
                        {
                            "format": st.fixed_dictionaries(
                                {"type": st.sampled_from(["audio/pcm", "audio/pcmu", None])},
                                optional={"rate": _NUMBERS},
                            )
                        }
                    ),
                },
            ),
        ),
        "output_audio_format": st.sampled_from(["pcm16", "g711_alaw", 3, None]),
    },
)
_RESPONSE = st.fixed_dictionaries(
    {},
    optional={
        "id": _IDS,
        "status": st.sampled_from(["completed", "cancelled", "failed", "incomplete", None, 3]),
        "status_details": st.sampled_from([None, {"reason": "turn_detected"}, {"type": ["x"]}]),
        "usage": st.one_of(
            st.none(),
            st.just("x"),
            st.fixed_dictionaries(
                {}, optional={"input_tokens": _NUMBERS, "output_tokens": _NUMBERS}
            ),
        ),
        "output": st.one_of(
            st.none(),
            st.just("x"),
            st.lists(st.fixed_dictionaries({"type": st.just("function_call")}), max_size=2),
        ),
    },
)
_SERVER = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            [
                "response.output_audio.delta",
                "response.output_text.delta",
                "input_audio_buffer.speech_stopped",
                "input_audio_buffer.speech_started",
                "response.created",
                "response.function_call_arguments.done",
                "response.done",
                "session.updated",
                "an.unknown.type",
                None,
                7,
            ]
        )
    },
    optional={
        "response_id": _IDS,
        "item_id": _IDS,
        "delta": st.sampled_from(["AAAA" * 100, "===", "", 3, None, "A" * 7]),
        "audio_end_ms": _NUMBERS,
        "response": st.one_of(_RESPONSE, st.none(), st.just("x")),
        "session": st.one_of(_SESSION, st.none(), st.just(3)),
        "call_id": _IDS,
        "name": st.one_of(st.text(max_size=3), st.none(), st.integers()),
    },
)
_CLIENT = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            [
                "input_audio_buffer.append",
                "input_audio_buffer.commit",
                "response.create",
                "conversation.item.create",
                "conversation.item.truncate",
                "session.update",
                None,
            ]
        )
    },
    optional={
        "item": st.one_of(
            st.none(),
            st.just("x"),
            st.fixed_dictionaries(
                {"type": st.sampled_from(["function_call_output", "message"])},
                optional={"call_id": _IDS},
            ),
        ),
        "item_id": _IDS,
        "audio_end_ms": _NUMBERS,
        "session": st.one_of(_SESSION, st.none()),
    },
)
_STEP = st.tuples(
    st.sampled_from(["sent", "received", "closed"]),
    st.sampled_from([0, 1, 2, 10, 600]),
    _CLIENT,
    _SERVER,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_STEP, max_size=30), send_lag_ms=st.integers(0, 5))
def test_any_event_sequence_never_raises_nor_ends_a_span_before_it_starts(
    steps: list[tuple[str, int, dict[str, Any], dict[str, Any]]], send_lag_ms: int
) -> None:
    """Each send is stamped up to ``send_lag_ms`` before it is handed over, as the traced
    connection stamps it before the SDK's await."""
    with capture(fake_clock=True) as cap:
        turns = RealtimeTurns(tracer_provider=cap.provider, clock=cap.clock)
        for which, advance_ms, client_event, server_event in steps:
            cap.clock.advance(ns=advance_ms * MS)
            if which == "sent":
                turns.sent(client_event, cap.clock() - send_lag_ms * MS)
            elif which == "received":
                turns.received(server_event)
            else:
                turns.closed()
        turns.closed()
        spans = cap.spans()
        assert all(s.end_time >= s.start_time for s in spans)  # type: ignore[operator]
        list(runs_from_spans(spans))


@pytest.mark.parametrize(
    ("message", "decoded"),
    [
        (
            '{"type": "response.done", "response": {"id": "r"}}',
            {"type": "response.done", "response": {"id": "r"}},
        ),
        (b'{"type": "session.created"}', {"type": "session.created"}),
        (bytearray(b'{"type": "x", "name": "\xff"}'), {"type": "x", "name": "\ufffd"}),
        ("not json", None),
        ("[" * 100_000 + "]" * 100_000, None),
        ('{"type": "x", "audio_end_ms": NaN}', None),
        (12, None),
    ],
    ids=["text", "bytes", "bad utf-8", "no json", "deep", "nan", "no message"],
)
def test_a_wire_message_is_a_mapping_or_none_never_an_error(
    message: object, decoded: object
) -> None:
    from chainlat.realtime._connection import _decoded

    assert _decoded(message) == decoded
