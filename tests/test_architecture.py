"""The layering is a checked contract: import-linter's contracts hold, and can fail."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

from support.fresh import fresh_python

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(config: Path, src: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), str(config), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=config.parent,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
    )


def test_the_import_contracts_hold() -> None:
    done = _lint(ROOT / "pyproject.toml", ROOT / "src")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_a_runtime_module_importing_the_report_layer_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    config = tmp_path / "src" / "chainlat" / "_runtime" / "config.py"
    config.write_text(config.read_text() + "\nimport chainlat.report  # a deliberate violation\n")
    done = _lint(tmp_path / "pyproject.toml", tmp_path / "src")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "chainlat._runtime.config -> chainlat.report" in done.stdout
    assert "Layers: imports point one way" in done.stdout


def test_the_core_importing_opentelemetry_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    rollup = tmp_path / "src" / "chainlat" / "_core" / "rollup.py"
    rollup.write_text(
        rollup.read_text() + "\nimport opentelemetry.trace  # a deliberate violation\n"
    )
    done = _lint(tmp_path / "pyproject.toml", tmp_path / "src")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "chainlat._core.rollup -> opentelemetry (l." in done.stdout


def test_import_chainlat_and_configure_load_no_analysis_or_rendering_library(
    tmp_path: Path,
) -> None:
    code = (
        "import sys, chainlat\n"
        "chainlat.configure('svc', exporter='none')\n"
        "with chainlat.workflow('w'):\n"
        "    with chainlat.inference('m'):\n"
        "        pass\n"
        "chainlat.shutdown()\n"
        "heavy = ('pydantic', 'yaml', 'rich', 'plotly', 'pytest', 'chainlat.cli', "
        "'chainlat.report', 'chainlat.traces', 'chainlat.budgets')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    assert fresh_python(code, tmp_path).strip() == "[]"


def test_reading_traces_starts_no_opentelemetry_sdk_and_the_api_loads_on_first_use(
    tmp_path: Path,
) -> None:
    # `import chainlat` names the whole API but imports the SDK, the analysis and the httpx
    # instrumentation when a name needs them: a command that reads and judges traces (every
    # CI run of `chainlat check`) starts without them.
    sdk = ("opentelemetry.sdk", "chainlat._runtime.spans", "chainlat.analysis", "chainlat.httpx")
    code = (
        "import sys\n"
        f"sdk = {sdk!r}\n"
        "def loaded():\n"
        "    return sorted(m for m in sdk if m in sys.modules)\n"
        "import chainlat, chainlat.cli, chainlat.cli.budgets, chainlat.traces, chainlat.budgets\n"
        "print(loaded())\n"
        "from chainlat.budgets import evaluate\n"
        "from chainlat.traces import FileSource\n"
        "print(loaded())\n"
        "print(chainlat.workflow.__module__, chainlat.compare.__module__)\n"
        "print(loaded())\n"
        "from chainlat import instrument_httpx\n"
        "print(instrument_httpx.__module__, 'workflow' in dir(chainlat))\n"
        "try:\n"
        "    chainlat.no_such_name\n"
        "except AttributeError as exc:\n"
        "    print(exc)\n"
    )
    out = fresh_python(code, tmp_path).splitlines()
    assert out == [
        "[]",
        "[]",
        "chainlat._runtime.steps chainlat.analysis.tradeoff",
        "['chainlat._runtime.spans', 'chainlat.analysis', 'opentelemetry.sdk']",
        "chainlat.httpx True",
        "module 'chainlat' has no attribute 'no_such_name'",
    ]


def test_the_metrics_sdk_is_imported_only_by_a_configure_that_exports_metrics(
    tmp_path: Path,
) -> None:
    # About a tenth of `import chainlat` (and of every command's start): not paid by an
    # application, or a command, that exports no metrics.
    code = (
        "import sys, chainlat\n"
        "print('opentelemetry.sdk.metrics' in sys.modules)\n"
        "chainlat.configure('svc', exporter='none')\n"
        "print('opentelemetry.sdk.metrics' in sys.modules)\n"
        "from opentelemetry import metrics\n"
        "from opentelemetry.sdk.metrics.export import InMemoryMetricReader\n"
        "reader = InMemoryMetricReader()\n"
        "chainlat.configure('svc', exporter='none', metric_readers=[reader])\n"
        "with chainlat.workflow('w'):\n"
        "    pass\n"
        "from opentelemetry.sdk.metrics import MeterProvider\n"
        "print(isinstance(metrics.get_meter_provider(), MeterProvider))\n"
        "data = reader.get_metrics_data()\n"
        "print(sorted({m.name for r in data.resource_metrics for s in r.scope_metrics "
        "for m in s.metrics}))\n"
        "chainlat.shutdown()\n"
    )
    first, configured, global_set, names = fresh_python(code, tmp_path).splitlines()
    assert (first, configured, global_set) == ("False", "False", "True")
    assert "chainlat.chain.duration" in names, names


# --- what the source says, read with ast: every import, a function's own included ---------
PACKAGE = ROOT / "src" / "chainlat"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found.update(id(sub) for sub in ast.walk(node))
    return found


def _imported(module: str) -> set[str]:
    """The chainlat modules ``module`` imports at run time, at its top or in a function."""
    tree = ast.parse(MODULES[module].read_text())
    skipped = _type_checking_nodes(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:  # an imported name, not a module
                name = name.rpartition(".")[0]
            if name.startswith("chainlat") and name != module:
                found.add(name)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return cycles


def test_no_import_cycle_hides_in_a_function() -> None:
    """No two modules import each other, however late (a function-level import included)."""
    graph = {module: _imported(module) & MODULES.keys() for module in MODULES}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


RUNTIME_DOORS: dict[str, set[str]] = {
    "chainlat._runtime.interface": {
        "chainlat.demo.files",
        "chainlat.httpx._call",
        "chainlat.pytest_plugin",
        "chainlat.realtime._turns",
    },
    # chainlat.testing's processor for tests (the facade names its modules by string,
    # imported on first use: not an import here); the realtime session's spans.
    "chainlat._runtime.processor": {"chainlat.testing"},
    "chainlat._runtime.spans": {"chainlat.realtime._turns"},
    # The pytest plugin judges a test's workflows with the runtime's budgets.
    "chainlat._runtime.budgets": {"chainlat.pytest_plugin"},
    # A span's attributes written as the runtime writes them, and its suppression key.
    "chainlat._runtime.span_attributes": {"chainlat.httpx._call"},
    "chainlat._runtime.otel_compat": {"chainlat.httpx._propagation"},
    # The sim's logger scrubs credentials as the runtime's does.
    "chainlat._runtime.scrubbing": {"chainlat.sim"},
}
"""Which runtime modules the rest of chainlat imports, and who: docs/architecture.md names
them. ``_runtime/interface.py`` is the door; the others are the public API and four
named seams."""


def test_the_runtime_is_entered_only_by_its_named_doors() -> None:
    found: dict[str, set[str]] = {}
    for module in MODULES:
        if module.startswith("chainlat._runtime"):
            continue
        for imported in _imported(module):
            if imported.startswith("chainlat._runtime."):
                found.setdefault(imported, set()).add(module)
    assert found == RUNTIME_DOORS


PRINTERS: Final = ("chainlat.cli.", "chainlat.demo", "chainlat.sim._cli")
"""The modules that print: the commands (``cli/``), the demo, and ``chainlat sim``'s own
command line. Every other module returns text or renderables."""


def _prints(module: str) -> list[str]:
    tree = ast.parse(MODULES[module].read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = ast.unparse(node.func)
            if called == "print" or called in ("sys.stdout.write", "sys.stderr.write"):
                found.append(f"{MODULES[module]}:{node.lineno}: {called}")
    return found


def test_only_the_commands_the_demo_and_the_sims_command_line_print() -> None:
    printing = [
        line
        for module in MODULES
        if not (module + ".").startswith(PRINTERS)
        for line in _prints(module)
    ]
    assert printing == []
    assert _prints("chainlat.cli.output")  # the check can see a print


def test_every_module_is_named_in_the_architecture() -> None:
    """docs/architecture.md names each module (``name.py``) and each package (``name/``)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    missing = []
    for module, path in MODULES.items():
        if path.name == "__main__.py" or module == "chainlat":
            continue
        name = f"{path.parent.name}/" if path.name == "__init__.py" else path.name
        if name not in text:
            missing.append(module)
    assert missing == []


def test_the_transport_importing_a_providers_module_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    call = tmp_path / "src" / "chainlat" / "httpx" / "_call.py"
    call.write_text(
        call.read_text()
        + "\nimport chainlat.httpx.providers.ollama_api  # a deliberate violation\n"
    )
    done = _lint(tmp_path / "pyproject.toml", tmp_path / "src")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "chainlat.httpx._call -> chainlat.httpx.providers.ollama_api" in done.stdout


def test_only_the_sources_and_the_html_pages_second_pass_read_runs_in_the_commands() -> None:
    readers = {
        module
        for module in MODULES
        if module.startswith("chainlat.cli") and "read_runs(" in MODULES[module].read_text()
    }
    assert readers == {"chainlat.cli.sources", "chainlat.cli.budgets"}
