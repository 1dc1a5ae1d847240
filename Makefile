# contrastive-bench. Two commands do all the set-up on a fresh machine:
#   make run    create .venv if missing, install, and run the DVC pipeline (dvc repro)
#   make test   the same set-up, then pytest
# make run PROFILE=profiles/<name>.yaml lays that profile's keys over params.yaml.
# make run SUITE=suites/<name>.yaml runs every task of the suite as one DVC pipeline in runs/<name>/.

VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
PROFILE ?=
SUITE   ?=
PYTEST_ARGS ?=
# pytest-xdist processes (idle ones steal tests from busy ones). The slow tests run one
# subprocess chain at a time (DVC -> a stage -> Ray or Dask) that keeps about one core busy, so
# two streams fill this machine's two cores. TEST_WORKERS=1 for one stream.
TEST_WORKERS ?= 2

# Larger mmap/trim thresholds make large-batch torch steps ~1.5x faster here (DESIGN.md).
export MALLOC_MMAP_THRESHOLD_ ?= 1000000000
export MALLOC_TRIM_THRESHOLD_ ?= 1000000000
export PYTHONUNBUFFERED := 1

.PHONY: run test bench lint typecheck docs clean-outputs clean-store

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
ifneq ($(SUITE),)
	@test -z "$(PROFILE)" || { echo "make run: SUITE=$(SUITE) and PROFILE=$(PROFILE): a suite's tasks hold their own params; give one of them"; exit 2; }
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/cbench suite $(SUITE) --repro
else
	CBENCH_PROFILE=$(PROFILE) PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/dvc repro
	@echo "leaderboard: $(CURDIR)/reports/leaderboard.md (also .csv); metrics: reports/metrics.json"
endif
	@echo "browse runs: $(VENV)/bin/mlflow ui --backend-store-uri sqlite:///mlruns.db --host 127.0.0.1"

test: $(STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m pip install -q -e '.[dev,bench]'
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# The screenshots in docs/ (the release site in headless Chromium); a test run writes none of them.
# RELEASES=<folder of releases> also renders that site with docs/FINDINGS.md: docs/site_findings.png.
RELEASES ?=
docs: $(STAMP)
	CBENCH_DOCS_SHOTS=1 PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -q -p no:cacheprovider \
	  tests/release/test_release_site_chromium.py
ifneq ($(RELEASES),)
	$(VENV)/bin/cbench site $(RELEASES) --findings docs/FINDINGS.md -o .cbench/site
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,1400 \
	  --screenshot=docs/site_findings.png "file://$(CURDIR)/.cbench/site/index.html"
endif

lint: $(STAMP)
	$(VENV)/bin/ruff check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# The workspace's outputs; the cells stay in the cell store (shared by every clone: clean-store).
clean-outputs:
	rm -rf data/datasets data/*.parquet data/grid.json reports dvc.lock params.resolved.yaml \
	  params.tracked.yaml mlruns.db mlruns.db.lock mlartifacts mlruns runs

CBENCH_STORE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/contrastive-bench
clean-store:
	@echo "removing the cell store $(CBENCH_STORE) (shared by every clone on this machine)"
	rm -rf "$(CBENCH_STORE)"
