"""The device actor: a JAX-native game, history stacking and search in one XLA program.

A segment of ``num_steps`` steps of ``B`` device environments is one jitted
``lax.scan`` of the shared :func:`~moozi.workers.policy.policy_step` followed by
the environment step (docs/architecture.md §2). The actor owns its carry
(environment states, current time steps, policy state), its episode
assembler and its parameter copy; its whole state can be checkpointed, so a
resumed run continues its episodes mid-game exactly.
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
from flax import struct

from moozi.config import ActingConfig
from moozi.envs.contract import TimeStep
from moozi.envs.device import DeviceEnv, EnvState, reset_batch, step_batch
from moozi.model.networks import Model
from moozi.workers.actor import schedule_temperature, segment_metrics
from moozi.workers.episodes import EpisodeAssembler
from moozi.workers.policy import PolicyConfig, PolicyState, init_policy_state, policy_step, random_legal_action

DeviceOpponent = Callable[[jax.Array, EnvState, TimeStep], jax.Array]
"""``(rng, env_state [B], timestep [B]) -> [B]`` environment actions; jittable."""


def random_opponent(rng, env_state, timestep) -> jax.Array:
    """Uniformly random legal action (0 where nothing is legal)."""
    del env_state
    return random_legal_action(rng, timestep.legal_actions)


@struct.dataclass
class DeviceCarry:
    """The actor's state between segments (``[B]``)."""

    env_state: EnvState
    timestep: TimeStep
    policy: PolicyState


def make_device_rollout(env: DeviceEnv, model: Model, config: PolicyConfig, num_steps: int,
                        opponent: DeviceOpponent | None = None, simulator: bool = False):
    """Jitted ``(params, carry, temperature) -> (carry, StepSample [T, B])``; ``simulator`` searches the
    game's own simulator (AlphaZero mode) instead of the learned model."""
    step = functools.partial(policy_step, model=model, config=config, env=env if simulator else None)
    two_player_test = config.mode == "test" and env.spec.two_player
    opponent = opponent or random_opponent

    def body(params, temperature, c: DeviceCarry, _):
        external = jnp.zeros(c.timestep.is_first.shape, jnp.int32)
        if two_player_test:
            external = opponent(jax.random.fold_in(c.policy.rng, 1), c.env_state, c.timestep) + 1
        policy, sample, _ = step(params, c.policy, c.timestep, temperature, external, c.env_state)
        state, ts = step_batch(env, c.env_state, jnp.maximum(sample.action - 1, 0))
        return DeviceCarry(state, ts, policy), sample

    def rollout(params, carry, temperature):
        return jax.lax.scan(functools.partial(body, params, temperature), carry, None, length=num_steps)

    return jax.jit(rollout)


class DeviceActor:
    """Plays ``num_envs`` device environments ``num_steps`` steps per :meth:`run`.

    Args:
      env: the device environment.
      model: the network.
      config: the policy step's static settings (mode, planner, exploration).
      num_envs: B.
      num_steps: steps per segment.
      rng: PRNG key (environment resets and search).
      acting: training temperature schedule (``"train"`` mode); None plays at temperature 0.
      opponent: test games in two-player games: the opponent (default uniformly random).
      simulator: search the game's own simulator (AlphaZero mode, ``model.dynamics = simulator``).
    """

    def __init__(self, env: DeviceEnv, model: Model, config: PolicyConfig, num_envs: int, num_steps: int, rng,
                 acting: ActingConfig | None = None, opponent: DeviceOpponent | None = None,
                 simulator: bool = False):
        self.env = env
        self.config = config
        self.num_envs = num_envs
        self.num_steps = num_steps
        self.acting = acting
        self.rollout = make_device_rollout(env, model, config, num_steps, opponent, simulator)  # the schedules' too
        self._reset_batch = jax.jit(functools.partial(reset_batch, env))
        self._reset_key, self._policy_key = jax.random.split(rng)
        self._start(self._reset_key, self._policy_key)
        self.assembler = EpisodeAssembler(num_envs)
        self.version = 0
        self.params = None
        self.env_steps = 0

    def new_episodes(self) -> None:
        """Abandon the episodes in progress and start new ones (a test scores only games its params began).

        The keys follow the env steps played, so a resumed run starts the same episodes.
        """
        self._start(jax.random.fold_in(self._reset_key, self.env_steps),
                    jax.random.fold_in(self._policy_key, self.env_steps))
        self.assembler.clear()

    def _start(self, reset_key, policy_key) -> None:
        """Every environment at a new first step, fresh histories."""
        state, ts = self._reset_batch(jax.random.split(reset_key, self.num_envs))
        self.carry = DeviceCarry(state, ts, init_policy_state(self.config, self.num_envs, policy_key))

    def set_params(self, version: int, params) -> None:
        self.version = int(version)
        self.params = jax.device_put(params)

    def run(self):
        """One segment: ``(episodes, metrics)``."""
        if self.params is None:
            raise RuntimeError("set_params() must be called before run()")
        temperature = schedule_temperature(self.acting, self.env_steps)
        self.carry, samples = self.rollout(self.params, self.carry, jnp.float32(temperature))
        samples = jax.device_get(samples)
        episodes = self.assembler.add(samples, self.version)
        self.env_steps += self.num_steps * self.num_envs
        metrics = segment_metrics(samples, temperature if self.config.mode == "train" else None)
        metrics["acting/env_steps"] = self.num_steps * self.num_envs
        return episodes, metrics

    def state_dict(self) -> dict:
        return {"carry": self.carry, "assembler": self.assembler.state_dict(), "env_steps": int(self.env_steps),
                "version": int(self.version)}

    def load_state_dict(self, state: dict) -> None:
        self.carry = state["carry"]
        self.assembler.load_state_dict(state["assembler"])
        self.env_steps = int(state["env_steps"])
        self.version = int(state["version"])

    def template(self) -> dict:
        """A state tree shaped like :meth:`state_dict` for restoring (plain parts left as None)."""
        return {"carry": self.carry, "assembler": None, "env_steps": None, "version": None}

    def close(self) -> None:
        pass

