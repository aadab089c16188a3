"""Properties of the credential scrubber (hypothesis): a shaped secret anywhere, or any
secret in a secret place, never comes back from ``scrub``; any text is accepted."""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from chainlat._core.redact import scrub, scrub_url


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
