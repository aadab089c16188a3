"""``chainlat run`` and ``chainlat serve`` receiving from applications in other languages:
OpenTelemetry JS (``node/app.mjs``) and the OpenTelemetry Go SDK (``go/main.go``), which
know nothing of chainlat and export wherever the SDK's environment variables point.

Each application makes one workflow run (``invoke_workflow support``) with one model call
(``chat gpt-4o-mini``, 1000 + 200 tokens) of CHAT_MS at explicit times: the run's total is
CHAT_MS + 2 ms exactly, so the verdicts are exact. Node sends OTLP/HTTP JSON or protobuf,
Go OTLP/gRPC or HTTP/protobuf, as ``OTEL_EXPORTER_OTLP_PROTOCOL`` says.

Set-up is cached: ``npm ci`` of ``node/package-lock.json`` into
``~/.cache/chainlat/receiver-clients/node-<hash of the lock>``, and ``go build`` into
``${CHAINLAT_BIN_DIR:-~/.cache/chainlat/bin}/receiver-go-app-<hash of go.sum, go.mod and
main.go>`` (the Go module and build caches are the user's usual ones). When npm cannot
reach its registry, or Go its module proxy, or node or go is missing, the tests of that
client skip with one line saying why, except under ``CHAINLAT_REQUIRE_INTEGRATION=1``
(CI), where they fail. Costs are in ``README.md`` beside this file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, NoReturn

import pytest

from chainlat.cli import main

pytestmark = pytest.mark.integration

HERE: Final = Path(__file__).resolve().parent
NODE_DIR: Final = HERE / "node"
GO_DIR: Final = HERE / "go"
CACHE: Final = Path.home() / ".cache" / "chainlat"
REQUIRED: Final = os.environ.get("CHAINLAT_REQUIRE_INTEGRATION") == "1"
MIN_NODE: Final = (20, 6)
"""OpenTelemetry JS 2.12 declares ``node ^18.19.0 || >=20.6.0``; 20.6 is the floor taken."""
SETUP_TIMEOUT_S: Final = 1800
_OFFLINE: Final = re.compile(
    r"ENOTFOUND|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EAI_AGAIN|ENETUNREACH|EHOSTUNREACH"
    r"|network request to|no such host|connection refused|i/o timeout|dial tcp"
    r"|network is unreachable|TLS handshake timeout",
    re.IGNORECASE,
)
"""What npm and go print when they cannot reach the registry or the module proxy."""

BUDGETS: Final = """\
[workflows.support]
total = "100ms"
inference = "90ms"
cost = "0.01"

[workflows.support.steps."chat gpt-4o-mini"]
max = "80ms"

[prices."gpt-4o-mini"]
input_per_mtok = 1.0
output_per_mtok = 2.0
"""
KEPT_MS, BROKEN_MS = 50, 150
COST_USD: Final = 0.0014
"""1000 input tokens at $1 and 200 output tokens at $2 per million."""


class Unavailable(Exception):
    """A client cannot be set up here for a reason outside the project (no network, no
    toolchain); the message is one line."""


def _unavailable(client: str, reason: str) -> NoReturn:
    line = f"{client} client not set up: {reason}"
    if REQUIRED:
        pytest.fail(f"{line} (CHAINLAT_REQUIRE_INTEGRATION=1)", pytrace=False)
    pytest.skip(line)


def _digest(*paths: Path) -> str:
    sha = hashlib.sha256()
    for path in paths:
        sha.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return sha.hexdigest()[:12]


def _last_error(output: str) -> str:
    """The line of a failed command's output that says most: the first network error, else
    the last error, else the last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    offline = [line for line in lines if _OFFLINE.search(line)]
    errors = [line for line in lines if "error" in line.lower() and "log of this run" not in line]
    found = offline[:1] or errors[-1:] or lines[-1:] or ["(no output)"]
    return found[0][:300]


