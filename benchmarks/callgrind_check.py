"""``chainlat check`` against the orjson floor in instructions, counted by callgrind.

Machine load cannot move an instruction count. Each command runs under
``valgrind --tool=callgrind`` over two files of the same layout as ``bench_check.py``'s
(``--small`` and ``--large`` spans); the marginal instructions per span, (large −
small) / (large spans − small spans), take out starting Python and importing the CLI::

    python benchmarks/callgrind_check.py --small 5000 --large 25000 -o out/callgrind-check.json

Compare two trees by running it with ``PYTHONPATH=<tree>/src``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import bench_check
from _callgrind import instructions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--small", type=int, default=5_000)
    parser.add_argument("--large", type=int, default=25_000)
    parser.add_argument("--workdir", type=Path, default=Path(__file__).parent / "out")
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    budgets = args.workdir / "check-budgets.toml"
    budgets.write_text(bench_check.BUDGETS)
    floor = args.workdir / "check-floor.py"
    floor.write_text(bench_check.FLOOR)
    cli = [sys.executable, "-m", "chainlat.cli", "check", "--no-progress"]
    counts: dict[str, dict[str, int]] = {}
    for label, spans in (("small", args.small), ("large", args.large)):
        path = args.workdir / f"callgrind-check-{spans}.jsonl"
        bench_check.generate(path, spans)
        counts[label] = {
            "spans": spans,
            "floor": instructions([sys.executable, str(floor), str(path)]),
            "check": instructions([*cli, str(path), "--budgets", str(budgets)], check=False),
        }
        path.unlink()
    spans = counts["large"]["spans"] - counts["small"]["spans"]
    per_span = {
        name: (counts["large"][name] - counts["small"][name]) / spans for name in ("floor", "check")
    }
    result = {
        "counts": counts,
        "per_span": per_span,
        "ratio": per_span["check"] / per_span["floor"],
    }
    args.output.write_text(json.dumps(result, indent=1))
    print(json.dumps(result["per_span"]), f"ratio {result['ratio']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
