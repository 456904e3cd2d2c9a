# Punctual: `make run` starts the local stack, `make test` runs every check CI runs.
# Both create the virtual environment on first use (Python 3.11+ needed on PATH as python3);
# `make test` also installs the CDK CLI from package.json (Node 20 + npm on PATH).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
NPM_STAMP := node_modules/.installed-stamp
CHROMIUM ?= /usr/bin/chromium
NGINX ?= /usr/sbin/nginx
# checkov in a virtual environment of its own: its pins would downgrade the project's (infra/checkov).
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed-stamp
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export CDK_DISABLE_VERSION_CHECK := 1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: run test lint unit bench bench-minute nginx synth checkov clean console-assets

run: $(STAMP)
	$(BIN)/punctual dev

test: lint $(STAMP) $(NPM_STAMP) $(CHROMIUM) $(NGINX) $(CHECKOV_STAMP)
	$(BIN)/python tests/parallel.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	for handler in functions/*/handler.py; do $(BIN)/mypy --follow-imports=silent "$$handler" || exit 1; done
	$(BIN)/python -m infra.import_graph
	$(BIN)/python -m infra.module_size

unit: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m unit

bench: $(STAMP)
	$(BIN)/punctual bench core
	$(BIN)/punctual bench burst

# 20,000 every-minute jobs for 3 minutes, separate processes, nginx as the webhook (~5 min; loads the machine)
bench-minute: $(STAMP) $(NGINX)
	$(BIN)/punctual bench minute --jobs 20000 --minutes 3

synth: $(STAMP) $(NPM_STAMP)
	npx cdk synth --no-notices -q

checkov: $(STAMP) $(CHECKOV_STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/infra/test_checkov.py

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Punctual needs Python 3.11+ as $(PYTHON)")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

# The console's browser tests drive Debian's chromium (Playwright cannot download its own here).
$(CHROMIUM):
	apt-get update -qq && apt-get install -y -qq chromium

# The minute bench's webhook (Debian's nginx-light); without it the bench uses the project's no-op target.
$(NGINX):
	scripts/install-nginx || echo "nginx not installed: punctual bench minute uses the project's no-op target"

nginx: $(NGINX)

# Refresh the console's vendored npm libraries (committed; the wheel ships them, no Node at runtime).
console-assets: $(STAMP) $(NPM_STAMP)
	$(BIN)/python -m punctual.console.vendor node_modules

$(CHECKOV_STAMP): infra/checkov/requirements.txt
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install -q -r infra/checkov/requirements.txt
	touch $(CHECKOV_STAMP)

$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $(NPM_STAMP)

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) .pytest_cache .mypy_cache .ruff_cache cdk.out node_modules
