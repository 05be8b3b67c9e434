"""Connect four solved: the perfect solver behind the ``solver`` player and the grader's position benchmark.

The solver is BitBully (``pip install 'moozi[solver]'``), a bitboard
negamax with opening books that scores any position in milliseconds. It is
AGPL-licensed, so it stays an optional extra: only evaluation imports it
(this module, lazily), never training or the core, and grading a player
needs no solver at all (the benchmark file stores the solved scores).

Scores follow Pascal Pons' convention, from the side to move: 0 is a draw;
``s > 0`` wins with the winner's ``22 - s``-th stone (``s < 0``: the opponent
does). A connect four game here is its column sequence (actions 0-6, the
same in ``pgx:connect_four`` and ``openspiel:connect_four``).
"""

from __future__ import annotations

from moozi.config import ConfigError

CONNECT_FOUR_GAMES = ("pgx:connect_four", "openspiel:connect_four")
COLUMNS = 7
CELLS = 42


def check_connect_four(game: str, who: str) -> None:
    if game not in CONNECT_FOUR_GAMES:
        raise ConfigError(f"{who} is for connect four ({', '.join(CONNECT_FOUR_GAMES)}), not {game!r}")


def make_solver():
    """A BitBully engine with its default opening book; a ConfigError saying how to install it when missing."""
    try:
        from bitbully import BitBully
    except ImportError as err:
        raise ConfigError("the connect four solver needs the optional extra: pip install 'moozi[solver]' "
                          "(BitBully, AGPL-3.0; used by evaluation only)") from err
    return BitBully()


def move_scores(engine, moves) -> list[int | None]:
    """``[7]`` solved scores of each column's move from the side to move's view (``None``: the column is full).

    ``moves``: the columns played from the empty board. The position must not be over.
    """
    from bitbully import Board

    board = Board([int(m) for m in moves])
    if board.is_game_over():
        raise ValueError(f"the game {''.join(map(str, moves))} is over: no move to score")
    scores = engine.score_all_moves(board)
    return [scores.get(c) for c in range(COLUMNS)]


def result(score: int) -> int:
    """+1 win, 0 draw, -1 loss for the side to move."""
    return (score > 0) - (score < 0)


def remaining_plies(score: int, plies: int) -> int:
    """Plies left in the game under perfect play from a position ``plies`` deep whose solved score is ``score``.

    A win with score ``s`` ends on the winner's ``22 - s``-th stone; the side to move has ``plies // 2``
    stones, its opponent ``plies - plies // 2``.
    """
    if score > 0:
        return 2 * (22 - score - plies // 2) - 1
    if score < 0:
        return 2 * (22 + score - (plies - plies // 2))
    return CELLS - plies


def is_mistake(scores, action: int) -> bool:
    """Whether playing ``action`` where the moves score ``scores`` (``[7]``, None = full) changes the solved
    result for the worse (a win given up, or a draw lost). A full column is a mistake too."""
    best = max(result(s) for s in scores if s is not None)
    chosen = scores[action] if 0 <= action < len(scores) else None
    return chosen is None or result(chosen) < best
