"""The interop matrix: one agent per framework, judged by chainlat like chainlat's own.

For each stack (a framework and its OpenTelemetry instrumentation, in an environment of
its own), run the stack's agent (``agents/<stack>.py``) against the sim in four cases,
{wrapped in ``chainlat.workflow("agent")``, unwrapped} x {with
``chainlat.instrument_httpx()``, without}, each in rounds with the reference agent
(``agents/reference.py``: chainlat alone), their runs alternating. A case is *right*
when chainlat reads from its traces, run by run, the reference's step counts, tokens
and critical-path kinds, and per judged kind a critical-path time within tolerance of
the reference's runs around it, once the time measured inside the step spans as not
the steps' own is taken out on both sides (README.md); it is *judged* when ``chainlat
check`` judges it (exit 0 or 1, not 2) against every budget file, and right only if
each exit code is the reference's. A case wrong by its timing alone is run once more,
and its line says so.

Usage (stdlib only; any Python 3.11 runs it)::

    python tests/interop/run.py --stack litellm          # one stack
    python tests/interop/run.py --stack all --out DIR    # every stack, summary in DIR
    python tests/interop/run.py --stack all --setup-only # build the environments only

Environments live in ``~/.cache/chainlat/interop/<stack>-<hash of its requirements>``
(``CHAINLAT_INTEROP_CACHE`` moves them) and are reused while they exist. Exit status:
0 every case right and judged, 1 some case is not, 2 an environment could not be set up.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
AGENTS = HERE / "agents"
REQUIREMENTS = HERE / "requirements"

STACKS = (
    "openai-v2",
    "traceloop",
    "traceloop-langchain",
    "openinference-openai",
    "openinference-langchain",
    "langsmith-otel",
    "langfuse",
    "langfuse-langchain",
    "mlflow",
    "logfire",
    "logfire-openai-agents",
    "logfire-anthropic",
    "pydantic-ai",
    "litellm",
    "openai-agents",
    "traceloop-openai-agents",
    "strands-agents",
    "openllmetry-anthropic",
    "openinference-llama-index",
    "haystack",
    "google-adk",
    "smolagents",
    "semantic-kernel",
    "openlit",
    "agent-framework",
    "crewai",
    "autogen",
    "agno",
)

# The Node.js stacks (the Vercel AI SDK, Genkit, Mastra: node/README.md): set up by npm, one
# package folder each, their agent run by node; the rest of the block (sim, reference,
# judge) in a Python stack's environment.
sys.path.append(str(HERE / "node"))
import node_stack  # type: ignore[import-not-found]  # noqa: E402  # on sys.path just above

# The Java stack (Spring AI on Spring Boot, java/README.md): built by Maven, its agent run
# by java; the rest of the block as for the Node stacks.
sys.path.append(str(HERE / "java"))
import java_stack  # type: ignore[import-not-found]  # noqa: E402  # on sys.path just above

# The Go stack (Genkit for Go, go/README.md): built by go from the Go module proxy, its
# agent a binary; the rest of the block as for the Node stacks.
sys.path.append(str(HERE / "go"))
import go_stack  # type: ignore[import-not-found]  # noqa: E402  # on sys.path just above

STACKS = (*STACKS, *node_stack.STACKS, *java_stack.STACKS, *go_stack.STACKS)

CASES = (
    # name, wrapped in chainlat.workflow("agent"), chainlat.instrument_httpx()
    ("wrapped+httpx", True, True),
    ("wrapped", True, False),
    ("unwrapped+httpx", False, True),
    ("unwrapped", False, False),
)

STACK_CASES: dict[str, tuple[str, ...]] = {
    # Java has no chainlat.instrument_httpx(), and the HTTP client span Spring AI's OkHttp
    # client writes (Micrometer's okhttp.requests) names no URL (`uri = "none"`), so no
    # reader can take it for a model call's, and the streamed call's is the root of a trace
    # of its own, 2-5 ms long (java/README.md).
    "spring-ai": ("wrapped", "unwrapped"),
}
"""Stacks that run only some of `CASES`, each with why."""


def cases_of(stack: str) -> tuple[tuple[str, bool, bool], ...]:
    """The cases a stack runs (`CASES`, less those `STACK_CASES` leaves out)."""
    kept = STACK_CASES.get(stack)
    return CASES if kept is None else tuple(c for c in CASES if c[0] in kept)


KINDS = ("inference", "data", "tool")
"""The kinds judged. Overhead is the total minus these three: with each of them right,
overhead above the reference's is the framework's own wall time (its glue between steps,
its work inside its spans), not a reading of chainlat's. It is reported, not judged."""

DEFAULT_TOLERANCE_MS = 2.0
NOISE_FACTOR = 3.0
"""The median of 5 runs has a standard error of about 0.83 median absolute deviations
(normal noise); the difference of two such medians is allowed 3 deviations of each,
combined: about 3.6 standard errors, so a case is wrong by chance about once in 3000
comparisons (the matrix makes 160), and never by one run delayed by a burst of load."""
TOLERANCE_MS: dict[str, dict[str, float]] = {}
"""Per stack and kind, where 2 ms cannot hold; each entry says why (see README.md)."""

