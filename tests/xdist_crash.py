"""``--dist loadscope`` that survives a crashed pytest worker, and gives the test it crashed on one more run.

Why: XLA can kill a worker outright (a segmentation fault inside ``executable.serialize()`` while JAX writes its
compile cache, seen once in CI on 2026-12-06 at 85% of the suite). pytest-xdist 3.8 (the newest release) then
requeues every module the dead worker had *finished* as an empty unit of work and gives the replacement worker a
single test it can never start (it waits for a next item), so the run hangs until CI's limit (pytest-xdist
issues 1323, 1327, 1378). This scheduler keeps loadscope's grouping (a module's tests share one worker and its
module-scoped fixtures) and changes what happens after a death:

- only the modules with tests left go back on the queue, at its front;
- a worker is always given a next test or told to shut down, so it never waits for an item that cannot come;
- work sent to a worker that has just died (its last report and its death cross) goes back on the queue;
- the test the worker died on runs once more on the fresh worker; the first crash is reported as ``rerun``
  (``R``, listed at the end with the crash), a second crash of the same test as a failure, so a test that
  really crashes the interpreter still fails the run.

It also hands out the modules longest first (``tests/module_seconds.json``: each CI module's seconds in a
``--durations=0`` run; a module not listed counts one second per test). xdist orders them by their number of
tests, which leaves modules of a few long tests (the GPU check's smoke, the tuning sweep) for the end of the run.
Measured on a fresh clone (2026-12-07): the two cores busy 1.82 of 2 with this order against 1.81 without, so no
measurable gain; it is kept because it costs nothing and no long module starts last.

Loaded by ``tests/conftest.py``; the tests in ``tests/test_xdist_crash.py`` crash workers on purpose.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pytest-xdist missing: tests run in one process and nothing here is used
    LoadScopeScheduling = object

#: How many more times a test that crashed its worker runs on a fresh worker.
RETRIES = 1
#: Each CI module's measured seconds (an ordering hint: a stale figure changes the order, never the tests).
SECONDS = Path(__file__).with_name("module_seconds.json")


def longest_first(workqueue: dict, seconds: dict[str, float]) -> list:
    """The work units ``(scope, {nodeid: done})`` longest first: a module's seconds from ``seconds``, or one per
    test where it has none (ties keep their order)."""
    return sorted(workqueue.items(), key=lambda unit: -seconds.get(unit[0], float(len(unit[1]))))


class CrashRetryLoadScope(LoadScopeScheduling):
    """LoadScopeScheduling with the crash handling above (the rest of its behaviour is xdist's)."""

    def __init__(self, config, log=None):
        super().__init__(config, log)
        self.crashes: Counter[str] = Counter()
        self.ordered = False

    def will_retry(self, nodeid: str) -> bool:
        """Whether the test that just crashed a worker goes back on the queue (its first crash)."""
        return 0 < self.crashes[nodeid] <= RETRIES

    def remove_node(self, node):
        workload = self.assigned_work.pop(node)
        pending = {scope: unit for scope, unit in workload.items() if not all(unit.values())}
        if not pending:
            return None
        # The worker runs its units in the order they were given and each unit in order: the first test not
        # completed is the one it died on.
        crashitem = next(nodeid for unit in pending.values() for nodeid, done in unit.items() if not done)
        self.crashes[crashitem] += 1
        if not self.will_retry(crashitem):
            for unit in pending.values():
                if crashitem in unit:
                    unit[crashitem] = True  # reported failed by xdist; the rest of its module still runs
        for scope, unit in reversed(list(pending.items())):
            if not all(unit.values()):
                self.workqueue[scope] = unit
                self.workqueue.move_to_end(scope, last=False)
        for other in self.assigned_work:
            self._reschedule(other)
        return crashitem

    def _assign_work_unit(self, node):
        if not self.ordered:  # the first assignment: xdist has just built the queue
            self.ordered = True
            seconds = json.loads(SECONDS.read_text()) if SECONDS.exists() else {}
            units = longest_first(self.workqueue, seconds)
            self.workqueue.clear()
            self.workqueue.update(units)
        try:
            super()._assign_work_unit(node)
        except OSError:  # the worker died after its last report; remove_node puts back the unit it was given
            pass

    def _reschedule(self, node):
        if node.shutting_down:
            return
        # Give the node work until it holds more than two tests (a worker starts a test only once it knows the
        # next one), or tell it to finish what it holds once nothing is left.
        while self.workqueue and self._pending_of(self.assigned_work[node]) <= 2:
            self._assign_work_unit(node)
        if not self.workqueue:
            node.shutdown()


def _dist(config) -> str | None:
    return getattr(config.option, "dist", None)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if _dist(config) == "loadscope":
        return CrashRetryLoadScope(config, log)
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem, report, sched):
    if isinstance(sched, CrashRetryLoadScope) and sched.will_retry(crashitem):
        report.outcome = "rerun"
        report.longrepr = f"{report.longrepr}; running it once more on a fresh worker"


def pytest_report_teststatus(report, config):
    if report.outcome == "rerun":
        return "rerun", "R", ("RERUN", {"yellow": True})
    return None


def pytest_terminal_summary(terminalreporter):
    reruns = terminalreporter.stats.get("rerun", [])
    if reruns:
        terminalreporter.write_sep("=", "tests run again after their worker crashed")
        for report in reruns:
            terminalreporter.write_line(f"RERUN {report.nodeid}: {report.longrepr}")
