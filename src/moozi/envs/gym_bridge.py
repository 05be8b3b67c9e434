"""Bridges for Gymnasium environments and Atari (ALE) games, host path (docs/architecture.md §2-§3).

Two prefixes:

* ``"gym:"`` any Gymnasium environment with a ``Discrete`` action space, by
  its Gymnasium id: ``make_env("gym:CartPole-v1")``, ``"gym:Acrobot-v1"``,
  ``"gym:MountainCar-v0"``; third-party environments with Gymnasium's
  ``"module:Id"`` syntax (``"gym:my_pkg:MyEnv-v0"`` imports ``my_pkg`` first).
  ``params`` are keyword arguments for ``gymnasium.make`` (the environment's
  constructor), e.g. ``params={"sutton_barto_reward": True}``.
* ``"ale:"`` Atari 2600 games through ale-py with the standard preprocessing
  (Machado et al. 2018; Gymnasium's ``AtariPreprocessing``):
  ``make_env("ale:Pong")``, ``"ale:Breakout"``, any game ale-py has
  (``ALE/<game>-v5``, ROMs ship with ale-py 0.12).

``gymnasium`` (extra ``moozi[gym]``) and ``ale_py`` (GPL-2, extra
``moozi[atari]``) are imported when an environment is built, never when this
module is imported.

Mapping to the step contract (the pool adds auto-reset, the empty legal mask
on last steps, the truncation cap and legal-action checks):

* ``observation`` (``gym:``): a ``Box`` observation of rank 1 ``(D,)`` becomes
  ``(1, 1, D)``, rank 2 ``(H, W)`` ``(H, W, 1)``, rank 3 ``(H, W, C)`` stays
  (rank 0 is ``(1, 1, 1)``); ``MultiBinary`` likewise; a ``Discrete(n)``
  observation is one-hot ``(1, 1, n)``. Values are passed through unscaled
  (as float32). Other observation spaces (``Dict``, ``Tuple``,
  ``MultiDiscrete``, ...) are refused with a ConfigError.
* Actions: environment index ``i`` is Gymnasium action ``start + i`` of
  ``Discrete(n, start)``. Non-``Discrete`` action spaces are refused (MuZero
  plans over a finite action set). Every action is legal, unless the
  environment reports an ``info["action_mask"]`` (e.g. ``Taxi-v3``), which is
  then the legal mask.
* ``reward``, ``terminated``, ``truncated``: Gymnasium's. The environment
  keeps its own ``TimeLimit``, whose truncation is reported as truncation
  (``is_last`` and not ``is_terminal``); ``spec.max_episode_steps`` is that
  limit (the pool's cap agrees with it). ``max_episode_steps``: the default is
  the Gymnasium registration's (CartPole-v1 500, Acrobot-v1 500,
  MountainCar-v0 200), an integer replaces it, None removes it.
* Seeds: ``reset(seed)`` is ``env.reset(seed=seed)``.
* ``render()``: ``env.render()`` when built with ``render_mode="rgb_array"``.

Atari (``ale:``):

* ``ALE/<game>-v5`` with ``frameskip=1`` and sticky actions
  (``repeat_action_probability``, default 0.25, applied by the emulator on
  every frame), the minimal action set unless ``full_action_space``.
* Preprocessing, the same as ``gymnasium.wrappers.AtariPreprocessing``
  (Gymnasium 1.3) with ``terminal_on_life_loss=False``: on reset 1..``noop_max``
  no-op frames (count drawn from the seeded environment RNG); each agent step
  repeats the action for ``frame_skip`` frames, sums their rewards, and
  max-pools the last two frames; the frame is resized to
  ``screen_size x screen_size`` with area interpolation. The resize is done
  here in numpy with OpenCV's ``INTER_AREA`` weights and summation order, so
  OpenCV (which Gymnasium's wrapper needs) is not needed; the observations,
  rewards and flags equal the wrapper's (checked on Pong, Breakout,
  MsPacman, SpaceInvaders, Seaquest, grayscale and RGB, several sizes).
* ``observation`` ``(screen_size, screen_size, 1)`` grayscale (or ``(.., 3)``
  RGB with ``grayscale=False``), uint8 pixels scaled by 1/255 to float32 in
  [0, 1].
* ``terminated`` = game over (all lives lost; losing a life does not end the
  episode). ``spec.max_episode_steps`` = ``max_episode_steps`` agent steps,
  default 27000 (= 108k frames at ``frame_skip`` 4, the usual evaluation
  cap; the up to ``noop_max`` no-op frames at reset are not counted); the
  pool enforces it and reports it as truncation (ALE's own frame cap is
  turned off). None for no cap.
* Seeds: ``reset(seed)`` re-seeds the emulator (``env.reset(seed=seed)``, which
  reloads the ROM, ~0.1 s), so the no-ops, the sticky actions and the game's
  randomness are reproducible.
* ``render()``: the emulator's RGB screen ``(210, 160, 3)`` uint8.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import math
from typing import Any, Mapping

import numpy as np

from moozi.config import ConfigError
from moozi.envs.contract import EnvSpec, UnknownEnvError
from moozi.envs.host import GameStep, HostEnv

GYM_PREFIX = "gym:"
ALE_PREFIX = "ale:"

GYM_GAMES = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0")
"""Gymnasium ids listed by ``list_envs`` under ``"gym:"`` (any discrete-action id works)."""

ALE_GAMES = ("Pong", "Breakout", "SpaceInvaders", "Seaquest", "MsPacman", "Qbert")
"""Atari games listed by ``list_envs`` under ``"ale:"`` (any ale-py game works)."""

ALE_DEFAULT_MAX_EPISODE_STEPS = 27000
"""Default ``ale:`` cap in agent steps: 108k frames at frame_skip 4."""

_DEFAULT = object()
_RESERVED = ("max_episode_steps", "render_mode")  # bridge parameters, not params entries


def _import_gymnasium(extra: str = "gym"):
    try:
        import gymnasium
    except ImportError as e:
        raise ImportError(f"this bridge needs gymnasium: pip install 'moozi[{extra}]' [{e}]") from e
    return gymnasium


def _import_ale():
    gymnasium = _import_gymnasium("atari")
    try:
        import ale_py
    except ImportError as e:
        raise ImportError(f"the Atari bridge needs ale-py: pip install 'moozi[atari]' [{e}]") from e
    gymnasium.register_envs(ale_py)
    return gymnasium, ale_py


def _check_cap(name: str, cap: Any) -> None:
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
        raise ConfigError(f"{name}: max_episode_steps = {cap!r} is invalid: allowed None or an integer >= 1")


def _check_int(name: str, key: str, value: Any, lo: int, hi: int | None = None) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)) or value < lo or (
        hi is not None and value > hi
    ):
        allowed = f"an integer in [{lo}, {hi}]" if hi is not None else f"an integer >= {lo}"
        raise ConfigError(f"{name}: {key} = {value!r} is invalid: allowed {allowed}")
    return int(value)


def _check_bool(name: str, key: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ConfigError(f"{name}: {key} = {value!r} is invalid: allowed True or False")
    return bool(value)


def observation_converter(space, name: str):
    """``(observation_shape, fn)`` for a Gymnasium observation space: ``fn(obs)`` is the
    ``(H, W, C)`` float32 observation (see the module doc); ConfigError for unsupported spaces."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        n, start = int(space.n), int(space.start)

        def one_hot(obs):
            x = np.zeros((1, 1, n), np.float32)
            x[0, 0, int(obs) - start] = 1.0
            return x

        return (1, 1, n), one_hot
    if isinstance(space, (spaces.Box, spaces.MultiBinary)) and space.shape is not None:
        raw = tuple(int(d) for d in space.shape)
        if len(raw) == 0:
            shape = (1, 1, 1)
        elif len(raw) == 1:
            shape = (1, 1, raw[0])
        elif len(raw) == 2:
            shape = (raw[0], raw[1], 1)
        elif len(raw) == 3:
            shape = raw
        else:
            raise ConfigError(f"{name}: observation space {space} has rank {len(raw)}; supported: rank 0 to 3")
        return shape, lambda obs: np.asarray(obs, np.float32).reshape(shape)
    raise ConfigError(
        f"{name}: observation space {space} is not supported: allowed Box or MultiBinary (rank 0 to 3) or "
        "Discrete; flatten it with a Gymnasium wrapper and register the wrapped environment as your own game "
        "(moozi.envs.register with GymnasiumEnv)"
    )


