"""Micro-benchmark: cost of ``ReplayBuffer.sample(256)`` vs buffer size.

Fills buffers of 1e3 and 1e5 steps (tiny 4x4x1 binary frames, episodes of 100
steps, thesis target settings L=4, K=5, N=10) and times

* ``sample_ids(256)``: index sampling + importance weights only (sum tree /
  rank order), and
* ``sample(256)``: the same plus gathering the raw windows (targets are built
  later, inside the learner's jitted update).

Run: ``python research/replay_sampling.py [--sizes 1000 100000] [--repeats 50]``.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from moozi.config import ReplayConfig, TargetConfig
from moozi.replay import ReplayBuffer
from moozi.types import Trajectory

NUM_ACTIONS = 5
EPISODE = 100


def episode(rng: np.random.Generator, n: int = EPISODE) -> Trajectory:
    return Trajectory(
        frames=rng.integers(0, 2, (n, 4, 4, 1)).astype(np.uint8),
        actions=np.r_[rng.integers(1, NUM_ACTIONS, n - 1), 0].astype(np.int32),
        rewards=np.r_[0.0, rng.normal(size=n - 1)].astype(np.float32),
        root_values=rng.normal(size=n).astype(np.float32),
        root_policies=rng.dirichlet(np.ones(NUM_ACTIONS), n).astype(np.float32),
        to_play=np.zeros(n, np.int32),
        first=np.int32(0),
        last=np.int32(n - 1),
        is_terminal=np.bool_(True),
    )


def timed(fn, repeats: int) -> tuple[float, float]:
    """(median, mean) milliseconds per call; the mean includes amortised rank re-sorts."""
    fn()  # warm-up (compiles)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3, float(np.mean(times)) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--batch", type=int, default=256)
    args = parser.parse_args()
    tcfg = TargetConfig()
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; batch {args.batch}; "
          f"{args.repeats} calls, ms per call as median / mean (each call also applies "
          f"update_priorities to the batch)")
    print(f"{'sampling':>13} {'steps':>8} {'sample_ids':>17} {'sample':>17}")
    for sampling in ("uniform", "proportional", "rank"):
        for size in args.sizes:
            rng = np.random.default_rng(0)
            buf = ReplayBuffer(ReplayConfig(capacity=size, sampling=sampling), tcfg, (4, 4, 1), NUM_ACTIONS,
                               frame_dtype="uint8", seed=1)
            while buf.total_steps_added < size:
                buf.add(episode(rng))
            # Keep priorities changing like a learner does (also drives rank refreshes).
            gen = np.random.default_rng(1)

            def indices_only():
                idx, _ = buf.sample_ids(args.batch)
                buf.update_priorities(idx, gen.random(idx.size))

            def full():
                sample = buf.sample(args.batch)
                buf.update_priorities(sample.ids, gen.random(sample.ids.size))

            t_idx = timed(indices_only, args.repeats)
            t_full = timed(full, args.repeats)
            print(f"{sampling:>13} {buf.size:>8} {t_idx[0]:>8.3f} /{t_idx[1]:>7.3f} "
                  f"{t_full[0]:>8.3f} /{t_full[1]:>7.3f}")


if __name__ == "__main__":
    main()
