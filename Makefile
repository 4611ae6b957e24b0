# drain: common tasks. `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: help venv test test-pg15 faults lint format typecheck bench bench-quick demo docs docs-serve ci

help:  ## list the targets
	@grep -E '^[a-z0-9-]+:.*##' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

venv:  ## create .venv with drain and the test tools
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[test]'

test:  ## the test suite on the embedded PostgreSQL 18 (the README's command)
	$(BIN)/pytest -q

test-pg15:  ## the test suite on the machine's PostgreSQL 15
	DRAIN_TEST_DSN=postgresql://root@127.0.0.1:5432/test $(BIN)/pytest -q

faults:  ## the fault-injection suite alone
	$(BIN)/pytest -q -m faults

lint:  ## ruff check and format check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format:  ## format the code
	$(BIN)/ruff format .

typecheck:  ## mypy --strict on the package
	$(BIN)/mypy --strict drain

bench:  ## the benchmark suite (see BENCHMARKS.md)
	$(BIN)/python -m bench

bench-quick:  ## the benchmark suite's quick mode (under a minute)
	$(BIN)/python -m bench --quick

demo:  ## drain 10,000 jobs on an embedded PostgreSQL
	$(BIN)/drain demo

docs:  ## build the docs site strictly into site/
	$(BIN)/mkdocs build --strict

docs-serve:  ## serve the docs site on http://127.0.0.1:8000
	$(BIN)/mkdocs serve

ci:  ## what CI runs, in a fresh venv
	.ci/run
