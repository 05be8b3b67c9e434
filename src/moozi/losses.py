"""The MooZi loss (docs/architecture.md §6), a pure function of params and a batch.

L = [CE(p*_t, p^0) + 1/K sum_k CE(p*_{t+k}, p^k)]
  + c^v [CE(Phi(G_t), v^0) + 1/K sum_k CE(Phi(G_{t+k}), v^k)]
  + c^r sum_k CE(Phi(r_{t+k}), r^k)   (c^r = 1 in the thesis)
  + c^s cosine_distance(rho(x_t^1), sg(x_{t+1}^0))
  + c^d [||d(x_t^0) - o_t||^2 + ||d(x_t^1) - o_{t+1}||^2]   (optional, not the thesis's)
  + c^q CE(sg(softmax f_v(x_{t+1}^0)), v^1)   (optional, not the thesis's; v^1 read by a held f: value_consistency_into)
  + c^{L2} ||theta||^2,
each sample's terms scaled by its importance weight. The gradient entering each
dynamics step is halved (MuZero). The unroll is a Python loop over the static
K: on XLA:CPU a non-unrolled ``lax.scan`` made gradients ~25x slower (measured on a 2-core CPU; docs/architecture.md, Loss and update).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from moozi.config import LearnerConfig
from moozi.model.networks import Model
from moozi.model.transform import logits_to_scalar, outside_support, scalar_to_target
from moozi.types import Batch


def scale_gradient(x, scale: float):
    """Identity forward; multiplies the gradient by ``scale`` backward. Any pytree."""
    return jax.tree_util.tree_map(lambda v: v * scale + jax.lax.stop_gradient(v) * (1.0 - scale), x)


def cross_entropy(target_probs, logits):
    """``[..., N]`` probabilities and logits -> ``[...]`` cross-entropy (nats)."""
    return -jnp.sum(target_probs * jax.nn.log_softmax(logits, axis=-1), axis=-1)


def entropy(probs):
    """``[..., N]`` probabilities -> ``[...]`` entropy (nats), 0 log 0 = 0."""
    safe = jnp.where(probs > 0, probs, 1.0)
    return -jnp.sum(jnp.where(probs > 0, probs * jnp.log(safe), 0.0), axis=-1)


def cosine_distance(a, b):
    """``[B, D]`` x ``[B, D]`` -> ``[B]`` ``1 - cos(a, b)``.

    The norm is floored under the square root: the gradient of ``linalg.norm``
    at a zero vector is NaN, and a zero projection (e.g. weights decayed to 0)
    would otherwise poison every parameter through the backward pass.
    """

    def unit(x):
        return x * jax.lax.rsqrt(jnp.maximum(jnp.sum(x * x, axis=-1, keepdims=True), 1e-16))

    return 1.0 - jnp.sum(unit(a) * unit(b), axis=-1)


def squared_error(decoded, observation):
    """``[B, ...]`` x ``[B, ...]`` -> ``[B]`` squared error summed over each sample's elements.

    Summed, not averaged: one moved object (a chicken in a 10x10 plane) costs the same whatever
    the observation's size.
    """
    diff = (decoded - observation).reshape(decoded.shape[0], -1)
    return jnp.sum(diff * diff, axis=-1)


def l2_norm_squared(params):
    """Sum of squares of every parameter."""
    return sum(jnp.sum(jnp.square(p)) for p in jax.tree_util.tree_leaves(params))


def _combine(policy, value, reward, value_mask, config: LearnerConfig):
    """Per-sample weighted sums from per-step terms ``[B, K+1]``.

    Index 0 is the initial inference; reward index 0 is unused. With K = 0
    (AlphaZero mode) only the initial inference's terms remain.
    """
    k = max(policy.shape[1] - 1, 1)
    policy_term = policy[:, 0] + jnp.sum(policy[:, 1:], axis=1) / k
    value = value * value_mask
    value_term = config.value_coef * (value[:, 0] + jnp.sum(value[:, 1:], axis=1) / k)
    reward_term = config.reward_coef * jnp.sum(reward[:, 1:], axis=1)
    return policy_term, value_term, reward_term


def q_head_term(q_logits, action, target_probs, mask):
    """The q head's term ``[B]``: the cross-entropy of the taken move's q logits against the position's value
    target (the n-step return that followed the move), where that target exists and a real move was taken.

    ``q_logits [B, A, bins]``, ``action [B]`` augmented (the dummy 0 past the episode's end),
    ``target_probs [B, bins]`` (the support's two-hot of G_t), ``mask [B]`` the value mask of step 0.
    """
    taken = jnp.take_along_axis(q_logits, action[:, None, None], axis=1)[:, 0]  # [B, bins]
    real_move = (action > 0).astype(jnp.float32)
    return cross_entropy(target_probs, taken) * mask * real_move


def check_batch(model: Model, batch: Batch) -> None:
    """Raise a clear error if the batch does not fit the model (shapes, support size)."""
    t = batch.targets
    model.check_observation(t.observation)
    if t.policy.shape[-1] != model.num_actions:
        raise ValueError(
            f"policy targets cover {t.policy.shape[-1]} actions, the model {model.num_actions}"
        )
    if t.value.ndim != 2 or t.value.shape[1] != t.policy.shape[1] or t.actions.shape[1] != t.value.shape[1] - 1:
        raise ValueError(
            f"targets must be [B, K+1] with actions [B, K]; got value {t.value.shape}, "
            f"policy {t.policy.shape}, actions {t.actions.shape}"
        )


def loss_fn(params, model: Model, batch: Batch, config: LearnerConfig):
    """The training loss.

    Args:
      params: model parameters.
      model: the learned model.
      batch: targets ``[B, ...]`` (K from ``targets.actions.shape[1]``) and weights ``[B]``.
      config: loss coefficients.

    Returns:
      ``(loss [], aux)`` where ``aux`` has ``metrics`` (a dict of scalars, one
      per loss term plus the floor: the value the CE terms reach when the model
      matches the soft targets exactly) and ``priorities`` ``[B]`` = ``|v^0 - G_t|``.
    """
    check_batch(model, batch)
    t = batch.targets
    support = model.config.support_size
    k_steps = t.actions.shape[1]

    transform = model.config.value_transform
    value_probs = scalar_to_target(t.value, support, transform)  # [B, K+1, N]
    reward_probs = scalar_to_target(t.reward, support, transform)

    out = model.initial_inference(params, t.observation)
    policy_logits = [out.policy_logits]
    value_logits = [out.value_logits]
    reward_logits = [out.reward_logits]
    first_value = out.value
    hidden = out.hidden
    q_term = q_floor = jnp.zeros(t.value.shape[:1])
    if model.config.q_head:
        q_term = config.q_coef * q_head_term(model.action_values(params, hidden)[0], t.actions[:, 0],
                                             value_probs[:, 0], t.value_mask[:, 0])
        q_floor = config.q_coef * entropy(value_probs[:, 0]) * t.value_mask[:, 0] * (t.actions[:, 0] > 0)
    consistency = jnp.zeros(t.value.shape[:1])
    reconstruct = config.reconstruction_coef > 0 and k_steps > 0
    value_consistency = jnp.zeros(t.value.shape[:1])
    reconstruction = (squared_error(model.decode(params, hidden), t.observation) if reconstruct
                      else jnp.zeros(t.value.shape[:1]))
    for k in range(k_steps):
        hidden = scale_gradient(hidden, 0.5)
        step = model.recurrent_inference(params, hidden, t.actions[:, k])
        hidden = step.hidden
        policy_logits.append(step.policy_logits)
        value_logits.append(step.value_logits)
        reward_logits.append(step.reward_logits)
        if k == 0 and config.value_consistency_coef > 0:
            # The value of the real next frame is a low-noise target that already tells a move's outcome apart
            # (Freeway: a hit ranks right from the real frame, not from the dynamics; docs/results/minatar-60min).
            real = jax.lax.stop_gradient(model.initial_inference(params, t.next_observation))
            real_hidden = real.hidden  # the consistency target too: the next frame is represented once
            logits = step.value_logits
            if config.value_consistency_into == "dynamics":  # the value head fixed: only the state moves
                logits = model.module.apply(jax.lax.stop_gradient(params), hidden, method="predict_next")[0]
            value_consistency = cross_entropy(jax.nn.softmax(real.value_logits), logits) * t.consistency_mask
        elif k == 0 and config.consistency_coef > 0:
            real_hidden = jax.lax.stop_gradient(model.represent(params, t.next_observation))
        if k == 0 and config.consistency_coef > 0:
            online = model.projection(params, hidden)
            consistency = cosine_distance(online, real_hidden.reshape(real_hidden.shape[0], -1)) * t.consistency_mask
        if k == 0 and reconstruct:
            reconstruction = reconstruction + squared_error(
                model.decode(params, hidden), t.next_observation) * t.consistency_mask

    policy_logits = jnp.stack(policy_logits, axis=1)
    value_logits = jnp.stack(value_logits, axis=1)
    reward_logits = jnp.stack(reward_logits, axis=1)

    ce_p = cross_entropy(t.policy, policy_logits)  # [B, K+1]
    ce_v = cross_entropy(value_probs, value_logits)
    ce_r = cross_entropy(reward_probs, reward_logits)
    p, v, r = _combine(ce_p, ce_v, ce_r, t.value_mask, config)
    fp, fv, fr = _combine(entropy(t.policy), entropy(value_probs), entropy(reward_probs), t.value_mask, config)
    c = config.consistency_coef * consistency
    d = config.reconstruction_coef * reconstruction
    q = config.value_consistency_coef * value_consistency
    w = batch.weights
    l2 = l2_norm_squared(params)
    data_loss = jnp.mean(w * (p + v + r + c + d + q + q_term))
    loss = data_loss + config.l2_coef * l2
    metrics = {
        "loss/total": loss,
        "loss/policy": jnp.mean(w * p),
        "loss/value": jnp.mean(w * v),
        "loss/reward": jnp.mean(w * r),
        "loss/consistency": jnp.mean(w * c),
        "loss/l2": config.l2_coef * l2,
        "loss/floor": jnp.mean(w * (fp + fv + fr + q_floor)),
        "loss/excess": data_loss - jnp.mean(w * (fp + fv + fr + q_floor)),
        # Targets the support cannot represent are clipped to its edge (moozi warns: docs/custom-game.md).
        "targets/value_outside_support": jnp.sum(outside_support(t.value, support, transform) * t.value_mask)
        / jnp.maximum(jnp.sum(t.value_mask), 1.0),
        "targets/reward_outside_support": jnp.mean(outside_support(t.reward, support, transform)),
    }
    if reconstruct:
        metrics["loss/reconstruction"] = jnp.mean(w * d)
    if model.config.q_head:
        metrics["loss/q"] = jnp.mean(w * q_term)
    if config.value_consistency_coef > 0 and k_steps > 0:
        metrics["loss/value_consistency"] = jnp.mean(w * q)
    # Each term at each unroll step k (cross-entropies before the coefficients): where the model is wrong.
    for k in range(k_steps + 1):
        metrics[f"loss_step/policy_k{k}"] = jnp.mean(w * ce_p[:, k])
        metrics[f"loss_step/value_k{k}"] = jnp.mean(w * ce_v[:, k] * t.value_mask[:, k])
        if k > 0:
            metrics[f"loss_step/reward_k{k}"] = jnp.mean(w * ce_r[:, k])
    priorities = jnp.abs(first_value - t.value[:, 0])
    if config.priority == "unroll_value" and k_steps > 0:
        values = logits_to_scalar(value_logits, transform)  # [B, K+1]; index 0 is first_value
        priorities = jnp.max(jnp.abs(values - t.value) * t.value_mask, axis=1)
    return loss, {"metrics": metrics, "priorities": jax.lax.stop_gradient(priorities)}

