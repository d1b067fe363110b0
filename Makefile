# The two commands of the README:
#   make run    the demo agent, relay and SPA on http://127.0.0.1:8000 (embedded defaults)
#   make test   everything the tests need, then lint + JS unit tests + pytest
# Both create .venv and install the project from pyproject.toml on first use.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test setup system-deps lint bench clean

$(BIN)/span-relay: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $@

setup: $(BIN)/span-relay

run: setup
	$(BIN)/span-relay serve --host $(HOST) --port $(PORT)

# Debian packages the tests drive for real: Chromium (browser tests), nginx (proxy tests).
system-deps:
	@bash tests/system-deps.sh

lint: setup
	$(BIN)/ruff check relay agent tests

test: setup system-deps lint
	node --test tests/js/
	$(BIN)/pytest -q

bench: setup
	$(BIN)/python -m tests.bench

clean:
	rm -rf $(VENV) .span-relay .pytest_cache .ruff_cache
