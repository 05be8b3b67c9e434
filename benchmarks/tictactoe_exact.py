"""Exact loss probability of a tic-tac-toe run (pgx or OpenSpiel) against the perfect player.

Usage: .venv/bin/python benchmarks/tictactoe_exact.py RUN_DIR [--checkpoint latest|best|UPDATES]

Walks every game the perfect opponent of `moozi eval --opponent perfect`
(uniform among its optimal moves) can play against the agent's test policy
(the run's test planner with no noise, as `moozi eval` plays it; Gumbel with
gumbel_scale 0 is deterministic), once with the agent moving first and once
second, and prints the probability of each outcome and the losing lines.
Observations come from the game's own environment, replayed move by move.
Needs history_length 1. `exact_outcomes` is the same as a function (used by
benchmarks/learning.py --exact-tictactoe).
"""
import argparse
import sys

import jax
import jax.numpy as jnp
import numpy as np

from moozi.driver import build_parts
from moozi.envs.pool import make_pool
from moozi.eval import perfect
from moozi.model.history import history_init, history_observation, history_push
from moozi.planner import plan, search
from moozi.true_model import network_evaluator, true_root, true_step


def cells_of(moves):  # mover-relative board: +1 mover, -1 opponent (x moves first)
    c = np.zeros(9, np.int8)
    for i, m in enumerate(moves):
        c[m] = 1 if i % 2 == len(moves) % 2 else -1
    return c


def exact_outcomes(run, checkpoint: str = "latest") -> dict:
    """``{"first": {...}, "second": {...}, "updates", "checkpoint"}``: per seat P(win), P(draw), P(loss) and
    the losing lines ``[(probability, moves)]`` of the run's checkpoint against the perfect player."""
    from moozi.run_dir import open_run

    opened = open_run(run, checkpoint)  # a run directory, an agent file or zoo:NAME
    cfg = opened.config
    assert cfg.targets.history_length == 1, "this walk feeds one frame per decision"
    env, model = build_parts(cfg)
    params, meta = opened.params, opened.meta
    sol = perfect.solve()
    A = model.num_actions

    simulator = cfg.model.dynamics == "simulator"  # AlphaZero mode: the search steps the game itself
    if simulator and env.spec.path == "host":
        raise SystemExit(f"{run}: AlphaZero mode needs the JAX-native game")
    if env.spec.path == "host":
        env.close()
        pool = make_pool(cfg.env.name, 1, seed=0, **cfg.env.kwargs)

        def observe(moves):
            ts = pool.reset(0)
            for m in moves:
                ts = pool.step(np.asarray([m]))
            return np.asarray(ts.observation[0]), np.asarray(ts.legal_actions[0])
    else:
        reset, step = jax.jit(env.reset), jax.jit(env.step)

        def observe(moves, with_state=False):
            state, ts = reset(jax.random.key(0))
            for m in moves:
                state, ts = step(state, jnp.int32(m))
            out = np.asarray(ts.observation), np.asarray(ts.legal_actions)
            return (*out, jax.tree_util.tree_map(lambda x: x[None], state)) if with_state else out

    @jax.jit
    def agent_move(frame, prev_action, is_first, legal, state=None):
        h = history_push(history_init(1, frame.shape[1:], 1), frame, prev_action, is_first)
        kw = dict(discount=cfg.targets.discount, two_player=True, temperature=jnp.zeros(1), gumbel_scale=jnp.zeros(1))
        if state is None:
            out = plan(model, params, jax.random.key(0), history_observation(h, A), legal, cfg.test_planner, **kw)
        else:
            evaluate = network_evaluator(model)
            root = true_root(evaluate, params, state, h, jnp.zeros(1, jnp.uint32))
            out = search(params, jax.random.key(0), root, true_step(env, evaluate), legal, cfg.test_planner, **kw)
        return out.action[0] - 1

    def walk(moves, seat, prob, out):
        board = int(perfect.encode(jnp.asarray(cells_of(moves))))
        if sol.terminal[board]:  # value -1: the player who just moved made a line; 0: a full board
            to_move_lost = sol.value[board] < 0
            key = "draw" if not to_move_lost else ("loss" if len(moves) % 2 == seat else "win")
            out[key] += prob
            if key == "loss":
                out["lines"].append((prob, moves))
            return
        if len(moves) % 2 == seat:
            frame, legal, *state = observe(moves, with_state=True) if simulator else observe(moves)
            prev = moves[-1] + 1 if moves else 0
            a = int(agent_move(jnp.asarray(frame)[None], jnp.asarray([prev]), jnp.asarray([not moves]),
                               jnp.asarray(legal)[None], *state))
            walk(moves + [a], seat, prob, out)
        else:
            opt = np.flatnonzero(sol.optimal[board])
            for m in opt:
                walk(moves + [int(m)], seat, prob / len(opt), out)

    result = {"updates": int(meta["counters"]["updates"]), "checkpoint": meta["path"],
              "env": cfg.env.name, "test_planner": f"{cfg.test_planner.kind} {cfg.test_planner.num_simulations}"
              + (" on the simulator (AlphaZero mode)" if simulator else "")}
    for seat, name in ((0, "first"), (1, "second")):
        out = {"win": 0.0, "draw": 0.0, "loss": 0.0, "lines": []}
        walk([], seat, 1.0, out)
        out["lines"] = sorted(out["lines"], reverse=True)
        result[name] = out
    try:
        pool.close()
    except NameError:
        pass
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir")
    p.add_argument("--checkpoint", default="latest")
    args = p.parse_args(argv)
    r = exact_outcomes(args.run_dir, args.checkpoint)
    print(f"{args.run_dir}: {r['env']}, {r['updates']} updates ({r['checkpoint']}), test planner {r['test_planner']} "
          "simulations")
    for name in ("first", "second"):
        out = r[name]
        print(f"agent moving {name}: P(win) = {out['win']:.4f}, P(draw) = {out['draw']:.4f}, "
              f"P(loss) = {out['loss']:.4f} ({len(out['lines'])} losing lines)")
        for prob, m in out["lines"][:10]:
            print(f"   p = {prob:.4f}: {' '.join(('x' if i % 2 == 0 else 'o') + str(c) for i, c in enumerate(m))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
