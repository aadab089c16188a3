"""The conventions' table and keys: every key read is in ``KEYS`` and every key there is
read, no two conventions give one value two kinds, each convention names what it was checked
against, and the module's docstring examples hold."""

from __future__ import annotations

import doctest
from collections.abc import Iterator, Mapping

import pytest

from chainlat._core import conventions
from chainlat._core.call_readings import asked_tools, first_token_at
from chainlat._core.conventions import (
    CONVENTIONS,
    KEYS,
    classify,
    end_reason_of,
    has_output,
    input_tokens_of,
    is_http_level,
    is_run_root,
    model_of,
    output_tokens_of,
    provider_of,
    speech_input_of,
    streamed_of,
    ttft_ms_of,
    user_bot_latency_ms_of,
    workflow_name_of,
)
from support.convention_samples import (
    SAMPLES,
)

# --- the table and the keys -----------------------------------------------------------------------


class Recording(Mapping[str, object]):
    """A mapping that notes every key asked for, however it is asked."""

    def __init__(self, data: Mapping[str, object]) -> None:
        self._data = dict(data)
        self.asked: set[str] = set()

    def __getitem__(self, key: str) -> object:
        self.asked.add(key)
        return self._data[key]

    def get(self, key: str, default: object = None) -> object:
        self.asked.add(key)
        return self._data.get(key, default)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.asked.add(key)
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the functions look keys up, they never scan")

    def __len__(self) -> int:
        return len(self._data)


def _ask_everything(attributes: Mapping[str, object]) -> set[str]:
    recording = Recording(attributes)
    classify(recording)
    is_run_root(recording, "span", top_level=True)
    is_run_root(recording, "span", top_level=False)
    workflow_name_of(recording, "span")
    model_of(recording)
    provider_of(recording)
    input_tokens_of(recording)
    output_tokens_of(recording)
    ttft_ms_of(recording)
    is_http_level(recording)
    has_output(recording)
    end_reason_of(recording)
    user_bot_latency_ms_of(recording)
    speech_input_of(recording)
    streamed_of(recording)
    first_token_at(recording, 0, 0)
    asked_tools(recording)
    return recording.asked


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_key_read_is_in_keys(name: str) -> None:
    assert _ask_everything(SAMPLES[name]) <= KEYS


def test_every_key_in_keys_is_read() -> None:
    asked = set().union(*(_ask_everything(a) for a in [{}, *SAMPLES.values()]))
    assert asked == KEYS


def test_no_two_conventions_give_one_value_two_kinds() -> None:
    seen: dict[tuple[str, str], str | None] = {}
    for convention in CONVENTIONS:
        for key, values in convention.kinds.items():
            for value, kind in values.items():
                assert seen.setdefault((key, value), kind) == kind, (convention.name, key, value)


def test_every_convention_names_the_packages_it_was_checked_against() -> None:
    for convention in CONVENTIONS:
        assert convention.checked, convention.name
        assert convention.kinds or convention.suffixes or convention.names or convention.shapes, (
            convention.name
        )


def test_the_docstring_examples_hold() -> None:
    assert doctest.testmod(conventions, raise_on_error=True).failed == 0
