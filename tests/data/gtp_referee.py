"""A GTP referee written apart from moozi (no moozi import): two engines play one game of Go, moves relayed.

    python gtp_referee.py --black "CMD" --white "CMD" [--size 9] [--komi 7.5] [--max-moves 160] [--scorer "CMD"]

Both engines get ``boardsize``, ``komi`` and ``clear_board``; then the side to move is asked ``genmove`` and its
move is sent to the other with ``play``, until two passes in a row, a resignation, or ``--max-moves``. The
scorer (default: the white engine) is told every move and asked ``final_score``. Prints one JSON line: the
moves, how the game ended, the score, and every command an engine refused (a refusal ends the game).
"""

import argparse
import json
import shlex
import subprocess


class Engine:
    def __init__(self, command: str):
        self.proc = subprocess.Popen(shlex.split(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def ask(self, line: str) -> tuple[bool, str]:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        lines = []
        while True:
            out = self.proc.stdout.readline()
            if not out:
                return False, f"engine ended after {line!r}"
            out = out.strip()
            if not out and lines:
                break
            if out:
                lines.append(out)
        reply = "\n".join(lines)
        return reply.startswith("="), reply[1:].strip()

    def quit(self) -> None:
        try:
            self.ask("quit")
        except OSError:
            pass
        self.proc.wait(timeout=30)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--black", required=True)
    p.add_argument("--white", required=True)
    p.add_argument("--scorer", default=None)
    p.add_argument("--size", type=int, default=9)
    p.add_argument("--komi", type=float, default=7.5)
    p.add_argument("--max-moves", type=int, default=160)
    args = p.parse_args()
    engines = {"b": Engine(args.black), "w": Engine(args.white)}
    scorer = Engine(args.scorer) if args.scorer else engines["w"]
    everyone = [*engines.values(), *([scorer] if args.scorer else [])]
    refused = []
    for e in everyone:
        for line in (f"boardsize {args.size}", f"komi {args.komi:g}", "clear_board"):
            ok, reply = e.ask(line)
            if not ok:
                refused.append([line, reply])
    moves, passes, end, colour = [], 0, "max-moves", "b"
    while len(moves) < args.max_moves and not refused:
        ok, move = engines[colour].ask(f"genmove {colour}")
        if not ok:
            refused.append([f"genmove {colour}", move])
            break
        moves.append(f"{colour} {move}")
        if move.lower() == "resign":
            end = f"{colour} resigned"
            break
        passes = passes + 1 if move.lower() == "pass" else 0
        other = "w" if colour == "b" else "b"
        for e in [engines[other], *([scorer] if args.scorer else [])]:
            ok, reply = e.ask(f"play {colour} {move}")
            if not ok:
                refused.append([f"play {colour} {move}", reply])
        if passes == 2:
            end = "two passes"
            break
        colour = other
    ok, score = scorer.ask("final_score")
    for e in everyone:
        e.quit()
    print(json.dumps({"moves": moves, "end": end, "final_score": score if ok else None, "refused": refused}))


if __name__ == "__main__":
    main()
