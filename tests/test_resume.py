"""Resume tests: exact continuation, and recovery after SIGKILL mid-run."""

import os
import shutil
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from moozi.checkpoint import list_checkpoints, load_latest
from moozi.config import apply_overrides, config_from_dict
from moozi.driver import Trainer
from moozi.presets import load_preset
from tests.helpers import TINY
from tests.helpers import leaves as _leaves


def _config(max_env_steps, *extra):
    # The preset decays its learning rate over the budget; these tests change the budget between the two
    # halves (64 then 128 steps), so they decay over updates instead (the budget case: test below).
    overrides = [o for o in TINY if not o.startswith("schedule.max_env_steps")] + ["learner.lr_decay_over=updates"]
    return config_from_dict(apply_overrides(load_preset("cartpole"), overrides + [f"schedule.max_env_steps={max_env_steps}",
                                                                                   *extra]))



STOCHASTIC = ("model.chance_outcomes=4", "planner.kind=puct", "test_planner.kind=puct")


@pytest.mark.parametrize("kind,half,extra", [("sync", 64, ()), ("async", 128, ()),  # async trains from its 2nd segment on
                                             pytest.param("sync", 64, STOCHASTIC, marks=pytest.mark.extended)],
                         ids=["sync", "async", "sync-stochastic"])  # CI: sync and async (the stochastic one took 69 s)
def test_resume_continues_exactly(tmp_path, kind, half, extra):
    """Training 2 * half steps straight equals training half, stopping, moving the run's folder, resuming it there,
    training half more (the async schedule too: its epochs count on from the checkpoint, so tests and metrics rows
    keep their cadence; and a Stochastic MuZero model)."""
    straight = Trainer(_config(2 * half, f"schedule.kind={kind}", *extra), tmp_path / "a")
    straight.run()
    first = Trainer(_config(half, f"schedule.kind={kind}", *extra), tmp_path / "b")
    first.run()
    first.close()  # the folder's one writer lets it go
    assert first.counters["updates"] > 0 and first.counters["epochs"] > 0
    shutil.move(tmp_path / "b", tmp_path / "elsewhere")  # a folder copied to another place or machine goes on alike
    resumed = Trainer(_config(2 * half, f"schedule.kind={kind}", *extra), tmp_path / "elsewhere", resume=True)
    assert resumed.counters["env_steps"] == half
    resumed.run()
    for key in ("env_steps", "updates", "epochs", "episodes"):
        assert resumed.counters[key] == straight.counters[key], key
    for a, b in zip(_leaves(straight.learner.state), _leaves(resumed.learner.state)):
        np.testing.assert_array_equal(a, b)
    sa, sb = straight.learner.replay.state_dict(), resumed.learner.replay.state_dict()
    for key in ("frames", "actions", "rewards", "root_values", "priority", "rng"):
        np.testing.assert_array_equal(sa[key], sb[key], err_msg=key)
    for a, b in zip(_leaves(straight.actor.state_dict()["carry"]), _leaves(resumed.actor.state_dict()["carry"])):
        np.testing.assert_array_equal(a, b)


@pytest.mark.extended  # CI: test_resume_continues_exactly (sync and async)
def test_resume_with_budget_decay_continues_exactly(tmp_path):
    """Stopped half way and resumed with the same budget: the learning rate decays as if never stopped."""
    extra = ("learner.lr_decay_over=budget",)
    straight = Trainer(_config(128, *extra), tmp_path / "a")
    straight.run()

    def stop_half_way(counters, row, test):
        if counters["env_steps"] >= 64:
            first.request_stop()

    first = Trainer(_config(128, *extra), tmp_path / "b", progress=stop_half_way)
    first.run()
    first.close()
    assert first.counters["env_steps"] == 64
    resumed = Trainer(_config(128, *extra), tmp_path / "b", resume=True)
    resumed.run()
    assert resumed.counters["updates"] == straight.counters["updates"]
    for a, b in zip(_leaves(straight.learner.state), _leaves(resumed.learner.state)):
        np.testing.assert_array_equal(a, b)


