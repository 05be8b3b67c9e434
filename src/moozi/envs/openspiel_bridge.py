"""Bridge for OpenSpiel games, host path (docs/architecture.md §2-§3).

Registered as the prefix ``"openspiel:"``: ``make_env("openspiel:<game>")``
where ``<game>`` is an OpenSpiel game string, parameters included in
OpenSpiel's syntax (``"openspiel:tic_tac_toe"``, ``"openspiel:connect_four"``,
``"openspiel:breakthrough(rows=5,columns=5)"``, ``"openspiel:go(board_size=9)"``).
A ``params`` dict is merged over the string's parameters
(``make_env("openspiel:go", params={"board_size": 9, "komi": 6.5})``).
``pyspiel`` is imported when a game is built, never when this module is
imported. ``pyspiel.registered_names()`` lists every OpenSpiel game.

Games the bridge accepts: perfect-information, sequential (turn-based)
games with one player, or two players and zero-sum utility, that provide an
observation tensor. Any other game is refused with a
:class:`~moozi.config.ConfigError` that says why (simultaneous moves,
imperfect information, more than two players, not zero-sum, no observation
tensor).

Chance: games with explicit chance nodes (2048, einstein_wurfelt_nicht, pig,
backgammon, ...) are played by sampling every chance node with the bridge's
own generator, seeded by ``reset``'s seed (so an episode is reproducible from
its seed), until a player is to move; the outcomes are not exposed as codes, so a
model learns them from the observations (``model.chance_outcomes``: Stochastic
MuZero). Where OpenSpiel's observation tensor leaves out an outcome the mover
must know (Einstein wurfelt nicht!'s die, which decides the pieces that may
move), the bridge adds it as one-hot channels (:data:`CHANCE_CHANNELS`): the
last outcome drawn before the mover's turn, all zeros on a terminal step. Games
that sample their own chance (``SAMPLED_STOCHASTIC``) are played as they are.

Mapping to the step contract (the pool adds auto-reset, the empty legal mask
on last steps, the truncation cap and legal-action checks):

* ``observation`` = ``state.observation_tensor(to_play)`` as float32. OpenSpiel
  board games lay it out ``(C, H, W)``; the bridge transposes it to
  ``(H, W, C)``. 2-D shapes ``(H, W)`` become ``(H, W, 1)``, 1-D shapes ``(D,)``
  (and anything else) ``(1, 1, D)``. Many OpenSpiel games (tic-tac-toe among
  them) give the same tensor to both players, with fixed planes per colour,
  so the observation is not necessarily mover-relative. Chance channels
  (above) come next. Two-player games
  therefore get one more channel, last, filled with ``to_play`` (0 or 1): the
  model's values are from the mover's point of view, and in games such as
  breakthrough the board alone does not say whose turn it is.
* ``to_play`` = ``state.current_player()`` (player 0 moves first in OpenSpiel,
  so a first step has ``to_play`` 0). On a terminal step OpenSpiel has no
  current player (``PlayerId.TERMINAL``); the bridge reports the player who
  would move next if turns alternated, i.e. the other player than the one who
  just moved (0 in single-player games), and the observation is that
  player's view.
* ``reward`` = from the point of view of the player who just moved
  (``mover``, the current player before the step): ``state.returns()[mover]``
  on arriving at a terminal state for games with terminal rewards (reward
  model ``TERMINAL``; 0 before), the step's change of ``state.returns()[mover]`` for
  games with intermediate rewards (reward model ``REWARDS``; zero-sum, so the
  opponent received the negation). Single-player games: player 0.
* ``legal_actions`` = ``state.legal_actions_mask(current_player)`` over
  ``game.num_distinct_actions()`` actions.
* ``is_terminal`` = ``state.is_terminal()``. ``spec.max_episode_steps`` defaults
  to ``game.max_game_length()``, which OpenSpiel games treat as a bound they
  end by themselves (Go is scored and terminal after ``max_game_length``
  moves), so the pool's cap does not truncate a real game: a game that ends
  at exactly that many moves is terminated (termination wins over the cap).
  ``max_episode_steps`` can set a lower cap.
* Seeds: deterministic games need none: every episode starts from
  ``game.new_initial_state()``; games with chance draw their chance nodes
  from ``reset``'s seed.
* Games with intermediate rewards: a step's reward is what the move and the
  chance nodes after it added to the mover's ``returns()``.
* ``render()`` = ``str(state)`` (OpenSpiel's text picture).

Two-player games where a player can move twice in a row (checkers
multi-jumps, mancala and oware extra turns) are accepted and reported
faithfully (``to_play`` repeats), but the planner and n-step targets assume
alternating turns (docs/architecture.md §3); the host pool warns the first time it sees one.
"""

