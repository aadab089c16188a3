"""The output formats, one registry: per kind of result the commands print, the renderer of
each format by its name.

A command offers ``--format`` with the formats of its kinds (:func:`formats`, through
:func:`chainlat.cli.options.add_format`) and prints its result with :func:`emit`, never
choosing a renderer itself, so a command cannot offer a format it does not render nor forget
one the registry has. A new format is one row per kind in :data:`RENDERERS`, its renderer in
:mod:`chainlat.report`.

A row turns a result into what :mod:`chainlat.cli.output` prints: a JSON document (the one
JSON writer), text as it is, or renderables fitted to the terminal; with, after it, lines
on stdout (what was written where) and warnings on stderr.

Example::

    add_format(parser, "diff")
    ...
    emit("diff", args.format, diff_runs(baseline, current))
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from chainlat.cli import output

if TYPE_CHECKING:
    from rich.console import RenderableType


@dataclass(frozen=True)
class Document:
    """A JSON document, written by the one JSON writer (:func:`chainlat.cli.output.emit_json`)."""

    document: dict[str, Any]


@dataclass(frozen=True)
class Text:
    """Text printed as it is, ending with one newline."""

    text: str


@dataclass(frozen=True)
class Renderables:
    """Strings and rich renderables, printed as text with tables fitted to the terminal."""

    items: list[RenderableType | str]


@dataclass(frozen=True)
class Rendered:
    """What a renderer made of a result, for :mod:`chainlat.cli.output` to print."""

    output: Document | Text | Renderables
    after: tuple[str, ...] = ()
    """Lines on stdout after it (what was written where)."""
    warnings: tuple[str, ...] = ()
    """Warning lines on stderr after it."""


Renderer = Callable[..., Rendered]
"""A renderer: a result and the context its kind's command gives (keywords) in, what to
print out."""

FORMAT_HELP: Final = {"text": "text (a table fitted to the terminal)"}
"""How ``--format`` describes a format, when more than its name."""


# -- renderers, by kind ----------------------------------------------------------------------
# Each kind's renderers take the same context, given by its commands to :func:`emit`.


def _check_text(result: Any, *, sources: str, **_: Any) -> Rendered:
    from chainlat import report

    return Rendered(Renderables(report.check_renderables(result, sources=sources)))


def _check_json(result: Any, *, warnings: list[str], **_: Any) -> Rendered:
    from chainlat import report

    return Rendered(Document({**report.check_json(result), "warnings": warnings}))


def _check_markdown(result: Any, *, sources: str, **_: Any) -> Rendered:
    from chainlat import report

    return Rendered(Text(report.check_markdown(result, sources=sources)))


def _stats_text(stats: Any, *, sources: str, waterfalls: Any, **_: Any) -> Rendered:
    from chainlat import report

    items = report.stats_renderables(stats, sources=sources, waterfalls=waterfalls)
    return Rendered(Renderables(items))


def _stats_json(stats: Any, *, warnings: list[str], **_: Any) -> Rendered:
    from chainlat import report

    return Rendered(Document({**report.stats_json(stats), "warnings": warnings}))


def _stats_markdown(stats: Any, *, sources: str, waterfalls: Any, **_: Any) -> Rendered:
    from chainlat import report

    return Rendered(Text(report.stats_markdown(stats, sources=sources, waterfalls=waterfalls)))


def _diff_text(result: Any) -> Rendered:
    from chainlat import report

    return Rendered(Renderables(report.diff_renderables(result)))


def _diff_json(result: Any) -> Rendered:
    from chainlat import report

    return Rendered(Document(report.diff_json(result)))


def _diff_markdown(result: Any) -> Rendered:
    from chainlat import report

    return Rendered(Text(report.diff_markdown(result)))


def _prometheus_text(result: Any, *, source: str) -> Rendered:
    from chainlat import report

    return Rendered(Text(report.prometheus_check_text(result, source=source)))


def _prometheus_json(result: Any, *, source: str) -> Rendered:
    from chainlat import report

    return Rendered(Document(report.prometheus_check_json(result, source=source)))


def _prometheus_markdown(result: Any, *, source: str) -> Rendered:
    from chainlat import report

    return Rendered(Text(report.prometheus_check_markdown(result, source=source)))


def _profiles_items(profiles: Any, selected: int, sources: str, gaps: Any) -> list[Any]:
    from chainlat.report import tradeoff as tradeoff_report

    return [tradeoff_report.profiles_text(profiles, selected, sources, gaps)]


def _profiles_text(
    profiles: Any, *, selected: int, sources: str, gaps: Any, written: str | None
) -> Rendered:
    after = (f"profiles written to {written}",) if written else ()
    return Rendered(Renderables(_profiles_items(profiles, selected, sources, gaps)), after=after)


def _profiles_json(profiles: Any, *, gaps: Any, **_: Any) -> Rendered:
    from chainlat.analysis.profiles import dumps_profiles
    from chainlat.report import tradeoff as tradeoff_report

    document = json.loads(dumps_profiles(profiles, fmt="json"))
    return Rendered(Document(document), warnings=tuple(tradeoff_report.usage_gap_lines(gaps)))


def _profiles_markdown(
    profiles: Any, *, selected: int, sources: str, gaps: Any, **_: Any
) -> Rendered:
    return Rendered(_markdown(_profiles_items(profiles, selected, sources, gaps)))


def _whatif_items(result: Any, sources: str) -> list[Any]:
    from chainlat.report import tradeoff as tradeoff_report

    return [tradeoff_report.whatif_text(result, sources)]


def _whatif_text(result: Any, *, sources: str) -> Rendered:
    return Rendered(Renderables(_whatif_items(result, sources)))


def _whatif_json(result: Any, **_: Any) -> Rendered:
    from chainlat.report import tradeoff as tradeoff_report

    return Rendered(Document(tradeoff_report.whatif_json(result)))


def _whatif_markdown(result: Any, *, sources: str) -> Rendered:
    return Rendered(_markdown(_whatif_items(result, sources)))


def _comparison_items(comparison: Any) -> list[Any]:
    from chainlat.report import tradeoff as tradeoff_report

    return [tradeoff_report.compare_text(comparison)]


def _comparison_text(comparison: Any, *, chart: str | None) -> Rendered:
    after = (f"chart written to {chart}",) if chart else ()
    return Rendered(Renderables(_comparison_items(comparison)), after=after)


def _comparison_json(comparison: Any, **_: Any) -> Rendered:
    from chainlat.report import tradeoff as tradeoff_report

    return Rendered(Document(tradeoff_report.compare_json(comparison)))


def _comparison_markdown(comparison: Any, **_: Any) -> Rendered:
    return Rendered(_markdown(_comparison_items(comparison)))


def _markdown(items: list[RenderableType | str]) -> Text:
    from chainlat.report.tables import renderables_markdown

    return Text(renderables_markdown(items))


RENDERERS: Final[Mapping[str, Mapping[str, Renderer]]] = {
    "check": {"text": _check_text, "json": _check_json, "markdown": _check_markdown},
    "stats": {"text": _stats_text, "json": _stats_json, "markdown": _stats_markdown},
    "diff": {"text": _diff_text, "json": _diff_json, "markdown": _diff_markdown},
    "prometheus": {
        "text": _prometheus_text,
        "json": _prometheus_json,
        "markdown": _prometheus_markdown,
    },
    "profiles": {"text": _profiles_text, "json": _profiles_json, "markdown": _profiles_markdown},
    "whatif": {"text": _whatif_text, "json": _whatif_json, "markdown": _whatif_markdown},
    "comparison": {
        "text": _comparison_text,
        "json": _comparison_json,
        "markdown": _comparison_markdown,
    },
}
"""Per kind of result (``check``: a budget verdict; ``stats``: ``report``'s statistics;
``diff``; ``prometheus``: a verdict from metrics; ``profiles``; ``whatif``; ``comparison``:
``compare``'s variants), the renderer of each format, the first the default."""


def formats(*kinds: str) -> tuple[str, ...]:
    """The formats of ``kinds`` (a command printing several kinds offers those all have, in
    the order of the first)."""
    first, *others = (RENDERERS[kind] for kind in kinds)
    return tuple(name for name in first if all(name in other for other in others))


def emit(kind: str, fmt: str, result: Any, **context: Any) -> None:
    """Print ``result``, of ``kind``, in format ``fmt``, with its kind's ``context``."""
    rendered = RENDERERS[kind][fmt](result, **context)
    out = rendered.output
    if isinstance(out, Document):
        output.emit_json(out.document)
    elif isinstance(out, Text):
        output.emit(out.text)
    else:
        output.emit_renderables(out.items)
    for line in rendered.after:
        output.emit(line)
    for line in rendered.warnings:
        output.warn(line)
