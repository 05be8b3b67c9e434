"""MinAtar protocols: the rules a score is measured under, as one named choice and as a record every result states.

A MinAtar score means nothing without its protocol: which package plays the game (the original ``minatar``
package on the host path, or gymnax's JAX port on the device path), the sticky-action probability, the cap on
an episode's moves, the frame budget (MinAtar has no frame skip, so a frame is an env step) and the action set.
Two are named:

* ``thesis``: the MooZi thesis's (Wang 2022, §5.1-5.2; its code: ``gym.make("MinAtar/<Game>-v1",
  sticky_action_prob=0.0)`` under a 7200-move ``StepLimitWrapper``): the original package, no sticky actions,
  the minimal action set, episodes capped at 7200 moves, up to 10M frames. Freeway ends after 2500 moves by
  its own rules, under any cap above that.
* ``gymnax``: the one gymnax's published PPO figures use: its port, no sticky actions, the minimal action set,
  1000 moves (Freeway 2500), 10M frames.

gymnax's Freeway has no end of its own (its episode is its step cap), so on the port the thesis's Freeway is
capped at 2500, the moves the original package's Freeway lasts; there the 2500th move ends the episode as a
truncation, in the original package as a terminal step (the score is the same; the observation has no clock).

:func:`protocol_overrides` turns a name into the dotted overrides that make a preset follow it (``moozi train
--protocol thesis``); :func:`describe` reads the protocol a built game and a frame budget follow, for every
result (``moozi eval`` prints it); :func:`counterpart` names the same game under the same rules on the other
package (``moozi eval --package minatar``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from moozi.errors import ConfigError

GAMES = ("asterix", "breakout", "freeway", "space_invaders")
"""The thesis's four MinAtar games (Seaquest is in both packages, not in the thesis)."""

GYMNAX_IDS = {"asterix": "Asterix-MinAtar", "breakout": "Breakout-MinAtar", "freeway": "Freeway-MinAtar",
               "space_invaders": "SpaceInvaders-MinAtar"}
FREEWAY_MOVES = 2500
"""Freeway's own length in moves (``minatar.environments.freeway.time_limit``)."""


@dataclass(frozen=True)
class Protocol:
    """The rules a MinAtar score is measured under.

    game: one of :data:`GAMES`.
    package: ``"minatar"`` (the original package) or ``"gymnax"`` (gymnax's port).
    sticky: the probability that the previous action is played instead of the chosen one.
    max_episode_steps: the most moves an episode lasts (the cap, or Freeway's own 2500 when lower); None: no cap.
    max_env_frames: the frame budget of training (None: none stated).
    action_set: ``"minimal"`` (the game's own actions: breakout 3, asterix 5, freeway 3, space_invaders 4) or
      ``"full"`` (all six).
    """

    game: str
    package: str
    sticky: float
    max_episode_steps: int | None
    max_env_frames: int | None
    action_set: str

    def as_dict(self) -> dict:
        return asdict(self)


NAMED = ("thesis", "gymnax")
"""The protocols a user names (``--protocol``)."""


def _named_cap(name: str, game: str) -> int:
    if name == "thesis":
        return FREEWAY_MOVES if game == "freeway" else 7200
    return FREEWAY_MOVES if game == "freeway" else 1000


def named_protocol(name: str, game: str, package: str = "minatar") -> Protocol:
    """The named protocol ``name`` (:data:`NAMED`) for ``game`` on ``package`` (its figures are measured on
    ``package``: the thesis's on the original one; training may use the port)."""
    if name not in NAMED:
        raise ConfigError(f"--protocol {name!r} is invalid: allowed {', '.join(NAMED)}")
    return Protocol(game=game, package=package, sticky=0.0, max_episode_steps=_named_cap(name, game),
                    max_env_frames=10_000_000, action_set="minimal")


def game_of(env_name: str) -> tuple[str, str] | None:
    """``(package, game)`` of a MinAtar game name (``"gymnax:Breakout-MinAtar"`` -> ``("gymnax", "breakout")``,
    ``"minatar:breakout"`` -> ``("minatar", "breakout")``), or None for any other game."""
    prefix, _, rest = str(env_name).partition(":")
    if prefix == "minatar" and rest in GAMES:
        return "minatar", rest
    if prefix == "gymnax":
        for game, gid in GYMNAX_IDS.items():
            if rest == gid:
                return "gymnax", game
    return None


def _require_game(env_name: str, what: str) -> tuple[str, str]:
    found = game_of(env_name)
    if found is None:
        names = ", ".join(f"minatar:{g}" for g in GAMES) + ", " + ", ".join(f"gymnax:{g}" for g in GYMNAX_IDS.values())
        raise ConfigError(f"{what}: env.name = {env_name!r} is not one of the thesis's MinAtar games; allowed: {names}")
    return found


def protocol_overrides(name: str, env_name: str) -> dict[str, Any]:
    """The dotted overrides (``section.key`` -> value) that make a run of ``env_name`` follow protocol ``name``
    on the package ``env_name`` is on. The budget is ``schedule.max_env_steps``; the rest is the game's
    ``env.kwargs``. On the original package the cap is the thesis code's 7200 for every game (Freeway ends at
    2500 by itself); on gymnax's port Freeway's cap is its 2500 moves."""
    package, game = _require_game(env_name, f"--protocol {name}")
    p = named_protocol(name, game, package)
    out: dict[str, Any] = {"schedule.max_env_steps": p.max_env_frames}
    if package == "minatar":
        cap = 7200 if name == "thesis" else p.max_episode_steps
        out.update({"env.kwargs.sticky_action_prob": 0.0, "env.kwargs.minimal_action_set": True,
                    "env.kwargs.max_episode_steps": cap})
    else:
        out["env.kwargs.max_episode_steps"] = p.max_episode_steps
    return out


