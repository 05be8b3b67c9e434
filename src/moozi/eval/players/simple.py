"""Players that need no run: random, epsilon-greedy wrapping, perfect tic-tac-toe."""

from __future__ import annotations

import dataclasses

import numpy as np

from moozi.config import ConfigError
from moozi.eval.players.base import PlayerSpec, _random_legal


class RandomPlayer:
    """Uniformly random legal moves."""

    def __init__(self, seed: int = 0):
        self.spec = PlayerSpec("random")
        self.rng = np.random.default_rng(seed)

    def reset(self, ts) -> None:
        pass

    def act(self, ts, movers):
        return _random_legal(self.rng, np.asarray(ts.legal_actions, bool))

    def observe(self, ts, actions) -> None:
        pass

    def close(self) -> None:
        pass


class EpsilonPlayer:
    """Wraps a player: with probability ``eps`` a uniformly random legal move instead of its own."""

    def __init__(self, inner, eps: float, seed: int = 0):
        if not 0.0 <= eps <= 1.0:
            raise ConfigError(f"eps = {eps}: allowed a probability in [0, 1]")
        self.inner = inner
        self.eps = float(eps)
        self.rng = np.random.default_rng(seed)
        s = inner.spec
        self.spec = dataclasses.replace(s, settings=tuple(sorted(s.settings + (("eps", eps),))))

    def reset(self, ts) -> None:
        self.inner.reset(ts)

    def act(self, ts, movers):
        coin = self.rng.random(movers.shape) < self.eps
        own = movers & ~coin
        actions = _random_legal(self.rng, np.asarray(ts.legal_actions, bool))
        if own.any():
            actions = np.where(own, self.inner.act(ts, own), actions).astype(np.int32)
        return actions

    def observe(self, ts, actions) -> None:
        self.inner.observe(ts, actions)

    def close(self) -> None:
        self.inner.close()


class PerfectPlayer:
    """Tic-tac-toe minimax, uniformly random among the optimal moves (``moozi.eval.perfect``)."""

    def __init__(self, game: str, seed: int = 0):
        from moozi.eval.perfect import PERFECT_ENVS

        if game not in PERFECT_ENVS:
            raise ConfigError(f"player 'perfect' is only available for tic-tac-toe ({', '.join(PERFECT_ENVS)}), "
                              f"not {game!r}")
        self.spec = PlayerSpec("perfect")
        self.game = game
        self.rng = np.random.default_rng(seed)

    def reset(self, ts) -> None:
        pass

    def act(self, ts, movers):
        from moozi.eval.perfect import cells_from_observation, cells_from_openspiel, perfect_moves

        if self.game.startswith("openspiel:"):
            cells = cells_from_openspiel(ts.observation, ts.to_play)
        else:  # pgx: the mover's view
            cells = np.asarray(cells_from_observation(ts.observation))
        return perfect_moves(self.rng, cells, ts.legal_actions)

    def observe(self, ts, actions) -> None:
        pass

    def close(self) -> None:
        pass
