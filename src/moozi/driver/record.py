"""One run's record: what every part of the driver is built from, made once by the Trainer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RunRecord:
    """The run a part belongs to.

    config: the run's :class:`~moozi.config.Config`. data: the same as plain data (what a hosted component is
    built from, across a process boundary). run_dir: the run's folder. spec: the game's
    :class:`~moozi.envs.EnvSpec`. versions: the moozi / JAX versions a component in another process must match
    (None when every component is in this process).
    """

    config: Any
    data: dict
    run_dir: Path
    spec: Any
    versions: dict | None = None
