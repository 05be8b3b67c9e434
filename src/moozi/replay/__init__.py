"""Replay: a numpy ring buffer of whole episodes (:mod:`.buffer`) and its samplers (:mod:`.samplers`)."""

from moozi.replay.buffer import ReplayBuffer
from moozi.replay.samplers import make_sampler
from moozi.replay.validation import validate_trajectory

__all__ = ["ReplayBuffer", "validate_trajectory", "make_sampler"]
