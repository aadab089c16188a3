"""chainlat.sim endpoints besides chat completions: embeddings, legacy completions, models,
Anthropic messages, errors of unknown models and routes, HTTP details (chunked bodies,
``Expect: 100-continue``), the generated text and seeded determinism.

Timing assertions compare client-side measurements with the injected latencies, never
early by more than `EARLY_MS`, the fastest of a few runs never later than `LATE_MS`
(see tests/support/sim_checks.py)."""

from __future__ import annotations

import base64
import json
import socket
import struct
import time

import anthropic
import httpx
import openai
import pytest

from chainlat.sim import DEFAULT_PROFILES, ModelProfile, SimServer
from support import StartSim
from support.sim_checks import (
    EXPECTED_TOTAL_MS,
    EXPECTED_TTFT_MS,
    MESSAGES,
    Timings,
    anthropic_client,
    ms_since,
    server_timing,
)


def test_embeddings_are_prefill_only(client: openai.OpenAI) -> None:
    raw = client.embeddings.with_raw_response.create(model="sim-test", input=["abcd", "efgh"])
    reply = raw.parse()
    assert set(server_timing(raw.headers["server-timing"])) == {"queue", "prefill"}
    assert [d.index for d in reply.data] == [0, 1]
    assert len(reply.data[0].embedding) == 16
    assert reply.usage.prompt_tokens == 2
    floats = client.embeddings.create(
        model="sim-test", input="abcd", encoding_format="float", dimensions=4
    )
    assert len(floats.data[0].embedding) == 4


def test_legacy_completions_and_models(client: openai.OpenAI) -> None:
    reply = client.completions.create(model="sim-test", prompt="Once", max_tokens=3)
    assert reply.choices[0].finish_reason == "length"
    assert len(reply.choices[0].text.split()) == 3
    names = [m.id for m in client.models.list()]
    assert names == ["sim-test", *(p.name for p in DEFAULT_PROFILES)]
    assert client.models.retrieve("sim-small").id == "sim-small"


def test_anthropic_messages_create_and_stream(sim: SimServer) -> None:
    with anthropic_client(sim) as a:
        message = a.messages.create(model="sim-test", max_tokens=100, messages=MESSAGES)
        assert message.stop_reason == "end_turn"
        assert message.usage.output_tokens == 20
        assert message.usage.input_tokens == 4
        timings = Timings(ttft=EXPECTED_TTFT_MS, total=EXPECTED_TOTAL_MS)
        for _ in timings.runs():
            start = time.perf_counter()
            with a.messages.stream(model="sim-test", max_tokens=100, messages=MESSAGES) as s:
                texts: list[str] = []
                for text in s.text_stream:
                    if not texts:
                        timings.add("ttft", ms_since(start))
                    texts.append(text)
                final = s.get_final_message()
            timings.add("total", ms_since(start))
        timings.check()
        assert len(texts) == 20
        assert "".join(texts) == final.content[0].text == message.content[0].text  # type: ignore[union-attr]
        assert final.usage.output_tokens == 20
        raw_events = a.messages.create(
            model="sim-test", max_tokens=2, messages=MESSAGES, stream=True
        )
        kinds = [event.type for event in raw_events]
    assert kinds == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


def test_unknown_model_is_a_404_in_each_provider_format(
    sim: SimServer, client: openai.OpenAI
) -> None:
    with pytest.raises(openai.NotFoundError) as openai_error:
        client.chat.completions.create(model="nope", messages=MESSAGES)
    assert openai_error.value.code == "model_not_found"
    with anthropic_client(sim) as a, pytest.raises(anthropic.NotFoundError) as anthropic_error:
        a.messages.create(model="nope", max_tokens=5, messages=MESSAGES)
    body = anthropic_error.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "not_found_error"
    assert "nope" in body["error"]["message"]


def test_bad_json_is_a_400_and_unknown_routes_404(sim: SimServer) -> None:
    with httpx.Client(base_url=sim.base_url) as http:
        bad = http.post("/v1/chat/completions", content=b"{not json")
        assert bad.status_code == 400
        assert bad.json()["error"]["type"] == "invalid_request_error"
        assert http.post("/v1/messages", content=b"[]").json()["type"] == "error"
        assert http.get("/nowhere").status_code == 404
        assert http.get("/v1/chat/completions").status_code == 405
        assert http.get("/health").json() == {"status": "ok"}


def test_chunked_request_bodies_are_read(sim: SimServer) -> None:
    body = json.dumps({"model": "sim-embed", "input": "abcd"}).encode()
    with httpx.Client(base_url=sim.base_url) as http:
        response = http.post("/v1/embeddings", content=iter([body[:10], body[10:]]))
    assert response.status_code == 200
    assert response.request.headers["transfer-encoding"] == "chunked"


def test_expect_100_continue_is_answered_before_the_body(sim: SimServer) -> None:
    body = json.dumps({"model": "sim-embed", "input": "abcd"}).encode()
    head = (
        "POST /v1/embeddings HTTP/1.1\r\nhost: sim\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nexpect: 100-continue\r\nconnection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", sim.port), timeout=10) as conn:
        conn.sendall(head.encode())
        assert conn.recv(1024) == b"HTTP/1.1 100 Continue\r\n\r\n"
        conn.sendall(body)
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n")


def test_same_seed_same_text_and_jitter_other_seed_differs(start_sim: StartSim) -> None:
    jittery = ModelProfile("j", ttft_base_ms=20, decode_ms_per_token=1, output_tokens=8, jitter=0.5)

    def run(seed: int) -> list[tuple[str, str]]:
        server = start_sim(profiles=[jittery], seed=seed)
        with httpx.Client() as http:
            url = server.base_url + "/v1/chat/completions"
            replies = [http.post(url, json={"model": "j", "messages": MESSAGES}) for _ in range(3)]
        return [
            (r.json()["choices"][0]["message"]["content"], r.headers["x-sim-plan"]) for r in replies
        ]

    first, again, other = run(7), run(7), run(8)
    assert first == again
    assert [plan for _, plan in first] != [plan for _, plan in other]
    assert first[0][0] != other[0][0]
    assert len({plan for _, plan in first}) == 3  # jitter varies from request to request


def test_response_text_counts_back_to_output_tokens(client: openai.OpenAI) -> None:
    """The generated text follows the documented token rule, so chained steps are predictable."""
    reply = client.chat.completions.create(model="sim-test", messages=MESSAGES)
    text = reply.choices[0].message.content or ""
    assert -(-len(text) // 4) == 20
    assert client.embeddings.create(model="sim-test", input=text).usage.prompt_tokens == 20


def test_base64_embeddings_are_little_endian_float32(sim: SimServer) -> None:
    body = {"model": "sim-embed", "input": "abcd", "encoding_format": "base64", "dimensions": 3}
    with httpx.Client() as http:
        reply = http.post(sim.base_url + "/v1/embeddings", json=body).json()
    packed = base64.b64decode(reply["data"][0]["embedding"])
    vector = struct.unpack("<3f", packed)
    assert sum(x * x for x in vector) == pytest.approx(1.0, rel=1e-5)
