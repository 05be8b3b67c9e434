"""The arena's correctness checks at full size (issue 13), with the numbers for docs/results/arena.

Usage::

    .venv/bin/python research/arena_checks.py --out docs/results/arena [--only seats cross ladder sprt]

* ``seats``: tic-tac-toe (pgx), 20,000 games each, no opening, seats swapped
  in every pair: random vs random (first-mover win / loss / draw against the
  exact 0.5849 / 0.2881 / 0.1270) and perfect vs random (no losses; first
  seat wins 0.9678, second 0.7775), each with its 99% Wilson interval.
* ``cross``: random vs OpenSpiel MCTS-100 on connect four, 1,000 games through
  the arena (pgx connect four, OpenSpiel twin kept in step) and 1,000 through
  OpenSpiel's own ``evaluate_bots``: the two scores and their combined 95%
  interval.
* ``ladder``: connect four, adjacent matches random / MCTS-10 / MCTS-100 /
  MCTS-1000 (OpenSpiel's, ``--ladder-pairs`` pairs each, 2 random opening
  plies) into one rating pool, fitted with random at 0: are the 95%
  intervals disjoint?
* ``sprt``: 2,000 simulated SPRTs at each hypothesis (0 vs 50 Elo).

Writes ``OUT/arena_checks.json`` and ``OUT/arena_checks.md``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from moozi.envs.pool import make_pool
from moozi.eval.arena import append_to_pool, play_match, summarize
from moozi.eval.players import RandomPlayer, make_player
from moozi.eval.stats import Z95, wilson_interval

Z99 = 2.5758293035489


def _rate(k, n, exact):
    low, high = wilson_interval(k, n, Z99)
    return {"rate": k / n, "low99": low, "high99": high, "exact": exact, "inside": bool(low <= exact <= high)}


def seats() -> dict:
    pool = make_pool("pgx:tic_tac_toe", 2000, seed=0)
    out = {}
    t = time.perf_counter()
    recs, _ = play_match(RandomPlayer(1), RandomPlayer(2), pool, 10_000, opening_plies=0, seed=3)
    s = np.array([r.score_a for r in recs])
    seat = np.array([r.a_seat for r in recs])
    first_score = np.where(seat == 0, s, 1.0 - s)  # the first mover's score in every game
    n = s.size
    out["random_vs_random"] = {
        "games": n,
        "first_wins": _rate(int((first_score == 1).sum()), n, 0.5849),
        "first_losses": _rate(int((first_score == 0).sum()), n, 0.2881),
        "draws": _rate(int((first_score == 0.5).sum()), n, 0.1270),
        "wall_s": time.perf_counter() - t,
    }
    t = time.perf_counter()
    recs, _ = play_match(make_player("perfect", "pgx:tic_tac_toe", 1), RandomPlayer(2), pool, 10_000,
                         opening_plies=0, seed=4)
    s = np.array([r.score_a for r in recs])
    seat = np.array([r.a_seat for r in recs])
    out["perfect_vs_random"] = {
        "games": s.size,
        "losses": int((s == 0).sum()),
        "first_seat_wins": _rate(int((s[seat == 0] == 1).sum()), int((seat == 0).sum()), 0.9678),
        "second_seat_wins": _rate(int((s[seat == 1] == 1).sum()), int((seat == 1).sum()), 0.7775),
        "wall_s": time.perf_counter() - t,
    }
    pool.close()
    return out


def cross(games: int = 1000, simulations: int = 100) -> dict:
    import pyspiel

    t = time.perf_counter()
    pool = make_pool("pgx:connect_four", 200, seed=0)
    recs, clocks = play_match(RandomPlayer(1), make_player(f"os-mcts-{simulations}", "pgx:connect_four", 2), pool,
                              games // 2, opening_plies=0, seed=6)
    pool.close()
    arena = np.array([r.score_a for r in recs])
    arena_s = time.perf_counter() - t
    t = time.perf_counter()
    game = pyspiel.load_game("connect_four")
    theirs = []
    for i in range(games):
        seat = i % 2
        bots = [None, None]
        bots[seat] = pyspiel.make_uniform_random_bot(seat, 10_000 + i)
        bots[1 - seat] = pyspiel.MCTSBot(game, pyspiel.RandomRolloutEvaluator(1, 20_000 + i), 2.0, simulations, 1000,
                                         True, 30_000 + i, False)
        theirs.append((pyspiel.evaluate_bots(game.new_initial_state(), bots, 40_000 + i)[seat] + 1) / 2)
    theirs = np.array(theirs)
    se = float(np.sqrt(arena.var() / arena.size + theirs.var() / theirs.size))
    diff = float(arena.mean() - theirs.mean())
    return {"games_each": games, "simulations": simulations,
            "arena_score": float(arena.mean()), "openspiel_score": float(theirs.mean()),
            "difference": diff, "combined_95": Z95 * se, "agree": bool(abs(diff) <= Z95 * max(se, 1e-9)),
            "arena_s": arena_s, "openspiel_s": time.perf_counter() - t,
            "arena_ms_per_mcts_move": clocks["b"].ms_per_move}


def ladder(pairs: int, out_dir: Path) -> dict:
    from moozi.eval.ratings import ratings_table, read_pool

    pool_file = out_dir / "ladder-pool.jsonl"
    pool_file.unlink(missing_ok=True)
    rungs = ["random", "os-mcts-10", "os-mcts-100", "os-mcts-1000"]
    matches = []
    pool = make_pool("pgx:connect_four", 200, seed=0)
    for i, (b, a) in enumerate(zip(rungs, rungs[1:])):
        t = time.perf_counter()
        pa, pb = make_player(a, "pgx:connect_four", 10 + i), make_player(b, "pgx:connect_four", 20 + i)
        recs, clocks = play_match(pa, pb, pool, pairs, opening_plies=2, seed=100 + i)
        s = summarize(recs, pa.spec.describe(), pb.spec.describe(), clocks)
        append_to_pool(pool_file, recs, pa.spec.id, pb.spec.id, "pgx:connect_four", f"ladder-{a}-vs-{b}")
        matches.append({"a": a, "b": b, "score": s["score"], "elo": s["elo"], "ms_per_move": s["ms_per_move"],
                        "wall_s": time.perf_counter() - t})
    pool.close()
    table = ratings_table(read_pool([pool_file]))
    order = {r["player"]: r for r in table["players"]}
    disjoint = all(order[lo]["high"] < order[hi]["low"] for lo, hi in zip(rungs, rungs[1:]))
    return {"pairs_per_match": pairs, "matches": matches, "ratings": table, "disjoint_intervals": disjoint}


def sprt() -> dict:
    from moozi.eval.gating import sprt_error_rates

    t = time.perf_counter()
    r = sprt_error_rates(0.0, 50.0, runs=2000, seed=0)
    se = float(np.sqrt(0.05 * 0.95 / 2000))
    return {**r, "se": se, "false_accept_ok": abs(r["at_h0"]["accept_h1"] - 0.05) <= 3 * se,
            "false_reject_ok": abs(1 - r["at_h1"]["accept_h1"] - 0.05) <= 3 * se, "wall_s": time.perf_counter() - t}


def markdown(res: dict) -> str:
    lines = ["# Arena checks (research/arena_checks.py)", ""]
    if "seats" in res:
        rr, pr = res["seats"]["random_vs_random"], res["seats"]["perfect_vs_random"]
        lines += ["## Seat and sign accounting, tic-tac-toe (pgx), 20,000 games each", "",
                  "| check | measured | 99% Wilson | exact | inside |", "| --- | --- | --- | --- | --- |"]
        for name, r in (("random vs random: first mover wins", rr["first_wins"]),
                        ("random vs random: first mover loses", rr["first_losses"]),
                        ("random vs random: draws", rr["draws"]),
                        ("perfect vs random: perfect first, wins", pr["first_seat_wins"]),
                        ("perfect vs random: perfect second, wins", pr["second_seat_wins"])):
            lines.append(f"| {name} | {r['rate']:.4f} | [{r['low99']:.4f}, {r['high99']:.4f}] | {r['exact']} | "
                         f"{'yes' if r['inside'] else 'NO'} |")
        lines += ["", f"perfect vs random: {pr['losses']} losses in {pr['games']} games.", ""]
    if "cross" in res:
        c = res["cross"]
        lines += [f"## Random vs OpenSpiel MCTS-{c['simulations']}, connect four, {c['games_each']} games each", "",
                  f"random's score: arena {c['arena_score']:.4f}, OpenSpiel evaluate_bots {c['openspiel_score']:.4f}; "
                  f"difference {c['difference']:+.4f}, combined 95% interval ±{c['combined_95']:.4f}: "
                  f"{'agree' if c['agree'] else 'DISAGREE'}. Arena {c['arena_s']:.1f} s, evaluate_bots "
                  f"{c['openspiel_s']:.1f} s.", ""]
    if "ladder" in res:
        lad = res["ladder"]
        lines += [f"## Ladder, connect four, {lad['pairs_per_match']} pairs per adjacent match", "",
                  "| player | Elo | 95% interval | games | score |", "| --- | --- | --- | --- | --- |"]
        for r in lad["ratings"]["players"]:
            lines.append(f"| {r['player']} | {r['rating']:.0f} | [{r['low']:.0f}, {r['high']:.0f}] | {r['games']} | "
                         f"{r['score']:.3f} |")
        lines += ["", f"Intervals disjoint: {'yes' if lad['disjoint_intervals'] else 'NO'}.", ""]
        for m in lad["matches"]:
            lines.append(f"- {m['a']} vs {m['b']}: score {m['score']['value']:.3f} [{m['score']['low']:.3f}, "
                         f"{m['score']['high']:.3f}], ms per move {m['ms_per_move']['a']:.2f} / "
                         f"{m['ms_per_move']['b']:.2f}, {m['wall_s']:.0f} s")
        lines.append("")
    if "sprt" in res:
        s = res["sprt"]
        lines += ["## SPRT, 2,000 simulated runs per hypothesis (0 vs 50 Elo, 20% draws)", "",
                  f"false accept {s['at_h0']['accept_h1']:.4f}, false reject {1 - s['at_h1']['accept_h1']:.4f} "
                  f"(3 standard errors: ±{3 * s['se']:.4f} around 0.05); mean pairs {s['at_h0']['mean_pairs']:.0f} / "
                  f"{s['at_h1']['mean_pairs']:.0f}.", ""]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--only", nargs="+", default=["seats", "cross", "ladder", "sprt"])
    p.add_argument("--ladder-pairs", type=int, default=300)
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res = {}
    if "seats" in args.only:
        res["seats"] = seats()
    if "cross" in args.only:
        res["cross"] = cross()
    if "ladder" in args.only:
        res["ladder"] = ladder(args.ladder_pairs, out)
    if "sprt" in args.only:
        res["sprt"] = sprt()
    (out / "arena_checks.json").write_text(json.dumps(res, indent=1))
    (out / "arena_checks.md").write_text(markdown(res))
    print(markdown(res))


if __name__ == "__main__":
    main()
