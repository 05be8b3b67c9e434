"""The driver: builds a run's components and owns its schedule (the only place that wires parts).

* :mod:`.parts`: the game, model and components a config asks for.
* :mod:`.trainer`: :class:`Trainer`, the thesis's synchronous schedule on the local backend.
* :mod:`.run_dir`: what a run directory holds (config, published params).
"""

from moozi.driver.parts import build_parts
from moozi.driver.run_dir import load_params, load_run_config
from moozi.driver.trainer import Trainer

__all__ = ["Trainer", "build_parts", "load_params", "load_run_config"]
