"""The game and model a config asks for (no state)."""

from __future__ import annotations

import numpy as np

from moozi.config import Config
from moozi.envs import make_env
from moozi.envs.pool import import_modules
from moozi.model.history import stacked_channels
from moozi.model.networks import build_model


def build_parts(config: Config):
    """``(env, model)`` for a config: the environment (its spec decides the acting path) and the network."""
    import_modules(config.env.modules)
    env = make_env(config.env.name, **config.env.kwargs)
    spec = env.spec
    num_actions = spec.num_actions + 1
    h, w, c = spec.observation_shape
    obs_shape = (h, w, stacked_channels(c, num_actions, config.targets.history_length))
    return env, build_model(config.model, obs_shape, num_actions)


def stream_seed(seed: int, stream: int) -> int:
    """An independent integer seed for numpy stream ``stream`` of a run seeded ``seed``."""
    return int(np.random.SeedSequence([seed, stream]).generate_state(1, np.uint32)[0])
