"""Replay buffer and sum tree: storage, eviction, sampling laws, IS weights, windows -> targets, resume."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moozi.config import ConfigError, ReplayConfig, TargetConfig
from moozi.errors import ReplayError
from moozi.learner import episode_priorities
from moozi.replay import ReplayBuffer
from moozi.replay.sumtree import MinTree, SumTree
from moozi.targets import make_targets
from moozi.types import Trajectory
from moozi.update import build_batch

TCFG = TargetConfig(history_length=2, unroll_steps=2, td_steps=3, discount=0.9)
A = 3  # augmented actions: dummy + 2


def make_traj(n, seed=0, terminal=True, frame_shape=(2, 2, 1), binary=True, two_player=False,
              random_moves=False):
    """An episode of n = T + 1 steps with random data (random-move flags on a third of the steps)."""
    rng = np.random.default_rng(seed)
    if binary:
        frames = rng.integers(0, 2, (n, *frame_shape)).astype(np.float32)
    else:
        frames = rng.normal(size=(n, *frame_shape)).astype(np.float32)
    actions = np.r_[rng.integers(1, A, n - 1), 0].astype(np.int32)
    return Trajectory(
        frames=frames,
        actions=actions,
        rewards=np.r_[0.0, rng.normal(size=n - 1)].astype(np.float32),
        root_values=rng.normal(size=n).astype(np.float32),
        root_policies=rng.dirichlet(np.ones(A), n).astype(np.float32),
        to_play=(np.arange(n) % 2 if two_player else np.zeros(n)).astype(np.int32),
        first=np.int32(0),
        last=np.int32(n - 1),
        is_terminal=np.bool_(terminal),
        random_actions=(rng.random(n) < 1 / 3) if random_moves else None,
    )


FRAME = (2, 2, 1)


def buffer(frame_dtype="float32", seed=0, **kw):
    kw.setdefault("capacity", 64)
    return ReplayBuffer(ReplayConfig(**kw), TCFG, FRAME, A, frame_dtype=frame_dtype, seed=seed)


def add(buf, traj):
    """Add with computed initial priorities |v* - G^N| (what the learner does)."""
    return buf.add(traj, episode_priorities(traj, TCFG))


def draw(buf, n, seed, beta=None):
    """``sample_ids`` from a known generator state."""
    buf.rng = np.random.default_rng(seed)
    return buf.sample_ids(n, beta)


def sample_batch(buf, n, seed):
    """A batch of targets built from sampled windows, exactly as the learner's update builds it."""
    buf.rng = np.random.default_rng(seed)
    s = buf.sample(n)
    return build_batch(s.windows, s.positions, s.weights, target_config=TCFG, num_actions=A), s.ids


# ----------------------------------------------------------------------------- sum tree


def test_sum_tree_totals_and_vectorised_updates():
    tree = SumTree(5)  # not a power of two
    tree.update([0, 1, 2, 3, 4], [1.0, 2.0, 3.0, 4.0, 5.0])
    assert tree.total() == 15.0
    tree.update([1, 4, 1], [10.0, 0.0, 7.0])  # duplicates: last write wins
    np.testing.assert_array_equal(tree.leaves(), [1.0, 7.0, 3.0, 4.0, 0.0])
    assert tree.total() == 15.0
    other = SumTree(5)
    other.set_all(tree.leaves())
    np.testing.assert_array_equal(other._tree, tree._tree)  # same floats however built
    with pytest.raises(IndexError):
        tree.update([5], [1.0])


def test_sum_tree_find_boundaries_and_zero_leaves():
    tree = SumTree(6)
    tree.update(np.arange(6), [1.0, 0.0, 2.0, 3.0, 0.0, 4.0])  # cumsum 1, 1, 3, 6, 6, 10
    u = np.array([0.0, 0.999, 1.0, 2.999, 3.0, 5.999, 6.0, 9.999, 10.0, 1e9])
    np.testing.assert_array_equal(tree.find(u), [0, 0, 2, 2, 3, 3, 5, 5, 5, 5])
    many = tree.find(np.linspace(0, 10, 10_001))
    assert not np.isin(many, [1, 4]).any()  # zero-mass leaves are never returned


