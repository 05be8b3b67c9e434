"""Planner: MCTS over a model with mctx (PUCT or Gumbel), masks and two-player signs.

The planner depends on a *search model*, not on the networks:

* ``root``: already evaluated at the root: ``RootEval(embedding, value [B], prior_logits [B, A])``;
* ``step(params, embedding, action [B]) -> StepEval(embedding, reward [B], value [B], prior_logits [B, A])``.

The learned model is one implementation (:func:`learned_root`, :func:`learned_step`);
a game's true simulator is another (AlphaZero mode, true-model baselines).

Conventions (docs/architecture.md §3, §5): actions are augmented (dummy = 0);
the dummy action is never legal at a real root; a root with no legal move
(a last step, kept in the batch) allows only the dummy action so nothing
divides by zero. Rewards are from the mover's point of view and values from the
player to move, so two-player zero-sum search uses discount ``-gamma``.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import mctx

from moozi.config import PlannerConfig
from moozi.types import Array, SearchOutput


class RootEval(NamedTuple):
    """Root evaluation. ``embedding [B, ...]``, ``value [B]``, ``prior_logits [B, A]``."""

    embedding: Array
    value: Array
    prior_logits: Array


class StepEval(NamedTuple):
    """One model step. ``embedding [B, ...]``, ``reward [B]``, ``value [B]``, ``prior_logits [B, A]``."""

    embedding: Array
    reward: Array
    value: Array
    prior_logits: Array


StepFn = Callable[[object, Array, Array], StepEval]


def learned_root(model, params, observation) -> RootEval:
    """Root evaluation with the learned model: ``observation [B, ...]`` -> RootEval."""
    out = model.initial_inference(params, observation)
    return RootEval(out.hidden, out.value, out.policy_logits)


def learned_step(model) -> StepFn:
    """Search step with the learned model's ``recurrent_inference``."""

    def step(params, embedding, action):
        out = model.recurrent_inference(params, embedding, action)
        return StepEval(out.hidden, out.reward, out.value, out.policy_logits)

    return step


def signed_discount(discount: float, two_player: bool) -> float:
    """The search's discount between plies: ``-gamma`` in two-player zero-sum games (values flip sides)."""
    return -discount if two_player else discount


def root_invalid_actions(legal_actions) -> Array:
    """Invalid-action mask over augmented actions at a real root.

    ``legal_actions [B, A - 1]`` bool over environment actions -> ``[B, A]`` bool,
    True where invalid. The dummy action is invalid unless no environment action
    is legal (a last step), where it is the only valid one.
    """
    legal_actions = legal_actions.astype(bool)
    none_legal = ~jnp.any(legal_actions, axis=-1, keepdims=True)
    legal_aug = jnp.concatenate([none_legal, legal_actions], axis=-1)
    return ~legal_aug


def _tree_max_depth(tree: mctx.Tree) -> Array:
    """``[B]`` int32 depth of the deepest visited node (root = 0)."""
    parents = tree.parents  # [B, N]; parents of node i have index < i
    num_nodes = parents.shape[1]
    batch = jnp.arange(parents.shape[0])

    def body(i, depth):
        parent = jnp.maximum(parents[:, i], 0)
        return depth.at[:, i].set(jnp.where(parents[:, i] >= 0, depth[batch, parent] + 1, 0))

    depth = jax.lax.fori_loop(1, num_nodes, body, jnp.zeros(parents.shape, jnp.int32))
    visited = tree.node_visits > 0
    return jnp.max(jnp.where(visited, depth, 0), axis=-1)


def _entropy(p):
    return -jnp.sum(jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0), axis=-1)


def _per_element(x):
    """Scalar stays scalar; ``[B]`` becomes ``[B, 1]`` to broadcast over actions."""
    x = jnp.asarray(x, jnp.float32)
    return x[:, None] if x.ndim == 1 else x


def _mctx_root(root: RootEval, legal_actions, discount: float, two_player: bool):
    """``(mctx root, invalid [B, A], the search's discount)`` for one batched search; legal moves checked against
    the prior's size."""
    num_actions = root.prior_logits.shape[-1]
    if legal_actions.shape[-1] != num_actions - 1:
        raise ValueError(
            f"legal_actions has {legal_actions.shape[-1]} environment actions but the model's "
            f"policy covers {num_actions} augmented actions (expected {num_actions - 1} + dummy)"
        )
    mroot = mctx.RootFnOutput(prior_logits=root.prior_logits.astype(jnp.float32),
                              value=root.value.astype(jnp.float32), embedding=root.embedding)
    return mroot, root_invalid_actions(legal_actions), signed_discount(discount, two_player)


