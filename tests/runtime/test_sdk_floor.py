"""The runtime works on the OpenTelemetry floor pyproject.toml declares, on 1.44 (the newest
google-adk allows: ``opentelemetry-sdk<=1.44``) and on the SDK installed here (the latest).

For each pinned version the test builds a virtual environment of its own, cached under
``~/.cache/chainlat/sdk-floor/<version>-<hash of pyproject.toml>`` (rebuilt when
pyproject.toml changes; chainlat is installed editable, so a change to its source needs
no rebuild): ``pip install -e <repo> openai opentelemetry-api==V opentelemetry-sdk==V
opentelemetry-exporter-otlp==V msgspec==F`` (F: the msgspec floor pyproject.toml
declares), semantic conventions and proto as pip resolves them. Then
``sdk_floor_smoke.py`` runs in it: ``configure()`` with the file exporter, workflows with
every kind of step, the real openai SDK traced by ``instrument_httpx()``
against a local ``SimServer``, the batching and the simple processor, the GenAI
metrics; the trace files are read back with ``chainlat.traces.read_runs``.

Cost, measured: cold (no cached environment, pip from PyPI) 51 s for 1.38 and 62 s for
1.44, 2 min 7 s for the file on a loaded machine; warm, 1.5 s per pinned version and
2.3 s for the installed SDK, 7 s for the file. A set-up that cannot reach the package
index fails with one line saying so; ``CHAINLAT_SDK_FLOOR=0`` skips the check, visibly
(``-m "not sdk_floor"`` deselects it).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SMOKE = Path(__file__).with_name("sdk_floor_smoke.py")
GOOGLE_ADK_CEILING = "1.44.0"
"""The newest SDK google-adk 2.13 accepts (``opentelemetry-sdk<=1.44``)."""
INSTALLED = "installed"
SETUP_TIMEOUT_S = 900
RUN_TIMEOUT_S = 300
_NO_NETWORK = (
    "NewConnectionError",
    "Failed to establish",
    "Could not fetch URL",
    "ConnectTimeout",
    "Temporary failure in name resolution",
    "Network is unreachable",
)

pytestmark = pytest.mark.sdk_floor


def declared_floor(package: str = "opentelemetry-sdk") -> str:
    """The lower bound pyproject.toml declares for ``package``."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for requirement in project["dependencies"]:
        bound = rf"{re.escape(package)}\s*>=\s*([0-9.]+)(\s*,\s*<.*)?"  # a ceiling may follow
        found = re.fullmatch(bound, requirement.strip())
        if found:
            return found.group(1)
    raise AssertionError(f"pyproject.toml declares no {package}>= bound")


def _cache_root() -> Path:
    default = Path.home() / ".cache" / "chainlat" / "sdk-floor"
    return Path(os.environ.get("CHAINLAT_SDK_FLOOR_CACHE", default))


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or ["(no output)"])[-1][:300]


def _pip_failure(version: str, output: str) -> str:
    # A package with no version at all ("from versions: none"; setuptools, in the build's
    # own pip) is an index that cannot be reached, not a missing pin.
    if any(sign in output for sign in _NO_NETWORK) or "(from versions: none)" in output:
        return f"SDK {version}: pip cannot reach the package index: {_last_line(output)}"
    return f"SDK {version}: pip install failed: {_last_line(output)}"


def environment(version: str) -> Path:
    """The python of a virtual environment with ``version`` of the SDK, built if missing."""
    digest = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()[:10]
    venv = _cache_root() / f"{version}-{digest}"
    python = venv / "bin" / "python"
    stamp = venv / ".chainlat-sdk-floor"
    if stamp.exists():
        return python
    for stale in venv.parent.glob(f"{version}-*"):
        shutil.rmtree(stale, ignore_errors=True)  # an older pyproject's, or a failed set-up
    venv.parent.mkdir(parents=True, exist_ok=True)
    made = subprocess.run(
        [sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, check=False
    )
    if made.returncode != 0:
        pytest.fail(f"SDK {version}: python -m venv failed: {_last_line(made.stderr)}", False)
    pins = [f"opentelemetry-{name}=={version}" for name in ("api", "sdk", "exporter-otlp")]
    # msgspec at its floor too (Agent Framework 1.23 caps it below 0.23): the traces' quick
    # reader and the wire's body decoding run on it in the smoke.
    pins.append(f"msgspec=={declared_floor('msgspec')}")
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    try:
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "-e", str(REPO), "openai", *pins],
            capture_output=True,
            text=True,
            env=env,
            timeout=SETUP_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        shutil.rmtree(venv, ignore_errors=True)
        pytest.fail(f"SDK {version}: pip install did not finish in {SETUP_TIMEOUT_S} s", False)
    if done.returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        pytest.fail(_pip_failure(version, done.stderr + done.stdout), False)
    stamp.write_text(version)
    return python


