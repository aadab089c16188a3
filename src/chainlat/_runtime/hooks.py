"""What runs when a workflow ends: the callbacks budgets, metrics and the pytest plugin register.

Two moments, each a list of callbacks in registration order:

- :func:`on_workflow_end`: the rollup is set and the span is still open (budgets write
  their verdict on it, metrics read it);
- :func:`after_workflow_end`: the span has ended and was handed to the exporters; a
  callback may raise into the application (``on_exceed="raise"``).

Both return a function that removes the callback again (calling it twice is harmless).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chainlat._runtime.handles import WorkflowHandle

WorkflowEnd = Callable[["WorkflowHandle"], None]
"""Called with an ending workflow's handle: its rollup set, its span still open."""
AfterWorkflowEnd = Callable[["WorkflowHandle", "BaseException | None"], None]
"""Called with an ended workflow's handle and the exception leaving its block, if any."""

_end: list[WorkflowEnd] = []
_after: list[AfterWorkflowEnd] = []


def _remover(hooks: list[Callable[..., None]], callback: Callable[..., None]) -> Callable[[], None]:
    def remove() -> None:
        with contextlib.suppress(ValueError):  # already removed
            hooks.remove(callback)

    return remove


def on_workflow_end(callback: WorkflowEnd) -> Callable[[], None]:
    """Call ``callback`` as every workflow ends, before its span ends; returns its remover."""
    _end.append(callback)
    return _remover(_end, callback)


def after_workflow_end(callback: AfterWorkflowEnd) -> Callable[[], None]:
    """Call ``callback`` after every workflow span ended, outside the error guard; returns
    its remover."""
    _after.append(callback)
    return _remover(_after, callback)


def end_callbacks() -> tuple[WorkflowEnd, ...]:
    """The :func:`on_workflow_end` callbacks, in the order they run."""
    return tuple(_end)


def after_callbacks() -> tuple[AfterWorkflowEnd, ...]:
    """The :func:`after_workflow_end` callbacks, in the order they run."""
    return tuple(_after)


def any_callbacks() -> bool:
    """Whether a callback of either moment is registered (they read the rollup)."""
    return bool(_end or _after)


def run_end(handle: WorkflowHandle) -> None:
    """Run the :func:`on_workflow_end` callbacks (a copy: one may remove itself)."""
    if _end:
        for callback in tuple(_end):
            callback(handle)


def run_after(handle: WorkflowHandle, exc: BaseException | None) -> None:
    """Run the :func:`after_workflow_end` callbacks."""
    if _after:
        for callback in tuple(_after):
            callback(handle, exc)