class GymnasiumEnv(HostEnv):
    """A built Gymnasium environment with a ``Discrete`` action space behind the moozi step contract.

    ``GymEnv`` (``gym:``) builds one from an id; use this class directly to bridge
    an environment you built and wrapped yourself (``register`` a factory that
    returns ``GymnasiumEnv(env, "mine:game")``).

    Args:
      env: a ``gymnasium.Env`` (closed by :meth:`close`).
      name: the registered name, ``"prefix:game"``.
      max_episode_steps: ``spec.max_episode_steps``; the default is the
        environment's ``env.spec.max_episode_steps`` (its ``TimeLimit``).
    """

    def __init__(self, env, name: str, *, max_episode_steps: Any = _DEFAULT):
        from gymnasium import spaces

        self._env = env
        try:
            act = env.action_space
            if not isinstance(act, spaces.Discrete):
                raise ConfigError(
                    f"{name}: action space {act} is not Discrete; moozi (MuZero) plans over a finite set of "
                    "actions, so only gymnasium.spaces.Discrete action spaces are supported (discretize the "
                    "actions with a Gymnasium wrapper and register the wrapped environment as your own game)"
                )
            self._start = int(act.start)
            shape, self._convert = observation_converter(env.observation_space, name)
            if max_episode_steps is _DEFAULT:
                gym_spec = getattr(env, "spec", None)
                max_episode_steps = getattr(gym_spec, "max_episode_steps", None)
            _check_cap(name, max_episode_steps)
            self.spec = EnvSpec(
                name=name,
                observation_shape=shape,
                num_actions=int(act.n),
                num_players=1,
                max_episode_steps=max_episode_steps,
                path="host",
            )
        except BaseException:
            env.close()
            raise
        self._all_legal = np.ones((self.spec.num_actions,), bool)

    @property
    def env(self):
        """The ``gymnasium.Env``."""
        return self._env

    def _legal(self, info) -> np.ndarray:
        mask = info.get("action_mask") if isinstance(info, Mapping) else None
        if mask is None:
            return self._all_legal
        mask = np.asarray(mask).astype(bool).reshape(-1)
        return mask if mask.shape == self._all_legal.shape else self._all_legal

    def reset(self, seed: int) -> GameStep:
        obs, info = self._env.reset(seed=int(seed))
        return GameStep(self._convert(obs), self._legal(info))

    def step(self, action: int) -> GameStep:
        obs, reward, terminated, truncated, info = self._env.step(self._start + int(action))
        return GameStep(
            self._convert(obs),
            self._legal(info),
            reward=float(reward),
            terminated=bool(terminated),
            truncated=bool(truncated),
        )

    def render(self):
        if getattr(self._env, "render_mode", None) != "rgb_array":
            return None
        return self._env.render()

    def close(self) -> None:
        self._env.close()


