"""Checkpoints: data on disk, never pickled code (../shared/DESIGN.md §7).

Layout of a checkpoints folder (typically ``run_dir/"checkpoints"``)::

    checkpoints/
      step_000000100/
        learner.msgpack   one part per component (flax msgpack: nested maps of arrays/scalars)
        replay.chunks     a chunked part: written and read a piece at a time (see below)
        actor.msgpack
        metadata.json     checkpoint record + the caller's metadata (see below)
      step_000000200/
        ...
      .tmp-step_000000300-<hex>/   a save in progress (or left by a crash; ignored
                                   by readers, deleted by the next save)

Each component writes its own part (:func:`write_part`, possibly from another
process into the pending folder); :meth:`PendingCheckpoint.commit` writes
``metadata.json`` and commits every part together with one atomic rename.
A part may be left out of some checkpoints (replay is large and may be saved
less often); loaders can ask for the newest checkpoint holding given parts.

``metadata.json`` is one JSON object::

    {"format": "moozi-checkpoint", "format_version": 3, "step": 200,
     "created": "2025-01-01T00:00:00+00:00",
     "parts": {"learner": {"file": "learner.msgpack", "bytes": 12345, "sha256": "<hex>"},
               "replay": {"file": "replay.chunks", "bytes": ..., "sha256": ..., "layout": "chunks",
                          "chunks": 12, "raw_bytes": ...}, ...},
     "versions": {"moozi": ..., "jax": ..., "flax": ..., "numpy": ..., "python": ...},
     "metadata": {...the caller's metadata, returned by the loaders...}}

A part file holds ``{"format": "moozi-checkpoint-state", "format_version": 2,
"prng_keys": [{"path": [...], "impl": "threefry2x32"}, ...], "state": {...}}``.

A *chunked* part (``layout: "chunks"``, :func:`write_chunked_part`) is for a
state too large to hold twice in memory (the replay buffer): a header state
and a stream of chunks, each a dict of arrays that continue one another along
their first axis. The file is a sequence of frames, each ``codec`` (1 byte:
0 raw, 1 zlib), ``length`` (8 bytes, little-endian) and that many bytes of one
encoded state as above: the header first, then the chunks in order. It is
checksummed as it is written and verified by streaming it, so neither side
holds more than one chunk. Read whole (:func:`load_checkpoint`), it comes back
as the header with each chunk key's arrays concatenated;
:func:`read_chunked_part` streams it.

Format 3 added chunked parts; format 2 checkpoints (every part one msgpack
file) are read as before. Checkpoints of format 1 (one ``state.msgpack`` blob,
moozi 0.1) are refused with :class:`LegacyCheckpointError`, which says so.

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
import struct
import sys
import uuid
import zlib
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

logger = logging.getLogger("moozi.checkpoint")

FORMAT = "moozi-checkpoint"
STATE_FORMAT = "moozi-checkpoint-state"
FORMAT_VERSION = 3
READ_VERSIONS = (2, 3)  # 3 added chunked parts; a format 2 checkpoint has none
METADATA_FILE = "metadata.json"

_NAME_RE = re.compile(r"^step_(\d+)$")
_PART_RE = re.compile(r"^[A-Za-z0-9_]+$")
_TMP_PREFIX = ".tmp-"
_REPLACED_PREFIX = ".replaced-"
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1
CHUNKS = "chunks"  # the layout of a chunked part
_FRAME = struct.Struct("<BQ")  # codec, payload length
_RAW, _ZLIB = 0, 1
_BLOCK = 1 << 20  # bytes read at a time when verifying a file


class CheckpointError(RuntimeError):
    """No usable checkpoint, a checkpoint that does not match its template, or bad save arguments."""


class LegacyCheckpointError(CheckpointError):
    """A checkpoint written by an older moozi in a format this one does not read (not a fallback case)."""


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



def _encode_part(state: Mapping[str, Any]) -> bytes:
    """Validate one part's state tree and serialise it (nothing touches the disk)."""
    from flax import serialization

    if not isinstance(state, Mapping):
        raise CheckpointError(f"a part's state must be a dict, got {type(state).__qualname__}")
    prng_keys: list[dict[str, Any]] = []
    encoded = _encode(serialization.to_state_dict(dict(state)), (), prng_keys)
    payload = {
        "format": STATE_FORMAT,
        "format_version": FORMAT_VERSION,
        "prng_keys": {str(i): k for i, k in enumerate(prng_keys)},
        "state": encoded,
    }
    try:
        return serialization.msgpack_serialize(payload)
    except (TypeError, ValueError, OverflowError) as e:
        raise CheckpointError(f"could not serialize the state: {e}") from e


