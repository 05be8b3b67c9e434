"""Golden tests for training targets (moozi.targets; docs/architecture.md §4).

Expected numbers are written out by hand as arithmetic on the stored data,
never recomputed by an implementation of the algorithm.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.config import TargetConfig
from moozi.targets import batched_targets, make_targets, n_step_returns, priorities
from moozi.types import Trajectory

# One compiled function per (config, shapes), shared by all tests.
_make = jax.jit(make_targets, static_argnums=(2, 3, 4, 5))
_returns = jax.jit(n_step_returns, static_argnums=(1,))
_priorities = jax.jit(priorities, static_argnums=(1,))

A = 3
D = [1.0, 0.0, 0.0]  # one-hot dummy policy
G = 99.0  # garbage in padding / never-read slots


def _traj(frames, actions, rewards, values, policies, to_play, first, last, terminal):
    frames = np.asarray(frames, np.float32)
    if frames.ndim == 1:
        frames = frames[:, None, None, None]
    return Trajectory(
        frames=jnp.asarray(frames),
        actions=jnp.asarray(actions, jnp.int32),
        rewards=jnp.asarray(rewards, jnp.float32),
        root_values=jnp.asarray(values, jnp.float32),
        root_policies=jnp.asarray(policies, jnp.float32),
        to_play=jnp.asarray(to_play, jnp.int32),
        first=jnp.asarray(first, jnp.int32),
        last=jnp.asarray(last, jnp.int32),
        is_terminal=jnp.asarray(terminal, jnp.bool_),
    )


# ---------------------------------------------------------------------------
# Single-player episode, T = 4 stored at indices 0..4, padding at 5..6.
# ---------------------------------------------------------------------------
SP_CFG = TargetConfig(history_length=2, unroll_steps=3, td_steps=2, discount=0.5)
P = [
    [0.0, 0.5, 0.5],
    [0.0, 0.25, 0.75],
    [0.0, 1.0, 0.0],
    [0.0, 0.0, 1.0],
    [0.2, 0.3, 0.5],  # p*_T: garbage, must never be a target
    [0.1, 0.1, 0.8],  # padding
    [0.3, 0.3, 0.4],  # padding
]
SP = dict(
    frames=[1, 2, 3, 4, 5, G, G],  # o_i = i + 1
    actions=[1, 2, 1, 2, 2, 2, 2],  # a_0..a_3 real; a_T stored non-dummy on purpose
    rewards=[0, 1, 2, 3, 4, G, G],  # r_i
    values=[10, 20, 30, 40, 50, G, G],  # v*_i
    policies=P,
    to_play=[0, 0, 0, 0, 0, 1, 1],  # padding to_play must not matter
    first=0,
    last=4,
)


@pytest.fixture(scope="module")
def sp_terminal():
    return _traj(**SP, terminal=True)


@pytest.fixture(scope="module")
def sp_truncated():
    return _traj(**SP, terminal=False)


# Per t: actions [K], policy [K+1], reward [K+1] (same for terminal and truncated).
SP_COMMON = {
    0: ([1, 2, 1], [P[0], P[1], P[2], P[3]], [0, 1, 2, 3]),
    1: ([2, 1, 2], [P[1], P[2], P[3], D], [0, 2, 3, 4]),
    2: ([1, 2, 0], [P[2], P[3], D, D], [0, 3, 4, 0]),
    3: ([2, 0, 0], [P[3], D, D, D], [0, 4, 0, 0]),
    4: ([0, 0, 0], [D, D, D, D], [0, 0, 0, 0]),
}

# Terminal: G_j = r_{j+1} + 0.5 r_{j+2} + 0.25 v*_{j+2}, no bootstrap once j+2 >= T = 4.
G_TERM = [
    1 + 0.5 * 2 + 0.25 * 30,  # G_0
    2 + 0.5 * 3 + 0.25 * 40,  # G_1
    3 + 0.5 * 4,  # G_2: j+N = T, terminal -> no bootstrap
    4,  # G_3: r_4 only
    0,  # G_4 = T
]
# Truncated: bootstrap from v*_T = 50 with 0.5^(T-j).
G_TRUNC = [
    1 + 0.5 * 2 + 0.25 * 30,  # G_0
    2 + 0.5 * 3 + 0.25 * 40,  # G_1
    3 + 0.5 * 4 + 0.25 * 50,  # G_2
    4 + 0.5 * 50,  # G_3
    50,  # G_4 = v*_T
]


def _check_common(out, t):
    actions, policy, reward = SP_COMMON[t]
    np.testing.assert_array_equal(np.asarray(out.actions), actions)
    np.testing.assert_allclose(np.asarray(out.policy), policy, rtol=0, atol=1e-7)
    np.testing.assert_allclose(np.asarray(out.reward), reward, rtol=0, atol=1e-7)


@pytest.mark.parametrize("t", [0, 1, 2, 3, 4])
def test_single_player_terminal(sp_terminal, t):
    out = _make(sp_terminal, t, SP_CFG, A)
    _check_common(out, t)
    expected = {
        0: [G_TERM[0], G_TERM[1], G_TERM[2], G_TERM[3]],
        1: [G_TERM[1], G_TERM[2], G_TERM[3], 0],
        2: [G_TERM[2], G_TERM[3], 0, 0],
        3: [G_TERM[3], 0, 0, 0],
        4: [0, 0, 0, 0],
    }[t]
    np.testing.assert_allclose(np.asarray(out.value), expected, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(out.value_mask), [1, 1, 1, 1])
    assert float(out.consistency_mask) == (1.0 if t < 4 else 0.0)


def test_single_player_terminal_values_literal(sp_terminal):
    np.testing.assert_allclose(
        np.asarray(_returns(sp_terminal, SP_CFG)), [9.5, 13.5, 5.0, 4.0, 0.0, 0.0, 0.0], rtol=1e-6
    )


@pytest.mark.parametrize("t", [0, 1, 2, 3, 4])
def test_single_player_truncated(sp_truncated, t):
    out = _make(sp_truncated, t, SP_CFG, A)
    _check_common(out, t)
    expected_value, expected_mask = {
        0: ([G_TRUNC[0], G_TRUNC[1], G_TRUNC[2], G_TRUNC[3]], [1, 1, 1, 1]),
        1: ([G_TRUNC[1], G_TRUNC[2], G_TRUNC[3], 50], [1, 1, 1, 1]),
        2: ([G_TRUNC[2], G_TRUNC[3], 50, 0], [1, 1, 1, 0]),
        3: ([G_TRUNC[3], 50, 0, 0], [1, 1, 0, 0]),
        4: ([50, 0, 0, 0], [1, 0, 0, 0]),
    }[t]
    np.testing.assert_allclose(np.asarray(out.value), expected_value, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(out.value_mask), expected_mask)


def test_single_player_truncated_values_literal(sp_truncated):
    np.testing.assert_allclose(
        np.asarray(_returns(sp_truncated, SP_CFG)),
        [9.5, 13.5, 17.5, 29.0, 50.0, 0.0, 0.0],
        rtol=1e-6,
    )


def test_dtypes_and_shapes(sp_terminal):
    out = _make(sp_terminal, 1, SP_CFG, A)
    k = SP_CFG.unroll_steps
    assert out.observation.shape == (1, 1, 2 * (1 + A))
    assert out.next_observation.shape == (1, 1, 2 * (1 + A))
    assert out.actions.shape == (k,) and out.actions.dtype == jnp.int32
    assert out.policy.shape == (k + 1, A)
    for name in ("value", "value_mask", "reward"):
        assert getattr(out, name).shape == (k + 1,)
    assert out.consistency_mask.shape == () and out.priority.shape == ()
    for name in (
        "observation", "next_observation", "policy", "value", "value_mask", "reward",
        "consistency_mask", "priority",
    ):
        assert getattr(out, name).dtype == jnp.float32, name


def test_num_actions_mismatch_raises(sp_terminal):
    with pytest.raises(ValueError, match="root_policies"):
        make_targets(sp_terminal, 0, SP_CFG, A + 1)


# ---------------------------------------------------------------------------
# Two-player: to_play alternates 0, 1, 0, 1, 0, 1; player 0 moves last (at 4)
# and wins: r_5 = +1 from player 0's view. r_3 = 2 from player 0's view (the
# mover at 2). gamma = 0.9, N = 2.
# ---------------------------------------------------------------------------
TP_CFG = TargetConfig(history_length=1, unroll_steps=2, td_steps=2, discount=0.9)
TP = dict(
    frames=[0, 0, 0, 0, 0, 0],
    actions=[1, 2, 1, 2, 1, 0],
    rewards=[0, 0, 0, 2, 0, 1],
    values=[0.1, -0.2, 0.3, -0.4, 0.5, 0.7],
    policies=[[0, 0.5, 0.5]] * 5 + [D],
    to_play=[0, 1, 0, 1, 0, 1],
    first=0,
    last=5,
)
# G_j = r_{j+1} - 0.9 r_{j+2} + 0.81 v*_{j+2} (the mover at j+1 is the opponent,
# v*_{j+2} is again from the view of the player to move at j).
TP_TERM = [
    0 - 0.9 * 0 + 0.81 * 0.3,  # G_0
    0 - 0.9 * 2 + 0.81 * -0.4,  # G_1: opponent gained 2 -> negative
    2 - 0.9 * 0 + 0.81 * 0.5,  # G_2
    0 - 0.9 * 1,  # G_3: player 1 to move, player 0 wins next ply
    1,  # G_4: player 0 to move and wins
    0,  # G_5 = T
]
TP_TRUNC = [
    TP_TERM[0],
    TP_TERM[1],
    TP_TERM[2],
    0 - 0.9 * 1 + 0.81 * 0.7,  # G_3: to_play[5] == to_play[3] -> +v*_T
    1 - 0.9 * 0.7,  # G_4: v*_T is the opponent's view -> minus
    0.7,  # G_5 = v*_T
]


@pytest.mark.parametrize(
    "terminal, expected", [(True, TP_TERM), (False, TP_TRUNC)], ids=["terminal", "truncated"]
)
def test_two_player_signs(terminal, expected):
    traj = _traj(**TP, terminal=terminal)
    np.testing.assert_allclose(np.asarray(_returns(traj, TP_CFG)), expected, rtol=1e-6, atol=1e-7)
    out = _make(traj, 3, TP_CFG, A)
    np.testing.assert_allclose(
        np.asarray(out.value), [expected[3], expected[4], expected[5]], rtol=1e-6
    )
    # reward targets are raw (the mover's view), not sign-flipped
    np.testing.assert_allclose(np.asarray(out.reward), [0, 0, 1])
    np.testing.assert_array_equal(np.asarray(out.value_mask), [1, 1, 1])


def test_non_alternating_players():
    # to_play 0, 0, 1, 1, 0; N = 3, gamma = 1, terminal at T = 4.
    cfg = TargetConfig(history_length=1, unroll_steps=1, td_steps=3, discount=1.0)
    traj = _traj(
        frames=[0] * 5,
        actions=[1, 1, 1, 1, 0],
        rewards=[0, 1, 2, 3, 4],
        values=[0, 0, 0, 0.5, 0],
        policies=[D] * 5,
        to_play=[0, 0, 1, 1, 0],
        first=0,
        last=4,
        terminal=True,
    )
    expected = [
        1 + 2 - 3 - 0.5,  # G_0: movers 0, 0, 1; v*_3 is player 1's view
        2 - 3 - 4,  # G_1: movers 0, 1, 1; j+N = T -> no bootstrap
        3 + 4,  # G_2: movers 1, 1
        4,  # G_3: mover 1 == to_play[3]
        0,  # G_4 = T
    ]
    np.testing.assert_allclose(np.asarray(_returns(traj, cfg)), expected, rtol=1e-6)


def test_random_move_cuts_value_targets():
    # TP's game (player 0 wins with its move at 4) with a random move at 2:
    # targets stop there and bootstrap from v*_2 = 0.3. A flag on the last
    # step (5) is meaningless (no move is made there) and must be ignored.
    tp = dict(TP)
    traj = _traj(**tp, terminal=True).replace(
        random_actions=jnp.asarray([False, False, True, False, False, True])
    )
    full = TargetConfig(history_length=1, unroll_steps=2, td_steps=9, discount=1.0)
    expected = [
        0 - 0 + 0.3,  # G_0: r_1, -r_2, then +v*_2 (player 0 to move at 2, as at 0)
        0 - 0.3,  # G_1: r_2 by player 1 itself, then -v*_2 (player 0's view)
        0.3,  # G_2 = v*_2: the random move's own outcome is never credited
        0 - 1,  # G_3: no random move after 2: r_4 = 0, player 0 wins on r_5
        1,  # G_4
        0,  # G_5 = T
    ]
    np.testing.assert_allclose(np.asarray(_returns(traj, full)), expected, rtol=1e-6, atol=1e-7)
    # A cut farther than N steps away changes nothing; within N it does.
    one = TargetConfig(history_length=1, unroll_steps=2, td_steps=1, discount=1.0)
    np.testing.assert_allclose(
        np.asarray(_returns(traj, one)),
        [0 - -0.2, 0 - 0.3, 0.3, 0 - 0.5, 1, 0],  # G_2 would be r_3 - v*_3 = 2.4 without the cut
        rtol=1e-6, atol=1e-7,
    )
    np.testing.assert_allclose(
        np.asarray(_priorities(traj, full)), [0.2, 0.1, 0.0, 0.6, 0.5, 0.7], rtol=1e-6, atol=1e-7
    )
    out = _make(traj, 1, full, A)
    np.testing.assert_allclose(np.asarray(out.value), [-0.3, 0.3, -1.0], rtol=1e-6)
    # All-False flags equal no flags.
    none = _traj(**tp, terminal=True)
    np.testing.assert_allclose(
        np.asarray(_returns(traj.replace(random_actions=jnp.zeros(6, jnp.bool_)), full)),
        np.asarray(_returns(none, full)),
    )


# ---------------------------------------------------------------------------
# Priorities
# ---------------------------------------------------------------------------


def test_priorities(sp_terminal, sp_truncated):
    term = [abs(10 - 9.5), abs(20 - 13.5), abs(30 - 5), abs(40 - 4), abs(50 - 0), 0, 0]
    trunc = [abs(10 - 9.5), abs(20 - 13.5), abs(30 - 17.5), abs(40 - 29), abs(50 - 50), 0, 0]
    for traj, expected in ((sp_terminal, term), (sp_truncated, trunc)):
        np.testing.assert_allclose(np.asarray(_priorities(traj, SP_CFG)), expected, rtol=1e-6)
        for t in range(5):
            out = _make(traj, t, SP_CFG, A)
            np.testing.assert_allclose(float(out.priority), expected[t], rtol=1e-6)
        assert _priorities(traj, SP_CFG).dtype == jnp.float32


def test_episode_not_at_index_zero():
    # The single-player episode stored from index 2 (first = 2); 0..1 are padding.
    sp = dict(SP)
    for key in ("frames", "actions", "rewards", "values", "to_play"):
        sp[key] = [7, 7] + list(SP[key])
    sp["policies"] = [P[5], P[6]] + P
    traj = _traj(**dict(sp, first=2, last=6), terminal=True)
    np.testing.assert_allclose(
        np.asarray(_returns(traj, SP_CFG)), [0, 0, 9.5, 13.5, 5.0, 4.0, 0, 0, 0], rtol=1e-6
    )
    np.testing.assert_allclose(
        np.asarray(_priorities(traj, SP_CFG)), [0, 0, 0.5, 6.5, 25, 36, 50, 0, 0], rtol=1e-6
    )
    out = _make(traj, 2, SP_CFG, A)
    np.testing.assert_allclose(np.asarray(out.value), [9.5, 13.5, 5.0, 4.0], rtol=1e-6)
    # history before the episode start reads zeros / dummy, not the padding
    np.testing.assert_allclose(
        np.asarray(out.observation)[0, 0], [0, 1, 1 / 3, 0, 0, 1 / 3, 0, 0], atol=1e-7
    )


# ---------------------------------------------------------------------------
# Windows cut out of a longer episode
# ---------------------------------------------------------------------------
W_CFG = TargetConfig(history_length=2, unroll_steps=3, td_steps=2, discount=0.9)


def _long_episode(terminal):
    rng = np.random.default_rng(0)
    size, last = 20, 15
    policies = rng.dirichlet(np.ones(A), size=size).astype(np.float32)
    return dict(
        frames=rng.normal(size=(size, 2, 2, 1)).astype(np.float32),
        actions=rng.integers(1, A, size=size),
        rewards=rng.normal(size=size).astype(np.float32),
        values=rng.normal(size=size).astype(np.float32),
        policies=policies,
        to_play=np.arange(size) % 2,
        first=0,
        last=last,
        terminal=terminal,
    )


def _window(ep, start, size):
    w = {k: np.asarray(v)[start : start + size] for k, v in ep.items()
         if k not in ("first", "last", "terminal")}
    return _traj(**w, first=ep["first"] - start, last=ep["last"] - start, terminal=ep["terminal"])


def _frame_code(frame, action, next_frame):
    """A toy game code that reads both frames and the action (so a window's misplaced read would show)."""
    return (next_frame[0, 0, 0] * 3 + frame[0, 0, 0] + action).astype(jnp.int32)


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "truncated"])
@pytest.mark.parametrize(
    "start, size, ts",
    [
        (3, 10, [5, 6, 7]),  # first < 0, last >= S
        (0, 8, [0, 1, 2]),  # first = 0, last >= S
        (9, 11, [11, 12, 13, 14, 15]),  # first < 0, last inside, padding after
    ],
)
def test_window_matches_full(terminal, start, size, ts):
    ep = _long_episode(terminal)
    full = _traj(**ep)
    win = _window(ep, start, size)
    assert int(win.first) <= 0
    for t in ts:
        # with Stochastic MuZero's fields and a game's codes, so every field is compared
        a = _make(full, t, W_CFG, A, True, _frame_code)
        b = _make(win, t - start, W_CFG, A, True, _frame_code)
        for name in a.__dataclass_fields__:
            np.testing.assert_allclose(
                np.asarray(getattr(b, name)), np.asarray(getattr(a, name)),
                rtol=1e-6, atol=1e-6, err_msg=f"{name} at t={t}",
            )


