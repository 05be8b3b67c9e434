"""Observability (docs/runs.md, docs/metrics.md): what a run writes and the views drawn from it.

* Records: :mod:`~moozi.observe.metrics` (JSON lines and TensorBoard, run logs; re-exported here),
  :mod:`~moozi.observe.histograms`, :mod:`~moozi.observe.machine` (the processor and load),
  :mod:`~moozi.observe.memory` (peak memory), :mod:`~moozi.observe.profile` (one epoch's timeline),
  :mod:`~moozi.observe.health` (a run's health verdict).
* Views: :mod:`~moozi.observe.render` and :mod:`~moozi.observe.gif` (frames, GIFs), :mod:`~moozi.observe.watch`
  (``moozi watch``), :mod:`~moozi.observe.tree` (search trees), :mod:`~moozi.observe.embed` (hidden states
  and imagined paths), :mod:`~moozi.observe.curves` (learning curves over seeds), :mod:`~moozi.observe.report`
  (one HTML page per run).
"""

from moozi.observe.metrics import MetricsWriter, read_metrics, setup_logging

__all__ = ["MetricsWriter", "read_metrics", "setup_logging"]