def smoke(python: Path, out: Path) -> dict[str, Any]:
    done = subprocess.run(
        [str(python), str(SMOKE), str(out)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"{SMOKE.name} failed under {python}:\n{done.stderr[-3000:]}", False)
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


CHAT_STEPS = ["data", "tool", "tool", "inference", "inference", "inference"]
CHAT_PATH = [
    "data retrieve",
    "execute_tool lookup",
    "execute_tool fetch",
    "chat sim-fast",
    "chat sim-fast",
    "chat sim-fast",
]
METRICS = [
    "chainlat.chain.duration",
    "gen_ai.client.operation.duration",
    "gen_ai.client.operation.time_per_output_chunk",
    "gen_ai.client.operation.time_to_first_chunk",
    "gen_ai.client.token.usage",
    "gen_ai.workflow.duration",
    "gen_ai.workflow.time_to_first_output",
]


def _consistent(rollup: dict[str, Any], duration_ns: int) -> None:
    """The wall time is split among the kinds, up to the first output too, and each kind's
    critical-path share is at most its summed time."""
    assert math.isclose(rollup["total_ms"], duration_ns / 1e6, abs_tol=1e-6)
    for prefix in ("", "first_output_"):
        parts = sum(rollup[f"{prefix}{kind}_ms"] for kind in ("inference", "data", "tool"))
        total = rollup["total_ms" if not prefix else "first_output_ms"]
        assert math.isclose(parts + rollup[f"{prefix}overhead_ms"], total, abs_tol=1e-5)
    for kind in ("inference", "data", "tool"):
        assert 0 <= rollup[f"{kind}_ms"] <= rollup[f"{kind}_sum_ms"] + 1e-6
    assert 0 < rollup["first_output_ms"] <= rollup["total_ms"]


@pytest.mark.parametrize("version", [declared_floor(), GOOGLE_ADK_CEILING, INSTALLED])
def test_the_runtime_runs_and_its_traces_read_back(version: str, tmp_path: Path) -> None:
    """Every step counted once, live and read back alike, on each SDK."""
    if os.environ.get("CHAINLAT_SDK_FLOOR") == "0":
        pytest.skip("CHAINLAT_SDK_FLOOR=0: the OpenTelemetry SDK floor check is turned off")
    python = Path(sys.executable) if version == INSTALLED else environment(version)
    report = smoke(python, tmp_path)

    if version != INSTALLED:
        assert report["sdk"].split(".")[:2] == version.split(".")[:2]
    assert report["warnings"] == []
    assert report["default_sampler_is_blind"] is True  # the handover works on it
    sdk = tuple(map(int, report["sdk"].split(".")[:2]))
    assert ("AlwaysRecordSampler" in report["blind_samplers"]) is (sdk >= (1, 45))
    assert report["batch_shutdown"] is True
    assert report["simple_shutdown"] is True
    assert report["metrics"] == METRICS

    for mode, workflows in (("batch", ["floor-chat", "floor-voice"]), ("simple", ["floor-chat"])):
        read, live = report[f"{mode}_read"], report[f"{mode}_live"]
        assert [run["workflow"] for run in read] == workflows
        for run, seen in zip(read, live, strict=True):
            assert seen["rollup"] == run["rollup"]  # the application and CI agree
            _consistent(run["rollup"], run["duration_ns"])
        chat = read[0]
        assert chat["steps"] == CHAT_STEPS
        rollup = chat["rollup"]
        counts = [rollup[f"{kind}_count"] for kind in ("step", "inference", "data", "tool")]
        assert counts == [6, 3, 1, 2]
        assert (rollup["input_tokens"], rollup["output_tokens"]) == (5, 4)
        assert rollup["critical_path"] == CHAT_PATH
    voice = report["batch_read"][1]
    assert voice["steps"] == ["inference", "inference"]
    assert voice["rollup"]["speech_to_text_ms"] is not None
