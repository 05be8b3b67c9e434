"""``moozi gtp``: a player behind the Go Text Protocol (GTP v2 framing), for any two-player game.

Framing (GTP v2): a command is one line, ``[id] name [arguments]``; the reply
is ``=[id] result`` or ``?[id] error message``, followed by an empty line.
Empty lines and ``#`` comments are skipped. A bad command gets a ``?`` reply
and the engine goes on; only ``quit`` (or the end of input) ends it. Logs go
to stderr, never into the protocol stream.

Colours: ``b`` / ``black`` / ``x`` / ``first`` is the seat that moved first,
``w`` / ``white`` / ``o`` / ``second`` the other. Moves are in the game's
notation where it has one (``moozi.eval.session``), an action index otherwise;
Go's moves are GTP vertices (``D4``: columns from A without I, rows from the
bottom) and ``pass``, both ways (OpenSpiel's ``B d4`` is read too); ``pass``
in a game without one is refused.

Commands: the administrative ones (``protocol_version``, ``name``,
``version``, ``known_command``, ``list_commands``, ``quit``), ``boardsize``
(accepted only for the game's own size), ``komi`` (accepted, no effect),
``clear_board``, ``play``, ``genmove``, ``undo``, ``showboard``,
``legal_moves``, ``final_score``, ``time_settings`` / ``time_left`` (a run's
search then takes, per move, 80% of the time left spread over the moves it may
still have to make, choosing its simulations from a measured ladder; other
players ignore the clock), and two extensions: ``moozi-game NAME`` (switch
the game; built-in players only, a run plays its own game) and
``moozi-analyze`` (the player's search at this position: one line per move
with its search share, prior, and the value).
"""

from __future__ import annotations

import math
import sys

from moozi.eval.session import GameSession, IllegalMove

COLOURS = {"b": 0, "black": 0, "x": 0, "first": 0, "w": 1, "white": 1, "o": 1, "second": 1}


class GTPError(Exception):
    """A command that cannot be carried out (the reply is ``? message``)."""