def merge_overrides(name: str, protocol: Mapping[str, Any], user: list[str]) -> list[str]:
    """``user``'s ``KEY=VALUE`` overrides after the protocol's; a user override of one of the protocol's keys to
    another value is a ConfigError naming both (a run is not the protocol it says it is)."""
    from moozi.config import apply_overrides

    for text in user:
        for key, value in _flat(apply_overrides({}, [text])).items():
            if key in protocol and value != protocol[key]:
                raise ConfigError(f"{text}: --protocol {name} sets {key}={_yaml(protocol[key])}; leave the key out "
                                  "or drop --protocol")
    return [f"{k}={_yaml(v)}" for k, v in protocol.items()] + list(user)


def _flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {f"{prefix}{k}": v})
    return out


def _yaml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def describe(env, max_env_frames: int | None) -> Protocol | None:
    """The protocol a built game (``env``: a bridge with a ``spec``) follows with ``max_env_frames`` of training,
    or None when it is not a MinAtar game of either package."""
    found = game_of(env.spec.name)
    if found is None:
        return None
    package, game = found
    cap = env.spec.max_episode_steps
    if game == "freeway":
        cap = FREEWAY_MOVES if cap is None else min(int(cap), FREEWAY_MOVES)
    if package == "minatar":
        sticky = float(env.sticky_action_prob)
        minimal = len(env.action_set) < 6
    else:  # gymnax's port: no sticky actions, the minimal action set (its default; the bridge sets no other)
        sticky, minimal = 0.0, True
    return Protocol(game=game, package=package, sticky=sticky,
                    max_episode_steps=None if cap is None else int(cap),
                    max_env_frames=None if max_env_frames is None else int(max_env_frames),
                    action_set="minimal" if minimal else "full")


def follows(p: Protocol | None) -> str | None:
    """The named protocols whose rules ``p`` keeps (package aside: training on the port counts; a smaller frame
    budget counts), ``" = "``-joined where they coincide (Freeway: ``"thesis = gymnax"``), or None."""
    if p is None:
        return None
    names = []
    for name in NAMED:
        rules = named_protocol(name, p.game, p.package)
        if (p.sticky, p.action_set, p.max_episode_steps) == (rules.sticky, rules.action_set, rules.max_episode_steps) \
                and (p.max_env_frames is None or p.max_env_frames <= rules.max_env_frames):
            names.append(name)
    return " = ".join(names) or None


def counterpart(env_config, package: str):
    """``env_config`` (an :class:`~moozi.config.EnvConfig`) with the same game under the same rules on
    ``package`` (``"minatar"`` or ``"gymnax"``): name and kwargs change, the number of environments stays.
    The game's rules are carried over: the cap, and on the original package no sticky actions and the minimal
    action set (the port's); a run with sticky actions cannot move to the port (it has none)."""
    import dataclasses

    if package not in ("minatar", "gymnax"):
        raise ConfigError(f"--package {package!r} is invalid: allowed minatar, gymnax")
    have, game = _require_game(env_config.name, f"--package {package}")
    kwargs = dict(env_config.kwargs or {})
    if have == package:
        return env_config
    if have == "gymnax" and kwargs.get("params"):
        raise ConfigError(f"--package {package}: {env_config.name} is played with changed game parameters "
                          f"({kwargs['params']}); the original package has no such parameters")
    if have == "minatar":
        if float(kwargs.get("sticky_action_prob", 0.1)) != 0.0:
            raise ConfigError(f"--package gymnax: {env_config.name} is played with sticky actions "
                              f"({kwargs.get('sticky_action_prob', 0.1)}); gymnax's port has none")
        if not kwargs.get("minimal_action_set", False):
            raise ConfigError(f"--package gymnax: {env_config.name} is played with all six actions; gymnax's "
                              "port has only the minimal action set")
        cap = kwargs.get("max_episode_steps")
        if game == "freeway":
            cap = FREEWAY_MOVES if cap is None else min(int(cap), FREEWAY_MOVES)
        new = {"max_episode_steps": cap}
        return dataclasses.replace(env_config, name=f"gymnax:{GYMNAX_IDS[game]}", kwargs=new)
    cap = kwargs.get("max_episode_steps", FREEWAY_MOVES if game == "freeway" else 1000)
    new = {"sticky_action_prob": 0.0, "minimal_action_set": True, "max_episode_steps": cap}
    return dataclasses.replace(env_config, name=f"minatar:{game}", kwargs=new)


def of_config(config) -> Protocol | None:
    """The protocol a run's config follows (its game built once, to read the bridge's own defaults), or None
    when the game is not one of the thesis's MinAtar games."""
    from moozi.envs.registry import make_env

    if game_of(config.env.name) is None:
        return None
    env = make_env(config.env.name, **dict(config.env.kwargs or {}))
    try:
        return describe(env, config.schedule.max_env_steps)
    finally:
        close = getattr(env, "close", None)
        if close is not None:
            close()


def summary_line(p: Protocol) -> str:
    """One line for the console: ``protocol thesis: original MinAtar, sticky 0, 7200 moves, ...``."""
    name = follows(p)
    where = "the original MinAtar package" if p.package == "minatar" else "gymnax's port"
    cap = "no cap" if p.max_episode_steps is None else f"at most {p.max_episode_steps:,} moves"
    frames = "no frame budget" if p.max_env_frames is None else f"{p.max_env_frames:,} frames"
    return (f"protocol {name or 'of its own (neither thesis nor gymnax)'}: {p.game} on {where}, sticky "
            f"{p.sticky:g}, {cap}, {p.action_set} action set, {frames}")
