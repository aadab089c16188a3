"""Budget loaders under generated documents: ``load_budgets`` returns Budgets or raises a
one-line BudgetFileError naming the file, never any other exception.

The documents are drawn by hypothesis (fixed seed, bounded) as key/value pairs, so that a
key may come twice, and written as TOML, YAML and JSON: budget keys and hostile strings
(markup, control characters, lone surrogates, quotes), durations good and bad, NaN and
infinities, huge numbers, booleans, lists and nesting.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainlat._core.errors import BudgetFileError
from chainlat.budgets import Budgets, load_budgets

Pairs = list[tuple[str, Any]]
"""A mapping as written in a file: its pairs in order, a key possibly twice."""

KEYS = [
    "version", "min_runs", "exclude_cache_hits", "workflows", "steps", "total", "inference",
    "data", "tool", "overhead", "max", "ttft", "p50", "p95", "p99.9", "p0", "p100", "ttft_p95",
    "chat gpt-4o", "support-chat",
]  # fmt: skip
HOSTILE = [
    "load [/mnt/data]", "[bold]x", "a\tb", "\x1b[31m", "nul\x00", "\x0b", "\ud800", "|`",
    "new\nline", '"quoted"', "back\\slash", "\u2028", "x" * 300, "",
]  # fmt: skip
DURATIONS = ["800ms", "1.2s", "250us", "90ns", "2m", "-5ms", "1e400ms", "nan", "inf", "ms"]

keys = st.sampled_from(KEYS) | st.sampled_from(HOSTILE) | st.text(max_size=8)
scalars = (
    st.sampled_from(DURATIONS)
    | st.sampled_from(HOSTILE)
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.booleans()
)


def _documents(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(st.tuples(keys, leaves), max_size=5) | st.lists(leaves, max_size=4)


values = st.recursive(scalars, _documents, max_leaves=25)
documents: st.SearchStrategy[Pairs] = st.lists(
    st.tuples(st.sampled_from(KEYS) | keys, values), max_size=6
)
"""A top-level table: mostly budget keys, some hostile ones."""


def _is_pairs(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, tuple) and len(item) == 2 for item in value
    )


def as_json(value: Any) -> str:
    if isinstance(value, list) and value and _is_pairs(value):
        return "{" + ", ".join(f"{json.dumps(k)}: {as_json(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(as_json(v) for v in value) + "]"
    return json.dumps(value)  # NaN and Infinity too: json.loads reads them


def as_toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if value and _is_pairs(value):
        return "{" + ", ".join(f"{json.dumps(k)} = {as_toml_value(v)}" for k, v in value) + "}"
    return "[" + ", ".join(as_toml_value(v) for v in value) + "]"


def as_toml(document: Pairs) -> str:
    return "".join(f"{json.dumps(k)} = {as_toml_value(v)}\n" for k, v in document)


def as_yaml(document: Pairs) -> str:
    # Block style at the top (lines for the duplicate-key messages), flow style inside:
    # JSON's spelling, which YAML reads, plus the plain-scalar forms YAML adds.
    lines = []
    for key, value in document:
        text = as_json(value)
        if isinstance(value, float) and not math.isfinite(value):
            text = ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
        lines.append(f"{json.dumps(key)}: {text}\n")
    return "".join(lines)


def as_json_file(document: Pairs) -> str:
    return as_json(document or [])


WRITERS: dict[str, Callable[[Pairs], str]] = {
    "b.toml": as_toml,
    "b.yaml": as_yaml,
    "b.json": as_json_file,
}


def assert_loads_or_one_line_error(path: Path) -> None:
    try:
        budgets = load_budgets(path)
    except BudgetFileError as exc:
        message = str(exc)
        assert message.startswith(str(path)), message
        assert "\n" not in message, message
        assert len(message) < 2000, message
    else:
        assert isinstance(budgets, Budgets)


FUZZ = settings(
    derandomize=True,
    max_examples=100,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@FUZZ
@given(document=documents)
def test_generated_toml_loads_or_is_one_line_naming_the_file(
    tmp_path: Path, document: Pairs
) -> None:
    path = tmp_path / "b.toml"
    path.write_text(as_toml(document), encoding="utf-8", errors="surrogatepass")
    assert_loads_or_one_line_error(path)


@FUZZ
@given(document=documents)
def test_generated_yaml_loads_or_is_one_line_naming_the_file(
    tmp_path: Path, document: Pairs
) -> None:
    path = tmp_path / "b.yaml"
    path.write_text(as_yaml(document), encoding="utf-8", errors="surrogatepass")
    assert_loads_or_one_line_error(path)


@FUZZ
@given(document=documents)
def test_generated_json_loads_or_is_one_line_naming_the_file(
    tmp_path: Path, document: Pairs
) -> None:
    path = tmp_path / "b.json"
    path.write_text(as_json_file(document), encoding="utf-8", errors="surrogatepass")
    assert_loads_or_one_line_error(path)


@settings(FUZZ, max_examples=60)
@given(
    name=st.sampled_from(sorted(WRITERS)),
    workflow=keys,
    limits=st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(DURATIONS)), max_size=6),
    depth=st.sampled_from([0, 1, 2, 5, 50, 400, 1200, 5000]),
)
def test_plausible_budgets_with_hostile_names_and_deep_nesting(
    tmp_path: Path, name: str, workflow: str, limits: Pairs, depth: int
) -> None:
    """Closer to a real file: one workflow with limits wrapped ``depth`` levels deep in
    ``steps`` tables (written as text: the writers themselves would run out of stack)."""
    inner = as_toml_value(limits) if name == "b.toml" else as_json(limits)
    opening = '{"steps" = ' if name == "b.toml" else '{"steps": '
    nested = opening * depth + (inner if limits else "{}") + "}" * depth
    key = json.dumps(workflow)
    if name == "b.toml":
        text = f"min_runs = 2\nworkflows = {{{key} = {nested}}}\n"
    else:
        text = f'{{"min_runs": 2, "workflows": {{{key}: {nested}}}}}'
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    assert_loads_or_one_line_error(path)


def test_the_writers_write_what_the_loaders_read(tmp_path: Path) -> None:
    """The generators are worth something only if a valid document loads."""
    document: Pairs = [
        ("min_runs", 2),
        ("workflows", [("chat [x]\t", [("total", "800ms"), ("p95", [("total", "1s")])])]),
    ]
    for name, write in WRITERS.items():
        path = tmp_path / name
        path.write_text(write(document), encoding="utf-8")
        budgets = load_budgets(path)
        assert budgets.workflows["chat [x]\t"].percentiles["p95"].total == 1000.0, name
