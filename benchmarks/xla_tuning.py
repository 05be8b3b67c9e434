"""XLA:CPU compile options per program: the learner update and the acting rollouts, A/B in one process.

For each preset: fills replay with a few segments of the untrained model's
play, then compiles the same learner update (and the same train and test
acting rollouts) with XLA's defaults and with moozi's tuned options
(:data:`moozi.xla_tuning.UPDATE_OPTIONS`), and times them in interleaved
rounds on the same inputs, so machine drift hits both alike. Prints one JSON
line per preset: the median milliseconds per call and tuned / default
speed-ups (> 1: the tuned program is faster).

Usage: ``python benchmarks/xla_tuning.py [--presets breakout cartpole ...] [--rounds 6] [--out FILE]``.
Only the device acting path is timed (JAX-native games). Run it alone on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from moozi.config import apply_overrides, config_from_dict
from moozi.learner import Learner
from moozi.parts import build_parts
from moozi.presets import load_preset
from moozi.workers import make_actor
from moozi.xla_tuning import UPDATE_OPTIONS

VARIANTS = {"default": None, "tuned": UPDATE_OPTIONS}


def _interleaved(calls: dict, rounds: int, base_name: str = "default") -> dict:
    """Median ms per call of each named zero-argument blocking function (it returns its number of calls), timed
    round-robin; ``speedup`` against ``base_name``'s."""
    times = {k: [] for k in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            t0 = time.perf_counter()
            per = call()
            times[name].append((time.perf_counter() - t0) * 1000 / per)
    base = float(np.median(times[base_name]))
    return {k: {"ms": round(float(np.median(v)), 2), "speedup": round(base / float(np.median(v)), 3)}
            for k, v in times.items()}


def _jit_variants(fn) -> dict:
    """``fn`` (a jitted program's Python function) compiled once per variant, nothing donated."""
    return {k: jax.jit(fn, compiler_options=v) for k, v in VARIANTS.items()}


def fill_replay(cfg, learner: Learner, actor, episodes) -> None:
    """Add ``episodes`` and keep acting until replay holds what the learner samples from."""
    steps = learner.add_episodes(episodes)
    while steps < max(cfg.schedule.min_replay_steps, 2000):
        episodes, _ = actor.run()
        steps += learner.add_episodes(episodes)


def rollout_call(actor, n: int = 3):
    """``call(f)``: ``n`` rollouts of ``f`` (a compiled ``actor.rollout``) from the actor's carry; returns ``n``."""
    temperature = jnp.float32(1.0)

    def call(f, n=n):
        carry = actor.carry
        for _ in range(n):
            carry, sample = f(actor.params, carry, temperature)
        jax.block_until_ready(sample)
        return n
    return call


def update_call(cfg, learner: Learner, num_batches: int = 10):
    """``call(f)``: ``f`` (a compiled learner update, nothing donated) on the same fixed batches from the learner's
    state, so every variant starts alike; returns the number of updates."""
    samples = [learner.replay.sample(cfg.schedule.batch_size, symmetries=1) for _ in range(num_batches)]
    batches = [jax.device_put((s.windows, s.positions, s.weights)) for s in samples]
    one = jnp.float32(1.0)

    def call(f):
        for b in batches:
            result = f(learner.state, *b, one)
        jax.block_until_ready(result)
        return len(batches)
    call.batches = batches
    return call


def measure(preset: str, rounds: int, overrides: list[str]) -> dict:
    cfg = config_from_dict(apply_overrides(load_preset(preset), overrides))
    env, model = build_parts(cfg)
    learner = Learner(model, env.spec, cfg.learner, cfg.targets, cfg.replay, jax.random.key(0))
    out = {"preset": preset}

    # Acting: the real actor's rollout, recompiled per variant (train and test roles).
    for role in ("train", "test"):
        actor = make_actor(cfg, env, model, role, jax.random.key(1))
        actor.set_params(*learner.params())
        if not hasattr(actor, "rollout"):
            out[role] = "host acting path: not timed"
            continue
        episodes, _ = actor.run()
        if role == "train":
            fill_replay(cfg, learner, actor, episodes)
        rollouts = _jit_variants(actor.rollout.__wrapped__)
        call = rollout_call(actor)
        for f in rollouts.values():
            call(f, n=1)
        out[role] = _interleaved({k: (lambda f=f: call(f)) for k, f in rollouts.items()}, rounds)

    # The learner's own update on ten fixed batches (not donated: every variant starts from the same state).
    updates = _jit_variants(learner._update.__wrapped__)
    call = update_call(cfg, learner)
    for f in updates.values():
        call(f)
    out["update"] = _interleaved({k: (lambda f=f: call(f)) for k, f in updates.items()}, rounds)
    return out


def main() -> None:
    from moozi.observe.machine import cpu_description

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--presets", nargs="+", default=["cartpole", "tictactoe", "breakout", "connect4"])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--override", dest="overrides", action="append", default=[])
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    lines = [json.dumps({"machine": cpu_description(), "jax": jax.__version__, "options": UPDATE_OPTIONS})]
    print(lines[-1], flush=True)
    for preset in args.presets:
        lines.append(json.dumps(measure(preset, args.rounds, args.overrides)))
        print(lines[-1], flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
