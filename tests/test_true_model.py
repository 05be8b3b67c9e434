"""Search with the real simulator: rewards and values from the right side, finished states absorb,
and the rollout baseline finds wins and blocks; AlphaZero-mode and rollout players in the arena."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.config import PlannerConfig
from moozi.envs import make_env
from moozi.envs.device import reset_batch, step_batch
from moozi.model.history import history_init
from moozi.planner import search
from moozi.true_model import rollout_evaluator, true_root, true_step


@pytest.fixture(scope="module")
def ttt():
    return make_env("pgx:tic_tac_toe")


def _position(env, moves, copies):
    states, _ = reset_batch(env, jax.random.split(jax.random.key(0), copies))
    for a in moves:
        states, _ = step_batch(env, states, jnp.full((copies,), a, jnp.int32))
    return states


def test_step_rewards_the_mover_and_finished_states_absorb(ttt):
    # X: 0, O: 3, X: 1, O: 4; X to move wins at 2.
    states = _position(ttt, [0, 3, 1, 4], 1)
    evaluate = rollout_evaluator(ttt, 4)
    root = true_root(evaluate, None, states, history_init(1, ttt.spec.observation_shape, 1), jnp.zeros(1, jnp.uint32))
    step = jax.jit(true_step(ttt, evaluate))  # one program (op by op the test took 17 s)
    win = step(None, root.embedding, jnp.array([3]))  # augmented 3 = cell 2
    assert float(win.reward[0]) == 1.0 and bool(win.embedding.done[0]) and float(win.value[0]) == 0.0
    after = step(None, win.embedding, jnp.array([5]))  # anything played from a finished state changes nothing
    assert float(after.reward[0]) == 0.0 and float(after.value[0]) == 0.0 and bool(after.embedding.done[0])
    np.testing.assert_array_equal(np.asarray(after.embedding.state.inner._x.board),
                                  np.asarray(win.embedding.state.inner._x.board))
    quiet = step(None, root.embedding, jnp.array([6]))  # cell 5: no reward; O to move next
    assert float(quiet.reward[0]) == 0.0 and not bool(quiet.embedding.done[0])
    # Dummy and illegal moves get no prior.
    assert float(root.prior_logits[0, 0]) < -1e8 and float(root.prior_logits[0, 1]) < -1e8


@pytest.mark.extended
def test_rollout_search_wins_and_blocks(ttt):
    # Row 1: X to move wins at 2. Row 2: X: 0, O: 4, X: 1, O must block at 2.
    copies = 4
    win = _position(ttt, [0, 3, 1, 4], copies)
    block = _position(ttt, [0, 4, 1], copies)
    states = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), win, block)
    evaluate = rollout_evaluator(ttt, 8)
    hist = history_init(2 * copies, ttt.spec.observation_shape, 1)
    root = true_root(evaluate, None, states, hist, jnp.arange(2 * copies, dtype=jnp.uint32))
    cfg = PlannerConfig(kind="puct", num_simulations=200, dirichlet_fraction=0.0)
    out = jax.jit(lambda r, legal: search(None, jax.random.key(1), r, true_step(ttt, evaluate), legal, cfg,
                                          discount=1.0, two_player=True, temperature=0.0))(root, states.legal_actions)
    np.testing.assert_array_equal(np.asarray(out.env_action), [2] * (2 * copies))


@pytest.mark.extended
def test_alphazero_policy_step_searches_the_simulator(ttt):
    """An untrained network's learned model knows nothing of the game; with the simulator in the search the
    same network takes the win in one move (the reward of the true game is in the tree)."""
    from moozi.config import ModelConfig
    from moozi.model.history import stacked_channels
    from moozi.model.networks import build_model
    from moozi.workers.policy import PolicyConfig, init_policy_state, policy_step

    copies = 4
    states = _position(ttt, [0, 3, 1, 4], copies)
    _, ts = step_batch(ttt, _position(ttt, [0, 3, 1], copies), jnp.full((copies,), 4, jnp.int32))
    h, w, c = ttt.spec.observation_shape
    model = build_model(ModelConfig(kind="mlp", mlp_hidden=(8,), mlp_embedding=8, support_size=1,
                                    value_transform="identity"), (h, w, stacked_channels(c, 10, 1)), 10)
    params = model.init(jax.random.key(0))
    cfg = PolicyConfig(spec=ttt.spec, planner=PlannerConfig(kind="puct", num_simulations=32, dirichlet_fraction=0.0),
                       discount=1.0, history_length=1, mode="train")
    state = init_policy_state(cfg, copies, jax.random.key(1))
    zeros = jnp.zeros(copies, jnp.int32)
    step = jax.jit(lambda p, s, t, e: policy_step(p, s, t, 0.0, zeros, e, model=model, config=cfg, env=ttt))
    _, sample, _ = step(params, state, ts, states)
    np.testing.assert_array_equal(np.asarray(sample.action), [3] * copies)  # augmented 3 = cell 2, the win
    assert float(np.asarray(sample.root_value).min()) > 0.5


@pytest.mark.extended  # CI plays the AlphaZero player (`az:`) in test_cli_train's evaluation commands
def test_alphazero_training_run(tmp_path, capsys):
    """model.dynamics = simulator trains with K = 0 (no reward or consistency loss), and its run plays as az:RUN."""
    import json

    from moozi.cli import main
    from moozi.config import ConfigError, apply_overrides, config_from_dict
    from moozi.eval.players import make_player
    from moozi.observe.metrics import read_metrics
    from moozi.presets import load_preset
    from tests.helpers import TINY

    run = tmp_path / "az"
    assert main(["train", "--preset", "tictactoe", "--run-dir", str(run), "--seed", "1", *TINY,
                 "model.dynamics=simulator"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["updates"] > 0
    rows = [r for r in read_metrics(run) if "loss/total" in r]
    assert rows and all(r["loss/reward"] == 0.0 and r["loss/consistency"] == 0.0 for r in rows)
    assert all(np.isfinite(r["loss/total"]) and "loss_step/policy_k1" not in r for r in rows)
    assert "unroll_steps: 0" in (run / "config.yaml").read_text()
    player = make_player(str(run), "pgx:tic_tac_toe")
    assert player.spec.id.startswith("az:")
    from moozi.eval.session import GameSession

    session = GameSession("pgx:tic_tac_toe", player)
    session.play(4)
    hint = session.analyze()  # moozi play's hint / moozi gtp's moozi-analyze: the simulator search's own view
    assert len(hint["moves"]) == 8 and abs(sum(m["policy"] for m in hint["moves"]) - 1) < 1e-4
    assert abs(sum(m["prior"] for m in hint["moves"]) - 1) < 1e-4 and -1 <= hint["value"] <= 1
    session.close()
    # Boundaries: K = 0 only in AlphaZero mode; the simulator needs a JAX-native game and no reanalyze.
    base = load_preset("tictactoe")
    with pytest.raises(ConfigError, match="unroll_steps = 0"):
        config_from_dict(apply_overrides(base, ["targets.unroll_steps=0"]))
    with pytest.raises(ConfigError, match="reanalyze"):
        config_from_dict(apply_overrides(base, ["model.dynamics=simulator", "reanalyze.fraction=0.5"]))
    with pytest.raises(ConfigError, match="model.dynamics"):
        config_from_dict(apply_overrides(base, ["model.dynamics=alphazero"]))
    assert main(["train", "--preset", "openspiel-tictactoe", "--run-dir", str(tmp_path / "os"), *TINY,
                 "model.dynamics=simulator"]) != 0
    assert "needs a JAX-native game" in capsys.readouterr().err


def test_value_range_floor_keeps_an_untrained_value_from_sharpening_the_gumbel_target(ttt):
    """An untrained network values every position alike (up to 1e-4). With mctx's default floor (1e-8)
    the Gumbel target min-max rescales those differences, and the two-player sign (children at -c, the
    root's mixed value at +c), to the full range: a sharp target on arbitrary moves, which is what kept
    connect four from learning in AlphaZero mode. ``min_value_range`` 1.0 (values in [-1, 1]) leaves it
    near the prior."""

    def evaluate(params, node):
        board = node.history[0].reshape(node.history[0].shape[0], -1)  # the stacked frames
        value = 0.012 + 1e-4 * jnp.sin(board @ jnp.arange(1, board.shape[1] + 1, dtype=jnp.float32))
        return value.astype(jnp.float32), jnp.zeros(node.state.legal_actions.shape, jnp.float32)

    states = _position(ttt, [], 4)
    hist = history_init(4, ttt.spec.observation_shape, 1)
    root = true_root(evaluate, None, states, hist, jnp.zeros(4, jnp.uint32))
    peaks = {}
    for floor in (1e-8, 1.0):
        cfg = PlannerConfig(kind="gumbel", num_simulations=16, max_num_considered_actions=9, min_value_range=floor)
        out = jax.jit(lambda r, legal, cfg=cfg: search(None, jax.random.key(3), r, true_step(ttt, evaluate), legal,
                                                       cfg, discount=1.0, two_player=True))(root, states.legal_actions)
        peaks[floor] = float(np.asarray(out.root_policy).max(-1).mean())
    assert peaks[1e-8] > 0.3, peaks  # sharp on noise
    assert peaks[1.0] < 0.15, peaks  # 1 / 9 = 0.11: close to the uniform prior
