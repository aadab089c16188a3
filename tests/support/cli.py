"""Running the ``chainlat`` command in a test, and a traces file for it to read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import chainlat
from chainlat._runtime.otlp_json import encode_request
from chainlat.cli import main
from chainlat.testing import Capture


def run(capsys: pytest.CaptureFixture[str], *args: str | os.PathLike[str]) -> tuple[int, str, str]:
    """``chainlat ARGS`` through :func:`chainlat.cli.main`: exit code, stdout, stderr."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def write_variant_runs(
    cap: Capture,
    path: Path,
    *,
    runs: int = 10,
    chat_ms: tuple[int, int] = (1_234, 456),
    corrupt_line: bool = False,
    variants: int = 2,
) -> Path:
    """``runs`` runs of workflow ``agent`` per variant (``large``: model ``big``, ``small``:
    model ``small``), each a chat call of ``chat_ms`` (+ its index) then a 5 ms tool;
    graded, on the fake clock of ``cap``. With ``corrupt_line``, a line that is not spans
    in the middle of the file (the readers skip it and say so); ``variants=1``: ``large``
    only."""
    p, clock = cap.provider, cap.clock
    lines: list[str] = []
    made = (("large", "big"), ("small", "small"))[:variants]
    for (variant, model), base_ms in zip(made, chat_ms[:variants], strict=True):
        for i in range(runs):
            with chainlat.workflow("agent", variant=variant, tracer_provider=p) as run_:
                clock.advance(1)
                with chainlat.inference(model, tracer_provider=p) as call:
                    clock.advance(base_ms + i)
                    call.record_usage(100 + 10 * i, 11 + i)
                clock.advance(1)
                with chainlat.tool("lookup", tracer_provider=p):
                    clock.advance(5)
                clock.advance(1)
            run_.record_outcome(success=i % 3 != 0, score=0.5)
        lines.append(json.dumps(encode_request(cap.spans())))
        cap.clear()
        if corrupt_line and variant == "large":
            lines.append("this line is not spans")
    path.write_text("\n".join(lines) + "\n")
    return path
