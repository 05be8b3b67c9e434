"""A tiny tic-tac-toe GTP engine written apart from moozi (no moozi import), with the faults a real one can have.

    python ttt_gtp_engine.py MODE

MODE: ``good`` (answers ``x(r,c)`` / ``o(r,c)``, the first free cell), ``nomark`` (answers ``(r,c)``),
``index`` (answers the cell's index 0-8), ``crash`` (exits at its second ``genmove``), ``occupied`` (answers
an occupied cell once there is one), ``garbage`` (answers ``banana``), ``hang`` (never answers ``genmove``),
``refuse`` (refuses the other side's moves: ``? illegal move``), ``noreply`` (answers ``genmove`` with a line
that is no GTP reply). Cells: ``(row,column)``, index = 3 * row + column.
"""

import re
import sys
import time


def cell(text: str) -> int:
    m = re.search(r"\((\d),(\d)\)", text)
    return 3 * int(m.group(1)) + int(m.group(2)) if m else int(text)


def main() -> None:
    mode = sys.argv[1]
    board: dict[int, str] = {}
    genmoves = 0
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        command, args = words[0], words[1:]
        reply = ""
        if command == "quit":
            print("=\n", flush=True)
            return
        if command == "clear_board":
            board.clear()
        elif command == "play":
            if mode == "refuse":
                print("? illegal move\n", flush=True)
                continue
            board[cell(args[1])] = args[0]
        elif command == "genmove":
            genmoves += 1
            mark = "x" if args[0] == "b" else "o"
            free = [c for c in range(9) if c not in board]
            if mode == "hang":
                time.sleep(3600)
            if mode == "crash" and genmoves == 2:
                sys.exit(3)
            if mode == "garbage":
                print("= banana\n", flush=True)
                continue
            if mode == "noreply":
                print("thinking...\n", flush=True)
                continue
            move = min(board) if mode == "occupied" and board else free[0]
            board[move] = args[0]
            r, c = divmod(move, 3)
            reply = {"nomark": f"({r},{c})", "index": str(move)}.get(mode, f"{mark}({r},{c})")
        elif command == "protocol_version":
            reply = "2"
        elif command == "name":
            reply = "ttt-test-engine"
        print(f"= {reply}\n", flush=True)


if __name__ == "__main__":
    main()
