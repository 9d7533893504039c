# Lantern: `make run` serves on SQLite, `make test` runs the suite.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
FLASK := $(BIN)/flask --app app
HOST ?= 127.0.0.1
PORT ?= 8000
BROWSER_HOST_PORT ?= 8790
WORKERS ?= 2
# Every open SSE stream holds one connection of a gevent worker (7-16 KiB each when idle);
# each worker admits streams up to this less 100 kept for ordinary requests.
WORKER_CONNECTIONS ?= 10000
TEST_DATABASE_URL ?= postgresql://postgres@127.0.0.1:5432/test
PIP := $(BIN)/python -m pip install -q --disable-pip-version-check

.PHONY: install install-test browser-packages sandbox-user ts-sdk node-packages bench-packages run test test-postgres bench bench-instructions lint \
	constraints upgrade-check clean
comma := ,

install: $(VENV)/.installed
# Debian's Chromium and Xvfb (headful browsers), for the browser host and the browser tests; what
# each session's sandbox is built from (browserhost/sandbox.py: bubblewrap, slirp4netns, nftables,
# systemd's socket proxy, dnsmasq, with iproute2's ip and util-linux's setpriv); and nginx, which the tests put in
# front of two app servers (never started as a service): installed when missing, if apt-get and
# root, said first; otherwise what to install is printed. xdotool and ffmpeg act on and grab a headful
# session's display for the computer API (browserhost/computer.py), inside its sandbox; xmodmap
# (x11-xserver-utils) gives the characters no key types keys of their own there.
BROWSER_PACKAGES := chromium xvfb bubblewrap slirp4netns nftables systemd dnsmasq-base iproute2 util-linux nginx \
	xdotool x11-xserver-utils ffmpeg
# The unprivileged user every sandbox runs as (BROWSER_SANDBOX_USER); created when missing, as root.
SANDBOX_USER ?= lantern-browser
# wrk drives bench/run.py's reads (a C client leaves the server the CPU it shares with it).
BENCH_PACKAGES := wrk
# The tests start a Redis of their own (tests/redis_server.py) for the Redis wake-up path.
TEST_PACKAGES := redis-server
install-test: $(VENV)/.installed-test
	@$(MAKE) --no-print-directory browser-packages
	$(call debian-packages,$(TEST_PACKAGES), (one package; the tests start their own on a free port),the Redis \
		wake-up tests skip)
	@$(MAKE) --no-print-directory ts-sdk

# Kernel's TypeScript SDK, at the version tests/ts/package-lock.json pins, for the test that runs it with node
# (tests/browsers/live/test_files.py): `npm ci` puts it in tests/ts/node_modules when that is missing or older than
# the lock file, and fetches nothing once it is there. Node and npm come from Debian when there is no npm.
TS_PROJECT := tests/ts
ts-sdk:
	@command -v npm >/dev/null || $(MAKE) --no-print-directory node-packages
	@if [ $(TS_PROJECT)/node_modules/.package-lock.json -nt $(TS_PROJECT)/package-lock.json ]; then exit 0; \
	elif ! command -v npm >/dev/null; then echo "No npm: the TypeScript SDK's test skips."; \
	else echo "Installing Kernel's TypeScript SDK (@onkernel/sdk, one package) into $(TS_PROJECT)/node_modules with npm ci."; \
		npm ci --prefix $(TS_PROJECT) --no-audit --no-fund --loglevel=error \
			|| echo "npm ci could not install it: the TypeScript SDK's test skips."; \
	fi

