"""Replay windows out of a ring of acted steps: the first piece of a device-resident replay (issue 89).

The host buffer (:class:`~moozi.replay.ReplayBuffer`) stores whole episodes and gathers, around a position
``t``, the window ``t - L .. t + K + N`` with its reads clipped to the episode. A replay kept in device memory
for JAX-native games is simpler to fill: each environment's steps as one row, in the order acted (the
:class:`~moozi.workers.policy.StepSample` fields, episodes one after another, each ending on its own last step),
and a batch of ``W = L + K + N + 1``-step sequences drawn from the rows (e.g. by flashbax's prioritised
trajectory buffer, ``sample_sequence_length = W``). :func:`ring_window` turns one such sequence, whose position
sits at index ``L``, into the :class:`~moozi.types.Trajectory` window that
:func:`~moozi.targets.make_targets` and :func:`~moozi.update.build_batch` take, so both replays feed the same
target code.

The window it builds gives the same targets as the host buffer's window around the same step (tested step by
step in ``tests/test_ring.py``); the two differ only where no target reads: an episode that began before the
sequence gets ``first = -1`` (the host: ``L - t``), one that ends after it ``last = W`` and ``is_terminal =
False`` (the host: its true end and flag), and reads outside the episode repeat its first or last step, as the
host's clipped reads do.
"""

from __future__ import annotations

from typing import Mapping

import jax
import jax.numpy as jnp
from flax import struct

from moozi.config import TargetConfig
from moozi.targets import priorities as _priorities
from moozi.types import Array, Trajectory

RING_FIELDS = ("frame", "action", "reward", "is_first", "is_last", "is_terminal", "to_play", "root_value",
               "root_policy", "random_action")
"""The acted fields a ring keeps per step (:class:`~moozi.workers.policy.StepSample`'s names)."""


def ring_window(steps: Mapping[str, Array], history_length: int) -> Trajectory:
    """The replay window of the position at index ``history_length`` (L) of a sequence of ring steps.

    Args:
      steps: :data:`RING_FIELDS`, each ``[W, ...]`` (``frame [W, H, W', C]`` in storage dtype, ``root_policy
        [W, A]``, flags bool), ``W = L + K + N + 1`` consecutive steps of one environment.
      history_length: L, the position's index in the sequence.

    Returns:
      A :class:`~moozi.types.Trajectory` of ``W`` steps (frames in storage dtype): reads clipped to the
      position's episode, ``first`` the index of its step 0 (-1 if it began before the sequence), ``last`` of
      its last step (``W`` if it ends after). Pure and jittable; ``jax.vmap`` it for a batch.
    """
    is_first = jnp.asarray(steps["is_first"], jnp.bool_)
    is_last = jnp.asarray(steps["is_last"], jnp.bool_)
    w = is_first.shape[0]
    idx = jnp.arange(w)
    first = jnp.max(jnp.where(is_first & (idx <= history_length), idx, -1)).astype(jnp.int32)
    last = jnp.min(jnp.where(is_last & (idx >= history_length), idx, w)).astype(jnp.int32)
    read = jnp.clip(idx, jnp.maximum(first, 0), jnp.minimum(last, w - 1))
    terminal = (last < w) & jnp.asarray(steps["is_terminal"], jnp.bool_)[jnp.minimum(last, w - 1)]
    return Trajectory(
        frames=jnp.asarray(steps["frame"])[read],
        actions=jnp.asarray(steps["action"], jnp.int32)[read],
        rewards=jnp.asarray(steps["reward"], jnp.float32)[read],
        root_values=jnp.asarray(steps["root_value"], jnp.float32)[read],
        root_policies=jnp.asarray(steps["root_policy"], jnp.float32)[read],
        to_play=jnp.asarray(steps["to_play"], jnp.int32)[read],
        first=first,
        last=last,
        is_terminal=terminal,
        random_actions=jnp.asarray(steps["random_action"], jnp.bool_)[read],
    )


