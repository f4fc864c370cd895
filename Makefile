# pt2aws: `make run` (all notebooks, profile local) and `make test`. `make help` lists targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PROFILE ?= local
STAMP := $(VENV)/.installed-stamp
export PATH := $(abspath $(VENV))/bin:$(PATH)
export TOKENIZERS_PARALLELISM := false

.PHONY: help setup run test test-exercises test-browser lint format kernel lab clean bench

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

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
	$(PY) -m pytest -m "not container and not exercises and not browser and not aws" \
	    -n auto --dist loadfile --durations=15  # image: make container

test-exercises: setup ## every notebook "Try next" exercise run as written (CI runs it after make test)
	$(PY) -m pytest -m exercises tests/notebooks

BROWSER_STAMP := $(VENV)/.browser-stamp
$(BROWSER_STAMP): $(STAMP) scripts/install-browser.sh
	bash scripts/install-browser.sh $(PY)
	touch $(BROWSER_STAMP)

test-browser: $(BROWSER_STAMP) ## Run All on notebooks 00-03 in JupyterLab, headless Chromium (screenshots: runs/)
	$(PY) -m pytest -m browser -rA tests/browser

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

.PHONY: container container-arm64 dockerlint

container: setup ## build the serving image (podman) and run the contract suite against it
	bash container/install-podman.sh
	$(PY) -m pytest -m container tests/contract

# linux/arm64 (Graviton) on an x86 machine runs under QEMU user emulation: slow (see
# container/README.md for times); core dumps off, a crash under QEMU otherwise writes one for minutes.
# IMAGE_VARIANTS=eager,int8 starts the image with fewer PT2AWS_VARIANT values (default: all).
container-arm64: setup ## build the linux/arm64 image under QEMU and run the contract suite against it
	bash container/install-podman.sh
	bash container/install-emulation.sh
	ulimit -c 0; $(PY) -m pytest -m container tests/contract/test_container.py --image-arch arm64 \
	    $(if $(IMAGE_VARIANTS),--image-variants $(IMAGE_VARIANTS))

dockerlint: setup ## check only: hadolint container/Dockerfile
	$(VENV)/bin/hadolint container/Dockerfile
