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

import functools
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


@functools.lru_cache(maxsize=None)
def _posterior(k: int, first_move: bool, has_draws: bool):
    """Jitted ``(log posterior, log likelihood)``, its gradient and Hessian in ``theta`` (ratings of the
    ``k`` free players, then the first-move term and the log draw width when fitted); the games are
    arguments, so one compilation serves every pool of the same size."""
    import jax
    import jax.numpy as jnp

    def log_posterior(theta, a, b, win, draw, loss, prior_sd):
        r = jnp.concatenate([theta[:k], jnp.zeros(1)])  # the anchor sits at index -1 with rating 0
        eta = theta[k] if first_move else 0.0
        d = jnp.exp(theta[-1]) if has_draws else 0.0
        x = (r[a] - r[b] + eta) * LN10_400
        p_win = jax.nn.sigmoid(x - d)
        p_loss = jax.nn.sigmoid(-x - d)
        p_draw = jnp.maximum(1.0 - p_win - p_loss, 1e-12)
        ll = jnp.sum(win * jnp.log(p_win) + loss * jnp.log(p_loss) + draw * jnp.log(p_draw))
        return ll - 0.5 * jnp.sum((theta[:k] / prior_sd) ** 2), ll

    value = jax.jit(log_posterior)
    grad = jax.jit(jax.grad(lambda *x: log_posterior(*x)[0]))
    hess = jax.jit(jax.hessian(lambda *x: log_posterior(*x)[0]))
    return value, grad, hess


def fit_ratings(games, anchor: str, prior_sd: float = 1000.0, first_move: bool = True,
                iterations: int = 100) -> Ratings:
    """Fit ratings to ``games``: ``(first_player, second_player, score)`` with score 1 (first won), 0.5, 0."""
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

    n_params = k + int(first_move) + int(has_draws)
    theta = np.zeros(n_params)
    if has_draws:
        theta[-1] = math.log(0.5)
    data = (a, b, win, draw, loss, float(prior_sd))
    value_and_ll, grad, hess = _posterior(k, bool(first_move), has_draws)
    for _ in range(iterations):
        g, h = np.asarray(grad(theta, *data), np.float64), np.asarray(hess(theta, *data), np.float64)
        step = np.linalg.solve(h - 1e-9 * np.eye(n_params), -g)
        step = np.clip(step, -200.0, 200.0)  # damped: a far start never overshoots into nonsense
        theta = theta + step
        if np.max(np.abs(step)) < 1e-4:
            break
    cov = np.linalg.inv(-np.asarray(hess(theta, *data), np.float64))
    sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
    eta = float(theta[k]) if first_move else 0.0
    d = math.exp(theta[-1]) if has_draws else 0.0
    return Ratings(
        ratings={**{n: float(theta[index[n]]) for n in free}, anchor: 0.0},
        sd={**{n: float(sd[index[n]]) for n in free}, anchor: 0.0},
        first_move=eta,
        first_move_sd=float(sd[k]) if first_move else 0.0,
        draw_width=float(d) / LN10_400 if has_draws else 0.0,
        games=len(games),
        log_likelihood=float(value_and_ll(theta, *data)[1]),
    )


def read_pool(paths, returns: bool = False) -> list[dict]:
    """Games of rating pool files (JSON lines ``{first, second, score_first, ...}``); a run directory
    stands for its ``ratings/games.jsonl``. Lines that are not games (headers) are skipped. With ``returns``:
    the single-player entries instead (``{player, return, start, game}``, one per agent and game)."""
    import json
    from pathlib import Path

    from moozi.config import ConfigError

    games = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            path = path / "ratings" / "games.jsonl"
        if not path.is_file():
            raise ConfigError(f"{p}: no rating pool file at {path} (write one with `moozi match ... --pool FILE`)")
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                g = json.loads(line)
            except json.JSONDecodeError as err:
                raise ConfigError(f"{path}:{n} is not JSON ({err})") from None
            if returns and {"player", "return", "start"} <= set(g):
                games.append(g)
            elif not returns and {"first", "second", "score_first"} <= set(g):
                games.append(g)
    return games


def returns_table(entries: list[dict], game: str | None = None) -> dict:
    """Single-player agents ranked by mean return over the starts each played (an agent that played a start
    twice counts it once), with 95% intervals; each row also has the paired difference against the leader over
    the starts both played (:func:`moozi.eval.single.paired_difference`)."""
    import numpy as np

    from moozi.config import ConfigError
    from moozi.eval.evaluate import mean_interval
    from moozi.eval.single import paired_difference

    kinds = sorted({e.get("game") for e in entries} - {None})
    if game is not None:
        entries = [e for e in entries if e.get("game") == game]
    elif len(kinds) > 1:
        raise ConfigError(f"the pool holds games of {len(kinds)} kinds ({', '.join(kinds)}): choose one with --game")
    by: dict[str, dict[str, float]] = {}
    for e in entries:
        by.setdefault(e["player"], {})[str(e["start"])] = float(e["return"])
    if not by:
        raise ConfigError("the pool holds no single-player games" + (f" of {game}" if game else ""))
    order = sorted(by, key=lambda p: -float(np.mean(list(by[p].values()))))
    rows = []
    for name in order:
        mean, low, high = mean_interval(list(by[name].values()))
        row = {"player": name, "return": mean, "low": low, "high": high, "games": len(by[name])}
        common = sorted(set(by[name]) & set(by[order[0]]))
        if name != order[0] and len(common) > 1:
            d = paired_difference(np.array([by[name][k] for k in common]), np.array([by[order[0]][k] for k in common]))
            row["vs_leader"] = {**{k: d[k] for k in ("value", "low", "high", "p_value")}, "games": len(common)}
        rows.append(row)
    return {"game": game or (kinds[0] if kinds else None), "single_player": True, "players": rows}


def ratings_table(games: list[dict], anchor: str = "random", game: str | None = None) -> dict:
    """Fit the pool (:func:`fit_ratings`) and tabulate: rating, 95% interval, games and score per player.

    A pool with games of several kinds needs ``game`` (ratings of different games do not mix)."""
    from moozi.config import ConfigError

    kinds = sorted({g.get("game") for g in games} - {None})
    if game is not None:
        games = [g for g in games if g.get("game") == game]
    elif len(kinds) > 1:
        raise ConfigError(f"the pool holds games of {len(kinds)} kinds ({', '.join(kinds)}): choose one with --game")
    if not games:
        raise ConfigError("the rating pool holds no games" + (f" of {game}" if game else ""))
    names = {g["first"] for g in games} | {g["second"] for g in games}
    if anchor not in names:
        raise ConfigError(f"anchor {anchor!r} played no game in the pool; players: {', '.join(sorted(names))} "
                          "(choose one with --anchor)")
    fit = fit_ratings([(g["first"], g["second"], g["score_first"]) for g in games], anchor=anchor)
    rows = []
    for name in sorted(names, key=lambda n: -fit.ratings[n]):
        played = [g for g in games if name in (g["first"], g["second"])]
        score = sum(g["score_first"] if g["first"] == name else 1.0 - g["score_first"] for g in played)
        low, high = fit.interval(name)
        rows.append({"player": name, "rating": fit.ratings[name], "low": low, "high": high,
                     "games": len(played), "score": score / len(played)})
    return {"anchor": anchor, "game": game or (kinds[0] if kinds else None), "games": fit.games,
            "first_move": fit.first_move, "first_move_sd": fit.first_move_sd,
            "draw_width": fit.draw_width, "players": rows}
