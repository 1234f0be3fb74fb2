# The whole set-up on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
export PORT
# `make serve` listens on loopback only: gunicorn's sync workers must not face the internet
# (docs/SECURITY.md). HOST=0.0.0.0 makes it reachable from elsewhere, e.g. from a proxy.
HOST ?= 127.0.0.1

.PHONY: serve test check typecheck lint openapi test-docker lock fuzz load bench capacity clean

# The virtual environment is rebuilt whenever the project's declared dependencies change.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

serve: $(VENV)/.installed
	@echo "serve: http://$(HOST):$(PORT) is for one machine: gunicorn's sync workers must never"
	@echo "serve: face a network directly; serve others through nginx (docker compose up)"
	$(BIN)/gunicorn --config gunicorn.conf.py --bind '$(HOST):$(PORT)' 'service.app:create_app()'

# checkov scans deploy/kubernetes (tests/test_kubernetes.py). It lives in a virtual environment of
# its own: it pins versions of packaging, networkx and others that the service's tests also use.
CHECKOV_VERSION := 3.3.30
CHECKOV := $(VENV)/checkov/bin/checkov
$(CHECKOV): | $(BIN)/python
	$(PYTHON) -m venv $(VENV)/checkov
	$(VENV)/checkov/bin/pip install --quiet 'checkov==$(CHECKOV_VERSION)'

# Everything, as CI runs it: lint, formatting and the whole suite, slow tests included.
test: $(VENV)/.installed $(CHECKOV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	CHECKOV=$(CHECKOV) $(BIN)/python -m pytest

# The fast loop while editing: lint and every test not marked `slow` (no server processes, no
# fuzzing, no sweep of hostile inputs).
check: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -m "not slow"

# Strict type checking of service/ (settings in pyproject.toml).
typecheck: $(VENV)/.installed
	$(BIN)/mypy

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# openapi.yaml is generated from the code; tests/test_openapi.py fails when it is out of date.
openapi: $(VENV)/.installed
	$(BIN)/python -m service.api.spec openapi.yaml

# Build the image, start it (alone and as three replicas behind nginx), smoke-test, tear down;
# then the swarm stack: a rolling update and a rolled-back one under 16 learners (test-swarm.sh).
test-docker:
	PYTHON=$(PYTHON) bash scripts/test-docker.sh
	PYTHON=$(PYTHON) bash scripts/test-swarm.sh

# requirements.lock: the exact runtime dependencies the image installs, resolved in a fresh venv.
lock:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(PYTHON) -m venv "$$tmp/venv"; \
	"$$tmp/venv/bin/pip" install --quiet --no-cache-dir .; \
	{ echo '# The exact runtime dependencies of autograd-service, installed into the container image.'; \
	  echo '# Generated from pyproject.toml; do not edit by hand. Regenerate with `make lock`, which installs'; \
	  echo '# the project into a fresh virtual environment and writes down what `pip freeze` reports there.'; \
	  "$$tmp/venv/bin/pip" freeze --exclude autograd-service; } > "$$tmp/requirements.lock"; \
	mv "$$tmp/requirements.lock" requirements.lock
	@echo "requirements.lock: $$(grep -vc '^#' requirements.lock) pinned packages"

# Longer fuzzing than `make test` runs: the parser in-process with FUZZ_EXAMPLES examples per
# test, then the schemathesis test against a live gunicorn on loopback.
FUZZ_EXAMPLES ?= 2000
fuzz: $(VENV)/.installed
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest tests/test_fuzz.py -q \
		--deselect tests/test_fuzz.py::test_api_conforms_to_its_spec
	$(BIN)/python loadtest/fuzz.py --examples $(FUZZ_EXAMPLES)

# Gunicorn on loopback under 16 clients for LOAD_DURATION seconds (default 35), one worker
# SIGKILLed halfway; prints the report and fails on unexpected errors, growing memory, or slow
# lessons and failed health checks among the costliest requests. Then the fairness test: 2 x workers
# clients sending only the costliest request for FAIRNESS_DURATION seconds (default 30), while
# lessons must stay under 2 s at the 99th percentile and every health check must pass.
FAIRNESS_DURATION ?= 30
load: $(VENV)/.installed
	$(BIN)/python loadtest/run.py
	$(BIN)/python loadtest/fairness.py --duration $(FAIRNESS_DURATION)

# Benchmarks side by side with their anchors (plain micrograd, PyTorch, sympy, an echo endpoint);
# prints every target's ratio with PASS/MISS. PyTorch is a benchmark-only extra: installed here
# when the package index has it, else its comparison is skipped. BENCH_ARGS: e.g. `--quick`,
# `engine parse`, `--client python`, `--markdown run.md` (see `python -m bench --help`).
bench: $(VENV)/.installed
	$(BIN)/pip install --quiet -e '.[test,bench,torch]' || $(BIN)/pip install --quiet -e '.[test,bench]'
	$(BIN)/python -m bench $(BENCH_ARGS)

# The figures docs/DEPLOY.md sizes pods and replicas from: lesson requests per core, memory per
# worker, replicas for N learners (bench/capacity.py).
capacity: $(VENV)/.installed
	$(BIN)/pip install --quiet -e '.[test,bench]'
	$(BIN)/python -m bench capacity $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis *.egg-info
