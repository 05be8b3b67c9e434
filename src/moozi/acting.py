"""Device-path acting: environment step, history stacking and search as one XLA program.

A rollout segment is a ``lax.scan`` of :func:`act_step` over ``B`` device
environments in lock-step (../shared/DESIGN.md §2). It emits one
:class:`StepSample` per environment and step; :class:`TrajectoryAssembler`
(host side) cuts those into whole-episode :class:`~moozi.types.Trajectory`
objects for replay. Matches against a fixed opponent (testing, evaluation)
use :func:`make_match_rollout`, where the agent searches only on its own turns.

At a last step nothing is legal: the search still runs in the batch (only the
dummy action is valid there) and its action is discarded; the environment
resets on the next step. The value stored for a *truncated* last step is the
network's value of that state (it is the bootstrap of the n-step targets); a
terminal last step's value is never read.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from moozi.config import PlannerConfig
from moozi.envs.device import DeviceEnv, EnvState, reset_batch, step_batch
from moozi.envs.contract import TimeStep
from moozi.model.history import history_init, history_observation, history_push
from moozi.model.networks import Model
from moozi.planner import plan
from moozi.types import DUMMY_ACTION, Trajectory


@struct.dataclass
class ActorCarry:
    """What a rollout carries between steps (batched ``[B]``).

    Attributes:
      env_state: device environment states.
      timestep: the current (observed, not yet acted on) step.
      history: ``(frames [B, L, H, W, C], actions [B, L])`` rolling history.
      rng: PRNG key for search and action sampling.
    """

    env_state: EnvState
    timestep: TimeStep
    history: tuple
    rng: jax.Array


@struct.dataclass
class StepSample:
    """One acted step of ``B`` environments (a segment stacks them to ``[T, B, ...]``).

    Attributes:
      frame: ``[B, H, W, C]`` observation o_t.
      action: ``[B]`` augmented action a_t taken (dummy on last steps).
      reward: ``[B]`` reward r_t received on arriving at t.
      is_first, is_last, is_terminal: ``[B]`` bool step flags.
      to_play: ``[B]`` int32 player to move.
      root_value: ``[B]`` v*_t (the network value on a truncated last step).
      root_policy: ``[B, A]`` p*_t.
      prior_value: ``[B]`` the network's value before search.
      policy_entropy: ``[B]`` entropy of p*_t.
      max_depth: ``[B]`` deepest search node.
      random_action: ``[B]`` bool, the action was a uniformly random
        exploration move (``driver.random_moves`` / ``random_move_prob``).
    """

    frame: jax.Array
    action: jax.Array
    reward: jax.Array
    is_first: jax.Array
    is_last: jax.Array
    is_terminal: jax.Array
    to_play: jax.Array
    root_value: jax.Array
    root_policy: jax.Array
    prior_value: jax.Array
    policy_entropy: jax.Array
    max_depth: jax.Array
    random_action: jax.Array


def init_actor(env: DeviceEnv, num_envs: int, history_length: int, rng) -> ActorCarry:
    """Reset ``num_envs`` environments and start their histories."""
    reset_key, rng = jax.random.split(rng)
    state, ts = reset_batch(env, jax.random.split(reset_key, num_envs))
    history = history_init(num_envs, env.spec.observation_shape, history_length)
    history = history_push(history, ts.observation, jnp.zeros((num_envs,), jnp.int32), ts.is_first)
    return ActorCarry(env_state=state, timestep=ts, history=history, rng=rng)


def random_exploration(key, legal_actions, episode_step, action, random_moves: int = 0,
                       random_move_prob: float = 0.0):
    """Replace ``action`` (augmented ``[B]``) by a uniformly random legal move on the
    first ``random_moves`` moves of an episode and, after them, with probability
    ``random_move_prob`` (epsilon exploration). Both are static; 0 is a no-op.

    Returns ``(action [B] int32, is_random [B] bool)``; ``is_random`` is never
    set where nothing is legal (every last step, by the environment contract).
    The key is derived from the search key, so both acting paths draw the same moves."""
    if not random_moves and not random_move_prob:
        return action.astype(jnp.int32), jnp.zeros(action.shape, jnp.bool_)
    logits = jnp.where(legal_actions, 0.0, -jnp.inf)
    logits = jnp.where(jnp.any(legal_actions, axis=-1, keepdims=True), logits, 0.0)
    rand = jax.random.categorical(jax.random.fold_in(key, 1), logits).astype(jnp.int32) + 1
    is_random = episode_step < random_moves
    if random_move_prob:
        coin = jax.random.uniform(jax.random.fold_in(key, 2), action.shape) < random_move_prob
        is_random = is_random | coin
    is_random = is_random & jnp.any(legal_actions, axis=-1)
    return jnp.where(is_random, rand, action).astype(jnp.int32), is_random


def act_step(
    carry: ActorCarry,
    params,
    temperature,
    *,
    env: DeviceEnv,
    model: Model,
    planner: PlannerConfig,
    discount: float,
    explore_moves: int | None = None,
    random_moves: int = 0,
    random_move_prob: float = 0.0,
) -> tuple[ActorCarry, StepSample]:
    """Search at the current step of every environment, act, and step the environments.

    ``temperature`` (PUCT) and the Gumbel noise apply to the first
    ``explore_moves`` moves of each episode; later moves are greedy
    (AlphaZero's opening exploration). ``None`` explores on every move.
    The first ``random_moves`` moves are uniformly random legal moves, later
    ones with probability ``random_move_prob``.
    """
    rng, search_key = jax.random.split(carry.rng)
    ts = carry.timestep
    obs = history_observation(carry.history, model.num_actions)
    if explore_moves is None:
        explore = jnp.ones(ts.is_first.shape, jnp.float32)
    else:
        explore = (carry.env_state.episode_step < explore_moves).astype(jnp.float32)
    out = plan(
        model, params, search_key, obs, ts.legal_actions, planner,
        discount=discount, two_player=env.spec.two_player,
        temperature=temperature * explore, gumbel_scale=planner.gumbel_scale * explore,
    )
    action, is_random = random_exploration(search_key, ts.legal_actions, carry.env_state.episode_step,
                                           out.action, random_moves, random_move_prob)
    action = jnp.where(ts.is_last, DUMMY_ACTION, action)
    truncated_last = ts.is_last & ~ts.is_terminal
    root_value = jnp.where(truncated_last, out.prior_value, out.root_value)
    state, next_ts = step_batch(env, carry.env_state, jnp.maximum(action - 1, 0))
    history = history_push(carry.history, next_ts.observation, action, next_ts.is_first)
    sample = StepSample(
        frame=ts.observation,
        action=action,
        reward=ts.reward,
        is_first=ts.is_first,
        is_last=ts.is_last,
        is_terminal=ts.is_terminal,
        to_play=ts.to_play,
        root_value=root_value,
        root_policy=out.root_policy,
        prior_value=out.prior_value,
        policy_entropy=out.policy_entropy,
        max_depth=out.max_depth,
        random_action=is_random,
    )
    return ActorCarry(state, next_ts, history, rng), sample


def make_rollout(env: DeviceEnv, model: Model, planner: PlannerConfig, discount: float, num_steps: int,
                 explore_moves: int | None = None, random_moves: int = 0, random_move_prob: float = 0.0):
    """Jitted ``(params, carry, temperature) -> (carry, StepSample [T, B])`` over ``num_steps`` steps."""
    step = functools.partial(act_step, env=env, model=model, planner=planner, discount=discount,
                             explore_moves=explore_moves, random_moves=random_moves,
                             random_move_prob=random_move_prob)

    def rollout(params, carry, temperature):
        def body(c, _):
            return step(c, params, temperature)

        return jax.lax.scan(body, carry, None, length=num_steps)

    return jax.jit(rollout)


def _with_random_action(piece: dict) -> dict:
    """A saved assembler piece, with ``random_action`` all False if it predates that field."""
    if "random_action" not in piece:
        piece["random_action"] = np.zeros(piece["action"].shape, np.bool_)
    return piece


class TrajectoryAssembler:
    """Cuts rollout segments into whole episodes (host side, numpy).

    Steps of an episode that spans several segments are kept until its last
    step arrives. Episodes are emitted as :class:`Trajectory` with ``first = 0``.
    """

    def __init__(self, num_envs: int):
        self.num_envs = num_envs
        self._pending: list[list[dict]] = [[] for _ in range(num_envs)]

    def add(self, samples: StepSample) -> list[Trajectory]:
        """Add a ``[T, B]`` segment; return the episodes it completed (in order of completion)."""
        s = jax.tree_util.tree_map(np.asarray, samples)
        done: list[tuple[int, int, Trajectory]] = []
        for b in range(self.num_envs):
            lasts = np.flatnonzero(s.is_last[:, b])
            start = 0
            for end in lasts:
                piece = jax.tree_util.tree_map(lambda x: x[start : end + 1, b], s)
                self._pending[b].append(piece)
                done.append((int(end), b, self._finish(b)))
                start = end + 1
            if start < s.is_last.shape[0]:
                self._pending[b].append(jax.tree_util.tree_map(lambda x: x[start:, b], s))
        done.sort(key=lambda x: (x[0], x[1]))
        return [traj for _, _, traj in done]

    def _finish(self, b: int) -> Trajectory:
        pieces = self._pending[b]
        self._pending[b] = []
        cat = {f: np.concatenate([getattr(p, f) for p in pieces]) for f in ("frame", "action", "reward", "to_play", "root_value", "root_policy", "is_first", "is_terminal", "random_action")}
        if not cat["is_first"][0]:
            raise RuntimeError("an episode did not start with a first step; the segments were not contiguous")
        length = cat["action"].shape[0]
        return Trajectory(
            frames=cat["frame"].astype(np.float32),
            actions=cat["action"].astype(np.int32),
            rewards=cat["reward"].astype(np.float32),
            root_values=cat["root_value"].astype(np.float32),
            root_policies=cat["root_policy"].astype(np.float32),
            to_play=cat["to_play"].astype(np.int32),
            first=np.int32(0),
            last=np.int32(length - 1),
            is_terminal=np.bool_(cat["is_terminal"][-1]),
            random_actions=cat["random_action"].astype(np.bool_),
        )

    def state_dict(self) -> list[dict]:
        """Per environment, the steps of its unfinished episode as plain arrays (for checkpoints)."""
        fields = [f.name for f in dataclasses.fields(StepSample)]
        return [
            {f: np.concatenate([np.asarray(getattr(p, f)) for p in pend]) if pend else np.zeros((0,)) for f in fields}
            for pend in self._pending
        ]

    def load_state_dict(self, state) -> None:
        """Restore :meth:`state_dict` output (a list, or a dict keyed '0', '1', ... as loaded without a template)."""
        if isinstance(state, dict):
            state = [state[k] for k in sorted(state, key=int)]
        if len(state) != self.num_envs:
            raise ValueError(f"assembler state has {len(state)} environments, this actor {self.num_envs}")
        self._pending = [
            [StepSample(**_with_random_action({k: np.asarray(v) for k, v in piece.items()}))]
            if np.asarray(piece["action"]).shape[0] else []
            for piece in state
        ]

    def pending_steps(self) -> int:
        """Steps held for episodes not finished yet."""
        return sum(p.frame.shape[0] for pend in self._pending for p in pend)


# --- matches against a fixed opponent (testing and evaluation) -------------------------

Opponent = Callable[[jax.Array, EnvState, TimeStep], jax.Array]
"""``(rng, env_state [B], timestep [B]) -> env actions [B]``; jittable."""


def random_opponent(rng, env_state, timestep) -> jax.Array:
    """Uniformly random legal action (0 where nothing is legal)."""
    del env_state
    logits = jnp.where(timestep.legal_actions, 0.0, -jnp.inf)
    logits = jnp.where(jnp.any(timestep.legal_actions, axis=-1, keepdims=True), logits, 0.0)
    return jax.random.categorical(rng, logits).astype(jnp.int32)


@struct.dataclass
class MatchCarry:
    """Actor carry plus the match bookkeeping (``[B]``).

    agent_seat: the agent's place in the move order: 0 moves first, 1 second
      (always 0 in single-player games). Games that pick the first player id
      at random (pgx) still give the agent the seat it was assigned.
    first_player: the player id that moved first in the current episode.
    episode_return: running return from the agent's point of view.
    """

    actor: ActorCarry
    agent_seat: jax.Array
    first_player: jax.Array
    episode_return: jax.Array
    episode_length: jax.Array

    @property
    def agent_player(self) -> jax.Array:
        """``[B]`` the player id the agent plays in the current episode."""
        return jnp.where(self.agent_seat == 0, self.first_player, 1 - self.first_player)


@struct.dataclass
class MatchSample:
    """Per step ``[B]``: ``done`` (an episode ended here) with its ``episode_return``/``episode_length``; ``agent_seat``."""

    done: jax.Array
    episode_return: jax.Array
    episode_length: jax.Array
    agent_seat: jax.Array


def init_match(env: DeviceEnv, num_envs: int, history_length: int, rng) -> MatchCarry:
    """Start ``num_envs`` games; in two-player games environment ``b`` starts with the agent in seat ``b % 2``."""
    actor = init_actor(env, num_envs, history_length, rng)
    seats = jnp.arange(num_envs, dtype=jnp.int32) % 2 if env.spec.two_player else jnp.zeros((num_envs,), jnp.int32)
    zeros = jnp.zeros((num_envs,), jnp.float32)
    return MatchCarry(actor, seats, actor.timestep.to_play.astype(jnp.int32), zeros, jnp.zeros((num_envs,), jnp.int32))


def make_match_rollout(
    env: DeviceEnv,
    model: Model,
    planner: PlannerConfig,
    discount: float,
    num_steps: int,
    opponent: Opponent | None = None,
):
    """Jitted ``(params, MatchCarry) -> (MatchCarry, MatchSample [T, B])``.

    The agent searches greedily (temperature 0) on its own turns; in two-player
    games ``opponent`` (default: uniformly random) plays the other seat and the
    agent's seat swaps after every game, so seats stay balanced.
    """
    opponent = opponent or random_opponent

    def step(c: MatchCarry, params):
        a = c.actor
        rng, search_key, opp_key = jax.random.split(a.rng, 3)
        ts = a.timestep
        obs = history_observation(a.history, model.num_actions)
        out = plan(model, params, search_key, obs, ts.legal_actions, planner,
                   discount=discount, two_player=env.spec.two_player, temperature=0.0)
        agent_player = c.agent_player
        agent_turn = ts.to_play == agent_player
        opp_action = opponent(opp_key, a.env_state, ts) + 1
        action = jnp.where(agent_turn | (not env.spec.two_player), out.action, opp_action)
        action = jnp.where(ts.is_last, DUMMY_ACTION, action).astype(jnp.int32)
        state, nts = step_batch(env, a.env_state, jnp.maximum(action - 1, 0))
        history = history_push(a.history, nts.observation, action, nts.is_first)
        # Reward on arriving at the next step belongs to the player who moved now.
        mover_is_agent = agent_turn | (not env.spec.two_player)
        gained = jnp.where(nts.is_first, 0.0, jnp.where(mover_is_agent, nts.reward, -nts.reward))
        ret = c.episode_return + gained
        length = c.episode_length + jnp.where(nts.is_first, 0, 1)
        done = nts.is_last
        sample = MatchSample(done=done, episode_return=ret, episode_length=length, agent_seat=c.agent_seat)
        # The seat swaps when a new game starts.
        seat = jnp.where(nts.is_first & env.spec.two_player, 1 - c.agent_seat, c.agent_seat)
        new = MatchCarry(
            ActorCarry(state, nts, history, rng),
            seat,
            jnp.where(nts.is_first, nts.to_play, c.first_player).astype(jnp.int32),
            jnp.where(nts.is_first, 0.0, ret),
            jnp.where(nts.is_first, 0, length),
        )
        return new, sample

    def rollout(params, carry):
        return jax.lax.scan(lambda c, _: step(c, params), carry, None, length=num_steps)

    return jax.jit(rollout)


def play_matches(rollout, params, carry: MatchCarry, num_episodes: int, max_segments: int = 10_000):
    """Run a match rollout until ``num_episodes`` games finished, evenly across environments.

    Taking the first games to finish would favour short episodes, so every
    environment plays the same number of games (``ceil(num_episodes / B)``)
    and the first ``num_episodes`` of those, taken round-robin over the
    environments, are returned.

    Returns ``(carry, results)``: ``results`` is a list of
    ``(episode_return, episode_length, agent_seat)``.
    """
    num_envs = int(carry.agent_seat.shape[0])
    per_env = -(-num_episodes // num_envs)
    games: list[list[tuple[float, int, int]]] = [[] for _ in range(num_envs)]
    for _ in range(max_segments):
        carry, samples = rollout(params, carry)
        done = np.asarray(samples.done)
        rets = np.asarray(samples.episode_return)
        lens = np.asarray(samples.episode_length)
        seats = np.asarray(samples.agent_seat)
        for t, b in zip(*np.nonzero(done)):
            games[b].append((float(rets[t, b]), int(lens[t, b]), int(seats[t, b])))
        if min(len(g) for g in games) >= per_env:
            ordered = [games[b][i] for i in range(per_env) for b in range(num_envs)]
            return carry, ordered[:num_episodes]
    finished = sum(len(g) for g in games)
    raise RuntimeError(f"only {finished} games finished in {max_segments} segments (wanted {num_episodes})")
