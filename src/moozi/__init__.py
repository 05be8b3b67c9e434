"""moozi: a game-playing system that plans with a learned model (MuZero family).

The curated public API: ``from moozi import Trainer, Config, make_env, ...``.
Names resolve lazily (importing ``moozi`` imports neither JAX nor any game),
and ``tests/test_public_api.py`` pins this list: changing it is an API change.
"""

from __future__ import annotations

import importlib

__version__ = "0.2.0"

_EXPORTS = {
    # configuration
    "Config": "moozi.config",
    "EnvConfig": "moozi.config",
    "ModelConfig": "moozi.config",
    "PlannerConfig": "moozi.config",
    "TargetConfig": "moozi.config",
    "LearnerConfig": "moozi.config",
    "ReplayConfig": "moozi.config",
    "ActingConfig": "moozi.config",
    "ScheduleConfig": "moozi.config",
    "TestingConfig": "moozi.config",
    "OutputConfig": "moozi.config",
    "config_from_dict": "moozi.config",
    "apply_overrides": "moozi.config",
    "load_preset": "moozi.presets",
    "ConfigError": "moozi.errors",
    "ReplayError": "moozi.errors",
    # games
    "make_env": "moozi.envs",
    "register": "moozi.envs",
    "list_envs": "moozi.envs",
    "EnvSpec": "moozi.envs",
    "TimeStep": "moozi.envs",
    "HostEnv": "moozi.envs.host",
    "make_pool": "moozi.envs.pool",
    "ReplayEnvPool": "moozi.envs.replay_env",
    # data
    "Trajectory": "moozi.types",
    "Episode": "moozi.workers",
    # components
    "build_model": "moozi.model.networks",
    "plan": "moozi.planner",
    "Learner": "moozi.learner",
    "ReplayBuffer": "moozi.replay",
    "Actor": "moozi.workers",
    "make_actor": "moozi.workers",
    "play_games": "moozi.workers",
    "Trainer": "moozi.driver",
    "evaluate": "moozi.eval.evaluate",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'moozi' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
