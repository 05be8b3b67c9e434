"""The driver: builds a run's components and owns its schedule (the only place that wires parts).

* :mod:`.trainer`: :class:`Trainer`, which wires a run's parts (from one :mod:`.record`, after :mod:`.checks`)
  and runs :mod:`.sync_schedule` or :mod:`.async_schedule` over them (:mod:`.context`, :mod:`.fleet`,
  :mod:`.learner_client`, :mod:`.ledger`, :mod:`.limiter`, :mod:`.rows`, :mod:`.budget`, :mod:`.testing`,
  :mod:`.hooks`).
* :mod:`.backend` / :mod:`.distributed`: the backends (Ray only in the last) that host the components of
  :mod:`moozi.hosts`.

What opens a run (:func:`moozi.parts.build_parts`, :mod:`moozi.run_dir`) lives below ``eval`` and
``observe`` (docs/architecture.md §7); it is re-exported here for older imports.
"""

from moozi.driver.trainer import Trainer
from moozi.parts import build_parts
from moozi.run_dir import load_params, load_run_config

__all__ = ["Trainer", "build_parts", "load_params", "load_run_config"]