@settings(max_examples=40, deadline=None)
@given(
    leaves=st.lists(st.integers(0, 20), min_size=1, max_size=40),
    updates=st.lists(st.tuples(st.integers(0, 39), st.integers(0, 20)), max_size=30),
)
def test_sum_tree_matches_cumsum_search(leaves, updates):
    """Integer masses (exact in float64): find(u) is the naive cumsum search."""
    values = np.array(leaves, np.float64)
    tree = SumTree(values.size)
    tree.update(np.arange(values.size), values)
    upd = [(i, v) for i, v in updates if i < values.size]
    if upd:
        idx, val = map(np.array, zip(*upd))
        tree.update(idx, val)
        for i, v in upd:
            values[i] = v
    np.testing.assert_array_equal(tree.leaves(), values)
    assert tree.total() == values.sum()
    if values.sum() > 0:
        u = np.arange(int(values.sum())) + 0.5
        expected = np.searchsorted(np.cumsum(values), u, side="right")
        np.testing.assert_array_equal(tree.find(u), expected)


def test_sum_tree_sampling_frequencies_chi_square():
    prio = np.array([1.0, 2.0, 3.0, 4.0, 0.5, 0.0, 6.0])
    tree = SumTree(prio.size)
    tree.update(np.arange(prio.size), prio)
    rng = np.random.default_rng(0)
    n = 50_000
    counts = np.bincount(tree.find(rng.random(n) * tree.total()), minlength=prio.size)
    expected = n * prio / prio.sum()
    nz = expected > 0
    chi2 = np.sum((counts[nz] - expected[nz]) ** 2 / expected[nz])
    assert counts[~nz].sum() == 0
    assert chi2 < 16.8  # 99th percentile of chi-square with 6 degrees of freedom


def test_min_tree():
    tree = MinTree(5)
    assert tree.min() == np.inf
    tree.update([0, 3, 4], [3.0, 1.5, 2.0])
    assert tree.min() == 1.5
    tree.update([3], [np.inf])
    assert tree.min() == 2.0


# ----------------------------------------------------------------------------- config


def test_config_errors_name_the_field():
    with pytest.raises(ConfigError, match="replay.capacity"):
        ReplayConfig(capacity=0)
    with pytest.raises(ConfigError, match="replay.sampling"):
        ReplayConfig(sampling="greedy")
    with pytest.raises(ConfigError, match="replay.alpha"):
        ReplayConfig(alpha=-1.0)
    with pytest.raises(ConfigError, match="replay.min_size"):
        ReplayConfig(capacity=10, min_size=11)
    with pytest.raises(ConfigError, match="replay.rank_refresh_fraction"):
        ReplayConfig(rank_refresh_fraction=0.0)


# ----------------------------------------------------------------------------- storage


def test_eviction_is_oldest_first_and_whole_trajectories():
    buf = buffer(capacity=10)
    t0, t1 = make_traj(4, seed=0), make_traj(4, seed=1)
    assert buf.add(t0) == 0 and buf.add(t1) == 1
    assert (buf.size, buf.num_trajectories, buf.num_positions) == (8, 2, 6)
    buf.add(make_traj(3, seed=2))  # needs 3 slots, 2 free: evicts trajectory 0 whole
    np.testing.assert_array_equal(buf.trajectory_ids(), [1, 2])
    assert (buf.size, buf.num_positions) == (7, 5)
    buf.add(make_traj(6, seed=3))  # wraps round the ring; evicts trajectory 1 only
    np.testing.assert_array_equal(buf.trajectory_ids(), [2, 3])
    assert buf.size == 9 and buf.total_steps_added == 17
    stored = buf.get_trajectory(3)
    ref = make_traj(6, seed=3)
    for name in ("frames", "actions", "rewards", "root_values", "root_policies", "to_play"):
        np.testing.assert_array_equal(getattr(stored, name), getattr(ref, name))
    with pytest.raises(ReplayError, match="not stored"):
        buf.get_trajectory(1)
    # Evicted positions are never sampled.
    idx, _ = draw(buf, 200, 0)
    tids, steps = buf.locate(idx)
    assert set(tids.tolist()) <= {2, 3}
    assert (steps >= 0).all()


def test_trajectory_longer_than_capacity_is_an_error():
    buf = buffer(capacity=10)
    with pytest.raises(ReplayError, match="capacity"):
        buf.add(make_traj(11))
    buf.add(make_traj(10))  # exactly capacity is fine
    assert buf.size == 10


