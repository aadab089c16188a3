"""The credential scrubber on hostile text: lone surrogates, and a megabyte of adversarial
or secret text finishes (no backtracking or quadratic pattern)."""

from __future__ import annotations

import pytest

from chainlat._core.redact import REDACTED, scrub, scrub_url
from support.credentials import OPENAI_KEY, PLAIN_SECRET


def test_scrub_accepts_lone_surrogates() -> None:
    text = f"\ud800 api_key={PLAIN_SECRET} \udfff {OPENAI_KEY}\udc80"
    assert scrub(text) == f"\ud800 api_key={REDACTED} \udfff {REDACTED}\udc80"


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
        ("//", None),
        ("\\/\\/", None),
        ("//u:a ", None),
        ("AKIA" + "A" * 16 + " ", f"{REDACTED} " * (MEGABYTE // 21)),
        ("hooks.slack.com/", None),
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
