"""HostPool semantics (docs/architecture.md §3) with a tiny hand-written HostEnv (tests/_pool_games.py).

The pool adds the step contract for every host bridge: auto-reset, per-episode
seeds, the truncation cap, the empty legal mask on last steps, action checks,
and (with ``num_workers > 0``) the same results from worker processes.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from moozi.envs.contract import IllegalActionError, TimeStep
from moozi.envs.pool import HostPool, episode_seed
from tests._pool_games import Counter, WorkerBoom, make_failing_counter

FIELDS = ("observation", "reward", "is_first", "is_last", "is_terminal", "legal_actions", "to_play")


def assert_ts_equal(a: TimeStep, b: TimeStep):
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)


def envs_of(pool):
    return [s.env for s in pool._local.slots]


def drive(pool, steps, seed=None, actions_seed=0):
    """reset(seed), then ``steps`` steps of random legal actions (an out-of-range one on last steps)."""
    rng = np.random.default_rng(actions_seed)
    tss, acts = [pool.reset(seed)], []
    for _ in range(steps):
        ts = tss[-1]
        a = np.array([rng.choice(np.flatnonzero(m)) if m.any() else 99 for m in ts.legal_actions])
        acts.append(a)
        tss.append(pool.step(a))
    return tss, acts


def test_shapes_and_dtypes():
    pool = HostPool(Counter, 3, seed=1)
    ts = pool.reset()
    assert ts.observation.shape == (3, 1, 1, 3) and ts.observation.dtype == np.float32
    assert ts.reward.dtype == np.float32 and ts.to_play.dtype == np.int32
    assert ts.legal_actions.shape == (3, 3) and ts.legal_actions.dtype == np.bool_
    for f in (ts.is_first, ts.is_last, ts.is_terminal):
        assert f.dtype == np.bool_ and f.shape == (3,)
    assert ts.is_first.all() and (ts.reward == 0).all() and not ts.is_last.any()
    np.testing.assert_array_equal(pool.episode_step, [0, 0, 0])
    ts = pool.step(np.array([1, 0, 1]))
    np.testing.assert_array_equal(ts.reward, [2.0, 1.0, 2.0])
    np.testing.assert_array_equal(pool.episode_step, [1, 1, 1])
    assert pool.call("render")[0].startswith("counter seed=")


def test_auto_reset_ignores_the_action():
    pool = HostPool(functools.partial(Counter, length=2), 2, seed=0)
    pool.reset()
    pool.step(np.array([0, 1]))
    ts = pool.step(np.array([1, 1]))
    assert ts.is_last.all() and ts.is_terminal.all() and not ts.legal_actions.any()
    np.testing.assert_array_equal(ts.observation[:, 0, 0, 1], [2, 2])
    calls = [e.steps_called for e in envs_of(pool)]
    ts = pool.step(np.array([99, -7]))  # out of range and illegal: ignored after a last step
    assert ts.is_first.all() and (ts.reward == 0).all() and not ts.is_last.any()
    assert [e.steps_called for e in envs_of(pool)] == calls, "the game is not stepped on auto-reset"
    np.testing.assert_array_equal(ts.observation[:, 0, 0, 1:], [[0, -1], [0, -1]])
    np.testing.assert_array_equal(pool.episode_step, [0, 0])


def test_episode_seeds_differ_and_reproduce():
    pool = HostPool(Counter, 3, seed=5)
    drive(pool, 25)
    seeds = [e.seeds for e in envs_of(pool)]
    assert all(len(s) >= 3 for s in seeds), "every env played several episodes"
    for b, s in enumerate(seeds):
        assert s == [episode_seed(5, b, k) for k in range(len(s))]
    flat = [x for s in seeds for x in s]
    assert len(set(flat)) == len(flat), "every episode of every env has its own seed"
    # same seed and actions -> the same steps; reset(seed) restarts the episode sequence
    a, acts = drive(pool, 25, seed=5)
    b, _ = drive(HostPool(Counter, 3, seed=5), 25)
    for x, y in zip(a, b):
        assert_ts_equal(x, y)
    c, _ = drive(pool, 25, seed=6)
    assert pool.seed == 6
    assert not np.array_equal(a[0].observation, c[0].observation)


def test_cap_truncates_last_not_terminal():
    pool = HostPool(functools.partial(Counter, length=10, cap=4), 2, seed=0)
    tss, _ = drive(pool, 6)
    for t in range(1, 4):
        assert not tss[t].is_last.any()
    assert tss[4].is_last.all() and not tss[4].is_terminal.any()
    assert (tss[4].reward > 0).all() and not tss[4].legal_actions.any()
    assert tss[5].is_first.all()
    # the game's own cap (truncated) is also last and not terminal
    tss, _ = drive(HostPool(functools.partial(Counter, length=10, truncate_at=3), 1), 4)
    assert tss[3].is_last[0] and not tss[3].is_terminal[0] and tss[4].is_first[0]


def test_terminating_exactly_at_the_cap_is_terminal():
    tss, _ = drive(HostPool(functools.partial(Counter, length=4, cap=4), 2, seed=0), 5)
    assert tss[4].is_last.all() and tss[4].is_terminal.all()
    # terminated and truncated together: termination wins
    tss, _ = drive(HostPool(functools.partial(Counter, length=3, truncate_at=3), 1), 3)
    assert tss[3].is_last[0] and tss[3].is_terminal[0]


def test_observation_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match=r"pooltest:counter \(Counter.reset\): .*observation of shape \(4,\).*\(1, 1, 3\)"):
        HostPool(functools.partial(Counter, obs_size=4), 1).reset()
    # the same number of values in another shape is reshaped to the declared one
    class Flat(Counter):
        def _obs(self, action):
            return super()._obs(action).reshape(3, 1)

    assert HostPool(Flat, 1).reset().observation.shape == (1, 1, 1, 3)


def test_bad_actions_raise_and_leave_the_pool_unchanged():
    pool = HostPool(Counter, 2, seed=0)
    pool.reset()
    with pytest.raises(IllegalActionError, match=r"actions has shape \(3,\); expected \(2,\)"):
        pool.step(np.array([0, 1, 0]))
    with pytest.raises(IllegalActionError, match=r"shape"):
        pool.step(np.int32(0))
    with pytest.raises(IllegalActionError, match=r"pooltest:counter: environment 1: action 3 is out of range; allowed 0\.\.2"):
        pool.step(np.array([0, 3]))
    with pytest.raises(IllegalActionError, match=r"environment 1: action -1 is out of range"):
        pool.step(np.array([0, -1]))
    with pytest.raises(IllegalActionError, match=r"environment 0: action 2 is not legal here; legal actions: \[0, 1\]"):
        pool.step(np.array([2, 0]))
    with pytest.raises(IllegalActionError, match="out of range"):
        pool.step(np.array([0.5, 0.0]))
    # every action is checked before any environment steps
    assert [e.steps_called for e in envs_of(pool)] == [0, 0]
    np.testing.assert_array_equal(pool.episode_step, [0, 0])


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="num_envs"):
        HostPool(Counter, 0)
    with pytest.raises(ValueError, match="num_workers"):
        HostPool(Counter, 1, num_workers=-1)


def test_close_closes_the_games():
    pool = HostPool(Counter, 2)
    envs = envs_of(pool)
    with pool:
        pool.reset()
    assert all(e.closed for e in envs)


# ----------------------------------------------------------------------------- worker processes


def test_multiprocess_matches_in_process():
    factory = functools.partial(Counter, cap=5)
    local = HostPool(factory, 3, seed=11)
    with HostPool(factory, 3, seed=11, num_workers=2) as remote:
        assert remote.num_workers == 2 and remote.spec == local.spec
        a, acts = drive(local, 20)
        for t, ts in enumerate([remote.reset()] + [remote.step(x) for x in acts]):
            assert_ts_equal(ts, a[t])
        np.testing.assert_array_equal(remote.episode_step, local.episode_step)
        assert remote.call("render") == local.call("render")
        # reset with a new seed agrees too
        assert_ts_equal(remote.reset(3), local.reset(3))
        # an illegal action for the second worker's environment raises, named, before any worker
        # steps: the pool stays in lock-step, as in-process
        for pool in (local, remote):
            with pytest.raises(IllegalActionError, match=r"environment 2: action 2 is not legal"):
                pool.step(np.array([0, 0, 2]))
            with pytest.raises(IllegalActionError, match=r"environment 0: action 5 is out of range"):
                pool.step(np.array([5, 0, 0]))
        np.testing.assert_array_equal(remote.episode_step, [0, 0, 0])
        assert_ts_equal(remote.step(np.array([1, 0, 1])), local.step(np.array([1, 0, 1])))


def test_worker_exception_reraises_with_its_traceback_and_close_ends_processes():
    pool = HostPool(functools.partial(Counter, length=10, fail_at=2), 4, seed=0, num_workers=2)
    procs = [r.proc for r in pool._remotes]
    assert len(procs) == 2 and all(p.is_alive() for p in procs)
    pool.reset()
    pool.step(np.zeros(4, np.int32))
    with pytest.raises(WorkerBoom, match="boom at step 2") as e:
        pool.step(np.zeros(4, np.int32))
    note = "".join(getattr(e.value, "__notes__", []))
    assert "in environment worker" in note and "_pool_games.py" in note and "in step" in note
    assert all(p.is_alive() for p in procs), "a game error does not kill the worker"
    pool.close()
    assert not any(p.is_alive() for p in procs)
    assert all(p.exitcode == 0 for p in procs), "the workers ended cleanly"
    pool.close()  # closing twice is harmless


def test_worker_construction_error_reraises():
    with pytest.raises(WorkerBoom, match="cannot build this game") as e:
        HostPool(make_failing_counter, 2, num_workers=1)
    assert "make_failing_counter" in "".join(getattr(e.value, "__notes__", []))
