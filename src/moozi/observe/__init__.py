"""Observability: metrics (JSON lines + TensorBoard), run logs; later GIFs and search-tree views."""

from moozi.observe.metrics import MetricsWriter, read_metrics, setup_logging

__all__ = ["MetricsWriter", "read_metrics", "setup_logging"]