def encode_part(state: Mapping[str, Any]) -> bytes:
    """One part's state as bytes (what a component in another process sends to the checkpoint's writer)."""
    return _encode_part(state)


def decode_part(data: bytes, template: Any = None, where: str = "part") -> Any:
    """The inverse of :func:`encode_part`: plain data, or rebuilt into ``template`` (see the module doc)."""
    path = Path(where)
    state = _decode_bytes(data, where, path)
    return state if template is None else _apply_template(template, state, path)


def read_part_bytes(path: str | os.PathLike, name: str) -> bytes:
    """The verified bytes of part ``name`` of one checkpoint folder (for :func:`decode_part` elsewhere)."""
    path = Path(path)
    record = _read_record(path)
    part = record["parts"].get(name)
    if part is None:
        raise CheckpointError(f"checkpoint {path} has no part {name!r} (it has: {', '.join(sorted(record['parts']))})")
    if part.get("layout") == CHUNKS:
        raise CheckpointError(f"part {name!r} of {path} is chunked: read it with read_chunked_part")
    return _verified_bytes(path, part)


def _part_file(path: Path, part: Mapping[str, Any]) -> Path:
    data_path = path / str(part["file"])
    if not data_path.is_file():
        raise CorruptCheckpointError(f"{data_path.name} is missing")
    size = data_path.stat().st_size
    if size != part["bytes"]:
        raise CorruptCheckpointError(f"{data_path.name} has {size} bytes, expected {part['bytes']} (truncated?)")
    return data_path


def _check_digest(name: str, digest: str, part: Mapping[str, Any]) -> None:
    if digest != part["sha256"]:
        raise CorruptCheckpointError(f"{name} checksum mismatch (sha256 {digest[:16]}..., "
                                     f"expected {str(part['sha256'])[:16]}...)")


def _verified_bytes(path: Path, part: Mapping[str, Any]) -> bytes:
    data_path = _part_file(path, part)
    data = data_path.read_bytes()
    if len(data) != part["bytes"]:
        raise CorruptCheckpointError(f"{data_path.name} has {len(data)} bytes, expected {part['bytes']} (truncated?)")
    _check_digest(data_path.name, hashlib.sha256(data).hexdigest(), part)
    return data


def _verify_file(path: Path, part: Mapping[str, Any]) -> None:
    """Size and checksum of one part's file, read a block at a time (constant memory)."""
    data_path = _part_file(path, part)
    digest = hashlib.sha256()
    with open(data_path, "rb") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
    _check_digest(data_path.name, digest.hexdigest(), part)


