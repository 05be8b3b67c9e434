"""Stochastic MuZero (Antonoglou et al. 2022): the learned model for games with chance.

A move does not lead to the next state directly. It leads to an *afterstate* (the position after the move,
before chance acts), whose prediction gives its value ``Q`` and a prior ``sigma`` over ``M`` chance outcomes;
the *chance dynamics* then go from the afterstate and one outcome's code to the next state and the reward::

    s --a--> as = phi(s, a)           (afterstate dynamics: the residual/MLP dynamics trunk)
    as       -> Q(as), sigma(as)      (afterstate prediction)
    as, c    -> s', r = g(as, c)      (chance dynamics; c one-hot over M codes)
    s'       -> v(s'), p(s')          (prediction, as in MuZero)

Which outcome happened is not given by the game: an *encoder* reads the real observations before and after the
transition and names it, ``c = onehot(argmax e(o_t, o_{t+1}))`` with a straight-through gradient
(:func:`straight_through`), so the codes are learned from observations alone (a VQ-VAE with a fixed one-hot
codebook, as the paper). Training and the loss terms: :func:`moozi.losses.stochastic_unroll`; search:
:func:`moozi.planner.stochastic_search` (mctx's ``stochastic_muzero_policy``).

The afterstate value is from the mover's point of view (the player who chose ``a``), like the state value
before the move, so the search's backup (afterstate edge: reward 0, discount 1; chance edge: reward ``r``,
discount ``gamma`` or ``-gamma``) keeps moozi's two-player signs.
"""

from __future__ import annotations

from dataclasses import dataclass

import flax.linen as nn
import jax
import jax.numpy as jnp

from moozi.model.core import _MLP, Model, _Head, _MLPModel, _ResBlock, _ResNetModel, _stem
from moozi.model.transform import logits_to_scalar
from moozi.types import Array, ModelOutput


def straight_through(logits):
    """The encoder's code: ``[B, M]`` logits -> ``(code, onehot, probs)``, each ``[B, M]``.

    ``onehot`` is the argmax one-hot (no gradient), ``probs`` the softmax, and ``code = onehot + probs -
    sg(probs)``: the one-hot forward, the softmax's gradient backward (straight-through).
    """
    probs = jax.nn.softmax(logits, axis=-1)
    onehot = jax.nn.one_hot(jnp.argmax(logits, axis=-1), logits.shape[-1], dtype=probs.dtype)
    return onehot + probs - jax.lax.stop_gradient(probs), onehot, probs


@dataclass(frozen=True)
class AfterstateOutput:
    """``afterstate [B, ...]`` (the hidden state's shape), ``value_logits [B, N_bins]`` and ``value [B]`` (Q,
    the mover's point of view), ``chance_logits [B, M]`` (sigma)."""

    afterstate: Array
    value_logits: Array
    value: Array
    chance_logits: Array


# the encoder's last layer starts 10x smaller than its default (variance 0.01 of lecun's): its softmax starts
# near flat, no code favoured before the losses speak (docs/chance.md)
_SMALL = nn.initializers.variance_scaling(0.01, "fan_in", "truncated_normal")


class _StochasticResNet(_ResNetModel):
    chance_outcomes: int = 2

    def setup(self):
        super().setup()
        c, m, dt = self.cfg, self.chance_outcomes, self.cfg.compute_dtype
        self.chance_in = nn.Conv(c.channels, (1, 1), dtype=dt)
        self.chance_norm = nn.LayerNorm()
        self.chance_trunk = [_ResBlock(c.channels, dt) for _ in range(c.chance_blocks)]
        self.after_blocks = [_ResBlock(c.channels, dt) for _ in range(c.pred_blocks)]
        self.after_value_head = _Head(c.head_hidden, c.num_bins, dt)
        self.after_chance_head = _Head(c.head_hidden, m, dt)
        self.encoder_in = _stem(c.channels, c.downsample, dt)
        self.encoder_norm = nn.LayerNorm()
        self.encoder_block = _ResBlock(c.channels, dt)
        self.encoder_hidden = nn.Dense(c.head_hidden, dtype=dt)
        self.encoder_out = nn.Dense(m, kernel_init=_SMALL, dtype=dt)  # a near-flat softmax at first: no code favoured

    def afterstate(self, hidden, action):
        x = nn.relu(self.dyn_norm(self._move_input(self, hidden, jax.nn.one_hot(action, self.num_actions))))
        for block in self.dyn_blocks:
            x = block(x)
        return self._finish(x)

    def afterstate_predict(self, after):
        x = after
        for block in self.after_blocks:
            x = block(x)
        return self.after_value_head(x), self.after_chance_head(x)

    def chance_dynamics(self, after, code):
        b, h, w, _ = after.shape
        planes = jnp.broadcast_to(code[:, None, None, :], (b, h, w, code.shape[-1]))
        x = nn.relu(self.chance_norm(self.chance_in(jnp.concatenate([after, planes], axis=-1))))
        for block in self.chance_trunk:
            x = block(x)
        return self._finish(x), self.reward_head(x)

    def encode(self, pair):
        x = self.encoder_block(nn.relu(self.encoder_norm(self.encoder_in(pair))))
        return self.encoder_out(nn.relu(self.encoder_hidden(x.reshape(x.shape[0], -1))))

    def __call__(self, obs, action):
        return _init_all(self, obs, action)


