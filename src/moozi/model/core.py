"""The learned model's layers and its interface: representation h, dynamics g, prediction f, projection rho.

:func:`moozi.model.networks.build_model` builds a model from its config (this module's :class:`Model`, or the
Stochastic MuZero model of :mod:`moozi.model.stochastic`, which extends it).

Two families share one interface (:class:`Model`):

* ``resnet`` (thesis layout, image observations ``[H, W, C']``): 1x1 conv to
  ``channels`` + residual blocks for h; action planes + 1x1 conv (or, with
  ``model.dynamics_action = kernels``, a 3x3 conv of each move's own) + residual
  blocks + a reward head for g; one block + dense heads for f; one block for rho.
* ``mlp`` (vector observations, tiny tests): dense trunks with the same roles.

LayerNorm replaces BatchNorm so the model is a pure function of its parameters
(no running statistics to thread through acting, search and training).
The final value, reward and policy layers start at zero, so a fresh model
predicts 0 and a uniform policy, which keeps early search and targets calm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from moozi.config import ModelConfig
from moozi.model import perspective
from moozi.model.perspective import MoverView
from moozi.model.transform import logits_to_scalar
from moozi.types import ModelOutput


def normalize_hidden(hidden):
    """Min-max scale each sample's hidden state to [0, 1] (MuZero). ``[B, ...]`` -> same.

    The extremes are gathered at argmin/argmax rather than reduced with ``min``/``max``: JAX's gradient of a
    ``max`` divides by the number of elements equal to it, which is 0 (a NaN gradient) when XLA computes the
    operand twice and rounds the copies differently (seen with ``JAX_DISABLE_MOST_OPTIMIZATIONS``). Same value;
    the same gradient to float rounding (``research/hidden_norm_ab.py``).
    """
    flat = hidden.reshape(hidden.shape[0], -1)
    lo = jnp.take_along_axis(flat, flat.argmin(axis=-1, keepdims=True), axis=-1)
    hi = jnp.take_along_axis(flat, flat.argmax(axis=-1, keepdims=True), axis=-1)
    flat = (flat - lo) / jnp.maximum(hi - lo, 1e-5)
    return flat.reshape(hidden.shape)


class _ResBlock(nn.Module):
    channels: int
    dtype: str = "float32"  # the convolutions' compute dtype (``model.compute_dtype``); parameters stay float32

    @nn.compact
    def __call__(self, x):
        y = nn.Conv(self.channels, (3, 3), dtype=self.dtype)(x)
        y = nn.relu(nn.LayerNorm()(y))
        y = nn.Conv(self.channels, (3, 3), dtype=self.dtype)(y)
        y = nn.LayerNorm()(y)
        return nn.relu(x + y)


class _Head(nn.Module):
    """Dense hidden layer + zero-initialised output layer."""

    hidden: int
    out: int
    dtype: str = "float32"

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(self.hidden, dtype=self.dtype)(x.reshape(x.shape[0], -1)))
        return nn.Dense(self.out, kernel_init=nn.initializers.zeros, dtype=self.dtype)(x)


class _MLP(nn.Module):
    widths: tuple[int, ...]
    out: int
    out_init: Callable = nn.initializers.lecun_normal()  # the last layer's kernel (Dense's default)
    dtype: str = "float32"

    @nn.compact
    def __call__(self, x):
        x = x.reshape(x.shape[0], -1)
        for w in self.widths:
            x = nn.relu(nn.LayerNorm()(nn.Dense(w, dtype=self.dtype)(x)))
        return nn.Dense(self.out, kernel_init=self.out_init, dtype=self.dtype)(x)


class _Downsample(nn.Module):
    """MuZero's Atari representation stem (Schrittwieser et al. 2020, appendix): two stride-2 convolutions, each
    followed by a residual block, then two stride-2 average poolings with a residual block between them;
    ``[B, H, W, C] -> [B, ceil(H / 16), ceil(W / 16), channels]`` (84 x 84 -> 6 x 6), so the heads' dense
    layers read 36 cells instead of 7,056."""

    channels: int
    dtype: str = "float32"

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.LayerNorm()(nn.Conv(self.channels, (3, 3), strides=(2, 2), dtype=self.dtype)(x)))
        x = _ResBlock(self.channels, self.dtype)(x)
        x = nn.relu(nn.LayerNorm()(nn.Conv(self.channels, (3, 3), strides=(2, 2), dtype=self.dtype)(x)))
        x = _ResBlock(self.channels, self.dtype)(x)
        x = nn.avg_pool(x, (3, 3), strides=(2, 2), padding="SAME")
        x = _ResBlock(self.channels, self.dtype)(x)
        return nn.avg_pool(x, (3, 3), strides=(2, 2), padding="SAME")


def _stem(channels: int, downsample: str, dtype: str = "float32") -> nn.Module:
    """The layer that first reads an observation: a 1x1 convolution (``none``) or :class:`_Downsample`."""
    return nn.Conv(channels, (1, 1), dtype=dtype) if downsample == "none" else _Downsample(channels, dtype)


def _action_planes_layers(mod, channels: int, num_actions: int) -> None:
    """The thesis's move input: one-hot action planes stacked on the state before a 1x1 convolution."""
    mod.dyn_in = nn.Conv(channels, (1, 1), dtype=mod.cfg.compute_dtype)


