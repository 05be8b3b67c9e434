"""Search with the real simulator of a JAX-native game (AlphaZero mode, and a rollout-MCTS baseline).

The planner (:func:`moozi.planner.search`) takes any step function; here
the step is the game's own pure ``step`` (``moozi.envs.device``), so the tree
holds true game states and rewards, and only the leaf evaluation is learned
(or, for the baseline, random playouts). The embedding is a :class:`TrueNode`:
the batched game state, the rolling history the network reads (as in
acting, ``moozi.model.history``) and a ``done`` flag.

Conventions, as the learned-model search: actions are augmented (0 is the
dummy, never a real move here: its prior is masked and it is played as a
no-op loss-free move only from finished states); rewards are for the player
who just moved; values for the player to move. A finished state absorbs:
reward 0, value 0, so nothing beyond the end of a game changes a backed-up
value. Moves illegal in a state get no prior (and the game's own rule if the
search still tries one: pgx ends the game with -1 for the mover).

Evaluators (``evaluate(params, node) -> (value [B], prior_logits [B, A_env])``):

* :func:`network_evaluator`: the network's value and prior on the stacked history;
* :func:`rollout_evaluator`: the mean outcome of ``rollouts`` uniformly random
  playouts to the end of the game (for the player to move), with a uniform prior.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from flax import struct

from moozi.envs.device import DeviceEnv, EnvState, _select, step_batch
from moozi.model.history import history_observation, history_push
from moozi.planner import RootEval, StepEval

MASKED = -1e9


@struct.dataclass
class TrueNode:
    """A batch of search nodes: ``state`` (EnvState ``[B]``), ``history`` (the network's rolling input),
    ``done [B]`` (the game is over at this node), ``seed [B]`` uint32 (the rollout evaluator's randomness,
    a hash of the path from the root)."""

    state: EnvState
    history: tuple
    done: jax.Array
    seed: jax.Array


def _augment(logits_env, legal):
    """Env-action logits ``[B, A_env]`` -> augmented ``[B, A_env + 1]`` with the dummy and illegal moves masked."""
    logits = jnp.where(legal, logits_env, MASKED)
    return jnp.concatenate([jnp.full(logits.shape[:-1] + (1,), MASKED), logits], axis=-1)


def network_evaluator(model) -> Callable:
    """The network's value and prior logits (over environment actions) on the node's stacked history."""

    def evaluate(params, node: TrueNode):
        out = model.initial_inference(params, history_observation(node.history, model.num_actions))
        return out.value.astype(jnp.float32), out.policy_logits[:, 1:].astype(jnp.float32)

    return evaluate


def symmetric_evaluator(evaluate, symmetry, tables) -> Callable:
    """``evaluate`` with the network shown each row's history through ``symmetry [B]`` (a play-time option,
    :mod:`moozi.envs.symmetry`) and its prior mapped back onto the real board; the value is unchanged."""
    from moozi.envs.symmetry import transform_history, untransform_policy

    def evaluate_sym(params, node: TrueNode):
        value, logits = evaluate(params, node.replace(history=transform_history(node.history, symmetry, tables)))
        return value, untransform_policy(logits, symmetry, tables)

    return evaluate_sym


def rollout_evaluator(env: DeviceEnv, rollouts: int = 1) -> Callable:
    """Mean outcome of ``rollouts`` random playouts per node, for its player to move; a uniform prior."""

    def one_playout(key, state: EnvState):
        root_player = state.to_play

        def cond(c):
            return ~c[1].is_last

        def body(c):
            k, s, total = c
            k, pick = jax.random.split(k)
            logits = jnp.where(s.legal_actions, 0.0, -jnp.inf)
            action = jax.random.categorical(pick, logits).astype(jnp.int32)
            mover = s.to_play
            s2, ts = env.step(s, action)
            r = jnp.where(mover == root_player, ts.reward, -ts.reward)
            return k, s2, total + r

        _, _, total = jax.lax.while_loop(cond, body, (key, state, jnp.zeros((), jnp.float32)))
        return total

    def evaluate(params, node: TrueNode):
        del params

        def mean_outcome(seed, state):
            keys = jax.random.split(jax.random.key(seed), rollouts)
            return jax.vmap(one_playout, in_axes=(0, None))(keys, state).mean()

        values = jax.vmap(mean_outcome)(node.seed, node.state)
        values = jnp.where(node.done, 0.0, values)
        return values.astype(jnp.float32), jnp.zeros(node.state.legal_actions.shape, jnp.float32)

    return evaluate


def true_root(evaluate, params, state: EnvState, history, seed) -> RootEval:
    """The root of a true-model search at game states ``state [B]`` with the network's ``history``
    (``seed [B]`` uint32 seeds the rollouts of the whole tree)."""
    node = TrueNode(state, history, jnp.asarray(state.is_last), jnp.asarray(seed, jnp.uint32))
    value, logits = evaluate(params, node)
    return RootEval(node, value, _augment(logits, state.legal_actions))


def true_step(env: DeviceEnv, evaluate) -> Callable:
    """A :data:`moozi.planner.StepFn` that steps the real game."""

    def step(params, node: TrueNode, action):
        stepped, ts = step_batch(env, node.state, jnp.maximum(action - 1, 0).astype(jnp.int32))
        done = node.done
        state = jax.vmap(_select)(done, node.state, stepped)
        reward = jnp.where(done, 0.0, ts.reward).astype(jnp.float32)
        history = history_push(node.history, ts.observation, action.astype(jnp.int32), jnp.zeros_like(done))
        now_done = done | stepped.is_last
        seed = node.seed * jnp.uint32(1000003) + action.astype(jnp.uint32) + jnp.uint32(1)
        child = TrueNode(state, history, now_done, seed)
        value, logits = evaluate(params, child)
        value = jnp.where(now_done, 0.0, value)
        return StepEval(child, reward, value, _augment(logits, jnp.where(now_done[:, None], False, state.legal_actions)))

    return step
