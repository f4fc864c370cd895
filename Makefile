# pt2aws: `make run` (all notebooks, profile local) and `make test`. `make help` lists targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PROFILE ?= local
STAMP := $(VENV)/.installed-stamp
export PATH := $(abspath $(VENV))/bin:$(PATH)
export TOKENIZERS_PARALLELISM := false

.PHONY: help setup run test lint format kernel lab clean bench

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

setup: $(STAMP) ## create .venv and install everything (skipped when up to date)

# The install commands and their extra pins live in scripts/setup-env.sh (the notebooks' kernel
# check names it too, for a terminal without make).
$(STAMP): pyproject.toml scripts/setup-env.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	bash scripts/setup-env.sh $(PY)
	touch $(STAMP)

run: setup ## notebooks 00-03 into runs/<UTC timestamp>/ (PROFILE=, DATA=your file: README)
	$(PY) -m pt2aws.pipeline --profile $(PROFILE) --data "$(DATA)" --model "$(MODEL)" \
	    --text-column "$(TEXT_COLUMN)" --label-column "$(LABEL_COLUMN)" --header "$(HEADER)" \
	    --encoding "$(ENCODING)" --label-map "$(LABEL_MAP)" --max-length "$(MAX_LENGTH)"

test: setup ## unit tests and every notebook headless (smoke profile), offline
	$(PY) -m pytest -m "not container"  # the serving image has its own target: make container

bench: setup ## A/B training speed table on this machine (benchmarks/train_speed.py; not a test)
	$(PY) benchmarks/train_speed.py

lint: setup ## check only: ruff lint + format, notebooks stripped of outputs
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/nbstripout --verify notebooks/*.ipynb

format: setup ## fix: ruff format + autofix, strip notebook outputs
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .
	$(VENV)/bin/nbstripout notebooks/*.ipynb

kernel: setup ## register this environment as the Jupyter kernel "pt2aws" (Studio/JupyterLab)
	$(PY) -m ipykernel install --user --name pt2aws --display-name "Python (pt2aws)"

lab: setup ## start JupyterLab on the notebooks
	$(VENV)/bin/jupyter lab notebooks/

clean: ## remove the venv, caches and runs
	rm -rf $(VENV) .pytest_cache .ruff_cache runs src/*.egg-info

.PHONY: container dockerlint

container: setup ## build the serving image (podman) and run the contract suite against it
	bash container/install-podman.sh
	$(PY) -m pytest -m container tests/contract

dockerlint: setup ## check only: hadolint container/Dockerfile
	$(VENV)/bin/hadolint container/Dockerfile
