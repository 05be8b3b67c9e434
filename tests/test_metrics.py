"""Run-directory outputs: metrics.jsonl, TensorBoard events, train.log."""

from __future__ import annotations

import json
import logging
import math

import jax.numpy as jnp
import numpy as np
import pytest

from moozi.observe import MetricsWriter, read_metrics, setup_logging


def test_jsonl_lines_and_value_conversion(tmp_path):
    with MetricsWriter(tmp_path, tensorboard=False) as w:
        w.write({"loss/policy": np.float32(0.5), "train/step": jnp.asarray(3, jnp.int32),
                 "test/return_mean": jnp.asarray(1.25), "flag/ok": True, "plain": 2}, step=3)
        w.write({"loss/value": float("nan"), "loss/reward": np.inf, "x/neg": -math.inf}, step=4)
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert first["step"] == 3 and isinstance(first["wall_time"], float)
    assert first["loss/policy"] == 0.5 and first["test/return_mean"] == 1.25
    assert first["train/step"] == 3 and isinstance(first["train/step"], int)
    assert first["flag/ok"] == 1 and first["plain"] == 2
    # Strict JSON: non-finite values are strings, which read_metrics turns back into floats.
    second = json.loads(lines[1], parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}"))
    assert second["loss/value"] == "NaN" and second["loss/reward"] == "Infinity"
    recs = read_metrics(tmp_path)
    assert [r["step"] for r in recs] == [3, 4]
    assert math.isnan(recs[1]["loss/value"]) and recs[1]["loss/reward"] == math.inf
    assert recs[1]["x/neg"] == -math.inf


def test_rejects_non_scalars_and_reserved_keys(tmp_path):
    with MetricsWriter(tmp_path, tensorboard=False) as w:
        with pytest.raises(ValueError, match="'loss/vec'.*shape"):
            w.write({"loss/vec": np.ones(3)}, step=0)
        with pytest.raises(ValueError, match="reserved"):
            w.write({"step": 1}, step=0)
        with pytest.raises(ValueError, match="'name'"):
            w.write({"name": "abc"}, step=0)
    assert read_metrics(tmp_path) == []
    with pytest.raises(ValueError, match="closed"):
        w.write({"a": 1}, step=0)


def test_tensorboard_event_files(tmp_path):
    with MetricsWriter(tmp_path) as w:
        assert w.tensorboard
        w.write({"loss/policy": 0.5, "test/return_mean": 2.0}, step=1)
        w.write_histogram("replay/priorities", np.random.default_rng(0).random(100), step=1)
    events = list((tmp_path / "tb").glob("events.out.tfevents.*"))
    assert events and all(e.stat().st_size > 0 for e in events)
    # The scalar tags are in the event file.
    data = b"".join(e.read_bytes() for e in events)
    assert b"loss/policy" in data and b"test/return_mean" in data


def test_append_after_reopen(tmp_path):
    with MetricsWriter(tmp_path, tensorboard=False) as w:
        w.write({"a": 1}, step=1)
        w.write({"a": 2}, step=2)
    with MetricsWriter(tmp_path, tensorboard=False) as w:
        w.write({"a": 3}, step=3)
    assert [r["a"] for r in read_metrics(tmp_path)] == [1, 2, 3]


def test_truncated_last_line_tolerated_and_repaired(tmp_path, caplog):
    with MetricsWriter(tmp_path, tensorboard=False) as w:
        w.write({"a": 1}, step=1)
        w.write({"a": 2}, step=2)
    path = tmp_path / "metrics.jsonl"
    with open(path, "a") as f:
        f.write('{"step": 3, "wall_ti')  # killed mid-write
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2]
    assert [r["step"] for r in read_metrics(path)] == [1, 2]
    # Resuming drops the fragment so the file stays valid JSON lines.
    with caplog.at_level(logging.WARNING, logger="moozi.observe"):
        with MetricsWriter(tmp_path, tensorboard=False) as w:
            w.write({"a": 3}, step=3)
    assert any("partial last line" in r.getMessage() for r in caplog.records)
    lines = path.read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2, 3]


