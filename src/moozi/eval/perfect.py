"""Exact minimax for tic-tac-toe and a perfect opponent for ``pgx:tic_tac_toe``.

Board convention (everything here): ``cells`` is ``[..., 9]`` in row-major
order (``0 1 2 / 3 4 5 / 6 7 8``, the pgx action indices) with ``+1`` for the
player to move, ``-1`` for the opponent and ``0`` for an empty cell. Because
the rules are symmetric, such a mover-relative board determines the game.

:func:`solve` (numpy, run once at first use and cached; nothing is computed at
import time) covers all ``3**9`` encodings, reachable or not. Encoding: base 3,
``index = sum(d[i] * 3**i)`` with digit ``d = 0`` empty, ``1`` mover, ``2``
opponent. For each board it stores

* ``value``: game-theoretic value for the mover, ``+1`` win / ``0`` draw / ``-1``
  loss (terminal boards: ``-1`` if the opponent has a line, ``+1`` if the mover
  has one — unreachable, the game would have ended —, ``0`` if full);
* ``score``: a depth-aware score, ``sign(score) == value`` and ``|score| = 10 - plies``
  to the end of the game under optimal play (faster wins score higher, slower
  losses score higher);
* ``optimal``: ``[9]`` bool, the moves that maximise the score. Tie-break:
  **prefer faster wins and slower losses**; all moves of equal score (e.g. all
  drawing moves when the position is a draw) are optimal. In particular a
  losing move is never optimal when a draw or a win exists, and a slower win
  (e.g. blocking first when an immediate win exists) is not optimal. Terminal
  boards have no optimal moves.

:func:`perfect_opponent` plays uniformly at random among the optimal moves
(so evaluation games vary). It is a :data:`moozi.workers.device_actor.DeviceOpponent`.

Decoding the pgx state (pgx 2.x ``pgx.tic_tac_toe.State``): ``inner._x.board``
is ``[9]`` int32 with ``-1`` empty, ``0`` X, ``1`` O, and ``inner._x.color`` is
the colour to move (0 = X, 1 = O). ``inner.current_player`` is the *player id*
(which pgx draws at random per game, independent of colour), so it is not used:
the mover's pieces are ``board == color``. Without an env state (``env_state``
None) the board is read from the time step's observation, ``[3, 3, 2]`` from
the mover's point of view (plane 0: mover's pieces, plane 1: opponent's).

``openspiel:tic_tac_toe`` (host path): :func:`host_perfect_opponent` is the
same player for a host pool (numpy in and out, a
:data:`moozi.workers.pool_actor.HostOpponent`). The bridge's observation is
``[3, 3, 3]`` (OpenSpiel's ``(C, H, W)`` transposed), planes ``(empty, o,
x)``, and it is the same for both players (not mover-relative); ``x`` is
OpenSpiel player 0, who moves first, and ``o`` player 1, so
:func:`cells_from_openspiel` needs ``to_play`` to know whose pieces are whose.
OpenSpiel's actions are the row-major cell indices, like pgx's.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array

NUM_CELLS = 9
NUM_BOARDS = 3**NUM_CELLS
LINES = np.array(
    [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]], dtype=np.int32
)
_POW3 = 3 ** np.arange(NUM_CELLS, dtype=np.int32)
_WIN_SCORE = 10  # |score| = _WIN_SCORE - plies until the game ends

OPPONENTS = ("random", "perfect")
PERFECT_ENVS = ("pgx:tic_tac_toe", "openspiel:tic_tac_toe")


class Solution(NamedTuple):
    """Solved tic-tac-toe, indexed by the base-3 mover-relative encoding (numpy, read-only).

    value: ``[3**9]`` int8 in {-1, 0, 1}, for the player to move.
    score: ``[3**9]`` int8, ``sign == value``, ``|score| = 10 - plies`` to the end
      under optimal play (0 for draws).
    optimal: ``[3**9, 9]`` bool, the optimal moves (empty on terminal boards).
    terminal: ``[3**9]`` bool, the board is over (a line or full).
    """

    value: np.ndarray
    score: np.ndarray
    optimal: np.ndarray
    terminal: np.ndarray


@functools.lru_cache(maxsize=None)
def solve() -> Solution:
    """Solve every board (all ``3**9`` encodings) by backward induction; cached, numpy only."""
    idx = np.arange(NUM_BOARDS, dtype=np.int32)
    digits = (idx[:, None] // _POW3[None, :]) % 3  # [N, 9]
    mover_line = (digits[:, LINES] == 1).all(-1).any(-1)
    opp_line = (digits[:, LINES] == 2).all(-1).any(-1)
    empties = (digits == 0).sum(-1)
    terminal = mover_line | opp_line | (empties == 0)
    # Perspective swap (1 <-> 2) of every board: the child's index after the mover plays.
    swapped = np.where(digits == 0, 0, 3 - digits)
    swap_index = (swapped * _POW3).sum(-1).astype(np.int32)

    score = np.zeros(NUM_BOARDS, np.int32)
    score[opp_line] = -_WIN_SCORE
    score[mover_line & ~opp_line] = _WIN_SCORE
    optimal = np.zeros((NUM_BOARDS, NUM_CELLS), bool)
    # A child has one empty cell fewer, so solve boards in order of increasing empties.
    for k in range(1, NUM_CELLS + 1):
        boards = idx[(empties == k) & ~terminal]
        if boards.size == 0:
            continue
        d = digits[boards]  # [M, 9]
        legal = d == 0
        child = swap_index[np.clip(boards[:, None] + _POW3[None, :], 0, NUM_BOARDS - 1)]  # [M, 9]
        s = -score[child]
        s = s - np.sign(s)  # one more ply to the end: wins later, losses later
        s = np.where(legal, s, np.iinfo(np.int32).min)
        best = s.max(-1)
        score[boards] = best
        optimal[boards] = legal & (s == best[:, None])
    value = np.sign(score).astype(np.int8)
    sol = Solution(value=value, score=score.astype(np.int8), optimal=optimal, terminal=terminal)
    for a in sol:
        a.setflags(write=False)
    return sol


@functools.lru_cache(maxsize=None)
def _tables() -> tuple[np.ndarray, np.ndarray]:
    sol = solve()
    return sol.optimal, sol.value.astype(np.int32)


def encode(cells) -> Array:
    """Base-3 index of mover-relative ``cells [..., 9]`` (+1 mover, -1 opponent, 0 empty). Jittable."""
    c = jnp.asarray(cells)
    d = jnp.where(c > 0, 1, jnp.where(c < 0, 2, 0)).astype(jnp.int32)
    return (d * jnp.asarray(_POW3)).sum(-1)


def optimal_moves_from_cells(cells) -> Array:
    """``[..., 9]`` bool optimal moves for the mover of ``cells [..., 9]`` (see module doc). Jittable."""
    optimal, _ = _tables()
    return jnp.asarray(optimal)[encode(cells)]


def value_of(cells) -> Array:
    """``[...]`` int32 game-theoretic value (+1/0/-1) for the mover of ``cells [..., 9]``. Jittable."""
    _, value = _tables()
    return jnp.asarray(value)[encode(cells)]


def cells_from_pgx(inner) -> Array:
    """Mover-relative ``cells [..., 9]`` int32 from a (batched) pgx tic-tac-toe ``State``."""
    board = jnp.asarray(inner._x.board)
    color = jnp.asarray(inner._x.color)[..., None]
    return jnp.where(board < 0, 0, jnp.where(board == color, 1, -1)).astype(jnp.int32)


def cells_from_observation(observation) -> Array:
    """Mover-relative ``cells [..., 9]`` int32 from the env observation ``[..., 3, 3, 2]`` (mover's view)."""
    obs = jnp.asarray(observation)
    mine, theirs = obs[..., 0], obs[..., 1]
    cells = (mine > 0.5).astype(jnp.int32) - (theirs > 0.5).astype(jnp.int32)
    return cells.reshape(obs.shape[:-3] + (NUM_CELLS,))


def perfect_opponent(rng, env_state, timestep) -> Array:
    """Perfect play for ``pgx:tic_tac_toe``: ``(rng, env_state [B], timestep [B]) -> [B]`` int32.

    Uniformly random among the optimal moves of the board (decoded from
    ``env_state.inner``, or from ``timestep.observation`` when ``env_state`` is
    None), restricted to ``timestep.legal_actions``; if that leaves nothing
    (cannot happen on a consistent state) it falls back to any legal move, and
    returns 0 where nothing is legal (last steps). Jittable.
    """
    if env_state is not None:
        cells = cells_from_pgx(env_state.inner)
    else:
        cells = cells_from_observation(timestep.observation)
    legal = jnp.asarray(timestep.legal_actions, jnp.bool_)
    best = optimal_moves_from_cells(cells) & legal
    choice = jnp.where(jnp.any(best, axis=-1, keepdims=True), best, legal)
    logits = jnp.where(choice, 0.0, -jnp.inf)
    logits = jnp.where(jnp.any(choice, axis=-1, keepdims=True), logits, 0.0)
    action = jax.random.categorical(rng, logits, axis=-1).astype(jnp.int32)
    return jnp.where(jnp.any(legal, axis=-1), action, 0)


# OpenSpiel tic-tac-toe observation planes (channels of the bridge's [3, 3, 3] observation).
_OS_EMPTY, _OS_O, _OS_X = 0, 1, 2  # x = player 0 (moves first), o = player 1


def cells_from_openspiel(observation, to_play) -> np.ndarray:
    """Mover-relative ``cells [..., 9]`` int32 from the ``openspiel:tic_tac_toe`` observation.

    Args:
      observation: ``[..., 3, 3, 3]`` as the OpenSpiel bridge emits it (planes
        ``empty, o, x``; the same for both players).
      to_play: ``[...]`` the player to move (0 plays x, 1 plays o); its pieces are ``+1``.

    Numpy (host path).
    """
    obs = np.asarray(observation)
    lead = obs.shape[:-3]
    x = (obs[..., _OS_X] > 0.5).reshape(lead + (NUM_CELLS,))
    o = (obs[..., _OS_O] > 0.5).reshape(lead + (NUM_CELLS,))
    mover_is_x = (np.asarray(to_play) == 0)[..., None]
    mine = np.where(mover_is_x, x, o)
    theirs = np.where(mover_is_x, o, x)
    return mine.astype(np.int32) - theirs.astype(np.int32)


def host_perfect_opponent(rng: np.random.Generator, timestep) -> np.ndarray:
    """Perfect play for ``openspiel:tic_tac_toe`` on the host path: ``(rng, timestep [B]) -> [B]`` int32.

    ``timestep`` is a batched numpy TimeStep from an ``openspiel:tic_tac_toe``
    pool. Uniformly random among the optimal moves (see the module doc) of the
    board decoded with :func:`cells_from_openspiel`, restricted to
    ``legal_actions``; falls back to any legal move if that leaves nothing
    (cannot happen on a consistent board) and returns 0 where nothing is legal
    (last steps). A :data:`moozi.workers.pool_actor.HostOpponent`.
    """
    return perfect_moves(rng, cells_from_openspiel(timestep.observation, timestep.to_play), timestep.legal_actions)


def perfect_moves(rng: np.random.Generator, cells, legal_actions) -> np.ndarray:
    """Numpy: ``[B]`` moves uniformly random among the optimal ones for mover-relative ``cells [B, 9]``,
    restricted to ``legal_actions [B, 9]`` (any legal move if that leaves none; 0 where nothing is legal)."""
    optimal, _ = _tables()
    cells = np.asarray(cells)
    digits = np.where(cells > 0, 1, np.where(cells < 0, 2, 0))
    legal = np.asarray(legal_actions, bool)
    best = optimal[(digits * _POW3).sum(-1)] & legal
    choice = np.where(best.any(-1, keepdims=True), best, legal)
    u = rng.random(choice.shape)
    action = np.argmax(np.where(choice, u, -1.0), axis=-1)
    return np.where(legal.any(-1), action, 0).astype(np.int32)


def make_opponent(name: str, env_name: str, path: str = "device") -> Callable:
    """An opponent by name: ``"random"`` (any env) or ``"perfect"`` (tic-tac-toe only).

    ``path="device"`` gives a jittable :data:`moozi.workers.device_actor.DeviceOpponent`;
    ``path="host"`` a :data:`moozi.workers.pool_actor.HostOpponent` (numpy).
    """
    if name == "random":
        if path == "host":
            from moozi.workers.pool_actor import host_random_opponent

            return host_random_opponent
        from moozi.workers.device_actor import random_opponent

        return random_opponent
    if name == "perfect":
        if env_name not in PERFECT_ENVS:
            raise ValueError(
                f"opponent 'perfect' is not available for {env_name!r}: perfect play is only available for "
                f"tic-tac-toe ({', '.join(PERFECT_ENVS)}); options: 'random' (any env), 'perfect' (tic-tac-toe)"
            )
        return host_perfect_opponent if env_name.startswith("openspiel:") else perfect_opponent
    raise ValueError(f"unknown opponent {name!r}; options: {', '.join(map(repr, OPPONENTS))}")


def testing_opponent(name: str, env_name: str, spec) -> Callable | None:
    """The opponent ``name`` for the test games of ``env_name`` (its ``spec``), in the form its acting path
    plays; ``None`` for a single-player game. What a testing worker is given: the driver never names the path."""
    return make_opponent(name, env_name, path=spec.path) if spec.two_player else None
