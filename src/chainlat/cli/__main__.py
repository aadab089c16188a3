"""``python -m chainlat.cli``: the same as the ``chainlat`` command."""

from chainlat.cli import main

raise SystemExit(main())