def verify_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Check the size and checksum of every part of one checkpoint folder; return its record.

    Raises:
      CorruptCheckpointError: naming the first bad part (or the unreadable record).
    """
    path = Path(path)
    record = _read_record(path)
    for part in record["parts"].values():
        _verify_file(path, part)
    return record


def _decode_bytes(data: bytes, name: str, path: Path) -> dict[str, Any]:
    from flax import serialization

    try:
        payload = serialization.msgpack_restore(data)
    except Exception as e:  # msgpack raises several unrelated types
        raise CorruptCheckpointError(f"{name} could not be decoded: {e}") from e
    if not isinstance(payload, dict) or payload.get("format") != STATE_FORMAT or not isinstance(payload.get("state"), dict):
        raise CorruptCheckpointError(f"{name} does not hold a moozi checkpoint state")
    return _decode_state(payload, path)


def write_part(folder: str | os.PathLike, name: str, state: Mapping[str, Any]) -> dict[str, Any]:
    """Write one component's part ``name.msgpack`` into a pending checkpoint folder.

    A component in another process calls this with the folder of a
    :class:`PendingCheckpoint` (a shared file system) and hands the returned
    record to :meth:`PendingCheckpoint.add_part`.

    Returns:
      the part's record: ``{"file", "bytes", "sha256"}``.
    """
    return _write_encoded(folder, name, _encode_part(state))


def _write_encoded(folder: str | os.PathLike, name: str, data: bytes) -> dict[str, Any]:
    if not _PART_RE.match(name):
        raise CheckpointError(f"part name {name!r} is invalid: allowed letters, digits and _")
    _write_file(Path(folder) / f"{name}.msgpack", data)
    return {"file": f"{name}.msgpack", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


class _HashingFile:
    """A file being written that counts and checksums its bytes as they go (and fsyncs on close)."""

    def __init__(self, path: Path):
        self.f = open(path, "wb")
        self.digest = hashlib.sha256()
        self.bytes = 0

    def write(self, data: bytes) -> None:
        self.f.write(data)
        self.digest.update(data)
        self.bytes += len(data)

    def close(self) -> None:
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()


def write_chunked_part(folder: str | os.PathLike, name: str, header: Mapping[str, Any],
                       chunks: Iterable[Mapping[str, Any]], compress_level: int = 1) -> dict[str, Any]:
    """Write part ``name.chunks``: ``header`` then each of ``chunks``, one encoded frame at a time.

    Only one chunk is in memory at a time (the iterable may build them lazily).
    ``compress_level`` 1-9 compresses each chunk with zlib (kept only where it
    saves at least a tenth); 0 writes them raw. The header is never compressed.

    Returns:
      the part's record: ``{"file", "bytes", "sha256", "layout": "chunks", "chunks", "raw_bytes"}``
      (``raw_bytes``: the encoded size before compression).
    """
    if not _PART_RE.match(name):
        raise CheckpointError(f"part name {name!r} is invalid: allowed letters, digits and _")
    if not isinstance(compress_level, int) or not 0 <= compress_level <= 9:
        raise CheckpointError(f"compress_level = {compress_level!r} is invalid: allowed an integer in [0, 9]")
    out = _HashingFile(Path(folder) / f"{name}.{CHUNKS}")
    count = raw = 0
    try:
        _write_frame(out, _encode_part(header), 0)
        for chunk in chunks:
            data = _encode_part(chunk)
            raw += len(data)
            _write_frame(out, data, compress_level)
            count += 1
            del data
    finally:
        out.close()
    return {"file": f"{name}.{CHUNKS}", "bytes": out.bytes, "sha256": out.digest.hexdigest(), "layout": CHUNKS,
            "chunks": count, "raw_bytes": raw}


def _write_frame(out: _HashingFile, data: bytes, compress_level: int) -> None:
    codec = _RAW
    if compress_level:
        packed = zlib.compress(data, compress_level)
        if len(packed) <= 0.9 * len(data):
            data, codec = packed, _ZLIB
    out.write(_FRAME.pack(codec, len(data)))
    out.write(data)  # not joined to its header: that would copy the chunk once more


def _read_frames(data_path: Path) -> Iterator[bytes]:
    """The payloads of a chunked part's frames, in order (decompressed)."""
    with open(data_path, "rb") as f:
        while head := f.read(_FRAME.size):
            if len(head) != _FRAME.size:
                raise CorruptCheckpointError(f"{data_path.name} ends inside a frame header")
            codec, length = _FRAME.unpack(head)
            data = f.read(length)
            if len(data) != length:
                raise CorruptCheckpointError(f"{data_path.name} ends inside a frame ({len(data)} of {length} bytes)")
            if codec == _ZLIB:
                try:
                    data = zlib.decompress(data)
                except zlib.error as e:
                    raise CorruptCheckpointError(f"{data_path.name}: a chunk could not be decompressed: {e}") from e
            elif codec != _RAW:
                raise CorruptCheckpointError(f"{data_path.name}: unknown chunk codec {codec}")
            yield data


