"""``parse_server_timing`` reads each entry with one expression; it gives what the two-step
reading it replaced gives (an entry, then its first ``dur`` parameter), kept here as the
reference, on every header value."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from chainlat.httpx._timing import MAX_SERVER_TIMING_ENTRIES, parse_server_timing

_ENTRY = re.compile(r"^\s*([!#$%&'*+.^_`|~0-9A-Za-z-]{1,40})\s*(?:;(.*))?$")
_DUR = re.compile(r"(?:^|;)\s*dur\s*=\s*\"?([0-9]+(?:\.[0-9]+)?)\"?\s*(?:;|$)")


def reference(value: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for entry in value.split(","):
        found = _ENTRY.match(entry)
        if found is None:
            continue
        duration = _DUR.search(found.group(2) or "")
        if duration is None:
            continue
        name = found.group(1).lower()
        out[name] = out.get(name, 0.0) + float(duration.group(1))
        if len(out) >= MAX_SERVER_TIMING_ENTRIES:
            break
    return out


_PIECES = st.sampled_from(
    [
        "db", "total", "Q", "a b", ";", ",", " ", "\t", "\n", "=", '"', "dur", "DUR",
        "dur=1", "dur=2.5", 'dur="7.25"', "dur=", "dur=x", "dur=-1", "dur=1.", "desc=hit",
        'desc="a;dur=9"', "desc", "1", "0.5", ".",
    ]
)  # fmt: skip


@settings(max_examples=3000)
@given(st.lists(_PIECES, max_size=14).map("".join))
@example("db;dur=1;dur=2, db;desc=x;dur=3")
@example("q;desc=a;dur=1 ;x, r;dur=2;")
@example("q;a\nb;dur=1, r;dur=1\n")
@example(", ".join(f"m{i};dur=1" for i in range(40)))
@example('db;desc="a;dur=9"\n;')  # a line break inside the parameters: no entry
def test_one_expression_reads_as_the_two_did(value: str) -> None:
    assert parse_server_timing(value) == reference(value)
