"""Tables of any renderer, fitted to a width without cutting a value, or as Markdown.

rich narrows a table that is wider than the terminal by shrinking its widest columns and
ending the cells that no longer fit with an ellipsis: a p95 of ``1,234`` becomes ``1,2…``.
:func:`fit_table` never does that: a column is narrowed only down to its longest word (a
cell wraps between words, never inside one), and a table that still does not fit is cut
into several tables by columns, each repeating the first column (the row's name).

:func:`renderables_markdown` writes the same renderables (strings and rich tables) as
Markdown, so that a command that prints rich tables has a Markdown format too.

Example::

    for part in fit_table(table, 100):
        console.print(part)
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.table import Table
    from rich.text import Text

_MEASURE_WIDTH: Final = 100_000


def _console() -> Console:
    from rich.console import Console

    return Console(width=_MEASURE_WIDTH, color_system=None, highlight=False)


def _text(cell: object) -> Text | None:
    """A cell as the table shows it; None for a renderable that is not text."""
    from rich.text import Text

    if isinstance(cell, Text):
        return cell
    if isinstance(cell, str):
        return Text.from_markup(cell)
    return None


def _widths(console: Console, cell: object) -> tuple[int, int]:
    """The cell's natural width and its narrowest without cutting a word."""
    from rich.measure import Measurement

    text = _text(cell)
    if text is None:
        measured = Measurement.get(console, console.options, cell)  # type: ignore[arg-type]
        return measured.maximum, measured.minimum
    lines = text.plain.splitlines() or [""]
    natural = max(text.cell_len if len(lines) == 1 else _cell_len(line) for line in lines)
    narrowest = max((_cell_len(word) for word in text.plain.split()), default=0)
    return natural, narrowest


def _cell_len(text: str) -> int:
    from rich.cells import cell_len

    return cell_len(text)


def _columns(console: Console, table: Table) -> tuple[list[int], list[int]]:
    naturals: list[int] = []
    narrowest: list[int] = []
    for column in table.columns:
        found = [_widths(console, column.header), *(_widths(console, c) for c in column.cells)]
        naturals.append(max(n for n, _ in found))
        narrowest.append(max(1, *(m for _, m in found)))
    return naturals, narrowest


def _chrome(console: Console, table: Table) -> int:
    """What the table adds to its columns' widths: edges, separators, padding."""
    probe = copy.copy(table)
    probe.columns = [copy.copy(column) for column in table.columns]
    for column in probe.columns:
        column.width = 1
    return console.measure(probe).maximum - len(probe.columns)


def _water_fill(naturals: Sequence[int], narrowest: Sequence[int], room: int) -> list[int]:
    """Column widths that fill ``room``: the widest columns narrowed first, none below its
    narrowest (the caller checks that the narrowest fit)."""
    if sum(naturals) <= room:
        return list(naturals)
    low, high = 0, max(naturals)
    while low < high:  # the largest level at which every column capped at it fits
        level = (low + high + 1) // 2
        if sum(max(m, min(n, level)) for n, m in zip(naturals, narrowest, strict=True)) <= room:
            low = level
        else:
            high = level - 1
    widths = [max(m, min(n, low)) for n, m in zip(naturals, narrowest, strict=True)]
    spare = room - sum(widths)
    for index, natural in enumerate(naturals):  # the room left, one column at a time
        if spare <= 0:
            break
        grow = min(spare, natural - widths[index])
        if grow > 0:
            widths[index] += grow
            spare -= grow
    return widths


def _part(table: Table, indices: Sequence[int], first: bool) -> Table:
    """A table of the columns at ``indices``, rows and styles kept."""
    from rich.text import Text

    part = copy.copy(table)
    part.columns = [copy.copy(table.columns[i]) for i in indices]
    if not first and table.title is not None:
        title = table.title
        part.title = (
            title + " (continued)"
            if isinstance(title, str)
            else Text.assemble(title, " (continued)")
        )
    return part


def fit_table(table: Table, width: int) -> list[Table]:
    """The table as one or more tables no wider than ``width``, no value cut.

    Columns are narrowed down to their longest word at most; when that is not enough, the
    columns after the first are dealt out over several tables that each repeat the first.
    A single column wider than ``width`` on its own is folded onto more lines, every
    character kept.
    """
    console = _console()
    naturals, narrowest = _columns(console, table)
    if not table.columns or console.measure(table).maximum <= width:
        return [table]
    groups: list[list[int]] = []
    current = [0]
    for index in range(1, len(table.columns)):
        trial = [*current, index]
        if len(current) > 1 and _needs(console, table, trial, narrowest) > width:
            groups.append(current)
            current = [0, index]
        else:
            current = trial
    groups.append(current)
    parts: list[Table] = []
    for number, indices in enumerate(groups):
        part = _part(table, indices, first=number == 0)
        room = width - _chrome(console, part)
        mins = [narrowest[i] for i in indices]
        nats = [naturals[i] for i in indices]
        if sum(mins) > room:  # one column too wide even narrowed: fold it, lose nothing
            mins = [1] * len(indices)
            for column in part.columns:
                column.overflow = "fold"
        for column, column_width in zip(
            part.columns, _water_fill(nats, mins, max(room, len(indices))), strict=True
        ):
            column.width = column_width
            column.min_width = column.max_width = None
        parts.append(part)
    return parts


def _needs(console: Console, table: Table, indices: Sequence[int], narrowest: list[int]) -> int:
    part = _part(table, indices, first=True)
    return _chrome(console, part) + sum(narrowest[i] for i in indices)


# --- markdown ----------------------------------------------------------------------------


def _plain(cell: object) -> str:
    text = _text(cell)
    return "" if text is None else text.plain


def table_markdown(table: Table) -> list[str]:
    """A rich table as Markdown lines: its title in bold, then a table, columns aligned as
    in the terminal."""
    from chainlat.report.markdown import md_escape

    lines: list[str] = []
    if table.title is not None:
        lines += [f"**{md_escape(_plain(table.title))}**", ""]
    columns = table.columns
    lines.append("| " + " | ".join(md_escape(_plain(c.header)) for c in columns) + " |")
    lines.append("|" + "|".join("---:" if c.justify == "right" else ":---" for c in columns) + "|")
    cells = [list(column.cells) for column in columns]
    for row in range(table.row_count):
        lines.append(
            "| " + " | ".join(md_escape(_plain(cells[i][row])) for i in range(len(columns))) + " |"
        )
    return lines


def flattened(items: Iterable[RenderableType | str]) -> list[RenderableType | str]:
    """The renderables with every rich ``Group`` replaced by what it holds, so that each
    table can be fitted or written as Markdown on its own."""
    from rich.console import Group

    out: list[RenderableType | str] = []
    for item in items:
        if isinstance(item, Group):
            out.extend(flattened(item.renderables))
        else:
            out.append(item)
    return out


def renderables_markdown(items: Iterable[RenderableType | str]) -> str:
    """Strings, rich texts and tables as Markdown: each text a paragraph (its markup read,
    not shown), each table a Markdown table."""
    from rich.table import Table

    from chainlat.report.markdown import md_escape

    out: list[str] = []
    for item in flattened(items):
        if isinstance(item, Table):
            out += [*table_markdown(item), ""]
        elif item == "":
            continue
        else:
            out += [*(md_escape(line) for line in _plain(item).splitlines()), ""]
    return "\n".join(out).rstrip("\n") + "\n"
