"""Tournaments during training: the newest checkpoint against fixed anchors and earlier checkpoints.

After every ``tournament.every_checkpoints`` periodic checkpoints the driver
calls :func:`run_tournament`: matches (``moozi.eval.arena``) between
``RUN@UPDATES`` and each anchor and each of the ``previous`` newest earlier
kept checkpoints, ``pairs`` pairs each; every game is appended to the run's
rating pool ``RUN/ratings/games.jsonl`` (records under
``RUN/ratings/matches/``), and the whole pool is fitted again (one joint
Bradley-Terry fit, never a chain of differences). What it returns is logged
as metrics: ``rating/latest`` with ``rating/latest_low`` / ``_high`` (95%),
``rating/score_vs/<anchor>`` and ``rating/score_vs/previous_<k>`` (the k-th newest earlier checkpoint),
``tournament/seconds``; ``moozi ratings RUN``
prints the whole table.

With gating on (``gating.every_checkpoints``), :func:`gate_checkpoint` plays
the newest checkpoint against ``RUN@best`` until the gate decides; the
driver copies an accepted checkpoint to ``best``.
"""

from __future__ import annotations

import time
from pathlib import Path

from moozi.config import TournamentConfig


def pool_path(run_dir) -> Path:
    return Path(run_dir) / "ratings" / "games.jsonl"


def run_tournament(run_dir, updates: int, earlier: list[int], cfg: TournamentConfig, seed: int) -> dict:
    """Play the newest checkpoint (``updates``) against the anchors and the ``earlier`` checkpoints; metrics."""
    from moozi.eval.arena import run_match
    from moozi.eval.ratings import ratings_table, read_pool
    from moozi.eval.single import is_two_player
    from moozi.run_dir import load_run_config

    env = load_run_config(run_dir).env
    if not is_two_player(env.name, env.kwargs):
        return _single_player_tournament(run_dir, updates, earlier, cfg, seed)
    t0 = time.perf_counter()
    me = f"{run_dir}@{updates}"
    # Metric names stay the same from one tournament to the next: anchors by name, earlier checkpoints by age.
    opponents = [(a, a.replace("/", "_").replace(":", "_")) for a in cfg.anchors]
    opponents += [(f"{run_dir}@{u}", f"previous_{k}") for k, u in enumerate(reversed(earlier), 1)]
    out: dict[str, float] = {}
    my_id = None
    for i, (opp, name) in enumerate(opponents):
        records = Path(run_dir) / "ratings" / "matches" / f"{updates}-vs-{name}.jsonl"
        m = run_match(me, opp, pairs=cfg.pairs, opening_plies=cfg.opening_plies, seed=seed + 7 * i,
                      records=str(records), pool_file=str(pool_path(run_dir)))
        my_id = m["a"]["id"]
        out[f"rating/score_vs/{name}"] = m["score"]["value"]
    games = read_pool([pool_path(run_dir)])
    names = {g["first"] for g in games} | {g["second"] for g in games}
    anchor = "random" if "random" in names else cfg.anchors[0] if cfg.anchors else sorted(names)[0]
    table = ratings_table(games, anchor=anchor)
    mine = next(r for r in table["players"] if r["player"] == my_id)
    out.update({"rating/latest": mine["rating"], "rating/latest_low": mine["low"], "rating/latest_high": mine["high"],
                "rating/pool_games": float(table["games"]), "tournament/seconds": time.perf_counter() - t0})
    return out


def _single_player_tournament(run_dir, updates: int, earlier: list[int], cfg: TournamentConfig, seed: int) -> dict:
    """A single-player game's tournament: the newest checkpoint and each opponent (trained anchors, earlier
    checkpoints) on the same ``2 * pairs`` starting states (the newest plays them once); every return goes to
    the pool; ``rating/latest`` is its mean return over every start it played, ``rating/score_vs/NAME`` the
    paired difference against NAME."""
    from moozi.eval.ratings import read_pool, returns_table
    from moozi.eval.single import append_returns, paired_difference, paired_returns

    t0 = time.perf_counter()
    opponents = [(a, a.replace("/", "_").replace(":", "_")) for a in cfg.anchors]
    opponents += [(f"{run_dir}@{u}", f"previous_{k}") for k, u in enumerate(reversed(earlier), 1)]
    games, pool = 2 * cfg.pairs, pool_path(run_dir)
    mine, me, env = paired_returns(f"{run_dir}@{updates}", games, seed)
    append_returns(pool, me["id"], mine, seed, env.name, f"tournament-{updates}")
    out: dict[str, float] = {}
    for opp, name in opponents:
        theirs, spec, _ = paired_returns(opp, games, seed, env.name)
        append_returns(pool, spec["id"], theirs, seed, env.name, f"tournament-{updates}")
        out[f"rating/score_vs/{name}"] = paired_difference(mine, theirs, seed)["value"]
    table = returns_table(read_pool([pool], returns=True))
    row = next(r for r in table["players"] if r["player"] == me["id"])
    out.update({"rating/latest": row["return"], "rating/latest_low": row["low"], "rating/latest_high": row["high"],
                "rating/pool_games": float(sum(r["games"] for r in table["players"])),
                "tournament/seconds": time.perf_counter() - t0})
    return out


def gate_checkpoint(run_dir, updates: int, best_updates: int, cfg, seed: int) -> dict:
    """The newest checkpoint (``updates``) against the current best (``best_updates``) with ``cfg``'s gate
    (a :class:`~moozi.config.GatingConfig`); the match summary with its ``gate`` result. The games are
    recorded under ``RUN/gating/`` and never enter the rating pool. A single-player game plays
    ``2 * max_pairs`` games of each from the same starting states and accepts when the paired difference's 95%
    interval lies above 0 (``method`` must be ``fixed``)."""
    from moozi.eval.gating import gate_spec
    from moozi.eval.single import is_two_player, match
    from moozi.run_dir import load_run_config

    records = Path(run_dir) / "gating" / f"{updates}-vs-{best_updates}.jsonl"
    gate = gate_spec(cfg.method, cfg.elo0, cfg.elo1, cfg.alpha, cfg.beta, cfg.margin, cfg.threshold)
    env = load_run_config(run_dir).env
    games = None if is_two_player(env.name, env.kwargs) else 2 * cfg.max_pairs  # single-player: paired games
    return match(f"{run_dir}@{updates}", f"{run_dir}@best", pairs=cfg.max_pairs, opening_plies=cfg.opening_plies,
                     seed=seed, records=str(records), gate=gate, games=games)
