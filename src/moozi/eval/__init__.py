"""Evaluation helpers: opponents for matches (random, perfect tic-tac-toe play).

* :mod:`moozi.eval.perfect`: exact minimax for tic-tac-toe (:func:`solve`,
  :func:`value_of`, :func:`optimal_moves_from_cells`), :func:`perfect_opponent`
  for ``pgx:tic_tac_toe`` and :func:`make_opponent` (``"random"`` / ``"perfect"``).
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