from __future__ import annotations

import difflib
from typing import Any, Mapping

import numpy as np

from moozi.config import ConfigError
from moozi.envs.contract import EnvSpec, UnknownEnvError
from moozi.envs.host import GameStep, HostEnv

PREFIX = "openspiel:"

GAMES = ("tic_tac_toe", "connect_four", "breakthrough(rows=5,columns=5)", "go(board_size=9)", "einstein_wurfelt_nicht",
         "2048")
"""OpenSpiel games listed by ``list_envs`` (any supported game string works)."""

_EXAMPLES = (
    "tic_tac_toe", "connect_four", "breakthrough", "go", "othello", "hex", "clobber", "amazons", "pentago",
    "checkers", "chess", "cliff_walking",
)  # fmt: skip

_SUPPORTED = ("Supported: perfect-information, turn-based games (chance nodes sampled by the bridge) with 1 player "
              "or 2 zero-sum players that provide an observation tensor")


def _import_pyspiel():
    try:
        import pyspiel
    except ImportError as e:
        raise ImportError(f"the OpenSpiel bridge needs open-spiel: pip install 'moozi[openspiel]' [{e}]") from e
    return pyspiel


def _unknown_game(pyspiel, name: str, short: str) -> UnknownEnvError:
    names = list(pyspiel.registered_names())
    close = difflib.get_close_matches(short, names, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return UnknownEnvError(
        f"unknown OpenSpiel game {short!r} in {name!r}{hint}; for example: "
        f"{', '.join(PREFIX + g for g in _EXAMPLES)}; all {len(names)} OpenSpiel games: "
        "python -c 'import pyspiel; print(pyspiel.registered_names())' "
        "(not all of them are supported by this bridge)"
    )


def _check_value(name: str, key: str, value: Any, default: Any) -> Any:
    """``value`` checked (and int -> float coerced) against the type of the game's default for ``key``."""

    def bad(allowed: str):
        return ConfigError(f"{name}: parameter {key} = {value!r} is invalid: allowed {allowed}")

    if isinstance(default, bool):
        if not isinstance(value, (bool, np.bool_)):
            raise bad("True or False")
        return bool(value)
    if isinstance(default, int):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise bad("an integer")
        return int(value)
    if isinstance(default, float):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise bad("a number")
        return float(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise bad("a string")
    return value  # nested games (dicts) and anything else: OpenSpiel decides


def load_game(game: str, params: Mapping[str, Any] | None = None):
    """``(pyspiel.Game, registered name)`` for the game string ``game`` with ``params`` merged.

    Raises:
      ImportError: pyspiel is not installed.
      UnknownEnvError: no OpenSpiel game of that name.
      ConfigError: an unknown parameter, a value of the wrong type, or a value OpenSpiel rejects.
    """
    pyspiel = _import_pyspiel()
    if not isinstance(game, str) or not game.strip():
        raise UnknownEnvError(f"{PREFIX}{game!r}: give an OpenSpiel game, e.g. {', '.join(PREFIX + g for g in GAMES)}")
    name = PREFIX + game
    if params is not None and not isinstance(params, Mapping):
        raise ConfigError(f"{name}: params = {params!r} is invalid: allowed None or a dict of game parameters")
    short = game.partition("(")[0].strip()
    if short not in pyspiel.registered_names():
        raise _unknown_game(pyspiel, name, short)
    if "(" in game or ")" in game:
        try:
            parsed = dict(pyspiel.game_parameters_from_string(game))
        except pyspiel.SpielError as e:
            raise ConfigError(f"{name}: cannot parse the game string: {e}") from None
        parsed.pop("name", None)
    else:
        parsed = {}
    merged = {**parsed, **dict(params or {})}
    spec = next(t for t in pyspiel.registered_games() if t.short_name == short).parameter_specification
    for key in list(merged):
        if key not in spec:
            allowed = ", ".join(sorted(spec)) if spec else "(none)"
            raise ConfigError(f"{name}: unknown parameter {key!r} for OpenSpiel game {short!r}; allowed: {allowed}")
        merged[key] = _check_value(name, key, merged[key], spec[key])
    try:
        loaded = pyspiel.load_game(short, merged) if merged else pyspiel.load_game(short)
    except pyspiel.SpielError as e:
        which = [k for k in merged if k in str(e)]
        what = f"parameter {which[0]!r}" if which else "parameters"
        raise ConfigError(f"{name}: OpenSpiel rejected the {what} {merged}: {e}") from None
    if params:
        name = PREFIX + str(loaded)  # the canonical string, parameters included
    return loaded, name


def check_supported(game, name: str) -> None:
    """Raise ConfigError saying why the bridge cannot play ``game`` (a ``pyspiel.Game``), if it cannot."""
    import pyspiel

    gt = pyspiel.GameType
    t = game.get_type()
    n = game.num_players()
    why = []
    if t.dynamics != gt.Dynamics.SEQUENTIAL:
        why.append(f"simultaneous moves (dynamics {t.dynamics.name})")
    if t.information != gt.Information.PERFECT_INFORMATION:
        why.append(f"imperfect information (information {t.information.name})")
    if n > 2:
        why.append(f"more than 2 players ({n})")
    elif n == 2 and t.utility != gt.Utility.ZERO_SUM:
        why.append(f"not zero-sum (utility {t.utility.name}): its rewards cannot be expressed as one reward "
                   "from the mover's point of view")
    if not t.provides_observation_tensor:
        why.append("no observation tensor")
    if why:
        raise ConfigError(f"{name} is not supported by the OpenSpiel bridge: {'; '.join(why)}. {_SUPPORTED}")


CHANCE_CHANNELS = {"einstein_wurfelt_nicht": 6}
"""Games whose observation tensor omits the chance outcome the mover must know, with its number of outcomes:
the bridge appends that many one-hot channels of the last outcome drawn (Einstein wurfelt nicht!: the die's six
faces; its starting layouts, also chance, are on the board)."""


def observation_shape(raw: tuple[int, ...]) -> tuple[int, ...]:
    """``(H, W, C)`` for OpenSpiel's ``observation_tensor_shape`` (``(C, H, W)``, ``(H, W)`` or ``(D,)``)."""
    if len(raw) == 3:
        c, h, w = raw
        return (h, w, c)
    if len(raw) == 2:
        return (raw[0], raw[1], 1)
    return (1, 1, int(np.prod(raw, dtype=np.int64)))


class OpenSpielEnv(HostEnv):
    """An OpenSpiel game behind the moozi step contract (see the module doc).

    Args:
      game: an OpenSpiel game string, e.g. ``"tic_tac_toe"``, ``"go(board_size=9)"``.
      params: game parameters merged over those in ``game`` (e.g. ``{"board_size": 9}``).
      max_episode_steps: the truncation cap; None uses ``game.max_game_length()``.
    """

    def __init__(self, game: str, *, params: Mapping[str, Any] | None = None, max_episode_steps: int | None = None):
        self._game, name = load_game(game, params)
        check_supported(self._game, name)
        import pyspiel

        cap = max_episode_steps
        if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
            raise ConfigError(f"{name}: max_episode_steps = {cap!r} is invalid: allowed None or an integer >= 1")
        if cap is None:
            cap = int(self._game.max_game_length())
        self._raw_shape = tuple(int(d) for d in self._game.observation_tensor_shape())
        self._num_players = int(self._game.num_players())
        self._terminal_rewards = self._game.get_type().reward_model == pyspiel.GameType.RewardModel.TERMINAL
        self._chance_channels = CHANCE_CHANNELS.get(self._game.get_type().short_name, 0)
        self._last_chance = None
        h, w, c = observation_shape(self._raw_shape)
        self._board = (h, w)
        try:
            self.spec = EnvSpec(
                name=name,
                observation_shape=_with_player_plane((h, w, c + self._chance_channels), self._num_players),
                num_actions=int(self._game.num_distinct_actions()),
                num_players=self._num_players,
                max_episode_steps=cap,
                path="host",
                observation_dtype="uint8" if self._game.get_type().short_name in BINARY_OBSERVATION_GAMES
                else "float32",
                symmetries=_symmetries(self._game),
                player_planes=_player_planes(self._game),
            )
        except ConfigError as e:
            msg = f"{name}: check the game parameters; OpenSpiel built a game moozi cannot use: {e}"
            raise ConfigError(msg) from None
        self._no_legal = np.zeros((self.spec.num_actions,), bool)
        self._state = None

    @property
    def game(self):
        """The ``pyspiel.Game``."""
        return self._game

    @property
    def state(self):
        """The current ``pyspiel.State`` (None before the first reset)."""
        return self._state

    def _observation(self, player: int, terminated: bool = False) -> np.ndarray:
        x = np.asarray(self._state.observation_tensor(player), np.float32)
        if len(self._raw_shape) == 3:
            x = x.reshape(self._raw_shape).transpose(1, 2, 0)
        h, w = self._board
        x = x.reshape(h, w, -1)
        if self._chance_channels:
            drawn = np.zeros((h, w, self._chance_channels), np.float32)
            if not terminated and self._last_chance is not None:
                drawn[..., self._last_chance] = 1.0
            x = np.concatenate([x, drawn], axis=-1)
        if self._num_players == 2:
            x = np.concatenate([x, np.full((h, w, 1), float(player), np.float32)], axis=-1)
        return x.reshape(self.spec.observation_shape)

    def _game_step(self, reward: float, terminated: bool, mover: int) -> GameStep:
        s = self._state
        if terminated:
            to_play = 1 - mover if self._num_players == 2 else 0
            legal = self._no_legal
        else:
            to_play = int(s.current_player())
            legal = np.asarray(s.legal_actions_mask(to_play), bool)
        return GameStep(self._observation(to_play, terminated), legal, reward=reward, terminated=terminated,
                        to_play=to_play)

    def reset(self, seed: int) -> GameStep:
        self._rng = np.random.default_rng(seed)  # chance nodes only; deterministic games draw nothing
        self._state = self._game.new_initial_state()
        self._last_chance = None
        self._resolve_chance()
        return self._game_step(0.0, bool(self._state.is_terminal()), mover=1)

    def step(self, action: int) -> GameStep:
        s = self._state
        mover = int(s.current_player())
        before = 0.0 if self._terminal_rewards else float(s.returns()[mover])
        s.apply_action(int(action))
        self._resolve_chance()
        terminated = bool(s.is_terminal())
        if self._terminal_rewards:
            reward = float(s.returns()[mover]) if terminated else 0.0
        else:  # what the move and the chance after it added to the mover's return
            reward = float(s.returns()[mover]) - before
        return self._game_step(reward, terminated, mover)

    def _resolve_chance(self) -> None:
        """Sample chance nodes until a player is to move (or the game ends)."""
        s = self._state
        while s.is_chance_node():
            outcomes, probs = zip(*s.chance_outcomes())
            probs = np.asarray(probs, np.float64)
            outcome = int(outcomes[self._rng.choice(len(outcomes), p=probs / probs.sum())])
            s.apply_action(outcome)
            if len(outcomes) == self._chance_channels:  # the draw the channels name (the die), not the layouts
                self._last_chance = outcomes.index(outcome)

    def render(self) -> str | None:
        return None if self._state is None else str(self._state)


# Games whose observation tensors are 0/1 planes (stored as uint8); others stay float32.
BINARY_OBSERVATION_GAMES = frozenset({"tic_tac_toe", "connect_four", "breakthrough", "othello", "hex", "go",
                                      "clobber", "checkers", "chess"})


def _symmetries(game) -> tuple:
    """The board symmetries moozi knows for this OpenSpiel game (``()`` for the others): tic-tac-toe's
    eight (actions are the cells, row-major), Go's eight on any board size (the cells row-major from a1, then
    pass; its rules, komi and superko included, do not change under them) and connect four's mirror (actions
    are the columns)."""
    from moozi.envs.symmetry import cell_symmetries, column_mirror

    name = game.get_type().short_name
    shape = tuple(int(d) for d in game.observation_tensor_shape())
    if name == "tic_tac_toe" and shape[-2:] == (3, 3):
        return cell_symmetries(3, 3)
    if name == "go" and len(shape) == 3 and shape[1] == shape[2] \
            and int(game.num_distinct_actions()) == shape[1] * shape[2] + 1:
        return cell_symmetries(shape[1], shape[2], extra_actions=1)  # pass
    if name == "connect_four" and int(game.num_distinct_actions()) == shape[-1]:
        return column_mirror(shape[-2], shape[-1])
    return ()


def _player_planes(game) -> tuple:
    """``(x plane, o plane, to-play plane)`` where moozi knows them and the rules treat both colours alike
    (``EnvSpec.player_planes``): tic-tac-toe (planes empty, o, x) and connect four (x, o, empty); ``()``
    for the others (breakthrough's rules have a direction; Go's komi favours a colour)."""
    name = game.get_type().short_name
    shape = tuple(int(d) for d in game.observation_tensor_shape())
    if name == "tic_tac_toe" and shape == (3, 3, 3):
        return (2, 1, 3)
    if name == "connect_four" and len(shape) == 3 and shape[0] == 3:
        return (0, 1, 3)
    return ()


def _with_player_plane(shape: tuple[int, ...], num_players: int) -> tuple[int, ...]:
    """Two-player games carry a ``to_play`` channel after the game's own channels."""
    h, w, c = shape
    return (h, w, c + 1) if num_players == 2 else shape


def make_openspiel(game: str, *, params: dict | None = None, max_episode_steps: int | None = None) -> OpenSpielEnv:
    """Factory for the ``"openspiel:"`` prefix: ``make_openspiel(game, **kwargs)`` (see OpenSpielEnv)."""
    return OpenSpielEnv(game, params=params, max_episode_steps=max_episode_steps)


# pgx games whose OpenSpiel twin has the same action indices (players follow a pgx game through it, checked every
# move).
OPENSPIEL_TWINS = {"pgx:tic_tac_toe": "tic_tac_toe", "pgx:connect_four": "connect_four"}


def openspiel_game(game: str, kwargs: dict | None = None):
    """The pyspiel game a moozi game name stands for (an ``openspiel:`` game, or a pgx game's twin)."""
    import pyspiel

    if game.startswith("openspiel:"):
        name, params = game.split(":", 1)[1], (kwargs or {}).get("params")  # the bridge's own game parameters
    elif game in OPENSPIEL_TWINS:
        name, params = OPENSPIEL_TWINS[game], None
    else:
        raise ConfigError(f"OpenSpiel players need an OpenSpiel game: {game!r} is neither an openspiel: game nor "
                          f"one with an OpenSpiel twin ({', '.join(OPENSPIEL_TWINS)})")
    g, _ = load_game(name, params)
    if g.get_type().chance_mode != pyspiel.GameType.ChanceMode.DETERMINISTIC:
        raise ConfigError(f"OpenSpiel players follow a game by its moves, so {name} (which has chance events) "
                          "cannot be played by them")
    return g
