"""Board symmetries: golden tables, the window transform, the games' own rules, and the learner switch."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.config import ConfigError, LearnerConfig, ModelConfig, ReplayConfig, TargetConfig
from moozi.envs.contract import EnvSpec
from moozi.envs.symmetry import augment_tables, augment_windows, cell_symmetries, column_mirror
from moozi.types import Trajectory


def test_symmetry_tables_golden():
    syms = cell_symmetries(3, 3)
    assert len(syms) == 8 and syms[0] == (tuple(range(9)), tuple(range(9)))
    # left-right flip: new cell (r, c) shows old (r, 2 - c); a move at cell 0 shows at cell 2
    assert syms[2] == ((2, 1, 0, 5, 4, 3, 8, 7, 6), (2, 1, 0, 5, 4, 3, 8, 7, 6))
    # transpose: new (r, c) shows old (c, r); move 1 = (0, 1) shows at (1, 0) = 3
    assert syms[4][0] == (0, 3, 6, 1, 4, 7, 2, 5, 8) and syms[4][1][1] == 3
    # a quarter turn counter-clockwise: new top-left shows old top-right; old top-left lands bottom-left (6)
    assert syms[5][0] == (2, 5, 8, 1, 4, 7, 0, 3, 6) and syms[5][1][0] == 6
    assert len(set(syms)) == 8  # all distinct
    with_pass = cell_symmetries(2, 2, extra_actions=1)
    assert len(with_pass) == 8 and all(s[1][4] == 4 for s in with_pass)  # pass never moves
    assert len(cell_symmetries(2, 3)) == 4  # a rectangle: identity, two flips, half turn
    assert column_mirror(2, 3) == (((0, 1, 2, 3, 4, 5), (0, 1, 2)), ((2, 1, 0, 5, 4, 3), (2, 1, 0)))


def test_specs_refuse_bad_symmetries():
    ok = cell_symmetries(3, 3)
    EnvSpec(name="t", observation_shape=(3, 3, 2), num_actions=9, symmetries=ok)
    with pytest.raises(ConfigError, match=r"env_spec.symmetries .*permutation of the 9 board cells"):
        EnvSpec(name="t", observation_shape=(3, 3, 2), num_actions=9, symmetries=((tuple(range(8)), ok[0][1]),))
    with pytest.raises(ConfigError, match="permutation of the 9 actions"):
        EnvSpec(name="t", observation_shape=(3, 3, 2), num_actions=9, symmetries=((ok[0][0], (0,) * 9),))
    with pytest.raises(ConfigError, match="identity first"):
        EnvSpec(name="t", observation_shape=(3, 3, 2), num_actions=9, symmetries=(ok[2], ok[0]))


def _window(b: int):
    """``b`` windows of 2 steps on a 3x3 board, 1 plane: frame 0 marks cell 0, frame 1 cells 0 and 1."""
    frames = np.zeros((b, 2, 3, 3, 1), np.uint8)
    frames[:, 0, 0, 0, 0] = 1
    frames[:, 1, 0, 0, 0] = frames[:, 1, 0, 1, 0] = 1
    policies = np.zeros((b, 2, 10), np.float32)
    policies[:, 0, 1 + 1] = 0.75  # env action 1 (cell (0, 1))
    policies[:, 0, 1 + 4] = 0.25  # env action 4 (centre)
    policies[:, 1, 0] = 1.0  # the dummy action
    legal = np.ones((b, 2, 9), bool)
    legal[:, 0, 0] = False  # cell 0 is taken at step 0
    legal[:, 1] = False
    return Trajectory(frames=frames, actions=np.tile(np.array([2, 0], np.int32), (b, 1)),  # played env action 1
                      rewards=np.zeros((b, 2), np.float32), root_values=np.full((b, 2), 0.5, np.float32),
                      root_policies=policies, to_play=np.zeros((b, 2), np.int32), first=np.zeros(b, np.int32),
                      last=np.ones(b, np.int32), is_terminal=np.ones(b, bool),
                      random_actions=np.zeros((b, 2), bool), legal_actions=legal)


def test_augment_windows_golden():
    tables = augment_tables(cell_symmetries(3, 3))
    w = _window(2)
    out = jax.device_get(augment_windows(w, jnp.array([0, 2]), tables))  # identity, left-right flip
    for f in ("frames", "actions", "root_policies", "legal_actions", "root_values"):
        np.testing.assert_array_equal(getattr(out, f)[0], getattr(w, f)[0])
    flipped = np.zeros((2, 3, 3, 1), np.uint8)
    flipped[0, 0, 2, 0] = 1  # cell 0 -> cell 2
    flipped[1, 0, 2, 0] = flipped[1, 0, 1, 0] = 1  # cell 1 stays
    np.testing.assert_array_equal(out.frames[1], flipped)
    np.testing.assert_array_equal(out.actions[1], [2, 0])  # env action 1 maps to itself; dummy stays
    expected = np.zeros((2, 10), np.float32)
    expected[0, 2], expected[0, 5], expected[1, 0] = 0.75, 0.25, 1.0
    np.testing.assert_array_equal(out.root_policies[1], expected)
    assert not out.legal_actions[1, 0, 2] and out.legal_actions[1, 0].sum() == 8  # the taken cell moved to 2
    np.testing.assert_array_equal(out.root_values[1], w.root_values[1])
    turned = jax.device_get(augment_windows(w, jnp.array([5, 5]), tables))  # quarter turn: cell 1 -> cell 3
    assert turned.actions[0, 0] == 3 + 1 and turned.root_policies[0, 0, 3 + 1] == 0.75
    assert turned.frames[0, 0, 2, 0, 0] == 1 and turned.frames[0, 0].sum() == 1  # cell 0 -> cell 6


@pytest.mark.parametrize("name", ["pgx:tic_tac_toe", "pgx:connect_four", "pgx:othello", "pgx:go_9x9"])
def test_declared_symmetries_are_the_games_own(name):
    """Playing the mapped moves from the same start gives the mapped observation, for every symmetry."""
    from moozi.envs import make_env

    env = make_env(name)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    syms = env.spec.symmetries
    assert len(syms) == {"pgx:connect_four": 2, "pgx:othello": 4}.get(name, 8)
    h, w, c = env.spec.observation_shape

    def play(moves):
        state, ts = reset(jax.random.key(3))
        for m in moves:
            state, ts = step(state, jnp.asarray(m, jnp.int32))
        return ts

    rng = np.random.default_rng(0)
    for game in range(3):
        moves = []
        for _ in range(4 + game):  # a random legal game prefix
            legal = np.flatnonzero(np.asarray(play(moves).legal_actions))
            moves.append(int(rng.choice(legal)))
        obs = np.asarray(play(moves).observation).reshape(h * w, c)
        for cells, actions in syms:
            seen = np.asarray(play([actions[m] for m in moves]).observation).reshape(h * w, c)
            np.testing.assert_array_equal(seen, obs[list(cells)])


@pytest.mark.parametrize("name, moves, expected", [
    ("openspiel:tic_tac_toe", (1, 4), cell_symmetries(3, 3)),
    # Go on a 5x5 board (actions: a1 b1 ... e1, a2 ..., pass 25): black b1, white a1, black a2 takes a1, white c3,
    # black passes
    ("openspiel:go(board_size=5)", (1, 0, 5, 12, 25), cell_symmetries(5, 5, extra_actions=1)),
])
def test_openspiel_boards_declare_the_games_own_symmetries(name, moves, expected):
    """OpenSpiel's tic-tac-toe and Go declare the pgx twins' symmetries, and they are the games' own: the
    mapped moves give the mapped observation."""
    from moozi.envs import make_env

    env = make_env(name)
    try:
        assert env.spec.symmetries == expected
        h, w, c = env.spec.observation_shape
        for cells, actions in env.spec.symmetries:
            env.reset(0)
            for m in moves:
                obs = np.asarray(env.step(m).observation).reshape(h * w, c)
            env.reset(0)
            for m in moves:
                seen = np.asarray(env.step(actions[m]).observation).reshape(h * w, c)
            np.testing.assert_array_equal(seen, obs[list(cells)])
    finally:
        env.close()


def test_learner_augments_only_games_with_symmetries():
    from moozi.learner import Learner, training_symmetries
    from moozi.model.networks import build_model

    cfg = LearnerConfig(augment_symmetries=True)
    plain = EnvSpec(name="plain", observation_shape=(3, 3, 1), num_actions=9)
    with pytest.raises(ConfigError, match="learner.augment_symmetries = true needs a game with board symmetries"):
        training_symmetries(cfg, plain)
    assert training_symmetries(LearnerConfig(), plain) == ()
    spec = EnvSpec(name="board", observation_shape=(3, 3, 1), num_actions=9, symmetries=cell_symmetries(3, 3))
    targets = TargetConfig(history_length=1, unroll_steps=1, td_steps=1)
    model = build_model(ModelConfig(kind="mlp", mlp_hidden=(8,), mlp_embedding=4, head_hidden=8, support_size=1,
                                    value_transform="identity"), observation_shape=(3, 3, 11), num_actions=10)
    learners = [Learner(model, spec, LearnerConfig(augment_symmetries=on), targets, ReplayConfig(capacity=64),
                        jax.random.key(0), replay_seed=1) for on in (False, True)]
    w = _window(1)
    one = Trajectory(**{f: getattr(w, f)[0] for f in ("frames", "actions", "rewards", "root_values", "root_policies",
                                                        "to_play", "first", "last", "is_terminal")})
    for learner in learners:
        learner.replay.add(one.replace(frames=one.frames.astype(np.float32)), None)
    assert learners[0].replay.sample(4).symmetry is None  # no augmentation: the generator is not drawn from
    drawn = learners[1].replay.sample(64, symmetries=8).symmetry
    assert drawn.dtype == np.int32 and set(drawn.tolist()) == set(range(8))
    metrics = learners[1].train(2, 4)
    assert np.isfinite(metrics["loss/total"]) and learners[1].updates == 2


def test_a_training_run_with_augmentation_and_the_refusal(tmp_path, capsys):
    """`moozi train ... learner.augment_symmetries=true`: a tic-tac-toe run trains; CartPole is refused
    before any work, naming the key."""
    from moozi.cli import main
    from tests.helpers import TINY

    run = tmp_path / "ttt"
    assert main(["train", "--preset", "tictactoe", "--run-dir", str(run), *TINY,
                 "learner.augment_symmetries=true"]) == 0
    assert "augment_symmetries: true" in (run / "config.yaml").read_text()
    capsys.readouterr()
    assert main(["train", "--preset", "cartpole", "--run-dir", str(tmp_path / "cp"), *TINY,
                 "learner.augment_symmetries=true"]) == 2
    assert "learner.augment_symmetries = true needs a game with board symmetries" in capsys.readouterr().err
    assert not (tmp_path / "cp" / "metrics.jsonl").exists()
