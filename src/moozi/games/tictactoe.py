"""Tic-tac-toe as a *true* search model (exact simulator), for tests and the demo.

The embedding is the board from the point of view of the player to move
(``+1`` own stone, ``-1`` opponent's, ``0`` empty) plus a ``done`` flag. A move
places a ``+1`` stone, pays ``+1`` to the mover if it completes a line, then
flips the board for the opponent. Terminal states absorb (reward 0, value 0).
An illegal move inside the tree (occupied cell, or the dummy action) loses for
the mover, so the search never prefers it. Non-terminal states are valued 0,
so the search must find wins by looking ahead.

Cells are numbered 0..8 row-major; environment action ``e`` is cell ``e`` and
augmented action ``e + 1``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from moozi.planner import RootEval, StepEval

LINES = np.array(
    [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]]
)
NUM_ACTIONS = 10  # augmented: dummy + 9 cells


class Board(NamedTuple):
    """``cells [B, 9]`` float32 from the mover's view; ``done [B]`` bool."""

    cells: jnp.ndarray
    done: jnp.ndarray


def from_string(rows: str, to_move: str) -> np.ndarray:
    """``"XO./.X./..."`` (rows split by '/') and ``'X'`` or ``'O'`` -> ``[9]`` cells from the mover's view."""
    chars = rows.replace("/", "")
    if len(chars) != 9 or set(chars) - set("XO."):
        raise ValueError(f"board must be 9 cells of X, O or '.', got {rows!r}")
    if to_move not in ("X", "O"):
        raise ValueError(f"to_move must be 'X' or 'O', got {to_move!r}")
    other = "O" if to_move == "X" else "X"
    return np.array([1.0 if c == to_move else -1.0 if c == other else 0.0 for c in chars], np.float32)


def legal_actions(cells) -> jnp.ndarray:
    """``[B, 9]`` cells -> ``[B, 9]`` bool legal environment actions."""
    return cells == 0


def _wins(cells) -> jnp.ndarray:
    return jnp.any(jnp.all(cells[:, LINES] == 1.0, axis=-1), axis=-1)


def _prior(cells, done) -> jnp.ndarray:
    legal = jnp.concatenate([jnp.zeros_like(done)[:, None], legal_actions(cells)], axis=-1)
    return jnp.where(legal, 0.0, -30.0)


def root(cells) -> RootEval:
    """Root evaluation of ``cells [B, 9]`` (non-terminal positions)."""
    cells = jnp.asarray(cells, jnp.float32)
    done = jnp.zeros(cells.shape[:1], bool)
    return RootEval(Board(cells, done), jnp.zeros(cells.shape[:1]), _prior(cells, done))


def step(params, board: Board, action) -> StepEval:
    """Exact transition for augmented ``action [B]``; ``params`` unused."""
    del params
    cell = action - 1
    b = jnp.arange(action.shape[0])
    legal = (cell >= 0) & (board.cells[b, jnp.clip(cell, 0, 8)] == 0)
    placed = board.cells.at[b, jnp.clip(cell, 0, 8)].set(jnp.where(legal, 1.0, board.cells[b, jnp.clip(cell, 0, 8)]))
    won = legal & _wins(placed)
    full = jnp.all(placed != 0, axis=-1)
    reward = jnp.where(board.done, 0.0, jnp.where(legal, won.astype(jnp.float32), -1.0))
    done = board.done | ~legal | won | full
    cells = jnp.where(board.done[:, None], board.cells, -placed)
    return StepEval(Board(cells, done), reward, jnp.zeros_like(reward), _prior(cells, done))
