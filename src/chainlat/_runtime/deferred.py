"""A workflow's rollup left to the export: computed on the export worker, off the
application's thread, or when the application first reads ``run.rollup``.

The chain processor leaves it here (``ChainlatSpanProcessor.defer_rollup``) only when every
processor that exports the provider's spans is of a type given to :func:`register`, whose exporter
calls :func:`resolve_rollups` before it encodes a batch: every exporter then sees the
``chainlat.chain.*`` attributes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from chainlat._core.errors import internal_errors
from chainlat._core.rollup import compute_rollup
from chainlat._runtime.otel_compat import attribute_dict, attributes_lock, bounded_attributes

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

    from chainlat._core.chain import Rollup
    from chainlat._core.prices import Prices
    from chainlat._core.rollup import SpanRecord

_resolving: tuple[type[SpanProcessor], ...] = ()


def register(*processor_types: type[SpanProcessor]) -> None:
    """Processors whose exports call :func:`resolve_rollups` (``export.py`` adds its own)."""
    global _resolving
    _resolving = (*_resolving, *processor_types)


def resolves(processor: object) -> bool:
    """Whether ``processor``'s exports call :func:`resolve_rollups`."""
    return isinstance(processor, _resolving)


ROLLUP_KEYS: Final = 23
"""The most attributes :meth:`Rollup.to_attributes` writes."""


class DeferredRollup:
    """A workflow's rollup, computed once, when first asked for: by the export of its
    span (:func:`resolve_rollups`) or by the application (``run.rollup``)."""

    __slots__ = (
        "_count",
        "_end_of_turn_ns",
        "_first_output_ns",
        "_lock",
        "_make_records",
        "_prices",
        "_records",
        "_rollup",
        "_written",
        "root",
    )

    def __init__(
        self,
        root: SpanRecord,
        spans: list[ReadableSpan],
        make_records: Callable[[Sequence[ReadableSpan]], list[SpanRecord]],
        first_output_ns: int | None,
        prices: Prices | None,
        end_of_turn_ns: int | None = None,
    ) -> None:
        self.root = root
        self._records = spans
        self._make_records = make_records
        # The workflow's steps are those ended when it ended: a step ending later still
        # appends to the list, after this count.
        self._count = len(spans)
        self._first_output_ns = first_output_ns
        self._prices = prices
        self._end_of_turn_ns = end_of_turn_ns
        self._lock = threading.Lock()
        self._rollup: Rollup | None = None
        self._written = False

    def rollup(self) -> Rollup:
        """The rollup, computed on the first call."""
        with self._lock:
            return self._compute()

    def _compute(self) -> Rollup:
        rollup = self._rollup
        if rollup is None:
            spans = self._records
            if len(spans) != self._count:
                spans = spans[: self._count]
            records = self._make_records(spans)
            rollup = self._rollup = compute_rollup(
                self.root,
                records,
                first_output_ns=self._first_output_ns,
                prices=self._prices,
                end_of_turn_ns=self._end_of_turn_ns,
            )
            self._records = []  # not needed again: let them go
        return rollup

    def write_into(self, span: ReadableSpan) -> None:
        """Write the ``chainlat.chain.*`` attributes into the ended span, once."""
        with self._lock:
            if self._written:
                return
            self._written = True
            values = self._compute().to_attributes()
            bounded = bounded_attributes(span)  # checked for room when the rollup was deferred
            inner = attribute_dict(bounded)
            if bounded is None or inner is None:
                return  # not an SDK span's dict: never deferred (defer_rollup checks it)
            # The span has ended (its attributes are read-only to the SDK's setters);
            # the exporters read it only after this, each export having called it.
            with attributes_lock(bounded):
                if not inner.keys().isdisjoint(values):
                    for key in values:
                        inner.pop(key, None)  # replaced values move to the end, as the SDK does
                inner.update(values)


def resolve_rollups(spans: Sequence[ReadableSpan]) -> None:
    """Before an export encodes ``spans``: give each workflow span left by
    :meth:`ChainlatSpanProcessor.defer_rollup` its ``chainlat.chain.*`` attributes."""
    for span in spans:
        deferred = getattr(span, "_chainlat_rollup", None)
        if deferred is not None:
            try:
                deferred.write_into(span)
            except Exception:
                with internal_errors("computing the rollup"):
                    raise
