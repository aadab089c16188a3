"""Reading and writing an SDK span's attribute dict, for values chainlat built, at less
cost than the SDK's checked setters (which stay the path for anything else)."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from chainlat._runtime.otel_compat import (
    attribute_parts,
    attributes_lock,
    has_ended,
    span_attribute_dict,
)

if TYPE_CHECKING:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan


def attributes_of(span: ReadableSpan) -> Mapping[str, Any]:
    """A span's attributes, for reading.

    ``span.attributes`` is a read-only proxy over the SDK's BoundedAttributes, where
    every lookup runs Python code and a missing key costs a raised KeyError; the
    processor reads about ten keys per span, so it takes the plain dict underneath
    when the SDK has one, and the public view otherwise.
    """
    inner = span_attribute_dict(span)
    if inner is not None:
        return inner
    return span.attributes or {}


def set_attributes(span: trace.Span, values: Mapping[str, Any]) -> None:
    """``span.set_attributes(values)`` for values chainlat built, at less cost.

    The SDK checks and copies every value one by one (a dozen calls each for a string,
    more for a tuple); chainlat's own values are already what it would keep (strings,
    numbers, booleans, tuples of strings), so they are written straight into the span's
    attribute dict, under the span's locks, in the order and with the replacement rule
    the SDK uses. Anything else (another kind of value, a span near its attribute limit,
    a limit on value length, an ended or non-SDK span) goes through ``set_attributes``.
    """
    try:
        bounded, inner, lock = attribute_parts(span)
        maxlen = bounded.maxlen
        fast = (
            inner is not None
            and bounded.max_value_len is None
            and (maxlen is None or len(inner) + len(values) <= maxlen)
            and _plain(values)
        )
    except AttributeError:  # not an SDK span
        fast = False
    if not fast or inner is None:
        span.set_attributes(values)
        return
    with lock:
        ended = has_ended(span)
        if not ended:
            with attributes_lock(bounded):
                if inner and not inner.keys().isdisjoint(values):
                    for key in values:
                        inner.pop(key, None)  # replaced values move to the end, as the SDK does
                inner.update(values)
    if ended:
        span.set_attributes(values)  # the SDK's warning, and nothing set (outside its lock)


_SCALARS: Final = frozenset((str, int, float, bool))
_SCALARS_AND_TUPLES: Final = _SCALARS | {tuple}
_STR_ONLY: Final = {str}


def _plain(values: Mapping[str, Any]) -> bool:
    # The keys are chainlat's own (constants, header names under a prefix): non-empty strings.
    found = values.values()
    kinds = set(map(type, found))
    if kinds <= _SCALARS:
        return True
    if not kinds <= _SCALARS_AND_TUPLES:
        return False
    # The members of every tuple, strings only; in C (no bytecode per value): a model call
    # writes two dozen values here.
    tuples = itertools.compress(found, map(operator.is_, map(type, found), itertools.repeat(tuple)))
    return set(map(type, itertools.chain.from_iterable(tuples))) <= _STR_ONLY
