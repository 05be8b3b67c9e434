"""Named configurations: the packaged presets (the YAML files in this folder, `moozi presets`) and user YAML files."""

from __future__ import annotations

__all__ = ["preset_names", "is_preset_path", "load_preset"]


def preset_names() -> list[str]:
    from importlib.resources import files

    return sorted(p.name[:-5] for p in files("moozi.presets").iterdir() if p.name.endswith(".yaml"))


def is_preset_path(name: str) -> bool:
    """``--preset`` names a YAML file (not a packaged preset) when it ends with .yaml/.yml or has a path separator."""
    import os

    seps = {os.sep, "/"} | ({os.altsep} if os.altsep else set())
    return name.lower().endswith((".yaml", ".yml")) or any(s in name for s in seps)


def load_preset(name: str) -> dict:
    """Plain data of preset ``name``: a packaged preset name, or a path to a YAML file
    (any value ending with .yaml/.yml or containing a path separator).

    Raises ConfigError naming the path when the file is missing, and listing the
    packaged presets when ``name`` is not one of them.
    """
    from importlib.resources import files
    from pathlib import Path

    import yaml

    from moozi.config import ConfigError

    if is_preset_path(name):
        path = Path(name).expanduser()
        if not path.is_file():
            raise ConfigError(f"preset file {str(path)!r} does not exist (resolved: {path.resolve()})")
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:
            raise ConfigError(f"preset file {str(path)!r} is not valid YAML: {err}") from err
        if data is not None and not isinstance(data, dict):
            raise ConfigError(f"preset file {str(path)!r} must hold a mapping of sections, got {type(data).__name__}")
        return data or {}
    names = preset_names()
    if name not in names:  # presets mix - and _ in their names: either spelling finds one
        name = next((n for n in names if n.replace("_", "-") == name.replace("_", "-")), name)
    if name not in names:
        raise ConfigError(
            f"unknown preset {name!r}: available presets are " + ", ".join(names)
            + "; or give a path to a .yaml file (e.g. --preset ./my_game.yaml)"
        )
    return yaml.safe_load(files("moozi.presets").joinpath(f"{name}.yaml").read_text()) or {}
