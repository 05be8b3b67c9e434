"""The mover's view (``model.mover_relative``): golden relabelling, the bridge's planes, the config boundary."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from moozi.config import ConfigError, ModelConfig, apply_overrides, config_from_dict
from moozi.envs.contract import EnvSpec
from moozi.model.history import stack_history
from moozi.model.networks import build_model
from moozi.model.perspective import MoverView, mover_view
from moozi.presets import load_preset

# One frame of 4 channels laid out like OpenSpiel tic-tac-toe's: empty, o (player 1), x (player 0), to-play.
EMPTY, OP, XP, TP = 0, 1, 2, 3
VIEW = MoverView(frame_channels=4, history_length=2, player_planes=(XP, OP, TP))
A = 10  # augmented actions


def board(x_cells, o_cells, to_play):
    """``[3, 3, 4]`` frame: x and o on the given cells (row-major), the rest empty, the to-play plane set."""
    f = np.zeros((9, 4), np.float32)
    f[:, EMPTY] = 1
    for cells, plane in ((x_cells, XP), (o_cells, OP)):
        f[list(cells), EMPTY] = 0
        f[list(cells), plane] = 1
    f[:, TP] = to_play
    return f.reshape(3, 3, 4)


def stacked(frames, actions):
    return stack_history(jnp.asarray(np.stack(frames)), jnp.asarray(actions, jnp.int32), A)[None]


def test_o_to_move_sees_its_pieces_in_the_first_players_plane_in_every_frame():
    # Frame 0: the empty board, x to move; frame 1: x played 4, o to move.
    obs = stacked([board([], [], 0), board([4], [], 1)], [9, 4])
    out = np.asarray(mover_view(obs, VIEW))[0]
    # Newest frame (channels 4..7): the mover (o) has no piece; x's piece on cell 4 is now in the o plane.
    newest = out[..., 4:8].reshape(9, 4)
    assert newest[:, XP].sum() == 0
    assert newest[:, OP].tolist() == [0, 0, 0, 0, 1, 0, 0, 0, 0]
    assert newest[:, EMPTY].sum() == 8
    assert out[..., [TP, 4 + TP]].sum() == 0  # every to-play plane zeroed
    # The action planes (channels 8..) are untouched.
    np.testing.assert_array_equal(out[..., 8:], np.asarray(obs)[0, ..., 8:])


def test_x_to_move_keeps_the_planes_and_only_clears_to_play():
    obs = stacked([board([4], [], 1), board([4], [0], 0)], [4, 0])
    out = np.asarray(mover_view(obs, VIEW))[0]
    expect = np.asarray(obs)[0].copy()
    expect[..., [TP, 4 + TP]] = 0
    np.testing.assert_array_equal(out, expect)


def test_a_position_and_its_colour_swapped_twin_look_the_same_to_their_movers():
    # x on 4 with o to move, versus o on 4 with x to move: the same position for the mover.
    a = stacked([board([], [], 0), board([4], [], 1)], [9, 4])
    b = stacked([board([], [], 1), board([], [4], 0)], [9, 4])
    np.testing.assert_array_equal(np.asarray(mover_view(a, VIEW)), np.asarray(mover_view(b, VIEW)))
    assert not np.array_equal(np.asarray(a), np.asarray(b))


def test_the_model_sees_the_mover_view_only_when_configured():
    on = ModelConfig(kind="mlp", mlp_hidden=(8,), mlp_embedding=4, head_hidden=4, support_size=1,
                     mover_relative=True)
    shape = (3, 3, 2 * (4 + A))
    model = build_model(on, shape, A, VIEW)
    plain = build_model(ModelConfig(kind="mlp", mlp_hidden=(8,), mlp_embedding=4, head_hidden=4, support_size=1),
                        shape, A)
    params = plain.init(__import__("jax").random.key(0))
    a = stacked([board([], [], 0), board([4], [], 1)], [9, 4])
    b = stacked([board([], [], 1), board([], [4], 0)], [9, 4])
    np.testing.assert_allclose(model.initial_inference(params, a).hidden, model.initial_inference(params, b).hidden)
    np.testing.assert_allclose(model.initial_inference(params, a).hidden,
                               plain.initial_inference(params, mover_view(a, VIEW)).hidden)
    assert not np.allclose(plain.initial_inference(params, a).hidden, plain.initial_inference(params, b).hidden)
    with pytest.raises(ValueError, match="mover_relative = true needs"):
        build_model(on, shape, A)


def test_openspiel_bridge_declares_the_planes_it_emits():
    pytest.importorskip("pyspiel")
    from moozi.envs.openspiel_bridge import OpenSpielEnv

    for game, first_move in (("tic_tac_toe", 4), ("connect_four", 3)):
        env = OpenSpielEnv(game)
        p0, p1, tp = env.spec.player_planes
        env.reset(0)
        ts = env.step(first_move)  # player 0 moved; player 1 to move
        assert ts.to_play == 1 and ts.observation[..., tp].min() == 1
        assert ts.observation[..., p0].sum() == 1 and ts.observation[..., p1].sum() == 0
        ts = env.step(first_move + 1)  # player 1 moved
        assert ts.to_play == 0 and ts.observation[..., tp].max() == 0
        assert ts.observation[..., p0].sum() == 1 and ts.observation[..., p1].sum() == 1
    assert OpenSpielEnv("breakthrough(rows=5,columns=5)").spec.player_planes == ()


def test_config_boundary():
    with pytest.raises(ConfigError, match="model.mover_relative"):
        ModelConfig(mover_relative="yes")
    with pytest.raises(ConfigError, match="env_spec.player_planes"):
        EnvSpec("one", (3, 3, 4), 9, player_planes=(2, 1, 3))  # one player
    with pytest.raises(ConfigError, match="env_spec.player_planes"):
        EnvSpec("two", (3, 3, 4), 9, num_players=2, player_planes=(2, 2, 3))
    from moozi.parts import build_parts

    cfg = config_from_dict(apply_overrides(load_preset("tictactoe"), ["model.mover_relative=true"]))  # pgx: already the mover's
    with pytest.raises(ConfigError, match="model.mover_relative = true needs .* pgx:tic_tac_toe declares none"):
        build_parts(cfg)
