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
    step = true_step(ttt, evaluate)
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
