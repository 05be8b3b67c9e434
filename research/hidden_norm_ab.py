"""The hidden state's min-max scaling, two ways: reductions (``min``/``max``) against gathers at argmin/argmax.

Both give the same forward value. Their gradients differ in how they are made:
JAX's rule for ``max`` divides by the count of elements equal to the result,
which is 0 (so the gradient NaN) when the compiler computes the operand twice
and rounds the two copies differently; a gather has no count. moozi uses the
gather (:func:`moozi.model.core.normalize_hidden`). This script measures,
on one preset, what that costs: the learner's update and the train acting
rollout compiled with each, timed in interleaved rounds on the same inputs,
and how far the two updates' gradients are apart.

Usage: ``python research/hidden_norm_ab.py [--preset breakout] [--rounds 6]``. Run it alone on an idle machine.
Prints one JSON line: median ms per call and each variant's speed-up over the reductions (> 1: faster).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import jax
import jax.numpy as jnp

from moozi import xla_tuning
from moozi.config import apply_overrides, config_from_dict
from moozi.learner import Learner
from moozi.losses import loss_fn
from moozi.model import core
from moozi.observe.machine import cpu_description
from moozi.parts import build_parts
from moozi.presets import load_preset
from moozi.update import build_batch
from moozi.workers import make_actor


def _timing_helpers():
    """benchmarks/xla_tuning.py's interleaved timing and its acting / update calls (benchmarks/ is no package)."""
    spec = importlib.util.spec_from_file_location("moozi_bench_xla_tuning", Path(__file__).with_name("xla_tuning.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reduce_normalize(hidden):
    """The scaling with ``min``/``max`` reductions (moozi before 2026-11-27)."""
    flat = hidden.reshape(hidden.shape[0], -1)
    lo = flat.min(axis=-1, keepdims=True)
    hi = flat.max(axis=-1, keepdims=True)
    return ((flat - lo) / jnp.maximum(hi - lo, 1e-5)).reshape(hidden.shape)


VARIANTS = {"reduce": reduce_normalize, "gather": core.normalize_hidden}


def _compiled(fn, args_for_trace, compiler_options=None):
    """``fn`` jitted once per variant, each traced (so compiled) with that variant's scaling in place."""
    out = {}
    for name, norm in VARIANTS.items():
        core.normalize_hidden = norm
        f = jax.jit(fn, compiler_options=compiler_options)
        jax.block_until_ready(f(*args_for_trace))
        out[name] = f
    core.normalize_hidden = VARIANTS["gather"]
    return out


def measure(preset: str, rounds: int) -> dict:
    cfg = config_from_dict(apply_overrides(load_preset(preset), []))
    if not cfg.model.normalize_hidden:
        raise SystemExit(f"preset {preset!r} does not scale its hidden state (model.normalize_hidden: false)")
    env, model = build_parts(cfg)
    learner = Learner(model, env.spec, cfg.learner, cfg.targets, cfg.replay, jax.random.key(0))
    out = {"preset": preset}

    bench = _timing_helpers()
    actor = make_actor(cfg, env, model, "train", jax.random.key(1))
    actor.set_params(*learner.params())
    episodes, _ = actor.run()
    bench.fill_replay(cfg, learner, actor, episodes)
    if hasattr(actor, "rollout"):
        call = bench.rollout_call(actor)
        rollouts = _compiled(actor.rollout.__wrapped__, (actor.params, actor.carry, jnp.float32(1.0)))
        out["acting"] = bench._interleaved({k: (lambda f=f: call(f)) for k, f in rollouts.items()}, rounds, "reduce")

    call = bench.update_call(cfg, learner)
    one = jnp.float32(1.0)
    updates = _compiled(learner._update.__wrapped__, (learner.state, *call.batches[0], one), xla_tuning.update_options())
    out["update"] = bench._interleaved({k: (lambda f=f: call(f)) for k, f in updates.items()}, rounds, "reduce")

    # Gradient agreement on one of the preset's batches, its targets built as the learner builds them.
    windows, positions, weights = call.batches[0]
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
