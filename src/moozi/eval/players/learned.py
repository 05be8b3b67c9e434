"""Players from a trained run: the learned-model search (or its prior), and search on the real simulator
(AlphaZero mode, rollout MCTS)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from moozi.config import ConfigError
from moozi.eval.players.base import PlayerSpec, _analysis, _compile_timed, _padded_rows
from moozi.eval.players.options import SearchOptions, symmetry_tables
from moozi.run_dir import run_identity


class RunPlayer:
    """A trained run's network: its test planner's search (``mode="search"``) or its prior (``mode="prior"``).

    Histories are stacked for every game at every step (as in training); only
    the games to move are searched, gathered into a batch padded to a power of
    two.
    """

    SIM_LADDER = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
    """Simulation counts a time budget chooses from (mctx cannot resume a tree, so each is its own program)."""

    def __init__(self, run: str, checkpoint: str = "latest", mode: str = "search", simulations: int | None = None,
                 temperature: float = 0.0, seed: int = 0, budget_ms: float | None = None,
                 options: SearchOptions | None = None):
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
        self.options = options or SearchOptions()
        self.options.check(run, self.env_spec.symmetries, self.config.env.name, mode == "search", temperature)
        settings = [("sims", planner.num_simulations)] if mode == "search" else []
        settings += [("temp", temperature)] if temperature else []
        settings += list(self.options.settings())
        source = str(Path(run))
        self.spec = PlayerSpec("mcts" if mode == "search" else "prior", tuple(settings), source,
                               int(meta["counters"]["updates"]), run_identity(run))
        self.checkpoint_path = meta["path"]
        self.key = jax.random.key(seed)
        self.rng = np.random.default_rng(seed)
        # Shared by every player of the same network and search (a tournament builds one per match).
        self._push, self._choose, self._compiled = self._functions()
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
        self._push, self._choose, self._compiled = self._functions()
        settings = dict(self.spec.settings)
        settings.update(sims=int(n), ms=self.budget_ms)
        self.spec = dataclasses.replace(self.spec, settings=tuple(sorted(settings.items())))

    def _functions(self):
        return _run_functions(self.model, self.config, self.planner, self.mode, self.env_spec.two_player,
                              self.options, symmetry_tables(self.options, self.env_spec.symmetries))

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
        from moozi.planner import plan, readable_tree

        if not hasattr(self, "_analysis"):
            model, config, planner = self.model, self.config, self.planner

            two_player = self.env_spec.two_player

            def analysis(params, key, history, legal):
                obs = history_observation(history, model.num_actions)
                root = model.initial_inference(params, obs)
                out, tree = plan(model, params, key, obs, legal, planner, discount=config.targets.discount,
                                 two_player=two_player, temperature=0.0, return_tree=True)
                prior = jax.nn.softmax(jnp.where(legal, root.policy_logits[:, 1:], -jnp.inf), axis=-1)
                tree = readable_tree(model, params, tree, discount=config.targets.discount, two_player=two_player)
                return out.root_policy[:, 1:], out.root_value, prior, root.value, tree

            self._analysis = jax.jit(analysis)
        legal = np.asarray(ts.legal_actions, bool)
        self.key, sub = jax.random.split(self.key)
        *found, tree = jax.device_get(self._analysis(self.params, sub, self.history, legal))
        policy, value, prior, net_value = (np.asarray(x) for x in found)
        if self.mode == "prior":
            return _analysis(prior, net_value, prior, net_value, legal, row, self.planner.num_simulations)
        return _analysis(policy, value, prior, net_value, legal, row, self.planner.num_simulations, tree,
                         self.env_spec.two_player)

    def close(self) -> None:
        pass


_RUN_FUNCTIONS: dict = {}


def _run_functions(model, config, planner, mode: str, two_player: bool, options: SearchOptions, tables=None):
    """Jitted ``push(history, obs, prev_aug, is_first)``, ``choose(params, key, history, idx, legal) -> [n, A_env]``
    and a dict for its compiled executables by batch size; cached per (network, history, search, mode, play-time
    options), so new params of the same network reuse them.

    ``choose`` returns the weights to pick from: the search's policy over
    environment actions (greedy: its most visited; mctx's own choice is the
    same move at temperature 0), the prior's probabilities, or with ``pick=``
    the final move's scores (one-hot for ``value`` and ``lcb``); with ``sym``
    the search sees the board through a random symmetry (``tables``) and the
    weights are mapped back.
    """
    key = (repr(config.model), repr(config.targets), repr(planner), repr(config.env), mode, two_player, options)
    if key not in _RUN_FUNCTIONS:
        _RUN_FUNCTIONS[key] = _build_run_functions(model, config, planner, mode, two_player, options, tables) + ({},)
    return _RUN_FUNCTIONS[key]


def _build_run_functions(model, config, planner, mode: str, two_player: bool, options: SearchOptions, tables):
    import jax
    import jax.numpy as jnp

    from moozi.envs.symmetry import draw_symmetries, transform_history, transform_legal, untransform_policy
    from moozi.model.history import history_observation, history_push
    from moozi.planner import learned_root, learned_search

    def choose(params, key, history, idx, legal):
        sub = jax.tree_util.tree_map(lambda x: jnp.take(x, idx, axis=0), history)
        if tables is not None:
            key, k_sym = jax.random.split(key)
            symmetry = draw_symmetries(k_sym, idx.shape[0], options.sym, len(tables[0]))
            sub, legal = transform_history(sub, symmetry, tables), transform_legal(legal, symmetry, tables)
        obs = history_observation(sub, model.num_actions)
        if mode == "prior":
            logits = model.initial_inference(params, obs).policy_logits[:, 1:]
            weights = jax.nn.softmax(jnp.where(legal, logits, -jnp.inf), axis=-1)
        else:
            weights = _searched(params, key, obs, legal)
        return weights if tables is None else untransform_policy(weights, symmetry, tables)

    def _searched(params, key, obs, legal):
        out, tree = learned_search(model, params, key, learned_root(model, params, obs), legal, planner,
                                   prior_temperature=options.ptemp, discount=config.targets.discount,
                                   two_player=two_player, temperature=0.0,
                                   gumbel_scale=planner.gumbel_scale if planner.kind == "gumbel" else None,
                                   return_tree=True)
        return final_weights(out, tree, options, legal.shape[-1])

    return jax.jit(history_push), jax.jit(choose)


def final_weights(out, tree, options: SearchOptions, num_env_actions: int):
    """``[n, A_env]`` weights to pick the move from (see :func:`_run_functions`): with the default pick the
    search's policy, the chosen move bumped so argmax picks mctx's choice even where visits tie; with
    ``visits`` the visit shares, ties to the search policy; with ``value`` / ``lcb`` one-hot of the best score."""
    import jax
    import jax.numpy as jnp

    from moozi.planner import final_move_scores

    if options.pick == "policy":
        return out.root_policy[:, 1:] + 1e-6 * jax.nn.one_hot(out.action - 1, num_env_actions)
    scores = final_move_scores(out, tree, options.pick, options.lcb)[:, 1:]
    if options.pick == "visits":
        return scores + 1e-6 * out.root_policy[:, 1:]
    return jax.nn.one_hot(jnp.argmax(scores, axis=-1), num_env_actions)


class TrueModelPlayer:
    """Search with the game's real simulator (``moozi.true_model``): AlphaZero mode (a run's network values
    the leaves and gives the prior) or the rollout-MCTS baseline (random playouts, uniform prior).

    Keeps its own batch of game states, stepped with every move played and
    checked against the arena's observations (a game whose states cannot be
    followed by its moves, e.g. one with chance events, fails loudly).
    """

    def __init__(self, game: str, simulations: int, run: str | None = None, checkpoint: str = "latest",
                 rollouts: int = 1, seed: int = 0, game_kwargs: dict | None = None,
                 options: SearchOptions | None = None):
        import jax

        from moozi.config import PlannerConfig
        from moozi.envs import make_env
        from moozi.true_model import network_evaluator, rollout_evaluator

        if simulations < 1 or rollouts < 1:
            raise ConfigError(f"simulations = {simulations}, rollouts = {rollouts}: allowed integers >= 1")
        if run is not None:
            from moozi.run_dir import open_run

            opened = open_run(run, checkpoint, keep_env=True)  # the game's simulator is searched: it stays open
            self.config, self.model, env, meta = opened.config, opened.model, opened.env, opened.meta
            self.params = jax.device_put(opened.params)
            self.history_length = self.config.targets.history_length
            self.discount = self.config.targets.discount
            planner = dataclasses.replace(self.config.test_planner, num_simulations=int(simulations))
            evaluate = network_evaluator(self.model)
            self.options = options or SearchOptions()
            self.options.check(run, env.spec.symmetries, self.config.env.name, True)
            self.spec = PlayerSpec("az", (("sims", simulations), *self.options.settings()), str(Path(run)),
                                   int(meta["counters"]["updates"]), run_identity(run))
            num_actions = self.model.num_actions
        else:
            env = make_env(game, **(game_kwargs or {}))
            self.params, self.model, self.history_length, self.discount = None, None, 1, 1.0
            # PUCT without root noise, the most visited move: classic MCTS (Gumbel's noisy final choice made
            # the baseline lose 8 of 100 tic-tac-toe games to a random mover at 100 simulations).
            planner = PlannerConfig(kind="puct", num_simulations=int(simulations), dirichlet_fraction=0.0)
            evaluate = rollout_evaluator(env, rollouts)
            self.options = SearchOptions()
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
        from moozi.envs.symmetry import draw_symmetries
        from moozi.model.history import history_push
        from moozi.planner import search, tempered_prior
        from moozi.true_model import symmetric_evaluator, true_root, true_step

        env, planner, discount, options = self.env, self.planner, self.discount, self.options
        tables = symmetry_tables(options, env.spec.symmetries)

        def choose(params, key, states, history, idx, seeds):
            sub_states = jax.tree_util.tree_map(lambda x: jnp.take(x, idx, axis=0), states)
            sub_history = jax.tree_util.tree_map(lambda x: jnp.take(x, idx, axis=0), history)
            node_eval = evaluate
            if tables is not None:  # the network sees every node through the row's symmetry; the game stays real
                key, k_sym = jax.random.split(key)
                node_eval = symmetric_evaluator(evaluate, draw_symmetries(k_sym, idx.shape[0], options.sym,
                                                                          len(tables[0])), tables)
            root, step = true_root(node_eval, params, sub_states, sub_history, seeds), true_step(env, node_eval)
            if options.ptemp != 1.0:
                root, step = tempered_prior(root, step, options.ptemp)
            out, tree = search(params, key, root, step, sub_states.legal_actions, planner,
                               discount=discount, two_player=env.spec.two_player, temperature=0.0,
                               gumbel_scale=planner.gumbel_scale if planner.kind == "gumbel" else None,
                               return_tree=True)
            if options.pick == "policy":
                return out.action - 1
            return jnp.argmax(final_weights(out, tree, options, sub_states.legal_actions.shape[-1]), axis=-1)

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

            two_player = self.env.spec.two_player

            def analysis(params, key, states, history):
                root = true_root(evaluate, params, states, history, jnp.zeros(states.is_last.shape, jnp.uint32))
                out, tree = search(params, key, root, true_step(env, evaluate), states.legal_actions, planner,
                                   discount=discount, two_player=two_player, temperature=0.0, return_tree=True)
                return (out.root_policy[:, 1:], out.root_value, jax.nn.softmax(root.prior_logits[:, 1:]), root.value,
                        tree)

            self._analysis = jax.jit(analysis)
        key = jax.random.key(int(self.rng.integers(2**31)))
        *found, tree = jax.device_get(self._analysis(self.params, key, self.states, self.history))
        policy, value, prior, net_value = (np.asarray(x) for x in found)
        legal = np.asarray(ts.legal_actions, bool)
        return _analysis(policy, value, prior, net_value, legal, row, self.planner.num_simulations, tree,
                         self.env.spec.two_player)

    def close(self) -> None:
        self.env.close()
