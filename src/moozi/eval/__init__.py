"""Judging agents: players, matches, ratings, gating and grading (docs/evaluation.md).

* :mod:`~moozi.eval.players`: every kind of player behind one interface, named by a player string
  (:mod:`~moozi.eval.players.registry`): built-ins (random, perfect, OpenSpiel MCTS, the connect-four solver),
  trained agents (runs, agent files, ``zoo:NAME``, ``az:``), external engines (GTP), with play-time search
  options (:mod:`~moozi.eval.players.options`).
* Two-player games: :mod:`~moozi.eval.arena` (matches from both seats), :mod:`~moozi.eval.ratings` (Bradley-Terry
  ratings with intervals), :mod:`~moozi.eval.tournament`, :mod:`~moozi.eval.gating` (SPRT or fixed gates).
  Single-player games: :mod:`~moozi.eval.single` (paired matches from the same starts, their gate and pool).
* :mod:`~moozi.eval.stats`: intervals and tests; :mod:`~moozi.eval.evaluate` (``moozi eval``),
  :mod:`~moozi.eval.sweep` (kept checkpoints by simulations), :mod:`~moozi.eval.ppo` (the PPO baseline).
* Connect four graded against perfect play: :mod:`~moozi.eval.solver` (the solved positions in ``data/``) and
  :mod:`~moozi.eval.grade`; tic-tac-toe solved exactly: :mod:`~moozi.eval.perfect` (re-exported here).
* People against agents: :mod:`~moozi.eval.play` (terminal), :mod:`~moozi.eval.gtp` (GTP engine),
  :mod:`~moozi.eval.session` (one game's state, shared by the terminal, GTP and the browser page).
"""

from moozi.eval.perfect import (
    OPPONENTS,
    make_opponent,
    optimal_moves_from_cells,
    perfect_opponent,
    solve,
    value_of,
)

__all__ = [
    "OPPONENTS",
    "make_opponent",
    "optimal_moves_from_cells",
    "perfect_opponent",
    "solve",
    "value_of",
]
