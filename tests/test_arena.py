"""The arena: seat and sign accounting against exact tic-tac-toe values, pairing, records, OpenSpiel parity."""

import json

import numpy as np
import pytest

from moozi.config import ConfigError
from moozi.envs.pool import make_pool
from moozi.eval.arena import play_match, run_match, summarize
from moozi.eval.players import RandomPlayer, make_player, parse_player
from moozi.eval.stats import wilson_interval

Z99 = 2.5758293035489


def _rates(records, seat: int):
    """A's win / loss / draw counts in the games where A had ``seat``."""
    s = np.array([r.score_a for r in records if r.a_seat == seat])
    return int((s == 1).sum()), int((s == 0).sum()), int((s == 0.5).sum()), s.size


def _inside(k, n, p):
    low, high = wilson_interval(k, n, Z99)
    return low <= p <= high


@pytest.fixture(scope="module")
def ttt_pool():
    pool = make_pool("pgx:tic_tac_toe", 2000, seed=0)
    yield pool
    pool.close()


def test_random_vs_random_matches_the_exact_first_mover_rates(ttt_pool):
    # Exact by enumeration of the game tree with uniformly random moves: first mover wins 0.5849,
    # loses 0.2881, draws 0.1270. 20,000 games, no opening, seats swapped in every pair.
    records, _ = play_match(RandomPlayer(1), RandomPlayer(2), ttt_pool, pairs=10_000, opening_plies=0, seed=3)
    assert len(records) == 20_000
    first_w = first_l = first_d = n = 0
    for seat in (0, 1):  # A's results as first mover, and B's (A's flipped) when A moved second
        w, l_, d, m = _rates(records, seat)
        first_w, first_l = first_w + (w if seat == 0 else l_), first_l + (l_ if seat == 0 else w)
        first_d, n = first_d + d, n + m
    assert n == 20_000
    assert _inside(first_w, n, 0.5849), first_w / n
    assert _inside(first_l, n, 0.2881), first_l / n
    assert _inside(first_d, n, 0.1270), first_d / n


def test_perfect_vs_random_never_loses_at_the_exact_rates(ttt_pool):
    records, _ = play_match(make_player("perfect", "pgx:tic_tac_toe", 1), RandomPlayer(2), ttt_pool,
                            pairs=10_000, opening_plies=0, seed=4)
    w0, l0, _, n0 = _rates(records, 0)
    w1, l1, _, n1 = _rates(records, 1)
    assert l0 == l1 == 0
    assert n0 == n1 == 10_000
    assert _inside(w0, n0, 0.9678), w0 / n0
    assert _inside(w1, n1, 0.7775), w1 / n1


def test_pairs_share_their_opening_and_swap_seats():
    pool = make_pool("pgx:connect_four", 8, seed=0)
    a, b = RandomPlayer(1), RandomPlayer(2)
    seen = []
    records, clocks = play_match(a, b, pool, pairs=6, opening_plies=3, seed=11, on_game=seen.append)
    assert [r.game for r in records] == list(range(12)) == [r.game for r in seen]  # game order
    for p in range(6):
        g0, g1 = records[2 * p], records[2 * p + 1]
        assert g0.pair == g1.pair == p
        assert (g0.a_seat, g1.a_seat) == (0, 1)
        assert g0.opening == g1.opening and len(g0.opening) == 3
        assert g0.moves[:3] == g0.opening
    assert len({r.opening for r in records}) > 1  # openings differ between pairs
    # Opening plies are nobody's moves: the players made the rest.
    assert clocks["a"].moves + clocks["b"].moves == sum(len(r.moves) - 3 for r in records)
    again, _ = play_match(RandomPlayer(1), RandomPlayer(2), pool, pairs=6, opening_plies=3, seed=11)
    assert [r.moves for r in again] == [r.moves for r in records]  # seeded: the same match again
    pool.close()


def test_summary_counts_per_seat_and_intervals(ttt_pool):
    records, clocks = play_match(make_player("perfect", "pgx:tic_tac_toe", 1), RandomPlayer(2), ttt_pool,
                                 pairs=200, opening_plies=0, seed=5)
    s = summarize(records, {"id": "perfect"}, {"id": "random"}, clocks)
    assert s["games"] == 400 and s["pairs"] == 200
    assert s["wins"] + s["draws"] + s["losses"] == 400
    assert s["a_first"]["wins"] + s["a_second"]["wins"] == s["wins"]
    assert s["losses"] == 0 and s["loss_rate"]["high"] < 0.02
    assert s["score"]["low"] < s["score"]["value"] < s["score"]["high"]
    assert s["elo"]["value"] > 300
    assert 0 < s["distinct_games"] <= 1


