"""``chainlat check`` against the orjson floor in instructions, counted by callgrind.

Machine load cannot move an instruction count. Each command runs under
``valgrind --tool=callgrind`` over two files of the same layout as ``bench_check.py``'s
(``--small`` and ``--large`` spans); the marginal instructions per span, (large −
small) / (large spans − small spans), take out starting Python and importing the CLI::

    python benchmarks/callgrind_check.py --small 5000 --large 25000 -o out/callgrind-check.json

Compare two trees by running it with ``PYTHONPATH=<tree>/src``. With ``--stages``, also
each stage of ``breakdown_check.py`` (floor, read, traces, runs, check, each including the
ones before it, and the lower bound of ``least_check.py`` with and without chainlat's
duties) in a process of its own: where the instructions per span beyond the floor go.
With ``--repeated``, the files repeat one workflow's attributes on every copy (see
``bench_check.generate``): what the values that differ from run to run cost is the
difference from a run without it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import bench_check
import breakdown_check
from _callgrind import instructions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--small", type=int, default=5_000)
    parser.add_argument("--large", type=int, default=25_000)
    parser.add_argument("--workdir", type=Path, default=Path(__file__).parent / "out")
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--stages", action="store_true", help="count each stage too")
    parser.add_argument(
        "--repeated", action="store_true", help="no attribute differs from copy to copy"
    )
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
        bench_check.generate(path, spans, varied=not args.repeated)
        counts[label] = {
            "spans": spans,
            "floor": instructions([sys.executable, str(floor), str(path)]),
            "check": instructions([*cli, str(path), "--budgets", str(budgets)], check=False),
        }
        if args.stages:
            breakdown = [sys.executable, breakdown_check.__file__, str(path), "--budgets"]
            for stage in breakdown_check.STAGES:
                counts[label][f"stage_{stage}"] = instructions(
                    [*breakdown, str(budgets), "--stage", stage]
                )
        path.unlink()
    spans = counts["large"]["spans"] - counts["small"]["spans"]
    per_span = {
        name: (counts["large"][name] - counts["small"][name]) / spans
        for name in counts["large"]
        if name != "spans"
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
