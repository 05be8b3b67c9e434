"""Device-path throughput: acting with search, its network-evaluation bound, and the learner.

Prints, for Breakout-MinAtar with the thesis residual network (32 channels,
6 blocks) at batch B and S simulations:

* acting: environment steps per second of the jitted ``lax.scan`` rollout
  (environment step + history stacking + search + action selection);
* bound: steps per second if a step cost only its (S + 1) network evaluations
  (one initial inference and S recurrent inferences on the batch), no search;
* their ratio (the share of acting time that is network evaluation);
* learner: samples per second of the jitted update at batch 256, K = 5.

With ``--preset P`` the game, network, planner, history, unroll, learner settings and batches are the preset's
(acting at its ``env.num_envs``, learning at its ``schedule.batch_size``; ``--batch`` / ``--simulations``
still override), so the bound is that of the network a run of P trains (device-path games only).

With ``--preset P --fused`` it times the device schedule's chunk (issue 89, item 2; :func:`moozi.fused.make_chunk`):
acting, a replay kept in device memory and learning fused into one compiled chunk of epochs (per epoch: the
preset's acting steps, every environment's steps written to its ring row and prioritised as the host buffer does,
the updates the preset's replay ratio owes, each on windows drawn by priority and re-prioritised), one host call per
chunk (``--unrolled``: the chunk's epochs and updates unrolled instead of looped: on XLA:CPU an update inside a
while loop ran 5-6x slower than alone, 618-635 against 99-122 ms, and 75 ms unrolled, breakout preset), against
the same parts run apart in the same process (a segment acted and stored, the epoch's updates alone):
``fused_env_steps_per_s``, ``fused_updates_per_s``, ``fused_vs_parts`` (the parts' time over the chunk's; above 1:
fusing saves time) and ``fused_projected_minutes_10m_frames``. The schedule that runs it in training is not built
yet.

Usage: ``python benchmarks/device_throughput.py [--preset P [--fused | --learner-bound]] [--batch 256]
[--simulations 25] [--planner puct|gumbel] [--steps 16] [--repeats 3] [--json]``. Numbers vary with
machine load; compare ratios measured in one run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

from moozi.config import ActingConfig, LearnerConfig, ModelConfig, PlannerConfig
from moozi.envs import make_env
from moozi.model.history import stacked_channels
from moozi.model.networks import build_model
from moozi.types import Batch, Targets
from moozi.update import init_train_state, make_update_fn
from moozi.workers.device_actor import DeviceActor
from moozi.workers.policy import PolicyConfig


def _time(fn, repeats: int) -> float:
    """Median seconds of ``fn()`` (which must block) over ``repeats`` calls after one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default=None, help="take game, network, planner and batches from this preset")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="with --preset: config overrides, as moozi train")
    p.add_argument("--env", default="gymnax:Breakout-MinAtar")
    p.add_argument("--batch", type=int, default=None, help="acting batch (default 256, or the preset's envs)")
    p.add_argument("--simulations", type=int, default=None, help="default 25, or the preset's planner's")
    p.add_argument("--planner", choices=["puct", "gumbel"], default="puct")
    p.add_argument("--steps", type=int, default=16, help="acting steps per timed rollout call")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--learner-batch", type=int, default=None, help="default 256, or the preset's batch_size")
    p.add_argument("--unroll", type=int, default=5)
    p.add_argument("--history", type=int, default=4)
    p.add_argument("--json", action="store_true", help="print one JSON line only")
    p.add_argument("--learner-bound", action="store_true",
                   help="with --preset: only the learner against its bound (samples_per_s, bound_samples_per_s, "
                        "learner_vs_bound)")
    p.add_argument("--fused", action="store_true",
                   help="with --preset: acting, a device replay and learning fused into one compiled chunk, against "
                        "the parts apart (fused_env_steps_per_s, fused_updates_per_s, fused_vs_parts)")
    p.add_argument("--epochs", type=int, default=4, help="with --fused: epochs per compiled chunk")
    p.add_argument("--unrolled", action="store_true",
                   help="with --fused: unroll the chunk's epochs and updates (XLA:CPU runs an update inside a while "
                        "loop about 6x slower than the same update called alone; unrolled, no slower)")
    args = p.parse_args()
    for chosen, mode, flag in ((args.fused, fused, "--fused"), (args.learner_bound, learner_bound, "--learner-bound")):
        if chosen:
            if not args.preset:
                raise SystemExit(f"{flag} needs --preset")
            result = mode(args)
            print(json.dumps(result) if args.json else "\n".join(f"{k}  {v}" for k, v in result.items()))
            return

    if args.preset:
        env, model, planner, history, discount, learner_cfg, acting, defaults = _from_preset(args)
        K = defaults["unroll"]
    else:
        env = make_env(args.env)
        num_actions = env.spec.num_actions + 1
        h, w, c = env.spec.observation_shape
        obs_shape = (h, w, stacked_channels(c, num_actions, args.history))
        model = build_model(ModelConfig(kind="resnet", channels=32, repr_blocks=6, dyn_blocks=6), obs_shape,
                            num_actions)
        planner = PlannerConfig(kind=args.planner, num_simulations=args.simulations or 25,
                                max_num_considered_actions=num_actions)
        history, discount, learner_cfg, acting, K = args.history, 0.997, LearnerConfig(), ActingConfig(), args.unroll
        defaults = {"batch": 256, "learner_batch": 256}
    if args.simulations:
        planner = dataclasses.replace(planner, num_simulations=args.simulations)
    spec, num_actions, obs_shape = env.spec, model.num_actions, model.observation_shape
    params = model.init(jax.random.key(0))
    B, S, T = args.batch or defaults["batch"], planner.num_simulations, args.steps

    # Acting: the real device actor (one lax.scan per segment, episodes assembled on the host).
    policy = PolicyConfig(spec=spec, planner=planner, discount=discount, history_length=history)
    actor = DeviceActor(env, model, policy, B, T, jax.random.key(1), acting=acting)
    actor.set_params(0, params)

    act_s = _time(actor.run, args.repeats)
    acting_steps_per_s = T * B / act_s

    # Bound: (S + 1) network evaluations per step, nothing else.
    obs = jax.random.normal(jax.random.key(2), (B, *obs_shape))

    @jax.jit
    def evaluations(params, obs):
        def one_step(_, acc):
            # Depend on the carried sum so XLA cannot hoist the work out of the loop
            # (an earlier version was loop-invariant and overstated the bound ~16x).
            out = model.initial_inference(params, obs + acc * 1e-12)

            def rec(i, carry_):
                hidden, total = carry_
                o = model.recurrent_inference(params, hidden, jnp.full((B,), 1 + i % (num_actions - 1), jnp.int32))
                return o.hidden, total + o.value.sum()

            _, total = jax.lax.fori_loop(0, S, rec, (out.hidden, out.value.sum()))
            return acc + total

        return jax.lax.fori_loop(0, T, one_step, jnp.float32(0.0))

    eval_s = _time(lambda: evaluations(params, obs).block_until_ready(), args.repeats)
    bound_steps_per_s = T * B / eval_s

    # Learner: update step at the learner batch size.
    LB = args.learner_batch or defaults["learner_batch"]
    rng = np.random.default_rng(0)
    targets = Targets(
        observation=rng.random((LB, *obs_shape), np.float32),
        next_observation=rng.random((LB, *obs_shape), np.float32),
        actions=rng.integers(0, num_actions, (LB, K)).astype(np.int32),
        policy=rng.dirichlet(np.ones(num_actions), (LB, K + 1)).astype(np.float32),
        value=rng.uniform(-5, 5, (LB, K + 1)).astype(np.float32),
        value_mask=np.ones((LB, K + 1), np.float32),
        reward=rng.uniform(0, 1, (LB, K + 1)).astype(np.float32),
        consistency_mask=np.ones((LB,), np.float32),
        priority=np.zeros((LB,), np.float32),
    )
    batch = jax.device_put(Batch(targets, np.ones((LB,), np.float32)))
    state = init_train_state(model, learner_cfg, jax.random.key(3))
    update = make_update_fn(model, learner_cfg)

    def learn():
        nonlocal state
        state, metrics, _ = update(state, batch)
        jax.block_until_ready(metrics["loss/total"])

    learn_s = _time(learn, args.repeats)
    result = {
        **({"preset": args.preset} if args.preset else {}),
        "env": spec.name,
        "device": str(jax.devices()[0]),
        "batch": B,
        "simulations": S,
        "planner": planner.kind,
        "acting_env_steps_per_s": round(acting_steps_per_s, 1),
        "network_bound_env_steps_per_s": round(bound_steps_per_s, 1),
        "acting_over_bound": round(acting_steps_per_s / bound_steps_per_s, 3),
        "learner_batch": LB,
        "unroll_steps": K,
        "learner_samples_per_s": round(LB / learn_s, 1),
        "learner_updates_per_s": round(1 / learn_s, 2),
    }
    if args.json:
        print(json.dumps(result))
        return
    width = max(map(len, result))
    for k, v in result.items():
        print(f"{k:<{width}}  {v}")