FRAMEWORK_STEPS: dict[str, dict[str, Any]] = {
    # smolagents' ToolCallingAgent ends its loop on a call to its own `final_answer`
    # tool (a TOOL span, 0.1 ms): the plan's second call asks for it, with 4-5 tokens of
    # arguments where the reference's answers 20 tokens of text (sim-plan: 1 ms a token,
    # 94-95 ms against 110-111 ms in the sim's server spans, a difference the judge takes
    # out with the rest of the sim's own time: `own_time`; it was expected as -15.5 ms).
    "smolagents": {
        "counts": {"tool": 2},
        "path_kinds": ["data", "inference", "tool", "inference", "tool", "inference"],
    },
    # Spring AI 2.0.1 sends `"strict": false` in every tool definition and `"content": ""`
    # on the assistant's tool-call message: the sim counts 115 and 138 input tokens for the
    # two plan calls, where the reference sends 111 and 135 (java/README.md).
    "spring-ai": {"tokens": {"input": 370}},
    # CrewAI prompts its agent itself: a system message of the agent's role, backstory and
    # goal, the task framed as `Current Task:` with its expected output and an order to
    # give the complete content, and a strict tool schema (`strict`,
    # `additionalProperties`). The sim counts 181 and 205 input tokens for the two plan
    # calls, where the reference sends 111 and 135: 503 in all, not 363. The calls, the
    # tool and their order are the reference's.
    "crewai": {"tokens": {"input": 503}},
    # Genkit's compat-oai plugin (1.42.0) sends a tool's name and parameters, not its
    # description, and the tool call's arguments back as JSON.stringify writes them (no
    # spaces): the sim counts 98 and 121 input tokens for the two plan calls, where the
    # reference sends 111 and 135 (node/genkit/README.md).
    "genkit": {"tokens": {"input": 336}},
    # Mastra (1.71) sends the tool's zod schema as JSON schema (`additionalProperties`,
    # `$schema`): the sim counts 131 and 155 input tokens for the two plan calls, where the
    # reference sends 111 and 135. Its model router calls an OpenAI-compatible `url`
    # through @ai-sdk/openai-compatible without `includeUsage`: the streamed answer asks
    # for no usage (`stream_options`), the sim sends none and Mastra records none (53 input
    # and 20 output tokens the reference reads). 350 and 65 in all (node/mastra/README.md).
    "mastra": {"tokens": {"input": 350, "output": 65}},
    # OpenLLMetry JS's OpenAI instrumentation (@traceloop/instrumentation-openai 0.27.0)
    # rebuilds a streamed chat completion from its chunks and never reads their `usage`:
    # the answer's `chat sim-answer` span has no token counts, though the agent asks for
    # them (`stream_options: { include_usage: true }`) and the sim sends them (53 input, 20
    # output). It counts a stream's tokens itself only with `enrichTokens` (js-tiktoken,
    # off by default), which knows no encoding for the sim's model names and writes none.
    # Undici's spans (`+httpx`) carry no tokens. 310 and 65 in all
    # (node/openai-openllmetry/README.md).
    "openllmetry-js": {"tokens": {"input": 310, "output": 65}},
    # AutoGen (autogen-ext 0.7.5) sends its tool's schema with `strict` and
    # `additionalProperties`, and its AssistantAgent's second plan call, the reflection on
    # the tool's result (`reflect_on_tool_use`), offers no tools: the sim counts 125 and 75
    # input tokens for the two plan calls, where the reference sends 111 and 135. 317 in
    # all. The calls, the tool and their order are the reference's.
    "autogen": {"tokens": {"input": 317}},
    # The Messages API's request is not the OpenAI one (the system prompt a field of its
    # own, the tool's `input_schema`): the sim counts 348 input tokens, as the wire reads
    # them in the `openllmetry-anthropic` stack. Logfire suppresses the wire's spans, so
    # this stack has no wire count of its own to be judged by.
    "logfire-anthropic": {"tokens": {"input": 348}},
}
"""What a stack's framework does beyond the agent, by its design, as the sim answers it:
its counts, token totals and critical-path kinds (replacing the reference's) and each
kind's expected paired difference in ms (`timing` judges the difference from it, with the
same tolerance). Each entry says why (README.md)."""


TOKENS_NOT_IN_SPANS: dict[str, str] = {
    "haystack": (
        "Haystack writes a call's usage only inside its content tags (JSON strings of the "
        "replies, with HAYSTACK_CONTENT_TRACING_ENABLED), which chainlat does not read"
    ),
    "genkit": (
        "Genkit writes a call's usage only inside genkit:output (the response's JSON, its "
        "content), which chainlat does not read"
    ),
    "genkit-go": (
        "Genkit for Go, as Genkit for Node, writes a call's usage only inside genkit:output "
        "(the response's JSON, its content), which chainlat does not read"
    ),
}
"""Stacks whose spans carry no token counts a reader may take: without chainlat's HTTP
spans their runs must read no tokens at all, rather than the reference's; with them, the
wire's counts as for every stack. Each entry says why."""

FOREIGN_WIRE = frozenset((*node_stack.STACKS, *java_stack.STACKS, *go_stack.STACKS))
"""Stacks in another language, whose ``+httpx`` is that language's own HTTP instrumentation
(OpenTelemetry JS's undici and http, Go's otelhttp), not chainlat's wire: its spans carry no
tokens, so such a case reads the framework's counts, or none (`TOKENS_NOT_IN_SPANS`)."""


def expected(stack: str, reference: dict[str, Any], case: str = "") -> dict[str, Any]:
    """The reference's run as the stack must read in ``case`` (`FRAMEWORK_STEPS`,
    `TOKENS_NOT_IN_SPANS`)."""
    steps = FRAMEWORK_STEPS.get(stack, {})
    counts = {**reference["counts"], **steps.get("counts", {})}
    tokens = {**reference["tokens"], **steps.get("tokens", {})}
    own_wire = "+httpx" in case and stack not in FOREIGN_WIRE
    if stack in TOKENS_NOT_IN_SPANS and case and not own_wire:
        tokens = dict.fromkeys(tokens, 0)
    return {
        **reference,
        "counts": counts,
        "tokens": tokens,
        "path_kinds": steps.get("path_kinds", reference.get("path_kinds")),
    }


FIRST_TOKEN_IN_SPANS = frozenset(
    {
        "strands-agents",
        "openllmetry-anthropic",
        "openinference-llama-index",
        "crewai",
        "langfuse",
        "langfuse-langchain",
        "mlflow",
    }
)
"""Stacks whose own spans say when the streamed answer's first token came (strands'
``gen_ai.server.time_to_first_token``, the anthropic SDK's
``gen_ai.response.time_to_first_chunk``, OpenInference's "First Token Stream Event" on
LlamaIndex's stream span and on the OpenAI instrumentation's ``ChatCompletion`` under
CrewAI, Langfuse's ``completion_start_time``, MLflow's first ``mlflow.chunk.item.0``
event): each of their runs must give the answer
a time to first token, as the reference's wire does, with the wire or without it. Other
stacks' spans record none (docs/integrations.md), or were not checked for one."""

FIRST_TOKEN_IN_SPANS |= (
    node_stack.FIRST_TOKEN_IN_SPANS
    | java_stack.FIRST_TOKEN_IN_SPANS
    | go_stack.FIRST_TOKEN_IN_SPANS
)

SEED = 7
RUNS = 5
"""Recorded runs per case, each between two of the reference's; the paired differences
are compared as their median."""
AGENT_TIMEOUT_S = 300
SETUP_TIMEOUT_S = 1800


def cache_root() -> Path:
    """Where the environments live."""
    default = Path.home() / ".cache" / "chainlat" / "interop"
    return Path(os.environ.get("CHAINLAT_INTEROP_CACHE", default))


