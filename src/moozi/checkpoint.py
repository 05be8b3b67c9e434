"""Checkpoints: data on disk, never pickled code (../shared/DESIGN.md §7).

Layout of a checkpoints folder (typically ``run_dir/"checkpoints"``)::

    checkpoints/
      step_000000100/
        state.msgpack     the state tree (flax msgpack: nested maps of arrays/scalars)
        metadata.json     checkpoint record + the caller's metadata (see below)
      step_000000200/
        ...
      .tmp-step_000000300-<hex>/   a save in progress (or left by a crash; ignored
                                   by readers, deleted by the next save)

``metadata.json`` is one JSON object::

    {"format": "moozi-checkpoint", "format_version": 1, "step": 200,
     "created": "2025-01-01T00:00:00+00:00", "data_file": "state.msgpack",
     "data_bytes": 12345, "data_sha256": "<hex>",
     "versions": {"moozi": ..., "jax": ..., "flax": ..., "numpy": ..., "python": ...},
     "metadata": {...the caller's metadata, returned by the loaders...}}

``state.msgpack`` holds ``{"format": "moozi-checkpoint-state", "format_version": 1,
"prng_keys": [{"path": [...], "impl": "threefry2x32"}, ...], "state": {...}}``.

Saving converts the state with :func:`flax.serialization.to_state_dict`, so any
pytree flax knows works as a leaf container: dicts, lists/tuples, optax
namedtuples, flax ``struct`` dataclasses such as
:class:`moozi.update.TrainState`. Typed JAX PRNG keys are stored as their
``jax.random.key_data`` and re-wrapped on load (their paths and impl names are
recorded in the file). Leaves must be numeric/bool numpy or JAX arrays, numpy
scalars, Python ``int``/``float``/``bool``/``str`` or ``None``; anything else is
refused at save time with the path of the offending leaf.

Restoring: without a template, a loader returns plain data: nested ``dict`` with
string keys (lists, tuples, namedtuples and dataclasses come back as dicts keyed
by index or field name), writable numpy arrays, Python scalars and typed PRNG
keys. With ``template`` (a tree shaped like the saved state, e.g.
``{"train_state": init_train_state(...), "replay": None}``), the result is
rebuilt with :func:`flax.serialization.from_state_dict` into the template's
structure: a ``TrainState`` comes back as a ``TrainState``. Where the template
leaf is a JAX array the restored leaf is checked for shape and dtype and put on
the device as a JAX array; where the template leaf is ``None`` (or a numpy
array, or a scalar) the saved data is returned as is. Keys saved but absent
from a template dict are dropped. A mismatch raises :class:`CheckpointError`.

Writes are atomic: everything is written and fsynced in a temporary folder
inside ``directory`` which is then renamed into place; older checkpoints are
pruned only afterwards. One writer per folder is assumed.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any, Mapping

import numpy as np

logger = logging.getLogger("moozi.checkpoint")

FORMAT = "moozi-checkpoint"
STATE_FORMAT = "moozi-checkpoint-state"
FORMAT_VERSION = 1
DATA_FILE = "state.msgpack"
METADATA_FILE = "metadata.json"

_NAME_RE = re.compile(r"^step_(\d+)$")
_TMP_PREFIX = ".tmp-"
_REPLACED_PREFIX = ".replaced-"
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


class CheckpointError(RuntimeError):
    """No usable checkpoint, a checkpoint that does not match its template, or bad save arguments."""


class CorruptCheckpointError(CheckpointError):
    """A checkpoint folder is unreadable: missing/undecodable files, wrong size or checksum."""


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


# --------------------------------------------------------------------------- encoding


def _path_str(path: tuple[str, ...]) -> str:
    return "state" + "".join(f"[{p!r}]" for p in path)


def _is_prng_key(x: Any) -> bool:
    import jax

    return isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _check_array_dtype(dtype: np.dtype, path: tuple[str, ...]) -> None:
    if dtype.hasobject or dtype.fields is not None or dtype.kind in "USOMm":
        raise CheckpointError(
            f"{_path_str(path)} has dtype {dtype}; checkpoints store numeric and bool arrays only"
        )


def _encode(tree: Any, path: tuple[str, ...], keys: list[dict[str, Any]]) -> Any:
    """Validate a ``to_state_dict`` tree and make it msgpack-ready (keys -> key data)."""
    import jax

    if isinstance(tree, dict):
        return {k: _encode(v, path + (k,), keys) for k, v in tree.items()}
    if tree is None or isinstance(tree, (bool, float, str)):
        return tree
    if isinstance(tree, int):
        if not _INT_MIN <= tree <= _INT_MAX:
            raise CheckpointError(f"{_path_str(path)} = {tree} does not fit in 64 bits")
        return tree
    if _is_prng_key(tree):
        keys.append({"path": list(path), "impl": str(jax.random.key_impl(tree))})
        return np.asarray(jax.random.key_data(tree))
    if isinstance(tree, jax.Array):
        _check_array_dtype(np.dtype(tree.dtype), path)
        return np.asarray(tree)
    if isinstance(tree, (np.ndarray, np.generic)):
        _check_array_dtype(tree.dtype, path)
        return tree
    raise CheckpointError(
        f"{_path_str(path)} has type {type(tree).__qualname__}; checkpoints hold data only "
        "(arrays, numbers, bools, strings, PRNG keys in dicts/lists/tuples/dataclasses)"
    )


def _writable(tree: Any) -> Any:
    """Copy the read-only arrays msgpack returns (views into the file buffer)."""
    if isinstance(tree, dict):
        return {k: _writable(v) for k, v in tree.items()}
    if isinstance(tree, np.ndarray):
        return np.array(tree)
    return tree


def _json_default(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray) and x.size == 1:
        return x.item()
    if isinstance(x, Path):
        return str(x)
    if isinstance(x, (set, frozenset)):
        return sorted(x)
    if hasattr(x, "__array__") and getattr(x, "size", None) == 1:
        return np.asarray(x).item()
    raise TypeError(f"{type(x).__qualname__} is not JSON serializable")


def _versions() -> dict[str, str]:
    from importlib import metadata as importlib_metadata

    out = {"python": sys.version.split()[0]}
    for dist in ("moozi", "jax", "flax", "numpy"):
        try:
            out[dist] = importlib_metadata.version(dist)
        except importlib_metadata.PackageNotFoundError:
            out[dist] = "unknown"
    return out


# --------------------------------------------------------------------------- files


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _write_file(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


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


# --------------------------------------------------------------------------- API


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


def save_checkpoint(
    directory: str | os.PathLike,
    step: int,
    state: Mapping[str, Any],
    metadata: Mapping[str, Any],
    keep: int = 3,
) -> Path:
    """Write ``state`` and ``metadata`` atomically as ``directory/step_XXXXXXXXX``.

    Args:
      directory: the checkpoints folder (created if missing), e.g. ``run_dir/"checkpoints"``.
      step: training step (``int >= 0``); names the folder. Saving a step that
        already exists replaces it (the new one is complete before the old one moves).
      state: nested dict of arrays / scalars / strings / PRNG keys / pytrees such
        as ``TrainState`` (see the module docstring).
      metadata: JSON-serializable dict (config, counters, ...) stored in
        ``metadata.json`` and returned by the loaders; numpy scalars are converted.
      keep: how many checkpoints to keep (``int >= 1``); older ones, by step, are
        deleted after the new one is in place. The new one is never deleted.

    Returns:
      The path of the new checkpoint folder.

    Raises:
      CheckpointError: bad ``step``/``keep``, a leaf that is not data, or
        metadata that is not JSON. Nothing is written in that case.
    """
    from flax import serialization

    if not isinstance(step, (int, np.integer)) or isinstance(step, bool) or step < 0:
        raise CheckpointError(f"step = {step!r} is invalid: allowed an integer >= 0")
    if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
        raise CheckpointError(f"keep = {keep!r} is invalid: allowed an integer >= 1")
    if not isinstance(state, Mapping):
        raise CheckpointError(f"state must be a dict, got {type(state).__qualname__}")
    if not isinstance(metadata, Mapping):
        raise CheckpointError(f"metadata must be a dict, got {type(metadata).__qualname__}")
    step = int(step)
    directory = Path(directory)

    # Encode everything before touching the disk.
    prng_keys: list[dict[str, Any]] = []
    encoded = _encode(serialization.to_state_dict(dict(state)), (), prng_keys)
    payload = {
        "format": STATE_FORMAT,
        "format_version": FORMAT_VERSION,
        "prng_keys": {str(i): k for i, k in enumerate(prng_keys)},
        "state": encoded,
    }
    try:
        data = serialization.msgpack_serialize(payload)
    except (TypeError, ValueError, OverflowError) as e:
        raise CheckpointError(f"could not serialize the state: {e}") from e
    record = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "step": step,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "data_file": DATA_FILE,
        "data_bytes": len(data),
        "data_sha256": hashlib.sha256(data).hexdigest(),
        "versions": _versions(),
        "metadata": dict(metadata),
    }
    try:
        meta_text = json.dumps(record, indent=2, default=_json_default)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"metadata is not JSON-serializable: {e}") from e

    directory.mkdir(parents=True, exist_ok=True)
    _clean_leftovers(directory)
    name = checkpoint_name(step)
    tmp = directory / f"{_TMP_PREFIX}{name}-{uuid.uuid4().hex[:12]}"
    final = directory / name
    displaced = None
    tmp.mkdir()
    try:
        _write_file(tmp / DATA_FILE, data)
        _write_file(tmp / METADATA_FILE, meta_text.encode("utf-8"))
        _fsync_dir(tmp)
        if final.exists():
            displaced = directory / f"{_REPLACED_PREFIX}{name}-{uuid.uuid4().hex[:12]}"
            os.replace(final, displaced)
        os.replace(tmp, final)
        _fsync_dir(directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if displaced is not None and displaced.exists() and not final.exists():
            os.replace(displaced, final)
        raise
    if displaced is not None:
        shutil.rmtree(displaced, ignore_errors=True)

    others = [c for c in list_checkpoints(directory) if c.path != final]
    excess = len(others) - (keep - 1)
    for old in others[: max(excess, 0)]:
        logger.info("pruning old checkpoint %s (keep=%d)", old.path, keep)
        shutil.rmtree(old.path, ignore_errors=True)
    _fsync_dir(directory)
    logger.info("saved checkpoint %s (%d bytes)", final, len(data))
    return final


def _read_verified(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Decode one checkpoint folder; raise CorruptCheckpointError with the reason."""
    from flax import serialization

    if not path.exists():
        raise CorruptCheckpointError(f"{path} does not exist")
    if not path.is_dir():
        raise CorruptCheckpointError(f"{path} is not a checkpoint folder")
    meta_path = path / METADATA_FILE
    if not meta_path.is_file():
        raise CorruptCheckpointError(f"{meta_path.name} is missing")
    try:
        record = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CorruptCheckpointError(f"{meta_path.name} is unreadable: {e}") from e
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise CorruptCheckpointError(f"{meta_path.name} is not a moozi checkpoint record")
    if record.get("format_version") != FORMAT_VERSION:
        raise CorruptCheckpointError(
            f"format_version {record.get('format_version')!r} is not supported "
            f"(this moozi reads version {FORMAT_VERSION})"
        )
    for field in ("data_file", "data_bytes", "data_sha256", "metadata"):
        if field not in record:
            raise CorruptCheckpointError(f"{meta_path.name} lacks the field {field!r}")
    data_path = path / str(record["data_file"])
    if not data_path.is_file():
        raise CorruptCheckpointError(f"{data_path.name} is missing")
    data = data_path.read_bytes()
    if len(data) != record["data_bytes"]:
        raise CorruptCheckpointError(
            f"{data_path.name} has {len(data)} bytes, expected {record['data_bytes']} (truncated?)"
        )
    digest = hashlib.sha256(data).hexdigest()
    if digest != record["data_sha256"]:
        raise CorruptCheckpointError(
            f"{data_path.name} checksum mismatch (sha256 {digest[:16]}..., "
            f"expected {str(record['data_sha256'])[:16]}...)"
        )
    try:
        payload = serialization.msgpack_restore(data)
    except Exception as e:  # msgpack raises several unrelated types
        raise CorruptCheckpointError(f"{data_path.name} could not be decoded: {e}") from e
    if (
        not isinstance(payload, dict)
        or payload.get("format") != STATE_FORMAT
        or not isinstance(payload.get("state"), dict)
    ):
        raise CorruptCheckpointError(f"{data_path.name} does not hold a moozi checkpoint state")
    return payload, record


