"""Players for two-player games, one batched interface (what the arena, ``moozi match`` and ratings use).

A player plays ``B`` games in lock-step (the arena's pool) and sees every step
of every game, whoever moved::

    player.reset(ts)                 # ts: [B] first steps (numpy TimeStep)
    actions = player.act(ts, movers) # [B] environment actions; only rows where movers [B] is True are read
    player.observe(ts_next, actions) # after the pool stepped with the actions of both sides

so players that keep state (the learned model's history stack, OpenSpiel
states) keep it for every game, and ``act`` is only asked for the games where
the player is to move. Each player owns its random stream (seeded by the
arena from the match seed and its side).

Every player has a :class:`PlayerSpec`: a kind, the settings that change how
it plays, and an ``id`` (what ratings and game records name it by), so a
result is never published without both players' settings.

Player strings (``moozi match A B``)::

    random                     uniformly random legal moves
    perfect                    tic-tac-toe minimax (uniform among optimal moves)
    os-mcts-N                  OpenSpiel's C++ MCTSBot: N simulations, random rollouts (uct_c 2, solver on)
    ab / ab-D                  OpenSpiel's alpha-beta: to the end of the game (small games), or D plies deep
                               with the horizon scored 0 (wins and losses within D plies); random among best
    human                      a person at the terminal (the board drawn, moves typed; --pairs 1)
    mcts-N                     batched rollout MCTS in JAX on the real simulator (JAX-native games):
                               PUCT without noise, N simulations, random playouts as values, uniform prior
    az:RUN[@CKPT]              AlphaZero mode: the run's network (prior and value) searching the real simulator
    gtp:COMMAND                an external engine speaking GTP (one process per game of the batch;
                               no commas in COMMAND), e.g. gtp:moozi gtp runs/c4
    RUN[@CKPT]                 a trained run: the learned-model search of its test planner
                               (CKPT: latest (default), best or an update count); a run trained in
                               AlphaZero mode (model.dynamics = simulator) is az:RUN
    prior:RUN[@CKPT]           the same network's prior only (no search)

    options after a comma, for any player: ,eps=0.05 (a uniformly random legal move
    with this probability); for runs: ,sims=N (simulations) or ,ms=T (a time budget per move: the
    most simulations of a ladder 4, 8, ..., 1024 that fit, measured), ,temp=T (sample the
    search policy, or the prior, sharpened by 1/T; 0 = greedy); for az: ,sims=N; for
    os-mcts and mcts: ,rollouts=K; for os-mcts: ,uct=C, ,solve=0|1.

Batched players stay batched: the learned-model player gathers the games to
move into one padded batch (sizes rounded up to powers of two, so a handful of
compiled shapes) and searches them in one jitted call.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from moozi.config import ConfigError
from moozi.envs.openspiel_bridge import openspiel_game


@dataclass(frozen=True)
class PlayerSpec:
    """What a player is: ``kind`` and its settings (``settings`` sorted ``(key, value)`` pairs).

    ``source``: a run directory and checkpoint for trained players (``None`` otherwise);
    ``updates``: the checkpoint's update count.
    """

    kind: str
    settings: tuple = ()
    source: str | None = None
    updates: int | None = None

    @property
    def id(self) -> str:
        """A stable name: kind, source and every non-default setting (e.g. ``mcts:runs/ttt@1200,sims=64``)."""
        head = self.kind if self.source is None else f"{self.kind}:{self.source}"
        if self.updates is not None:
            head += f"@{self.updates}"
        return ",".join([head] + [f"{k}={v}" for k, v in self.settings])

    def describe(self) -> dict:
        return {"id": self.id, "kind": self.kind, "source": self.source, "updates": self.updates,
                "settings": dict(self.settings)}


class Player(Protocol):
    spec: PlayerSpec

    def reset(self, ts) -> None:
        """New games in every row: ``ts`` is the pool's ``[B]`` first steps."""

    def act(self, ts, movers: np.ndarray) -> np.ndarray:
        """``[B]`` int32 environment actions; rows where ``movers`` is False are ignored."""

    def observe(self, ts, actions: np.ndarray) -> None:
        """The pool stepped with ``actions [B]`` (both players' moves) and now shows ``ts``."""

    def close(self) -> None:
        """Release what the player holds."""


def _random_legal(rng: np.random.Generator, legal: np.ndarray) -> np.ndarray:
    """``[B]`` uniformly random legal actions (0 where nothing is legal)."""
    u = rng.random(legal.shape)
    return np.where(legal.any(-1), np.argmax(np.where(legal, u, -1.0), axis=-1), 0).astype(np.int32)


