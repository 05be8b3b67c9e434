"""Bridge for the original MinAtar games (``minatar`` package), host path (docs/architecture.md §2-§3).

Registered as the prefix ``"minatar:"``: ``make_env("minatar:breakout")`` and
likewise ``asterix``, ``freeway``, ``seaquest``, ``space_invaders``.
``minatar`` (GPL-3, the optional extra ``moozi[minatar]``) is imported when a
game is built, never when this module is imported. (The same games run on the
device path as ``gymnax:Breakout-MinAtar`` etc.; this bridge plays the
reference implementation.)

Mapping to the step contract (the pool adds auto-reset, the empty legal mask
on last steps, the truncation cap and legal-action checks):

* ``observation`` = ``env.state()``, ``(10, 10, C)`` bool as float32 (C = 4
  for breakout, 4 asterix, 7 freeway, 10 seaquest, 6 space_invaders).
* Actions: all 6 MinAtar actions (``n l u r d f``: no-op, left, up, right,
  down, fire) by default, as in the MinAtar paper; with
  ``minimal_action_set=True`` only the game's minimal set (e.g. breakout:
  no-op, left, right), environment index ``i`` playing
  ``env.minimal_action_set()[i]``. Every action is legal.
* Sticky actions (MinAtar's own, default probability 0.1 as in the paper):
  with probability ``sticky_action_prob`` the previous action is played
  instead of the chosen one. The previous action is reset to no-op at the
  start of every episode (MinAtar itself carries it over from the last
  episode; resetting it makes each episode depend only on its seed).
* ``reward`` = the reward ``env.act`` returns; ``terminated`` = its terminal
  flag. Freeway ends after 2500 steps by its own clock; MinAtar reports that
  as terminal and so does the bridge (the observation has no clock).
* Seeds: ``reset(seed)`` re-seeds MinAtar's ``numpy.random.RandomState``
  (``env.seed(seed)``, shared by the game and the sticky actions) before
  ``env.reset()``, so an episode is reproducible from its seed and actions.
* ``spec.max_episode_steps``: MinAtar has no step cap of its own (an agent
  that never misses plays breakout forever); default None, set
  ``max_episode_steps`` for one. ``gymnax:*-MinAtar`` default to 1000.
* ``render()``: an RGB picture ``(10, 10, 3)`` uint8, one colour per channel.
"""

from __future__ import annotations

import difflib
from typing import Any

import numpy as np

from moozi.config import ConfigError
from moozi.envs.contract import EnvSpec, UnknownEnvError
from moozi.envs.host import GameStep, HostEnv

PREFIX = "minatar:"

GAMES = ("asterix", "breakout", "freeway", "seaquest", "space_invaders")
"""MinAtar games registered under ``"minatar:"``."""

_PALETTE = np.array(
    [[0, 0, 0], [230, 159, 0], [86, 180, 233], [0, 158, 115], [240, 228, 66], [0, 114, 178],
     [213, 94, 0], [204, 121, 167], [255, 255, 255], [150, 150, 150], [120, 60, 20]],
    np.uint8,
)  # fmt: skip  # background, then one colour per channel (up to 10)


def _import_minatar():
    try:
        import minatar
    except ImportError as e:
        raise ImportError(f"the MinAtar bridge needs minatar: pip install 'moozi[minatar]' [{e}]") from e
    return minatar


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def check_game(game: str) -> str:
    """``game`` if MinAtar has it, else UnknownEnvError listing the games."""
    if game in GAMES:
        return game
    close = difflib.get_close_matches(str(game).lower().replace("-", "_").replace(" ", "_"), GAMES, n=1)
    hint = f" (did you mean {PREFIX}{close[0]}?)" if close else ""
    raise UnknownEnvError(
        f"unknown MinAtar game {game!r} in {PREFIX}{game}{hint}; available: {', '.join(PREFIX + g for g in GAMES)}"
    )


class MinAtarEnv(HostEnv):
    """A MinAtar game behind the moozi step contract (see the module doc).

    Args:
      game: one of :data:`GAMES`, e.g. ``"breakout"``.
      sticky_action_prob: probability in [0, 1] that the previous action is
        played instead of the chosen one (MinAtar paper: 0.1; 0 for a
        deterministic game given the seed).
      minimal_action_set: only the game's minimal action set (breakout 3,
        asterix 5, freeway 3, seaquest 6, space_invaders 4 actions) instead
        of all 6.
      difficulty_ramping: MinAtar's difficulty ramp (asterix, seaquest,
        space_invaders speed up over an episode); on by default as in MinAtar.
      max_episode_steps: the truncation cap, or None (default) for none.
    """

    def __init__(
        self,
        game: str,
        *,
        sticky_action_prob: float = 0.1,
        minimal_action_set: bool = False,
        difficulty_ramping: bool = True,
        max_episode_steps: int | None = None,
    ):
        game = check_game(game)
        name = PREFIX + game
        if not _is_number(sticky_action_prob) or not 0.0 <= float(sticky_action_prob) <= 1.0:
            raise ConfigError(
                f"{name}: sticky_action_prob = {sticky_action_prob!r} is invalid: allowed a number in [0, 1]"
            )
        for key, value in (("minimal_action_set", minimal_action_set), ("difficulty_ramping", difficulty_ramping)):
            if not isinstance(value, (bool, np.bool_)):
                raise ConfigError(f"{name}: {key} = {value!r} is invalid: allowed True or False")
        cap = max_episode_steps
        if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
            raise ConfigError(f"{name}: max_episode_steps = {cap!r} is invalid: allowed None or an integer >= 1")
        minatar = _import_minatar()
        self._env = minatar.Environment(
            game, sticky_action_prob=float(sticky_action_prob), difficulty_ramping=bool(difficulty_ramping)
        )
        self.game = game
        self.sticky_action_prob = float(sticky_action_prob)
        if minimal_action_set:
            self._actions = [int(a) for a in self._env.minimal_action_set()]
        else:
            self._actions = list(range(int(self._env.num_actions())))
        self._legal = np.ones((len(self._actions),), bool)
        self.spec = EnvSpec(
            name=name,
            observation_shape=tuple(int(d) for d in self._env.state_shape()),
            observation_dtype="uint8",  # binary planes
            num_actions=len(self._actions),
            num_players=1,
            max_episode_steps=cap,
            path="host",
        )

    @property
    def env(self):
        """The ``minatar.Environment``."""
        return self._env

    @property
    def action_set(self) -> tuple[int, ...]:
        """MinAtar's action (0..5, ``n l u r d f``) for each environment index."""
        return tuple(self._actions)

    def _observation(self) -> np.ndarray:
        return np.asarray(self._env.state(), np.float32)

    def reset(self, seed: int) -> GameStep:
        self._env.seed(int(seed))  # one RandomState for the game and the sticky actions
        self._env.last_action = 0  # MinAtar keeps the last episode's; start each episode from no-op
        self._env.reset()
        return GameStep(self._observation(), self._legal)

    def step(self, action: int) -> GameStep:
        reward, terminal = self._env.act(self._actions[action])
        return GameStep(self._observation(), self._legal, reward=float(reward), terminated=bool(terminal))

    def render(self) -> np.ndarray:
        state = np.asarray(self._env.state(), bool)
        channel = np.where(state.any(-1), state.shape[-1] - np.argmax(state[..., ::-1], -1), 0)  # last channel wins
        return _PALETTE[np.minimum(channel, len(_PALETTE) - 1)]
