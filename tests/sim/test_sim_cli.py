"""The ``chainlat sim`` command line: bad input exits 2 with one line, and a real
subprocess serves until interrupted."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import httpx
import openai
import pytest

from chainlat.sim import main
from support.sim_checks import FITTED_WITH_VOICES


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--port", "abc"], "argument --port: expected a port"),
        (["--network-delay-ms", "-5"], "argument --network-delay-ms: expected a number >= 0"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--otlp-endpoint", "nope"], "otlp_endpoint: expected an http(s) URL"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("chainlat sim: error: ")
    assert expected in err


def test_cli_bad_profiles_file_exits_2_naming_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text("[models.big]\nttft_base_ms = 1\ndecode_ms_per_token = -1\n")
    assert main(["--profiles", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"chainlat sim: error: {path}: models.big.decode_ms_per_token: must be at least 0, got -1\n"
    )
    assert main(["--profiles", str(tmp_path / "missing.toml")]) == 2
    assert "missing.toml: no such profile file" in capsys.readouterr().err


# Python leaves SIGINT ignored, with no KeyboardInterrupt, in a process started with it
# ignored, as every background job of a non-interactive shell is (CI steps, `cmd &`):
# restore the terminal's default so that the test sends the Ctrl-C of an interactive run.
_RUN_MAIN = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from chainlat.sim import main; sys.exit(main(sys.argv[1:]))"
)
STARTUP_S = 60.0
"""Bound on interpreter start, imports and the first line on a loaded machine."""
EXIT_S = 60.0
"""Bound on a clean stop after Ctrl-C; a process that ignored it hangs until killed."""


def _first_line(stream: IO[str], timeout_s: float) -> str:
    """The first line of ``stream``, or "" when none came within ``timeout_s``."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout_s)
    except queue.Empty:
        return ""


def test_cli_subprocess_serves_until_interrupted(tmp_path: Path) -> None:
    profiles = tmp_path / "p.json"
    profiles.write_text(json.dumps({"models": {"cli-model": {"ttft_base_ms": 5}}}))
    # The context manager closes the pipes and reaps the process, however the test ends.
    with subprocess.Popen(
        [sys.executable, "-c", _RUN_MAIN, "--port", "0", "--profiles", str(profiles)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    ) as process:
        try:
            assert process.stdout is not None
            line = _first_line(process.stdout, STARTUP_S)
            assert line.startswith("chainlat sim: serving http://127.0.0.1:"), line
            base_url = line.split()[3]
            with httpx.Client(timeout=STARTUP_S) as http:
                models = http.get(base_url + "/v1/models").json()
            assert [m["id"] for m in models["data"]] == ["cli-model"]
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=EXIT_S)
        finally:
            if process.poll() is None:  # a failure above: never leave it running
                process.kill()
                process.communicate()
    assert process.returncode == 0, err
    assert "Traceback" not in err
    assert out == ""  # everything after the first line: nothing


def test_cli_subprocess_bad_input_exits_2_without_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _RUN_MAIN, "--seed", "x"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr == "chainlat sim: error: argument --seed: invalid int value: 'x'\n"


def test_cli_serves_a_profile_files_speech_models_as_voices(tmp_path: Path) -> None:
    """A file fitted from voice runs (``chainlat profile -o``) is served back whole: its
    speech models as voices, never as chat models (tests/sim/test_profile_voices.py)."""
    path = tmp_path / "fitted.toml"
    path.write_text(FITTED_WITH_VOICES)
    with subprocess.Popen(
        [sys.executable, "-c", _RUN_MAIN, "--port", "0", "--profiles", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    ) as process:
        try:
            assert process.stdout is not None
            line = _first_line(process.stdout, STARTUP_S)
            assert line.startswith("chainlat sim: serving http://127.0.0.1:"), line
            assert "(fast, my-tts, my-stt)" in line
            client = openai.OpenAI(
                base_url=line.split()[3] + "/v1", api_key="sk-test", max_retries=0
            )
            start = time.perf_counter()
            with client.audio.speech.with_streaming_response.create(
                model="my-tts", voice="alloy", input="Hello", response_format="pcm"
            ) as response:
                audio = response.read()
            # The first audio byte is due 152.5 ms after the request: a floor, never early.
            assert len(audio) > 0 and time.perf_counter() - start >= 0.1525
            with pytest.raises(openai.NotFoundError, match="my-tts"):
                client.chat.completions.create(
                    model="my-tts", messages=[{"role": "user", "content": "hi"}]
                )
            reply = client.chat.completions.create(
                model="fast", messages=[{"role": "user", "content": "hi"}]
            )
            assert reply.choices[0].message.content
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=EXIT_S)
            except subprocess.TimeoutExpired:  # never leave it running
                process.kill()
                process.communicate()
