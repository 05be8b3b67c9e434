"""ReplayEnvPool: stored trajectories replayed behind the HostPool interface."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from moozi.envs.contract import EnvSpec, IllegalActionError
from moozi.envs.replay_env import ReplayEnvPool
from moozi.types import Trajectory, to_env_action

SPEC = EnvSpec("replay:test", observation_shape=(2, 1, 3), num_actions=4, num_players=2, path="host")


def make_traj(length, tag, *, terminal=True, pad=0, num_actions=4, num_players=2):
    """A whole episode of ``length`` actions (steps 0..length) stored from index 0, plus ``pad``
    padding steps; every value encodes (tag, step) so a mix-up shows."""
    s = length + 1 + pad
    frames = np.zeros((s, *SPEC.observation_shape), np.float32)
    for i in range(length + 1):
        frames[i] = tag * 100 + i + np.arange(np.prod(SPEC.observation_shape)).reshape(SPEC.observation_shape) / 10
    actions = np.zeros((s,), np.int32)  # dummy at and past the last step
    actions[:length] = 1 + (np.arange(length) + tag) % num_actions
    rewards = np.zeros((s,), np.float32)
    rewards[1 : length + 1] = tag + np.arange(1, length + 1) / 8
    to_play = np.zeros((s,), np.int32)
    to_play[: length + 1] = (np.arange(length + 1) + tag) % num_players
    return Trajectory(
        frames=frames,
        actions=actions,
        rewards=rewards,
        root_values=np.zeros((s,), np.float32),
        root_policies=np.full((s, num_actions + 1), 1.0 / (num_actions + 1), np.float32),
        to_play=to_play,
        first=np.int32(0),
        last=np.int32(length),
        is_terminal=np.bool_(terminal),
    )


def play(pool, steps):
    """reset() then ``steps`` steps; returns the time steps and the per-step bookkeeping."""
    out = []

    def record(ts):
        out.append(dict(ts=ts, id=pool.slot_trajectory_id.copy(), i=pool.slot_step.copy(),
                        a=pool.stored_action.copy(), active=pool.active.copy(), ep=pool.episode_step.copy()))

    record(pool.reset())
    rng = np.random.default_rng(0)
    for _ in range(steps):
        record(pool.step(rng.integers(-5, 50, size=pool.num_envs)))  # any actions: ignored
    return out


def test_replays_frames_rewards_flags_to_play_exactly():
    trajs = [make_traj(3, 1), make_traj(2, 2, terminal=False, pad=2)]
    pool = ReplayEnvPool(SPEC, 1, trajs)
    assert pool.pending == 2 and pool.spec == SPEC and pool.num_envs == 1
    steps = play(pool, 3 + 1 + 2)
    expected = [(trajs[0], i) for i in range(4)] + [(trajs[1], i) for i in range(3)]
    assert len(steps) == len(expected)
    for rec, (tr, i) in zip(steps, expected):
        ts = rec["ts"]
        np.testing.assert_array_equal(ts.observation[0], tr.frames[i])
        assert ts.observation.dtype == np.float32
        assert ts.reward[0] == (0.0 if i == 0 else tr.rewards[i])
        assert ts.is_first[0] == (i == 0)
        assert ts.is_last[0] == (i == tr.last)
        assert ts.is_terminal[0] == (i == tr.last and bool(tr.is_terminal))
        assert ts.to_play[0] == tr.to_play[i]
        assert ts.legal_actions[0].all() == (i != tr.last) and (ts.legal_actions[0].any() == (i != tr.last))
        assert rec["i"][0] == i and rec["ep"][0] == i and rec["active"][0]
        assert rec["a"][0] == (to_env_action(tr.actions[i]) if i < tr.last else -1)
    assert [r["id"][0] for r in steps] == [0] * 4 + [1] * 3
    # the truncated one ends last-but-not-terminal; then the slot is idle and the pool exhausted
    assert steps[-1]["ts"].is_last[0] and not steps[-1]["ts"].is_terminal[0]
    ts = pool.step(np.zeros(1, np.int32))
    assert pool.exhausted and not pool.active[0] and pool.pending == 0


def test_batched_trajectory_and_ids():
    trs = [make_traj(2, 1), make_traj(2, 2)]
    batched = Trajectory(**{f.name: np.stack([getattr(t, f.name) for t in trs])
                            for f in dataclasses.fields(Trajectory)})
    pool = ReplayEnvPool(SPEC, 2)
    assert pool.add(batched, ids=[40, 7]) == [40, 7]
    assert pool.add(make_traj(1, 3)) == [0]  # default ids count on from 0
    ts = pool.reset()
    np.testing.assert_array_equal(pool.slot_trajectory_id, [40, 7])
    np.testing.assert_array_equal(ts.observation, np.stack([trs[0].frames[0], trs[1].frames[0]]))
    np.testing.assert_array_equal(pool.stored_action, to_env_action(np.array([trs[0].actions[0], trs[1].actions[0]])))


def test_queue_refill_and_idle_slots():
    pool = ReplayEnvPool(SPEC, 2, [make_traj(1, 1), make_traj(3, 2), make_traj(1, 3)])
    ts = pool.reset()
    np.testing.assert_array_equal(pool.slot_trajectory_id, [0, 1])
    assert pool.pending == 1 and ts.is_first.all()
    pool.step(None)  # slot 0 reaches its last step (step 1 of 1)
    assert pool.active.all()
    ts = pool.step(None)  # slot 0 takes trajectory 2
    np.testing.assert_array_equal(pool.slot_trajectory_id, [2, 1])
    assert ts.is_first[0] and not ts.is_first[1] and pool.pending == 0
    pool.step(None)  # slot 0 last step of trajectory 2, slot 1 at step 3 = last
    ts = pool.step(None)  # both finished, queue empty: idle
    assert not pool.active.any() and pool.exhausted
    np.testing.assert_array_equal(pool.slot_trajectory_id, [-1, -1])
    np.testing.assert_array_equal(pool.slot_step, [-1, -1])
    np.testing.assert_array_equal(pool.stored_action, [-1, -1])
    np.testing.assert_array_equal(pool.episode_step, [0, 0])
    # idle: an absorbing last step with a zero observation
    assert (ts.observation == 0).all() and (ts.reward == 0).all() and not ts.is_first.any()
    assert ts.is_last.all() and ts.is_terminal.all() and not ts.legal_actions.any() and (ts.to_play == 0).all()
    ts2 = pool.step(None)  # still idle
    for a, b in zip(dataclasses.astuple(ts), dataclasses.astuple(ts2)):
        np.testing.assert_array_equal(a, b)
    # refill: idle slots pick the new trajectories up at the next step, as first steps
    new = make_traj(2, 4)
    assert pool.add([new]) == [3]
    assert pool.pending == 1 and not pool.exhausted
    ts = pool.step(None)
    np.testing.assert_array_equal(pool.active, [True, False])
    assert ts.is_first[0] and not ts.is_first[1] and ts.is_last[1]
    np.testing.assert_array_equal(ts.observation[0], new.frames[0])
    assert pool.slot_trajectory_id[0] == 3 and pool.stored_action[0] == to_env_action(new.actions[0])


def test_reset_restarts_unfinished_trajectories():
    pool = ReplayEnvPool(SPEC, 2, [make_traj(3, 1), make_traj(1, 2), make_traj(2, 3)])
    pool.reset()
    pool.step(None)  # slot 0 at step 1 of 3, slot 1 at its last step
    ts = pool.reset()
    np.testing.assert_array_equal(pool.slot_trajectory_id, [0, 2])  # 0 restarts, 1 was done: next one
    np.testing.assert_array_equal(pool.slot_step, [0, 0])
    assert ts.is_first.all() and (ts.reward == 0).all()


def test_step_before_reset_starts_from_the_queue():
    pool = ReplayEnvPool(SPEC, 2, [make_traj(2, 1)])
    ts = pool.step(np.zeros(2, np.int32))
    np.testing.assert_array_equal(ts.is_first, [True, False])
    np.testing.assert_array_equal(pool.active, [True, False])


def test_legal_masks_given():
    tr = make_traj(2, 1)
    legal = np.zeros((3, 4), bool)
    legal[0, to_env_action(tr.actions[0])] = legal[1, to_env_action(tr.actions[1])] = True
    legal[1, 3] = True
    legal[2] = True  # a last-step row is ignored
    pool = ReplayEnvPool(SPEC, 1)
    pool.add([tr], legal_actions=[legal])
    masks = [pool.reset().legal_actions[0]] + [pool.step(None).legal_actions[0] for _ in range(2)]
    np.testing.assert_array_equal(masks[0], legal[0])
    np.testing.assert_array_equal(masks[1], legal[1])
    assert not masks[2].any()
    bad = legal.copy()
    bad[0] = False
    with pytest.raises(ValueError, match="empty on a step"):
        pool.add([tr], legal_actions=[bad])
    bad = legal.copy()
    bad[0, to_env_action(tr.actions[0])] = False
    bad[0, 3 - to_env_action(tr.actions[0])] = True
    with pytest.raises(ValueError, match="stored action is not legal"):
        pool.add([tr], legal_actions=[bad])


def test_bad_trajectories_are_refused():
    pool = ReplayEnvPool(SPEC, 1)
    good = make_traj(2, 1)
    with pytest.raises(ValueError, match="whole episode"):
        pool.add(good.replace(first=np.int32(-1)))
    with pytest.raises(ValueError, match="whole episode"):
        pool.add(good.replace(last=np.int32(3)))
    with pytest.raises(ValueError, match="frames have shape"):
        pool.add(good.replace(frames=np.zeros((3, 1, 1, 6), np.float32)))
    with pytest.raises(ValueError, match=r"augmented actions .* 1\.\.4"):
        pool.add(good.replace(actions=np.array([0, 1, 0], np.int32)))
    with pytest.raises(ValueError, match="to_play"):
        pool.add(good.replace(to_play=np.array([0, 2, 0], np.int32)))
    with pytest.raises(TypeError):
        pool.add([good, "nope"])
    assert pool.pending == 0  # nothing queued from a refused add
    with pytest.raises(IllegalActionError, match="shape"):
        pool.step(np.zeros(3, np.int32))


def test_spec_path_and_close():
    pool = ReplayEnvPool(dataclasses.replace(SPEC, path="device"), 1, [make_traj(1, 1)])
    assert pool.spec.path == "host"
    with pool:
        pool.reset()
    with pytest.raises(RuntimeError, match="closed"):
        pool.step(None)


def test_contract_first_last_semantics():
    """Across many random-length episodes: the step after a last is first, is_terminal implies
    is_last, legal masks empty exactly on last steps, rewards 0 on first steps."""
    rng = np.random.default_rng(0)
    trajs = [make_traj(int(rng.integers(1, 6)), k, terminal=bool(k % 3), pad=int(rng.integers(0, 3)))
             for k in range(12)]
    pool = ReplayEnvPool(SPEC, 3, trajs)
    steps = play(pool, 40)
    seen = set()
    for t, rec in enumerate(steps):
        ts = rec["ts"]
        assert (ts.is_last | ~ts.is_terminal).all()
        for b in range(3):
            if not rec["active"][b]:
                continue
            seen.add(int(rec["id"][b]))
            assert ts.legal_actions[b].any() != ts.is_last[b]
            if ts.is_first[b]:
                assert ts.reward[b] == 0 and rec["i"][b] == 0
            if t:
                prev = steps[t - 1]
                assert ts.is_first[b] == bool(prev["ts"].is_last[b])
                if not ts.is_first[b]:  # same trajectory, one step on
                    assert rec["id"][b] == prev["id"][b] and rec["i"][b] == prev["i"][b] + 1
    assert seen == set(range(12)) and pool.exhausted
