"""Checkpoints: data on disk, never pickled code (docs/architecture.md).

Four modules: :mod:`~moozi.checkpoint.encoding` (a part's state as bytes and back),
:mod:`~moozi.checkpoint.files` (one folder's files, checked; chunked parts),
:mod:`~moozi.checkpoint.folders` (a folder of checkpoints: commits, pruning, setting aside) and
:mod:`~moozi.checkpoint.loading` (reading back, falling back past corrupt ones).

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

from moozi.checkpoint.encoding import (
    FORMAT,
    FORMAT_VERSION,
    METADATA_FILE,
    READ_VERSIONS,
    STATE_FORMAT,
    CheckpointError,
    CorruptCheckpointError,
    LegacyCheckpointError,
    decode_part,
    encode_part,
)
from moozi.checkpoint.files import (
    CHUNKS,
    checkpoint_parts,
    read_chunked_part,
    read_part_bytes,
    verify_checkpoint,
    write_chunked_part,
    write_part,
)
from moozi.checkpoint.folders import (
    REJECTED_DIR,
    CheckpointInfo,
    PendingCheckpoint,
    checkpoint_name,
    list_checkpoints,
    save_checkpoint,
    set_aside_checkpoint,
)
from moozi.checkpoint.loading import find_latest, load_checkpoint, load_latest

__all__ = [
    "CHUNKS", "FORMAT", "FORMAT_VERSION", "METADATA_FILE", "READ_VERSIONS", "REJECTED_DIR", "STATE_FORMAT",
    "CheckpointError", "CheckpointInfo", "CorruptCheckpointError", "LegacyCheckpointError", "PendingCheckpoint",
    "checkpoint_name", "checkpoint_parts", "decode_part", "encode_part", "find_latest", "list_checkpoints",
    "load_checkpoint", "load_latest", "read_chunked_part", "read_part_bytes", "save_checkpoint",
    "set_aside_checkpoint", "verify_checkpoint", "write_chunked_part", "write_part",
]
