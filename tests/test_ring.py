"""Windows out of a ring of acted steps (moozi.replay.ring) give the host buffer's targets at every position."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

from moozi.config import ReplayConfig, TargetConfig
from moozi.replay import ReplayBuffer
from moozi.replay.ring import RING_FIELDS, ring_window
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
