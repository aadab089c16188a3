"""The Go stack of the interop matrix: Genkit for Go, traced by its own OpenTelemetry spans.

``run.py`` imports this module (stdlib only, like it) for the two things a Go stack does
differently: its set-up (``go build`` of ``go.mod``, ``go.sum`` and ``main.go`` into a
cached folder, beside the Python environments; the modules from the Go module proxy into
the machine's module cache) and its agent's command (the built binary). The sim, the
reference agent, the judge and ``chainlat check`` run in the Python environment of
`PYTHON_STACK`, as for the Node and Java stacks. See README.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

STACKS = ("genkit-go",)
FIRST_TOKEN_IN_SPANS: frozenset[str] = frozenset()
"""Genkit's spans record no first token: the model action's span of a stream ends with the
stream, and nothing in it says when its first chunk came (README.md)."""
PYTHON_STACK = "openai-v2"
"""The Python environment the sim, the reference, the judge and ``chainlat check`` use."""
GO_BUILD_TIMEOUT_S = 1800
SOURCES = ("go.mod", "go.sum", "main.go")
"""What the build reads; the stamp holds their digest, so an edit is rebuilt."""
BINARY = "agent"


class GoSetupError(Exception):
    """The agent could not be built; the message is one line."""


def build_dir(cache_root: Path) -> Path:
    """The build, named after a short hash of go.sum (its dependencies)."""
    digest = hashlib.sha256((HERE / "go.sum").read_bytes()).hexdigest()[:10]
    return cache_root / f"genkit-go-{digest}"


def _sources_digest() -> str:
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update(name.encode() + b"\0")
        digest.update((HERE / name).read_bytes())
    return digest.hexdigest()[:10]


def _go_version_wanted() -> tuple[int, ...]:
    """The ``go`` line of go.mod: the oldest Go that builds the module."""
    found = re.search(r"^go (\d+(?:\.\d+)*)$", (HERE / "go.mod").read_text(), re.MULTILINE)
    return tuple(int(part) for part in found.group(1).split(".")) if found else (0,)


def _go() -> tuple[str, str]:
    """The machine's go and its version, refused when older than go.mod's ``go`` line (a
    newer toolchain is never downloaded: ``GOTOOLCHAIN=local``)."""
    go = shutil.which("go")
    if go is None:
        raise GoSetupError("go is not on PATH (Go is needed to build the agent)")
    said = subprocess.run(
        [go, "env", "GOVERSION"], capture_output=True, text=True, env=_env()
    ).stdout.strip()
    found = re.fullmatch(r"go(\d+(?:\.\d+)*)", said)
    version = tuple(int(part) for part in found.group(1).split(".")) if found else (0,)
    wanted = _go_version_wanted()
    if version < wanted:
        need = ".".join(map(str, wanted))
        raise GoSetupError(f"go at {go} ({said or '?'}): go.mod needs go {need} or newer")
    return go, said


def _env() -> dict[str, str]:
    """The build's environment: the machine's Go, no toolchain download, no VCS stamp."""
    return dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=readonly -buildvcs=false")


def setup(cache_root: Path, stack: str = "genkit-go") -> float:
    """``go build`` into `build_dir` unless its stamp says these sources; the seconds spent
    (one build, for its one stack). The modules come from the Go module proxy into the
    module cache (``go env GOMODCACHE``)."""
    where = build_dir(cache_root)
    stamp = where / ".chainlat-interop"
    sources = _sources_digest()
    if stamp.exists() and json.loads(stamp.read_text()).get("sources") == sources:
        return 0.0
    started = time.perf_counter()
    go, version = _go()
    if where.exists():
        shutil.rmtree(where)  # a set-up that did not finish, or older sources
    where.mkdir(parents=True)
    for name in SOURCES:
        shutil.copy2(HERE / name, where / name)
    try:
        done = subprocess.run(
            [go, "build", "-trimpath", "-o", BINARY, "."],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=GO_BUILD_TIMEOUT_S,
            env=_env(),
        )
    except subprocess.TimeoutExpired:
        shutil.rmtree(where, ignore_errors=True)
        raise GoSetupError(f"go build did not finish in {GO_BUILD_TIMEOUT_S} s") from None
    if done.returncode != 0 or not (where / BINARY).exists():
        shutil.rmtree(where, ignore_errors=True)
        lines = [line.strip() for line in (done.stderr + done.stdout).splitlines()]
        raise GoSetupError(
            f"go build failed: {([x for x in lines if x] or ['(no output)'])[0][:300]}"
        )
    stamp.write_text(json.dumps({"go": version, "sources": sources}))
    return time.perf_counter() - started


def agent_argv(stack: str, cache_root: Path) -> list[str] | None:
    """The agent's command for the Go stack (run.py adds its arguments), None for others."""
    if stack not in STACKS:
        return None
    where = build_dir(cache_root)
    if not (where / ".chainlat-interop").exists():
        raise GoSetupError(f"{stack}: not set up ({where})")
    return [str(where / BINARY)]
