"""The learner host: the learner, its replay and the run's checkpoints, serving params to the workers."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from moozi.checkpoint.policy import RunCheckpoints
from moozi.config import config_from_dict
from moozi.hosts.common import check_versions, root_keys, slow_down


class LearnerHost:
    """The learner, replay and checkpoints of one run (see :mod:`moozi.hosts`)."""

    def __init__(self, config: dict, run_dir: str, expected_versions: dict | None = None, spec: dict | None = None):
        """``spec``: the game's spec as plain data (:func:`moozi.parts.spec_data`), so no game is built here; without
        it the game is built once to read its spec."""
        check_versions(expected_versions)
        from moozi.learner import Learner
        from moozi.parts import build_parts, model_for, spec_from_data, stream_seed

        self.config = config_from_dict(config)
        self.run_dir = Path(run_dir)
        if spec is not None:
            self.spec = spec_from_data(spec)
            model = model_for(self.config, self.spec)
        else:
            env, model = build_parts(self.config)
            self.spec = env.spec
            env.close()
        seed = self.config.schedule.seed
        self.learner = Learner(model, self.spec, self.config.learner, self.config.targets, self.config.replay,
                               root_keys(seed)[0], replay_seed=stream_seed(seed, 0))
        if self.config.schedule.acts_in_learner:
            self._device_loop(model, seed)
        out = self.config.output
        self.checkpoints = RunCheckpoints(self.run_dir, self.learner, keep=out.keep_checkpoints,
                                          keep_every=out.keep_every_updates, replay_every=out.replay_every_checkpoints,
                                          load_best=self._load_best)
        self.busy_s = 0.0

    def _device_loop(self, model, seed: int) -> None:
        """``schedule.kind = device``: the training actor lives here, with the ring and the chunk (moozi.fused)."""
        import jax

        from moozi.fused import DeviceLoop
        from moozi.learner import training_chance_code, training_symmetries
        from moozi.parts import build_parts
        from moozi.update import window_update
        from moozi.workers import make_actor

        env, _ = build_parts(self.config)
        actor = make_actor(self.config, env, model, "train", root_keys(seed)[1], seed=seed)
        c = self.config
        symmetries = training_symmetries(c.learner, self.spec)
        learn = window_update(model, c.learner, c.targets, self.spec.observation_scale, symmetries,
                              training_chance_code(c.learner, self.spec, model.config.chance_outcomes))
        self.learner.loop = DeviceLoop(actor, learn, c, jax.random.fold_in(root_keys(seed)[0], 1),
                                       fuse=jax.default_backend() != "cpu", params=self.learner.state.params,
                                       symmetries=len(symmetries))

    def device_ready(self, min_steps: int) -> bool:
        """The device schedule: the ring holds ``min_steps`` sampleable positions (at least one)."""
        return self.learner.loop.sampleable() >= max(min_steps, 1)

    def device_act(self) -> dict:
        """The device schedule, filling the ring: one segment acted with the newest params, nothing learned."""
        t = time.perf_counter()
        out = self.learner.loop.act(self.learner.acting_params())
        self.busy_s += time.perf_counter() - t
        return out

    def device_run(self, lr_scale: float) -> dict:
        """The device schedule: one chunk of epochs, acting with the newest params (moozi.fused.DeviceLoop.run)."""
        from moozi.errors import NonFiniteError

        t = time.perf_counter()
        step = int(self.learner.state.step)
        self.learner.state, out = self.learner.loop.run(self.learner.state, lr_scale)
        slow_down(t, self.config.distributed.slowdown_learner)
        self.busy_s += time.perf_counter() - t
        if out["nonfinite"]:
            raise NonFiniteError(f"non-finite loss or gradient in the chunk after update {step:,} ({out['nonfinite']} "
                                 "of its epochs; those updates were skipped)", step + 1)
        return out

    def _load_best(self) -> dict:
        from moozi.run_dir import open_run

        opened = open_run(self.run_dir, "best", self.config)
        return {"version": int(opened.meta.get("version", 0)), "params": opened.params}

    # --- data and training ------------------------------------------------------------

    def add_episodes(self, episodes) -> dict:
        """Store episodes; returns steps added and the policy lag (versions) of the episodes at insertion."""
        steps = self.learner.add_episodes(episodes)
        lag = np.array([self.learner.version - ep.version for ep in episodes], np.float64)
        return {"steps": steps, "episodes": len(episodes), "lag": lag.tolist()}

    def ready(self, min_steps: int) -> bool:
        return self.learner.ready(min_steps)

    def train(self, num_updates: int, batch_size: int, lr_scale: float = 1.0) -> dict:
        t = time.perf_counter()
        out = self.learner.train(num_updates, batch_size, lr_scale)
        slow_down(t, self.config.distributed.slowdown_learner)
        self.busy_s += time.perf_counter() - t
        return out

    def train_and_publish(self, num_updates: int, batch_size: int, lr_scale: float = 1.0) -> dict:
        """Async schedule: a chunk of updates, then a new version. The result is the published object
        (``version``, ``params``) with the chunk's ``metrics``, so it is stored once and passed by reference."""
        metrics = self.train(num_updates, batch_size, lr_scale)
        return {**self.publish(), "metrics": metrics}

    def publish(self) -> dict:
        """Publish the current params: the one object every worker receives by reference."""
        version, params = self.learner.publish()
        return {"version": version, "params": params}

    def params(self) -> dict:
        version, params = self.learner.params()
        return {"version": version, "params": params}

    def histograms(self) -> dict:
        """Raw histograms of the parameters and of Adam's gradient average (``output.histogram_every_updates``)."""
        return self.learner.histograms()

    def target_params(self) -> dict:
        """The target network (reanalyze's parameters), tagged with the published version it came with."""
        return {"version": self.learner.version, "params": self.learner.target_params(), "target": True}

    def stats(self) -> dict:
        loop = self.learner.loop  # the device schedule: the ring is the replay
        out = loop.stats() if loop is not None else self.learner.replay.stats()
        out["learner/busy_s"] = self.busy_s
        return out

    def checksum(self) -> float:
        """Sum of |params| (identical runs give identical sums)."""
        import jax

        return float(sum(np.abs(np.asarray(x, np.float64)).sum() for x in jax.tree_util.tree_leaves(
            jax.device_get(self.learner.state.params))))

    # --- reanalyze ------------------------------------------------------------------

    def reanalyze_batch(self, num_positions: int) -> dict:
        stamp, trajectories, ids = self.learner.reanalyze_batch(num_positions)
        return {"stamp": stamp, "trajectories": trajectories, "ids": ids}

    def apply_reanalyzed(self, stamp: int, episodes) -> dict:
        return self.learner.apply_reanalyzed(episodes, stamp)

    # --- checkpoints: the run's policy (moozi.checkpoint.policy), called by name across processes ----------

    def save(self, step: int, parts: dict, meta: dict, with_replay: bool) -> dict:
        """:meth:`RunCheckpoints.save`."""
        return self.checkpoints.save(step, parts, meta, with_replay)

    def save_best(self, published: dict, meta: dict) -> str:
        """:meth:`RunCheckpoints.save_best`."""
        return self.checkpoints.save_best(published, meta)

    def best(self) -> dict | None:
        """:meth:`RunCheckpoints.best`."""
        return self.checkpoints.best()

    def restore(self, worker_parts: list[str]) -> dict:
        """:meth:`RunCheckpoints.restore`."""
        return self.checkpoints.restore(worker_parts)

    def close(self) -> None:
        pass
