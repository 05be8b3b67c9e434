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
    normalize_hidden: bool = True

    def __post_init__(self):
        o = "model"
        _choice(o, "kind", self.kind, ("resnet", "mlp"))
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
        return tuple(_convert(owner, name, args[0], v) for v in value)
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
    "from_dict",
    "to_dict",
]
