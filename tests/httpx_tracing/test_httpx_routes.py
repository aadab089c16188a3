"""Which requests are model calls (chainlat.httpx._routes)."""

from __future__ import annotations

import json

import pytest

from chainlat.httpx._routes import (
    DEFAULT_ROUTES,
    MAX_BODY_BYTES,
    RequestInfo,
    Route,
    match,
    provider_for,
    sniff_model,
)


def request(
    path: str,
    body: object = None,
    *,
    method: str = "POST",
    host: str = "api.example.com",
    raw: bytes | None = None,
) -> RequestInfo:
    content = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    return RequestInfo(method, "https", host, 443, path, lambda: content)


CHAT = {"model": "m", "messages": []}


@pytest.mark.parametrize(
    ("path", "body", "operation", "fmt"),
    [
        ("/v1/chat/completions", CHAT, "chat", "openai_chat"),
        ("/v1/completions", {"model": "m", "prompt": "x"}, "text_completion", "openai_completions"),
        ("/v1/embeddings", {"model": "m", "input": "x"}, "embeddings", "openai_embeddings"),
        ("/v1/responses", {"model": "m", "input": "x"}, "chat", "openai_responses"),
        ("/v1/messages", {"model": "m", "messages": []}, "chat", "anthropic_messages"),
        ("/api/chat", {"model": "m", "messages": []}, "chat", "ollama_chat"),
        ("/api/generate", {"model": "m", "prompt": "x"}, "text_completion", "ollama_generate"),
        ("/openai/v1/chat/completions", CHAT, "chat", "openai_chat"),  # behind a proxy prefix
    ],
)
def test_the_built_in_routes_recognise_each_api(
    path: str, body: object, operation: str, fmt: str
) -> None:
    found = match(DEFAULT_ROUTES, request(path, body))
    assert found is not None
    assert (found.operation, found.format) == (operation, fmt)


@pytest.mark.parametrize(
    ("path", "body", "method"),
    [
        ("/v1/chat/completions", CHAT, "GET"),
        ("/v1/chat/completions", {"model": "m"}, "POST"),  # no messages
        ("/v1/chat/completions", None, "POST"),  # no body
        ("/v1/messages/count_tokens", {"model": "m", "messages": []}, "POST"),
        ("/v1/chat/completions/extra", CHAT, "POST"),
        ("/v1/mycompletions", {"prompt": "x"}, "POST"),  # not a whole path segment
        ("/v1/models", None, "GET"),
    ],
)
def test_look_alike_requests_are_not_model_calls(path: str, body: object, method: str) -> None:
    assert match(DEFAULT_ROUTES, request(path, body, method=method)) is None


def test_a_body_that_is_not_json_is_not_a_model_call() -> None:
    assert match(DEFAULT_ROUTES, request("/v1/chat/completions", raw=b"{not json")) is None


def test_the_body_is_read_once_and_only_when_needed() -> None:
    reads: list[int] = []

    def load() -> bytes:
        reads.append(1)
        return b'{"messages": []}'

    info = RequestInfo("POST", "https", "h", 443, "/v1/models", load)
    assert match(DEFAULT_ROUTES, info) is None
    assert reads == []  # no route's path matched
    info = RequestInfo("POST", "https", "h", 443, "/v1/chat/completions", load)
    assert match(DEFAULT_ROUTES, info) is not None
    assert info.body == {"messages": []}
    assert reads == [1]


def test_a_body_over_the_limit_is_not_decoded() -> None:
    huge = b'{"messages": [], "pad": "' + b"x" * MAX_BODY_BYTES + b'"}'
    assert request("/v1/chat/completions", raw=huge).body is None


def test_a_body_over_the_limit_is_a_model_call_by_its_route_alone() -> None:
    huge = b'{"messages": [{"content": "' + b"x" * MAX_BODY_BYTES + b'"}]}'
    info = request("/v1/chat/completions", raw=huge)
    route = match(DEFAULT_ROUTES, info)
    assert route is not None
    assert route.operation == "chat"
    assert info.too_large
    assert info.body is None
    assert match(DEFAULT_ROUTES, request("/v1/models", raw=huge)) is None  # the path still counts


PAD = b"x" * 200_000


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"model": "gpt-4o", "messages": [{"content": "' + b"x" * 200_000 + b'"}]}', "gpt-4o"),
        # an SDK writes the model after the messages
        (b'{"messages": [{"content": "' + b"x" * 200_000 + b'"}], "model":"m\\u00e9"}', "m\u00e9"),
        # a "model" in the prompt text has escaped quotes: not the key
        (b'{"messages": [{"content": "say \\"model\\": \\"evil\\" ' + PAD + b'"}]}', None),
        (b'{"messages": [{"content": "' + b"x" * 200_000 + b'"}], "stream": true}', None),
    ],
)
def test_the_model_of_a_body_too_large_to_decode_is_found_at_either_end(
    raw: bytes, expected: str | None
) -> None:
    assert sniff_model(raw) == expected


def test_a_route_can_be_limited_to_a_host() -> None:
    route = Route("/generate", operation="text_completion", host="LLM.internal")
    assert route(request("/generate", {}, host="llm.internal")) is route
    assert route(request("/generate", {}, host="other.internal")) is None


def test_the_first_matcher_that_answers_wins() -> None:
    mine = Route("/chat/completions", provider="acme")

    def never(info: RequestInfo) -> Route | None:
        return None

    assert match([never, mine, *DEFAULT_ROUTES], request("/v1/chat/completions", CHAT)) is mine


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("api.openai.com", "openai"),
        ("api.groq.com", "groq"),
        ("my-res.openai.azure.com", "azure.ai.openai"),
        ("127.0.0.1", "openai"),  # an OpenAI-compatible server of one's own
    ],
)
def test_the_provider_of_an_openai_style_call_comes_from_the_host(host: str, expected: str) -> None:
    assert provider_for(DEFAULT_ROUTES[0], host) == expected


def test_a_route_that_names_its_provider_keeps_it() -> None:
    assert provider_for(Route("/x", provider="acme"), "api.openai.com") == "acme"
    anthropic = next(r for r in DEFAULT_ROUTES if r.format == "anthropic_messages")
    assert provider_for(anthropic, "localhost") == "anthropic"
    assert provider_for(Route("/x", format="ollama_chat"), "localhost") == "ollama"


def test_request_info_never_shows_credentials() -> None:
    info = request("/v1/chat/completions", CHAT)
    assert not hasattr(info, "headers")
    assert repr(info) == "RequestInfo(POST https://api.example.com:443/v1/chat/completions)"
