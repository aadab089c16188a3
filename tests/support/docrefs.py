"""Code references in Markdown docs, and whether each resolves to code that exists.

A reference is a backticked span in a Markdown file that names code:

- a path under the repository (``src/chainlat/_core/rollup.py``, ``tests/interop/``) or under
  the package (``_runtime/spans.py``, ``report/``), globs included (``tests/*/test_fuzz_*.py``);
- a dotted name rooted at ``chainlat`` (``chainlat.traces.read_runs``) or at one of its
  modules (``rollup.classify``, ``spans.Tool``), a call's arguments ignored.

A dotted name rooted at ``chainlat`` that is no module or attribute may be an attribute key
(``chainlat.chain.total_ms``): it passes when the source spells it as a string (a ``.*``
pattern: when some string in the source starts with its prefix).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "chainlat"

_BACKTICKED = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_FENCE = re.compile(r"^(```|~~~)")
_DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\.\*)?$")
_CALL = re.compile(r"\(.*\)$")
_TOP_DIRS = ("src", "tests", "docs", "collector", "examples", "benchmarks", "scripts", ".ci")
_FILE_SUFFIXES = (
    "py",
    "md",
    "toml",
    "yaml",
    "yml",
    "json",
    "jsonl",
    "txt",
    "html",
    "xml",
    "gz",
    "js",
    "css",
)


@cache
def _ignored() -> tuple[str, ...]:
    """Folders the build writes (``/benchmarks/out/`` in .gitignore): named, never committed."""
    lines = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    return tuple(line.strip("/") for line in lines if line.startswith("/") and line.endswith("/"))


@dataclass(frozen=True)
class Reference:
    file: Path
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}: `{self.text}`"


def references(file: Path) -> list[Reference]:
    """The backticked spans of a Markdown file outside fenced code blocks."""
    found: list[Reference] = []
    fenced = False
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        if _FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if fenced:
            continue
        found.extend(
            Reference(file, number, m.group(1).strip()) for m in _BACKTICKED.finditer(line)
        )
    return found


@cache
def _subpackages() -> frozenset[str]:
    return frozenset(
        p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()
    )


@cache
def _modules() -> dict[str, list[str]]:
    """Every module of the package by its last name: ``rollup`` -> ``chainlat._core.rollup``."""
    named: dict[str, list[str]] = {}
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="chainlat."):
        if info.name.startswith(("chainlat.cli.", "chainlat.demo.")):
            continue  # commands are cited by their command line, not as ``output.x``
        named.setdefault(info.name.rsplit(".", 1)[-1], []).append(info.name)
    return named


@cache
def _source_strings() -> frozenset[str]:
    strings: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        strings.update(re.findall(r"""["']([\w.*-]+)["']""", path.read_text(encoding="utf-8")))
    return frozenset(strings)


def _path_problem(text: str) -> str | None:
    path = text.rstrip("/")
    if path.startswith(_ignored()):
        return None
    first = path.split("/", 1)[0]
    if first in _TOP_DIRS:
        bases = [ROOT]
    elif first in _subpackages():
        bases = [PACKAGE]
    else:
        return None  # not a path of this repository (a URL path, a user's file)
    for base in bases:
        if any(ch in path for ch in "*<{"):
            pattern = re.sub(r"<[^>]*>|\{[^}]*\}", "*", path)
            if any(base.glob(pattern)):
                return None
        elif (base / path).exists():
            return None
    return "no such path"


def _resolves(module: str, attributes: list[str]) -> bool:
    try:
        target: object = importlib.import_module(module)
    except ImportError:
        return False
    for name in attributes:
        if hasattr(target, name):
            target = getattr(target, name)
            continue
        try:
            target = importlib.import_module(f"{getattr(target, '__name__', '')}.{name}")
        except ImportError:
            return False
    return True


def _dotted_problem(text: str) -> str | None:
    name = _CALL.sub("", text)
    if not _DOTTED.match(name):
        return None
    if name.rsplit(".", 1)[-1] in _FILE_SUFFIXES:
        return None  # a file name (spans.yaml), not a dotted name
    pattern = name.endswith(".*")
    parts = name.removesuffix(".*").split(".")
    if parts[0] == "chainlat":
        if _resolves("chainlat", parts[1:]):
            return None
        prefix = ".".join(parts)
        strings = _source_strings()
        if prefix in strings or (pattern and any(s.startswith(prefix + ".") for s in strings)):
            return None
        return "neither code nor an attribute key the source defines"
    candidates = _modules().get(parts[0])
    if not candidates or pattern:
        return None  # not rooted in this package (gen_ai.request.model, os.fork)
    if any(_resolves(module, parts[1:]) for module in candidates) or name in _source_strings():
        return None  # code, or an attribute key the source spells (output.value)
    return f"no {'.'.join(parts[1:])} in {' or '.join(candidates)}"


def problem(reference: Reference) -> str | None:
    """Why a reference does not resolve, or None when it does (or names no code of ours)."""
    text = reference.text
    if " " in text or text.startswith(("http:", "https:", "~")):
        return None
    if "/" in text:
        return _path_problem(text.split("::", 1)[0])  # a test's node id: its file
    return _dotted_problem(text)


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


_DOUBLE_BACKTICKED = re.compile(r"``([^`\n]+)``")


def source_references() -> list[Reference]:
    """The ````literal```` spans of the package's docstrings and comments."""
    found: list[Reference] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found.extend(
                Reference(path, number, m.group(1).strip())
                for m in _DOUBLE_BACKTICKED.finditer(line)
            )
    return found