def test_validation_names_the_field():
    buf = buffer()
    buf.add(make_traj(5))
    with pytest.raises(ReplayError, match="frames"):
        buf.add(make_traj(5, frame_shape=(3, 2, 1)))
    with pytest.raises(ReplayError, match="dtype"):
        buffer(frame_dtype="uint8").add(make_traj(5))
    bad = make_traj(5)
    bad = bad.replace(root_policies=np.full((5, A + 1), 0.25, np.float32))
    with pytest.raises(ReplayError, match="root_policies"):
        buf.add(bad)
    with pytest.raises(ReplayError, match="first"):
        buf.add(make_traj(5).replace(first=np.int32(-1)))
    with pytest.raises(ReplayError, match="rewards"):
        buf.add(make_traj(5).replace(rewards=np.zeros(4, np.float32)))
    with pytest.raises(ReplayError, match="actions"):
        buf.add(make_traj(5).replace(actions=np.full(5, A, np.int32)))


def test_frames_are_stored_in_the_declared_dtype():
    buf = buffer(frame_dtype="uint8")
    traj = make_traj(5)
    traj = traj.replace(frames=traj.frames.astype(np.uint8))
    buf.add(traj)
    assert buf._frames.dtype == np.uint8
    np.testing.assert_array_equal(buf.get_trajectory(0).frames, traj.frames)
    s = buf.sample(4)
    assert s.windows.frames.dtype == np.uint8 and s.windows.frames.shape == (4, buf.window_length, *FRAME)


def test_min_size():
    buf = buffer(min_size=10)
    buf.add(make_traj(6))
    assert not buf.ready()
    with pytest.raises(ReplayError, match="min_size"):
        buf.sample(4)
    buf.add(make_traj(6, seed=1))
    assert buf.ready()
    buf.sample(4)


# ----------------------------------------------------------------------------- sampling laws


def _four_positions(sampling, **kw):
    """A buffer with exactly 4 sampleable positions with priorities [1, 2, 3, 4]."""
    kw.setdefault("weight_normalization", "buffer")
    buf = buffer(sampling=sampling, epsilon=1e-12, alpha=1.0, beta=1.0, **kw)
    buf.add(make_traj(5))  # steps 0..3 sampleable, step 4 (last) not
    assert buf.num_positions == 4
    assert buf.update_priorities(np.arange(4), [1.0, 2.0, 3.0, 4.0]) == 4
    return buf


def _frequencies(buf, n=40_000, seed=0):
    idx, w = draw(buf, n, seed)
    freq = np.bincount(idx, minlength=4) / n
    return idx, w, freq


def test_golden_importance_weights_proportional():
    buf = _four_positions("proportional")
    # P = p / sum p = [.1, .2, .3, .4]; w = (N P)^-beta = 1 / (4 P) = [2.5, 1.25, 5/6, 0.625];
    # normalised by the max over the buffer (2.5): [1, 1/2, 1/3, 1/4].
    golden = np.array([1.0, 0.5, 1.0 / 3.0, 0.25])
    idx, w, freq = _frequencies(buf)
    np.testing.assert_allclose(w, golden[idx], rtol=1e-6)
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.3, 0.4], atol=0.01)
    # beta = 0.5 at sample time: w = (P / P_min)^-0.5.
    _, w_half = draw(buf, 8, 1, beta=0.5)
    idx_half, _ = draw(buf, 8, 1, beta=0.5)
    np.testing.assert_allclose(w_half, np.sqrt(golden)[idx_half], rtol=1e-6)
    # Annealing through the setter.
    buf.beta = 0.0
    _, w_zero = draw(buf, 8, 1)
    np.testing.assert_allclose(w_zero, 1.0)


def test_batch_weight_normalization():
    buf = _four_positions("proportional", weight_normalization="batch")
    idx, w = draw(buf, 3, 3)
    raw = 1.0 / (4 * np.array([0.1, 0.2, 0.3, 0.4]))[idx]
    np.testing.assert_allclose(w, raw / raw.max(), rtol=1e-6)


def test_golden_rank_based_probabilities_and_weights():
    buf = _four_positions("rank")
    # Ranks (1 = highest priority): position 3 -> 1, 2 -> 2, 1 -> 3, 0 -> 4.
    # P ∝ 1/rank = [1/4, 1/3, 1/2, 1], sum = 25/12: P = [3/25, 4/25, 6/25, 12/25].
    probs = np.array([3.0, 4.0, 6.0, 12.0]) / 25.0
    # w = (4 P)^-1 / max = P_min / P = [1, 3/4, 1/2, 1/4].
    golden = probs[0] / probs
    idx, w, freq = _frequencies(buf)
    np.testing.assert_allclose(freq, probs, atol=0.01)
    np.testing.assert_allclose(w, golden[idx], rtol=1e-6)


