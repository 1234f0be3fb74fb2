# The whole set-up on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
export PORT
# `make serve` listens on loopback only: gunicorn's sync workers must not face the internet
# (docs/SECURITY.md). HOST=0.0.0.0 makes it reachable from elsewhere, e.g. from a proxy.
HOST ?= 127.0.0.1

.PHONY: serve test check typecheck lint openapi test-docker lock fuzz load bench capacity clean translations graphviz pictures test-browser

# The virtual environment is rebuilt whenever the project's declared dependencies change.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

serve: $(VENV)/.installed
	@command -v dot >/dev/null || echo "serve: Graphviz's dot is not installed, so graphs asked for \
	as format svg get a 501 problem (dot and mermaid work). Install it with \
	'sudo apt-get install graphviz' (Debian, Ubuntu) or 'brew install graphviz' (macOS)." >&2
	@echo "serve: http://$(HOST):$(PORT) is for one machine: gunicorn's sync workers must never"
	@echo "serve: face a network directly; serve others through nginx (docker compose up)"
	$(BIN)/gunicorn --config gunicorn.conf.py --bind '$(HOST):$(PORT)' 'service.app:create_app()'

# Graphviz's `dot` draws graphs as SVG; the tests of that format need it. Installed from Debian
# when missing and this runs as root (as CI does), else the tests that need it are skipped.
graphviz:
	@command -v dot >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && DEBIAN_FRONTEND=noninteractive apt-get update -qq \
	  && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends graphviz \
	  >/dev/null; } || echo "graphviz: dot is missing; the SVG drawing tests will be skipped" >&2

# checkov scans deploy/kubernetes (tests/test_kubernetes.py). It lives in a virtual environment of
# its own: it pins versions of packaging, networkx and others that the service's tests also use.
CHECKOV_VERSION := 3.3.30
CHECKOV := $(VENV)/checkov/bin/checkov
$(CHECKOV): | $(BIN)/python
	$(PYTHON) -m venv $(VENV)/checkov
	$(VENV)/checkov/bin/pip install --quiet 'checkov==$(CHECKOV_VERSION)'

# Everything, as CI runs it: lint, formatting, strict types and the whole suite, slow tests included.
test: $(VENV)/.installed graphviz $(CHECKOV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	CHECKOV=$(CHECKOV) $(BIN)/python -m pytest

# The fast loop while editing: lint and every test not marked `slow` (no property tests, server
# processes, fuzzing, sweep of hostile inputs or spec regeneration); schemathesis' plugin is left
# out, as only the slow tests/test_fuzz.py uses it. Bytecode is written even where the
# environment sets PYTHONDONTWRITEBYTECODE, so the next run reuses pytest's rewritten test
# modules instead of rewriting every assert again (about a second). The tests run on every core,
# a module at a time in one process (tests/test_problems.py checks its cases as a whole); `make
# test` stays in one process, where its timing-sensitive server tests do not compete.
check: $(VENV)/.installed
	$(BIN)/ruff check .
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -m "not slow" -p no:schemathesis \
		--numprocesses auto --dist loadfile

# Strict type checking of service/ (settings in pyproject.toml).
typecheck: $(VENV)/.installed
	$(BIN)/mypy

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# openapi.yaml is generated from the code; tests/test_openapi.py fails when it is out of date.
openapi: $(VENV)/.installed
	$(BIN)/python -m service.api.spec openapi.yaml

# The message catalogues: every `_()`/`_n()` sentence under service/ extracted into the template,
# merged into the Russian and Estonian catalogues (new sentences arrive untranslated; translate
# them in the .po files, then run this again), and compiled to the .mo files the package ships;
# then the proxy's own problem pages in every language (deploy/nginx/errors.conf).
# tests/test_translations.py fails while any sentence lacks a translation.
TRANSLATIONS := service/translations
TRANSLATED := ru et
translations: $(VENV)/.installed
	$(BIN)/pybabel extract -F babel.cfg -k _n:1,2 --add-comments=TRANSLATORS: --no-location \
		--sort-output --width 100 \
		--project autograd-service -o $(TRANSLATIONS)/messages.pot service
	@for locale in $(TRANSLATED); do \
		if [ -f $(TRANSLATIONS)/$$locale/LC_MESSAGES/messages.po ]; then \
			$(BIN)/pybabel update --no-fuzzy-matching --ignore-obsolete --width 100 \
				-i $(TRANSLATIONS)/messages.pot -d $(TRANSLATIONS) -l $$locale; \
		else \
			$(BIN)/pybabel init --width 100 -i $(TRANSLATIONS)/messages.pot -d $(TRANSLATIONS) -l $$locale; \
		fi; \
	done
	$(BIN)/pybabel compile --statistics -d $(TRANSLATIONS)
	$(BIN)/python -m service.proxy deploy/nginx/errors.conf

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

# The pictures in the README: a plot, a surface and the lesson's graph, drawn by the service.
pictures: $(VENV)/.installed graphviz
	$(BIN)/python scripts/pictures.py docs/pictures

# The figures docs/DEPLOY.md sizes pods and replicas from: lesson requests per core, memory per
# worker, replicas for N learners (bench/capacity.py).
capacity: $(VENV)/.installed
	$(BIN)/pip install --quiet -e '.[test,bench]'
	$(BIN)/python -m bench capacity $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis *.egg-info

# The playground in a real browser: Debian's chromium (`apt-get install chromium`) driven by
# Playwright against a live gunicorn; screenshots land in docs/screenshots/.
test-browser: $(VENV)/.installed
	$(BIN)/pip install --quiet -e '.[test,browser]'
	PLAYGROUND_BROWSER_TESTS=1 $(BIN)/python -m pytest tests/browser -q -p no:cacheprovider
