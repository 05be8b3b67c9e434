"""What ``learner.augment_symmetries`` (or another switch, ``--key``) costs: learner updates/s with it off and
on (``--off`` / ``--on`` give other values, e.g. ``--key learner.devices --off 1 --on 2 --host-devices 2`` for the
data-parallel learner over two host devices).

For one preset (default ``tictactoe``) and one boolean config key (default
``learner.augment_symmetries``; e.g. ``--key model.mover_relative --preset
openspiel-tictactoe``), alternating rounds in fresh processes
(off, on, off, on, ...): a ``Learner`` built from the preset, its replay filled
with synthetic two-player episodes shaped like the preset's game (random binary frames,
Dirichlet search policies), then ``Learner.train(8, batch)`` chunks for
``--seconds`` after two warm-up chunks. Prints each round and the ratio of the
median updates/s (on / off), measured in this one run.

Usage: ``.venv/bin/python benchmarks/augment_cost.py [--preset tictactoe] [--key SECTION.NAME] [--off V]
[--on V] [--set KEY=VALUE ...] [--host-devices N] [--rounds 3] [--seconds 20] [--json]``; ``--set`` holds other keys
fixed in both kinds of round (e.g. ``--key learner.augment_symmetries --off false --on true --set
learner.l2_coef=0``)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

PROBE = r'''
import json, sys, time
import jax, numpy as np, yaml
from moozi.config import apply_overrides, config_from_dict
from moozi.driver import build_parts
from moozi.learner import Learner
from moozi.presets import load_preset
from moozi.types import Trajectory

preset, augment, seconds, key = sys.argv[1], yaml.safe_load(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
raw = apply_overrides(load_preset(preset), json.loads(sys.argv[5]))  # --set: the same in both kinds of round
section, name = key.split(".")
raw.setdefault(section, {})[name] = augment
config = config_from_dict(raw)
env, model = build_parts(config)
spec, a = env.spec, model.num_actions
rng = np.random.default_rng(0)
trajs, total = [], 0
while total < 20_000:
    n = int(rng.integers(5, 10))
    frames = rng.integers(0, 2, (n, *spec.observation_shape)).astype(spec.observation_dtype)
    pol = rng.dirichlet(np.ones(a - 1), n).astype(np.float32)
    trajs.append(Trajectory(frames=frames, actions=np.r_[rng.integers(1, a, n - 1), 0].astype(np.int32),
        rewards=np.r_[np.zeros(n - 1), 1.0].astype(np.float32), root_values=rng.uniform(-1, 1, n).astype(np.float32),
        root_policies=np.c_[np.zeros((n, 1), np.float32), pol], to_play=(np.arange(n) % 2).astype(np.int32),
        first=np.int32(0), last=np.int32(n - 1), is_terminal=np.bool_(True)))
    total += n
learner = Learner(model, spec, config.learner, config.targets, config.replay, jax.random.key(0), 0)
learner.add_episodes(trajs)
batch = config.schedule.batch_size
learner.train(8, batch); learner.train(8, batch)  # compile and warm up
t0, n = time.perf_counter(), 0
while time.perf_counter() - t0 < seconds:
    learner.train(8, batch); n += 8
jax.block_until_ready(learner.state.params)
print(json.dumps({"updates_per_s": n / (time.perf_counter() - t0), "symmetries": len(spec.symmetries or ())}))
'''


def probe(preset: str, augment: str, seconds: float, key: str, host_devices: int = 0, held=()) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    if host_devices:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={host_devices}").strip()
    out = subprocess.run([sys.executable, "-c", PROBE, preset, augment, str(seconds), key, json.dumps(list(held))], env=env,
                         capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"{key}={augment} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="tictactoe")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--key", default="learner.augment_symmetries", help="a config key, SECTION.NAME")
    p.add_argument("--off", default="false", help="its value in the 'off' rounds (YAML, default false)")
    p.add_argument("--on", default="true", help="its value in the 'on' rounds (YAML, default true)")
    p.add_argument("--set", dest="held", action="append", default=[], metavar="KEY=VALUE",
                   help="another config key, the same in both kinds of round")
    p.add_argument("--host-devices", type=int, default=0, help="JAX host devices in each probe (0: XLA's default)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    rows = {"off": [], "on": []}
    for r in range(args.rounds):
        for mode in ("off", "on"):
            res = probe(args.preset, args.off if mode == "off" else args.on, args.seconds, args.key, args.host_devices,
                        args.held)
            rows[mode].append(res["updates_per_s"])
            if not args.json:
                print(f"round {r} {args.key} {mode:3s}: {res['updates_per_s']:.1f} updates/s "
                      f"({res['symmetries']} symmetries)", flush=True)
    med = {m: statistics.median(v) for m, v in rows.items()}
    report = {"preset": args.preset, "key": args.key, "off": args.off, "on": args.on,
              "held": args.held, "host_devices": args.host_devices, "rounds": rows, "median": med, "ratio_on_off": med["on"] / med["off"]}
    print(json.dumps(report) if args.json else
          f"median: off {med['off']:.1f}, on {med['on']:.1f} updates/s; on / off = {report['ratio_on_off']:.3f}")


if __name__ == "__main__":
    main()
