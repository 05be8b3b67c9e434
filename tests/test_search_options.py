"""Play-time search options (sym=, ptemp=, pick=, lcb=): golden numbers for the pure parts, the symmetric search
against its mirror image with the shipped connect-four agent, and the refusals."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest

from moozi.config import ConfigError
from moozi.envs import symmetry as sym
from moozi.envs.symmetry import augment_tables, column_mirror, draw_symmetries, transform_history, transform_legal
from moozi.eval.players import make_player
from moozi.planner import RootEval, StepEval, final_move_scores, tempered_prior
from moozi.types import SearchOutput


def _root_tree(visits, values, discount=-1.0):
    """An mctx tree of one batch row whose root has children with ``visits`` and mean ``values`` (rewards 0)."""
    a = len(visits)
    row = lambda x, dt=jnp.float32: jnp.asarray([x], dt)  # noqa: E731
    return mctx.Tree(node_visits=row([sum(visits)], jnp.int32), raw_values=row([0.0]), node_values=row([0.0]),
                     parents=row([-1], jnp.int32), action_from_parent=row([-1], jnp.int32),
                     children_index=row([[-1] * a], jnp.int32), children_prior_logits=row([[0.0] * a]),
                     children_visits=row([visits], jnp.int32), children_rewards=row([[0.0] * a]),
                     children_discounts=row([[discount] * a]), children_values=row([values]),
                     embeddings=row([0.0]), root_invalid_actions=row([[1.0] + [0.0] * (a - 1)]), extra_data=None)


def test_final_move_scores_golden():
    # augmented actions: dummy, a1 (6 visits, child value 0.2 for the opponent), a2 (2 visits, -0.6)
    tree = _root_tree([0, 6, 2], [0.0, 0.2, -0.6])
    policy = jnp.asarray([[0.0, 0.3, 0.7]])
    out = SearchOutput(action=jnp.asarray([2]), env_action=jnp.asarray([1]), root_value=jnp.zeros(1),
                       root_policy=policy, prior_value=jnp.zeros(1), policy_entropy=jnp.zeros(1),
                       max_depth=jnp.zeros(1, jnp.int32))
    np.testing.assert_allclose(final_move_scores(out, tree, "policy"), policy)
    np.testing.assert_allclose(final_move_scores(out, tree, "visits"), [[0.0, 0.75, 0.25]])
    value = np.asarray(final_move_scores(out, tree, "value"))  # Q = -child value: -0.2, 0.6
    assert value[0, 0] == -np.inf and np.allclose(value[0, 1:], [-0.2, 0.6])
    # Q - c / sqrt(N): c = 1: -0.2 - 0.4082 = -0.6082, 0.6 - 0.7071 = -0.1071 (a2); c = 3: -1.4247 > -1.5213 (a1)
    np.testing.assert_allclose(np.asarray(final_move_scores(out, tree, "lcb", 1.0))[0, 1:], [-0.60825, -0.10711],
                               atol=1e-4)
    np.testing.assert_allclose(np.asarray(final_move_scores(out, tree, "lcb", 3.0))[0, 1:], [-1.42474, -1.52132],
                               atol=1e-4)
    with pytest.raises(ValueError, match="pick = 'best'"):
        final_move_scores(out, tree, "best")


def test_tempered_prior_divides_every_prior():
    root = RootEval(jnp.zeros((1, 2)), jnp.zeros(1), jnp.asarray([[2.0, -4.0]]))

    def step(params, embedding, action):
        return StepEval(embedding, jnp.ones(1), jnp.zeros(1), jnp.asarray([[1.0, 3.0]]))

    root2, step2 = tempered_prior(root, step, 2.0)
    np.testing.assert_allclose(root2.prior_logits, [[1.0, -2.0]])
    out = step2(None, root.embedding, jnp.zeros(1, jnp.int32))
    np.testing.assert_allclose(out.prior_logits, [[0.5, 1.5]])
    assert float(out.reward[0]) == 1.0  # nothing else changes


def test_the_mirror_moves_cells_actions_and_legal_moves_and_maps_the_policy_back():
    tables = augment_tables(column_mirror(6, 7))
    frames = np.zeros((1, 2, 6, 7, 2), np.float32)
    frames[0, 1, 5, 0, 0] = 1.0  # a piece at the bottom of column 0 in the newest frame
    actions = np.array([[0, 1]], np.int32)  # augmented: the dummy, then env action 0 (column 0)
    mirror = jnp.asarray([1])
    f2, a2 = transform_history((jnp.asarray(frames), jnp.asarray(actions)), mirror, tables)
    assert float(f2[0, 1, 5, 6, 0]) == 1.0 and float(jnp.sum(f2)) == 1.0 and a2.tolist() == [[0, 7]]
    legal = jnp.asarray([[True, False, False, False, False, False, False]])
    assert transform_legal(legal, mirror, tables).tolist() == [[False] * 6 + [True]]
    policy = jnp.arange(7.0)[None]  # found on the mirrored board: column j has weight j
    assert sym.untransform_policy(policy, mirror, tables).tolist() == [[6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0]]
    same = transform_history((jnp.asarray(frames), jnp.asarray(actions)), jnp.asarray([0]), tables)
    assert np.array_equal(same[0], frames) and same[1].tolist() == [[0, 1]]


def test_symmetries_are_drawn_with_the_probability_asked():
    key = jax.random.key(0)
    assert draw_symmetries(key, 1000, 0.0, 8).tolist() == [0] * 1000
    always = np.asarray(draw_symmetries(key, 1000, 1.0, 8))
    assert always.min() == 1 and always.max() == 7 and len(set(always.tolist())) == 7
    half = np.asarray(draw_symmetries(key, 4000, 0.5, 2))
    assert set(half.tolist()) == {0, 1} and 0.45 < half.mean() < 0.55


def _steps(pool, moves):
    ts = pool.reset(seed=0)
    seen = [ts]
    for m in moves:
        ts = pool.step(np.array([m], np.int32))
        seen.append(ts)
    return seen


def test_a_searched_mirror_is_the_mirror_of_the_search():
    """The shipped connect-four agent with sym=1 (always the mirror) on a position chooses, move for move, the
    mirror of what it chooses without the option on the mirrored position (Gumbel without noise: exact)."""
    from moozi.envs.pool import make_pool

    pool = make_pool("pgx:connect_four", 1, seed=0)
    moves = [3, 0, 4, 1, 2]
    mirrored = [6 - m for m in moves]
    a = make_player("zoo:connect4-v1,sym=1", "pgx:connect_four")
    b = make_player("zoo:connect4-v1", "pgx:connect_four")
    for player, line in ((a, moves), (b, mirrored)):
        steps = _steps(pool, line)
        player.reset(steps[0])
        for ts, m in zip(steps[1:], line):
            player.observe(ts, np.array([m]))
        player.final = steps[-1]
    args = lambda p: (p.params, jax.random.key(0), p.history, np.array([0]), p.final.legal_actions)  # noqa: E731
    wa = np.asarray(a._choose(*args(a)))[0]
    wb = np.asarray(b._choose(*args(b)))[0]
    np.testing.assert_allclose(wa, wb[::-1], atol=1e-5)
    assert a.spec.id.endswith(",sym=1.0") and int(a.act(a.final, np.array([True]))[0]) == 6 - int(
        b.act(b.final, np.array([True]))[0])
    pool.close()


@pytest.mark.parametrize("text,words", [
    ("zoo:connect4-v1,pick=best", "pick='best': allowed policy, visits, value, lcb"),
    ("zoo:connect4-v1,ptemp=0", "ptemp=0 is not a prior temperature"),
    ("zoo:connect4-v1,lcb=2", "lcb= is the bound of pick=lcb"),
    ("zoo:connect4-v1,sym=1.5", "sym=1.5 is not a probability"),
    ("zoo:connect4-v1,pick=value,temp=1", "temp= samples the search's policy; pick=value"),
    ("prior:zoo:connect4-v1,pick=visits", "a prior: player does not search"),
    ("os-mcts-10,sym=1", "unknown option(s) ['sym']"),
])
def test_search_options_are_refused_in_one_line(text, words):
    with pytest.raises(ConfigError) as e:
        make_player(text, "pgx:connect_four")
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_symmetry_needs_a_game_that_has_one():
    with pytest.raises(ConfigError, match="sym= needs a game with board symmetries; gymnax:CartPole-v1 declares none"):
        make_player("zoo:cartpole-v1,sym=0.5", "gymnax:CartPole-v1")


def test_match_takes_the_options_and_names_them(capsys):
    import json

    from moozi.cli import main

    assert main(["match", "zoo:tictactoe-v1,sym=1,ptemp=1.5,pick=lcb,lcb=0.5", "perfect", "--pairs", "4",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["a"]["settings"] == {"sims": out["a"]["settings"]["sims"], "sym": 1.0, "ptemp": 1.5, "pick": "lcb",
                                    "lcb": 0.5}, out["a"]
    assert out["games"] == 8
