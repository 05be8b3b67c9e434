"""Frozen, validated configuration for the core (model, planner, targets, learner).

Every config is a frozen dataclass that validates itself on construction and
raises :class:`ConfigError` naming the offending field and what is allowed.
``from_dict`` builds a config from plain data (YAML, overrides) and rejects
unknown keys, so a typo fails before any work starts.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Mapping, TypeVar

from moozi.errors import ConfigError
from moozi.validate import boolean as _boolean
from moozi.validate import choice as _choice
from moozi.validate import fail as _fail
from moozi.validate import nonneg_int as _nonneg_int
from moozi.validate import number_in as _number_in
from moozi.validate import positive_int as _positive_int


@dataclass(frozen=True)
class ModelConfig:
    """Network family and sizes (docs/architecture.md §5).

    kind: ``"resnet"`` (image observations, thesis layout) or ``"mlp"`` (vector
      observations, tiny tests).
    channels: residual trunk channels (thesis 32).
    repr_blocks / dyn_blocks: residual blocks in representation / dynamics (thesis 6).
    pred_blocks / proj_blocks: residual blocks in prediction / projection (thesis 1).
    head_hidden: width of the dense layer in each head (thesis 128).
    mlp_hidden: widths of MLP trunks; ``mlp_embedding``: MLP hidden-state size.
    support_size: categorical support is the integers ``[-S, S]`` (thesis 30).
    value_transform: ``"phi"`` (thesis: two-hot of phi(x)) or ``"identity"``
      (two-hot of x itself; for board games with outcomes in [-1, 1], S = 1).
    normalize_hidden: min-max scale hidden states to [0, 1] (MuZero).
    dynamics: what the search steps: ``"learned"`` (MuZero: the dynamics
      network) or ``"simulator"`` (AlphaZero mode, JAX-native games only: the
      game's own simulator; only representation and prediction are trained,
      there are no dynamics, reward or consistency losses, and
      ``targets.unroll_steps`` is 0).
    mover_relative: relabel two-player boards so the player to move is
      always player 0 before the representation (both seats then share what
      is learnt; :mod:`moozi.model.perspective`). Only for games that declare
      their piece planes (``EnvSpec.player_planes``: OpenSpiel tic-tac-toe and
      connect four; pgx boards are mover-relative already).
    """

    kind: Literal["resnet", "mlp"] = "resnet"
    channels: int = 32
    repr_blocks: int = 6
    dyn_blocks: int = 6
    pred_blocks: int = 1
    proj_blocks: int = 1
    head_hidden: int = 128
    mlp_hidden: tuple[int, ...] = (128, 128)
    mlp_embedding: int = 64
    support_size: int = 30
    value_transform: Literal["phi", "identity"] = "phi"
    normalize_hidden: bool = True
    dynamics: Literal["learned", "simulator"] = "learned"
    mover_relative: bool = False

    def __post_init__(self):
        o = "model"
        _choice(o, "kind", self.kind, ("resnet", "mlp"))
        _choice(o, "dynamics", self.dynamics, ("learned", "simulator"))
        _choice(o, "value_transform", self.value_transform, ("phi", "identity"))
        for name in ("channels", "head_hidden", "mlp_embedding", "support_size"):
            _positive_int(o, name, getattr(self, name))
        for name in ("repr_blocks", "dyn_blocks", "pred_blocks", "proj_blocks"):
            _nonneg_int(o, name, getattr(self, name))
        if not isinstance(self.mlp_hidden, tuple) or not all(
            isinstance(w, int) and not isinstance(w, bool) and w >= 1 for w in self.mlp_hidden
        ):
            _fail(o, "mlp_hidden", self.mlp_hidden, "a tuple of integers >= 1")
        for name in ("normalize_hidden", "mover_relative"):
            if not isinstance(getattr(self, name), bool):
                _fail(o, name, getattr(self, name), "true or false")

    @property
    def num_bins(self) -> int:
        return 2 * self.support_size + 1


@dataclass(frozen=True)
class PlannerConfig:
    """Search settings (mctx).

    kind: ``"puct"`` (``mctx.muzero_policy``) or ``"gumbel"`` (``mctx.gumbel_muzero_policy``).
    num_simulations: simulations per search.
    pb_c_init / pb_c_base: PUCT constants c1, c2.
    dirichlet_alpha / dirichlet_fraction: root noise (PUCT only; fraction 0 disables).
    max_num_considered_actions / gumbel_scale: Gumbel root settings
      (gumbel_scale 0 makes the search deterministic, for evaluation).
    max_depth: optional cap on search depth (None: num_simulations).
    """

    kind: Literal["puct", "gumbel"] = "puct"
    num_simulations: int = 25
    pb_c_init: float = 1.25
    pb_c_base: float = 19652.0
    dirichlet_alpha: float = 0.3
    dirichlet_fraction: float = 0.25
    max_num_considered_actions: int = 16
    gumbel_scale: float = 1.0
    max_depth: int | None = None

    def __post_init__(self):
        o = "planner"
        _choice(o, "kind", self.kind, ("puct", "gumbel"))
        _positive_int(o, "num_simulations", self.num_simulations)
        _number_in(o, "pb_c_init", self.pb_c_init, 0.0, float("inf"), lo_open=True)
        _number_in(o, "pb_c_base", self.pb_c_base, 0.0, float("inf"), lo_open=True)
        _number_in(o, "dirichlet_alpha", self.dirichlet_alpha, 0.0, float("inf"), lo_open=True)
        _number_in(o, "dirichlet_fraction", self.dirichlet_fraction, 0.0, 1.0)
        _positive_int(o, "max_num_considered_actions", self.max_num_considered_actions)
        _number_in(o, "gumbel_scale", self.gumbel_scale, 0.0, float("inf"))
        if self.max_depth is not None:
            _positive_int(o, "max_depth", self.max_depth)


@dataclass(frozen=True)
class TargetConfig:
    """How training targets are built (docs/architecture.md §4).

    history_length: L frames and actions stacked into one observation (thesis 4).
    unroll_steps: K dynamics steps unrolled in training (thesis 5); 0 only in
      AlphaZero mode (``model.dynamics = simulator``), which sets it to 0.
    td_steps: N, the n-step return horizon (thesis 10).
    discount: gamma (thesis 0.997).
    """

    history_length: int = 4
    unroll_steps: int = 5
    td_steps: int = 10
    discount: float = 0.997

    def __post_init__(self):
        o = "targets"
        _positive_int(o, "history_length", self.history_length)
        _nonneg_int(o, "unroll_steps", self.unroll_steps)
        _positive_int(o, "td_steps", self.td_steps)
        _number_in(o, "discount", self.discount, 0.0, 1.0)


@dataclass(frozen=True)
class LearnerConfig:
    """Loss coefficients and optimiser (docs/architecture.md §6).

    value_coef: c^v; consistency_coef: c^s; l2_coef: c^{L2}.
    learning_rate: Adam step size (peak, if a schedule is used).
    lr_schedule: ``"constant"``, ``"cosine"`` (warmup then cosine decay to 0 at
      ``decay_steps``) or ``"linear"`` (warmup then linear decay to 0).
    warmup_steps / decay_steps: schedule lengths in updates.
    lr_decay_over: what the decay runs over: ``"updates"`` (``decay_steps``)
      or ``"budget"``: the share of the run's budget used, the larger of
      env steps / ``schedule.max_env_steps`` and elapsed / ``--minutes``
      (the learning rate reaches its floor when the budget ends, whatever the
      machine's speed; a resume with more ``--minutes`` extends the budget).
    lr_final_fraction: the floor the decay ends at, as a fraction of
      ``learning_rate`` (0: decay to 0).
    lr_decay_start: the share of the decay's span (the budget, or
      ``decay_steps``) held at the peak before the decay begins (0: decay from
      the start; 0.5: constant for the first half, then the whole decay in
      the second).
    max_grad_norm: global-norm clipping threshold.
    target_update_period: updates between target-network refreshes.
    ema_decay: 0 (off) or the decay of an exponential moving average of the
      params (e.g. 0.99); when on, acting, testing, evaluation and checkpoints'
      published params are the average, not the newest params.
    augment_symmetries: show every sampled window to the learner through a
      random one of the game's board symmetries (AlphaZero's augmentation;
      the game must declare some: ``EnvSpec.symmetries``).
    """

    value_coef: float = 0.25
    consistency_coef: float = 2.0
    l2_coef: float = 1e-4
    learning_rate: float = 1e-2
    lr_schedule: Literal["constant", "cosine", "linear"] = "constant"
    warmup_steps: int = 0
    decay_steps: int = 100_000
    lr_decay_over: Literal["updates", "budget"] = "updates"
    lr_final_fraction: float = 0.0
    lr_decay_start: float = 0.0
    max_grad_norm: float = 5.0
    target_update_period: int = 500
    ema_decay: float = 0.0
    augment_symmetries: bool = False

    def __post_init__(self):
        o = "learner"
        for name in ("value_coef", "consistency_coef", "l2_coef"):
            _number_in(o, name, getattr(self, name), 0.0, float("inf"))
        _number_in(o, "learning_rate", self.learning_rate, 0.0, float("inf"), lo_open=True)
        _choice(o, "lr_schedule", self.lr_schedule, ("constant", "cosine", "linear"))
        _nonneg_int(o, "warmup_steps", self.warmup_steps)
        _positive_int(o, "decay_steps", self.decay_steps)
        _choice(o, "lr_decay_over", self.lr_decay_over, ("updates", "budget"))
        _number_in(o, "lr_final_fraction", self.lr_final_fraction, 0.0, 1.0)
        _number_in(o, "lr_decay_start", self.lr_decay_start, 0.0, 1.0, hi_open=True)
        _number_in(o, "ema_decay", self.ema_decay, 0.0, 1.0, hi_open=True)
        _number_in(o, "max_grad_norm", self.max_grad_norm, 0.0, float("inf"), lo_open=True)
        _positive_int(o, "target_update_period", self.target_update_period)
        _boolean(o, "augment_symmetries", self.augment_symmetries)


C = TypeVar("C")


def _convert(owner: str, name: str, tp: Any, value: Any) -> Any:
    """Coerce plain data (YAML/CLI) to the annotated field type, or fail naming the field."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            _fail(owner, name, value, f"a mapping of {tp.__name__} fields")
        return from_dict(tp, value, owner=f"{owner}.{name}" if owner else name)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _convert(owner, name, inner[0], value)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            _fail(owner, name, value, "a list")
        if len(args) == 2 and args[1] is Ellipsis:  # tuple[X, ...]
            return tuple(_convert(owner, name, args[0], v) for v in value)
        if len(value) != len(args):
            _fail(owner, name, value, f"a list of {len(args)} items")
        return tuple(_convert(owner, name, a, v) for a, v in zip(args, value))
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def from_dict(cls: type[C], data: Mapping[str, Any], owner: str = "") -> C:
    """Build config ``cls`` from a mapping, rejecting unknown keys by name."""
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    prefix = owner or getattr(cls, "__name__", "config")
    for key in data:
        if key not in known:
            raise ConfigError(
                f"unknown key {prefix}.{key}: allowed keys are " + ", ".join(sorted(known))
            )
    kwargs = {k: _convert(owner, k, hints[k], v) for k, v in data.items()}
    return cls(**kwargs)


