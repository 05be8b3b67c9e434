"""The learner's update step: Optax Adam with global-norm clipping, a
learning-rate schedule, and a target network refreshed every P updates.

``update_step`` is pure; :func:`make_update_fn` jits it with the model and
config closed over. State owners (the learner) call it.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import optax
from flax import struct

from moozi.config import LearnerConfig, TargetConfig
from moozi.losses import loss_fn
from moozi.model.networks import Model
from moozi.targets import make_targets
from moozi.types import Batch, Params, Trajectory


@struct.dataclass
class TrainState:
    """Everything the update step changes.

    Attributes:
      params: online model parameters.
      target_params: target-network parameters (refreshed every
        ``target_update_period`` updates; used for bootstrapped values by reanalyze).
      opt_state: Optax optimiser state.
      step: ``[]`` int32 number of updates done.
    """

    params: Params
    target_params: Params
    opt_state: optax.OptState
    step: jax.Array


def learning_rate_schedule(config: LearnerConfig) -> optax.Schedule:
    """The configured schedule: constant, or warmup then cosine / linear decay to 0."""
    lr = config.learning_rate
    if config.lr_schedule == "constant":
        if config.warmup_steps == 0:
            return optax.constant_schedule(lr)
        return optax.join_schedules(
            [optax.linear_schedule(0.0, lr, config.warmup_steps), optax.constant_schedule(lr)],
            [config.warmup_steps],
        )
    if config.lr_schedule == "cosine":
        return optax.warmup_cosine_decay_schedule(
            0.0, lr, config.warmup_steps, max(config.decay_steps, config.warmup_steps + 1)
        )
    decay = max(config.decay_steps - config.warmup_steps, 1)
    return optax.join_schedules(
        [optax.linear_schedule(0.0, lr, config.warmup_steps), optax.linear_schedule(lr, 0.0, decay)],
        [config.warmup_steps],
    )


def make_optimizer(config: LearnerConfig) -> optax.GradientTransformation:
    """Global-norm clipping then Adam with the configured schedule (L2 lives in the loss)."""
    return optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        optax.adam(learning_rate_schedule(config)),
    )


def init_train_state(model: Model, config: LearnerConfig, rng) -> TrainState:
    """Fresh parameters, a copy as the target network, and optimiser state."""
    params = model.init(rng)
    return TrainState(
        params=params,
        target_params=jax.tree_util.tree_map(jnp.copy, params),
        opt_state=make_optimizer(config).init(params),
        step=jnp.zeros((), jnp.int32),
    )


def update_step(state: TrainState, batch: Batch, *, model: Model, config: LearnerConfig):
    """One gradient update.

    Args:
      state: current :class:`TrainState`.
      batch: :class:`Batch` with targets ``[B, ...]`` and weights ``[B]``.

    Returns:
      ``(new_state, metrics, priorities)``: metrics is a dict of scalars (loss
      terms, ``train/grad_norm``, ``train/learning_rate``, ``train/step``),
      priorities ``[B]`` the new ``|v^0 - G_t|`` for the sampled positions.
    """
    optimizer = make_optimizer(config)
    (_, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, model, batch, config)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    step = state.step + 1
    target_params = optax.periodic_update(params, state.target_params, step, config.target_update_period)
    metrics = dict(aux["metrics"])
    metrics["train/grad_norm"] = optax.tree.norm(grads)
    metrics["train/learning_rate"] = learning_rate_schedule(config)(state.step)
    metrics["train/step"] = step
    new_state = TrainState(params=params, target_params=target_params, opt_state=opt_state, step=step)
    return new_state, metrics, aux["priorities"]


def build_batch(windows: Trajectory, positions, weights, *, target_config: TargetConfig, num_actions: int,
                frame_scale: float = 1.0) -> Batch:
    """Targets for a batch of raw replay windows (inside the learner's jit).

    Args:
      windows: :class:`Trajectory` with a leading ``[B]`` axis (frames in any
        numeric storage dtype; decoded as ``frames * frame_scale``).
      positions: ``[B]`` index of each position in its window.
      weights: ``[B]`` importance weights.
    """
    def one(traj, t):
        frames = traj.frames.astype(jnp.float32)
        if frame_scale != 1.0:
            frames = frames * frame_scale
        return make_targets(traj.replace(frames=frames), t, target_config, num_actions)

    targets = jax.vmap(one)(windows, positions)
    return Batch(targets=targets, weights=jnp.asarray(weights, jnp.float32))


def update_from_windows(state: TrainState, windows: Trajectory, positions, weights, *, model: Model,
                        config: LearnerConfig, target_config: TargetConfig, frame_scale: float = 1.0):
    """:func:`update_step` on a batch built from raw replay windows by :func:`build_batch`."""
    batch = build_batch(windows, positions, weights, target_config=target_config, num_actions=model.num_actions,
                        frame_scale=frame_scale)
    return update_step(state, batch, model=model, config=config)


def make_update_fn(model: Model, config: LearnerConfig):
    """``jit``-compiled ``update_step(state, batch)`` with ``model`` and ``config`` fixed; the input state is donated."""
    return jax.jit(functools.partial(update_step, model=model, config=config), donate_argnums=(0,))


def make_window_update_fn(model: Model, config: LearnerConfig, target_config: TargetConfig, frame_scale: float = 1.0):
    """``jit``-compiled ``(state, windows, positions, weights) -> (state, metrics, priorities)``;
    targets are built on the device from the raw windows; the input state is donated."""
    fn = functools.partial(update_from_windows, model=model, config=config, target_config=target_config,
                           frame_scale=float(frame_scale))
    return jax.jit(fn, donate_argnums=(0,))
