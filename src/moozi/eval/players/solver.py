"""The perfect connect four player (``solver``): BitBully's solved scores, following each game by its moves."""

from __future__ import annotations

import numpy as np

from moozi.eval.players.base import PlayerSpec
from moozi.eval.solver import check_connect_four, make_solver, move_scores


class SolverPlayer:
    """Plays a move of the best solved score (the fastest win, the slowest loss), uniformly random among ties.

    ``result_only``: random among every move that keeps the solved result (win, draw or loss), a perfect
    player that does not hurry (more varied games; it still never errs by the grader's rule).
    """

    def __init__(self, game: str, seed: int = 0, result_only: bool = False):
        check_connect_four(game, "player 'solver'")
        self.engine = make_solver()
        self.rng = np.random.default_rng(seed)
        self.result_only = bool(result_only)
        self.spec = PlayerSpec("solver", (("result", 1),) if result_only else ())
        self.moves: list[list[int]] = []
        self.over: list[bool] = []

    def reset(self, ts) -> None:
        n = len(ts.is_first)
        self.moves = [[] for _ in range(n)]
        self.over = [False] * n

    def observe(self, ts, actions) -> None:
        for b, (first, last) in enumerate(zip(np.asarray(ts.is_first), np.asarray(ts.is_last))):
            if first:
                self.moves[b], self.over[b] = [], False
            elif not self.over[b]:
                self.moves[b].append(int(actions[b]))
                self.over[b] = bool(last)

    def act(self, ts, movers):
        from moozi.eval.solver import result

        out = np.zeros(len(movers), np.int32)
        for b in np.flatnonzero(movers):
            scores = move_scores(self.engine, self.moves[b])
            legal = np.flatnonzero(np.asarray(ts.legal_actions[b], bool)).tolist()
            if legal != [c for c, s in enumerate(scores) if s is not None]:
                raise RuntimeError(f"solver: the game's legal moves {legal} differ from the board's after "
                                   f"{self.moves[b]} in game {b}")
            key = (lambda c: result(scores[c])) if self.result_only else (lambda c: scores[c])
            best = max(key(c) for c in legal)
            out[b] = self.rng.choice([c for c in legal if key(c) == best])
        return out

    def close(self) -> None:
        pass
