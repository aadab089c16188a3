"""Tables fit the terminal (``COLUMNS``, or the terminal's width) and never cut a value."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chainlat.report import render_text
from chainlat.testing import Capture
from support.cli import run, write_variant_runs


@pytest.fixture
def traces(cap: Capture, tmp_path: Path) -> Path:
    """Chat calls of 1,234 ms and more: numbers with a thousands separator to cut."""
    return write_variant_runs(cap, tmp_path / "traces.jsonl", chat_ms=(1_234, 2_345))


def _numbers(document: dict[str, object]) -> set[str]:
    """The latency percentiles of ``compare --format json`` as the text table prints them."""
    variants = document["variants"]
    assert isinstance(variants, list)
    return {f"{v[key]:,.0f}" for v in variants for key in ("p50", "p95", "p99")}


@pytest.mark.parametrize("columns", [100, 80, 60])
def test_the_compare_table_fits_columns_and_cuts_no_number(
    columns: int,
    traces: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = run(capsys, "compare", traces, "--format", "json")
    assert code == 0, err
    numbers = _numbers(json.loads(out))
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, err = run(capsys, "compare", traces)  # captured: not a terminal
    assert code == 0, err
    tables = [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]
    assert tables and all(len(line) <= columns for line in tables), out
    assert "…" not in out
    cells = set(re.findall(r"[\d,.$%]+", out))
    assert numbers <= cells, out
    for variant in ("large", "small"):
        assert re.search(rf"│ {variant} +│", out)  # every part of the table names its rows


def test_without_columns_a_pipe_gets_the_whole_table_on_one_line_per_row(
    traces: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, err = run(capsys, "compare", traces)
    assert code == 0, err
    rows = [line for line in out.splitlines() if line.startswith("│ large")]
    assert len(rows) == 1 and "Pareto" in out and "…" not in out


@pytest.mark.parametrize("width", [200, 100, 72, 50, 30, 12])
def test_a_table_is_narrowed_to_its_words_then_dealt_out_never_cut(width: int) -> None:
    from rich.table import Table

    table = Table(title="support-agent: variants (ms)")
    heads = ["variant", "runs", "p50", "p95", "p99", "1st out p95", "success", "95% CI"]
    for head in heads:
        table.add_column(head, justify="left" if head == "variant" else "right")
    rows = [
        ["large-planner", "24", "1,106", "1,204", "1,271", "1,076", "23/24 96%", "80%-99%"],
        ["small-planner", "24", "567", "646", "670", "474", "20/24 83%", "64%-93%"],
    ]
    for row in rows:
        table.add_row(*row)
    out = render_text([table], width=width)
    assert "…" not in out
    lines = out.splitlines()
    assert all(len(line) <= width for line in lines), out
    if width < 20:
        return  # narrower than a name: folded onto more lines, nothing dropped, unreadable
    # Every cell is there whole (a cell may wrap between its words, never inside one).
    words = set(" ".join(lines).replace("│", " ").replace("┃", " ").split())
    for row in rows:
        for cell in row:
            assert set(cell.split()) <= words, (cell, out)


def test_on_a_100_column_terminal_the_compare_table_fits_it(traces: Path) -> None:
    """A real process whose stdout is a terminal 100 columns wide, no ``COLUMNS``."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    with subprocess.Popen(
        [sys.executable, "-m", "chainlat.cli", "compare", str(traces), "--no-progress"],
        stdout=follower,
        stderr=subprocess.PIPE,
        env=env,
    ) as process:
        os.close(follower)
        chunks: list[bytes] = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: the process is done writing
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert process.wait(timeout=120) == 0
    os.close(leader)
    out = b"".join(chunks).decode()
    out = re.sub(r"\x1b\[[0-9;]*m", "", out).replace("\r\n", "\n")  # colours, if any
    tables = [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]
    assert tables and max(len(line) for line in tables) <= 100, out
    assert "…" not in out
    assert "2,3" in out  # the small variant's chat calls, 2,345 ms and more: whole