def search(
    params,
    rng,
    root: RootEval,
    step: StepFn,
    legal_actions,
    config: PlannerConfig,
    *,
    discount: float,
    two_player: bool,
    temperature=None,
    gumbel_scale=None,
    return_tree: bool = False,
):
    """Run one batched search.

    Args:
      params: forwarded to ``step``.
      rng: PRNG key (consumed).
      root: the root evaluation (see :class:`RootEval`).
      step: the search model's recurrent step.
      legal_actions: ``[B, A - 1]`` bool legal environment actions at the root.
      config: planner settings.
      discount: gamma; two-player searches use ``-gamma`` between plies.
      two_player: alternate points of view between plies (zero-sum games).
      temperature: PUCT action temperature, a scalar or ``[B]`` (may be traced;
        default 1, visit-proportional); 0 picks the most visited action.
      gumbel_scale: Gumbel root-noise scale, a scalar or ``[B]``, overriding
        ``config.gumbel_scale``; 0 makes the choice deterministic.
      return_tree: also return the search tree (``mctx.Tree``, ``[B, N]`` /
        ``[B, N, A]`` arrays; node 0 is the root), for tree views.

    Returns:
      :class:`SearchOutput` with ``[B]`` / ``[B, A]`` fields, or ``(SearchOutput, mctx.Tree)``
      with ``return_tree``.
    """
    mroot, invalid, gamma = _mctx_root(root, legal_actions, discount, two_player)

    def recurrent_fn(p, key, action, embedding):
        del key
        out = step(p, embedding, action)
        batch = action.shape[0]
        rec = mctx.RecurrentFnOutput(
            reward=out.reward.astype(jnp.float32),
            discount=jnp.full((batch,), gamma, jnp.float32),
            prior_logits=out.prior_logits.astype(jnp.float32),
            value=out.value.astype(jnp.float32),
        )
        return rec, out.embedding

    common = dict(num_simulations=config.num_simulations, invalid_actions=invalid, max_depth=config.max_depth)
    if config.kind == "puct":
        out = mctx.muzero_policy(
            params, rng, mroot, recurrent_fn, **common,
            dirichlet_fraction=config.dirichlet_fraction,
            dirichlet_alpha=config.dirichlet_alpha,
            pb_c_init=config.pb_c_init,
            pb_c_base=config.pb_c_base,
            temperature=_per_element(1.0 if temperature is None else temperature),
        )
    else:
        qtransform = functools.partial(mctx.qtransform_completed_by_mix_value, value_scale=config.value_scale,
                                       maxvisit_init=config.maxvisit_init, rescale_values=config.rescale_values,
                                       epsilon=config.min_value_range)
        out = mctx.gumbel_muzero_policy(
            params, rng, mroot, recurrent_fn, **common, qtransform=qtransform,
            max_num_considered_actions=config.max_num_considered_actions,
            gumbel_scale=_per_element(config.gumbel_scale if gumbel_scale is None else gumbel_scale),
        )
    result = _search_output(out, invalid, root)
    return (result, out.search_tree) if return_tree else result


class ChanceSteps(NamedTuple):
    """A search model with chance (Stochastic MuZero): ``afterstate(params, embedding, action [B]) ->
    (afterstate, value [B], chance_logits [B, M])`` and ``chance(params, afterstate, outcome [B]) -> StepEval``
    (the next state, the transition's reward, its value and prior)."""

    afterstate: Callable
    chance: Callable


def learned_chance_steps(model) -> ChanceSteps:
    """:class:`ChanceSteps` of a :class:`~moozi.model.stochastic.StochasticModel` (outcome ``i`` is code ``i``)."""

    def afterstate(params, embedding, action):
        out = model.afterstate_inference(params, embedding, action)
        return out.afterstate, out.value, out.chance_logits

    def chance(params, after, outcome):
        out = model.chance_inference(params, after, jax.nn.one_hot(outcome, model.chance_outcomes))
        return StepEval(out.hidden, out.reward, out.value, out.policy_logits)

    return ChanceSteps(afterstate, chance)


