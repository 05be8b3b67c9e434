"""The hidden state's min-max scaling, two ways: reductions (``min``/``max``) against gathers at argmin/argmax.

Both give the same forward value. Their gradients differ in how they are made:
JAX's rule for ``max`` divides by the count of elements equal to the result,
which is 0 (so the gradient NaN) when the compiler computes the operand twice
and rounds the two copies differently; a gather has no count. moozi uses the
gather (:func:`moozi.model.networks.normalize_hidden`). This script measures,
on one preset, what that costs: the learner's update and the train acting
rollout compiled with each, timed in interleaved rounds on the same inputs,
and how far the two updates' gradients are apart.

Usage: ``python benchmarks/hidden_norm_ab.py [--preset breakout] [--rounds 6]``. Run it alone on an idle machine.
Prints one JSON line: median ms per call and reduce / gather time ratios (> 1: the gather is faster).
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

from moozi import xla_tuning
from moozi.config import apply_overrides, config_from_dict
from moozi.driver.parts import build_parts
from moozi.learner import Learner
from moozi.losses import loss_fn
from moozi.model import networks
from moozi.observe.machine import cpu_description
from moozi.presets import load_preset
from moozi.update import build_batch
from moozi.workers import make_actor


def reduce_normalize(hidden):
    """The scaling with ``min``/``max`` reductions (moozi before 2026-11-27)."""
    flat = hidden.reshape(hidden.shape[0], -1)
    lo = flat.min(axis=-1, keepdims=True)
    hi = flat.max(axis=-1, keepdims=True)
    return ((flat - lo) / jnp.maximum(hi - lo, 1e-5)).reshape(hidden.shape)


VARIANTS = {"reduce": reduce_normalize, "gather": networks.normalize_hidden}


def _compiled(fn, args_for_trace, compiler_options=None):
    """``fn`` jitted once per variant, each traced (so compiled) with that variant's scaling in place."""
    out = {}
    for name, norm in VARIANTS.items():
        networks.normalize_hidden = norm
        f = jax.jit(fn, compiler_options=compiler_options)
        jax.block_until_ready(f(*args_for_trace))
        out[name] = f
    networks.normalize_hidden = VARIANTS["gather"]
    return out


def _interleaved(calls: dict, rounds: int) -> dict:
    times = {k: [] for k in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            t0 = time.perf_counter()
            per = call()
            times[name].append((time.perf_counter() - t0) * 1000 / per)
    ms = {k: float(np.median(v)) for k, v in times.items()}
    return {"ms": {k: round(v, 2) for k, v in ms.items()}, "reduce_over_gather": round(ms["reduce"] / ms["gather"], 3)}


def measure(preset: str, rounds: int) -> dict:
    cfg = config_from_dict(apply_overrides(load_preset(preset), []))
    if not cfg.model.normalize_hidden:
        raise SystemExit(f"preset {preset!r} does not scale its hidden state (model.normalize_hidden: false)")
    env, model = build_parts(cfg)
    learner = Learner(model, env.spec, cfg.learner, cfg.targets, cfg.replay, jax.random.key(0))
    out = {"preset": preset}

    actor = make_actor(cfg, env, model, "train", jax.random.key(1))
    actor.set_params(*learner.params())
    steps = 0
    while steps < max(cfg.schedule.min_replay_steps, 2000):
        episodes, _ = actor.run()
        steps += learner.add_episodes(episodes)
    if hasattr(actor, "_rollout"):
        temperature = jnp.float32(1.0)
        rollouts = _compiled(actor._rollout.__wrapped__, (actor.params, actor.carry, temperature))

        def rollout_call(f, n=3):
            carry = actor.carry
            for _ in range(n):
                carry, sample = f(actor.params, carry, temperature)
            jax.block_until_ready(sample)
            return n

        out["acting"] = _interleaved({k: (lambda f=f: rollout_call(f)) for k, f in rollouts.items()}, rounds)

    samples = [learner.replay.sample(cfg.schedule.batch_size, symmetries=1) for _ in range(10)]
    batches = [jax.device_put((s.windows, s.positions, s.weights)) for s in samples]
    one = jnp.float32(1.0)
    updates = _compiled(learner._update.__wrapped__, (learner.state, *batches[0], one), xla_tuning.update_options())

    def update_call(f):
        for b in batches:
            result = f(learner.state, *b, one)
        jax.block_until_ready(result)
        return len(batches)

    out["update"] = _interleaved({k: (lambda f=f: update_call(f)) for k, f in updates.items()}, rounds)

    # Gradient agreement on one of the preset's batches, its targets built as the learner builds them.
    windows, positions, weights = batches[0]
    batch = build_batch(windows, positions, weights, target_config=cfg.targets, num_actions=model.num_actions,
                        frame_scale=env.spec.observation_scale)
    grads = _compiled(jax.grad(lambda p, b: loss_fn(p, model, b, cfg.learner)[0]), (learner.state.params, batch))
    g = {k: f(learner.state.params, batch) for k, f in grads.items()}
    rel = jax.tree.map(lambda a, b: float(jnp.max(jnp.abs(a - b)) / (jnp.max(jnp.abs(a)) + 1e-12)), g["reduce"], g["gather"])
    out["grad_max_rel_diff"] = float(max(jax.tree.leaves(rel)))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="breakout")
    p.add_argument("--rounds", type=int, default=6)
    a = p.parse_args()
    print(json.dumps({"machine": cpu_description(), "jax": jax.__version__}))
    print(json.dumps(measure(a.preset, a.rounds)))


if __name__ == "__main__":
    main()
