"""The credential scrubber on span attribute values: ``scrub_value`` scrubs strings and
sequences of strings, and returns other values as they are."""

from __future__ import annotations

import pytest

from chainlat._core.redact import REDACTED, scrub_value
from support.credentials import PLAIN_SECRET


def test_scrub_value_scrubs_a_string() -> None:
    assert scrub_value(f"token={PLAIN_SECRET}") == f"token={REDACTED}"


@pytest.mark.parametrize("container", [list, tuple])
def test_scrub_value_scrubs_a_sequence_of_strings_into_a_tuple(container: type) -> None:
    value = container(["ok", f"Bearer {PLAIN_SECRET}"])
    assert scrub_value(value) == ("ok", f"Bearer {REDACTED}")


@pytest.mark.parametrize("value", [1, 1.5, True, None, b"Bearer abc123", [1, 2], (True,)])
def test_scrub_value_leaves_other_values_unchanged(value: object) -> None:
    assert scrub_value(value) is value
