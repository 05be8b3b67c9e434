"""Players outside moozi: a person at the terminal, an engine speaking GTP."""

from __future__ import annotations

import os

import numpy as np

from moozi.config import ConfigError
from moozi.envs.openspiel_bridge import openspiel_game
from moozi.eval.players.base import PlayerSpec


class HumanPlayer:
    """A person at the terminal: each game to move is drawn (the OpenSpiel drawing where the game has one,
    else its moves so far) and a move is read in the game's notation or as an action index; ``legal``
    lists the moves, ``quit`` ends the match (nothing is recorded). For a match against a person, play few
    games at a time: ``moozi match human B --pairs 1``."""

    def __init__(self, game: str, kwargs: dict | None = None, stdin=None, out=None):
        import sys

        self.spec = PlayerSpec("human")
        self.name = game
        try:
            self.twin = openspiel_game(game, kwargs)
        except ConfigError:
            self.twin = None  # no OpenSpiel form: action indices and the move list
        self.stdin = stdin or sys.stdin
        self.out = out or sys.stdout
        self.states: list = []
        self.moves: list[list[int]] = []

    def reset(self, ts) -> None:
        b = len(ts.is_first)
        self.states = [self.twin.new_initial_state() if self.twin else None for _ in range(b)]
        self.moves = [[] for _ in range(b)]

    def observe(self, ts, actions) -> None:
        for b, first in enumerate(np.asarray(ts.is_first)):
            if first:
                self.states[b] = self.twin.new_initial_state() if self.twin else None
                self.moves[b] = []
                continue
            self.moves[b].append(int(actions[b]))
            if self.states[b] is not None and not self.states[b].is_terminal():
                self.states[b].apply_action(int(actions[b]))
            if bool(np.asarray(ts.is_last)[b]):  # the person sees how the game ended
                from moozi.envs.notation import board_text

                self._say(f"{self.name}, game {b} is over:\n{board_text(self.states[b], self.moves[b])}")

    def _say(self, text: str, end: str = "\n") -> None:
        self.out.write(text + end)
        self.out.flush()

    def act(self, ts, movers):
        from moozi.envs.notation import IllegalMove, board_text, move_name, parse_move

        out = np.zeros(len(movers), np.int32)
        for b in np.flatnonzero(movers):
            legal = np.flatnonzero(np.asarray(ts.legal_actions[b], bool)).tolist()
            state = self.states[b]
            self._say(f"{self.name}, game {b}:\n{board_text(state, self.moves[b])}")
            while True:
                self._say(f"your move (e.g. {move_name(state, legal[0])}; legal, quit): ", end="")
                line = self.stdin.readline()
                text = line.strip()
                if not line or text in ("quit", "q", "exit"):
                    raise KeyboardInterrupt("the person at the terminal quit the match")
                if text in ("legal", "l"):
                    self._say("legal: " + " ".join(move_name(state, a) for a in legal))
                    continue
                try:
                    action = parse_move(text, legal, state, len(ts.legal_actions[b]))
                except IllegalMove as err:
                    self._say(str(err))
                    continue
                if action in legal:
                    out[b] = action
                    break
                self._say(f"{move_name(state, action)} is not legal here")
        return out

    def close(self) -> None:
        pass


def _go_setup(twin) -> list[str]:
    """The GTP commands that tell a Go engine the game (``boardsize``, ``komi``: GnuGo starts at 19x19, komi
    5.5); nothing for other games."""
    if twin is None or twin.get_type().short_name != "go":
        return []
    params = twin.get_parameters()
    return [f"boardsize {int(params.get('board_size', 19))}", f"komi {float(params.get('komi', 7.5)):g}"]


def _scoring_note(twin, command: list[str]) -> str | None:
    """A line for GnuGo on OpenSpiel's Go without ``--capture-all-dead``: OpenSpiel counts the area as the stones
    lie (Tromp-Taylor), GnuGo passes once it judges the rest dead, and a game it thinks won can be lost by the
    count (docs/protocol.md). None otherwise."""
    if twin is None or twin.get_type().short_name != "go" or not command or "gnugo" not in os.path.basename(command[0]):
        return None
    if "--capture-all-dead" in command:
        return None
    return ("GnuGo without --capture-all-dead: OpenSpiel scores Go by the stones on the board (Tromp-Taylor) and "
            "GnuGo passes with dead stones left, so some of its wins will count as losses; add "
            "--chinese-rules --capture-all-dead to its command")


