"""OpenSpiel's players (its C++ MCTS bot, its alpha-beta), following a game through its OpenSpiel twin."""

from __future__ import annotations

import numpy as np

from moozi.config import ConfigError
from moozi.envs.openspiel_bridge import openspiel_game
from moozi.eval.players.base import PlayerSpec


class _OpenSpielStates:
    """One OpenSpiel state per game of the batch, kept in step by the moves played (the game's twin)."""

    def __init__(self, game: str, kwargs: dict | None = None):
        self.game = openspiel_game(game, kwargs)
        self.name = game
        self.states: list = []

    def reset(self, ts) -> None:
        self.states = [self.game.new_initial_state() for _ in range(len(ts.is_first))]

    def observe(self, ts, actions) -> None:
        for b, first in enumerate(np.asarray(ts.is_first)):
            if first:
                self.states[b] = self.game.new_initial_state()
            elif not self.states[b].is_terminal():
                self.states[b].apply_action(int(actions[b]))

    def _state(self, ts, b: int):
        """Game ``b``'s OpenSpiel state, checked against the game's legal moves."""
        state = self.states[b]
        legal = np.flatnonzero(np.asarray(ts.legal_actions[b], bool)).tolist()
        if sorted(state.legal_actions()) != legal:
            raise RuntimeError(f"{self.name}: the OpenSpiel twin's legal moves {state.legal_actions()} differ "
                               f"from the game's {legal} in game {b}")
        return state

    def close(self) -> None:
        pass


class OpenSpielMCTSPlayer(_OpenSpielStates):
    """OpenSpiel's C++ ``MCTSBot`` with random rollouts, one OpenSpiel state per game kept in step by the moves."""

    def __init__(self, game: str, simulations: int, seed: int = 0, rollouts: int = 1, uct_c: float = 2.0,
                 solve: bool = True, kwargs: dict | None = None):
        import pyspiel

        if simulations < 1 or rollouts < 1:
            raise ConfigError(f"os-mcts: simulations = {simulations}, rollouts = {rollouts}: allowed integers >= 1")
        super().__init__(game, kwargs)
        settings = [("rollouts", rollouts)] if rollouts != 1 else []
        settings += [("uct", uct_c)] if uct_c != 2.0 else []
        settings += [("solve", 0)] if not solve else []
        self.spec = PlayerSpec(f"os-mcts-{simulations}", tuple(settings))
        evaluator = pyspiel.RandomRolloutEvaluator(rollouts, seed)
        self.bot = pyspiel.MCTSBot(self.game, evaluator, uct_c, simulations, 1000, solve, seed, False)

    def act(self, ts, movers):
        out = np.zeros(len(movers), np.int32)
        for b in np.flatnonzero(movers):
            out[b] = self.bot.step(self._state(ts, b))
        return out


class AlphaBetaPlayer(_OpenSpielStates):
    """OpenSpiel's alpha-beta search (``open_spiel.python.algorithms.minimax``) on the game's OpenSpiel form.

    ``depth=None`` searches to the end of the game (exact play; small games
    such as tic-tac-toe only); a depth D sees every win and loss within D
    plies and scores the positions at the horizon 0 (a tactical baseline for
    connect four). Each legal move is searched to its value and one of the
    best is chosen uniformly at random (a deterministic player would make
    every game of a match the same); values are cached per position.
    """

    def __init__(self, game: str, depth: int | None = None, seed: int = 0, kwargs: dict | None = None):
        import pyspiel

        super().__init__(game, kwargs)
        info = self.game.get_type()
        if info.utility != pyspiel.GameType.Utility.ZERO_SUM or self.game.num_players() != 2:
            raise ConfigError(f"alpha-beta needs a two-player zero-sum game, not {game}")
        if depth is not None and depth < 1:
            raise ConfigError(f"alpha-beta depth = {depth}: allowed an integer >= 1 (ab-D), or ab for the whole game")
        self.depth = depth
        self.spec = PlayerSpec("ab" if depth is None else f"ab-{depth}")
        self.rng = np.random.default_rng(seed)
        self._values: dict = {}

    def _move_values(self, state) -> dict[int, float]:
        from open_spiel.python.algorithms.minimax import alpha_beta_search

        key = state.history_str()
        if key not in self._values:
            me = state.current_player()
            depth = 10**6 if self.depth is None else self.depth - 1
            values = {}
            for a in state.legal_actions():
                child = state.child(a)
                if child.is_terminal():
                    values[a] = child.player_return(me)
                elif depth == 0:
                    values[a] = 0.0
                else:
                    values[a] = alpha_beta_search(self.game, child, value_function=lambda s: 0.0,
                                                  maximum_depth=depth, maximizing_player_id=me)[0]
            self._values[key] = values
        return self._values[key]

    def act(self, ts, movers):
        out = np.zeros(len(movers), np.int32)
        for b in np.flatnonzero(movers):
            values = self._move_values(self._state(ts, b))
            best = max(values.values())
            out[b] = self.rng.choice([a for a, v in values.items() if v >= best - 1e-9])
        return out
