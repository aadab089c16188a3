"""Waterfalls: a run's steps as ASCII bars, the same in a terminal, a CI log and pytest."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from chainlat._core.amounts import over
from chainlat._core.call_readings import STREAM_UNKNOWN
from chainlat._core.redact import cleaned_lines, visible
from chainlat._core.runs import BudgetViolation, WorkflowRun
from chainlat.report.common import limit_text, printed_source, shown_name

if TYPE_CHECKING:
    from chainlat._core.chain import Rollup

_BAR_WIDTH: Final = 40
MAX_ROWS: Final = 2000
"""The most steps a waterfall draws (20,000 nested spans made 800 MB of text)."""
_MAX_LABEL_CHARS: Final = 60
_MAX_INDENT: Final = 16


def _indent(depth: int) -> str:
    if depth < _MAX_INDENT:
        return "  " * (depth + 1)
    return "  " * _MAX_INDENT + f"[{depth}] "


# --- waterfalls ---------------------------------------------------------------------------


def waterfall(
    run: WorkflowRun,
    violations: Sequence[BudgetViolation] = (),
    *,
    width: int = _BAR_WIDTH,
    title: str | None = None,
    max_rows: int = MAX_ROWS,
) -> str:
    """A plain-text waterfall of one run, with the limits it broke marked on their rows.

    Steps on the critical path are marked ``*``; model calls show their time to first
    token, and the workflow its first output when the run recorded one. The text stays
    linear in the steps: at most ``max_rows`` steps (a line says how many more there are),
    names cut to 60 characters, nesting drawn to depth 16 (deeper steps say their depth).

    Example::

        print(waterfall(run, check_run(run, budget)))
    """
    total_ns = max(run.end_ns - run.start_ns, 1)
    rows = _rows(run, width, total_ns, max_rows)
    notes = _violation_notes(run, violations)
    name_width = max(len(r[1]) for r in rows)
    scale = limit_text(round(run.total_ms, 1))
    lines = [
        _heading(run) if title is None else visible(title),
        f"   {'step':<{name_width}}  {'kind':<9} {'start ms':>9} {'took ms':>9}  "
        f"|0{scale:>{width - 1}}|",
    ]
    for index, (mark, label, kind, start_ms, took_ms, bar, extra) in enumerate(rows):
        found = ([extra] if extra else []) + notes.get(index, [])
        lines.append(
            f" {mark} {label:<{name_width}}  {kind:<9} {start_ms:>9.1f} {took_ms:>9.1f}  |{bar}|"
            + ("  " + "  ".join(found) if found else "")
        )
    if len(run.steps) > max_rows:
        lines.append(
            f"   ... {len(run.steps) - max_rows} more steps not shown (the first {max_rows}; "
            "--format json lists them all)"
        )
    c = run.rollup
    if not c.unrecorded:
        lines.append(
            f"   critical path (*): inference {c.inference_ms:.1f} ms, data {c.data_ms:.1f} ms, "
            f"tool {c.tool_ms:.1f} ms, overhead {c.overhead_ms:.1f} ms"
        )
        return cleaned_lines(lines)
    parts = ", ".join(
        f"{kind} {_bounded(c, kind)}" for kind in ("inference", "data", "tool", "overhead")
    )
    names = ", ".join(shown_name(name, _MAX_LABEL_CHARS) for name in c.unrecorded)
    lines.append(f"   critical path (*): {parts}")
    lines.append(
        f"   the end of {names} is not recorded (its span ended before its own events): "
        "instrument the HTTP client (chainlat.instrument_httpx()) to time it"
    )
    return cleaned_lines(lines)


def _bounded(rollup: Rollup, kind: str) -> str:
    """A part of the critical path, as a bound when a model call's end is not recorded: the
    call ran on for an unknown time, taken from what the trace shows as overhead; when
    another step ran past its recorded end the path itself may differ, and no bound holds."""
    value = f"{rollup.kind_ms(kind):.1f} ms"
    if not rollup.unrecorded_in(kind):
        return value
    if rollup.unrecorded_in("data"):
        return f"{value} (not known)"
    return f"at least {value}" if kind == "inference" else f"at most {value}"


_Row = tuple[str, str, str, float, float, str, str]
"""A waterfall row: critical-path mark, label, kind, start ms, took ms, bar, extra text."""


def _violation_notes(
    run: WorkflowRun, violations: Sequence[BudgetViolation]
) -> dict[int, list[str]]:
    """The notes of the broken limits by row (row 0 is the workflow, row i the step i - 1)."""
    notes: dict[int, list[str]] = {}
    for violation in violations:
        row = row_of(run, violation)
        limit = violation.target.rsplit(".", 1)[-1] if row else violation.target
        notes.setdefault(row, []).append(
            f"<-- {visible(limit)} {over(violation.actual_ms, violation.limit_ms, violation.unit)}"
        )
    return notes


def _rows(run: WorkflowRun, width: int, total_ns: int, max_rows: int) -> list[_Row]:
    """The workflow's row, then one per step, at most ``max_rows`` of them."""
    from chainlat.report._critical import critical_steps

    first_output = first_output_ms(run)
    on_path = critical_steps(run)
    rows: list[_Row] = [
        (
            " ",
            shown_name(f"invoke_workflow {run.workflow}", _MAX_LABEL_CHARS),
            "workflow",
            0.0,
            run.total_ms,
            _bar(0, total_ns, total_ns, width),
            "" if first_output is None else _first_output_text(run, first_output),
        )
    ]
    for index, step in enumerate(run.steps):
        if index >= max_rows:
            break
        start = step.start_ns - run.start_ns
        extra = f"ttft {step.ttft_ms:.1f} ms" if step.ttft_ms is not None else ""
        if step.cache_hit:
            extra = (extra + " cached").strip()
        if step.extended and step.name in run.rollup.unrecorded:
            # Its span ended before its own events: it ran on for a time no span records.
            extra = (extra + " ended before its own events: took at least this").strip()
        elif step.extended:
            # Its span ended before its own events or children, or before the record of its
            # stream's end (rules 8 and 20 of docs/attributes.md): timed to the last of them.
            extra = (extra + " extended past its span's end").strip()
        rows.append(
            (
                "*" if index in on_path else " ",
                _indent(step.depth) + shown_name(step.name, _MAX_LABEL_CHARS),
                visible(step.kind),
                start / 1e6,
                step.duration_ms,
                _bar(start, step.end_ns - step.start_ns, total_ns, width),
                extra,
            )
        )
    return rows


