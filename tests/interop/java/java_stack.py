"""The Java stack of the interop matrix: Spring AI on Spring Boot, traced by its observations.

``run.py`` imports this module (stdlib only, like it) for the two things a Java stack does
differently: its set-up (``mvn package`` of ``pom.xml`` and ``src/`` into a cached folder,
beside the Python environments) and its agent's command (``java -jar agent.jar``). The
sim, the reference agent, the judge and ``chainlat check`` run in the Python environment
of `PYTHON_STACK`, as for the Node stacks. See README.md.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

STACKS = ("spring-ai",)
FIRST_TOKEN_IN_SPANS: frozenset[str] = frozenset()
"""Spring AI's streamed ``chat`` span records no first token (no event, no attribute)."""
PYTHON_STACK = "openai-v2"
"""The Python environment the sim, the reference, the judge and ``chainlat check`` use."""
MIN_JAVA_MAJOR = 17
"""Spring Boot 4 and Spring AI 2 need Java 17 or newer."""
MVN_TIMEOUT_S = 1800
SOURCES = ("pom.xml", "src")
"""What the build reads; the stamp holds their digest, so an edit is rebuilt."""


class JavaSetupError(Exception):
    """The agent could not be built; the message is one line."""


def build_dir(cache_root: Path) -> Path:
    """The build, named after a short hash of the pom (its dependencies)."""
    digest = hashlib.sha256((HERE / "pom.xml").read_bytes()).hexdigest()[:10]
    return cache_root / f"spring-ai-{digest}"


def _sources_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(p for name in SOURCES for p in [HERE / name, *(HERE / name).rglob("*")]):
        if path.is_file():
            digest.update(path.relative_to(HERE).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


def setup(cache_root: Path, stack: str = "spring-ai") -> float:
    """``mvn package`` into `build_dir` unless its stamp says these sources; the seconds
    spent (one build, for its one stack). The dependencies come from Maven Central into the
    local repository (~/.m2)."""
    where = build_dir(cache_root)
    stamp = where / ".chainlat-interop"
    sources = _sources_digest()
    if stamp.exists() and json.loads(stamp.read_text()).get("sources") == sources:
        return 0.0
    started = time.perf_counter()
    java = _java()
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JavaSetupError("mvn is not on PATH (Maven is needed to build the agent)")
    if where.exists():
        shutil.rmtree(where)  # a set-up that did not finish, or older sources
    where.mkdir(parents=True)
    shutil.copy2(HERE / "pom.xml", where / "pom.xml")
    shutil.copytree(HERE / "src", where / "src")
    try:
        done = subprocess.run(
            [mvn, "-B", "-q", "package", "-DskipTests"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=MVN_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        shutil.rmtree(where, ignore_errors=True)
        raise JavaSetupError(f"mvn package did not finish in {MVN_TIMEOUT_S} s") from None
    if done.returncode != 0 or not (where / "target" / "agent.jar").exists():
        shutil.rmtree(where, ignore_errors=True)
        raise JavaSetupError(f"mvn package failed: {_mvn_error(done.stdout + done.stderr)}")
    stamp.write_text(json.dumps({"java": java, "sources": sources}))
    return time.perf_counter() - started


def _mvn_error(output: str) -> str:
    lines = [_ANSI.sub("", line).strip() for line in output.splitlines()]
    errors = [line for line in lines if line.startswith("[ERROR]") and len(line) > 8]
    return (errors or [line for line in lines if line] or ["(no output)"])[0][:300]


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _java() -> str:
    """The machine's java, refused when older than `MIN_JAVA_MAJOR`."""
    java = shutil.which("java")
    if java is None:
        raise JavaSetupError("java is not on PATH (a JDK 17 or newer is needed)")
    said = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    found = re.search(r'version "(\d+)(?:\.(\d+))?', said)
    major = int(found.group(1)) if found else 0
    if major == 1 and found and found.group(2):
        major = int(found.group(2))  # "1.8.0": Java 8
    if major < MIN_JAVA_MAJOR:
        version = found.group(0) if found else "?"
        raise JavaSetupError(f"java at {java} ({version}): Spring Boot 4 needs >= {MIN_JAVA_MAJOR}")
    return java


def agent_argv(stack: str, cache_root: Path) -> list[str] | None:
    """The agent's command for the Java stack (run.py adds its arguments), None for others."""
    if stack not in STACKS:
        return None
    where = build_dir(cache_root)
    stamp = where / ".chainlat-interop"
    if not stamp.exists():
        raise JavaSetupError(f"{stack}: not set up ({where})")
    java = json.loads(stamp.read_text())["java"]
    return [java, "-jar", str(where / "target" / "agent.jar")]
