"""What both schedules act on (the fleet, the learner, the ledger, test keeping) and the steps they share:
handing episodes to the learner, the replay's readiness, one test dispatch and one reanalyze dispatch, and what a
failed worker call means: every call in flight is a :class:`Pending` record, and :meth:`RunContext.collect` is
where the schedules take a result, a worker's or the learner's death sorted out there (the schedules catch
nothing)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from moozi.driver.backend import WorkerDied
from moozi.driver.learner_client import LEARNER


@dataclass(frozen=True)
class Pending:
    """One call in flight. ``future``: the backend's; ``kind``: act, store, learn, reanalyze or test; ``slot``: the
    worker slot running it (None: a learner call); ``generation``: the learner's when the call was made (a learner
    death is recovered once per generation); ``info``: the schedule's own note (the version acted with, the
    positions asked for)."""

    future: Any
    kind: str
    slot: Any = None
    generation: int = 0
    info: Any = None


@dataclass(frozen=True)
class Lost:
    """What :meth:`RunContext.collect` returns for a call whose worker or learner died (already sorted out)."""

    error: WorkerDied

    @property
    def learner(self) -> bool:
        """The learner died (it has been restored from its checkpoint, with that checkpoint's counters)."""
        return self.error.name == LEARNER


class RunContext:
    """One run's parts, as the schedules see them.

    config: the run's config. backend: hosts the components (the schedules wait on its futures). fleet:
    :class:`~moozi.driver.fleet.Fleet`. learner: :class:`~moozi.driver.learner_client.LearnerClient`. ledger:
    :class:`~moozi.driver.ledger.Ledger`. keeper: :class:`~moozi.driver.testing.TestKeeper`. budget:
    :class:`~moozi.driver.budget.Budget`. ``last_test``: the newest test's metrics (a checkpoint records them).
    """

    def __init__(self, config, backend, fleet, learner, ledger, keeper, budget):
        self.config, self.backend, self.fleet, self.learner = config, backend, fleet, learner
        self.ledger, self.keeper, self.budget = ledger, keeper, budget
        self.counters = ledger.counters
        self.last_test: dict[str, float] = {}
        self._tested_with = None
        self._target = None  # (learner generation, version) and the target params asked for then

    def pending(self, future, kind: str, slot=None, info=None, generation: int | None = None) -> Pending:
        """The record of a call just started (``generation``: the learner's now unless given)."""
        return Pending(future, kind, slot, self.learner.generation if generation is None else generation, info)

    def collect(self, call: Pending):
        """The result of ``call``, or :class:`Lost` when its worker or the learner died: the one place the schedules'
        calls meet a death. A learner call's death restores the learner; a worker call's restarts the worker, or,
        when the call died of the learner's death (it took a pending learner result as input), restores the
        learner and leaves the worker be."""
        try:
            return self.backend.get(call.future)
        except WorkerDied as e:
            if call.slot is None:
                self.learner.recover(e, call.generation)
            else:
                self.worker_failed(call.slot, e, call.generation)
            return Lost(e)

    def worker_failed(self, slot, error: WorkerDied, generation: int) -> None:
        """A worker's call failed with a death: the worker's own (restart it) or the learner's, whose pending
        result the call took as input (params, a reanalyze batch): then the learner is restored once
        (``generation``: the learner's when the call was made) and the worker, alive, carries on."""
        if error.name == LEARNER:
            self.learner.recover(error, generation)
        else:
            self.fleet.restart(slot, error)

    def lr_scale(self) -> float:
        return self.budget.lr_scale(self.counters["env_steps"])

    # --- acting ---------------------------------------------------------------------------

    def acting_params(self):
        """What training workers act with: the newest published params, or ``checkpoints/best``'s under
        ``acting.play_best`` once a best exists."""
        if self.config.acting.play_best and self.learner.best is not None:
            return self.learner.best
        return self.learner.published

    def insert(self, episodes, metrics: dict, row):
        """Hand a finished segment's episodes to the learner and count them; the learner call's future (the
        learner may be in the middle of a training call)."""
        future = self.learner.add_episodes_later(episodes)
        self.ledger.count_segment(episodes, metrics, row, self.learner.version)
        return future

    @staticmethod
    def stored(result: dict, row) -> None:
        """The learner stored a segment: the policy lags of its steps go into the row (a
        :class:`~moozi.driver.rows.Gathered`)."""
        row.inserted_lags.extend(result["lag"])

    def ready(self) -> bool:
        """Whether replay holds enough to train (``schedule.min_replay_steps``); until then acting is not trained on."""
        if self.counters["updates"] > 0:
            return True
        if self.learner.ready(max(self.config.schedule.min_replay_steps, 1)):
            return True
        self.counters["ready_env_steps"] = self.counters["env_steps"]
        return False

    # --- testing ----------------------------------------------------------------------------

    def test_later(self, episodes: int | None = None):
        """Start a test of the published params (``testing.episodes`` greedy games): its future."""
        self._tested_with = self.learner.published
        return self.fleet.test(self._tested_with, episodes or self.config.testing.episodes, self.keeper.record_due())

    def tested(self, result: dict) -> dict:
        """A test finished: drawn, considered for ``best``; its metrics become ``last_test``."""
        self.last_test = self.keeper.after_test(result, self._tested_with, self.counters)
        return self.last_test

    def test(self, episodes: int | None = None) -> dict:
        """A test, waited for (a dead tester is restarted and the test tried once more; {} if it died again)."""
        slot = self.fleet.slots["tester"]
        for _ in range(2):
            if slot.handle is None:
                self.fleet.revive(block=True)
            result = self.collect(self.pending(self.test_later(episodes), "test", slot))
            if not isinstance(result, Lost):
                return dict(self.tested(result))
        return {}

    # --- reanalyze --------------------------------------------------------------------------

    def reanalyze_target(self, reuse: bool):
        """Future of the target params reanalyze searches with; ``reuse``: the one asked for under this learner and
        published version, if any (async; a sync epoch asks anew, as its target net moves without a publish)."""
        at = (self.learner.generation, self.learner.version)
        if not reuse or self._target is None or self._target[0] != at:
            self._target = (at, self.learner.target_params())
        return self._target[1]

    def reanalyze_later(self, slot, target, batch):
        """A reanalyzer re-searches ``batch`` (a learner's batch, or its future): the future of its result."""
        return self.fleet.reanalyze(slot, target, batch)

    def reanalyzed(self, result, row) -> None:
        """A reanalyze result goes back to the learner and is counted."""
        stamp, episodes, metrics = result
        self.ledger.count_reanalyzed(self.learner.apply_reanalyzed(stamp, episodes), metrics, row)
