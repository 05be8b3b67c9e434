"""Issue 89 item 2, "measure first": flashbax's prioritised trajectory buffer at the device schedule's shapes.

The device schedule would keep replay in device memory: every environment a row, time running on across its
episodes, windows of ``history + K + n + 1`` steps sampled by priority. This times, each op jitted alone and
repeated, at the breakout preset's shapes (64 environments, 16 steps a chunk, capacity 200,000, batch 128) and
breakout-gpu's (1024, 16, 200,000, 1024): one chunk added, one batch sampled, one batch of priorities set; and
checks the two pitfalls the issue names (a zero-priority item sampled; the running max priority after set).

Usage: ``python research/flashbax_probe.py [--repeats 20] [--json]`` (needs ``pip install flashbax``).
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np


def _step(n_actions: int) -> dict:
    """One stored step at Breakout's shapes (frames as uint8 planes)."""
    return {"frame": jnp.zeros((10, 10, 4), jnp.uint8), "action": jnp.int32(0), "reward": jnp.float32(0),
            "root_value": jnp.float32(0), "root_policy": jnp.zeros(n_actions, jnp.float32),
            "first": jnp.bool_(False), "random_action": jnp.bool_(False)}


def _time(fn, args, repeats: int) -> float:
    out = fn(*args)
    jax.block_until_ready(out)
    t = time.perf_counter()
    for _ in range(repeats):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - t) / repeats


def probe(envs: int, chunk: int, capacity: int, batch: int, window: int, repeats: int) -> dict:
    import flashbax

    rows = capacity // envs
    buf = flashbax.make_prioritised_trajectory_buffer(
        add_batch_size=envs, sample_batch_size=batch, sample_sequence_length=window, period=1,
        min_length_time_axis=window, max_length_time_axis=rows, priority_exponent=1.0)
    state = buf.init(_step(4))
    add = jax.jit(buf.add, donate_argnums=0)
    data = jax.tree.map(lambda x: jnp.broadcast_to(x, (envs, chunk, *x.shape)), _step(4))
    t0 = time.perf_counter()
    state = add(state, data)
    jax.block_until_ready(state)
    compile_add = time.perf_counter() - t0
    for _ in range(max(window // chunk + 1, 2)):
        state = add(state, data)
    t = time.perf_counter()
    for _ in range(repeats):
        state = add(state, data)
    jax.block_until_ready(state)
    add_s = (time.perf_counter() - t) / repeats
    sample = jax.jit(buf.sample)
    sample_s = _time(sample, (state, jax.random.key(0)), repeats)
    batch_out = sample(state, jax.random.key(1))
    set_p = jax.jit(buf.set_priorities)
    prio = jnp.linspace(0.1, 2.0, batch)
    set_s = _time(set_p, (state, batch_out.indices, prio), repeats)  # returns a new state: copies the buffer
    set_donated = jax.jit(buf.set_priorities, donate_argnums=0)  # in place, as a fused step would run it
    state = set_donated(state, batch_out.indices, prio)
    jax.block_until_ready(state)
    t = time.perf_counter()
    for _ in range(repeats):
        state = set_donated(state, batch_out.indices, prio)
    jax.block_until_ready(state)
    set_donated_s = (time.perf_counter() - t) / repeats
    # The pitfalls: after setting priorities to zero for every sampled item, none of them is drawn again;
    # and the running max priority follows the largest set.
    zeroed = set_p(state, batch_out.indices, jnp.zeros(batch))
    again = sample(zeroed, jax.random.key(2))
    zero_hits = int(jnp.isin(again.indices, batch_out.indices).sum())
    return {"envs": envs, "chunk": chunk, "capacity": capacity, "batch": batch, "window": window,
            "add_ms": 1e3 * add_s, "sample_ms": 1e3 * sample_s, "set_priorities_copy_ms": 1e3 * set_s,
            "set_priorities_ms": 1e3 * set_donated_s,
            "compile_add_s": compile_add, "zero_priority_items_drawn": zero_hits,
            "positions_per_add": envs * chunk}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = [probe(64, 16, 200_000, 128, 17, args.repeats), probe(1024, 16, 200_000, 1024, 17, args.repeats)]
    out = {"device": str(jax.devices()[0]), "rows": rows}
    if args.json:
        print(json.dumps(out))
        return
    print(f"device {out['device']}")
    for r in rows:
        print(f"envs {r['envs']:5d} batch {r['batch']:5d}: add {r['add_ms']:.2f} ms ({r['positions_per_add']} positions), "
              f"sample {r['sample_ms']:.2f} ms, set priorities {r['set_priorities_ms']:.2f} ms in place "
              f"({r['set_priorities_copy_ms']:.2f} ms returning a copy), "
              f"zero-priority items drawn again {r['zero_priority_items_drawn']}")


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
