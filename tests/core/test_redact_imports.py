"""The credential scrubber's module imports only the standard library."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from chainlat._core import redact


def test_redact_imports_only_the_standard_library() -> None:
    tree = ast.parse(Path(redact.__file__).read_text(encoding="utf-8"))
    imported = {
        name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
        )
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}
