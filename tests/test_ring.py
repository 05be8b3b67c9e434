"""Windows out of a ring of acted steps (moozi.replay.ring) give the host buffer's targets at every position."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.config import ReplayConfig, TargetConfig
from moozi.replay import ReplayBuffer
from moozi.replay.ring import (
    RING_FIELDS,
    Ring,
    ring_init,
    ring_mature,
    ring_offsets,
    ring_sample,
    ring_sampleable,
    ring_set_priorities,
    ring_store,
    ring_window,
)
from moozi.targets import make_targets
from moozi.types import Trajectory

TCFG = TargetConfig(history_length=2, unroll_steps=3, td_steps=4, discount=0.9)
A = 3  # augmented actions: dummy + 2
W = TCFG.history_length + TCFG.unroll_steps + TCFG.td_steps + 1
FRAME = (2, 2, 1)


def _episode(rng, n: int, terminal: bool, two_player: bool) -> Trajectory:
    return Trajectory(
        frames=rng.integers(0, 2, (n, *FRAME)).astype(np.float32),
        actions=np.r_[rng.integers(1, A, n - 1), 0].astype(np.int32),
        rewards=np.r_[0.0, rng.normal(size=n - 1)].astype(np.float32),
        root_values=rng.normal(size=n).astype(np.float32),
        root_policies=rng.dirichlet(np.ones(A), n).astype(np.float32),
        to_play=(np.arange(n) % 2 if two_player else np.zeros(n)).astype(np.int32),
        first=np.int32(0), last=np.int32(n - 1), is_terminal=np.bool_(terminal),
        random_actions=rng.random(n) < 0.25,
    )


def _steps(traj: Trajectory, start: int = 0, stop: int | None = None) -> dict:
    """An episode's steps as the actor emits them (StepSample's names), optionally only ``start:stop``."""
    n = traj.actions.shape[0]
    at = np.arange(n)
    full = {"frame": traj.frames, "action": traj.actions, "reward": traj.rewards, "is_first": at == 0,
            "is_last": at == n - 1, "is_terminal": (at == n - 1) & bool(traj.is_terminal), "to_play": traj.to_play,
            "root_value": traj.root_values, "root_policy": traj.root_policies, "random_action": traj.random_actions}
    return {k: np.asarray(v)[start:stop] for k, v in full.items()}


@functools.lru_cache(maxsize=None)
def _targets_fn():
    """Stochastic MuZero's targets: the deterministic model's and the unroll's observations and transition mask."""
    return jax.jit(lambda window, t: make_targets(window, t, TCFG, A, chance=True))


@pytest.mark.parametrize("two_player", [False, True])
def test_a_ring_window_gives_the_host_buffers_targets_at_every_position(two_player):
    """One environment's row: the end of an episode begun before it, eight whole episodes (terminal and
    truncated, 1 to 12 moves), and an episode not finished. The whole episodes also go to the host buffer; at
    every position whose W-step sequence lies in the row, the ring window's targets equal the host window's."""
    rng = np.random.default_rng(3 if two_player else 4)
    before = _episode(rng, 9, True, two_player)
    whole = [_episode(rng, int(n), bool(term), two_player)
             for n, term in zip(rng.integers(2, 14, 8), [True, False, True, True, False, True, False, True])]
    unfinished = _episode(rng, 10, True, two_player)
    parts = [_steps(before, 4)] + [_steps(e) for e in whole] + [_steps(unfinished, 0, 8)]
    row = {k: np.concatenate([p[k] for p in parts]) for k in RING_FIELDS}
    offset = 5  # the steps of the episode begun before the row

    host = ReplayBuffer(ReplayConfig(capacity=1000), TCFG, FRAME, A, frame_dtype="float32", seed=0)
    for e in whole:
        host.add(e)
    stored = sum(int(e.last) + 1 for e in whole)
    L = TCFG.history_length
    window = jax.jit(functools.partial(ring_window, history_length=L))
    targets = _targets_fn()
    checked = 0
    for pid in range(stored):
        r = pid + offset
        if r - L < 0 or r - L + W > row["action"].shape[0]:
            continue
        mine = window({k: v[r - L:r - L + W] for k, v in row.items()})
        theirs, pos = host.windows(np.array([pid]))
        theirs = jax.tree.map(lambda x: x[0], theirs)
        got, want = targets(mine, L), targets(theirs, int(pos[0]))
        for name in ("observation", "next_observation", "actions", "policy", "value", "value_mask", "reward",
                     "consistency_mask", "priority", "unroll_observations", "transition_mask"):
            np.testing.assert_allclose(np.asarray(getattr(got, name)), np.asarray(getattr(want, name)), rtol=1e-6,
                                       atol=1e-6, err_msg=f"{name} at position {pid}")
        checked += 1
    assert checked == stored  # the row's margins cover every whole episode's position


