"""Catch: a complete single-player game for moozi, written as a host environment.

A ball falls down a grid (5 columns wide, 6 rows high) one row per step,
starting in a random column of the top row. The paddle sits on the bottom row
and moves left, stays, or moves right each step. When the ball reaches the
bottom row the episode ends: reward +1 if the paddle is under it, -1 if not.
Every episode is exactly ``rows - 1`` = 5 actions long.

This file is the worked example of docs/custom-game.md. To train it::

    cd examples/custom_game
    moozi train --preset catch.yaml --minutes 3

The preset lists this module under ``env.modules``; moozi imports it before it
builds the game (also in environment worker processes), and importing it runs
the ``register`` call at the bottom, which makes the name ``catch:v0`` known.

A game only has to play *one episode at a time*: ``reset(seed)`` starts one and
``step(action)`` plays one move; both return a ``GameStep``. moozi's pool adds
the rest of the step contract for you: auto-reset after the last step, a fresh
reproducible seed for every episode, the ``max_episode_steps`` cap, float32
observations, batching, and a clear error for an out-of-range or illegal action
(so ``step`` never sees one).
"""

from __future__ import annotations

import numpy as np

import moozi.envs
from moozi.envs import EnvSpec
from moozi.envs.host import GameStep, HostEnv

NAME = "catch:v0"  # registered names look like "prefix:game"

LEFT, STAY, RIGHT = 0, 1, 2  # environment actions are 0 .. num_actions - 1
BALL, PADDLE = 0, 1  # observation planes


class CatchEnv(HostEnv):
    """Catch on a ``rows`` x ``columns`` grid.

    Args:
      rows: grid height (the ball falls ``rows - 1`` times per episode).
      columns: grid width.

    Arguments given in the config's ``env.kwargs`` are passed here, e.g.
    ``env.kwargs.columns=7`` on the command line.

    Observation: ``(rows, columns, 2)`` float32 planes: the ball (plane 0) and the
    paddle (plane 1), each a single 1 in a grid of zeros.
    Actions: 0 left, 1 stay, 2 right. Moving into a wall is illegal (the legal
    mask says so), which shows how a game reports its legal moves.
    """

    def __init__(self, rows: int = 6, columns: int = 5):
        if rows < 2 or columns < 1:
            raise ValueError(f"{NAME}: rows = {rows}, columns = {columns} is invalid: allowed rows >= 2, columns >= 1")
        self.rows, self.columns = int(rows), int(columns)
        # The spec tells moozi the shapes it must build the model for.
        self.spec = EnvSpec(
            name=NAME,
            observation_shape=(self.rows, self.columns, 2),  # (H, W, C); vector games use (1, 1, D)
            num_actions=3,
            num_players=1,  # 2 for two-player zero-sum games (see docs/custom-game.md)
            max_episode_steps=None,  # no cap needed: every episode ends after rows - 1 steps
            path="host",  # a Python game, stepped outside jit
        )
        self.ball_row = self.ball_column = self.paddle = 0

    # --- the two methods a game must implement -------------------------------------------

    def reset(self, seed: int) -> GameStep:
        """Start an episode. All randomness comes from ``seed``, so a seed replays an episode."""
        rng = np.random.default_rng(seed)
        self.ball_row = 0
        self.ball_column = int(rng.integers(self.columns))
        self.paddle = self.columns // 2
        return GameStep(self._observation(), self._legal_actions(), to_play=0)

    def step(self, action: int) -> GameStep:
        """Play one move: ``action`` is always an in-range, legal action here (the pool checks)."""
        self.paddle += action - 1  # LEFT = -1, STAY = 0, RIGHT = +1
        self.ball_row += 1
        terminated = self.ball_row == self.rows - 1  # the ball reached the paddle's row
        reward = 0.0
        if terminated:
            reward = 1.0 if self.paddle == self.ball_column else -1.0
        # reward: what the player who just moved received on arriving here.
        # legal_actions is ignored on a step that ends the episode (moozi sends an empty mask).
        return GameStep(self._observation(), self._legal_actions(), reward=reward, terminated=terminated)

    # --- optional --------------------------------------------------------------------------

    def render(self) -> str:
        """A text picture of the current step: ``o`` ball, ``=`` paddle, ``@`` both."""
        grid = [["."] * self.columns for _ in range(self.rows)]
        grid[self.rows - 1][self.paddle] = "="
        grid[self.ball_row][self.ball_column] = "@" if grid[self.ball_row][self.ball_column] == "=" else "o"
        return "\n".join("".join(row) for row in grid)

    # --- helpers -----------------------------------------------------------------------------

    def _observation(self) -> np.ndarray:
        obs = np.zeros((self.rows, self.columns, 2), np.float32)
        obs[self.ball_row, self.ball_column, BALL] = 1.0
        obs[self.rows - 1, self.paddle, PADDLE] = 1.0
        return obs

    def _legal_actions(self) -> np.ndarray:
        """``[num_actions]`` bool: the paddle cannot move through a wall."""
        return np.array([self.paddle > 0, True, self.paddle < self.columns - 1])


# Register on import. ``CatchEnv(**env.kwargs)`` builds one copy of the game; moozi builds
# ``env.num_envs`` copies. overwrite=True makes re-importing this module harmless.
moozi.envs.register(NAME, CatchEnv, path="host", overwrite=True)