def test_openspiel_mcts_scores_like_openspiel_evaluate_bots():
    """Random against OpenSpiel's MCTS-20 on connect four, through the arena and through OpenSpiel's own
    evaluate_bots: the scores of the random side agree within their combined 95% interval."""
    import pyspiel

    pool = make_pool("pgx:connect_four", 100, seed=0)
    records, _ = play_match(RandomPlayer(1), make_player("os-mcts-20", "pgx:connect_four", 2), pool, pairs=100,
                            opening_plies=0, seed=6)
    pool.close()
    arena = np.array([r.score_a for r in records])
    game = pyspiel.load_game("connect_four")
    theirs = []
    for i in range(200):
        mcts = pyspiel.MCTSBot(game, pyspiel.RandomRolloutEvaluator(1, 100 + i), 2.0, 20, 1000, True, 100 + i, False)
        seat = i % 2
        bots = [None, None]
        bots[seat] = pyspiel.make_uniform_random_bot(seat, 7 + i)
        bots[1 - seat] = mcts
        returns = pyspiel.evaluate_bots(game.new_initial_state(), bots, 1000 + i)
        theirs.append((returns[seat] + 1) / 2)
    theirs = np.array(theirs)
    se = np.sqrt(arena.var() / arena.size + theirs.var() / theirs.size)
    assert abs(arena.mean() - theirs.mean()) <= 1.96 * max(se, 0.01), (arena.mean(), theirs.mean())


def test_player_strings_and_errors(tmp_path):
    assert parse_player("runs/x@best,sims=64,temp=0.5,eps=0.1") == ("runs/x@best", {"sims": 64, "temp": 0.5,
                                                                                     "eps": 0.1})
    p = make_player("random,eps=0.2", "pgx:connect_four")
    assert p.spec.id == "random,eps=0.2"
    assert make_player("os-mcts-50,rollouts=2", "openspiel:connect_four").spec.id == "os-mcts-50,rollouts=2"
    with pytest.raises(ConfigError, match="only available for tic-tac-toe"):
        make_player("perfect", "pgx:connect_four")
    with pytest.raises(ConfigError, match="unknown option"):
        make_player("random,sims=3", "pgx:connect_four")
    with pytest.raises(ConfigError, match="not a run directory"):
        make_player(str(tmp_path / "nope"), "pgx:connect_four")
    with pytest.raises(ConfigError, match="OpenSpiel twin"):
        make_player("os-mcts-10", "pgx:othello")
    with pytest.raises(ConfigError, match="--game is needed"):
        run_match("random", "random")


