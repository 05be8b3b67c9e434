"""Host-path acting: Python environments in a pool, one jitted batched policy call per step.

The host path (../shared/DESIGN.md §2) serves games that are not pure JAX
(OpenSpiel, MinAtar, Gymnasium/ALE, the user's own). A :class:`HostActor`
steps a :class:`~moozi.envs.pool.HostPool` of ``B`` environments in lock-step;
at every step one jitted call pushes the new observations onto the rolling
histories and searches from them. Its rollout segments are the same
:class:`~moozi.acting.StepSample` ``[T, B]`` the device path emits, with the
same meaning field for field, so :class:`~moozi.acting.TrajectoryAssembler`,
replay and the learner never know which path made the data.

:class:`HostMatch` plays testing/evaluation games against a host opponent
(``(rng: np.random.Generator, timestep [B]) -> env actions [B]``), with the
agent's seat defined by move order exactly as on the device path.

Host environments cannot be checkpointed in general (an emulator's or a user
game's internal state is not data we can save), so a resumed run starts fresh
episodes from a new seed; learner, replay and counters resume exactly.
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from moozi.acting import StepSample, random_exploration
from moozi.config import PlannerConfig
from moozi.envs.contract import TimeStep
from moozi.model.history import history_init, history_observation, history_push
from moozi.model.networks import Model
from moozi.planner import plan
from moozi.types import DUMMY_ACTION

HostOpponent = Callable[[np.random.Generator, TimeStep], np.ndarray]
"""``(rng, timestep [B] numpy) -> [B]`` environment actions (anything where nothing is legal)."""


def host_random_opponent(rng: np.random.Generator, timestep: TimeStep) -> np.ndarray:
    """A uniformly random legal action per environment (0 where nothing is legal)."""
    legal = np.asarray(timestep.legal_actions, bool)
    u = rng.random(legal.shape)
    return np.where(legal.any(-1), np.argmax(np.where(legal, u, -1.0), axis=-1), 0).astype(np.int32)


def _policy_step(params, history, observation, prev_action, is_first, legal, episode_step, rng, temperature, *,
                 model: Model, planner: PlannerConfig, discount: float, two_player: bool, explore_moves,
                 random_moves: int = 0, random_move_prob: float = 0.0):
    """Push o_t onto the histories, then search at t (the jitted body of a host step).

    Returns ``(history, SearchOutput, is_random [B] bool)``."""
    history = history_push(history, observation, prev_action, is_first)
    obs = history_observation(history, model.num_actions)
    if explore_moves is None:
        explore = jnp.ones(is_first.shape, jnp.float32)
    else:
        explore = (episode_step < explore_moves).astype(jnp.float32)
    out = plan(model, params, rng, obs, legal, planner, discount=discount, two_player=two_player,
               temperature=temperature * explore, gumbel_scale=planner.gumbel_scale * explore)
    action, is_random = random_exploration(rng, legal, episode_step, out.action, random_moves, random_move_prob)
    out = out.replace(action=action, env_action=action - 1)
    return history, out, is_random


def make_policy(model: Model, planner: PlannerConfig, discount: float, two_player: bool,
                explore_moves: int | None = None, random_moves: int = 0, random_move_prob: float = 0.0):
    """Jitted ``(params, history, observation, prev_action, is_first, legal, episode_step, rng, temperature)
    -> (history, SearchOutput, is_random)`` for a batch of host environments."""
    return jax.jit(functools.partial(_policy_step, model=model, planner=planner, discount=discount,
                                     two_player=two_player, explore_moves=explore_moves,
                                     random_moves=random_moves, random_move_prob=random_move_prob))


class HostActor:
    """Plays ``num_steps``-step rollout segments in a host pool with the learned model.

    Args:
      pool: a :class:`~moozi.envs.pool.HostPool` (or anything with its interface).
      model, planner, discount: what to search with.
      history_length: L.
      num_steps: steps per segment (``driver.steps_per_epoch``).
      explore_moves: temperature / Gumbel noise on the first moves of each episode only (None: all).
      rng: PRNG key for search and action sampling.
      random_moves: the first moves of each episode are uniformly random legal moves.
      random_move_prob: later moves are uniformly random with this probability.
    """

    def __init__(self, pool, model: Model, planner: PlannerConfig, discount: float, history_length: int,
                 num_steps: int, rng, explore_moves: int | None = None, random_moves: int = 0, policy=None,
                 random_move_prob: float = 0.0):
        self.pool = pool
        self.num_envs = pool.num_envs
        self.num_steps = num_steps
        self.history_length = history_length
        self.policy = policy or make_policy(model, planner, discount, pool.spec.two_player, explore_moves,
                                            random_moves, random_move_prob)
        self.rng = rng
        self.restart()

    def restart(self, seed: int | None = None) -> None:
        """Start every environment's episodes again (fresh histories), from ``seed`` when given."""
        self.timestep = self.pool.reset(seed)
        self.history = history_init(self.num_envs, self.pool.spec.observation_shape, self.history_length)
        self.prev_action = np.zeros((self.num_envs,), np.int32)

    def rollout(self, params, temperature) -> StepSample:
        """Act ``num_steps`` steps in every environment; a ``[T, B]`` :class:`StepSample` of numpy arrays."""
        rows = []
        ts = self.timestep
        for _ in range(self.num_steps):
            self.rng, key = jax.random.split(self.rng)
            episode_step = self.pool.episode_step
            self.history, out, is_random = self.policy(
                params, self.history, ts.observation, self.prev_action, ts.is_first, ts.legal_actions,
                episode_step, key, jnp.float32(temperature),
            )
            out = jax.tree_util.tree_map(np.asarray, out)
            action = np.where(ts.is_last, DUMMY_ACTION, out.action).astype(np.int32)
            truncated_last = ts.is_last & ~ts.is_terminal
            rows.append(StepSample(
                frame=ts.observation,
                action=action,
                reward=ts.reward,
                is_first=ts.is_first,
                is_last=ts.is_last,
                is_terminal=ts.is_terminal,
                to_play=ts.to_play,
                root_value=np.where(truncated_last, out.prior_value, out.root_value).astype(np.float32),
                root_policy=out.root_policy,
                prior_value=out.prior_value,
                policy_entropy=out.policy_entropy,
                max_depth=out.max_depth,
                random_action=np.asarray(is_random),
            ))
            ts = self.pool.step(np.maximum(action - 1, 0))
            self.prev_action = action
        self.timestep = ts
        return jax.tree_util.tree_map(lambda *xs: np.stack(xs), *rows)

    def state_dict(self) -> dict:
        """What can be saved: the search PRNG key (the environments themselves cannot be)."""
        return {"rng": np.asarray(jax.random.key_data(self.rng))}

    def load_state_dict(self, state: dict) -> None:
        self.rng = jax.random.wrap_key_data(jnp.asarray(state["rng"]))


