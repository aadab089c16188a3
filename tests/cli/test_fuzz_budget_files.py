"""Bad budget files to ``chainlat check``: files mutated at random (seeded, a few hundred),
a broken one in a real process and a huge value: one clear line on stderr, exit code 2,
never a traceback."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from support.check_input import VALID_TOML, assert_one_clear_line, check

VALID_YAML = """\
min_runs: 2
workflows:
  answer:
    total: 2s
    p95: {total: 1800ms, data: 250ms}
    steps:
      "chat gpt-4o": {max: 1s, ttft_p95: 0.25s}
"""

TOKENS = [
    "-1", "0", "1e309", "nan", "inf", '"800ms"', '"-5ms"', '"fast"', "true", "[]", "{}",
    '""', "null", "~", "'", '"', "[", "]", "{", "}", "=", ":", "-", "\\", "\x00", "\t",
    "\u2028", "é", "\udcff", "💥", "workflows", "steps", "p95", "p100", "total", "max",
    "min_runs", "<<", "&anchor", "*anchor", "!!python/object:os.system", "0x10", "1_000",
    "9" * 400,
]  # fmt: skip


def mutate(text: str, rng: random.Random) -> bytes:
    """One to three random edits: delete, insert, replace a token, duplicate, swap, cut."""
    for _ in range(rng.randint(1, 3)):
        lines = text.split("\n")
        op = rng.randrange(6)
        if op == 0 and text:
            start = rng.randrange(len(text))
            text = text[:start] + text[start + rng.randint(1, 12) :]
        elif op == 1:
            at = rng.randrange(len(text) + 1)
            text = text[:at] + rng.choice(TOKENS) + text[at:]
        elif op == 2:
            words = text.split(" ")
            words[rng.randrange(len(words))] = rng.choice(TOKENS)
            text = " ".join(words)
        elif op == 3:
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            text = "\n".join(lines)
        elif op == 4 and len(lines) > 1:
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
        else:
            text = text[: rng.randrange(len(text) + 1)]
    raw = text.encode("utf-8", "surrogateescape" if rng.random() < 0.5 else "replace")
    if rng.random() < 0.05:
        raw += bytes(rng.randrange(256) for _ in range(8))  # not UTF-8 at all
    return raw


def test_the_unmutated_budget_files_are_valid(
    capsys: pytest.CaptureFixture[str], good_traces: Path, tmp_path: Path
) -> None:
    for name, text in (("chainlat.toml", VALID_TOML), ("chainlat.yaml", VALID_YAML)):
        path = tmp_path / name
        path.write_text(text)
        code, out, err = check(capsys, str(good_traces), "--budgets", str(path))
        assert code == 0, err
        assert "answer" in out


@pytest.mark.parametrize(
    ("suffix", "text", "count"), [("toml", VALID_TOML, 250), ("yaml", VALID_YAML, 150)]
)
def test_a_mutated_budget_file_never_gives_a_traceback(
    capsys: pytest.CaptureFixture[str],
    good_traces: Path,
    tmp_path: Path,
    suffix: str,
    text: str,
    count: int,
) -> None:
    rng = random.Random(f"budgets-{suffix}")
    path = tmp_path / f"chainlat.{suffix}"
    outcomes: dict[int, int] = {}
    for _ in range(count):
        path.write_bytes(mutate(text, rng))
        code, out, err = check(capsys, str(good_traces), "--budgets", str(path))
        outcomes[code] = outcomes.get(code, 0) + 1
        if code == 2 and out:
            # A valid file with limits that cannot be judged: judged, then a line per limit
            # not judged, each naming the file.
            assert "Traceback" not in err
            starts = (f"chainlat: {path}: ", "chainlat: nothing to judge")
            assert all(line.startswith(starts) for line in err.splitlines()), err
        elif code == 2:
            line = assert_one_clear_line(code, err)
            # A broken file is named; a valid one that judges nothing says so.
            assert str(path) in line or line.startswith("chainlat: nothing to judge"), line
        else:
            assert code in (0, 1), (code, err)
            assert "answer" in out
    assert outcomes.get(2, 0) > count // 4  # most mutations break the file: they were judged


def test_a_broken_budget_file_in_a_real_process_prints_one_line(
    good_traces: Path, tmp_path: Path
) -> None:
    path = tmp_path / "chainlat.toml"
    path.write_bytes(b'[workflows.answer]\ntotal = "2s\n\xff\xfe')
    result = subprocess.run(
        [sys.executable, "-m", "chainlat.cli", "check", str(good_traces), "--budgets", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert_one_clear_line(result.returncode, result.stderr, mentions=str(path))
    assert result.stdout == ""


def test_a_huge_wrong_value_in_a_budget_file_is_quoted_short(
    capsys: pytest.CaptureFixture[str], good_traces: Path, tmp_path: Path
) -> None:
    path = tmp_path / "chainlat.toml"
    path.write_text(
        f'[workflows.answer]\ncache = "{"y" * 1_000_000}"\nmin_runs = "{"z" * 1_000_000}"\n'
    )
    code, _, err = check(capsys, str(good_traces), "--budgets", str(path))
    line = assert_one_clear_line(code, err, mentions=str(path))
    assert len(line) < 500, line[:600]
