"""The credential scrubber fuzzed over URL and header shapes (hypothesis): a password in a
URL's userinfo (any printable characters but the four that end or split an authority,
spaces and "#" among them, JSON-escaped or scheme-relative slashes) and a secret after a
secret header name (any case, any separator) never survive ``scrub``; ordinary sentences,
credential-free URLs and secret names followed by ordinary words come back unchanged."""

from __future__ import annotations

import json
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from chainlat._core.redact import scrub

FUZZ = settings(derandomize=True, max_examples=300)

# Printable ASCII but "/", "\\", "?" and "@": each ends or splits an authority in every URL
# parser, so no scrubber can tell a password holding one from a path or a query.
PASSWORD_CHARS = "".join(sorted(set(string.printable) - set("/\\?@" + string.whitespace)))
PASSWORD_WORDS = st.text(st.sampled_from(PASSWORD_CHARS), min_size=1, max_size=12)
# Up to four single spaces inside; a letter first, so it never reads as a host's port.
PASSWORDS = st.builds(
    lambda first, words: first + " ".join(words),
    st.sampled_from(string.ascii_letters),
    st.lists(PASSWORD_WORDS, min_size=1, max_size=5),
)
USERS = st.text(st.sampled_from(string.ascii_letters + string.digits + "._-"), max_size=10)
HOSTS = st.sampled_from(["h", "db.internal:5432", "api.example.com", "[::1]:8080", "127.0.0.1"])
SCHEMES = st.sampled_from(["http:", "https:", "postgres:", "redis:", "git+ssh:", ""])
TEXT_AROUND = st.sampled_from(["", "error: ", "GET ", "(", '{"url": "', "url=", "see "])
TEXT_AFTER = st.sampled_from(["", " failed", ")", '"}', "\n", " (retrying)", ", then"])


@FUZZ
@given(
    scheme=SCHEMES,
    escaped=st.booleans(),
    user=USERS,
    password=PASSWORDS,
    host=HOSTS,
    path=st.sampled_from(["", "/", "/v1/chat", "/x?model=gpt-4o", "#top"]),
    before=TEXT_AROUND,
    after=TEXT_AFTER,
)
def test_a_userinfo_password_never_survives(
    scheme: str,
    escaped: bool,
    user: str,
    password: str,
    host: str,
    path: str,
    before: str,
    after: str,
) -> None:
    slash = "\\/" if escaped else "/"
    url = f"{scheme}{slash}{slash}{user}:{password}@{host}{path.replace('/', slash)}"
    scrubbed = scrub(before + url + after)
    assert password not in scrubbed
    assert f"@{host}" in scrubbed


SECRET_NAMES = [
    "authorization",
    "api-key",
    "api_key",
    "x-api-key",
    "apikey",
    "password",
    "passwd",
    "passphrase",
    "secret",
    "client_secret",
    "access_token",
    "aws_secret_access_key",
]
SEPARATORS = [": ", ":", "=", " = ", " : ", ":\t", " ", "\t", "  "]
SPACED_NAMES = ["api-key", "x-api-key", "api_key", "apikey", "password", "passwd", "passphrase",
                "aws_secret_access_key"]  # fmt: skip
"""Names read with a space alone before the value; the others could start a sentence."""


@st.composite
def any_case(draw: st.DrawFn, name: str) -> str:
    flips = draw(st.lists(st.booleans(), min_size=len(name), max_size=len(name)))
    return "".join(c.upper() if up else c for c, up in zip(name, flips, strict=True))


# A secret holds a digit, so it never reads as an ordinary word ("Password reset").
SECRETS = st.text(
    st.sampled_from(string.ascii_letters + string.digits + "-_.~+/"), min_size=6, max_size=40
).map(lambda s: "7" + s)


@FUZZ
@given(
    name=st.sampled_from(SECRET_NAMES).flatmap(any_case),
    separator=st.sampled_from(SEPARATORS),
    secret=SECRETS,
    before=st.sampled_from(["", "headers: ", "> ", "{", "; ", "\n"]),
    after=st.sampled_from(["", "\n", "; next", ", more", " ok"]),
)
def test_a_secret_after_a_header_name_never_survives(
    name: str, separator: str, secret: str, before: str, after: str
) -> None:
    if separator.strip() == "" and name.lower() not in SPACED_NAMES:
        separator = ": "
    assert secret not in scrub(f"{before}{name}{separator}{secret}{after}")


@FUZZ
@given(name=st.sampled_from(SECRET_NAMES).flatmap(any_case), secret=SECRETS)
def test_a_secret_in_a_json_header_object_never_survives(name: str, secret: str) -> None:
    # Not yet held: the same object JSON-encoded again ({\"api-key\": \"...\"}).
    assert secret not in scrub(json.dumps({"headers": {name: secret}, "model": "gpt-4o"}))


WORDS = st.text(st.sampled_from(string.ascii_lowercase), min_size=1, max_size=9)
CLEAN_URLS = st.builds(
    "{}//{}{}".format,
    st.sampled_from(["https:", "http:", ""]),
    st.sampled_from(["api.example.com", "localhost:4318", "[::1]:16686", "cdn.example.org"]),
    st.sampled_from(["", "/", "/v1/chat/completions", "/docs#section", "/x?model=gpt-4o&n=2"]),
)


@FUZZ
@given(
    pieces=st.lists(
        WORDS
        | CLEAN_URLS
        | st.sampled_from(["Password reset", "api-key is missing", "password: required"])
        | st.sampled_from(["max_tokens=100", "x-ratelimit-remaining-tokens: 149984"]),
        min_size=1,
        max_size=12,
    ),
    joiner=st.sampled_from([" ", ", ", "; ", "\n"]),
)
def test_ordinary_text_and_credential_free_urls_are_left_alone(
    pieces: list[str], joiner: str
) -> None:
    text = joiner.join(pieces)
    assert scrub(text) == text