def _padded_rows(movers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, idx)``: the games to move, and their indices padded to a power of two (repeating the first)
    so a batched search sees a handful of shapes."""
    rows = np.flatnonzero(movers)
    size = 1 << math.ceil(math.log2(max(rows.size, 1)))
    return rows, np.concatenate([rows, np.full(size - rows.size, rows[0] if rows.size else 0)]).astype(np.int32)


def _compile_timed(player, cache: dict, key, fn, args):
    """``fn`` compiled ahead for ``args`` (cached under ``key``), its compile time added to
    ``player.compile_s``: ms per move is playing time."""
    if key not in cache:
        t = time.perf_counter()
        cache[key] = fn.lower(*args).compile()
        player.compile_s += time.perf_counter() - t
    return cache[key]


def _analysis(policy, value, prior, net_value, legal, row: int, simulations: int) -> dict:
    """A search's view of game ``row`` (``[B, A_env]`` / ``[B]`` arrays): its value, the network's, and per
    legal move the search policy and the prior, most visited first (``moozi play`` hints, ``moozi-analyze``)."""
    moves = [{"action": int(a), "policy": float(policy[row, a]), "prior": float(prior[row, a])}
             for a in np.flatnonzero(legal[row])]
    moves.sort(key=lambda m: -m["policy"])
    return {"value": float(value[row]), "network_value": float(net_value[row]), "simulations": simulations,
            "moves": moves}


class RandomPlayer:
    """Uniformly random legal moves."""

    def __init__(self, seed: int = 0):
        self.spec = PlayerSpec("random")
        self.rng = np.random.default_rng(seed)

    def reset(self, ts) -> None:
        pass

    def act(self, ts, movers):
        return _random_legal(self.rng, np.asarray(ts.legal_actions, bool))

    def observe(self, ts, actions) -> None:
        pass

    def close(self) -> None:
        pass


class EpsilonPlayer:
    """Wraps a player: with probability ``eps`` a uniformly random legal move instead of its own."""

    def __init__(self, inner, eps: float, seed: int = 0):
        if not 0.0 <= eps <= 1.0:
            raise ConfigError(f"eps = {eps}: allowed a probability in [0, 1]")
        self.inner = inner
        self.eps = float(eps)
        self.rng = np.random.default_rng(seed)
        s = inner.spec
        self.spec = dataclasses.replace(s, settings=tuple(sorted(s.settings + (("eps", eps),))))

    def reset(self, ts) -> None:
        self.inner.reset(ts)

    def act(self, ts, movers):
        coin = self.rng.random(movers.shape) < self.eps
        own = movers & ~coin
        actions = _random_legal(self.rng, np.asarray(ts.legal_actions, bool))
        if own.any():
            actions = np.where(own, self.inner.act(ts, own), actions).astype(np.int32)
        return actions

    def observe(self, ts, actions) -> None:
        self.inner.observe(ts, actions)

    def close(self) -> None:
        self.inner.close()


class PerfectPlayer:
    """Tic-tac-toe minimax, uniformly random among the optimal moves (``moozi.eval.perfect``)."""

    def __init__(self, game: str, seed: int = 0):
        from moozi.eval.perfect import PERFECT_ENVS

        if game not in PERFECT_ENVS:
            raise ConfigError(f"player 'perfect' is only available for tic-tac-toe ({', '.join(PERFECT_ENVS)}), "
                              f"not {game!r}")
        self.spec = PlayerSpec("perfect")
        self.game = game
        self.rng = np.random.default_rng(seed)

    def reset(self, ts) -> None:
        pass

    def act(self, ts, movers):
        from moozi.eval.perfect import cells_from_observation, cells_from_openspiel, perfect_moves

        if self.game.startswith("openspiel:"):
            cells = cells_from_openspiel(ts.observation, ts.to_play)
        else:  # pgx: the mover's view
            cells = np.asarray(cells_from_observation(ts.observation))
        return perfect_moves(self.rng, cells, ts.legal_actions)

    def observe(self, ts, actions) -> None:
        pass

    def close(self) -> None:
        pass


class _OpenSpielStates:
    """One OpenSpiel state per game of the batch, kept in step by the moves played (the game's twin)."""

    def __init__(self, game: str, kwargs: dict | None = None):
        self.game = openspiel_game(game, kwargs)
        self.name = game
        self.states: list = []

    def reset(self, ts) -> None:
        self.states = [self.game.new_initial_state() for _ in range(len(ts.is_first))]

    def observe(self, ts, actions) -> None:
        for b, first in enumerate(np.asarray(ts.is_first)):
            if first:
                self.states[b] = self.game.new_initial_state()
            elif not self.states[b].is_terminal():
                self.states[b].apply_action(int(actions[b]))

    def _state(self, ts, b: int):
        """Game ``b``'s OpenSpiel state, checked against the game's legal moves."""
        state = self.states[b]
        legal = np.flatnonzero(np.asarray(ts.legal_actions[b], bool)).tolist()
        if sorted(state.legal_actions()) != legal:
            raise RuntimeError(f"{self.name}: the OpenSpiel twin's legal moves {state.legal_actions()} differ "
                               f"from the game's {legal} in game {b}")
        return state

    def close(self) -> None:
        pass


class OpenSpielMCTSPlayer(_OpenSpielStates):
    """OpenSpiel's C++ ``MCTSBot`` with random rollouts, one OpenSpiel state per game kept in step by the moves."""

    def __init__(self, game: str, simulations: int, seed: int = 0, rollouts: int = 1, uct_c: float = 2.0,
                 solve: bool = True, kwargs: dict | None = None):
        import pyspiel

        if simulations < 1 or rollouts < 1:
            raise ConfigError(f"os-mcts: simulations = {simulations}, rollouts = {rollouts}: allowed integers >= 1")
        super().__init__(game, kwargs)
        settings = [("rollouts", rollouts)] if rollouts != 1 else []
        settings += [("uct", uct_c)] if uct_c != 2.0 else []
        settings += [("solve", 0)] if not solve else []
        self.spec = PlayerSpec(f"os-mcts-{simulations}", tuple(settings))
        evaluator = pyspiel.RandomRolloutEvaluator(rollouts, seed)
        self.bot = pyspiel.MCTSBot(self.game, evaluator, uct_c, simulations, 1000, solve, seed, False)

    def act(self, ts, movers):
        out = np.zeros(len(movers), np.int32)
        for b in np.flatnonzero(movers):
            out[b] = self.bot.step(self._state(ts, b))
        return out


class AlphaBetaPlayer(_OpenSpielStates):
    """OpenSpiel's alpha-beta search (``open_spiel.python.algorithms.minimax``) on the game's OpenSpiel form.

    ``depth=None`` searches to the end of the game (exact play; small games
    such as tic-tac-toe only); a depth D sees every win and loss within D
    plies and scores the positions at the horizon 0 (a tactical baseline for
    connect four). Each legal move is searched to its value and one of the
    best is chosen uniformly at random (a deterministic player would make
    every game of a match the same); values are cached per position.
    """

    def __init__(self, game: str, depth: int | None = None, seed: int = 0, kwargs: dict | None = None):
        import pyspiel

        super().__init__(game, kwargs)
        info = self.game.get_type()
        if info.utility != pyspiel.GameType.Utility.ZERO_SUM or self.game.num_players() != 2:
            raise ConfigError(f"alpha-beta needs a two-player zero-sum game, not {game}")
        if depth is not None and depth < 1:
            raise ConfigError(f"alpha-beta depth = {depth}: allowed an integer >= 1 (ab-D), or ab for the whole game")
        self.depth = depth
        self.spec = PlayerSpec("ab" if depth is None else f"ab-{depth}")
        self.rng = np.random.default_rng(seed)
        self._values: dict = {}

    def _move_values(self, state) -> dict[int, float]:
        from open_spiel.python.algorithms.minimax import alpha_beta_search

        key = state.history_str()
        if key not in self._values:
            me = state.current_player()
            depth = 10**6 if self.depth is None else self.depth - 1
            values = {}
            for a in state.legal_actions():
                child = state.child(a)
                if child.is_terminal():
                    values[a] = child.player_return(me)
                elif depth == 0:
                    values[a] = 0.0
                else:
                    values[a] = alpha_beta_search(self.game, child, value_function=lambda s: 0.0,
                                                  maximum_depth=depth, maximizing_player_id=me)[0]
            self._values[key] = values
        return self._values[key]

    def act(self, ts, movers):
        out = np.zeros(len(movers), np.int32)
        for b in np.flatnonzero(movers):
            values = self._move_values(self._state(ts, b))
            best = max(values.values())
            out[b] = self.rng.choice([a for a, v in values.items() if v >= best - 1e-9])
        return out


class HumanPlayer:
    """A person at the terminal: each game to move is drawn (the OpenSpiel drawing where the game has one,
    else its moves so far) and a move is read in the game's notation or as an action index; ``legal``
    lists the moves, ``quit`` ends the match (nothing is recorded). For a match against a person, play few
    games at a time: ``moozi match human B --pairs 1``."""

    def __init__(self, game: str, kwargs: dict | None = None, stdin=None, out=None):
        import sys

        self.spec = PlayerSpec("human")
        self.name = game
        try:
            self.twin = openspiel_game(game, kwargs)
        except ConfigError:
            self.twin = None  # no OpenSpiel form: action indices and the move list
        self.stdin = stdin or sys.stdin
        self.out = out or sys.stdout
        self.states: list = []
        self.moves: list[list[int]] = []

    def reset(self, ts) -> None:
        b = len(ts.is_first)
        self.states = [self.twin.new_initial_state() if self.twin else None for _ in range(b)]
        self.moves = [[] for _ in range(b)]

    def observe(self, ts, actions) -> None:
        for b, first in enumerate(np.asarray(ts.is_first)):
            if first:
                self.states[b] = self.twin.new_initial_state() if self.twin else None
                self.moves[b] = []
                continue
            self.moves[b].append(int(actions[b]))
            if self.states[b] is not None and not self.states[b].is_terminal():
                self.states[b].apply_action(int(actions[b]))

    def _say(self, text: str, end: str = "\n") -> None:
        self.out.write(text + end)
        self.out.flush()

    def act(self, ts, movers):
        from moozi.eval.session import IllegalMove, board_text, move_name, parse_move

        out = np.zeros(len(movers), np.int32)
        for b in np.flatnonzero(movers):
            legal = np.flatnonzero(np.asarray(ts.legal_actions[b], bool)).tolist()
            state = self.states[b]
            self._say(f"{self.name}, game {b}:\n{board_text(state, self.moves[b])}")
            while True:
                self._say(f"your move (e.g. {move_name(state, legal[0])}; legal, quit): ", end="")
                line = self.stdin.readline()
                text = line.strip()
                if not line or text in ("quit", "q", "exit"):
                    raise KeyboardInterrupt("the person at the terminal quit the match")
                if text in ("legal", "l"):
                    self._say("legal: " + " ".join(move_name(state, a) for a in legal))
                    continue
                try:
                    action = parse_move(text, legal, state, len(ts.legal_actions[b]))
                except IllegalMove as err:
                    self._say(str(err))
                    continue
                if action in legal:
                    out[b] = action
                    break
                self._say(f"{move_name(state, action)} is not legal here")
        return out

    def close(self) -> None:
        pass


class RunPlayer:
    """A trained run's network: its test planner's search (``mode="search"``) or its prior (``mode="prior"``).

    Histories are stacked for every game at every step (as in training); only
    the games to move are searched, gathered into a batch padded to a power of
    two.
    """

    SIM_LADDER = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
    """Simulation counts a time budget chooses from (mctx cannot resume a tree, so each is its own program)."""

    def __init__(self, run: str, checkpoint: str = "latest", mode: str = "search", simulations: int | None = None,
                 temperature: float = 0.0, seed: int = 0, budget_ms: float | None = None):
        import jax

        from moozi.run_dir import open_run

        if mode not in ("search", "prior"):
            raise ConfigError(f"mode = {mode!r}: allowed 'search' or 'prior'")
        if temperature < 0:
            raise ConfigError(f"temp = {temperature}: allowed a number >= 0 (0 = greedy)")
        opened = open_run(run, checkpoint)
        self.config, self.model, self.env_spec, meta = opened.config, opened.model, opened.spec, opened.meta
        self.params = jax.device_put(opened.params)
        planner = self.config.test_planner
        if simulations is not None:
            if simulations < 1:
                raise ConfigError(f"sims = {simulations}: allowed an integer >= 1")
            planner = dataclasses.replace(planner, num_simulations=int(simulations))
        self.planner = planner
        self.mode = mode
        self.temperature = float(temperature)
        settings = [("sims", planner.num_simulations)] if mode == "search" else []
        settings += [("temp", temperature)] if temperature else []
        source = str(Path(run))
        self.spec = PlayerSpec("mcts" if mode == "search" else "prior", tuple(settings), source,
                               int(meta["counters"]["updates"]))
        self.checkpoint_path = meta["path"]
        self.key = jax.random.key(seed)
        self.rng = np.random.default_rng(seed)
        # Shared by every player of the same network and search (a tournament builds one per match).
        self._push, self._choose, self._compiled = _run_functions(self.model, self.config, planner, mode,
                                                                  self.env_spec.two_player)
        self.history = None
        self.compile_s = 0.0
        self.budget_ms = None
        self._timings: dict = {}  # (batch size, simulations) -> measured ms per call
        if budget_ms is not None:
            if mode != "search" or simulations is not None:
                raise ConfigError("ms= (a time budget) chooses the simulations itself: give it to a searching run "
                                  "player without sims=")
            self.set_time_budget(budget_ms)

    def set_time_budget(self, ms: float) -> None:
        """Search with as many simulations of :attr:`SIM_LADDER` as fit in ``ms`` per call (measured on the
        first call of each batch size; compiling is not counted). The spec records ``ms`` and the N in use."""
        if ms <= 0:
            raise ConfigError(f"ms = {ms}: allowed a time in milliseconds > 0")
        self.budget_ms = float(ms)
        self._chosen = {}

    def _use_simulations(self, n: int) -> None:
        self.planner = dataclasses.replace(self.planner, num_simulations=int(n))
        self._push, self._choose, self._compiled = _run_functions(self.model, self.config, self.planner, self.mode,
                                                                  self.env_spec.two_player)
        settings = dict(self.spec.settings)
        settings.update(sims=int(n), ms=self.budget_ms)
        self.spec = dataclasses.replace(self.spec, settings=tuple(sorted(settings.items())))

    def _calibrate(self, size: int, args) -> None:
        """Pick the largest ladder rung whose measured time per call is within the budget (the smallest if none)."""
        chosen = self.SIM_LADDER[0]
        for n in self.SIM_LADDER:
            if (size, n) not in self._timings:
                self._use_simulations(n)
                fn = self._compiled_for(size, args)
                times = []
                for _ in range(3):
                    t = time.perf_counter()
                    np.asarray(fn(*args))
                    times.append(1000.0 * (time.perf_counter() - t))
                self._timings[(size, n)] = float(np.median(times))
            if self._timings[(size, n)] > self.budget_ms:
                break
            chosen = n
        self._chosen[size] = chosen
        self._use_simulations(chosen)
        import logging

        logging.getLogger("moozi").info("time budget %.0f ms per move: %d simulations (%.1f ms measured, batch %d)",
                                        self.budget_ms, chosen, self._timings[(size, chosen)], size)

    def _compiled_for(self, size: int, args):
        # Keyed by the searched rows and the games the history holds (the cache is shared by players).
        return _compile_timed(self, self._compiled, (size, int(args[2][1].shape[0])), self._choose, args)

    def reset(self, ts) -> None:
        from moozi.model.history import history_init

        b = len(ts.is_first)
        self.history = history_init(b, self.env_spec.observation_shape, self.config.targets.history_length)
        self.history = self._push(self.history, ts.observation, np.zeros(b, np.int32), ts.is_first)

    def observe(self, ts, actions) -> None:
        self.history = self._push(self.history, ts.observation, (np.asarray(actions) + 1).astype(np.int32),
                                  ts.is_first)

    def act(self, ts, movers):
        import jax

        rows, idx = _padded_rows(movers)
        out = np.zeros(len(movers), np.int32)
        if rows.size == 0:
            return out
        size = idx.size
        legal = np.asarray(ts.legal_actions, bool)[idx]
        self.key, sub = jax.random.split(self.key)
        args = (self.params, sub, self.history, idx, legal)
        if self.budget_ms is not None:
            if size not in self._chosen:
                t, before = time.perf_counter(), self.compile_s
                self._calibrate(size, args)
                self.compile_s = before + time.perf_counter() - t  # calibrating is not playing either
            elif self.planner.num_simulations != self._chosen[size]:
                self._use_simulations(self._chosen[size])
        weights = np.asarray(self._compiled_for(size, args)(*args), np.float64)[: rows.size]
        weights = np.where(legal[: rows.size], weights, 0.0)
        if self.temperature == 0.0:
            choice = np.argmax(np.where(legal[: rows.size], weights + 1e-9, -1.0), axis=-1)
        else:
            p = np.where(weights > 0, weights, 0.0) ** (1.0 / self.temperature)
            p = np.where(p.sum(-1, keepdims=True) > 0, p, legal[: rows.size].astype(np.float64))
            p = p / p.sum(-1, keepdims=True)
            choice = np.array([self.rng.choice(p.shape[1], p=pi) for pi in p])
        out[rows] = choice
        return out

    def analyze(self, ts, row: int = 0) -> dict:
        """The search at game ``row`` without playing: v*, the network's value, and per legal move the
        search policy (visit share; the prior for a prior-only player) and the prior, most visited first."""
        import jax
        import jax.numpy as jnp

        from moozi.model.history import history_observation
        from moozi.planner import plan

        if not hasattr(self, "_analysis"):
            model, config, planner = self.model, self.config, self.planner

            def analysis(params, key, history, legal):
                obs = history_observation(history, model.num_actions)
                root = model.initial_inference(params, obs)
                out = plan(model, params, key, obs, legal, planner, discount=config.targets.discount,
                           two_player=True, temperature=0.0)
                prior = jax.nn.softmax(jnp.where(legal, root.policy_logits[:, 1:], -jnp.inf), axis=-1)
                return out.root_policy[:, 1:], out.root_value, prior, root.value

            self._analysis = jax.jit(analysis)
        legal = np.asarray(ts.legal_actions, bool)
        self.key, sub = jax.random.split(self.key)
        policy, value, prior, net_value = (np.asarray(x) for x in self._analysis(self.params, sub, self.history,
                                                                                  legal))
        if self.mode == "prior":
            policy = prior
        return _analysis(policy, value if self.mode == "search" else net_value, prior, net_value, legal, row,
                         self.planner.num_simulations)

    def close(self) -> None:
        pass


_RUN_FUNCTIONS: dict = {}


def _run_functions(model, config, planner, mode: str, two_player: bool):
    """Jitted ``push(history, obs, prev_aug, is_first)``, ``choose(params, key, history, idx, legal) -> [n, A_env]``
    and a dict for its compiled executables by batch size; cached per (network, history, search, mode), so new
    params of the same network reuse them.

    ``choose`` returns the weights to pick from: the search's policy over
    environment actions (greedy: its most visited; mctx's own choice is the
    same move at temperature 0) or the prior's probabilities.
    """
    key = (repr(config.model), repr(config.targets), repr(planner), repr(config.env), mode, two_player)
    if key not in _RUN_FUNCTIONS:
        _RUN_FUNCTIONS[key] = _build_run_functions(model, config, planner, mode, two_player) + ({},)
    return _RUN_FUNCTIONS[key]


def _build_run_functions(model, config, planner, mode: str, two_player: bool):
    import jax
    import jax.numpy as jnp

    from moozi.model.history import history_observation, history_push
    from moozi.planner import plan

    def choose(params, key, history, idx, legal):
        sub = jax.tree_util.tree_map(lambda x: jnp.take(x, idx, axis=0), history)
        obs = history_observation(sub, model.num_actions)
        if mode == "prior":
            logits = model.initial_inference(params, obs).policy_logits[:, 1:]
            logits = jnp.where(legal, logits, -jnp.inf)
            return jax.nn.softmax(logits, axis=-1)
        out = plan(model, params, key, obs, legal, planner, discount=config.targets.discount, two_player=two_player,
                   temperature=0.0, gumbel_scale=planner.gumbel_scale if planner.kind == "gumbel" else None)
        # The chosen move gets a bump so argmax picks mctx's choice even where visits tie.
        policy = out.root_policy[:, 1:] + 1e-6 * jax.nn.one_hot(out.action - 1, legal.shape[-1])
        return policy

    return jax.jit(history_push), jax.jit(choose)


class TrueModelPlayer:
    """Search with the game's real simulator (``moozi.true_model``): AlphaZero mode (a run's network values
    the leaves and gives the prior) or the rollout-MCTS baseline (random playouts, uniform prior).

    Keeps its own batch of game states, stepped with every move played and
    checked against the arena's observations (a game whose states cannot be
    followed by its moves, e.g. one with chance events, fails loudly).
    """

    def __init__(self, game: str, simulations: int, run: str | None = None, checkpoint: str = "latest",
                 rollouts: int = 1, seed: int = 0, game_kwargs: dict | None = None):
        import jax

        from moozi.config import PlannerConfig
        from moozi.envs import make_env
        from moozi.true_model import network_evaluator, rollout_evaluator

        if simulations < 1 or rollouts < 1:
            raise ConfigError(f"simulations = {simulations}, rollouts = {rollouts}: allowed integers >= 1")
        if run is not None:
            from moozi.parts import build_parts
            from moozi.run_dir import load_params, load_run_config

            self.config = load_run_config(run)
            env, self.model = build_parts(self.config)  # the game's simulator is searched: its env stays open
            params, meta = load_params(run, self.model, env_name=self.config.env.name, checkpoint=checkpoint)
            self.params = jax.device_put(params)
            self.history_length = self.config.targets.history_length
            self.discount = self.config.targets.discount
            planner = dataclasses.replace(self.config.test_planner, num_simulations=int(simulations))
            evaluate = network_evaluator(self.model)
            self.spec = PlayerSpec("az", (("sims", simulations),), str(Path(run)), int(meta["counters"]["updates"]))
            num_actions = self.model.num_actions
        else:
            env = make_env(game, **(game_kwargs or {}))
            self.params, self.model, self.history_length, self.discount = None, None, 1, 1.0
            # PUCT without root noise, the most visited move: classic MCTS (Gumbel's noisy final choice made
            # the baseline lose 8 of 100 tic-tac-toe games to a random mover at 100 simulations).
            planner = PlannerConfig(kind="puct", num_simulations=int(simulations), dirichlet_fraction=0.0)
            evaluate = rollout_evaluator(env, rollouts)
            self.spec = PlayerSpec(f"mcts-{simulations}", (("rollouts", rollouts),) if rollouts != 1 else ())
            num_actions = env.spec.num_actions + 1
        if env.spec.path != "device":
            raise ConfigError(f"{self.spec.kind}: searching with the real simulator needs a JAX-native game "
                              f"(pgx:, gymnax:); {game} is stepped on the host")
        if not env.spec.two_player:
            raise ConfigError(f"{game} is a single-player game")
        self.env = env
        self.planner = planner
        self.rng = np.random.default_rng(seed)
        self._compiled: dict = {}
        self.compile_s = 0.0
        self._functions(evaluate, num_actions)
        self.states = None
        self.history = None

    def _functions(self, evaluate, num_actions):
        import jax
        import jax.numpy as jnp

        from moozi.envs.device import reset_batch, step_batch
        from moozi.model.history import history_push
        from moozi.planner import search
        from moozi.true_model import true_root, true_step

        env, planner, discount = self.env, self.planner, self.discount

        def choose(params, key, states, history, idx, seeds):
            sub_states = jax.tree_util.tree_map(lambda x: jnp.take(x, idx, axis=0), states)
            sub_history = jax.tree_util.tree_map(lambda x: jnp.take(x, idx, axis=0), history)
            root = true_root(evaluate, params, sub_states, sub_history, seeds)
            out = search(params, key, root, true_step(env, evaluate), sub_states.legal_actions, planner,
                         discount=discount, two_player=True, temperature=0.0,
                         gumbel_scale=planner.gumbel_scale if planner.kind == "gumbel" else None)
            return out.action - 1

        self._choose = jax.jit(choose)
        self._reset = jax.jit(lambda keys: reset_batch(env, keys))
        self._step = jax.jit(lambda states, actions: step_batch(env, states, actions))
        self._push = jax.jit(history_push)
        self.num_actions = num_actions

    def _check(self, ts, rows):
        mine = np.asarray(self._obs)[rows]
        theirs = np.asarray(ts.observation)[rows]
        if not np.allclose(mine, theirs):
            raise RuntimeError(f"{self.spec.id}: the simulator's state no longer matches the game's in game "
                               f"{int(rows[0])}: a game with chance events cannot be followed by its moves")

    def reset(self, ts) -> None:
        import jax

        from moozi.model.history import history_init

        b = len(ts.is_first)
        self.states, t = self._reset(jax.random.split(jax.random.key(0), b))
        self._obs = t.observation
        self.history = history_init(b, self.env.spec.observation_shape, self.history_length)
        self.history = self._push(self.history, t.observation, np.zeros(b, np.int32), t.is_first)

    def observe(self, ts, actions) -> None:
        self.states, t = self._step(self.states, np.asarray(actions, np.int32))
        self._obs = t.observation
        self.history = self._push(self.history, t.observation, (np.asarray(actions) + 1).astype(np.int32),
                                  t.is_first)

    def act(self, ts, movers):
        import jax

        rows, idx = _padded_rows(movers)
        out = np.zeros(len(movers), np.int32)
        if rows.size == 0:
            return out
        self._check(ts, rows)
        size = idx.size
        seeds = self.rng.integers(0, 2**32, size, dtype=np.uint32)
        key = jax.random.key(int(self.rng.integers(2**31)))
        args = (self.params, key, self.states, self.history, idx, seeds)
        out[rows] = np.asarray(_compile_timed(self, self._compiled, size, self._choose, args)(*args))[: rows.size]
        return out

    def analyze(self, ts, row: int = 0) -> dict:
        """AlphaZero mode: the search at game ``row`` without playing (as :meth:`RunPlayer.analyze`)."""
        import jax
        import jax.numpy as jnp

        from moozi.planner import search
        from moozi.true_model import network_evaluator, true_root, true_step

        if self.model is None:
            raise ConfigError(f"{self.spec.id} has no network to analyze with")
        if not hasattr(self, "_analysis"):
            evaluate, env, planner, discount = network_evaluator(self.model), self.env, self.planner, self.discount

            def analysis(params, key, states, history):
                root = true_root(evaluate, params, states, history, jnp.zeros(states.is_last.shape, jnp.uint32))
                out = search(params, key, root, true_step(env, evaluate), states.legal_actions, planner,
                             discount=discount, two_player=True, temperature=0.0)
                return out.root_policy[:, 1:], out.root_value, jax.nn.softmax(root.prior_logits[:, 1:]), root.value

            self._analysis = jax.jit(analysis)
        key = jax.random.key(int(self.rng.integers(2**31)))
        policy, value, prior, net_value = (np.asarray(x) for x in self._analysis(self.params, key, self.states,
                                                                                  self.history))
        legal = np.asarray(ts.legal_actions, bool)
        return _analysis(policy, value, prior, net_value, legal, row, self.planner.num_simulations)

    def close(self) -> None:
        self.env.close()


class GTPPlayer:
    """An external engine over GTP (``moozi gtp`` or any program speaking GTP v2 for the game): one engine
    process per game of the batch, started on first use and reused from round to round.

    Every move of a game is sent to its engine (``play``), except the engine's own (``genmove``); moves are
    written in the game's notation where it has an OpenSpiel form, else as action indices.
    """

    def __init__(self, game: str, command: str, seed: int = 0, game_kwargs: dict | None = None):
        import shlex

        if not command.strip():
            raise ConfigError("gtp: needs the engine's command line, e.g. gtp:'moozi gtp runs/c4'")
        self.command = shlex.split(command)
        self.game = game
        try:
            self.twin = openspiel_game(game, game_kwargs)
        except ConfigError:
            self.twin = None
        self.spec = PlayerSpec("gtp", (("command", command),))
        self.procs: list = []
        self.states: list = []

    def _send(self, b: int, line: str) -> str:
        proc = self.procs[b]
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        lines = []
        while True:
            out = proc.stdout.readline()
            if not out:
                raise RuntimeError(f"GTP engine {' '.join(self.command)} ended (after {line!r})")
            out = out.rstrip("\n")
            if not lines and not out.strip():
                continue
            if out == "" and lines:
                break
            lines.append(out)
        reply = "\n".join(lines)
        if reply.startswith("?"):
            raise RuntimeError(f"GTP engine refused {line!r}: {reply[1:].strip()}")
        return reply[1:].strip()

    def _name(self, b: int, action: int) -> str:
        state = self.states[b]
        if state is not None and not state.is_terminal():
            return state.action_to_string(state.current_player(), int(action))
        return str(int(action))

    def _parse(self, b: int, text: str) -> int:
        state = self.states[b]
        if state is not None and not state.is_terminal():
            for a in state.legal_actions():
                if state.action_to_string(state.current_player(), a).lower() == text.lower():
                    return int(a)
        if text.lstrip("-").isdigit():
            return int(text)
        raise RuntimeError(f"GTP engine answered {text!r}, which names no legal move")

    def reset(self, ts) -> None:
        import subprocess

        n = len(ts.is_first)
        while len(self.procs) < n:
            self.procs.append(subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                               stderr=subprocess.DEVNULL, text=True, bufsize=1))
        self.seat = np.zeros(n, np.int64)
        self.own = np.zeros(n, bool)
        self.states = [self.twin.new_initial_state() if self.twin is not None else None for _ in range(n)]
        for b in range(n):
            self._send(b, "clear_board")

    def observe(self, ts, actions) -> None:
        for b, first in enumerate(np.asarray(ts.is_first)):
            if first:
                self._send(b, "clear_board")
                self.seat[b], self.own[b] = 0, False
                self.states[b] = self.twin.new_initial_state() if self.twin is not None else None
                continue
            if self.states[b] is not None and self.states[b].is_terminal():
                continue  # a finished game waiting for the round to end
            if not self.own[b]:
                self._send(b, f"play {'bw'[self.seat[b]]} {self._name(b, actions[b])}")
            if self.states[b] is not None:
                self.states[b].apply_action(int(actions[b]))
            self.seat[b], self.own[b] = 1 - self.seat[b], False

    def act(self, ts, movers):
        out = np.zeros(len(movers), np.int32)
        for b in np.flatnonzero(movers):
            out[b] = self._parse(b, self._send(b, f"genmove {'bw'[self.seat[b]]}"))
            self.own[b] = True
        return out

    def close(self) -> None:
        for p in self.procs:
            try:
                p.stdin.write("quit\n")
                p.stdin.flush()
                p.wait(timeout=10)
            except Exception:
                p.kill()
        self.procs = []


