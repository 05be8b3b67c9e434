"""History stacking: golden layout, padding before the episode start, rolling history."""

import jax.numpy as jnp
import numpy as np
import pytest

from moozi.model.history import (
    history_at,
    history_init,
    history_observation,
    history_push,
    stack_history,
    stacked_channels,
)


def test_stack_history_golden_layout():
    # L=2 frames of 1x1x2, A=4: [o0 (2 ch), o1 (2 ch), onehot(a0)/4, onehot(a1)/4]
    frames = jnp.array([[[[1.0, 2.0]]], [[[3.0, 4.0]]]])
    actions = jnp.array([3, 0])
    out = np.asarray(stack_history(frames, actions, 4))
    assert out.shape == (1, 1, stacked_channels(2, 4, 2)) == (1, 1, 12)
    np.testing.assert_allclose(out[0, 0], [1, 2, 3, 4, 0, 0, 0, 0.25, 0.25, 0, 0, 0])


def test_stack_history_tiles_over_space():
    frames = jnp.zeros((3, 2, 5, 1))
    out = np.asarray(stack_history(frames, jnp.array([1, 2, 1]), 3))
    assert out.shape == (2, 5, 3 * (1 + 3))
    assert np.all(out[..., 3:] == out[:1, :1, 3:])


def test_stack_history_rejects_bad_shapes():
    with pytest.raises(ValueError, match="frames must be"):
        stack_history(jnp.zeros((2, 3, 1)), jnp.zeros(2, jnp.int32), 3)
    with pytest.raises(ValueError, match="actions must be"):
        stack_history(jnp.zeros((2, 1, 1, 1)), jnp.zeros(3, jnp.int32), 3)


def test_history_at_pads_before_start():
    frames = jnp.arange(5.0).reshape(5, 1, 1, 1) + 1.0  # o_i = i + 1
    actions = jnp.array([2, 1, 2, 1, 0])  # a_i taken at step i
    out = np.asarray(history_at(frames, actions, 0, 1, 3, 3))[0, 0]
    # frames o_{-1}, o_0, o_1 -> 0, 1, 2; actions a_{-2}, a_{-1}, a_0 -> dummy, dummy, 2
    np.testing.assert_allclose(out[:3], [0, 1, 2])
    third = 1 / 3
    np.testing.assert_allclose(out[3:], [third, 0, 0, third, 0, 0, 0, 0, third])


def test_history_at_window_with_negative_first():
    # A window whose episode starts at index 1 (index 0 is padding from another episode).
    frames = jnp.array([9.0, 1.0, 2.0]).reshape(3, 1, 1, 1)
    actions = jnp.array([2, 1, 2])
    out = np.asarray(history_at(frames, actions, 1, 1, 2, 3))[0, 0]
    np.testing.assert_allclose(out[:2], [0, 1])  # the 9 before the start is hidden
    np.testing.assert_allclose(out[2:], [1 / 3, 0, 0, 1 / 3, 0, 0])


def test_rolling_history_matches_history_at():
    rng = np.random.default_rng(0)
    frames = jnp.asarray(rng.normal(size=(6, 2, 2, 1)), jnp.float32)
    actions = jnp.asarray([1, 2, 1, 1, 2, 0])
    state = history_init(1, (2, 2, 1), 3)
    for t in range(6):
        prev = actions[t - 1] if t > 0 else 0
        state = history_push(state, frames[t][None], jnp.array([prev]), jnp.array([t == 0]))
        got = history_observation(state, 3)[0]
        np.testing.assert_allclose(got, history_at(frames, actions, 0, t, 3, 3), atol=1e-7)


def test_rolling_history_clears_on_first():
    state = history_init(2, (1, 1, 1), 2)
    state = history_push(state, jnp.ones((2, 1, 1, 1)), jnp.array([0, 0]), jnp.array([True, True]))
    state = history_push(state, 2 * jnp.ones((2, 1, 1, 1)), jnp.array([1, 1]), jnp.array([False, True]))
    obs = np.asarray(history_observation(state, 2))[:, 0, 0]
    np.testing.assert_allclose(obs[0], [1, 2, 0.5, 0, 0, 0.5])  # continuing episode
    np.testing.assert_allclose(obs[1], [0, 2, 0.5, 0, 0.5, 0])  # new episode: cleared, dummy action
