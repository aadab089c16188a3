"""The text the credential scrubber must leave alone: ordinary messages, words after a
secret name, and its own output (``scrub`` is idempotent)."""

from __future__ import annotations

import pytest

from chainlat._core.redact import REDACTED, scrub
from support.credentials import GOOGLE_KEY, JWT, OPENAI_KEY, PLAIN_SECRET


@pytest.mark.parametrize(
    "text",
    [
        "Connection refused",
        "[Errno 111] Connection refused",
        "404 Not Found for url https://api.example.com/v1/chat/completions",
        "Client error '429 Too Many Requests' for url 'https://api.openai.com/v1/chat/completions'",
        "max_tokens=100",
        "input_tokens: 12",
        '{"usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21}}',
        '"usageMetadata": {"promptTokenCount": 4, "totalTokenCount": 9}',
        "x-ratelimit-remaining-tokens: 149984",
        "openai-organization: org-abc123",
        "anthropic-version: 2023-06-01",
        "we skip the sk-learn step",
        "risk-adjusted task-force",
        "KeyError: 'model'",
        '"token_type": "Bearer", "expires_in": 3600',
        '{"type": "invalid_request_error", "code": "invalid_api_key"}',
        "gen_ai.usage.input_tokens=12 gen_ai.request.model=gpt-4o",
        "chat gpt-4o-mini took 812ms (p95 budget 800ms)",
        "ASIAN market, AKIA is short",
        "eyJ is how base64 JSON starts",
        "unicode: café ✓ 日本語",
    ],
)
def test_scrub_leaves_ordinary_text_unchanged(text: str) -> None:
    assert scrub(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/home/ana/session: no budget file found", "/home/ana/session: no budget file found"),
        ("password: required", "password: required"),
        ("Session: expired, log in again", "Session: expired, log in again"),
        # An assignment is a value, whatever it reads like; so is a word with a digit.
        ("session=no", f"session={REDACTED}"),
        ("password: hunter2", f"password: {REDACTED}"),
    ],
)
def test_scrub_redacts_values_after_a_secret_name_not_ordinary_words(
    text: str, expected: str
) -> None:
    assert scrub(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        f"Illegal header value b'Bearer {OPENAI_KEY}\\n'",
        f"http://u:{PLAIN_SECRET}@h?key={GOOGLE_KEY}",
        f'{{"api-key": "{PLAIN_SECRET}", "auth": "Basic dXNlcjpwYXNz"}}',
        f"[(b'x-api-key', b'{PLAIN_SECRET}')] {JWT}",
    ],
)
def test_scrub_is_idempotent(text: str) -> None:
    once = scrub(text)
    assert scrub(once) == once
