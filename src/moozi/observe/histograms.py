"""Distributions of a network's parameters (and Adam's gradient average) as TensorBoard histograms.

:func:`tree_histograms` summarises every leaf of a pytree on the host as the
raw histogram TensorBoard stores (``add_histogram_raw``): a few dozen numbers
per leaf, so what crosses a process boundary is small whatever the model's
size. The learner computes them (``LearnerHost.histograms``) every
``output.histogram_every_updates`` updates; the driver writes them.
"""

from __future__ import annotations

import jax
import numpy as np


def leaf_histogram(values, bins: int = 30) -> dict:
    """The raw histogram of ``values`` (any shape): ``min``, ``max``, ``num``, ``sum``, ``sum_squares``,
    ``bucket_limits [bins]`` (right edges) and ``bucket_counts [bins]``."""
    v = np.asarray(values, np.float64).reshape(-1)
    if v.size == 0:
        v = np.zeros(1)
    lo, hi = float(v.min()), float(v.max())
    if hi <= lo:  # a constant leaf: one bucket holding everything
        return {"min": lo, "max": hi, "num": int(v.size), "sum": float(v.sum()), "sum_squares": float(v @ v),
                "bucket_limits": [hi], "bucket_counts": [int(v.size)]}
    counts, edges = np.histogram(v, bins=bins, range=(lo, hi))
    return {"min": lo, "max": hi, "num": int(v.size), "sum": float(v.sum()), "sum_squares": float(v @ v),
            "bucket_limits": edges[1:].tolist(), "bucket_counts": counts.astype(int).tolist()}


def tree_histograms(tree, prefix: str, bins: int = 30) -> dict[str, dict]:
    """``{prefix/path/of/leaf: leaf_histogram}`` for every array leaf of ``tree`` (paths from the pytree's keys)."""
    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        name = "/".join(str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in path)
        out[f"{prefix}/{name}"] = leaf_histogram(leaf, bins)
    return out
