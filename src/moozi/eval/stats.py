"""Match statistics, pure functions: scores with intervals, Elo differences, paired games, SPRT, Hoeffding sizes.

Scores are from player A's point of view: win 1, draw 1/2, loss 0. Games
played in pairs (one opening, seats swapped) are scored per pair: the pair's
score is one of 0, 1/4, 1/2, 3/4, 1 (the "pentanomial" model), whose variance
is smaller than that of single games when the opening decides much, so
intervals from pairs are honest where per-game ones are too narrow.

Elo here is logistic: an expected score ``s`` means a difference
``-400 log10(1/s - 1)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided interval (``low <= value <= high``)."""

    value: float
    low: float
    high: float


def elo_from_score(s: float) -> float:
    """Logistic Elo difference of an expected score ``s`` (``+-inf`` at 1 and 0)."""
    if s <= 0.0:
        return -math.inf
    if s >= 1.0:
        return math.inf
    return -400.0 * math.log10(1.0 / s - 1.0)


def score_from_elo(elo: float) -> float:
    """Expected score of a logistic Elo difference."""
    return 1.0 / (1.0 + 10.0 ** (-elo / 400.0))


def score_interval(wins: int, draws: int, losses: int, z: float = Z95) -> Interval:
    """Mean score of independent games with a normal interval from the trinomial variance."""
    n = wins + draws + losses
    if n == 0:
        return Interval(0.5, 0.0, 1.0)
    s = (wins + 0.5 * draws) / n
    var = (wins * (1 - s) ** 2 + draws * (0.5 - s) ** 2 + losses * s ** 2) / n
    half = z * math.sqrt(var / n)
    return Interval(s, max(0.0, s - half), min(1.0, s + half))


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial rate ``k / n`` (``(0, 1)`` when ``n = 0``: nothing is known)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def pair_score_interval(pair_scores, z: float = Z95) -> Interval:
    """Mean score of game pairs (each the mean of its two games: 0, 1/4, ..., 1) with a normal interval."""
    x = np.asarray(pair_scores, np.float64)
    if x.size == 0:
        return Interval(0.5, 0.0, 1.0)
    s = float(x.mean())
    if float(x.std()) == 0.0:
        # Every pair scored the same (e.g. all lost): the normal interval would have no width, so the
        # pairs count as n trials of a rate s (Wilson), which is honest about how few they are.
        return Interval(s, *wilson_interval(s * x.size, x.size, z))
    half = z * float(x.std()) / math.sqrt(x.size)
    return Interval(s, max(0.0, s - half), min(1.0, s + half))


def elo_interval(score: Interval) -> Interval:
    """The Elo difference of a score interval (the logistic map is monotone, so endpoints map to endpoints)."""
    return Interval(elo_from_score(score.value), elo_from_score(score.low), elo_from_score(score.high))


def sprt_llr(pair_scores, elo0: float, elo1: float) -> float:
    """Log-likelihood ratio of H1 (Elo ``elo1``) against H0 (``elo0``) from pair scores (normal approximation,
    as fishtest's GSPRT): ``n (s1 - s0) (2 x - s0 - s1) / (2 var)``."""
    x = np.asarray(pair_scores, np.float64)
    if x.size < 2:
        return 0.0
    var = float(x.var())
    if var <= 0.0:
        var = 1e-6  # every pair the same: the data are as sure as they can be
    s0, s1 = score_from_elo(elo0), score_from_elo(elo1)
    return float(x.size * (s1 - s0) * (2.0 * x.mean() - s0 - s1) / (2.0 * var))


def sprt_bounds(alpha: float = 0.05, beta: float = 0.05) -> tuple[float, float]:
    """``(lower, upper)`` LLR bounds: accept H0 below ``log(beta / (1 - alpha))``, H1 above
    ``log((1 - beta) / alpha)`` (Wald)."""
    return math.log(beta / (1.0 - alpha)), math.log((1.0 - beta) / alpha)


def sprt_decision(pair_scores, elo0: float, elo1: float, alpha: float = 0.05, beta: float = 0.05) -> str:
    """``"H1"`` (the new player is at least ``elo1`` better), ``"H0"`` or ``"continue"``."""
    lo, hi = sprt_bounds(alpha, beta)
    llr = sprt_llr(pair_scores, elo0, elo1)
    return "H1" if llr >= hi else "H0" if llr <= lo else "continue"


def hoeffding_games(margin: float, delta: float) -> int:
    """Games so that a mean score in [0, 1] is within ``margin`` of its expectation with probability
    ``1 - delta`` (Hoeffding: ``n = ceil(ln(2 / delta) / (2 margin^2))``, two-sided)."""
    if not 0 < margin < 1 or not 0 < delta < 1:
        raise ValueError(f"margin = {margin}, delta = {delta}: allowed numbers in (0, 1)")
    return math.ceil(math.log(2.0 / delta) / (2.0 * margin * margin))