def _action_planes(mod, hidden, one_hot):
    b, h, w, _ = hidden.shape
    planes = jnp.broadcast_to(one_hot[:, None, None, :], (b, h, w, one_hot.shape[-1]))
    return mod.dyn_in(jnp.concatenate([hidden, planes], axis=-1))


def _action_kernels_layers(mod, channels: int, num_actions: int) -> None:
    """A 3x3 convolution of its own per move (all computed, the move's kept): multiplicative conditioning."""
    mod.dyn_kernels = nn.Conv(channels * num_actions, (3, 3), dtype=mod.cfg.compute_dtype)


def _action_kernels(mod, hidden, one_hot):
    b, h, w, _ = hidden.shape
    per_move = mod.dyn_kernels(hidden).reshape(b, h, w, one_hot.shape[-1], -1)
    return jnp.einsum("bhwac,ba->bhwc", per_move, one_hot)


# ``model.dynamics_action``: how a move enters the residual dynamics, as (its layers, the step), chosen once when
# the model is built. The layers keep the names they always had, so every checkpoint loads.
ACTION_INPUTS = {"planes": (_action_planes_layers, _action_planes), "kernels": (_action_kernels_layers, _action_kernels)}


class _ResNetModel(nn.Module):
    cfg: ModelConfig
    num_actions: int

    def setup(self):
        c, dt = self.cfg, self.cfg.compute_dtype
        n = c.num_bins
        self.repr_in = _stem(c.channels, c.downsample, dt)
        self.repr_norm = nn.LayerNorm()
        self.repr_blocks = [_ResBlock(c.channels, dt) for _ in range(c.repr_blocks)]
        layers, self._move_input = ACTION_INPUTS[c.dynamics_action]
        layers(self, c.channels, self.num_actions)
        self.dyn_norm = nn.LayerNorm()
        self.dyn_blocks = [_ResBlock(c.channels, dt) for _ in range(c.dyn_blocks)]
        self.reward_head = _Head(c.head_hidden, n, dt)
        self.pred_blocks = [_ResBlock(c.channels, dt) for _ in range(c.pred_blocks)]
        self.value_head = _Head(c.head_hidden, n, dt)
        self.policy_head = _Head(c.head_hidden, self.num_actions, dt)
        self.proj_blocks = [_ResBlock(c.channels, dt) for _ in range(c.proj_blocks)]

    def _finish(self, hidden):
        return normalize_hidden(hidden) if self.cfg.normalize_hidden else hidden

    def represent(self, obs):
        x = nn.relu(self.repr_norm(self.repr_in(obs)))
        for block in self.repr_blocks:
            x = block(x)
        return self._finish(x)

    def dynamics(self, hidden, action):
        x = nn.relu(self.dyn_norm(self._move_input(self, hidden, jax.nn.one_hot(action, self.num_actions))))
        for block in self.dyn_blocks:
            x = block(x)
        reward_logits = self.reward_head(x)
        return self._finish(x), reward_logits

    def _prediction_trunk(self, hidden):
        x = hidden
        for block in self.pred_blocks:
            x = block(x)
        return x

    def predict(self, hidden):
        x = self._prediction_trunk(hidden)
        return self.value_head(x), self.policy_head(x)

    def project(self, hidden):
        x = hidden
        for block in self.proj_blocks:
            x = block(x)
        return x.reshape(x.shape[0], -1)

    def __call__(self, obs, action):
        nxt, _ = self.dynamics(self.represent(obs), action)
        self.predict(nxt)
        return self.project(nxt)


