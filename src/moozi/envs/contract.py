"""The step contract every environment bridge yields (docs/architecture.md §3).

One :class:`TimeStep` per environment step, whatever the game and whatever
the path (device or host):

* ``observation`` float32 ``(H, W, C)``; vector games use ``(1, 1, D)``.
* ``reward`` received on *arriving* at this step (0 on the first step); in
  two-player games from the point of view of the player who just moved.
* ``is_first`` / ``is_last`` / ``is_terminal`` (``is_terminal`` is
  ``is_last and not truncated``: a truncated episode ends with ``is_last``
  true and ``is_terminal`` false, and its value bootstraps).
* ``legal_actions`` bool mask over the environment's actions; non-empty on
  every non-last step and all False on a last step (nothing can be played
  there: the next step starts a new episode and ignores the action).
* ``to_play`` the player to move at this step (0 for single-player games).

Environments auto-reset: the step after a last step is the first step of the
next episode and ignores the action. Actions are *environment* indices
``0 .. num_actions - 1`` (not augmented; see ``moozi.types.to_env_action``).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from moozi.config import ConfigError

Array = jax.Array


class UnknownEnvError(ValueError):
    """``make_env`` got a name no bridge is registered for."""


class IllegalActionError(ValueError):
    """A host-side checked step got an action that is out of range or not legal."""


class GameContractError(ValueError):
    """A game's ``reset`` or ``step`` returned something the step contract does not allow.

    The message names the game, its class and method, and what was wrong; the
    CLI prints it as one line (a user's game, not moozi, needs the fix).
    """


@struct.dataclass
class TimeStep:
    """What an environment yields at one step (unbatched shapes; batched adds a leading ``[B]``).

    Attributes:
      observation: ``[H, W, C]`` float32 observation at this step (from the
        point of view of ``to_play`` in two-player games).
      reward: ``[]`` float32 reward received on arriving at this step; 0 on the
        first step; in two-player games for the player who just moved.
      is_first: ``[]`` bool, the first step of an episode.
      is_last: ``[]`` bool, the last step of an episode (terminated or truncated).
      is_terminal: ``[]`` bool, ``is_last`` and the episode terminated (not truncated).
      legal_actions: ``[A_env]`` bool legal environment actions; all False on a last step.
      to_play: ``[]`` int32 player to move at this step (0 for single-player games).
    """

    observation: Array
    reward: Array
    is_first: Array
    is_last: Array
    is_terminal: Array
    legal_actions: Array
    to_play: Array

    @property
    def is_truncated(self) -> Array:
        """``[]`` bool: the episode ended here by truncation (a step cap), not termination."""
        return jnp.logical_and(self.is_last, jnp.logical_not(self.is_terminal))


def _spec_fail(name: str, value, allowed: str) -> None:
    raise ConfigError(f"env_spec.{name} = {value!r} is invalid: allowed {allowed}")


@dataclass(frozen=True)
class EnvSpec:
    """Static description of an environment (hashable; never traced).

    Attributes:
      name: registered name, ``"prefix:game"`` (e.g. ``"gymnax:Breakout-MinAtar"``).
      observation_shape: ``(H, W, C)`` of ``TimeStep.observation``.
      num_actions: number of *environment* actions ``A_env`` (the augmented
        space used by the model has ``A_env + 1``).
      num_players: 1, or 2 for two-player zero-sum games with alternating turns.
      max_episode_steps: the truncation cap (an episode has at most this many
        actions; the step reached by the last one is ``is_last`` and, unless the
        game also terminated there, not ``is_terminal``), or None for no cap.
      path: ``"device"`` (pure JAX, jittable, vmappable) or ``"host"`` (Python
        environments stepped outside jit).
      observation_dtype: how frames are stored in replay and sent between
        processes: ``"uint8"`` (the observation divided by
        ``observation_scale`` is an integer in 0..255: binary planes, pixels)
        or ``"float32"``. Observations themselves are always float32.
      observation_scale: observation = stored value x scale (``1/255`` for
        pixels scaled to [0, 1]; 1 otherwise).
      symmetries: board symmetries of the game, ``((cells, actions), ...)``
        permutation pairs with the identity first, or ``()`` for none (see
        :mod:`moozi.envs.symmetry`); ``learner.augment_symmetries`` trains
        on stored positions seen through them.
      player_planes: ``(player 0's piece plane, player 1's piece plane,
        to-play plane)`` (channels of one frame) for two-player games that
        show both players the same board and whose rules treat both colours
        alike, or ``()``; ``model.mover_relative`` relabels the board so the
        mover is always player 0 (:mod:`moozi.model.perspective`).
      chance_code: ``""``, or the name of a code function that says which
        chance outcome followed a transition (:mod:`moozi.envs.chance`;
        ``learner.chance_codes = game`` trains Stochastic MuZero's chance
        prior on it instead of the encoder's codes).
    """

    name: str
    observation_shape: tuple[int, ...]
    num_actions: int
    num_players: int = 1
    max_episode_steps: int | None = None
    path: str = "device"
    observation_dtype: str = "float32"
    observation_scale: float = 1.0
    symmetries: tuple = ()
    player_planes: tuple = ()
    chance_code: str = ""

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            _spec_fail("name", self.name, "a non-empty string")
        shape = self.observation_shape
        if (
            not isinstance(shape, tuple)
            or len(shape) != 3
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape)
        ):
            _spec_fail("observation_shape", shape, "a tuple (H, W, C) of integers >= 1")
        if not isinstance(self.num_actions, int) or isinstance(self.num_actions, bool) or self.num_actions < 1:
            _spec_fail("num_actions", self.num_actions, "an integer >= 1")
        if self.num_players not in (1, 2) or isinstance(self.num_players, bool):
            _spec_fail("num_players", self.num_players, "1 or 2")
        m = self.max_episode_steps
        if m is not None and (not isinstance(m, int) or isinstance(m, bool) or m < 1):
            _spec_fail("max_episode_steps", m, "None or an integer >= 1")
        if self.path not in ("device", "host"):
            _spec_fail("path", self.path, "'device' or 'host'")
        if self.observation_dtype not in ("uint8", "float32"):
            _spec_fail("observation_dtype", self.observation_dtype, "'uint8' or 'float32'")
        s = self.observation_scale
        if not isinstance(s, (int, float)) or isinstance(s, bool) or not s > 0:
            _spec_fail("observation_scale", s, "a number > 0")
        from moozi.envs.symmetry import check_symmetries

        why = check_symmetries(self.symmetries, shape, self.num_actions)
        if why is not None:
            _spec_fail("symmetries", "(...)" if isinstance(self.symmetries, tuple) else self.symmetries, why)
        planes = self.player_planes
        if planes != () and not (
            self.num_players == 2 and isinstance(planes, tuple) and len(planes) == 3 and len(set(planes)) == 3
            and all(isinstance(p, int) and not isinstance(p, bool) and 0 <= p < shape[-1] for p in planes)
        ):
            _spec_fail("player_planes", planes, f"() or, for a two-player game, 3 distinct channels in [0, {shape[-1]})")
        from moozi.envs.chance import CODES

        if self.chance_code != "" and self.chance_code not in CODES:
            _spec_fail("chance_code", self.chance_code, "'' or one of " + ", ".join(map(repr, sorted(CODES))))

    @property
    def two_player(self) -> bool:
        return self.num_players == 2


def encode_frames(spec: EnvSpec, observations):
    """Observations (float32, any leading axes) -> frames in ``spec.observation_dtype``.

    Works on numpy and JAX arrays alike (inside ``jit`` too). uint8 frames are
    ``round(observation / observation_scale)``; use :func:`check_lossless`
    where a game's declaration is not trusted.
    """
    if spec.observation_dtype == "float32":
        return observations.astype("float32")
    xp = jnp if isinstance(observations, jax.Array) else np
    return xp.clip(xp.rint(observations / spec.observation_scale), 0, 255).astype("uint8")


def decode_frames(spec_or_scale, frames):
    """Stored frames -> float32 observations (``frames x observation_scale``); numpy or JAX."""
    scale = spec_or_scale.observation_scale if isinstance(spec_or_scale, EnvSpec) else float(spec_or_scale)
    frames = frames.astype("float32")
    return frames if scale == 1.0 else frames * scale


def check_lossless(spec: EnvSpec, observations, frames) -> None:
    """Raise ValueError naming the game when ``frames`` do not decode back to ``observations``."""
    back = np.asarray(decode_frames(spec, np.asarray(frames)))
    if not np.allclose(back, np.asarray(observations), rtol=0, atol=1e-6 * max(1.0, spec.observation_scale)):
        raise ValueError(
            f"{spec.name}: the spec declares observation_dtype uint8 with scale {spec.observation_scale}, but an "
            "observation is not an integer 0..255 times that scale; declare observation_dtype 'float32'"
        )