node-packages:
	$(call debian-packages,nodejs npm, (node and npm$(comma) for the TypeScript SDK's test),the TypeScript SDK's \
		test skips)

# $(call debian-packages,packages,what installing says,what lacking them means)
define debian-packages
	@missing="$$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done | xargs)"; \
	if [ -z "$$missing" ]; then exit 0; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
		echo "Installing Debian's $$missing with apt-get$(2)."; \
		apt-get update -q && apt-get install -y -q $$missing || echo "apt-get could not install $$missing."; \
	else \
		echo "Missing: $$missing. Install them (sudo apt-get install $$missing): until then $(3)."; \
	fi
endef

browser-packages:
	$(call debian-packages,$(BROWSER_PACKAGES), (Chromium is about 110 packages$(comma) some 400 MB$(comma) and may \
		upgrade system packages such as systemd),browsers cannot start (creates answer 503 no_browser_host) and \
		the browser tests skip)
	@$(MAKE) --no-print-directory sandbox-user

sandbox-user:
	@if id -u $(SANDBOX_USER) >/dev/null 2>&1; then exit 0; \
	elif [ "$$(id -u)" = 0 ] && command -v useradd >/dev/null; then \
		echo "Creating the system user $(SANDBOX_USER), which browser sandboxes run as (no home, no login)."; \
		useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin $(SANDBOX_USER); \
	else \
		echo "No user $(SANDBOX_USER): create it (sudo useradd --system --no-create-home --shell /usr/sbin/nologin \
	$(SANDBOX_USER)) or name another in LANTERN_BROWSER_SANDBOX_USER; until then hosts start no browser."; \
	fi

bench-packages:
	$(call debian-packages,$(BENCH_PACKAGES), (one small package),bench/run.py drives reads from Python threads \
		instead (slower: the client takes CPU from the server))

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip

# The package alone is a browser host's install (what deploy/install-browser-host puts on a host machine); the
# `server` extra adds the app's dependencies, so this venv runs both (make run starts one of each).
$(VENV)/.installed: setup.cfg pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -c constraints.txt -e '.[server]'
	touch $@

$(VENV)/.installed-test: setup.cfg pyproject.toml constraints.txt | $(BIN)/python
	$(PIP) -c constraints.txt -e '.[server,test]'
	touch $@ $(VENV)/.installed

# constraints.txt anew from this .venv (after the suite passed on what it holds).
constraints: install-test
	$(PIP) -c constraints.txt ruff
	@{ sed -n '/^#/p' constraints.txt; $(BIN)/python -m pip freeze --exclude-editable; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

# The newest versions setup.cfg allows (no constraints.txt), in a throwaway venv, against the whole suite:
# what a pin's next bug-fix release would change. Then `make constraints` in a venv that passed.
UPGRADE_VENV ?= /tmp/lantern-upgrade-check
upgrade-check:
	rm -rf $(UPGRADE_VENV) && $(PYTHON) -m venv $(UPGRADE_VENV)
	$(UPGRADE_VENV)/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(UPGRADE_VENV)/bin/python -m pip install -q --disable-pip-version-check --upgrade -e '.[server,test]'
	@$(UPGRADE_VENV)/bin/python -m pip freeze --exclude-editable | diff <(grep -v -e '^#' -e '^ruff==' constraints.txt) - \
		&& echo "Nothing newer is allowed." || echo "(< tested, > newest allowed)"
	$(UPGRADE_VENV)/bin/pytest $(PYTEST_ARGS)

# The API (gunicorn) and a browser host beside it (its own program, `python -m browserhost`, with
# no database access: it talks to the API with the credential `browsers hosts add` gives it, made
# anew at each start); Ctrl-C stops both (the host stops its browsers). A host that dies is started
# again (its sessions end host_restarted) while the API goes on serving; one that was stopped (exit
# status 0), cannot take its port (3, said in one line) or was refused by the API (4) is not.
run: install browser-packages
	$(FLASK) db upgrade
	$(FLASK) orgs init
	@credential="$$($(FLASK) browsers hosts add local --address http://127.0.0.1:$(BROWSER_HOST_PORT) --replace --quiet)" || exit 1; \
	$(BIN)/gunicorn --config gunicorn.conf.py --workers $(WORKERS) \
		--worker-connections $(WORKER_CONNECTIONS) --bind $(HOST):$(PORT) --no-control-socket wsgi:app & app=$$!; \
	( trap 'kill $$child 2>/dev/null; wait $$child; exit 0' TERM; while kill -0 $$app 2>/dev/null; do \
		LANTERN_BROWSER_HOST_CREDENTIAL="$$credential" LANTERN_APP_URL=http://127.0.0.1:$(PORT) \
			$(BIN)/python -m browserhost --bind 127.0.0.1:$(BROWSER_HOST_PORT) & child=$$!; wait $$child; status=$$?; \
		case $$status in 0|3|4|5) exit $$status;; esac; kill -0 $$app 2>/dev/null || exit 0; \
		echo "The browser host stopped (exit status $$status); starting a new one: its sessions end host_restarted."; \
		sleep 1; \
	done ) & host=$$!; \
	trap 'kill $$host $$app 2>/dev/null; wait' INT TERM; \
	wait $$app; kill $$host 2>/dev/null; wait

test: install-test
	$(BIN)/pytest $(PYTEST_ARGS)

test-postgres: install-test
	TEST_DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/pytest $(PYTEST_ARGS)

bench: install-test bench-packages
	$(BIN)/python bench/run.py $(BENCH_ARGS)
	$(BIN)/python bench/invocation_fanout.py $(FANOUT_ARGS)
	$(BIN)/python bench/telemetry.py $(TELEMETRY_ARGS)
	$(BIN)/python bench/browsers.py $(BROWSER_BENCH_ARGS)
	$(BIN)/python bench/capture.py $(CAPTURE_BENCH_ARGS)
	$(BIN)/python bench/wakeups.py $(WAKEUPS_BENCH_ARGS)
	$(BIN)/python bench/archive_pages.py $(ARCHIVE_BENCH_ARGS)
	$(BIN)/python bench/computer.py $(COMPUTER_BENCH_ARGS)
	$(BIN)/python bench/files.py $(FILES_BENCH_ARGS)
	$(BIN)/python bench/exec.py $(EXEC_BENCH_ARGS)

# Instructions per request of each read beside the hello world (bench/instructions.py): steadier
# than bench/run.py's wall-clock ratios on a noisy machine, and slow (about 5 minutes); not in bench.
bench-instructions: install-test
	$(call debian-packages,valgrind, (one package),bench/instructions.py cannot run)
	$(BIN)/python bench/instructions.py $(INSTRUCTIONS_ARGS)

lint: install-test
	$(PIP) -c constraints.txt ruff
	$(BIN)/ruff check --isolated --select E,F,W,I,B --line-length 120 app browserhost lantern_wire tests bench wsgi.py gunicorn.conf.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
