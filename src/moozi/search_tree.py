"""A search tree as records (pure, numpy): what the tree views and the players' analysis read.

:func:`tree_nodes` turns one element of an ``mctx.Tree`` (the planner's ``return_tree`` output) into the
visited :class:`TreeNode` records; :func:`path_to` gives a node's actions from the root; :func:`principal_path`
the search's predicted line (the most visited child at every node).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class TreeNode:
    """One visited node of a search tree (values from the point of view of the player to move there).

    id / parent: node indices (the root is 0, its parent -1). action: the augmented
    action from the parent (0 at the root); ``env_action = action - 1``. depth: plies
    from the root. visits: N. value: the backed-up value. raw_value: the network's
    value at the node. prior: the parent's prior probability of this action.
    reward: the model's predicted reward of the move. q: the move's Q from the
    parent's point of view (reward + discount x value). The last four are filled
    by :func:`check_against_game`: true_reward, legal (False: the game forbids
    the move; None: the game had ended before it), flags (why it disagrees).
    """

    id: int
    parent: int
    action: int
    depth: int
    visits: int
    value: float
    raw_value: float
    prior: float
    reward: float
    q: float
    true_reward: float | None = None
    legal: bool | None = None
    game_over: bool = False
    flags: tuple[str, ...] = field(default_factory=tuple)


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max())
    return z / z.sum()


def tree_nodes(tree, index: int = 0) -> list[TreeNode]:
    """The visited nodes of batch element ``index`` of an ``mctx.Tree`` (numpy or JAX arrays), root first."""
    g = {k: np.asarray(getattr(tree, k))[index] for k in (
        "node_visits", "node_values", "raw_values", "parents", "action_from_parent", "children_prior_logits",
        "children_rewards", "children_discounts", "children_values", "root_invalid_actions")}
    nodes: list[TreeNode] = []
    depth = {0: 0}
    for n in range(g["node_visits"].shape[0]):
        if g["node_visits"][n] <= 0:
            continue
        parent = int(g["parents"][n])
        action = int(g["action_from_parent"][n]) if parent >= 0 else 0
        if parent >= 0:
            logits = g["children_prior_logits"][parent].astype(np.float64)
            if parent == 0:  # the root's invalid moves are masked out of the prior (as the search does)
                logits = np.where(g["root_invalid_actions"].astype(bool), -np.inf, logits)
            prior = float(_softmax(logits)[action])
            reward = float(g["children_rewards"][parent, action])
            q = reward + float(g["children_discounts"][parent, action]) * float(g["children_values"][parent, action])
            depth[n] = depth[parent] + 1
        else:
            prior, reward, q = 1.0, 0.0, float(g["node_values"][n])
        nodes.append(TreeNode(n, parent, action, depth[n], int(g["node_visits"][n]), float(g["node_values"][n]),
                              float(g["raw_values"][n]), prior, reward, q))
    return nodes


def path_to(nodes: list[TreeNode], node: TreeNode) -> list[int]:
    """Augmented actions from the root to ``node``."""
    by_id = {n.id: n for n in nodes}
    path = []
    while node.parent >= 0:
        path.append(node.action)
        node = by_id[node.parent]
    return path[::-1]


def principal_path(nodes: list[TreeNode], first: int | None = None) -> list[TreeNode]:
    """The search's predicted line: from the root, each node's most visited child (the smallest action on a tie)
    down to a leaf, root excluded; ``first``: the root's move to start with instead (the augmented action the
    search chose: Gumbel's choice need not be the most visited). Values stay from the point of view of the
    player to move at each node."""
    children: dict[int, list[TreeNode]] = {}
    for n in nodes:
        children.setdefault(n.parent, []).append(n)
    line: list[TreeNode] = []
    at = nodes[0].id if nodes else None
    while at in children:
        choices = children[at]
        if not line and first is not None:
            choices = [n for n in choices if n.action == first] or choices
        best = max(choices, key=lambda n: (n.visits, -n.action))
        line.append(best)
        at = best.id
    return line
