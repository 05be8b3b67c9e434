"""Is the run learning? A health verdict from the curves a run already logs (pure functions).

A run that learns nothing looks, on the console, like one that learns slowly.
:func:`assess` flags the signatures seen in practice (a preset reused on a
game it does not fit: Acrobot at -500 for a whole run, Go self-play games
collapsing to five moves) so a user sees them within minutes:

* ``stalled``: the median test return of the last ``patience`` tests is no
  better than the median of the first ``patience`` tests: the agent plays no
  better than when it began. Medians of windows, not single tests: one lucky
  first test (tic-tac-toe against a random player) or one lucky late test
  (Acrobot, mostly at -500) must not decide it. Checked from ``2 * patience``
  tests on, so the two windows do not overlap. Over the runs recorded in
  docs/results it flags no run of a shipped preset.
* ``short games``: two-player self-play episodes have collapsed to under a
  quarter of the longest average length seen (players resign into the
  quickest end instead of playing).
* with either, the search policy's entropy relative to uniform and the
  episode-length trend are reported, to show whether exploration stopped.

A low entropy alone is not flagged: healthy runs dip to 1% of uniform once
they are sure of a move (CartPole). Nor is a falling episode length in a
single-player game: reaching a goal sooner is learning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

# Relative improvement over the first test that counts as progress (returns are noisy; a flat curve is not).
MIN_IMPROVEMENT = 1e-6
SHORT_GAMES = 0.25


@dataclass(frozen=True)
class Health:
    """The verdict: ``ok``, the reasons it is not (one line each) and ``health/*`` metrics."""

    ok: bool
    reasons: tuple[str, ...] = ()
    metrics: dict = field(default_factory=dict)

    def line(self) -> str:
        return "ok" if self.ok else "; ".join(self.reasons)


def _smooth(values: Sequence[float], k: int = 3) -> list[float]:
    return [sum(values[max(0, i - k + 1):i + 1]) / len(values[max(0, i - k + 1):i + 1]) for i in range(len(values))]


def assess(test_returns: Sequence[float], entropies: Sequence[float], lengths: Sequence[float], num_actions: int,
           two_player: bool, patience: int) -> Health:
    """Health of a run from its history.

    Args:
      test_returns: ``test/return_mean`` of every test so far, in order.
      entropies: ``acting/policy_entropy`` (nats) of each metrics row so far.
      lengths: ``train/episode_length`` of each metrics row that had one.
      num_actions: the game's action count (uniform entropy is ``log(num_actions)``).
      two_player: self-play game (episode length collapse is flagged).
      patience: tests per window compared (the first ones, the last ones; 0: never ``stalled``).
    """
    metrics: dict[str, float] = {}
    reasons = []
    if test_returns:
        best = max(test_returns)
        since = len(test_returns) - 1 - max(i for i, r in enumerate(test_returns) if r == best)
        metrics["health/tests_since_best"] = float(since)
        if patience and len(test_returns) >= 2 * patience:
            start = float(np.median(test_returns[:patience]))
            recent = float(np.median(test_returns[-patience:]))
            if recent <= start + MIN_IMPROVEMENT * max(abs(start), 1.0):
                reasons.append(f"test return not improving: median {recent:.4g} over the last {patience} tests, "
                               f"{start:.4g} over the first {patience} (fine only if that is the best the game "
                               "allows)")
    if entropies and num_actions > 1:
        frac = _smooth(entropies)[-1] / math.log(num_actions)
        metrics["health/entropy_fraction"] = frac
    length_ratio = None
    if lengths:
        smooth = _smooth(lengths)
        length_ratio = smooth[-1] / max(max(smooth), 1e-9)
        metrics["health/length_ratio"] = length_ratio
        if two_player and len(lengths) >= 3 and length_ratio < SHORT_GAMES:
            reasons.append(f"self-play games collapsed to {smooth[-1]:.1f} moves ({length_ratio:.0%} of the "
                           f"longest average, {max(smooth):.1f})")
    if reasons:
        if "health/entropy_fraction" in metrics:
            reasons.append(f"search policy entropy {metrics['health/entropy_fraction']:.0%} of uniform")
        if length_ratio is not None and not two_player:
            reasons.append(f"episode length {_smooth(lengths)[-1]:.1f} ({length_ratio:.0%} of the longest average)")
    metrics["health/ok"] = float(not reasons)
    return Health(ok=not reasons, reasons=tuple(reasons), metrics=metrics)
