"""Value/reward transform and the two-hot categorical projection.

phi(x) = sign(x) * (sqrt(|x| + 1) - 1) + eps * x   (Pohlen et al. 2018, MuZero)

Scalars are squashed by phi and then represented as a two-hot distribution over
the integer support ``[-S, S]``; a network's logits are read back by taking the
expectation over the support and applying phi^-1.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

EPSILON = 1e-3


def phi(x, eps: float = EPSILON):
    """Squashing transform. ``x``: any shape float -> same shape."""
    return jnp.sign(x) * (jnp.sqrt(jnp.abs(x) + 1.0) - 1.0) + eps * x


def phi_inverse(y, eps: float = EPSILON):
    """Exact inverse of :func:`phi`. ``y``: any shape float -> same shape."""
    # Solve eps*u^2 + u - c = 0 (c = |y| + 1 + eps) for u = sqrt(|x| + 1) > 0, in the
    # rationalised form 2c / (1 + sqrt(1 + 4 eps c)): the textbook
    # (sqrt(1 + 4 eps c) - 1) / (2 eps) cancels catastrophically in float32.
    c = jnp.abs(y) + 1.0 + eps
    u = 2.0 * c / (1.0 + jnp.sqrt(1.0 + 4.0 * eps * c))
    return jnp.sign(y) * (jnp.square(u) - 1.0)


def two_hot(y, support_size: int):
    """Two-hot projection onto the integer support ``[-S, S]``.

    ``y``: ``[...]`` float (already transformed) -> ``[..., 2S + 1]`` float32
    probabilities whose expectation over the support equals ``clip(y, -S, S)``.
    Values past the edge put all mass on the edge bin.
    """
    y = jnp.clip(jnp.asarray(y, jnp.float32), -support_size, support_size)
    low = jnp.floor(y)
    frac = y - low
    low_idx = (low + support_size).astype(jnp.int32)
    high_idx = jnp.minimum(low_idx + 1, 2 * support_size)
    n = 2 * support_size + 1
    return (
        jax.nn.one_hot(low_idx, n) * (1.0 - frac)[..., None]
        + jax.nn.one_hot(high_idx, n) * frac[..., None]
    )


def support(support_size: int):
    """``[2S + 1]`` float32 bin values ``-S .. S``."""
    return jnp.arange(-support_size, support_size + 1, dtype=jnp.float32)


def scalar_to_probs(x, support_size: int):
    """Phi: scalar ``[...]`` -> two-hot target ``[..., 2S + 1]`` of ``phi(x)``."""
    return two_hot(phi(x), support_size)


def probs_to_scalar(probs, support_size: int):
    """Inverse of Phi: probabilities ``[..., 2S + 1]`` -> scalar ``[...]``."""
    return phi_inverse(jnp.sum(probs * support(support_size), axis=-1))


def logits_to_scalar(logits, transform: str = "phi"):
    """Softmax logits ``[..., 2S + 1]`` -> expected value -> phi^-1 (or identity) -> scalar ``[...]``."""
    n = logits.shape[-1]
    if n % 2 != 1:
        raise ValueError(f"categorical logits need an odd number of bins (2S + 1), got {n}")
    probs = jax.nn.softmax(logits, axis=-1)
    size = (n - 1) // 2
    if transform == "identity":
        return jnp.sum(probs * support(size), axis=-1)
    return probs_to_scalar(probs, size)


TRANSFORMS = ("phi", "identity")


def outside_support(x, support_size: int, transform: str = "phi"):
    """``[...]`` bool: scalars beyond what the categorical support represents (their targets get clipped)."""
    y = x if transform == "identity" else phi(x)
    return jnp.abs(y) > support_size


def max_representable(support_size: int, transform: str = "phi") -> float:
    """The largest magnitude a value or reward head can represent (``S``, or phi^-1(S))."""
    return float(support_size) if transform == "identity" else float(phi_inverse(float(support_size)))


def scalar_to_target(x, support_size: int, transform: str = "phi"):
    """Categorical target ``[..., 2S + 1]`` of scalar ``x``: two-hot of phi(x) (``"phi"``) or of x (``"identity"``).

    ``identity`` suits values already in a small range (board-game outcomes in
    [-1, 1] with S = 1), where phi would squash a win and a draw into one bin.
    """
    if transform == "identity":
        return two_hot(x, support_size)
    return scalar_to_probs(x, support_size)
