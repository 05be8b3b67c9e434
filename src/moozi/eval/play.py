"""``moozi play``: a person at the terminal against a player (a trained run by default).

The board is drawn after every move (OpenSpiel's drawing where the game has
one, ``moozi.eval.session``). At the prompt: a move in the game's notation or
an action index, ``legal`` (the legal moves), ``undo`` (takes back your last
move and the reply to it), ``hint`` (the player's own search at your position:
its value and, per move, search share and prior), ``quit``.
"""

from __future__ import annotations

import sys

from moozi.eval.session import GameSession, IllegalMove

HELP = "a move (e.g. {example}), legal, undo, hint, quit"


def play_games(session: GameSession, human_seat: int, stdin=None, out=None) -> list[float]:
    """Games until the person declines a rematch (sides swap each game); their scores."""
    stdin = stdin or sys.stdin
    out = out or sys.stdout
    scores: list[float] = []
    while True:
        score = play_terminal(session, human_seat, stdin, out)
        if score is None:
            return scores
        scores.append(score)
        out.write(f"you have {sum(scores):g} of {len(scores)}. Again, with sides swapped? [y/N] ")
        out.flush()
        if stdin.readline().strip().lower() not in ("y", "yes"):
            return scores
        human_seat = 1 - human_seat
        session.new_game()


def play_terminal(session: GameSession, human_seat: int, stdin=None, out=None) -> float | None:
    """Play one game; returns the person's score (1, 0.5, 0), or None if they quit."""
    stdin = stdin or sys.stdin
    out = out or sys.stdout

    def say(text=""):
        out.write(text + "\n")
        out.flush()

    say(f"{session.game}: you move {'first' if human_seat == 0 else 'second'} against {session.player.spec.id}")
    while True:
        say(session.board())
        if session.over:
            r = session.result()
            mine = r if human_seat == 0 else 1.0 - r
            say({1.0: "You won.", 0.5: "A draw.", 0.0: "You lost."}[mine])
            return mine
        if session.seat_to_move != human_seat:
            names = {m: session.move_name(m) for m in session.legal()}
            action = session.genmove()
            say(f"{session.player.spec.id} forfeits: {session.forfeit[1]}" if action is None
                else f"moozi plays {names[action]}")
            continue
        legal = session.legal()
        out.write(f"your move ({HELP.format(example=session.move_name(legal[0]))}): ")
        out.flush()
        line = stdin.readline()
        if not line:
            say()
            return None
        text = line.strip()
        if text in ("quit", "q", "exit"):
            return None
        if text in ("legal", "l"):
            say("legal: " + " ".join(session.move_name(m) for m in legal))
        elif text in ("undo", "u"):
            back = 2 if len(session.moves) >= 2 else len(session.moves)
            if back == 0 or (back == 1 and human_seat == 1):
                say("nothing of yours to undo")
                continue
            session.undo(back)
        elif text in ("hint", "h"):
            a = session.analyze()
            if a is None:
                say(f"{session.player.spec.id} has no search to show")
                continue
            say(f"value for you {a['value']:+.3f} ({a['simulations']} simulations; network {a['network_value']:+.3f})")
            for m in a["moves"][:8]:
                say(f"  {session.move_name(m['action']):>8}  search {m['policy']:.3f}  prior {m['prior']:.3f}")
        elif text:
            try:
                session.play(session.parse_move(text))
            except IllegalMove as err:
                say(str(err))
            if session.forfeit is not None:  # the player failed on the person's move
                say(f"{session.player.spec.id} forfeits: {session.forfeit[1]}")
