"""What-if changes: their command-line and Python forms, parsed and checked.

Example::

    change = parse_change("swap", "chat gpt-4o=gpt-4o-mini")
    print(change.step, change.model, change.spec)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from chainlat._core.errors import SpecError

__all__ = ["FLAGS", "MAX_PROMPT_SCALE", "Change", "ChangeKind", "changes_of", "parse_change"]

ChangeKind = Literal["swap", "prompt_scale", "cache_hit_rate", "drop"]
FLAGS: Final[dict[ChangeKind, str]] = {
    "swap": "--swap",
    "prompt_scale": "--prompt-scale",
    "cache_hit_rate": "--cache-hit-rate",
    "drop": "--drop",
}


@dataclass(frozen=True, slots=True)
class Change:
    """One what-if change to the steps named ``step`` (a span name, ``chat gpt-4o``)."""

    kind: ChangeKind
    step: str
    model: str | None = None
    """``swap``: the model to use instead."""
    value: float | None = None
    """``prompt_scale``: the factor on input tokens; ``cache_hit_rate``: the share of hits."""

    @property
    def spec(self) -> str:
        """The change as written on the command line."""
        if self.kind == "drop":
            right = ""
        elif self.kind == "swap":
            right = f"={self.model}"
        else:
            right = f"={self.value:g}"
        return f'{FLAGS[self.kind]} "{self.step}{right}"'


MAX_PROMPT_SCALE: Final = 1000.0
"""The largest ``--prompt-scale``: a prompt a thousand times longer is already no estimate."""


def parse_change(kind: ChangeKind, text: str) -> Change:
    """A change from its command-line form: ``chat gpt-4o=gpt-4o-mini``, ``data rerank``.

    Raises:
        SpecError: the text is malformed or the number out of range.
    """
    flag = FLAGS[kind]
    if kind == "drop":
        step = text.strip()
        if not step:
            raise SpecError(f'{flag} "{text}": expected a step name, like "data rerank"')
        return Change("drop", step)
    step, equals, right = text.rpartition("=")
    step, right = step.strip(), right.strip()
    example = {
        "swap": '"chat gpt-4o=gpt-4o-mini"',
        "prompt_scale": '"chat gpt-4o=0.5"',
        "cache_hit_rate": '"chat gpt-4o=0.3"',
    }[kind]
    if not equals or not step or not right:
        raise SpecError(f'{flag} "{text}": expected STEP=VALUE, like {example}')
    if kind == "swap":
        return Change("swap", step, model=right)
    try:
        number = float(right)
    except ValueError:
        raise SpecError(f'{flag} "{text}": {right!r} is not a number') from None
    return _checked(Change(kind, step, value=number), text)


def _checked(change: Change, text: str) -> Change:
    flag, value = FLAGS[change.kind], change.value
    assert value is not None
    # Bounded above: "1e308" is finite, but the token counts it scales are not (OverflowError).
    if change.kind == "prompt_scale" and not (math.isfinite(value) and value > 0):
        raise SpecError(f'{flag} "{text}": the scale must be above 0, got {value:g}')
    if change.kind == "prompt_scale" and value > MAX_PROMPT_SCALE:
        raise SpecError(
            f'{flag} "{text}": the scale must be at most {MAX_PROMPT_SCALE:g}, got {value:g}'
        )
    if change.kind == "cache_hit_rate" and not (0 <= value <= 1):
        raise SpecError(f'{flag} "{text}": the rate must be between 0 and 1, got {value:g}')
    return change


def changes_of(
    swap: Mapping[str, str] | Iterable[str],
    prompt_scale: Mapping[str, float] | Iterable[str],
    cache_hit_rate: Mapping[str, float] | Iterable[str],
    drop: Iterable[str],
) -> list[Change]:
    """The changes of :func:`~chainlat.analysis.whatif.whatif`'s arguments, checked together.

    Raises:
        SpecError: no change, a malformed one, one given twice, or a step both dropped
            and changed.
    """
    found: list[Change] = []
    for kind, specs in (
        ("swap", swap),
        ("prompt_scale", prompt_scale),
        ("cache_hit_rate", cache_hit_rate),
    ):
        assert kind in FLAGS
        if isinstance(specs, Mapping):
            for step, value in specs.items():
                if kind == "swap":
                    found.append(parse_change("swap", f"{step}={value}"))
                elif isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise SpecError(f'{FLAGS[kind]} "{step}={value}": expected a number')
                else:
                    change = Change(kind, step, value=float(value))
                    found.append(_checked(change, f"{step}={value}"))
        else:
            found.extend(parse_change(kind, text) for text in specs)
    if isinstance(drop, str):
        drop = [drop]
    found.extend(parse_change("drop", text) for text in drop)
    seen: dict[tuple[str, str], Change] = {}
    for change in found:
        key = (change.kind, change.step)
        if key in seen:
            raise SpecError(f"{change.spec}: {FLAGS[change.kind]} given twice for this step")
        seen[key] = change
    if any(c.kind == "drop" for c in found):
        dropped = {c.step for c in found if c.kind == "drop"}
        for change in found:
            if change.kind != "drop" and change.step in dropped:
                raise SpecError(f"{change.spec}: the step is also dropped")
    if not found:
        raise SpecError(
            "nothing to change: give --swap, --prompt-scale, --cache-hit-rate or --drop"
        )
    return found
