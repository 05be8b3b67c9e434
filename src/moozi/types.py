"""Shared typed data: the arrays that flow between modules.

All containers are frozen pytrees (``flax.struct.dataclass``) so they pass
through ``jit``, ``vmap`` and ``lax.scan`` unchanged. Shapes use:

* ``B``  batch, ``S`` steps stored in a trajectory (window), ``K`` unroll steps,
* ``H, W, C`` observation frame height, width, channels,
* ``A``  size of the *augmented* action space (dummy at index 0, so ``A = |A^e| + 1``),
* ``N_bins`` number of categorical bins for values/rewards (``2 * support + 1``).

Conventions (docs/architecture.md §3–4): environment action ``e`` is augmented
index ``e + 1``; the reward at step ``t`` was received on arriving at ``t``;
values are from the point of view of the player to move at that step; rewards
from the point of view of the player who just moved.
"""

from __future__ import annotations

from typing import Any

import jax
from flax import struct

Array = jax.Array
Params = Any  # a pytree of arrays
PRNGKey = jax.Array

DUMMY_ACTION = 0
"""Augmented index of the dummy action (no environment action)."""


def to_augmented(env_action):
    """Environment action index -> augmented index (``e + 1``). Any shape."""
    return env_action + 1


def to_env_action(aug_action):
    """Augmented index -> environment action index (``a - 1``; dummy gives -1). Any shape."""
    return aug_action - 1


@struct.dataclass
class ModelOutput:
    """What the model returns from ``initial_inference`` / ``recurrent_inference``.

    Training reads the ``*_logits`` fields; acting reads the scalar fields.
    They are never the same field with two meanings.

    Attributes:
      hidden: ``[B, ...]`` hidden state (``[B, H, W, C_h]`` residual, ``[B, D]`` MLP).
      value_logits: ``[B, N_bins]`` categorical value logits (transformed space).
      reward_logits: ``[B, N_bins]`` categorical reward logits; all-equal (a
        constant) for ``initial_inference`` where no reward is predicted.
      policy_logits: ``[B, A]`` policy logits over the augmented action space.
      value: ``[B]`` scalar value (expectation over the support, inverse-transformed).
      reward: ``[B]`` scalar reward (0 for ``initial_inference``).
    """

    hidden: Array
    value_logits: Array
    reward_logits: Array
    policy_logits: Array
    value: Array
    reward: Array


@struct.dataclass
class Trajectory:
    """One episode (or a window cut out of one), time-major, unbatched.

    Index ``i`` in ``[0, S)`` addresses stored step ``i``. The episode's step 0
    is at index ``first`` and its last step ``T`` at index ``last``; entries
    outside ``[first, last]`` are padding and never read as data (frames before
    the start read as zeros, actions as dummy, steps past the end as absorbing).
    A whole episode stored from its start has ``first == 0``; a window cut out
    of one may have ``first < 0`` (the start lies before the window) and
    ``last >= S`` (the end lies after it).

    Attributes:
      frames: ``[S, H, W, C]`` float32 environment observations o_i.
      actions: ``[S]`` int32 augmented action a_i taken at step i (dummy at the last step).
      rewards: ``[S]`` float32 reward r_i received on arriving at step i (0 at step 0).
      root_values: ``[S]`` float32 search value v*_i (player-to-move point of view).
      root_policies: ``[S, A]`` float32 search policy p*_i over augmented actions.
      to_play: ``[S]`` int32 player to move at step i (0 for single-player games).
      first: ``[]`` int32 index of the episode's step 0.
      last: ``[]`` int32 index of the episode's last step T.
      is_terminal: ``[]`` bool, the episode ended by termination (True) or
        truncation (False, values bootstrap from v*_T).
      random_actions: ``[S]`` bool, a_i was a uniformly random exploration move
        (not the search's choice): value targets of earlier steps stop at i and
        bootstrap from v*_i instead of crediting that move's outcome. ``None``
        (the default) means no step was random.
      legal_actions: ``[S, A_env]`` bool legal mask of each step over
        *environment* actions (reanalyze re-searches only legal moves).
        ``None`` means not recorded: every move legal on non-last steps.
    """

    frames: Array
    actions: Array
    rewards: Array
    root_values: Array
    root_policies: Array
    to_play: Array
    first: Array
    last: Array
    is_terminal: Array
    random_actions: Array | None = None
    legal_actions: Array | None = None