def test_uniform_sampling_skips_last_steps():
    buf = buffer(sampling="uniform")
    buf.add(make_traj(3))
    buf.add(make_traj(5, seed=1))
    idx, w = draw(buf, 30_000, 0)
    _, steps = buf.locate(idx)
    tids, _ = buf.locate(idx)
    last = np.where(tids == 0, 2, 4)
    assert (steps < last).all()
    np.testing.assert_allclose(np.bincount(idx) [[0, 1, 3, 4, 5, 6]] / 30_000, 1 / 6, atol=0.01)
    np.testing.assert_array_equal(w, 1.0)
    with_last = buffer(sampling="uniform", sample_last_step=True)
    with_last.add(make_traj(3))
    assert with_last.num_positions == 3


@pytest.mark.parametrize("sampling", ["proportional", "rank"])
def test_update_priorities_changes_sampling(sampling):
    buf = buffer(sampling=sampling, alpha=1.0)
    for seed in range(4):
        buf.add(make_traj(6, seed=seed))
    target = buf.trajectory_indices(2)[3]
    ids = np.concatenate([buf.trajectory_indices(t)[:-1] for t in range(4)])
    prio = np.full(ids.shape, 1e-3)
    prio[ids == target] = 1e3
    buf.update_priorities(ids, prio)
    idx, _ = draw(buf, 1000, 0)
    share = np.mean(idx == target)
    assert share > (0.95 if sampling == "proportional" else 0.2)
    # Ids of evicted positions are skipped, not applied to the step reusing the slot.
    for seed in range(4, 14):
        buf.add(make_traj(6, seed=seed))
    assert buf.update_priorities([target], [5.0]) == 0


def test_rank_order_refreshes_after_eviction():
    buf = buffer(capacity=20, sampling="rank", rank_refresh_fraction=1.0)
    for seed in range(3):
        buf.add(make_traj(6, seed=seed))
    draw(buf, 8, 0)  # builds the order
    for seed in range(3, 6):
        buf.add(make_traj(6, seed=seed))  # evicts what the order points at
    for s in range(20):
        idx, _ = draw(buf, 16, s)
        tids, steps = buf.locate(idx)
        assert (tids >= 0).all() and (steps >= 0).all()


def test_consecutive_samples_differ_and_restoring_state_repeats_the_sequence():
    """Replay owns its generator: no caller-owned rng that a process boundary would copy."""
    buf = buffer(seed=3)
    for seed in range(3):
        buf.add(make_traj(6, seed=seed))
    state = buf.state_dict()
    first = [buf.sample_ids(8)[0] for _ in range(3)]
    assert not np.array_equal(first[0], first[1]) and not np.array_equal(first[1], first[2])
    again = buffer(seed=99)
    again.load_state_dict(state)
    np.testing.assert_array_equal(np.stack([again.sample_ids(8)[0] for _ in range(3)]), np.stack(first))


# ----------------------------------------------------------------------------- targets


def _check_against_whole_trajectory(buf, batch, idx):
    tids, steps = buf.locate(idx)
    for b, (tid, t) in enumerate(zip(tids, steps)):
        whole = buf.get_trajectory(int(tid))
        ref = make_targets(whole, int(t), TCFG, A)
        for name in ("observation", "next_observation", "actions", "policy", "value",
                     "value_mask", "reward", "consistency_mask", "priority"):
            np.testing.assert_allclose(
                np.asarray(getattr(batch.targets, name))[b],
                np.asarray(getattr(ref, name)),
                rtol=1e-5, atol=1e-6, err_msg=f"{name} at trajectory {tid} step {t}",
            )


