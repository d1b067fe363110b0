# The two commands of the README:
#   make run    the demo agent, relay and SPA on http://127.0.0.1:8000 (embedded defaults)
#   make test   everything the tests need, then lint + JS unit tests + pytest
# Both create .venv and install the project on first use, and again when pyproject.toml
# or the lock changes: at exactly the versions of requirements/lock.txt (pip, the build
# backend and every dependency), the ones CI tested. `make lock` refreshes the lock.
# Apart from them: `make bench` (the relay's own benchmarks) and `make bench-peer` (side
# by side with the LangGraph Agent Server, installed into a throwaway venv of its own).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# make run's address: names no shell or CI sets (zsh and tcsh set HOST to the machine's
# name, PaaS and CI images set PORT, and `?=` would take them from the environment)
RELAY_HOST ?= 127.0.0.1
RELAY_PORT ?= 8000
LOCK := requirements/lock.txt
# `make lock` takes the newest versions pyproject.toml's ranges allow; LOCK_FLAGS= keeps
# the current pins and changes only what a changed pyproject.toml needs
LOCK_FLAGS ?= --upgrade

.PHONY: run test setup setup-run system-deps lint bench bench-peer bench-peer-same-client lock clean

# $(1): the extras, $(2): dependency groups (--group test). The locked pip first (it knows --build-constraint), then the project.
define install
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -c $(LOCK) --upgrade pip
	$(BIN)/pip install --quiet -c $(LOCK) --build-constraint $(LOCK) -e '.[$(1)]' $(2)
	@touch $@
endef

# make run: the embedded default and the demo agent ([demo])
$(VENV)/.installed-run: pyproject.toml $(LOCK)
	$(call install,demo)

# make test (and .ci/run): every extra and the test tools (the dependency group `test`,
# never published with the wheel)
$(VENV)/.installed-test: pyproject.toml $(LOCK)
	$(call install,all,--group test)

setup-run: $(VENV)/.installed-run

setup: $(VENV)/.installed-test

run: setup-run
	$(BIN)/span-relay serve --host $(RELAY_HOST) --port $(RELAY_PORT)

# Debian packages the tests drive for real: Chromium (browser tests), nginx (proxy tests).
system-deps:
	@bash tests/system-deps.sh

# ruff on everything (the formatter's layout, then the linter); mypy on the library (mypy.ini)
lint: setup
	$(BIN)/ruff format --check relay span_relay_demo tests
	$(BIN)/ruff check relay span_relay_demo tests
	$(BIN)/mypy

# pytest on every core, two workers a core: most tests wait on a server, a browser or a
# subprocess, not on the CPU (tests/conftest.py gives each worker its own ports, data
# folders, PostgreSQL database and Redis database number, and says how the tests are
# shared out: a module with a module-scoped fixture to one worker, the rest one by one,
# the longest first). Bytecode is cached even where PYTHONDONTWRITEBYTECODE is set: without
# it every worker and every server the tests start compiles (and pytest rewrites) hundreds
# of modules again.
PYTEST_WORKERS ?= 4
test: setup system-deps lint
	node --test tests/js/
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadgroup --durations=20

bench: setup
	$(BIN)/pip install --quiet -c $(LOCK) --group bench
	$(BIN)/python -m tests.bench

# Side by side with the LangGraph Agent Server (docs/performance.md): installs the peer
# (langgraph-cli[inmem], pinned in tests/bench/peer/requirements-peer.txt) into its own
# throwaway venv under .span-relay/, never into the project's; not part of `make test`.
bench-peer: setup
	$(BIN)/python -m tests.bench.peer

# The same Agent Server client code against both servers (issue 34's side-by-side table)
bench-peer-same-client: setup
	$(BIN)/python -m tests.bench.peer.same_client

# Refresh requirements/lock.txt from pyproject.toml and requirements/tools.in: every extra,
# Python 3.11 and later, any OS. uv comes from the lock itself (into .venv), and after
# the refresh .venv's uv is the newly locked one.
lock:
	test -x $(BIN)/pip || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -c $(LOCK) uv
	$(BIN)/uv pip compile --quiet --universal --python-version 3.11 --all-extras \
	    --group pyproject.toml:test --group pyproject.toml:bench \
	    --custom-compile-command 'make lock' $(LOCK_FLAGS) \
	    pyproject.toml requirements/tools.in -o $(LOCK)
	$(BIN)/pip install --quiet -c $(LOCK) uv

clean:
	rm -rf $(VENV) .span-relay .pytest_cache .ruff_cache
