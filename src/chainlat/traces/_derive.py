"""What a span's kept attributes give, worked out once for every reader of trace files: the
quick msgspec path (:mod:`chainlat.traces._fast`) and the validating one
(:mod:`chainlat.traces._parse`) share it, so both read the same values."""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any, Final

from chainlat._core import attributes as attr
from chainlat._core.records import call_fields
from chainlat._core.rollup import classify, step_name_of

NO_ATTRIBUTES: Final[Mapping[str, object]] = types.MappingProxyType({})
"""The attributes of a span that has none chainlat keeps (shared, read-only)."""


_CACHE_HIT: Final = attr.CACHE_HIT


Derived = tuple[
    Mapping[str, object], Any, Any, Any, Any, bool, Any, Any, Any, bool, Any, bool, bool, Any, Any
]
"""What a span's kept attributes give, read once for both quick paths: the attributes,
kind, first token, input and output tokens (ints or None), cache hit, model, source, step
name, user-facing, cache-read tokens, and what :func:`~chainlat._core.records.call_marks`
says of a model call (carries its output, first token marked, operation), and a time to first
token present but unusable (``SpanRecord.ttft_unusable``)."""

NOTHING_DERIVED: Final[Derived] = (
    NO_ATTRIBUTES, None, None, None, None, False, None, None, None, False, None, False,
    False, None, None,
)  # fmt: skip


def derive(
    found: dict[str, object],
    _classify: Callable[[Mapping[str, object]], Any] = classify,
) -> Derived:
    """What the kept attributes ``found`` of a span give, as :func:`call_record` reads them
    (``tests/traces/test_fast_reader_attributes.py`` holds the quick paths to the validating
    one, ``tests/traces/test_derive_rules.py`` to :func:`call_record`)."""
    if not found:
        return NOTHING_DERIVED
    kind = _classify(found)
    cache_hit = found.get(_CACHE_HIT) is True
    step_name = step_name_of(found)
    if kind != "inference":
        return (
            found, kind, None, None, None, cache_hit, None, None,
            step_name, False, None, False, False, None, None,
        )  # fmt: skip
    # Tokens, first token, model and source by any convention, by its one rule for each,
    # and what call_marks says: a read span gets the record a live one gets.
    (
        tokens_in, tokens_out, ttft, model, source, user_facing, cache_read, has_output,
        ttft_marked, operation, unusable,
    ) = call_fields(found)  # fmt: skip
    return (
        found, kind, ttft, tokens_in, tokens_out, cache_hit, model, source, step_name,
        user_facing, cache_read, has_output, ttft_marked, operation, unusable,
    )  # fmt: skip
