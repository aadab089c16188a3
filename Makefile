# One command per job. Everything installs into a local virtual environment.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: system-deps install demo test unit lint sizes format bench bench-quick integration interop interop-report jaeger pipeline rules clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The demo needs only the package and its demo extra (the openai SDK, and plotly for
# `chainlat report --html`), not the dev tools.
$(DEMO_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[demo]'
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)  ## run the demo agent (traces to a fresh chainlat-traces.jsonl; the last one kept)
	$(BIN)/chainlat demo

lint: install  ## ruff (lint + format check) and the strict type check
	$(BIN)/ruff check src tests examples benchmarks scripts
	$(BIN)/ruff format --check src tests examples benchmarks scripts
	$(BIN)/mypy
	$(BIN)/lint-imports
	@$(BIN)/python scripts/sizes.py

sizes:  ## the long modules and functions: a reason to look, never a gate
	$(PYTHON) scripts/sizes.py

format: install
	$(BIN)/ruff format src tests examples benchmarks
	$(BIN)/ruff check --fix src tests examples benchmarks

unit: install  ## the test suite without the Jaeger / Collector integration tests
	$(BIN)/pytest -m "not integration and not interop"

system-deps:  ## Debian packages for the tests (Chromium for the HTML report check)
	scripts/system-deps.sh

test: lint system-deps  ## lint, type check, the whole test suite, then the interop matrix
	@if command -v go >/dev/null 2>&1; then collector/build.sh all; \
	else echo "no Go toolchain: the Jaeger / Collector integration tests will skip"; fi
	$(BIN)/pytest -m "not interop"
	@# The framework interop matrix last (one cached venv per stack; CHAINLAT_INTEROP=0 skips it).
	$(BIN)/pytest -m interop -rs tests/test_interop.py tests/test_interop_voice.py

interop: install  ## the framework interop matrix as tests (one cached venv per stack)
	$(BIN)/pytest -m interop -rs tests/test_interop.py tests/test_interop_voice.py

interop-report: install  ## the interop matrix, one line per stack and case, results in interop-results/
	$(BIN)/python tests/interop/run.py --stack all --repo . --out interop-results

jaeger:  ## build the Jaeger v2 binary once (cached in ~/.cache/chainlat/bin)
	collector/build.sh jaeger

pipeline:  ## build Jaeger, chainlat-otelcol, prometheus and promtool once (cached)
	collector/build.sh all

rules: install  ## Prometheus rules for the budget file found here (BUDGETS=FILE to choose)
	$(BIN)/chainlat budgets rules $(BUDGETS)

integration: install pipeline  ## the Jaeger / Collector / Prometheus integration tests
	$(BIN)/pytest -m integration tests/integration tests/prometheus/test_budget_rules_*.py

bench: install  ## benchmarks; results go to BENCHMARKS.md
	$(BIN)/python benchmarks/run.py

bench-quick: install  ## a short run of every benchmark (under 5 min), to benchmarks/out/BENCHMARKS-quick.md
	$(BIN)/python benchmarks/run.py --quick

clean:
	rm -rf $(VENV) build dist src/*.egg-info .mypy_cache .ruff_cache .pytest_cache