def _decode_state(payload: dict[str, Any], path: Path) -> dict[str, Any]:
    import jax

    state = _writable(payload["state"])
    for entry in payload.get("prng_keys", {}).values():
        keys = entry["path"]
        node = state
        try:
            for k in keys[:-1]:
                node = node[k]
            node[keys[-1]] = jax.random.wrap_key_data(node[keys[-1]], impl=entry["impl"])
        except Exception as e:
            raise CorruptCheckpointError(
                f"PRNG key at {_path_str(tuple(keys))} could not be restored: {e}"
            ) from e
    return state


def _apply_template(template: Any, state: dict[str, Any], path: Path) -> Any:
    import jax
    import jax.numpy as jnp
    from flax import serialization

    try:
        restored = serialization.from_state_dict(template, state)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CheckpointError(f"checkpoint {path} does not match the template: {e}") from e

    def fix(kp, t, r):
        where = "state" + jax.tree_util.keystr(kp)
        if isinstance(t, jax.Array):
            if _is_prng_key(t):
                if not _is_prng_key(r):
                    raise CheckpointError(
                        f"checkpoint {path}: {where} should be a PRNG key, found {type(r).__qualname__}"
                    )
                return r
            if not hasattr(r, "shape") or tuple(r.shape) != tuple(t.shape) or np.dtype(r.dtype) != np.dtype(t.dtype):
                got = f"{getattr(r, 'shape', None)} {getattr(r, 'dtype', type(r).__qualname__)}"
                raise CheckpointError(
                    f"checkpoint {path}: {where} has {got}, the template expects "
                    f"{tuple(t.shape)} {t.dtype}"
                )
            return jnp.asarray(r)
        return r

    try:
        return jax.tree_util.tree_map_with_path(fix, template, restored, is_leaf=lambda x: x is None)
    except CheckpointError:
        raise
    except (ValueError, TypeError) as e:
        raise CheckpointError(f"checkpoint {path} does not match the template: {e}") from e


