"""The functional device-env interface: pure, jittable ``reset`` / ``step`` with auto-reset.

A :class:`DeviceEnv` holds only static configuration (its :class:`EnvSpec`
and the wrapped game's constants). Its methods are pure functions of their
arguments, so they can be jitted, vmapped and scanned::

    state, ts = env.reset(key)                 # ts.is_first
    state, ts = env.step(state, action)        # action: environment index, int32 []

    states, ts = reset_batch(env, keys)        # keys [B]
    states, ts = step_batch(env, states, actions)   # actions [B]

Auto-reset: the step after a last step is the first step of the next episode
and ignores the action. The env state carries its own PRNG key, so an episode
is a function of the key given to ``reset`` and the actions taken: the same
key and the same action sequence reproduce the same steps, across episodes too.

Actions inside jit cannot be checked. There, an out-of-range action is clipped
to ``[0, num_actions - 1]``; an in-range action that is not legal follows the
game's own rule (pgx: the game ends at once and the mover gets -1; the gymnax
games have no illegal actions). Outside jit use :func:`checked_step`, which
raises :class:`IllegalActionError` instead.

True-model seam (AlphaZero mode, later): ``EnvState`` is a pytree and
``step`` a pure function of ``(state, action)`` (randomness comes from the key
in the state), so a planner can use ``step`` as its recurrent function and the
``TimeStep`` fields (reward, legal_actions, to_play, is_terminal) as what it
needs at each node.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from moozi.envs.contract import EnvSpec, IllegalActionError, TimeStep

Array = jax.Array


@struct.dataclass
class EnvState:
    """State of one device environment (a pytree; batched adds a leading ``[B]``).

    Attributes:
      inner: the wrapped game's own state (a pytree: gymnax ``EnvState``, pgx ``State``).
      key: PRNG key consumed by the next step (stochastic games) and the next auto-reset.
      episode_step: ``[]`` int32 actions taken so far in this episode.
      is_last: ``[]`` bool, the current step is the last of its episode (the next
        step resets and ignores its action).
      legal_actions: ``[A_env]`` bool legal actions at the current step (as in its TimeStep).
      to_play: ``[]`` int32 player to move at the current step.
    """

    inner: Any
    key: Array
    episode_step: Array
    is_last: Array
    legal_actions: Array
    to_play: Array


class GameStep(NamedTuple):
    """What a bridge's hooks report after ``init`` / one transition (unbatched).

    observation: the game's raw observation (any shape with ``prod == H*W*C``, any dtype).
    reward: ``[]`` reward for the player who just moved (ignored after ``init``).
    terminated: ``[]`` bool, the game ended by its own rules.
    truncated: ``[]`` bool, the game ended for another reason (its own time limit).
    legal_actions: ``[A_env]`` bool.
    to_play: ``[]`` int player to move.
    """

    observation: Array
    reward: Array
    terminated: Array
    truncated: Array
    legal_actions: Array
    to_play: Array


def _is_key(x) -> bool:
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _strong(tree):
    """Drop weak types so reset's and step's outputs have identical types (scan carries)."""

    def f(x):
        if _is_key(x):
            return x
        x = jnp.asarray(x)
        return jax.lax.convert_element_type(x, x.dtype)

    return jax.tree.map(f, tree)


def _select(pred, on_true, on_false):
    """``on_true`` where the scalar ``pred`` else ``on_false``, leaf by leaf."""

    def f(a, b):
        if _is_key(a):
            return jax.random.wrap_key_data(
                jnp.where(pred, jax.random.key_data(a), jax.random.key_data(b)), impl=jax.random.key_impl(a)
            )
        return jnp.where(pred, a, b)

    return jax.tree.map(f, on_true, on_false)


class DeviceEnv:
    """Base of the JAX-native bridges. Subclasses set ``spec`` and implement the two hooks.

    Hooks (pure, jittable, unbatched):

    * ``_init(key) -> (inner, GameStep)``: a new game (never already over).
    * ``_step(inner, action, key) -> (inner, GameStep)``: one transition with a
      valid int32 environment action; ``GameStep.reward`` is for the mover.

    The base class adds everything in the contract: float32 observations of
    ``spec.observation_shape``, first/last flags, the truncation cap
    ``spec.max_episode_steps``, the all-False legal mask on last steps and auto-reset.
    Instances hash by identity, so an env can be a static argument to ``jax.jit``.
    """

    spec: EnvSpec

    # --- hooks -----------------------------------------------------------------
    def _init(self, key: Array) -> tuple[Any, GameStep]:
        raise NotImplementedError

    def _step(self, inner: Any, action: Array, key: Array) -> tuple[Any, GameStep]:
        raise NotImplementedError

    # --- public, pure ------------------------------------------------------------
    @property
    def num_actions(self) -> int:
        return self.spec.num_actions

    def reset(self, key: Array) -> tuple[EnvState, TimeStep]:
        """Start an episode. ``key``: a PRNG key (raw ``[2]`` uint32 or typed). Pure, jittable."""
        key, init_key = jax.random.split(key)
        return self._start(init_key, key)

    def step(self, state: EnvState, action: Array) -> tuple[EnvState, TimeStep]:
        """One step: ``action`` is an environment index (int, ``[]``). Pure, jittable.

        If ``state`` is a last step, returns the first step of a new episode
        (the action is ignored).
        """
        key, step_key, reset_key = jax.random.split(state.key, 3)
        action = jnp.clip(jnp.asarray(action, jnp.int32), 0, self.spec.num_actions - 1)

        inner, g = self._step(state.inner, action, step_key)
        episode_step = state.episode_step + 1
        terminated = jnp.asarray(g.terminated, jnp.bool_)
        truncated = jnp.asarray(g.truncated, jnp.bool_)
        if self.spec.max_episode_steps is not None:
            truncated = truncated | (episode_step >= self.spec.max_episode_steps)
        truncated = truncated & ~terminated
        is_last = terminated | truncated
        legal = jnp.asarray(g.legal_actions, jnp.bool_) & ~is_last
        to_play = jnp.asarray(g.to_play, jnp.int32)
        stepped_ts = TimeStep(
            observation=self._observation(g.observation),
            reward=jnp.asarray(g.reward, jnp.float32).reshape(()),
            is_first=jnp.zeros((), jnp.bool_),
            is_last=is_last,
            is_terminal=terminated,
            legal_actions=legal,
            to_play=to_play,
        )
        stepped = EnvState(
            inner=inner, key=key, episode_step=episode_step, is_last=is_last, legal_actions=legal, to_play=to_play
        )
        stepped, stepped_ts = _strong((stepped, stepped_ts))
        restarted, restarted_ts = self._start(reset_key, key)
        return _select(state.is_last, (restarted, restarted_ts), (stepped, stepped_ts))

    # --- helpers -----------------------------------------------------------------
    def _observation(self, obs) -> Array:
        return jnp.asarray(obs).astype(jnp.float32).reshape(self.spec.observation_shape)

    def _start(self, init_key: Array, carry_key: Array) -> tuple[EnvState, TimeStep]:
        inner, g = self._init(init_key)
        legal = jnp.asarray(g.legal_actions, jnp.bool_)
        to_play = jnp.asarray(g.to_play, jnp.int32)
        ts = TimeStep(
            observation=self._observation(g.observation),
            reward=jnp.zeros((), jnp.float32),
            is_first=jnp.ones((), jnp.bool_),
            is_last=jnp.zeros((), jnp.bool_),
            is_terminal=jnp.zeros((), jnp.bool_),
            legal_actions=legal,
            to_play=to_play,
        )
        state = EnvState(
            inner=inner,
            key=carry_key,
            episode_step=jnp.zeros((), jnp.int32),
            is_last=jnp.zeros((), jnp.bool_),
            legal_actions=legal,
            to_play=to_play,
        )
        return _strong((state, ts))

    @functools.cached_property
    def jitted(self) -> "JittedEnv":
        """Compiled ``reset``/``step`` and their batched forms, built once per env instance."""
        return JittedEnv(
            reset=jax.jit(self.reset),
            step=jax.jit(self.step),
            reset_batch=jax.jit(functools.partial(reset_batch, self)),
            step_batch=jax.jit(functools.partial(step_batch, self)),
        )

    def close(self) -> None:
        """Nothing to release (a device environment is pure functions); here so every env can be closed alike."""

    def __getstate__(self):  # picklable (e.g. for Ray workers): compiled functions are rebuilt on use
        state = dict(self.__dict__)
        state.pop("jitted", None)
        return state

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.name!r})"


class JittedEnv(NamedTuple):
    """Jitted entry points of one env (compiled lazily, per input shape)."""

    reset: Any
    step: Any
    reset_batch: Any
    step_batch: Any


def reset_batch(env: DeviceEnv, keys: Array) -> tuple[EnvState, TimeStep]:
    """``vmap`` of ``env.reset``: ``keys [B]`` -> states and time steps with a leading ``[B]``. Pure."""
    return jax.vmap(env.reset)(keys)


def step_batch(env: DeviceEnv, states: EnvState, actions: Array) -> tuple[EnvState, TimeStep]:
    """``vmap`` of ``env.step``: ``actions [B]`` int environment indices. Pure."""
    return jax.vmap(env.step)(states, actions)


def check_actions(env: DeviceEnv, state: EnvState, action) -> np.ndarray:
    """Host-side validation of ``action`` against ``state``; returns it as an int32 numpy array.

    ``state`` may be unbatched (``action`` a scalar) or batched (``action [B]``).
    On a last step the action is ignored and not checked (any integer, e.g. -1
    for the dummy, is accepted). Raises :class:`IllegalActionError` for a
    non-integer action, a wrong shape, an out-of-range or an illegal action.
    """
    a = np.asarray(action)
    is_last = np.asarray(state.is_last)
    legal = np.asarray(state.legal_actions)
    name = env.spec.name
    if a.shape != is_last.shape:
        raise IllegalActionError(
            f"{name}: action has shape {a.shape}, expected {is_last.shape} (one action per environment)"
        )
    if not np.issubdtype(a.dtype, np.integer):
        raise IllegalActionError(f"{name}: action must be an integer environment index, got dtype {a.dtype}")
    n = env.spec.num_actions
    flat_a, flat_last, flat_legal = a.reshape(-1), is_last.reshape(-1), legal.reshape(-1, n)
    for i in range(flat_a.shape[0]):
        if flat_last[i]:
            continue
        where = f" (batch index {i})" if a.ndim else ""
        ai = int(flat_a[i])
        if not 0 <= ai < n:
            raise IllegalActionError(
                f"{name}: action {ai}{where} is out of range: environment actions are 0..{n - 1} "
                "(not augmented indices; use moozi.types.to_env_action)"
            )
        if not flat_legal[i, ai]:
            raise IllegalActionError(
                f"{name}: action {ai}{where} is illegal here; legal actions: {np.flatnonzero(flat_legal[i]).tolist()}"
            )
    return a.astype(np.int32)


def checked_step(env: DeviceEnv, state: EnvState, action) -> tuple[EnvState, TimeStep]:
    """Host-side (not jittable) ``step`` that raises :class:`IllegalActionError` on a bad action.

    For tests and user-facing play. Works on one state (scalar action) or a
    batch (``action [B]``); uses the env's cached jitted ``step``/``step_batch``.
    """
    a = check_actions(env, state, action)
    if a.ndim == 0:
        return env.jitted.step(state, a)
    return env.jitted.step_batch(state, a)
