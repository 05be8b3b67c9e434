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


def load_params(run_dir: Path | str, model, env_name: str | None = None) -> tuple[object, dict]:
    """Published params (numpy) and metadata of the newest good checkpoint of a run.

    With ``env_name`` (the game of the run's config.yaml), a checkpoint written
    for another game, or params of another model, raise CheckpointError saying so.
    """
    parts, meta, path = load_latest(Path(run_dir) / "checkpoints", parts=["learner"])
    saved = ((meta.get("config") or {}).get("env") or {}).get("name")
    if env_name is not None and saved is not None and saved != env_name:
        raise CheckpointError(f"{path} was written by a run of {saved}, but {run_dir}/config.yaml is for "
                              f"{env_name}: evaluate the run directory that trained it")
    params = parts["learner"]["published"]
    try:
        model.check_params(params)
    except ValueError as err:
        raise CheckpointError(f"{path} does not fit the model of {run_dir}/config.yaml: {err}") from err
    return params, meta