def read_chunked_part(path: str | os.PathLike, name: str, verified: bool = False
                      ) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """Stream part ``name`` of one checkpoint folder: ``(header, chunks)``, one chunk decoded at a time.

    A part written whole (:func:`write_part`, and every part of a format 2
    checkpoint) comes back as its state with no chunks, so a reader of a part
    that became chunked reads old checkpoints with the same code.
    ``verified=True`` skips the checksum pass (the caller has just run
    :func:`verify_checkpoint`).
    """
    path = Path(path)
    record = _read_record(path)
    part = record["parts"].get(name)
    if part is None:
        raise CheckpointError(f"checkpoint {path} has no part {name!r} (it has: {', '.join(sorted(record['parts']))})")
    if part.get("layout") != CHUNKS:
        return _decode_bytes(_verified_bytes(path, part), str(part["file"]), path), iter(())
    if not verified:
        _verify_file(path, part)
    frames = _read_frames(path / str(part["file"]))
    try:
        header = _decode_bytes(next(frames), str(part["file"]), path)
    except StopIteration:
        raise CorruptCheckpointError(f"{part['file']} holds no header") from None
    return header, (_decode_bytes(data, str(part["file"]), path) for data in frames)


def _join_chunks(header: dict[str, Any], chunks: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """A chunked part read whole: the header with each chunk key's arrays concatenated along axis 0."""
    pieces: dict[str, list] = {}
    for chunk in chunks:
        for key, value in chunk.items():
            pieces.setdefault(key, []).append(value)
    return {**header, **{key: np.concatenate(values) for key, values in pieces.items()}}


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


REJECTED_DIR = "rejected"


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


def _read_record(path: Path) -> dict[str, Any]:
    """The checkpoint record of one folder; CorruptCheckpointError with the reason."""
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
    if record.get("format_version") == 1:
        raise LegacyCheckpointError(
            f"checkpoint {path} was written by moozi 0.1 before checkpoints were split into parts "
            f"(format 1, one state blob); this moozi reads format {FORMAT_VERSION}. Resume or evaluate it with "
            "the moozi version that wrote it, or start a new run"
        )
    if record.get("format_version") not in READ_VERSIONS:
        raise CorruptCheckpointError(f"format_version {record.get('format_version')!r} is not supported "
                                     f"(this moozi reads versions {', '.join(map(str, READ_VERSIONS))})")
    if not isinstance(record.get("parts"), dict) or "metadata" not in record:
        raise CorruptCheckpointError(f"{meta_path.name} lacks its parts or metadata")
    return record


def _read_part(path: Path, name: str, record: Mapping[str, Any], verified: bool = False) -> dict[str, Any]:
    part = record["parts"].get(name)
    if part is None:
        raise CheckpointError(f"checkpoint {path} has no part {name!r} (it has: {', '.join(sorted(record['parts']))})")
    if part.get("layout") == CHUNKS:
        return _join_chunks(*read_chunked_part(path, name, verified=verified))
    return _decode_bytes(_verified_bytes(path, part), str(part["file"]), path)


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




def checkpoint_parts(path: str | os.PathLike) -> list[str]:
    """Names of the parts a checkpoint folder holds."""
    return sorted(_read_record(Path(path))["parts"])


def load_checkpoint(path: str | os.PathLike, templates: Mapping[str, Any] | None = None,
                    parts: list[str] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Load parts of one checkpoint folder (``.../step_XXXXXXXXX``), verifying each checksum.

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
        raw = {name: _read_part(path, name, record) for name in names}
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
        state, metadata = load_checkpoint(directory, templates, parts)
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