def test_match_cli_writes_records_and_pool(tmp_path, capsys):
    from moozi.cli import main

    records, pool = tmp_path / "m.jsonl", tmp_path / "pool.jsonl"
    argv = ["match", "os-mcts-10", "random", "--game", "openspiel:tic_tac_toe", "--pairs", "6",
            "--records", str(records), "--pool", str(pool), "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["games"] == 12 and out["a"]["id"] == "os-mcts-10" and out["b"]["id"] == "random"
    lines = [json.loads(x) for x in records.read_text().splitlines()]
    assert lines[0]["match"]["a"]["id"] == "os-mcts-10" and [g["game"] for g in lines[1:]] == list(range(12))
    assert len(pool.read_text().splitlines()) == 12
    assert main(["match", "perfect", "random", "--game", "openspiel:tic_tac_toe", "--pairs", "4", "--records",
                 str(records), "--pool", str(pool)]) == 0
    assert "score of A" in capsys.readouterr().out
    assert main(["ratings", str(pool), "--json"]) == 0
    table = json.loads(capsys.readouterr().out.strip())
    assert table["games"] == 20 and {r["player"] for r in table["players"]} == {"os-mcts-10", "random", "perfect"}
    assert main(["match", "random", "random", "--game", "pgx:tic_tac_toe", "--pairs", "1", "--pool", str(pool),
                 "--records", str(records)]) == 0
    capsys.readouterr()
    assert main(["ratings", str(pool)]) == 2
    assert "games of 2 kinds" in capsys.readouterr().err
    assert main(["ratings", str(pool), "--game", "openspiel:tic_tac_toe", "--anchor", "nobody"]) == 2
    assert "anchor 'nobody' played no game" in capsys.readouterr().err
    assert main(["match", "random", "random", "--game", "gymnax:CartPole-v1", "--pairs", "1"]) == 2
    assert "single-player game" in capsys.readouterr().err


def test_gated_match_stops_when_decided(tmp_path):
    out = run_match("perfect", "random", game="pgx:tic_tac_toe", pairs=1000, batch=16, seed=1,
                    records=str(tmp_path / "g.jsonl"), gate={"method": "sprt", "elo0": 0.0, "elo1": 50.0,
                                                             "alpha": 0.05, "beta": 0.05})
    g = out["gate"]
    assert g["decision"] == "accept" and g["llr"] >= g["bounds"][1]
    assert out["pairs"] == g["pairs_used"] < 1000 and out["games"] == 2 * g["pairs_used"]
    fixed = run_match("random", "random", game="pgx:tic_tac_toe", pairs=20, seed=2, records=str(tmp_path / "f.jsonl"),
                      gate={"method": "fixed", "threshold": 0.55})
    assert fixed["gate"]["pairs_used"] == 20 and fixed["gate"]["decision"] in ("accept", "reject")
    with pytest.raises(ConfigError, match="never enter a rating pool"):
        run_match("random", "random", game="pgx:tic_tac_toe", pool_file=str(tmp_path / "p.jsonl"),
                  gate={"method": "fixed", "threshold": 0.55})


def test_alpha_beta_plays_exactly_and_sees_its_horizon():
    """Full-depth alpha-beta never loses a tic-tac-toe game and draws perfect play; at depth 1 it takes a
    connect-four win, at depth 2 it blocks one, and it picks at random among equal moves."""
    pool = make_pool("pgx:tic_tac_toe", 8, seed=0)
    try:
        ab, perfect = make_player("ab", "pgx:tic_tac_toe", seed=1), make_player("perfect", "pgx:tic_tac_toe", seed=2)
        assert ab.spec.id == "ab"
        records, _ = play_match(ab, perfect, pool, 4, 0, seed=0)  # random openings may already be lost
        assert [r.score_a for r in records] == [0.5] * 8
        records, _ = play_match(ab, RandomPlayer(3), pool, 4, 0, seed=1)
        assert min(r.score_a for r in records) >= 0.5
    finally:
        pool.close()
    c4 = make_pool("pgx:connect_four", 1, seed=0)
    try:
        ts = c4.reset(0)
        players = [make_player("ab-1", "pgx:connect_four", seed=s) for s in range(2)] + [
            make_player("ab-2", "pgx:connect_four", seed=5)]
        for p in players:
            p.reset(ts)
        for a in (0, 1, 0, 1, 0):  # X stacks column 0 three times; O (to move) must block at 0
            ts = c4.step(np.array([a], np.int32))
            for p in players:
                p.observe(ts, np.array([a], np.int32))
        assert int(players[2].act(ts, np.array([True]))[0]) == 0  # ab-2 sees X's threat
        ts = c4.step(np.array([1], np.int32))  # O does not block: X wins at 0
        for p in players:
            p.observe(ts, np.array([1], np.int32))
        assert {int(p.act(ts, np.array([True]))[0]) for p in players} == {0}
        # From the start, every move is worth 0 to depth 1: the choice is random, not the first index.
        first = c4.reset(1)
        fresh = make_player("ab-1", "pgx:connect_four", seed=9)
        fresh.reset(first)
        assert len({int(fresh.act(first, np.array([True]))[0]) for _ in range(20)}) > 1
    finally:
        c4.close()
    with pytest.raises(ConfigError, match="ab-D needs"):
        make_player("ab-x", "pgx:connect_four")


class _Terminal:
    """A scripted person: a bad move, asks for the legal moves, then plays the first of them."""

    def __init__(self, quit_after: int | None = None):
        self.lines, self.calls, self.quit_after = [], 0, quit_after

    def write(self, text):
        self.lines.append(text)

    def flush(self):
        pass

    def readline(self):
        self.calls += 1
        self.lines.append("\n")  # a terminal echoes the typed line
        if self.quit_after is not None and self.calls > self.quit_after:
            return "quit\n"
        step = self.calls % 3
        if step == 1:
            return "zz\n"
        if step == 2:
            return "legal\n"
        listed = [t for t in "".join(self.lines).splitlines() if t.startswith("legal:")][-1]
        return listed.split()[1] + "\n"


def test_a_person_plays_in_the_arena():
    from moozi.eval.players import HumanPlayer

    term = _Terminal()
    pool = make_pool("pgx:tic_tac_toe", 2, seed=0)
    try:
        human = HumanPlayer("pgx:tic_tac_toe", stdin=term, out=term)
        records, _ = play_match(human, RandomPlayer(1), pool, 1, 0, seed=0)
        assert len(records) == 2 and human.spec.id == "human"
        text = "".join(term.lines)
        assert "names no move" in text and "legal: x(0,0)" in text and "game 0" in text
        quitter = _Terminal(quit_after=1)
        with pytest.raises(KeyboardInterrupt):
            play_match(HumanPlayer("pgx:tic_tac_toe", stdin=quitter, out=quitter), RandomPlayer(1), pool, 1, 0, 0)
    finally:
        pool.close()