@pytest.mark.parametrize("sampling", ["uniform", "proportional", "rank"])
def test_sample_targets_shapes_and_equal_whole_trajectory_targets(sampling):
    buf = buffer(capacity=30, sampling=sampling, sample_last_step=True)
    # Varied lengths, terminal and truncated, one- and two-player; the ring wraps.
    for seed, (n, term, two) in enumerate(
        [(7, True, False), (2, False, False), (9, False, True), (5, True, True),
         (8, True, False), (1, True, False), (6, False, False)]
    ):
        add(buf, make_traj(n, seed=seed, terminal=term, two_player=two, random_moves=seed % 2 == 0))
    batch, idx = sample_batch(buf, 24, 0)
    t = batch.targets
    c = TCFG.history_length * (1 + A)
    assert t.observation.shape == (24, 2, 2, c) and t.next_observation.shape == (24, 2, 2, c)
    assert t.actions.shape == (24, TCFG.unroll_steps)
    assert t.policy.shape == (24, TCFG.unroll_steps + 1, A)
    for name in ("value", "value_mask", "reward"):
        assert getattr(t, name).shape == (24, TCFG.unroll_steps + 1)
    assert t.consistency_mask.shape == (24,) and t.priority.shape == (24,)
    assert batch.weights.shape == (24,) and batch.weights.dtype == np.float32
    assert idx.shape == (24,) and idx.dtype == np.int64
    _check_against_whole_trajectory(buf, batch, idx)


def test_initial_priorities_are_computed_or_max():
    buf = buffer(sampling="proportional", epsilon=0.01)
    traj = make_traj(6, seed=4)
    add(buf, traj)
    batch, idx = sample_batch(buf, 16, 0)
    stored = buf._priority[idx % buf.config.capacity]
    np.testing.assert_allclose(stored, np.asarray(batch.targets.priority) + 0.01, rtol=1e-5)
    mx = buffer(sampling="proportional", initial_priority="max")
    mx.add(traj)
    mx.update_priorities([0], [7.0])
    mx.add(make_traj(4, seed=5))
    np.testing.assert_allclose(mx._priority[6:9], 7.0 + mx.config.epsilon)


def test_update_search_stats_flows_into_targets_and_priorities():
    buf = buffer(sampling="proportional", epsilon=1e-3)
    add(buf, make_traj(8, seed=1))
    tid = 0
    ids = buf.trajectory_indices(tid)
    new_v = np.linspace(-1.0, 1.0, ids.size).astype(np.float32)
    new_p = np.tile(np.array([0.0, 0.25, 0.75], np.float32), (ids.size, 1))
    np.testing.assert_array_equal(buf.update_search_stats(ids, new_v, new_p), [tid])
    stored = buf.get_trajectory(tid)
    np.testing.assert_array_equal(stored.root_values, new_v)
    np.testing.assert_array_equal(stored.root_policies, new_p)
    buf.set_trajectory_priorities(tid, episode_priorities(stored, TCFG))  # the learner's part
    batch, idx = sample_batch(buf, 8, 0)
    _check_against_whole_trajectory(buf, batch, idx)
    np.testing.assert_allclose(
        buf._priority[idx % buf.config.capacity], np.asarray(batch.targets.priority) + 1e-3,
        rtol=1e-5,
    )
    with pytest.raises(ReplayError, match="root_policies"):
        buf.update_search_stats(ids, new_v, new_p[:, :2])


# ----------------------------------------------------------------------------- checkpoints


