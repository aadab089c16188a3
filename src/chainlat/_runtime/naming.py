"""``chainlat.step_name(name)``: a block that names every step begun inside it.

The name lives in a context variable, so each thread and task sees its own. A block
exited in another context than it was entered in (a generator closed from another
thread) cannot reset the variable of the context it was entered in; it is marked
closed instead, and :func:`current_step_name` skips closed blocks, so the name never
stays on later steps of that thread.
"""

from __future__ import annotations

import contextlib
import contextvars
import warnings
from types import TracebackType

from chainlat._core.errors import logger
from chainlat._runtime.decorator import EnterExit


class _Block:
    """One activation of a :class:`StepName`: open until its block exits, wherever that is."""

    __slots__ = ("open", "owner")

    def __init__(self, owner: StepName) -> None:
        self.owner = owner
        self.open = True


StepNaming = tuple[str, "StepNaming | None", _Block]
"""The innermost ``chainlat.step_name(name)`` block: its name, the one around it, its block."""
step_naming: contextvars.ContextVar[StepNaming | None] = contextvars.ContextVar(
    "chainlat_step_name", default=None
)
"""Set by ``chainlat.step_name(name)``: every step begun inside gets that ``chainlat.step.name``."""


def current_step_name() -> str | None:
    """The name the innermost open ``chainlat.step_name`` block of this context gives."""
    naming = step_naming.get()
    while naming is not None and not naming[2].open:
        naming = naming[1]
    return naming[0] if naming is not None else None


Entered = tuple["contextvars.Token[StepNaming | None]", _Block]
"""One activation: the token to reset the context variable with, and its block."""


class StepName(EnterExit["StepName", Entered]):
    """Returned by :func:`chainlat.step_name`: names every step begun inside it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._entered: list[_Block] = []
        """Blocks entered through ``with`` and not exited yet, oldest first."""

    def _open(self) -> Entered:
        block = _Block(self)
        return step_naming.set((self.name, step_naming.get(), block)), block

    @staticmethod
    def _close(entered: Entered, exc: BaseException | None) -> None:
        # A decorated call starts and ends in one context: a plain reset.
        token, block = entered
        block.open = False
        step_naming.reset(token)

    # As for steps, nothing about an activation is kept on this object but the list of
    # blocks open: one shared by concurrent tasks finds its own block again through the
    # context it was entered in.
    def __enter__(self) -> StepName:
        block = _Block(self)
        self._entered.append(block)
        step_naming.set((self.name, step_naming.get(), block))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        found = step_naming.get()
        while found is not None and (found[2].owner is not self or not found[2].open):
            found = found[1]
        if found is not None:
            found[2].open = False
            _discard(self._entered, found[2])
            step_naming.set(found[1])
            return
        # Entered in another context: close the block that has been open longest.
        while self._entered:
            try:
                block = self._entered.pop(0)
            except IndexError:
                break
            if block.open:
                block.open = False
                logger.warning(
                    "chainlat: step_name(%r) exited in another context than it was entered "
                    "in (another thread or task, or a generator finished elsewhere); its name "
                    "no longer applies there",
                    self.name,
                )
                return


def _discard(blocks: list[_Block], block: _Block) -> None:
    with contextlib.suppress(ValueError):
        blocks.remove(block)


def step_name(name: str) -> StepName:
    """Name every step begun inside: a model call an SDK instrumentation traces gets
    ``chainlat.step.name``, so budgets and reports tell the planner from the answer.

    No span of its own; the innermost block wins, and a name given to the step itself
    (``chainlat.inference(..., step=...)``) wins over both. Works as ``with``,
    ``async with`` and as a decorator.

    Example::

        with chainlat.step_name("plan"):
            plan = client.chat.completions.create(model="gpt-4o-mini", messages=ask)
    """
    return StepName(name)


def step(name: str) -> StepName:
    """The former name of :func:`step_name`, kept as a deprecated alias.

    Deprecated: ``chainlat.step(...)`` reads as if it traced a step; it only names the
    steps begun inside. Use ``chainlat.step_name(...)``. Each call issues a
    ``DeprecationWarning`` and then works as ``step_name`` does.

    Example::

        with chainlat.step_name("plan"):  # not chainlat.step("plan")
            plan = client.chat.completions.create(model="gpt-4o-mini", messages=ask)
    """
    warnings.warn(
        "chainlat.step() is deprecated: use chainlat.step_name(), which names the steps "
        "begun inside it (neither traces a step of its own)",
        DeprecationWarning,
        stacklevel=2,
    )
    return StepName(name)
