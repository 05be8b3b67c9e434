"""Checkpoints: round trips, atomic layout, parts, pruning, corruption fallback, older formats.

Most tests store one part named ``state`` (file ``state.msgpack``) through the
thin wrappers below; the part-specific behaviour has its own tests at the end.
"""

from __future__ import annotations

import json
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.checkpoint import (
    CheckpointError,
    CorruptCheckpointError,
    LegacyCheckpointError,
    PendingCheckpoint,
    checkpoint_parts,
    find_latest,
    list_checkpoints,
    read_chunked_part,
    verify_checkpoint,
    write_part,
)
from moozi.checkpoint import load_checkpoint as load_parts
from moozi.checkpoint import load_latest as latest_parts
from moozi.checkpoint import save_checkpoint as save_parts
from moozi.config import LearnerConfig, ModelConfig
from moozi.model.networks import build_model
from moozi.update import TrainState, init_train_state


def save_checkpoint(directory, step, state, metadata, keep=3):
    return save_parts(directory, step, {"state": state}, metadata, keep=keep)


def load_checkpoint(path, template=None):
    parts, meta = load_parts(path, {"state": template})
    return parts["state"], meta


def load_latest(directory, template=None):
    parts, meta, path = latest_parts(directory, {"state": template})
    return parts["state"], meta, path


@pytest.fixture(scope="module")
def train_state() -> TrainState:
    model = build_model(
        ModelConfig(kind="mlp", mlp_hidden=(8,), mlp_embedding=4, head_hidden=4, support_size=2),
        (1, 1, 3),
        3,
    )
    ts = init_train_state(model, LearnerConfig(), jax.random.key(0))
    # Make the optimiser state non-trivial so a mix-up would show.
    return ts.replace(step=jnp.asarray(7, jnp.int32))


def _state(train_state, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "train_state": train_state,
        "rng": jax.random.key(42),
        "rng_batch": jax.random.split(jax.random.key(1), 3),
        "legacy_rng": jax.random.PRNGKey(5),
        "replay": {
            "frames": rng.standard_normal((64, 1, 1, 3)).astype(np.float32),
            "actions": rng.integers(0, 4, 64).astype(np.int32),
            "done": rng.integers(0, 2, 64).astype(bool),
            "ids": np.arange(5, dtype=np.uint64),
            "small": np.arange(4, dtype=np.int8),
            "half": np.ones(3, np.float16),
            "empty": np.zeros((0, 3), np.float32),
            "count": 64,
            "beta": 0.4,
        },
        "counters": {"env_steps": 12345, "episodes": 9, "done": False, "game": "tictactoe"},
    }


def _assert_tree_equal(a, b):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb
    for x, y in zip(la, lb):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_round_trip_with_template(tmp_path, train_state):
    state = _state(train_state)
    meta = {"config": {"model": {"kind": "mlp", "mlp_hidden": [8]}}, "counters": {"updates": 7},
            "np_scalar": np.float32(0.5)}
    path = save_checkpoint(tmp_path / "ckpt", 7, state, meta)
    assert path.name == "step_000000007"
    assert sorted(p.name for p in path.iterdir()) == ["metadata.json", "state.msgpack"]

    restored, got_meta = load_checkpoint(path, template=state)
    assert got_meta == {"config": {"model": {"kind": "mlp", "mlp_hidden": [8]}},
                        "counters": {"updates": 7}, "np_scalar": 0.5}
    ts = restored["train_state"]
    assert isinstance(ts, TrainState)
    assert type(ts.opt_state) is type(train_state.opt_state)
    assert type(ts.opt_state[1][0]) is type(train_state.opt_state[1][0])  # ScaleByAdamState
    assert isinstance(ts.params["params"]["repr_net"]["Dense_0"]["kernel"], jax.Array)
    _assert_tree_equal(ts, train_state)
    # PRNG keys come back as typed keys with the same data and impl.
    for name in ("rng", "rng_batch"):
        assert jax.dtypes.issubdtype(restored[name].dtype, jax.dtypes.prng_key)
        np.testing.assert_array_equal(jax.random.key_data(restored[name]), jax.random.key_data(state[name]))
    assert restored["rng_batch"].shape == (3,)
    np.testing.assert_array_equal(
        jax.random.uniform(restored["rng"], (2,)), jax.random.uniform(state["rng"], (2,))
    )
    assert restored["legacy_rng"].dtype == jnp.uint32
    for k, v in state["replay"].items():
        r = restored["replay"][k]
        if isinstance(v, np.ndarray):
            assert isinstance(r, np.ndarray) and r.dtype == v.dtype and r.shape == v.shape
            assert r.flags.writeable
            np.testing.assert_array_equal(r, v)
        else:
            assert r == v and type(r) is type(v)
    assert restored["counters"] == state["counters"]
    # The restored TrainState can be used by jitted code.
    total = jax.jit(lambda t: sum(jnp.sum(x) for x in jax.tree_util.tree_leaves(t.params)))(ts)
    assert np.isfinite(float(total))


