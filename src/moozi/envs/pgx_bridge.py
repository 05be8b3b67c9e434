"""Bridge for pgx games (board games and pgx's MinAtar), device path.

``pgx`` is imported when a bridge is built, never when this module is
imported (pgx is Apache-2.0; its ``pgx.minatar`` games are GPL-3).

Mapping to the step contract:

* ``reward`` = ``state.rewards[mover]`` where ``mover`` is the
  ``current_player`` *before* the step (the player who just moved).
* ``to_play`` = ``current_player`` (also on the first step). pgx draws which
  player id moves first from the reset key, so ``to_play`` on a first step is
  0 or 1; it alternates every ply (pass is an action in Go and Othello).
* ``legal_actions`` = ``legal_action_mask`` (all False on last steps; pgx itself
  sets it all True on terminal states).
* ``observation`` = pgx's observation (from ``current_player``'s point of view
  in two-player games) as float32.
* ``is_terminal`` = pgx ``terminated``; pgx's ``truncated`` (never set by pgx
  games themselves) and the optional ``max_episode_steps`` cap truncate.
  Some games end by their own rules after a step budget and count that as
  termination: Go after ``2 * size**2`` moves (scored), pgx's MinAtar Freeway
  after 2500 steps.
* Chance is drawn by pgx inside ``step`` from the step's key (2048's new tile,
  MinAtar's sticky actions): a model learns it from the observations
  (Stochastic MuZero's encoder, ``model.chance_outcomes``). 2048 can also name
  its new tile from the frames (``EnvSpec.chance_code = "pgx:2048"``, 32
  outcomes: :mod:`moozi.envs.chance`), for ``learner.chance_codes = game``.

Inside jit an illegal (in-range) action follows pgx's rule: the game
terminates and the mover gets -1 (the opponent +1).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import jax
import jax.numpy as jnp

from moozi.config import ConfigError
from moozi.envs.contract import EnvSpec
from moozi.envs.device import DeviceEnv, GameStep

# game -> (module, class, fixed constructor arguments)
_GAMES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "tic_tac_toe": ("pgx.tic_tac_toe", "TicTacToe", {}),
    "connect_four": ("pgx.connect_four", "ConnectFour", {}),
    "othello": ("pgx.othello", "Othello", {}),
    "go_9x9": ("pgx.go", "Go", {"size": 9}),
    "2048": ("pgx.play2048", "Play2048", {}),
    "minatar-asterix": ("pgx.minatar.asterix", "MinAtarAsterix", {}),
    "minatar-breakout": ("pgx.minatar.breakout", "MinAtarBreakout", {}),
    "minatar-freeway": ("pgx.minatar.freeway", "MinAtarFreeway", {}),
    "minatar-seaquest": ("pgx.minatar.seaquest", "MinAtarSeaquest", {}),
    "minatar-space_invaders": ("pgx.minatar.space_invaders", "MinAtarSpaceInvaders", {}),
}
GAMES = tuple(_GAMES)
"""pgx games registered as ``pgx:<game>`` (checked by the conformance suite)."""


def _import_class(module: str, cls: str):
    try:
        return getattr(importlib.import_module(module), cls)
    except ImportError as e:  # pragma: no cover - depends on the installed extras
        raise ImportError(f"the pgx bridge needs pgx: pip install 'moozi[pgx]' [{e}]") from e


def game_parameters(game: str) -> tuple[str, ...]:
    """Constructor parameters a pgx game accepts through ``make_env`` (imports pgx)."""
    module, cls, fixed = _GAMES[game]
    sig = inspect.signature(_import_class(module, cls).__init__)
    return tuple(p for p in sig.parameters if p != "self" and p not in fixed and sig.parameters[p].kind in (
        inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD))


class PgxEnv(DeviceEnv):
    """A pgx game behind the moozi step contract.

    Args:
      game: one of :data:`GAMES` (e.g. ``"tic_tac_toe"``, ``"go_9x9"``, ``"minatar-breakout"``).
      max_episode_steps: optional truncation cap (None: play until pgx terminates).
      **game_kwargs: the pgx game's own constructor arguments, e.g. ``komi`` for
        Go or ``sticky_action_prob`` for MinAtar (pgx default 0.1).
    """

    def __init__(self, game: str, *, max_episode_steps: int | None = None, **game_kwargs):
        name = f"pgx:{game}"
        if game not in _GAMES:
            raise ConfigError(f"{name}: unknown pgx game {game!r}; registered: {', '.join(GAMES)}")
        module, cls_name, fixed = _GAMES[game]
        allowed = game_parameters(game)
        for k in game_kwargs:
            if k not in allowed:
                raise ConfigError(
                    f"{name}: unknown parameter {k!r}; allowed: max_episode_steps"
                    + "".join(f", {a}" for a in allowed)
                )
        cap = max_episode_steps
        if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
            raise ConfigError(f"{name}: max_episode_steps = {cap!r} is invalid: allowed None or an integer >= 1")
        self._env = _import_class(module, cls_name)(**fixed, **game_kwargs)
        self.game = game
        init = jax.eval_shape(self._env.init, jax.random.PRNGKey(0))
        shape = tuple(int(d) for d in init.observation.shape)
        if len(shape) == 1:
            shape = (1, 1) + shape
        self.spec = EnvSpec(
            name=name,
            observation_shape=shape,
            num_actions=int(init.legal_action_mask.shape[0]),
            num_players=int(self._env.num_players),
            max_episode_steps=cap,
            observation_dtype="uint8" if init.observation.dtype in (jnp.bool_, jnp.uint8) else "float32",
            symmetries=_symmetries(game, shape),
            chance_code="pgx:2048" if game == "2048" else "",
        )

    def _init(self, key):
        s = self._env.init(key)
        zero = jnp.zeros((), jnp.float32)
        return s, GameStep(s.observation, zero, s.terminated, s.truncated, s.legal_action_mask, s.current_player)

    def _step(self, inner, action, key):
        mover = inner.current_player
        s = self._env.step(inner, action, key)
        reward = s.rewards[mover]
        return s, GameStep(s.observation, reward, s.terminated, s.truncated, s.legal_action_mask, s.current_player)


def _symmetries(game: str, shape: tuple[int, ...]) -> tuple:
    """Board symmetries of the pgx board games (actions are the cells, row-major, then pass; connect four's
    are its columns); ``()`` for the MinAtar games."""
    from moozi.envs.symmetry import cell_symmetries, column_mirror

    h, w = shape[0], shape[1]
    if game == "tic_tac_toe":
        return cell_symmetries(h, w)
    if game == "go_9x9":
        return cell_symmetries(h, w, extra_actions=1)  # pass
    if game == "othello":  # the four that keep the starting position: identity, half turn, both diagonals
        return tuple(cell_symmetries(h, w, extra_actions=1)[i] for i in (0, 3, 4, 7))
    if game == "connect_four":
        return column_mirror(h, w)
    return ()


def make_pgx(game: str):
    """Factory for one registered pgx game: ``make_pgx(game)(**kwargs)``."""

    def factory(*, max_episode_steps: int | None = None, **game_kwargs) -> PgxEnv:
        return PgxEnv(game, max_episode_steps=max_episode_steps, **game_kwargs)

    factory.__doc__ = f"pgx:{game} (see PgxEnv)."
    return factory