# ---------------------------------------------------------------------------
# Observations: o_i = i + 1 (1x1x1 frames), L = 2, A = 3.
# Channels: [o_{t-1}, o_t, onehot(a_{t-2})/3, onehot(a_{t-1})/3].
# ---------------------------------------------------------------------------
T3 = 1 / 3
OBS = {
    0: [0, 1, T3, 0, 0, T3, 0, 0],  # zeros / dummy before the start
    1: [1, 2, T3, 0, 0, 0, T3, 0],  # a_{-1} dummy, a_0 = 1
    2: [2, 3, 0, T3, 0, 0, 0, T3],  # a_0 = 1, a_1 = 2
    3: [3, 4, 0, 0, T3, 0, T3, 0],  # a_1 = 2, a_2 = 1
    4: [4, 5, 0, T3, 0, 0, 0, T3],  # a_2 = 1, a_3 = 2
}


@pytest.mark.parametrize("t", [0, 1, 2, 3, 4])
def test_observations(sp_terminal, t):
    out = _make(sp_terminal, t, SP_CFG, A)
    np.testing.assert_allclose(np.asarray(out.observation)[0, 0], OBS[t], atol=1e-7)
    if t < 4:
        np.testing.assert_allclose(np.asarray(out.next_observation)[0, 0], OBS[t + 1], atol=1e-7)
        assert float(out.consistency_mask) == 1.0
    else:  # past the end: deterministic (the history at t), masked
        np.testing.assert_allclose(np.asarray(out.next_observation)[0, 0], OBS[4], atol=1e-7)
        assert float(out.consistency_mask) == 0.0


