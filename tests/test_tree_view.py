"""Search-tree views (issue 14): the planner's tree as nodes, checked against the real game, SVG and DOT."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import jax
import jax.numpy as jnp
import pytest

from moozi.cli import main
from moozi.config import PlannerConfig
from moozi.games import tictactoe as ttt
from moozi.observe.tree import GameReplay, check_against_game, path_to, to_dot, to_svg, tree_nodes
from moozi.planner import search
from tests.helpers import TINY


def _exact_tree(board: str, mover: str, sims: int, kind: str = "puct"):
    cells = jnp.asarray(ttt.from_string(board, mover))[None]
    config = PlannerConfig(kind=kind, num_simulations=sims, dirichlet_fraction=0.0, gumbel_scale=0.0,
                           max_num_considered_actions=9)
    out, tree = search(None, jax.random.key(0), ttt.root(cells), ttt.step, ttt.legal_actions(cells), config,
                       discount=1.0, two_player=True, temperature=0.0, return_tree=True)
    return out, tree_nodes(jax.device_get(tree))


def test_golden_tree_on_a_won_position():
    # X to move on XX./OO./...: cell 2 wins at once. Legal cells 2, 5, 6, 7, 8 (prior 1/5 each, the exact
    # model's illegal logits are -30). Every child of the root is a leaf valued 0 by the exact model, so its
    # Q = reward + (-1) x 0: +1 for the winning cell 2, 0 for the others.
    out, nodes = _exact_tree("XX./OO./...", "X", sims=5)
    root = nodes[0]
    assert root.parent == -1 and root.visits == 6  # the root's own evaluation + 5 simulations
    children = {n.action - 1: n for n in nodes if n.parent == 0}
    assert set(children) <= {2, 5, 6, 7, 8} and 2 in children
    assert children[2].q == pytest.approx(1.0) and children[2].reward == pytest.approx(1.0)
    assert all(n.q == pytest.approx(0.0) for a, n in children.items() if a != 2 and n.depth == 1
               and not any(c.parent == n.id for c in nodes))
    assert all(n.prior == pytest.approx(0.2) for n in children.values())
    assert sum(n.visits for n in children.values()) == 5
    assert int(out.env_action[0]) == 2
    # the backed-up root value is the mean over its visits of what they found (only wins count)
    assert root.value == pytest.approx(children[2].visits * 1.0 / root.visits, abs=1e-5)


def _pgx_replay(moves):
    return GameReplay("pgx:tic_tac_toe", {}, (), 0, moves)


def test_exact_model_agrees_with_the_game():
    moves = [0, 3, 1, 4]  # x0 o3 x1 o4: "XX./OO./..." with X to move, as in the golden test
    game = _pgx_replay(moves)
    try:
        _, nodes = _exact_tree("XX./OO./...", "X", sims=48, kind="gumbel")
        checked = check_against_game(nodes, game.follow)
    finally:
        game.close()
    assert len(checked) > 10 and max(n.depth for n in checked) >= 2
    assert [n for n in checked if n.flags] == []
    win = next(n for n in checked if n.parent == 0 and n.action == 3)
    assert win.true_reward == 1.0 and win.legal is True


def test_disagreements_are_flagged():
    game = _pgx_replay([0, 3, 1, 4])
    try:
        _, nodes = _exact_tree("XX./OO./...", "X", sims=8)
        lying = [n if n.parent != 0 or n.action != 3 else n.__class__(**{**n.__dict__, "reward": 0.0})
                 for n in nodes]  # a model that misses the win
        checked = check_against_game(lying, game.follow)
        illegal = check_against_game([nodes[0], nodes[1].__class__(**{**nodes[1].__dict__, "action": 1})],
                                     game.follow)  # cell 0 is taken
    finally:
        game.close()
    assert [n.flags for n in checked if n.flags] == [("reward +0.00, game +1.00",)]
    assert illegal[1].flags == ("illegal move searched",) and illegal[1].legal is False


def test_svg_and_dot_are_well_formed():
    _, nodes = _exact_tree("XX./OO./...", "X", sims=8)
    svg = to_svg(nodes, "t")
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg") and len([e for e in root.iter() if e.tag.endswith("rect")]) == len(nodes) + 1
    dot = to_dot(nodes, "t")
    assert dot.startswith("digraph") and dot.count("->") == len(nodes) - 1
    assert all(path_to(nodes, n)[-1] == n.action for n in nodes[1:])


@pytest.fixture(scope="module")
def ttt_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("tree") / "ttt"
    assert main(["train", "--preset", "tictactoe", "--run-dir", str(run), *TINY]) == 0
    return run


@pytest.mark.extended  # CI: `moozi tree` in test_observe's every-command test
def test_tree_command_on_a_barely_trained_model(ttt_run, capsys):
    capsys.readouterr()
    assert main(["tree", str(ttt_run), "--position", "0 3 1 4", "--simulations", "32"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["moves"] == [0, 3, 1, 4] and result["nodes"] > 10
    assert result["flagged"] > 0  # 64 env steps of training: its rewards and legal moves are not the game's
    ET.fromstring(open(result["svg"]).read())
    assert main(["tree", str(ttt_run), "--episode-step", "2"]) == 0
    assert len(json.loads(capsys.readouterr().out.strip().splitlines()[-1])["moves"]) == 2
    assert main(["tree", str(ttt_run), "--position", "0 0"]) == 2
    assert "move 2 of the position, '0', is not legal there" in capsys.readouterr().err
    # The game's notation in, the game's notation out, the position drawn (issue 48)
    assert main(["tree", str(ttt_run), "--position", "x(0,0) o(1,0)", "--simulations", "8"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    svg = open(result["svg"]).read()
    assert result["moves"] == [0, 3] and "after [x(0,0) o(1,0)]" in svg and "data:image/png;base64," in svg


def _node(id, parent, action, depth, visits, value=0.0, reward=0.0):
    from moozi.search_tree import TreeNode

    return TreeNode(id, parent, action, depth, visits, value, value, 0.5, reward, 0.0)


def test_principal_path_golden():
    from moozi.search_tree import principal_path

    # root 0 -> children 1 (action 2, 5 visits) and 2 (action 4, 3 visits); 1 -> 3 (action 1, 2 visits) and
    # 4 (action 3, 2 visits: a tie, the smaller action wins); 3 -> 5 (action 2, 1 visit)
    nodes = [_node(0, -1, 0, 0, 9), _node(1, 0, 2, 1, 5), _node(2, 0, 4, 1, 3), _node(3, 1, 1, 2, 2),
             _node(4, 1, 3, 2, 2), _node(5, 3, 2, 3, 1)]
    assert [n.id for n in principal_path(nodes)] == [1, 3, 5]
    assert [n.id for n in principal_path(nodes, first=4)] == [2]  # the chosen move first (a leaf: the line ends)
    assert [n.id for n in principal_path(nodes, first=7)] == [1, 3, 5]  # a move not in the tree: ignored
    assert principal_path(nodes[:1]) == []


def test_analysis_line_is_for_the_root_player(monkeypatch):
    """Each step's model reward and value for the player to move at the root: signs flip on the opponent's plies
    of a two-player game (hand-computed from the nodes), never in a single-player one."""
    from moozi.eval.players.base import _analysis

    nodes = [_node(0, -1, 0, 0, 4, 0.1), _node(1, 0, 3, 1, 3, value=0.25, reward=1.0),
             _node(2, 1, 1, 2, 2, value=0.5, reward=2.0), _node(3, 2, 0, 3, 1, value=0.75, reward=-1.0)]

    import moozi.search_tree as st

    monkeypatch.setattr(st, "tree_nodes", lambda tree, row: nodes)  # tested above; the line reads its records
    legal = jnp.ones((1, 4), bool)
    policy = jnp.asarray([[0.1, 0.2, 0.6, 0.1]])
    two = _analysis(policy, [0.1], policy, [0.0], legal, 0, 3, "a tree", two_player=True)["path"]
    one = _analysis(policy, [0.1], policy, [0.0], legal, 0, 3, "a tree", two_player=False)["path"]
    assert [s["action"] for s in two] == [2, 0, -1]  # environment actions; -1 the dummy below the root
    assert [(s["reward"], s["value"]) for s in two] == [(1.0, -0.25), (-2.0, 0.5), (-1.0, -0.75)]
    assert [(s["reward"], s["value"]) for s in one] == [(1.0, 0.25), (2.0, 0.5), (-1.0, 0.75)]


def _coin_tree(two_player: bool = False, sims: int = 24):
    """Stochastic MuZero's tree on a hand-made game with chance (tests/test_stochastic.py's coin game): move 1
    (augmented) flips a fair coin paying +1 or -1, move 2 pays 0.4 for sure (its one outcome); every value 0,
    move 2's afterstate valued 0.4."""
    from moozi.planner import RootEval, stochastic_search, with_chance_edges
    from tests.helpers import coin_game

    steps = coin_game()
    root = RootEval(jnp.zeros(1), jnp.zeros(1), jnp.zeros((1, 3)))
    config = PlannerConfig(kind="puct", num_simulations=sims, dirichlet_fraction=0.0, max_depth=1)
    out, tree = stochastic_search(None, jax.random.key(0), root, steps, jnp.ones((1, 2), bool), config,
                                  discount=1.0, two_player=two_player, temperature=0.0, return_tree=True)
    tree = with_chance_edges(None, steps, tree, discount=1.0, two_player=two_player)
    return out, jax.device_get(tree)


