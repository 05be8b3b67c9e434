"""The driver: builds a run's components and owns its schedule (the only place that wires parts).

* :mod:`.trainer`: :class:`Trainer`, the sync and async schedules over a backend.
* :mod:`.hosts`: the components a backend hosts; :mod:`.backend` / :mod:`.backends` / :mod:`.distributed`:
  the backends (Ray only in the last).

What opens a run (:func:`moozi.parts.build_parts`, :mod:`moozi.run_dir`) lives below ``eval`` and
``observe`` (docs/architecture.md §7); it is re-exported here for older imports.
"""

from moozi.driver.trainer import Trainer
from moozi.parts import build_parts
from moozi.run_dir import load_params, load_run_config

__all__ = ["Trainer", "build_parts", "load_params", "load_run_config"]
