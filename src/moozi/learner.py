"""The learner / parameter server: owns the train state, runs updates, publishes versioned params.

A plain class (no Ray import) so the local driver calls it in-process and the
Ray backend (later) wraps it unchanged.
"""

from __future__ import annotations

import jax
import numpy as np

from moozi.config import LearnerConfig
from moozi.model.networks import Model
from moozi.types import Batch
from moozi.update import TrainState, init_train_state, make_update_fn


class Learner:
    """Owns a :class:`~moozi.update.TrainState` and the jitted update step.

    ``version`` counts published parameter sets; actors compare it to know
    whether their copy is stale.
    """

    def __init__(self, model: Model, config: LearnerConfig, rng):
        self.model = model
        self.config = config
        self.state: TrainState = init_train_state(model, config, rng)
        self._update = make_update_fn(model, config)
        self.version = 0
        self._published = self.state.params

    @property
    def updates(self) -> int:
        """Updates done so far."""
        return int(self.state.step)

    def update(self, batch: Batch) -> tuple[dict[str, float], np.ndarray]:
        """One update on ``batch``; returns ``(metrics, new priorities [B])``."""
        self.state, metrics, priorities = self._update(self.state, batch)
        return {k: float(v) for k, v in metrics.items()}, np.asarray(priorities)

    def publish(self) -> int:
        """Make the current params the published ones; returns the new version."""
        # The update donates its input state, so hand out a copy actors can keep.
        self._published = jax.tree_util.tree_map(lambda x: x.copy(), self.state.params)
        self.version += 1
        return self.version

    def params(self) -> tuple[int, object]:
        """``(version, params)`` last published."""
        return self.version, self._published

    def state_dict(self) -> dict:
        """Checkpointable data: train state, version, published params."""
        return {"train_state": self.state, "version": self.version, "published": self._published}

    def load_state_dict(self, data: dict) -> None:
        """Restore from :meth:`state_dict` output (arrays already shaped like this learner's)."""
        self.model.check_params(data["train_state"].params)
        self.state = data["train_state"]
        self.version = int(data["version"])
        self._published = data["published"]
