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
