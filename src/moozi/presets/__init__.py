"""Named configurations: the packaged presets (the YAML files in this folder, `moozi presets`) and user YAML files."""

from __future__ import annotations

__all__ = ["preset_names", "is_preset_path", "load_preset", "merge_sections"]


def preset_names() -> list[str]:
    from importlib.resources import files

    return sorted(p.name[:-5] for p in files("moozi.presets").iterdir() if p.name.endswith(".yaml"))


def preset_header(name: str) -> str:
    """A packaged preset's header: its comment lines before the link to docs/presets.md, as one line."""
    from importlib.resources import files

    lines = []
    for line in (files("moozi.presets") / f"{name}.yaml").read_text().splitlines():
        if not line.startswith("#") or line.startswith("# Why each setting"):
            break
        lines.append(line.lstrip("# ").strip())
    return " ".join(lines)


def is_preset_path(name: str) -> bool:
    """``--preset`` names a YAML file (not a packaged preset) when it ends with .yaml/.yml or has a path separator."""
    import os

    seps = {os.sep, "/"} | ({os.altsep} if os.altsep else set())
    return name.lower().endswith((".yaml", ".yml")) or any(s in name for s in seps)


def merge_sections(base: dict, override: dict) -> dict:
    """``override`` on top of ``base``: mappings merge key by key at every depth; any other value
    (a number, a string, a list) replaces the base's. Neither argument is changed."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_sections(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_preset(name: str, _seen: tuple[str, ...] = ()) -> dict:
    """Plain data of preset ``name``: a packaged preset name, or a path to a YAML file
    (any value ending with .yaml/.yml or containing a path separator).

    A preset may start from another with a top-level ``base:`` (a packaged preset's name, or a
    YAML path, relative to the file that names it): its own keys are merged over the base's
    (:func:`merge_sections`), so a variant lists only what it changes.

    Raises ConfigError naming the path when the file is missing, listing the
    packaged presets when ``name`` is not one of them, and naming the chain
    when bases loop.
    """
    from moozi.config import ConfigError

    data, where = _read_preset(name)
    base = data.pop("base", None)
    if base is None:
        return data
    if not isinstance(base, str) or not base:
        raise ConfigError(f"preset {name!r}: base must be a preset name or a .yaml path, got {base!r}")
    if where is not None and is_preset_path(base):
        from pathlib import Path

        base_path = Path(base).expanduser()
        base = str(base_path if base_path.is_absolute() else where / base_path)
    if base in _seen + (name,):
        raise ConfigError(f"preset bases loop: {' -> '.join(_seen + (name, base))}")
    return merge_sections(load_preset(base, _seen + (name,)), data)


def _read_preset(name: str):
    """(the preset's own data, the folder of its file or None for a packaged preset)."""
    from importlib.resources import files
    from pathlib import Path

    import yaml

    from moozi.config import ConfigError
    from moozi.config.loading import load_yaml

    if is_preset_path(name):
        path = Path(name).expanduser()
        if not path.is_file():
            raise ConfigError(f"preset file {str(path)!r} does not exist (resolved: {path.resolve()})")
        try:
            data = load_yaml(path.read_text())
        except yaml.YAMLError as err:
            raise ConfigError(f"preset file {str(path)!r} is not valid YAML: {err}") from err
        if data is not None and not isinstance(data, dict):
            raise ConfigError(f"preset file {str(path)!r} must hold a mapping of sections, got {type(data).__name__}")
        return data or {}, path.parent
    names = preset_names()
    if name not in names:  # presets mix - and _ in their names: either spelling finds one
        name = next((n for n in names if n.replace("_", "-") == name.replace("_", "-")), name)
    if name not in names:
        raise ConfigError(
            f"unknown preset {name!r}: available presets are " + ", ".join(names)
            + "; or give a path to a .yaml file (e.g. --preset ./my_game.yaml)"
        )
    return load_yaml(files("moozi.presets").joinpath(f"{name}.yaml").read_text()) or {}, None
