"""Chance outcomes a game can name itself (``learner.chance_codes = game``).

Stochastic MuZero learns which of M chance outcomes followed each real transition. By default an encoder
names them from the observations (:mod:`moozi.model.stochastic`); where the game's rules can say exactly what
happened, a *code function* gives the true outcome instead, and the chance prior and the chance dynamics are
trained on it (LightZero trains 2048 this way).

A code function is a pure JAX function of one real transition, read from the stored frames (so no acting
path, replay buffer or process boundary has to carry anything new)::

    code = fn(frame, action, next_frame)   # frames [H, W, C] float32 (decoded), action [] int32 (environment
                                           # index), code [] int32 in [0, M)

It is called inside the learner's jit under ``vmap``, only on transitions inside an episode. A game's
:class:`~moozi.envs.contract.EnvSpec` names its function (``chance_code``, a key of :data:`CODES`: a name, so
the spec stays plain data across processes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp


@dataclass(frozen=True)
class ChanceCode:
    """A game's code function and its number of outcomes ``M`` (``model.chance_outcomes`` must equal it)."""

    outcomes: int
    fn: Callable
    what: str


def _slide_2048(board, action):
    """pgx 2048's move without the new tile: ``board`` ``[4, 4]`` int exponents (0 empty), ``action`` 0 left,
    1 up, 2 right, 3 down (pgx's order). The merge of one row is pgx's own (``_slide_and_merge``)."""
    from pgx.play2048 import _slide_and_merge  # pgx's rule for one row; the rotations are its _step's

    turns = [lambda b, k=k: jnp.rot90(b, k) for k in range(4)]
    back = [lambda b, k=k: jnp.rot90(b, -k) for k in range(4)]
    rotated = jax.lax.switch(action, turns, board)
    slid, _ = jax.vmap(_slide_and_merge)(rotated)
    return jax.lax.switch(action, back, slid)


def tile_2048(frame, action, next_frame):
    """pgx 2048's new tile as one of 32 codes: ``2 * cell + (1 if the tile is a 4 else 0)``, ``cell`` row-major.

    ``frame`` / ``next_frame``: pgx's observation ``[4, 4, 31]`` (one-hot exponent planes, plane 0 = empty).
    The board after the move is the game's slide and merge of ``frame``; the new tile is the one cell empty
    there and filled in ``next_frame`` (exactly one after a legal move; code 0 if none, e.g. past the end).
    """
    board = jnp.argmax(frame, axis=-1).astype(jnp.int32)
    after = _slide_2048(board, jnp.asarray(action, jnp.int32)).reshape(-1)
    nxt = jnp.argmax(next_frame, axis=-1).astype(jnp.int32).reshape(-1)
    new = (after == 0) & (nxt != 0)
    cell = jnp.argmax(new).astype(jnp.int32)
    four = (nxt[cell] == 2).astype(jnp.int32)
    return jnp.where(jnp.any(new), 2 * cell + four, 0).astype(jnp.int32)


CODES: dict[str, ChanceCode] = {
    "pgx:2048": ChanceCode(32, tile_2048, "the new tile: 16 cells x (2 or 4)"),
}
"""Code functions by name (``EnvSpec.chance_code``)."""


def chance_code(name: str) -> ChanceCode:
    """The registered code function ``name`` (a ``KeyError`` names the known ones)."""
    try:
        return CODES[name]
    except KeyError:
        raise KeyError(f"no chance code function {name!r}; known: {', '.join(sorted(CODES))}") from None
