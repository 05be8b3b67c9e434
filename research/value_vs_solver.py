"""A connect-four network's value and prior on the solved benchmark positions: does the value know who wins?

The grader (``moozi grade``) scores a player's moves; a search that steps the real game can hide a
network that learned nothing (the true simulator still finds the wins and blocks one or two moves
ahead). This reads the network alone, on the packaged positions of ``moozi.eval.grade``: its value
against the solved result of the position (win / draw / loss for the side to move), and the prior's
own most likely move graded as a move.

Found with it (docs/results/connect4-alphazero-fix): the AlphaZero-mode probe's value was 0.012 on
every position, while its search graded 17% mistakes.

Usage: ``python research/value_vs_solver.py RUN [RUN ...] [--per-category 200] [--checkpoint latest]``.
Prints one JSON line per run.
"""

from __future__ import annotations

import argparse
import json

import jax
import jax.numpy as jnp
import numpy as np

from moozi.envs.device import reset_batch, step_batch
from moozi.eval.grade import grade_actions, load_positions, select
from moozi.model.history import history_init, history_observation, history_push
from moozi.run_dir import open_run


def read_network(run: str, per_category: int, checkpoint: str = "latest") -> dict:
    _, positions = load_positions()
    positions = select(positions, per_category)
    opened = open_run(run, checkpoint, keep_env=True)
    env, model, params, length = opened.env, opened.model, opened.params, opened.config.targets.history_length
    reset = jax.jit(lambda keys: reset_batch(env, keys))
    step = jax.jit(lambda states, actions: step_batch(env, states, actions))
    push = jax.jit(history_push)
    infer = jax.jit(lambda p, h: model.initial_inference(p, history_observation(h, model.num_actions)))
    values, choices = np.zeros(len(positions)), np.zeros(len(positions), np.int32)
    by_length: dict[int, list[int]] = {}
    for i, p in enumerate(positions):
        by_length.setdefault(len(p.moves), []).append(i)
    for n, idx in sorted(by_length.items()):
        b = len(idx)
        states, ts = reset(jax.random.split(jax.random.key(0), b))
        history = push(history_init(b, env.spec.observation_shape, length), ts.observation,
                       jnp.zeros(b, jnp.int32), ts.is_first)
        for k in range(n):
            actions = jnp.asarray([positions[i].moves[k] for i in idx], jnp.int32)
            states, ts = step(states, actions)
            history = push(history, ts.observation, actions + 1, jnp.zeros(b, bool))
        out = infer(params, history)
        logits = np.where(np.asarray(ts.legal_actions), np.asarray(out.policy_logits)[:, 1:], -np.inf)
        values[idx] = np.asarray(out.value)
        choices[idx] = logits.argmax(-1)
    env.close()
    solved = np.sign([max(s for s in p.scores if s is not None) for p in positions])
    by_result = {name: {"positions": int((solved == s).sum()), "mean_value": round(float(values[solved == s].mean()), 4),
                        "sd": round(float(values[solved == s].std()), 4)}
                 for name, s in (("win", 1), ("draw", 0), ("loss", -1)) if (solved == s).any()}
    spread = values.std()
    corr = float(np.corrcoef(values, solved)[0, 1]) if spread > 0 else 0.0
    prior = grade_actions(positions, choices)
    return {"run": run, "updates": int(opened.meta["counters"]["updates"]), "positions": len(positions),
            "value_sd": round(float(spread), 4), "corr_value_result": round(corr, 3), "value_by_result": by_result,
            "prior_mistakes": {k: round(v["rate"], 3) for k, v in prior.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--per-category", type=int, default=200)
    parser.add_argument("--checkpoint", default="latest")
    args = parser.parse_args()
    for run in args.runs:
        print(json.dumps(read_network(run, args.per_category, args.checkpoint)), flush=True)


if __name__ == "__main__":
    main()