class GTPEngine:
    """Answers GTP commands for ``player_text`` on ``game``."""

    def __init__(self, player_text: str, game: str, seed: int = 0, game_kwargs: dict | None = None, modules=()):
        from moozi.eval.players import make_player

        self.player_text = player_text
        self.seed = seed
        self.game_kwargs = game_kwargs
        self.modules = modules
        self.session = GameSession(game, make_player(player_text, game, seed, game_kwargs), seed, game_kwargs, modules)
        self.time = {}
        self.done = False
        self.handlers = {
            "protocol_version": lambda a: "2",
            "name": lambda a: "moozi",
            "version": lambda a: _version(),
            "known_command": lambda a: "true" if a and a[0] in self.handlers else "false",
            "list_commands": lambda a: "\n".join(sorted(self.handlers)),
            "quit": self._quit,
            "boardsize": self._boardsize,
            "komi": self._komi,
            "clear_board": self._clear,
            "play": self._play,
            "genmove": self._genmove,
            "undo": self._undo,
            "showboard": lambda a: "\n" + self.session.board(),
            "legal_moves": lambda a: " ".join(self.session.gtp_name(m) for m in self.session.legal()),
            "final_score": self._final_score,
            "time_settings": self._time_settings,
            "time_left": self._time_left,
            "moozi-game": self._switch_game,
            "moozi-analyze": self._analyze,
        }

    # -- the protocol ------------------------------------------------------------------------------
    def handle(self, line: str) -> str | None:
        """The reply to one input line (None for an empty or comment line)."""
        line = line.split("#", 1)[0].strip().replace("\t", " ")
        if not line:
            return None
        parts = line.split()
        cid = ""
        if parts[0].isdigit():
            cid, parts = parts[0], parts[1:]
        if not parts:
            return f"?{cid} empty command\n\n"
        name, args = parts[0].lower(), parts[1:]
        handler = self.handlers.get(name)
        if handler is None:
            return f"?{cid} unknown command\n\n"
        try:
            out = handler(args)
        except (GTPError, IllegalMove) as err:
            return f"?{cid} {err}\n\n"
        except Exception as err:  # never end the engine on a bad command: say what went wrong
            print(f"moozi gtp: {type(err).__name__}: {err}", file=sys.stderr)
            return f"?{cid} {type(err).__name__}: {err}\n\n"
        return f"={cid} {out}".rstrip(" ") + "\n\n"

    def serve(self, stdin=None, stdout=None) -> None:
        stdin = stdin or sys.stdin
        stdout = stdout or sys.stdout
        for line in stdin:
            reply = self.handle(line)
            if reply is not None:
                stdout.write(reply)
                stdout.flush()
            if self.done:
                break

    # -- commands ------------------------------------------------------------------------------------
    def _quit(self, args):
        self.done = True
        self.session.close()
        return ""

    def _boardsize(self, args):
        shape = self.session.spec.observation_shape
        if not args or not args[0].isdigit():
            raise GTPError("boardsize needs a number")
        if int(args[0]) not in shape[:2]:
            raise GTPError(f"unacceptable size: {self.session.game} is {shape[0]}x{shape[1]}")
        return ""

    def _clear(self, args):
        self.session.new_game()
        return ""

    def _colour(self, text: str) -> int:
        seat = COLOURS.get(text.lower())
        if seat is None:
            raise GTPError(f"unknown colour {text!r}: allowed b/black/x/first or w/white/o/second")
        return seat

    def _check_turn(self, seat: int):
        if self.session.over:
            raise GTPError("the game is over")
        if seat != self.session.seat_to_move:
            raise GTPError(f"it is {('black', 'white')[self.session.seat_to_move]}'s turn")

    def _play(self, args):
        if len(args) != 2:
            raise GTPError("play needs a colour and a move")
        seat = self._colour(args[0])
        self._check_turn(seat)
        self.session.play(self.session.parse_move(args[1]))
        return ""

    def _genmove(self, args):
        if len(args) != 1:
            raise GTPError("genmove needs a colour")
        seat = self._colour(args[0])
        if self.session.over:
            return "pass"  # GTP's answer when there is no move to make
        self._check_turn(seat)
        self._budget(seat)
        legal_names = {m: self.session.gtp_name(m) for m in self.session.legal()}
        action = self.session.genmove()
        return "resign" if action is None else legal_names[action]  # a player that forfeited resigns

    def _budget(self, seat: int) -> None:
        """With time_left known and a player that takes a time budget: spend the remaining time evenly over
        the moves this side may still have to make (half the legal moves, at least one), with a 20% reserve."""
        player = self.session.player
        if seat not in self.time or not hasattr(player, "set_time_budget"):
            return
        seconds, _ = self.time[seat]
        moves_left = max(len(self.session.legal()) // 2, 1)
        budget = max(0.8 * 1000.0 * seconds / moves_left, 1.0)
        player.set_time_budget(budget)

    def _undo(self, args):
        if not self.session.moves:
            raise GTPError("cannot undo")
        self.session.undo(1)
        return ""

    def _final_score(self, args):
        r = self.session.result()
        if r is None:
            raise GTPError("the game is not over")
        return "0" if r == 0.5 else "B+1" if r == 1.0 else "W+1"

    def _time_settings(self, args):
        if len(args) != 3 or any(_number(a) is None for a in args):
            raise GTPError("time_settings needs main_time byo_yomi_time byo_yomi_stones")
        self.time["settings"] = [float(a) for a in args]
        return ""

    def _time_left(self, args):
        if len(args) != 3 or _number(args[1]) is None or not args[2].isdigit():
            raise GTPError("time_left needs a colour, a time in seconds and a stone count, e.g. time_left b 30 0")
        self.time[self._colour(args[0])] = (_number(args[1]), int(args[2]))
        return ""

    def _komi(self, args):
        if len(args) != 1 or _number(args[0], allow_negative=True) is None:
            raise GTPError("komi needs a number, e.g. komi 6.5 (accepted; no game here uses it)")
        return ""

    def _switch_game(self, args):
        from moozi.eval.players import make_player, parse_player

        if len(args) != 1:
            raise GTPError("moozi-game needs a game name, e.g. moozi-game pgx:connect_four")
        head = parse_player(self.player_text)[0]
        if head not in ("random", "perfect") and not head.startswith(("os-mcts-", "mcts-")):
            raise GTPError(f"{self.player_text} plays the game it was trained on ({self.session.game})")
        player = make_player(self.player_text, args[0], self.seed)
        self.session.close()
        self.session = GameSession(args[0], player, self.seed)
        return ""

    def _analyze(self, args):
        a = self.session.analyze()
        if a is None:
            raise GTPError("this player has no search to show (or the game is over)")
        lines = [f"value {a['value']:+.3f} network_value {a['network_value']:+.3f} simulations {a['simulations']}"]
        for m in a["moves"]:
            lines.append(f"{self.session.move_name(m['action'])} policy {m['policy']:.3f} prior {m['prior']:.3f}")
        return "\n".join(lines)


def _number(text: str, allow_negative: bool = False) -> float | None:
    """``text`` as a finite number (>= 0 unless ``allow_negative``), else None."""
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) and (allow_negative or x >= 0) else None


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("moozi")
    except Exception:
        return "unknown"
