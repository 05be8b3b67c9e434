"""How a run runs: the game, replay, acting, the schedule, the processes, reanalyze, tests and output."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from moozi.validate import boolean as _boolean
from moozi.validate import choice as _choice
from moozi.validate import fail as _fail
from moozi.validate import nonneg_int as _nonneg_int
from moozi.validate import number_in as _number_in
from moozi.validate import positive_int as _positive_int


@dataclass(frozen=True)
class EnvConfig:
    """Which game and how many copies.

    name: registered environment name (``moozi.envs.list_envs()``), e.g. ``gymnax:CartPole-v1``.
    kwargs: keyword arguments for the bridge (e.g. ``max_episode_steps``).
    num_envs: environments acting in lock-step (the acting batch B).
    num_workers: host games only: processes the environments are spread over
      (0 steps them in the training process; use a few for slow games such as Atari).
    modules: Python modules imported before the game is built (the user's own
      games register themselves on import; see docs/custom-game.md).
    """

    name: str = "gymnax:CartPole-v1"
    kwargs: dict = dataclasses.field(default_factory=dict)
    num_envs: int = 16
    num_workers: int = 0
    modules: tuple = ()

    def __post_init__(self):
        o = "env"
        if not isinstance(self.name, str) or ":" not in self.name:
            _fail(o, "name", self.name, "a registered name 'prefix:game' (see `moozi envs`)")
        if not isinstance(self.kwargs, dict):
            _fail(o, "kwargs", self.kwargs, "a mapping of bridge arguments")
        _positive_int(o, "num_envs", self.num_envs)
        if not isinstance(self.num_workers, int) or isinstance(self.num_workers, bool) or self.num_workers < 0:
            _fail(o, "num_workers", self.num_workers, "an integer >= 0")
        if isinstance(self.modules, str):
            object.__setattr__(self, "modules", (self.modules,))
        if not isinstance(self.modules, (list, tuple)) or not all(
            isinstance(m, str) and m and all(part.isidentifier() for part in m.split(".")) for m in self.modules
        ):
            _fail(o, "modules", self.modules, "a list of importable module names, e.g. [my_game]")
        object.__setattr__(self, "modules", tuple(self.modules))


@dataclass(frozen=True)
class ReplayConfig:
    """Replay buffer settings (``moozi.replay``).

    capacity: storage size in steps (whole episodes are evicted oldest first;
      an episode longer than this cannot be stored).
    sampling: ``"uniform"``, ``"proportional"`` (p ** alpha) or ``"rank"``
      (rank(p) ** -alpha).
    alpha: prioritisation exponent (0 gives uniform probabilities).
    beta: importance-sampling exponent (0: no correction, 1: full).
    epsilon: added to every priority ``|v* - G|`` so no position has zero mass.
    min_size: steps that must be stored before sampling is allowed.
    initial_priority: ``"computed"`` (new positions get ``|v*_t - G^N_t| + epsilon``,
      computed by the learner with :func:`moozi.targets.priorities`) or
      ``"max"`` (the largest priority seen so far, 1 at first, as in Schaul et al.).
    sample_last_step: also sample each episode's last step T (no action was
      taken there; its policy target is the dummy one-hot). MuZero samples
      ``0 .. T-1`` only, the default.
    stratified: draw one sample per equal-probability segment (lower variance)
      instead of i.i.d. draws.
    rank_refresh_fraction: rank sampling re-sorts priorities once this fraction
      of the sampleable positions has been inserted, evicted or re-prioritised.
    weight_normalization: ``"buffer"`` divides importance weights by the
      largest weight any stored position could get (Schaul et al.); ``"batch"``
      by the largest weight in the batch (EfficientZero / muzero-general). With
      ``"buffer"`` one position of tiny priority scales every weight down,
      which can silently stall learning, so the default is ``"batch"``.
    """

    capacity: int = 100_000
    sampling: Literal["uniform", "proportional", "rank"] = "proportional"
    alpha: float = 1.0
    beta: float = 1.0
    epsilon: float = 1e-6
    min_size: int = 1
    initial_priority: Literal["computed", "max"] = "computed"
    sample_last_step: bool = False
    stratified: bool = True
    rank_refresh_fraction: float = 0.1
    weight_normalization: Literal["buffer", "batch"] = "batch"

    def __post_init__(self):
        o = "replay"
        _positive_int(o, "capacity", self.capacity)
        _choice(o, "sampling", self.sampling, ("uniform", "proportional", "rank"))
        _number_in(o, "alpha", self.alpha, 0.0, float("inf"))
        _number_in(o, "beta", self.beta, 0.0, float("inf"))
        _number_in(o, "epsilon", self.epsilon, 0.0, float("inf"))
        _nonneg_int(o, "min_size", self.min_size)
        _choice(o, "initial_priority", self.initial_priority, ("computed", "max"))
        _boolean(o, "sample_last_step", self.sample_last_step)
        _boolean(o, "stratified", self.stratified)
        _number_in(o, "rank_refresh_fraction", self.rank_refresh_fraction, 0.0, 1.0, lo_open=True)
        _choice(o, "weight_normalization", self.weight_normalization, ("buffer", "batch"))
        if self.min_size > self.capacity:
            _fail(o, "min_size", self.min_size, f"at most capacity = {self.capacity}")
        if self.sampling == "proportional" and self.epsilon == 0.0 and self.alpha > 0.0:
            # Zero-priority positions would never be sampled and make weights infinite.
            _fail(o, "epsilon", self.epsilon, "a number > 0 for proportional sampling")


@dataclass(frozen=True)
class ActingConfig:
    """How the training actors play and explore.

    steps_per_epoch: acting steps per environment per epoch (one rollout segment).
    temperature: ``[[env_steps, temperature], ...]`` piecewise-constant PUCT
      visit-count temperature of training moves (thesis: 1.0, then lower as
      training goes on; 0 plays the most visited action). Gumbel search
      explores through its own noise (``planner.gumbel_scale``). Test and
      evaluation games have their own (``testing.temperature``, 0: greedy).
    explore_moves: explore (temperature, Gumbel noise) only on the first
      this-many moves of each episode, greedy after (AlphaZero's opening
      exploration); None explores on every move.
    random_moves: the first this-many moves of every training episode are
      uniformly random legal moves (the search still runs and its policy is the
      target): self-play then meets every opening (board games).
    random_move_prob: every later training move is a uniformly random legal
      move with this probability (epsilon exploration; 0 = off). Value targets
      never run through a random move: they stop there and bootstrap from the
      search value (see moozi.targets).
    play_best: training workers act with ``checkpoints/best`` (the params that
      last won the gate, or graded best: ``grading.keep_best``) instead of the
      newest, as AlphaGo Zero and AlphaZero.jl's self-play; the newest until a
      best exists. Tests and reanalyze still use the newest. Needs
      ``gating.every_checkpoints > 0`` or ``grading.keep_best``.
    """

    steps_per_epoch: int = 32
    temperature: tuple[tuple[int, float], ...] = ((0, 1.0),)
    explore_moves: int | None = None
    random_moves: int = 0
    random_move_prob: float = 0.0
    play_best: bool = False

    def __post_init__(self):
        o = "acting"
        _boolean(o, "play_best", self.play_best)
        _positive_int(o, "steps_per_epoch", self.steps_per_epoch)
        _nonneg_int(o, "random_moves", self.random_moves)
        _number_in(o, "random_move_prob", self.random_move_prob, 0.0, 1.0)
        if self.explore_moves is not None:
            _nonneg_int(o, "explore_moves", self.explore_moves)
        sched = self.temperature
        ok = isinstance(sched, tuple) and len(sched) >= 1 and all(
            isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], int) and p[0] >= 0
            and isinstance(p[1], (int, float)) and p[1] >= 0 for p in sched
        )
        if ok:
            ok = sched[0][0] == 0 and all(a[0] < b[0] for a, b in zip(sched, sched[1:]))
        if not ok:
            _fail(o, "temperature", sched, "a list of [env_steps, temperature] pairs starting at 0, steps increasing")

    def temperature_at(self, env_steps: int) -> float:
        """Acting temperature after ``env_steps`` environment steps."""
        value = self.temperature[0][1]
        for start, temp in self.temperature:
            if env_steps >= start:
                value = temp
        return float(value)


@dataclass(frozen=True)
class ScheduleConfig:
    """The training schedule (thesis: collect -> replay -> updates -> sync -> test).

    kind: ``"sync"`` (the thesis's epochs: act, store, train, publish, test, in
      turn; the replay ratio exact) or ``"async"`` (acting and learning run
      continuously, IMPALA-style; a rate limiter keeps the replay ratio and
      ``max_policy_lag`` bounds how stale the acting parameters are) or
      ``"device"`` (JAX-native games: acting, a replay in device memory and
      the updates fused into one compiled chunk per host call, in the learner;
      :mod:`moozi.fused`). See docs/distributed.md.
    samples_per_env_step: replay ratio, trained samples (updates x batch size)
      per environment step; honoured exactly over the run (sync) or within
      ``ratio_slack`` (async). With reanalyze on, a reanalyzed position counts
      as a step too (``reanalyze.count_in_ratio``).
    batch_size: learner batch size.
    min_replay_steps: stored steps needed before the first update.
    sync_every: sync: epochs between publishing learner params to the actors.
    max_env_steps: stop after this many environment steps (None: no limit).
    seed: root of every random stream.
    updates_per_call: async: updates per learner call; params are published
      after each call (one version per call).
    max_policy_lag: async: a segment is started only with params at most this
      many versions old, and the learner does not publish a version that would
      make an acting segment in flight staler than this.
    epochs_per_call: device: epochs (a segment acted, then the updates the
      replay ratio owes for it) fused into one host call; publishing, tests
      and checkpoints fall between calls, and a run may pass
      ``max_env_steps`` by up to ``epochs_per_call - 1`` epochs.
    ratio_slack: async: how many samples the learner may run ahead of (or
      behind) ``samples_per_env_step`` x inserted steps before the faster side
      waits (None: one learner call plus one segment's worth).
    """

    kind: Literal["sync", "async", "device"] = "sync"
    samples_per_env_step: float = 1.0
    batch_size: int = 128
    min_replay_steps: int = 1000
    sync_every: int = 1
    max_env_steps: int | None = None
    seed: int = 0
    updates_per_call: int = 4
    max_policy_lag: int = 4
    ratio_slack: int | None = None
    epochs_per_call: int = 1

    def __post_init__(self):
        o = "schedule"
        _choice(o, "kind", self.kind, ("sync", "async", "device"))
        _number_in(o, "samples_per_env_step", self.samples_per_env_step, 0.0, float("inf"), lo_open=True)
        _positive_int(o, "batch_size", self.batch_size)
        _nonneg_int(o, "min_replay_steps", self.min_replay_steps)
        _positive_int(o, "sync_every", self.sync_every)
        if self.max_env_steps is not None:
            _positive_int(o, "max_env_steps", self.max_env_steps)
        _nonneg_int(o, "seed", self.seed)
        _positive_int(o, "updates_per_call", self.updates_per_call)
        _positive_int(o, "max_policy_lag", self.max_policy_lag)
        if self.ratio_slack is not None:
            _positive_int(o, "ratio_slack", self.ratio_slack)
        _positive_int(o, "epochs_per_call", self.epochs_per_call)

    @property
    def acts_in_learner(self) -> bool:
        """The device schedule: the learner acts, keeps the replay and learns (no training workers)."""
        return self.kind == "device"


@dataclass(frozen=True)
class DistributedConfig:
    """Where the components run (docs/distributed.md).

    backend: ``"local"`` (default: every component in this process, no Ray
      import) or ``"ray"`` (each component a Ray actor; ``pip install 'moozi[ray]'``).
    address: ray only: an existing cluster (``HOST:PORT``); None starts a
      private one on this machine bound to 127.0.0.1.
    train_workers: W, training workers (each plays ``env.num_envs`` games).
    reanalyze_workers: R, reanalyze workers (used when ``reanalyze.fraction`` > 0).
    cpus_per_worker: CPUs reserved for (and XLA threads of) each worker.
    learner_cpus / learner_gpus: resources of the learner (which owns replay).
      On Ray each component is pinned to that many cores, round-robin per
      node; in an async run, where a node has cores beyond the learner's,
      the learner's stay its own and the other components share the rest.
    train_worker_gpus / test_worker_gpus / reanalyze_worker_gpus: ray only: the
      GPUs (fractions allowed, as Ray's) each training worker, the tester and
      each reanalyze worker reserve for their searches; 0 (default) keeps that
      component's JAX on the CPU. A fraction below 1 caps the component's JAX
      memory at that share of the GPU (no preallocation), so several share one
      (the thesis: 30 workers on 8 GPUs). The local backend runs every
      component in one process and ignores them.
    max_restarts: restarts allowed per worker slot before the run fails.
    restart_backoff_s: first wait before a restart (doubles per restart of the slot).
    object_store_mb: ray only: object store size when moozi starts Ray.
    placement_timeout_s: ray only: how long to wait for the resources before failing.
    num_cpus: ray only: CPUs of the private cluster (None: what the workers need).
    slowdown_learner / slowdown_workers: make every training call of the
      learner, or every segment of a training worker, take this many times as
      long (by waiting afterwards): for testing the async rate limiter; 1 = off.
    """

    backend: Literal["local", "ray"] = "local"
    address: str | None = None
    train_workers: int = 1
    reanalyze_workers: int = 1
    cpus_per_worker: float = 1.0
    learner_cpus: float = 1.0
    learner_gpus: float = 0.0
    train_worker_gpus: float = 0.0
    test_worker_gpus: float = 0.0
    reanalyze_worker_gpus: float = 0.0
    max_restarts: int = 10
    restart_backoff_s: float = 0.5
    object_store_mb: int = 256
    placement_timeout_s: float = 30.0
    num_cpus: int | None = None
    slowdown_learner: float = 1.0
    slowdown_workers: float = 1.0

    def __post_init__(self):
        o = "distributed"
        _choice(o, "backend", self.backend, ("local", "ray"))
        if self.address is not None and (not isinstance(self.address, str) or not self.address):
            _fail(o, "address", self.address, "HOST:PORT of a running Ray cluster, or null")
        _positive_int(o, "train_workers", self.train_workers)
        _nonneg_int(o, "reanalyze_workers", self.reanalyze_workers)
        _number_in(o, "cpus_per_worker", self.cpus_per_worker, 0.0, 1024.0, lo_open=True)
        _number_in(o, "learner_cpus", self.learner_cpus, 0.0, 1024.0, lo_open=True)
        for key in ("learner_gpus", "train_worker_gpus", "test_worker_gpus", "reanalyze_worker_gpus"):
            _number_in(o, key, getattr(self, key), 0.0, 64.0)
        _nonneg_int(o, "max_restarts", self.max_restarts)
        _number_in(o, "restart_backoff_s", self.restart_backoff_s, 0.0, 600.0)
        if not isinstance(self.object_store_mb, int) or isinstance(self.object_store_mb, bool) or self.object_store_mb < 80:
            _fail(o, "object_store_mb", self.object_store_mb, "an integer >= 80 (Ray's minimum is 75 MB)")
        _number_in(o, "placement_timeout_s", self.placement_timeout_s, 0.0, 3600.0, lo_open=True)
        if self.num_cpus is not None:
            _positive_int(o, "num_cpus", self.num_cpus)
        _number_in(o, "slowdown_learner", self.slowdown_learner, 1.0, 100.0)
        _number_in(o, "slowdown_workers", self.slowdown_workers, 1.0, 100.0)


@dataclass(frozen=True)
class ReanalyzeConfig:
    """Re-searching stored positions with the target parameters (MuZero Reanalyze).

    fraction: share of all searches spent on stored positions: reanalyzed
      positions / (acted steps + reanalyzed positions). 0 turns reanalyze off;
      0.5 re-searches as many stored positions as the actors play steps.
    positions_per_call: positions (whole stored episodes, stalest search
      first) handed to a reanalyze worker per call.
    envs: stored episodes a reanalyze worker replays in lock-step (its batch).
    count_in_ratio: a reanalyzed position counts like an acted step for
      ``schedule.samples_per_env_step`` (MuZero Reanalyse: a fraction f of the
      learner's fresh targets come from reanalysis, so the learner trains on
      1 / (1 - f) times as many samples per env step). False: reanalyze only
      refreshes stored targets and the updates per env step stay as without it.
    """

    fraction: float = 0.0
    positions_per_call: int = 512
    envs: int = 16
    count_in_ratio: bool = True

    def __post_init__(self):
        o = "reanalyze"
        _number_in(o, "fraction", self.fraction, 0.0, 0.95)
        _positive_int(o, "positions_per_call", self.positions_per_call)
        _positive_int(o, "envs", self.envs)
        if not isinstance(self.count_in_ratio, bool):
            _fail(o, "count_in_ratio", self.count_in_ratio, "true or false")


@dataclass(frozen=True)
class TestingConfig:
    """The testing worker: greedy games with ``test_planner`` and the latest params.

    every: epochs between tests (0 disables).
    episodes: episodes per test (every test environment plays the same number).
    envs: environments used for testing.
    steps_per_segment: acting steps per test rollout call (device games).
    health_tests: when the median test return of the last this-many tests is
      no better than that of the first this-many, the run is flagged on the console and
      as ``health/ok = 0`` (0: never; see moozi.observe.health).
    keep_best: keep the published params with the best test score as the
      checkpoint ``checkpoints/best`` (``moozi eval RUN --checkpoint best``).
    best_window: the score is the mean test return of the last this-many
      tests (one test of a few episodes is noisy); ties go to the newer params.
    record_every: every this-many tests, one test episode is drawn as
      ``RUN/gifs/test-UPDATES.gif`` and a TensorBoard image (0: never; then
      test games keep no frames and nothing is drawn).
    opponent: two-player games: who the test games are played against,
      ``"random"`` or ``"perfect"`` (tic-tac-toe only; then the test score, and
      so the ``best`` checkpoint, ranks params by how they fare against
      perfect play instead of against a random mover).
    temperature: test moves are drawn from the search's policy raised to
      ``1 / temperature`` (0: greedy, the search's own choice).
    random_moves / random_move_prob: the agent's first this-many moves of a
      test game are uniformly random, and each later one with this probability
      (an epsilon test). A greedy test of a deterministic game (gymnax MinAtar
      from its reset) is one game repeated; these make the episodes differ.
    """

    __test__ = False  # not a pytest class

    every: int = 5
    episodes: int = 16
    envs: int = 16
    steps_per_segment: int = 100
    health_tests: int = 8
    keep_best: bool = True
    best_window: int = 3
    record_every: int = 0
    opponent: str = "random"
    temperature: float = 0.0
    random_moves: int = 0
    random_move_prob: float = 0.0

    def __post_init__(self):
        o = "testing"
        _number_in(o, "temperature", self.temperature, 0.0, float("inf"))
        _nonneg_int(o, "random_moves", self.random_moves)
        _number_in(o, "random_move_prob", self.random_move_prob, 0.0, 1.0)
        _choice(o, "opponent", self.opponent, ("random", "perfect"))
        _nonneg_int(o, "every", self.every)
        _nonneg_int(o, "health_tests", self.health_tests)
        _boolean(o, "keep_best", self.keep_best)
        _positive_int(o, "best_window", self.best_window)
        _nonneg_int(o, "record_every", self.record_every)
        for name in ("episodes", "envs", "steps_per_segment"):
            _positive_int(o, name, getattr(self, name))


@dataclass(frozen=True)
class OutputConfig:
    """Checkpoints and logging.

    checkpoint_every_minutes: wall-clock minutes between checkpoints.
    keep_checkpoints: how many checkpoints to keep.
    replay_every_checkpoints: the replay buffer (the large part) is written
      with every this-many checkpoints; 1 (default) makes every checkpoint an
      exact resume point. With more, a resume restores replay from the newest
      checkpoint that holds it (and says so).
    log_every_epochs: epochs per metrics row (values averaged over them); an
      epoch that ran a test always ends a row.
    keep_every_updates: also keep the params of the first checkpoint past every
      this-many updates in ``checkpoints/kept/`` (params only, never pruned), so a
      long run leaves a series to sweep (``moozi sweep``); 0 (default): off.
    histogram_every_updates: TensorBoard histograms of every parameter and of
      Adam's gradient average at the first metrics row past every this-many
      updates (the learner counts them, a few dozen numbers per leaf reach the
      driver); 0 (default): off.
    profile_epoch: trace one steady epoch into ``RUN/profile``, with a picture
      of it (:mod:`moozi.observe.profile`): the N-th after the first epoch that
      learned (whose learning step compiled); ``moozi train --profile`` sets 1;
      0 (default): off.
    """

    checkpoint_every_minutes: float = 5.0
    keep_checkpoints: int = 3
    replay_every_checkpoints: int = 1
    log_every_epochs: int = 10
    keep_every_updates: int = 0
    histogram_every_updates: int = 0
    profile_epoch: int = 0

    def __post_init__(self):
        o = "output"
        _nonneg_int(o, "profile_epoch", self.profile_epoch)
        _nonneg_int(o, "histogram_every_updates", self.histogram_every_updates)
        _number_in(o, "checkpoint_every_minutes", self.checkpoint_every_minutes, 0.0, float("inf"), lo_open=True)
        _positive_int(o, "keep_checkpoints", self.keep_checkpoints)
        _positive_int(o, "replay_every_checkpoints", self.replay_every_checkpoints)
        _positive_int(o, "log_every_epochs", self.log_every_epochs)
        _nonneg_int(o, "keep_every_updates", self.keep_every_updates)
