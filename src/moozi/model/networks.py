"""The learned model from its config: :func:`build_model`.

The layers and the :class:`Model` interface live in :mod:`moozi.model.core` (re-exported here, where they have
always been imported from); the Stochastic MuZero model (``model.chance_outcomes``) in
:mod:`moozi.model.stochastic`.
"""

from __future__ import annotations

from moozi.config import ModelConfig
from moozi.model.core import ACTION_INPUTS, Model, normalize_hidden
from moozi.model.perspective import MoverView
from moozi.model.stochastic import StochasticModel

__all__ = ["ACTION_INPUTS", "Model", "StochasticModel", "build_model", "normalize_hidden"]


def build_model(config: ModelConfig, observation_shape, num_actions: int,
                mover_view: MoverView | None = None) -> Model:
    """Model for stacked observations of ``observation_shape`` and ``num_actions`` augmented actions
    (``mover_view``: the plane layout when ``config.mover_relative``); a
    :class:`~moozi.model.stochastic.StochasticModel` when ``config.chance_outcomes`` is set."""
    if config.mover_relative and mover_view is None:
        raise ValueError("model.mover_relative = true needs the game's plane layout (mover_view)")
    cls = StochasticModel if config.chance_outcomes else Model
    return cls(config, tuple(int(d) for d in observation_shape), int(num_actions),
               mover_view if config.mover_relative else None)