def _setup(what: str, argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    """Run a set-up command: Unavailable when it could not reach the network, AssertionError
    (a failing test) when it failed otherwise."""
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=SETUP_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{what} did not finish in {SETUP_TIMEOUT_S} s") from None
    if done.returncode == 0:
        return
    output = done.stderr + done.stdout
    if _OFFLINE.search(output):
        raise Unavailable(f"{what} cannot reach the network: {_last_error(output)}")
    raise AssertionError(f"{what} failed: {_last_error(output)}")


def node_app() -> list[str]:
    """``[node, app.mjs]`` beside the installed modules (``npm ci`` the first time)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise Unavailable("node and npm are needed on PATH")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    found = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    if found < MIN_NODE:
        raise Unavailable(f"node {version.strip()}: OpenTelemetry JS 2.12 needs >= 20.6")
    where = CACHE / "receiver-clients" / f"node-{_digest(NODE_DIR / 'package-lock.json')}"
    if not (where / "node_modules").is_dir():
        where.parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=f"{where.name}.", dir=where.parent))
        try:
            for name in ("package.json", "package-lock.json"):
                shutil.copy2(NODE_DIR / name, building / name)
            _setup("npm ci", [npm, "ci", "--no-audit", "--no-fund"], building)
            try:
                building.rename(where)  # whole or not at all; another set-up may have won
            except OSError:
                if not (where / "node_modules").is_dir():
                    raise
        finally:
            shutil.rmtree(building, ignore_errors=True)
    # Copied afresh each time, beside the modules that it imports: an edit needs no npm ci.
    shutil.copy2(NODE_DIR / "app.mjs", where / "app.mjs")
    return [node, str(where / "app.mjs")]


def go_toolchain() -> str:
    """The ``go`` command: on PATH, else where Go's installer puts it."""
    go = shutil.which("go") or shutil.which("/usr/local/go/bin/go")
    if go is None:
        raise Unavailable("no Go toolchain (go on PATH or /usr/local/go/bin/go)")
    return go


GO_ENV: Final = {"GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"}
"""The go.mod's toolchain or none (never one downloaded), and go.sum as committed."""


def go_app() -> list[str]:
    """The Go application's binary (``go build`` the first time)."""
    go = go_toolchain()
    sources = [GO_DIR / name for name in ("go.mod", "go.sum", "main.go")]
    bin_dir = Path(os.environ.get("CHAINLAT_BIN_DIR") or CACHE / "bin")
    binary = bin_dir / f"receiver-go-app-{_digest(*sources)}"
    if not binary.exists():
        bin_dir.mkdir(parents=True, exist_ok=True)
        building = bin_dir / f".{binary.name}.{os.getpid()}"
        try:
            argv = [go, "build", "-o", str(building), "."]  # as `go run .` builds: one cache
            _setup("go build", argv, GO_DIR, {**os.environ, **GO_ENV})
            os.replace(building, binary)
        finally:
            building.unlink(missing_ok=True)
    return [str(binary)]


CLIENTS: Final[dict[str, Callable[[], list[str]]]] = {"node": node_app, "go": go_app}
PROTOCOLS: Final = [
    ("node", "http/json"),
    ("node", "http/protobuf"),
    ("go", "grpc"),
    ("go", "http/protobuf"),
]


Apps = dict[str, list[str] | Exception]
"""Each client's command, or why it could not be set up."""


@pytest.fixture(scope="module")
def apps() -> Apps:
    """Each client set up once per module; one client's failure is its own tests' only."""
    found: Apps = {}
    for client, set_up in CLIENTS.items():
        try:
            found[client] = set_up()
        except (Unavailable, AssertionError) as exc:
            found[client] = exc
    return found


def _command(apps: Apps, client: str) -> list[str]:
    command = apps[client]
    if isinstance(command, Unavailable):
        _unavailable(client, str(command))
    if isinstance(command, Exception):
        pytest.fail(f"{client} client not set up: {command}", pytrace=False)
    return command


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    (tmp_path / "budgets.toml").write_text(BUDGETS)
    return tmp_path


def _verdicts(document: dict[str, Any]) -> dict[str, tuple[str, float | None]]:
    """Each limit's status and actual value, by target, from ``--format json``."""
    return {v["target"]: (v["status"], v["actual_ms"]) for v in document["verdicts"]}


def _expected(chat_ms: int) -> dict[str, tuple[str, object]]:
    status = "broken" if chat_ms > 80 else "ok"
    return {
        "total": (status, chat_ms + 2.0),
        "inference": (status, float(chat_ms)),
        'steps."chat gpt-4o-mini".max': (status, float(chat_ms)),
        "cost": ("ok", pytest.approx(COST_USD)),
    }


@pytest.mark.parametrize(("client", "protocol"), PROTOCOLS)
def test_run_judges_the_app_kept_0_broken_1_with_exact_figures(
    apps: Apps,
    workdir: Path,
    client: str,
    protocol: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    command = _command(apps, client)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    for chat_ms, code in ((KEPT_MS, 0), (BROKEN_MS, 1)):
        options = ["--budgets", "budgets.toml", "--wait", "0.2", "--format", "json"]
        assert main(["run", *options, "--", *command, str(chat_ms)]) == code
        out, err = capsys.readouterr()
        assert _verdicts(json.loads(out)) == _expected(chat_ms), err
        total = f"support, total {chat_ms + 2}.0 ms, first output {chat_ms + 1}.0 ms"
        if code == 0:
            assert f"{total}: kept" in err
        else:
            assert f"{total}: broken: support: total {chat_ms + 2}.0 ms > limit 100 ms" in err


@pytest.mark.parametrize(("client", "protocol"), PROTOCOLS)
def test_the_out_file_gives_check_the_same_verdict(
    apps: Apps,
    workdir: Path,
    client: str,
    protocol: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    command = _command(apps, client)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    options = ["--budgets", "budgets.toml", "--wait", "0.2", "--format", "json"]
    out = ["--out", "received.jsonl"]
    assert main(["run", *options, *out, "--", *command, str(BROKEN_MS)]) == 1
    by_run = json.loads(capsys.readouterr().out)
    assert main(["check", "received.jsonl", "--budgets", "budgets.toml", "--format", "json"]) == 1
    by_check = json.loads(capsys.readouterr().out)
    assert by_run["verdicts"] == by_check["verdicts"]
    assert _verdicts(by_check) == _expected(BROKEN_MS)


@pytest.mark.parametrize(("client", "protocol"), PROTOCOLS)
def test_run_judges_a_gzip_compressed_export_alike(
    apps: Apps,
    workdir: Path,
    client: str,
    protocol: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``OTEL_EXPORTER_OTLP_COMPRESSION=gzip``: gzip bodies over HTTP, gRPC's gzip."""
    command = _command(apps, client)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    options = ["--budgets", "budgets.toml", "--wait", "0.2", "--format", "json"]
    assert main(["run", *options, "--", *command, str(BROKEN_MS)]) == 1
    assert _verdicts(json.loads(capsys.readouterr().out)) == _expected(BROKEN_MS)


def test_serve_receives_every_client_and_protocol_at_once(apps: Apps, workdir: Path) -> None:
    """One ``chainlat serve`` process, four applications (each client over each of its
    protocols) pointed at it as a user points them, then SIGINT: four runs, all kept."""
    commands = {client: _command(apps, client) for client in CLIENTS}
    serve = subprocess.Popen(
        [sys.executable, "-m", "chainlat.cli", "serve", "--port", "0", "--grpc-port", "0",
         "--out", "received.jsonl", "--budgets", "budgets.toml", "--format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert serve.stderr is not None
        banner = serve.stderr.readline()
        ports = re.search(
            r"http://127\.0\.0\.1:(\d+)/v1/traces, OTLP/gRPC on 127\.0\.0\.1:(\d+)", banner
        )
        assert ports, banner
        http, grpc = ports.groups()
        for client, protocol in PROTOCOLS:
            port = grpc if protocol == "grpc" else http
            env = {**os.environ, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
                   "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}  # fmt: skip
            subprocess.run([*commands[client], str(KEPT_MS)], env=env, check=True, timeout=60)
        # Each application has exited once its export was answered: all is received.
        serve.send_signal(signal.SIGINT)
        out, err = serve.communicate(timeout=60)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    assert serve.returncode == 0, err
    document = json.loads(out)
    assert document["runs"] == len(PROTOCOLS), err
    assert {v["target"]: v["status"] for v in document["verdicts"]} == dict.fromkeys(
        _expected(KEPT_MS), "ok"
    )
    assert err.count(f"support, total {KEPT_MS + 2}.0 ms, first output") == len(PROTOCOLS)


@pytest.mark.parametrize("client", ["node", "go"])
def test_the_readme_commands_judge_the_app_as_written(
    apps: Apps, workdir: Path, client: str
) -> None:
    """``chainlat run -- node app.mjs`` and ``chainlat run -- go run .`` in the application's
    folder, as a real process: the broken budget is exit 1, the kept one 0."""
    command = _command(apps, client)
    if client == "node":
        cwd, cmd = Path(command[1]).parent, [command[0], "app.mjs"]
    else:
        cwd, cmd = GO_DIR, [go_toolchain(), "run", "."]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | GO_ENV
    budgets = str(workdir / "budgets.toml")
    chainlat = [sys.executable, "-m", "chainlat.cli", "run", "--budgets", budgets]
    for chat_ms, code in ((BROKEN_MS, 1), (KEPT_MS, 0)):
        done = subprocess.run(
            [*chainlat, "--", *cmd, str(chat_ms)],
            cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == code, done.stderr
        verdict = "BROKEN: workflows.support.total" if code else "OK: all 4 limits judged and kept"
        assert verdict in done.stdout


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_the_go_exporter_is_told_which_spans_chainlat_will_not_read(
    apps: Apps, workdir: Path, protocol: str
) -> None:
    """A model call that ends 5 ms before it starts (the Go SDK sends it as it is): the
    receiver keeps it and answers a partial success, which the Go exporter logs as it was
    written, rather than the span disappearing from the run in silence."""
    from chainlat.receiver import Receiver

    command = _command(apps, "go")
    with Receiver(workdir / "received.jsonl", port=0, grpc_port=0) as receiver:
        port = receiver.grpc_port if protocol == "grpc" else receiver.port
        env = {**os.environ, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
               "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}  # fmt: skip
        done = subprocess.run([*command, "-5"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "OTLP partial success: 1 span ends before it starts: kept, but chainlat's" in (
        done.stderr
    )
    assert "span 'chat gpt-4o-mini'" in done.stderr and "(1 spans rejected)" in done.stderr
    assert (receiver.counters.spans, receiver.counters.unread_spans) == (2, 1)
