# One command to run tickwork, one to test it. Both create .venv on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint typecheck unit chaos services bench bench-peers clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/tickwork up $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

services:
	./scripts/services.sh

# Tests run in TEST_WORKERS processes (pytest-xdist), a test file to a process: most of a
# test's time is spent waiting on servers and child processes, not on a core.
TEST_WORKERS ?= 4
unit: $(STAMP)
	$(BIN)/pytest -m "not chaos" -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# CHAOS_RUNS (default 50000) runs through tests/chaos under a nemesis; report: CHAOS_REPORT.
chaos: $(STAMP) services
	$(BIN)/pytest -m chaos $(PYTEST_ARGS)

test: $(STAMP) services lint typecheck unit

bench: $(STAMP)
	$(BIN)/python bench/embedded.py $(ARGS)

bench-peers: $(STAMP)
	$(BIN)/python bench/peers/run.py $(ARGS)

clean:
	rm -rf $(VENV) .tickwork .pytest_cache .mypy_cache .ruff_cache
