"""Array-based segment trees (sum and min) with vectorised numpy batch operations.

Used by the replay buffer for prioritized sampling: a batch of ``B`` prefix-sum
searches or leaf updates costs ``O(B log n)`` numpy work in ``log n``
vectorised steps, independent of how full the buffer is.

Layout: a complete binary tree over ``size = 2**ceil(log2(capacity))`` leaves
stored in one flat array of length ``2 * size``; node ``i`` has children
``2i`` and ``2i + 1``, the root is node 1 and leaf ``j`` is node ``size + j``.
Leaves past ``capacity`` hold the neutral element. Every internal node is
recomputed from its two children (never updated by deltas), so the tree holds
exactly the same floats however the leaves reached their values, and there is
no drift from long sequences of updates.
"""

from __future__ import annotations

import numpy as np


def _last_write_wins(indices: np.ndarray, values: np.ndarray):
    """Deduplicate ``indices`` keeping the value of the last occurrence (sorted output)."""
    rev_idx = indices[::-1]
    uniq, first_in_rev = np.unique(rev_idx, return_index=True)
    return uniq, values[::-1][first_in_rev]


def _unique_sorted(nodes: np.ndarray) -> np.ndarray:
    """``np.unique`` for an already sorted array, in O(n)."""
    if nodes.size <= 1:
        return nodes
    keep = np.empty(nodes.size, dtype=bool)
    keep[0] = True
    np.not_equal(nodes[1:], nodes[:-1], out=keep[1:])
    return nodes[keep]


class _SegmentTree:
    """Shared machinery: a flat float64 tree combining children with ``_op``."""

    _neutral: float = 0.0

    def __init__(self, capacity: int):
        if not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise ValueError(f"capacity = {capacity!r} is invalid: allowed an integer >= 1")
        self.capacity = int(capacity)
        self.size = 1 << max(0, (self.capacity - 1).bit_length())
        self._tree = np.full(2 * self.size, self._neutral, dtype=np.float64)

    @staticmethod
    def _op(left, right):  # pragma: no cover - overridden
        raise NotImplementedError

    def _check_indices(self, indices) -> np.ndarray:
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        if indices.size and (indices.min() < 0 or indices.max() >= self.capacity):
            raise IndexError(
                f"leaf indices must lie in [0, {self.capacity}), got range "
                f"[{indices.min()}, {indices.max()}]"
            )
        return indices

    def update(self, indices, values) -> None:
        """Set leaves ``indices`` to ``values`` (vectorised; duplicate indices: last wins)."""
        indices = self._check_indices(indices)
        values = np.broadcast_to(np.asarray(values, dtype=np.float64).reshape(-1), indices.shape)
        if indices.size == 0:
            return
        indices, values = _last_write_wins(indices, values)
        nodes = indices + self.size
        self._tree[nodes] = values
        nodes = _unique_sorted(nodes >> 1)
        while nodes[0] >= 1:
            self._tree[nodes] = self._op(self._tree[2 * nodes], self._tree[2 * nodes + 1])
            if nodes[-1] == 1:
                break
            nodes = _unique_sorted(nodes >> 1)

    def get(self, indices) -> np.ndarray:
        """Leaf values at ``indices`` (float64)."""
        indices = self._check_indices(indices)
        return self._tree[indices + self.size]

    def leaves(self) -> np.ndarray:
        """A copy of all ``capacity`` leaf values."""
        return self._tree[self.size : self.size + self.capacity].copy()

    def set_all(self, values) -> None:
        """Replace every leaf and rebuild the tree in O(capacity)."""
        values = np.asarray(values, dtype=np.float64).reshape(-1)
        if values.shape != (self.capacity,):
            raise ValueError(f"values must have shape ({self.capacity},), got {values.shape}")
        self._tree[:] = self._neutral
        self._tree[self.size : self.size + self.capacity] = values
        level = self.size
        while level > 1:
            parents = np.arange(level // 2, level)
            self._tree[parents] = self._op(self._tree[2 * parents], self._tree[2 * parents + 1])
            level //= 2


class SumTree(_SegmentTree):
    """Sum tree: ``total()`` in O(1), batched prefix-sum search in O(B log n).

    Leaves must be non-negative for ``find`` to be meaningful.
    """

    _neutral = 0.0

    @staticmethod
    def _op(left, right):
        return left + right

    def total(self) -> float:
        """Sum of all leaves."""
        return float(self._tree[1])

    def find(self, prefix) -> np.ndarray:
        """Leaf index ``i`` for each mass ``u`` with ``sum(leaf[:i]) <= u < sum(leaf[:i+1])``.

        Vectorised over ``prefix`` (any shape, values in ``[0, total)``; values
        outside are clipped). Never returns a zero-mass leaf while the total is
        positive: at each node the search only descends into a child with
        positive mass, which also guards against floating-point round-off at
        the boundaries.

        Returns:
          int64 leaf indices with the shape of ``prefix``.
        """
        u = np.asarray(prefix, dtype=np.float64)
        shape = u.shape
        u = np.clip(u.reshape(-1), 0.0, None)
        if u.size == 0:
            return np.zeros(shape, dtype=np.int64)
        if self.total() <= 0.0:
            raise ValueError("cannot search a sum tree whose total mass is 0")
        nodes = np.ones(u.shape, dtype=np.int64)
        tree = self._tree
        while self.size > 1 and nodes[0] < self.size:
            left = tree[2 * nodes]
            right = tree[2 * nodes + 1]
            go_right = ((u >= left) & (right > 0.0)) | (left <= 0.0)
            u = np.where(go_right, u - left, u)
            nodes = 2 * nodes + go_right
        return (nodes - self.size).reshape(shape)


class MinTree(_SegmentTree):
    """Min tree: ``min()`` over all leaves in O(1); unused leaves hold ``+inf``."""

    _neutral = np.inf

    @staticmethod
    def _op(left, right):
        return np.minimum(left, right)

    def min(self) -> float:
        """Smallest leaf (``inf`` when every leaf is unused)."""
        return float(self._tree[1])


__all__ = ["SumTree", "MinTree"]
