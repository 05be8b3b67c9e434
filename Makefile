# Quick start targets. Each sets up .venv once (re-done only when pyproject.toml
# changes) and then runs its job, so running one twice reuses the set-up.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e ".[dev,gymnax,pgx,openspiel,minatar,atari,ray,tensorboard]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/moozi demo

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples

test: lint
	$(VENV)/bin/python -m pytest -n 2 -q

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
