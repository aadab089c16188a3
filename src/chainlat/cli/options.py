"""The options the ``chainlat`` commands share, declared once so that they cannot drift apart.

Every command that reads traces (``check``, ``report``, ``diff``, ``profile``, ``whatif``,
``compare``) takes, in this order in its ``--help``:

- its sources: ``SOURCE ...`` trace files (``diff``: ``BASELINE CURRENT``);
- its own options, then ``--format text|json|markdown`` (every command that prints a table);
- the run filter (:func:`add_run_filter`): ``--workflow NAME`` and ``--variant NAME``,
  repeatable or ``NAME,NAME``, each name checked against the names the read saw
  (:class:`RunFilter`), and ``--roots``;
- Jaeger's HTTP API (``--jaeger URL --service NAME ...``), then the reading bounds
  (``--settle-lines``, ``--max-open-bytes``, ...), last, in their own group
  (:func:`add_reading`).

What they print goes through :mod:`chainlat.cli.output` (one JSON writer, one place for the
readers' warnings, tables fitted to the terminal); exit codes come from
:mod:`chainlat._core.exits`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from chainlat._core.errors import InputError, shown
from chainlat._core.exits import EXIT_CODES_HELP
from chainlat._core.stats import MAX_SAMPLING_WEIGHT
from chainlat.cli.formats import FORMAT_HELP, formats

if TYPE_CHECKING:
    from chainlat._core.runs import WorkflowRun

Command = Callable[[argparse.Namespace], int]
"""A command's function: its arguments in, its exit code out."""

FORMATS: Final = formats("check", "stats", "diff", "profiles", "whatif", "comparison")
"""The output formats of every command that prints a table (:mod:`chainlat.cli.formats`)."""

FILTER_GROUP: Final = "which runs"
JAEGER_GROUP: Final = "Jaeger's HTTP API (instead of or beside trace files)"
READING_GROUP: Final = "reading bounds (tuning; the defaults suit most traces)"

_SOURCE_HELP: Final = "OTLP JSON lines file (chainlat's or a Collector's, .gz too) or Jaeger JSON"
BUDGETS_FOUND: Final = (
    "default: chainlat.toml, chainlat.yaml or [tool.chainlat] in pyproject.toml "
    "in the working directory"
)
"""Where a budget file is found when none is named (:func:`chainlat.budgets.discover_budgets`)."""


def add_command(
    sub: Any, name: str, func: Command, *, help: str, description: str | None = None
) -> argparse.ArgumentParser:
    """A subcommand of ``chainlat``, ``--help`` ending with the exit codes."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help, description=description or help, epilog=EXIT_CODES_HELP
    )
    parser.set_defaults(func=func)
    return parser


def add_sources(parser: argparse.ArgumentParser) -> None:
    """``SOURCE ...``: the trace files a command reads (with Jaeger's API, see
    :func:`add_reading`)."""
    parser.add_argument("sources", nargs="*", metavar="SOURCE", help=_SOURCE_HELP)


def add_format(parser: argparse.ArgumentParser, *kinds: str) -> None:
    """``--format text|json|markdown``: the formats of the kinds of result the command
    prints (:func:`chainlat.cli.formats.formats`), the first the default."""
    choices = formats(*kinds)
    names = [FORMAT_HELP.get(name, name) for name in choices]
    listed = ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
    parser.add_argument(
        "--format",
        choices=choices,
        default=choices[0],
        help=f"{listed} (default {choices[0]})",
    )


def add_budgets(parser: argparse.ArgumentParser, use: str, *, found: bool = True) -> None:
    """``--budgets FILE``; ``use`` says what the command does with it. With ``found``, the
    file is looked for in the working directory when the option is not given, as ``check``
    does (:func:`chainlat.budgets.discover_budgets`)."""
    where = f"; {BUDGETS_FOUND}" if found else ""
    parser.add_argument("--budgets", metavar="FILE", help=f"budget file: {use}{where}")


def add_run_filter(parser: argparse.ArgumentParser) -> None:
    """``--workflow NAME`` and ``--variant NAME``, each repeatable or a comma-separated list,
    and ``--roots`` (what counts as a run)."""
    group = parser.add_argument_group(FILTER_GROUP)
    group.add_argument(
        "--workflow",
        action="append",
        default=[],
        metavar="NAME",
        help="only the runs of this workflow (repeat, or NAME,NAME; default: all)",
    )
    group.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME",
        help="only the runs made with this variant (chainlat.variant; repeat, or NAME,NAME; "
        "default: all)",
    )
    group.add_argument(
        "--roots",
        action="store_true",
        help="also make a run of every trace's root span that is not a workflow or agent "
        "(named by its span name, e.g. 'POST /chat'), for traces of plain services",
    )


def add_jaeger_ui(parser: argparse.ArgumentParser) -> None:
    """``--jaeger-ui URL``: the page ``--html`` writes links each run to its trace there."""
    parser.add_argument(
        "--jaeger-ui", metavar="URL", help="with --html: link each run to its trace in Jaeger"
    )


def add_reading(parser: argparse.ArgumentParser, *, jaeger: bool = True) -> None:
    """Jaeger's HTTP API (with ``jaeger``) and the reading bounds: called last, so that they
    come after the command's main options in ``--help``."""
    if jaeger:
        group = parser.add_argument_group(JAEGER_GROUP)
        group.add_argument(
            "--jaeger", metavar="URL", help="Jaeger query URL, e.g. http://host:16686"
        )
        group.add_argument("--service", metavar="NAME", help="service to read traces of")
        group.add_argument(
            "--lookback", default="1h", metavar="DURATION", help="how far back (default 1h)"
        )
        group.add_argument(
            "--limit", type=int, default=100, metavar="N", help="most traces (default 100)"
        )
        group.add_argument(
            "--timeout",
            type=_positive_float,
            default=60.0,
            metavar="SECONDS",
            help="longest the whole read of Jaeger may take, every request and byte (default 60)",
        )
        group.add_argument(
            "--max-response-bytes",
            type=_positive_int,
            default=256 * 1024 * 1024,
            metavar="N",
            help="largest answer read, decompressed (default 256 MiB)",
        )
    tuning = parser.add_argument_group(READING_GROUP)
    tuning.add_argument(
        "--settle-lines",
        type=int,
        default=8,
        metavar="N",
        help="lines to wait after a trace's root before judging it (default 8)",
    )
    tuning.add_argument(
        "--max-line-bytes",
        type=_positive_int,
        default=128 * 1024 * 1024,
        metavar="N",
        help="longest line of a trace file (default 128 MiB)",
    )
    tuning.add_argument(
        "--max-open-traces",
        type=_positive_int,
        default=100_000,
        metavar="N",
        help="traces held open at once while reading a file (default 100000)",
    )
    tuning.add_argument(
        "--max-open-bytes",
        type=_positive_int,
        default=512 * 1024 * 1024,
        metavar="N",
        help="bytes of spans held open at once while reading a file (default 512 MiB)",
    )
    tuning.add_argument("--no-progress", action="store_true", help="no progress bar")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < 1e9:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _names(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(n.strip() for v in values for n in v.split(",") if n.strip()))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


