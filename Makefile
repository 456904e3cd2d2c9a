# Punctual: `make run` starts the local stack, `make test` runs every check CI runs.
# Both create the virtual environment on first use (Python 3.11+ needed on PATH as python3).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run test lint unit bench clean

run: $(STAMP)
	$(BIN)/punctual dev

test: lint $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -q -m unit

bench: $(STAMP)
	$(BIN)/punctual bench core

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Punctual needs Python 3.11+ as $(PYTHON)")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache cdk.out node_modules
