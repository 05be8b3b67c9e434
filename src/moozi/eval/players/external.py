"""Players outside moozi: a person at the terminal, an engine speaking GTP."""

from __future__ import annotations

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


class GTPPlayer:
    """An external engine over GTP (``moozi gtp`` or any program speaking GTP v2 for the game): one engine
    process per game of the batch, started on first use and reused from round to round.

    Every move of a game is sent to its engine (``play``), except the engine's own (``genmove``); moves are
    written in the game's notation where it has an OpenSpiel form, else as action indices.
    """

    def __init__(self, game: str, command: str, seed: int = 0, game_kwargs: dict | None = None):
        import shlex

        if not command.strip():
            raise ConfigError("gtp: needs the engine's command line, e.g. gtp:'moozi gtp runs/c4'")
        self.command = shlex.split(command)
        self.game = game
        try:
            self.twin = openspiel_game(game, game_kwargs)
        except ConfigError:
            self.twin = None
        self.spec = PlayerSpec("gtp", (("command", command),))
        self.procs: list = []
        self.states: list = []

    def _send(self, b: int, line: str) -> str:
        proc = self.procs[b]
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        lines = []
        while True:
            out = proc.stdout.readline()
            if not out:
                raise RuntimeError(f"GTP engine {' '.join(self.command)} ended (after {line!r})")
            out = out.rstrip("\n")
            if not lines and not out.strip():
                continue
            if out == "" and lines:
                break
            lines.append(out)
        reply = "\n".join(lines)
        if reply.startswith("?"):
            raise RuntimeError(f"GTP engine refused {line!r}: {reply[1:].strip()}")
        return reply[1:].strip()

    def _name(self, b: int, action: int) -> str:
        state = self.states[b]
        if state is not None and not state.is_terminal():
            return state.action_to_string(state.current_player(), int(action))
        return str(int(action))

    def _parse(self, b: int, text: str) -> int:
        state = self.states[b]
        if state is not None and not state.is_terminal():
            for a in state.legal_actions():
                if state.action_to_string(state.current_player(), a).lower() == text.lower():
                    return int(a)
        if text.lstrip("-").isdigit():
            return int(text)
        raise RuntimeError(f"GTP engine answered {text!r}, which names no legal move")

    def reset(self, ts) -> None:
        import subprocess

        n = len(ts.is_first)
        while len(self.procs) < n:
            self.procs.append(subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                               stderr=subprocess.DEVNULL, text=True, bufsize=1))
        self.seat = np.zeros(n, np.int64)
        self.own = np.zeros(n, bool)
        self.states = [self.twin.new_initial_state() if self.twin is not None else None for _ in range(n)]
        for b in range(n):
            self._send(b, "clear_board")

    def observe(self, ts, actions) -> None:
        for b, first in enumerate(np.asarray(ts.is_first)):
            if first:
                self._send(b, "clear_board")
                self.seat[b], self.own[b] = 0, False
                self.states[b] = self.twin.new_initial_state() if self.twin is not None else None
                continue
            if self.states[b] is not None and self.states[b].is_terminal():
                continue  # a finished game waiting for the round to end
            if not self.own[b]:
                self._send(b, f"play {'bw'[self.seat[b]]} {self._name(b, actions[b])}")
            if self.states[b] is not None:
                self.states[b].apply_action(int(actions[b]))
            self.seat[b], self.own[b] = 1 - self.seat[b], False

    def act(self, ts, movers):
        out = np.zeros(len(movers), np.int32)
        for b in np.flatnonzero(movers):
            out[b] = self._parse(b, self._send(b, f"genmove {'bw'[self.seat[b]]}"))
            self.own[b] = True
        return out

    def close(self) -> None:
        for p in self.procs:
            try:
                p.stdin.write("quit\n")
                p.stdin.flush()
                p.wait(timeout=10)
            except Exception:
                p.kill()
        self.procs = []