def _unknown_gym(gymnasium, name: str, env_id: str, err: Exception) -> UnknownEnvError:
    return UnknownEnvError(
        f"unknown Gymnasium environment {env_id!r} in {name!r}: {err}; for example: "
        f"{', '.join(GYM_PREFIX + g for g in GYM_GAMES)}; all registered ids: "
        "python -c 'import gymnasium; gymnasium.pprint_registry()'"
        + (f"; for Atari use {ALE_PREFIX}<game>, e.g. {ALE_PREFIX}Pong" if env_id.startswith("ALE/") else "")
    )


class GymEnv(GymnasiumEnv):
    """A Gymnasium environment by id (``gym:<id>``), see the module doc.

    Args:
      env_id: a Gymnasium id with a ``Discrete`` action space, e.g. ``"CartPole-v1"``.
      params: keyword arguments for ``gymnasium.make`` (the environment's constructor).
      max_episode_steps: the ``TimeLimit``; default the registration's, an
        integer replaces it, None removes it.
      render_mode: Gymnasium's ``render_mode`` (``"rgb_array"`` makes :meth:`render` return frames).
    """

    def __init__(
        self,
        env_id: str,
        *,
        params: Mapping[str, Any] | None = None,
        max_episode_steps: Any = _DEFAULT,
        render_mode: str | None = None,
    ):
        gymnasium = _import_gymnasium()
        name = GYM_PREFIX + str(env_id)
        if params is not None and not isinstance(params, Mapping):
            raise ConfigError(
                f"{name}: params = {params!r} is invalid: allowed None or a dict of gymnasium.make arguments"
            )
        params = dict(params or {})
        for key in _RESERVED:
            if key in params:
                raise ConfigError(f"{name}: params.{key}: give {key} as a bridge parameter, not in params")
        if max_episode_steps is not _DEFAULT:
            _check_cap(name, max_episode_steps)
        if render_mode not in (None, "rgb_array", "human", "ansi"):
            raise ConfigError(
                f"{name}: render_mode = {render_mode!r} is invalid: allowed None, 'rgb_array', 'human' or 'ansi'"
            )
        module, _, short_id = str(env_id).rpartition(":")
        if module:  # "module:Id": importing the module registers the environment
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as e:
                msg = f"{name}: cannot import {module!r}, which should register {short_id!r}: {e}"
                raise UnknownEnvError(msg) from None
        try:
            gym_spec = gymnasium.spec(short_id)
        except gymnasium.error.Error as e:
            raise _unknown_gym(gymnasium, name, str(env_id), e) from None
        make_kwargs = dict(params)
        if render_mode is not None:
            make_kwargs["render_mode"] = render_mode
        if max_episode_steps is None:
            target = dataclasses.replace(gym_spec, max_episode_steps=None)  # no TimeLimit
        else:
            target = gym_spec
            if max_episode_steps is not _DEFAULT:
                make_kwargs["max_episode_steps"] = max_episode_steps
        try:
            env = gymnasium.make(target, **make_kwargs)
        except gymnasium.error.DependencyNotInstalled as e:
            raise ImportError(f"{name}: {e}") from None
        except TypeError as e:
            raise ConfigError(f"{name}: gymnasium.make rejected params {params}: {e}") from None
        except (ValueError, AssertionError, gymnasium.error.Error) as e:
            raise ConfigError(f"{name}: gymnasium.make({env_id!r}, **{make_kwargs}) failed: {e}") from None
        self.env_id = env_id
        super().__init__(env, name, max_episode_steps=_DEFAULT)


