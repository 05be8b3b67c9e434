"""How checkpoints are judged during training: tournaments (ratings), gating (the best network) and grading
(mistakes against perfect play)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from moozi.validate import boolean as _boolean
from moozi.validate import choice as _choice
from moozi.validate import fail as _fail
from moozi.validate import nonneg_int as _nonneg_int
from moozi.validate import number_in as _number_in
from moozi.validate import positive_int as _positive_int


@dataclass(frozen=True)
class TournamentConfig:
    """Periodic tournaments during training (two-player games; off by default).

    every_checkpoints: after every this-many periodic checkpoints, the newest
      checkpoint plays ``pairs`` pairs against each anchor and against the
      ``previous`` newest earlier checkpoints still kept; the games go to
      ``RUN/ratings/games.jsonl`` and the pool's ratings (one joint fit,
      ``random`` or the first anchor at 0) to the metrics as ``rating/*``
      (0: never).
    pairs: pairs of games per match.
    anchors: fixed opponents, ``moozi match`` player strings (e.g.
      ``[random, os-mcts-100]``, ``[perfect]`` for tic-tac-toe).
    previous: earlier checkpoints to play (0: anchors only).
    opening_plies: random plies opening each pair.
    max_share: a tournament is skipped while tournaments have taken more than
      this share of the run's wall clock (so rating never starves training).
    """

    every_checkpoints: int = 0
    pairs: int = 20
    anchors: tuple = ("random",)
    previous: int = 1
    opening_plies: int = 2
    max_share: float = 0.2

    def __post_init__(self):
        o = "tournament"
        _nonneg_int(o, "every_checkpoints", self.every_checkpoints)
        _positive_int(o, "pairs", self.pairs)
        _nonneg_int(o, "previous", self.previous)
        _nonneg_int(o, "opening_plies", self.opening_plies)
        _number_in(o, "max_share", self.max_share, 0.0, 1.0, lo_open=True)
        anchors = (self.anchors,) if isinstance(self.anchors, str) else self.anchors
        if not isinstance(anchors, (list, tuple)) or not all(isinstance(a, str) and a for a in anchors):
            _fail(o, "anchors", self.anchors, "a list of player strings, e.g. [random, os-mcts-100]")
        object.__setattr__(self, "anchors", tuple(anchors))


@dataclass(frozen=True)
class GatingConfig:
    """Gating during training (off by default, as MuZero updates continuously): the newest checkpoint plays the
    current ``best`` and replaces it only when a test says it is stronger. Single-player games: ``method``
    ``fixed`` only, meaning the paired test of returns over ``2 * max_pairs`` games from the same starts.

    every_checkpoints: after every this-many periodic checkpoints, gate the
      newest one (0: never). With gating on, ``checkpoints/best`` is the
      best-gated params (the first checkpoint starts it) instead of the best
      by test returns (``testing.keep_best``).
    method: ``"sprt"`` (stop as soon as H0 or H1 is accepted),
      ``"hoeffding"`` (a sample sized from ``margin`` and ``alpha``) or
      ``"fixed"`` (``max_pairs`` pairs, accept at ``threshold``), as ``moozi match --gate``.
    elo0 / elo1 / alpha / beta: the SPRT's hypotheses (Elo of new minus best)
      and error rates; ``alpha`` is also Hoeffding's delta.
    margin: Hoeffding's margin; threshold: the fixed score to reach.
    max_pairs: the most pairs a gate plays (an undecided SPRT keeps the best).
    opening_plies: random plies opening each pair.
    max_share: gating is skipped while it has taken more than this share of the run's wall clock.

    Gating games are never added to the rating pool (a stopping rule chose them).
    """

    every_checkpoints: int = 0
    method: Literal["sprt", "hoeffding", "fixed"] = "sprt"
    elo0: float = 0.0
    elo1: float = 50.0
    alpha: float = 0.05
    beta: float = 0.05
    margin: float = 0.1
    threshold: float = 0.55
    max_pairs: int = 200
    opening_plies: int = 2
    max_share: float = 0.2

    def __post_init__(self):
        o = "gating"
        _nonneg_int(o, "every_checkpoints", self.every_checkpoints)
        _choice(o, "method", self.method, ("sprt", "hoeffding", "fixed"))
        _number_in(o, "alpha", self.alpha, 0.0, 0.5, lo_open=True, hi_open=True)
        _number_in(o, "beta", self.beta, 0.0, 0.5, lo_open=True, hi_open=True)
        _number_in(o, "margin", self.margin, 0.0, 0.5, lo_open=True, hi_open=True)
        _number_in(o, "threshold", self.threshold, 0.0, 1.0)
        _number_in(o, "elo0", self.elo0, -1000.0, 1000.0)
        _number_in(o, "elo1", self.elo1, -1000.0, 1000.0)
        if not self.elo1 > self.elo0:
            _fail(o, "elo1", self.elo1, f"a number above elo0 = {self.elo0}")
        _positive_int(o, "max_pairs", self.max_pairs)
        _nonneg_int(o, "opening_plies", self.opening_plies)
        _number_in(o, "max_share", self.max_share, 0.0, 1.0, lo_open=True)


@dataclass(frozen=True)
class GradingConfig:
    """Grading during training (connect four only; off by default): the newest checkpoint's test search plays
    the packaged benchmark positions (``moozi grade``, :mod:`moozi.eval.grade`) and its mistake rates against
    perfect play go to the metrics as ``grade/CATEGORY`` (and ``grade/begin``, ``grade/middle``, ``grade/all``).

    every_checkpoints: after every this-many periodic checkpoints (0: never).
    per_category: the first this-many positions of each category.
    simulations: the search's simulations per move (None: the test planner's).
    keep_best: ``checkpoints/best`` is the checkpoint with the fewest mistakes over every graded position
      (ties: the newer), instead of the best by test returns; not with gating, which chooses best itself.
    max_share: grading is skipped while it has taken more than this share of the run's wall clock.
    """

    every_checkpoints: int = 0
    per_category: int = 100
    simulations: int | None = None
    keep_best: bool = False
    max_share: float = 0.1

    def __post_init__(self):
        o = "grading"
        _nonneg_int(o, "every_checkpoints", self.every_checkpoints)
        _positive_int(o, "per_category", self.per_category)
        if self.simulations is not None:
            _positive_int(o, "simulations", self.simulations)
        _boolean(o, "keep_best", self.keep_best)
        _number_in(o, "max_share", self.max_share, 0.0, 1.0, lo_open=True)
        if self.keep_best and not self.every_checkpoints:
            _fail(o, "keep_best", self.keep_best, "false while grading.every_checkpoints = 0 (nothing is graded)")
