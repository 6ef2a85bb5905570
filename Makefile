# podmedic — every target works on a fresh machine: `install` builds .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PACKAGES := podmedic podmedic_sim workflows activities workers benchmarks

.PHONY: install demo test fuzz mutants lint clean

install: $(STAMP)

# Bytecode is compiled once: with PYTHONDONTWRITEBYTECODE set, the workflow sandbox would
# otherwise compile every module from source for every new incident.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,sim]'
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib $(PACKAGES) >/dev/null
	touch $(STAMP)

demo: install
	$(BIN)/podmedic demo

test: install
	$(BIN)/pytest -q -m "not slow"

# The long property-based runs (10,000 generated cases each).
fuzz: install
	$(BIN)/pytest -q -m slow

# Each README claim's tests, run with a bug that breaks the claim (tests/mutants/catalog.py): all must fail.
mutants: install
	$(BIN)/python -m tests.mutants --json bench/results/mutants.json

# ruff, mypy --strict, and the import contracts of pyproject.toml ([tool.importlinter]).
lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy $(PACKAGES)
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache state