def test_bad_middle_line_is_an_error(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\ngarbage\n{"step": 2}\n')
    with pytest.raises(ValueError, match=":2:"):
        read_metrics(tmp_path)
    assert read_metrics(tmp_path / "elsewhere") == []


def test_setup_logging_writes_file_without_duplicates(tmp_path):
    logger = logging.getLogger("moozi")
    before, before_level = list(logger.handlers), logger.level
    try:
        log = setup_logging(tmp_path / "run1")
        setup_logging(tmp_path / "run1")
        assert log is logger
        # Exactly one run-log handler, on this run (an earlier run's is moved, not kept).
        run_logs = [h for h in logger.handlers if getattr(h, "_moozi_run_log", False)]
        assert len(run_logs) == 1 and run_logs[0].baseFilename.endswith("run1/train.log")
        others = [h for h in before if not getattr(h, "_moozi_run_log", False)]
        assert len(logger.handlers) == len(others) + 1
        logging.getLogger("moozi.driver").info("hello from the driver")
        logging.getLogger("moozi.driver").debug("hidden at INFO")
        for h in logger.handlers:
            h.flush()
        text = (tmp_path / "run1" / "train.log").read_text()
        assert text.count("hello from the driver") == 1
        assert "INFO moozi.driver" in text and "hidden" not in text
        # A new run directory moves the handler there.
        setup_logging(tmp_path / "run2", level="DEBUG")
        # Exactly one run-log handler, on this run (an earlier run's is moved, not kept).
        run_logs = [h for h in logger.handlers if getattr(h, "_moozi_run_log", False)]
        assert len(run_logs) == 1 and run_logs[0].baseFilename.endswith("run2/train.log")
        others = [h for h in before if not getattr(h, "_moozi_run_log", False)]
        assert len(logger.handlers) == len(others) + 1
        logging.getLogger("moozi").debug("now debug")
        for h in logger.handlers:
            h.flush()
        assert "now debug" in (tmp_path / "run2" / "train.log").read_text()
        assert "now debug" not in (tmp_path / "run1" / "train.log").read_text()
        with pytest.raises(ValueError, match="level"):
            setup_logging(tmp_path / "run2", level="LOUD")
    finally:
        for h in list(logger.handlers):
            if h not in before:
                logger.removeHandler(h)
                h.close()
        logger.setLevel(before_level)


# ----------------------------------------------------------------------------- health verdict (hand-computed)


def test_health_flags_a_test_return_that_does_not_improve():
    from moozi.observe.health import assess

    flat = assess([-500.0] * 8, [0.5] * 8, [500.0] * 8, num_actions=3, two_player=False, patience=4)
    assert not flat.ok and flat.metrics["health/ok"] == 0.0
    assert flat.reasons[0] == ("test return not improving: median -500 over the last 4 tests, -500 over the "
                               "first 4 (fine only if that is the best the game allows)")
    # the extra context: smoothed entropy 0.5 / log(3) = 0.4551, episode length at 100% of its longest
    assert flat.reasons[1] == "search policy entropy 46% of uniform"
    assert flat.metrics["health/entropy_fraction"] == pytest.approx(0.5 / np.log(3))
    assert flat.reasons[2] == "episode length 500.0 (100% of the longest average)"
    # fewer than two windows of tests: not judged yet
    assert assess([-500.0] * 7, [], [], 3, False, patience=4).ok
    # one lucky test in the last window does not clear it (median of [-500, -500, -500, -100] = -500)
    assert not assess([-500.0] * 7 + [-100.0], [], [], 3, False, patience=4).ok
    # nor does one lucky first test raise the bar: first window [0.6, 0.2, 0.2, 0.2] has median 0.2
    assert assess([0.6, 0.2, 0.2, 0.2, 0.4, 0.5, 0.3, 0.4], [], [], 3, False, patience=4).ok  # median 0.4 > 0.2
    assert not assess([-500.0, -300.0] + [-500.0] * 6, [], [], 3, False, patience=4).ok
    assert assess([1.0] * 20, [], [], 3, False, patience=0).ok  # patience 0: off
    # A two-player game won in every test (connect four against a random mover) cannot improve: not stalled;
    # a single-player game flat at 1, or a two-player one flat at 0.9, still is.
    assert assess([1.0] * 8, [], [], 7, True, patience=4).ok
    assert not assess([1.0] * 8, [], [], 7, False, patience=4).ok
    assert not assess([0.9] * 8, [], [], 7, True, patience=4).ok
    # tests since the best: best 3.0 at index 1 of 4 tests -> 2
    assert assess([1.0, 3.0, 2.0, 2.5], [], [], 2, False, 8).metrics["health/tests_since_best"] == 2.0


def test_health_flags_collapsed_self_play_games_only_in_two_player_games():
    from moozi.observe.health import assess

    lengths = [60.0, 60.0, 60.0, 12.0, 10.0, 8.0]  # smoothed (window 3): max 60, last (12 + 10 + 8) / 3 = 10
    go = assess([0.0], [], lengths, num_actions=82, two_player=True, patience=8)
    assert not go.ok and go.metrics["health/length_ratio"] == pytest.approx(10 / 60)
    assert go.reasons[0] == "self-play games collapsed to 10.0 moves (17% of the longest average, 60.0)"
    # a single-player game that reaches its goal sooner is learning, not collapsing
    assert assess([0.0, 1.0], [], lengths, num_actions=2, two_player=False, patience=8).ok


def test_support_limits():
    import jax.numpy as jnp

    from moozi.model.transform import max_representable, outside_support

    assert max_representable(1, "identity") == 1.0
    # phi^-1(30) = u^2 - 1 with u the root of eps u^2 + u - 31.001 = 0 (eps = 1e-3): u = 30.10...
    u = (-1 + np.sqrt(1 + 4e-3 * 31.001)) / 2e-3
    assert max_representable(30, "phi") == pytest.approx(u * u - 1, rel=1e-5)
    x = jnp.array([-1.5, -1.0, 0.3, 1.0, 2.0])
    assert outside_support(x, 1, "identity").tolist() == [True, False, False, False, True]
    # phi(3) = sqrt(4) - 1 + 0.003 = 1.003 > 1; phi(2.9) = 0.9732 + 0.0029 < 1
    assert outside_support(jnp.array([3.0, 2.9, -3.0]), 1, "phi").tolist() == [True, False, True]


def test_rewind_moves_later_records_aside_and_tensorboard_hides_them(tmp_path):
    """A restore to step 5: metrics.jsonl and TensorBoard both continue from 5 (even within the same second)."""
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    w = MetricsWriter(tmp_path)
    for s in range(1, 11):
        w.write({"x": float(s)}, step=s)
    w.rewind(5)
    for s in range(6, 9):
        w.write({"x": 100.0 + s}, step=s)
    w.close()
    assert [(r["step"], r["x"]) for r in read_metrics(tmp_path)] == [(s, float(s)) for s in range(1, 6)] + [
        (s, 100.0 + s) for s in range(6, 9)]
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.rewound.jsonl")] == [6, 7, 8, 9, 10]
    a = accumulator.EventAccumulator(str(tmp_path / "tb"))
    a.Reload()
    assert [(e.step, e.value) for e in a.Scalars("x")] == [(s, float(s)) for s in range(1, 6)] + [
        (s, 100.0 + s) for s in range(6, 9)]


def test_train_log_rotates_and_keeps_a_bounded_number_of_old_files(tmp_path, monkeypatch):
    import moozi.observe.metrics as metrics

    monkeypatch.setattr(metrics, "LOG_MAX_BYTES", 2_000)
    logger = logging.getLogger("moozi")
    before, before_level = list(logger.handlers), logger.level
    try:
        setup_logging(tmp_path / "long")
        for i in range(400):
            logging.getLogger("moozi.driver").info("row %04d %s", i, "x" * 40)
        for h in logger.handlers:
            h.flush()
        files = sorted(p.name for p in (tmp_path / "long").iterdir())
        assert files == ["train.log"] + [f"train.log.{i}" for i in range(1, metrics.LOG_KEEP + 1)]
        assert all((tmp_path / "long" / f).stat().st_size <= 2_100 for f in files)
        assert "row 0399" in (tmp_path / "long" / "train.log").read_text()
    finally:
        for h in [h for h in logger.handlers if h not in before]:
            logger.removeHandler(h)
            h.close()
        logger.setLevel(before_level)


def test_metrics_are_read_as_a_stream(tmp_path):
    from moozi.observe.metrics import iter_metrics

    with MetricsWriter(tmp_path, tensorboard=False) as w:
        for step in range(3):
            w.write({"x": step}, step=step)
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write("{not json\n" + json.dumps({"step": 9, "x": 9}) + "\n")
    rows = iter_metrics(tmp_path)
    assert [next(rows)["x"] for _ in range(3)] == [0, 1, 2]  # records before the bad line come out first
    with pytest.raises(ValueError, match="metrics.jsonl:4: bad metrics line"):
        next(rows)


def test_the_health_watch_keeps_a_bounded_history_with_the_same_verdicts():
    """Row by row over a long run, the bounded watch gives the verdict of assess() over the whole history
    (entropies and episode lengths of every row), while holding only the last few rows."""
    from types import SimpleNamespace

    from moozi.observe.health import HealthWatch, assess

    rng = np.random.default_rng(0)
    spec = SimpleNamespace(num_actions=7, two_player=True, observation_shape=(6, 7, 2))
    watch = HealthWatch(SimpleNamespace(support_size=10), spec, health_tests=3)
    tests, entropies, lengths = [], [], []
    for i in range(600):
        row = {"acting/policy_entropy": float(rng.uniform(0.1, 1.9)),
               "train/episode_length": float(rng.uniform(5, 40) if i < 400 else rng.uniform(3, 6))}
        if i % 20 == 0:
            row["test/return_mean"] = float(rng.uniform(-1, 1))
        tests += [row["test/return_mean"]] if "test/return_mean" in row else []
        entropies.append(row["acting/policy_entropy"])
        lengths.append(row["train/episode_length"])
        got = watch.check(row)
        want = assess(tests, entropies, lengths, 7, True, 3)
        assert {k: v for k, v in got.items() if k != "health/tests"} == pytest.approx(want.metrics), i
        assert watch.health.reasons == want.reasons, i
    assert len(watch.history["entropy"]) == len(watch.history["length"]) == 3
    assert not watch.health.ok  # the games collapsed from 400 on
