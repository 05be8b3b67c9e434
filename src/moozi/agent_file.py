"""Agent files: what it takes to play, in one file (``moozi export``), loaded without running code from it.

Layout of ``NAME.moozi``::

    b"MOOZI-AGENT 1\\n"          magic and format version
    8 bytes, big-endian         N, the header's length
    N bytes                     the header, JSON: {"format", "format_version", "config" (the run's resolved
                                config as plain data), "card" (game, updates, source run, checkpoint, commit,
                                strength where measured, ...), "params": {"bytes", "sha256", "codec"}}
    the rest                    the published params: a checkpoint part (msgpack of nested arrays,
                                :func:`moozi.checkpoint.encode_part`), zlib-compressed

Reading checks the magic, the lengths and the params' sha256 before decoding anything; the config is
validated like any config; the params are checked against the model the config describes. Nothing in the
file is executed (no pickle); a game named by a Python module (``env.modules``, ``gym:module:Id``) imports
that module, as a run folder does (docs/runs.md, Trust).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import zlib
from pathlib import Path
from typing import Any

from moozi.checkpoint import CheckpointError, decode_part, encode_part

MAGIC = b"MOOZI-AGENT 1\n"
FORMAT = "moozi-agent"
FORMAT_VERSION = 1
SUFFIX = ".moozi"
_MAX_HEADER = 16 * 1024 * 1024


def is_agent_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a file that starts like an agent file."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            return p.is_file() and f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def write_agent(path: str | os.PathLike, config: dict, params: Any, card: dict) -> dict:
    """Write an agent file (whole or not at all); returns ``{"path", "bytes", "params_bytes", "sha256"}``.

    ``config``: the resolved config as plain data (:func:`moozi.config.to_dict`); ``params``: the published
    params (a pytree of numpy arrays); ``card``: JSON-serialisable facts about the agent."""
    from moozi.files import write_atomic

    body = zlib.compress(encode_part({"published": params}), 9)
    header = {"format": FORMAT, "format_version": FORMAT_VERSION, "config": config, "card": card,
              "params": {"bytes": len(body), "sha256": hashlib.sha256(body).hexdigest(), "codec": "zlib+msgpack"}}
    head = json.dumps(header, sort_keys=True).encode("utf-8")
    data = MAGIC + struct.pack(">Q", len(head)) + head + body
    write_atomic(path, lambda tmp: tmp.write_bytes(data), "the agent file")
    return {"path": str(path), "bytes": len(data), "params_bytes": len(body),
            "sha256": hashlib.sha256(data).hexdigest()}


def read_agent(path: str | os.PathLike) -> tuple[dict, Any]:
    """``(header, params)`` of an agent file; a file that is not one, is truncated or fails its checksum
    raises :class:`~moozi.checkpoint.CheckpointError` in one line naming the file."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise CheckpointError(f"{p}: cannot read the agent file ({e.strerror or e})") from e
    if not data.startswith(MAGIC):
        raise CheckpointError(f"{p} is not a moozi agent file (made by `moozi export RUN --to NAME{SUFFIX}`)")
    at = len(MAGIC)
    if len(data) < at + 8:
        raise CheckpointError(f"{p} is truncated (no header)")
    (n,) = struct.unpack(">Q", data[at:at + 8])
    if n > _MAX_HEADER or len(data) < at + 8 + n:
        raise CheckpointError(f"{p} is truncated or corrupt (its header claims {n:,} bytes)")
    try:
        header = json.loads(data[at + 8:at + 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(f"{p} is corrupt: its header is not JSON ({e})") from e
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise CheckpointError(f"{p} is corrupt: its header is not a moozi agent's")
    if header.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{p} is an agent file of format version {header.get('format_version')!r}; this "
                              f"moozi reads version {FORMAT_VERSION}")
    body = data[at + 8 + n:]
    want = header.get("params") or {}
    if len(body) != want.get("bytes") or hashlib.sha256(body).hexdigest() != want.get("sha256"):
        raise CheckpointError(f"{p} is truncated or corrupt: its params ({len(body):,} bytes) do not match the "
                              f"size and sha256 its header records ({want.get('bytes')} bytes)")
    try:
        state = decode_part(zlib.decompress(body), where=str(p))
    except zlib.error as e:
        raise CheckpointError(f"{p} is corrupt: its params cannot be decompressed ({e})") from e
    if not isinstance(state, dict) or "published" not in state:
        raise CheckpointError(f"{p} is corrupt: no params in it")
    return header, state["published"]
