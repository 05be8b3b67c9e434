"""Frozen, validated configuration for the core (model, planner, targets, learner).

Every config is a frozen dataclass that validates itself on construction and
raises :class:`ConfigError` naming the offending field and what is allowed.
``from_dict`` builds a config from plain data (YAML, overrides) and rejects
unknown keys, so a typo fails before any work starts.

Four modules: :mod:`.agent` (model, planner, targets, learner), :mod:`.run` (env ... output), :mod:`.judging`
(tournament, gating, grading) and :mod:`.loading` (the whole :class:`Config`, from / to plain data, moved keys,
overrides); everything is re-exported here.
"""

from moozi.config.agent import LearnerConfig, ModelConfig, PlannerConfig, TargetConfig
from moozi.config.judging import GatingConfig, GradingConfig, TournamentConfig
from moozi.config.loading import MOVED_KEYS, Config, apply_overrides, config_from_dict, from_dict, to_dict
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
    "DistributedConfig",
    "ReanalyzeConfig",
    "TestingConfig",
    "OutputConfig",
    "TournamentConfig",
    "GatingConfig",
    "GradingConfig",
    "Config",
    "from_dict",
    "to_dict",
    "config_from_dict",
    "apply_overrides",
    "MOVED_KEYS",
]
