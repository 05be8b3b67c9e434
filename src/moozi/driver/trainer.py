"""The driver: one training run's schedule, written once against a backend.

Components (:mod:`moozi.driver.hosts`) are hosted by a backend
(:mod:`moozi.driver.backend`): in this process by default, or as Ray actors
(``distributed.backend: ray``). The driver only moves small things: episodes
from training workers to the learner, metrics, and references to published
parameters; batches and priorities stay inside the learner.

``schedule.kind: sync`` (the thesis), one *epoch* at a time
(docs/architecture.md §1):

1. the W training workers each play ``acting.steps_per_epoch`` steps in
   ``env.num_envs`` environments (in parallel under Ray) and hand over the
   episodes they finished, stored in worker order;
2. the learner runs as many updates as keep ``updates * batch_size`` equal to
   ``schedule.samples_per_env_step`` times the environment steps collected
   since training began, plus the positions reanalyzed (``reanalyze.count_in_ratio``)
   (exact over the run, ``ratio/achieved``);
3. with ``reanalyze.fraction`` f > 0, reanalyze workers re-search stored
   episodes until reanalyzed positions reach f / (1 - f) times the acted steps
   (they count in the next epoch's updates);
4. every ``schedule.sync_every`` epochs the learner publishes params;
5. every ``testing.every`` epochs the testing worker plays greedy games.

``schedule.kind: async`` (IMPALA-style): training workers, the learner,
reanalyze workers and the testing worker run continuously. A rate limiter
(as Reverb's ``SampleToInsertRatio``) starts a worker's segment or a learner
call only while trained samples stay within ``ratio_slack`` of
``samples_per_env_step`` x inserted steps, so the faster side waits (on the
backend, never by sleeping); the learner publishes after every call, and
does not publish a version that would leave a segment in flight more than
``max_policy_lag`` versions behind. Up to two learner calls are queued at a
time, so the learner never idles while the driver handles the last one's
result, and the driver never waits on the learner for a metrics row. An
*epoch* there is W inserted segments.

Faults: a training, testing or reanalyze worker whose process dies is
restarted (``distributed.max_restarts`` per slot, doubling backoff, new random
streams from run seed, worker id and incarnation) and its segment in flight is
lost whole (episodes are only handed over complete). A dead learner is
restored from the last checkpoint.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import yaml

from moozi.config import Config, ConfigError, to_dict
from moozi.driver.backend import LocalBackend, Resources, WorkerDied
from moozi.driver.backends import make_backend
from moozi.driver.budget import Budget
from moozi.driver.hooks import CheckpointHooks
from moozi.driver.hosts import ActingHost, LearnerHost, ReanalyzeHost, versions
from moozi.driver.ledger import Ledger
from moozi.driver.testing import TestKeeper
from moozi.learner import training_symmetries
from moozi.observe.health import HealthWatch
from moozi.observe.machine import machine_line, record_machine
from moozi.observe.metrics import MetricsWriter, read_metrics, setup_logging
from moozi.parts import build_parts

log = logging.getLogger("moozi")

LEARNER = "learner"  # the learner's component name (a worker's failed call names who died)
NO_UPDATE_WARNING_S = 120.0  # a run with no update by then is told why on the console



@dataclass
class Slot:
    """One worker position: what it is, its current process and its history of restarts."""

    name: str
    kind: str  # "train" | "test" | "reanalyze"
    worker_id: int
    handle: Any = None
    incarnation: int = 0
    restarts: int = 0
    busy_s: float = 0.0
    started_at: float = 0.0
    respawn_at: float = 0.0
    backoff_level: int = 0


def _stats(prefix: str, values) -> dict[str, float]:
    v = np.asarray(values, np.float64)
    if v.size == 0:
        return {}
    return {f"{prefix}_mean": float(v.mean()), f"{prefix}_p95": float(np.percentile(v, 95)),
            f"{prefix}_max": float(v.max())}


class Trainer:
    """One training run.

    Args:
      config: the whole run's configuration.
      run_dir: where config, metrics, logs, TensorBoard events and checkpoints go.
      resume: continue from the newest good checkpoint in ``run_dir``.
      progress: optional callback ``(counters, last_row, last_test)`` called with
        every metrics row (the CLI's progress display).
      backend: hosts the components (default: the one ``distributed.backend`` names).
    """

    def __init__(self, config: Config, run_dir: Path | str, resume: bool = False, progress: Callable | None = None,
                 backend=None):
        self.config = config
        self.run_dir = Path(run_dir)
        self.progress = progress
        if backend is None and config.distributed.backend == "ray":
            from moozi.driver.distributed import keep_driver_on_host

            keep_driver_on_host()  # before the driver's first JAX computation (building the game below)
        # Build the game and model first: a bad name or shape fails before anything is written.
        env, _ = build_parts(config)
        self.spec = env.spec
        env.close()
        cap = self.spec.max_episode_steps
        if cap is not None and config.replay.capacity < cap + 1:
            raise ConfigError(f"replay.capacity = {config.replay.capacity} cannot hold one episode of {self.spec.name} "
                              f"({cap} steps, the game's max_episode_steps, plus its last step): raise "
                              "replay.capacity or cap episodes with env.kwargs.max_episode_steps")
        training_symmetries(config.learner, self.spec)  # a game without symmetries is refused before any work
        if config.reanalyze.fraction > 0:
            if config.distributed.reanalyze_workers < 1:
                raise ConfigError("reanalyze.fraction > 0 needs distributed.reanalyze_workers >= 1")
        if config.tournament.every_checkpoints and not self.spec.two_player:
            raise ConfigError(f"tournament.every_checkpoints > 0 needs a two-player game; {self.spec.name} is "
                              "single-player (its test return is its rating). Set tournament.every_checkpoints = 0")
        if config.gating.every_checkpoints and not self.spec.two_player:
            raise ConfigError(f"gating.every_checkpoints > 0 needs a two-player game; {self.spec.name} is "
                              "single-player (its best is chosen by test returns). Set gating.every_checkpoints = 0")
        self._stats_request = None  # async: the learner's replay statistics, asked for at the last row
        self.run_dir.mkdir(parents=True, exist_ok=True)
        setup_logging(self.run_dir)
        if not resume:
            (self.run_dir / "config.yaml").write_text(yaml.safe_dump(to_dict(config), sort_keys=False))
        self.backend = backend if backend is not None else make_backend(config, self.run_dir)
        self._config_dict = to_dict(config)
        self._versions = None if isinstance(self.backend, LocalBackend) else versions()
        d = config.distributed
        self.slots: dict[str, Slot] = {}
        self.placement: dict[str, dict] = {}
        self._placing: dict[str, Any] = {}
        try:
            slots = [Slot("actor" if w == 0 else f"actor_{w}", "train", w) for w in range(d.train_workers)]
            slots.append(Slot("tester", "test", 0))
            if config.reanalyze.fraction > 0:
                slots += [Slot(f"reanalyzer_{r}", "reanalyze", r) for r in range(d.reanalyze_workers)]
            worker = Resources(d.cpus_per_worker)
            self.backend.reserve({LEARNER: self._learner_resources(),
                                  **{sl.name: worker for sl in slots}})
            self._learner_generation = 0  # restorations of the learner so far (see _recover_learner)
            self.learner_handle = self._spawn_learner()
            for sl in slots:
                self._spawn(sl, wait=False)
            self._placed([self.learner_handle] + [sl.handle for sl in slots])
            self.ledger = Ledger(config)
            self.counters = self.ledger.counters  # the same dict: every row and checkpoint records it
            self.last_test: dict[str, float] = {}
            self.budget = Budget(config.schedule, config.learner)
            self.watch = HealthWatch(config.model, self.spec, config.testing.health_tests)
            if resume:
                self._restore()
            self.published = self.backend.call(self.learner_handle, "params")
            self.version = self._learner_version()
            # A resume continues the curves from the checkpoint's counters (rows written after it move aside).
            self.metrics = MetricsWriter(self.run_dir, rewind_to=self.counters["env_steps"] if resume else None)
            self.keeper = TestKeeper(self.run_dir, config, self._config_dict, self.spec, self.metrics,
                                     lambda published, meta: self._learner("save_best", published, meta),
                                     self.watch.history["tests"])
            self.hooks = CheckpointHooks(self.run_dir, config, self._config_dict, self.metrics,
                                         lambda published, meta: self._learner("save_best", published, meta))
            if resume:
                for r in read_metrics(self.run_dir):
                    self.watch.remember(r)
                self.keeper.resume()
        except BaseException:
            self.close()
            raise

    # --- components -------------------------------------------------------------------

    def _spawn_learner(self):
        return self.backend.spawn(LEARNER, LearnerHost, self._config_dict, str(self.run_dir), self._versions,
                                  resources=self._learner_resources())

    def _learner_resources(self) -> Resources:
        # Async: the learner trains while the workers act, so it keeps its cores to itself (a sync epoch takes turns).
        d = self.config.distributed
        return Resources(d.learner_cpus, d.learner_gpus, own_cores=self.config.schedule.kind == "async")

    def _placed(self, handles) -> None:
        """Wait for components to be built; record where each runs (``workers.json``: name, pid, node, CPU)."""
        self.placement.update(self.backend.ready(handles))
        (self.run_dir / "workers.json").write_text(json.dumps(self.placement, indent=1))

    def _spawn(self, slot: Slot, wait: bool = True) -> None:
        res = Resources(self.config.distributed.cpus_per_worker)
        if slot.kind == "reanalyze":
            slot.handle = self.backend.spawn(slot.name, ReanalyzeHost, self._config_dict, slot.worker_id,
                                             slot.incarnation, self._versions, resources=res)
        else:
            slot.handle = self.backend.spawn(slot.name, ActingHost, self._config_dict, slot.kind, slot.worker_id,
                                             slot.incarnation, self._versions, resources=res)
        slot.busy_s = 0.0
        slot.started_at = time.monotonic()
        self.slots[slot.name] = slot
        if wait:
            self._placed([slot.handle])

    def _restart(self, slot: Slot, error: Exception) -> None:
        """A worker died: its slot gets a new incarnation after a backoff (the driver does not wait for it).

        Restarts are bounded per slot (``distributed.max_restarts``); the
        backoff doubles from ``restart_backoff_s`` up to 30 s, and starts over
        once an incarnation has lived a minute.
        """
        d = self.config.distributed
        try:
            self.backend.kill(slot.handle)
        except Exception:  # already gone
            pass
        slot.handle = None
        if slot.restarts >= d.max_restarts:
            raise RuntimeError(f"{slot.name} died {slot.restarts + 1} times (distributed.max_restarts = "
                               f"{d.max_restarts}); last: {error}") from error
        slot.restarts += 1
        self.counters["restarts"] += 1
        now = time.monotonic()
        if now - slot.started_at > 60.0:
            slot.backoff_level = 0
        wait = min(d.restart_backoff_s * 2 ** slot.backoff_level, 30.0)
        slot.backoff_level += 1
        log.warning("%s died (%s); restarting it in %.1f s (restart %d of at most %d)",
                    slot.name, error, wait, slot.restarts, d.max_restarts)
        slot.respawn_at = now + wait

    def _worker_failed(self, slot: Slot, error: WorkerDied, generation: int) -> None:
        """A worker's call failed with a death: the worker's own (restart it) or the learner's, whose pending
        result the call took as input (params, a reanalyze batch): then the learner is restored once
        (``generation``: the learner's when the call was made) and the worker, alive, carries on."""
        if error.name == LEARNER:
            self._recover_learner(error, generation)
        else:
            self._restart(slot, error)

    def _revive(self, block: bool = False) -> None:
        """Start new incarnations of dead slots whose backoff has passed (``block``: wait for the first)."""
        dead = [sl for sl in self.slots.values() if sl.handle is None]
        if not dead:
            return
        if block:
            time.sleep(max(min(sl.respawn_at for sl in dead) - time.monotonic(), 0.0))
        now = time.monotonic()
        for sl in dead:
            if now >= sl.respawn_at:
                sl.incarnation += 1
                self._spawn(sl, wait=False)
                self._placing[sl.name] = self.backend.info(sl.handle)

    def _update_placement(self) -> None:
        """Record where restarted workers run, once they are up (never waits)."""
        for name, fut in list(self._placing.items()):
            done, _ = self.backend.wait([fut], num_returns=1, timeout=0)
            if done:
                del self._placing[name]
                try:
                    self.placement[name] = self.backend.get(fut)
                except WorkerDied:
                    continue
        (self.run_dir / "workers.json").write_text(json.dumps(self.placement, indent=1))

    def _recover_learner(self, error: Exception, generation: int) -> None:
        """The learner died: a new one restored from the last checkpoint (or fresh, if none yet).

        ``generation``: the learner a failed call went to. Every call in flight to a dead learner fails;
        only the first failure restores, the others (an older generation) find the new learner in place.
        """
        if generation != self._learner_generation:
            return
        self._learner_generation += 1
        self.counters["restarts"] += 1
        self._stats_request = None
        log.warning("the learner died (%s); restoring it from the last checkpoint", error)
        try:
            self.backend.kill(self.learner_handle)
        except Exception:
            pass
        self.learner_handle = self._spawn_learner()
        self._placed([self.learner_handle])
        if (self.run_dir / "checkpoints").exists() and any((self.run_dir / "checkpoints").glob("step_*")):
            restarts = self.counters["restarts"]
            self._restore(workers=False)
            self.counters["restarts"] = restarts
            self.metrics.rewind(self.counters["env_steps"])
        else:
            for k in ("updates", "ready_env_steps"):
                self.counters[k] = 0
        self.published = self.backend.call(self.learner_handle, "params")
        self.version = self._learner_version()

    def _learner(self, method: str, *args):
        """A blocking learner call (the learner restored and the call repeated once if it died)."""
        generation = self._learner_generation
        try:
            return self.backend.get(self.backend.call(self.learner_handle, method, *args))
        except WorkerDied as e:
            self._recover_learner(e, generation)
            return self.backend.get(self.backend.call(self.learner_handle, method, *args))

    def _learner_or_restore(self, method: str, *args):
        """A blocking learner call that is not repeated if the learner died: it is restored, and ``None`` is
        returned. For calls whose arguments the restore makes wrong (``train``'s update count, ``save``'s
        counters): the restored learner holds the last checkpoint's state (its replay too, or none)."""
        return self._get_learner(self.backend.call(self.learner_handle, method, *args), self._learner_generation)

    def _get_learner(self, future, generation: int, if_dead=None):
        """The result of a learner call made under ``generation``, or ``if_dead`` if the learner died
        meanwhile (it is restored, once)."""
        try:
            return self.backend.get(future)
        except WorkerDied as e:
            self._recover_learner(e, generation)
            return if_dead

    def _learner_version(self) -> int:
        return int(self.backend.get(self.published)["version"])

    @property
    def learner(self):
        """The :class:`~moozi.learner.Learner` object (local backend only)."""
        return self.backend.instance(self.learner_handle).learner

    @property
    def actor(self):
        """The first training worker's actor object (local backend only)."""
        return self.backend.instance(self.slots["actor"].handle).actor

    @property
    def tester(self):
        return self.backend.instance(self.slots["tester"].handle).actor

    def close(self) -> None:
        """Stop every component and the backend (no process of the run stays behind)."""
        for slot in list(getattr(self, "slots", {}).values()):
            if slot.handle is not None:
                try:
                    self.backend.kill(slot.handle)
                except Exception:
                    pass
        if getattr(self, "learner_handle", None) is not None:
            try:
                self.backend.kill(self.learner_handle)
            except Exception:
                pass
        if getattr(self, "backend", None) is not None:
            self.backend.shutdown()

    def checksum(self) -> float:
        """Sum of |learner params| (same seed and schedule: same sum, whatever the backend)."""
        return float(self._learner("checksum"))

    # --- checkpoints ------------------------------------------------------------------

    def _worker_states(self) -> dict[str, bytes]:
        futures = {n: self.backend.call(s.handle, "state") for n, s in self.slots.items()
                   if s.kind != "reanalyze" and s.handle is not None}
        parts = {}
        for name, fut in futures.items():
            try:
                parts[name] = self.backend.get(fut)
            except WorkerDied:  # its new incarnation starts fresh: nothing of it to save (noticed at its next call)
                pass
        return parts

    def save(self, final: bool = False) -> Path | None:
        """Write a checkpoint: the learner writes its parts and the workers' (sent as bytes), committed together.

        If the learner dies meanwhile, nothing is written (``None``): it is restored from the last checkpoint,
        which then holds all there is to save."""
        out = self.config.output
        with_replay = self.counters["checkpoints"] % out.replay_every_checkpoints == 0
        parts = self._worker_states()
        self.counters["checkpoints"] += 1
        meta = {"counters": dict(self.counters), "last_test": self.last_test, "config": self._config_dict}
        saved = self._learner_or_restore("save", int(self.counters["updates"]), parts, meta, with_replay)
        if saved is None:
            log.warning("the learner died while writing a checkpoint: it was restored from the last one instead")
            return None
        path, cost = Path(saved["path"]), saved["metrics"]
        if not self.metrics.closed:  # a row of its own, with the counters (a save after run() writes none)
            self.metrics.write({**cost, **{k: self.counters[k] for k in ("env_steps", "updates", "epochs", "episodes",
                                                                          "wall_s")}}, step=self.counters["env_steps"])
        log.info("%s checkpoint written: %s%s (%.1f MB in %.1f s)", "final" if final else "periodic", path,
                 "" if with_replay else " (without replay)", cost["checkpoint/bytes"] / 1e6, cost["checkpoint/write_s"])
        return path

    def _restore(self, workers: bool = True) -> None:
        names = [n for n, s in self.slots.items() if s.kind != "reanalyze"] if workers else []
        res = self.backend.get(self.backend.call(self.learner_handle, "restore", names))
        for name, data in res["parts"].items():
            self.backend.get(self.backend.call(self.slots[name].handle, "load_state", data))
        for name, reason, moved in res.get("rejected", []):
            log.warning("checkpoint %s is corrupt: %s; set aside in %s", name, reason, Path(moved).parent)
        if res.get("rejected"):
            log.warning("resuming from the older checkpoint %s", Path(res["path"]).name)
        meta = res["meta"]
        self.ledger.restore(meta["counters"])
        self.last_test = dict(meta.get("last_test") or {})
        log.info("resumed from %s at %s", res["path"], self.counters)

    # --- shared steps -----------------------------------------------------------------

    def _insert(self, episodes, metrics: dict, row: dict, block: bool = True):
        """Hand a finished segment's episodes to the learner and count them.

        ``block=False`` (async) returns the learner call's future instead of
        waiting for it (the learner may be in the middle of a training call).
        """
        future = None
        if block:
            self._stored(self._learner("add_episodes", episodes), row)
        else:
            future = self.backend.call(self.learner_handle, "add_episodes", episodes)
        self.ledger.count_segment(episodes, metrics, row, self.version)
        return future

    @staticmethod
    def _stored(result: dict, row: dict) -> None:
        row.setdefault("_lag_inserted", []).extend(result["lag"])

    def _ready(self) -> bool:
        if self.counters["updates"] > 0:
            return True
        if self._learner("ready", max(self.config.schedule.min_replay_steps, 1)):
            return True
        self.counters["ready_env_steps"] = self.counters["env_steps"]
        return False

    def _reanalyze_store(self, result, row: dict) -> None:
        stamp, episodes, metrics = result
        self.ledger.count_reanalyzed(self._learner("apply_reanalyzed", stamp, episodes), metrics, row)

    def test(self, num_episodes: int | None = None) -> dict:
        """Play ``testing.episodes`` greedy games with the test planner and the published params."""
        slot = self.slots["tester"]
        n = num_episodes or self.config.testing.episodes
        for _ in range(2):
            if slot.handle is None:
                self._revive(block=True)
            generation = self._learner_generation
            try:
                result = self.backend.get(self.backend.call(slot.handle, "test", self.published, n,
                                                            self.keeper.record_due()))
                self.last_test = self.keeper.after_test(result, self.published, self.counters)
                return dict(self.last_test)
            except WorkerDied as e:
                self._worker_failed(slot, e, generation)
        return {}

    def _lr_scale(self) -> float:
        return self.budget.lr_scale(self.counters["env_steps"])

    def budget_progress(self) -> float:
        """Share of the run's budget used (:meth:`moozi.driver.budget.Budget.progress`)."""
        return self.budget.progress(self.counters["env_steps"])

    def request_stop(self) -> None:
        """Finish the current epoch, checkpoint and return from :meth:`run` (what Ctrl-C and SIGTERM do)."""
        self.budget.request_stop()

    def _publish(self) -> None:
        # The params stay in the object store until a worker needs them: the driver never fetches them,
        # it only counts (the learner's version goes up by one per publish).
        self.published = self.backend.call(self.learner_handle, "publish")
        self.version += 1

    # --- the sync schedule ------------------------------------------------------------

    def _epoch_sync(self, row: dict) -> None:
        s = self.config.schedule
        t0 = time.perf_counter()
        self._revive(block=not any(sl.handle is not None for sl in self.slots.values() if sl.kind == "train"))
        train_slots = [sl for sl in self.slots.values() if sl.kind == "train" and sl.handle is not None]
        generation = self._learner_generation
        futures = [(sl, self.backend.call(sl.handle, "run", self.published)) for sl in train_slots]
        stored = []
        for sl, fut in futures:  # in worker order, whatever finishes first: the same run on every backend
            try:
                episodes, metrics = self.backend.get(fut)
            except WorkerDied as e:
                self._worker_failed(sl, e, generation)
                continue
            sl.busy_s = float(metrics.get("acting/busy_s", sl.busy_s))
            stored.append((self._insert(episodes, metrics, row, block=False), self._learner_generation))
        t1 = time.perf_counter()
        if self._ready() and not self._out_of_time():  # out of time: the due updates run on --resume
            due = math.floor(s.samples_per_env_step * self.ledger.fed() / s.batch_size)
            todo = max(due - self.counters["updates"], 0)
            out = self._learner_or_restore("train", todo, s.batch_size, self._lr_scale()) if todo else {}
            if out is None:  # the learner died: restored, with the counters of its checkpoint
                out, todo = {}, 0
            self.counters["updates"] += todo
            for k, v in out.items():
                row.setdefault(k, []).append(v)
            row.setdefault("train/updates_this_epoch", []).append(todo)
        for fut, generation in stored:  # the learner takes calls in order
            self._stored(self._get_learner(fut, generation, if_dead={"lag": []}), row)  # no lags from a dead one
        t2 = time.perf_counter()
        if not self._out_of_time():
            self._reanalyze_sync(row)
        t3 = time.perf_counter()
        self.counters["epochs"] += 1
        if self.counters["epochs"] % s.sync_every == 0 and self.counters["updates"] > 0:
            self._publish()
        every = self.config.testing.every
        if every and self.counters["epochs"] % every == 0 and self.counters["updates"] > 0 and not self._out_of_time():
            row.update({k: [v] for k, v in self.test().items()})
        t4 = time.perf_counter()
        for k, v in (("act", t1 - t0), ("learn", t2 - t1), ("reanalyze", t3 - t2), ("test", t4 - t3)):
            row.setdefault(f"time/{k}_s", []).append(v)

    def _reanalyze_sync(self, row: dict) -> None:
        due = self.ledger.reanalyze_due()
        if due <= 0:
            return
        per_call = self.config.reanalyze.positions_per_call
        generation = self._learner_generation
        target = self.backend.call(self.learner_handle, "target_params")
        slots = [sl for sl in self.slots.values() if sl.kind == "reanalyze" and sl.handle is not None]
        while due > 0 and slots:
            jobs = []
            for sl in slots:
                if due <= 0:
                    break
                batch = self._learner("reanalyze_batch", min(per_call, due))
                if not batch["ids"]:
                    return
                due -= sum(int(t.last) + 1 for t in batch["trajectories"])
                jobs.append((sl, self.backend.call(sl.handle, "reanalyze", target, batch)))
            for sl, fut in jobs:
                try:
                    self._reanalyze_store(self.backend.get(fut), row)
                except WorkerDied as e:
                    self._worker_failed(sl, e, generation)
                    if e.name == LEARNER:  # restored from its checkpoint: this epoch's reanalysis ends here
                        return
                    slots.remove(sl)

    # --- the async schedule -----------------------------------------------------------

    def _async_state(self) -> dict:
        s = self.config.schedule
        seg = self.config.acting.steps_per_epoch * self.config.env.num_envs
        slack = s.ratio_slack or int(s.updates_per_call * s.batch_size + seg * s.samples_per_env_step)
        return {"seg": seg, "slack": slack, "inflight": {}, "segments": 0}

    def _can_act(self, st: dict, ready: bool) -> bool:
        """Whether a training worker may start a segment: always while replay fills, then within the rate limit.

        The limit holds from the moment replay is ready, not from the first finished update: otherwise
        the workers run free while the learner's first call compiles (~25k steps of breakout under Ray)
        and the learner then trains on that data alone until it catches up (Reverb's limiter also
        applies from ``min_size_to_sample`` on).
        """
        s = self.config.schedule
        if not ready:
            return True  # filling replay: nothing to wait for
        acting = sum(1 for kind, *_ in st["inflight"].values() if kind == "act")
        ahead = s.samples_per_env_step * (self.ledger.fed() + (acting + 1) * st["seg"]) - self.counters["updates"] * s.batch_size
        return ahead <= st["slack"]

    def _can_learn(self, st: dict) -> bool:
        """Whether to queue another learner call: at most two in flight (the next one waits in the learner's
        queue, so it never idles between calls), within the rate limit and the policy lag."""
        s = self.config.schedule
        learning = sum(1 for kind, *_ in st["inflight"].values() if kind == "learn")
        if learning >= 2:
            return False
        samples = (self.counters["updates"] + (learning + 1) * s.updates_per_call) * s.batch_size
        if samples > s.samples_per_env_step * self.ledger.fed() + st["slack"]:
            return False
        acting = [info[1] for kind, info, _ in st["inflight"].values() if kind == "act"]
        return not acting or self.version + learning + 1 - min(acting) <= s.max_policy_lag

    def _run_async(self, should_stop: Callable[[], bool], on_row: Callable[[dict], None], row: dict) -> None:
        s = self.config.schedule
        st = self._async_state()
        tested_with = None
        # future -> (kind, (slot or None, version or positions), the learner's generation when it was made)
        inflight: dict = {}
        st["inflight"] = inflight

        def track(fut, kind, info):
            inflight[fut] = (kind, info, self._learner_generation)

        def untrack(fut):
            return inflight.pop(fut)

        idle = {n for n, sl in self.slots.items() if sl.kind in ("train", "reanalyze")}
        ready = self._ready()
        test_due_epoch = self.counters["epochs"]
        target = None
        stopping = False
        while True:
            if not stopping and should_stop():
                stopping = True
            if not stopping:
                self._revive()
                for name in sorted(idle):
                    sl = self.slots[name]
                    if sl.handle is None:
                        continue
                    if sl.kind == "train" and self._can_act(st, ready):
                        fut = self.backend.call(sl.handle, "run", self.published)
                        track(fut, "act", (sl, self.version))
                        idle.discard(name)
                    elif sl.kind == "reanalyze" and ready and self.ledger.reanalyze_due() - self._reanalyze_inflight(
                            inflight) > 0:
                        at = (self._learner_generation, self.version)  # a restored learner: ask it anew
                        if target is None or target[0] != at:
                            target = (at, self.backend.call(self.learner_handle, "target_params"))
                        batch = self.backend.call(self.learner_handle, "reanalyze_batch",
                                                  self.config.reanalyze.positions_per_call)
                        track(self.backend.call(sl.handle, "reanalyze", target[1], batch), "reanalyze",
                              (sl, self.config.reanalyze.positions_per_call))
                        idle.discard(name)
                while ready and self._can_learn(st):
                    track(self.backend.call(self.learner_handle, "train_and_publish", s.updates_per_call,
                                            s.batch_size, self._lr_scale()), "learn", (None, None))
                every = self.config.testing.every
                if (every and self.counters["updates"] > 0 and self.counters["epochs"] >= test_due_epoch + every
                        and self.slots["tester"].handle is not None
                        and not any(k == "test" for k, *_ in inflight.values())):
                    test_due_epoch = self.counters["epochs"]
                    track(self.backend.call(self.slots["tester"].handle, "test", self.published,
                                            self.config.testing.episodes, self.keeper.record_due()),
                          "test", (self.slots["tester"], 0))
                    tested_with = self.published
            if not inflight:
                if stopping:
                    return
                if any(sl.handle is None for sl in self.slots.values()):
                    self._revive(block=True)  # everything else waits on a worker's restart
                    continue
                raise RuntimeError("async schedule stalled: nothing in flight and nothing allowed to start "
                                   f"(counters {self.counters}); please report this")
            t = time.perf_counter()
            done, _ = self.backend.wait(list(inflight), num_returns=1)
            row.setdefault("time/wait_s", []).append(time.perf_counter() - t)
            for fut in done:
                kind, (sl, info), generation = untrack(fut)
                try:
                    result = self.backend.get(fut)
                except WorkerDied as e:
                    if sl is None:  # a learner call: the learner died
                        self._recover_learner(e, generation)
                    else:  # the worker died, or the learner whose pending result it took as input
                        self._worker_failed(sl, e, generation)
                        if kind != "test":
                            idle.add(sl.name)
                    if e.name == LEARNER:
                        ready = self._ready()
                    continue
                if kind == "act":
                    episodes, metrics = result
                    sl.busy_s = float(metrics.get("acting/busy_s", sl.busy_s))
                    track(self._insert(episodes, metrics, row, block=False), "store", (None, None))
                    idle.add(sl.name)
                    st["segments"] += 1  # an epoch: one segment per worker (counted on, so a resumed run goes on)
                    if st["segments"] % self.config.distributed.train_workers == 0:
                        self.counters["epochs"] += 1
                    if not ready:
                        ready = self._ready()
                elif kind == "store":
                    self._stored(result, row)
                elif kind == "learn":  # the result is the published object: workers get it by reference
                    self.counters["updates"] += s.updates_per_call
                    self.published = fut
                    self.version = int(result["version"])
                    for k, v in result["metrics"].items():
                        row.setdefault(k, []).append(v)
                elif kind == "reanalyze":
                    self._reanalyze_store(result, row)
                    idle.add(sl.name)
                elif kind == "test":
                    self.last_test = self.keeper.after_test(result, tested_with, self.counters)
                    row.update({k: [v] for k, v in self.last_test.items()})
                on_row(row)

    def _reanalyze_inflight(self, inflight: dict) -> int:
        return sum(info[1] for kind, info, _ in inflight.values() if kind == "reanalyze")

    # --- the run ----------------------------------------------------------------------

    def run(self, minutes: float | None = None, started: float | None = None) -> dict:
        """Train until ``minutes`` of wall clock pass or ``schedule.max_env_steps``; checkpoint at the end.

        ``started`` (a ``time.monotonic()`` value, default now) is when the
        limit began: the CLI passes its own start, so building and compiling
        count against ``--minutes``. The time limit is checked between the
        acting and learning phases of an epoch too, so a run stops within a
        phase of its deadline (the first epoch's phases include compiling).
        """
        s, out = self.config.schedule, self.config.output
        start = time.monotonic()
        wall0 = self.counters["wall_s"]
        self._last_ckpt = start
        self._report = {"since": (start, self.counters["env_steps"], self.counters["updates"]),
                        "epochs": self.counters["epochs"], "busy": {}, "fed": self.ledger.fed()}
        if minutes is not None and not minutes > 0:
            raise ConfigError(f"minutes = {minutes!r} is invalid: allowed a number > 0")
        self.budget.start(minutes, start if started is None else started, start, wall0)
        if self.config.learner.lr_decay_over == "budget" and minutes is None and s.max_env_steps is None:
            log.warning("learner.lr_decay_over = budget, but the run has no budget (no --minutes and no "
                        "schedule.max_env_steps): the learning rate stays at its peak")
        self._warned_no_update = False
        log.info("training %s for %s minutes (%s schedule, %s backend, %d training workers)", self.config.env.name,
                 minutes, s.kind, self.backend.name, self.config.distributed.train_workers)
        log.info("on %s", machine_line(record_machine(self.run_dir)))
        restore_handlers = self.budget.install_stop_handlers()
        row: dict = {}

        def should_stop() -> bool:
            if self.budget.stop_requested:
                log.info("stop requested: finishing with a checkpoint")
                return True
            if self._out_of_time():
                return True
            return s.max_env_steps is not None and self.counters["env_steps"] >= s.max_env_steps

        def on_row(r: dict) -> None:
            if self._placing:  # a restarted worker is up: say where (never waits)
                self._update_placement()
            now = time.monotonic()
            if self.counters["updates"] == 0 and not self._warned_no_update and now - start > NO_UPDATE_WARNING_S:
                self._warned_no_update = True
                log.warning("no update after %.0f s: %s", now - start, self._why_no_update())
            self.counters["wall_s"] = wall0 + (now - start)
            if "test/return_mean" in r or self.counters["epochs"] - self._report["epochs"] >= out.log_every_epochs:
                self._write_row(r)
                r.clear()
            if now - self._last_ckpt >= 60.0 * out.checkpoint_every_minutes:
                self.save()
                self.hooks.after_checkpoint(self.counters)
                self._last_ckpt = time.monotonic()

        try:
            if s.kind == "async":
                self._run_async(should_stop, on_row, row)
            else:
                while not should_stop():
                    self._epoch_sync(row)
                    on_row(row)
        except BaseException as err:
            if not isinstance(err, KeyboardInterrupt):
                log.error("the run stopped on an error; writing a last checkpoint", exc_info=err)
                err._moozi_logged = True  # noqa: SLF001 - the CLI does not log it again
            raise
        finally:
            restore_handlers()
            self.counters["wall_s"] = wall0 + (time.monotonic() - start)
            if row:
                self._write_row(row)
            self.save(final=True)
            self.metrics.close()
        if self.counters["updates"] == 0:
            log.warning("the run ended without a single update: %s", self._why_no_update())
        return dict(self.counters)

    def _out_of_time(self) -> bool:
        return self.budget.out_of_time()

    def _why_no_update(self) -> str:
        """Why training has not started yet, in one line, with what to change."""
        s, c = self.config.schedule, self.counters
        if c["episodes"] == 0:
            return (f"no episode has ended in {c['env_steps']} env steps: only finished episodes go to replay; "
                    "cap episode length (env.kwargs.max_episode_steps, or the game's spec.max_episode_steps)")
        played = f"{c['episodes']} episodes ({c['env_steps']} env steps) played"
        if self._out_of_time():
            return (f"the time limit ended before the first update ({played}; training starts once replay holds "
                    f"schedule.min_replay_steps = {s.min_replay_steps} steps): give more --minutes")
        return f"{played}; training starts once replay holds schedule.min_replay_steps = {s.min_replay_steps} steps"

    def _write_row(self, rows: dict) -> None:
        """One metrics row: each metric averaged over the epochs that reported it, counters, throughput,
        the replay ratio and its error, policy lags and each worker's busy fraction over the row's interval."""
        s = self.config.schedule
        out: dict[str, float] = {}
        for key, values in rows.items():
            if not key.startswith("_") and values:
                out[key] = float(np.mean(values))
        out.update(_stats("lag/inserted", rows.get("_lag_inserted", [])))
        out.update(_stats("lag/segment", rows.get("_segment_lag", [])))
        now = time.monotonic()
        t0, s0, u0 = self._report["since"]
        dt = max(now - t0, 1e-9)
        steps, updates = self.counters["env_steps"] - s0, self.counters["updates"] - u0
        out["perf/env_steps_per_s"] = steps / dt
        out["perf/updates_per_s"] = updates / dt
        fed, acted = self.ledger.fed(), self.counters["env_steps"] - self.counters["ready_env_steps"]
        if fed > 0 and self.counters["updates"] > 0:
            achieved = self.counters["updates"] * s.batch_size / fed
            out["ratio/achieved"] = achieved
            out["ratio/error"] = achieved / s.samples_per_env_step - 1.0
            if fed != acted and acted > 0:  # reanalyzed positions count: the learner's reuse per env step
                out["ratio/per_env_step"] = self.counters["updates"] * s.batch_size / acted
            r0 = self._report["fed"]
            if fed > r0 and u0 > 0:
                out["ratio/window"] = updates * s.batch_size / (fed - r0)
        for name, sl in self.slots.items():
            if sl.kind == "train":
                prev = self._report["busy"].get(name, 0.0)
                out[f"workers/{name}/busy_fraction"] = max(sl.busy_s - prev, 0.0) / dt
                self._report["busy"][name] = sl.busy_s
        out["workers/restarts"] = float(self.counters["restarts"])
        if self._placing:
            self._update_placement()
        import socket

        here = socket.gethostname()
        local = {n: int(p["pid"]) for n, p in self.placement.items()
                 if p.get("hostname", here) == here and n != "driver" and not isinstance(self.backend, LocalBackend)}
        out.update(self.backend.stats(local))
        try:
            out.update(self._learner_stats())
        except Exception as e:  # a row without replay statistics is better than a lost run
            log.warning("replay statistics unavailable: %s", e)
        if "reanalyze/positions" in rows:
            out["reanalyze/positions_total"] = float(self.counters["reanalyzed_positions"])
        out.update({"env_steps": self.counters["env_steps"], "updates": self.counters["updates"],
                    "epochs": self.counters["epochs"], "episodes": self.counters["episodes"],
                    "wall_s": self.counters["wall_s"], "params_version": self.version})
        out.update(self.watch.check(out))
        self.metrics.write(out, step=self.counters["env_steps"])
        self._report["since"] = (now, self.counters["env_steps"], self.counters["updates"])
        self._report["fed"] = fed
        self._report["epochs"] = self.counters["epochs"]
        if self.progress:
            self.progress(dict(self.counters), out, self.last_test)

    def _learner_stats(self) -> dict:
        """Replay statistics for a metrics row. Sync: asked now (the learner is idle between phases). Async:
        the answer to the request made at an earlier row, once it is in (the learner answers between two
        training calls, so the driver never waits behind one), and a new request."""
        if self.config.schedule.kind != "async":
            return self._learner("stats")
        out, fut = {}, self._stats_request
        if fut is not None:
            done, _ = self.backend.wait([fut], num_returns=1, timeout=0)
            if not done:
                return {}
            self._stats_request = None
            out = self.backend.get(fut)
        self._stats_request = self.backend.call(self.learner_handle, "stats")
        return out