def make_gym(
    game: str,
    *,
    params: Mapping[str, Any] | None = None,
    max_episode_steps: Any = _DEFAULT,
    render_mode: str | None = None,
) -> GymEnv:
    """Factory for the ``"gym:"`` prefix: ``make_gym(env_id, **kwargs)`` (see GymEnv)."""
    return GymEnv(game, params=params, max_episode_steps=max_episode_steps, render_mode=render_mode)


# ============================================================================= Atari


def area_weights(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """Area interpolation (OpenCV ``INTER_AREA``, downscaling ``n_in -> n_out``) along one axis:
    output ``i`` is ``sum_k weights[i, k] * input[index[i, k]]``; ``index`` int ``[n_out, K]``,
    ``weights`` float32 ``[n_out, K]`` (the overlap of each input cell with the output cell)."""
    scale = n_in / n_out
    rows = []
    for i in range(n_out):
        lo, hi = i * scale, (i + 1) * scale
        js = range(int(math.floor(lo)), min(int(math.ceil(hi)), n_in))
        rows.append([(j, (min(hi, j + 1) - max(lo, j)) / scale) for j in js])
    k = max(len(r) for r in rows)
    index = np.zeros((n_out, k), np.intp)
    weights = np.zeros((n_out, k), np.float32)
    for i, r in enumerate(rows):
        for m, (j, w) in enumerate(r):
            index[i, m], weights[i, m] = j, w
    return index, weights


def area_resize(
    image: np.ndarray, rows: tuple[np.ndarray, np.ndarray], cols: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """``image`` ``[H, W]`` or ``[H, W, C]`` uint8 resized with the :func:`area_weights` ``rows``
    (``H -> h``) and ``cols`` (``W -> w``): uint8 ``[h, w, C]``, rounded like OpenCV.

    A gather and a weighted sum per axis (no BLAS: a small matrix product that
    BLAS spreads over threads is slow on a busy machine)."""
    x = image.astype(np.float32)
    if x.ndim == 2:
        x = x[..., None]
    (ri, rw), (ci, cw) = rows, cols
    y = np.einsum("hjkc,jk->hjc", x[:, ci], cw)  # along rows first, as OpenCV: [H, w, K, C] -> [H, w, C]
    z = np.einsum("ikjc,ik->ijc", y[ri], rw)  # [h, K, w, C] -> [h, w, C]
    return np.clip(np.rint(z), 0, 255).astype(np.uint8)


def _unknown_ale(gymnasium, name: str, game: str) -> UnknownEnvError:
    ids = [k for k in gymnasium.registry if k.startswith("ALE/") and k.endswith("-v5")]
    games = sorted(k[len("ALE/") : -len("-v5")] for k in ids)
    lower = {g.lower(): g for g in games}
    close = [lower[c] for c in difflib.get_close_matches(str(game).lower(), list(lower), n=3)]
    hint = f" (did you mean {', '.join(ALE_PREFIX + c for c in close)}?)" if close else ""
    return UnknownEnvError(
        f"unknown Atari game {game!r} in {name!r}{hint}; the {len(games)} ale-py games: {', '.join(games)}"
    )


class AleEnv(HostEnv):
    """An Atari 2600 game (ale-py) with the standard preprocessing, see the module doc.

    Args:
      game: the ale-py game in Gymnasium's spelling, e.g. ``"Pong"``, ``"Breakout"``, ``"MsPacman"``.
      sticky_action_prob: ALE ``repeat_action_probability`` in [0, 1] (per frame; default 0.25).
      frame_skip: frames per agent step (>= 1; the last two are max-pooled when >= 2).
      screen_size: side of the square observation, 1..160 (downscaling only).
      grayscale: one grayscale channel (True) or RGB (False).
      noop_max: at most this many no-op frames at reset (0 turns them off).
      full_action_space: all 18 Atari actions instead of the game's minimal set.
      max_episode_steps: the truncation cap in agent steps (default 27000); None for no cap.
    """

    def __init__(
        self,
        game: str,
        *,
        sticky_action_prob: float = 0.25,
        frame_skip: int = 4,
        screen_size: int = 84,
        grayscale: bool = True,
        noop_max: int = 30,
        full_action_space: bool = False,
        max_episode_steps: int | None = ALE_DEFAULT_MAX_EPISODE_STEPS,
    ):
        name = ALE_PREFIX + str(game)
        p = sticky_action_prob
        number = isinstance(p, (int, float, np.integer, np.floating)) and not isinstance(p, (bool, np.bool_))
        if not number or not 0 <= p <= 1:
            raise ConfigError(f"{name}: sticky_action_prob = {p!r} is invalid: allowed a number in [0, 1]")
        self.frame_skip = _check_int(name, "frame_skip", frame_skip, 1)
        self.screen_size = _check_int(name, "screen_size", screen_size, 1, 160)
        self.grayscale = _check_bool(name, "grayscale", grayscale)
        self.noop_max = _check_int(name, "noop_max", noop_max, 0)
        full_action_space = _check_bool(name, "full_action_space", full_action_space)
        _check_cap(name, max_episode_steps)
        gymnasium, _ = _import_ale()
        env_id = f"ALE/{game}-v5"
        if env_id not in gymnasium.registry:
            raise _unknown_ale(gymnasium, name, game)
        env = gymnasium.make(
            env_id,
            frameskip=1,
            repeat_action_probability=float(p),
            full_action_space=full_action_space,
            max_num_frames_per_episode=0,  # no emulator cap: the pool applies max_episode_steps
            obs_type="grayscale" if self.grayscale else "rgb",
        )
        self._env = env
        self._ale = env.unwrapped.ale
        self.game = game
        if self.noop_max > 0 and env.unwrapped.get_action_meanings()[0] != "NOOP":  # pragma: no cover
            env.close()
            raise ConfigError(f"{name}: action 0 is not NOOP; set noop_max=0")
        h, w = self._ale.getScreenDims()
        shape = (h, w) if self.grayscale else (h, w, 3)
        self._buffer = [np.zeros(shape, np.uint8), np.zeros(shape, np.uint8)]
        self._rows = area_weights(h, self.screen_size)
        self._cols = area_weights(w, self.screen_size)
        self.spec = EnvSpec(
            name=name,
            observation_shape=(self.screen_size, self.screen_size, 1 if self.grayscale else 3),
            num_actions=int(env.action_space.n),
            num_players=1,
            max_episode_steps=max_episode_steps,
            path="host",
            observation_dtype="uint8",  # pixels / 255
            observation_scale=1.0 / 255.0,
        )
        self._legal = np.ones((self.spec.num_actions,), bool)

    @property
    def env(self):
        """The ``gymnasium.Env`` of ``ALE/<game>-v5`` (one frame per step)."""
        return self._env

    @property
    def action_meanings(self) -> list[str]:
        return list(self._env.unwrapped.get_action_meanings())

    def _grab(self, i: int) -> None:
        if self.grayscale:
            self._ale.getScreenGrayscale(self._buffer[i])
        else:
            self._ale.getScreenRGB(self._buffer[i])

    def _observation(self) -> np.ndarray:
        if self.frame_skip > 1:  # max-pool the last two frames (in place, as AtariPreprocessing)
            np.maximum(self._buffer[0], self._buffer[1], out=self._buffer[0])
        pixels = area_resize(self._buffer[0], self._rows, self._cols)
        return pixels.astype(np.float32) / 255.0  # as AtariPreprocessing(scale_obs=True)

    def reset(self, seed: int) -> GameStep:
        seed = int(seed)
        self._env.reset(seed=seed)
        noops = int(self._env.unwrapped.np_random.integers(1, self.noop_max + 1)) if self.noop_max > 0 else 0
        for _ in range(noops):
            _, _, terminated, truncated, _ = self._env.step(0)
            if terminated or truncated:
                self._env.reset(seed=seed)
        self._grab(0)
        self._buffer[1].fill(0)
        return GameStep(self._observation(), self._legal)

    def step(self, action: int) -> GameStep:
        total, terminated, truncated = 0.0, False, False
        fs = self.frame_skip
        for t in range(fs):
            _, reward, terminated, truncated, _ = self._env.step(int(action))
            total += float(reward)
            if terminated or truncated:
                break
            if t == fs - 2:
                self._grab(1)
            elif t == fs - 1:
                self._grab(0)
        return GameStep(
            self._observation(), self._legal, reward=total, terminated=bool(terminated), truncated=bool(truncated)
        )

    def render(self) -> np.ndarray:
        return self._ale.getScreenRGB()

    def close(self) -> None:
        self._env.close()
