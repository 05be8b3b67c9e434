"""Host-path versus device-path acting throughput on the same game (docs/architecture.md §2).

MinAtar Breakout two ways at batch B with the same model and planner:

* device: ``gymnax:Breakout-MinAtar``, environment step + history + search
  in one jitted ``lax.scan`` per segment (:class:`moozi.workers.device_actor.DeviceActor`);
* host: ``minatar:breakout`` (the original Python package, sticky actions
  0.1 as its default), a :class:`~moozi.envs.pool.HostPool` stepped from
  Python with one jitted policy call per step (:class:`moozi.workers.pool_actor.PoolActor`);
  optionally with worker processes (``--workers``).

Also printed: the host pool's stepping alone (random actions) and the host
policy call alone, so the gap can be attributed. The ratio device / host is
what the issue bounds (host within 2x). Numbers vary with machine load:
compare the ratio measured in one run.

Usage: ``python benchmarks/host_vs_device.py [--batch 64] [--model small|thesis|mlp]
[--planner gumbel|puct] [--simulations 8] [--steps 16] [--repeats 5] [--workers 0] [--json]``
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

from moozi.config import ActingConfig, ModelConfig, PlannerConfig
from moozi.envs import make_env
from moozi.envs.pool import make_pool
from moozi.model.history import stacked_channels
from moozi.model.networks import build_model
from moozi.workers.device_actor import DeviceActor
from moozi.workers.policy import PolicyConfig
from moozi.workers.pool_actor import PoolActor

MODELS = {
    # The breakout preset's residual model, the thesis residual model, and an MLP.
    "small": ModelConfig(kind="resnet", channels=32, repr_blocks=2, dyn_blocks=2, pred_blocks=1, proj_blocks=1,
                         head_hidden=64, support_size=20),
    "thesis": ModelConfig(kind="resnet", channels=32, repr_blocks=6, dyn_blocks=6),
    "mlp": ModelConfig(kind="mlp", mlp_hidden=(256, 256), mlp_embedding=128, head_hidden=128, support_size=20),
}


def _median_rate(fn, work: int, repeats: int) -> float:
    """``work`` units per second: median over ``repeats`` timed calls after one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return work / float(np.median(times))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--model", choices=sorted(MODELS), default="small")
    p.add_argument("--planner", choices=["puct", "gumbel"], default="gumbel")
    p.add_argument("--simulations", type=int, default=8)
    p.add_argument("--history", type=int, default=2)
    p.add_argument("--steps", type=int, default=16, help="acting steps per timed call")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--workers", type=int, default=0, help="host pool worker processes (0: in-process)")
    p.add_argument("--json", action="store_true", help="print one JSON line only")
    args = p.parse_args()
    B, T, L = args.batch, args.steps, args.history

    device_env = make_env("gymnax:Breakout-MinAtar")
    pool = make_pool("minatar:breakout", B, seed=0, num_workers=args.workers)
    if pool.spec.num_actions != device_env.spec.num_actions:
        # MinAtar's full action set has 6 actions, gymnax's Breakout 3; use the minimal set for a like-for-like model.
        pool.close()
        pool = make_pool("minatar:breakout", B, seed=0, num_workers=args.workers, minimal_action_set=True)
    assert pool.spec.observation_shape == device_env.spec.observation_shape, (pool.spec, device_env.spec)
    num_actions = device_env.spec.num_actions + 1
    h, w, c = device_env.spec.observation_shape
    model = build_model(MODELS[args.model], (h, w, stacked_channels(c, num_actions, L)), num_actions)
    params = model.init(jax.random.key(0))
    planner = PlannerConfig(kind=args.planner, num_simulations=args.simulations,
                            max_num_considered_actions=num_actions)

    policy = PolicyConfig(spec=device_env.spec, planner=planner, discount=0.997, history_length=L)
    device_actor = DeviceActor(device_env, model, policy, B, T, jax.random.key(1), acting=ActingConfig())
    device_actor.set_params(0, params)
    actor = PoolActor(pool, model, PolicyConfig(spec=pool.spec, planner=planner, discount=0.997, history_length=L), T,
                      jax.random.key(1), acting=ActingConfig())
    actor.set_params(0, params)

    def device():
        device_actor.run()

    def host():
        actor.run()

    rng = np.random.default_rng(0)

    def pool_only():
        for _ in range(T):
            pool.step(rng.integers(0, pool.spec.num_actions, size=B))

    ts, state = actor.timestep, actor.state

    def policy_only():
        for _ in range(T):
            _, sample, _ = actor._policy(actor.params, state, ts, jnp.float32(1.0), np.zeros(B, np.int32))
            jax.block_until_ready(sample.action)

    work = B * T
    result = {
        "batch": B, "model": args.model, "planner": args.planner, "simulations": args.simulations,
        "workers": args.workers,
        "device_env_steps_per_s": _median_rate(device, work, args.repeats),
        "host_env_steps_per_s": _median_rate(host, work, args.repeats),
        "host_pool_only_env_steps_per_s": _median_rate(pool_only, work, args.repeats),
        "host_policy_only_env_steps_per_s": _median_rate(policy_only, work, args.repeats),
    }
    result["device_over_host"] = result["device_env_steps_per_s"] / result["host_env_steps_per_s"]
    pool.close()
    if args.json:
        print(json.dumps(result))
        return
    print(f"MinAtar Breakout, batch {B}, {args.model} model, {args.planner} {args.simulations} simulations, "
          f"host workers {args.workers}")
    for k, v in result.items():
        if k.endswith("_per_s") or k == "device_over_host":
            print(f"  {k:34s} {v:10.1f}" if k.endswith("_per_s") else f"  {k:34s} {v:10.2f}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
