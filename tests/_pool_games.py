"""Tiny host games for the pool tests, at module top level so worker processes can unpickle them."""

from __future__ import annotations

import numpy as np

from moozi.envs.contract import EnvSpec
from moozi.envs.host import GameStep, HostEnv


class WorkerBoom(RuntimeError):
    """Raised inside a game to test that worker errors reach the parent."""


class Counter(HostEnv):
    """A one-player counting game.

    Observation ``[seed % 1000, steps taken, last action]`` in shape ``(1, 1, 3)``;
    actions 0 and 1 are legal, action 2 never is. An episode lasts ``length``
    actions (drawn from the reset seed in 3..7 when ``length`` is None); each
    action ``a`` pays ``a + 1``.

    Args:
      length: fixed episode length (None: from the seed).
      cap: ``spec.max_episode_steps``.
      obs_size: size of the observation the game really returns (3 matches the spec).
      fail_at: raise :class:`WorkerBoom` when stepped this many times in an episode.
      truncate_at: report ``truncated`` itself after this many actions (the game's own cap).
    """

    def __init__(self, length=None, cap=None, obs_size=3, fail_at=None, truncate_at=None):
        self.spec = EnvSpec("pooltest:counter", (1, 1, 3), 3, max_episode_steps=cap, path="host")
        self.length, self.obs_size, self.fail_at, self.truncate_at = length, obs_size, fail_at, truncate_at
        self.seeds: list[int] = []
        self.steps_called = 0
        self.closed = False

    def _obs(self, action):
        obs = np.array([self.seed % 1000, self.t, action], np.float64)
        return np.resize(obs, (self.obs_size,))

    def reset(self, seed):
        self.seeds.append(seed)
        self.seed, self.t = seed, 0
        self.n = self.length if self.length is not None else int(np.random.default_rng(seed).integers(3, 8))
        return GameStep(self._obs(-1), np.array([True, True, False]))

    def step(self, action):
        self.steps_called += 1
        assert 0 <= action <= 1, "the pool only passes legal actions"
        self.t += 1
        if self.fail_at is not None and self.t == self.fail_at:
            raise WorkerBoom(f"boom at step {self.t}")
        return GameStep(self._obs(action), np.array([True, True, False]), reward=float(action + 1),
                        terminated=self.t >= self.n,
                        truncated=self.truncate_at is not None and self.t >= self.truncate_at)

    def render(self):
        return f"counter seed={self.seed} t={self.t}"

    def close(self):
        self.closed = True


def make_failing_counter():
    """A factory that fails while building the game."""
    raise WorkerBoom("cannot build this game")


class Silent(HostEnv):
    """A game where learning cannot happen: 5 moves of 2 legal actions, never a reward."""

    def __init__(self, cap=None):
        self.spec = EnvSpec("edges:silent", (1, 1, 2), 2, max_episode_steps=cap, path="host")

    def reset(self, seed):
        self.t = 0
        return GameStep(np.zeros((1, 1, 2), np.float32), np.array([True, True]))

    def step(self, action):
        self.t += 1
        return GameStep(np.array([[[self.t, action]]], np.float32), np.array([True, True]), terminated=self.t >= 5)


class WrongShape(Silent):
    """Breaks the contract: ``reset`` returns an observation of another shape than its spec declares."""

    def __init__(self):
        super().__init__()
        self.spec = EnvSpec("edges:wrong-shape", (1, 1, 2), 2, path="host")

    def reset(self, seed):
        self.t = 0
        return GameStep(np.zeros((4,), np.float32), np.array([True, True]))


class Endless(Silent):
    """Episodes that never end (and no step cap): nothing ever reaches replay."""

    def __init__(self):
        super().__init__()
        self.spec = EnvSpec("edges:endless", (1, 1, 2), 2, path="host")

    def step(self, action):
        self.t += 1
        return GameStep(np.zeros((1, 1, 2), np.float32), np.array([True, True]))


class Loud(Silent):
    """Rewards far outside a [-1, 1] support: 10 on the last of 5 moves."""

    def __init__(self):
        super().__init__()
        self.spec = EnvSpec("edges:loud", (1, 1, 2), 2, path="host")

    def step(self, action):
        g = super().step(action)
        return GameStep(g.observation, g.legal_actions, reward=10.0 if g.terminated else 0.0, terminated=g.terminated)