def to_dict(config: Any) -> dict:
    """Plain-data view of a config (tuples become lists), for YAML."""

    def plain(x):
        if isinstance(x, tuple):
            return [plain(v) for v in x]
        if isinstance(x, dict):
            return {k: plain(v) for k, v in x.items()}
        return x

    return plain(dataclasses.asdict(config))


__all__ = [
    "ConfigError",
    "ModelConfig",
    "PlannerConfig",
    "TargetConfig",
    "LearnerConfig",
    "EnvConfig",
    "ReplayConfig",
    "ActingConfig",
    "ScheduleConfig",
    "TestingConfig",
    "OutputConfig",
    "TournamentConfig",
    "GatingConfig",
    "Config",
    "from_dict",
    "to_dict",
    "config_from_dict",
    "apply_overrides",
]


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
      evaluation games are always greedy.
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
    """

    steps_per_epoch: int = 32
    temperature: tuple[tuple[int, float], ...] = ((0, 1.0),)
    explore_moves: int | None = None
    random_moves: int = 0
    random_move_prob: float = 0.0

    def __post_init__(self):
        o = "acting"
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
      ``max_policy_lag`` bounds how stale the acting parameters are). See
      docs/distributed.md.
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
    ratio_slack: async: how many samples the learner may run ahead of (or
      behind) ``samples_per_env_step`` x inserted steps before the faster side
      waits (None: one learner call plus one segment's worth).
    """

    kind: Literal["sync", "async"] = "sync"
    samples_per_env_step: float = 1.0
    batch_size: int = 128
    min_replay_steps: int = 1000
    sync_every: int = 1
    max_env_steps: int | None = None
    seed: int = 0
    updates_per_call: int = 4
    max_policy_lag: int = 4
    ratio_slack: int | None = None

    def __post_init__(self):
        o = "schedule"
        _choice(o, "kind", self.kind, ("sync", "async"))
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
        _number_in(o, "learner_gpus", self.learner_gpus, 0.0, 64.0)
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

    def __post_init__(self):
        o = "testing"
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
    """

    checkpoint_every_minutes: float = 5.0
    keep_checkpoints: int = 3
    replay_every_checkpoints: int = 1
    log_every_epochs: int = 10

    def __post_init__(self):
        o = "output"
        _number_in(o, "checkpoint_every_minutes", self.checkpoint_every_minutes, 0.0, float("inf"), lo_open=True)
        _positive_int(o, "keep_checkpoints", self.keep_checkpoints)
        _positive_int(o, "replay_every_checkpoints", self.replay_every_checkpoints)
        _positive_int(o, "log_every_epochs", self.log_every_epochs)


@dataclass(frozen=True)
class TournamentConfig:
    """Periodic tournaments during training (two-player games; off by default).

    every_checkpoints: after every this-many periodic checkpoints, the newest
      checkpoint plays ``pairs`` pairs against each anchor and against the
      ``previous`` newest earlier checkpoints still kept; the games go to
      ``RUN/ratings/games.jsonl`` and the pool's ratings (one joint fit,
      ``random`` or the first anchor at 0) to the metrics as ``rating/*``
      (0: never).
    pairs: pairs of games per match.
    anchors: fixed opponents, ``moozi match`` player strings (e.g.
      ``[random, os-mcts-100]``, ``[perfect]`` for tic-tac-toe).
    previous: earlier checkpoints to play (0: anchors only).
    opening_plies: random plies opening each pair.
    max_share: a tournament is skipped while tournaments have taken more than
      this share of the run's wall clock (so rating never starves training).
    """

    every_checkpoints: int = 0
    pairs: int = 20
    anchors: tuple = ("random",)
    previous: int = 1
    opening_plies: int = 2
    max_share: float = 0.2

    def __post_init__(self):
        o = "tournament"
        _nonneg_int(o, "every_checkpoints", self.every_checkpoints)
        _positive_int(o, "pairs", self.pairs)
        _nonneg_int(o, "previous", self.previous)
        _nonneg_int(o, "opening_plies", self.opening_plies)
        _number_in(o, "max_share", self.max_share, 0.0, 1.0, lo_open=True)
        anchors = (self.anchors,) if isinstance(self.anchors, str) else self.anchors
        if not isinstance(anchors, (list, tuple)) or not all(isinstance(a, str) and a for a in anchors):
            _fail(o, "anchors", self.anchors, "a list of player strings, e.g. [random, os-mcts-100]")
        object.__setattr__(self, "anchors", tuple(anchors))


@dataclass(frozen=True)
class GatingConfig:
    """Gating during training (two-player games; off by default, as MuZero updates continuously): the
    newest checkpoint plays the current ``best`` and replaces it only when a test says it is stronger.

    every_checkpoints: after every this-many periodic checkpoints, gate the
      newest one (0: never). With gating on, ``checkpoints/best`` is the
      best-gated params (the first checkpoint starts it) instead of the best
      by test returns (``testing.keep_best``).
    method: ``"sprt"`` (stop as soon as H0 or H1 is accepted),
      ``"hoeffding"`` (a sample sized from ``margin`` and ``alpha``) or
      ``"fixed"`` (``max_pairs`` pairs, accept at ``threshold``), as ``moozi match --gate``.
    elo0 / elo1 / alpha / beta: the SPRT's hypotheses (Elo of new minus best)
      and error rates; ``alpha`` is also Hoeffding's delta.
    margin: Hoeffding's margin; threshold: the fixed score to reach.
    max_pairs: the most pairs a gate plays (an undecided SPRT keeps the best).
    opening_plies: random plies opening each pair.
    max_share: gating is skipped while it has taken more than this share of the run's wall clock.

    Gating games are never added to the rating pool (a stopping rule chose them).
    """

    every_checkpoints: int = 0
    method: Literal["sprt", "hoeffding", "fixed"] = "sprt"
    elo0: float = 0.0
    elo1: float = 50.0
    alpha: float = 0.05
    beta: float = 0.05
    margin: float = 0.1
    threshold: float = 0.55
    max_pairs: int = 200
    opening_plies: int = 2
    max_share: float = 0.2

    def __post_init__(self):
        o = "gating"
        _nonneg_int(o, "every_checkpoints", self.every_checkpoints)
        _choice(o, "method", self.method, ("sprt", "hoeffding", "fixed"))
        _number_in(o, "alpha", self.alpha, 0.0, 0.5, lo_open=True, hi_open=True)
        _number_in(o, "beta", self.beta, 0.0, 0.5, lo_open=True, hi_open=True)
        _number_in(o, "margin", self.margin, 0.0, 0.5, lo_open=True, hi_open=True)
        _number_in(o, "threshold", self.threshold, 0.0, 1.0)
        _number_in(o, "elo0", self.elo0, -1000.0, 1000.0)
        _number_in(o, "elo1", self.elo1, -1000.0, 1000.0)
        if not self.elo1 > self.elo0:
            _fail(o, "elo1", self.elo1, f"a number above elo0 = {self.elo0}")
        _positive_int(o, "max_pairs", self.max_pairs)
        _nonneg_int(o, "opening_plies", self.opening_plies)
        _number_in(o, "max_share", self.max_share, 0.0, 1.0, lo_open=True)


@dataclass(frozen=True)
class Config:
    """A whole training run. ``test_planner`` is the testing worker's planner (thesis Table 5.1)."""

    env: EnvConfig = dataclasses.field(default_factory=EnvConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    planner: PlannerConfig = dataclasses.field(default_factory=PlannerConfig)
    test_planner: PlannerConfig = dataclasses.field(
        default_factory=lambda: PlannerConfig(dirichlet_fraction=0.0, gumbel_scale=0.0)
    )
    targets: TargetConfig = dataclasses.field(default_factory=TargetConfig)
    learner: LearnerConfig = dataclasses.field(default_factory=LearnerConfig)
    replay: ReplayConfig = dataclasses.field(default_factory=ReplayConfig)
    acting: ActingConfig = dataclasses.field(default_factory=ActingConfig)
    schedule: ScheduleConfig = dataclasses.field(default_factory=ScheduleConfig)
    testing: TestingConfig = dataclasses.field(default_factory=TestingConfig)
    output: OutputConfig = dataclasses.field(default_factory=OutputConfig)
    distributed: DistributedConfig = dataclasses.field(default_factory=DistributedConfig)
    reanalyze: ReanalyzeConfig = dataclasses.field(default_factory=ReanalyzeConfig)
    tournament: TournamentConfig = dataclasses.field(default_factory=TournamentConfig)
    gating: GatingConfig = dataclasses.field(default_factory=GatingConfig)

    def __post_init__(self):
        if self.model.dynamics == "simulator":
            # AlphaZero mode: nothing is unrolled, so one switch (model.dynamics) is all a preset needs.
            if self.targets.unroll_steps:
                object.__setattr__(self, "targets", dataclasses.replace(self.targets, unroll_steps=0))
            if self.reanalyze.fraction > 0:
                raise ConfigError(f"reanalyze.fraction = {self.reanalyze.fraction} with model.dynamics = simulator: "
                                  "reanalyze replays stored frames, and the simulator needs the game states, which "
                                  "replay does not keep; allowed: reanalyze.fraction = 0")
        elif self.targets.unroll_steps == 0:
            raise ConfigError("targets.unroll_steps = 0 is only allowed with model.dynamics = simulator (AlphaZero "
                              "mode); the learned dynamics need K >= 1 unroll steps")
        # Combinations that would act for the whole budget and never train.
        s, r = self.schedule, self.replay
        if r.capacity < s.min_replay_steps:
            raise ConfigError(f"replay.capacity = {r.capacity} is below schedule.min_replay_steps = "
                              f"{s.min_replay_steps}: replay could never hold enough steps to start training; "
                              "raise replay.capacity or lower schedule.min_replay_steps")
        if self.testing.opponent == "perfect" and self.env.name not in ("pgx:tic_tac_toe", "openspiel:tic_tac_toe"):
            raise ConfigError(f"testing.opponent = 'perfect' is only available for tic-tac-toe (pgx:tic_tac_toe, "
                              f"openspiel:tic_tac_toe), not {self.env.name!r}; allowed for it: 'random'")
        if s.max_env_steps is not None and s.max_env_steps < s.min_replay_steps:
            raise ConfigError(f"schedule.max_env_steps = {s.max_env_steps} is below schedule.min_replay_steps = "
                              f"{s.min_replay_steps}: the run would stop before its first update")


# Keys that moved when the driver section was split by concern: old -> new place.
MOVED_KEYS = {
    "driver.steps_per_epoch": "acting.steps_per_epoch",
    "driver.temperature": "acting.temperature",
    "driver.explore_moves": "acting.explore_moves",
    "driver.random_moves": "acting.random_moves",
    "driver.random_move_prob": "acting.random_move_prob",
    "driver.samples_per_env_step": "schedule.samples_per_env_step",
    "driver.batch_size": "schedule.batch_size",
    "driver.min_replay_steps": "schedule.min_replay_steps",
    "driver.sync_every": "schedule.sync_every",
    "driver.max_env_steps": "schedule.max_env_steps",
    "driver.seed": "schedule.seed",
    "driver.test_every": "testing.every",
    "driver.test_episodes": "testing.episodes",
    "driver.test_envs": "testing.envs",
    "driver.test_steps_per_segment": "testing.steps_per_segment",
    "driver.checkpoint_every_minutes": "output.checkpoint_every_minutes",
    "driver.keep_checkpoints": "output.keep_checkpoints",
    "driver.log_every_epochs": "output.log_every_epochs",
    "planner.temperature": "acting.temperature (a schedule [[env_steps, temperature], ...]; "
                           "test games are always greedy)",
    "test_planner.temperature": "nowhere: test and evaluation games are always greedy (remove the key)",
    "replay.frame_storage": "the game's spec: frames are stored in the dtype the game declares (remove the key)",
}


def _check_moved(data: Mapping[str, Any]) -> None:
    for section, values in data.items():
        if not isinstance(values, Mapping):
            continue
        for key in values:
            old = f"{section}.{key}"
            if old in MOVED_KEYS:
                raise ConfigError(f"{old} has moved: it is now {MOVED_KEYS[old]}")
    if "driver" in data:
        raise ConfigError("the driver section was split by concern into acting, schedule, testing and output "
                          "(see docs/configuration.md)")

_SECTIONS = {
    "env": EnvConfig,
    "model": ModelConfig,
    "planner": PlannerConfig,
    "test_planner": PlannerConfig,
    "targets": TargetConfig,
    "learner": LearnerConfig,
    "replay": ReplayConfig,
    "acting": ActingConfig,
    "schedule": ScheduleConfig,
    "testing": TestingConfig,
    "output": OutputConfig,
    "distributed": DistributedConfig,
    "reanalyze": ReanalyzeConfig,
    "tournament": TournamentConfig,
    "gating": GatingConfig,
}


def config_from_dict(data: Mapping[str, Any]) -> Config:
    """Build a :class:`Config` from nested plain data; unknown sections/keys fail by name."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"a config must be a mapping of sections, got {type(data).__name__}")
    _check_moved(data)
    sections = _SECTIONS
    kwargs = {}
    for key, value in data.items():
        if key not in sections:
            raise ConfigError(f"unknown section {key!r}: allowed sections are " + ", ".join(sorted(sections)))
        if not isinstance(value, Mapping):
            raise ConfigError(f"section {key} must be a mapping of keys, got {value!r}")
        if key == "env" and "kwargs" in value and not isinstance(value["kwargs"], Mapping):
            _fail("env", "kwargs", value["kwargs"], "a mapping of bridge arguments")
        kwargs[key] = from_dict(sections[key], value, owner=key)
    return Config(**kwargs)


def _parse_override(text: str) -> tuple[list[str], Any]:
    import yaml

    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like section.key=value")
    path, raw = text.split("=", 1)
    keys = path.strip().split(".")
    if len(keys) < 2 or not all(keys):
        raise ConfigError(f"override {text!r} must name a section and a key, e.g. schedule.batch_size=64")
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as err:
        raise ConfigError(f"override {text!r}: cannot parse value {raw!r}: {err}") from err
    return keys, value


def apply_overrides(data: Mapping[str, Any], overrides: list[str]) -> dict:
    """Apply ``section.key=value`` overrides (values parsed as YAML) to nested plain data."""
    import copy

    out = copy.deepcopy(dict(data))
    for text in overrides:
        keys, value = _parse_override(text)
        node = out
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {text!r}: {k} is not a section")
        node[keys[-1]] = value
    return out

