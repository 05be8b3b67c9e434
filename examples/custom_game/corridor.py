"""Corridor: a second example game, with a delayed reward and episodes of varying length.

The agent stands in a corridor of ``length`` cells; the goal is at one of its
two ends (drawn from the episode's seed), the agent starts on another random
cell. Each step it moves left or right. Reaching the goal ends the episode with
reward +1; every other step gives 0. So the only reward comes at the end, and
an episode lasts as long as the agent takes: 1 move from the cell next to the
goal, ``length - 1`` from the far end, more if it wanders. A step cap
(``max_episode_steps``, default ``3 * length``) ends a wandering episode as
truncated.

What this game teaches (docs/custom-game.md, "What decides whether a game
learns"): because episodes differ in length, the discount must be below 1.
With ``targets.discount: 1.0`` every path that reaches the goal is worth the
same +1, and the agent has no reason to walk straight there; with 0.9 a
state's value is 0.9 ** (moves to the goal), and the shortest path is the only
optimal one. Values then lie in [0, 1], which an identity value transform with
support [-1, 1] represents exactly.

Train it from this folder::

    moozi train --preset corridor.yaml --minutes 3
"""

from __future__ import annotations

import numpy as np

import moozi.envs
from moozi.envs import EnvSpec
from moozi.envs.host import GameStep, HostEnv

NAME = "corridor:v0"
LEFT, RIGHT = 0, 1
AGENT, GOAL = 0, 1  # observation planes


class CorridorEnv(HostEnv):
    """A corridor of ``length`` cells; reach the goal at one end.

    Args:
      length: number of cells (>= 2).
      max_episode_steps: the step cap (default ``3 * length``).

    Observation: ``(1, length, 2)`` planes, the agent (plane 0) and the goal
    (plane 1), one 1 each. Actions: 0 left, 1 right; walking into a wall is
    illegal (the legal mask says so).
    """

    def __init__(self, length: int = 7, max_episode_steps: int | None = None):
        if length < 2:
            raise ValueError(f"{NAME}: length = {length} is invalid: allowed an integer >= 2")
        self.length = int(length)
        cap = 3 * self.length if max_episode_steps is None else int(max_episode_steps)
        self.spec = EnvSpec(name=NAME, observation_shape=(1, self.length, 2), num_actions=2, num_players=1,
                            max_episode_steps=cap, path="host", observation_dtype="uint8")

    def reset(self, seed: int) -> GameStep:
        rng = np.random.default_rng(seed)
        self.goal = 0 if rng.random() < 0.5 else self.length - 1
        self.position = int(rng.choice([c for c in range(self.length) if c != self.goal]))
        return GameStep(self._observation(), self._legal_actions())

    def step(self, action: int) -> GameStep:
        self.position += 1 if action == RIGHT else -1
        reached = self.position == self.goal
        # reward: received on arriving at this step; terminated: the episode ended by the rules
        return GameStep(self._observation(), self._legal_actions(), reward=1.0 if reached else 0.0,
                        terminated=reached)

    def shortest(self) -> int:
        """Moves from here to the goal (what an optimal agent takes)."""
        return abs(self.goal - self.position)

    def _observation(self) -> np.ndarray:
        obs = np.zeros((1, self.length, 2), np.uint8)
        obs[0, self.position, AGENT] = 1
        obs[0, self.goal, GOAL] = 1
        return obs

    def _legal_actions(self) -> np.ndarray:
        return np.array([self.position > 0, self.position < self.length - 1])

    def render(self) -> str:
        cells = ["G" if c == self.goal else "." for c in range(self.length)]
        cells[self.position] = "A"
        return "".join(cells)


moozi.envs.register(NAME, CorridorEnv, path="host", overwrite=True)
