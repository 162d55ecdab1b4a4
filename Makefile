# Two commands do all the set-up on a fresh machine with Python 3.11:
#   make run    create .venv, install, migrate, start the service with the demo workspace
#   make test   create .venv, install, run the test suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# Two test processes by default (each gets its own database), the 15 slowest tests listed after
# the run; override with PYTEST_ARGS=.
PYTEST_ARGS ?= -n 2 --durations=15

.PHONY: run test lint bench ci

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@

run: $(BIN)/.installed
	DEMO=1 $(BIN)/python -m app serve

# Bytecode is cached even where the environment says PYTHONDONTWRITEBYTECODE: without the cache
# every test process, and every `python -m app` a test starts, compiles the sources again (about
# 10 s of CPU per test process for the test modules alone).
test: $(BIN)/.installed
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(BIN)/.installed
	$(BIN)/ruff check app tests bench
	$(BIN)/ruff format --check app tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python .ci/tenancy_lint.py
	$(BIN)/python .ci/dialect_lint.py
	$(BIN)/python .ci/states_lint.py

ci:
	.ci/run