def _targets_equal(x, y):
    for a, b in zip(jax.tree.leaves(x), jax.tree.leaves(y)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("sampling", ["uniform", "proportional", "rank"])
def test_state_dict_round_trip_reproduces_samples(sampling):
    buf = buffer(capacity=25, sampling=sampling, rank_refresh_fraction=0.5)
    for seed in range(5):
        buf.add(make_traj(6, seed=seed))
    _, idx = sample_batch(buf, 8, 0)
    buf.update_priorities(idx, np.arange(8.0))
    buf.beta = 0.4
    state = buf.state_dict()
    for value in state.values():
        assert isinstance(value, (int, float, str, dict, np.ndarray))

    restored = buffer(capacity=25, sampling=sampling, rank_refresh_fraction=0.5)
    restored.load_state_dict(state)
    assert restored.beta == 0.4 and restored.stats() == buf.stats()
    for step in range(3):
        b1, i1 = sample_batch(buf, 8, step)
        b2, i2 = sample_batch(restored, 8, step)
        np.testing.assert_array_equal(i1, i2)
        _targets_equal(b1, b2)
        buf.update_priorities(i1, np.arange(8.0) + step)
        restored.update_priorities(i2, np.arange(8.0) + step)
        buf.add(make_traj(4, seed=10 + step))
        restored.add(make_traj(4, seed=10 + step))
    b1, i1 = buf.sample_ids(8)  # the generators' states came along too
    b2, i2 = restored.sample_ids(8)
    np.testing.assert_array_equal(b1, b2)
    tree = getattr(buf._sampler, "_sum", None)
    if tree is not None:
        np.testing.assert_array_equal(tree._tree, restored._sampler._sum._tree)


@pytest.mark.parametrize("sampling", ["uniform", "proportional", "rank"])
def test_live_steps_in_chunks_restore_the_same_buffer(sampling):
    """Version 4 holds only the stored steps (after wrap-round and evictions), a few steps per chunk; restored,
    it samples, locates and evicts exactly as the buffer it came from, and as a version 3 state of it does."""
    buf = buffer(capacity=30, sampling=sampling, rank_refresh_fraction=0.5)
    for seed in range(9):  # 9 episodes of 4-7 steps into 30 slots: the head wraps round, the oldest are evicted
        buf.add(make_traj(4 + seed % 4, seed=seed))
    _, idx = sample_batch(buf, 8, 0)
    buf.update_priorities(idx, np.arange(8.0))
    assert buf.trajectory_ids()[0] > 0 and buf._total_steps > buf.config.capacity
    header, chunks = buf.checkpoint_chunks(chunk_bytes=3 * 100)  # a few steps per chunk
    chunks = list(chunks)
    assert len(chunks) > 3 and sum(len(c["frames"]) for c in chunks) == buf.size
    assert all(np.asarray(v).size < buf.config.capacity for v in header.values() if isinstance(v, np.ndarray))
    from_chunks, from_v3 = buffer(capacity=30, sampling=sampling, rank_refresh_fraction=0.5), \
        buffer(capacity=30, sampling=sampling, rank_refresh_fraction=0.5)
    from_chunks.load_chunks(header, iter(chunks))
    from_v3.load_state_dict(buf.whole_slots_state())
    for restored in (from_chunks, from_v3):
        assert restored.stats() == buf.stats()
        np.testing.assert_array_equal(restored.trajectory_ids(), buf.trajectory_ids())
        for name in ("slot_traj", "priority", "sampleable"):
            np.testing.assert_array_equal(getattr(restored, "_" + name), getattr(buf, "_" + name), err_msg=name)
        for tid in buf.trajectory_ids():
            a, b = buf.get_trajectory(tid), restored.get_trajectory(tid)
            for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
                np.testing.assert_array_equal(x, y)
    for step in range(3):  # the same draws, priorities and evictions from here on
        outs = [sample_batch(b, 8, step) for b in (buf, from_chunks, from_v3)]
        for b1, i1 in outs[1:]:
            np.testing.assert_array_equal(outs[0][1], i1)
            _targets_equal(outs[0][0], b1)
        for b, (_, i) in zip((buf, from_chunks, from_v3), outs):
            b.update_priorities(i, np.arange(8.0) + step)
            b.add(make_traj(6, seed=20 + step))
    np.testing.assert_array_equal(buf.trajectory_ids(), from_chunks.trajectory_ids())


def test_state_size_follows_the_content_not_the_capacity():
    small, large = buffer(capacity=1000), buffer(capacity=1000)
    small.add(make_traj(5, seed=1))
    for seed in range(10):
        large.add(make_traj(5, seed=seed))
    nbytes = [sum(np.asarray(v).nbytes for v in b.state_dict().values() if isinstance(v, np.ndarray))
              for b in (small, large)]
    assert nbytes[1] == pytest.approx(10 * nbytes[0], rel=0.05)
    assert nbytes[1] < 0.1 * large.nbytes


def test_load_chunks_refuses_inconsistent_states():
    buf = buffer(capacity=30)
    for seed in range(3):
        buf.add(make_traj(5, seed=seed))
    header, chunks = buf.checkpoint_chunks(chunk_bytes=300)
    chunks = list(chunks)
    assert len(chunks) > 1
    with pytest.raises(ReplayError, match=r"holds \d+ of its 15 steps"):
        buffer(capacity=30).load_chunks(header, iter(chunks[:-1]))
    with pytest.raises(ReplayError, match="inconsistent"):
        buffer(capacity=30).load_chunks(dict(header, traj_len=header["traj_len"][:-1]), iter(chunks))
    with pytest.raises(ReplayError, match="frames"):
        bad = [dict(c, frames=c["frames"].astype(np.float64)) for c in chunks]
        buffer(capacity=30).load_chunks(header, iter(bad))


def test_load_state_dict_rejects_mismatched_config():
    buf = buffer(capacity=25)
    buf.add(make_traj(5))
    with pytest.raises(ReplayError, match="capacity"):
        buffer(capacity=30).load_state_dict(buf.state_dict())
    with pytest.raises(ReplayError, match="sampling"):
        buffer(capacity=25, sampling="rank").load_state_dict(buf.state_dict())
    with pytest.raises(ReplayError, match="frames"):
        buffer(capacity=25, frame_dtype="uint8").load_state_dict(buf.state_dict())
    empty = buffer(capacity=25)
    fresh = buffer(capacity=25)
    fresh.load_state_dict(empty.state_dict())
    assert fresh.size == 0


def test_stats():
    buf = buffer(sampling="proportional", epsilon=1e-12)
    buf.add(make_traj(5))
    buf.update_priorities(np.arange(4), [1.0, 2.0, 3.0, 4.0])
    s = buf.stats()
    assert s["replay/size_steps"] == 5 and s["replay/size_trajectories"] == 1
    assert s["replay/num_positions"] == 4 and s["replay/total_steps_added"] == 5
    assert s["replay/priority_min"] == pytest.approx(1.0)
    assert s["replay/priority_mean"] == pytest.approx(2.5)
    assert s["replay/priority_max"] == pytest.approx(4.0)


def test_random_move_flags_are_stored_checkpointed_and_cut_targets():
    buf = buffer(capacity=40, sample_last_step=True)
    flagged = make_traj(9, seed=3, two_player=True, random_moves=True)
    assert flagged.random_actions[:-1].any()
    tid = add(buf, flagged)
    plain = add(buf, make_traj(6, seed=4))
    np.testing.assert_array_equal(buf.get_trajectory(tid).random_actions, flagged.random_actions)
    assert not buf.get_trajectory(plain).random_actions.any()
    # The flags change the targets (compared with the same episode unflagged).
    whole, bare = buf.get_trajectory(tid), flagged.replace(random_actions=None)
    cut = [float(make_targets(whole, t, TCFG, A).value[0]) for t in range(9)]
    uncut = [float(make_targets(bare, t, TCFG, A).value[0]) for t in range(9)]
    assert cut != uncut
    batch, idx = sample_batch(buf, 16, 1)
    _check_against_whole_trajectory(buf, batch, idx)

    state = buf.state_dict()
    restored = buffer(capacity=40, sample_last_step=True)
    restored.load_state_dict(state)
    np.testing.assert_array_equal(restored.get_trajectory(tid).random_actions, flagged.random_actions)


def test_legal_masks_are_stored_checkpointed_and_default_to_all_legal():
    buf = buffer(capacity=40)
    masked = make_traj(5, seed=5, two_player=True)
    legal = np.array([[1, 1], [0, 1], [1, 0], [0, 1], [0, 0]], bool)  # A_env = 2; nothing legal at the last step
    masked = masked.replace(actions=np.array([1, 2, 1, 2, 0], np.int32), legal_actions=legal)
    tid = add(buf, masked)
    plain = add(buf, make_traj(4, seed=6))
    np.testing.assert_array_equal(buf.get_trajectory(tid).legal_actions, legal)
    # not recorded: every move legal but at the last step
    np.testing.assert_array_equal(buf.get_trajectory(plain).legal_actions, [[1, 1], [1, 1], [1, 1], [0, 0]])
    with pytest.raises(ReplayError, match=r"legal_actions must have shape \[S, A_env\] = \(5, 2\)"):
        buf.add(masked.replace(legal_actions=np.ones((5, 3), bool)))
    state = buf.state_dict()
    restored = buffer(capacity=40)
    restored.load_state_dict(state)
    np.testing.assert_array_equal(restored.get_trajectory(tid).legal_actions, legal)
    # A checkpoint written before masks were kept (replay state version 2) resumes with every move legal.
    old = {k: v for k, v in buf.whole_slots_state().items() if k != "legal_actions"}
    old["version"] = 2
    from_v2 = buffer(capacity=40)
    from_v2.load_state_dict(old)
    np.testing.assert_array_equal(from_v2.get_trajectory(tid).legal_actions, [[1, 1]] * 4 + [[0, 0]])
    np.testing.assert_array_equal(from_v2.get_trajectory(plain).frames, buf.get_trajectory(plain).frames)
    with pytest.raises(ReplayError, match="versions 2 to 4"):
        buffer(capacity=40).load_state_dict(dict(state, version=1))
