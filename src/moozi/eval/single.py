"""Judging single-player games: two agents on the same games, compared game by game.

A single-player "match" plays both agents from the same starting states: games are played in chunks of at most
128 at once, and game ``i`` of chunk ``k`` is the first episode of environment ``i`` of an actor seeded from
``(seed, k)``, whose reset key depends on that seed alone, so both agents start game ``i`` alike (what happens
after the first move depends on their moves, and on the game's randomness drawn along the way). The paired
difference of returns (A - B) gets a 95% bootstrap interval (scipy's BCa over the games, paired) and the exact
sign test's p-value on the games one of them won.

Player strings: ``RUN[@CKPT]`` (a run, an agent file, ``zoo:NAME``) with ``,sims=N``, ``,temp=T``, ``,eps=P``
(the test settings of ``moozi eval``), and ``prior:RUN`` (its prior alone: one simulation).
"""

from __future__ import annotations

import json
import time

import numpy as np

from moozi.config import ConfigError

CHUNK = 128
OPTIONS = {"sims": "simulations", "temp": "temperature", "eps": "random_move_prob"}


def single_player(text: str):
    """``(run, checkpoint, TestSettings, PlayerSpec-like dict)`` of a single-player player string."""
    from moozi.eval.evaluate import TestSettings
    from moozi.eval.players.registry import parse_player
    from moozi.run_dir import is_trained

    head, options = parse_player(text)
    kind = "prior" if head.startswith("prior:") else "mcts"
    run, _, checkpoint = head.removeprefix("prior:").removeprefix("az:").removeprefix("mcts:").partition("@")
    if not is_trained(run):
        raise ConfigError(f"player {text!r}: a single-player game is judged between trained agents: RUN[@CKPT], "
                          "an agent file or zoo:NAME (prior:RUN for its prior alone)")
    extra = sorted(set(options) - set(OPTIONS))
    if extra:
        raise ConfigError(f"player {text!r}: unknown option(s) {extra}; allowed in a single-player game: sims, temp, eps")
    settings = {OPTIONS[k]: v for k, v in options.items()}
    if kind == "prior":
        settings["simulations"] = 1
    return run, checkpoint or "latest", TestSettings(**settings), {"kind": kind, "settings": dict(sorted(options.items()))}


def paired_returns(text: str, games: int, seed: int, game: str | None = None) -> tuple[np.ndarray, dict, dict]:
    """``(returns [games], the player's spec, its run's env config)`` over the games of :func:`chunk_seed`."""
    from moozi.eval.evaluate import agent_return, play
    from moozi.eval.players.base import PlayerSpec
    from moozi.run_dir import run_identity

    run, checkpoint, settings, spec = single_player(text)
    returns, meta, config = [], None, None
    for k, start in enumerate(range(0, games, CHUNK)):
        n = min(CHUNK, games - start)
        config, two_player, results, meta = play(run, "random", n, chunk_seed(seed, k), checkpoint, settings=settings)
        if two_player:
            raise ConfigError(f"player {text!r} plays a two-player game ({config.env.name})")
        if game is not None and config.env.name != game:
            raise ConfigError(f"player {text!r} was trained on {config.env.name}, not {game}")
        returns += [agent_return(g.trajectory, g.agent_seat, False) for g in results]
    player = PlayerSpec(spec["kind"], tuple(spec["settings"].items()), run, int(meta["counters"]["updates"]),
                        run_identity(run))
    return np.asarray(returns, np.float64), player.describe(), config.env


def chunk_seed(seed: int, chunk: int) -> int:
    """The actor seed of chunk ``chunk`` of a single-player match seeded ``seed``."""
    return int(np.random.default_rng([int(seed), 0x51E, int(chunk)]).integers(2**31))


def paired_difference(a: np.ndarray, b: np.ndarray, seed: int = 0, resamples: int = 9999) -> dict:
    """Mean of ``a - b`` over paired games with a 95% bootstrap interval (BCa; percentile where BCa cannot be
    computed) and the exact sign test's p-value on the games that differ; ``better`` / ``worse`` / ``ties``."""
    from scipy.stats import bootstrap

    from moozi.eval.stats import sign_test

    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    plus, minus = int((d > 0).sum()), int((d < 0).sum())
    out = {"value": float(d.mean()), "low": float(d.mean()), "high": float(d.mean()), "p_value": sign_test(plus, minus),
           "better": plus, "worse": minus, "ties": int(d.size - plus - minus)}
    if d.size > 1 and np.ptp(d) > 0:
        for method in ("BCa", "percentile"):
            r = bootstrap((d,), np.mean, n_resamples=resamples, confidence_level=0.95, method=method,
                          rng=np.random.default_rng(seed))
            low, high = float(r.confidence_interval.low), float(r.confidence_interval.high)
            if np.isfinite(low) and np.isfinite(high):
                out.update(low=low, high=high, interval=method)
                break
    return out


