"""The whole config and its loading: from plain data (YAML, overrides) with every value checked, back to plain
data, keys that moved, and ``section.key=value`` overrides."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, Mapping, TypeVar

from moozi.config.agent import LearnerConfig, ModelConfig, PlannerConfig, TargetConfig
from moozi.config.judging import GatingConfig, GradingConfig, TournamentConfig
from moozi.config.run import (
    ActingConfig,
    DistributedConfig,
    EnvConfig,
    OutputConfig,
    ReanalyzeConfig,
    ReplayConfig,
    ScheduleConfig,
    TestingConfig,
)
from moozi.errors import ConfigError
from moozi.validate import fail as _fail

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


@dataclass(frozen=True)
class Config:
    """A whole training run. ``test_planner`` is the testing worker's planner (thesis Table 5.1);
    ``reanalyze_planner`` the reanalyze workers' (None: the training planner without root noise; in plain data
    its keys are read over that default, so ``{num_simulations: 32}`` changes only the simulations)."""

    env: EnvConfig = dataclasses.field(default_factory=EnvConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    planner: PlannerConfig = dataclasses.field(default_factory=PlannerConfig)
    test_planner: PlannerConfig = dataclasses.field(
        default_factory=lambda: PlannerConfig(dirichlet_fraction=0.0, gumbel_scale=0.0)
    )
    reanalyze_planner: PlannerConfig | None = None
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
    grading: GradingConfig = dataclasses.field(default_factory=GradingConfig)

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
        if self.model.chance_outcomes:
            for section, planner in (("planner", self.planner), ("test_planner", self.test_planner),
                                     ("reanalyze_planner", self.reanalyze_planner)):
                if planner is not None and planner.kind != "puct":
                    raise ConfigError(f"{section}.kind = {planner.kind!r} with model.chance_outcomes = "
                                      f"{self.model.chance_outcomes}: Stochastic MuZero searches with mctx's "
                                      "stochastic_muzero_policy; allowed: puct")
        if self.learner.chance_codes == "game" and not self.model.chance_outcomes:
            raise ConfigError("learner.chance_codes = 'game' with model.chance_outcomes = 0: the game's codes train "
                              "Stochastic MuZero's chance prior; set model.chance_outcomes to the game's outcome "
                              "count, or allowed: learner.chance_codes = encoder")
        # Combinations that would act for the whole budget and never train.
        s, r = self.schedule, self.replay
        if r.capacity < s.min_replay_steps:
            raise ConfigError(f"replay.capacity = {r.capacity} is below schedule.min_replay_steps = "
                              f"{s.min_replay_steps}: replay could never hold enough steps to start training; "
                              "raise replay.capacity or lower schedule.min_replay_steps")
        if self.testing.opponent == "perfect" and self.env.name not in ("pgx:tic_tac_toe", "openspiel:tic_tac_toe"):
            raise ConfigError(f"testing.opponent = 'perfect' is only available for tic-tac-toe (pgx:tic_tac_toe, "
                              f"openspiel:tic_tac_toe), not {self.env.name!r}; allowed for it: 'random'")
        if s.batch_size % self.learner.devices:
            raise ConfigError(f"schedule.batch_size = {s.batch_size} does not divide over learner.devices = "
                              f"{self.learner.devices}: allowed a multiple of {self.learner.devices}")
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
                           "test games: testing.temperature)",
    "test_planner.temperature": "testing.temperature (0: greedy test and evaluation games)",
    "replay.frame_storage": "the game's spec: frames are stored in the dtype the game declares (remove the key)",
}


# Research switches that no preset adopted, removed once their cards said "not adopted" (the graduation rule,
# docs/architecture.md §7): key -> (its neutral value, where it was measured). A run folder written before the
# removal holds each at its neutral value and still loads (the key is dropped); any other value is answered with
# the card, which names the commit that had the switch.
_FREEWAY_HUNT = "docs/results/minatar-60min/README.md (the Freeway hunt; the switches are in commit 8537a41 and before)"
REMOVED_KEYS = {
    "model.decoder": (False, _FREEWAY_HUNT),
    "model.global_pool": (False, _FREEWAY_HUNT),
    "model.dynamics_heads": (False, _FREEWAY_HUNT),
    "model.dynamics_residual": (False, _FREEWAY_HUNT),
    "model.q_head": (False, _FREEWAY_HUNT),
    "learner.reconstruction_coef": (0.0, _FREEWAY_HUNT),
    "learner.value_consistency_coef": (0.0, _FREEWAY_HUNT),
    "learner.value_consistency_into": ("model", _FREEWAY_HUNT),
    "learner.q_coef": (1.0, _FREEWAY_HUNT),
    "learner.priority": ("root_value", _FREEWAY_HUNT),
    "learner.ema_decay": (0.0, "docs/results/learning/cartpole-ema0.999-probe/README.md (a moving average of the "
                               "params for acting and testing; the switch is in commit 08103b7 and before)"),
}


def _check_moved(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` without the removed keys that hold their neutral value; a moved key, or a removed one set to
    anything else, fails naming where it went."""
    out = dict(data)
    for section, values in data.items():
        if not isinstance(values, Mapping):
            continue
        for key in values:
            old = f"{section}.{key}"
            if old in MOVED_KEYS:
                raise ConfigError(f"{old} has moved: it is now {MOVED_KEYS[old]}")
            if old in REMOVED_KEYS:
                neutral, card = REMOVED_KEYS[old]
                if values[key] != neutral:
                    raise ConfigError(f"{old} = {values[key]!r}: removed (a research switch no preset adopted); "
                                      f"see {card}")
                out[section] = {k: v for k, v in out[section].items() if k != key}
    if "driver" in data:
        raise ConfigError("the driver section was split by concern into acting, schedule, testing and output "
                          "(see docs/configuration.md)")
    return out


