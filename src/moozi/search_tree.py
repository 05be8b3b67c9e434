"""A search tree as records (pure, numpy): what the tree views and the players' analysis read.

:func:`tree_nodes` turns one element of an ``mctx.Tree`` (the planner's ``return_tree`` output) into the
visited :class:`TreeNode` records; :func:`path_to` gives a node's actions from the root; :func:`principal_path`
the search's predicted line (the most visited child at every node); :func:`predicted_moves` the same line a move
at a time.

A search with chance (Stochastic MuZero) alternates two kinds of node below a state: a move leads to an
*afterstate* (a chance node: the position after the move, before chance), and each of the model's chance
outcomes leads from there to the next state. Its records say which (``afterstate``, ``outcome``), read the
outcomes' probabilities and rewards from the tree's :class:`moozi.planner.ChanceEdges`, and every function here
counts moves, not tree levels, where it speaks of moves.
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

    In a search with chance: ``afterstate`` marks the node a move leads to (its value
    and Q are the mover's, its reward 0); ``outcome`` is the chance outcome that led
    from the afterstate above to this state (``action`` is then mctx's index of it,
    ``A + outcome``; prior: the outcome's probability; reward: the model's reward of
    the move with this outcome).
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
    afterstate: bool = False
    outcome: int | None = None


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max())
    return z / z.sum()


def tree_nodes(tree, index: int = 0) -> list[TreeNode]:
    """The visited nodes of batch element ``index`` of an ``mctx.Tree`` (numpy or JAX arrays), root first. A
    search with chance needs its :class:`moozi.planner.ChanceEdges` in ``tree.extra_data``
    (:func:`moozi.planner.readable_tree`)."""
    g = {k: np.asarray(getattr(tree, k))[index] for k in (
        "node_visits", "node_values", "raw_values", "parents", "action_from_parent", "children_prior_logits",
        "children_rewards", "children_discounts", "children_values", "root_invalid_actions")}
    decision = getattr(tree.embeddings, "is_decision_node", None)
    edges = getattr(tree, "extra_data", None)
    if decision is not None:
        if not hasattr(edges, "probs"):
            raise ValueError("a search tree with chance needs its chance edges: moozi.planner.readable_tree(...)")
        decision = np.asarray(decision)[index]
        probs, rewards = np.asarray(edges.probs)[index], np.asarray(edges.rewards)[index]
    num_actions = g["children_prior_logits"].shape[-1]
    nodes: list[TreeNode] = []
    depth = {0: 0}
    for n in range(g["node_visits"].shape[0]):
        if g["node_visits"][n] <= 0:
            continue
        parent = int(g["parents"][n])
        action = int(g["action_from_parent"][n]) if parent >= 0 else 0
        if parent >= 0 and decision is not None and not decision[parent]:  # a chance outcome below an afterstate
            outcome = action - num_actions
            prior, reward = float(probs[parent, outcome]), float(rewards[parent, outcome])
            q = reward + float(edges.discount) * float(g["node_values"][n])
            depth[n] = depth[parent] + 1
            nodes.append(TreeNode(n, parent, action, depth[n], int(g["node_visits"][n]), float(g["node_values"][n]),
                                  float(g["raw_values"][n]), prior, reward, q, outcome=outcome))
            continue
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
                              float(g["raw_values"][n]), prior, reward, q,
                              afterstate=decision is not None and parent >= 0))
    return nodes


def path_to(nodes: list[TreeNode], node: TreeNode) -> list[int]:
    """The moves (augmented actions) from the root to ``node``; chance outcomes are not moves and are left out."""
    by_id = {n.id: n for n in nodes}
    path = []
    while node.parent >= 0:
        if node.outcome is None:
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


def predicted_moves(nodes: list[TreeNode], first: int | None = None) -> list[tuple[TreeNode, TreeNode]]:
    """:func:`principal_path` a move at a time: ``(the move's node, the state after it)``, one pair per move. In a
    search with chance the move's node is its afterstate (visits, prior) and the state after it the most visited
    outcome below (reward, value; the afterstate again where none was visited: the line ends there); otherwise
    both are the same node."""
    line = principal_path(nodes, first)
    moves: list[tuple[TreeNode, TreeNode]] = []
    i = 0
    while i < len(line):
        node = line[i]
        if node.afterstate:
            after = line[i + 1] if i + 1 < len(line) else node
            moves.append((node, after))
            i += 2
        else:
            moves.append((node, node))
            i += 1
    return moves
