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


class ConfigError(ValueError):
    """A configuration field has a bad value or an unknown key was given."""


def _fail(owner: str, name: str, value: Any, allowed: str) -> None:
    raise ConfigError(f"{owner}.{name} = {value!r} is invalid: allowed {allowed}")


def _positive_int(owner: str, name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        _fail(owner, name, value, "an integer >= 1")


def _nonneg_int(owner: str, name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        _fail(owner, name, value, "an integer >= 0")


def _number_in(owner: str, name: str, value: Any, lo: float, hi: float, lo_open=False, hi_open=False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok:
        ok = (value > lo if lo_open else value >= lo) and (value < hi if hi_open else value <= hi)
    if not ok:
        lb = "(" if lo_open else "["
        rb = ")" if hi_open else "]"
        _fail(owner, name, value, f"a number in {lb}{lo}, {hi}{rb}")


def _choice(owner: str, name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        _fail(owner, name, value, "one of " + ", ".join(repr(c) for c in choices))


@dataclass(frozen=True)
class ModelConfig:
    """Network family and sizes (../shared/DESIGN.md §5).

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

    def __post_init__(self):
        o = "model"
        _choice(o, "kind", self.kind, ("resnet", "mlp"))
        _choice(o, "value_transform", self.value_transform, ("phi", "identity"))
        for name in ("channels", "head_hidden", "mlp_embedding", "support_size"):
            _positive_int(o, name, getattr(self, name))
        for name in ("repr_blocks", "dyn_blocks", "pred_blocks", "proj_blocks"):
            _nonneg_int(o, name, getattr(self, name))
        if not isinstance(self.mlp_hidden, tuple) or not all(
            isinstance(w, int) and not isinstance(w, bool) and w >= 1 for w in self.mlp_hidden
        ):
            _fail(o, "mlp_hidden", self.mlp_hidden, "a tuple of integers >= 1")
        if not isinstance(self.normalize_hidden, bool):
            _fail(o, "normalize_hidden", self.normalize_hidden, "true or false")

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
    temperature: visit-count temperature for choosing the action (PUCT only;
      Gumbel chooses by sequential halving).
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
    temperature: float = 1.0
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
        _number_in(o, "temperature", self.temperature, 0.0, float("inf"))
        _positive_int(o, "max_num_considered_actions", self.max_num_considered_actions)
        _number_in(o, "gumbel_scale", self.gumbel_scale, 0.0, float("inf"))
        if self.max_depth is not None:
            _positive_int(o, "max_depth", self.max_depth)


@dataclass(frozen=True)
class TargetConfig:
    """How training targets are built (../shared/DESIGN.md §4).

    history_length: L frames and actions stacked into one observation (thesis 4).
    unroll_steps: K dynamics steps unrolled in training (thesis 5).
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
        _positive_int(o, "unroll_steps", self.unroll_steps)
        _positive_int(o, "td_steps", self.td_steps)
        _number_in(o, "discount", self.discount, 0.0, 1.0)


@dataclass(frozen=True)
class LearnerConfig:
    """Loss coefficients and optimiser (../shared/DESIGN.md §6).

    value_coef: c^v; consistency_coef: c^s; l2_coef: c^{L2}.
    learning_rate: Adam step size (peak, if a schedule is used).
    lr_schedule: ``"constant"``, ``"cosine"`` (warmup then cosine decay to 0 at
      ``decay_steps``) or ``"linear"`` (warmup then linear decay to 0).
    warmup_steps / decay_steps: schedule lengths in updates.
    max_grad_norm: global-norm clipping threshold.
    target_update_period: updates between target-network refreshes.
    """

    value_coef: float = 0.25
    consistency_coef: float = 2.0
    l2_coef: float = 1e-4
    learning_rate: float = 1e-2
    lr_schedule: Literal["constant", "cosine", "linear"] = "constant"
    warmup_steps: int = 0
    decay_steps: int = 100_000
    max_grad_norm: float = 5.0
    target_update_period: int = 500

    def __post_init__(self):
        o = "learner"
        for name in ("value_coef", "consistency_coef", "l2_coef"):
            _number_in(o, name, getattr(self, name), 0.0, float("inf"))
        _number_in(o, "learning_rate", self.learning_rate, 0.0, float("inf"), lo_open=True)
        _choice(o, "lr_schedule", self.lr_schedule, ("constant", "cosine", "linear"))
        _nonneg_int(o, "warmup_steps", self.warmup_steps)
        _positive_int(o, "decay_steps", self.decay_steps)
        _number_in(o, "max_grad_norm", self.max_grad_norm, 0.0, float("inf"), lo_open=True)
        _positive_int(o, "target_update_period", self.target_update_period)


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
    "DriverConfig",
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
class DriverConfig:
    """The training schedule (thesis: collect -> replay -> updates -> sync -> test).

    steps_per_epoch: acting steps per environment per epoch (one rollout segment).
    samples_per_env_step: replay ratio, trained samples (updates x batch size)
      per environment step; honoured exactly over the run.
    batch_size: learner batch size.
    min_replay_steps: stored steps needed before the first update.
    sync_every: epochs between publishing learner params to the actors.
    test_every: epochs between tests (0 disables).
    test_episodes / test_envs: episodes per test, environments used for testing.
    test_steps_per_segment: acting steps per test rollout call.
    checkpoint_every_minutes: wall-clock minutes between checkpoints.
    keep_checkpoints: how many checkpoints to keep.
    log_every_epochs: epochs per metrics row (values averaged over them); an
      epoch that ran a test always ends a row.
    temperature: ``[[env_steps, temperature], ...]`` piecewise-constant acting
      temperature (thesis: 1.0, then lower as training goes on).
    explore_moves: acting explores (temperature, Gumbel noise) only on the first
      this-many moves of each episode and is greedy after (AlphaZero's opening
      exploration); None explores on every move.
    random_moves: the first this-many moves of every training episode are
      uniformly random legal moves (the search still runs and its policy is
      the target): self-play then meets every opening, including the ones
      its own policy would never play (board games).
    random_move_prob: every later training move is a uniformly random legal
      move with this probability (epsilon exploration; 0 = off). Self-play then
      meets the mistakes its own policy no longer makes, and learns to punish
      them. Value targets never run through a random move: they stop there and
      bootstrap from the search value (see moozi.targets).
    max_env_steps: stop after this many environment steps (None: no limit).
    seed: root of every random stream.
    """

    steps_per_epoch: int = 32
    samples_per_env_step: float = 1.0
    batch_size: int = 128
    min_replay_steps: int = 1000
    sync_every: int = 1
    test_every: int = 5
    test_episodes: int = 16
    test_envs: int = 16
    test_steps_per_segment: int = 100
    checkpoint_every_minutes: float = 5.0
    keep_checkpoints: int = 3
    log_every_epochs: int = 10
    temperature: tuple[tuple[int, float], ...] = ((0, 1.0),)
    explore_moves: int | None = None
    random_moves: int = 0
    random_move_prob: float = 0.0
    max_env_steps: int | None = None
    seed: int = 0

    def __post_init__(self):
        o = "driver"
        for name in ("steps_per_epoch", "batch_size", "sync_every", "test_episodes", "test_envs",
                     "test_steps_per_segment", "keep_checkpoints", "log_every_epochs"):
            _positive_int(o, name, getattr(self, name))
        _nonneg_int(o, "min_replay_steps", self.min_replay_steps)
        _nonneg_int(o, "test_every", self.test_every)
        _nonneg_int(o, "random_moves", self.random_moves)
        _number_in(o, "random_move_prob", self.random_move_prob, 0.0, 1.0)
        _nonneg_int(o, "seed", self.seed)
        _number_in(o, "samples_per_env_step", self.samples_per_env_step, 0.0, float("inf"), lo_open=True)
        _number_in(o, "checkpoint_every_minutes", self.checkpoint_every_minutes, 0.0, float("inf"), lo_open=True)
        sched = self.temperature
        ok = isinstance(sched, tuple) and len(sched) >= 1 and all(
            isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], int) and p[0] >= 0
            and isinstance(p[1], (int, float)) and p[1] >= 0 for p in sched
        )
        if ok:
            ok = sched[0][0] == 0 and all(a[0] < b[0] for a, b in zip(sched, sched[1:]))
        if not ok:
            _fail(o, "temperature", sched, "a list of [env_steps, temperature] pairs starting at 0, steps increasing")
        if self.max_env_steps is not None:
            _positive_int(o, "max_env_steps", self.max_env_steps)
        if self.explore_moves is not None:
            _nonneg_int(o, "explore_moves", self.explore_moves)

    def temperature_at(self, env_steps: int) -> float:
        """Acting temperature after ``env_steps`` environment steps."""
        value = self.temperature[0][1]
        for start, temp in self.temperature:
            if env_steps >= start:
                value = temp
        return float(value)


def _replay_config_cls():
    from moozi.replay import ReplayConfig  # replay imports this module; resolve lazily

    return ReplayConfig


@dataclass(frozen=True)
class Config:
    """A whole training run. ``test_planner`` is the testing worker's planner (thesis Table 5.1)."""

    env: EnvConfig = dataclasses.field(default_factory=EnvConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    planner: PlannerConfig = dataclasses.field(default_factory=PlannerConfig)
    test_planner: PlannerConfig = dataclasses.field(
        default_factory=lambda: PlannerConfig(dirichlet_fraction=0.0, temperature=0.0, gumbel_scale=0.0)
    )
    targets: TargetConfig = dataclasses.field(default_factory=TargetConfig)
    learner: LearnerConfig = dataclasses.field(default_factory=LearnerConfig)
    replay: Any = dataclasses.field(default_factory=lambda: _replay_config_cls()())
    driver: DriverConfig = dataclasses.field(default_factory=DriverConfig)


_SECTIONS = {
    "env": EnvConfig,
    "model": ModelConfig,
    "planner": PlannerConfig,
    "test_planner": PlannerConfig,
    "targets": TargetConfig,
    "learner": LearnerConfig,
    "driver": DriverConfig,
}


def config_from_dict(data: Mapping[str, Any]) -> Config:
    """Build a :class:`Config` from nested plain data; unknown sections/keys fail by name."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"a config must be a mapping of sections, got {type(data).__name__}")
    sections = dict(_SECTIONS, replay=_replay_config_cls())
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
        raise ConfigError(f"override {text!r} must name a section and a key, e.g. driver.batch_size=64")
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