@struct.dataclass
class Ring:
    """A replay kept in device memory: each of ``B`` environments' acted steps as one row of ``R`` columns.

    Attributes:
      steps: :data:`RING_FIELDS`, each ``[B, R, ...]`` (a row holds its environment's steps in the order acted,
        wrapping around; ``R`` a multiple of the segment length).
      priority: ``[B, R]`` float32 raw priorities (``|v* - G^N| + epsilon``) of the positions; 0 for a position
        that is not sampleable (its W-step sequence is not whole in the row, or not yet prioritised).
      filled: int32, the columns written (at most ``R``).
      at: int32, the next column to write.
      max_priority: float32, the largest priority set so far (``replay.initial_priority = max``).
    """

    steps: dict
    priority: jax.Array
    filled: jax.Array
    at: jax.Array
    max_priority: jax.Array

    @property
    def shape(self) -> tuple[int, int]:
        """``(B, R)``."""
        return tuple(self.priority.shape)


def ring_init(example: Mapping[str, Array], rows: int) -> Ring:
    """An empty ring of ``rows`` columns per environment, shaped like ``example`` (:data:`RING_FIELDS`, each
    ``[T, B, ...]``: one segment as the actor returns it)."""
    b = example["is_first"].shape[1]  # arrays or shapes (jax.eval_shape's) alike
    steps = {k: jnp.zeros((b, rows, *example[k].shape[2:]), example[k].dtype) for k in RING_FIELDS}
    ring = Ring(steps, jnp.zeros((b, rows), jnp.float32), jnp.int32(0), jnp.int32(0), jnp.float32(1.0))
    return jax.tree.map(jnp.copy, ring)  # a buffer of its own per field (equal constants may share one): donatable


def ring_store(ring: Ring, segment: Mapping[str, Array]) -> Ring:
    """Write a ``[T, B, ...]`` segment (:data:`RING_FIELDS`) at the write column; ``R`` must be a multiple of T.

    The columns written lose their priorities (their positions become sampleable in :func:`ring_mature`)."""
    t = segment["is_first"].shape[0]
    rows = ring.priority.shape[1]
    steps = {k: jax.lax.dynamic_update_slice_in_dim(ring.steps[k], jnp.swapaxes(jnp.asarray(segment[k]), 0, 1)
                                                    .astype(ring.steps[k].dtype), ring.at, axis=1)
             for k in RING_FIELDS}
    priority = jax.lax.dynamic_update_slice_in_dim(ring.priority, jnp.zeros((ring.priority.shape[0], t),
                                                                            jnp.float32), ring.at, axis=1)
    return ring.replace(steps=steps, priority=priority, filled=jnp.minimum(ring.filled + t, rows),
                        at=(ring.at + t) % rows)


def ring_offsets(ring: Ring) -> Array:
    """``[R]`` int32: each column's age order, 0 the oldest column written, ``filled - 1`` the newest (columns
    not written yet: ``filled`` and above)."""
    rows = ring.priority.shape[1]
    return (jnp.arange(rows, dtype=jnp.int32) - (ring.at - ring.filled)) % rows


def ring_sampleable(ring: Ring, history_length: int, ahead: int) -> Array:
    """``[R]`` bool: the columns whose position's sequence (``history_length`` steps before it, ``ahead = K + N``
    after it) lies in the written part of the row."""
    off = ring_offsets(ring)
    return (off >= history_length) & (off + ahead < ring.filled)


def ring_ready(ring: Ring, history_length: int, ahead: int) -> Array:
    """``[B, R]`` bool: the positions a batch may be drawn from (prioritised, their sequence whole in the row)."""
    return (ring.priority > 0) & ring_sampleable(ring, history_length, ahead)[None, :]


def ring_sequences(ring: Ring, env_index: Array, column: Array, history_length: int, ahead: int) -> Trajectory:
    """The replay windows (:func:`ring_window`) of positions ``(env_index [n], column [n])``: ``[n, W, ...]``."""
    rows = ring.priority.shape[1]
    w = history_length + ahead + 1
    cols = (column[:, None] - history_length + jnp.arange(w)[None, :]) % rows
    seqs = {k: v[env_index[:, None], cols] for k, v in ring.steps.items()}
    return jax.vmap(lambda s: ring_window(s, history_length))(seqs)


