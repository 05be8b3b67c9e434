"""The Actor interface every acting worker implements, and what they share.

An actor plays ``num_envs`` environments in lock-step with one jitted policy
step (:mod:`moozi.workers.policy`) and assembles finished episodes itself.
What crosses its boundary is numpy: finished :class:`~moozi.workers.episodes.Episode`
objects tagged with the parameter version they were played with, and a small
metrics dict. Two implementations: :class:`~moozi.workers.device_actor.DeviceActor`
(a JAX-native game; the whole segment is one ``lax.scan``) and
:class:`~moozi.workers.pool_actor.PoolActor` (any pool: Python games, a device
game behind ``DevicePool``, stored games in a ``ReplayEnvPool``).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from moozi.config import ActingConfig


class Actor(Protocol):
    """What the driver (and, later, a process backend) calls on an actor."""

    num_envs: int
    version: int

    def set_params(self, version: int, params) -> None:
        """Play with ``params`` (a numpy or JAX pytree) from now on."""

    def run(self) -> tuple[list, dict]:
        """Play one segment; return ``(finished episodes, metrics)``."""

    def new_episodes(self) -> None:
        """Abandon the games in progress and start new ones (before a test: it scores only its own games)."""

    def state_dict(self) -> dict:
        """Checkpointable data (numpy and PRNG keys only)."""

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output."""

    def close(self) -> None:
        """Release environments (worker processes, emulators)."""


def segment_metrics(samples, temperature: float | None) -> dict[str, float]:
    """Means of the search statistics over the acted (non-last) steps of a ``[T, B]`` segment."""
    acted = ~np.asarray(samples.is_last)
    out = {} if temperature is None else {"acting/temperature": float(temperature)}
    for key, field in (("acting/root_value", "root_value"), ("acting/prior_value", "prior_value"),
                       ("acting/policy_entropy", "policy_entropy"), ("acting/search_depth", "max_depth")):
        x = np.asarray(getattr(samples, field))
        out[key] = float(x[acted].mean()) if acted.any() else 0.0
    # Visit concentration: the share of the search policy on its favourite move (1: the search is sure).
    top = np.asarray(samples.root_policy).max(axis=-1)
    out["acting/visit_max_share"] = float(top[acted].mean()) if acted.any() else 0.0
    return out


def schedule_temperature(acting: ActingConfig | None, env_steps: int) -> float:
    """The training temperature after ``env_steps`` steps (0 without an acting config)."""
    return 0.0 if acting is None else acting.temperature_at(env_steps)