def _preset_config(args):
    """The preset's config with the command line's overrides."""
    from moozi.config import config_from_dict
    from moozi.config.loading import apply_overrides
    from moozi.presets import load_preset

    return config_from_dict(apply_overrides(load_preset(args.preset), args.overrides))


def learner_bound(args) -> dict:
    """The learner of a preset against its bound, at the preset's batch: ``Learner.train`` (replay sampling on the
    host, the transfer, targets built from raw windows, augmentation, the update, priorities written back) on a
    replay filled by acting with fresh params, against the same jitted update on one prepared batch of the same
    shapes, run back to back (``update_step`` with its targets given: forward, backward and Adam, nothing else).
    Prints ``samples_per_s``, ``bound_samples_per_s`` and ``learner_vs_bound``."""
    from moozi.learner import Learner, training_chance_code
    from moozi.parts import build_parts
    from moozi.update import build_batch

    config = _preset_config(args)
    env, model = build_parts(config)
    if env.spec.path != "device":
        raise SystemExit(f"--preset {args.preset}: {env.spec.name} is a host game; this benchmark acts on the device")
    batch_size = args.learner_batch or config.schedule.batch_size
    learner = Learner(model, env.spec, config.learner, config.targets, config.replay, jax.random.key(3))
    policy = PolicyConfig(spec=env.spec, planner=dataclasses.replace(config.planner, num_simulations=2),
                          discount=config.targets.discount, history_length=config.targets.history_length)
    actor = DeviceActor(env, model, policy, args.batch or config.env.num_envs, 16, jax.random.key(1),
                        acting=config.acting)  # 2 simulations: the replay only needs real episodes, fast
    actor.set_params(0, jax.device_get(learner.acting_params()))
    segments = 0
    while not learner.ready(max(2 * batch_size, 1000)) and segments < 500:
        learner.add_episodes(actor.run()[0])
        segments += 1
    n = 8  # updates per call: one host sync per call, as the schedules make them

    def learn():
        learner.train(n, batch_size)

    learn_s = _time(learn, args.repeats) / n
    sample = learner.replay.sample(batch_size, symmetries=1)
    batch = jax.device_put(build_batch(sample.windows, sample.positions, sample.weights, target_config=config.targets,
                                       num_actions=model.num_actions, frame_scale=env.spec.observation_scale,
                                       chance=bool(model.config.chance_outcomes),
                                       chance_code=training_chance_code(config.learner, env.spec,
                                                                        model.config.chance_outcomes)))
    state = jax.tree_util.tree_map(jnp.copy, learner.state)
    update = make_update_fn(model, config.learner)

    def bare():
        nonlocal state
        for _ in range(n):
            state, metrics, _ = update(state, batch)
        jax.block_until_ready(metrics["loss/total"])

    bound_s = _time(bare, args.repeats) / n
    return {"preset": args.preset, "overrides": args.overrides, "device": str(jax.devices()[0]), "batch": batch_size,
            "unroll_steps": config.targets.unroll_steps, "replay_steps": int(learner.replay.size),
            "samples_per_s": round(batch_size / learn_s, 1), "bound_samples_per_s": round(batch_size / bound_s, 1),
            "learner_vs_bound": round(bound_s / learn_s, 3)}