BUILTIN = ("random", "perfect", "human", "ab", "ab-D", "os-mcts-N", "mcts-N", "RUN[@CKPT]", "prior:RUN[@CKPT]",
           "az:RUN[@CKPT]", "gtp:COMMAND")


def parse_player(text: str) -> tuple[str, dict]:
    """``"head,key=value,..."`` -> ``(head, options)``; options are numbers where they parse as numbers."""
    head, *rest = [t.strip() for t in str(text).split(",")]
    options = {}
    for item in rest:
        if "=" not in item:
            raise ConfigError(f"player {text!r}: option {item!r} is not key=value")
        k, v = item.split("=", 1)
        try:
            options[k.strip()] = int(v) if v.strip().lstrip("-").isdigit() else float(v)
        except ValueError:
            options[k.strip()] = v.strip()
    if not head:
        raise ConfigError(f"player {text!r} is empty: allowed {', '.join(BUILTIN)}")
    return head, options


def make_player(text: str, game: str, seed: int = 0, game_kwargs: dict | None = None):
    """A player from its string (see the module doc) for ``game``; unknown kinds or options fail by name."""
    head, options = parse_player(text)
    eps = options.pop("eps", 0.0)

    def unused(allowed=()):
        extra = sorted(set(options) - set(allowed))
        if extra:
            raise ConfigError(f"player {text!r}: unknown option(s) {extra}; allowed: eps"
                              + "".join(f", {a}" for a in allowed))

    if head == "random":
        unused()
        player = RandomPlayer(seed)
    elif head == "perfect":
        unused()
        player = PerfectPlayer(game, seed)
    elif head == "human":
        unused()
        player = HumanPlayer(game, game_kwargs)
    elif head == "ab" or head.startswith("ab-"):
        unused()
        depth = head[len("ab-"):] if head != "ab" else None
        if depth is not None and not depth.isdigit():
            raise ConfigError(f"player {text!r}: ab-D needs a search depth in plies, e.g. ab-6 (or ab: the whole game)")
        player = AlphaBetaPlayer(game, None if depth is None else int(depth), seed, kwargs=game_kwargs)
    elif head.startswith("os-mcts-"):
        unused(("rollouts", "uct", "solve"))
        n = head[len("os-mcts-"):]
        if not n.isdigit():
            raise ConfigError(f"player {text!r}: os-mcts-N needs a number of simulations, e.g. os-mcts-100")
        player = OpenSpielMCTSPlayer(game, int(n), seed, rollouts=int(options.get("rollouts", 1)),
                                     uct_c=float(options.get("uct", 2.0)), solve=bool(options.get("solve", 1)),
                                     kwargs=game_kwargs)
    elif head.startswith("mcts-"):
        unused(("rollouts",))
        n = head[len("mcts-"):]
        if not n.isdigit():
            raise ConfigError(f"player {text!r}: mcts-N needs a number of simulations, e.g. mcts-100")
        player = TrueModelPlayer(game, int(n), rollouts=int(options.get("rollouts", 1)), seed=seed,
                                 game_kwargs=game_kwargs)
    elif head.startswith("gtp:"):
        unused()
        player = GTPPlayer(game, head[len("gtp:"):], seed, game_kwargs)
    elif head.startswith("az:"):
        unused(("sims",))
        run, _, checkpoint = head[len("az:"):].partition("@")
        if not (Path(run) / "config.yaml").is_file():
            raise ConfigError(f"player {text!r}: {run!r} is not a run directory (no config.yaml)")
        from moozi.run_dir import load_run_config

        sims = options.get("sims", load_run_config(run).test_planner.num_simulations)
        player = TrueModelPlayer(game, int(sims), run=run, checkpoint=checkpoint or "latest", seed=seed)
    else:
        mode = "search"
        if head.startswith("prior:"):
            mode, head = "prior", head[len("prior:"):]
        run, _, checkpoint = head.partition("@")
        if not (Path(run) / "config.yaml").is_file():
            raise ConfigError(f"player {text!r}: not a built-in player ({', '.join(BUILTIN)}) and {run!r} is not a "
                              "run directory (no config.yaml)")
        from moozi.run_dir import load_run_config

        if mode == "search" and load_run_config(run).model.dynamics == "simulator":
            # A run trained in AlphaZero mode searches the way it was trained: the real simulator.
            unused(("sims",))
            sims = options.get("sims", load_run_config(run).test_planner.num_simulations)
            player = TrueModelPlayer(game, int(sims), run=run, checkpoint=checkpoint or "latest", seed=seed)
            if eps:
                player = EpsilonPlayer(player, float(eps), seed + 7919)
            return player
        unused(("sims", "temp", "ms") if mode == "search" else ("temp",))
        player = RunPlayer(run, checkpoint or "latest", mode, options.get("sims"), float(options.get("temp", 0.0)),
                           seed, budget_ms=options.get("ms"))
        if player.config.env.name != game:
            raise ConfigError(f"player {text!r} was trained on {player.config.env.name}, not {game}")
    if eps:
        player = EpsilonPlayer(player, float(eps), seed + 7919)
    return player


@dataclass
class MoveClock:
    """Time spent in a player's ``act`` (and compiling in it) and the moves it made (ms per move)."""

    seconds: float = 0.0
    moves: int = 0
    calls: int = 0
    compile_s: float = 0.0
    started: float = field(default=0.0, repr=False)

    def __enter__(self):
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds += time.perf_counter() - self.started
        self.calls += 1

    @property
    def ms_per_move(self) -> float:
        """Playing time per move (compiling a new batch shape is not playing)."""
        return 1000.0 * max(self.seconds - self.compile_s, 0.0) / max(self.moves, 1)