def test_round_trip_without_template_gives_plain_data(tmp_path, train_state):
    state = _state(train_state)
    save_checkpoint(tmp_path, 3, state, {})
    restored, meta, path = load_latest(tmp_path)
    assert meta == {} and path.name == "step_000000003"
    ts = restored["train_state"]
    assert set(ts) == {"params", "target_params", "opt_state", "step"}
    assert isinstance(ts["step"], np.ndarray) and int(ts["step"]) == 7
    assert set(ts["opt_state"]["1"]["0"]) == {"count", "mu", "nu"}
    assert jax.dtypes.issubdtype(restored["rng"].dtype, jax.dtypes.prng_key)
    # A sub-tree can be rebuilt later with its own template.
    from flax import serialization

    again = serialization.from_state_dict(train_state, ts)
    _assert_tree_equal(again, train_state)


def test_partial_template_none_keeps_saved_data(tmp_path, train_state):
    state = _state(train_state)
    save_checkpoint(tmp_path, 1, state, {})
    restored, _, _ = load_latest(tmp_path, template={"train_state": train_state, "replay": None})
    assert set(restored) == {"train_state", "replay"}
    assert isinstance(restored["train_state"], TrainState)
    np.testing.assert_array_equal(restored["replay"]["frames"], state["replay"]["frames"])


def test_template_mismatch_is_a_clear_error_not_a_fallback(tmp_path, train_state):
    save_checkpoint(tmp_path, 1, {"w": np.zeros((2, 3), np.float32)}, {})
    save_checkpoint(tmp_path, 2, {"w": np.zeros((2, 3), np.float32)}, {})
    with pytest.raises(CheckpointError, match=r"step_000000002.*\['w'\].*\(4,\)"):
        load_latest(tmp_path, template={"w": jnp.zeros((4,), jnp.float32)})
    with pytest.raises(CheckpointError, match="does not match the template"):
        load_latest(tmp_path, template={"w": jnp.zeros((2, 3)), "missing": jnp.zeros(())})


def test_large_array_round_trip(tmp_path):
    big = np.arange(6_000_000, dtype=np.float32).reshape(1000, 6000)  # 24 MB
    save_checkpoint(tmp_path, 1, {"replay": {"frames": big}}, {})
    restored, _, _ = load_latest(tmp_path)
    np.testing.assert_array_equal(restored["replay"]["frames"], big)


def test_keep_n_pruning(tmp_path):
    for step in (10, 20, 30, 40, 50):
        save_checkpoint(tmp_path, step, {"x": np.asarray(step)}, {"step": step}, keep=3)
    assert [c.step for c in list_checkpoints(tmp_path)] == [30, 40, 50]
    save_checkpoint(tmp_path, 60, {"x": np.asarray(60)}, {}, keep=1)
    assert [c.step for c in list_checkpoints(tmp_path)] == [60]


def test_just_saved_checkpoint_is_never_pruned(tmp_path):
    save_checkpoint(tmp_path, 100, {"x": 1}, {})
    # Resumed from an earlier point and saved a lower step: the new one stays.
    path = save_checkpoint(tmp_path, 50, {"x": 2}, {}, keep=1)
    assert [c.path for c in list_checkpoints(tmp_path)] == [path]


