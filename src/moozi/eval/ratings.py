"""Ratings from game records: Bradley-Terry maximum likelihood with draws and a first-move term.

Model (Elo scale, logistic): for a game where ``a`` moved first against ``b``,
with ``x = (r_a - r_b + first_move) ln(10) / 400`` and a draw width ``d >= 0``
(natural units),

    P(a wins) = sigmoid(x - d),  P(b wins) = sigmoid(-x - d),  P(draw) = the rest,

the Rao-Kupper extension of Bradley-Terry. One player (``anchor``, e.g.
``random``) is fixed at 0; the others, the first-move term and the draw width
are fitted by Newton's method on the log-likelihood plus a weak Gaussian prior
(standard deviation ``prior_sd`` Elo on each rating, so a player that won every
game still gets a finite rating). Intervals come from the inverse Hessian
(the observed information): ``rating +- 1.96 sd``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

LN10_400 = math.log(10.0) / 400.0


@dataclass(frozen=True)
class Ratings:
    """Fitted ratings: ``ratings[name]``, ``sd[name]`` (0 for the anchor), ``first_move`` and its sd (Elo),
    ``draw_width`` (Elo units), ``games``, ``log_likelihood``."""

    ratings: dict
    sd: dict
    first_move: float
    first_move_sd: float
    draw_width: float
    games: int
    log_likelihood: float

    def interval(self, name: str, z: float = 1.959963984540054) -> tuple[float, float]:
        return self.ratings[name] - z * self.sd[name], self.ratings[name] + z * self.sd[name]


def fit_ratings(games, anchor: str, prior_sd: float = 1000.0, first_move: bool = True,
                iterations: int = 100) -> Ratings:
    """Fit ratings to ``games``: ``(first_player, second_player, score)`` with score 1 (first won), 0.5, 0."""
    import jax
    import jax.numpy as jnp

    games = list(games)
    names = sorted({g[0] for g in games} | {g[1] for g in games})
    if anchor not in names:
        raise ValueError(f"anchor {anchor!r} played no game: players are {names}")
    free = [n for n in names if n != anchor]
    index = {n: i for i, n in enumerate(free)}
    a = np.array([index.get(g[0], -1) for g in games])
    b = np.array([index.get(g[1], -1) for g in games])
    s = np.array([float(g[2]) for g in games])
    if not np.all(np.isin(s, (0.0, 0.5, 1.0))):
        raise ValueError("scores must be 1 (first player won), 0.5 (draw) or 0")
    has_draws = bool(np.any(s == 0.5))
    k = len(free)
    win, draw, loss = (s == 1.0).astype(np.float64), (s == 0.5).astype(np.float64), (s == 0.0).astype(np.float64)

    def unpack(theta):
        r = jnp.concatenate([theta[:k], jnp.zeros(1)])  # the anchor sits at index -1 with rating 0
        eta = theta[k] if first_move else 0.0
        d = jnp.exp(theta[-1]) if has_draws else 0.0
        return r, eta, d

    def log_posterior(theta):
        r, eta, d = unpack(theta)
        x = (r[a] - r[b] + eta) * LN10_400
        p_win = jax.nn.sigmoid(x - d)
        p_loss = jax.nn.sigmoid(-x - d)
        p_draw = jnp.maximum(1.0 - p_win - p_loss, 1e-12)
        ll = jnp.sum(win * jnp.log(p_win) + loss * jnp.log(p_loss) + draw * jnp.log(p_draw))
        return ll - 0.5 * jnp.sum((theta[:k] / prior_sd) ** 2), ll

    n_params = k + int(first_move) + int(has_draws)
    theta = np.zeros(n_params)
    if has_draws:
        theta[-1] = math.log(0.5)
    grad = jax.jit(jax.grad(lambda t: log_posterior(t)[0]))
    hess = jax.jit(jax.hessian(lambda t: log_posterior(t)[0]))
    for _ in range(iterations):
        g, h = np.asarray(grad(theta), np.float64), np.asarray(hess(theta), np.float64)
        step = np.linalg.solve(h - 1e-9 * np.eye(n_params), -g)
        step = np.clip(step, -200.0, 200.0)  # damped: a far start never overshoots into nonsense
        theta = theta + step
        if np.max(np.abs(step)) < 1e-4:
            break
    cov = np.linalg.inv(-np.asarray(hess(theta), np.float64))
    sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
    r, eta, d = unpack(jnp.asarray(theta))
    return Ratings(
        ratings={**{n: float(theta[index[n]]) for n in free}, anchor: 0.0},
        sd={**{n: float(sd[index[n]]) for n in free}, anchor: 0.0},
        first_move=float(eta) if first_move else 0.0,
        first_move_sd=float(sd[k]) if first_move else 0.0,
        draw_width=float(d) / LN10_400 if has_draws else 0.0,
        games=len(games),
        log_likelihood=float(log_posterior(jnp.asarray(theta))[1]),
    )
