"""A text on its way out is scrubbed once: a name or a source cleaned where a renderer puts
it in is not scrubbed again by the layer that writes the document or the line. A second
scrub would be given text holding ``[REDACTED]``, which only a first scrub writes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import chainlat
from chainlat._core import redact
from chainlat._core.redact import REDACTED
from chainlat._runtime.otlp_json import encode_request
from chainlat.cli import main
from chainlat.testing import capture

SECRET = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789"
WORKFLOW = f"chat api_key={SECRET}"


@pytest.fixture
def scrubbed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text the scrubber is given, whichever module calls it."""
    seen: list[str] = []
    real = redact.scrub

    def counting(text: str) -> str:
        seen.append(text)
        return real(text)

    for module in list(sys.modules.values()):
        if getattr(module, "scrub", None) is real:
            monkeypatch.setattr(module, "scrub", counting)
    return seen


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    """A trace file and a budget file in a folder whose name holds a credential."""
    folder = tmp_path / f"key={SECRET}"
    folder.mkdir()
    trace = folder / "t.jsonl"
    with capture(fake_clock=True) as cap:
        with chainlat.workflow(WORKFLOW, tracer_provider=cap.provider):
            with chainlat.inference("gpt-4o", tracer_provider=cap.provider):
                cap.clock.advance(ms=10)
        trace.write_text(json.dumps(encode_request(cap.spans())) + "\n", encoding="utf-8")
    budgets = folder / "chainlat.toml"
    budgets.write_text(f'[workflows."{WORKFLOW}"]\ntotal = "1ms"\n', encoding="utf-8")
    return trace, budgets


@pytest.mark.parametrize(
    "command",
    [
        ["report", "{trace}"],
        ["report", "{trace}", "--format", "json"],
        ["report", "{trace}", "--format", "markdown"],
        ["check", "{trace}", "--budgets", "{budgets}"],
        ["check", "{trace}", "--budgets", "{budgets}", "--format", "json"],
        ["budgets", "validate", "{budgets}"],
        ["report", "{trace}-missing"],
    ],
    ids=lambda c: " ".join(c).replace("{", "").replace("}", ""),
)
def test_every_output_scrubs_each_text_once(
    command: list[str],
    files: tuple[Path, Path],
    scrubbed: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    trace, budgets = files
    main([part.format(trace=trace, budgets=budgets) for part in command])
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    assert SECRET not in printed
    assert REDACTED in printed
    assert scrubbed, "nothing was scrubbed"
    again = [text for text in scrubbed if REDACTED in text]
    assert again == [], f"scrubbed twice: {again}"
