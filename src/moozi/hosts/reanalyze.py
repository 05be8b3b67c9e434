"""A reanalyze worker: stored episodes searched again with the target params."""

from __future__ import annotations

import time

from moozi.config import config_from_dict
from moozi.config.loading import reanalyze_planner
from moozi.hosts.common import check_versions, use_params, worker_seed


class ReanalyzeHost:
    """A reanalyze worker: re-searches stored episodes with given (target) params and the reanalyze planner
    (``reanalyze_planner``; default the training planner without root noise).

    Histories are rebuilt by replaying each stored episode from its first step
    with the stored actions forced (:class:`~moozi.envs.replay_env.ReplayEnvPool`),
    so every position is searched exactly as an actor would have, and the
    same jitted policy step produces the new v* and p*.
    """

    def __init__(self, config: dict, worker_id: int = 0, incarnation: int = 0,
                 expected_versions: dict | None = None, spec: dict | None = None):
        """``spec``: the game's spec as plain data (:func:`moozi.parts.spec_data`): then no game is built here."""
        check_versions(expected_versions)
        import jax

        from moozi.envs.replay_env import ReplayEnvPool
        from moozi.parts import build_parts, model_for, spec_from_data
        from moozi.workers.policy import PolicyConfig
        from moozi.workers.pool_actor import PoolActor

        self.config = c = config_from_dict(config)
        if spec is not None:
            self.spec = spec_from_data(spec)
            model = model_for(c, self.spec)
        else:
            env, model = build_parts(c)
            self.spec = env.spec
            env.close()
        policy = PolicyConfig(spec=self.spec, planner=reanalyze_planner(c), discount=c.targets.discount,
                              history_length=c.targets.history_length, mode="forced", record_frames=False)
        self.pool = ReplayEnvPool(self.spec, c.reanalyze.envs)
        key = jax.random.fold_in(jax.random.key(worker_seed(c.schedule.seed, 3, worker_id)), incarnation)
        self.actor = PoolActor(self.pool, model, policy, num_steps=16, rng=key)
        self.busy_s = 0.0
        self.positions = 0

    def reanalyze(self, published: dict, batch: dict):
        """Re-search the stored episodes of a :meth:`LearnerHost.reanalyze_batch`: ``(stamp, episodes, metrics)``."""
        t = time.perf_counter()
        use_params(self.actor, published)
        ids = list(batch["ids"])
        self.pool.add(batch["trajectories"], ids=ids)
        wanted, done = set(ids), {}
        while len(done) < len(wanted):
            episodes, _ = self.actor.run()
            for ep in episodes:
                if ep.source_id in wanted:
                    done[ep.source_id] = ep
            if self.pool.exhausted and len(done) < len(wanted) and not episodes:
                raise RuntimeError(f"reanalyze: {len(wanted) - len(done)} stored episodes never finished")
        episodes = [done[i] for i in ids]
        positions = sum(int(ep.trajectory.last) + 1 for ep in episodes)
        self.positions += positions
        dt = time.perf_counter() - t
        self.busy_s += dt
        return batch["stamp"], episodes, {"reanalyze/positions_per_s": positions / max(dt, 1e-9),
                                          "reanalyze/busy_s": self.busy_s}

    def close(self) -> None:
        self.actor.close()
