"""The layering is a checked contract: import-linter's contracts hold, and can fail."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

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
