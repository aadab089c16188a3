"""The output boundary cleans a text once: what :func:`visible` returns is :class:`Cleaned`,
handed back as it is by :func:`scrub` and :func:`visible`, and any change to it is plain
text, cleaned again; :func:`one_line` scrubs its text once."""

from __future__ import annotations

import pytest

from chainlat._core import redact
from chainlat._core.redact import REDACTED, Cleaned, one_line, scrub, visible

SECRET = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789"


@pytest.fixture
def scrubbed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text :func:`scrub` is given, in order."""
    seen: list[str] = []
    real = redact.scrub

    def counting(text: str) -> str:
        seen.append(text)
        return real(text)

    monkeypatch.setattr(redact, "scrub", counting)
    return seen


def test_visible_scrubs_once_and_marks_the_result_cleaned(scrubbed: list[str]) -> None:
    shown = visible(f"key {SECRET}\x1b[31m")
    assert shown == f"key {REDACTED}\\x1b[31m"
    assert isinstance(shown, Cleaned)
    assert len(scrubbed) == 1


def test_a_cleaned_text_is_not_scrubbed_again(scrubbed: list[str]) -> None:
    shown = visible(f"token {SECRET}")
    assert visible(shown) is shown
    assert visible(shown, newline=True) is shown
    assert scrub(shown) is shown
    assert len(scrubbed) == 1


def test_a_changed_cleaned_text_is_plain_text_cleaned_again(scrubbed: list[str]) -> None:
    """Formatting, slicing or joining a cleaned text gives a str, which the boundary
    cleans: a secret split across two cleaned halves is still caught once joined."""
    head, tail = visible(SECRET[:12]), visible(SECRET[12:])
    joined = f"{head}{tail}"
    assert type(joined) is str and type(head[:3]) is str
    assert visible(joined) == REDACTED
    assert len(scrubbed) == 3


def test_text_kept_on_several_lines_is_not_marked_cleaned() -> None:
    """``newline=True`` keeps newlines, which a one-line output must still escape."""
    shown = visible("a\nb", newline=True)
    assert not isinstance(shown, Cleaned)
    assert visible(shown) == "a\\x0ab"


def test_one_line_scrubs_its_text_once(scrubbed: list[str]) -> None:
    line = one_line(f"chainlat: cannot read\n   Authorization: Bearer {SECRET}\n\x07done")
    assert line == f"chainlat: cannot read Authorization: {REDACTED} \\x07done"
    assert len(scrubbed) == 1
    assert REDACTED not in scrubbed[0]
