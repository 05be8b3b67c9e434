"""The MooZi loss (docs/architecture.md §6), a pure function of params and a batch.

L = [CE(p*_t, p^0) + 1/K sum_k CE(p*_{t+k}, p^k)]
  + c^v [CE(Phi(G_t), v^0) + 1/K sum_k CE(Phi(G_{t+k}), v^k)]
  + c^r sum_k CE(Phi(r_{t+k}), r^k)   (c^r = 1 in the thesis)
  + c^s cosine_distance(rho(x_t^1), sg(x_{t+1}^0))
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
from moozi.model.transform import outside_support, scalar_to_target
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


def deterministic_unroll(params, model: Model, t, value_probs, config: LearnerConfig):
    """MuZero's unroll: h then K steps of g, each followed by f.

    Args:
      t: batched :class:`~moozi.types.Targets`; ``value_probs``: ``[B, K+1, N]`` the value targets as bins.

    Returns:
      ``(steps, consistency, extra, metrics)``: the K+1 :class:`~moozi.types.ModelOutput` (index 0 the initial
      inference), the self-consistency distance ``[B]`` (step 1's projection against the representation of
      the real next observation, masked), and the variant's own per-sample loss ``[B]`` and metrics (none here).
    """
    del value_probs
    out = model.initial_inference(params, t.observation)
    steps, hidden = [out], out.hidden
    consistency = jnp.zeros(t.value.shape[:1])
    for k in range(t.actions.shape[1]):
        hidden = scale_gradient(hidden, 0.5)
        step = model.recurrent_inference(params, hidden, t.actions[:, k])
        hidden = step.hidden
        steps.append(step)
        if k == 0:
            consistency = _consistency(params, model, t, hidden, config)
    return steps, consistency, jnp.zeros(t.value.shape[:1]), {}


def _consistency(params, model: Model, t, hidden, config: LearnerConfig):
    """``[B]`` c^s's distance: rho(x_t^1) against sg(h(o_{t+1})), 0 where t is the last step (or c^s is 0)."""
    if config.consistency_coef <= 0:
        return jnp.zeros(t.value.shape[:1])
    real_hidden = jax.lax.stop_gradient(model.represent(params, t.next_observation))
    online = model.projection(params, hidden)
    return cosine_distance(online, real_hidden.reshape(real_hidden.shape[0], -1)) * t.consistency_mask


def code_diversity_gap(probs, mask):
    """``log M - (H(u) - mean H(p))`` ``[]``: how far the encoder's codes are from carrying log M nats about the
    transitions. ``probs [B, K, M]``: each transition's encoder softmax ``p``; ``mask [B, K]``: the real ones;
    ``u``: their mean. 0 when the M codes are used evenly and each named with certainty; log M when one code
    names everything, or when every softmax is flat."""
    seen = jnp.maximum(jnp.sum(mask), 1.0)
    usage = jnp.sum(probs * mask[..., None], axis=(0, 1)) / seen
    own = jnp.sum(entropy(probs) * mask) / seen
    return jnp.log(probs.shape[-1]) - entropy(usage) + own


def stochastic_unroll(params, model, t, value_probs, config: LearnerConfig):
    """Stochastic MuZero's unroll (:mod:`moozi.model.stochastic`): for k = 0..K-1, the afterstate of a_{t+k},
    the encoder's code for the real transition o_{t+k} -> o_{t+k+1}, and the chance dynamics to step k+1.

    Its own loss per sample (``extra``, ``[B]``; k over the K transitions)::

        c^v 1/K sum_k CE(Phi(G_{t+k}), Q^k)                (the afterstate value, masked like the value)
        + c^chance sum_k m_k CE(c_{t+k}, sigma^k)           (the chance prior toward the encoder's one-hot code)
        + beta sum_k m_k ||c_{t+k} - softmax(e_{t+k})||^2   (commitment: the encoder toward its code)
        + c^div (log M - H(u) + mean H(p))                  (diversity, the same for every sample)

where ``p`` is one real transition's encoder softmax and ``u`` the batch's mean of them: ``H(u) - mean H(p)``
is the mutual information between a transition and its code (IIC's objective), so the term is 0 only when
the M codes are used evenly and each transition is named with certainty, and log M when one code takes
everything (the encoder's collapse: every transition named alike, so the model is deterministic again) or
when every softmax is flat (which ``log M - H(u)`` alone, wav2vec 2.0's diversity loss, rewards: the first
2048 probe of it kept one argmax code under near-uniform softmaxes).

    with ``m_k = transition_mask`` (t + k < T) and the code held fixed (stop-gradient) in both; the dynamics
    and everything after them reach the encoder through the straight-through code. Where the targets carry
    the game's own codes (``t.chance_codes``: ``learner.chance_codes = game``) ``c`` is their one-hot, the
    encoder is not called, and commitment and diversity are 0 (``p = c``: named with certainty). Same returns as
    :func:`deterministic_unroll`, with metrics ``loss/afterstate_value``, ``loss/chance``,
    ``loss/commitment`` and ``chance/codes_used`` (the perplexity of the batch's codes: how many of the M the
    encoder uses).
    """
    from moozi.model.stochastic import straight_through

    out = model.initial_inference(params, t.observation)
    steps, hidden = [out], out.hidden
    big_k = t.actions.shape[1]
    consistency = jnp.zeros(t.value.shape[:1])
    q_ce, chance_ce, commit, codes, soft = [], [], [], [], []
    for k in range(big_k):
        hidden = scale_gradient(hidden, 0.5)
        after = model.afterstate_inference(params, hidden, t.actions[:, k])
        if t.chance_codes is None:
            code, onehot, probs = straight_through(
                model.encode(params, t.unroll_observations[:, k], t.unroll_observations[:, k + 1]))
        else:  # the game's own outcome: no encoder, nothing to commit to
            code = onehot = probs = jax.nn.one_hot(t.chance_codes[:, k], model.config.chance_outcomes)
        step = model.chance_inference(params, after.afterstate, code)
        hidden = step.hidden
        steps.append(step)
        if k == 0:
            consistency = _consistency(params, model, t, hidden, config)
        q_ce.append(cross_entropy(value_probs[:, k], after.value_logits))
        chance_ce.append(cross_entropy(onehot, after.chance_logits))
        commit.append(jnp.sum(jnp.square(onehot - probs), axis=-1))
        codes.append(onehot)
        soft.append(probs)
    mask = t.transition_mask  # [B, K]
    q = config.value_coef * jnp.sum(jnp.stack(q_ce, 1) * t.value_mask[:, :big_k], axis=1) / big_k
    chance = config.chance_coef * jnp.sum(jnp.stack(chance_ce, 1) * mask, axis=1)
    commitment = config.commitment_coef * jnp.sum(jnp.stack(commit, 1) * mask, axis=1)
    usage = jnp.sum(jnp.stack(codes, 1) * mask[..., None], axis=(0, 1))
    usage = usage / jnp.maximum(jnp.sum(usage), 1.0)
    diversity = jnp.zeros_like(q) if t.chance_codes is not None else (
        config.chance_diversity_coef * code_diversity_gap(jnp.stack(soft, 1), mask) * jnp.ones_like(q))
    metrics = {"loss/afterstate_value": q, "loss/chance": chance, "loss/commitment": commitment,
               "loss/chance_diversity": diversity, "chance/codes_used": jnp.exp(entropy(usage))}
    return steps, consistency, q + chance + commitment + diversity, metrics