def _long_run(run, checkpoints: int) -> subprocess.Popen:
    """A cartpole run in a process of its own that checkpoints every fraction of a second and trains on; returned
    once it has written ``checkpoints`` checkpoints."""
    overrides = [o for o in TINY if not o.startswith("schedule.max_env_steps")]
    cmd = [sys.executable, "-m", "moozi.cli", "train", "--preset", "cartpole", "--run-dir", str(run),
           *overrides, "schedule.max_env_steps=10000000", "output.checkpoint_every_minutes=0.003"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 300
    while len(list_checkpoints(run / "checkpoints")) < checkpoints:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("no checkpoints written: " + proc.stderr.read().decode()[-2000:])
        time.sleep(0.2)
    return proc


def test_sigkill_mid_run_then_resume(tmp_path):
    run = tmp_path / "killed"
    proc = _long_run(run, 2)
    try:
        time.sleep(0.5)  # let it get into the middle of more work
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL

    config = _config(10_000_000)
    trainer = Trainer(config, run, resume=True)
    state, meta, path = load_latest(run / "checkpoints")
    assert set(state) == {"learner", "replay", "books", "actor", "tester"}
    for key in ("env_steps", "updates", "epochs", "episodes"):
        assert trainer.counters[key] == meta["counters"][key], key
    assert trainer.counters["updates"] > 0
    saved_params = _leaves(state["learner"]["train_state"]["params"])
    for a, b in zip(saved_params, _leaves(trainer.learner.state.params)):
        np.testing.assert_array_equal(a, b)
    saved_replay = state["replay"]
    restored_replay = trainer.learner.replay.state_dict()
    assert trainer.learner.replay.size > 0
    for key in ("frames", "actions", "rewards", "root_values", "root_policies", "rng"):
        np.testing.assert_array_equal(np.asarray(saved_replay[key]), restored_replay[key], err_msg=key)
    # and it trains on from there
    before = trainer.counters["env_steps"]
    trainer.config = _config(before + 32)
    trainer.run()
    assert trainer.counters["env_steps"] == before + 32


def _damage(path, how):
    data = bytearray(path.read_bytes())
    if how == "truncate":
        path.write_bytes(bytes(data[: len(data) // 3]))
    else:
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))


def test_a_resume_sets_aside_a_checkpoint_whichever_part_is_bad(tmp_path, capsys):
    """The newest five checkpoints each have one bad part (learner, replay, books, actor, tester; truncated or
    with a flipped byte): `moozi train --resume` names each in one line, sets it aside in checkpoints/rejected,
    resumes from the newest good one and ends normally, with no traceback."""
    import json

    from moozi.cli import main

    run = tmp_path / "run"
    overrides = [o for o in TINY if not o.startswith("schedule.max_env_steps")]
    assert main(["train", "--preset", "cartpole", "--run-dir", str(run), *overrides, "schedule.max_env_steps=176",
                 "output.checkpoint_every_minutes=0.00001", "output.keep_checkpoints=8"]) == 0
    found = list_checkpoints(run / "checkpoints")
    assert len(found) >= 6
    from moozi.observe.metrics import read_metrics  # each checkpoint's cost: a row of its own, with the counters

    costs = [r for r in read_metrics(run) if "checkpoint/write_s" in r]
    assert len(costs) >= len(found) and all(r["checkpoint/write_s"] > 0 and "updates" in r for r in costs)
    replay = [r["checkpoint/replay_bytes"] for r in costs]
    assert replay[-1] > 2 * replay[0]  # it grows with what replay holds
    damaged = []
    for info, part, how in zip(reversed(found), ("learner", "replay", "books", "actor", "tester"),
                               ("truncate", "flip", "truncate", "flip", "truncate")):
        name = json.loads((info.path / "metadata.json").read_text())["parts"][part]["file"]
        _damage(info.path / name, how)
        damaged.append((info.path.name, name))
    good = found[-6].path.name
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--minutes", "0.05"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for checkpoint, name in damaged:
        assert sum(f"checkpoint {checkpoint} is corrupt: {name}" in line for line in err.splitlines()) == 1, err
    assert f"resuming from the older checkpoint {good}" in err
    assert sorted(p.name for p in (run / "checkpoints" / "rejected").iterdir()) == sorted(c for c, _ in damaged)


def test_a_run_written_in_checkpoint_format_2_resumes(tmp_path):
    """A run saved by moozi before chunked replay parts (tests/data/format2_cartpole: the replay part holds
    every slot of a buffer that wrapped round) resumes with the same stored steps and trains on."""
    import shutil
    from pathlib import Path

    from moozi.config import to_dict
    from moozi.replay import ReplayBuffer
    from moozi.run_dir import load_run_config

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "data" / "format2_cartpole", run)
    saved, _, _ = load_latest(run / "checkpoints")
    assert "slot_traj" in saved["replay"] and saved["replay"]["total_steps"] > saved["replay"]["capacity"]
    config = config_from_dict(apply_overrides(to_dict(load_run_config(run)), ["schedule.max_env_steps=128"]))
    trainer = Trainer(config, run, resume=True)
    replay = trainer.learner.replay
    expected = ReplayBuffer(replay.config, replay.target_config, replay.frame_shape, replay.num_actions,
                            replay.frame_dtype)
    expected.load_state_dict(saved["replay"])
    got, want = replay.state_dict(), expected.state_dict()
    assert got.keys() == want.keys() and replay.size > 0
    for key in want:
        np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(want[key]), err_msg=key)
    trainer.run()
    assert trainer.counters["env_steps"] == 128
    state, _, path = load_latest(run / "checkpoints", parts=["replay"])
    assert (path / "replay.chunks").exists() and state["replay"]["version"] == 4