class GTPPlayer:
    """An external engine over GTP (``moozi gtp`` or any program speaking GTP v2 for the game): one engine
    process per game of the batch, started on first use and reused from game to game.

    Every move of a game is sent to its engine (``play``), except the engine's own (``genmove``); moves are
    written in the game's notation where it has an OpenSpiel form, else as action indices, and read in every
    notation ``moozi gtp`` reads (with or without the mover's mark, or an index). An engine that crashes, hangs
    past ``timeout_s`` on one command, refuses a move, or answers an illegal move or text that names no move
    forfeits that game (``resign`` is a resignation): :meth:`take_forfeits` hands the arena the games and
    reasons, the engine is stopped, and a new one is started for its next game, so a match always finishes.
    """

    def __init__(self, game: str, command: str, seed: int = 0, game_kwargs: dict | None = None,
                 timeout_s: float = 60.0):
        import shlex

        if not command.strip():
            raise ConfigError("gtp: needs the engine's command line, e.g. gtp:'moozi gtp runs/c4'")
        self.command = shlex.split(command)
        self.game, self.timeout_s = game, float(timeout_s)
        try:
            self.twin = openspiel_game(game, game_kwargs)
        except ConfigError:
            self.twin = None
        self.spec = PlayerSpec("gtp", (("command", command),))
        self.setup = _go_setup(self.twin)  # Go: the board size and komi, which a Go engine defaults otherwise
        if note := _scoring_note(self.twin, self.command):
            import logging

            logging.getLogger("moozi").warning(note)
        self.procs: list = []  # a GTPEngine per game of the batch (None: stopped, started again when needed)
        self.states: list = []
        self.faults: dict[int, str] = {}  # games forfeited since the last take_forfeits
        self.out: set[int] = set()  # games of this round already forfeited (their engine is left alone)

    def _send(self, b: int, line: str) -> str | None:
        """The engine's reply, or None once game ``b`` is forfeited (this fault or an earlier one)."""
        from moozi.eval.players.gtp_engine import EngineFault, GTPEngine

        if b in self.out:
            return None
        try:
            if self.procs[b] is None:
                self.procs[b] = GTPEngine(self.command, self.timeout_s)
            return self.procs[b].send(line)
        except EngineFault as fault:
            self._forfeit(b, str(fault))
            return None

    def _forfeit(self, b: int, reason: str) -> None:
        self.faults[b], engine = reason, self.procs[b]
        self.out.add(b)
        self.procs[b] = None
        if engine is not None:
            engine.kill()

    def take_forfeits(self) -> dict[int, str]:
        """``{game row: reason}`` of the games this player forfeited since the last call (the arena ends them)."""
        faults, self.faults = self.faults, {}
        return faults

    def _name(self, b: int, action: int) -> str:
        from moozi.envs.notation import gtp_name

        return gtp_name(self.states[b], action)

    def _parse(self, b: int, text: str, legal: list[int], num_actions: int) -> int | None:
        """The answer as a legal action, or None with game ``b`` forfeited (resigned, illegal, no move)."""
        from moozi.envs.notation import IllegalMove, parse_move

        if text.lower() == "resign":
            self._forfeit(b, "the engine resigned")
            return None
        try:
            action = parse_move(text, legal, self.states[b], num_actions)
        except IllegalMove as err:
            self._forfeit(b, f"the engine answered {text!r}, which names no move here ({err})")
            return None
        if action not in legal:
            self._forfeit(b, f"the engine answered {text!r}, which is not legal here")
            return None
        return action

    def _new_game(self, b: int) -> None:
        self.seat[b], self.own[b] = 0, False
        self.states[b] = self.twin.new_initial_state() if self.twin is not None else None
        for line in self.setup:
            self._send(b, line)
        self._send(b, "clear_board")

    def reset(self, ts) -> None:
        n = len(ts.is_first)
        self.procs += [None] * (n - len(self.procs))
        self.seat, self.own = np.zeros(n, np.int64), np.zeros(n, bool)
        self.states, self.out = [None] * n, set()
        for b in range(n):
            self._new_game(b)

    def observe(self, ts, actions) -> None:
        for b, first in enumerate(np.asarray(ts.is_first)):
            if b in self.out:
                continue  # forfeited: nothing more is said to its engine this round
            if first:
                self._new_game(b)
                continue
            if self.states[b] is not None and self.states[b].is_terminal():
                continue  # a finished game waiting for the round to end
            if not self.own[b]:
                self._send(b, f"play {'bw'[self.seat[b]]} {self._name(b, actions[b])}")
            if self.states[b] is not None:
                self.states[b].apply_action(int(actions[b]))
            self.seat[b], self.own[b] = 1 - self.seat[b], False

    def act(self, ts, movers):
        legal_rows = np.asarray(ts.legal_actions, bool)
        out = np.argmax(legal_rows, axis=-1).astype(np.int32)  # what a forfeited game's row holds
        for b in np.flatnonzero(movers):
            legal = np.flatnonzero(legal_rows[b]).tolist()
            answer = self._send(b, f"genmove {'bw'[self.seat[b]]}")
            action = None if answer is None else self._parse(b, answer, legal, legal_rows.shape[1])
            if action is not None:
                out[b] = action
                self.own[b] = True
        return out

    def close(self) -> None:
        for engine in self.procs:
            if engine is not None:
                engine.close()
        self.procs = []
