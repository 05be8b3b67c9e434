"""What can be scored in a gymnax MinAtar game within its 1000-move cap? A reference for issue 44's table.

A player that knows the rules: at every move it tries each action in the true simulator, follows each with
``--horizon`` moves of a scripted policy and keeps the action whose rollout scores most (discounted 0.99 per
move) without losing. No learning: a yardstick, not an agent. The scripted policies:

- ``space_invaders``: fire when an alien is in the cannon's column, else walk to the nearest column with one;
  never step under a bullet about to land or an alien at the bottom. The rules bound the score: the cannon
  fires at most once every 5 moves (``shot_cool_down``) and a bullet removes at most one alien (+1 each), so
  no game of 1000 moves scores above 200.
- ``breakout``: walk the paddle under the ball. The lookahead picks where the paddle meets the ball, which
  decides the bounce (gymnax reflects the ball one way off the paddle's old cell and another off its new one).

gymnax MinAtar is deterministic from its reset, so ``--random-move-prob 0`` plays one game ``--games`` times;
the presets' tests take one random move in 100 (``0.01``).

Usage: ``.venv/bin/python research/minatar_reference.py [--game space_invaders] [--horizon 20] [--games 32]
[--random-move-prob 0.01] [--seed 0]``; prints one JSON line (mean, 95% interval, min, max, moves per game).
"""

from __future__ import annotations

import argparse
import json


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", choices=("space_invaders", "breakout"), default="space_invaders")
    parser.add_argument("--horizon", type=int, default=20, help="moves of scripted play after each tried action")
    parser.add_argument("--games", type=int, default=32)
    parser.add_argument("--random-move-prob", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.horizon < 1 or args.games < 1 or not 0.0 <= args.random_move_prob <= 1.0:
        parser.error("--horizon and --games must be >= 1, --random-move-prob in [0, 1]")

    import gymnax
    import jax
    import jax.numpy as jnp
    import numpy as np

    from moozi.eval.evaluate import mean_interval

    if args.game == "space_invaders":
        env, params = gymnax.make("SpaceInvaders-MinAtar")  # minimal action set: 0 noop, 1 left, 2 right, 3 fire

        def scripted(state):
            pos = state.pos
            has_alien = state.alien_map.sum(0) > 0
            nearest = jnp.argmin(jnp.where(has_alien, jnp.abs(jnp.arange(10) - pos), 99))
            # A bullet on row 8 lands on row 9 this move; an alien on rows 8-9 ends the game over the cannon.
            unsafe = (state.e_bullet_map[8] > 0) | (state.alien_map[8] > 0) | (state.alien_map[9] > 0)
            lands = jnp.array([pos, jnp.maximum(pos - 1, 0), jnp.minimum(pos + 1, 9), pos])  # cannon after each
            wanted = jnp.where(jnp.logical_and(state.shot_timer == 0, has_alien[pos]), 3,
                               jnp.where(nearest < pos, 1, jnp.where(nearest > pos, 2, 0)))
            order = jnp.array([wanted, 0, 1, 2])
            return order[jnp.argmax(~unsafe[lands[order]])]
        bound = int(params.max_steps_in_episode) // int(params.shot_cool_down)
    else:
        env, params = gymnax.make("Breakout-MinAtar")  # minimal action set: 0 noop, 1 left, 2 right

        def scripted(state):
            return jnp.where(state.ball_x < state.pos, 1, jnp.where(state.ball_x > state.pos, 2, 0))
        bound = None
    actions = int(env.num_actions)
    if actions != {"space_invaders": 4, "breakout": 3}[args.game]:
        raise RuntimeError(f"expected gymnax's minimal action set, got {actions} actions")

    def rollout_score(state, first, key):
        def move(carry, k):
            s, dead, score, i = carry
            action = jnp.where(i == 0, first, scripted(s))
            _, s, reward, done, _ = env.step_env(k, s, action, params)
            return (s, dead | done, score + jnp.where(dead, 0.0, reward * 0.99 ** i), i + 1), None
        (_, dead, score, _), _ = jax.lax.scan(move, (state, False, 0.0, 0), jax.random.split(key, args.horizon))
        return score - 100.0 * dead

    def game(key):
        key, reset_key = jax.random.split(key)
        _, state = env.reset(reset_key, params)

        def move(carry, k):
            s, over, total, moves = carry
            k_roll, k_coin, k_random, k_step = jax.random.split(k, 4)
            action = jnp.argmax(jax.vmap(lambda a: rollout_score(s, a, k_roll))(jnp.arange(actions)))
            action = jnp.where(jax.random.uniform(k_coin) < args.random_move_prob,
                               jax.random.randint(k_random, (), 0, actions), action)
            _, s, reward, done, _ = env.step_env(k_step, s, action, params)
            return (s, over | done, total + jnp.where(over, 0.0, reward), moves + jnp.where(over, 0, 1)), None

        cap = int(params.max_steps_in_episode)
        (_, _, total, moves), _ = jax.lax.scan(move, (state, False, 0.0, 0), jax.random.split(key, cap))
        return total, moves

    totals, moves = jax.jit(jax.vmap(game))(jax.random.split(jax.random.key(args.seed), args.games))
    totals, moves = np.asarray(totals), np.asarray(moves)
    mean, low, high = mean_interval(totals)
    out = {"game": f"gymnax:{env.name}", "horizon": args.horizon, "games": args.games,
           "random_move_prob": args.random_move_prob, "seed": args.seed, "mean": round(mean, 2),
           "ci95": [round(low, 2), round(high, 2)],
           "min": float(totals.min()), "max": float(totals.max()), "moves_per_game": round(float(moves.mean()), 1),
           "rules_bound": bound}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