def single_player_match(a: str, b: str, games: int = 100, seed: int = 0, gate: dict | None = None) -> dict:
    """``moozi match A B`` on a single-player game: both on the same games; returns and their paired difference
    (``returns``: the two ``[games]`` arrays, for the records). ``gate``: A passes when the difference's 95%
    interval lies above 0 (a fixed-size paired test; the sequential gates are for pair scores of two-player
    games)."""
    from moozi.eval.evaluate import mean_interval

    if gate is not None and gate.get("method") != "fixed":
        raise ConfigError(f"--gate {gate.get('method')}: a single-player game is gated on the paired difference of "
                          "returns (A passes when its 95% interval lies above 0): give --gate fixed")

    if games < 2:
        raise ConfigError(f"--games {games}: a paired comparison needs at least 2 games")
    ra, spec_a, env_a = paired_returns(a, games, seed)
    rb, spec_b, env_b = paired_returns(b, games, seed, env_a.name)
    if env_a != env_b:
        raise ConfigError(f"{a!r} and {b!r} play {env_a.name} under different settings ({env_a.kwargs} against "
                          f"{env_b.kwargs}): their returns do not compare")

    def summary(r):
        mean, low, high = mean_interval(r)
        return {"mean": mean, "low": low, "high": high, "min": float(r.min()), "max": float(r.max())}

    diff = paired_difference(ra, rb, seed)
    out = {"game": env_a.name, "seed": seed, "games": games, "a": spec_a, "b": spec_b,
           "a_return": summary(ra), "b_return": summary(rb), "paired_difference": diff, "returns": (ra, rb)}
    if gate is not None:
        out["gate"] = {"method": "paired", "decision": "accept" if diff["low"] > 0 else "reject", "games": games}
    return out


def match(a: str, b: str, game: str | None = None, pairs: int = 100, opening_plies: int = 2, seed: int = 0,
          batch: int = 256, records: str | None = None, pool_file: str | None = None, gate: dict | None = None,
          modules: tuple = (), games: int | None = None) -> dict:
    """``moozi match A B``: a two-player game's paired games (:func:`moozi.eval.arena.run_match`), or on a
    single-player game ``games`` games (default 100) of each agent from the same starting states."""
    from moozi.envs.pool import import_modules
    from moozi.eval.arena import game_of, run_match

    name, kwargs, mods = game_of([a, b], game, modules)
    import_modules(mods)
    if not is_two_player(name, kwargs):
        return _single_player_match(a, b, games, seed, records, pool_file, gate)
    if games is not None:
        raise ConfigError(f"--games {games}: {name} is a two-player game, played in pairs: give --pairs")
    return run_match(a, b, game=game, pairs=pairs, opening_plies=opening_plies, seed=seed, batch=batch,
                     records=records, pool_file=pool_file, gate=gate, modules=modules)


def is_two_player(name: str, kwargs: dict) -> bool:
    from moozi.envs import make_env

    env = make_env(name, **kwargs)
    try:
        return bool(env.spec.two_player)
    finally:
        env.close()


def _single_player_match(a: str, b: str, games: int | None, seed: int, records, pool_file, gate) -> dict:
    """A single-player game's match: both agents on the same games; the records hold each game's two returns."""
    import datetime
    from pathlib import Path

    t0 = time.perf_counter()
    out = single_player_match(a, b, games or 100, seed, gate)
    out["wall_s"] = time.perf_counter() - t0
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    path = Path(records) if records else Path("matches") / f"match-{stamp}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    returns = out.pop("returns")
    lines = [json.dumps({k: out[k] for k in ("game", "seed", "a", "b")})]
    lines += [json.dumps({"game": i, "a": float(x), "b": float(y)}) for i, (x, y) in enumerate(zip(*returns))]
    from moozi.files import write_atomic

    write_atomic(path, lambda tmp: tmp.write_text("\n".join(lines) + "\n"), "the match records")
    out["records"] = str(path)
    if pool_file:  # each agent's return per starting state; `moozi ratings` ranks them by return
        if gate is not None:
            raise ConfigError("--gate with --pool: gating games are chosen by a rule, so they never enter a pool")
        for who, rs in (("a", returns[0]), ("b", returns[1])):
            append_returns(pool_file, out[who]["id"], rs, seed, out["game"], f"match-{stamp}")
        out["pool"] = str(pool_file)
    return out


def append_returns(pool_file, player_id: str, returns, seed: int, game: str, source: str) -> None:
    """Append one agent's return per starting state (``{player, return, start, game, source}``, start
    ``"SEED:I"``) to a pool file (append-only; :func:`moozi.eval.ratings.returns_table` reads it)."""
    from pathlib import Path

    Path(pool_file).parent.mkdir(parents=True, exist_ok=True)
    with open(pool_file, "a") as f:
        for i, r in enumerate(returns):
            f.write(json.dumps({"player": player_id, "return": float(r), "start": f"{seed}:{i}", "game": game,
                                "source": source}) + "\n")