def test_golden_tree_with_chance():
    """Afterstates and outcomes as records, by hand: below move 1 the coin's two outcomes (probability 1/2,
    reward +1 and -1, Q = reward + discount x 0), below move 2 its one outcome (probability 1, reward 0.4);
    every afterstate has prior 1/2 (uniform over the two legal moves), reward 0, Q its value."""
    out, tree = _coin_tree()
    nodes = tree_nodes(tree)
    by_parent: dict = {}
    for n in nodes:
        by_parent.setdefault(n.parent, []).append(n)
    moves = {n.action: n for n in by_parent[0]}
    assert set(moves) == {1, 2} and all(n.afterstate and n.outcome is None and n.depth == 1 for n in moves.values())
    assert all(n.prior == pytest.approx(0.5) and n.reward == 0.0 for n in moves.values())
    assert moves[2].raw_value == pytest.approx(0.4) and moves[1].raw_value == pytest.approx(0.0)
    coin = {n.outcome: n for n in by_parent[moves[1].id]}
    sure = {n.outcome: n for n in by_parent[moves[2].id]}
    assert set(coin) == {0, 1} and set(sure) == {0}
    assert [(coin[c].prior, coin[c].reward, coin[c].q) for c in (0, 1)] == [
        pytest.approx((0.5, 1.0, 1.0)), pytest.approx((0.5, -1.0, -1.0))]
    assert (sure[0].prior, sure[0].reward, sure[0].q) == pytest.approx((1.0, 0.4, 0.4))
    assert all(not n.afterstate and n.depth == 2 and n.action == 3 + n.outcome for n in [*coin.values(), *sure.values()])
    assert sum(n.visits for n in coin.values()) <= moves[1].visits  # an afterstate's first visit expands it only
    assert path_to(nodes, sure[0]) == [2] and path_to(nodes, moves[1]) == [1]  # outcomes are not moves
    # the line a move at a time: the sure 0.4 (chosen), then the state after its outcome
    from moozi.search_tree import predicted_moves

    assert int(out.action[0]) == 2
    assert [(m.id, a.id) for m, a in predicted_moves(nodes, 2)] == [(moves[2].id, sure[0].id)]
    # two players: the outcome's edge carries -gamma, the afterstate's +1
    _, two = _coin_tree(two_player=True)
    assert float(two.extra_data.discount) == -1.0
    import numpy as np

    from moozi.planner import ChanceEdges

    with pytest.raises(ValueError, match="chance edges"):
        tree_nodes(tree.replace(extra_data=None))
    assert isinstance(tree.extra_data, ChanceEdges) and np.asarray(tree.extra_data.probs).shape == (1, 25, 2)