def _first_output_text(run: WorkflowRun, first_output: float) -> str:
    """The run's first output: said to count from a start that is no end of the caller's
    words (a bound either way, docs/attributes.md, rule 16), or as a lower bound when it
    depends on a first token that is no time (rule 15) or that no span marks on a call that
    may have streamed (rule 17)."""
    rollup = run.rollup
    if run.unknown_start is not None:
        return f"first output {first_output:.1f} ms from a start that is no end of the words"
    if rollup.unusable_in("first_output"):
        if STREAM_UNKNOWN.isdisjoint(rollup.unusable_values):
            return f"first output at least {first_output:.1f} ms (a first token that is no time)"
        return f"first output at least {first_output:.1f} ms (a first token no span marks)"
    return f"first output {first_output:.1f} ms"


def _heading(run: WorkflowRun) -> str:
    return (
        f"{shown_name(run.workflow, _MAX_LABEL_CHARS)} run"
        + (f" {visible(run.trace_id[:16])}" if run.trace_id else "")
        + (f" ({printed_source(run.origin)})" if run.origin else "")
        + f": total {run.total_ms:.1f} ms"
        + (", status ERROR" if run.error else "")
    )


def first_output_ms(run: WorkflowRun) -> float | None:
    """When the user saw the run's first output (``chainlat.chain.first_output_ms``), if known."""
    value = run.first_output_ms
    return value if value is not None and math.isfinite(value) else None


def row_of(run: WorkflowRun, violation: BudgetViolation) -> int:
    """The waterfall row a violation belongs on: its step's worst occurrence, else the workflow."""
    if not violation.target.startswith("steps."):
        return 0
    name = _step_of(violation.target)
    ttft = violation.target.split(".")[-1].startswith("ttft")
    best, best_gap = 0, math.inf
    for index, step in enumerate(run.steps, 1):
        if step.name != name:
            continue
        value = step.ttft_ms if ttft else step.duration_ms
        gap = abs(value - violation.actual_ms) if value is not None else math.inf / 2
        if best == 0 or gap < best_gap:
            best, best_gap = index, gap
    return best


_KEY_ESCAPE: Final = re.compile(r"\\(.)", re.DOTALL)


def _step_of(target: str) -> str:
    """The step name in ``steps."chat gpt-4o".max``: the inverse of ``step_key``, which escapes
    only backslashes and quotes (so a tab or a newline in the name stays as it is)."""
    inner = target[len("steps.") :].rsplit(".", 1)[0]
    if len(inner) >= 2 and inner.startswith('"') and inner.endswith('"'):
        return _KEY_ESCAPE.sub(r"\1", inner[1:-1])
    return inner


def _bar(start_ns: int, length_ns: int, total_ns: int, width: int) -> str:
    begin = min(int(start_ns * width / total_ns), width - 1)
    cells = max(1, math.ceil(length_ns * width / total_ns)) if length_ns > 0 else 1
    cells = min(cells, width - begin)
    return " " * begin + "#" * cells + " " * (width - begin - cells)
