"""The credential scrubber: which header names ``is_secret_header`` denies and allows."""

from __future__ import annotations

import pytest

from chainlat._core.redact import is_secret_header


@pytest.mark.parametrize(
    "name",
    [
        "authorization",
        "Authorization",
        "proxy-authorization",
        "cookie",
        "Set-Cookie",
        "api-key",
        "x-api-key",
        "X-Goog-Api-Key",
        "apikey",
        "x-apikey",
        "x-apitoken",
        "ocp-apim-subscription-key",
        "x-access-token",
        "x-auth-token",
        "x-amz-security-token",
        "X-Amz-Signature",
        "x-client-secret",
        "x-password",
        "x-passwd",
        "x-credentials",
        "x-amz-credential",
        "x-session-id",
        "x-signature",
        "x-sig",
        "x-csrf-token",
        "private_token",
    ],
)
def test_is_secret_header_denies_credential_names(name: str) -> None:
    assert is_secret_header(name)


@pytest.mark.parametrize(
    "name",
    [
        "content-type",
        "x-request-id",
        "request-id",
        "openai-organization",
        "openai-processing-ms",
        "anthropic-version",
        "user-agent",
        "server-timing",
        "retry-after",
        "x-ratelimit-remaining-tokens",
        "x-ratelimit-limit-tokens",
        "x-ratelimit-reset-tokens",
        "anthropic-ratelimit-input-tokens-remaining",
        "x-stainless-retry-count",
        "keep-alive",
        "traceparent",
        ":authority",
        "x-token-count",
    ],
)
def test_is_secret_header_allows_common_non_secret_names(name: str) -> None:
    assert not is_secret_header(name)
