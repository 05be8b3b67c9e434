"""What a run directory holds: ``config.yaml``, ``checkpoints/``, metrics and logs."""

from __future__ import annotations

from pathlib import Path

import yaml

from moozi.checkpoint import CheckpointError, load_latest
from moozi.config import Config, ConfigError, config_from_dict


def load_run_config(run_dir: Path | str) -> Config:
    """The resolved config saved in a run directory."""
    path = Path(run_dir) / "config.yaml"
    if not path.exists():
        raise CheckpointError(f"{run_dir} is not a moozi run directory: {path} is missing")
    try:
        return config_from_dict(yaml.safe_load(path.read_text()))
    except ConfigError as err:
        raise ConfigError(f"{path}: {err} (a run written by an older moozi cannot be resumed or evaluated "
                          "by this one)") from err


def load_params(run_dir: Path | str, model) -> tuple[object, dict]:
    """Published params (numpy) and metadata of the newest good checkpoint of a run."""
    parts, meta, _ = load_latest(Path(run_dir) / "checkpoints", parts=["learner"])
    params = parts["learner"]["published"]
    model.check_params(params)
    return params, meta
