"""What-if: the recorded runs re-estimated with a model swapped, a prompt shortened, a cache
added or a step dropped.

Method, for every recorded run:

1. **Changed steps are re-estimated from latency profiles** (:mod:`chainlat.analysis.profiles`,
   fitted from the same traces, or from a profile file) with the run's own token
   counts. The new duration is::

       queue + connect + send + network (as recorded) + new profile's prediction * residual

   Under ``--prompt-scale`` alone a call keeps its own residual: its recorded
   service time divided by its model's prediction for its tokens. Under a swap
   the new model's noise is its own: the call keeps its *rank* (how slow it was
   for its size among the old model's calls streamed like it, measured against
   the closest fit of those calls) and takes the new model's residual at that
   rank, from the new model's calls streamed like it (predicted by a profile
   fitted from those calls alone, when the profile was fitted from the runs);
   from a log-normal with the profile's ``residual_sigma`` for a model the runs
   never called. With fewer than five calls of the new model of that kind, the
   call keeps its own residual (said in a note). So a call that was slow
   for its size stays slow, and the spread of the estimate is the new model's
   (``docs/tradeoffs.md`` has the measurements behind each rule). A swapped call's
   prediction models what the runs did not show of the new model
   (:mod:`~chainlat.analysis.whatif.basis`): a mode it was not seen in, through the
   cost of streaming measured on a model called both ways or on the streams' tails;
   prompt sizes it was not seen at, extrapolated at a robust slope. The result's
   ``basis`` says, per swapped step, which fit, on how many calls, over which
   tokens, and how far it was extrapolated. ``--prompt-scale`` multiplies the
   call's input tokens (rounded); output tokens stay as recorded (a swapped model
   is assumed to answer at the same length). ``--cache-hit-rate`` turns a
   deterministic share of the step's calls (a hash of seed, trace and span id)
   into cache hits taking the profile's ``cache_hit_ms`` (for data and tool steps:
   the median of the step's recorded hits), else 0 ms; a recorded hit drawn as a
   miss is re-estimated from the profile with a residual of 1. ``--drop`` makes
   the step take no time. Failed calls and recorded cache hits keep their time
   under a swap or a prompt change.
2. **The timeline is rebuilt** (:func:`rebuild_timeline`) with the dependency rule
   below, and
3. **the chain total is recomputed** along the new critical path with the same
   rollup as a live run (:func:`chainlat._core.rollup.compute_rollup`).

The dependency rule (:mod:`~chainlat.analysis.whatif.timeline`), in short: a step
waited on the steps of the same parent that ended before it started, so steps
that overlapped stay parallel and a sequence stays a sequence. Queueing is not
re-simulated: each call keeps the queue and network time it had (see
docs/tradeoffs.md for where this breaks down).

The package, by phase: :mod:`~chainlat.analysis.whatif.changes` (the changes parsed
and checked), :mod:`~chainlat.analysis.whatif.timeline` (the dependency rule),
:mod:`~chainlat.analysis.whatif.estimate` (new durations, runs re-timed),
:mod:`~chainlat.analysis.whatif.basis` (what a swap's prediction rests on),
:mod:`~chainlat.analysis.whatif.result` (per workflow, before and after) and
:mod:`~chainlat.analysis.whatif.api` (:func:`whatif`). Reading trace files is the
caller's: ``chainlat whatif`` reads them, :func:`whatif` takes runs.

Example::

    runs = chainlat.traces.load_runs(["traces.jsonl"])
    result = chainlat.whatif(runs, swap={"chat gpt-4o": "gpt-4o-mini"})
    for w in result.workflows:
        print(w.workflow, w.before.p95, "->", w.after.p95)
"""

from __future__ import annotations

from chainlat._core.errors import SpecError
from chainlat.analysis.whatif.api import whatif
from chainlat.analysis.whatif.basis import Basis, StreamingCost
from chainlat.analysis.whatif.changes import MAX_PROMPT_SCALE, Change, parse_change
from chainlat.analysis.whatif.estimate import MIN_NOISE_CALLS
from chainlat.analysis.whatif.result import (
    KINDS,
    Percentiles,
    RunEstimate,
    StepEffect,
    WhatIfResult,
    WorkflowEffect,
)
from chainlat.analysis.whatif.timeline import StepOverride, rebuild_timeline

__all__ = [
    "KINDS",
    "MAX_PROMPT_SCALE",
    "MIN_NOISE_CALLS",
    "Basis",
    "Change",
    "Percentiles",
    "RunEstimate",
    "SpecError",
    "StepEffect",
    "StepOverride",
    "StreamingCost",
    "WhatIfResult",
    "WorkflowEffect",
    "parse_change",
    "rebuild_timeline",
    "whatif",
]
