"""A part's state as bytes and back: checked leaves, msgpack, PRNG keys, templates (no files; see the package doc)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping

import numpy as np

FORMAT = "moozi-checkpoint"
STATE_FORMAT = "moozi-checkpoint-state"
FORMAT_VERSION = 3
READ_VERSIONS = (2, 3)  # 3 added chunked parts; a format 2 checkpoint has none
METADATA_FILE = "metadata.json"
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


class CheckpointError(RuntimeError):
    """No usable checkpoint, a checkpoint that does not match its template, or bad save arguments."""


class LegacyCheckpointError(CheckpointError):
    """A checkpoint written by an older moozi in a format this one does not read (not a fallback case)."""


class CorruptCheckpointError(CheckpointError):
    """A checkpoint folder is unreadable: missing/undecodable files, wrong size or checksum."""


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


def _decode_bytes(data: bytes, name: str, path: Path) -> dict[str, Any]:
    from flax import serialization

    try:
        payload = serialization.msgpack_restore(data)
    except Exception as e:  # msgpack raises several unrelated types
        raise CorruptCheckpointError(f"{name} could not be decoded: {e}") from e
    if not isinstance(payload, dict) or payload.get("format") != STATE_FORMAT or not isinstance(payload.get("state"), dict):
        raise CorruptCheckpointError(f"{name} does not hold a moozi checkpoint state")
    return _decode_state(payload, path)


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
