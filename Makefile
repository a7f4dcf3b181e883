# The README's two commands: `make serve` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: install serve test bench openapi lint clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,postgres]'
	touch $(STAMP)

install: $(STAMP)

serve: install
	mkdir -p data
	$(VENV)/bin/dexlite serve

test: install
	$(PY) -m pytest

BENCH_STAMP := $(VENV)/.bench-installed-stamp

# The bench extra (DBOS Transact, for flow_throughput's comparison) goes in only for `make bench`.
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) -m bench

openapi: install
	$(VENV)/bin/dexlite openapi --output openapi.json

lint: install
	$(VENV)/bin/ruff check engine app patterns tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache
