"""The credential scrubber on free text: every placement a key leaks through (library
error messages, authorization schemes, key-value pairs, key shapes) is redacted by ``scrub``."""

from __future__ import annotations

import http.client

import h11
import httpx
import pytest

from chainlat._core.redact import REDACTED, scrub
from support.credentials import GOOGLE_KEY, OPENAI_KEY, OPENAI_LEGACY_KEY, PLAIN_SECRET, SHAPED

# --- scrub: the messages that leaked -------------------------------------------------


def test_scrub_redacts_the_h11_illegal_header_value_message() -> None:
    with pytest.raises(h11.LocalProtocolError) as raised:
        h11.Request(
            method="GET",
            target="/",
            headers=[("Host", "api.openai.com"), ("Authorization", f"Bearer {OPENAI_KEY}\n")],
        )
    message = str(raised.value)
    assert message == f"Illegal header value b'Bearer {OPENAI_KEY}\\n'"
    assert scrub(message) == f"Illegal header value b'{REDACTED}'"


def test_scrub_redacts_an_unshaped_value_in_the_h11_message() -> None:
    with pytest.raises(h11.LocalProtocolError) as raised:
        h11.Request(method="GET", target="/", headers=[("Host", "h"), ("x-api-key", "k1\r\n")])
    assert scrub(str(raised.value)) == f"Illegal header value b'{REDACTED}'"


def test_scrub_redacts_the_http_client_invalid_header_value_message() -> None:
    connection = http.client.HTTPConnection("example.invalid")
    connection.putrequest("GET", "/")
    with pytest.raises(ValueError, match="Invalid header value") as raised:
        connection.putheader("x-api-key", f"{PLAIN_SECRET}\r\n")
    assert scrub(str(raised.value)) == f"Invalid header value b'{REDACTED}'"


def test_scrub_redacts_the_key_in_an_httpx_status_error_message() -> None:
    url = f"https://generativelanguage.googleapis.com/v1beta/models?key={GOOGLE_KEY}"
    response = httpx.Response(401, request=httpx.Request("GET", url))
    with pytest.raises(httpx.HTTPStatusError) as raised:
        response.raise_for_status()
    scrubbed = scrub(str(raised.value))
    assert scrubbed == (
        "Client error '401 Unauthorized' for url "
        f"'https://generativelanguage.googleapis.com/v1beta/models?key={REDACTED}'\n"
        "For more information check: "
        "https://developer.mozilla.org/en-US/docs/Web/HTTP/Status/401"
    )


def test_scrub_redacts_the_masked_key_in_an_openai_401_body() -> None:
    body = (
        '{"error": {"message": "Incorrect API key provided: sk-proj-********abcd. You can find'
        ' your API key at https://platform.openai.com/account/api-keys.", "type":'
        ' "invalid_request_error", "param": null, "code": "invalid_api_key"}}'
    )
    assert scrub(body) == body.replace("sk-proj-********abcd", REDACTED)


def test_scrub_redacts_a_full_key_echoed_in_a_401_body() -> None:
    body = f'{{"error": {{"message": "Incorrect API key provided: {OPENAI_LEGACY_KEY}."}}}}'
    assert scrub(body) == body.replace(OPENAI_LEGACY_KEY, REDACTED)


def test_scrub_redacts_pairs_inside_a_quoted_message() -> None:
    text = f'{{"message": "bad request: api_key={PLAIN_SECRET} rejected"}}'
    assert scrub(text) == f'{{"message": "bad request: api_key={REDACTED} rejected"}}'


def test_scrub_redacts_every_url_in_free_text() -> None:
    text = f"GET http://u:{PLAIN_SECRET}@h:1/a?token={PLAIN_SECRET} then https://x/?sig=abc9 failed"
    assert scrub(text) == (
        f"GET http://u:{REDACTED}@h:1/a?token={REDACTED} then https://x/?sig={REDACTED} failed"
    )


# --- scrub: authorization schemes ----------------------------------------------------


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "Basic", "basic"])
def test_scrub_redacts_authorization_scheme_values_in_any_case(scheme: str) -> None:
    assert scrub(f"sent {scheme} dXNlcjpwYXNz9w== to h") == f"sent {scheme} {REDACTED} to h"


