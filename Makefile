# One place for set-up and checks. `make app` and `make test` are the README's Quick start.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SRC := $(wildcard core gui)

.PHONY: app test lint typecheck screenshots bench locomo system-deps clean

$(STAMP): pyproject.toml
	bash .ci/system-deps
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

system-deps:
	bash .ci/system-deps

## Install everything and open the inspector on the default store.
app: $(STAMP)
	$(VENV)/bin/memlens gui

## Install everything, then run the tests, the linter and the type checker.
test: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(VENV)/bin/pytest
	$(VENV)/bin/ruff check $(SRC) tests
	$(VENV)/bin/mypy $(SRC)

## Render the main views to PNG (offscreen) into resources/screenshots/.
screenshots: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m gui.screenshots resources/screenshots

## Speed benchmarks against same-process baselines (see README, "Benchmarks").
bench: $(STAMP)
	$(PY) -m core.bench

## Retrieval quality on LoCoMo (the data is not in the repository; LOCOMO points at it).
LOCOMO ?= ../shared/data/locomo/locomo-dev.json
locomo: $(STAMP)
	$(PY) -m core.eval.locomo --data $(LOCOMO)

lint: $(STAMP)
	$(VENV)/bin/ruff check $(SRC) tests

typecheck: $(STAMP)
	$(VENV)/bin/mypy $(SRC)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
