"""Moves in a game's own notation, through its OpenSpiel form (``openspiel:`` games and the pgx games with an
OpenSpiel twin: ``x(1,1)`` in tic-tac-toe, ``x3`` in connect four, ``a2a3`` in breakthrough), with the action
index as the fallback; a position written as moves. ``twin_state`` is the OpenSpiel state of the position (None:
the game has no OpenSpiel form). What ``moozi play``, ``moozi gtp`` and ``moozi tree`` read and write."""

from __future__ import annotations

import re


class IllegalMove(ValueError):
    """A move that is not legal here, or text that names no move."""


def move_name(twin_state, action: int) -> str:
    """``action`` in the game's notation (``twin_state``: its OpenSpiel state, or None: the index)."""
    if twin_state is not None and not twin_state.is_terminal():
        return twin_state.action_to_string(twin_state.current_player(), int(action))
    return str(int(action))


_GO_MOVE = re.compile(r"^[BW] ([a-hj-z]\d{1,2}|PASS)$")  # OpenSpiel's Go: "B d4", "W PASS"


def gtp_name(twin_state, action: int) -> str:
    """``action`` as GTP writes it: Go's vertices (``D4``, columns from A without I, rows from the bottom) and
    ``pass``, where OpenSpiel writes ``B d4`` and ``B PASS``; every other game in its notation (:func:`move_name`)."""
    name = move_name(twin_state, action)
    if _GO_MOVE.match(name):
        vertex = name[2:]
        return "pass" if vertex == "PASS" else vertex.upper()
    return name


def parse_move(text: str, legal: list[int], twin_state, num_actions: int) -> int:
    """An action from the game's notation (with or without the mover's mark: ``x(1,1)``, ``(1,1)``; Go's ``B d4``,
    ``d4``, GTP's ``D4`` and ``pass``) or an action index."""
    t = text.strip().lower()
    if twin_state is not None and not twin_state.is_terminal():
        names = {}
        for a in legal + [a for a in range(num_actions) if a not in legal]:  # legal ones win ties
            try:
                name = move_name(twin_state, a).lower()
            except Exception:  # OpenSpiel cannot name every index in every game
                continue
            names[name] = a
            if name[:2] in ("b ", "w "):  # Go: the vertex without the colour ("d4", "pass")
                names.setdefault(name[2:], a)
            stripped = name.lstrip("xo")
            names.setdefault(stripped, a)
            names.setdefault(stripped.strip("()"), a)
        if t in names:
            return names[t]
    legal_names = " ".join(move_name(twin_state, a) for a in legal)
    if t.lstrip("-").isdigit():
        if not 0 <= int(t) < num_actions:  # an index outside the game names no cell, not an illegal one
            raise IllegalMove(f"{text!r} is out of range: move indices are 0..{num_actions - 1}; legal: {legal_names}")
        return int(t)
    raise IllegalMove(f"{text!r} names no move; legal: {legal_names}")


def _column_numbers(twin_state) -> str:
    """The columns' numbers under a board drawn one character a column, as its moves name them (``x3``: 3)."""
    return "".join(str(c % 10) for c in range(twin_state.get_game().num_distinct_actions()))


BOARD_FOOTERS = {"connect_four": _column_numbers}
"""A line under OpenSpiel's drawing, by the game's short name, where the drawing alone does not say how to name
a move (connect four's board has no column labels)."""


def board_text(twin_state, moves: list[int]) -> str:
    """The position as text: OpenSpiel's drawing where there is one (with :data:`BOARD_FOOTERS`' line), else the
    moves so far."""
    if twin_state is not None:
        footer = BOARD_FOOTERS.get(twin_state.get_game().get_type().short_name)
        text = str(twin_state).rstrip()
        return f"{text}\n{footer(twin_state)}" if footer else text
    return "moves: " + (" ".join(map(str, moves)) or "(none)")


def split_moves(text: str) -> list[str]:
    """The moves of a position written as text: separated by spaces or commas, a move in parentheses kept whole
    (``"x(1,1) o(0,0)"``, ``"4 0 8"``, ``"4,0,8"``)."""
    return re.findall(r"[^\s,()]*\([^)]*\)|[^\s,]+", text)


def parse_position(text: str, twin, num_actions: int) -> list[int]:
    """Environment actions of a position written as moves from the start (:func:`split_moves`), each in the
    game's notation or as an index. ``twin``: the game's OpenSpiel form, which also checks each move is legal
    there (None: indices only, checked by whoever plays them)."""
    state = twin.new_initial_state() if twin is not None else None
    moves: list[int] = []
    for token in split_moves(text):
        legal = list(range(num_actions)) if state is None else list(state.legal_actions())
        move = parse_move(token, legal, state, num_actions)
        if move not in legal:
            raise IllegalMove(f"move {len(moves) + 1} of the position, {token!r}, is not legal there; legal: "
                              f"{' '.join(move_name(state, a) for a in legal)}")
        moves.append(move)
        if state is not None:
            state.apply_action(move)
    return moves