_SECTIONS = {
    "env": EnvConfig,
    "model": ModelConfig,
    "planner": PlannerConfig,
    "test_planner": PlannerConfig,
    "reanalyze_planner": PlannerConfig,
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
    "grading": GradingConfig,
}


def section_type(name: str):
    """The config class of section ``name`` (``"learner"`` -> :class:`LearnerConfig`), None if there is none."""
    return _SECTIONS.get(name)


def config_from_dict(data: Mapping[str, Any]) -> Config:
    """Build a :class:`Config` from nested plain data; unknown sections/keys fail by name."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"a config must be a mapping of sections, got {type(data).__name__}")
    data = _check_moved(data)
    sections = _SECTIONS
    kwargs = {}
    for key, value in data.items():
        if key not in sections:
            raise ConfigError(f"unknown section {key!r}: allowed sections are " + ", ".join(sorted(sections)))
        if key == "reanalyze_planner" and value is None:
            continue  # the default: the training planner, quiet
        if not isinstance(value, Mapping):
            raise ConfigError(f"section {key} must be a mapping of keys, got {value!r}")
        if key == "env" and "kwargs" in value and not isinstance(value["kwargs"], Mapping):
            _fail("env", "kwargs", value["kwargs"], "a mapping of bridge arguments")
        if key == "reanalyze_planner":
            continue  # read over the training planner below
        kwargs[key] = from_dict(sections[key], value, owner=key)
    if data.get("reanalyze_planner") is not None:
        base = to_dict(quiet_planner(kwargs.get("planner", PlannerConfig())))
        from_dict(PlannerConfig, data["reanalyze_planner"], owner="reanalyze_planner")  # its own keys, by name
        kwargs["reanalyze_planner"] = from_dict(PlannerConfig, {**base, **data["reanalyze_planner"]},
                                                owner="reanalyze_planner")
    return Config(**kwargs)


def quiet_planner(planner: PlannerConfig) -> PlannerConfig:
    """``planner`` without root noise (no Dirichlet noise, no Gumbel noise): a search that only measures."""
    return dataclasses.replace(planner, dirichlet_fraction=0.0, gumbel_scale=0.0)


def reanalyze_planner(config: Config) -> PlannerConfig:
    """The reanalyze workers' planner: ``config.reanalyze_planner``, else the training planner without noise."""
    return config.reanalyze_planner if config.reanalyze_planner is not None else quiet_planner(config.planner)


_NUMBER = r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"
_YAML_LOADER = None


def _number(loader, node):
    """A number written with an exponent: an int when its mantissa is an integer and the exponent is not
    negative (``5e5`` -> 500000), else a float (``3e-4``, ``1E-3``, ``2.5e3``)."""
    import decimal

    text = loader.construct_scalar(node).replace("_", "")
    mantissa, exponent = text.lower().split("e")
    if "." not in mantissa and int(exponent) >= 0:
        return int(decimal.Decimal(text))
    return float(text)


def load_yaml(text: str) -> Any:
    """YAML as config files and overrides are read: PyYAML's safe loader (YAML 1.1), which reads ``3e-4``,
    ``1E-3`` and ``5e5`` as strings, taught to read them as numbers, the way people write a learning rate."""
    global _YAML_LOADER
    import re

    import yaml

    if _YAML_LOADER is None:
        class Loader(yaml.SafeLoader):
            pass

        Loader.add_implicit_resolver("tag:moozi,2026:number", re.compile(_NUMBER), list("-+0123456789."))
        Loader.add_constructor("tag:moozi,2026:number", _number)
        _YAML_LOADER = Loader
    return yaml.load(text, Loader=_YAML_LOADER)  # noqa: S506 - a SafeLoader subclass


def _parse_override(text: str) -> tuple[list[str], Any]:
    import yaml

    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like section.key=value")
    path, raw = text.split("=", 1)
    keys = path.strip().split(".")
    if len(keys) < 2 or not all(keys):
        raise ConfigError(f"override {text!r} must name a section and a key, e.g. schedule.batch_size=64")
    try:
        value = load_yaml(raw)
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