class _StochasticMLP(_MLPModel):
    chance_outcomes: int = 2

    def setup(self):
        super().setup()
        c, m, dt = self.cfg, self.chance_outcomes, self.cfg.compute_dtype
        self.chance_net = _MLP(c.mlp_hidden, c.mlp_embedding, dtype=dt)
        self.after_net = _MLP(c.mlp_hidden[:1], c.head_hidden, dtype=dt)
        self.after_value_head = _Head(c.head_hidden, c.num_bins, dt)
        self.after_chance_head = _Head(c.head_hidden, m, dt)
        self.encoder_net = _MLP(c.mlp_hidden, m, out_init=_SMALL, dtype=dt)

    def afterstate(self, hidden, action):
        return self._finish(self.dyn_net(jnp.concatenate([hidden, jax.nn.one_hot(action, self.num_actions)], -1)))

    def afterstate_predict(self, after):
        x = nn.relu(self.after_net(after))
        return self.after_value_head(x), self.after_chance_head(x)

    def chance_dynamics(self, after, code):
        x = self.chance_net(jnp.concatenate([after, code], axis=-1))
        return self._finish(x), self.reward_head(nn.relu(x))

    def encode(self, pair):
        return self.encoder_net(pair)

    def __call__(self, obs, action):
        return _init_all(self, obs, action)


def _init_all(module, obs, action):
    """Touch every layer once (``Model.init``): representation, both dynamics, both predictions, the encoder."""
    after = module.afterstate(module.represent(obs), action)
    module.afterstate_predict(after)
    code = jax.nn.one_hot(jnp.zeros(obs.shape[:1], jnp.int32), module.chance_outcomes)
    nxt, _ = module.chance_dynamics(after, code)
    module.predict(nxt)
    module.encode(jnp.concatenate([obs, obs], axis=-1))
    return module.project(nxt)


@dataclass(frozen=True)
class StochasticModel(Model):
    """:class:`~moozi.model.core.Model` with afterstates and chance outcomes (``config.chance_outcomes``
    = M >= 2). ``represent``, ``initial_inference``, ``projection`` and the checks are the base model's;
    :meth:`recurrent_inference` follows the most likely outcome (for views that step the model by moves)."""

    @property
    def chance_outcomes(self) -> int:
        return int(self.config.chance_outcomes)

    @property
    def module(self) -> nn.Module:
        cls = _StochasticResNet if self.config.kind == "resnet" else _StochasticMLP
        return cls(self.config, self.num_actions, self.chance_outcomes)

    def afterstate_inference(self, params, hidden, action) -> AfterstateOutput:
        """phi then the afterstate prediction: hidden ``[B, ...]``, augmented action ``[B]`` -> AfterstateOutput."""
        if action.shape != hidden.shape[:1]:
            raise ValueError(f"action must be [B] = {hidden.shape[:1]}, got shape {action.shape}")

        def fn(module, h, a):
            after = module.afterstate(h, a)
            return (after, *module.afterstate_predict(after))

        after, value_logits, chance_logits = self._apply(params, hidden, action, method=fn)
        return AfterstateOutput(after, value_logits, logits_to_scalar(value_logits, self.config.value_transform),
                                chance_logits)

    def chance_inference(self, params, afterstate, code) -> ModelOutput:
        """g then f: afterstate ``[B, ...]``, code ``[B, M]`` (one-hot, or straight-through) -> ModelOutput of
        the next state (its reward is the transition's)."""
        if code.shape != (afterstate.shape[0], self.chance_outcomes):
            raise ValueError(f"code must be [B, M] = ({afterstate.shape[0]}, {self.chance_outcomes}), "
                             f"got shape {code.shape}")

        def fn(module, after, c):
            nxt, reward_logits = module.chance_dynamics(after, c)
            value_logits, policy_logits = module.predict(nxt)
            return nxt, value_logits, reward_logits, policy_logits

        return self._output(*self._apply(params, afterstate, code, method=fn))

    def encode(self, params, before, after) -> Array:
        """The encoder's logits ``[B, M]`` for the transition between two stacked observations ``[B,
        *observation_shape]`` (as the game gives them: no mover relabelling)."""
        self.check_observation(before)
        self.check_observation(after)
        return self._apply(params, jnp.concatenate([before, after], axis=-1), method="encode")

    def recurrent_inference(self, params, hidden, action) -> ModelOutput:
        """A move then its most likely chance outcome (argmax sigma): hidden ``[B, ...]``, action ``[B]``."""
        out = self.afterstate_inference(params, hidden, action)
        code = jax.nn.one_hot(jnp.argmax(out.chance_logits, axis=-1), self.chance_outcomes)
        return self.chance_inference(params, out.afterstate, code)
