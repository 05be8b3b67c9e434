"""The one jitted policy step every actor uses (device rollouts and pool actors alike).

At each step of ``B`` environments in lock-step, :func:`policy_step` pushes the
new observation onto the rolling histories, searches from them, applies the
exploration schedule (temperature / Gumbel noise on the first
``explore_moves`` moves), random moves, the opponent's moves in test games or
the forced (stored) moves of reanalyze, and the last-step rule, and returns
the action together with one :class:`StepSample` per environment.

Modes (static, :attr:`PolicyConfig.mode`):

* ``"train"``: self-play with exploration; the actions the search chose (or
  a random move, flagged in ``random_action``).
* ``"test"``: greedy (temperature 0; the test planner sets no noise) unless
  the testing settings add randomness (``temperature``: sample from the
  search's policy; ``random_moves`` / ``random_move_prob``: random opening
  moves and epsilon moves, the agent's only), so that a deterministic game
  is not one game repeated; in two-player games ``external_action`` (the opponent's move) is played on
  the opponent's turns, and the agent's seat swaps after every game.
* ``"forced"``: ``external_action`` is played on every step (reanalyze: the
  stored actions), so histories stack exactly the stored actions; the search
  only supplies fresh v* and p*.

AlphaZero mode (``model.dynamics = simulator``): given the game (``env``)
and its states (``env_state``, JAX-native games on the device path), the
search steps the game's own simulator (:mod:`moozi.true_model`) with the
network's prior and value at every node, instead of the learned dynamics.

At a last step nothing is legal: the search still runs in the batch (only the
dummy action is valid there) and its action is discarded (dummy). The value
stored for a *truncated* last step is the network's value of that state (the
n-step bootstrap); a terminal last step's value is never read.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
from flax import struct

from moozi.config import PlannerConfig
from moozi.envs.contract import EnvSpec, TimeStep, encode_frames
from moozi.model.history import history_init, history_observation, history_push
from moozi.model.networks import Model
from moozi.planner import plan, search
from moozi.types import DUMMY_ACTION

MODES = ("train", "test", "forced")


@dataclass(frozen=True)
class PolicyConfig:
    """Static settings of a policy step (hashable).

    spec: the game (two players?, frame storage dtype).
    planner: search settings.
    discount: gamma.
    history_length: L.
    mode: ``"train"``, ``"test"`` or ``"forced"`` (see the module doc).
    explore_moves: training exploration (``moozi.config.ActingConfig``);
      ignored in the other modes.
    random_moves / random_move_prob: random moves of training (``acting``) or
      of test games (``testing``); ignored in ``"forced"`` mode.
    temperature: test games: sample the move from the search's policy raised to
      ``1 / temperature`` (0: the search's own, greedy choice).
    record_frames: emit frames in ``StepSample.frame`` (off for test games,
      whose episodes are only scored).
    """

    spec: EnvSpec
    planner: PlannerConfig
    discount: float
    history_length: int
    mode: str = "train"
    explore_moves: int | None = None
    random_moves: int = 0
    random_move_prob: float = 0.0
    temperature: float = 0.0
    record_frames: bool = True

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode = {self.mode!r} is invalid: allowed one of {MODES}")


@struct.dataclass
class PolicyState:
    """What a policy carries between steps (``[B]``).

    Attributes:
      history: ``(frames [B, L, H, W, C], actions [B, L])`` rolling history
        (before the current observation is pushed).
      prev_action: ``[B]`` augmented action played at the previous step.
      episode_step: ``[B]`` int32 moves played so far in the current episode.
      agent_seat: ``[B]`` int32 test games: 0 = the agent moves first, 1 = second.
      first_player: ``[B]`` int32 player id that moved first in the current episode.
      rng: PRNG key.
    """

    history: tuple
    prev_action: jax.Array
    episode_step: jax.Array
    agent_seat: jax.Array
    first_player: jax.Array
    rng: jax.Array


@struct.dataclass
class StepSample:
    """One acted step of ``B`` environments (a segment stacks them to ``[T, B, ...]``).

    Attributes:
      frame: ``[B, H, W, C]`` observation o_t in the game's storage dtype
        (``[B, 1, 1, 1]`` zeros when frames are not recorded).
      action: ``[B]`` augmented action a_t played (dummy on last steps).
      reward: ``[B]`` reward r_t received on arriving at t.
      is_first, is_last, is_terminal: ``[B]`` bool step flags.
      to_play: ``[B]`` int32 player to move.
      root_value: ``[B]`` v*_t (the network value on a truncated last step).
      root_policy: ``[B, A]`` p*_t.
      prior_value: ``[B]`` the network's value before search.
      policy_entropy: ``[B]`` entropy of p*_t.
      max_depth: ``[B]`` deepest search node.
      random_action: ``[B]`` bool, a_t was a uniformly random exploration move.
      agent_seat: ``[B]`` int32 the agent's seat in this game (test games; 0 otherwise).
      legal: ``[B, A_env]`` bool legal mask at t (kept so that reanalyze
        re-searches only the moves that were legal; all False on last steps).
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
    agent_seat: jax.Array
    legal: jax.Array


def init_policy_state(config: PolicyConfig, num_envs: int, rng) -> PolicyState:
    """Empty histories; in two-player test games environment ``b`` starts with the agent in seat ``b % 2``."""
    history = history_init(num_envs, config.spec.observation_shape, config.history_length)
    zeros = jnp.zeros((num_envs,), jnp.int32)
    seat = zeros
    if config.mode == "test" and config.spec.two_player:
        # The seat swaps at every first step, the very first one included.
        seat = 1 - jnp.arange(num_envs, dtype=jnp.int32) % 2
    return PolicyState(history=history, prev_action=zeros, episode_step=zeros, agent_seat=seat,
                       first_player=zeros, rng=rng)


def random_exploration(key, legal_actions, episode_step, action, random_moves: int = 0,
                       random_move_prob: float = 0.0):
    """Replace ``action`` (augmented ``[B]``) by a uniformly random legal move on the
    first ``random_moves`` moves of an episode and, after them, with probability
    ``random_move_prob`` (epsilon exploration). Both are static; 0 is a no-op.

    Returns ``(action [B] int32, is_random [B] bool)``; ``is_random`` is never
    set where nothing is legal (every last step, by the environment contract)."""
    if not random_moves and not random_move_prob:
        return action.astype(jnp.int32), jnp.zeros(action.shape, jnp.bool_)
    rand = random_legal_action(jax.random.fold_in(key, 1), legal_actions) + 1
    is_random = episode_step < random_moves
    if random_move_prob:
        coin = jax.random.uniform(jax.random.fold_in(key, 2), action.shape) < random_move_prob
        is_random = is_random | coin
    is_random = is_random & jnp.any(legal_actions, axis=-1)
    return jnp.where(is_random, rand, action).astype(jnp.int32), is_random


def sample_with_temperature(key, policy, temperature: float) -> jax.Array:
    """``[B]`` augmented action drawn from ``policy`` ``[B, A]`` raised to ``1 / temperature`` (static, > 0);
    actions of probability 0 (illegal, or the dummy) are never drawn."""
    logits = jnp.where(policy > 0, jnp.log(jnp.maximum(policy, 1e-30)) / temperature, -jnp.inf)
    logits = jnp.where(jnp.any(policy > 0, axis=-1, keepdims=True), logits, 0.0)
    return jax.random.categorical(key, logits).astype(jnp.int32)


def random_legal_action(key, legal_actions) -> jax.Array:
    """``[B]`` uniformly random legal *environment* action (0 where nothing is legal)."""
    logits = jnp.where(legal_actions, 0.0, -jnp.inf)
    logits = jnp.where(jnp.any(legal_actions, axis=-1, keepdims=True), logits, 0.0)
    return jax.random.categorical(key, logits).astype(jnp.int32)


def policy_step(params, state: PolicyState, ts: TimeStep, temperature, external_action, env_state=None, *,
                model: Model, config: PolicyConfig, env=None):
    """Act at the current step ``ts`` of every environment.

    Args:
      params: model parameters.
      state: the :class:`PolicyState` before ``ts``.
      ts: batched :class:`TimeStep` ``[B]`` (o_t, r_t, flags, legal mask, to_play).
      temperature: PUCT temperature of exploring training moves (scalar).
      external_action: ``[B]`` augmented actions: the opponent's in two-player
        test games, the forced ones in ``"forced"`` mode; ignored otherwise.
      env_state: AlphaZero mode: the game states ``[B]`` of ``ts`` (``env`` given).
      env: AlphaZero mode (static): the device game whose simulator the search
        steps; None searches the learned model.

    Returns:
      ``(state, sample, observation)``: the new state, a :class:`StepSample`
      (``sample.action`` is what to play) and the stacked observation
      ``[B, H, W, L * (C + A)]`` the search started from.
    """
    spec, mode = config.spec, config.mode
    rng, search_key = jax.random.split(state.rng)
    history = history_push(state.history, ts.observation, state.prev_action, ts.is_first)
    episode_step = jnp.where(ts.is_first, 0, state.episode_step).astype(jnp.int32)
    obs = history_observation(history, model.num_actions)
    if mode == "train":
        explore = jnp.ones(ts.is_first.shape, jnp.float32)
        if config.explore_moves is not None:
            explore = (episode_step < config.explore_moves).astype(jnp.float32)
        temp, gumbel = temperature * explore, config.planner.gumbel_scale * explore
    else:
        temp, gumbel = 0.0, config.planner.gumbel_scale
    if env is None:
        out = plan(model, params, search_key, obs, ts.legal_actions, config.planner, discount=config.discount,
                   two_player=spec.two_player, temperature=temp, gumbel_scale=gumbel)
    else:
        from moozi.true_model import network_evaluator, true_root, true_step

        evaluate = network_evaluator(model)
        seeds = jnp.zeros(ts.is_first.shape, jnp.uint32)  # the network evaluator draws nothing
        root = true_root(evaluate, params, env_state, history, seeds)
        out = search(params, search_key, root, true_step(env, evaluate), ts.legal_actions, config.planner,
                     discount=config.discount, two_player=spec.two_player, temperature=temp, gumbel_scale=gumbel)
    action, is_random = out.action.astype(jnp.int32), jnp.zeros(ts.is_first.shape, jnp.bool_)
    seat, first_player = state.agent_seat, state.first_player
    if mode == "test" and config.temperature:
        chosen = sample_with_temperature(jax.random.fold_in(search_key, 3), out.root_policy, config.temperature)
        action = jnp.where(jnp.any(ts.legal_actions, axis=-1), chosen, action).astype(jnp.int32)
    if mode == "forced":
        action = external_action.astype(jnp.int32)
    else:
        action, is_random = random_exploration(search_key, ts.legal_actions, episode_step, action,
                                               config.random_moves, config.random_move_prob)
    if mode == "test" and spec.two_player:  # the opponent's moves replace ours on its turns
        seat = jnp.where(ts.is_first, 1 - seat, seat)
        first_player = jnp.where(ts.is_first, ts.to_play, first_player).astype(jnp.int32)
        agent_player = jnp.where(seat == 0, first_player, 1 - first_player)
        action = jnp.where(ts.to_play == agent_player, action, external_action).astype(jnp.int32)
    action = jnp.where(ts.is_last, DUMMY_ACTION, action).astype(jnp.int32)
    truncated_last = ts.is_last & ~ts.is_terminal
    frame = encode_frames(spec, ts.observation) if config.record_frames else jnp.zeros(
        (ts.is_first.shape[0], 1, 1, 1), jnp.uint8)
    sample = StepSample(
        frame=frame,
        action=action,
        reward=ts.reward.astype(jnp.float32),
        is_first=ts.is_first,
        is_last=ts.is_last,
        is_terminal=ts.is_terminal,
        to_play=ts.to_play.astype(jnp.int32),
        root_value=jnp.where(truncated_last, out.prior_value, out.root_value),
        root_policy=out.root_policy,
        prior_value=out.prior_value,
        policy_entropy=out.policy_entropy,
        max_depth=out.max_depth,
        random_action=is_random,
        agent_seat=seat,
        legal=ts.legal_actions.astype(jnp.bool_),
    )
    new_state = PolicyState(history=history, prev_action=action, episode_step=episode_step + 1,
                            agent_seat=seat, first_player=first_player, rng=rng)
    return new_state, sample, obs