def test_tree_with_chance_checked_and_drawn():
    """Against a game where move 1 always pays +1 and move 2 is illegal: the coin's -1 outcome is flagged, move 2
    is flagged illegal at its afterstate and its outcome sits below an illegal move; the drawing names both kinds
    of node and adds the chance legend."""
    _, tree = _coin_tree()
    nodes = tree_nodes(tree)

    def follow(actions):  # environment actions 0 (augmented 1) and 1 (augmented 2)
        out = []
        for a in actions:
            out.append((True, 1.0, False) if a == 0 else (False, 0.0, False))
        return out

    checked = {n.id: n for n in check_against_game(nodes, follow)}
    move1, move2 = (next(n for n in checked.values() if n.parent == 0 and n.action == a) for a in (1, 2))
    assert move1.legal is True and move1.true_reward is None and move1.flags == ()
    assert move2.legal is False and move2.flags == ("illegal move searched",)
    coin = {n.outcome: n for n in checked.values() if n.parent == move1.id}
    assert coin[0].true_reward == 1.0 and coin[0].flags == () and coin[0].legal is None
    assert coin[1].flags == ("reward -1.00, game +1.00",)
    assert [n.flags for n in checked.values() if n.parent == move2.id] == [("below an illegal move",)]
    svg = to_svg(list(checked.values()), "coin")
    ET.fromstring(svg)
    assert "chance 0" in svg and "afterstate" in svg and "a move&#x27;s box is its afterstate" in svg
    dot = to_dot(list(checked.values()), "coin")
    assert dot.count("->") == len(nodes) - 1 and "chance 1" in dot


def test_analysis_line_with_chance_moves_through_outcomes():
    """The analysis line of a search with chance: one step per move (the afterstate's visits and prior, the
    reward and value of the most visited outcome after it)."""
    from moozi.eval.players.base import _analysis

    _, tree = _coin_tree()
    nodes = tree_nodes(tree)
    legal = jnp.ones((1, 2), bool)
    policy = jnp.asarray([[0.2, 0.8]])
    path = _analysis(policy, [0.4], policy, [0.0], legal, 0, 24, tree, two_player=False)["path"]
    move2 = next(n for n in nodes if n.parent == 0 and n.action == 2)
    assert path == [{"action": 1, "visits": move2.visits, "prior": pytest.approx(0.5), "reward": pytest.approx(0.4),
                     "value": 0.0}]


def test_labels_never_read_minus_zero():
    # A value that rounds to zero is written +0.000 (mctx's Q of an unvisited edge can be -0.0 or -1e-9).
    from dataclasses import replace

    _, nodes = _exact_tree("XX./OO./...", "X", sims=8)
    tiny = [replace(n, q=-1e-9, raw_value=-0.0, reward=-0.004) if i == 1 else n for i, n in enumerate(nodes)]
    dot = to_dot(tiny, "t")
    assert "-0.00" not in dot and "Q=+0.000  v=+0.000" in dot and "r=+0.00" in dot
    assert "Q=-0.001" in to_dot([replace(n, q=-0.0006) if i == 1 else n for i, n in enumerate(nodes)], "t")
