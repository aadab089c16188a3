"""The interop matrix: one agent per framework, judged by chainlat like chainlat's own.

For each stack (a framework and its OpenTelemetry instrumentation, in an environment of
its own), run the stack's agent (``agents/<stack>.py``) against ``chainlat sim`` in four
cases, {wrapped in ``chainlat.workflow("agent")``, unwrapped} x {with
``chainlat.instrument_httpx()``, without}, and the reference agent (``agents/reference.py``:
chainlat alone). A case is *right* when chainlat reads from its traces one run with the
reference's step counts and tokens, and a critical-path split within ``TOLERANCE_MS`` of
the reference's per kind; it is *judged* when ``chainlat check`` judges it (exit 0 or 1,
not 2) against every budget file, and right only if each exit code is the reference's.

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
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
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
    "openinference-openai",
    "openinference-langchain",
    "pydantic-ai",
    "litellm",
    "openai-agents",
)

CASES = (
    # name, wrapped in chainlat.workflow("agent"), chainlat.instrument_httpx()
    ("wrapped+httpx", True, True),
    ("wrapped", True, False),
    ("unwrapped+httpx", False, True),
    ("unwrapped", False, False),
)

KINDS = ("inference", "data", "tool")
"""The kinds judged. Overhead is the total minus these three: with each of them right,
overhead above the reference's is the framework's own wall time (its glue between steps,
its work inside its spans), not a reading of chainlat's. It is reported, not judged."""

DEFAULT_TOLERANCE_MS = 2.0
NOISE_FACTOR = 3.0
"""The median of 5 runs has a standard error of about 0.83 median absolute deviations
(normal noise); the difference of two such medians is allowed 3 deviations of each,
combined: about 3.6 standard errors, so a case is wrong by chance about once in 3000
comparisons (the matrix makes 112), and never by one run delayed by a burst of load."""
TOLERANCE_MS: dict[str, dict[str, float]] = {}
"""Per stack and kind, where 2 ms cannot hold; each entry says why (see README.md)."""

