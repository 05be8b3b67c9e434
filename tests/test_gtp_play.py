"""The GTP engine and the terminal game: framing, errors that never end the engine, moves, undo, results."""

import io

import pytest

from moozi.eval.gtp import GTPEngine
from moozi.eval.play import play_terminal
from moozi.eval.players import make_player
from moozi.eval.session import GameSession, IllegalMove


@pytest.fixture(scope="module")
def engine():
    e = GTPEngine("perfect", "pgx:tic_tac_toe")
    yield e
    e.session.close()


def _reply(engine, line):
    return engine.handle(line)


def test_framing_ids_and_errors(engine):
    assert _reply(engine, "7 protocol_version") == "=7 2\n\n"
    assert _reply(engine, "name") == "= moozi\n\n"
    assert _reply(engine, "  # a comment") is None and _reply(engine, "") is None
    assert _reply(engine, "3 frobnicate") == "?3 unknown command\n\n"
    assert _reply(engine, "known_command genmove") == "= true\n\n"
    assert _reply(engine, "known_command frobnicate") == "= false\n\n"
    assert "moozi-analyze" in _reply(engine, "list_commands")
    assert _reply(engine, "boardsize 19").startswith("? unacceptable size")
    assert _reply(engine, "play purple 4").startswith("? unknown colour")
    assert _reply(engine, "play b").startswith("? play needs")
    assert _reply(engine, "komi 6.5") == "=\n\n"
    assert not engine.done


def test_a_game_with_undo_and_final_score(engine):
    assert _reply(engine, "clear_board") == "=\n\n"
    assert _reply(engine, "play w x(1,1)").startswith("? it is black's turn")
    assert _reply(engine, "play b x(1,1)") == "=\n\n"
    assert _reply(engine, "play w o(1,1)").startswith("? o(1,1) is not legal")
    reply = _reply(engine, "genmove w")
    assert reply.startswith("= o(") and engine.session.moves[0] == 4
    assert len(_reply(engine, "legal_moves").split()) == 1 + 7
    assert _reply(engine, "undo") == "=\n\n" and engine.session.moves == [4]
    assert _reply(engine, "showboard") == "= \n...\n.x.\n...\n\n"
    assert _reply(engine, "final_score").startswith("? the game is not over")
    # Play it out against perfect play from both sides: a draw.
    while not engine.session.over:
        colour = "b" if engine.session.seat_to_move == 0 else "w"
        assert _reply(engine, f"genmove {colour}").startswith("= ")
    assert _reply(engine, "final_score") == "= 0\n\n"
    assert _reply(engine, "genmove b") == "= pass\n\n"  # GTP: no move to make
    assert _reply(engine, "time_settings 300 0 0") == "=\n\n"
    assert _reply(engine, "time_left b 120 0") == "=\n\n"
    assert _reply(engine, "moozi-analyze").startswith("? this player has no search")


def test_switch_game_and_serve_until_quit():
    e = GTPEngine("random", "pgx:tic_tac_toe")
    out = io.StringIO()
    e.serve(io.StringIO("moozi-game openspiel:connect_four\n1 play b x3\n2 genmove w\nquit\nname\n"), out)
    text = out.getvalue()
    assert text.startswith("=\n\n=1\n\n=2 o") and text.endswith("=\n\n")  # nothing answered after quit
    assert e.session.game == "openspiel:connect_four" and e.session.moves[0] == 3


def test_session_notation_and_undo():
    s = GameSession("pgx:connect_four", make_player("random", "pgx:connect_four"))
    assert s.parse_move("x3") == s.parse_move("3") == 3
    s.play(3)
    assert s.move_name(3) == "o3"
    assert s.board().endswith("\n...x...\n0123456")  # the columns numbered as the moves name them
    with pytest.raises(IllegalMove, match="names no move"):
        s.parse_move("z9")
    s.genmove()
    s.undo(2)
    assert s.moves == [] and s.seat_to_move == 0
    s.close()


def test_play_at_the_terminal_against_perfect_play():
    session = GameSession("pgx:tic_tac_toe", make_player("perfect", "pgx:tic_tac_toe"))
    out = io.StringIO()
    # A corner, then (after checking the legal moves and an undo) every cell in turn until the game ends.
    moves = "legal\n0\nundo\n0\nhint\nnonsense\n" + "".join(f"{c}\n" for c in range(9))
    score = play_terminal(session, 0, io.StringIO(moves), out)
    text = out.getvalue()
    assert score in (0.0, 0.5)  # perfect play never loses
    assert "legal: x(0,0)" in text and "names no move" in text and "has no search to show" in text
    assert ("You lost." in text) or ("A draw." in text)
    session.new_game()
    assert play_terminal(session, 1, io.StringIO("quit\n"), io.StringIO()) is None
    session.close()


