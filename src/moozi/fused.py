"""Acting, a device replay and learning fused into one compiled chunk (issue 89's device schedule).

For a JAX-native game the whole training loop can stay on the device: per epoch the actor's segment of ``T``
steps of ``B`` environments (:func:`~moozi.workers.device_actor.make_device_rollout`), stored into a
:class:`~moozi.replay.ring.Ring` and prioritised as the host buffer would (:func:`~moozi.replay.ring.ring_mature`),
then ``U`` updates, each on a batch drawn by priority (:func:`~moozi.replay.ring.ring_sample`), built by the same
target code as the host path's (:func:`~moozi.update.update_from_windows`) and re-prioritised with the update's
new priorities. ``E`` such epochs are one ``lax.scan``: one host call, the metrics returned stacked at the end.

Only what the host keeps books with leaves the device: each epoch's mean of every update metric, and the acted
steps' rewards and flags (episode returns and lengths, env steps). The chunk is the composition of the pieces,
nothing more (``tests/test_fused.py`` checks it equals the pieces called one by one).

XLA:CPU runs a training update inside a while loop 5-6x slower than alone (docs/results/gpu-prep), so on a CPU
``unroll=True`` unrolls the chunk's loops; on a GPU a loop is the point.
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp

from moozi.config import ReplayConfig, TargetConfig
from moozi.replay.ring import RING_FIELDS, Ring, ring_mature, ring_sample, ring_sequences, ring_set_priorities, ring_store

LEDGER_FIELDS = ("reward", "is_first", "is_last", "is_terminal")
"""The acted step fields a chunk returns (``[E, T, B]``) so the host can count episodes and their returns."""


def ring_rows(capacity: int, num_envs: int, steps: int, window: int) -> int:
    """Columns per environment for a replay of ``capacity`` steps: a multiple of the segment length ``steps``,
    at least two windows."""
    per_env = -(-capacity // num_envs)
    return max(-(-per_env // steps), -(-2 * window // steps)) * steps


def act_and_store(rollout: Callable, params, carry, ring: Ring, temperature, *, target_config: TargetConfig,
                  replay_config: ReplayConfig):
    """One segment acted with ``params`` at ``temperature``, stored and prioritised: ``(carry, ring, steps)``,
    ``steps`` the segment's :data:`LEDGER_FIELDS` (``[T, B]``)."""
    carry, samples = rollout(params, carry, temperature)
    segment = {k: getattr(samples, k) for k in RING_FIELDS}
    ring = ring_store(ring, segment)
    ring = ring_mature(ring, samples.is_first.shape[0], target_config, replay_config.epsilon,
                       replay_config.initial_priority)
    return carry, ring, {k: getattr(samples, k) for k in LEDGER_FIELDS}


def learn_from_ring(learn: Callable, state, ring: Ring, key, lr_scale, *, target_config: TargetConfig,
                    replay_config: ReplayConfig, batch_size: int):
    """One update on a batch drawn from the ring by priority; the batch's positions re-prioritised:
    ``(state, ring, metrics)``. ``learn``: ``(state, windows, positions, weights, lr_scale) -> (state, metrics,
    priorities)`` (:func:`~moozi.update.update_from_windows` with its settings bound)."""
    history = target_config.history_length
    ahead = target_config.unroll_steps + target_config.td_steps
    env_index, column, weights = ring_sample(ring, key, batch_size, history, ahead, replay_config.alpha,
                                             replay_config.beta, replay_config.weight_normalization)
    windows = ring_sequences(ring, env_index, column, history, ahead)
    state, metrics, priorities = learn(state, windows, jnp.full((batch_size,), history, jnp.int32), weights,
                                       lr_scale)
    ring = ring_set_priorities(ring, env_index, column, priorities, replay_config.epsilon)
    return state, ring, metrics


def make_chunk(rollout: Callable, learn: Callable, *, target_config: TargetConfig, replay_config: ReplayConfig,
               batch_size: int, updates_per_epoch: int, epochs: int, unroll: bool = False):
    """Jitted ``(state, carry, ring, key, temperatures [E], lr_scale) -> (state, carry, ring, out)``: ``E =
    epochs`` epochs of one segment acted and ``updates_per_epoch`` updates; ``out["metrics"]``: each update
    metric's mean per epoch ``[E]``, ``out["steps"]``: the acted :data:`LEDGER_FIELDS` ``[E, T, B]``. The state,
    carry and ring are donated. The ring must already hold a sampleable position."""
    act = functools.partial(act_and_store, rollout, target_config=target_config, replay_config=replay_config)
    one = functools.partial(learn_from_ring, learn, target_config=target_config, replay_config=replay_config,
                            batch_size=batch_size)

    def epoch(lr_scale, c, xs):
        state, carry, ring = c
        key, temperature = xs
        carry, ring, steps = act(state.params, carry, ring, temperature)

        def update(c2, k):
            st, rg = c2
            st, rg, metrics = one(st, rg, k, lr_scale)
            return (st, rg), metrics

        (state, ring), metrics = jax.lax.scan(update, (state, ring), jax.random.split(key, updates_per_epoch),
                                              unroll=updates_per_epoch if unroll else 1)
        return (state, carry, ring), {"metrics": jax.tree.map(lambda m: jnp.mean(m, axis=0), metrics),
                                      "steps": steps}

    def chunk(state, carry, ring, key, temperatures, lr_scale):
        (state, carry, ring), out = jax.lax.scan(functools.partial(epoch, jnp.asarray(lr_scale, jnp.float32)),
                                                 (state, carry, ring),
                                                 (jax.random.split(key, epochs), jnp.asarray(temperatures,
                                                                                             jnp.float32)),
                                                 unroll=epochs if unroll else 1)
        return state, carry, ring, out

    return jax.jit(chunk, donate_argnums=(0, 1, 2))