def test_one_writer_per_run_folder_and_a_kill_frees_it(tmp_path, capsys):
    """A second train on a folder being written exits 2 naming the writer; after kill -9 of the writer the
    OS has dropped its lock and --resume goes on."""
    from moozi.cli import main

    run = tmp_path / "held"
    overrides = [o for o in TINY if not o.startswith("schedule.max_env_steps")]
    proc = _long_run(run, 1)
    try:
        assert main(["train", "--resume", str(run), "--minutes", "0.1"]) == 2
        err = capsys.readouterr().err
        assert f"is being written by pid {proc.pid} on " in err and "one process writes a run folder" in err
        assert main(["train", "--preset", "cartpole", "--run-dir", str(run), *overrides]) == 2
        assert "already holds checkpoints" in capsys.readouterr().err
        assert proc.poll() is None  # the writer goes on, unaffected
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert main(["train", "--resume", str(run), "--minutes", "0.05"]) == 0
    assert "resuming" in capsys.readouterr().err


def test_a_young_run_folder_is_not_overwritten(tmp_path, capsys):
    from moozi.cli import main

    run = tmp_path / "young"
    run.mkdir()
    (run / "config.yaml").write_text("env: {name: 'gymnax:CartPole-v1'}\n")
    assert main(["train", "--preset", "cartpole", "--run-dir", str(run)]) == 2
    assert "already holds a run (its config.yaml; no checkpoint yet)" in capsys.readouterr().err
    assert (run / "config.yaml").read_text() == "env: {name: 'gymnax:CartPole-v1'}\n"


def test_default_run_folders_differ_when_started_in_the_same_second(tmp_path):
    from moozi.run_dir import new_run_dir

    base = str(tmp_path / "runs" / "cartpole-20261204-120000")
    made = [new_run_dir(base) for _ in range(3)]
    assert [p.name for p in made] == ["cartpole-20261204-120000", "cartpole-20261204-120000-2",
                                      "cartpole-20261204-120000-3"]
    assert all(p.is_dir() and not any(p.iterdir()) for p in made)


def test_a_diverging_run_stops_without_saving_the_non_finite_state(tmp_path, capsys):
    """A learning rate of 1e30 (a number as people write it): the loss turns non-finite within a few updates;
    exit 2 with the divergence named (not a configuration error), no checkpoint written at or after it, and
    every checkpoint on disk finite."""
    from moozi.checkpoint import load_checkpoint
    from moozi.cli import main

    run = tmp_path / "diverged"
    overrides = [o for o in TINY if not o.startswith("schedule.max_env_steps")]
    code = main(["train", "--preset", "cartpole", "--run-dir", str(run), *overrides, "schedule.max_env_steps=100000",
                 "learner.learning_rate=1e30", "output.checkpoint_every_minutes=0.0001"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "training diverged: non-finite loss or gradient at update " in err and "configuration error" not in err
    assert "the run stopped without saving that state" in err and "lower learner.learning_rate (now 1e+30)" in err
    line = next(x for x in err.splitlines() if "training diverged" in x)
    at = int(line.split("at update ")[1].split(" ")[0].replace(",", ""))
    for ckpt in list_checkpoints(run / "checkpoints"):
        assert ckpt.step < at
        state, _ = load_checkpoint(ckpt.path, parts=["learner"])
        assert all(np.isfinite(x).all() for x in jax.tree_util.tree_leaves(state["learner"]["published"]))


def test_a_run_in_progress_before_the_hosts_floor_continues(tmp_path, capsys):
    """A --continue run whose first sitting was written at 6fffcff (tests/data/pre_issue90_cartpole: before the
    hosted components, the checkpoint policy and the lab moved; issue 90) goes on with the same command from its
    checkpoint at 8,848 env steps to its budget of 16,000."""
    import json
    import shlex
    import shutil
    from pathlib import Path

    from moozi.cli import main

    run = tmp_path / "cartpole"
    shutil.copytree(Path(__file__).parent / "data" / "pre_issue90_cartpole", run)
    first = (run / "commands.txt").read_text().splitlines()[0]
    argv = shlex.split(first.split("  ", 1)[1])[1:]  # the recorded command, without the date and "moozi"
    argv[argv.index("--run-dir") + 1] = str(run)
    argv[argv.index("--minutes") + 1] = "10"
    assert main(argv) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out.strip().splitlines()[-1])
    assert (summary["env_steps"], summary["updates"]) == (16_000, 3_988)  # updates: 2,200 then 1,788 more
    assert "resuming" in err and "at update 2,200 (8,848 env steps" in err
    assert len((run / "commands.txt").read_text().splitlines()) == 2