def test_resaving_same_step_replaces_it(tmp_path):
    save_checkpoint(tmp_path, 5, {"x": 1}, {"v": 1})
    save_checkpoint(tmp_path, 5, {"x": 2}, {"v": 2})
    state, meta, _ = load_latest(tmp_path)
    assert state == {"x": 2} and meta == {"v": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["step_000000005"]


def test_metadata_records_checksum_and_versions(tmp_path):
    path = save_checkpoint(tmp_path, 1, {"x": np.ones(3)}, {"a": 1})
    record = json.loads((path / "metadata.json").read_text())
    assert record["format"] == "moozi-checkpoint" and record["step"] == 1
    assert record["format_version"] == 3 and len(record["parts"]["state"]["sha256"]) == 64
    assert record["parts"]["state"]["bytes"] == (path / "state.msgpack").stat().st_size
    assert {"jax", "flax", "numpy", "python", "moozi"} <= set(record["versions"])
    assert record["metadata"] == {"a": 1}


def _corrupt_flip(path):
    data = bytearray((path / "state.msgpack").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (path / "state.msgpack").write_bytes(bytes(data))


def _corrupt_truncate(path):
    data = (path / "state.msgpack").read_bytes()
    (path / "state.msgpack").write_bytes(data[: len(data) // 2])


def _corrupt_no_meta(path):
    (path / "metadata.json").unlink()


def _corrupt_bad_meta(path):
    (path / "metadata.json").write_text("{not json")


def _corrupt_part_outside(path):
    """The record names a file outside its folder (a copy of the real part sits there, checksum and all)."""
    import shutil

    record = json.loads((path / "metadata.json").read_text())
    shutil.copy(path / "state.msgpack", path.parent / "x")
    record["parts"]["state"]["file"] = "../x"
    (path / "metadata.json").write_text(json.dumps(record))


@pytest.mark.parametrize(
    "corrupt, reason",
    [
        (_corrupt_flip, "checksum mismatch"),
        (_corrupt_truncate, "truncated"),
        (_corrupt_no_meta, "metadata.json is missing"),
        (_corrupt_bad_meta, "metadata.json is unreadable"),
        (_corrupt_part_outside, "not a file of the checkpoint's own folder"),
    ],
)
def test_corrupt_newest_falls_back_with_warning(tmp_path, caplog, corrupt, reason):
    save_checkpoint(tmp_path, 1, {"x": np.asarray([1.0])}, {"n": 1})
    newest = save_checkpoint(tmp_path, 2, {"x": np.asarray([2.0])}, {"n": 2})
    corrupt(newest)
    with caplog.at_level(logging.WARNING, logger="moozi.checkpoint"):
        state, meta, path = load_latest(tmp_path)
    assert meta == {"n": 1} and path.name == "step_000000001"
    np.testing.assert_array_equal(state["x"], [1.0])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(newest) in w and reason in w for w in warnings), warnings
    with pytest.raises(CorruptCheckpointError, match=reason):
        load_checkpoint(newest)


def test_undecodable_data_with_matching_checksum_is_rejected(tmp_path):
    import hashlib

    path = save_checkpoint(tmp_path, 1, {"x": 1}, {})
    junk = b"\xc1\xc1\xc1 not msgpack"
    (path / "state.msgpack").write_bytes(junk)
    record = json.loads((path / "metadata.json").read_text())
    record["parts"]["state"].update(bytes=len(junk), sha256=hashlib.sha256(junk).hexdigest())
    (path / "metadata.json").write_text(json.dumps(record))
    with pytest.raises(CheckpointError, match="could not be decoded"):
        load_latest(tmp_path)


def test_all_corrupt_lists_every_reason(tmp_path):
    a = save_checkpoint(tmp_path, 1, {"x": np.zeros(4)}, {})
    b = save_checkpoint(tmp_path, 2, {"x": np.zeros(4)}, {})
    _corrupt_flip(a)
    _corrupt_no_meta(b)
    with pytest.raises(CheckpointError) as info:
        load_latest(tmp_path)
    msg = str(info.value)
    assert "no usable checkpoint" in msg and "found 2" in msg
    assert "step_000000001: " in msg and "checksum mismatch" in msg
    assert "step_000000002: " in msg and "metadata.json is missing" in msg


def test_missing_or_empty_directory(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint exists at .*does not exist"):
        load_latest(tmp_path / "nope")
    with pytest.raises(CheckpointError, match="no checkpoint exists at"):
        load_latest(tmp_path)
    assert list_checkpoints(tmp_path / "nope") == []


def test_leftover_temp_dir_is_ignored_then_cleaned(tmp_path):
    good = save_checkpoint(tmp_path, 1, {"x": 1}, {"n": 1})
    # Simulate a crash mid-save of step 2: a half-written temporary folder.
    crashed = tmp_path / ".tmp-step_000000002-deadbeef0000"
    crashed.mkdir()
    (crashed / "state.msgpack").write_bytes(b"\x00\x01partial")
    assert [c.step for c in list_checkpoints(tmp_path)] == [1]
    state, meta, path = load_latest(tmp_path)
    assert path == good and state == {"x": 1}
    save_checkpoint(tmp_path, 3, {"x": 3}, {})
    assert not crashed.exists()
    assert [c.step for c in list_checkpoints(tmp_path)] == [1, 3]


def test_displaced_checkpoint_is_restored_after_crash(tmp_path):
    # A crash between moving the old step_5 aside and moving the new one in.
    path = save_checkpoint(tmp_path, 5, {"x": 5}, {})
    path.rename(tmp_path / ".replaced-step_000000005-0123456789ab")
    save_checkpoint(tmp_path, 6, {"x": 6}, {})
    assert [c.step for c in list_checkpoints(tmp_path)] == [5, 6]
    assert load_checkpoint(tmp_path / "step_000000005")[0] == {"x": 5}


def test_only_unfinished_save_is_not_a_checkpoint(tmp_path):
    (tmp_path / ".tmp-step_000000001-abc").mkdir()
    with pytest.raises(CheckpointError, match="only unfinished saves"):
        load_latest(tmp_path)


def test_bad_arguments_write_nothing(tmp_path):
    class Code:
        pass

    with pytest.raises(CheckpointError, match=r"state\['f'\].*data only"):
        save_checkpoint(tmp_path, 1, {"f": Code()}, {})
    with pytest.raises(CheckpointError, match="dtype"):
        save_checkpoint(tmp_path, 1, {"s": np.array(["a", "b"])}, {})
    with pytest.raises(CheckpointError, match="JSON"):
        save_checkpoint(tmp_path, 1, {"x": 1}, {"bad": object()})
    with pytest.raises(CheckpointError, match="keep"):
        save_checkpoint(tmp_path, 1, {"x": 1}, {}, keep=0)
    with pytest.raises(CheckpointError, match="step"):
        save_checkpoint(tmp_path, -1, {"x": 1}, {})
    assert list(tmp_path.iterdir()) == []


def test_load_checkpoint_on_parent_folder_points_to_load_latest(tmp_path):
    save_checkpoint(tmp_path, 1, {"x": 1}, {})
    with pytest.raises(CheckpointError, match="load_latest"):
        load_checkpoint(tmp_path)
    # load_latest also accepts a single checkpoint folder.
    state, _, path = load_latest(tmp_path / "step_000000001")
    assert state == {"x": 1} and path.name == "step_000000001"


def test_replay_buffer_state_round_trip(tmp_path):
    from moozi.config import ReplayConfig, TargetConfig
    from moozi.replay import ReplayBuffer
    from moozi.types import Trajectory

    def traj(n, seed):
        rng = np.random.default_rng(seed)
        return Trajectory(
            frames=rng.integers(0, 2, size=(n, 2, 2, 1)).astype(np.uint8),
            actions=np.r_[rng.integers(1, 3, n - 1), 0].astype(np.int32),
            rewards=np.r_[0.0, rng.normal(size=n - 1)].astype(np.float32),
            root_values=rng.normal(size=n).astype(np.float32),
            root_policies=rng.dirichlet(np.ones(3), n).astype(np.float32),
            to_play=np.zeros(n, np.int32),
            first=np.int32(0),
            last=np.int32(n - 1),
            is_terminal=np.bool_(True),
        )

    tcfg = TargetConfig(history_length=2, unroll_steps=2, td_steps=3, discount=0.9)
    cfg = ReplayConfig(capacity=30, sampling="proportional")
    buf = ReplayBuffer(cfg, tcfg, (2, 2, 1), 3, frame_dtype="uint8", seed=4)
    for seed in range(4):
        buf.add(traj(6, seed))
    pending = PendingCheckpoint(tmp_path, 1)
    pending.write_chunked("replay", *buf.checkpoint_chunks(chunk_bytes=40))  # a few steps a chunk
    path = pending.commit({})
    assert json.loads((path / "metadata.json").read_text())["parts"]["replay"]["chunks"] > 3
    state, _, _ = latest_parts(tmp_path)  # read whole: the chunks joined
    streamed = ReplayBuffer(cfg, tcfg, (2, 2, 1), 3, frame_dtype="uint8", seed=0)
    streamed.load_chunks(*read_chunked_part(path, "replay"))
    for restored in (ReplayBuffer(cfg, tcfg, (2, 2, 1), 3, frame_dtype="uint8", seed=0), streamed):
        if restored is not streamed:
            restored.load_state_dict(state["replay"])
        s1, s2 = buf.sample(8), restored.sample(8)
        np.testing.assert_array_equal(s1.ids, s2.ids)
        _assert_tree_equal(s1.windows, s2.windows)
        restored.add(traj(5, 9))  # restored arrays are writable
        buf.load_state_dict(state["replay"])  # back to the saved state for the next one


def test_parts_are_committed_together_and_loaded_by_name(tmp_path):
    pending = PendingCheckpoint(tmp_path, 4)
    pending.write_part("learner", {"w": np.ones(3)})
    # A component in another process writes its own part into the pending folder.
    record = write_part(pending.folder, "actor", {"rng": jax.random.key(3), "steps": 12})
    assert list_checkpoints(tmp_path) == []  # nothing visible before the commit
    pending.add_part("actor", record)
    path = pending.commit({"n": 4})
    assert checkpoint_parts(path) == ["actor", "learner"]
    parts, meta = load_parts(path, parts=["actor"])
    assert set(parts) == {"actor"} and parts["actor"]["steps"] == 12 and meta == {"n": 4}
    with pytest.raises(CheckpointError, match="no part 'replay'"):
        load_parts(path, parts=["replay"])
    with pytest.raises(CheckpointError, match="not written"):
        PendingCheckpoint(tmp_path, 5).add_part("x", {"file": "x.msgpack"})


def test_a_part_saved_less_often_is_found_in_an_older_checkpoint_and_kept(tmp_path):
    save_parts(tmp_path, 1, {"learner": {"v": 1}, "replay": {"r": 1}}, {}, keep=2, keep_part="replay")
    for step in (2, 3, 4):
        save_parts(tmp_path, step, {"learner": {"v": step}}, {}, keep=2, keep_part="replay")
    steps = [c.step for c in list_checkpoints(tmp_path)]
    assert steps == [1, 3, 4]  # the newest two, plus the newest one holding replay
    parts, _, path = latest_parts(tmp_path, parts=["replay"])
    assert parts["replay"] == {"r": 1} and path.name == "step_000000001"
    parts, _, path = latest_parts(tmp_path, parts=["learner"])
    assert parts["learner"] == {"v": 4}


def test_a_checkpoint_from_before_parts_is_refused_saying_why(tmp_path):
    old = tmp_path / "step_000000010"
    old.mkdir()
    (old / "state.msgpack").write_bytes(b"x")
    (old / "metadata.json").write_text(json.dumps({"format": "moozi-checkpoint", "format_version": 1, "step": 10,
                                                   "data_file": "state.msgpack", "metadata": {}}))
    with pytest.raises(LegacyCheckpointError, match="before checkpoints were split into parts"):
        latest_parts(tmp_path)


def test_a_part_sent_as_bytes_round_trips(tmp_path, train_state):
    """A worker in another process encodes its part; the learner writes the bytes; anyone decodes them."""
    from moozi.checkpoint import PendingCheckpoint, decode_part, encode_part, read_part_bytes

    state = {"rng": jax.random.key(3), "counter": 7, "arr": np.arange(4, dtype=np.int32)}
    data = encode_part(state)
    pending = PendingCheckpoint(tmp_path, 5)
    pending.write_encoded("actor_1", data)
    path = pending.commit({"k": 1})
    assert read_part_bytes(path, "actor_1") == data
    back = decode_part(read_part_bytes(path, "actor_1"), {"rng": jax.random.key(0), "counter": None, "arr": None})
    assert back["counter"] == 7
    np.testing.assert_array_equal(back["arr"], state["arr"])
    np.testing.assert_array_equal(jax.random.key_data(back["rng"]), jax.random.key_data(state["rng"]))
    (path / "actor_1.msgpack").write_bytes(data[:-3])
    with pytest.raises(Exception, match="truncated"):
        read_part_bytes(path, "actor_1")


def _chunks(n, rows=5):
    rng = np.random.default_rng(n)
    return [{"a": np.full((rows, 3), i, np.uint8), "b": rng.normal(size=rows).astype(np.float32)} for i in range(n)]


def test_a_chunked_part_streams_and_reads_whole(tmp_path):
    pending = PendingCheckpoint(tmp_path, 1)
    pending.write_chunked("big", {"count": 4, "rng": jax.random.key(2)}, iter(_chunks(4)))
    pending.write_part("small", {"x": 1})
    path = pending.commit({})
    part = json.loads((path / "metadata.json").read_text())["parts"]["big"]
    assert part["file"] == "big.chunks" and part["layout"] == "chunks" and part["chunks"] == 4
    header, chunks = read_chunked_part(path, "big")
    assert header["count"] == 4 and jax.dtypes.issubdtype(header["rng"].dtype, jax.dtypes.prng_key)
    for got, want in zip(chunks, _chunks(4), strict=True):
        np.testing.assert_array_equal(got["a"], want["a"])
        np.testing.assert_array_equal(got["b"], want["b"])
    whole, _ = load_parts(path, parts=["big"])  # read whole: the header with each key's chunks concatenated
    np.testing.assert_array_equal(whole["big"]["a"], np.concatenate([c["a"] for c in _chunks(4)]))
    assert whole["big"]["count"] == 4
    header, chunks = read_chunked_part(path, "small")  # a part written whole streams as a header alone
    assert header == {"x": 1} and list(chunks) == []
    with pytest.raises(CheckpointError, match="chunked"):
        from moozi.checkpoint import read_part_bytes

        read_part_bytes(path, "big")


def test_chunks_are_compressed_only_where_it_pays(tmp_path):
    from moozi.checkpoint import write_chunked_part

    noise = {"n": np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8)}  # incompressible
    zeros = {"n": np.zeros(4096, np.uint8)}
    sizes = {level: write_chunked_part(tmp_path, f"p{level}", {}, [noise, zeros], compress_level=level)
             for level in (0, 1)}
    assert sizes[0]["raw_bytes"] == sizes[1]["raw_bytes"] > 8192
    assert sizes[0]["bytes"] > sizes[0]["raw_bytes"]  # frames only add their headers
    assert sizes[1]["bytes"] < sizes[0]["bytes"] - 4000  # the zeros shrink, the noise stays raw
    with pytest.raises(CheckpointError, match=r"compress_level = 10 is invalid: allowed an integer in \[0, 9\]"):
        write_chunked_part(tmp_path, "p", {}, [], compress_level=10)


@pytest.mark.parametrize("damage", ["truncate", "flip", "cut_frame"])
def test_a_damaged_chunked_part_is_reported_before_anything_is_decoded(tmp_path, damage):
    pending = PendingCheckpoint(tmp_path, 1)
    pending.write_chunked("big", {"count": 3}, iter(_chunks(3)))
    path = pending.commit({})
    f = path / "big.chunks"
    data = bytearray(f.read_bytes())
    if damage == "truncate":
        f.write_bytes(bytes(data[:50]))
    elif damage == "flip":
        data[len(data) // 2] ^= 0xFF
        f.write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpointError, match="big.chunks (has 50 bytes|checksum)" if damage != "cut_frame"
                       else "ends inside a frame"):
        if damage == "cut_frame":  # checksum passed (skipped), the frame stream itself is short
            f.write_bytes(bytes(data[:-3]))
            list(read_chunked_part(path, "big", verified=True)[1])
        else:
            verify_checkpoint(path)


def test_a_resume_takes_only_a_checkpoint_whose_every_part_is_good(tmp_path):
    """find_latest / load_latest(verify_all=True) check every part, not only the ones they read; each bad
    checkpoint is set aside and reported with the part that was bad."""
    for step in (1, 2, 3):
        pending = PendingCheckpoint(tmp_path, step)
        pending.write_part("learner", {"v": step})
        pending.write_part("actor", {"a": np.arange(100)})
        pending.write_chunked("replay", {"n": step}, iter(_chunks(2)))
        pending.commit({}, keep=5)
    (tmp_path / "step_000000003" / "actor.msgpack").write_bytes(b"x")
    data = bytearray((tmp_path / "step_000000002" / "replay.chunks").read_bytes())
    data[-5] ^= 1
    (tmp_path / "step_000000002" / "replay.chunks").write_bytes(bytes(data))
    parts, _, path = latest_parts(tmp_path, parts=["learner"])  # a reader of one part: its own checks only
    assert parts["learner"] == {"v": 3}
    rejected: list = []
    path, record = find_latest(tmp_path, parts=["learner"], set_aside=True, rejected=rejected)
    assert path.name == "step_000000001" and set(record["parts"]) == {"learner", "actor", "replay"}
    assert [(name, reason.split(" ")[0]) for name, reason, _ in rejected] == [
        ("step_000000003", "actor.msgpack"), ("step_000000002", "replay.chunks")]
    assert sorted(p.name for p in (tmp_path / "rejected").iterdir()) == ["step_000000002", "step_000000003"]
    parts, _, path = latest_parts(tmp_path, parts=["learner"], verify_all=True)
    assert parts["learner"] == {"v": 1}


def test_a_format_2_checkpoint_is_still_read(tmp_path):
    save_parts(tmp_path, 1, {"learner": {"v": np.arange(3)}}, {"m": 1})
    meta = tmp_path / "step_000000001" / "metadata.json"
    meta.write_text(meta.read_text().replace('"format_version": 3', '"format_version": 2'))
    parts, m, _ = latest_parts(tmp_path, verify_all=True)
    np.testing.assert_array_equal(parts["learner"]["v"], np.arange(3))
    meta.write_text(meta.read_text().replace('"format_version": 2', '"format_version": 4'))
    with pytest.raises(CheckpointError, match="format_version 4 is not supported .this moozi reads versions 2, 3"):
        latest_parts(tmp_path)


def test_writing_a_full_buffer_needs_little_memory_beyond_it(tmp_path):
    """The replay part is gathered, encoded and compressed a chunk at a time: a full buffer the size of
    breakout's (preset: 200k steps of 10x10x4 planes, ~90 MB; here 100k, ~47 MB) is written with its
    process's resident memory below 1.2x the buffer (measured on breakout: 1.06x; the old whole-slots
    part needed 4.6x)."""
    from moozi.config import ReplayConfig, TargetConfig
    from moozi.observe.memory import PeakRss
    from moozi.replay import ReplayBuffer
    from moozi.types import Trajectory

    tcfg = TargetConfig(history_length=2, unroll_steps=2, td_steps=3, discount=0.9)
    buf = ReplayBuffer(ReplayConfig(capacity=100_000, sampling="proportional"), tcfg, (10, 10, 4), 5,
                       frame_dtype="uint8", seed=0)
    rng = np.random.default_rng(0)
    n = 1000
    for _ in range(101):  # past capacity: the ring wrapped, the oldest evicted
        buf.add(Trajectory(frames=(rng.random((n, 10, 10, 4)) < 0.1).astype(np.uint8),
                           actions=np.r_[rng.integers(1, 5, n - 1), 0].astype(np.int32),
                           rewards=np.zeros(n, np.float32), root_values=rng.normal(size=n).astype(np.float32),
                           root_policies=np.full((n, 5), 0.2, np.float32), to_play=np.zeros(n, np.int32),
                           first=np.int32(0), last=np.int32(n - 1), is_terminal=np.bool_(True)))
    assert buf.size == 100_000
    with PeakRss() as peak:
        pending = PendingCheckpoint(tmp_path, 1)
        pending.write_chunked("replay", *buf.checkpoint_chunks())
        pending.commit({})
    if peak.extra_mb is None:
        pytest.skip("this kernel does not let a process reset its resident high-water mark")
    assert peak.extra_mb * 2**20 < 0.2 * buf.nbytes, (peak.extra_mb, buf.nbytes / 2**20)
