"""The driver: one training run, written once against a backend.

Components (:mod:`moozi.hosts`) are hosted by a backend (:mod:`moozi.driver.backend`): in this process by
default, or as Ray actors (``distributed.backend: ray``). The driver only moves small things: episodes from
training workers to the learner, metrics, and references to published parameters; batches and priorities stay
inside the learner. The schedules are :mod:`moozi.driver.sync_schedule` (``schedule.kind: sync``, the thesis's
epochs, docs/architecture.md §1) and :mod:`moozi.driver.async_schedule` (IMPALA-style, under a rate limiter).

Faults: a dead training, testing or reanalyze worker is restarted (:mod:`moozi.driver.fleet`), its segment in
flight lost whole; a dead learner is restored from the last checkpoint (:mod:`moozi.driver.learner_client`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import Callable

import yaml

from moozi.config import Config, ConfigError, to_dict
from moozi.driver.async_schedule import AsyncSchedule
from moozi.driver.backend import LocalBackend, Resources
from moozi.driver.budget import Budget, announce, diverged_error, footprint, last_writes
from moozi.driver.checks import check_run
from moozi.driver.context import RunContext
from moozi.driver.device_schedule import DeviceSchedule
from moozi.driver.fleet import Fleet, plan_slots
from moozi.driver.hooks import CheckpointHooks
from moozi.driver.learner_client import LEARNER, LearnerClient
from moozi.driver.ledger import Ledger
from moozi.driver.record import RunRecord
from moozi.driver.rows import Gathered, RowWriter
from moozi.driver.sync_schedule import SyncSchedule
from moozi.driver.testing import TestKeeper
from moozi.errors import NonFiniteError
from moozi.fused import check_device_schedule
from moozi.hosts.common import versions
from moozi.hosts.learner import LearnerHost
from moozi.observe.health import HealthWatch
from moozi.observe.metrics import MetricsWriter, iter_metrics, setup_logging
from moozi.observe.profile import EpochProfile
from moozi.parts import build_parts
from moozi.run_dir import RunLock, new_identity

log = logging.getLogger("moozi")

NO_UPDATE_WARNING_S = 120.0  # a run with no update by then is told why on the console


class Trainer:
    """One training run: wires the parts (:mod:`.fleet`, :mod:`.learner_client`, :mod:`.ledger`, :mod:`.testing`,
    :mod:`.hooks`, :mod:`.rows`) and runs a schedule (:mod:`.sync_schedule`, :mod:`.async_schedule`) over them.

    Args:
      config: the whole run's configuration.
      run_dir: where config, metrics, logs, TensorBoard events and checkpoints go.
      resume: continue from the newest good checkpoint in ``run_dir``.
      progress: optional callback ``(counters, last_row, last_test)`` called with every metrics row (the CLI's).
      backend: hosts the components (default: the one ``distributed.backend`` names).
    """

    def __init__(self, config: Config, run_dir: Path | str, resume: bool = False, progress: Callable | None = None,
                 backend=None):
        self.config, self.run_dir = config, Path(run_dir)
        ray = backend is None and config.distributed.backend == "ray"  # the backend the config names (Ray: only then)
        if ray:
            from moozi.driver.distributed import RayBackend, keep_driver_on_host

            keep_driver_on_host()  # before the driver's first JAX computation (building the game below)
        # Build the game and model first: a bad name or shape fails before anything is written.
        env, model = build_parts(config)
        self.spec, self.size = env.spec, footprint(config, env.spec, model)  # parameters and memory, said at start
        env.close()
        check_run(config, self.spec)
        check_device_schedule(config, self.spec)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._closing = contextlib.ExitStack()  # what close() undoes, the newest first
        self._lock = RunLock(self.run_dir)  # one writer per run folder, before anything in it is written
        self._closing.callback(self._lock.release)
        try:
            setup_logging(self.run_dir)
            if not resume:
                (self.run_dir / "config.yaml").write_text(yaml.safe_dump(to_dict(config), sort_keys=False))
                new_identity(self.run_dir)
            if ray:
                self.backend = RayBackend(config.distributed, self.run_dir)
            else:
                self.backend = backend if backend is not None else LocalBackend()
            self._closing.callback(self.backend.shutdown)  # after every component: no process of the run stays behind
            remote = not isinstance(self.backend, LocalBackend)
            self.run_record = RunRecord(config, to_dict(config), self.run_dir, self.spec, versions() if remote else None)
            self.ledger = Ledger(config)
            self.counters = self.ledger.counters  # the same dict: every row and checkpoint records it
            self.fleet = Fleet(self.backend, self.run_record, self.counters)
            self._closing.callback(self.fleet.close)
            self.last_checkpoint: Path | None = None  # the newest checkpoint this Trainer wrote
            self._wire(resume, remote, progress)
        except BaseException:
            self._closing.close()
            raise

    def _wire(self, resume: bool, remote: bool, progress: Callable | None) -> None:
        config, d = self.config, self.config.distributed
        # Async: the learner trains while the workers act, so it keeps its cores to itself (a sync epoch takes turns).
        learner_resources = Resources(d.learner_cpus, d.learner_gpus, own_cores=config.schedule.kind == "async")
        slots = plan_slots(config)
        self.backend.reserve({LEARNER: learner_resources, **{sl.name: self.fleet.resources[sl.kind] for sl in slots}})
        self.learner_client = LearnerClient(
            self.backend, lambda: self.backend.spawn(LEARNER, LearnerHost, self.run_record.data, str(self.run_dir),
                                                     self.fleet.versions, self.fleet.spec_data,
                                                     resources=learner_resources),
            self.fleet.placed, self._learner_restored, track_best=config.acting.play_best)
        self._closing.callback(self.learner_client.close)
        self.fleet.start(slots, also=[self.learner_client.handle])
        self.budget = Budget(config.schedule, config.learner)
        watch = HealthWatch(config.model, self.spec, config.testing.health_tests)
        last_test = self._restore() if resume else {}
        self.learner_client.refresh()
        # A resume continues the curves from the checkpoint's counters (rows written after it move aside).
        self.metrics = MetricsWriter(self.run_dir, rewind_to=self.counters["env_steps"] if resume else None)
        self.keeper = TestKeeper(self.run_record, self.metrics, self.learner_client.save_best, watch.history["tests"],
                                 resume=resume)
        self.hooks = CheckpointHooks(self.run_record, self.metrics, self.learner_client.save_best)
        self.ctx = RunContext(config, self.backend, self.fleet, self.learner_client, self.ledger, self.keeper,
                              self.budget)
        self.ctx.last_test, self.profile = last_test, EpochProfile(self.run_dir, config.output.profile_epoch, self.backend)
        self.rows = RowWriter(self.ctx, self.metrics, watch, remote, progress)
        if resume:
            for r in iter_metrics(self.run_dir):  # a stream: a long run's history is never held whole
                watch.remember(r)

    @property
    def learner(self):
        """The :class:`~moozi.learner.Learner` object (local backend only)."""
        return self.learner_client.instance()

    @property
    def actor(self):
        """The first training worker's actor object (local backend only)."""
        return self.fleet.instance("actor").actor

    def close(self) -> None:
        """Stop every component and the backend (no process of the run stays behind), then let the folder go."""
        try:
            self._closing.close()
        finally:
            if getattr(self, "budget", None) is not None:  # the stop is done: a SIGTERM's grace clock ends
                self.budget.cancel_overdue()

    def checksum(self) -> float:
        """Sum of |learner params| (same seed and schedule: same sum, whatever the backend)."""
        return self.learner_client.checksum()

    def test(self, num_episodes: int | None = None) -> dict:
        """Play ``testing.episodes`` greedy games with the test planner and the published params."""
        return self.ctx.test(num_episodes)

    def budget_progress(self) -> float:
        """Share of the run's budget used (:meth:`moozi.driver.budget.Budget.progress`)."""
        return self.budget.progress(self.counters["env_steps"])

    def request_stop(self) -> None:
        """Finish the current epoch, checkpoint and return from :meth:`run` (what Ctrl-C and SIGTERM do)."""
        self.budget.request_stop()

    # --- checkpoints ------------------------------------------------------------------

    def save(self, final: bool = False) -> Path | None:
        """Write a checkpoint: the learner writes its parts and the workers' (sent as bytes), committed together.

        If the learner dies meanwhile, nothing is written (``None``): it is restored from the last checkpoint,
        which then holds all there is to save."""
        c = self.counters
        with_replay = c["checkpoints"] % self.config.output.replay_every_checkpoints == 0
        parts = self.fleet.states()
        c["checkpoints"] += 1
        meta = {"counters": dict(c), "last_test": self.ctx.last_test, "config": self.run_record.data, "size": self.size}
        saved = self.learner_client.save(int(c["updates"]), parts, meta, with_replay)
        if saved is None:
            log.warning("the learner died while writing a checkpoint: it was restored from the last one instead")
            return None
        path, cost = Path(saved["path"]), saved["metrics"]
        self.last_checkpoint = path
        if not self.metrics.closed:  # a row of its own, with the counters (a save after run() writes none)
            self.metrics.write({**cost, **{k: c[k] for k in ("env_steps", "updates", "epochs", "episodes", "wall_s")}},
                               step=c["env_steps"])
        log.info("%s checkpoint written: %s%s (%.1f MB in %.1f s)", "final" if final else "periodic", path,
                 "" if with_replay else " (without replay)", cost["checkpoint/bytes"] / 1e6, cost["checkpoint/write_s"])
        return path

    def _restore(self, workers: bool = True) -> dict:
        """Load the newest good checkpoint into the learner (and the workers' states); its last test's metrics."""
        res = self.learner_client.restore(self.fleet.stateful() if workers else [])
        for name, data in res["parts"].items():
            self.fleet.load_state(name, data)
        for name, reason, moved in res.get("rejected", []):
            log.warning("checkpoint %s is corrupt: %s; set aside in %s", name, reason, Path(moved).parent)
        if res.get("rejected"):
            log.warning("resuming from the older checkpoint %s", Path(res["path"]).name)
        self.ledger.restore(res["meta"]["counters"])
        log.info("resumed from %s at %s", res["path"], self.counters)
        return dict(res["meta"].get("last_test") or {})

    def _learner_restored(self) -> None:
        """A new learner replaced a dead one: it takes the last checkpoint's state and the run its counters (the
        restarts go on counting), or, with no checkpoint yet, training starts over."""
        self.counters["restarts"] += 1
        if any((self.run_dir / "checkpoints").glob("step_*")):
            restarts = self.counters["restarts"]
            self.ctx.last_test = self._restore(workers=False)
            self.counters["restarts"] = restarts
            self.metrics.rewind(self.counters["env_steps"])
        else:
            self.counters.update(updates=0, ready_env_steps=0)

    # --- the run ----------------------------------------------------------------------

    def run(self, minutes: float | None = None, started: float | None = None, stop_grace_s: float | None = None,
            earlier_signal: Callable[[], str | None] | None = None) -> dict:
        """Train until ``minutes`` of wall clock pass or ``schedule.max_env_steps``; checkpoint at the end.

        ``started`` (a ``time.monotonic()`` value, default now) is when the limit began: the CLI passes its own
        start, so building and compiling count against ``--minutes``. The time limit is checked between the acting
        and learning phases of an epoch too, so a run stops within a phase of its deadline (the first epoch's
        phases include compiling). ``stop_grace_s``: a SIGTERM's stop ends the process by then (see
        ``Budget.install_stop_handlers``); ``earlier_signal``: the name of a stop signal that came before the run's
        handlers were in (the CLI remembers one), or None. The handlers are in before the run's first line."""
        s = self.config.schedule
        if minutes is not None and not minutes > 0:
            raise ConfigError(f"minutes = {minutes!r} is invalid: allowed a number > 0")
        start = time.monotonic()
        self._clock = {"start": start, "wall0": self.counters["wall_s"], "checkpoint": start, "warned": False}
        self.rows.start()
        self.budget.start(minutes, start if started is None else started, start, self._clock["wall0"])
        restore_handlers = self.budget.install_stop_handlers(stop_grace_s, self.run_dir, self.counters, earlier_signal)
        try:
            announce(self.config, minutes, self.backend.name, self.run_dir, self.size)
        except BaseException:
            restore_handlers()
            raise
        row, diverged, failing = Gathered(), None, None
        try:
            if s.kind == "async":
                AsyncSchedule(self.ctx).run(self._should_stop, self._after_row, row)
            else:
                sync = DeviceSchedule(self.ctx) if s.acts_in_learner else SyncSchedule(self.ctx)
                while not self._should_stop():
                    sync.epoch(row)
                    self._after_row(row)
        except NonFiniteError as err:
            failing = diverged = diverged_error(err, self.run_dir, self.config.learner.learning_rate)  # said once
            raise diverged from None
        except BaseException as err:
            failing = err
            if not isinstance(err, KeyboardInterrupt):
                log.error("the run stopped on an error; writing a last checkpoint", exc_info=err)
                err._moozi_logged = True  # noqa: SLF001 - the CLI does not log it again
            raise
        finally:
            restore_handlers()
            self.counters["wall_s"] = self._clock["wall0"] + (time.monotonic() - start)
            ends = [] if diverged else [("the last metrics row", lambda: row and self.rows.write(row)),  # a diverged
                                        ("the final checkpoint", lambda: self.save(final=True))]  # state: not saved
            last_writes([*ends, ("the profile", self.profile.stop), ("metrics.jsonl", self.metrics.close)], failing)
        if self.counters["updates"] == 0:
            log.warning("the run ended without a single update: %s",
                        self.ledger.why_no_update(self.budget.out_of_time()))
        return dict(self.counters)

    def _should_stop(self) -> bool:
        if self.budget.stop_requested:
            log.info("stop requested: finishing with a checkpoint")
            return True
        s = self.config.schedule
        return self.budget.out_of_time() or (s.max_env_steps is not None and self.counters["env_steps"] >= s.max_env_steps)

    def _after_row(self, row: Gathered) -> None:
        """Between two results: a metrics row when one is due, a checkpoint when one is due."""
        clock, out = self._clock, self.config.output
        if self.fleet.placing:  # a restarted worker is up: say where (never waits)
            self.fleet.update_placement()
        now = time.monotonic()
        if self.counters["updates"] == 0 and not clock["warned"] and now - clock["start"] > NO_UPDATE_WARNING_S:
            clock["warned"] = True
            log.warning("no update after %.0f s: %s", now - clock["start"],
                        self.ledger.why_no_update(self.budget.out_of_time()))
        self.counters["wall_s"] = clock["wall0"] + (now - clock["start"])
        self.profile.after_epoch(self.counters["epochs"], self.counters["updates"])
        if "test/return_mean" in row or self.counters["epochs"] - self.rows.epochs >= out.log_every_epochs:
            self.rows.write(row)
            row.clear()
        if now - clock["checkpoint"] >= 60.0 * out.checkpoint_every_minutes:
            self.save()
            self.hooks.after_checkpoint(self.counters)
            clock["checkpoint"] = time.monotonic()