def ring_mature(ring: Ring, count: int, config: TargetConfig, epsilon: float, initial: str = "computed") -> Ring:
    """Prioritise the ``count`` newest columns of each row whose sequences just became whole (after a
    :func:`ring_store` of ``count`` steps): ``|v*_t - G^N_t| + epsilon`` from the stored root values and rewards
    (``initial = "computed"``, the host buffer's :func:`~moozi.targets.priorities`), or the largest priority
    set so far (``"max"``)."""
    b, rows = ring.priority.shape
    history, ahead = config.history_length, config.unroll_steps + config.td_steps
    newest = ring.filled - 1 - ahead  # the age of the newest sampleable position
    ages = newest - jnp.arange(count, dtype=jnp.int32)  # [count]
    column = (ring.at - ring.filled + ages) % rows
    ok = (ages >= history) & (ages >= 0)
    if initial == "max":
        prio = jnp.full((b, count), ring.max_priority, jnp.float32)
    else:
        env_index = jnp.repeat(jnp.arange(b, dtype=jnp.int32), count)
        windows = ring_sequences(ring, env_index, jnp.tile(column, b), history, ahead)
        values = jax.vmap(lambda w: _priorities(w, config)[history])(windows)
        prio = values.reshape(b, count) + epsilon
    prio = jnp.where(ok[None, :], prio, 0.0)
    priority = ring.priority.at[:, column].set(jnp.where(ok[None, :], prio, ring.priority[:, column]))
    return ring.replace(priority=priority, max_priority=jnp.maximum(ring.max_priority, prio.max()))


def ring_sample(ring: Ring, key, n: int, history_length: int, ahead: int, alpha: float, beta: float,
                normalization: str = "batch") -> tuple[Array, Array, Array]:
    """``n`` positions drawn with ``P(i) ∝ p_i ** alpha`` among the sampleable ones (one draw per equal-mass
    stratum, as the host's proportional sampler) and their importance weights ``(N P(i)) ** -beta``, divided by
    the batch's largest (``normalization = "batch"``) or by the largest any position could get (``"buffer"``).

    Returns ``(env_index [n], column [n], weights [n])``. A position of priority 0 is never drawn; the ring must
    hold at least one sampleable position."""
    b, rows = ring.priority.shape
    ok = ring_ready(ring, history_length, ahead)
    mass = jnp.where(ok, ring.priority, 0.0).reshape(-1) ** alpha
    mass = jnp.where(ok.reshape(-1), mass, 0.0)
    cdf = jnp.cumsum(mass)
    total = cdf[-1]
    u = (jnp.arange(n, dtype=jnp.float32) + jax.random.uniform(key, (n,))) / n * total
    flat = jnp.searchsorted(cdf, u, side="right")
    last_ok = jnp.max(jnp.where(ok.reshape(-1), jnp.arange(b * rows), 0))
    flat = jnp.minimum(flat, last_ok)  # u rounded past the total
    count = jnp.sum(ok)
    prob = mass[flat] / total
    weights = (count * prob) ** -beta
    if normalization == "buffer":
        p_min = jnp.min(jnp.where(ok.reshape(-1), mass, jnp.inf)) / total
        weights = weights / (count * p_min) ** -beta
    else:
        weights = weights / jnp.max(weights)
    return (flat // rows).astype(jnp.int32), (flat % rows).astype(jnp.int32), weights.astype(jnp.float32)


def ring_set_priorities(ring: Ring, env_index: Array, column: Array, priorities: Array, epsilon: float) -> Ring:
    """Set the sampled positions' priorities to ``|priorities| + epsilon`` (a position drawn twice keeps one)."""
    prio = jnp.abs(priorities).astype(jnp.float32) + epsilon
    return ring.replace(priority=ring.priority.at[env_index, column].set(prio),
                        max_priority=jnp.maximum(ring.max_priority, prio.max()))
