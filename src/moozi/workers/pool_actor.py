"""The pool actor: any pool of environments, one jitted policy call per step.

Serves every game that is not stepped inside XLA (OpenSpiel, MinAtar,
Gymnasium/ALE, the user's own, docs/architecture.md §2), a device game behind a
:class:`~moozi.envs.pool.DevicePool`, and stored games behind a
:class:`~moozi.envs.replay_env.ReplayEnvPool`. Each step is the shared
:func:`~moozi.workers.policy.policy_step`, so its episodes are the same, field
for field, as the device actor's.

Forced-action mode (``PolicyConfig.mode == "forced"``) over a
``ReplayEnvPool`` is the reanalyze seam: every step plays the stored action
(``pool.stored_action``), histories stack exactly the stored actions, and each
finished episode carries the replayed trajectory's id (``source_id``) with
fresh v* and p* from the current parameters for every stored position.

Python environments cannot be checkpointed in general, so a resumed pool
actor starts new episodes from a seed that depends on how far it had played;
its search key and counters resume exactly.
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from moozi.config import ActingConfig
from moozi.envs.contract import TimeStep, check_lossless, encode_frames
from moozi.envs.pool import episode_seed
from moozi.model.networks import Model
from moozi.workers.actor import schedule_temperature, segment_metrics
from moozi.workers.episodes import EpisodeAssembler
from moozi.workers.policy import PolicyConfig, init_policy_state, policy_step

HostOpponent = Callable[[np.random.Generator, TimeStep], np.ndarray]
"""``(rng, timestep [B] numpy) -> [B]`` environment actions (anything where nothing is legal)."""


def host_random_opponent(rng: np.random.Generator, timestep: TimeStep) -> np.ndarray:
    """A uniformly random legal action per environment (0 where nothing is legal)."""
    legal = np.asarray(timestep.legal_actions, bool)
    u = rng.random(legal.shape)
    return np.where(legal.any(-1), np.argmax(np.where(legal, u, -1.0), axis=-1), 0).astype(np.int32)


class PoolActor:
    """Plays ``num_steps`` steps of a pool per :meth:`run`.

    Args:
      pool: a ``HostPool``, ``DevicePool`` or ``ReplayEnvPool`` (``spec``,
        ``num_envs``, ``reset(seed)``, ``step(actions)``).
      model: the network.
      config: the policy step's static settings (mode, planner, exploration).
      num_steps: steps per segment.
      rng: PRNG key for search and random moves.
      acting: training temperature schedule; None plays at temperature 0.
      opponent: two-player test games: the opponent (default uniformly random).
      seed: seeds the opponent's generator and the episodes after a resume.
    """

    def __init__(self, pool, model: Model, config: PolicyConfig, num_steps: int, rng,
                 acting: ActingConfig | None = None, opponent: HostOpponent | None = None, seed: int = 0):
        self.pool = pool
        self.config = config
        self.num_envs = pool.num_envs
        self.num_steps = num_steps
        self.acting = acting
        self.opponent = opponent or host_random_opponent
        self.seed = int(seed)
        self.np_rng = np.random.default_rng(seed)
        self._policy = jax.jit(functools.partial(policy_step, model=model, config=config))
        self._rng = rng
        self.assembler = EpisodeAssembler(self.num_envs)
        self.version = 0
        self.params = None
        self.env_steps = 0
        self.restart()

    def restart(self, seed: int | None = None) -> None:
        """Start every environment's episodes again (fresh histories), from ``seed`` when given."""
        self.timestep = self.pool.reset(seed)
        self.state = init_policy_state(self.config, self.num_envs, self._rng)
        self.assembler.clear()

    def new_episodes(self) -> None:
        """Abandon the episodes in progress and start new ones (a test scores only games its params began).

        The seed follows the env steps played, so a resumed run starts the same episodes.
        """
        self.restart(episode_seed(self.seed, 2, self.env_steps))

    def set_params(self, version: int, params) -> None:
        self.version = int(version)
        self.params = jax.device_put(params)

    def _external(self, ts: TimeStep) -> np.ndarray:
        """The opponent's moves (two-player test games) or the forced ones, augmented; zeros otherwise."""
        if self.config.mode == "forced":
            return (np.asarray(self.pool.stored_action) + 1).astype(np.int32)
        if self.config.mode == "test" and self.pool.spec.two_player:
            return (np.asarray(self.opponent(self.np_rng, ts)) + 1).astype(np.int32)
        return np.zeros((self.num_envs,), np.int32)

    def step(self, temperature: float = 0.0):
        """One step of every environment: ``(StepSample [B] numpy, stacked observation [B, ...])``."""
        if self.params is None:
            raise RuntimeError("set_params() must be called before step()")
        ts = self.timestep
        if self.pool.spec.observation_dtype == "uint8":  # a user's game may declare it wrongly: never quantize silently
            check_lossless(self.pool.spec, ts.observation, encode_frames(self.pool.spec, np.asarray(ts.observation)))
        self.state, sample, obs = self._policy(self.params, self.state, ts, jnp.float32(temperature),
                                               self._external(ts))
        sample = jax.device_get(sample)
        self.timestep = self.pool.step(np.maximum(sample.action - 1, 0))
        return sample, obs

    def run(self):
        """One segment of ``num_steps`` steps: ``(episodes, metrics)``."""
        temperature = schedule_temperature(self.acting, self.env_steps)
        forced = self.config.mode == "forced"
        rows, active, sources = [], [], []
        for _ in range(self.num_steps):
            if forced:
                active.append(np.asarray(self.pool.active))
                sources.append(np.asarray(self.pool.slot_trajectory_id))
            rows.append(self.step(temperature)[0])
        samples = jax.tree_util.tree_map(lambda *xs: np.stack(xs), *rows)
        episodes = self.assembler.add(samples, self.version, active=np.stack(active) if forced else None,
                                      source_ids=np.stack(sources) if forced else None)
        self.env_steps += self.num_steps * self.num_envs
        metrics = segment_metrics(samples, temperature if self.config.mode == "train" else None)
        metrics["acting/env_steps"] = self.num_steps * self.num_envs
        return episodes, metrics

    def state_dict(self) -> dict:
        """What can be saved: the search key, the opponent's generator and counters (not the environments)."""
        import json

        return {"rng": self.state.rng, "np_rng": json.dumps(self.np_rng.bit_generator.state),
                "env_steps": int(self.env_steps), "version": int(self.version)}

    def load_state_dict(self, state: dict) -> None:
        import json

        self.env_steps = int(state["env_steps"])
        self.version = int(state["version"])
        self.np_rng.bit_generator.state = json.loads(state["np_rng"])
        self._rng = state["rng"]
        # New episodes from a seed that differs per resume point, so no episode is replayed.
        self.restart(episode_seed(self.seed, 1, self.env_steps))

    def template(self) -> dict:
        return {"rng": self.state.rng, "np_rng": None, "env_steps": None, "version": None}

    def close(self) -> None:
        self.pool.close()
