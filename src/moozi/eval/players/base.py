"""What every player is: :class:`PlayerSpec`, the :class:`Player` interface, a move clock and shared helpers."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class PlayerSpec:
    """What a player is: ``kind`` and its settings (``settings`` sorted ``(key, value)`` pairs).

    ``source``: a run directory as given, for trained players (``None`` otherwise); ``run_id``: that run's
    identity (:func:`moozi.run_dir.run_identity`); ``updates``: the checkpoint's update count.
    """

    kind: str
    settings: tuple = ()
    source: str | None = None
    updates: int | None = None
    run_id: str | None = None

    @property
    def id(self) -> str:
        """A stable name of the network and search: kind, the run's identity (never the path typed, so one
        network rates once in a pool) and every non-default setting (e.g. ``mcts:ttt-3fa2b1@1200,sims=64``)."""
        name = self.run_id or self.source
        head = self.kind if name is None else f"{self.kind}:{name}"
        if self.updates is not None:
            head += f"@{self.updates}"
        return ",".join([head] + [f"{k}={v}" for k, v in self.settings])

    @property
    def player(self) -> str:
        """The player string that builds this player again (``moozi match``, ``--opponent``)."""
        if self.source is None:
            return self.id
        head = ("" if self.kind == "mcts" else f"{self.kind}:") + f"{self.source}@{self.updates}"
        return ",".join([head] + [f"{k}={v}" for k, v in self.settings])

    def describe(self) -> dict:
        return {"id": self.id, "player": self.player, "kind": self.kind, "source": self.source,
                "run_id": self.run_id, "updates": self.updates, "settings": dict(self.settings)}


class Player(Protocol):
    spec: PlayerSpec

    def reset(self, ts) -> None:
        """New games in every row: ``ts`` is the pool's ``[B]`` first steps."""

    def act(self, ts, movers: np.ndarray) -> np.ndarray:
        """``[B]`` int32 environment actions; rows where ``movers`` is False are ignored."""

    def observe(self, ts, actions: np.ndarray) -> None:
        """The pool stepped with ``actions [B]`` (both players' moves) and now shows ``ts``."""

    def close(self) -> None:
        """Release what the player holds."""


def _random_legal(rng: np.random.Generator, legal: np.ndarray) -> np.ndarray:
    """``[B]`` uniformly random legal actions (0 where nothing is legal)."""
    u = rng.random(legal.shape)
    return np.where(legal.any(-1), np.argmax(np.where(legal, u, -1.0), axis=-1), 0).astype(np.int32)


def _padded_rows(movers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, idx)``: the games to move, and their indices padded to a power of two (repeating the first)
    so a batched search sees a handful of shapes."""
    rows = np.flatnonzero(movers)
    size = 1 << math.ceil(math.log2(max(rows.size, 1)))
    return rows, np.concatenate([rows, np.full(size - rows.size, rows[0] if rows.size else 0)]).astype(np.int32)


def _compile_timed(player, cache: dict, key, fn, args):
    """``fn`` compiled ahead for ``args`` (cached under ``key``), its compile time added to
    ``player.compile_s``: ms per move is playing time."""
    if key not in cache:
        t = time.perf_counter()
        cache[key] = fn.lower(*args).compile()
        player.compile_s += time.perf_counter() - t
    return cache[key]


def _analysis(policy, value, prior, net_value, legal, row: int, simulations: int, tree=None,
              two_player: bool = True) -> dict:
    """A search's view of game ``row`` (``[B, A_env]`` / ``[B]`` arrays): its value, the network's, and per
    legal move the search policy and the prior, most visited first (``moozi play`` hints, ``moozi-analyze``).

    With the search's ``tree`` (an ``mctx.Tree``, numpy) also ``path``: the line the search predicts (its chosen
    move, then the most visited child at every node, a move at a time: :func:`moozi.search_tree.predicted_moves`),
    each step's environment action (-1: the dummy action, below the root), visits, prior, and the model's
    predicted reward of the move and value after it, both for the player to move at the root (signs flipped on
    the opponent's plies in two-player games); with chance, after the most visited outcome of each move."""
    moves = [{"action": int(a), "policy": float(policy[row, a]), "prior": float(prior[row, a])}
             for a in np.flatnonzero(legal[row])]
    moves.sort(key=lambda m: -m["policy"])
    out = {"value": float(value[row]), "network_value": float(net_value[row]), "simulations": simulations,
           "moves": moves}
    if tree is not None:
        from moozi.search_tree import predicted_moves, tree_nodes

        def mine(ply: int) -> float:  # +1 where the root's player is to move after `ply` moves
            return -1.0 if two_player and ply % 2 else 1.0

        line = predicted_moves(tree_nodes(tree, row), moves[0]["action"] + 1 if moves else None)
        # a move's reward is its mover's, the value after it the next mover's (an afterstate's: its mover's)
        out["path"] = [{"action": move.action - 1, "visits": move.visits, "prior": move.prior,
                        "reward": mine(i) * after.reward, "value": mine(i if after.afterstate else i + 1) * after.value}
                       for i, (move, after) in enumerate(line)]
    return out


@dataclass
class MoveClock:
    """Time spent in a player's ``act`` (and compiling in it) and the moves it made (ms per move)."""

    seconds: float = 0.0
    moves: int = 0
    calls: int = 0
    compile_s: float = 0.0
    started: float = field(default=0.0, repr=False)

    def __enter__(self):
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds += time.perf_counter() - self.started
        self.calls += 1

    @property
    def ms_per_move(self) -> float:
        """Playing time per move (compiling a new batch shape is not playing)."""
        return 1000.0 * max(self.seconds - self.compile_s, 0.0) / max(self.moves, 1)
