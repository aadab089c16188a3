"""The credential scrubber on URLs: ``scrub_url`` redacts userinfo, secret parameters and
key shapes, and returns URLs without credentials (or malformed ones) as text."""

from __future__ import annotations

import pytest

from chainlat._core.redact import REDACTED, scrub, scrub_url
from support.credentials import GOOGLE_KEY, PLAIN_SECRET


def test_scrub_url_redacts_the_userinfo_password_and_keeps_the_user() -> None:
    assert scrub_url("http://user:PW@host:16686") == f"http://user:{REDACTED}@host:16686"


def test_scrub_url_redacts_a_lone_token_userinfo_whole() -> None:
    assert scrub_url("https://ghtoken123@github.com/o/r.git") == (
        f"https://{REDACTED}@github.com/o/r.git"
    )


def test_scrub_url_keeps_a_password_containing_at_signs_out() -> None:
    assert scrub_url("postgres://u:p@ss@db:5432/x") == f"postgres://u:{REDACTED}@db:5432/x"


@pytest.mark.parametrize(
    "name",
    [
        "key",
        "api_key",
        "api-key",
        "apikey",
        "apiKey",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "sig",
        "signature",
        "X-Amz-Signature",
        "X-Amz-Credential",
        "X-Amz-Security-Token",
        "password",
        "secret",
        "client_secret",
        "password_reset_token",
    ],
)
def test_scrub_url_redacts_secret_query_parameter_values(name: str) -> None:
    url = f"https://host/v1/x?model=gpt-4o&{name}={PLAIN_SECRET}&stream=true"
    assert scrub_url(url) == f"https://host/v1/x?model=gpt-4o&{name}={REDACTED}&stream=true"


def test_scrub_url_keeps_code_and_other_ordinary_parameters() -> None:
    url = "https://host/cb?code=abc&state=xyz&max_tokens=100&page=2"
    assert scrub_url(url) == url


def test_scrub_url_redacts_secret_fragment_parameters() -> None:
    url = f"https://app/cb#access_token={PLAIN_SECRET}&token_type=bearer"
    assert scrub_url(url) == f"https://app/cb#access_token={REDACTED}&token_type=bearer"


def test_scrub_url_redacts_a_url_nested_in_a_parameter() -> None:
    url = f"https://login/?next=https://u:{PLAIN_SECRET}@h/x?key={PLAIN_SECRET}"
    assert scrub_url(url) == f"https://login/?next=https://u:{REDACTED}@h/x?key={REDACTED}"


def test_scrub_url_redacts_a_java_session_path_parameter() -> None:
    assert scrub_url("https://h/app;jsessionid=ABC123?x=1") == (
        f"https://h/app;jsessionid={REDACTED}?x=1"
    )


def test_scrub_url_redacts_key_shapes_in_the_path() -> None:
    assert scrub_url(f"https://h/v1/{GOOGLE_KEY}/x") == f"https://h/v1/{REDACTED}/x"


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:16686",
        "https://api.example.com/v1/chat/completions",
        "http://[::1]:4318/v1/traces",
        "http://user:@host",
        "http://@host",
        "https://h?key=",
    ],
)
def test_scrub_url_leaves_urls_without_credentials_unchanged(url: str) -> None:
    assert scrub_url(url) == url


@pytest.mark.parametrize(
    "url", ["http://[::1", "http://[", "://", "", "@", "?", "#=", "//", "http://u:p@[::1", "\ud800"]
)
def test_scrub_url_returns_malformed_urls_as_text(url: str) -> None:
    assert isinstance(scrub_url(url), str)


def test_scrub_url_redacts_the_password_of_a_malformed_url() -> None:
    assert scrub_url("http://u:pw@[::1") == f"http://u:{REDACTED}@[::1"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"http:\\/\\/u:{PLAIN_SECRET}@h\\/x", f"http:\\/\\/u:{REDACTED}@h\\/x"),
        (f"//u:{PLAIN_SECRET}@h/x", f"//u:{REDACTED}@h/x"),
        (f"\\/\\/u:{PLAIN_SECRET}@h", f"\\/\\/u:{REDACTED}@h"),
        ("http://u:pass word7@h/x", f"http://u:{REDACTED}@h/x"),
        ("http://u:correct horse battery staple@h", f"http://u:{REDACTED}@h"),
        ("http://u:pa#ss7@h/x", f"http://u:{REDACTED}@h/x"),
        ("postgres://u:p ss#w0rd@db:5432/x", f"postgres://u:{REDACTED}@db:5432/x"),
    ],
)
def test_scrub_url_redacts_escaped_scheme_relative_and_spaced_passwords(
    url: str, expected: str
) -> None:
    """Each of these once came back whole (issue 44)."""
    assert scrub_url(url) == expected
    assert scrub(f"failed: {url} (retrying)") == f"failed: {expected} (retrying)"


@pytest.mark.parametrize(
    "text",
    [
        "http://example.com:8080 is down, mail ops@example.com",
        "http://example.com:8080 is down mail ops@example.com",
        "https://example.com#section then write to me@example.com",
        "a // comment, see user@example.com",
        "https:\\/\\/api.example.com\\/v1\\/chat",
        "//cdn.example.com/lib.js",
    ],
)
def test_scrub_leaves_urls_followed_by_an_address_unchanged(text: str) -> None:
    """A port, a fragment or a comment before an "@" is not a password."""
    assert scrub(text) == text
