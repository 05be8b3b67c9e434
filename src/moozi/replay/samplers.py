"""Samplers: which stored positions a batch holds, and their importance weights.

One interface, three strategies (``replay.sampling``):

* :class:`UniformSampler`: a sum tree over 0/1 leaves (1 = sampleable), weights 1.
* :class:`ProportionalSampler`: ``P(i) ∝ p_i ** alpha`` with a sum tree over
  ``p_i ** alpha`` and a min tree over ``p_i``; stratified prefix-sum search
  (one draw per equal-mass segment, Schaul et al. 2016), ``O(B log n)``.
* :class:`RankSampler`: ``P(i) ∝ rank(i) ** -alpha`` with rank 1 the highest
  priority. Ranks are drawn from the exact rank distribution by inverse-CDF
  search and mapped to positions through an ``argsort`` of the priorities
  refreshed lazily: when the positions inserted, evicted or re-prioritised
  since the last sort reach ``rank_refresh_fraction`` of the sampleable ones,
  or when a draw lands on a position evicted since. Between refreshes the order
  reflects older priorities and positions inserted since are not sampled.

A sampler reads the buffer's ``priority`` and ``sampleable`` arrays (shared,
not copied) and is told which slots changed (:meth:`Sampler.changed`).
Weights are ``w_i = (n P(i)) ** -beta`` divided by the largest weight any
stored position could get (the least likely one), so they are at most 1; the
buffer may renormalise them per batch (``replay.weight_normalization``).
"""

from __future__ import annotations

import numpy as np

from moozi.config import ReplayConfig
from moozi.replay.sumtree import MinTree, SumTree

__all__ = ["Sampler", "UniformSampler", "ProportionalSampler", "RankSampler", "make_sampler"]


class Sampler:
    """Base: owns derived sampling structures over the buffer's slots."""

    def __init__(self, config: ReplayConfig, priority: np.ndarray, sampleable: np.ndarray):
        self.config = config
        self.priority = priority  # [capacity] float64 raw priorities (shared with the buffer)
        self.sampleable = sampleable  # [capacity] bool (shared with the buffer)

    def changed(self, slots: np.ndarray) -> None:
        """``priority`` / ``sampleable`` of ``slots`` were just written."""

    def draw(self, u: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
        """Slots for uniforms ``u [B]`` in [0, 1) and their buffer-normalised weights ``[B]``."""
        raise NotImplementedError

    def rebuild(self) -> None:
        """Recompute every derived structure from ``priority`` / ``sampleable`` (after a load)."""

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` output (called after :meth:`rebuild`)."""


class UniformSampler(Sampler):
    def __init__(self, config, priority, sampleable):
        super().__init__(config, priority, sampleable)
        self._sum = SumTree(priority.shape[0])

    def changed(self, slots):
        self._sum.update(slots, self.sampleable[slots].astype(np.float64))

    def draw(self, u, beta):
        slots = self._sum.find(u * self._sum.total())
        return slots, np.ones(u.shape[0], np.float64)

    def rebuild(self):
        self._sum.set_all(self.sampleable.astype(np.float64))


class ProportionalSampler(Sampler):
    def __init__(self, config, priority, sampleable):
        super().__init__(config, priority, sampleable)
        self._sum = SumTree(priority.shape[0])
        self._min = MinTree(priority.shape[0])

    def changed(self, slots):
        ok = self.sampleable[slots]
        p = self.priority[slots]
        self._sum.update(slots, np.where(ok, p**self.config.alpha, 0.0))
        self._min.update(slots, np.where(ok, p, np.inf))

    def draw(self, u, beta):
        total = self._sum.total()
        slots = self._sum.find(u * total)
        prob = self._sum.get(slots) / total
        p_min = self._min.min() ** self.config.alpha / total
        return slots, (prob / p_min) ** (-beta)

    def rebuild(self):
        ok = self.sampleable
        self._sum.set_all(np.where(ok, self.priority**self.config.alpha, 0.0))
        self._min.set_all(np.where(ok, self.priority, np.inf))


class RankSampler(Sampler):
    def __init__(self, config, priority, sampleable):
        super().__init__(config, priority, sampleable)
        self._order = np.zeros(0, np.int64)  # slots, highest priority first
        self._changes = 0
        self._valid = False
        self._cdf: tuple[int, np.ndarray] | None = None

    def changed(self, slots):
        self._changes += int(slots.size)

    def _refresh(self) -> None:
        slots = np.flatnonzero(self.sampleable)
        self._order = slots[np.argsort(-self.priority[slots], kind="stable")].astype(np.int64)
        self._changes = 0
        self._valid = True

    def _rank_cdf(self, n: int) -> np.ndarray:
        if self._cdf is None or self._cdf[0] != n:
            self._cdf = (n, np.cumsum(np.arange(1, n + 1, dtype=np.float64) ** -self.config.alpha))
        return self._cdf[1]

    def draw(self, u, beta):
        n_ok = int(np.count_nonzero(self.sampleable))
        stale = not self._valid or self._changes >= self.config.rank_refresh_fraction * max(n_ok, 1)
        for _ in range(2):
            if stale:
                self._refresh()
            n = self._order.size
            cdf = self._rank_cdf(n)
            ranks = np.minimum(np.searchsorted(cdf, u * cdf[-1], side="right"), n - 1)
            slots = self._order[ranks]
            if self.sampleable[slots].all():
                break
            stale = True  # a draw hit a position evicted since the last sort
        # P(i) = r^-alpha / Z; the least likely position has rank n.
        return slots, (n / (ranks + 1.0)) ** (-self.config.alpha * beta)

    def state_dict(self):
        return {"order": self._order.copy(), "changes": int(self._changes), "valid": int(self._valid)}

    def load_state_dict(self, state):
        self._order = np.asarray(state["order"], np.int64)
        self._changes = int(state["changes"])
        self._valid = bool(int(state["valid"]))
        self._cdf = None


_SAMPLERS = {"uniform": UniformSampler, "proportional": ProportionalSampler, "rank": RankSampler}


def make_sampler(config: ReplayConfig, priority: np.ndarray, sampleable: np.ndarray) -> Sampler:
    """The sampler ``config.sampling`` names, over the buffer's shared arrays."""
    return _SAMPLERS[config.sampling](config, priority, sampleable)
