"""Blank lines are counted a chunk at a time, not looped over one by one (a gzip of 50 MiB of
newlines took 44 s), and line numbers stay exact around them."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest

from chainlat._core.errors import TraceSourceError
from chainlat.traces import read_runs
from chainlat.traces._files import _lines

MIB = 1024 * 1024


def test_a_run_of_blank_lines_is_a_few_counts_not_a_line_each() -> None:
    items = list(_lines(io.BytesIO(b"\n \r\n\t\n" * (2 * MIB)), limit=1000))
    # A count per run; a blank line cut by a chunk's end comes whole, as bytes.
    assert sum(i if isinstance(i, int) else 1 for i in items if i is not None) == 6 * MIB
    assert all(isinstance(i, int) or (i is not None and not i.strip()) for i in items)
    assert len(items) <= 32  # a few per chunk read (1 MiB), not 6 million


def test_lines_across_chunks_and_over_the_limit_are_read_as_before() -> None:
    long_line = b"x" * (3 * MIB) + b"\n"
    data = b"\n" * 5 + b'{"a": 1}\n' + long_line + b"y" * (MIB - 3) + b"\n" + b"tail"
    items = list(_lines(io.BytesIO(data), limit=2 * MIB))
    assert items == [5, b'{"a": 1}\n', None, b"y" * (MIB - 3) + b"\n", b"tail"]


def test_the_line_after_many_blank_lines_keeps_its_number(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl.gz"
    with gzip.open(path, "wb") as out:
        out.write(b"\n" * (3 * MIB) + b'{"resourceSpans": 7}\n')
    with pytest.raises(TraceSourceError, match=rf"t.jsonl.gz:{3 * MIB + 1}: "):
        list(read_runs([path]))