def venv_dir(stack: str) -> Path:
    """The stack's environment: named after a short hash of its requirements file."""
    digest = hashlib.sha256((REQUIREMENTS / f"{stack}.txt").read_bytes()).hexdigest()[:10]
    return cache_root() / f"{stack}-{digest}"


def _bin(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / name


class SetupError(Exception):
    """An environment that could not be set up; the message is one line."""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or ["(no output)"])[-1][:300]


def setup(stack: str, repo: Path) -> tuple[Path, float]:
    """The stack's environment, created if missing; and the seconds spent on it."""
    for other in (node_stack, java_stack, go_stack):  # another language: its build, and a Python's
        if stack in other.STACKS:
            venv, seconds = setup(other.PYTHON_STACK, repo)
            try:
                return venv, seconds + other.setup(cache_root(), stack)
            except (
                node_stack.NodeSetupError,
                java_stack.JavaSetupError,
                go_stack.GoSetupError,
            ) as exc:
                raise SetupError(f"{stack}: {exc}") from None
    venv = venv_dir(stack)
    stamp = venv / ".chainlat-interop"
    wanted = json.dumps({"repo": str(repo), "pyproject": _digest(repo / "pyproject.toml")})
    started = time.perf_counter()
    if stamp.exists() and stamp.read_text() == wanted:
        return venv, 0.0
    python = _bin(venv, "python")
    if stamp.exists():
        # Same requirements, another checkout (or chainlat's own dependencies changed):
        # only chainlat is installed again.
        _pip(python, ["-e", str(repo)], stack)
    else:
        if venv.exists():
            shutil.rmtree(venv)  # a set-up that did not finish
        venv.parent.mkdir(parents=True, exist_ok=True)
        made = subprocess.run(
            # From a venv's python too, venv builds on the base interpreter.
            [sys.executable, "-m", "venv", str(venv)],
            capture_output=True,
            text=True,
        )
        if made.returncode != 0:
            raise SetupError(f"{stack}: python3 -m venv failed: {_last_line(made.stderr)}")
        requirements = REQUIREMENTS / f"{stack}.txt"
        try:
            _pip(python, ["-e", str(repo), "-r", str(requirements)], stack)
        except SetupError:
            shutil.rmtree(venv, ignore_errors=True)
            raise
    stamp.write_text(wanted)
    return venv, time.perf_counter() - started


def _pip(python: Path, args: list[str], stack: str) -> None:
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    try:
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=SETUP_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise SetupError(f"{stack}: pip install did not finish in {SETUP_TIMEOUT_S} s") from None
    if done.returncode != 0:
        output = done.stderr + done.stdout
        if any(sign in output for sign in _NO_NETWORK):
            hint = " (the package index cannot be reached)"
        elif "No matching distribution" in output:
            hint = " (no package index reachable, or a pin it does not have)"
        else:
            hint = ""
        raise SetupError(f"{stack}: pip install failed{hint}: {_last_line(output)}")


_NO_NETWORK = ("NewConnectionError", "Failed to establish", "Could not fetch URL", "ConnectTimeout")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:10] if path.exists() else ""


class Sim:
    """The sim (``sim_server.py``) in a process of its own, on a free port of 127.0.0.1,
    its server spans written to ``spans``."""

    def __init__(self, venv: Path, profiles: Path, spans: Path, log: Path) -> None:
        argv = [str(_bin(venv, "python")), "-P", str(HERE / "sim_server.py")]
        argv += ["--profiles", str(profiles), "--seed", str(SEED), "--spans", str(spans)]
        self._log = log.open("w")
        self._proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if "serving " not in line:
            self.stop()
            raise SetupError(f"the sim did not start: {line.strip() or 'no output'}")
        self.base_url = line.split("serving ", 1)[1].split()[0] + "/v1"

    def stop(self) -> None:
        """Stop the server (its input closed: it flushes its spans) and wait for it."""
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._log.close()


@dataclass
class CaseResult:
    """One case's outcome, as printed and written to the summary."""

    stack: str
    case: str
    right: bool
    judged: bool
    differs: list[str] = field(default_factory=list)
    run: dict[str, Any] | None = None
    check_exit: dict[str, int] = field(default_factory=dict)
    late: list[str] = field(default_factory=list)
    """Budgets ``check`` left not judged for a streamed call's span that ended after its
    workflow, as `LATE_STREAM_END` allows the stack."""
    seconds: float = 0.0
    overhead_ms: float | None = None
    """The median overhead minus the reference's: the framework's own extra time."""
    first_attempt: list[str] | None = None
    """What differed the first time, when the case was run a second time (`retry`)."""
    timing: dict[str, Any] = field(default_factory=dict)
    """Per kind: the paired difference, its tolerance, the measured time taken out."""
    declined: dict[str, str] = field(default_factory=dict)
    """Kinds chainlat rightly does not judge, with why: every run's spans lack a model call's
    end, chainlat says so (``unrecorded_end``), and its reading is no more than the truth
    (`declined_kinds`)."""

    def line(self) -> str:
        """``stack case: right|WRONG (what differs)  judged|NOT JUDGED  (overhead ...)``;
        a right case with kinds chainlat rightly declines says ``judged, except KIND: not
        judged by chainlat, rightly (why)``."""
        verdict = "right" if self.right else f"WRONG ({'; '.join(self.differs)})"
        if self.first_attempt is not None:
            verdict += f" on the second attempt (first: {'; '.join(self.first_attempt)})"
        line = f"{self.stack} {self.case}: {verdict}  {'judged' if self.judged else 'NOT JUDGED'}"
        if self.declined:
            kinds = ", ".join(self.declined)
            why = next(iter(self.declined.values()))
            line += f", except {kinds}: not judged by chainlat, rightly ({why})"
        if self.late:
            line += (
                f"; check left {', '.join(self.late)} not judged for a run whose streamed call's "
                "span ended after its workflow, rightly (LATE_STREAM_END)"
            )
        if self.overhead_ms is not None and "inference" not in self.declined:
            line += f"  (overhead {self.overhead_ms:+.1f} ms over the reference's, not judged)"
        return line


READY = "@@chainlat-interop ready"
DONE = "@@chainlat-interop done"


