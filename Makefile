# The two commands that matter: `make demo` and `make test`. Both install what they need.
# `make bench [SIZE=10k|100k|1m|curve] [SEED=n]` measures speed at scale on a throwaway cluster.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
APT_PACKAGES := postgresql-15 postgresql-15-cron postgresql-15-pgtap postgresql-15-plpgsql-check \
	libtap-parser-sourcehandler-pgtap-perl
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

SIZE ?= 100k
SEED ?= 42

.PHONY: install system-packages demo test lint bench clean

install: system-packages $(VENV)/.installed node_modules/.installed

# Debian 12 packages for the embedded PostgreSQL, pg_cron, pgTAP, plpgsql_check and pg_prove.
system-packages:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages: $$missing"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi

$(VENV)/.installed: pyproject.toml
	@echo "installing the Python package into $(VENV) (first time: about a minute)"
	@test -x $(PY) || python3 -m venv $(VENV)
	@$(VENV)/bin/pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $@

node_modules/.installed: package.json package-lock.json
	@echo "installing the pinned Supabase CLI (npm ci)"
	@npm ci --silent --no-audit --no-fund
	@touch $@

demo: install
	@$(VENV)/bin/zm-roi demo

test: install
	@$(PY) -m pytest

# Report in bench/results/<date>-<SIZE>.md (+ .json). 100k takes a few minutes; curve (10k, 100k
# and 1m in one report) about half an hour on 2 cores.
bench: install
	@$(PY) -m zm_roi.bench --size $(SIZE) --seed $(SEED)

lint: install
	@$(VENV)/bin/ruff check python tests
	@$(VENV)/bin/ruff format --check python tests

clean:
	rm -rf $(VENV) node_modules .zm