def test_scrub_redacts_a_bearer_value_in_a_bytes_repr_and_keeps_the_escape() -> None:
    assert scrub("b'Bearer abc123\\n'") == f"b'Bearer {REDACTED}\\n'"


def test_scrub_redacts_a_bearer_value_before_crlf() -> None:
    assert scrub("Bearer abc123\r\nHost: h") == f"Bearer {REDACTED}\r\nHost: h"


def test_scrub_redacts_a_bearer_value_before_a_doubly_escaped_newline() -> None:
    assert scrub("\"b'Bearer abc123\\\\n'\"") == f"\"b'Bearer {REDACTED}\\\\n'\""


def test_scrub_redacts_a_bearer_value_across_hex_escapes() -> None:
    assert scrub("b'Bearer abc\\x00def9'") == f"b'Bearer {REDACTED}'"


@pytest.mark.parametrize(
    "text",
    [
        "Bearer token required",
        "missing Bearer auth",
        "Basic usage of the API",
        'WWW-Authenticate: Bearer realm="api", error="invalid_token"',
    ],
)
def test_scrub_keeps_prose_after_an_authorization_scheme_word(text: str) -> None:
    assert scrub(text) == text


# --- scrub: key-value pairs ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"api_key={PLAIN_SECRET}", f"api_key={REDACTED}"),
        (f"OPENAI_API_KEY={PLAIN_SECRET} ok", f"OPENAI_API_KEY={REDACTED} ok"),
        (f"token={PLAIN_SECRET}&x=1", f"token={REDACTED}&x=1"),
        (f"password: {PLAIN_SECRET}", f"password: {REDACTED}"),
        (f"authorization: Bearer {PLAIN_SECRET}", f"authorization: {REDACTED}"),
        (f"Authorization: token {PLAIN_SECRET}", f"Authorization: {REDACTED}"),
        (f'{{"api-key": "{PLAIN_SECRET}"}}', f'{{"api-key": "{REDACTED}"}}'),
        (f"{{'x-api-key': '{PLAIN_SECRET}'}}", f"{{'x-api-key': '{REDACTED}'}}"),
        (f'{{"accessToken":"{PLAIN_SECRET}"}}', f'{{"accessToken":"{REDACTED}"}}'),
        (f"client_secret = '{PLAIN_SECRET}'", f"client_secret = '{REDACTED}'"),
        (f"aws_secret_access_key={PLAIN_SECRET}", f"aws_secret_access_key={REDACTED}"),
        (f"cookie: session={PLAIN_SECRET}", f"cookie: {REDACTED}"),
        (f"api_key='{PLAIN_SECRET}\\n'", f"api_key='{REDACTED}'"),
        (
            f"[(b'x-api-key', b'{PLAIN_SECRET}\\n'), (b'accept', b'*/*')]",
            f"[(b'x-api-key', b'{REDACTED}'), (b'accept', b'*/*')]",
        ),
    ],
)
def test_scrub_redacts_values_of_secret_names(text: str, expected: str) -> None:
    assert scrub(text) == expected


def test_scrub_keeps_an_empty_secret_value_empty() -> None:
    assert scrub('{"api_key": ""}') == '{"api_key": ""}'


# --- scrub: key shapes ---------------------------------------------------------------


@pytest.mark.parametrize("key", SHAPED)
@pytest.mark.parametrize(
    "template",
    ["{}", "key is {} here", "({})", "'{}'", "b'{}\\n'", "{}\r\n", "x-header-value:{}.", "\n{}\n"],
)
def test_scrub_redacts_known_key_shapes_anywhere(key: str, template: str) -> None:
    scrubbed = scrub(template.format(key))
    assert key not in scrubbed
    assert REDACTED in scrubbed


def test_scrub_redacts_a_partially_masked_openai_key() -> None:
    assert scrub("got sk-abc1***************************xyz9 back") == f"got {REDACTED} back"


@pytest.mark.parametrize("prefix", ["--", "-", "1", "+.", "x-"])
def test_a_url_glued_to_characters_a_scheme_may_not_start_with_is_still_scrubbed(
    prefix: str,
) -> None:
    """An option name typed as a URL (``--http://u:p@h``) in an argparse error."""
    text = f"unrecognized arguments: {prefix}http://user:{PLAIN_SECRET}@host/x"
    assert scrub(text) == f"unrecognized arguments: {prefix}http://user:{REDACTED}@host/x"