class HostMatch:
    """Testing / evaluation games in a host pool: the agent (greedy search) against ``opponent``.

    In two-player games environment ``b`` starts with the agent in seat ``b % 2``
    (0 moves first) and the seat swaps after every game; results are from the
    agent's point of view. Single-player games ignore the opponent.
    """

    def __init__(self, pool, model: Model, planner: PlannerConfig, discount: float, history_length: int,
                 rng, opponent: HostOpponent | None = None, seed: int = 0):
        self.pool = pool
        self.two_player = pool.spec.two_player
        self.policy = make_policy(model, planner, discount, self.two_player, None)
        self.opponent = opponent or host_random_opponent
        self.history_length = history_length
        self.rng = rng
        self.np_rng = np.random.default_rng(seed)
        self._started = False

    def _start(self) -> None:
        b = self.pool.num_envs
        self.timestep = self.pool.reset()
        self.history = history_init(b, self.pool.spec.observation_shape, self.history_length)
        self.prev_action = np.zeros((b,), np.int32)
        self.seat = (np.arange(b) % 2 if self.two_player else np.zeros(b)).astype(np.int32)
        self.first_player = self.timestep.to_play.copy()
        self.ret = np.zeros((b,), np.float32)
        self.length = np.zeros((b,), np.int32)
        self._started = True

    def play(self, params, num_episodes: int, max_steps: int = 1_000_000) -> list[tuple[float, int, int]]:
        """Play until every environment finished ``ceil(num_episodes / B)`` games; the first
        ``num_episodes`` of them round-robin over environments (as :func:`moozi.acting.play_matches`).
        Returns ``(episode_return, episode_length, agent_seat)`` per game."""
        if not self._started:
            self._start()
        b = self.pool.num_envs
        per_env = -(-num_episodes // b)
        games: list[list[tuple[float, int, int]]] = [[] for _ in range(b)]
        ts = self.timestep
        for _ in range(max_steps):
            self.rng, key = jax.random.split(self.rng)
            self.history, out, _ = self.policy(
                params, self.history, ts.observation, self.prev_action, ts.is_first, ts.legal_actions,
                self.pool.episode_step, key, jnp.float32(0.0),
            )
            agent_player = np.where(self.seat == 0, self.first_player, 1 - self.first_player)
            agent_turn = (ts.to_play == agent_player) | (not self.two_player)
            action = np.asarray(out.action).astype(np.int32)
            if self.two_player and not agent_turn.all():
                action = np.where(agent_turn, action, np.asarray(self.opponent(self.np_rng, ts)) + 1)
            action = np.where(ts.is_last, DUMMY_ACTION, action).astype(np.int32)
            nts = self.pool.step(np.maximum(action - 1, 0))
            gained = np.where(nts.is_first, 0.0, np.where(agent_turn, nts.reward, -nts.reward))
            self.ret = self.ret + gained
            self.length = self.length + np.where(nts.is_first, 0, 1)
            for i in np.flatnonzero(nts.is_last):
                games[i].append((float(self.ret[i]), int(self.length[i]), int(self.seat[i])))
            new_game = nts.is_first
            if self.two_player:
                self.seat = np.where(new_game, 1 - self.seat, self.seat).astype(np.int32)
            self.first_player = np.where(new_game, nts.to_play, self.first_player)
            self.ret = np.where(new_game, 0.0, self.ret).astype(np.float32)
            self.length = np.where(new_game, 0, self.length)
            self.prev_action = action
            ts = nts
            if min(len(g) for g in games) >= per_env:
                self.timestep = ts
                ordered = [games[i][k] for k in range(per_env) for i in range(b)]
                return ordered[:num_episodes]
        self.timestep = ts
        raise RuntimeError(f"only {sum(map(len, games))} games finished in {max_steps} steps (wanted {num_episodes})")
