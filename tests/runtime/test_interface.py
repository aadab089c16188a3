"""The rest of chainlat uses the runtime through its doors (``_runtime/interface.py``), never
its private members; the runtime's rooms stay small; one decorator serves sync and async."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

import chainlat
from chainlat._runtime import hooks
from chainlat._runtime.interface import on_workflow_end
from chainlat._runtime.processor import ChainlatSpanProcessor
from chainlat.testing import Capture

SRC = Path(chainlat.__file__).parent
RUNTIME = SRC / "_runtime"

HANDLE_PRIVATES = frozenset(
    ("_processor", "_finish", "_start_detached", "_open", "_close", "_entered", "_parent_step")
)
"""Members of the runtime's objects that once were reached from outside it."""


def private_reaches(source: str) -> list[str]:
    """Where ``source`` imports a private name of ``chainlat._runtime`` or reads a private
    member of a runtime module or handle."""
    tree = ast.parse(source)
    runtime_aliases: set[str] = set()
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("chainlat._runtime"):
            for alias in node.names:
                if node.module == "chainlat._runtime":
                    runtime_aliases.add(alias.asname or alias.name)  # a module of it
                elif alias.name.startswith("_"):
                    found.append(f"line {node.lineno}: imports {node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("chainlat._runtime.") and alias.asname:
                    runtime_aliases.add(alias.asname)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__") or (
            isinstance(node.value, ast.Name) and node.value.id == "self"
        ):
            continue  # an object's own members
        on_module = isinstance(node.value, ast.Name) and node.value.id in runtime_aliases
        if on_module or node.attr in HANDLE_PRIVATES:
            found.append(f"line {node.lineno}: reads .{node.attr}")
    return found


def test_nothing_outside_the_runtime_reaches_into_its_private_parts() -> None:
    outside = [p for p in SRC.rglob("*.py") if RUNTIME not in p.parents]
    reaches = {
        str(p.relative_to(SRC)): found
        for p in outside
        if (found := private_reaches(p.read_text(encoding="utf-8")))
    }
    assert reaches == {}


@pytest.mark.parametrize(
    "violation",
    [
        "from chainlat._runtime import spans as _spans\n_spans._workflow_end_hooks.append(f)\n",
        "from chainlat._runtime.config import _choose_exporter\n",
        "processor = handle._processor\n",
        "step._start_detached()\n",
    ],
)
def test_the_check_catches_a_deliberate_violation(violation: str) -> None:
    assert private_reaches(violation)


def test_the_processor_keeps_no_second_list_of_workflow_callbacks() -> None:
    assert not hasattr(ChainlatSpanProcessor(), "on_workflow_end")


def test_workflow_end_callbacks_run_in_order_and_remove_once(cap: Capture) -> None:
    seen: list[tuple[str, float | None]] = []
    first = on_workflow_end(
        lambda run: seen.append(("first", run.rollup.total_ms if run.rollup else None))
    )
    second = on_workflow_end(lambda run: seen.append(("second", None)))
    try:
        with chainlat.workflow("w", tracer_provider=cap.provider):
            cap.clock.advance(4)
        first()
        first()  # a second call is harmless
        with chainlat.workflow("w", tracer_provider=cap.provider):
            pass
    finally:
        second()
    assert seen == [("first", 4.0), ("second", None), ("second", None)]
    assert hooks.end_callbacks() == ()


@pytest.mark.anyio
async def test_a_decorated_async_step_name_covers_the_awaited_body(cap: Capture) -> None:
    @chainlat.step_name("plan")
    async def plan() -> None:
        await asyncio.sleep(0)
        with chainlat.inference("m", tracer_provider=cap.provider):
            cap.clock.advance(3)

    with chainlat.workflow("w", tracer_provider=cap.provider):
        await plan()
        with chainlat.inference("after", tracer_provider=cap.provider):
            pass
    names = {s.name: (s.attributes or {}).get("chainlat.step.name") for s in cap.spans()}
    assert names["chat m"] == "plan"
    assert names["chat after"] is None


@pytest.mark.anyio
async def test_a_decorated_async_step_lasts_as_long_as_its_awaited_body(cap: Capture) -> None:
    @chainlat.tool("slow", tracer_provider=cap.provider)
    async def slow() -> None:
        await asyncio.sleep(0)
        cap.clock.advance(9)

    coroutine = slow()
    cap.clock.advance(100)  # created long before it runs: not part of the step
    await coroutine
    span = cap.span("execute_tool slow")
    assert (span.end_time or 0) - (span.start_time or 0) == 9_000_000