@dataclass
class Sampled:
    """What a workflow's runs say about sampling, for the warnings: the sampling part of
    :class:`chainlat._core.stats.WorkflowStats`, kept for every command, even those that
    aggregate no statistics."""

    runs: int = 0
    weighted: int = 0
    """Runs that stand for more than one (a sampling probability below 1 recorded)."""
    biased: int = 0
    """Runs a tail sampler kept without recording a probability."""
    sampled: int = 0
    """Runs in the percentiles (those that did not fail)."""
    weight_total: float = 0.0
    heaviest_weight: float = 0.0
    heaviest_trace_id: str = ""

    def add(self, run: WorkflowRun) -> None:
        """Count one run, its weight clamped as the statistics clamp it."""
        weight, biased = run.sampling
        weight = min(weight, MAX_SAMPLING_WEIGHT)
        self.runs += 1
        self.weighted += weight != 1.0
        self.biased += biased
        if run.error:  # left out of the percentiles, as the statistics do by default
            return
        self.sampled += 1
        self.weight_total += weight
        if weight > self.heaviest_weight:
            self.heaviest_weight, self.heaviest_trace_id = weight, run.trace_id

    @property
    def dominant(self) -> tuple[str, float] | None:
        """The trace id of a run whose weight is more than half of all the runs' weight (so
        it alone decides the percentiles), with its share; else None."""
        if self.sampled < 2 or not self.heaviest_weight * 2 > self.weight_total:
            return None
        return self.heaviest_trace_id, self.heaviest_weight / self.weight_total


class RunFilter:
    """The runs ``--workflow`` and ``--variant`` select, and the names the read saw.

    Every run read passes through :meth:`select`, which also notes, per workflow, what the
    runs say about sampling (:attr:`sampled`, for the warnings). A name that no run read has
    is an error naming the names seen (:meth:`check_names`), once the read is over.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.workflows = _names(getattr(args, "workflow", None) or ())
        self.variants = _names(getattr(args, "variant", None) or ())
        self.seen_workflows: dict[str, None] = {}
        self.seen_variants: dict[str, None] = {}
        self.sampled: dict[str, Sampled] = {}
        self.read = 0
        """Runs read, before filtering."""
        self.kept = 0
        """Runs selected."""

    @property
    def active(self) -> bool:
        return bool(self.workflows or self.variants)

    def matches(self, run: WorkflowRun) -> bool:
        """Whether ``run`` is one of those asked for."""
        if self.workflows and run.workflow not in self.workflows:
            return False
        return not self.variants or run.variant in self.variants

    def select(self, runs: Iterable[WorkflowRun]) -> Iterator[WorkflowRun]:
        """The selected runs; every run is counted and its names noted on the way."""
        for run in runs:
            self.read += 1
            self.seen_workflows[run.workflow] = None
            if run.variant is not None:
                self.seen_variants[run.variant] = None
            if self.matches(run):
                self.kept += 1
                if not run.nested:
                    self._note_sampling(run)
                yield run

    def _note_sampling(self, run: WorkflowRun) -> None:
        sampled = self.sampled.get(run.workflow)
        if sampled is None:
            sampled = self.sampled[run.workflow] = Sampled()
        sampled.add(run)

    def check_names(self) -> None:
        """InputError when a name asked for is not one a run had, or no run has all asked."""
        for option, asked, seen in (
            ("--workflow", self.workflows, self.seen_workflows),
            ("--variant", self.variants, self.seen_variants),
        ):
            unknown = [name for name in asked if name not in seen]
            if unknown:
                names = ", ".join(shown(n) for n in unknown)
                what = option.removeprefix("--")
                listed = ", ".join(shown(n) for n in sorted(seen)) or f"no run has a {what}"
                raise InputError(
                    f"{option} {names}: no run read has this {what} ({what}s seen: {listed})"
                )
        if self.active and self.read and not self.kept:
            raise InputError(
                f"no run read is of {self.described()} ({_count(self.read, 'run')} read)"
            )

    def described(self) -> str:
        """What was selected, for a report's title: ``workflow a; variant b``."""
        parts = []
        if self.workflows:
            parts.append("workflow " + ", ".join(self.workflows))
        if self.variants:
            parts.append("variant " + ", ".join(self.variants))
        return "; ".join(parts)
