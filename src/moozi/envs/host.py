"""The host-env interface: one Python environment, stepped outside jit (docs/architecture.md §2).

Host bridges (OpenSpiel, MinAtar, Gymnasium/ALE, the user's own games)
implement :class:`HostEnv`. It is deliberately small: a bridge only plays
*one episode at a time*; everything else in the step contract
(auto-reset, seeds per episode, the truncation cap, legal-action checks, the
empty legal mask on last steps, batching) is added once by
:class:`moozi.envs.pool.HostPool`, so every bridge behaves the same.

A bridge's :meth:`HostEnv.reset` and :meth:`HostEnv.step` return a
:class:`GameStep` of numpy values::

    class MyGame(HostEnv):
        spec = EnvSpec("mine:game", observation_shape=(1, 1, 4), num_actions=2, path="host")

        def reset(self, seed):            # start a new episode
            ...
            return GameStep(observation, legal_actions, to_play=0)

        def step(self, action):           # action: a legal environment index
            ...
            return GameStep(observation, legal_actions, reward=r, terminated=done)

``reward`` is what the player who just moved received; ``terminated`` ends the
episode by the game's rules; ``truncated`` ends it early by a cap the game
itself has (the pool also applies ``spec.max_episode_steps``).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np

from moozi.envs.contract import EnvSpec


@dataclass(frozen=True)
class GameStep:
    """One step of one host environment, as a bridge reports it.

    Attributes:
      observation: ``spec.observation_shape`` array-like (any numeric dtype;
        the pool converts it to float32). In two-player games, from the point
        of view of ``to_play`` (or any fixed view the model can learn from).
      legal_actions: ``[num_actions]`` bool legal environment actions at this
        step (ignored when the step ends the episode).
      reward: reward received on arriving at this step (0 after ``reset``); in
        two-player games for the player who just moved.
      terminated: the episode ended here by the game's rules.
      truncated: the episode ended here by a cap (time limit), not the rules.
      to_play: the player to move at this step (0 for single-player games).
    """

    observation: np.ndarray
    legal_actions: np.ndarray
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    to_play: int = 0


class HostEnv(abc.ABC):
    """One Python environment playing one episode at a time.

    Subclasses set :attr:`spec` (with ``path="host"``) and implement
    :meth:`reset` and :meth:`step`. :meth:`step` is only ever called with an
    in-range, legal action on a step that did not end the episode (the pool
    checks both), so a bridge never handles illegal input or auto-reset.
    """

    spec: EnvSpec

    @abc.abstractmethod
    def reset(self, seed: int) -> GameStep:
        """Start a new episode; ``seed`` (a non-negative int) makes it reproducible."""

    @abc.abstractmethod
    def step(self, action: int) -> GameStep:
        """Play environment action ``action`` in the current episode."""

    def close(self) -> None:
        """Release resources (windows, emulators). Optional."""

    def render(self) -> np.ndarray | str | None:
        """An RGB frame ``[H, W, 3]`` uint8 or a text picture of the current step, if the game has one."""
        return None
