# Lantern: `make run` serves on SQLite, `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
FLASK := $(BIN)/flask --app app
HOST ?= 127.0.0.1
PORT ?= 8000
WORKERS ?= 2
# Every open SSE stream holds one connection of a gevent worker (7-16 KiB each when idle);
# each worker admits streams up to this less 100 kept for ordinary requests.
WORKER_CONNECTIONS ?= 10000
TEST_DATABASE_URL ?= postgresql://postgres@127.0.0.1:5432/test
PIP := $(BIN)/python -m pip install -q --disable-pip-version-check

.PHONY: install install-test chromium run test test-postgres bench lint clean

install: $(VENV)/.installed
# Debian's Chromium, for the browser tests (they skip without it): installed when missing, if apt-get
# and root, said first; otherwise what to install is printed.
install-test: $(VENV)/.installed-test
	@$(MAKE) --no-print-directory chromium

chromium:
	@if command -v chromium >/dev/null; then exit 0; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		echo "Chromium is missing: installing Debian's chromium package with apt-get (about 110 packages," \
		     "some 400 MB, and it may upgrade system packages such as systemd)."; \
		apt-get update -q && apt-get install -y -q chromium || echo "apt-get could not install chromium."; \
	else \
		echo "Chromium is missing and cannot be installed here (needs apt-get as root):" \
		     "install Debian's chromium package (sudo apt-get install chromium); browser tests skip until then."; \
	fi

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip

$(VENV)/.installed: setup.cfg pyproject.toml | $(BIN)/python
	$(PIP) -e .
	touch $@

$(VENV)/.installed-test: setup.cfg pyproject.toml | $(BIN)/python
	$(PIP) -e '.[test]'
	touch $@ $(VENV)/.installed

run: install
	$(FLASK) db upgrade
	$(FLASK) orgs init
	$(BIN)/gunicorn --config gunicorn.conf.py --workers $(WORKERS) \
		--worker-connections $(WORKER_CONNECTIONS) --bind $(HOST):$(PORT) --no-control-socket wsgi:app

test: install-test
	$(BIN)/pytest $(PYTEST_ARGS)

test-postgres: install-test
	TEST_DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/pytest $(PYTEST_ARGS)

bench: install-test
	$(BIN)/python bench/run.py $(BENCH_ARGS)
	$(BIN)/python bench/invocation_fanout.py $(FANOUT_ARGS)
	$(BIN)/python bench/telemetry.py $(TELEMETRY_ARGS)

lint: install-test
	$(PIP) ruff
	$(BIN)/ruff check --isolated --select E,F,W,I,B --line-length 120 app tests bench wsgi.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