def loss_fn(params, model: Model, batch: Batch, config: LearnerConfig):
    """The training loss.

    Args:
      params: model parameters.
      model: the learned model (a :class:`~moozi.model.stochastic.StochasticModel` adds its terms:
        :func:`stochastic_unroll`).
      batch: targets ``[B, ...]`` (K from ``targets.actions.shape[1]``) and weights ``[B]``.
      config: loss coefficients.

    Returns:
      ``(loss [], aux)`` where ``aux`` has ``metrics`` (a dict of scalars, one
      per loss term plus the floor: the value the CE terms reach when the model
      matches the soft targets exactly) and ``priorities`` ``[B]`` = ``|v^0 - G_t|``.
    """
    check_batch(model, batch)
    t = batch.targets
    support, transform = model.config.support_size, model.config.value_transform
    value_probs = scalar_to_target(t.value, support, transform)  # [B, K+1, N]
    reward_probs = scalar_to_target(t.reward, support, transform)

    unroll = stochastic_unroll if model.config.chance_outcomes else deterministic_unroll
    steps, consistency, extra, extra_metrics = unroll(params, model, t, value_probs, config)
    out = steps[0]
    ce_p = cross_entropy(t.policy, jnp.stack([s.policy_logits for s in steps], axis=1))  # [B, K+1]
    ce_v = cross_entropy(value_probs, jnp.stack([s.value_logits for s in steps], axis=1))
    ce_r = cross_entropy(reward_probs, jnp.stack([s.reward_logits for s in steps], axis=1))
    p, v, r = _combine(ce_p, ce_v, ce_r, t.value_mask, config)
    fp, fv, fr = _combine(entropy(t.policy), entropy(value_probs), entropy(reward_probs), t.value_mask, config)
    c = config.consistency_coef * consistency
    w = batch.weights
    l2 = l2_norm_squared(params)
    data_loss = jnp.mean(w * (p + v + r + c + extra))
    loss = data_loss + config.l2_coef * l2
    metrics = {
        "loss/total": loss,
        "loss/policy": jnp.mean(w * p),
        "loss/value": jnp.mean(w * v),
        "loss/reward": jnp.mean(w * r),
        "loss/consistency": jnp.mean(w * c),
        "loss/l2": config.l2_coef * l2,
        "loss/floor": jnp.mean(w * (fp + fv + fr)),
        "loss/excess": data_loss - jnp.mean(w * (fp + fv + fr)),
        # Targets the support cannot represent are clipped to its edge (moozi warns: docs/custom-game.md).
        "targets/value_outside_support": jnp.sum(outside_support(t.value, support, transform) * t.value_mask)
        / jnp.maximum(jnp.sum(t.value_mask), 1.0),
        "targets/reward_outside_support": jnp.mean(outside_support(t.reward, support, transform)),
        **_per_step(ce_p, ce_v, ce_r, t.value_mask, w),
        **{k: (jnp.mean(w * v_) if v_.ndim else v_) for k, v_ in extra_metrics.items()},
    }
    priorities = jnp.abs(out.value - t.value[:, 0])
    return loss, {"metrics": metrics, "priorities": jax.lax.stop_gradient(priorities)}


def _per_step(ce_p, ce_v, ce_r, value_mask, w) -> dict:
    """Each term at each unroll step k (cross-entropies ``[B, K+1]`` before the coefficients): where the model is
    wrong."""
    metrics = {}
    for k in range(ce_p.shape[1]):
        metrics[f"loss_step/policy_k{k}"] = jnp.mean(w * ce_p[:, k])
        metrics[f"loss_step/value_k{k}"] = jnp.mean(w * ce_v[:, k] * value_mask[:, k])
        if k > 0:
            metrics[f"loss_step/reward_k{k}"] = jnp.mean(w * ce_r[:, k])
    return metrics
