"""The credential scrubber: every placement a key leaks through, and the text it must leave.

Keys are assembled at run time, so no secret scanner mistakes this file for a leak.
"""

from __future__ import annotations

import ast
import http.client
import string
import sys
from pathlib import Path

import h11
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chainlat._core import redact
from chainlat._core.redact import REDACTED, is_secret_header, scrub, scrub_url, scrub_value

OPENAI_KEY = "sk-proj-" + "AbC123xYz_-9" * 6
OPENAI_SERVICE_KEY = "sk-svcacct-" + "Qw3rTy7u" * 4
OPENAI_LEGACY_KEY = "sk-" + "T3BlbkFJ" * 6
ANTHROPIC_KEY = "sk-ant-api03-" + "aB9_cD8-eF7" * 8
GOOGLE_KEY = "AIza" + "Sy" + "D3fG5hJ7kL9mN1pQ3rS5tU7vW9xY1zA3b"
AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SESSION_KEY_ID = "ASIA" + "Z7XK4Q2M9B3N5P8R"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" + "k1L2m3N4o5P6q7R8"
GITHUB_OAUTH = "gho_" + "Z9y8X7w6V5u4T3s2R1q0" + "P9o8N7m6L5k4J3i2"
GITHUB_SERVER = "ghs_" + "1234567890abcdefABCD" + "EFghij1234567890"
GITHUB_PAT = "github_pat_" + "11ABCDEFG0" + "abcdefghijklmnopqrstuv_" * 3
SLACK_TOKEN = "xoxb-" + "1234567890-0987654321-" + "AbCdEfGhIjKlMnOp"
JWT = (
    "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJ" + "zdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
SHAPED = [
    OPENAI_KEY,
    OPENAI_SERVICE_KEY,
    OPENAI_LEGACY_KEY,
    ANTHROPIC_KEY,
    GOOGLE_KEY,
    AWS_KEY_ID,
    AWS_SESSION_KEY_ID,
    GITHUB_TOKEN,
    GITHUB_OAUTH,
    GITHUB_SERVER,
    GITHUB_PAT,
    SLACK_TOKEN,
    JWT,
]
PLAIN_SECRET = "hunter2-Plain-7"


# --- is_secret_header ------------------------------------------------------------------


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


# --- scrub_url -------------------------------------------------------------------------


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


# --- scrub: what it must leave alone -------------------------------------------------


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


def test_scrub_accepts_lone_surrogates() -> None:
    text = f"\ud800 api_key={PLAIN_SECRET} \udfff {OPENAI_KEY}\udc80"
    assert scrub(text) == f"\ud800 api_key={REDACTED} \udfff {REDACTED}\udc80"


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


MEGABYTE = 1_000_000


@pytest.mark.parametrize(
    ("unit", "expected"),
    [
        # Each of these took under 1.5 s on the development machine; a backtracking or
        # quadratic pattern takes hours on them.
        ("eyJ", None),
        ("eyJa.", f"{REDACTED}."),
        ("a=", None),
        ("a:a:", None),
        ("?a=&", None),
        ("http://", None),
        ("Bearer ", None),
        ("a:\"b:'", None),
        ("\\", None),
        ("@", None),
        ("(b'", None),
        ("sk-", REDACTED),
    ],
)
def test_scrub_finishes_on_a_megabyte_of_adversarial_text(unit: str, expected: str | None) -> None:
    text = unit * (MEGABYTE // len(unit))
    assert scrub(text) == (text if expected is None else expected)
    assert isinstance(scrub_url(text), str)


def test_scrub_finishes_on_a_megabyte_long_secret_value() -> None:
    long_value = "A9" * (MEGABYTE // 2)
    text = f"api_key={long_value} Bearer {long_value} http://u:{long_value}@h"
    assert scrub(text) == f"api_key={REDACTED} Bearer {REDACTED} http://u:{REDACTED}@h"


# --- scrub_value -----------------------------------------------------------------------


def test_scrub_value_scrubs_a_string() -> None:
    assert scrub_value(f"token={PLAIN_SECRET}") == f"token={REDACTED}"


@pytest.mark.parametrize("container", [list, tuple])
def test_scrub_value_scrubs_a_sequence_of_strings_into_a_tuple(container: type) -> None:
    value = container(["ok", f"Bearer {PLAIN_SECRET}"])
    assert scrub_value(value) == ("ok", f"Bearer {REDACTED}")


@pytest.mark.parametrize("value", [1, 1.5, True, None, b"Bearer abc123", [1, 2], (True,)])
def test_scrub_value_leaves_other_values_unchanged(value: object) -> None:
    assert scrub_value(value) is value


# --- the module itself -----------------------------------------------------------------


def test_redact_imports_only_the_standard_library() -> None:
    tree = ast.parse(Path(redact.__file__).read_text(encoding="utf-8"))
    imported = {
        name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
        )
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}


# --- properties ----------------------------------------------------------------------


def _run(alphabet: str, min_size: int, max_size: int = 60) -> st.SearchStrategy[str]:
    return st.text(st.sampled_from(alphabet), min_size=min_size, max_size=max_size)


B64URL = string.ascii_letters + string.digits + "_-"
ALNUM = string.ascii_letters + string.digits

SHAPED_SECRETS = st.one_of(
    st.builds(
        str.__add__,
        st.sampled_from(["sk-", "sk-proj-", "sk-svcacct-", "sk-ant-api03-"]),
        _run(B64URL, 20),
    ),
    _run(B64URL, 35, 35).map("AIza".__add__),
    st.builds(
        str.__add__,
        st.sampled_from(["AKIA", "ASIA"]),
        _run(string.ascii_uppercase + string.digits, 16, 16),
    ),
    st.builds(str.__add__, st.sampled_from(["ghp_", "gho_", "ghs_"]), _run(ALNUM, 36, 36)),
    _run(ALNUM + "_", 22, 82).map("github_pat_".__add__),
    st.builds(
        str.__add__,
        st.sampled_from(["xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"]),
        _run(ALNUM + "-", 10),
    ),
    st.builds("eyJ{}.eyJ{}.{}".format, _run(B64URL, 10), _run(B64URL, 10), _run(B64URL, 0)),
)
# Credentials with no shape of their own: only their place gives them away. A digit keeps
# them from reading as a word ("Bearer token").
PLAIN_SECRETS = _run(ALNUM + "._~+-", 8).map(lambda s: s + "7")
PLACES = [
    "{}",
    "Bearer {}",
    "bearer {}",
    "Basic {}",
    "b'Bearer {}\\n'",
    "Illegal header value b'{}\\r\\n'",
    "Invalid header value '{}'",
    "api_key={}",
    "API_KEY={}",
    '"api-key": "{}"',
    "'password': '{}'",
    "authorization: Bearer {}",
    "token: {}",
    "[(b'x-api-key', b'{}')]",
    "https://host/v1/x?key={}",
    "https://host/v1?a=1&access_token={}#x",
    "https://user:{}@host:16686",
    "https://{}@host",
]
SEPARATORS = st.sampled_from([" ", "\n", "\t", "'", '"', "(", ")", ",", ";", "=", ": ", "/", "|"])
ANY_TEXT = st.text(st.characters(), max_size=40)


@settings(derandomize=True, max_examples=200)
@given(
    secret=SHAPED_SECRETS,
    place=st.sampled_from(PLACES),
    before=ANY_TEXT,
    after=ANY_TEXT,
    left=SEPARATORS,
    right=SEPARATORS,
)
def test_scrub_never_returns_a_shaped_secret_wherever_it_sits(
    secret: str, place: str, before: str, after: str, left: str, right: str
) -> None:
    assert secret not in scrub(before + left + place.format(secret) + right + after)


@settings(derandomize=True, max_examples=200)
@given(
    secret=PLAIN_SECRETS,
    place=st.sampled_from(PLACES[1:]),
    before=ANY_TEXT,
    after=ANY_TEXT,
    left=SEPARATORS,
    right=SEPARATORS,
)
def test_scrub_never_returns_a_secret_in_a_secret_place(
    secret: str, place: str, before: str, after: str, left: str, right: str
) -> None:
    assert secret not in scrub(before + left + place.format(secret) + right + after)


@settings(derandomize=True, max_examples=200)
@given(text=st.text(st.characters(), max_size=200))
def test_scrub_and_scrub_url_accept_any_text(text: str) -> None:
    assert isinstance(scrub(text), str)
    assert isinstance(scrub_url(text), str)
