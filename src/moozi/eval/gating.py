"""Gating: should a new network replace the old one? Sequential (SPRT), Hoeffding-sized or a fixed threshold.

Pure functions over pair scores in game order (``moozi.eval.stats``): a
sequential test looks at the pairs one at a time in the order they were
scheduled, never in the order they finished, so stopping early cannot pick a
lucky moment. Gating games decide; they never enter a rating pool (``moozi
match --gate`` refuses ``--pool``), because games chosen by a stopping rule
are not a fair sample of strength.

* ``sprt``: GSPRT on pair scores between H0 (Elo ``elo0``) and H1 (``elo1``),
  stop at the Wald bounds (``stats.sprt_bounds``) or after ``max_pairs``
  (then "undecided": keep the old network).
* ``hoeffding``: play ``stats.hoeffding_games(margin, delta)`` games (as
  pairs); accept when the score's lower Hoeffding bound is above 1/2.
* ``fixed``: play every pair; accept when the score reaches ``threshold``
  (AlphaGo Zero's 0.55). Cheap, but with few games it accepts an equally
  strong network often: :func:`fixed_accept_rate` says how often.
"""

from __future__ import annotations

import math

import numpy as np

from moozi.eval.stats import hoeffding_games, score_from_elo, sprt_bounds, sprt_llr_counts

METHODS = ("sprt", "hoeffding", "fixed")


def gate_spec(method: str, elo0: float, elo1: float, alpha: float, beta: float, margin: float,
              threshold: float) -> dict:
    """The gate :func:`moozi.eval.arena.play_gated` takes, from the settings ``method`` uses; ``alpha`` is
    Hoeffding's delta. No defaults here: ``moozi match --gate`` and the ``gating`` config section own them."""
    if method == "sprt":
        return {"method": "sprt", "elo0": elo0, "elo1": elo1, "alpha": alpha, "beta": beta}
    if method == "hoeffding":
        return {"method": "hoeffding", "margin": margin, "delta": alpha}
    if method == "fixed":
        return {"method": "fixed", "threshold": threshold}
    raise ValueError(f"gate method = {method!r}: allowed one of {METHODS}")


def sprt_sequence(pair_scores, elo0: float, elo1: float, alpha: float = 0.05, beta: float = 0.05):
    """Run the GSPRT over pair scores in order: ``(decision, pairs used, llr)``, decision ``"H1"`` (accept
    the new network), ``"H0"`` (reject) or ``"continue"`` (the pairs ran out first)."""
    lo, hi = sprt_bounds(alpha, beta)
    counts = np.zeros(5)
    llr = 0.0
    for n, x in enumerate(np.asarray(pair_scores, np.float64), 1):
        counts[int(round(x * 4))] += 1
        llr = float(sprt_llr_counts(counts, elo0, elo1))
        if llr >= hi:
            return "H1", n, llr
        if llr <= lo:
            return "H0", n, llr
    return "continue", int(counts.sum()), llr


def hoeffding_decision(pair_scores, margin: float, delta: float) -> tuple[str, int]:
    """``("H1" | "H0", games needed)``: accept when the mean score minus ``margin`` is above 1/2."""
    need = hoeffding_games(margin, delta)
    x = np.asarray(pair_scores, np.float64)
    if 2 * x.size < need:
        return "continue", need
    return ("H1" if x.mean() - margin > 0.5 else "H0"), need


def fixed_decision(pair_scores, threshold: float = 0.55) -> str:
    return "H1" if float(np.mean(pair_scores)) >= threshold else "H0"


def fixed_accept_rate(games: int, threshold: float = 0.55, draw_rate: float = 0.0) -> float:
    """How often an *equally strong* network passes a fixed threshold after ``games`` games (normal
    approximation of the score's spread: variance ``(1 - draw_rate) / 4`` per game)."""
    sd = math.sqrt((1.0 - draw_rate) / 4.0 / games)
    return 0.5 * math.erfc((threshold - 0.5) / (sd * math.sqrt(2.0))) if sd > 0 else float(threshold <= 0.5)


def simulate_pairs(rng: np.random.Generator, elo: float, runs: int, pairs: int, draw_rate: float = 0.2) -> np.ndarray:
    """``[runs, pairs]`` pair scores of two players ``elo`` apart (games independent, draws at ``draw_rate``)."""
    s = score_from_elo(elo)
    # Per game: P(draw) = d, P(win) = s - d/2, P(loss) = 1 - s - d/2 (needs d/2 <= min(s, 1 - s)).
    d = min(draw_rate, 2 * s, 2 * (1 - s))
    u = rng.random((runs, pairs, 2))
    game = np.where(u < s - d / 2, 1.0, np.where(u < s + d / 2, 0.5, 0.0))
    return game.mean(axis=2)


def sprt_error_rates(elo0: float, elo1: float, runs: int = 2000, max_pairs: int = 3000, alpha: float = 0.05,
                     beta: float = 0.05, draw_rate: float = 0.2, seed: int = 0) -> dict:
    """Simulate ``runs`` SPRTs with the truth at H0 and at H1 (all runs advance together, pair by pair, until
    each has decided or ``max_pairs`` ran out): the share accepting H1, the undecided share, mean pairs used."""
    rng = np.random.default_rng(seed)
    lo, hi = sprt_bounds(alpha, beta)
    out = {}
    for name, truth in (("at_h0", elo0), ("at_h1", elo1)):
        x = simulate_pairs(rng, truth, runs, max_pairs, draw_rate)
        idx = np.rint(x * 4).astype(int)
        counts = np.zeros((runs, 5))
        decision = np.zeros(runs, np.int8)  # 0 running, 1 H1, -1 H0
        used = np.full(runs, max_pairs)
        for n in range(max_pairs):
            live = decision == 0
            if not live.any():
                break
            rows = np.flatnonzero(live)
            counts[rows, idx[rows, n]] += 1
            llr = sprt_llr_counts(counts[rows], elo0, elo1)
            decision[rows] = np.where(llr >= hi, 1, np.where(llr <= lo, -1, 0))
            used[rows] = np.where(decision[rows] != 0, n + 1, used[rows])
        out[name] = {"accept_h1": float((decision == 1).mean()), "undecided": float((decision == 0).mean()),
                     "mean_pairs": float(used.mean())}
    return out
