"""The arena: two players, games in pairs (one seeded opening, seats swapped), results with intervals.

Pair ``p`` is games ``2p`` and ``2p + 1``: both start with the same ``k``
random plies (``opening_plies``; drawn from the match seed and ``p``, played
for both seats), then A takes the first seat in game ``2p`` and the second in
``2p + 1``. The seat is the order of play from the game's start: seat 0 made
the first ply (of the opening, when there is one). Opening plies count as
neither player's moves. In games with chance events the two games of a pair
share the opening moves, not the chance outcomes.

Games are played in rounds of at most ``batch`` games in lock-step (every
player acts batched on the games where it is to move); a round starts when
the previous one has finished, so results are counted in game order.

:func:`summarize` turns the per-game results into what ``moozi match``
prints: W/D/L overall and per seat, the score with its interval from pairs
(the pentanomial model, ``moozi.eval.stats``) and from single games, the Elo
difference with its interval, Wilson intervals for the win and loss rates,
the share of distinct games, ms per move and both players' specs.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass

import numpy as np

from moozi.eval.players import MoveClock


@dataclass(frozen=True)
class GameRecord:
    """One finished game. ``score_a``: 1 (A won), 0.5, 0; ``a_seat``: 0 (A moved first) or 1;
    ``moves``: every action from the start (the opening's first)."""

    game: int
    pair: int
    a_seat: int
    opening: tuple
    moves: tuple
    score_a: float
    forfeit: tuple = ()  # ("a" or "b", reason): that player lost the game by forfeit after ``moves``

    def to_json(self, a_id: str, b_id: str) -> dict:
        first, second = (a_id, b_id) if self.a_seat == 0 else (b_id, a_id)
        out = {"game": self.game, "pair": self.pair, "first": first, "second": second, "a_seat": self.a_seat,
               "score_a": self.score_a, "score_first": self.score_a if self.a_seat == 0 else 1.0 - self.score_a,
               "opening_plies": len(self.opening), "moves": list(self.moves)}
        if self.forfeit:
            out["forfeit"] = {"by": a_id if self.forfeit[0] == "a" else b_id, "reason": self.forfeit[1]}
        return out


def opening_choices(seed: int, pair: int, plies: int) -> np.ndarray:
    """``[plies]`` uniforms in [0, 1) for pair ``pair``'s opening (the ply's move is the ``floor(u * n)``-th legal one)."""
    return np.random.default_rng([int(seed), 0x0BE, int(pair)]).random(plies)


def _fallback(legal: np.ndarray) -> np.ndarray:
    """The first legal action per row (0 where nothing is legal): what finished rows play while a round ends."""
    return np.where(legal.any(-1), np.argmax(legal, axis=-1), 0).astype(np.int32)


def _forfeits(who: str, player, active: np.ndarray, game: np.ndarray, forfeit: dict) -> None:
    """The games ``player`` (``"a"`` or ``"b"``) forfeited in its last call (``take_forfeits``, players that can:
    an external engine that crashed, hung or answered no legal move): each ends there, lost by that player."""
    import logging

    for b, reason in (player.take_forfeits() if hasattr(player, "take_forfeits") else {}).items():
        if active[b]:
            active[b] = False
            forfeit[b] = (who, reason)
            logging.getLogger("moozi").warning("game %d: %s forfeits: %s", int(game[b]), player.spec.id, reason)


def play_match(player_a, player_b, pool, pairs: int, opening_plies: int = 2, seed: int = 0,
               on_game=None, first_pair: int = 0, clocks: dict | None = None) -> tuple[list[GameRecord], dict]:
    """Play ``pairs`` pairs of games between ``player_a`` and ``player_b`` on ``pool`` (two-player, ``B`` games).

    ``pool.num_envs`` must be even. ``on_game(record)`` is called for each
    finished game, in game order. ``first_pair`` continues a match (pairs
    ``first_pair ..``, their openings and round seeds as if played in one go
    when chunks are whole rounds). Returns ``(records sorted by game, clocks)``
    where clocks maps ``"a"``/``"b"`` to their :class:`MoveClock` (``clocks`` to add to).
    """
    spec = pool.spec
    if not spec.two_player:
        raise ValueError(f"{spec.name} is a single-player game: a match needs two players (use moozi eval)")
    B = pool.num_envs
    if B % 2:
        raise ValueError(f"the pool has {B} games: a match plays pairs, so it needs an even number")
    clocks = clocks if clocks is not None else {"a": MoveClock(), "b": MoveClock()}
    records: list[GameRecord] = []
    first_game, games_total = 2 * first_pair, 2 * (first_pair + pairs)
    for start in range(first_game, games_total, B):
        round_index = start // B
        n = min(B, games_total - start)
        game = start + np.arange(B)
        pair = game // 2
        a_seat = game % 2
        openings = [opening_choices(seed, p, opening_plies) for p in pair]
        ts = pool.reset(seed=int(np.random.default_rng([int(seed), 0x9001, round_index]).integers(2**31)))
        active = np.arange(B) < n
        forfeit: dict[int, tuple] = {}
        for who, p in (("a", player_a), ("b", player_b)):
            p.reset(ts)
            _forfeits(who, p, active, game, forfeit)
        first_player = np.asarray(ts.to_play).copy()
        ply = np.zeros(B, np.int64)
        score = np.zeros(B)
        moves: list[list[int]] = [[] for _ in range(B)]
        while active.any():
            legal = np.asarray(ts.legal_actions, bool)
            live = active & ~np.asarray(ts.is_last)
            mover_seat = (np.asarray(ts.to_play) != first_player).astype(np.int64)
            in_opening = live & (ply < opening_plies)
            a_moves = live & ~in_opening & (mover_seat == a_seat)
            b_moves = live & ~in_opening & (mover_seat != a_seat)
            actions = _fallback(legal)
            for b in np.flatnonzero(in_opening):
                options = np.flatnonzero(legal[b])
                actions[b] = options[min(int(openings[b][ply[b]] * len(options)), len(options) - 1)]
            for who, player, movers in (("a", player_a, a_moves), ("b", player_b, b_moves)):
                if movers.any():
                    compiled = getattr(player, "compile_s", 0.0)
                    with clocks[who]:
                        chosen = np.asarray(player.act(ts, movers), np.int32)
                    clocks[who].compile_s += getattr(player, "compile_s", 0.0) - compiled
                    clocks[who].moves += int(movers.sum())
                    _forfeits(who, player, active, game, forfeit)
                    movers = movers & active
                    live = live & active
                    bad = movers & ~legal[np.arange(B), np.clip(chosen, 0, legal.shape[1] - 1)]
                    bad |= movers & ((chosen < 0) | (chosen >= legal.shape[1]))
                    if bad.any():
                        b = int(np.flatnonzero(bad)[0])
                        raise RuntimeError(f"player {player.spec.id} chose the illegal action {int(chosen[b])} "
                                           f"in game {int(game[b])} (legal: {np.flatnonzero(legal[b]).tolist()})")
                    actions = np.where(movers, chosen, actions).astype(np.int32)
            for b in np.flatnonzero(live):
                moves[b].append(int(actions[b]))
            a_player = np.where(a_seat == 0, first_player, 1 - first_player)
            mover_is_a = np.asarray(ts.to_play) == a_player
            ts = pool.step(actions)
            for who, p in (("a", player_a), ("b", player_b)):
                p.observe(ts, actions)
                _forfeits(who, p, active, game, forfeit)  # an engine that failed on the other side's move
            r = np.asarray(ts.reward, np.float64)
            score += np.where(live, np.where(mover_is_a, r, -r), 0.0)
            ply += live
            active &= ~(live & np.asarray(ts.is_last))
        for b in range(n):
            s = 1.0 if score[b] > 0 else 0.0 if score[b] < 0 else 0.5
            if b in forfeit:
                s = 0.0 if forfeit[b][0] == "a" else 1.0
            rec = GameRecord(int(game[b]), int(pair[b]), int(a_seat[b]), tuple(moves[b][:opening_plies]),
                             tuple(moves[b]), s, forfeit.get(b, ()))
            records.append(rec)
            if on_game is not None:
                on_game(rec)
    return records, clocks


def wins_draws_losses(scores) -> tuple[int, int, int]:
    s = np.asarray(scores, np.float64)
    return int(np.sum(s == 1.0)), int(np.sum(s == 0.5)), int(np.sum(s == 0.0))


def summarize(records: list[GameRecord], spec_a: dict, spec_b: dict, clocks: dict | None = None) -> dict:
    """The match summary (JSON-ready) from A's point of view; see the module doc."""
    from moozi.eval.stats import elo_interval, pair_score_interval, score_interval, wilson_interval

    scores = np.array([r.score_a for r in records], np.float64)
    seats = np.array([r.a_seat for r in records])
    w, d, l_ = wins_draws_losses(scores)
    n = len(records)
    pair_scores = _pair_scores(records)
    paired = pair_score_interval(pair_scores)
    single = score_interval(w, d, l_)
    elo = elo_interval(paired)
    distinct = len({r.moves for r in records}) / max(n, 1)

    def interval(i):
        return {"value": _finite(i.value), "low": _finite(i.low), "high": _finite(i.high)}

    out = {
        "a": spec_a, "b": spec_b,
        "games": n, "pairs": len(pair_scores),
        "wins": w, "draws": d, "losses": l_,
        "a_first": dict(zip(("wins", "draws", "losses"), wins_draws_losses(scores[seats == 0]))),
        "a_second": dict(zip(("wins", "draws", "losses"), wins_draws_losses(scores[seats == 1]))),
        "score": interval(paired),
        "score_single_games": interval(single),
        "elo": interval(elo),
        "win_rate": {"value": w / max(n, 1), **dict(zip(("low", "high"), wilson_interval(w, n)))},
        "loss_rate": {"value": l_ / max(n, 1), **dict(zip(("low", "high"), wilson_interval(l_, n)))},
        "distinct_games": distinct,
        "mean_plies": float(np.mean([len(r.moves) for r in records])) if records else 0.0,
    }
    if any(r.forfeit for r in records):  # games an engine lost by crashing, hanging or answering no legal move
        out["forfeits"] = {who: sum(1 for r in records if r.forfeit and r.forfeit[0] == who) for who in "ab"}
    if clocks:
        out["ms_per_move"] = {k: c.ms_per_move for k, c in clocks.items()}
        out["compile_s"] = {k: c.compile_s for k, c in clocks.items()}
    return out


def _finite(x: float):
    """JSON has no infinity: +-inf (an Elo of a perfect score) becomes a string; -0.0 prints as 0.0."""
    return x + 0.0 if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def write_records(path, records: list[GameRecord], a_id: str, b_id: str, meta: dict | None = None) -> None:
    """Game records as JSON lines (one per game, in game order), after a header line with the match settings."""
    from moozi.files import write_atomic

    lines = ([json.dumps({"match": meta})] if meta is not None else []) + [
        json.dumps(r.to_json(a_id, b_id)) for r in sorted(records, key=lambda r: r.game)]
    write_atomic(path, lambda tmp: tmp.write_text("".join(line + "\n" for line in lines)),
                 f"the records of {len(records)} games")


def game_of(players: list[str], game: str | None, modules=()) -> tuple[str, dict, tuple]:
    """``(game name, bridge kwargs, modules)``: ``game`` when given, else the game the first run among ``players``
    was trained on; every run must be of that game. ``modules``: the user's game modules, imported first (a run
    adds its own ``env.modules``)."""
    from pathlib import Path

    from moozi.config import ConfigError
    from moozi.envs.pool import import_modules
    from moozi.envs.registry import list_envs
    from moozi.eval.players import parse_player
    from moozi.eval.players.registry import BUILTIN, is_builtin, run_of
    from moozi.run_dir import is_trained, load_run_config

    import_modules(list(modules))
    found = None
    for text in players:
        head = parse_player(text)[0]
        if is_builtin(head):
            continue
        run = run_of(head)[1].partition("@")[0]
        if not is_trained(run):
            why = "no such folder" if not Path(run).exists() else "no config.yaml in it"
            raise ConfigError(f"player {text!r}: {run} is not a run directory ({why}) nor an agent file, nor a built-in player "
                              f"({', '.join(BUILTIN)})")
        env = load_run_config(run).env
        if found is None:
            found = (env.name, dict(env.kwargs), tuple(env.modules))
        elif env.name != found[0]:
            raise ConfigError(f"the players' runs are of different games ({found[0]}, {env.name})")
    if game is None:
        if found is None:
            raise ConfigError("--game is needed when neither player is a run directory (e.g. --game pgx:connect_four)")
        return found[0], found[1], tuple(modules) + found[2]
    if found is not None and found[0] != game:
        raise ConfigError(f"--game {game}, but the players' run was trained on {found[0]}")
    if found is None and not modules and game.split(":", 1)[0] not in {n.split(":", 1)[0] for n in list_envs()}:
        raise ConfigError(f"--game {game}: no game of that name is registered; a game of your own needs "
                          "--module MODULE (the file that registers it, e.g. --module my_game)")
    return (game, {}, tuple(modules)) if found is None else (found[0], found[1], tuple(modules) + found[2])


def play_gated(player_a, player_b, pool, gate: dict, max_pairs: int, opening_plies: int, seed: int):
    """Play until the gate decides: ``(records in game order up to the deciding pair, clocks, gate result)``.

    ``gate``: ``{"method": "sprt", "elo0", "elo1", "alpha", "beta"}`` (checked after every round, pairs in
    game order; games of pairs after the deciding one are dropped), ``{"method": "hoeffding", "margin",
    "delta"}`` or ``{"method": "fixed", "threshold"}`` (every pair played)."""
    from moozi.eval import gating

    method = gate["method"]
    chunk = pool.num_envs // 2
    clocks = {"a": MoveClock(), "b": MoveClock()}
    if method == "hoeffding":
        max_pairs = math.ceil(gating.hoeffding_games(gate["margin"], gate["delta"]) / 2)
    records: list[GameRecord] = []
    result = {"method": method, **{k: v for k, v in gate.items() if k != "method"}}
    played = 0
    while played < max_pairs:
        n = min(chunk, max_pairs - played) if method == "sprt" else max_pairs
        more, _ = play_match(player_a, player_b, pool, n, opening_plies, seed, first_pair=played, clocks=clocks)
        records += more
        played += n
        if method == "sprt":
            scores = _pair_scores(records)
            decision, used, llr = gating.sprt_sequence(scores, gate["elo0"], gate["elo1"], gate["alpha"], gate["beta"])
            result.update(llr=llr, bounds=list(gating.sprt_bounds(gate["alpha"], gate["beta"])))
            if decision != "continue":
                result["dropped_games"] = sum(1 for r in records if r.pair >= used)
                records = [r for r in records if r.pair < used]
                break
    scores = _pair_scores(records)
    if method == "sprt":
        decision = gating.sprt_sequence(scores, gate["elo0"], gate["elo1"], gate["alpha"], gate["beta"])[0]
    elif method == "hoeffding":
        decision = gating.hoeffding_decision(scores, gate["margin"], gate["delta"])[0]
    else:
        decision = gating.fixed_decision(scores, gate["threshold"])
    result["decision"] = {"H1": "accept", "H0": "reject"}.get(decision, "undecided")
    result["pairs_used"] = len(scores)
    return records, clocks, result


def _pair_scores(records: list[GameRecord]) -> list[float]:
    by_pair: dict[int, list[float]] = {}
    for r in sorted(records, key=lambda r: r.game):
        by_pair.setdefault(r.pair, []).append(r.score_a)
    return [float(np.mean(v)) for v in by_pair.values() if len(v) == 2]


def run_match(a: str, b: str, game: str | None = None, pairs: int = 100, opening_plies: int = 2, seed: int = 0,
              batch: int = 256, records: str | None = None, pool_file: str | None = None,
              gate: dict | None = None, modules: tuple = ()) -> dict:
    """``moozi match`` on a two-player game: build both players and the game, play (until ``gate`` decides, with
    one), write the records; the summary (:func:`moozi.eval.single.match` also takes single-player games)."""
    import datetime
    import logging
    from pathlib import Path

    from moozi.config import ConfigError
    from moozi.envs.pool import import_modules, make_pool
    from moozi.eval.players import make_player

    if pairs < 1:
        raise ConfigError(f"--pairs {pairs}: allowed an integer >= 1")
    if opening_plies < 0:
        raise ConfigError(f"--opening-plies {opening_plies}: allowed an integer >= 0")
    if gate is not None and pool_file:
        raise ConfigError("--gate with --pool: gating games are chosen by a stopping rule, so they never enter a "
                          "rating pool; play a separate match for ratings")
    name, kwargs, modules = game_of([a, b], game, modules)
    import_modules(modules)
    size = max(2, min(2 * pairs, batch - batch % 2))
    t0 = time.perf_counter()
    pool = make_pool(name, size, seed=seed, modules=modules, **kwargs)
    players = []
    try:
        if not pool.spec.two_player:
            raise ConfigError(f"{name} is a single-player game: run_match plays two-player games "
                              "(moozi.eval.single.match plays both)")
        players = [make_player(a, name, seed=seed * 2 + 1, game_kwargs=kwargs),
                   make_player(b, name, seed=seed * 2 + 2, game_kwargs=kwargs)]
        gate_result = None
        if gate is None:
            games, clocks = play_match(players[0], players[1], pool, pairs, opening_plies, seed)
        else:
            games, clocks, gate_result = play_gated(players[0], players[1], pool, gate, pairs, opening_plies, seed)
    finally:
        for p in players:
            p.close()
        pool.close()
    specs = [p.spec.describe() for p in players]
    out = {"game": name, "seed": seed, "opening_plies": opening_plies, **summarize(games, *specs, clocks),
           "wall_s": time.perf_counter() - t0}
    if gate_result is not None:
        out["gate"] = gate_result
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    path = Path(records) if records else Path("matches") / f"match-{stamp}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {k: out[k] for k in ("game", "seed", "opening_plies", "a", "b")}
    write_records(path, games, specs[0]["id"], specs[1]["id"], meta)
    out["records"] = str(path)
    if pool_file:
        append_to_pool(pool_file, games, specs[0]["id"], specs[1]["id"], name, f"match-{stamp}")
        out["pool"] = str(pool_file)
    if out["distinct_games"] < 0.5:
        logging.getLogger("moozi").warning(
            "only %.0f%% of the games are distinct (deterministic players, or a small game): raise --opening-plies "
            "or give a player temp= or eps= so that the games count as independent", 100 * out["distinct_games"])
    return out


def append_to_pool(path, records: list[GameRecord], a_id: str, b_id: str, game: str, source: str) -> None:
    """Append games to a rating pool file (JSON lines ``{first, second, score_first, game, source}``; append-only)."""
    from pathlib import Path

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        for r in sorted(records, key=lambda r: r.game):
            j = r.to_json(a_id, b_id)
            f.write(json.dumps({"first": j["first"], "second": j["second"], "score_first": j["score_first"],
                                "game": game, "source": source}) + "\n")