def stochastic_search(params, rng, root: RootEval, steps: ChanceSteps, legal_actions, config: PlannerConfig, *,
                      discount: float, two_player: bool, temperature=None, gumbel_scale=None, return_tree=False):
    """:func:`search` for a search model with chance: mctx's ``stochastic_muzero_policy`` (PUCT over decision
    nodes, chance nodes expanded by their prior and visited in proportion to it). Same arguments and result
    (``gumbel_scale`` is not used: PUCT only); ``max_depth`` counts moves (a move and its chance outcome are
    two tree levels), and the returned tree holds the decision nodes' statistics over the A actions."""
    del gumbel_scale
    if config.kind != "puct":
        raise ValueError(f"planner.kind = {config.kind!r}: a search with chance is PUCT only")
    mroot, invalid, gamma = _mctx_root(root, legal_actions, discount, two_player)

    def decision_fn(p, key, action, embedding):
        del key
        after, value, chance_logits = steps.afterstate(p, embedding, action)
        out = mctx.DecisionRecurrentFnOutput(chance_logits=chance_logits.astype(jnp.float32),
                                             afterstate_value=value.astype(jnp.float32))
        return out, after

    def chance_fn(p, key, outcome, after):
        del key
        out = steps.chance(p, after, outcome)
        rec = mctx.ChanceRecurrentFnOutput(
            action_logits=out.prior_logits.astype(jnp.float32), value=out.value.astype(jnp.float32),
            reward=out.reward.astype(jnp.float32), discount=jnp.full(outcome.shape, gamma, jnp.float32))
        return rec, out.embedding

    out = mctx.stochastic_muzero_policy(
        params, rng, mroot, decision_fn, chance_fn, num_simulations=config.num_simulations, invalid_actions=invalid,
        max_depth=None if config.max_depth is None else 2 * config.max_depth,
        dirichlet_fraction=config.dirichlet_fraction, dirichlet_alpha=config.dirichlet_alpha,
        pb_c_init=config.pb_c_init, pb_c_base=config.pb_c_base,
        temperature=_per_element(1.0 if temperature is None else temperature))
    result = _search_output(out, invalid, root, depth_per_move=2)
    return (result, out.search_tree) if return_tree else result


class ChanceEdges(NamedTuple):
    """The chance outcomes below each node of a search with chance, which mctx's returned tree leaves out (it
    cuts the tree's child arrays to the decision nodes' A actions). ``probs``, ``rewards``: ``[B, N, M]``, the
    model's probability of each outcome at node ``n`` and its reward for the mover (meaningful at afterstate
    nodes, the tree's chance nodes; other rows are not read); ``discount``: the search's signed discount of an
    outcome's edge (negative in two-player games)."""

    probs: Array
    rewards: Array
    discount: float


def with_chance_edges(params, steps: ChanceSteps, tree: mctx.Tree, *, discount: float,
                      two_player: bool) -> mctx.Tree:
    """``tree`` (:func:`stochastic_search`'s, ``[B, N]``) with :class:`ChanceEdges` in its ``extra_data``, for the
    views that draw or read it (:func:`moozi.search_tree.tree_nodes`). Recomputed from the nodes' embeddings
    (mctx keeps a node's afterstate and its parent's state): every node's move evaluated again from its parent's
    state for the outcome probabilities, and every outcome stepped from its afterstate for the reward, ``N x M``
    model steps per search (so the playing path never pays it)."""
    emb = tree.embeddings
    batch, nodes = tree.node_visits.shape
    num_actions = tree.children_prior_logits.shape[-1]
    parents = jnp.maximum(tree.parents, 0)
    actions = jnp.clip(tree.action_from_parent, 0, num_actions - 1)  # outcome edges' rows are not read

    def by_parent(x):
        return jnp.take_along_axis(x, parents.reshape(batch, nodes, *([1] * (x.ndim - 2))), axis=1)

    def flat(x):
        return x.reshape(batch * nodes, *x.shape[2:])

    parent_state = jax.tree.map(lambda x: flat(by_parent(x)), emb.state_embedding)
    _, _, logits = steps.afterstate(params, parent_state, flat(actions))
    outcomes = logits.shape[-1]
    probs = jax.nn.softmax(logits.astype(jnp.float32), axis=-1).reshape(batch, nodes, outcomes)
    after = jax.tree.map(lambda x: jnp.repeat(flat(x), outcomes, axis=0), emb.afterstate_embedding)
    codes = jnp.tile(jnp.arange(outcomes, dtype=jnp.int32), batch * nodes)
    rewards = steps.chance(params, after, codes).reward.astype(jnp.float32).reshape(batch, nodes, outcomes)
    return tree.replace(extra_data=ChanceEdges(probs, rewards, signed_discount(discount, two_player)))


def readable_tree(model, params, tree: mctx.Tree, *, discount: float, two_player: bool) -> mctx.Tree:
    """The learned ``model``'s search tree as the views read it: :func:`with_chance_edges` for a model with
    chance, the tree itself otherwise."""
    if not model.config.chance_outcomes:
        return tree
    return with_chance_edges(params, learned_chance_steps(model), tree, discount=discount, two_player=two_player)


