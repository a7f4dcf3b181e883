# The README's two commands: `make serve` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# `make serve` installs the runtime dependencies only; the suite's tools come with `make test`.
SERVE_STAMP := $(VENV)/.serve-installed-stamp
# The TypeScript client contract test's npm packages (tests/contract), pinned by package-lock.json.
TS_DIR := tests/contract/ts
TS_STAMP := $(TS_DIR)/node_modules/.installed-stamp

.PHONY: install serve test docs bench bench-memory soak openapi lint clean

$(SERVE_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $(SERVE_STAMP)

$(STAMP): $(SERVE_STAMP)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# npm ci replaces node_modules and the stamp in it; it runs again when the lock changes.
$(TS_STAMP): $(TS_DIR)/package-lock.json
	npm ci --prefix $(TS_DIR) --no-audit --no-fund
	touch $(TS_STAMP)

install: $(STAMP) $(TS_STAMP)

# Serving needs only the runtime Python packages (no Node.js, no test tools).
serve: $(SERVE_STAMP)
	mkdir -p data
	$(VENV)/bin/dexlite serve

# Test modules run on TEST_WORKERS workers at once (pytest-xdist, one module per worker): most of
# the suite waits on servers, subprocesses and the browser rather than the CPU. The modules go
# out in the order tests/conftest.py gives them (the longest first).
# Side by side, the SQLite half takes SQLITE_WORKERS and the PostgreSQL half POSTGRES_WORKERS
# (4 and 4 measured 10.5 min here, 5 and 3 11 min, 6 and 6 13 min: the CPU is then the limit).
TEST_WORKERS ?= 4
SQLITE_WORKERS ?= $(TEST_WORKERS)
POSTGRES_WORKERS ?= $(TEST_WORKERS)
PYTEST_ON = $(PY) -m pytest -n $(1) --dist loadscope --no-loadscope-reorder --durations=25
PYTEST := $(call PYTEST_ON,$(TEST_WORKERS))

# The suite runs on SQLite and on PostgreSQL (DEXLITE_TEST_BACKEND=postgres) when a server
# answers at DEXLITE_TEST_POSTGRES (default 127.0.0.1:5432); with DEXLITE_REQUIRE_POSTGRES=1 (CI)
# the PostgreSQL half always runs, and an unreachable server fails it. The two halves run side
# by side (alone, each leaves a third of two cores idle while its tests wait on servers and
# subprocesses); each one's output is kept in TEST_LOGS and printed whole when both have ended.
TEST_LOGS := .test-logs

test: install
	@if [ "$${DEXLITE_REQUIRE_POSTGRES:-}" = 1 ] || $(PY) -m tests.support.backends; then \
		mkdir -p $(TEST_LOGS); \
		echo "== the suite on SQLite and on PostgreSQL, side by side (logs in $(TEST_LOGS)/) =="; \
		$(call PYTEST_ON,$(SQLITE_WORKERS)) > $(TEST_LOGS)/sqlite.log 2>&1 & lite=$$!; \
		DEXLITE_TEST_BACKEND=postgres $(call PYTEST_ON,$(POSTGRES_WORKERS)) \
			> $(TEST_LOGS)/postgres.log 2>&1; pg=$$?; \
		wait $$lite; lite=$$?; \
		echo "== SQLite =="; cat $(TEST_LOGS)/sqlite.log; \
		echo "== PostgreSQL =="; cat $(TEST_LOGS)/postgres.log; \
		echo "== SQLite half: exit $$lite; PostgreSQL half: exit $$pg =="; \
		[ $$lite = 0 ] && [ $$pg = 0 ]; \
	else \
		$(PYTEST); lite=$$?; \
		echo "PostgreSQL half skipped: no server (set DEXLITE_TEST_POSTGRES, or start one)"; \
		exit $$lite; \
	fi

# The documentation site, built in strict mode (a broken link or reference fails it) into site/.
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict

BENCH_STAMP := $(VENV)/.bench-installed-stamp

# The bench extra (DBOS Transact, for flow_throughput's comparison) goes in only for `make bench`.
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

# Every scenario (11-12 minutes on a 2-core machine), then the goals table (bench/goals.toml, bench/README.md).
bench: $(BENCH_STAMP)
	$(PY) -m bench

# Not part of `make bench`, which it would outlast: goal 5, the server's RSS after MEMORY_FLOWS
# Flows and MEMORY_RPCS RPCs over HTTP and over MEMORY_MINUTES more of the same load (the goal's
# sizes by default: most of an hour here). It leaves bench/results/memory.json for the goals table.
MEMORY_FLOWS ?= 100000
MEMORY_RPCS ?= 1000000
MEMORY_MINUTES ?= 10

bench-memory: $(STAMP)
	$(PY) -m bench.memory --flows $(MEMORY_FLOWS) --rpcs $(MEMORY_RPCS) --minutes $(MEMORY_MINUTES)

# Not part of `make test`: one server on 127.0.0.1 under mixed load for SOAK_MINUTES, then a
# check of every acknowledged write, the errors seen and the server's peak RSS.
SOAK_MINUTES ?= 10

soak: $(STAMP)
	$(PY) -m soak --minutes $(SOAK_MINUTES)

openapi: install
	$(VENV)/bin/dexlite openapi --output openapi.json

lint: install
	$(VENV)/bin/ruff check engine app patterns tests bench soak
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) data $(TEST_LOGS) .pytest_cache .mypy_cache .ruff_cache $(TS_DIR)/node_modules
