"""The driver: owns the training schedule and wires the parts (local backend).

The thesis schedule, one *epoch* at a time (../shared/DESIGN.md §1):

1. the training actor plays ``steps_per_epoch`` steps in ``num_envs`` environments;
2. finished episodes go into replay;
3. the learner runs as many updates as keep ``updates * batch_size`` equal to
   ``samples_per_env_step`` times the environment steps collected since
   training began (honoured exactly over the run, logged as
   ``train/samples_per_env_step``);
4. every ``sync_every`` epochs the learner publishes params to the actor;
5. every ``test_every`` epochs the testing worker plays ``test_episodes``
   episodes with its own planner settings and reports ``test/return_mean``.

Every component is a plain object; this is the only place that wires them.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import yaml

from moozi import acting
from moozi.checkpoint import CheckpointError, load_latest, save_checkpoint
from moozi.config import Config, ConfigError, config_from_dict, to_dict
from moozi.envs import make_env
from moozi.envs.pool import episode_seed, import_modules, make_pool
from moozi.learner import Learner
from moozi.model.history import stacked_channels
from moozi.model.networks import build_model
from moozi.observe.metrics import MetricsWriter, setup_logging
from moozi.replay import ReplayBuffer

log = logging.getLogger("moozi")

COUNTERS = ("env_steps", "updates", "epochs", "episodes", "wall_s", "ready_env_steps")


def build_parts(config: Config):
    """Environment, model and shapes for a config (no state)."""
    import_modules(config.env.modules)
    env = make_env(config.env.name, **config.env.kwargs)
    spec = env.spec
    num_actions = spec.num_actions + 1
    h, w, c = spec.observation_shape
    obs_shape = (h, w, stacked_channels(c, num_actions, config.targets.history_length))
    model = build_model(config.model, obs_shape, num_actions)
    return env, model


class Trainer:
    """One training run in one process.

    Args:
      config: the whole run's configuration.
      run_dir: where config, metrics, logs, TensorBoard events and checkpoints go.
      resume: continue from the newest good checkpoint in ``run_dir``.
      progress: optional callback ``(counters, last_metrics)`` called every epoch
        (the CLI's progress display).
    """

    def __init__(self, config: Config, run_dir: Path | str, resume: bool = False, progress: Callable | None = None):
        self.config = config
        self.run_dir = Path(run_dir)
        self.progress = progress
        # Build the game and model first: a bad name or shape fails before anything is written.
        self.env, self.model = build_parts(config)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        setup_logging(self.run_dir)
        if not resume:
            (self.run_dir / "config.yaml").write_text(yaml.safe_dump(to_dict(config), sort_keys=False))
        d = config.driver
        spec = self.env.spec
        root = jax.random.key(d.seed)
        k_learner, k_actor, k_test, k_replay = jax.random.split(root, 4)
        self.learner = Learner(self.model, config.learner, k_learner)
        self.replay = ReplayBuffer(
            config.replay, config.targets, num_actions=self.model.num_actions, frame_shape=spec.observation_shape
        )
        self.replay_rng = np.random.default_rng(np.asarray(jax.random.key_data(k_replay)).astype(np.uint32))
        L = config.targets.history_length
        self.host = spec.path == "host"
        self.assembler = acting.TrajectoryAssembler(config.env.num_envs)
        if self.host:
            self._build_host_actors(k_actor, k_test)
        else:
            self.actor_carry = acting.init_actor(self.env, config.env.num_envs, L, k_actor)
            self.rollout = acting.make_rollout(
                self.env, self.model, config.planner, config.targets.discount, d.steps_per_epoch, d.explore_moves,
                d.random_moves, d.random_move_prob,
            )
            self.test_carry = acting.init_match(self.env, d.test_envs, L, k_test)
            self.test_rollout = acting.make_match_rollout(
                self.env, self.model, config.test_planner, config.targets.discount, d.test_steps_per_segment
            )
        self.counters = {k: 0 for k in COUNTERS}
        self.counters["wall_s"] = 0.0
        self.last_test: dict[str, float] = {}
        self.actor_version, self.actor_params = self.learner.params()
        if resume:
            self._restore()
        self.metrics = MetricsWriter(self.run_dir)

    def _build_host_actors(self, k_actor, k_test) -> None:
        """Host games: a pool of Python environments for acting and one for testing."""
        from moozi.host_acting import HostActor, HostMatch

        c, d = self.config, self.config.driver
        self.env.close()  # only its spec was needed; the pools build their own copies
        pool = make_pool(c.env.name, c.env.num_envs, seed=d.seed, num_workers=c.env.num_workers,
                         modules=c.env.modules, **c.env.kwargs)
        self.host_actor = HostActor(pool, self.model, c.planner, c.targets.discount, c.targets.history_length,
                                    d.steps_per_epoch, k_actor, d.explore_moves, d.random_moves,
                                    random_move_prob=d.random_move_prob)
        test_pool = make_pool(c.env.name, d.test_envs, seed=episode_seed(d.seed, -1 % 2**31, 0),
                              modules=c.env.modules, **c.env.kwargs)
        self.host_test = HostMatch(test_pool, self.model, c.test_planner, c.targets.discount,
                                   c.targets.history_length, k_test, seed=d.seed)

    def close(self) -> None:
        """Release the host environment pools (worker processes, emulators)."""
        if self.host:
            self.host_actor.pool.close()
            self.host_test.pool.close()

    # --- checkpoints -------------------------------------------------------------------

    def _checkpoint_state(self) -> dict:
        state = {
            "learner": self.learner.state_dict(),
            "replay": self.replay.state_dict(),
            "replay_rng": self.replay_rng.bit_generator.state,
            "actor_params": self.actor_params,
        }
        if self.host:
            # Python environments cannot be saved: a resumed run starts new episodes.
            state["host_actor"] = self.host_actor.state_dict()
        else:
            state.update(actor_carry=self.actor_carry, test_carry=self.test_carry, pending=self.assembler.state_dict())
        return state

    def save(self) -> Path:
        """Write a checkpoint of everything needed to continue exactly."""
        meta = {
            "counters": dict(self.counters),
            "actor_version": self.actor_version,
            "last_test": self.last_test,
            "config": to_dict(self.config),
        }
        state = self._checkpoint_state()
        state["replay_rng"] = json.dumps(state["replay_rng"])
        path = save_checkpoint(
            self.run_dir / "checkpoints", self.counters["updates"], state, meta, keep=self.config.driver.keep_checkpoints
        )
        log.info("checkpoint written: %s", path)
        return path

    def _restore(self) -> None:
        # Structured pytrees (train state, carries) are rebuilt against this run's own
        # fresh objects as templates; replay, RNG state and pending episodes are plain data.
        template = self._checkpoint_state()
        for key in ("replay", "replay_rng", "pending", "host_actor"):
            if key in template:
                template[key] = None
        state, meta, path = load_latest(self.run_dir / "checkpoints", template=template)
        self.learner.load_state_dict(state["learner"])
        self.replay.load_state_dict(state["replay"])
        self.replay_rng.bit_generator.state = json.loads(state["replay_rng"])
        self.actor_params = state["actor_params"]
        if self.host:
            self.host_actor.load_state_dict(state["host_actor"])
            # New episodes from a seed that differs per resume point, so no episode is replayed.
            self.host_actor.restart(episode_seed(self.config.driver.seed, 1, int(meta["counters"]["epochs"])))
        else:
            self.actor_carry = state["actor_carry"]
            self.test_carry = state["test_carry"]
            self.assembler.load_state_dict(state["pending"])
        self.counters.update({k: meta["counters"][k] for k in COUNTERS})
        self.actor_version = int(meta["actor_version"])
        self.last_test = dict(meta.get("last_test") or {})
        log.info("resumed from %s at %s", path, self.counters)

    # --- the schedule ------------------------------------------------------------------

    def _collect(self) -> dict:
        d = self.config.driver
        temperature = d.temperature_at(self.counters["env_steps"])
        if self.host:
            samples = self.host_actor.rollout(self.actor_params, temperature)
        else:
            self.actor_carry, samples = self.rollout(self.actor_params, self.actor_carry, jnp.float32(temperature))
        trajectories = self.assembler.add(samples)
        for traj in trajectories:
            self.replay.add(traj)
        steps = d.steps_per_epoch * self.config.env.num_envs
        self.counters["env_steps"] += steps
        self.counters["episodes"] += len(trajectories)
        acted = ~np.asarray(samples.is_last)
        out = {
            "acting/temperature": temperature,
            "acting/root_value": float(np.mean(np.asarray(samples.root_value)[acted])) if acted.any() else 0.0,
            "acting/prior_value": float(np.mean(np.asarray(samples.prior_value)[acted])) if acted.any() else 0.0,
            "acting/policy_entropy": float(np.mean(np.asarray(samples.policy_entropy)[acted])) if acted.any() else 0.0,
            "acting/search_depth": float(np.mean(np.asarray(samples.max_depth)[acted])) if acted.any() else 0.0,
        }
        if trajectories:
            returns = [float(np.sum(t.rewards)) for t in trajectories]
            out["train/episode_return"] = float(np.mean(returns))
            out["train/episode_length"] = float(np.mean([int(t.last) for t in trajectories]))
        return out

    def _train(self) -> dict:
        d = self.config.driver
        if self.replay.size < max(d.min_replay_steps, 1) or not self.replay.ready():
            self.counters["ready_env_steps"] = self.counters["env_steps"]
            return {}
        trained_steps = self.counters["env_steps"] - self.counters["ready_env_steps"]
        due = math.floor(d.samples_per_env_step * trained_steps / d.batch_size)
        todo = max(due - self.counters["updates"], 0)
        sums: dict[str, float] = {}
        for _ in range(todo):
            batch, indices = self.replay.sample(d.batch_size, self.replay_rng)
            metrics, priorities = self.learner.update(batch)
            self.replay.update_priorities(indices, priorities)
            self.counters["updates"] += 1
            for k, v in metrics.items():
                sums[k] = sums.get(k, 0.0) + v
        out = {k: v / todo for k, v in sums.items()} if todo else {}
        if trained_steps > 0:
            out["train/samples_per_env_step"] = self.counters["updates"] * d.batch_size / trained_steps
        out["train/updates_this_epoch"] = todo
        return out

    def test(self, num_episodes: int | None = None) -> dict:
        """Play ``test_episodes`` episodes with the test planner and the latest params."""
        d = self.config.driver
        _, params = self.learner.params()
        if self.host:
            results = self.host_test.play(params, num_episodes or d.test_episodes)
        else:
            self.test_carry, results = acting.play_matches(
                self.test_rollout, params, self.test_carry, num_episodes or d.test_episodes
            )
        returns = np.array([r for r, _, _ in results])
        lengths = np.array([n for _, n, _ in results])
        self.last_test = {
            "test/return_mean": float(returns.mean()),
            "test/return_std": float(returns.std()),
            "test/return_min": float(returns.min()),
            "test/return_max": float(returns.max()),
            "test/episode_length": float(lengths.mean()),
            "test/episodes": int(len(results)),
        }
        return dict(self.last_test)

    def run(self, minutes: float | None = None) -> dict:
        """Train until ``minutes`` of wall clock pass or ``driver.max_env_steps``; checkpoint at the end."""
        d = self.config.driver
        start = time.monotonic()
        wall0 = self.counters["wall_s"]
        last_ckpt = start
        last_report = (start, self.counters["env_steps"], self.counters["updates"])
        pending: list[dict] = []
        deadline = None if minutes is None else start + 60.0 * minutes
        log.info("training %s for %s minutes", self.config.env.name, minutes)
        self._stop_requested = False
        restore_handlers = self._install_stop_handlers()
        try:
            while True:
                if self._stop_requested:
                    log.info("stop requested: finishing with a checkpoint")
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    break
                if d.max_env_steps is not None and self.counters["env_steps"] >= d.max_env_steps:
                    break
                row = self._collect()
                row.update(self._train())
                self.counters["epochs"] += 1
                if self.counters["epochs"] % d.sync_every == 0 and self.counters["updates"] > 0:
                    self.learner.publish()
                    self.actor_version, self.actor_params = self.learner.params()
                if d.test_every and self.counters["epochs"] % d.test_every == 0 and self.counters["updates"] > 0:
                    row.update(self.test())
                now = time.monotonic()
                self.counters["wall_s"] = wall0 + (now - start)
                pending.append(row)
                tested = "test/return_mean" in row
                if tested or self.counters["epochs"] % d.log_every_epochs == 0:
                    last_report = self._write_row(pending, last_report)
                    pending = []
                if now - last_ckpt >= 60.0 * d.checkpoint_every_minutes:
                    self.save()
                    last_ckpt = time.monotonic()
        finally:
            restore_handlers()
            self.counters["wall_s"] = wall0 + (time.monotonic() - start)
            if pending:
                self._write_row(pending, last_report)
            self.save()
            self.metrics.close()
        return dict(self.counters)

    def _write_row(self, rows: list[dict], since: tuple) -> tuple:
        """One metrics row: each metric averaged over the epochs that reported it, counters,
        and throughput over the row's interval. Returns the new interval start."""
        out: dict[str, float] = {}
        for key in {k for r in rows for k in r}:
            values = [r[key] for r in rows if key in r]
            out[key] = float(np.mean(values))
        now = time.monotonic()
        t0, s0, u0 = since
        dt = max(now - t0, 1e-9)
        out["perf/env_steps_per_s"] = (self.counters["env_steps"] - s0) / dt
        out["perf/updates_per_s"] = (self.counters["updates"] - u0) / dt
        out.update(self.replay.stats())
        out.update({"env_steps": self.counters["env_steps"], "updates": self.counters["updates"],
                    "epochs": self.counters["epochs"], "episodes": self.counters["episodes"],
                    "wall_s": self.counters["wall_s"], "params_version": self.actor_version})
        self.metrics.write(out, step=self.counters["env_steps"])
        if self.progress:
            self.progress(dict(self.counters), out, self.last_test)
        return (now, self.counters["env_steps"], self.counters["updates"])

    def _install_stop_handlers(self) -> Callable[[], None]:
        """Ctrl-C / SIGTERM finish the current epoch and checkpoint; a second Ctrl-C aborts.

        Stopping only between epochs means no update is cut in half (its input
        state is donated), so the final checkpoint is always consistent.
        """
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

        def request_stop(signum, frame):
            if self._stop_requested and signum == signal.SIGINT:
                raise KeyboardInterrupt
            self._stop_requested = True

        for sig in previous:
            signal.signal(sig, request_stop)

        def restore():
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore


def load_run_config(run_dir: Path | str) -> Config:
    """The resolved config saved in a run directory."""
    path = Path(run_dir) / "config.yaml"
    if not path.exists():
        raise CheckpointError(f"{run_dir} is not a moozi run directory: {path} is missing")
    return config_from_dict(yaml.safe_load(path.read_text()))


def load_params(run_dir: Path | str, model) -> tuple[object, dict]:
    """Published params and metadata of the newest good checkpoint of a run."""
    template = {"learner": {"published": model.init(jax.random.key(0))}}
    state, meta, _ = load_latest(Path(run_dir) / "checkpoints", template=template)
    params = state["learner"]["published"]
    model.check_params(params)
    return params, meta


def evaluate(run_dir: Path | str, opponent: str = "random", games: int = 100, seed: int = 0) -> dict:
    """Play ``games`` games of a trained agent (test planner, greedy) against ``opponent``.

    Two-player games: the agent takes each seat in half of the games (exactly
    half when ``games`` is even); results are from the agent's point of view.
    Single-player games ignore the opponent and report returns.
    """
    from moozi.eval.perfect import make_opponent

    config = load_run_config(run_dir)
    env, model = build_parts(config)
    try:
        opp = make_opponent(opponent, config.env.name, path=env.spec.path)
    except ValueError as err:
        raise ConfigError(f"--opponent {opponent}: {err}") from err
    params, meta = load_params(run_dir, model)
    num_envs = min(games, 128)
    if env.spec.two_player and num_envs % 2:
        num_envs = max(num_envs - 1, 2)
    if env.spec.path == "host":
        from moozi.host_acting import HostMatch

        env.close()
        c = config.env
        with make_pool(c.name, num_envs, seed=episode_seed(seed, -2 % 2**31, 0), modules=c.modules, **c.kwargs) as pool:
            match = HostMatch(pool, model, config.test_planner, config.targets.discount,
                              config.targets.history_length, jax.random.key(seed), opponent=opp, seed=seed)
            results = match.play(params, games)
    else:
        carry = acting.init_match(env, num_envs, config.targets.history_length, jax.random.key(seed))
        rollout = acting.make_match_rollout(
            env, model, config.test_planner, config.targets.discount, config.driver.test_steps_per_segment,
            opponent=opp,
        )
        _, results = acting.play_matches(rollout, params, carry, games)
    returns = np.array([r for r, _, _ in results])
    seats = np.array([s for _, _, s in results])
    out = {
        "run_dir": str(run_dir),
        "env": config.env.name,
        "opponent": opponent if env.spec.two_player else None,
        "games": int(len(results)),
        "updates": int(meta["counters"]["updates"]),
        "env_steps": int(meta["counters"]["env_steps"]),
    }
    if env.spec.two_player:
        out.update(
            wins=int(np.sum(returns > 0)),
            draws=int(np.sum(returns == 0)),
            losses=int(np.sum(returns < 0)),
            games_as_first_seat=int(np.sum(seats == 0)),
            losses_as_first_seat=int(np.sum((returns < 0) & (seats == 0))),
            losses_as_second_seat=int(np.sum((returns < 0) & (seats == 1))),
        )
    else:
        out.update(return_mean=float(returns.mean()), return_std=float(returns.std()),
                   return_min=float(returns.min()), return_max=float(returns.max()))
    return out
