"""What a checkpoint's replay part costs: bytes, seconds and peak memory, with a full buffer of a preset.

The replay part holds the live steps only, streamed in chunks (``ReplayBuffer.checkpoint_chunks``,
``moozi.checkpoint.write_chunked_part``). This script fills a buffer of the preset's capacity with episodes
of random play in the preset's own game (frames as the bridge stores them; search policies as visit
fractions of the preset's simulations; random values and priorities), past its capacity so the oldest ones
were evicted, then writes and reads the replay part in each of these ways, each in a fresh process:

* ``chunks-z1``: what moozi writes (zlib level 1 where it saves a tenth);
* ``chunks-raw``: the same chunks uncompressed;
* ``whole-slots``: the format before (checkpoint format 2): every slot of every array in one msgpack blob.

For each it reports the part's bytes (and per stored step), the write and read seconds (read: checksum,
decode and load into a fresh buffer), and the peak resident memory above the process's resident memory
before the write / read (Linux's high-water mark, reset at the start; moozi.observe.memory.PeakRss), also as
a share of the buffer's preallocated size (the buffer read into is made resident first, so the read's peak is
its own, not the buffer's pages being filled).

Usage: ``python research/checkpoint_cost.py --preset breakout [--steps N] [--out FILE]``. Run it alone on
an idle machine. Prints one JSON line per way, and a summary line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

WAYS = ("chunks-z1", "chunks-raw", "whole-slots")


def _config(preset: str, overrides: list[str]):
    from moozi.config import apply_overrides, config_from_dict
    from moozi.presets import load_preset

    return config_from_dict(apply_overrides(load_preset(preset), overrides))


def _random_frames(env, steps: int, seed: int):
    """``steps`` frames (and episode ends) of random legal play, in the dtype the game stores."""
    from moozi.envs.contract import encode_frames

    spec = env.spec
    rng = np.random.default_rng(seed)
    frames, lasts = [], []
    if spec.path == "host":  # one environment, episodes capped at 2,000 steps so they fit any buffer
        episode, length = 0, 0
        step = env.reset(seed)
        for _ in range(steps):
            frames.append(encode_frames(spec, np.asarray(step.observation, np.float32)[None])[0])
            length += 1
            end = step.terminated or step.truncated or length >= 2000
            lasts.append(bool(end))
            if end:
                episode, length = episode + 1, 0
                step = env.reset(seed + episode)
            else:
                step = env.step(int(rng.choice(np.flatnonzero(step.legal_actions))))
        return np.stack(frames), np.array(lasts)
    import jax

    from moozi.envs.device import reset_batch, step_batch

    batch = 256
    states, ts = reset_batch(env, jax.random.split(jax.random.key(seed), batch))
    step_fn = jax.jit(lambda s, a: step_batch(env, s, a))
    cols, ends = [], []
    for _ in range(-(-steps // batch)):
        legal = np.asarray(ts.legal_actions)
        u = rng.random(legal.shape) * legal
        actions = np.where(legal.any(1), u.argmax(1), 0).astype(np.int32)
        cols.append(encode_frames(spec, np.asarray(ts.observation)))
        ends.append(np.asarray(ts.is_last))
        states, ts = step_fn(states, actions)
    # environment b's steps in order, environments one after another: whole episodes stay together (each
    # environment's unfinished one is cut at its end)
    frames = np.stack(cols, 1).reshape(-1, *spec.observation_shape)
    ends = np.stack(ends, 1)
    ends[:, -1] = True
    lasts = ends.reshape(-1)
    return frames[:steps], lasts[:steps]


def make_episodes(preset: str, steps: int, seed: int, path: Path) -> dict:
    from moozi.parts import build_parts

    config = _config(preset, [])
    env, _ = build_parts(config)
    t = time.perf_counter()
    frames, lasts = _random_frames(env, steps, seed)
    env.close()
    np.savez(path, frames=frames, lasts=lasts)
    return {"steps": int(frames.shape[0]), "episodes": int(lasts.sum()), "play_s": time.perf_counter() - t,
            "frame_shape": list(frames.shape[1:]), "frame_dtype": str(frames.dtype)}


def _fill(config, spec, data, seed: int):
    from moozi.replay import ReplayBuffer
    from moozi.types import Trajectory

    num_actions = spec.num_actions + 1
    buf = ReplayBuffer(config.replay, config.targets, spec.observation_shape, num_actions, spec.observation_dtype,
                       seed=seed)
    rng = np.random.default_rng(seed)
    sims = config.planner.num_simulations
    frames, lasts = data["frames"], data["lasts"]
    cuts = np.flatnonzero(lasts) + 1
    starts = np.r_[0, cuts[:-1]] if cuts.size else np.array([0])
    stops = cuts if cuts.size else np.array([frames.shape[0]])
    for start, stop in zip(starts, stops):
        n = int(stop - start)
        if n < 1 or n > buf.config.capacity:
            continue
        counts = rng.multinomial(sims, np.full(num_actions - 1, 1.0 / (num_actions - 1)), size=n)
        policies = np.zeros((n, num_actions), np.float32)
        policies[:, 1:] = counts / sims
        buf.add(Trajectory(frames=frames[start:stop], actions=np.r_[rng.integers(1, num_actions, n - 1), 0].astype(np.int32),
                           rewards=np.r_[0.0, rng.choice([0.0, 1.0], n - 1, p=[0.9, 0.1])].astype(np.float32),
                           root_values=rng.normal(size=n).astype(np.float32), root_policies=policies,
                           to_play=np.zeros(n, np.int32), first=np.int32(0), last=np.int32(n - 1),
                           is_terminal=np.bool_(True)),
                priorities=np.abs(rng.normal(size=n)))
    return buf


def measure(preset: str, way: str, episodes: Path, folder: Path) -> dict:
    """One way, in this (fresh) process: fill, write, read back."""
    from moozi.checkpoint import PendingCheckpoint, load_checkpoint, read_chunked_part
    from moozi.observe.memory import PeakRss, rss_mb
    from moozi.parts import build_parts

    config = _config(preset, [])
    env, _ = build_parts(config)
    spec = env.spec
    env.close()
    with np.load(episodes) as data:
        buf = _fill(config, spec, {"frames": data["frames"], "lasts": data["lasts"]}, seed=0)
    out = {"preset": preset, "way": way, "capacity": buf.config.capacity, "stored_steps": buf.size,
           "added_steps": buf.total_steps_added, "buffer_mb": buf.nbytes / 2**20, "rss_before_write_mb": rss_mb()}
    t = time.perf_counter()
    with PeakRss() as peak:
        pending = PendingCheckpoint(folder, 1)
        if way == "whole-slots":
            pending.write_part("replay", buf.whole_slots_state())
        else:
            pending.write_chunked("replay", *buf.checkpoint_chunks(), compress_level=1 if way == "chunks-z1" else 0)
        path = pending.commit({})
    out["write_s"] = time.perf_counter() - t
    out["write_peak_extra_mb"] = peak.extra_mb
    part = pending.parts["replay"]
    out["part_mb"] = part["bytes"] / 2**20
    out["part_bytes_per_step"] = part["bytes"] / max(buf.size, 1)
    fresh = type(buf)(buf.config, buf.target_config, buf.frame_shape, buf.num_actions, buf.frame_dtype)
    del buf
    for name in fresh._ARRAYS:  # resident before the read, as a filled buffer is: the peak is the read's own
        getattr(fresh, "_" + name)[...] = getattr(fresh, "_" + name).copy()
    out["rss_before_read_mb"] = rss_mb()
    t = time.perf_counter()
    with PeakRss() as peak:
        if way == "whole-slots":
            fresh.load_state_dict(load_checkpoint(path, parts=["replay"])[0]["replay"])
        else:
            fresh.load_chunks(*read_chunked_part(path, "replay"))
    out["read_s"] = time.perf_counter() - t
    out["read_peak_extra_mb"] = peak.extra_mb
    for key in ("write", "read"):
        extra = out[f"{key}_peak_extra_mb"]
        out[f"{key}_peak_over_buffer"] = None if extra is None else (out["buffer_mb"] + extra) / out["buffer_mb"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", required=True)
    parser.add_argument("--steps", type=int, default=None, help="random-play steps (default: 1.1 x capacity)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="append the JSON lines to this file")
    parser.add_argument("--_way", choices=WAYS, help=argparse.SUPPRESS)
    parser.add_argument("--_episodes", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--_folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._way:  # a child: one way, printed as JSON
        print(json.dumps(measure(args.preset, args._way, args._episodes, args._folder)))
        return 0
    from moozi.observe.machine import cpu_description

    lines = []
    with tempfile.TemporaryDirectory(prefix="moozi-ckpt-cost-") as tmp:
        episodes = Path(tmp) / "episodes.npz"
        steps = args.steps or int(1.1 * _config(args.preset, []).replay.capacity)
        made = make_episodes(args.preset, steps, args.seed, episodes)
        for way in WAYS:
            folder = Path(tmp) / way
            res = subprocess.run([sys.executable, __file__, "--preset", args.preset, "--_way", way,
                                  "--_episodes", str(episodes), "--_folder", str(folder)],
                                 capture_output=True, text=True, check=True)
            line = json.loads(res.stdout.strip().splitlines()[-1])
            line.update({"random_play": made, "machine": cpu_description()})
            lines.append(line)
            print(json.dumps(line), flush=True)
    z1, whole = lines[0], lines[2]
    summary = {"preset": args.preset, "summary": True,
               "bytes_whole_over_chunks": whole["part_mb"] / z1["part_mb"],
               "write_s_whole_over_chunks": whole["write_s"] / z1["write_s"]}
    print(json.dumps(summary))
    if args.out:
        with open(args.out, "a") as f:
            for line in [*lines, summary]:
                f.write(json.dumps(line) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
