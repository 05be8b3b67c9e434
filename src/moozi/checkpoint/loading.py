"""Checkpoints read back: one folder, or the newest good one of a folder, falling back past corrupt ones."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Mapping

from moozi.checkpoint.encoding import METADATA_FILE, CheckpointError, CorruptCheckpointError, _apply_template
from moozi.checkpoint.files import _read_part, _read_record, _verify_file, verify_checkpoint
from moozi.checkpoint.folders import (
    _REPLACED_PREFIX,
    _TMP_PREFIX,
    list_checkpoints,
    set_aside_checkpoint,
)

logger = logging.getLogger("moozi.checkpoint")


def load_checkpoint(path: str | os.PathLike, templates: Mapping[str, Any] | None = None,
                    parts: list[str] | None = None, verified: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """Load parts of one checkpoint folder (``.../step_XXXXXXXXX``), verifying each checksum (``verified``: the
    caller has just checked them, e.g. with :func:`find_latest`; sizes are still checked).

    Args:
      path: the checkpoint folder.
      templates: optional ``{part: template}`` (see the module docstring);
        parts without one come back as plain nested dicts.
      parts: which parts to read (default: every part it holds).

    Returns:
      ``({part: state}, metadata)``.
    """
    path = Path(path)
    if path.is_dir() and not (path / METADATA_FILE).exists() and list_checkpoints(path):
        raise CorruptCheckpointError(f"{path} is a folder of checkpoints, not one checkpoint; use load_latest()")
    templates = dict(templates or {})
    try:
        record = _read_record(path)
        names = sorted(record["parts"]) if parts is None else list(parts)
        raw = {name: _read_part(path, name, record, verified) for name in names}
    except CorruptCheckpointError as e:
        raise CorruptCheckpointError(f"checkpoint {path} is unusable: {e}") from e
    out = {name: _apply_template(templates[name], state, path) if templates.get(name) is not None else state
           for name, state in raw.items()}
    return out, record["metadata"]


def load_latest(directory: str | os.PathLike, templates: Mapping[str, Any] | None = None,
                parts: list[str] | None = None, set_aside: bool = False, rejected: list | None = None,
                verify_all: bool = False) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """Load the newest good checkpoint in ``directory`` that holds ``parts``, falling back past corrupt ones.

    Each corrupt candidate is logged as a warning (path and reason) on the
    ``moozi.checkpoint`` logger before the next older one is tried; checkpoints
    lacking a requested part are skipped. ``directory`` may also be one
    checkpoint folder.

    ``set_aside=True`` (the run's own writer resuming; never for readers such
    as ``moozi eval``) moves each corrupt checkpoint it passes over into
    ``directory/rejected/`` (:func:`set_aside_checkpoint`), so it is not taken for the
    newest again and is pruned with the good ones. With a ``rejected`` list,
    ``(checkpoint name, reason, where it was moved or None)`` is appended to
    it for each corrupt one instead of logging (the caller reports them).
    ``verify_all=True`` (a resume) takes a checkpoint only when every part it
    holds passes its size and checksum checks, not only the parts read.

    Returns:
      ``({part: state}, metadata, path)`` of the checkpoint loaded.

    Raises:
      CheckpointError: no checkpoint, every one corrupt (each listed with its
        reason), one written by an older moozi (format 1), or the newest good
        one does not match its template.
    """
    directory = Path(directory)
    if (directory / METADATA_FILE).exists():
        if verify_all:
            try:
                verify_checkpoint(directory)
            except CorruptCheckpointError as e:
                raise CorruptCheckpointError(f"checkpoint {directory} is unusable: {e}") from e
        state, metadata = load_checkpoint(directory, templates, parts, verified=verify_all)
        return state, metadata, directory

    def read(path: Path, record: dict[str, Any], names: list[str]) -> dict[str, Any]:
        return {name: _read_part(path, name, record, verified=True) for name in names}

    path, record, raw = _newest_good(directory, parts, read, set_aside, rejected, verify_all)
    t = dict(templates or {})
    out = {n: _apply_template(t[n], st, path) if t.get(n) is not None else st for n, st in raw.items()}
    return out, record["metadata"], path


def find_latest(directory: str | os.PathLike, parts: list[str] | None = None, set_aside: bool = False,
                rejected: list | None = None) -> tuple[Path, dict[str, Any]]:
    """``(path, record)`` of the newest checkpoint in ``directory`` holding ``parts`` whose every part
    passes its size and checksum checks, without decoding anything (for a reader that streams a part).
    Falls back past corrupt ones as :func:`load_latest` does (``set_aside``, ``rejected`` alike)."""
    path, record, _ = _newest_good(Path(directory), parts, lambda *_: None, set_aside, rejected, True)
    return path, record


def _newest_good(directory: Path, parts: list[str] | None, read, set_aside: bool, rejected: list | None,
                 verify_all: bool) -> tuple[Path, dict[str, Any], Any]:
    """The newest ``step_*`` folder holding ``parts`` whose checks and ``read(path, record, names)`` pass."""
    if not directory.exists():
        raise CheckpointError(f"no checkpoint exists at {directory}: the folder does not exist")
    found = list_checkpoints(directory)
    if not found:
        leftovers = [p.name for p in directory.iterdir() if p.name.startswith((_TMP_PREFIX, _REPLACED_PREFIX))]
        extra = f" (only unfinished saves: {', '.join(sorted(leftovers))})" if leftovers else ""
        raise CheckpointError(f"no checkpoint exists at {directory}: no step_* folders{extra}")
    reasons: list[str] = []
    for info in reversed(found):
        try:
            record = _read_record(info.path)
            if parts is not None and not set(parts) <= set(record["parts"]):
                continue
            names = sorted(record["parts"]) if parts is None else list(parts)
            for name in sorted(record["parts"]) if verify_all else names:
                _verify_file(info.path, record["parts"][name])
            result = read(info.path, record, names)
        except CorruptCheckpointError as e:
            moved = set_aside_checkpoint(info.path) if set_aside else None
            if rejected is not None:
                rejected.append((info.path.name, str(e), None if moved is None else str(moved)))
            else:
                logger.warning("checkpoint %s is corrupt, trying an older one: %s%s", info.path, e,
                               f"; moved to {moved}" if moved else "")
            reasons.append(f"  {info.path.name}: {e}" + (f" (moved to {moved})" if moved else ""))
            continue
        if reasons and rejected is None:
            logger.warning("loaded checkpoint %s after rejecting %d newer one(s)", info.path, len(reasons))
        return info.path, record, result
    if not reasons:
        raise CheckpointError(f"no checkpoint in {directory} holds the parts {', '.join(parts or [])}")
    raise CheckpointError(
        f"no usable checkpoint in {directory}; found {len(found)}, all rejected:\n" + "\n".join(reasons)
    )
