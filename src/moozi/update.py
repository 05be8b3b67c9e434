"""The learner's update step: Optax Adam with global-norm clipping, a
learning-rate schedule, a target network refreshed every P updates and an
optional moving average of the params.

``update_step`` is pure; :func:`make_update_fn` jits it with the model and
config closed over. State owners (the learner) call it.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import serialization, struct

from moozi import xla_tuning
from moozi.config import ConfigError, LearnerConfig, TargetConfig
from moozi.envs.symmetry import augment_tables, augment_windows
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


_FIELDS = ("params", "target_params", "opt_state", "step")


def _train_state_dict(state: TrainState) -> dict:
    """Checkpoint form: the four fields by name."""
    return {k: serialization.to_state_dict(getattr(state, k)) for k in _FIELDS}


def _train_state_from_dict(template: TrainState, data: dict) -> TrainState:
    """Restore into ``template``; anything else in ``data`` is ignored (``ema_params``, which runs with the removed
    ``learner.ema_decay`` saved: their configs are refused before their checkpoints are read)."""
    missing = [k for k in _FIELDS if k not in data]
    if missing:
        raise ValueError(f"Missing field {missing[0]} in state dict while restoring an instance of TrainState")
    return TrainState(**{k: serialization.from_state_dict(getattr(template, k), data[k], name=k) for k in _FIELDS})


serialization.register_serialization_state(TrainState, _train_state_dict, _train_state_from_dict, override=True)


def budget_lr_scale(config: LearnerConfig, progress: float) -> float:
    """Learning-rate multiplier at ``progress`` in [0, 1] of the run's budget (``lr_decay_over = "budget"``).

    1 until ``lr_decay_start`` (s) of the budget, then, over the rest
    (``q = (p - s) / (1 - s)``), down to ``lr_final_fraction`` at the end: cosine
    ``f + (1 - f) (1 + cos(pi q)) / 2`` or linear ``1 - (1 - f) q``; 1 throughout
    for a constant schedule or a decay over updates (that one lives in
    :func:`learning_rate_schedule`).
    """
    if config.lr_decay_over != "budget" or config.lr_schedule == "constant":
        return 1.0
    start = config.lr_decay_start
    p = min(max((float(progress) - start) / (1.0 - start), 0.0), 1.0)
    f = config.lr_final_fraction
    if config.lr_schedule == "cosine":
        return f + (1.0 - f) * 0.5 * (1.0 + math.cos(math.pi * p))
    return 1.0 - (1.0 - f) * p


def learning_rate_schedule(config: LearnerConfig) -> optax.Schedule:
    """The in-graph schedule over updates: constant, or warmup, a hold at the peak until
    ``lr_decay_start * decay_steps``, then cosine / linear decay to ``lr_final_fraction * learning_rate``
    at ``decay_steps``. With ``lr_decay_over = "budget"`` only the warmup is here; the decay is the
    host's multiplier :func:`budget_lr_scale`."""
    lr = config.learning_rate
    end = config.lr_final_fraction * lr
    warmup = config.warmup_steps
    if config.lr_schedule == "constant" or config.lr_decay_over == "budget":
        if warmup == 0:
            return optax.constant_schedule(lr)
        return optax.join_schedules([optax.linear_schedule(0.0, lr, warmup), optax.constant_schedule(lr)], [warmup])
    hold_until = max(warmup, int(config.lr_decay_start * config.decay_steps))
    decay = max(config.decay_steps - hold_until, 1)
    if config.lr_schedule == "cosine":
        tail = optax.cosine_decay_schedule(lr, decay, alpha=config.lr_final_fraction)
    else:
        tail = optax.linear_schedule(lr, end, decay)
    return optax.join_schedules([optax.linear_schedule(0.0, lr, warmup), optax.constant_schedule(lr), tail],
                                [warmup, hold_until])


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


def update_step(state: TrainState, batch: Batch, lr_scale=1.0, *, model: Model, config: LearnerConfig):
    """One gradient update.

    Args:
      state: current :class:`TrainState`.
      batch: :class:`Batch` with targets ``[B, ...]`` and weights ``[B]``.
      lr_scale: ``[]`` multiplier of the learning rate (:func:`budget_lr_scale`);
        Adam's step is linear in its learning rate, so scaling the update is
        scaling the rate.

    Returns:
      ``(new_state, metrics, priorities)``: metrics is a dict of scalars (loss
      terms, ``train/grad_norm``, ``train/learning_rate``, ``train/step``, and
      ``train/nonfinite``: 1 when the loss or a gradient was not finite, 0 else),
      priorities ``[B]`` the new ``|v^0 - G_t|`` for the sampled positions.
      A non-finite loss or gradient leaves the state as it was (every leaf
      selected on the device, no host sync): the state never becomes non-finite,
      and the caller sees ``train/nonfinite`` and stops.
    """
    optimizer = make_optimizer(config)
    (loss, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, model, batch, config)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    lr_scale = jnp.asarray(lr_scale, jnp.float32)
    updates = jax.tree_util.tree_map(lambda u: u * lr_scale.astype(u.dtype), updates)
    params = optax.apply_updates(state.params, updates)
    step = state.step + 1
    target_params = optax.periodic_update(params, state.target_params, step, config.target_update_period)
    grad_norm = optax.tree.norm(grads)
    finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)  # a norm is finite only if every gradient is
    metrics = dict(aux["metrics"])
    metrics["train/grad_norm"] = grad_norm
    metrics["train/learning_rate"] = learning_rate_schedule(config)(state.step) * lr_scale
    metrics["train/step"] = step
    metrics["train/nonfinite"] = (~finite).astype(jnp.float32)
    new_state = TrainState(params=params, target_params=target_params, opt_state=opt_state, step=step)
    new_state = jax.tree_util.tree_map(lambda new, old: jnp.where(finite, new, old), new_state, state)
    return new_state, metrics, aux["priorities"]


