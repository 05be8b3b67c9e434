"""Planner: true-model tic-tac-toe golden positions, masks, last steps, learned model."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.config import ModelConfig, PlannerConfig
from moozi.games import tictactoe as ttt
from moozi.model.networks import build_model
from moozi.planner import plan, root_invalid_actions, search

# Each row: board, player to move, the single winning cell.
POSITIONS = [
    ("XX./OO./...", "X", 2),  # X completes the top row
    ("XX./OO./X..", "O", 5),  # O completes the middle row
    ("X.O/.XO/...", "O", 8),  # O completes the right column (X threatens the diagonal too)
    ("X.O/.XO/...", "X", 8),  # X completes the diagonal (same cell blocks O)
]


def _config(kind):
    return PlannerConfig(kind=kind, num_simulations=64, dirichlet_fraction=0.0, gumbel_scale=0.0)


@pytest.fixture(scope="module")
def true_model_results():
    cells = jnp.stack([ttt.from_string(b, p) for b, p, _ in POSITIONS])
    results = {}
    for kind in ("puct", "gumbel"):
        cfg = _config(kind)
        fn = jax.jit(
            lambda rng, c, cfg=cfg: search(
                None, rng, ttt.root(c), ttt.step, ttt.legal_actions(c), cfg, discount=1.0, two_player=True,
                temperature=0.0,
            )
        )
        results[kind] = fn(jax.random.key(0), cells)
    return results


@pytest.mark.parametrize("kind", ["puct", "gumbel"])
def test_winning_move_chosen_for_each_player(true_model_results, kind):
    out = true_model_results[kind]
    np.testing.assert_array_equal(out.env_action, [w for _, _, w in POSITIONS])
    np.testing.assert_array_equal(out.action, np.array([w for _, _, w in POSITIONS]) + 1)
    # The player to move is winning. Gumbel's root value averages the visits that
    # sequential halving spreads over the considered moves, so it is smaller.
    assert np.all(out.root_value > (0.5 if kind == "puct" else 0.0)), out.root_value
    assert np.all(out.root_policy[:, 0] == 0)  # dummy never at a real root
    np.testing.assert_allclose(out.root_policy.sum(-1), 1.0, atol=1e-5)
    occupied = np.stack([ttt.from_string(b, p) != 0 for b, p, _ in POSITIONS])
    assert np.all(out.root_policy[:, 1:][occupied] == 0)  # illegal cells masked
    assert np.all(out.max_depth >= 1) and np.all(np.isfinite(out.policy_entropy))


def test_losing_side_sees_negative_value():
    # O to move cannot stop X: X threatens cell 2 (top row) and cell 6 (left column).
    cells = jnp.stack([ttt.from_string("XX./XO./..O", "O")])
    cfg = PlannerConfig(kind="puct", num_simulations=200, dirichlet_fraction=0.0)
    out = jax.jit(lambda rng, c: search(None, rng, ttt.root(c), ttt.step, ttt.legal_actions(c), cfg,
                                        discount=1.0, two_player=True))(jax.random.key(1), cells)
    assert float(out.root_value[0]) < -0.1


def test_root_invalid_actions_masks_dummy_and_allows_it_only_when_nothing_is_legal():
    legal = jnp.array([[True, False, True], [False, False, False]])
    np.testing.assert_array_equal(
        root_invalid_actions(legal), [[True, False, True, False], [False, True, True, True]]
    )


@pytest.fixture(scope="module")
def learned():
    model = build_model(ModelConfig(kind="mlp", mlp_hidden=(16,), mlp_embedding=8, head_hidden=8, support_size=5), (1, 1, 6), 4)
    return model, model.init(jax.random.key(0))


@pytest.mark.parametrize("kind", ["puct", "gumbel"])
def test_learned_model_search_with_a_last_step_in_the_batch(learned, kind):
    model, params = learned
    obs = jax.random.normal(jax.random.key(2), (3, 1, 1, 6))
    legal = jnp.array([[True, True, False], [False, True, False], [False, False, False]])
    cfg = PlannerConfig(kind=kind, num_simulations=8)
    # Jitted as the actors run it (eagerly, each operation around the search compiles on its own).
    out = jax.jit(lambda *a: plan(model, *a, cfg, discount=0.997, two_player=False))(params, jax.random.key(3), obs, legal)
    assert out.action.shape == (3,) and out.root_policy.shape == (3, 4)
    assert np.all(np.isfinite(out.root_value)) and np.all(np.isfinite(out.root_policy))
    assert out.action[0] in (1, 2) and out.action[1] == 2  # legal, never dummy
    assert out.action[2] == 0 and out.env_action[2] == -1  # last step: only the dummy
    np.testing.assert_allclose(out.root_policy[2], [1, 0, 0, 0])


def test_legal_mask_size_mismatch_is_a_clear_error(learned):
    model, params = learned
    with pytest.raises(ValueError, match="environment actions"):
        plan(model, params, jax.random.key(0), jnp.zeros((1, 1, 1, 6)), jnp.ones((1, 5), bool),
             PlannerConfig(num_simulations=2), discount=0.9, two_player=False)


@pytest.mark.parametrize("rescale, floor, p_better", [(True, 1e-8, 0.993940), (False, 1e-8, 0.512747),
                                                     (True, 1.0, 0.512747)])
def test_gumbel_value_scale_golden(rescale, floor, p_better):
    """A two-armed bandit whose arms pay 0.10 and 0.11 (root value 0.105, so the mixed value of the unvisited
    dummy lies between them). Two simulations visit each arm once; the improved policy is
    softmax(prior logits + (50 + 1) * 0.1 * q). Min-max rescaled, q is 0 and 1 however small the real gap:
    p(better) = sigmoid(5.1) = 0.99394. On the rewards' own scale: sigmoid(5.1 * 0.01) = 0.51275; and so too
    when rescaled with a floor of 1 on the range (0.01 < 1: (q - min) / 1)."""
    from moozi.planner import RootEval, StepEval

    def step(params, embedding, action):
        reward = jnp.where(action == 2, 0.11, 0.10)
        return StepEval(embedding, reward, jnp.zeros_like(reward), jnp.zeros((action.shape[0], 3)))

    root = RootEval(jnp.zeros((1, 1)), jnp.full((1,), 0.105), jnp.zeros((1, 3)))
    cfg = PlannerConfig(kind="gumbel", num_simulations=2, max_num_considered_actions=2, gumbel_scale=0.0,
                        rescale_values=rescale, min_value_range=floor)
    out = jax.jit(lambda key: search(None, key, root, step, jnp.ones((1, 2), bool), cfg, discount=1.0,
                                     two_player=False))(jax.random.key(0))  # jitted: op by op took 16 s
    np.testing.assert_allclose(out.root_policy[0], [0.0, 1 - p_better, p_better], atol=1e-5)
