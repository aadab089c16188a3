"""``whatif()``: the runs selected, the changes checked against them, every run estimated.

Example::

    result = whatif(read_runs(["traces.jsonl"]), swap={"chat gpt-4o": "gpt-4o-mini"})
    print(result.workflows[0].before.p95, "->", result.workflows[0].after.p95)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from chainlat._core.errors import InputError, SpecError
from chainlat.analysis.whatif.changes import FLAGS, Change, changes_of
from chainlat.analysis.whatif.estimate import Estimator, hit_ms_by_step, noise_of
from chainlat.analysis.whatif.result import WhatIfResult, effects, judge
from chainlat.analysis.whatif.timeline import counted_steps

if TYPE_CHECKING:
    from chainlat._core.latency import LatencyProfile
    from chainlat._core.prices import Prices
    from chainlat._core.runs import WorkflowRun
    from chainlat.budgets import Budgets, NotJudgedReason

__all__ = ["whatif"]


def whatif(
    runs: Iterable[WorkflowRun],
    *,
    swap: Mapping[str, str] | Iterable[str] = (),
    prompt_scale: Mapping[str, float] | Iterable[str] = (),
    cache_hit_rate: Mapping[str, float] | Iterable[str] = (),
    drop: Iterable[str] = (),
    profiles: Mapping[str, LatencyProfile] | None = None,
    budgets: Budgets | None = None,
    allow: Iterable[NotJudgedReason] = (),
    workflow: str | None = None,
    variant: str | None = None,
    seed: int = 0,
    prices: Prices | None = None,
    source: str = "the runs given",
) -> WhatIfResult:
    """Re-estimate recorded runs under model swaps, prompt scales, cache hit rates and drops.

    Example::

        runs = chainlat.traces.load_runs(["traces.jsonl"])
        result = chainlat.whatif(runs, swap={"chat gpt-4o": "gpt-4o-mini"})
        print(result.workflows[0].before.p95, "->", result.workflows[0].after.p95)

    Args:
        runs: Workflow runs, as :func:`chainlat.traces.load_runs` reads them.
        swap: Step name to new model (``{"chat gpt-4o": "gpt-4o-mini"}``), or
            ``"STEP=MODEL"`` strings.
        prompt_scale: Step name to a factor > 0 on its input tokens.
        cache_hit_rate: Step name to the share (0..1) of its calls served from a cache.
        drop: Step names to remove.
        profiles: Latency profiles (:func:`chainlat.analysis.profiles.load_profiles`)
            that override the ones fitted from the runs; needed for a model the runs
            never called.
        budgets: Budgets (:func:`chainlat.budgets.load_budgets`) to judge the runs
            against, before and after, as :func:`chainlat.budgets.evaluate` does: a limit
            that cannot be judged fails the verdict.
        allow: Reasons for not judging a limit that do not fail it (``evaluate``'s).
        workflow: Only the runs of this workflow.
        variant: Only the runs of this variant (``chainlat.variant``).
        seed: Seed of the cache-hit draws.
        prices: Model prices: the mean cost per run before and after (a swapped call
            at its new model's price, with the tokens it recorded).
        source: Where the runs were read from, for messages (``traces.jsonl``).

    Raises:
        SpecError: a change names no step of the runs, a model without a profile,
            or a number out of range.
        InputError: no run to estimate.
    """
    from chainlat.analysis.profiles import fit_profiles

    _not_a_file(runs, profiles, budgets)
    changes = changes_of(swap, prompt_scale, cache_hit_rate, drop)
    selected = _select(runs, workflow, variant, source)
    table = fit_profiles(selected)
    fitted = set(table)
    if profiles is not None:
        table.update(profiles)
        fitted -= set(profiles)
    _validate(changes, selected, table, source)
    swapped = any(c.kind == "swap" for c in changes)
    noise = noise_of(selected, table, fitted) if swapped else None
    estimator = Estimator(changes, table, seed, hit_ms_by_step(selected), noise, prices)
    estimates = [estimator.run(run) for run in selected]
    before_report = after_report = None
    if budgets is not None:
        before_report, after_report = judge(estimates, budgets, allow)
    return WhatIfResult(
        changes=tuple(changes),
        workflows=tuple(effects(estimates, changes, prices)),
        runs=tuple(estimates),
        profiles=table,
        notes=estimator.counted_notes(),
        basis=estimator.basis.bases(),
        budget_before=before_report,
        budget_after=after_report,
    )


def _not_a_file(runs: object, profiles: object, budgets: object) -> None:
    """The files are the caller's to read: a path here is a mistake worth a clear message."""
    for value, reader in (
        (runs, "chainlat.traces.load_runs([path])"),
        (profiles, "profiles=chainlat.analysis.profiles.load_profiles(path)"),
        (budgets, "budgets=chainlat.budgets.load_budgets(path)"),
    ):
        if isinstance(value, (str, os.PathLike)):
            raise TypeError(f"whatif() takes what the files hold, not a file: {reader}")


def _select(
    runs: Iterable[WorkflowRun], workflow: str | None, variant: str | None, where: str
) -> list[WorkflowRun]:
    selected = [
        t
        for t in runs
        if not t.nested  # a nested run is a step of the run around it
        and (workflow is None or t.workflow == workflow)
        and (variant is None or t.variant_label == variant)
    ]
    if not selected:
        what = " and ".join(
            f"{key} {value!r}"
            for key, value in (("workflow", workflow), ("variant", variant))
            if value is not None
        )
        raise InputError(f"{where}: no workflow run{' of ' + what if what else ''} to estimate")
    return selected


def _validate(
    changes: Sequence[Change],
    runs: Sequence[WorkflowRun],
    profiles: Mapping[str, LatencyProfile],
    where: str,
) -> None:
    from chainlat.analysis.profiles import STREAM_USAGE, calls_of, usage_gaps

    seen: dict[str, str] = {}
    models: dict[str, set[str]] = {}
    with_tokens: dict[str, bool] = {}
    calls = []
    for run in runs:
        for rec in counted_steps(run).values():
            seen.setdefault(rec.label, rec.kind or "")
        for call in calls_of(run):
            calls.append(call)
            models.setdefault(call.step, set()).add(call.model)
            with_tokens[call.step] = with_tokens.get(call.step, False) or (
                call.input_tokens is not None
            )
    gaps = usage_gaps(calls)
    for change in changes:
        _check_step(change, seen.get(change.step), seen, with_tokens, where)
        needed: set[str] = set()
        if change.kind == "swap":
            assert change.model is not None
            needed = {change.model}
        elif change.kind == "prompt_scale":
            needed = models.get(change.step, set())
        for model in sorted(needed):
            if model not in profiles:
                known = ", ".join(sorted(profiles)) or "none"
                gap = gaps.get(model, 0)
                fix = (
                    f"its {gap} call{'s' if gap != 1 else ''} in the runs streamed without token"
                    f" counts: stream with {STREAM_USAGE}"
                    if gap
                    else "record runs that use it"
                )
                raise SpecError(
                    f"{change.spec}: no latency profile for model {model!r} (profiles: {known});"
                    f" {fix}, or write one in a profile file (--profiles)"
                )


def _check_step(
    change: Change,
    kind: str | None,
    seen: Mapping[str, str],
    with_tokens: Mapping[str, bool],
    where: str,
) -> None:
    if kind is None:
        names = ", ".join(sorted(seen)[:8]) or "none"
        raise SpecError(
            f'{change.spec}: no step named "{change.step}" in {where} (steps seen: {names})'
        )
    if change.kind in ("swap", "prompt_scale") and kind != "inference":
        raise SpecError(
            f'{change.spec}: "{change.step}" is a {kind} step; '
            f"{FLAGS[change.kind]} applies to model calls"
        )
    if change.kind == "prompt_scale" and not with_tokens.get(change.step, False):
        raise SpecError(f'{change.spec}: the calls of "{change.step}" recorded no input tokens')
