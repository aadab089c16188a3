"""Where to look: the modules and functions long enough to be worth a second look.

A report, not a gate. Size is a reason to look at a module, never a number to meet: a
module of one concept may be long (httpx's client is 2,000 lines of one), and a short one
may hold several. Read the modules listed here and split one where its concepts part;
never shorten a docstring or compress readable code to get it off the list.

    python scripts/sizes.py            # src/chainlat and tests
    python scripts/sizes.py --module-lines 400 --function-lines 60

A function that is long on purpose says why in a ``# whole:`` comment above its ``def``,
which the report shows beside it. Always exits 0.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WHOLE_MARK = "# whole:"


def long_modules(root: Path, limit: int) -> list[tuple[int, Path]]:
    """Python files under ``root`` over ``limit`` lines, longest first."""
    found = []
    for path in sorted(root.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            found.append((lines, path))
    return sorted(found, key=lambda item: -item[0])


def long_functions(root: Path, limit: int) -> list[tuple[int, Path, int, str, str]]:
    """Functions under ``root`` over ``limit`` lines: length, file, line, name, and the
    reason its ``# whole:`` comment gives, if any."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text, str(path))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = (node.end_lineno or node.lineno) - first + 1
            if length > limit:
                above = lines[first - 2].strip() if first >= 2 else ""
                why = above.removeprefix(WHOLE_MARK).strip() if above.startswith(WHOLE_MARK) else ""
                found.append((length, path, node.lineno, node.name, why))
    return sorted(found, key=lambda item: -item[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module-lines", type=int, default=600)
    parser.add_argument("--function-lines", type=int, default=80)
    args = parser.parse_args()
    for root in (REPO / "src" / "chainlat", REPO / "tests"):
        modules = long_modules(root, args.module_lines)
        functions = long_functions(root, args.function_lines)
        where = root.relative_to(REPO)
        print(
            f"{where}: {len(modules)} modules over {args.module_lines} lines, "
            f"{len(functions)} functions over {args.function_lines}"
        )
        for lines, path in modules:
            print(f"  {path.relative_to(REPO)}: {lines} lines")
        for length, path, line, name, why in functions:
            said = f"  (whole: {why})" if why else ""
            print(f"  {path.relative_to(REPO)}:{line}: {name}, {length} lines{said}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
