# One place for set-up and checks. `make app` and `make test` are the README's Quick start.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SRC := $(wildcard core gui)
# pytest-xdist workers for `make test` (one per core); `make test TEST_WORKERS=0` runs the suite in one process.
TEST_WORKERS ?= auto

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
	bash .ci/system-deps --tests
	QT_QPA_PLATFORM=offscreen $(VENV)/bin/pytest -n $(TEST_WORKERS) --dist worksteal
	$(VENV)/bin/ruff check $(SRC) tests
	$(MAKE) --no-print-directory typecheck

## Render the main views to PNG (offscreen) into resources/screenshots/.
screenshots: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m memlens.gui.screenshots resources/screenshots

## Speed benchmarks against same-process baselines (see README, "Benchmarks").
bench: $(STAMP)
	$(PY) -m memlens.bench

## Retrieval quality on LoCoMo (the data is not in the repository; LOCOMO points at it).
LOCOMO ?= ../shared/data/locomo/locomo-dev.json
locomo: $(STAMP)
	$(PY) -m memlens.eval.locomo --data $(LOCOMO)

lint: $(STAMP)
	$(VENV)/bin/ruff check $(SRC) tests

# mypy cannot follow the installed name mapping (memlens -> core/, memlens.gui -> gui/), so it checks a tree of
# links laid out as the wheel installs it.
TYPECHECK_TREE := build/typecheck
typecheck: $(STAMP)
	rm -rf $(TYPECHECK_TREE) && mkdir -p $(TYPECHECK_TREE)/memlens
	for f in core/*; do ln -s ../../../$$f $(TYPECHECK_TREE)/memlens/; done
	ln -s ../../../gui $(TYPECHECK_TREE)/memlens/gui
	ln -s ../../../resources $(TYPECHECK_TREE)/memlens/resources
	cd $(TYPECHECK_TREE) && ../../$(VENV)/bin/mypy --config-file ../../pyproject.toml -p memlens

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