class _MLPModel(nn.Module):
    cfg: ModelConfig
    num_actions: int

    def setup(self):
        c, dt = self.cfg, self.cfg.compute_dtype
        n = c.num_bins
        self.repr_net = _MLP(c.mlp_hidden, c.mlp_embedding, dtype=dt)
        self.dyn_net = _MLP(c.mlp_hidden, c.mlp_embedding, dtype=dt)
        self.reward_head = _Head(c.head_hidden, n, dt)
        self.pred_net = _MLP(c.mlp_hidden[:1], c.head_hidden, dtype=dt)
        self.value_head = _Head(c.head_hidden, n, dt)
        self.policy_head = _Head(c.head_hidden, self.num_actions, dt)
        self.proj_net = _MLP(c.mlp_hidden[:1], c.mlp_embedding, dtype=dt)

    def _finish(self, hidden):
        return normalize_hidden(hidden) if self.cfg.normalize_hidden else hidden

    def represent(self, obs):
        return self._finish(self.repr_net(obs))

    def dynamics(self, hidden, action):
        x = jnp.concatenate([hidden, jax.nn.one_hot(action, self.num_actions)], axis=-1)
        x = self.dyn_net(x)
        return self._finish(x), self.reward_head(nn.relu(x))

    def _prediction_trunk(self, hidden):
        return nn.relu(self.pred_net(hidden))

    def predict(self, hidden):
        x = self._prediction_trunk(hidden)
        return self.value_head(x), self.policy_head(x)

    def project(self, hidden):
        return self.proj_net(hidden)

    def __call__(self, obs, action):
        nxt, _ = self.dynamics(self.represent(obs), action)
        self.predict(nxt)
        return self.project(nxt)


