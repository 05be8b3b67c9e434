"""The files of one checkpoint folder: its record, each part checked by size and checksum, chunked parts streamed."""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import zlib
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from moozi.checkpoint.encoding import (
    FORMAT,
    FORMAT_VERSION,
    METADATA_FILE,
    READ_VERSIONS,
    CheckpointError,
    CorruptCheckpointError,
    LegacyCheckpointError,
    _decode_bytes,
    _encode_part,
)

_PART_RE = re.compile(r"^[A-Za-z0-9_]+$")
CHUNKS = "chunks"  # the layout of a chunked part
_FRAME = struct.Struct("<BQ")  # codec, payload length
_RAW, _ZLIB = 0, 1
_BLOCK = 1 << 20  # bytes read at a time when verifying a file


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
    for name, part in record["parts"].items():  # a part is a file of this folder: nothing outside it is read
        file = part.get("file") if isinstance(part, dict) else None
        if not isinstance(file, str) or not file or file in (".", "..") or "/" in file or "\\" in file \
                or "\0" in file:
            raise CorruptCheckpointError(f"{meta_path.name}: part {name!r} names the file {file!r}, not a file "
                                         "of the checkpoint's own folder")
    return record


def checkpoint_parts(path: str | os.PathLike) -> list[str]:
    """Names of the parts a checkpoint folder holds."""
    return sorted(_read_record(Path(path))["parts"])


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


def _verified_bytes(path: Path, part: Mapping[str, Any], verified: bool = False) -> bytes:
    """A part's bytes, size-checked; checksummed too unless the caller has just verified the file."""
    data_path = _part_file(path, part)
    data = data_path.read_bytes()
    if len(data) != part["bytes"]:
        raise CorruptCheckpointError(f"{data_path.name} has {len(data)} bytes, expected {part['bytes']} (truncated?)")
    if not verified:
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


def _read_part(path: Path, name: str, record: Mapping[str, Any], verified: bool = False) -> dict[str, Any]:
    part = record["parts"].get(name)
    if part is None:
        raise CheckpointError(f"checkpoint {path} has no part {name!r} (it has: {', '.join(sorted(record['parts']))})")
    if part.get("layout") == CHUNKS:
        return _join_chunks(*read_chunked_part(path, name, verified=verified))
    return _decode_bytes(_verified_bytes(path, part, verified), str(part["file"]), path)


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
        try:
            self.f.flush()
            os.fsync(self.f.fileno())
        finally:
            self.abort()

    def abort(self) -> None:
        """Close without syncing, whatever is left unwritten (the part is being given up)."""
        try:
            self.f.close()  # closes the file even when its last flush fails (a full disk)
        except OSError:
            pass


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
    except BaseException:
        out.abort()  # the first error stands (closing would retry the flush the full disk refused)
        raise
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
        return _decode_bytes(_verified_bytes(path, part, verified), str(part["file"]), path), iter(())
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
