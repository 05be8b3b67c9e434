"""What do players score in pgx's 2048, and what tiles do they reach? The yardsticks of the Stochastic MuZero card.

- ``random``: a uniformly random legal move.
- ``greedy``: the legal move whose merges pay most right now (pgx's reward of that move, tried on a copy of the
  board; ties broken at random). No lookahead past the move and no learning.
- ``run``: a trained moozi run's checkpoint (``--run RUN[@CKPT]``, an agent file too), searching with its test
  planner greedily, as ``moozi eval`` plays it; here so that its best tiles are counted by the same code.

Each plays ``--games`` whole games (to the end: no move cap) in one batch on pgx's own simulator, game ``i``
from the same key for every player, and reports the mean score with a 95% interval (scipy's bootstrap), the
best tile's distribution and the moves per game, as one JSON line.

Usage: ``.venv/bin/python research/baselines_2048.py [--player greedy|random|run] [--run RUN@best] [--games 256]
[--seed 0] [--simulations N]``.
"""

from __future__ import annotations

import argparse
import json


def _run_chooser(text: str, simulations: int | None = None):
    """``choose(history, state, key) -> (env actions [B], history)`` of a trained run, and its empty history;
    ``simulations``: the test planner's simulations instead of the run's."""
    import dataclasses

    import jax
    import jax.numpy as jnp

    from moozi.model.history import history_init, history_observation, history_push
    from moozi.planner import plan
    from moozi.run_dir import open_run

    run, _, checkpoint = text.partition("@")
    opened = open_run(run, checkpoint or "latest")
    if opened.config.env.name != "pgx:2048":
        raise SystemExit(f"--run {text}: a run of {opened.config.env.name}, not pgx:2048")
    model, params, config = opened.model, jax.device_put(opened.params), opened.config
    spec, planner = opened.spec, config.test_planner
    if simulations is not None:
        planner = dataclasses.replace(planner, num_simulations=simulations)

    def choose(history, state, prev, key):
        frame = state.observation.astype(jnp.float32)
        history = history_push(history, frame, prev, jnp.zeros(frame.shape[0], bool))
        out = plan(model, params, key, history_observation(history, model.num_actions), state.legal_action_mask,
                   planner, discount=config.targets.discount, two_player=False, temperature=0.0)
        return out.env_action, history

    return choose, lambda games: history_init(games, spec.observation_shape, config.targets.history_length)


def play(player: str, games: int, seed: int, run: str | None = None, simulations: int | None = None):
    """``(scores [games], best tiles [games], moves [games])`` as numpy arrays."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from pgx.play2048 import Play2048

    env = Play2048()
    keys = jax.random.split(jax.random.key(seed), games)
    state = jax.vmap(env.init)(keys)
    run_choose, history = _run_chooser(run, simulations) if player == "run" else (None, lambda n: ())

    def choose(state, key):
        legal = state.legal_action_mask
        noise = jax.random.uniform(key, legal.shape)  # random tie-break (and the random player's whole choice)
        if player == "random":
            return jnp.argmax(jnp.where(legal, noise, -1.0))
        tried = jax.vmap(lambda a: env.step(state, a, key).rewards[0])(jnp.arange(4))
        return jnp.argmax(jnp.where(legal, tried + 1e-3 * noise, -jnp.inf))

    def body(carry):
        state, score, moves, key, hist, prev = carry
        key, k_act, k_step = jax.random.split(key, 3)
        if player == "run":
            actions, hist = run_choose(hist, state, prev, k_act)
        else:
            actions = jax.vmap(choose)(state, jax.random.split(k_act, games))
        live = ~state.terminated
        nxt = jax.vmap(env.step)(state, actions, jax.random.split(k_step, games))
        score = score + jnp.where(live, nxt.rewards[:, 0], 0.0)
        moves = moves + live.astype(jnp.int32)
        state = jax.tree.map(lambda n, o: jnp.where(live.reshape((-1,) + (1,) * (n.ndim - 1)), n, o), nxt, state)
        return state, score, moves, key, hist, (actions + 1).astype(jnp.int32)

    start = (state, jnp.zeros(games), jnp.zeros(games, jnp.int32), jax.random.key(seed + 1), history(games),
             jnp.zeros(games, jnp.int32))
    loop = jax.jit(lambda c: jax.lax.while_loop(lambda c: ~jnp.all(c[0].terminated), body, c))
    state, score, moves, *_ = loop(start)
    best = 2 ** jnp.max(jnp.argmax(state.observation, axis=-1) * jnp.any(state.observation, axis=-1), axis=(1, 2))
    return np.asarray(score), np.asarray(best), np.asarray(moves)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--player", choices=("random", "greedy", "run"), default="greedy")
    parser.add_argument("--run", help="RUN[@CKPT] (or an agent file) for --player run")
    parser.add_argument("--games", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--simulations", type=int, default=None,
                        help="--player run: search with N simulations instead of the run's test planner's")
    args = parser.parse_args(argv)
    if args.games < 2:
        parser.error("--games must be >= 2")
    if (args.player == "run") != (args.run is not None):
        parser.error("--run RUN goes with --player run (and only with it)")
    if args.simulations is not None and (args.player != "run" or args.simulations < 1):
        parser.error("--simulations N (N >= 1) goes with --player run")
    import numpy as np
    from scipy.stats import bootstrap

    score, best, moves = play(args.player, args.games, args.seed, args.run, args.simulations)
    ci = bootstrap((score,), np.mean, confidence_level=0.95, random_state=args.seed).confidence_interval
    tiles, counts = np.unique(best, return_counts=True)
    out = {"player": args.player, **({"run": args.run} if args.run else {}),
           **({"simulations": args.simulations} if args.simulations else {}), "games": args.games, "seed": args.seed,
           "score_mean": round(float(score.mean()), 1),
           "score_ci": [round(float(ci.low), 1), round(float(ci.high), 1)], "score_min": float(score.min()),
           "score_max": float(score.max()), "best_tile": {str(int(t)): int(c) for t, c in zip(tiles, counts)},
           "moves_mean": round(float(moves.mean()), 1)}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
