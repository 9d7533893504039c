# Lantern: `make run` serves on SQLite, `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
FLASK := $(BIN)/flask --app app
HOST ?= 127.0.0.1
PORT ?= 8000
WORKERS ?= 2
# Every open SSE stream holds one connection of a gevent worker.
WORKER_CONNECTIONS ?= 1000
TEST_DATABASE_URL ?= postgresql://postgres@127.0.0.1:5432/test
INSTALLED := $(VENV)/.installed

.PHONY: install run test test-postgres bench clean

install: $(INSTALLED)

$(INSTALLED): setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test]'
	touch $@

run: install
	$(FLASK) db upgrade
	$(FLASK) orgs init
	$(BIN)/gunicorn --worker-class gevent --workers $(WORKERS) \
		--worker-connections $(WORKER_CONNECTIONS) --bind $(HOST):$(PORT) --no-control-socket wsgi:app

test: install
	$(BIN)/pytest $(PYTEST_ARGS)

test-postgres: install
	TEST_DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/pytest $(PYTEST_ARGS)

bench: install
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