SEED = 7
RUNS = 5
"""Recorded runs per case (``RECORDED_RUNS`` in agents/_agent.py); splits are compared
as the median of each kind over them."""
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
    """``chainlat sim`` in a process of its own, on a free port of 127.0.0.1."""

    def __init__(self, venv: Path, profiles: Path, log: Path) -> None:
        argv = [str(_bin(venv, "chainlat")), "sim", "--port", "0", "--seed", str(SEED)]
        self._log = log.open("w")
        self._proc = subprocess.Popen(
            [*argv, "--profiles", str(profiles)],
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if "serving " not in line:
            self.stop()
            raise SetupError(f"chainlat sim did not start: {line.strip() or 'no output'}")
        self.base_url = line.split("serving ", 1)[1].split()[0] + "/v1"

    def stop(self) -> None:
        """Stop the server (SIGTERM) and wait for it."""
        self._proc.terminate()
        try:
            self._proc.wait(10)
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
    seconds: float = 0.0
    overhead_ms: float | None = None
    """The median overhead minus the reference's: the framework's own extra time."""

    def line(self) -> str:
        """``stack case: right|WRONG (what differs)  judged|NOT JUDGED  (overhead ...)``."""
        verdict = "right" if self.right else f"WRONG ({'; '.join(self.differs)})"
        line = f"{self.stack} {self.case}: {verdict}  {'judged' if self.judged else 'NOT JUDGED'}"
        if self.overhead_ms is not None:
            line += f"  (overhead {self.overhead_ms:+.1f} ms over the reference's, not judged)"
        return line


def _run_agent(
    venv: Path, script: str, traces: Path, base_url: str, wrapped: bool, use_httpx: bool
) -> str | None:
    """Run one agent script; None when it succeeded, else its last error line."""
    argv = [str(_bin(venv, "python")), "-P", str(AGENTS / script)]
    argv += ["--traces", str(traces), "--base-url", base_url]
    argv += ["--wrapped"] * wrapped + ["--httpx"] * use_httpx
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
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, env=env, timeout=AGENT_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return f"agent did not finish in {AGENT_TIMEOUT_S} s"
    log = traces.with_suffix(".log")
    log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        return f"agent failed (exit {done.returncode}): {_last_line(done.stderr)}"
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
    """The first run, with each critical-path quantity replaced by its median over ``runs``,
    the median absolute deviation of each from it (``spread_ms``: the noise of this machine
    now; unlike a range, one run delayed by a burst of load does not make it), and
    the median of ``llm_wrap_ms`` and ``in_span_ms`` where the runs have one."""
    keys = runs[0]["split_ms"]
    split = {key: statistics.median(r["split_ms"][key] for r in runs) for key in keys}
    spread = {
        key: statistics.median(abs(r["split_ms"][key] - split[key]) for r in runs) for key in keys
    }
    medians = {}
    for key in ("llm_wrap_ms", "in_span_ms"):
        found = [r[key] for r in runs if r.get(key) is not None]
        medians[key] = statistics.median(found) if found else None
    return {**runs[0], "split_ms": split, "spread_ms": spread, **medians}


def reference_of(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, Any]:
    """The reference, run before and after the cases: `median_run` of all its runs, with
    ``drift_ms``, how far each median moved from the first run to the second (the load of
    a shared machine changes over the minutes a stack takes; the cases ran in between)."""
    reference = median_run(before + after)
    first, second = median_run(before)["split_ms"], median_run(after)["split_ms"]
    reference["drift_ms"] = {key: abs(first[key] - second[key]) for key in first}
    return reference


def tolerance_ms(
    stack: str,
    kind: str,
    reference: dict[str, Any],
    in_span_ms: float | None,
    wire_timed: bool,
    case: dict[str, Any] | None = None,
) -> tuple[float, str]:
    """The tolerance on one kind's median, and how it was made.

    Three parts, each justified apart: the configured one (`DEFAULT_TOLERANCE_MS` or
    `TOLERANCE_MS`); the run-to-run noise of this machine, now: `NOISE_FACTOR` times the
    median absolute deviations of the reference's runs and of the case's (``case``, its
    `median_run`), combined as independent errors are (the root of the sum of squares),
    since the two medians compared were each measured with their own noise (a fraction
    of a millisecond on a quiet machine, tens on a busy one), plus the reference's drift
    (``drift_ms``: how far its median moved between its run before the cases and its run
    after them); and the framework's own work inside its model-call spans on the critical
    path (``in_span_ms``: measured in the stack's runs whose calls are also seen at the
    wire, as the inference read from the framework's spans alone minus the inference read
    with the wire spans), for inference where chainlat sees only the framework's spans:
    there it cannot be told from the model's time. Where the wire times the calls
    (``wire_timed``), that work is overhead, as the reference counts the SDK's, and
    inference gets no part of it.
    """
    base = TOLERANCE_MS.get(stack, {}).get(kind, DEFAULT_TOLERANCE_MS)
    noise = NOISE_FACTOR * math.hypot(
        reference.get("spread_ms", {}).get(kind, 0.0),
        (case or {}).get("spread_ms", {}).get(kind, 0.0),
    ) + reference.get("drift_ms", {}).get(kind, 0.0)
    applies = kind == "inference" and not wire_timed
    framework = in_span_ms if in_span_ms and in_span_ms > 0 and applies else 0.0
    said = f"{base:g} + noise {noise:.1f}"
    if framework:
        said += f" + framework {framework:.1f}"
    return base + noise + framework, said


def tolerances(
    stack: str, reference: dict[str, Any], runs: list[dict[str, Any]], in_span_ms: float | None
) -> dict[str, float]:
    """`tolerance_ms` of each judged kind for a case's runs."""
    median = median_run(runs)
    wire_timed = all(r.get("in_span_ms") is not None for r in runs)
    return {
        kind: tolerance_ms(stack, kind, reference, in_span_ms, wire_timed, median)[0]
        for kind in KINDS
    }


def compare(
    stack: str,
    reference: dict[str, Any],
    runs: list[dict[str, Any]],
    in_span_ms: float | None = None,
    wire_tokens: dict[str, int] | None = None,
) -> list[str]:
    """What differs between the case's runs and the reference; empty when right.

    Counts and tokens are compared run by run, the split as medians over the runs, each
    kind within `tolerance_ms` (``in_span_ms``: the stack's, see there). Tokens are right
    when they are the reference's, or what the sim counted on the wire for this stack
    (``wire_tokens``, read by chainlat's HTTP spans in the stack's ``+httpx`` cases): a
    framework that sends another prompt or tool schema than the reference is answered
    with other token counts.
    """
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
        kinds = run.get("path_kinds")
        if kinds is not None and kinds != reference.get("path_kinds", kinds):
            differs.append(
                f"critical path {', '.join(kinds) or 'empty'}, "
                f"reference {', '.join(reference['path_kinds'])}"
            )
    differs = list(dict.fromkeys(differs))
    median = median_run(runs)
    wire_timed = all(r.get("in_span_ms") is not None for r in runs)
    for kind in KINDS:
        delta = median["split_ms"][kind] - reference["split_ms"][kind]
        tolerance, said = tolerance_ms(stack, kind, reference, in_span_ms, wire_timed, median)
        if abs(delta) > tolerance:
            differs.append(f"{kind} {delta:+.1f} ms (tolerance {said})")
    return differs


def run_stack(stack: str, venv: Path, out: Path) -> list[CaseResult]:
    """Every case of one stack, against one sim and one reference run."""
    where = out / stack
    where.mkdir(parents=True, exist_ok=True)
    profiles = where / "profiles.json"
    profiles.write_text(json.dumps(_profiles(venv)))
    sim = Sim(venv, profiles, where / "sim.log")
    try:
        ref_traces = where / "reference.jsonl"
        failed = _run_agent(venv, "reference.py", ref_traces, sim.base_url, True, True)
        timings: dict[str, float] = {}
        ran: dict[str, str | None] = {}
        for name, wrapped, use_httpx in CASES:
            started = time.perf_counter()
            traces = where / f"{name}.jsonl"
            ran[name] = _run_agent(venv, f"{stack}.py", traces, sim.base_url, wrapped, use_httpx)
            timings[name] = time.perf_counter() - started
        # The reference again, after the cases: how far the machine's load moved it.
        after_traces = where / "reference-after.jsonl"
        failed = failed or _run_agent(venv, "reference.py", after_traces, sim.base_url, True, True)
    finally:
        sim.stop()
    if failed is not None:
        return _all_wrong(stack, f"reference: {failed}")
    files = [ref_traces, after_traces] + [where / f"{name}.jsonl" for name, *_ in CASES]
    read = _read(venv, [f for f in files if f.exists()])
    refs = [read.get(str(f), {"error": "no traces"}) for f in (ref_traces, after_traces)]
    for ref in refs:
        if "error" in ref or len(ref["runs"]) != RUNS:
            problem = ref.get("error") or f"{len(ref['runs'])} runs, expected {RUNS}"
            return _all_wrong(stack, f"reference: {problem}")
    reference = reference_of(refs[0]["runs"], refs[1]["runs"])
    in_spans = [
        run["in_span_ms"]
        for name, *_ in CASES
        for run in read.get(str(where / f"{name}.jsonl"), {}).get("runs", [])
        if run.get("in_span_ms") is not None
    ]
    in_span_ms = statistics.median(in_spans) if in_spans else None
    wires = [
        run["wire_tokens"]
        for run in read.get(str(where / "wrapped+httpx.jsonl"), {}).get("runs", [])
        if run.get("wire_tokens") is not None
    ]
    # The prompts are the same in every run: the first says what this stack sends.
    wire_tokens = wires[0] if wires else None
    ref_codes = check(venv, ref_traces, budget_files(reference, reference["workflow"], where))
    results = []
    for name, *_ in CASES:
        traces = where / f"{name}.jsonl"
        result = CaseResult(stack, name, False, False, seconds=round(timings[name], 2))
        results.append(result)
        if ran[name] is not None:
            result.differs.append(str(ran[name]))
            continue
        got = read.get(str(traces), {"error": "no traces written"})
        if "error" in got:
            result.differs.append(got["error"])
            continue
        runs = got["runs"]
        workflow = runs[0]["workflow"] if runs else reference["workflow"]
        case_dir = where / name
        case_dir.mkdir(exist_ok=True)
        room = tolerances(stack, reference, runs, in_span_ms) if runs else None
        budgets = budget_files(reference, workflow, case_dir, room)
        result.check_exit = check(venv, traces, budgets)
        result.judged = all(code in (0, 1) for code in result.check_exit.values())
        if len(runs) != RUNS:
            names = ", ".join(sorted({r["workflow"] for r in runs})) or "none"
            result.differs.append(f"{len(runs)} runs ({names}), expected {RUNS}")
        else:
            result.run = median_run(runs)
            overhead = result.run["split_ms"]["overhead"] - reference["split_ms"]["overhead"]
            result.overhead_ms = round(overhead, 1)
            result.differs.extend(compare(stack, reference, runs, in_span_ms, wire_tokens))
        wrong_verdicts = [
            f"{budget} exit {code}, reference {ref_codes[budget]}"
            for budget, code in result.check_exit.items()
            if code != ref_codes[budget]
        ]
        if wrong_verdicts:
            result.differs.append("check: " + ", ".join(wrong_verdicts))
        result.right = not result.differs
    (where / "reference.json").write_text(
        json.dumps({"run": reference, "check_exit": ref_codes}, indent=2)
    )
    return results


_PRINT_PROFILES = (
    "import sys, json; sys.path.append(%r); import _agent; print(json.dumps(_agent.PROFILES))"
)


def _all_wrong(stack: str, why: str) -> list[CaseResult]:
    return [CaseResult(stack, name, False, False, [why]) for name, *_ in CASES]


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
    }


if __name__ == "__main__":
    sys.exit(main())