# ---------------------------------------------------------------------------
# Batched (vmap + jit)
# ---------------------------------------------------------------------------


def test_batched_matches_single(sp_terminal, sp_truncated):
    pairs = [(sp_terminal, 0), (sp_terminal, 2), (sp_terminal, 4),
             (sp_truncated, 1), (sp_truncated, 3), (sp_truncated, 4)]
    trajs = jax.tree.map(lambda *xs: jnp.stack(xs), *[p[0] for p in pairs])
    ts = jnp.asarray([p[1] for p in pairs], jnp.int32)
    out = batched_targets(trajs, ts, SP_CFG, A, chance=True, chance_code=_frame_code)
    assert out.value.shape == (len(pairs), SP_CFG.unroll_steps + 1)
    assert out.observation.shape == (len(pairs), 1, 1, 8)
    for i, (traj, t) in enumerate(pairs):
        single = _make(traj, t, SP_CFG, A, True, _frame_code)
        for name in single.__dataclass_fields__:
            np.testing.assert_allclose(
                np.asarray(getattr(out, name))[i], np.asarray(getattr(single, name)),
                rtol=1e-6, atol=1e-7, err_msg=f"{name} at pair {i}",
            )
    # plain vmap with config / num_actions unmapped also works
    vm = jax.jit(jax.vmap(make_targets, in_axes=(0, 0, None, None)), static_argnums=(2, 3))
    out2 = vm(trajs, ts, SP_CFG, A)
    np.testing.assert_allclose(np.asarray(out2.value), np.asarray(out.value))
    # n_step_returns / priorities vmap over a batch of trajectories
    prio = jax.jit(jax.vmap(priorities, in_axes=(0, None)), static_argnums=(1,))(trajs, SP_CFG)
    np.testing.assert_allclose(np.asarray(prio)[0], np.asarray(_priorities(sp_terminal, SP_CFG)))