class Agent:
    """One agent script, paced (``--paced``): it runs once per `run_once`."""

    def __init__(
        self, venv: Path, script: str, traces: Path, base_url: str, wrapped: bool, httpx: bool
    ) -> None:
        stack = script.removesuffix(".py")
        foreign = (
            node_stack.agent_argv(stack, cache_root())
            or java_stack.agent_argv(stack, cache_root())
            or go_stack.agent_argv(stack, cache_root())
        )
        argv = foreign or [str(_bin(venv, "python")), "-P", str(AGENTS / script)]
        argv += ["--paced", "--traces", str(traces), "--base-url", base_url]
        argv += ["--wrapped"] * wrapped + ["--httpx"] * httpx
        # No exporter of a framework's own may reach the network; no telemetry either.
        env = dict(
            os.environ,
            OTEL_SDK_DISABLED="false",
            TRACELOOP_TELEMETRY="false",
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            OPENAI_API_KEY="sk-interop",
            OPENAI_BASE_URL=base_url,
            OTEL_TRACES_EXPORTER="none",
            OTEL_EXPORTER_OTLP_ENDPOINT="",
        )
        traces.unlink(missing_ok=True)
        self.name = script
        self._log_path = traces.with_suffix(".log")
        self._log = self._log_path.open("w")
        self._proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
            bufsize=1,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def wait_for(self, marker: str) -> None:
        """Wait until the script prints ``marker``; `AgentError` if it exits or times out."""
        deadline = time.monotonic() + AGENT_TIMEOUT_S
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AgentError(f"{self.name}: no answer in {AGENT_TIMEOUT_S} s") from None
            if line is None:
                code = self._proc.wait()
                self._log.flush()
                raise AgentError(
                    f"{self.name} failed (exit {code}): {_last_line(self._log_path.read_text())}"
                )
            if marker in line:
                return
            self._log.write(line)

    def run_once(self) -> None:
        """One recorded run."""
        assert self._proc.stdin is not None
        self._proc.stdin.write("run\n")
        self._proc.stdin.flush()
        self.wait_for(DONE)

    def finish(self) -> None:
        """Let the script write its spans and intervals, and exit."""
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write("stop\n")
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            code = self._proc.wait(AGENT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AgentError(f"{self.name}: did not exit in {AGENT_TIMEOUT_S} s") from None
        while (line := self._lines.get()) is not None:
            self._log.write(line)
        self._log.close()
        if code != 0:
            raise AgentError(
                f"{self.name} failed (exit {code}): {_last_line(self._log_path.read_text())}"
            )

    def kill(self) -> None:
        """Stop the script, when the block failed."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        if not self._log.closed:
            self._log.close()


class AgentError(Exception):
    """An agent script that failed; the message is one line."""


def run_block(
    venv: Path, stack: str, name: str, wrapped: bool, use_httpx: bool, where: Path
) -> str | None:
    """One case in rounds against the reference, both paced, against a sim of their own.

    Both scripts start and warm up; then, `RUNS` times, the reference runs once and the
    case once, and the reference once more at the end: each of the case's runs lies
    between two of the reference's, a second or so apart, so a burst of load on the
    machine lands on both sides of the comparison (`paired_deltas`). Writes, in
    ``where``: ``reference.jsonl``, ``case.jsonl`` (and their ``.intervals.json``),
    ``sim-spans.jsonl``. Returns None, or what failed.
    """
    where.mkdir(parents=True, exist_ok=True)
    profiles = where / "profiles.json"
    profiles.write_text(json.dumps(_profiles(venv)))
    sim = Sim(venv, profiles, where / "sim-spans.jsonl", where / "sim.log")
    agents: list[Agent] = []
    try:
        reference = Agent(venv, "reference.py", where / "reference.jsonl", sim.base_url, True, True)
        agents.append(reference)
        case = Agent(venv, f"{stack}.py", where / "case.jsonl", sim.base_url, wrapped, use_httpx)
        agents.append(case)
        reference.wait_for(READY)
        case.wait_for(READY)
        for _round in range(RUNS):
            reference.run_once()
            case.run_once()
        reference.run_once()
        for agent in agents:
            agent.finish()
    except AgentError as exc:
        for agent in agents:
            agent.kill()
        return str(exc)
    finally:
        sim.stop()
    return None


def _read(venv: Path, files: list[Path]) -> dict[str, Any]:
    done = subprocess.run(
        [str(_bin(venv, "python")), "-P", str(HERE / "judge.py"), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        error = {"error": f"judge.py failed: {_last_line(done.stderr)}"}
        return {str(f): error for f in files}
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def budget_files(
    reference: dict[str, Any],
    workflow: str,
    where: Path,
    tolerance: dict[str, float] | None = None,
) -> dict[str, Path]:
    """Budget files for ``workflow`` built from the reference's (median) numbers.

    Limits are on the median over the runs (``p50``), as the matrix compares medians:
    one run slowed by a busy machine moves neither. ``keep``: every step kind with room
    to spare (20 % + 10 ms, well over the tolerances); not the total, which is the
    framework's wall time, not a reading of chainlat's (a framework's extra time is
    judged once, as overhead, in `compare`); ``<kind>-broken``: only that kind's
    critical-path time, at half the reference's, so a case that loses or mislabels the
    kind keeps a budget it must break. ``tolerance``: the case's tolerance per kind
    (`tolerance_ms`), when it is more than that room (noise on a loaded machine, the
    framework's work inside its spans where chainlat cannot see the wire): a case read
    right keeps the budget the reference keeps.
    """
    split = reference["split_ms"]
    more = tolerance or {}
    room = {
        k: round(split[k] + max(split[k] * 0.2 + 10, more.get(k, 0.0)), 3)
        for k in ("inference", "data", "tool")
    }
    limits = {
        "keep": room,
        "inference-broken": {"inference": round(split["inference"] / 2, 3)},
        "data-broken": {"data": round(split["data"] / 2, 3)},
        "tool-broken": {"tool": round(split["tool"] / 2, 3)},
    }
    files: dict[str, Path] = {}
    for name, table in limits.items():
        path = where / f"budgets-{name}.toml"
        body = ", ".join(f'{key} = "{value}ms"' for key, value in table.items())
        path.write_text(f"[workflows.{json.dumps(workflow)}]\np50 = {{ {body} }}\n")
        files[name] = path
    return files


def check(venv: Path, traces: Path, budgets: dict[str, Path]) -> dict[str, int]:
    """``chainlat check``'s exit code for each budget file (the checks run side by side)."""

    def one(path: Path) -> int:
        argv = [
            str(_bin(venv, "chainlat")),
            "check",
            str(traces),
            "--budgets",
            str(path),
            "--roots",
        ]
        done = subprocess.run([*argv, "--no-progress"], capture_output=True, text=True, timeout=120)
        path.with_suffix(f".{traces.stem}.out").write_text(done.stdout + done.stderr)
        return done.returncode

    with ThreadPoolExecutor(len(budgets)) as pool:
        return dict(zip(budgets, pool.map(one, budgets.values()), strict=True))


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The first run, with each critical-path quantity and each measured time inside the
    step spans (``inside_ms``) replaced by its median over ``runs``."""
    keys = runs[0]["split_ms"]
    split = {key: statistics.median(r["split_ms"][key] for r in runs) for key in keys}
    inside = {kind: statistics.median(r["inside_ms"][kind] for r in runs) for kind in KINDS}
    served = statistics.median(r.get("served_ms", 0.0) for r in runs)
    return {**runs[0], "split_ms": split, "inside_ms": inside, "served_ms": served}


def _mad(values: list[float]) -> float:
    middle = statistics.median(values)
    return statistics.median(abs(v - middle) for v in values)


def functions_read(refs: list[dict[str, Any]], runs: list[dict[str, Any]], kind: str) -> bool:
    """Whether every run of the case and of the reference had its ``kind`` functions
    matched to the spans read as those steps (``functions_ms``): only then is their own
    time taken out of both sides (`own_time`). A stack whose function no span holds as
    read (Spring AI's retrieval) is compared as before, its function's time in it."""
    return kind != "inference" and all(
        r.get("functions_ms", {}).get(kind, 0.0) > 0 for r in (*refs, *runs)
    )


def own_time(run: dict[str, Any], kind: str, functions: bool = True) -> float:
    """A kind's critical-path time as chainlat read it, minus the time inside its step
    spans measured as not the steps' own (``inside_ms``, judge.py `inside_ms`); for
    inference, minus the model's own time as the sim served it too (``served_ms``, judge.py
    `served_ms`); for data and tool, minus their functions' own time (``functions_ms``,
    judge.py `functions_ms`). Both differ from run to run with the machine and the
    language's runtime, not with chainlat: the Node and Go agents' retrieval, a 30 ms
    timer and a search, took 36-42 ms against Python's 32-35 in one block."""
    own = run["split_ms"][kind] - run["inside_ms"][kind]
    if kind == "inference":
        own -= run.get("served_ms", 0.0)
    elif functions:
        own -= run.get("functions_ms", {}).get(kind, 0.0)
    return float(own)


def paired_deltas(refs: list[dict[str, Any]], runs: list[dict[str, Any]], kind: str) -> list[float]:
    """Per round, the case's `own_time` minus the mean of the reference's runs just before
    and just after it (``refs`` has one run more than ``runs``, alternating with them)."""
    both = functions_read(refs, runs, kind)
    return [
        own_time(run, kind, both)
        - (own_time(refs[i], kind, both) + own_time(refs[i + 1], kind, both)) / 2
        for i, run in enumerate(runs)
    ]


def tolerance_ms(
    stack: str, kind: str, refs: list[dict[str, Any]], runs: list[dict[str, Any]]
) -> tuple[float, str]:
    """The tolerance on one kind's median paired difference, and how it was made.

    The configured part (`DEFAULT_TOLERANCE_MS` or `TOLERANCE_MS`) plus the noise of this
    machine during this case: `NOISE_FACTOR` times the median absolute deviation of the
    paired differences and that of the reference's own runs, combined as independent
    errors (the root of the sum of squares). A fraction of a millisecond on a quiet
    machine. No part of it depends on the framework: what a framework does inside its
    spans is measured run by run and taken out (`own_time`), never allowed for.
    """
    base = TOLERANCE_MS.get(stack, {}).get(kind, DEFAULT_TOLERANCE_MS)
    deltas = paired_deltas(refs, runs, kind)
    both = functions_read(refs, runs, kind)
    own = [own_time(r, kind, both) for r in refs]
    noise = NOISE_FACTOR * math.hypot(_mad(deltas), _mad(own))
    return base + noise, f"{base:g} + noise {noise:.1f}"


def structural(
    reference: dict[str, Any],
    runs: list[dict[str, Any]],
    wire_tokens: dict[str, int] | None,
    first_token: bool = False,
) -> list[str]:
    """Counts, tokens, critical-path kinds and, with ``first_token`` (the stack is in
    `FIRST_TOKEN_IN_SPANS`), the answer's time to first token being read, run by run:
    what load never moves.

    The path's kinds are the reference's, in order, consecutive model calls taken as one
    step (`_steps`), and its model calls are as many as the run's steps of calls
    (judge.py `call_steps`, from the calls' own spans): under load the second of the
    parallel calls can start after the first has ended, and both are then on the path,
    rightly; a call on the path twice, or missing from it, is wrong."""
    differs: list[str] = []
    for run in runs:
        for kind, count in reference["counts"].items():
            if run["counts"][kind] != count:
                differs.append(f"{kind} count {run['counts'][kind]}, reference {count}")
        for key, tokens in reference["tokens"].items():
            got = run["tokens"][key]
            wire = None if wire_tokens is None else wire_tokens[key]
            if got not in (tokens, wire):
                on_wire = "" if wire is None else f", on the wire {wire}"
                differs.append(f"{key} tokens {got}, reference {tokens}{on_wire}")
        if first_token and run.get("answer_ttft_ms", 0.0) is None:
            differs.append("no time to first token for the streamed answer, which the spans record")
        kinds = run.get("path_kinds")
        if kinds is not None and _steps(kinds) != _steps(reference.get("path_kinds", kinds)):
            differs.append(
                f"critical path {', '.join(kinds) or 'empty'}, "
                f"reference {', '.join(reference['path_kinds'])}"
            )
        elif kinds is not None and kinds.count("inference") != run["call_steps"]:
            differs.append(
                f"{kinds.count('inference')} model calls on the critical path, "
                f"{run['call_steps']} steps of calls in the run"
            )
    return list(dict.fromkeys(differs))


LIVE_MISSES: dict[str, str] = {
    "litellm": (
        "LiteLLM writes a streamed call's span from its executor once the stream is read, "
        "after the workflow span ended: the rollup recorded as the workflow ended cannot "
        "count that call, and the readers rebuild the run from its spans (more steps than "
        "the rollup counted)"
    ),
}
"""Stacks whose rollup recorded on the workflow span rightly misses model calls, with
why: only their data and tool counts are compared (`live_differs`)."""

LIVE_TOLERANCE_MS = 0.01
"""The recorded rollup and the one read back are of the same spans: only rounding apart."""


def live_differs(stack: str, runs: list[dict[str, Any]]) -> list[str]:
    """Where the rollup chainlat recorded on a run's workflow span as the workflow ended
    (what a runtime budget, a pytest assertion and Jaeger read) is not the run read back
    from the file, which `structural` and `timing` judge: counts and tokens exactly, the
    split and the first output to `LIVE_TOLERANCE_MS` (a first output on one side only
    differs). A run with no recorded rollup (the unwrapped cases, another language's spans)
    has nothing to compare."""
    differs: list[str] = []
    for run in runs:
        live = run.get("live")
        if live is None:
            continue
        kinds = ("data", "tool") if stack in LIVE_MISSES else tuple(run["counts"])
        for kind in kinds:
            if live["counts"][kind] != run["counts"][kind]:
                differs.append(
                    f"live rollup: {kind} count {live['counts'][kind]}, read {run['counts'][kind]}"
                )
        if stack in LIVE_MISSES:
            continue
        for key, tokens in run["tokens"].items():
            if live["tokens"][key] != tokens:
                differs.append(f"live rollup: {key} tokens {live['tokens'][key]}, read {tokens}")
        if live.get("uncounted_calls", 0) != run.get("uncounted_calls", 0):
            differs.append(
                f"live rollup: {live.get('uncounted_calls', 0)} calls without token counts, "
                f"read {run.get('uncounted_calls', 0)}"
            )
        for part, ms in run["split_ms"].items():
            if abs(live["split_ms"][part] - ms) > LIVE_TOLERANCE_MS:
                differs.append(
                    f"live rollup: {part} {live['split_ms'][part]:.1f} ms, read {ms:.1f}"
                )
        first, read = live.get("first_output_ms"), run.get("first_output_ms")
        if (first is None) != (read is None) or (
            first is not None and read is not None and abs(first - read) > LIVE_TOLERANCE_MS
        ):
            shown = "none" if first is None else f"{first:.1f} ms"
            differs.append(f"live rollup: first output {shown}, read {_ms_or_none(read)}")
    return list(dict.fromkeys(differs))


def _ms_or_none(ms: float | None) -> str:
    return "none" if ms is None else f"{ms:.1f}"


def _steps(kinds: list[str]) -> list[str]:
    """Path kinds with consecutive model calls as one: the parallel calls are on the path
    once, or twice when the second started after the first had ended (`structural`)."""
    return [k for i, k in enumerate(kinds) if not (k == "inference" and kinds[i - 1 : i] == [k])]


def timing(
    stack: str,
    refs: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    declined: Collection[str] = (),
) -> tuple[list[str], dict[str, Any]]:
    """Each judged kind's median paired difference against its tolerance: what differs,
    and the figures (delta, tolerance, the measured time inside the spans taken out, the
    case's and the reference's medians). A ``declined`` kind (chainlat's reading is a
    lower bound: `declined_kinds`) differs only when it is over the truth: a bound that
    says "at least" more than the model took is wrong."""
    differs: list[str] = []
    figures: dict[str, Any] = {}
    for kind in KINDS:
        offset = FRAMEWORK_STEPS.get(stack, {}).get(f"{kind}_ms", 0.0)
        delta = statistics.median(paired_deltas(refs, runs, kind)) - offset
        tolerance, said = tolerance_ms(stack, kind, refs, runs)
        inside = statistics.median(r["inside_ms"][kind] for r in runs)
        ref_inside = statistics.median(r["inside_ms"][kind] for r in refs)
        figures[kind] = {
            "delta_ms": round(delta, 2),
            "tolerance_ms": round(tolerance, 2),
            "inside_ms": round(inside, 2),
            "reference_inside_ms": round(ref_inside, 2),
        }
        taken_out = ""
        if kind == "inference" and any("served_ms" in r for r in (*runs, *refs)):
            mine = statistics.median(r.get("served_ms", 0.0) for r in runs)
            theirs = statistics.median(r.get("served_ms", 0.0) for r in refs)
            figures[kind]["served_ms"] = round(mine, 2)
            figures[kind]["reference_served_ms"] = round(theirs, 2)
            taken_out = f"; the sim's own time taken out too: {mine:.1f} ms, reference {theirs:.1f}"
        elif functions_read(refs, runs, kind):
            mine = statistics.median(r.get("functions_ms", {}).get(kind, 0.0) for r in runs)
            theirs = statistics.median(r.get("functions_ms", {}).get(kind, 0.0) for r in refs)
            figures[kind]["functions_ms"] = round(mine, 2)
            figures[kind]["reference_functions_ms"] = round(theirs, 2)
            taken_out = (
                f"; the functions' own time taken out too: {mine:.1f} ms, reference {theirs:.1f}"
            )
        if offset:
            figures[kind]["expected_ms"] = offset
        if kind in declined:
            figures[kind]["not_judged"] = "a lower bound: a model call's end is not recorded"
            if delta > tolerance:
                differs.append(
                    f"{kind} at least {delta:+.1f} ms, over the truth (tolerance {said})"
                )
            continue
        if abs(delta) > tolerance:
            expect = f", from the expected {offset:+.1f} ms" if offset else ""
            differs.append(
                f"{kind} {delta:+.1f} ms{expect} (tolerance {said}; measured inside the spans "
                f"and taken out: {inside:.1f} ms, reference {ref_inside:.1f}{taken_out})"
            )
    return differs, figures


def compare(
    stack: str,
    refs: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    wire_tokens: dict[str, int] | None = None,
) -> list[str]:
    """What differs between the case's runs and the reference's around them; empty when
    right. Counts, tokens and critical-path kinds exactly, run by run (`structural`), and
    the rollup recorded as the workflow ended as the one read back (`live_differs`); each
    judged kind's time by `timing`. Tokens are right when they are the reference's,
    or what the sim counted on the wire for this stack (``wire_tokens``, read by
    chainlat's HTTP spans in the stack's ``wrapped+httpx`` case): a framework that sends
    another prompt or tool schema than the reference is answered with other counts."""
    fixed = structural(expected(stack, refs[0]), runs, wire_tokens, stack in FIRST_TOKEN_IN_SPANS)
    fixed += uncounted_differs(runs)
    return fixed + live_differs(stack, runs) + timing(stack, refs, runs)[0]


def uncounted_differs(runs: list[dict[str, Any]]) -> list[str]:
    """Where a run's token totals leave calls out without saying so, or say so without
    leaving any out: its tokens are below what the sim counted for its requests (the
    ``sim_tokens`` of its SERVER spans, counted whether or not a response said them)
    exactly when ``uncounted_calls`` is not 0 (docs/attributes.md, rule 21)."""
    differs: list[str] = []
    for run in runs:
        sim = run.get("sim_tokens")
        if sim is None:
            continue
        tokens, uncounted = run["tokens"], run.get("uncounted_calls", 0)
        short = tokens["input"] < sim["input"] or tokens["output"] < sim["output"]
        if short != (uncounted > 0):
            differs.append(
                f"tokens {tokens['input']} / {tokens['output']} of the sim's {sim['input']} / "
                f"{sim['output']}, {uncounted} calls said to have no counts"
            )
    return list(dict.fromkeys(differs))


UNRECORDED_LABEL = "a model call's end not recorded"
"""How ``chainlat check`` names the reason ``unrecorded_end``."""
UNRECORDED_WHY = "ended before its own events (a stream handed back before it was read)"
"""What its why says of the call (``chainlat.budgets.unrecorded.unrecorded_why``)."""


def declined_kinds(runs: list[dict[str, Any]]) -> tuple[dict[str, str], list[str]]:
    """The judged kinds chainlat marks unknown in the case's runs, because a model call's
    span ended before its own events (docs/attributes.md, rule 13), with why; and what is
    wrong with the mark: it must be on every run alike (the agent is the same each time).
    Only inference is declined when the mark also holds data and tool time as known."""
    marks = {tuple(r.get("unrecorded_parts", ())) for r in runs}
    found = sorted(set().union(*marks) & set(KINDS), key=KINDS.index)
    if not found:
        return {}, []
    differs = []
    if len(marks) > 1:
        differs.append(f"a model call's end marked unrecorded in some runs only ({sorted(marks)})")
    names = sorted({name for r in runs for name in r.get("unrecorded", ())})
    why = (
        f"{', '.join(names)} ended before its own events: the spans lack the stream's end, "
        "and chainlat says so"
    )
    return dict.fromkeys(found, why), differs


def declined_checks(budgets: dict[str, Path], declined: Collection[str]) -> dict[str, str]:
    """The budget files whose limits include a declined kind, and what ``chainlat check``
    must say of each: not judged (exit 2), every limit not judged being a declined kind's,
    for that reason, and none broken."""
    expected: dict[str, str] = {}
    for name, path in budgets.items():
        kinds = [k for k in declined if f"{k} =" in path.read_text()]
        if kinds:
            expected[name] = ", ".join(f"p50.{k}" for k in kinds)
    return expected


LATE_STREAM_END: dict[str, str] = {
    "spring-ai": (
        "Spring AI stops a streamed call's observation on Reactor's doFinally, which can run "
        "after the application's blockLast() returned and its workflow span ended (by 5 ms "
        "in one run of fifteen): check rightly leaves such a run's limits not judged"
    ),
    "litellm": (
        "LiteLLM ends a streamed call's litellm_request span at the time its success handler "
        "runs (datetime.now() in litellm_logging.py), on a thread of its executor once the "
        "stream is read: under load that came after the application's span ended (by 84.7 "
        "ms in one run of one block, other builds running beside it)"
    ),
}
"""Stacks whose streamed call's span may end after the workflow around it, each with why:
``check`` then says the run "could not be read whole" (`LATE_WHY`) and judges none of its
workflow's limits, which the case is allowed where that is all it says."""
LATE_WHY = "ended after its workflow"


def _check_says_late(out: Path) -> bool:
    """Whether ``check``'s output names limits not judged, each for a step that ended after
    its workflow, and nothing else."""
    lines = [line for line in out.read_text().splitlines() if line.startswith("NOT JUDGED: ")]
    return bool(lines) and all(LATE_WHY in line for line in lines)


def _check_declines(out: Path, targets: str) -> bool:
    """Whether ``check``'s output (``out``) names exactly ``targets`` not judged, each for
    the unrecorded end (its closing lines: ``NOT JUDGED: workflows.agent.p50.inference:
    5 of its runs: `OpenAI.astream_chat` ended before its own events ...``)."""
    lines = [line for line in out.read_text().splitlines() if line.startswith("NOT JUDGED: ")]
    said = {".".join(line.split(": ", 2)[1].rsplit(".", 2)[-2:]) for line in lines}
    return said == set(targets.split(", ")) and all(UNRECORDED_WHY in line for line in lines)


def judge_case(
    stack: str,
    name: str,
    venv: Path,
    where: Path,
    read: dict[str, Any],
    wire_tokens: dict[str, int] | None,
    seconds: float,
) -> tuple[CaseResult, bool]:
    """The verdict on one case's block, and whether only its timing was wrong (a miss
    that load alone can make: counts, tokens, path kinds and the broken budgets' verdicts
    right, every check judged)."""
    result = CaseResult(stack, name, False, False, seconds=round(seconds, 2))
    ref_read = read.get(str(where / "reference.jsonl"), {"error": "no traces"})
    got = read.get(str(where / "case.jsonl"), {"error": "no traces written"})
    if "error" in ref_read or len(ref_read["runs"]) != RUNS + 1:
        problem = ref_read.get("error") or f"{len(ref_read['runs'])} runs, expected {RUNS + 1}"
        result.differs.append(f"reference: {problem}")
        return result, False
    refs = ref_read["runs"]
    reference = median_run(refs)
    ref_codes = check(
        venv, where / "reference.jsonl", budget_files(reference, reference["workflow"], where)
    )
    if "error" in got:
        result.differs.append(got["error"])
        return result, False
    runs = got["runs"]
    workflow = runs[0]["workflow"] if runs else reference["workflow"]
    case_dir = where / "budgets"
    case_dir.mkdir(exist_ok=True)
    room = None
    if len(runs) == RUNS:
        # Room for the case's raw reading: its tolerance, plus what it holds inside its
        # spans (measured) beyond the reference's.
        room = {}
        for kind in KINDS:
            tolerance = tolerance_ms(stack, kind, refs, runs)[0]
            inside = statistics.median(r["inside_ms"][kind] for r in runs)
            room[kind] = tolerance + max(0.0, inside - reference["inside_ms"][kind])
    budgets = budget_files(reference, workflow, case_dir, room)
    result.check_exit = check(venv, where / "case.jsonl", budgets)
    result.declined, marked = declined_kinds(runs)
    declines = declined_checks(budgets, result.declined)
    result.late = [
        name
        for name, code in result.check_exit.items()
        if stack in LATE_STREAM_END
        and code == 2
        and _check_says_late(budgets[name].with_suffix(".case.out"))
    ]
    result.judged = all(
        code in (0, 1)
        for name, code in result.check_exit.items()
        if name not in declines and name not in result.late
    )
    timing_only = result.judged and not marked
    result.differs.extend(marked)
    if len(runs) != RUNS:
        names = ", ".join(sorted({r["workflow"] for r in runs})) or "none"
        result.differs.append(f"{len(runs)} runs ({names}), expected {RUNS}")
        timing_only = False
    else:
        result.run = median_run(runs)
        overhead = result.run["split_ms"]["overhead"] - reference["split_ms"]["overhead"]
        result.overhead_ms = round(overhead, 1)
        unseen = stack in TOKENS_NOT_IN_SPANS and "+httpx" not in name
        fixed = (
            structural(
                expected(stack, reference, name),
                runs,
                None if unseen else wire_tokens,
                stack in FIRST_TOKEN_IN_SPANS,
            )
            + uncounted_differs(runs)
            + live_differs(stack, runs)
        )
        timed, result.timing = timing(stack, refs, runs, result.declined)
        timing_only = timing_only and not fixed
        result.differs.extend(fixed + timed)
    for budget, code in result.check_exit.items():
        if budget in declines:
            out = budgets[budget].with_suffix(".case.out")
            if code != 2 or not _check_declines(out, declines[budget]):
                result.differs.append(
                    f"check: {budget} exit {code}, expected 2 with {declines[budget]} not "
                    f"judged ({UNRECORDED_LABEL}) and nothing else"
                )
                timing_only = False
            continue
        if code != ref_codes[budget] and budget not in result.late:
            result.differs.append(f"check: {budget} exit {code}, reference {ref_codes[budget]}")
            timing_only = timing_only and budget == "keep"
    result.right = not result.differs
    (where / "reference.json").write_text(
        json.dumps({"run": reference, "check_exit": ref_codes}, indent=2)
    )
    return result, timing_only and not result.right


def run_stack(stack: str, venv: Path, out: Path) -> list[CaseResult]:
    """Every case of one stack, each in rounds against the reference (`run_block`); a
    case wrong by its timing alone is run once more, with a fresh reference, and says so."""
    where = out / stack
    where.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    ran: dict[str, str | None] = {}
    cases = cases_of(stack)
    for name, wrapped, use_httpx in cases:
        started = time.perf_counter()
        ran[name] = run_block(venv, stack, name, wrapped, use_httpx, where / name)
        timings[name] = time.perf_counter() - started
    read = _read(venv, [f for n, *_ in cases for f in _block_files(where / n)])
    wires = [
        run["wire_tokens"]
        for run in read.get(str(where / "wrapped+httpx" / "case.jsonl"), {}).get("runs", [])
        if run.get("wire_tokens") is not None
    ]
    # The prompts are the same in every run: the first says what this stack sends.
    wire_tokens = wires[0] if wires else None
    results = []
    for name, wrapped, use_httpx in cases:
        if ran[name] is not None:
            results.append(CaseResult(stack, name, False, False, [str(ran[name])]))
            continue
        result, timing_only = judge_case(
            stack, name, venv, where / name, read, wire_tokens, timings[name]
        )
        if timing_only:
            again = where / f"{name}-second"
            started = time.perf_counter()
            failed = run_block(venv, stack, name, wrapped, use_httpx, again)
            seconds = time.perf_counter() - started
            if failed is not None:
                result.differs.append(f"second attempt: {failed}")
            else:
                reread = _read(venv, _block_files(again))
                second, _ = judge_case(stack, name, venv, again, reread, wire_tokens, seconds)
                second.first_attempt = result.differs
                result = second
        results.append(result)
    return results


def _block_files(where: Path) -> list[Path]:
    return [f for f in (where / "reference.jsonl", where / "case.jsonl") if f.exists()]


_PRINT_PROFILES = (
    "import sys, json; sys.path.append(%r); import _agent; print(json.dumps(_agent.PROFILES))"
)


def _profiles(venv: Path) -> dict[str, Any]:
    """The sim's profiles, as the agents declare them (read in the stack's environment)."""
    done = subprocess.run(
        [str(_bin(venv, "python")), "-P", "-c", _PRINT_PROFILES % str(HERE)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise SetupError(f"cannot read the sim profiles: {_last_line(done.stderr)}")
    profiles: dict[str, Any] = json.loads(done.stdout)
    return profiles


def main(argv: list[str] | None = None) -> int:
    """Set up, run and judge the stacks named; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", required=True, choices=(*STACKS, "all"))
    parser.add_argument("--setup-only", action="store_true", help="build the environments only")
    parser.add_argument("--repo", type=Path, default=HERE.parent.parent, help="chainlat's root")
    parser.add_argument("--out", type=Path, help="results folder (default: a temporary one)")
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    out = (args.out or Path(tempfile.mkdtemp(prefix="chainlat-interop-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    stacks = STACKS if args.stack == "all" else (args.stack,)
    summary: dict[str, Any] = {"out": str(out), "stacks": {}}
    status = 0
    for stack in stacks:
        entry: dict[str, Any] = {}
        summary["stacks"][stack] = entry
        try:
            venv, setup_s = setup(stack, repo)
        except SetupError as exc:
            print(f"{stack}: NOT SET UP: {exc}", flush=True)
            entry["setup_error"] = str(exc)
            status = 2
            continue
        entry["venv"] = str(venv)
        entry["setup_seconds"] = round(setup_s, 1)
        if args.setup_only:
            print(f"{stack}: set up in {setup_s:.0f} s ({venv})", flush=True)
            continue
        started = time.perf_counter()
        try:
            results = run_stack(stack, venv, out)
        except SetupError as exc:
            print(f"{stack}: NOT RUN: {exc}", flush=True)
            entry["setup_error"] = str(exc)
            status = 2
            continue
        entry["run_seconds"] = round(time.perf_counter() - started, 1)
        entry["cases"] = {r.case: _summary(r) for r in results}
        for result in results:
            print(result.line(), flush=True)
            if not (result.right and result.judged) and status == 0:
                status = 1
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"summary: {out / 'summary.json'}")
    return status


def _summary(result: CaseResult) -> dict[str, Any]:
    return {
        "right": result.right,
        "judged": result.judged,
        "differs": result.differs,
        "check_exit": result.check_exit,
        "run": result.run,
        "overhead_over_reference_ms": result.overhead_ms,
        "seconds": result.seconds,
        "timing": result.timing,
        "first_attempt": result.first_attempt,
        "declined": result.declined,
    }


if __name__ == "__main__":
    sys.exit(main())
