"""Is the run learning? A health verdict from the curves a run already logs (:func:`assess`, pure), and
:class:`HealthWatch`, which keeps a run's curves and says on the console when the verdict turns bad.

A run that learns nothing looks, on the console, like one that learns slowly.
:func:`assess` flags the signatures seen in practice (a preset reused on a
game it does not fit: Acrobot at -500 for a whole run, Go self-play games
collapsing to five moves) so a user sees them within minutes:

* ``stalled``: the median test return of the last ``patience`` tests is no
  better than the median of the first ``patience`` tests: the agent plays no
  better than when it began (not flagged in a two-player game won in every
  recent test: its return cannot exceed 1). Medians of windows, not single
  tests: one lucky first test (tic-tac-toe against a random player) or one lucky late test
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

import logging
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

log = logging.getLogger("moozi")

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


SMOOTH_ROWS = 3  # the rows a moving average of the entropy and the episode length spans


def _smooth(values: Sequence[float], k: int = SMOOTH_ROWS) -> list[float]:
    return [sum(values[max(0, i - k + 1):i + 1]) / len(values[max(0, i - k + 1):i + 1]) for i in range(len(values))]


def assess(test_returns: Sequence[float], entropies: Sequence[float], lengths: Sequence[float], num_actions: int,
           two_player: bool, patience: int, longest: float | None = None) -> Health:
    """Health of a run from its history.

    Args:
      test_returns: ``test/return_mean`` of every test so far, in order.
      entropies: ``acting/policy_entropy`` (nats) of each metrics row so far.
      lengths: ``train/episode_length`` of each metrics row that had one.
      num_actions: the game's action count (uniform entropy is ``log(num_actions)``).
      two_player: self-play game (episode length collapse is flagged).
      patience: tests per window compared (the first ones, the last ones; 0: never ``stalled``).
      longest: the longest moving average of ``lengths`` seen before them, when ``lengths`` holds only the
        latest rows (a bounded history: :class:`HealthWatch`); None: ``lengths`` is the whole history.
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
            # A two-player game won in every test (return 1) from the start has nothing left to improve.
            saturated = two_player and recent >= 1.0 - MIN_IMPROVEMENT
            if recent <= start + MIN_IMPROVEMENT * max(abs(start), 1.0) and not saturated:
                reasons.append(f"test return not improving: median {recent:.4g} over the last {patience} tests, "
                               f"{start:.4g} over the first {patience} (fine only if that is the best the game "
                               "allows)")
    if entropies and num_actions > 1:
        frac = _smooth(entropies)[-1] / math.log(num_actions)
        metrics["health/entropy_fraction"] = frac
    length_ratio = None
    if lengths:
        smooth = _smooth(lengths)
        top = max(smooth) if longest is None else max(longest, smooth[-1])
        length_ratio = smooth[-1] / max(top, 1e-9)
        metrics["health/length_ratio"] = length_ratio
        if two_player and len(lengths) >= 3 and length_ratio < SHORT_GAMES:
            reasons.append(f"self-play games collapsed to {smooth[-1]:.1f} moves ({length_ratio:.0%} of the "
                           f"longest average, {top:.1f})")
    if reasons:
        if "health/entropy_fraction" in metrics:
            reasons.append(f"search policy entropy {metrics['health/entropy_fraction']:.0%} of uniform")
        if length_ratio is not None and not two_player:
            reasons.append(f"episode length {_smooth(lengths)[-1]:.1f} ({length_ratio:.0%} of the longest average)")
    metrics["health/ok"] = float(not reasons)
    return Health(ok=not reasons, reasons=tuple(reasons), metrics=metrics)


# The share of value or reward targets beyond the support that earns a console warning (the metric is always logged).
SUPPORT_WARN_SHARE = 0.01
HEALTH_REPEAT_S = 600.0  # a health verdict that flaps is warned about at most this often


class HealthWatch:
    """A run's curves remembered row by row: each row gets its ``health/*`` metrics (:func:`assess`), and the
    console is told once when the verdict turns bad (again only after a quiet spell) and once when value or
    reward targets fall outside what the model's support represents.

    model: the run's ``ModelConfig`` (its support); spec: the game's ``EnvSpec``; health_tests: how many tests
    the verdict compares (``testing.health_tests``).
    """

    def __init__(self, model, spec, health_tests: int):
        self.model, self.spec, self.health_tests = model, spec, health_tests
        # Bounded: every test (a few hundred in the longest runs), the entropy and episode length of the last
        # SMOOTH_ROWS rows only, and the longest average length so far: each row's verdict costs the same.
        self.history: dict[str, Any] = {"tests": [], "entropy": deque(maxlen=SMOOTH_ROWS),
                                        "length": deque(maxlen=SMOOTH_ROWS)}
        self._longest = 0.0
        self.health = Health(ok=True)
        self._warned_at = -float("inf")
        self._warned_support = False

    def remember(self, row: dict) -> None:
        for key, name in (("test/return_mean", "tests"), ("acting/policy_entropy", "entropy"),
                          ("train/episode_length", "length")):
            if key in row:
                self.history[name].append(float(row[key]))
                if name == "length":
                    self._longest = max(self._longest, sum(self.history["length"]) / len(self.history["length"]))

    def check(self, row: dict) -> dict:
        """Remember ``row``, warn where it is due; the row's ``health/*`` metrics."""
        self._check_support(row)
        self.remember(row)
        h = self.history
        health = assess(h["tests"], list(h["entropy"]), list(h["length"]), self.spec.num_actions,
                        self.spec.two_player, self.health_tests, longest=self._longest)
        now = time.monotonic()
        if not health.ok and self.health.ok:  # warned once, then again only after a quiet spell (no flapping)
            if now - self._warned_at > HEALTH_REPEAT_S:
                self._warned_at = now
                log.warning("health: %s. The run may not be learning: see \"What decides whether a game learns\" "
                            "in docs/custom-game.md", health.line())
        elif health.ok and not self.health.ok:
            log.info("health: ok again")
        self.health = health
        return {**health.metrics, "health/tests": float(len(h["tests"]))}  # 0: no verdict on learning yet

    def _check_support(self, row: dict) -> None:
        """Warn once when value or reward targets fall outside the model's support (they are clipped)."""
        from moozi.model.transform import max_representable

        outside = {k: row.get(f"targets/{k}_outside_support", 0.0) for k in ("value", "reward")}
        # A misconfigured support clips a large share; a learned model's bootstrapped board-game value of
        # 1.05 (a win plus the model's imperfect value after the end) clips 0.02% and is no mistake.
        if self._warned_support or not any(v >= SUPPORT_WARN_SHARE for v in outside.values()):
            return
        self._warned_support = True
        m = self.model
        fix = "use value_transform phi or raise model.support_size" if m.value_transform == "identity" else \
            "raise model.support_size or scale the game's rewards down"
        log.warning("%s targets fall outside what model.value_transform = %s with model.support_size = %d "
                    "represents (|x| <= %.4g) and are clipped to its edge: %s (docs/custom-game.md)",
                    " and ".join(f"{v:.1%} of {k}" for k, v in outside.items() if v >= SUPPORT_WARN_SHARE),
                    m.value_transform,
                    m.support_size, max_representable(m.support_size, m.value_transform), fix)