def load_checkpoint(path: str | os.PathLike, template: Any = None) -> tuple[Any, dict[str, Any]]:
    """Load one checkpoint folder (``.../step_XXXXXXXXX``), verifying its checksum.

    Args:
      path: the checkpoint folder.
      template: optional tree shaped like the saved state (see the module
        docstring); without it plain nested dicts come back.

    Returns:
      ``(state, metadata)``: the state, and the caller's metadata dict as saved.

    Raises:
      CorruptCheckpointError: the folder is missing, incomplete or corrupt (the
        message says why).
      CheckpointError: the state does not match ``template``.
    """
    path = Path(path)
    if path.is_dir() and not (path / METADATA_FILE).exists() and list_checkpoints(path):
        raise CorruptCheckpointError(
            f"{path} is a folder of checkpoints, not one checkpoint; use load_latest()"
        )
    try:
        payload, record = _read_verified(path)
    except CorruptCheckpointError as e:
        raise CorruptCheckpointError(f"checkpoint {path} is unusable: {e}") from e
    state = _decode_state(payload, path)
    if template is not None:
        state = _apply_template(template, state, path)
    return state, record["metadata"]


def load_latest(
    directory: str | os.PathLike, template: Any = None
) -> tuple[Any, dict[str, Any], Path]:
    """Load the newest good checkpoint in ``directory``, falling back past corrupt ones.

    Each corrupt candidate is logged as a warning (path and reason) on the
    ``moozi.checkpoint`` logger before the next older one is tried. ``directory``
    may also be a single checkpoint folder.

    Returns:
      ``(state, metadata, path)`` of the checkpoint loaded.

    Raises:
      CheckpointError: ``directory`` does not exist or holds no checkpoint; every
        checkpoint is corrupt (the message lists each and why); or the newest
        good one does not match ``template`` (no fallback: older ones would not
        match either).
    """
    directory = Path(directory)
    if not directory.exists():
        raise CheckpointError(f"no checkpoint exists at {directory}: the folder does not exist")
    if (directory / METADATA_FILE).exists():
        state, metadata = load_checkpoint(directory, template)
        return state, metadata, directory
    found = list_checkpoints(directory)
    if not found:
        leftovers = [p.name for p in directory.iterdir() if p.name.startswith((_TMP_PREFIX, _REPLACED_PREFIX))]
        extra = f" (only unfinished saves: {', '.join(sorted(leftovers))})" if leftovers else ""
        raise CheckpointError(f"no checkpoint exists at {directory}: no step_* folders{extra}")
    rejected: list[str] = []
    for info in reversed(found):
        try:
            payload, record = _read_verified(info.path)
            state = _decode_state(payload, info.path)
        except CorruptCheckpointError as e:
            logger.warning("checkpoint %s is corrupt, trying an older one: %s", info.path, e)
            rejected.append(f"  {info.path.name}: {e}")
            continue
        if rejected:
            logger.warning("loaded checkpoint %s after rejecting %d newer one(s)", info.path, len(rejected))
        if template is not None:
            state = _apply_template(template, state, info.path)
        return state, record["metadata"], info.path
    raise CheckpointError(
        f"no usable checkpoint in {directory}; found {len(found)}, all rejected:\n" + "\n".join(rejected)
    )
