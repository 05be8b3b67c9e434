# Quick start targets. Each sets up .venv once (re-done only when pyproject.toml
# changes) and then runs its job, so running one twice reuses the set-up.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test test-all test-research lint bench clean

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e ".[dev,gymnax,pgx,openspiel,minatar,atari,ray,tune,tensorboard,viz,solver,baselines,stats,serve]"
	@# The report's browser test needs a Chromium and the GTP tests against a real Go engine GnuGo: Debian's
	@# packages, installed where apt can (as root, as in CI; a failed install then stops here). Elsewhere those
	@# tests are skipped with a message saying so.
	if ! command -v chromium >/dev/null || ! [ -x /usr/games/gnugo ]; then \
		if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
			export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq chromium gnugo >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium gnugo >/dev/null); \
		else echo "chromium or gnugo not installed (needs root): the report's browser test and the GnuGo tests will be skipped"; fi; fi
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/moozi demo

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks research examples

# CI's tier: every module, every command and acting path once (10.1-11.8 min of pytest from a cold compile cache on the
# slowest 2-core machine seen, 2026-11-27, with XLA's backend optimisations off for the tests (tests/conftest.py); 14.1
# min with them on; 6.0 min on a faster one later that day, 630 tests from a fresh clone of 5d0bfb0; 16.3 min for 724
# tests on an AMD EPYC family 25 model 1, 2026-11-30, before PBT's 138-s test moved to the extended tier; 16.9 min for
# 743 there on 2026-12-01, 14.9-15.4 with --dist loadscope: a module's tests share one worker, so its module-scoped fixtures
# are built once). test-all adds the extended tier (8.6 min more).
test: lint
	$(VENV)/bin/python -m pytest -n 2 --dist loadscope -q -m "not extended" --durations=25

test-all: lint
	$(VENV)/bin/python -m pytest -n 2 --dist loadscope -q

# The lab's tests (research/: diagnosis scripts and card tools), outside CI and outside the wheel.
test-research: lint
	$(VENV)/bin/python -m pytest -n 2 --dist loadscope -q research/tests

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
