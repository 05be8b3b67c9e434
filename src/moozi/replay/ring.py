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

import jax.numpy as jnp

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