def test_an_external_engine_over_gtp():
    """gtp:COMMAND plays through engine processes: moozi's own GTP engine with perfect play draws perfect play."""
    import sys

    from moozi.envs.pool import make_pool
    from moozi.eval.arena import play_match

    engine = make_player(f"gtp:{sys.executable} -m moozi.cli gtp perfect --game pgx:tic_tac_toe", "pgx:tic_tac_toe")
    pool = make_pool("pgx:tic_tac_toe", 2, seed=0)
    try:
        records, clocks = play_match(engine, make_player("perfect", "pgx:tic_tac_toe", 3), pool, pairs=2,
                                     opening_plies=1, seed=5)
    finally:
        engine.close()
        pool.close()
    assert [r.score_a for r in records] == [0.5] * 4
    assert clocks["a"].moves > 0 and engine.procs == []


_ENGINE = __import__("pathlib").Path(__file__).parent / "data" / "ttt_gtp_engine.py"
_FAULTS = {"crash": "the engine ended after 'genmove", "occupied": "which is not legal here",
           "garbage": "the engine answered 'banana', which names no move", "hang": "no answer to 'genmove",
           "refuse": "the engine refused 'play", "noreply": "which is no GTP reply"}


@pytest.mark.parametrize("mode", ["good", "nomark", "index", *_FAULTS])
def test_match_against_an_engine_with_faults_finishes_and_records_every_game(mode, tmp_path, capsys):
    """`moozi match` against GTP engines written apart from the project (tests/data/ttt_gtp_engine.py): answers
    with and without the mover's mark, or as an index, are moves; an engine that crashes, answers an occupied
    cell or garbage, hangs past the timeout, refuses a move or answers no GTP reply loses that game by forfeit
    (reason in the records and the log), is started again for the next, and the match finishes: exit 0, every
    game recorded, no engine left running. (Before: a RuntimeError traceback, exit 1, no records.)"""
    import json
    import subprocess
    import sys

    from moozi.cli import main

    records = tmp_path / "games.jsonl"
    engine = f"gtp:{sys.executable} {_ENGINE} {mode},timeout=1"
    assert main(["match", engine, "random", "--game", "pgx:tic_tac_toe", "--pairs", "2", "--records", str(records),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    games = [json.loads(line) for line in records.read_text().splitlines()[1:]]
    assert len(games) == out["games"] == 4 and sorted(g["game"] for g in games) == [0, 1, 2, 3]
    if mode in _FAULTS:
        assert out["forfeits"] == {"a": 4, "b": 0} and out["losses"] == 4
        for g in games:
            assert g["forfeit"]["by"] == out["a"]["id"] and _FAULTS[mode] in g["forfeit"]["reason"], g
            assert g["score_a"] == 0.0
    else:  # a full game each: an engine playing the first free cell against random moves
        assert "forfeits" not in out and not any("forfeit" in g for g in games)
        assert all(len(g["moves"]) >= 5 for g in games)
    left = subprocess.run(["pgrep", "-f", str(_ENGINE)], capture_output=True, text=True).stdout.split()
    assert not left, left


def test_an_engine_that_fails_in_moozi_play_loses_the_game_and_says_why():
    """`moozi play` against a GTP engine that exits at its second genmove: the person is told it forfeits, and
    wins; over moozi's own GTP such a player resigns."""
    import sys

    from moozi.eval.gtp import GTPEngine as Server

    player = make_player(f"gtp:{sys.executable} {_ENGINE} crash", "pgx:tic_tac_toe")
    session = GameSession("pgx:tic_tac_toe", player)
    out = io.StringIO()
    try:
        score = play_terminal(session, 0, io.StringIO("x(0,0)\nx(2,2)\nx(2,0)\nx(1,0)\n"), out)
    finally:
        player.close()
        session.close()
    text = out.getvalue()
    assert score == 1.0 and "forfeits: the engine ended after 'genmove w'" in text and "You won." in text, text
    server = Server(f"gtp:{sys.executable} {_ENGINE} crash", "pgx:tic_tac_toe")
    try:
        replies = [server.handle(line) for line in ("genmove b", "play w o(2,2)", "genmove b")]
    finally:
        server.session.player.close()
        server.session.close()
    assert replies[0].startswith("= x(") and replies[2] == "= resign\n\n", replies


_GO = "openspiel:go(board_size=9)"


def _gnugo() -> str:
    import shutil

    found = shutil.which("gnugo") or ("/usr/games/gnugo" if __import__("os").access("/usr/games/gnugo", 1) else None)
    if found is None:
        pytest.skip("GnuGo is not installed (Debian's gnugo; `make` installs it where apt can, as root)")
    return found


def test_gtp_speaks_go_vertices_both_ways():
    """`moozi gtp` on 9x9 Go reads GTP's vertices (`D4`, no I column) and `pass` in either case, answers genmove
    and legal_moves with vertices (before: "'D4' names no move", "has no pass move", `B j3`)."""
    import re

    server = GTPEngine("random", _GO)
    try:
        replies = [server.handle(line) for line in ("boardsize 9", "komi 7.5", "play b D4", "play w pass",
                                                     "genmove b", "play w PASS", "legal_moves", "play b I5")]
    finally:
        server.session.close()
    assert all(r == "=\n\n" for r in replies[:4]), replies
    assert re.fullmatch(r"= ([A-HJ]\d|pass)\n\n", replies[4]), replies[4]
    assert replies[5] == "=\n\n"
    legal = replies[6][2:].split()
    assert "D4" not in legal and "A1" in legal and "J9" in legal and "pass" in legal and "I5" not in legal
    assert all(re.fullmatch(r"[A-HJ]\d|pass", m) for m in legal), legal
    assert replies[7].startswith("? 'I5' names no move")


def test_a_whole_go_game_against_gnugo_through_an_independent_referee(tmp_path, capsys):
    """moozi behind GTP against GnuGo level 1 on 9x9, moves relayed by tests/data/gtp_referee.py (no moozi
    import): no command refused by either side, the game ends, GnuGo scores it; and GnuGo as moozi's gtp:
    player in `moozi match`: every game played out, no forfeit."""
    import json
    import subprocess
    import sys

    from moozi.cli import main

    gnugo = f"{_gnugo()} --mode gtp --level 1"
    referee = __import__("pathlib").Path(__file__).parent / "data" / "gtp_referee.py"
    done = subprocess.run([sys.executable, str(referee), "--black", f"{sys.executable} -m moozi.cli gtp random "
                           f"--game {_GO}", "--white", gnugo], capture_output=True, text=True, timeout=600)
    game = json.loads(done.stdout.strip().splitlines()[-1])
    assert game["refused"] == [] and game["end"] in ("two passes", "b resigned", "w resigned", "max-moves"), game
    assert len(game["moves"]) > 10 and game["final_score"] and game["final_score"][0] in "BW0", game
    records = tmp_path / "go.jsonl"
    gnugo += " --chinese-rules --capture-all-dead"  # OpenSpiel's count is Tromp-Taylor (docs/protocol.md)
    assert main(["match", "random", f"gtp:{gnugo}", "--game", _GO, "--pairs", "1", "--records", str(records),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["games"] == 2 and "forfeits" not in out and out["mean_plies"] > 10, out


def test_gnugo_on_openspiel_go_without_capture_all_dead_gets_a_note():
    """OpenSpiel counts Go's area as the stones lie; GnuGo without ``--capture-all-dead`` passes with dead stones
    on the board (an untrained agent that only passes beat it as white that way), so its command gets a note."""
    from moozi.envs.openspiel_bridge import openspiel_game
    from moozi.eval.players.external import _scoring_note

    go = openspiel_game(_GO)
    assert "--capture-all-dead" in _scoring_note(go, ["/usr/games/gnugo", "--mode", "gtp", "--level", "1"])
    assert _scoring_note(go, ["gnugo", "--mode", "gtp", "--chinese-rules", "--capture-all-dead"]) is None
    assert _scoring_note(go, ["moozi", "gtp", "random"]) is None  # not GnuGo
    assert _scoring_note(openspiel_game("pgx:connect_four"), ["gnugo"]) is None  # not Go
    assert _scoring_note(None, ["gnugo"]) is None  # a game with no OpenSpiel form
