"""Replay: a numpy ring buffer of whole episodes (:mod:`.buffer`) and its samplers (:mod:`.samplers`)."""

from moozi.replay.buffer import ReplayBuffer, validate_trajectory
from moozi.replay.samplers import make_sampler

__all__ = ["ReplayBuffer", "validate_trajectory", "make_sampler"]