def fused(args) -> dict:
    """The fused chunk (module doc, ``--fused``; :func:`moozi.fused.make_chunk`) of a device-path preset, against
    its parts run apart."""
    import functools

    from moozi.fused import act_and_store, learn_from_ring, make_chunk, ring_rows
    from moozi.learner import training_chance_code
    from moozi.parts import build_parts
    from moozi.replay.ring import RING_FIELDS, ring_init, ring_ready
    from moozi.update import window_update
    from moozi.workers.device_actor import make_device_rollout

    config = _preset_config(args)
    env, model = build_parts(config)
    if env.spec.path != "device":
        raise SystemExit(f"--preset {args.preset}: {env.spec.name} is a host game; the fused chunk acts on the device")
    tc = config.targets
    B = args.batch or config.env.num_envs
    T = args.steps if args.steps != 16 else config.acting.steps_per_epoch
    LB = args.learner_batch or config.schedule.batch_size
    U = max(1, round(config.schedule.samples_per_env_step * B * T / LB))  # updates per epoch: the replay ratio
    L, ahead = tc.history_length, tc.unroll_steps + tc.td_steps
    rows = ring_rows(config.replay.capacity, B, T, L + ahead + 1)
    planner = dataclasses.replace(config.planner, num_simulations=args.simulations or config.planner.num_simulations)
    policy = PolicyConfig(spec=env.spec, planner=planner, discount=tc.discount, history_length=L)
    rollout = make_device_rollout(env, model, policy, T)
    learn = window_update(model, config.learner, tc, env.spec.observation_scale,
                          chance_code=training_chance_code(config.learner, env.spec, model.config.chance_outcomes))
    kw = dict(target_config=tc, replay_config=config.replay)
    chunk = make_chunk(rollout, learn, batch_size=LB, updates_per_epoch=U, epochs=args.epochs, unroll=args.unrolled,
                       **kw)
    actor = DeviceActor(env, model, policy, B, T, jax.random.key(1), acting=config.acting)
    state = init_train_state(model, config.learner, jax.random.key(3))
    _, probe = rollout(state.params, actor.carry, jnp.float32(1.0))
    ring = ring_init({k: getattr(probe, k) for k in RING_FIELDS}, rows)
    act = jax.jit(functools.partial(act_and_store, rollout, **kw))
    carry = actor.carry
    while not bool(jnp.any(ring_ready(ring, L, ahead))):  # one whole sequence
        carry, ring, _ = act(state.params, carry, ring, jnp.float32(1.0))
    keys = iter(jax.random.split(jax.random.key(4), 1000))
    temps = jnp.ones((args.epochs,), jnp.float32)
    box = {"state": state, "carry": carry, "ring": ring}

    def run_chunk():
        box["state"], box["carry"], box["ring"], out = chunk(box["state"], box["carry"], box["ring"], next(keys),
                                                             temps, 1.0)
        jax.block_until_ready(out["metrics"]["loss/total"])

    chunk_s = _time(run_chunk, args.repeats)
    # The same parts apart, in the same process: a segment acted and stored, and the epoch's updates alone.
    one = functools.partial(learn_from_ring, learn, batch_size=LB, **kw)

    @jax.jit
    def updates(state, ring, key):
        def step(c, k):
            st, rg, metrics = one(*c, k, 1.0)
            return (st, rg), metrics["loss/total"]
        return jax.lax.scan(step, (state, ring), jax.random.split(key, U), unroll=U if args.unrolled else 1)[1]

    act_s = _time(lambda: jax.block_until_ready(
        act(box["state"].params, box["carry"], jax.tree.map(jnp.copy, box["ring"]), jnp.float32(1.0))[2]["reward"]),
        args.repeats)
    learn_s = _time(lambda: jax.block_until_ready(updates(box["state"], box["ring"], next(keys))), args.repeats)
    env_steps = args.epochs * T * B
    return {"preset": args.preset, "overrides": args.overrides, "device": str(jax.devices()[0]), "envs": B,
            "steps_per_epoch": T, "updates_per_epoch": U, "batch": LB, "epochs_per_chunk": args.epochs,
            "ring_rows": rows, "simulations": planner.num_simulations, "unrolled": args.unrolled,
            "sampling": f"{config.replay.sampling} (the ring samples by priority, alpha {config.replay.alpha})",
            "fused_env_steps_per_s": round(env_steps / chunk_s, 1),
            "fused_updates_per_s": round(args.epochs * U / chunk_s, 2),
            "parts_env_steps_per_s": round(T * B / (act_s + learn_s), 1),
            "fused_vs_parts": round(args.epochs * (act_s + learn_s) / chunk_s, 3),
            "epoch_s": {"fused": round(chunk_s / args.epochs, 4), "acting": round(act_s, 4), "updates": round(learn_s, 4)},
            "fused_projected_minutes_10m_frames": round(1e7 / (env_steps / chunk_s) / 60, 1)}


def _from_preset(args):
    """The preset's game, network, planner, history, discount, learner and acting settings, and its batches."""
    from moozi.parts import build_parts

    config = _preset_config(args)
    env, model = build_parts(config)
    if env.spec.path != "device":
        raise SystemExit(f"--preset {args.preset}: {env.spec.name} is a host game; this benchmark times the "
                         "device path")
    return (env, model, config.planner, config.targets.history_length, config.targets.discount, config.learner,
            config.acting, {"batch": config.env.num_envs, "learner_batch": config.schedule.batch_size,
                            "unroll": config.targets.unroll_steps})


if __name__ == "__main__":
    main()
