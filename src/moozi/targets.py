"""Training targets from stored trajectories (docs/architecture.md §4, §6).

Pure, ``jit``- and ``vmap``-friendly functions; no Python loop per position.
All indices are *storage* indices into a :class:`~moozi.types.Trajectory`: the
episode's step 0 is at ``traj.first`` and its last step ``T`` at ``traj.last``.
Reads are always clipped to ``[0, S)`` and masked, so a window cut out of a
longer episode (``first < 0``, ``last >= S``) is fine, provided the window
holds every index the targets need: ``t - L .. t + K + N`` (those past ``last``
are never needed). Indices the window lacks are read clipped (deterministic
but meaningless).

n-step value target of index ``j`` (``N`` = ``td_steps``, ``gamma`` = ``discount``)::

    G^N_j = sum_{i<N} gamma^i s(j, j+i) r_{j+i+1}  +  gamma^N s(j, j+N) v*_{j+N}

with ``r`` past ``T`` equal to 0. Where ``j + N >= T`` the bootstrap is 0 for a
terminal episode (the absorbing state is worth 0) and ``gamma^(T-j) s(j, T) v*_T``
for a truncated one (for ``j <= T``; ``j > T`` of a truncated episode has no
target, ``value_mask = 0``).

Random exploration moves cut the return: if some ``a_e`` with ``j <= e < j + N``,
``e < T``, was a uniformly random move (``traj.random_actions``), the first such
``e`` ends the sum, ``G_j = sum_{i<e-j} gamma^i s(j, j+i) r_{j+i+1} +
gamma^(e-j) s(j, e) v*_e`` (so ``G_e = v*_e``): the search value at ``e`` says
what the position is worth under the search's own move, which the random move
did not play.

Two-player signs come from ``to_play`` alone: a reward ``r_{i+1}`` is from the
point of view of ``to_play[i]`` (the player who moved), a value ``v*_i`` from
that of ``to_play[i]`` (the player to move), and ``s(j, i) = +1`` if
``to_play[i] == to_play[j]`` else ``-1``. Single-player games (``to_play`` all
0) get all-``+1`` signs.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from moozi.config import TargetConfig
from moozi.model.history import history_at
from moozi.types import DUMMY_ACTION, Array, Targets, Trajectory, to_env_action

__all__ = ["make_targets", "batched_targets", "n_step_returns", "priorities"]


def _discounts(config: TargetConfig) -> np.ndarray:
    """``[N + 1]`` float32 constants ``gamma^0 .. gamma^N`` (``0^0 = 1``)."""
    gamma = float(config.discount)
    return np.asarray([gamma**i for i in range(config.td_steps + 1)], dtype=np.float32)


def _read(x: Array, idx: Array) -> Array:
    """``x[idx]`` with ``idx`` clipped into ``[0, S)``."""
    return x[jnp.clip(idx, 0, x.shape[0] - 1)]


def _episode_bounds(traj: Trajectory):
    first = jnp.asarray(traj.first, jnp.int32)
    last = jnp.asarray(traj.last, jnp.int32)
    terminal = jnp.asarray(traj.is_terminal, jnp.bool_)
    return first, last, terminal


def _returns_at(traj: Trajectory, js: Array, config: TargetConfig):
    """n-step value targets at storage indices ``js``.

    Args:
      traj: one unbatched trajectory (window), ``S`` steps.
      js: ``[M]`` int storage indices.
      config: ``td_steps`` N and ``discount`` gamma are used.

    Returns:
      ``(values [M] float32, mask [M] float32)``: ``mask`` is 0 where no target
      exists (before ``first``; past ``last`` of a truncated episode), and
      ``values`` is 0 there.
    """
    n = config.td_steps
    disc = jnp.asarray(_discounts(config))
    first, last, terminal = _episode_bounds(traj)
    js = jnp.asarray(js, jnp.int32)
    me = _read(traj.to_play, js)  # [M] player to move at j

    # Rewards r_{j+i+1}, i < N, from the point of view of the mover to_play[j+i].
    steps = js[:, None] + jnp.arange(n, dtype=jnp.int32)[None, :]  # [M, N] = j + i
    reward_ok = steps + 1 <= last
    if traj.random_actions is None:
        has_cut = jnp.zeros(js.shape, jnp.bool_)
        cut_idx = js
    else:
        # The first random move a_e (e in j .. j+N-1, before the end) ends the sum.
        cut = _read(traj.random_actions, steps).astype(jnp.bool_) & (steps < last) & (steps >= first)
        reward_ok = reward_ok & (jnp.cumsum(cut, axis=-1) == 0)
        has_cut = jnp.any(cut, axis=-1)
        cut_idx = js + jnp.argmax(cut, axis=-1).astype(jnp.int32)
    rewards = jnp.where(reward_ok, _read(traj.rewards, steps + 1), 0.0).astype(jnp.float32)
    reward_sign = jnp.where(_read(traj.to_play, steps) == me[:, None], 1.0, -1.0)
    reward_sum = jnp.sum(disc[None, :n] * reward_sign * rewards, axis=-1)

    # Bootstrap from v*_{j+N} inside the episode, from v*_T when truncated,
    # from v*_e at a random move e.
    boot_idx = jnp.where(has_cut, cut_idx, jnp.minimum(js + n, last))
    boot_on = has_cut | (js + n < last) | (~terminal & (js <= last))
    boot_sign = jnp.where(_read(traj.to_play, boot_idx) == me, 1.0, -1.0)
    boot_disc = disc[jnp.clip(boot_idx - js, 0, n)]
    boot_value = _read(traj.root_values, boot_idx).astype(jnp.float32)
    bootstrap = jnp.where(boot_on, boot_disc * boot_sign * boot_value, 0.0)

    mask = (js >= first) & (terminal | (js <= last))
    values = jnp.where(mask, reward_sum + bootstrap, 0.0)
    return values.astype(jnp.float32), mask.astype(jnp.float32)


def n_step_returns(traj: Trajectory, config: TargetConfig) -> Array:
    """n-step value targets ``G^N_i`` for every stored index ``i``.

    Args:
      traj: one unbatched trajectory (window), ``S`` steps.
      config: ``td_steps`` N and ``discount`` gamma are used.

    Returns:
      ``[S]`` float32. 0 where no target exists (indices before ``first``, and
      past ``last`` of a truncated episode) and past ``last`` of a terminal
      episode (the absorbing state is worth 0). Entries whose ``N``-step
      horizon runs past the end of a window (but not of the episode) are
      computed from clipped reads and are meaningless. Not jitted: wrap in
      ``jax.jit`` with ``config`` static (or close over it).
    """
    size = traj.rewards.shape[0]
    values, _ = _returns_at(traj, jnp.arange(size, dtype=jnp.int32), config)
    return values


def priorities(traj: Trajectory, config: TargetConfig) -> Array:
    """Initial replay priorities ``|v*_i - G^N_i|`` for every stored index ``i``.

    Args:
      traj: one unbatched trajectory (window), ``S`` steps.
      config: ``td_steps`` N and ``discount`` gamma are used.

    Returns:
      ``[S]`` float32; 0 outside the episode's steps ``[first, last]`` so that
      padding is never sampled by proportional replay. Equals
      ``make_targets(traj, i, ...).priority`` for ``first <= i <= last``.
    """
    size = traj.rewards.shape[0]
    idx = jnp.arange(size, dtype=jnp.int32)
    values, _ = _returns_at(traj, idx, config)
    first, last, _ = _episode_bounds(traj)
    in_episode = (idx >= first) & (idx <= last)
    prio = jnp.abs(traj.root_values.astype(jnp.float32) - values)
    return jnp.where(in_episode, prio, 0.0).astype(jnp.float32)


def _check_shapes(traj: Trajectory, num_actions: int) -> None:
    if traj.frames.ndim != 4:
        raise ValueError(f"traj.frames must be [S, H, W, C], got shape {traj.frames.shape}")
    size = traj.frames.shape[0]
    for name in ("actions", "rewards", "root_values", "to_play"):
        shape = getattr(traj, name).shape
        if shape != (size,):
            raise ValueError(f"traj.{name} must be [S] = ({size},), got shape {shape}")
    if traj.root_policies.shape != (size, num_actions):
        raise ValueError(
            f"traj.root_policies must be [S, A] = ({size}, {num_actions}) with "
            f"num_actions = {num_actions}, got shape {traj.root_policies.shape}"
        )


def make_targets(traj: Trajectory, t, config: TargetConfig, num_actions: int, chance: bool = False,
                 chance_code=None) -> Targets:
    """Training targets for position ``t`` of one trajectory, unroll ``k = 0..K``.

    Args:
      traj: one unbatched trajectory (window): frames ``[S, H, W, C]``,
        ``[S]`` actions / rewards / root_values / to_play, ``[S, A]`` root_policies,
        scalar ``first`` / ``last`` / ``is_terminal``.
      t: ``[]`` int storage index of the position, ``first <= t <= last`` (may be
        traced). The window must hold indices ``t - L .. t + K + N`` (those
        past ``last`` excepted).
      config: ``history_length`` L, ``unroll_steps`` K, ``td_steps`` N, ``discount``.
      num_actions: A, the augmented action-space size (dummy at index 0).
      chance: Stochastic MuZero (static): also ``unroll_observations`` and
        ``transition_mask`` (what the chance encoder reads).
      chance_code: static; with ``chance``, the game's code function
        ``(frame, env_action, next_frame) -> code`` (:mod:`moozi.envs.chance`):
        also ``chance_codes``, the true outcome of each real transition.

    Returns:
      :class:`~moozi.types.Targets` with ``observation`` / ``next_observation``
      ``[H, W, L*(C+A)]`` float32, ``actions`` ``[K]`` int32, ``policy``
      ``[K+1, A]``, ``value`` / ``value_mask`` / ``reward`` ``[K+1]`` float32,
      scalar float32 ``consistency_mask`` and ``priority``. Where
      ``consistency_mask`` is 0 (``t == T``), ``next_observation`` equals
      ``observation``. ``priority`` is ``|v*_t - value[0]|`` (0 if ``t`` lies
      outside ``[first, last]``). Call under ``jax.vmap`` for a batch (see
      :func:`batched_targets`).
    """
    _check_shapes(traj, num_actions)
    big_k = config.unroll_steps
    length = config.history_length
    first, last, _ = _episode_bounds(traj)
    t = jnp.asarray(t, jnp.int32)

    # Observations: history at t and at t + 1 (history at t again past the end).
    has_next = t < last
    observation = history_at(traj.frames, traj.actions, first, t, length, num_actions)
    t_next = jnp.where(has_next, t + 1, t)
    next_observation = history_at(traj.frames, traj.actions, first, t_next, length, num_actions)

    ks = t + jnp.arange(big_k + 1, dtype=jnp.int32)  # [K+1] = t + k
    before_end = ks < last  # a real step with an action and a policy

    actions = jnp.where(before_end[:big_k], _read(traj.actions, ks[:big_k]), DUMMY_ACTION)
    dummy_policy = jax.nn.one_hot(DUMMY_ACTION, num_actions, dtype=jnp.float32)
    policy = jnp.where(
        before_end[:, None], _read(traj.root_policies, ks).astype(jnp.float32), dummy_policy
    )
    reward_ok = (ks <= last) & (jnp.arange(big_k + 1) >= 1)
    reward = jnp.where(reward_ok, _read(traj.rewards, ks), 0.0)

    value, value_mask = _returns_at(traj, ks, config)
    in_episode = (t >= first) & (t <= last)
    priority = jnp.where(
        in_episode, jnp.abs(_read(traj.root_values, t).astype(jnp.float32) - value[0]), 0.0
    )

    extra = {}
    if chance:
        at = jnp.minimum(ks, last)
        extra["unroll_observations"] = jax.vmap(
            lambda i: history_at(traj.frames, traj.actions, first, i, length, num_actions))(at).astype(jnp.float32)
        extra["transition_mask"] = before_end[:big_k].astype(jnp.float32)
        if chance_code is not None:
            extra["chance_codes"] = _game_codes(traj, ks[:big_k], before_end[:big_k], chance_code)
    return Targets(
        **extra,
        observation=observation.astype(jnp.float32),
        next_observation=next_observation.astype(jnp.float32),
        actions=actions.astype(jnp.int32),
        policy=policy.astype(jnp.float32),
        value=value.astype(jnp.float32),
        value_mask=value_mask.astype(jnp.float32),
        reward=reward.astype(jnp.float32),
        consistency_mask=has_next.astype(jnp.float32),
        priority=priority.astype(jnp.float32),
    )


def _game_codes(traj: Trajectory, ks, real, chance_code):
    """``[K]`` int32: the game's code for each transition ``ks[k] -> ks[k] + 1`` (0 where ``real`` is False)."""
    def one(i):
        env_action = jnp.maximum(to_env_action(_read(traj.actions, i)), 0)  # the dummy (past the end) -> 0
        return chance_code(_read(traj.frames, i), env_action, _read(traj.frames, i + 1))

    return jnp.where(real, jax.vmap(one)(ks), 0).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("config", "num_actions", "chance", "chance_code"))
def batched_targets(trajs: Trajectory, ts, config: TargetConfig, num_actions: int, chance: bool = False,
                    chance_code=None) -> Targets:
    """Jitted ``vmap`` of :func:`make_targets` over a batch of positions.

    Args:
      trajs: a :class:`~moozi.types.Trajectory` with a leading ``[B]`` axis on
        every field (``first`` / ``last`` / ``is_terminal`` are ``[B]``); all
        windows share ``S``.
      ts: ``[B]`` int storage index of each position in its trajectory.
      config: static (hashable) :class:`~moozi.config.TargetConfig`.
      num_actions: static A.
      chance: static; Stochastic MuZero's extra targets (see :func:`make_targets`).
      chance_code: static; the game's code function (see :func:`make_targets`).

    Returns:
      :class:`~moozi.types.Targets` with a leading ``[B]`` axis on every field.
    """
    return jax.vmap(lambda traj, t: make_targets(traj, t, config, num_actions, chance, chance_code))(trajs, ts)