@dataclass(frozen=True)
class Model:
    """The learned model as pure functions of ``params``.

    Attributes:
      config: network family and sizes.
      observation_shape: stacked observation shape ``(H, W, L*(C + A))`` for
        ``resnet``; any shape for ``mlp`` (flattened).
      num_actions: A, the augmented action-space size (dummy included).
      mover_view: where set (``model.mover_relative``), observations are
        relabelled so the mover is player 0 before the representation
        (:mod:`moozi.model.perspective`).
    """

    config: ModelConfig
    observation_shape: tuple[int, ...]
    num_actions: int
    mover_view: MoverView | None = None

    def __post_init__(self):
        if self.config.kind == "resnet" and len(self.observation_shape) != 3:
            raise ValueError(
                f"model.kind='resnet' needs image observations (H, W, C), got observation_shape "
                f"{self.observation_shape}; use model.kind='mlp' for vector observations"
            )
        if self.num_actions < 2:
            raise ValueError(f"num_actions (augmented, dummy included) must be >= 2, got {self.num_actions}")

    @property
    def module(self) -> nn.Module:
        if self.config.kind == "resnet":
            return _ResNetModel(self.config, self.num_actions)
        return _MLPModel(self.config, self.num_actions)

    def init(self, rng) -> dict:
        """Fresh parameters (a pytree)."""
        obs = jnp.zeros((1, *self.observation_shape), jnp.float32)
        return self.module.init(rng, obs, jnp.zeros((1,), jnp.int32))

    def check_observation(self, observation) -> None:
        """Raise a clear error if ``observation`` is not ``[B, *observation_shape]``."""
        if tuple(observation.shape[1:]) != tuple(self.observation_shape) or observation.ndim < 2:
            raise ValueError(
                f"observation shape {tuple(observation.shape)} does not match the model's "
                f"[B, {', '.join(map(str, self.observation_shape))}]"
            )

    def check_params(self, params) -> None:
        """Raise a clear error if ``params`` were built for another model (e.g. another support size)."""
        expected = jax.eval_shape(self.init, jax.random.key(0))
        exp_shapes = jax.tree_util.tree_map_with_path(lambda p, x: x.shape, expected)
        try:
            got_shapes = jax.tree_util.tree_map_with_path(lambda p, x: x.shape, params)
        except Exception as err:  # pragma: no cover - malformed pytrees
            raise ValueError(f"params are not a pytree of arrays: {err}") from err
        exp_flat = dict(jax.tree_util.tree_flatten_with_path(exp_shapes, is_leaf=lambda x: isinstance(x, tuple))[0])
        got_flat = dict(jax.tree_util.tree_flatten_with_path(got_shapes, is_leaf=lambda x: isinstance(x, tuple))[0])
        if exp_flat.keys() != got_flat.keys():
            missing = sorted(map(jax.tree_util.keystr, exp_flat.keys() - got_flat.keys()))[:3]
            extra = sorted(map(jax.tree_util.keystr, got_flat.keys() - exp_flat.keys()))[:3]
            raise ValueError(f"params do not match the model: missing {missing}, unexpected {extra}")
        for key, shape in exp_flat.items():
            if got_flat[key] != shape:
                raise ValueError(
                    f"params{jax.tree_util.keystr(key)} has shape {got_flat[key]}, the model expects "
                    f"{shape} (model.support_size={self.config.support_size}, "
                    f"num_actions={self.num_actions}, observation_shape={self.observation_shape})"
                )

    def _apply(self, params, *args, method):
        """The module's ``method`` on ``params``; what leaves is float32 whatever ``model.compute_dtype`` the layers
        computed in, so search, targets and losses never see bfloat16 (a no-op at float32)."""
        out = self.module.apply(params, *args, method=method)
        return jax.tree_util.tree_map(lambda x: x.astype(jnp.float32) if jnp.issubdtype(x.dtype, jnp.floating) else x,
                                      out)

    def _seen(self, observation):
        """The observation as the representation sees it (the mover's view where configured)."""
        return observation if self.mover_view is None else perspective.mover_view(observation, self.mover_view)

    def _output(self, hidden, value_logits, reward_logits, policy_logits) -> ModelOutput:
        return ModelOutput(
            hidden=hidden,
            value_logits=value_logits,
            reward_logits=reward_logits,
            policy_logits=policy_logits,
            value=logits_to_scalar(value_logits, self.config.value_transform),
            reward=logits_to_scalar(reward_logits, self.config.value_transform),
        )

    def represent(self, params, observation):
        """h: ``[B, *observation_shape]`` -> hidden ``[B, ...]``."""
        self.check_observation(observation)
        return self._apply(params, self._seen(observation), method="represent")

    def initial_inference(self, params, observation) -> ModelOutput:
        """h then f: ``[B, *observation_shape]`` -> ModelOutput (reward 0, reward logits constant)."""
        self.check_observation(observation)

        def fn(module, obs):
            hidden = module.represent(obs)
            value_logits, policy_logits = module.predict(hidden)
            return hidden, value_logits, policy_logits

        hidden, value_logits, policy_logits = self._apply(params, self._seen(observation), method=fn)
        # A delta at bin 0 (reward 0) in logit form; constant so it carries no gradient.
        zero_bin = self.config.support_size
        reward_logits = jnp.where(
            jnp.arange(self.config.num_bins) == zero_bin, 0.0, -1e4
        ) * jnp.ones((observation.shape[0], 1), jnp.float32)
        return self._output(hidden, value_logits, reward_logits, policy_logits)

    def recurrent_inference(self, params, hidden, action) -> ModelOutput:
        """g then f: hidden ``[B, ...]``, augmented action ``[B]`` int -> ModelOutput."""
        if action.shape != hidden.shape[:1]:
            raise ValueError(f"action must be [B] = {hidden.shape[:1]}, got shape {action.shape}")

        def fn(module, h, a):
            nxt, reward_logits = module.dynamics(h, a)
            value_logits, policy_logits = module.predict(nxt)
            return nxt, value_logits, reward_logits, policy_logits

        nxt, value_logits, reward_logits, policy_logits = self._apply(params, hidden, action, method=fn)
        return self._output(nxt, value_logits, reward_logits, policy_logits)

    def projection(self, params, hidden):
        """rho: hidden ``[B, ...]`` -> ``[B, D]`` flat projection (D = hidden size)."""
        return self._apply(params, hidden, method="project")
