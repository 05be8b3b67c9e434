"""Old (before the middle-layer reshape) vs new, side by side in one run.

Measures, for each tree, alternating A/B rounds in fresh processes:

* learner updates/s of the ``breakout`` preset's learner (batch 128, K = 5),
  in chunks of 8 updates as the preset's schedule runs them (old: sample ->
  update -> update_priorities per update; new: ``Learner.train(8)``), on a
  replay filled with 40k synthetic Breakout steps;
* bytes per stored step of an ``atari-pong`` replay buffer and the bytes of
  one of its batches (old: targets built on the host; new: raw windows).

With ``--train-minutes M`` it also runs the whole training loop
(``moozi train --preset breakout --minutes M``) once per tree, old first, and
prints env steps/s and updates/s over the run (compilation included in both).

Usage: ``.venv/bin/python research/middle_layer_ab.py [--old COMMIT] [--rounds 3] [--seconds 20]
[--train-minutes 0] [--skip-learner]``
(default COMMIT: d89b030, the last commit before the reshape). The old tree
is checked out with ``git worktree`` into a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = r'''
import json, sys, time
import jax, numpy as np
NEW = True
try:
    import moozi.workers  # noqa: F401
except ImportError:
    NEW = False
from moozi.config import config_from_dict
from moozi.types import Trajectory
if NEW:
    from moozi.presets import load_preset
else:
    from moozi.cli import load_preset
from moozi.driver import build_parts

what, seconds = sys.argv[1], float(sys.argv[2])

def episodes(spec, num_actions, n_steps, uint8, seed=0):
    rng = np.random.default_rng(seed)
    # Trees before the reshape have no observation_scale in their spec (ALE frames were pixels / 255).
    scale = getattr(spec, "observation_scale", 1 / 255 if spec.name.startswith("ale:") else 1.0)
    out, total = [], 0
    while total < n_steps:
        n = int(rng.integers(50, 400))
        frames = rng.integers(0, 256 if scale != 1.0 else 2, (n, *spec.observation_shape))
        frames = frames.astype(np.uint8) if uint8 else (frames * scale).astype(np.float32)
        pol = rng.dirichlet(np.ones(num_actions - 1), n).astype(np.float32)
        out.append(Trajectory(frames=frames, actions=np.r_[rng.integers(1, num_actions, n - 1), 0].astype(np.int32),
            rewards=np.r_[0.0, rng.random(n - 1) < 0.05].astype(np.float32), root_values=rng.normal(size=n).astype(np.float32),
            root_policies=np.c_[np.zeros((n, 1), np.float32), pol], to_play=np.zeros(n, np.int32), first=np.int32(0),
            last=np.int32(n - 1), is_terminal=np.bool_(True), random_actions=rng.random(n) < 0.1))
        total += n
    return out

def nbytes(tree):
    return int(sum(np.asarray(x).nbytes for x in jax.tree_util.tree_leaves(tree)))

if what == "learner":
    config = config_from_dict(load_preset("breakout"))
    env, model = build_parts(config)
    trajs = episodes(env.spec, model.num_actions, 40_000, uint8=NEW)
    if NEW:
        from moozi.learner import Learner
        learner = Learner(model, env.spec, config.learner, config.targets, config.replay, jax.random.key(0), 0)
        learner.add_episodes(trajs)
        chunk = lambda: learner.train(8, 128)
    else:
        from moozi.learner import Learner
        from moozi.replay import ReplayBuffer
        replay = ReplayBuffer(config.replay, config.targets, num_actions=model.num_actions, frame_shape=env.spec.observation_shape)
        for t in trajs:
            replay.add(t)
        learner = Learner(model, config.learner, jax.random.key(0))
        rng = np.random.default_rng(0)
        def chunk():
            for _ in range(8):
                batch, idx = replay.sample(128, rng)
                metrics, prio = learner.update(batch)
                replay.update_priorities(idx, prio)
    chunk(); chunk()  # compile and warm up
    t0, n = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        chunk(); n += 8
    jax.block_until_ready(learner.state.params)
    print(json.dumps({"updates_per_s": n / (time.perf_counter() - t0)}))
else:
    config = config_from_dict(load_preset("atari-pong"))
    from moozi.envs import make_env
    from moozi.model.networks import build_model
    from moozi.model.history import stacked_channels
    spec = make_env("ale:Pong").spec
    a = spec.num_actions + 1
    cap = 20_000
    trajs = episodes(spec, a, cap, uint8=NEW, seed=1)
    batch_size = config.schedule.batch_size if NEW else config.driver.batch_size
    import dataclasses
    rcfg = dataclasses.replace(config.replay, capacity=cap)
    if NEW:
        from moozi.replay import ReplayBuffer
        buf = ReplayBuffer(rcfg, config.targets, spec.observation_shape, a, frame_dtype=spec.observation_dtype, seed=0)
        for t in trajs:
            buf.add(t)
        per_step = buf.nbytes / cap
        batch = buf.sample(batch_size)
    else:
        from moozi.replay import ReplayBuffer
        buf = ReplayBuffer(rcfg, config.targets, num_actions=a, frame_shape=spec.observation_shape)
        for t in trajs:
            buf.add(t)
        per_step = sum(v.nbytes for k, v in vars(buf).items() if isinstance(v, np.ndarray) and v.shape[:1] == (cap,)) / cap
        batch = buf.sample(batch_size, np.random.default_rng(0))
    print(json.dumps({"bytes_per_step": per_step, "batch_bytes": nbytes(batch), "batch_size": batch_size,
                      "frame_dtype": str(buf._frames.dtype)}))
'''


def run(tree: Path, what: str, seconds: float) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", PROBE, what, str(seconds)], env=env, capture_output=True,
                         text=True, check=False)
    if out.returncode:
        raise SystemExit(f"{tree} {what} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def train(tree: Path, minutes: float, run_dir: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "JAX_PLATFORMS": "cpu"}
    cmd = [sys.executable, "-m", "moozi.cli", "train", "--preset", "breakout", "--run-dir", str(run_dir),
           "--minutes", str(minutes)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"{tree} train failed:\n{out.stderr[-3000:]}")
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    wall = summary["wall_s"]
    return {"env_steps": summary["env_steps"], "updates": summary["updates"], "wall_s": round(wall, 1),
            "env_steps_per_s": round(summary["env_steps"] / wall, 1), "updates_per_s": round(summary["updates"] / wall, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", default="d89b030")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--train-minutes", type=float, default=0.0)
    ap.add_argument("--skip-learner", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), args.old], check=True,
                       capture_output=True)
        try:
            trees = {"old": old, "new": ROOT}
            if args.train_minutes > 0:
                for name, tree in trees.items():
                    result = train(tree, args.train_minutes, Path(tmp) / f"run-{name}")
                    print(name, "breakout training loop:", json.dumps(result), flush=True)
            if args.skip_learner:
                return
            for name, tree in trees.items():
                print(name, "atari-pong replay:", json.dumps(run(tree, "replay", 0)), flush=True)
            speeds: dict[str, list[float]] = {"old": [], "new": []}
            for r in range(args.rounds):
                for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
                    speeds[name].append(run(trees[name], "learner", args.seconds)["updates_per_s"])
                    print(f"round {r} {name}: {speeds[name][-1]:.2f} updates/s", flush=True)
            ratios = [n / o for n, o in zip(speeds["new"], speeds["old"])]
            print(json.dumps({"old_updates_per_s": speeds["old"], "new_updates_per_s": speeds["new"],
                              "new_over_old": ratios}))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=False)


if __name__ == "__main__":
    main()
