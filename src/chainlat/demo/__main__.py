"""``python -m chainlat.demo``: the same as ``chainlat demo``."""

from chainlat.demo import main

raise SystemExit(main())