@struct.dataclass
class Targets:
    """Training targets for one position ``t`` and unroll ``k = 0..K``.

    Batched by ``vmap`` into ``[B, ...]`` for the loss.

    Attributes:
      observation: ``[H, W, L*(C + A)]`` stacked history at t (the model input).
      next_observation: ``[H, W, L*(C + A)]`` stacked history at t + 1 (the
        consistency-loss target; meaningless where ``consistency_mask`` is 0).
      actions: ``[K]`` int32 augmented actions a_t .. a_{t+K-1} (dummy at and past T).
      policy: ``[K+1, A]`` policy targets p*_{t+k} (one-hot dummy for t + k >= T).
      value: ``[K+1]`` n-step value targets G^N_{t+k} (0 for t + k >= T if terminal).
      value_mask: ``[K+1]`` float32, 0 where no value target exists (past the
        last step of a truncated episode, whose continuation is unknown).
      reward: ``[K+1]`` reward targets r_{t+k}; index 0 is unused and 0.
      consistency_mask: ``[]`` float32, 1 if step t + 1 exists (t < T).
      priority: ``[]`` float32 ``|v*_t - G^N_t|``.
      unroll_observations: Stochastic MuZero only (else None): ``[K+1, H, W,
        L*(C + A)]`` the stacked history at ``min(t + k, T)``, what the encoder
        reads on both sides of each transition.
      transition_mask: Stochastic MuZero only (else None): ``[K]`` float32, 1
        where ``t + k < T`` (a real transition, whose chance outcome the
        encoder names and the chance prior learns).
      chance_codes: ``learner.chance_codes = game`` only (else None): ``[K]``
        int32, the outcome the game's code function names for each real
        transition t + k -> t + k + 1 (0 where ``transition_mask`` is 0).
    """

    observation: Array
    next_observation: Array
    actions: Array
    policy: Array
    value: Array
    value_mask: Array
    reward: Array
    consistency_mask: Array
    priority: Array
    unroll_observations: Array | None = None
    transition_mask: Array | None = None
    chance_codes: Array | None = None


@struct.dataclass
class Batch:
    """A training batch: targets for ``B`` positions and their importance weights.

    Attributes:
      targets: ``Targets`` with a leading ``[B]`` axis on every field.
      weights: ``[B]`` float32 importance-sampling weights rho (1 for uniform sampling).
    """

    targets: Targets
    weights: Array


@struct.dataclass
class SearchOutput:
    """Planner result per batch element.

    Attributes:
      action: ``[B]`` int32 chosen augmented action.
      env_action: ``[B]`` int32 chosen environment action (``action - 1``).
      root_value: ``[B]`` float32 search value v* (player-to-move point of view).
      root_policy: ``[B, A]`` float32 search policy p* (visit distribution for
        PUCT, improved policy for Gumbel); zero on invalid actions.
      prior_value: ``[B]`` float32 the network's value before search.
      policy_entropy: ``[B]`` float32 entropy of ``root_policy`` (nats).
      max_depth: ``[B]`` int32 deepest node reached by the search.
    """

    action: Array
    env_action: Array
    root_value: Array
    root_policy: Array
    prior_value: Array
    policy_entropy: Array
    max_depth: Array


@struct.dataclass
class ReplaySample:
    """What replay hands the learner: raw windows, not targets (numpy, or device arrays once put).

    The learner's jitted update builds the targets from the windows with
    :func:`moozi.targets.make_targets`, so no large float targets are ever
    materialised on the host.

    Attributes:
      windows: :class:`Trajectory` with a leading ``[B]`` axis over windows of
        ``W = L + K + N + 1`` steps around each position (frames in the game's
        storage dtype, e.g. uint8); ``first`` / ``last`` / ``is_terminal`` ``[B]``.
      positions: ``[B]`` int32 index of each sampled position inside its window.
      ids: ``[B]`` int64 replay position ids (for priority updates).
      weights: ``[B]`` float32 importance-sampling weights (at most 1).
      symmetry: ``[B]`` int32 board symmetry each window is shown through
        (``learner.augment_symmetries``), or None.
    """

    windows: Trajectory
    positions: Array
    ids: Array
    weights: Array
    symmetry: Array | None = None
