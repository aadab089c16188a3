"""``python -m chainlat.cli``: the same as the ``chainlat`` command."""

from chainlat.cli import run

raise SystemExit(run())
