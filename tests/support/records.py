"""Span records by hand, times in milliseconds, for the exact-number rollup tests."""

from __future__ import annotations

from chainlat._core.rollup import SpanKindLabel, SpanRecord

MS = 1_000_000


def rec(
    span_id: int,
    parent: int | None,
    name: str,
    start_ms: float,
    end_ms: float,
    kind: SpanKindLabel | None = None,
    **extra: object,
) -> SpanRecord:
    """A record from ``start_ms`` to ``end_ms``; ``extra`` sets tokens, model, source..."""
    return SpanRecord(
        span_id,
        parent,
        name,
        round(start_ms * MS),
        round(end_ms * MS),
        kind,
        **extra,  # type: ignore[arg-type]
    )