def build_batch(windows: Trajectory, positions, weights, *, target_config: TargetConfig, num_actions: int,
                frame_scale: float = 1.0, chance: bool = False, chance_code=None) -> Batch:
    """Targets for a batch of raw replay windows (inside the learner's jit).

    Args:
      windows: :class:`Trajectory` with a leading ``[B]`` axis (frames in any
        numeric storage dtype; decoded as ``frames * frame_scale``).
      positions: ``[B]`` index of each position in its window.
      weights: ``[B]`` importance weights.
      chance: Stochastic MuZero's extra targets (:func:`moozi.targets.make_targets`).
      chance_code: the game's code function for ``learner.chance_codes = game`` (:mod:`moozi.envs.chance`),
        read from the decoded frames; None: the encoder names the outcomes.
    """
    def one(traj, t):
        frames = traj.frames.astype(jnp.float32)
        if frame_scale != 1.0:
            frames = frames * frame_scale
        return make_targets(traj.replace(frames=frames), t, target_config, num_actions, chance, chance_code)

    targets = jax.vmap(one)(windows, positions)
    return Batch(targets=targets, weights=jnp.asarray(weights, jnp.float32))


def update_from_windows(state: TrainState, windows: Trajectory, positions, weights, lr_scale=1.0, symmetry=None, *,
                        model: Model, config: LearnerConfig, target_config: TargetConfig, frame_scale: float = 1.0,
                        symmetry_tables=None, chance_code=None):
    """:func:`update_step` on a batch built from raw replay windows by :func:`build_batch`; with ``symmetry``
    (``[B]``) and ``symmetry_tables`` (:func:`moozi.envs.symmetry.augment_tables`) each window is first seen
    through its board symmetry; ``chance_code`` as :func:`build_batch`."""
    if symmetry is not None:
        windows = augment_windows(windows, symmetry, symmetry_tables)
    batch = build_batch(windows, positions, weights, target_config=target_config, num_actions=model.num_actions,
                        frame_scale=frame_scale, chance=bool(model.config.chance_outcomes), chance_code=chance_code)
    return update_step(state, batch, lr_scale, model=model, config=config)


def make_update_fn(model: Model, config: LearnerConfig):
    """``jit``-compiled ``update_step(state, batch)`` with ``model`` and ``config`` fixed; the input state is donated."""
    return jax.jit(functools.partial(update_step, model=model, config=config), donate_argnums=(0,),
                   compiler_options=xla_tuning.update_options())


def window_update(model: Model, config: LearnerConfig, target_config: TargetConfig, frame_scale: float = 1.0,
                  symmetries: tuple = (), chance_code=None):
    """:func:`update_from_windows` with its settings bound, not compiled: ``(state, windows, positions, weights[,
    lr_scale[, symmetry]]) -> (state, metrics, priorities)``. :func:`make_window_update_fn` compiles it alone; the
    device schedule's chunk (:mod:`moozi.fused`) compiles it inside acting and the ring. ``symmetries``: the game's
    (``EnvSpec.symmetries``), for windows sampled with a symmetry index."""
    return functools.partial(update_from_windows, model=model, config=config, target_config=target_config,
                             frame_scale=float(frame_scale),
                             symmetry_tables=augment_tables(symmetries) if symmetries else None, chance_code=chance_code)


def make_window_update_fn(model: Model, config: LearnerConfig, target_config: TargetConfig, frame_scale: float = 1.0,
                          symmetries: tuple = (), replicated=None, chance_code=None):
    """``jit``-compiled ``(state, windows, positions, weights[, lr_scale[, symmetry]]) -> (state, metrics,
    priorities)``; targets are built on the device from the raw windows; the input state is donated.
    ``symmetries``: the game's (``EnvSpec.symmetries``), for windows sampled with a symmetry index.
    ``replicated``: data parallel (:class:`DataParallel`): every output replicated over its mesh (the inputs
    arrive sharded, the batch along its leading axis; XLA partitions the update and all-reduces the gradients).
    ``chance_code``: the game's code function (``learner.chance_codes = game``; :func:`build_batch`)."""
    fn = window_update(model, config, target_config, frame_scale, symmetries, chance_code)
    extra = {} if replicated is None else {"out_shardings": replicated}
    return jax.jit(fn, donate_argnums=(0,), compiler_options=xla_tuning.update_options(), **extra)


class DataParallel:
    """The learner's devices for ``learner.devices = D > 1``: a one-axis mesh (``data``) over the first D local
    devices; the train state replicated, each batch split along its leading axis."""

    def __init__(self, devices: int):
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        local = jax.local_devices()
        if devices > len(local):
            raise ConfigError(f"learner.devices = {devices}, but this process sees {len(local)} device(s) "
                              f"({', '.join(str(d) for d in local)}); allowed: 1..{len(local)}")
        self.devices = devices
        self.mesh = Mesh(np.array(local[:devices]), ("data",))
        self.replicated = NamedSharding(self.mesh, PartitionSpec())
        self.split = NamedSharding(self.mesh, PartitionSpec("data"))

    def state(self, state):
        return jax.device_put(state, self.replicated)

    def batch(self, tree, batch_size: int):
        if batch_size % self.devices:
            raise ConfigError(f"schedule.batch_size = {batch_size} does not divide over learner.devices = "
                              f"{self.devices}; allowed: a multiple of {self.devices}")
        return jax.device_put(tree, self.split)