def _search_output(out, invalid, root: RootEval, depth_per_move: int = 1) -> SearchOutput:
    """mctx's ``PolicyOutput`` as a :class:`SearchOutput` (the policy renormalised over the valid actions)."""
    summary = out.search_tree.summary()
    policy = jnp.where(invalid, 0.0, out.action_weights)
    policy = policy / jnp.maximum(jnp.sum(policy, axis=-1, keepdims=True), 1e-12)
    action = out.action.astype(jnp.int32)
    return SearchOutput(
        action=action,
        env_action=action - 1,
        root_value=summary.value,
        root_policy=policy,
        prior_value=root.value.astype(jnp.float32),
        policy_entropy=_entropy(policy),
        max_depth=_tree_max_depth(out.search_tree) // depth_per_move,
    )


def learned_search(model, params, rng, root: RootEval, legal_actions, config: PlannerConfig, *,
                   prior_temperature: float = 1.0, **kwargs):
    """Search the learned ``model`` from an evaluated root: :func:`search` over its dynamics, or
    :func:`stochastic_search` over its afterstates and chance outcomes for a model with chance
    (``model.chance_outcomes``); ``prior_temperature`` as :func:`tempered_prior`; ``kwargs`` as :func:`search`."""
    steps = learned_chance_steps(model) if model.config.chance_outcomes else learned_step(model)
    if prior_temperature != 1.0:
        root, steps = tempered_prior(root, steps, prior_temperature)
    run = stochastic_search if isinstance(steps, ChanceSteps) else search
    return run(params, rng, root, steps, legal_actions, config, **kwargs)


def plan(model, params, rng, observation, legal_actions, config: PlannerConfig, *, discount, two_player,
         temperature=None, gumbel_scale=None, return_tree: bool = False):
    """Search with the learned model from stacked observations ``[B, ...]`` (see :func:`search`,
    :func:`learned_search`)."""
    return learned_search(model, params, rng, learned_root(model, params, observation), legal_actions, config,
                          discount=discount, two_player=two_player, temperature=temperature,
                          gumbel_scale=gumbel_scale, return_tree=return_tree)


FINAL_MOVES = ("policy", "visits", "value", "lcb")
"""How a player picks its move from a finished search (``pick=``): the search's policy (mctx's weights: visit
shares for PUCT, the improved policy for Gumbel), the most visited move, the best mean value, or the best
lower confidence bound ``Q - c / sqrt(N)``; the last two among the moves searched at least once."""


def tempered_prior(root: RootEval, step, temperature: float):
    """The same search model with every prior's logits divided by ``temperature`` (AlphaZero.jl's
    ``prior_temperature``: above 1 flattens the prior the search explores by, below 1 sharpens it). ``step`` is a
    :data:`StepFn` or :class:`ChanceSteps` (the moves' priors are tempered, not the chance outcomes')."""
    t = float(temperature)

    def temper(fn):
        def tempered(params, embedding, action):
            out = fn(params, embedding, action)
            return out._replace(prior_logits=out.prior_logits / t)

        return tempered

    steps = step._replace(chance=temper(step.chance)) if isinstance(step, ChanceSteps) else temper(step)
    return root._replace(prior_logits=root.prior_logits / t), steps


def final_move_scores(result: SearchOutput, tree: mctx.Tree, pick: str, lcb_c: float = 1.0) -> Array:
    """Scores over augmented actions ``[B, A]`` whose largest is the move to play (see :data:`FINAL_MOVES`).

    ``policy``: ``result.root_policy``; ``visits``: the root's visit shares; ``value``: the root's Q (reward plus
    the child's value, for the player to move) where visited, -inf elsewhere; ``lcb``: ``Q - lcb_c / sqrt(N)``
    where visited (``lcb_c`` in value units: for games scored in [-1, 1], 1 is half the range)."""
    if pick == "policy":
        return result.root_policy
    visits = tree.children_visits[:, 0].astype(jnp.float32)  # [B, A]
    if pick == "visits":
        return visits / jnp.maximum(jnp.sum(visits, axis=-1, keepdims=True), 1.0)
    q = tree.qvalues(jnp.zeros(visits.shape[0], jnp.int32))
    if pick == "lcb":
        q = q - lcb_c / jnp.sqrt(jnp.maximum(visits, 1.0))
    elif pick != "value":
        raise ValueError(f"pick = {pick!r}: allowed {', '.join(FINAL_MOVES)}")
    return jnp.where(visits > 0, q, -jnp.inf)
