"""One game, move by move, against a player: what ``moozi gtp`` and ``moozi play`` drive.

A :class:`GameSession` holds a one-game pool and a player (``moozi.eval.players``).
Moves are environment action indices; :meth:`GameSession.move_name` and
:meth:`GameSession.parse_move` translate them to and from the game's own
notation where the game has an OpenSpiel form (``openspiel:`` games and the
pgx games with an OpenSpiel twin: ``x(1,1)`` in tic-tac-toe, ``x3`` in connect
four, ``a2a3`` in breakthrough), with the action index as the fallback.
Undo replays the game from its start without the last move (games are
deterministic given their seed and moves), so it works for every game.
"""

from __future__ import annotations

import numpy as np

from moozi.config import ConfigError
from moozi.envs.notation import IllegalMove, board_text, move_name, parse_move  # noqa: F401  (re-exported)


class GameSession:
    """A game between the caller (any seat) and ``player`` (who moves when asked by :meth:`genmove`)."""

    def __init__(self, game: str, player, seed: int = 0, game_kwargs: dict | None = None, modules=()):
        from moozi.envs.pool import make_pool

        self.game = game
        self.player = player
        self.seed = int(seed)
        self.pool = make_pool(game, 1, seed=seed, modules=modules, **(game_kwargs or {}))
        self.spec = self.pool.spec
        if not self.spec.two_player:
            self.close()
            raise ConfigError(f"{game} is a single-player game: play and gtp need a two-player game")
        self.twin = None
        try:
            from moozi.envs.openspiel_bridge import openspiel_game

            self.twin = openspiel_game(game, game_kwargs)
        except ConfigError:
            pass  # no OpenSpiel form: action indices and a move list
        self.new_game()

    # -- state ------------------------------------------------------------------------------------
    def new_game(self) -> None:
        self.moves: list[int] = []
        self.ts = self.pool.reset(self.seed)
        self.player.reset(self.ts)
        self.first_player = int(self.ts.to_play[0])
        self._twin_state = self.twin.new_initial_state() if self.twin is not None else None
        self.returns = np.zeros(2)  # per seat
        self.forfeit: tuple[int, str] | None = None  # (seat, reason): the player lost this game by forfeit

    def _check_forfeit(self, seat: int) -> None:
        """The player (moving for ``seat``) forfeited the game (an external engine that crashed, hung or answered
        no legal move: ``take_forfeits``): the game ends there, lost by that seat."""
        faults = self.player.take_forfeits() if hasattr(self.player, "take_forfeits") else {}
        if faults and self.forfeit is None:
            self.forfeit = (seat, next(iter(faults.values())))

    @property
    def over(self) -> bool:
        return bool(self.ts.is_last[0]) or self.forfeit is not None

    @property
    def seat_to_move(self) -> int:
        """0 if the first mover is to move, else 1."""
        return 0 if int(self.ts.to_play[0]) == self.first_player else 1

    @property
    def twin_state(self):
        """The game's OpenSpiel twin at this position (None where the game has no OpenSpiel form); read only."""
        return self._twin_state

    def legal(self) -> list[int]:
        return [] if self.over else np.flatnonzero(np.asarray(self.ts.legal_actions[0])).tolist()

    def result(self) -> float | None:
        """Score of the first seat (1, 0.5, 0) once the game is over, else None."""
        if not self.over:
            return None
        if self.forfeit is not None:
            return 0.0 if self.forfeit[0] == 0 else 1.0
        r = self.returns[0]
        return 1.0 if r > 0 else 0.0 if r < 0 else 0.5

    # -- moves --------------------------------------------------------------------------------------
    def play(self, action: int) -> None:
        if self.over:
            raise IllegalMove("the game is over (clear_board / new game to start again)")
        if action not in self.legal():
            raise IllegalMove(f"{self.move_name(action)} is not legal here")
        seat = self.seat_to_move
        self.ts = self.pool.step(np.array([action], np.int32))
        self.player.observe(self.ts, np.array([action], np.int32))
        self._check_forfeit(1 - seat)  # the player failed on the caller's move
        r = float(self.ts.reward[0])
        self.returns[seat] += r
        self.returns[1 - seat] -= r
        if self._twin_state is not None:
            self._twin_state.apply_action(int(action))
        self.moves.append(int(action))

    def genmove(self) -> int | None:
        """The player's move for the side to move, played; None if the player forfeited instead (:attr:`forfeit`
        says why; the game is over)."""
        if self.over:
            raise IllegalMove("the game is over")
        seat = self.seat_to_move
        action = int(self.player.act(self.ts, np.array([True]))[0])
        self._check_forfeit(seat)
        if self.forfeit is not None:
            return None
        self.play(action)
        return action

    def undo(self, count: int = 1) -> None:
        if count > len(self.moves):
            raise IllegalMove(f"cannot undo {count} move(s): {len(self.moves)} played")
        moves = self.moves[: len(self.moves) - count]
        self.new_game()
        for m in moves:
            self.play(m)

    # -- notation ----------------------------------------------------------------------------------
    def move_name(self, action: int) -> str:
        return move_name(self._twin_state, action)

    def gtp_name(self, action: int) -> str:
        """The move as GTP writes it (Go's vertices and ``pass``; other games as :meth:`move_name`)."""
        from moozi.envs.notation import gtp_name

        return gtp_name(self._twin_state, action)

    def parse_move(self, text: str) -> int:
        """An action from the game's notation (with or without the mover's mark) or an action index."""
        return parse_move(text, self.legal(), self._twin_state, self.spec.num_actions)

    def board(self) -> str:
        """The position as text: OpenSpiel's drawing where there is one, else the game's own ``render()`` when it
        draws text (a game of the user's), with the moves so far."""
        if self._twin_state is None and hasattr(self.pool, "call"):
            try:
                picture = self.pool.call("render")[0]
            except (AttributeError, NotImplementedError):
                picture = None
            if isinstance(picture, str) and picture.strip():
                return picture.rstrip() + "\n" + board_text(None, self.moves)
        return board_text(self._twin_state, self.moves)

    def analyze(self) -> dict | None:
        """The player's search at this position, without playing (players that can explain themselves)."""
        if self.over or not hasattr(self.player, "analyze"):
            return None
        return self.player.analyze(self.ts)

    def close(self) -> None:
        self.pool.close()
