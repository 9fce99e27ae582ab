# Two commands set up a fresh machine and do the work: `make demo` and `make test`.
# Everything is installed into .venv (created on first use) from the package registries.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# The example op pack is installed too: its tests run with the suite, and discovery finds it.
PACKAGES := packages/trama-core packages/trama-numpy packages/trama-torch packages/trama-jax packages/trama-onnx packages/trama-model-explorer examples/trama-lenses
SOURCES := $(wildcard $(addsuffix /pyproject.toml,$(PACKAGES))) requirements/dev.txt

.PHONY: setup demo test lint typecheck unit bench clean

setup: $(STAMP)

$(STAMP): $(SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements/dev.txt $(addprefix -e ,$(PACKAGES))
	touch $(STAMP)

## Export a model, save it, print its SSA, load it back and validate it.
demo: $(STAMP)
	$(PY) demo/demo.py

## Everything CI checks: lint, types, and the whole test suite.
test: lint typecheck unit

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

unit: $(STAMP)
	$(PY) -m pytest

## Benchmarks (not part of the tests): figures side by side with their references.
bench: $(STAMP)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
