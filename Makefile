# The whole set-up on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
export PORT

.PHONY: serve test lint openapi test-docker fuzz load bench clean

# The virtual environment is rebuilt whenever the project's declared dependencies change.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

serve: $(VENV)/.installed
	$(BIN)/gunicorn --config gunicorn.conf.py 'service.app:create_app()'

test: $(VENV)/.installed
	$(BIN)/ruff check service tests bench
	$(BIN)/python -m pytest

lint: $(VENV)/.installed
	$(BIN)/ruff check service tests bench
	$(BIN)/ruff format --check service tests bench

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis *.egg-info