def test_a_ring_window_by_hand():
    """Steps 0-5 of a row: an episode's last two steps (its start before the row), then a 4-step episode that
    ends truncated at index 5. The position at index 2 (L = 2) is that episode's step 0: first 2, last 5, not
    terminal; reads before index 2 repeat step 2 (clipped, as the host's are). With the position at index 1 the
    earlier episode: first -1, last 1, terminal; everything after index 1 reads index 1."""
    steps = {"frame": np.arange(6, dtype=np.float32).reshape(6, 1, 1, 1), "action": np.array([1, 0, 2, 1, 2, 0]),
             "reward": np.arange(6, dtype=np.float32), "is_first": np.array([0, 0, 1, 0, 0, 0], bool),
             "is_last": np.array([0, 1, 0, 0, 0, 1], bool), "is_terminal": np.array([0, 1, 0, 0, 0, 0], bool),
             "to_play": np.zeros(6, np.int32), "root_value": np.arange(6, dtype=np.float32) / 10,
             "root_policy": np.eye(3, dtype=np.float32)[[1, 0, 2, 1, 2, 0]],
             "random_action": np.array([0, 0, 0, 1, 0, 0], bool)}
    w = ring_window(steps, 2)
    assert (int(w.first), int(w.last), bool(w.is_terminal)) == (2, 5, False)
    np.testing.assert_array_equal(np.asarray(w.rewards), [2, 2, 2, 3, 4, 5])
    np.testing.assert_array_equal(np.asarray(w.actions), [2, 2, 2, 1, 2, 0])
    w = ring_window(steps, 1)
    assert (int(w.first), int(w.last), bool(w.is_terminal)) == (-1, 1, True)
    np.testing.assert_array_equal(np.asarray(w.rewards), [0, 1, 1, 1, 1, 1])
    np.testing.assert_array_equal(np.asarray(w.random_actions), [False] * 6)


def test_a_ring_stores_segments_and_wraps_by_hand():
    """Two environments, 6 columns, segments of 2 steps: after 4 stores the ring has wrapped once (filled 6, the
    write column 2); the oldest column is 2, so ages run 4, 5, 0, 1, 2, 3 over columns 0-5. With L = 1 and K + N
    = 2 the sampleable columns are the ages 1 to 3: columns 3, 4, 5."""
    seg = lambda i: {k: np.full((2, 2) + ((3,) if k == "root_policy" else (1, 1, 1) if k == "frame" else ()), i,
                                np.float32 if k in ("frame", "reward", "root_value", "root_policy") else
                                bool if k.startswith("is_") or k == "random_action" else np.int32)
                     for k in RING_FIELDS}
    ring = ring_init(seg(0), 6)
    for i in range(1, 5):
        ring = ring_store(ring, seg(i))
    assert (int(ring.filled), int(ring.at)) == (6, 2)
    np.testing.assert_array_equal(np.asarray(ring.steps["action"][0]), [4, 4, 2, 2, 3, 3])
    np.testing.assert_array_equal(np.asarray(ring_offsets(ring)), [4, 5, 0, 1, 2, 3])
    np.testing.assert_array_equal(np.asarray(ring_sampleable(ring, 1, 2)), [0, 0, 0, 1, 1, 1])


