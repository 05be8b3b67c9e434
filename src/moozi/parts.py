"""The game and model a config asks for (no state)."""

from __future__ import annotations

import dataclasses

import numpy as np

from moozi.config import Config, ConfigError
from moozi.envs import EnvSpec, UnknownEnvError, make_env
from moozi.envs.pool import import_modules, module_origins
from moozi.model.history import stacked_channels
from moozi.model.networks import build_model


def build_parts(config: Config):
    """``(env, model)`` for a config: the environment (its spec decides the acting path) and the network."""
    import_modules(config.env.modules)
    try:
        env = make_env(config.env.name, **config.env.kwargs)
    except UnknownEnvError as err:
        raise UnknownEnvError(_unknown_hint(config, err)) from None
    return env, model_for(config, env.spec)


def model_for(config: Config, spec: EnvSpec):
    """The network a config asks for on a game whose spec is known: no game is built (the learner's and
    reanalyze's part, given the spec the driver read once)."""
    view = _mover_view(config, spec)
    num_actions = spec.num_actions + 1
    h, w, c = spec.observation_shape
    obs_shape = (h, w, stacked_channels(c, num_actions, config.targets.history_length))
    return build_model(config.model, obs_shape, num_actions, view)


def spec_data(spec: EnvSpec) -> dict:
    """A game's spec as plain data (tuples and numbers), to cross a process boundary; :func:`spec_from_data` reads it."""
    return dataclasses.asdict(spec)


def spec_from_data(data: dict) -> EnvSpec:
    """The :class:`EnvSpec` of :func:`spec_data`'s plain data (checked again on the way in)."""
    return EnvSpec(**data)


def _mover_view(config: Config, spec):
    """The plane layout ``model.mover_relative`` needs; refused for a game that declares none."""
    if not config.model.mover_relative:
        return None
    if not spec.player_planes:
        raise ConfigError(f"model.mover_relative = true needs a two-player game that declares its piece planes; "
                          f"{spec.name} declares none (EnvSpec.player_planes; moozi knows them for OpenSpiel "
                          "tic-tac-toe and connect four; pgx boards are mover-relative already). Allowed for it: "
                          "false")
    from moozi.model.perspective import MoverView

    return MoverView(spec.observation_shape[-1], config.targets.history_length, spec.player_planes)


def _unknown_hint(config: Config, err: UnknownEnvError) -> str:
    """The unknown-name error with what to do when the game is the user's own."""
    import os

    name, modules = config.env.name, config.env.modules
    if not modules:
        return (f"{err}. If {name!r} is your own game, list the module that registers it in env.modules "
                f"(e.g. env.modules=[my_game]; it is imported from the working directory {os.getcwd()})")
    return (f"{err}. env.modules imported {module_origins(modules)} (working directory {os.getcwd()}), but "
            f"none registered {name!r}: check the name given to moozi.envs.register, and that no other file "
            "or folder of the same name is imported instead")


def stream_seed(seed: int, stream: int) -> int:
    """An independent integer seed for numpy stream ``stream`` of a run seeded ``seed``."""
    return int(np.random.SeedSequence([seed, stream]).generate_state(1, np.uint32)[0])
