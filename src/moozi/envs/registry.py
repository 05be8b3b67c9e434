"""Environment registry: ``make_env("prefix:game", **kwargs)`` for every bridge.

Names are ``"prefix:game"`` (``"gymnax:Breakout-MinAtar"``, ``"pgx:go_9x9"``).
A bridge registers either

* one name: ``register("gymnax:CartPole-v1", factory)``, ``factory(**kwargs)``; or
* a whole prefix: ``register("openspiel:", factory, games=(...))``,
  ``factory(game, **kwargs)`` for any ``"openspiel:<game>"`` (``games``, optional,
  is what ``list_envs`` shows; the factory itself decides what it accepts and
  raises ``ValueError`` for a game it does not know).

Exact names win over prefixes. Each entry records its ``path`` (``"device"``
for pure-JAX bridges, ``"host"`` for Python environments) so callers can ask
for one kind with ``list_envs(path=...)``. The built-in bridges are
registered on first use (nothing is imported at import time; gymnax, pgx
and pyspiel are imported only when one of their games is built). The host
bridge for OpenSpiel is the prefix ``"openspiel:"`` (any OpenSpiel game string,
e.g. ``"openspiel:go(board_size=9)"``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from moozi.config import ConfigError
from moozi.envs.contract import UnknownEnvError

PATHS = ("device", "host")


@dataclass(frozen=True)
class _Entry:
    factory: Callable[..., Any]
    path: str
    games: tuple[str, ...] = ()


_NAMES: dict[str, _Entry] = {}
_PREFIXES: dict[str, _Entry] = {}
_builtins_loaded = False


def _ensure_builtins() -> None:
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    from moozi.envs import gymnax_bridge, openspiel_bridge, pgx_bridge

    for game in gymnax_bridge.GAMES:
        _add(f"gymnax:{game}", gymnax_bridge.make_gymnax(game), "device", None, overwrite=False)
    for game in pgx_bridge.GAMES:
        _add(f"pgx:{game}", pgx_bridge.make_pgx(game), "device", None, overwrite=False)
    # Any OpenSpiel game string; pyspiel is imported only when one is built.
    _add(openspiel_bridge.PREFIX, openspiel_bridge.make_openspiel, "host", openspiel_bridge.GAMES, overwrite=False)
    # MinAtar, Gymnasium and Atari (host); minatar, gymnasium and ale_py are imported only when one is built.
    from moozi.envs import gym_bridge, minatar_bridge

    # Classes are their own factories: the registry checks parameters against their signatures.
    _add(minatar_bridge.PREFIX, minatar_bridge.MinAtarEnv, "host", minatar_bridge.GAMES, overwrite=False)
    _add(gym_bridge.GYM_PREFIX, gym_bridge.make_gym, "host", gym_bridge.GYM_GAMES, overwrite=False)
    _add(gym_bridge.ALE_PREFIX, gym_bridge.AleEnv, "host", gym_bridge.ALE_GAMES, overwrite=False)


def _split(name: str) -> tuple[str, str]:
    prefix, sep, game = name.partition(":")
    if not sep or not prefix:
        raise UnknownEnvError(
            f"environment name {name!r} must look like 'prefix:game'; available: {', '.join(list_envs())}"
        )
    return prefix, game


def _add(name, factory, path, games, overwrite) -> None:
    if not isinstance(name, str) or ":" not in name or name.startswith(":"):
        raise ConfigError(f"register: name = {name!r} is invalid: allowed 'prefix:game' or 'prefix:'")
    if not callable(factory):
        raise ConfigError(f"register: factory = {factory!r} is invalid: allowed a callable")
    if path not in PATHS:
        raise ConfigError(f"register: path = {path!r} is invalid: allowed one of {', '.join(map(repr, PATHS))}")
    table = _PREFIXES if name.endswith(":") else _NAMES
    if name in table and not overwrite:
        raise ConfigError(f"register: {name!r} is already registered (pass overwrite=True to replace it)")
    table[name] = _Entry(factory=factory, path=path, games=tuple(games or ()))


def register(
    name_or_prefix: str,
    factory: Callable[..., Any],
    *,
    path: str = "device",
    games: Sequence[str] | None = None,
    overwrite: bool = False,
) -> None:
    """Register a bridge.

    Args:
      name_or_prefix: ``"prefix:game"`` for one environment, or ``"prefix:"`` for
        every game under a prefix.
      factory: builds the environment: ``factory(**kwargs)`` for a name,
        ``factory(game, **kwargs)`` for a prefix.
      path: ``"device"`` (a :class:`moozi.envs.device.DeviceEnv`) or ``"host"``.
      games: for a prefix, the games to show in :func:`list_envs` (optional).
      overwrite: replace an existing registration instead of raising.
    """
    _ensure_builtins()
    _add(name_or_prefix, factory, path, games, overwrite)


def unregister(name_or_prefix: str) -> None:
    """Remove a registration (tests, user games). Unknown names are ignored."""
    _ensure_builtins()
    (_PREFIXES if name_or_prefix.endswith(":") else _NAMES).pop(name_or_prefix, None)


def list_envs(path: str | None = None) -> list[str]:
    """Registered names, sorted; prefix registrations show their listed games
    (or ``"prefix:<game>"`` when they list none). ``path``: only ``"device"`` or ``"host"`` ones."""
    _ensure_builtins()
    if path is not None and path not in PATHS:
        raise ConfigError(f"list_envs: path = {path!r} is invalid: allowed None, 'device' or 'host'")
    out = {n for n, e in _NAMES.items() if path in (None, e.path)}
    for p, e in _PREFIXES.items():
        if path not in (None, e.path):
            continue
        if e.games:
            out.update(f"{p}{g}" for g in e.games)
        else:
            out.add(f"{p}<game>")
    return sorted(out)


def _check_kwargs(name: str, factory: Callable[..., Any], kwargs: dict[str, Any], skip_first: bool) -> None:
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):  # builtins without a signature: let the factory decide
        return
    params = list(sig.parameters.values())
    if skip_first and params:
        params = params[1:]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return  # the factory validates its own extra parameters
    allowed = [p.name for p in params if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for k in kwargs:
        if k not in allowed:
            raise ConfigError(
                f"{name}: unknown parameter {k!r}; allowed: {', '.join(allowed) if allowed else '(none)'}"
            )


def make_env(name: str, **kwargs):
    """Build the environment registered as ``name`` (``"prefix:game"``) with bridge parameters ``kwargs``.

    Raises:
      UnknownEnvError (a ValueError): no bridge for ``name``; lists the available names.
      ConfigError (a ValueError): a parameter the bridge does not take, or a bad value; names it.
    """
    _ensure_builtins()
    if not isinstance(name, str):
        raise UnknownEnvError(f"environment name must be a string, got {name!r}; available: {', '.join(list_envs())}")
    entry = _NAMES.get(name)
    if entry is not None:
        _check_kwargs(name, entry.factory, kwargs, skip_first=False)
        return entry.factory(**kwargs)
    prefix, game = _split(name)
    entry = _PREFIXES.get(prefix + ":")
    if entry is None or not game:
        raise UnknownEnvError(f"unknown environment {name!r}; available: {', '.join(list_envs())}")
    _check_kwargs(name, entry.factory, kwargs, skip_first=True)
    return entry.factory(game, **kwargs)
