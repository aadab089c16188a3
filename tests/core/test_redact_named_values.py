"""The credential scrubber on values named without a colon, and on the shapes of keys
found beside each other: ``api-key X`` and ``Password X`` in any case, an AWS secret access
key after its name or beside its ``AKIA`` key id, and a Slack incoming webhook URL."""

from __future__ import annotations

import pytest

from chainlat._core.redact import REDACTED, scrub
from support.credentials import AWS_KEY_ID, AWS_SESSION_KEY_ID, PLAIN_SECRET

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
SLACK_HOOK = "https://hooks.slack.com/services/T00000000/B00000000/" + "XXXXXXXXXXXXXXXXXXXXXXXX"


@pytest.mark.parametrize(
    "name",
    ["api-key", "API-KEY", "x-api-key", "api_key", "apikey", "Password", "PASSWORD", "passwd",
     "passphrase", "aws_secret_access_key"],
)  # fmt: skip
@pytest.mark.parametrize("separator", [" ", ": ", "=", " = ", "\t"])
def test_scrub_redacts_a_value_named_with_or_without_a_colon(name: str, separator: str) -> None:
    """``api-key X`` and ``Password X`` once came back whole (issue 44)."""
    text = f"{name}{separator}{PLAIN_SECRET}"
    assert scrub(text) == f"{name}{separator}{REDACTED}"


@pytest.mark.parametrize(
    "text",
    [
        "Password reset required",
        "password: required",
        "api-key is missing",
        "the API key rotation",
        "Password Policy",
        "passphrase (optional)",
    ],
)
def test_scrub_leaves_a_secret_name_followed_by_a_word(text: str) -> None:
    assert scrub(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"aws_secret_access_key = {AWS_SECRET}", f"aws_secret_access_key = {REDACTED}"),
        (f"aws_secret_access_key {AWS_SECRET}", f"aws_secret_access_key {REDACTED}"),
        (f"{AWS_KEY_ID} {AWS_SECRET}", f"{REDACTED} {REDACTED}"),
        (f"{AWS_KEY_ID},{AWS_SECRET}\n", f"{REDACTED},{REDACTED}\n"),
        (f"user,,{AWS_SESSION_KEY_ID}, {AWS_SECRET}", f"user,,{REDACTED}, {REDACTED}"),
        (f'"{AWS_SECRET}": "{AWS_KEY_ID}"', f'"{REDACTED}": "{REDACTED}"'),
        (f"{AWS_SECRET}:{AWS_KEY_ID}", f"{REDACTED}:{REDACTED}"),
    ],
)
def test_scrub_redacts_an_aws_secret_key_after_its_name_or_beside_its_key_id(
    text: str, expected: str
) -> None:
    assert scrub(text) == expected


def test_scrub_keeps_40_characters_of_base64_without_a_key_id_beside_them() -> None:
    """A digest or an id in a path is not a secret without its key id."""
    text = f"sha1 {AWS_SECRET} in {AWS_SECRET[:30]}"
    assert scrub(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"POST {SLACK_HOOK} failed", f"POST https://hooks.slack.com/services/{REDACTED} failed"),
        (
            '{"webhook": "https:\\/\\/hooks.slack.com\\/services\\/T0\\/B0\\/abc123"}',
            f'{{"webhook": "https:\\/\\/hooks.slack.com\\/services\\/{REDACTED}"}}',
        ),
        ("see https://hooks.slack.com/docs", "see https://hooks.slack.com/docs"),
    ],
)
def test_scrub_redacts_a_slack_webhook_path(text: str, expected: str) -> None:
    assert scrub(text) == expected
