"""Bridge for gymnax environments (single-player, discrete actions), device path.

``gymnax`` is imported when a bridge is built, never when this module is
imported (its MinAtar games are GPL-3; gymnax itself is Apache-2.0).

The bridge uses gymnax's ``reset_env`` / ``step_env`` (not the auto-resetting
``step``), so the last observation of an episode is emitted with ``is_last``
before the moozi auto-reset. gymnax 1.0 reports natural termination from
``step_env`` and truncation separately (``state.time >=
params.max_steps_in_episode``); here the cap is the bridge's
``max_episode_steps`` (default: gymnax's ``max_steps_in_episode``, e.g. 500 for
CartPole-v1, 1000 for most MinAtar games, 2500 for Freeway), counted by the
moozi env state, so a capped episode ends ``is_last`` and not ``is_terminal``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import jax
import jax.numpy as jnp

from moozi.config import ConfigError
from moozi.envs.contract import EnvSpec
from moozi.envs.device import DeviceEnv, GameStep

GAMES = (
    "Breakout-MinAtar",
    "SpaceInvaders-MinAtar",
    "Freeway-MinAtar",
    "Asterix-MinAtar",
    "CartPole-v1",
)
"""gymnax games registered as ``gymnax:<game>`` (discrete actions, checked by the conformance suite)."""

_DEFAULT = object()
_NO_CAP = 2**31 - 1


def _import_gymnax():
    try:
        import gymnax
    except ImportError as e:  # pragma: no cover - depends on the installed extras
        raise ImportError(
            "the gymnax bridge needs gymnax: pip install 'moozi[gymnax]' "
            f"(gymnax 1.0.1 also imports 'six' without declaring it) [{e}]"
        ) from e
    return gymnax


class GymnaxEnv(DeviceEnv):
    """A gymnax environment behind the moozi step contract.

    Args:
      game: gymnax id, e.g. ``"Breakout-MinAtar"`` or ``"CartPole-v1"``.
      max_episode_steps: truncation cap; default gymnax's ``max_steps_in_episode``
        for the game; None for no cap.
      params: overrides for fields of the game's gymnax ``EnvParams`` (e.g.
        ``{"gravity": 9.8}``); the step cap is set with ``max_episode_steps``.

    Observations: MinAtar ``(10, 10, C)``; vector games ``(D,)`` become ``(1, 1, D)``.
    Single-player: ``to_play`` is 0 and every action is legal (on non-last steps).
    """

    def __init__(self, game: str, *, max_episode_steps: Any = _DEFAULT, params: Mapping[str, Any] | None = None):
        gymnax = _import_gymnax()
        name = f"gymnax:{game}"
        try:
            env, default_params = gymnax.make(game)
        except ValueError as e:
            raise ConfigError(f"{name}: unknown gymnax game {game!r}") from e
        overrides = dict(params or {})
        fields = [f.name for f in dataclasses.fields(default_params)]
        allowed = [f for f in fields if f != "max_steps_in_episode"]
        for k in overrides:
            if k not in allowed:
                hint = " (set the cap with max_episode_steps)" if k == "max_steps_in_episode" else ""
                raise ConfigError(
                    f"{name}: params.{k} is not a parameter of this game{hint}; allowed: {', '.join(allowed)}"
                )
        if max_episode_steps is _DEFAULT:
            cap = int(default_params.max_steps_in_episode)
        else:
            cap = max_episode_steps
            if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
                raise ConfigError(f"{name}: max_episode_steps = {cap!r} is invalid: allowed None or an integer >= 1")
        # The cap is enforced by DeviceEnv (episode_step); gymnax's own limit is only
        # kept equal so gymnax-side helpers agree.
        self._params = default_params.replace(**overrides, max_steps_in_episode=_NO_CAP if cap is None else cap)
        self._env = env
        self.game = game
        num_actions = int(env.num_actions)
        obs = jax.eval_shape(env.reset_env, jax.random.PRNGKey(0), self._params)[0]
        shape = tuple(int(d) for d in obs.shape)
        if len(shape) == 1:
            shape = (1, 1) + shape
        if len(shape) != 3:
            raise ConfigError(f"{name}: observation shape {tuple(obs.shape)} is neither (D,) nor (H, W, C)")
        self._ones = jnp.ones((num_actions,), jnp.bool_)
        self.spec = EnvSpec(
            name=name,
            observation_shape=shape,
            num_actions=num_actions,
            num_players=1,
            max_episode_steps=cap,
            # MinAtar boards are binary planes: stored as uint8 (4x smaller than float32).
            observation_dtype="uint8" if obs.dtype in (jnp.bool_, jnp.uint8) or "MinAtar" in game else "float32",
        )

    def _init(self, key):
        obs, inner = self._env.reset_env(key, self._params)
        zero = jnp.zeros((), jnp.float32)
        false = jnp.zeros((), jnp.bool_)
        return inner, GameStep(obs, zero, false, false, self._ones, jnp.zeros((), jnp.int32))

    def _step(self, inner, action, key):
        obs, inner, reward, terminated, _info = self._env.step_env(key, inner, action, self._params)
        false = jnp.zeros((), jnp.bool_)
        return inner, GameStep(obs, reward, terminated, false, self._ones, jnp.zeros((), jnp.int32))


def make_gymnax(game: str):
    """Factory for one registered gymnax game: ``make_gymnax(game)(**kwargs)``."""

    def factory(*, max_episode_steps: Any = _DEFAULT, params: Mapping[str, Any] | None = None) -> GymnaxEnv:
        return GymnaxEnv(game, max_episode_steps=max_episode_steps, params=params)

    factory.__doc__ = f"gymnax:{game} (see GymnaxEnv)."
    return factory
