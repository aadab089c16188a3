"""Where the demo's traces go: the file ``configure()`` picks, the previous run's kept aside."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from chainlat._core.errors import InputError

if TYPE_CHECKING:
    from rich.console import Console


def print_destination(console: Console, traces_file: str | None, check_options: str = "") -> None:
    """Where the traces went and, for a file, the ``check`` to run on it next (with
    ``check_options``, e.g. `` --workflow voice-agent``)."""
    from chainlat._runtime.interface import choose_exporter

    path = traces_path(traces_file)
    if path is None:
        chosen = choose_exporter(None)
        console.print("traces sent over OTLP" if chosen == "otlp" else f"traces: {chosen}")
        return
    console.print(
        f"traces written to [bold]{path}[/]; next: {_command()} check {path}{check_options}",
        soft_wrap=True,
    )


def _command() -> str:
    """How this ``chainlat`` was run (``.venv/bin/chainlat`` from ``make demo``), for the hint:
    the virtual environment's command is not on the PATH until it is activated."""
    import os
    import sys

    invoked = sys.argv[0] if sys.argv else ""
    if os.path.basename(invoked) != "chainlat":
        return "chainlat"
    relative = os.path.relpath(invoked)
    return relative if not relative.startswith("..") else invoked


def traces_path(traces_file: str | None) -> Path | None:
    """The file the demo's traces go to, as :func:`chainlat.configure` picks it; None when
    they go elsewhere (OTLP, the console, nowhere)."""
    from chainlat._runtime.interface import default_traces_path

    return default_traces_path(traces_file)


def keep_previous(path: Path) -> Path | None:
    """Move the traces an earlier run left at ``path`` aside, so that this run starts a
    fresh file; returns where they went, or None when there was nothing to keep.

    The new name carries the time the file was last written, in UTC
    (``chainlat-traces.jsonl`` -> ``chainlat-traces.20261203T121500Z.jsonl``), with
    ``-1``, ``-2``, ... when that name is taken.

    Example::

        kept = keep_previous(Path("chainlat-traces.jsonl"))
    """
    try:
        written = path.stat()
    except FileNotFoundError:
        return None
    if written.st_size == 0:
        return None
    stem, suffix = (
        (path.name[: -len(".jsonl")], ".jsonl")
        if path.name.endswith(".jsonl")
        else (
            path.name,
            "",
        )
    )
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(written.st_mtime))
    target = path.with_name(f"{stem}.{stamp}{suffix}")
    taken = 0
    while target.exists():
        taken += 1
        target = path.with_name(f"{stem}.{stamp}-{taken}{suffix}")
    try:
        path.rename(target)
    except OSError as exc:
        raise InputError(
            f"{path}: cannot keep the previous traces: {exc.strerror or exc}"
        ) from None
    return target