def test_ring_sampling_by_hand():
    """One row of 4 columns, every column's sequence whole (L = 0, K + N = 0), priorities 1, 0, 3, 0 and alpha 1:
    the 4 strata of a total mass 4 fall on column 0, then 2, 2, 2; P = 1/4 and 3/4 over the N = 2 sampleable
    positions, so the weights (N P) ** -1 are 2 and 2/3, divided by the batch's largest: 1 and 1/3; by the
    buffer's (the least likely position's, 2): the same here. With alpha 0 the masses are 1, 0, 1, 0."""
    ring = Ring({}, jnp.array([[1.0, 0.0, 3.0, 0.0]]), jnp.int32(4), jnp.int32(0), jnp.float32(3.0))
    for norm in ("batch", "buffer"):
        env, col, w = ring_sample(ring, jax.random.key(0), 4, 0, 0, alpha=1.0, beta=1.0, normalization=norm)
        np.testing.assert_array_equal(np.asarray(env), [0, 0, 0, 0])
        np.testing.assert_array_equal(np.asarray(col), [0, 2, 2, 2])
        np.testing.assert_allclose(np.asarray(w), [1, 1 / 3, 1 / 3, 1 / 3], rtol=1e-6)
    _, col, w = ring_sample(ring, jax.random.key(0), 4, 0, 0, alpha=0.0, beta=1.0)
    np.testing.assert_array_equal(np.asarray(col), [0, 0, 2, 2])
    np.testing.assert_allclose(np.asarray(w), [1, 1, 1, 1])
    ring = ring_set_priorities(ring, jnp.array([0]), jnp.array([2]), jnp.array([-0.5]), 0.25)
    np.testing.assert_allclose(np.asarray(ring.priority), [[1, 0, 0.75, 0]])
    assert float(ring.max_priority) == 3.0


@pytest.mark.parametrize("rows", [96, 24])
def test_ring_maturing_gives_the_host_buffers_initial_priorities(rows):
    """Two environments' streams of whole episodes stored 4 steps at a time (96 columns: no wrap; 24: the ring
    wraps several times). After each store, :func:`ring_mature` prioritises exactly the positions whose sequence
    has become whole, each with ``|v* - G^N| + epsilon`` as the host learner gives it on the whole episode
    (:func:`~moozi.learner.episode_priorities`); sampling draws only those, in proportion to their priorities."""
    from moozi.learner import episode_priorities

    T, eps, L, ahead = 4, 1e-3, TCFG.history_length, TCFG.unroll_steps + TCFG.td_steps
    rng = np.random.default_rng(5)
    streams, want = [], []
    for _ in range(2):
        eps_list = [_episode(rng, int(n), bool(rng.random() < 0.5), False) for n in rng.integers(2, 14, 12)]
        streams.append({k: np.concatenate([_steps(e)[k] for e in eps_list]) for k in RING_FIELDS})
        want.append(np.concatenate([episode_priorities(e, TCFG) for e in eps_list]) + eps)
    n = min(s["action"].shape[0] for s in streams) // T * T
    ring = ring_init({k: np.stack([s[k][:T] for s in streams], 1) for k in RING_FIELDS}, rows)
    store, mature = jax.jit(ring_store), jax.jit(functools.partial(ring_mature, count=T, config=TCFG, epsilon=eps))
    offsets = jax.jit(ring_offsets)
    for t0 in range(0, n, T):
        ring = mature(store(ring, {k: np.stack([s[k][t0:t0 + T] for s in streams], 1) for k in RING_FIELDS}))
        written = t0 + T
        age = np.asarray(offsets(ring))
        step = written - int(ring.filled) + age  # the stream step each column holds
        ok = (age >= L) & (age + ahead < int(ring.filled))
        for b in range(2):
            got = np.asarray(ring.priority[b])
            np.testing.assert_allclose(got[ok], want[b][step[ok]], rtol=1e-5, err_msg=f"after {written} steps")
            assert (got[age + ahead >= int(ring.filled)] == 0).all()  # not whole yet (columns of age < L: masked)
    env, col, _ = ring_sample(ring, jax.random.key(1), 4096, L, ahead, alpha=1.0, beta=1.0)
    ok = np.asarray(ring_sampleable(ring, L, ahead))
    assert ok[np.asarray(col)].all()
    freq = np.zeros(ring.shape)
    np.add.at(freq, (np.asarray(env), np.asarray(col)), 1)
    mass = np.where(ok[None, :], np.asarray(ring.priority), 0)
    np.testing.assert_allclose(freq / 4096, mass / mass.sum(), atol=0.01)
