"""A folder of checkpoints: step names, atomic commits of parts, pruning, corrupt ones set aside."""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from moozi.checkpoint.encoding import (
    FORMAT,
    FORMAT_VERSION,
    METADATA_FILE,
    CheckpointError,
    _encode_part,
    _json_default,
    _versions,
)
from moozi.checkpoint.files import _fsync_dir, _write_encoded, _write_file, write_chunked_part, write_part

logger = logging.getLogger("moozi.checkpoint")

_NAME_RE = re.compile(r"^step_(\d+)$")
_TMP_PREFIX = ".tmp-"
_REPLACED_PREFIX = ".replaced-"
REJECTED_DIR = "rejected"


@dataclasses.dataclass(frozen=True)
class CheckpointInfo:
    """One checkpoint folder found by :func:`list_checkpoints` (not yet validated).

    step: the training step in the folder name.
    path: the ``step_XXXXXXXXX`` folder.
    """

    step: int
    path: Path


def checkpoint_name(step: int) -> str:
    """Folder name for ``step``: ``step_`` and the step zero-padded to 9 digits."""
    return f"step_{step:09d}"


def list_checkpoints(directory: str | os.PathLike) -> list[CheckpointInfo]:
    """Checkpoint folders (``step_*``) in ``directory``, oldest step first.

    Only names are inspected (no validation); temporary folders from an
    interrupted save are skipped. A missing ``directory`` gives ``[]``.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = []
    for entry in directory.iterdir():
        m = _NAME_RE.match(entry.name)
        if m and entry.is_dir():
            found.append(CheckpointInfo(step=int(m.group(1)), path=entry))
    return sorted(found, key=lambda c: c.step)


def _clean_leftovers(directory: Path) -> None:
    """Delete temp folders from an interrupted save; put back a displaced checkpoint."""
    for entry in sorted(directory.iterdir()):
        if not entry.is_dir():
            continue
        if entry.name.startswith(_REPLACED_PREFIX):
            original = directory / entry.name[len(_REPLACED_PREFIX):].split("-", 1)[0]
            if _NAME_RE.match(original.name) and not original.exists():
                logger.warning("restoring checkpoint %s displaced by an interrupted save", original)
                os.replace(entry, original)
                continue
            logger.info("removing leftover %s", entry)
            shutil.rmtree(entry, ignore_errors=True)
        elif entry.name.startswith(_TMP_PREFIX):
            logger.info("removing leftover temporary checkpoint folder %s", entry)
            shutil.rmtree(entry, ignore_errors=True)


class PendingCheckpoint:
    """A checkpoint being written: parts go into a temporary folder, :meth:`commit` renames it into place.

    Every part is written (and fsynced) before the one atomic rename, so a
    reader sees either the whole checkpoint or none of it. One writer per
    checkpoints folder is assumed.
    """

    def __init__(self, directory: str | os.PathLike, step: int):
        if not isinstance(step, (int, np.integer)) or isinstance(step, bool) or step < 0:
            raise CheckpointError(f"step = {step!r} is invalid: allowed an integer >= 0")
        self.directory = Path(directory)
        self.step = int(step)
        self.directory.mkdir(parents=True, exist_ok=True)
        _clean_leftovers(self.directory)
        self.folder = self.directory / f"{_TMP_PREFIX}{checkpoint_name(self.step)}-{uuid.uuid4().hex[:12]}"
        self.folder.mkdir()
        self.parts: dict[str, dict[str, Any]] = {}

    def write_part(self, name: str, state: Mapping[str, Any]) -> None:
        """Write a part from this process."""
        self.parts[name] = write_part(self.folder, name, state)

    def write_encoded(self, name: str, data: bytes) -> None:
        """Write a part another process encoded with :func:`encode_part` (no shared file system needed)."""
        self.parts[name] = _write_encoded(self.folder, name, data)

    def write_chunked(self, name: str, header: Mapping[str, Any], chunks: Iterable[Mapping[str, Any]],
                      compress_level: int = 1) -> None:
        """Write a chunked part from this process (:func:`write_chunked_part`)."""
        self.parts[name] = write_chunked_part(self.folder, name, header, chunks, compress_level)

    def add_part(self, name: str, record: Mapping[str, Any]) -> None:
        """Register a part another process wrote into :attr:`folder` with :func:`write_part`."""
        if not (self.folder / str(record.get("file", ""))).is_file():
            raise CheckpointError(f"part {name!r} was not written into {self.folder}")
        self.parts[name] = dict(record)

    def commit(self, metadata: Mapping[str, Any], keep: int = 3, keep_part: str | None = None) -> Path:
        """Write ``metadata.json`` and rename the folder into place; prune old checkpoints.

        Args:
          metadata: JSON-serializable dict returned by the loaders.
          keep: how many checkpoints to keep (the new one always stays).
          keep_part: also keep the newest checkpoint holding this part (e.g.
            ``"replay"`` when it is saved less often than the others).
        """
        if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
            self.abort()
            raise CheckpointError(f"keep = {keep!r} is invalid: allowed an integer >= 1")
        record = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "step": self.step,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "parts": self.parts,
            "versions": _versions(),
            "metadata": dict(metadata),
        }
        try:
            meta_text = json.dumps(record, indent=2, default=_json_default)
        except (TypeError, ValueError) as e:
            self.abort()
            raise CheckpointError(f"metadata is not JSON-serializable: {e}") from e
        final = self.directory / checkpoint_name(self.step)
        displaced = None
        try:
            _write_file(self.folder / METADATA_FILE, meta_text.encode("utf-8"))
            _fsync_dir(self.folder)
            if final.exists():
                displaced = self.directory / f"{_REPLACED_PREFIX}{final.name}-{uuid.uuid4().hex[:12]}"
                os.replace(final, displaced)
            os.replace(self.folder, final)
            _fsync_dir(self.directory)
        except BaseException:
            self.abort()
            if displaced is not None and displaced.exists() and not final.exists():
                os.replace(displaced, final)
            raise
        if displaced is not None:
            shutil.rmtree(displaced, ignore_errors=True)
        _prune(self.directory, final, keep, keep_part)
        logger.debug("saved checkpoint %s (parts: %s)", final, ", ".join(sorted(self.parts)))
        return final

    def abort(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _prune(directory: Path, newest: Path, keep: int, keep_part: str | None) -> None:
    found = list_checkpoints(directory)
    others = [c for c in found if c.path != newest]
    doomed = others[: max(len(others) - (keep - 1), 0)]
    if keep_part and doomed:
        kept = [c for c in found if c not in doomed]
        if not any(_has_part(c.path, keep_part) for c in kept):
            holder = next((c for c in reversed(doomed) if _has_part(c.path, keep_part)), None)
            doomed = [c for c in doomed if c is not holder]
    for old in doomed:
        logger.info("pruning old checkpoint %s (keep=%d)", old.path, keep)
        shutil.rmtree(old.path, ignore_errors=True)
    _prune_rejected(directory)
    _fsync_dir(directory)


def set_aside_checkpoint(path: Path) -> Path:
    """Move a corrupt checkpoint folder into ``rejected/`` beside it (kept for inspection, never loaded)."""
    target_dir = path.parent / REJECTED_DIR
    target_dir.mkdir(exist_ok=True)
    target = target_dir / path.name
    if target.exists():
        target = target_dir / f"{path.name}-{uuid.uuid4().hex[:8]}"
    os.replace(path, target)
    _fsync_dir(path.parent)
    return target


def _prune_rejected(directory: Path) -> None:
    """Delete set-aside checkpoints older than every good one kept: they never outlive the good ones."""
    rejected = directory / REJECTED_DIR
    found = list_checkpoints(directory)
    if not rejected.is_dir() or not found:
        return
    oldest = found[0].step
    for entry in rejected.iterdir():
        m = _NAME_RE.match(entry.name.split("-", 1)[0])
        if m and int(m.group(1)) < oldest:
            logger.info("pruning rejected checkpoint %s", entry)
            shutil.rmtree(entry, ignore_errors=True)


def _has_part(path: Path, name: str) -> bool:
    try:
        return name in json.loads((path / METADATA_FILE).read_text()).get("parts", {})
    except (OSError, ValueError, AttributeError):
        return False


def save_checkpoint(directory: str | os.PathLike, step: int, parts: Mapping[str, Mapping[str, Any]],
                    metadata: Mapping[str, Any], keep: int = 3, keep_part: str | None = None) -> Path:
    """Write ``parts`` (name -> state tree) and ``metadata`` atomically as ``directory/step_XXXXXXXXX``.

    Every part is encoded before anything is written, so a leaf that is not
    data (the error names its path) leaves the disk untouched. Saving a step
    that exists replaces it (the new one is complete before the old one moves).
    """
    encoded = {name: _encode_part(state) for name, state in parts.items()}  # fail before touching the disk
    pending = PendingCheckpoint(directory, step)
    try:
        for name, data in encoded.items():
            pending.parts[name] = _write_encoded(pending.folder, name, data)
    except BaseException:
        pending.abort()
        raise
    return pending.commit(metadata, keep=keep, keep_part=keep_part)
