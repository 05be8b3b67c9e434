"""The thesis's synchronous schedule over plain components, in one process.

One *epoch* at a time (../shared/DESIGN.md §1):

1. the training actor plays ``acting.steps_per_epoch`` steps in ``env.num_envs``
   environments and hands over the episodes it finished;
2. the learner stores them in replay;
3. the learner runs as many updates as keep ``updates * batch_size`` equal to
   ``schedule.samples_per_env_step`` times the environment steps collected
   since training began (honoured exactly over the run, logged as
   ``train/samples_per_env_step``), in one :meth:`~moozi.learner.Learner.train` call;
4. every ``schedule.sync_every`` epochs the learner publishes params to the actors;
5. every ``testing.every`` epochs the testing actor plays ``testing.episodes``
   greedy games and reports ``test/return_mean``.

The components are an :class:`~moozi.workers.Actor` for training, one for
testing, and a :class:`~moozi.learner.Learner` that owns replay; which acting
path a game uses is decided once, by :func:`moozi.workers.make_actor`.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Callable

import jax
import numpy as np
import yaml

from moozi.checkpoint import PendingCheckpoint, checkpoint_parts, load_checkpoint, load_latest
from moozi.config import Config, to_dict
from moozi.driver.parts import build_parts, stream_seed
from moozi.learner import Learner
from moozi.observe.metrics import MetricsWriter, setup_logging
from moozi.workers import agent_return, make_actor, play_games

log = logging.getLogger("moozi")

COUNTERS = ("env_steps", "updates", "epochs", "episodes", "wall_s", "ready_env_steps", "checkpoints")
ACTOR_PARTS = ("learner", "actor", "tester")


class Trainer:
    """One training run in one process.

    Args:
      config: the whole run's configuration.
      run_dir: where config, metrics, logs, TensorBoard events and checkpoints go.
      resume: continue from the newest good checkpoint in ``run_dir``.
      progress: optional callback ``(counters, last_row, last_test)`` called with
        every metrics row (the CLI's progress display).
    """

    def __init__(self, config: Config, run_dir: Path | str, resume: bool = False, progress: Callable | None = None):
        self.config = config
        self.run_dir = Path(run_dir)
        self.progress = progress
        # Build the game and model first: a bad name or shape fails before anything is written.
        env, self.model = build_parts(config)
        self.spec = env.spec
        self.run_dir.mkdir(parents=True, exist_ok=True)
        setup_logging(self.run_dir)
        if not resume:
            (self.run_dir / "config.yaml").write_text(yaml.safe_dump(to_dict(config), sort_keys=False))
        seed = config.schedule.seed
        k_learner, k_actor, k_test = jax.random.split(jax.random.key(seed), 3)
        self.learner = Learner(self.model, self.spec, config.learner, config.targets, config.replay, k_learner,
                               replay_seed=stream_seed(seed, 0))
        self.actors = {}
        try:
            self.actors["actor"] = make_actor(config, env, self.model, "train", k_actor, seed=seed)
            self.actors["tester"] = make_actor(config, env, self.model, "test", k_test, seed=seed)
        except BaseException:
            self.close()
            raise
        env.close()  # a pool actor holds its own copies; a device environment has nothing to release
        self.counters = {k: 0 for k in COUNTERS}
        self.counters["wall_s"] = 0.0
        self.last_test: dict[str, float] = {}
        if resume:
            self._restore()
        self._sync_params()
        self.metrics = MetricsWriter(self.run_dir)

    @property
    def actor(self):
        return self.actors["actor"]

    @property
    def tester(self):
        return self.actors["tester"]

    def close(self) -> None:
        """Release the actors' environments (worker processes, emulators)."""
        for actor in self.actors.values():
            actor.close()

    def _sync_params(self) -> None:
        version, params = self.learner.params()
        for actor in self.actors.values():
            actor.set_params(version, params)

    # --- checkpoints -------------------------------------------------------------------

    def save(self) -> Path:
        """Write a checkpoint: one part per component, committed together."""
        out = self.config.output
        with_replay = self.counters["checkpoints"] % out.replay_every_checkpoints == 0
        pending = PendingCheckpoint(self.run_dir / "checkpoints", self.counters["updates"])
        try:
            pending.write_part("learner", self.learner.state_dict())
            if with_replay:
                pending.write_part("replay", self.learner.replay.state_dict())
            for name, actor in self.actors.items():
                pending.write_part(name, actor.state_dict())
        except BaseException:
            pending.abort()
            raise
        self.counters["checkpoints"] += 1
        meta = {"counters": dict(self.counters), "last_test": self.last_test, "config": to_dict(self.config)}
        path = pending.commit(meta, keep=out.keep_checkpoints, keep_part="replay")
        log.info("checkpoint written: %s%s", path, "" if with_replay else " (without replay)")
        return path

    def _restore(self) -> None:
        directory = self.run_dir / "checkpoints"
        templates = {"learner": self.learner.template(),
                     **{name: actor.template() for name, actor in self.actors.items()}}
        parts, meta, path = load_latest(directory, templates, parts=list(ACTOR_PARTS))
        if "replay" in checkpoint_parts(path):
            replay, _ = load_checkpoint(path, parts=["replay"])
        else:
            replay, _, older = load_latest(directory, parts=["replay"])
            log.warning("replay restored from the older checkpoint %s (output.replay_every_checkpoints = %d): "
                        "this resume is not exact", older, self.config.output.replay_every_checkpoints)
        self.learner.load_state_dict(parts["learner"])
        self.learner.replay.load_state_dict(replay["replay"])
        for name, actor in self.actors.items():
            actor.load_state_dict(parts[name])
        self.counters.update({k: meta["counters"].get(k, 0) for k in COUNTERS})
        self.last_test = dict(meta.get("last_test") or {})
        log.info("resumed from %s at %s", path, self.counters)

    # --- the schedule ------------------------------------------------------------------

    def _collect(self) -> dict:
        episodes, row = self.actor.run()
        self.learner.add_episodes(episodes)
        self.counters["env_steps"] += int(row.pop("acting/env_steps"))
        self.counters["episodes"] += len(episodes)
        if episodes:
            row["train/episode_return"] = float(np.mean([agent_return(e.trajectory, 0, False) for e in episodes]))
            row["train/episode_length"] = float(np.mean([e.length for e in episodes]))
        return row

    def _train(self) -> dict:
        s = self.config.schedule
        if not self.learner.ready(max(s.min_replay_steps, 1)):
            self.counters["ready_env_steps"] = self.counters["env_steps"]
            return {}
        trained_steps = self.counters["env_steps"] - self.counters["ready_env_steps"]
        due = math.floor(s.samples_per_env_step * trained_steps / s.batch_size)
        todo = max(due - self.counters["updates"], 0)
        out = self.learner.train(todo, s.batch_size)
        self.counters["updates"] += todo
        if trained_steps > 0:
            out["train/samples_per_env_step"] = self.counters["updates"] * s.batch_size / trained_steps
        out["train/updates_this_epoch"] = todo
        return out

    def test(self, num_episodes: int | None = None) -> dict:
        """Play ``testing.episodes`` greedy games with the test planner and the published params."""
        games = play_games(self.tester, num_episodes or self.config.testing.episodes)
        returns = np.array([agent_return(g.trajectory, g.agent_seat, self.spec.two_player) for g in games])
        lengths = np.array([g.length for g in games])
        self.last_test = {
            "test/return_mean": float(returns.mean()),
            "test/return_std": float(returns.std()),
            "test/return_min": float(returns.min()),
            "test/return_max": float(returns.max()),
            "test/episode_length": float(lengths.mean()),
            "test/episodes": int(len(games)),
        }
        return dict(self.last_test)

    def run(self, minutes: float | None = None) -> dict:
        """Train until ``minutes`` of wall clock pass or ``schedule.max_env_steps``; checkpoint at the end."""
        s, out = self.config.schedule, self.config.output
        start = time.monotonic()
        wall0 = self.counters["wall_s"]
        last_ckpt = start
        last_report = (start, self.counters["env_steps"], self.counters["updates"])
        pending: list[dict] = []
        deadline = None if minutes is None else start + 60.0 * minutes
        log.info("training %s for %s minutes", self.config.env.name, minutes)
        self._stop_requested = False
        restore_handlers = self._install_stop_handlers()
        try:
            while True:
                if self._stop_requested:
                    log.info("stop requested: finishing with a checkpoint")
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    break
                if s.max_env_steps is not None and self.counters["env_steps"] >= s.max_env_steps:
                    break
                row = self._collect()
                row.update(self._train())
                self.counters["epochs"] += 1
                if self.counters["epochs"] % s.sync_every == 0 and self.counters["updates"] > 0:
                    self.learner.publish()
                    self._sync_params()
                every = self.config.testing.every
                if every and self.counters["epochs"] % every == 0 and self.counters["updates"] > 0:
                    row.update(self.test())
                now = time.monotonic()
                self.counters["wall_s"] = wall0 + (now - start)
                pending.append(row)
                if "test/return_mean" in row or self.counters["epochs"] % out.log_every_epochs == 0:
                    last_report = self._write_row(pending, last_report)
                    pending = []
                if now - last_ckpt >= 60.0 * out.checkpoint_every_minutes:
                    self.save()
                    last_ckpt = time.monotonic()
        finally:
            restore_handlers()
            self.counters["wall_s"] = wall0 + (time.monotonic() - start)
            if pending:
                self._write_row(pending, last_report)
            self.save()
            self.metrics.close()
        return dict(self.counters)

    def _write_row(self, rows: list[dict], since: tuple) -> tuple:
        """One metrics row: each metric averaged over the epochs that reported it, counters,
        and throughput over the row's interval. Returns the new interval start."""
        out: dict[str, float] = {}
        for key in {k for r in rows for k in r}:
            out[key] = float(np.mean([r[key] for r in rows if key in r]))
        now = time.monotonic()
        t0, s0, u0 = since
        dt = max(now - t0, 1e-9)
        out["perf/env_steps_per_s"] = (self.counters["env_steps"] - s0) / dt
        out["perf/updates_per_s"] = (self.counters["updates"] - u0) / dt
        out.update(self.learner.replay.stats())
        out.update({"env_steps": self.counters["env_steps"], "updates": self.counters["updates"],
                    "epochs": self.counters["epochs"], "episodes": self.counters["episodes"],
                    "wall_s": self.counters["wall_s"], "params_version": self.actor.version})
        self.metrics.write(out, step=self.counters["env_steps"])
        if self.progress:
            self.progress(dict(self.counters), out, self.last_test)
        return (now, self.counters["env_steps"], self.counters["updates"])

    def _install_stop_handlers(self) -> Callable[[], None]:
        """Ctrl-C / SIGTERM finish the current epoch and checkpoint; a second Ctrl-C aborts.

        Stopping only between epochs means no update is cut in half (its input
        state is donated), so the final checkpoint is always consistent.
        """
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

        def request_stop(signum, frame):
            if self._stop_requested and signum == signal.SIGINT:
                raise KeyboardInterrupt
            self._stop_requested = True

        for sig in previous:
            signal.signal(sig, request_stop)

        def restore():
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore
