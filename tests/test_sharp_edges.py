"""What a new user hits at the edges: each mistake gets one line (no traceback), and no work is lost.

Every test reproduces one situation from the sharp-edges issue and checks the
message, the exit code and that no traceback reaches the console.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

import moozi.driver.trainer as trainer_module
from moozi.checkpoint import list_checkpoints
from moozi.cli import build_parser, main
from moozi.envs import register, unregister
from moozi.observe.metrics import read_metrics, training_rows
from tests import _pool_games

REPO = Path(__file__).resolve().parents[1]

# A tiny host-game preset: an MLP, 2 simulations, a test every epoch.
TINY_HOST = {
    "env": {"name": "edges:silent", "num_envs": 2},
    "model": {"kind": "mlp", "mlp_hidden": [8], "mlp_embedding": 8, "head_hidden": 8, "support_size": 1,
              "value_transform": "identity"},
    "planner": {"kind": "gumbel", "num_simulations": 2, "max_num_considered_actions": 2},
    "test_planner": {"kind": "gumbel", "num_simulations": 2, "max_num_considered_actions": 2, "gumbel_scale": 0.0},
    "targets": {"history_length": 1, "unroll_steps": 2, "td_steps": 3, "discount": 1.0},
    "replay": {"capacity": 1000, "sampling": "uniform"},
    "acting": {"steps_per_epoch": 5},
    "schedule": {"batch_size": 8, "samples_per_env_step": 1.0, "min_replay_steps": 10, "max_env_steps": 200},
    "testing": {"every": 1, "episodes": 2, "envs": 2, "steps_per_segment": 6, "health_tests": 3},
    "output": {"log_every_epochs": 1},
}


@pytest.fixture(scope="module", autouse=True)
def toy_games():
    for name, cls in (("edges:silent", _pool_games.Silent), ("edges:wrong-shape", _pool_games.WrongShape),
                      ("edges:endless", _pool_games.Endless), ("edges:loud", _pool_games.Loud)):
        register(name, cls, path="host", overwrite=True)
    yield
    unregister("edges:")


def _preset(tmp_path: Path, **sections) -> str:
    data = json.loads(json.dumps(TINY_HOST))
    for section, values in sections.items():
        data.setdefault(section, {}).update(values)
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return err


# --------------------------------------------------------------------- 1. runs that cannot train


@pytest.mark.parametrize("overrides, words", [
    (["replay.capacity=100", "schedule.min_replay_steps=1000"], ["replay.capacity = 100", "schedule.min_replay_steps = 1000"]),
    (["schedule.max_env_steps=50", "schedule.min_replay_steps=100"], ["schedule.max_env_steps = 50", "schedule.min_replay_steps = 100"]),
])
def test_impossible_combinations_fail_at_config_time(overrides, words, tmp_path, capsys):
    assert main(["train", "--preset", "cartpole", "--run-dir", str(tmp_path / "r"), *overrides]) == 2
    err = _err(capsys)
    assert all(w in err for w in words), err
    assert not (tmp_path / "r").exists()  # rejected before any work


@pytest.mark.parametrize("minutes", ["0", "-1"])
def test_minutes_must_be_positive(minutes, tmp_path, capsys):
    assert main(["train", "--preset", "cartpole", "--run-dir", str(tmp_path / "r"), "--minutes", minutes]) == 2
    assert "--minutes" in _err(capsys)


def test_capacity_below_one_episode_fails_before_work(tmp_path, capsys):
    preset = _preset(tmp_path, replay={"capacity": 10}, schedule={"min_replay_steps": 5},
                     env={"kwargs": {"cap": 50}})
    assert main(["train", "--preset", preset, "--run-dir", str(tmp_path / "r")]) == 2
    assert "replay.capacity = 10 cannot hold one episode" in _err(capsys)


def test_a_run_that_never_updates_says_why(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(trainer_module, "NO_UPDATE_WARNING_S", 0.0)
    preset = _preset(tmp_path, env={"name": "edges:endless"}, schedule={"max_env_steps": 20})
    assert main(["train", "--preset", preset, "--run-dir", str(tmp_path / "r")]) == 0
    err = _err(capsys)
    assert "no update after" in err and "no episode has ended" in err and "max_episode_steps" in err
    assert "the run ended without a single update" in err


def test_deadline_is_checked_between_acting_and_learning(tmp_path):
    from moozi.config import apply_overrides, config_from_dict
    from moozi.driver import Trainer

    config = config_from_dict(apply_overrides(TINY_HOST, ["schedule.min_replay_steps=1"]))
    trainer = Trainer(config, tmp_path / "r")
    host = trainer.backend.instance(trainer.fleet.slots["actor"].handle)
    act = host.run

    def act_until_the_deadline(*args):  # the time limit passes while the first segment is played
        out = act(*args)
        trainer.budget.deadline = time.monotonic()
        return out

    host.run = act_until_the_deadline
    try:
        counters = trainer.run(minutes=10)
    finally:
        trainer.close()
    # the acting phase ran, its learning phase (and the test) did not: stopped within the epoch
    assert counters["epochs"] == 1 and counters["updates"] == 0 and counters["env_steps"] == 10


# --------------------------------------------------------------------- 2. checkpoint fallback


@pytest.fixture(scope="module")
def two_checkpoints(tmp_path_factory):
    """A tiny run with two checkpoints (the second one from a resume)."""
    tmp = tmp_path_factory.mktemp("fallback")
    preset = _preset(tmp, schedule={"max_env_steps": 60})
    run = tmp / "run"
    assert main(["train", "--preset", preset, "--run-dir", str(run)]) == 0
    data = yaml.safe_load((run / "config.yaml").read_text())
    data["schedule"]["max_env_steps"] = 120
    (run / "config.yaml").write_text(yaml.safe_dump(data))
    assert main(["train", "--resume", str(run)]) == 0
    assert len(list_checkpoints(run / "checkpoints")) == 2
    return run


def test_corrupt_newest_checkpoint_is_set_aside_visibly_and_metrics_continue(two_checkpoints, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(two_checkpoints, run)
    older, newest = list_checkpoints(run / "checkpoints")
    (newest.path / "learner.msgpack").write_bytes(b"garbage")
    data = yaml.safe_load((run / "config.yaml").read_text())
    data["schedule"]["max_env_steps"] = 160
    (run / "config.yaml").write_text(yaml.safe_dump(data))
    capsys.readouterr()
    assert main(["train", "--resume", str(run)]) == 0
    err = _err(capsys)
    assert f"checkpoint {newest.path.name} is corrupt" in err and "set aside" in err
    assert f"resuming from the older checkpoint {older.path.name}" in err
    assert (run / "checkpoints" / "rejected" / newest.path.name).is_dir()
    assert newest.path.name not in [c.path.name for c in list_checkpoints(run / "checkpoints")]
    steps = [r["env_steps"] for r in read_metrics(run) if "env_steps" in r]
    assert steps == sorted(steps), steps  # the curves never run backwards
    rewound = read_metrics(run / "metrics.rewound.jsonl")
    assert rewound and min(r["step"] for r in rewound) > json.loads(
        (older.path / "metadata.json").read_text())["metadata"]["counters"]["env_steps"]


def test_rejected_checkpoints_do_not_outlive_the_good_ones(tmp_path):
    from moozi.checkpoint import save_checkpoint, set_aside_checkpoint

    d = tmp_path / "ck"
    for step in (1, 2):
        save_checkpoint(d, step, {"p": {"x": 1}}, {})
    set_aside_checkpoint(d / "step_000000002")
    for step in (3, 4, 5):
        save_checkpoint(d, step, {"p": {"x": 1}}, {}, keep=2)
    assert [c.step for c in list_checkpoints(d)] == [4, 5]
    assert not any((d / "rejected").iterdir())


# --------------------------------------------------------------------- 3. one-line errors


def test_full_disk_during_a_checkpoint_keeps_the_previous_one(two_checkpoints, tmp_path, capsys, monkeypatch):
    import shutil

    import moozi.checkpoint.files as ck

    run = tmp_path / "run"
    shutil.copytree(two_checkpoints, run)
    before = [c.path.name for c in list_checkpoints(run / "checkpoints")]
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["schedule"]["max_env_steps"] = 160  # more to train, so the resume runs and checkpoints
    (run / "config.yaml").write_text(yaml.safe_dump(config))

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(ck, "_write_file", full)
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--minutes", "0.05"]) == 2
    err = _err(capsys)
    assert "was not written" in err and "No space left on device" in err and f"{before[-1]} is intact" in err
    assert [c.path.name for c in list_checkpoints(run / "checkpoints")] == before
    assert not [p for p in (run / "checkpoints").iterdir() if p.name.startswith(".tmp-")]
    log = (run / "train.log").read_text()
    assert "Traceback" in log and "OSError" in log  # the exception that ended the run is in train.log


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _inject_replay_chunks(monkeypatch, run):
    import moozi.checkpoint.files as ck

    real, calls = ck._write_frame, []

    def frame(out, data, level):  # the header goes, the first chunk of the replay finds the disk full
        calls.append(1)
        if len(calls) > 1:
            _full()
        return real(out, data, level)

    monkeypatch.setattr(ck, "_write_frame", frame)
    return ["was not written", "is intact"]


def _inject_kept(monkeypatch, run):
    import moozi.checkpoint.files as ck

    config = yaml.safe_load((run / "config.yaml").read_text())
    config["output"]["keep_every_updates"] = 1
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    real = ck._write_file
    monkeypatch.setattr(ck, "_write_file", lambda path, data: _full() if "kept" in Path(path).parts else
                        real(path, data))
    return ["was written (", "its params were not kept in", "No space left on device"]


class _FullFile:
    """A file object whose writes find the disk full (a wrapped real file: reading, closing still work)."""

    def __init__(self, f):
        self._f = f

    def write(self, data):
        _full()

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


def _inject_metrics_rows(monkeypatch, run):
    import builtins

    import moozi.observe.metrics as metrics

    def opener(path, mode="r", *args, **kwargs):
        f = builtins.open(path, mode, *args, **kwargs)
        return _FullFile(f) if mode == "a" else f

    monkeypatch.setattr(metrics, "open", opener, raising=False)
    return ["metrics.jsonl", "the metrics row at step", "was not written (the rows before it are in the file)"]


def _inject_tensorboard(monkeypatch, run):
    from tensorboardX.event_file_writer import EventsWriter

    monkeypatch.setattr(EventsWriter, "flush", _full)
    return ["the TensorBoard events of the metrics row at step", "were not written (the row is in"]


@pytest.mark.parametrize("inject", [_inject_replay_chunks, _inject_kept, _inject_metrics_rows, _inject_tensorboard],
                         ids=["replay-chunks", "kept", "metrics-rows", "tensorboard"])
def test_a_full_disk_on_any_writer_is_one_line_and_keeps_the_last_checkpoint(inject, two_checkpoints, tmp_path,
                                                                               capsys, monkeypatch):
    """Fault injection for each writer of a run: the run ends with exit 2 and one line naming what was and was not
    written (the first error, never hidden by the last writes that fail after it); no hang; no half-written
    folder; every checkpoint on disk loads, the newest from before it among them."""
    import shutil

    from moozi.checkpoint import load_checkpoint

    run = tmp_path / "run"
    shutil.copytree(two_checkpoints, run)
    before = [c.path.name for c in list_checkpoints(run / "checkpoints")]
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["schedule"]["max_env_steps"] = 400
    config["output"]["checkpoint_every_minutes"] = 1e-6  # a checkpoint after every row
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    words = inject(monkeypatch, run)
    capsys.readouterr()
    assert main(["train", "--resume", str(run)]) == 2
    monkeypatch.undo()
    err = _err(capsys).strip().splitlines()
    assert len(err) >= 1 and all(w in err[-1] for w in words), err
    left = list_checkpoints(run / "checkpoints")
    assert before[-1] in [c.path.name for c in left]
    for c in left:
        load_checkpoint(c.path)
    assert not [p for p in (run / "checkpoints").rglob("*") if p.name.startswith(".tmp-")]
    assert "Traceback" in (run / "train.log").read_text()  # the whole story is in train.log


def _gif(path):
    from moozi.observe.gif import write_gif

    return write_gif(path, [np.zeros((4, 4, 3), np.uint8)] * 2), "the GIF"


def _records(path):
    from moozi.eval.arena import GameRecord, write_records

    write_records(path, [GameRecord(0, 0, 0, (), (1, 2), 1.0)], "a", "b", {"games": 1})
    return path, "the records of 1 games"


@pytest.mark.parametrize("write", [_gif, _records], ids=["gif", "match-records"])
def test_a_full_disk_leaves_an_output_file_as_it_was(write, tmp_path, monkeypatch):
    """GIFs, reports and match records are written whole or not at all: on a full disk the file there from
    before is unchanged, no temporary file is left, and the error names the file and what was not written."""
    import PIL.Image

    from moozi.cli.console import _user_error

    path = tmp_path / "out.bin"
    path.write_bytes(b"before")
    monkeypatch.setattr(PIL.Image.Image, "save", _full)
    monkeypatch.setattr(Path, "write_text", _full)
    with pytest.raises(OSError) as e:
        write(path)
    monkeypatch.undo()
    what = write(tmp_path / "ok.bin")[1]
    assert path.read_bytes() == b"before" and sorted(p.name for p in tmp_path.iterdir()) == ["ok.bin", "out.bin"]
    assert _user_error(e.value) == (f"cannot write {path}: No space left on device; {what} was not written (the "
                                    "file there from before is unchanged)")


def test_a_full_disk_while_writing_a_report(two_checkpoints, tmp_path, monkeypatch):
    from moozi.observe.report import write_report

    monkeypatch.setattr(Path, "write_text", _full)
    with pytest.raises(OSError, match="the report was not written .nothing is left there."):
        write_report([two_checkpoints], tmp_path / "report.html")
    assert list(tmp_path.iterdir()) == []


def test_read_only_run_directory(tmp_path, capsys, monkeypatch):
    real = Path.mkdir

    def read_only(self, *args, **kwargs):
        if str(self).startswith(str(tmp_path / "ro")):
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    assert main(["train", "--preset", _preset(tmp_path), "--run-dir", str(tmp_path / "ro" / "run")]) == 2
    err = _err(capsys)
    assert f"cannot write {tmp_path / 'ro' / 'run'}: Read-only file system" in err


def test_a_game_that_breaks_the_contract_gets_one_line(tmp_path, capsys):
    preset = _preset(tmp_path, env={"name": "edges:wrong-shape"})
    assert main(["train", "--preset", preset, "--run-dir", str(tmp_path / "r")]) == 2
    err = _err(capsys).strip().splitlines()
    assert len(err) == 1, err
    assert "edges:wrong-shape (WrongShape.reset)" in err[0] and "observation of shape (4,)" in err[0]
    log = (tmp_path / "r" / "train.log").read_text()
    assert "GameContractError" in log and "Traceback" in log  # the full story is in train.log


def test_eval_on_checkpoints_of_another_game(two_checkpoints, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(two_checkpoints, run)
    data = yaml.safe_load((run / "config.yaml").read_text())
    data["env"]["name"] = "edges:endless"
    (run / "config.yaml").write_text(yaml.safe_dump(data))
    assert main(["eval", str(run), "--games", "2"]) == 2
    assert "written by a run of edges:silent" in _err(capsys)


def test_opponent_is_ignored_for_single_player_games(two_checkpoints, capsys):
    assert main(["eval", str(two_checkpoints), "--games", "2", "--opponent", "perfect"]) == 0
    out = capsys.readouterr()
    assert "single-player game: --opponent perfect is ignored" in out.err
    assert json.loads(out.out.strip().splitlines()[-1])["opponent"] is None


def test_every_eval_argument_has_help():
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["eval"]
    for action in sub._actions:
        assert action.help, action.dest


def test_console_warnings_are_the_same_whatever_the_game_imported(capsys):
    """A library that puts a handler on the root logger (absl, via OpenSpiel) must not double moozi's lines."""
    from moozi.cli import _drop_console, _log_console

    root_handler = logging.StreamHandler(sys.stderr)
    logging.getLogger().addHandler(root_handler)
    logger = logging.getLogger("moozi")
    propagate = logger.propagate
    try:
        _log_console()
        logging.getLogger("moozi.checkpoint").warning("checkpoint step_1 is corrupt")
        err = capsys.readouterr().err
        assert err.count("checkpoint step_1 is corrupt") == 1 and "moozi: checkpoint" in err
    finally:
        logging.getLogger().removeHandler(root_handler)
        _drop_console(logger)
        logger.propagate = propagate


# --------------------------------------------------------------------- 4. registration errors


@pytest.mark.parametrize("case", ["missing", "shadowed", "forgotten"])
def test_custom_game_registration_errors_point_at_env_modules(case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if case == "missing":
        overrides, words = ["env.name=mine:v0", "env.modules=[no_such_game_module]"], [
            "env.modules", "no_such_game_module", "ModuleNotFoundError", str(tmp_path)]
    elif case == "shadowed":
        (tmp_path / "shadowed_game").mkdir()
        overrides, words = ["env.name=mine:v0", "env.modules=[shadowed_game]"], [
            "env.modules", "shadowed_game", "folder", str(tmp_path)]
    else:
        overrides, words = ["env.name=mine:v0"], ["unknown environment 'mine:v0'", "env.modules", str(tmp_path)]
    assert main(["train", "--preset", "cartpole", "--run-dir", str(tmp_path / "r"), *overrides]) == 2
    err = _err(capsys)
    assert all(w in err for w in words), err
    assert len(err.strip().splitlines()) == 1


# --------------------------------------------------------------------- 6. silent non-learning


def test_a_game_where_nothing_can_be_learned_is_flagged(tmp_path, capsys):
    preset = _preset(tmp_path, schedule={"max_env_steps": 80})
    run = tmp_path / "r"
    assert main(["train", "--preset", preset, "--run-dir", str(run)]) == 0
    err = _err(capsys)
    assert "health: test return not improving: median 0 over the last 3 tests, 0 over the first 3" in err
    rows = [r for r in read_metrics(run) if "health/ok" in r]
    assert rows and training_rows(rows)[-1]["health/ok"] == 0


# --------------------------------------------------------------------- 5. rewards outside the support


def test_rewards_outside_the_support_are_reported_not_clipped_silently(tmp_path, capsys):
    preset = _preset(tmp_path, env={"name": "edges:loud"}, schedule={"max_env_steps": 40},
                     testing={"every": 0})
    run = tmp_path / "r"
    assert main(["train", "--preset", preset, "--run-dir", str(run)]) == 0
    err = _err(capsys)
    assert "of reward targets fall outside what model.value_transform = identity with model.support_size = 1" in err
    assert "(|x| <= 1)" in err
    rows = [r for r in read_metrics(run) if "targets/reward_outside_support" in r]
    assert rows and max(r["targets/reward_outside_support"] for r in rows) > 0


# --------------------------------------------------------------------- 3. Ctrl-C


def _moozi(args, cwd, **kw):
    return subprocess.Popen([sys.executable, "-m", "moozi.cli", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, **kw)


@pytest.mark.parametrize("after_s", [0.5] + [pytest.param(s, marks=pytest.mark.extended) for s in (1.5, 3.0)])
def test_ctrl_c_during_start_up_exits_quietly(after_s, tmp_path):
    # No --minutes: a Ctrl-C that got lost (Python drops one raised inside JAX's garbage-collector
    # callback) would leave the run training, and communicate() would time out.
    proc = _moozi(["train", "--preset", "cartpole", "--run-dir", str(tmp_path / "r")], tmp_path)
    time.sleep(after_s)  # importing jax / building the model / compiling
    os.killpg(proc.pid, signal.SIGINT)  # the terminal sends Ctrl-C to the whole process group
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 130), err  # 0: training had begun, it stopped with a checkpoint
    assert "Traceback" not in err and "Exception ignored" not in err, err


def test_ctrl_c_during_an_import_waits_for_the_import_to_end(tmp_path):
    # Raised inside a compiled module's initialisation (jaxlib's, numpy's) a KeyboardInterrupt aborted or
    # crashed the interpreter (CI: exit -6, "terminate called after throwing nanobind::python_error").
    (tmp_path / "slow_module.py").write_text(
        "import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\n"
        "for _ in range(20):\n    time.sleep(0.005)\nDONE = True\n")
    script = ("import sys, time\nfrom moozi.cli.console import _catch_sigint\nrestore = _catch_sigint()\n"
              "try:\n    import slow_module\n    time.sleep(30)\n    print('not interrupted')\n"
              "except KeyboardInterrupt:\n    print('interrupted after the import:', slow_module.DONE)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO / 'src'}"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "interrupted after the import: True", done.stdout + done.stderr


def test_ctrl_c_with_environment_worker_processes(tmp_path):
    preset = _preset(tmp_path, env={"name": "catch:v0", "modules": ["catch"], "num_workers": 2},
                     schedule={"max_env_steps": 100000}, model={"support_size": 1})
    proc = _moozi(["train", "--preset", preset, "--run-dir", str(tmp_path / "r")], REPO / "examples" / "custom_game")
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not read_metrics(tmp_path / "r"):
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, err  # interrupted, though cleanly: the final checkpoint and how to go on
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "the final checkpoint is" in err and "continue with: moozi train --resume" in err, err
    assert json.loads(out.strip().splitlines()[-1])["env_steps"] > 0
    assert list_checkpoints(tmp_path / "r" / "checkpoints")  # stopped with a final checkpoint


# --------------------------------------------------------------------- 7, 8. progress display, small ones


def _text(renderable) -> str:
    import io

    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=120).print(renderable)
    return out.getvalue()


def test_progress_says_what_the_run_is_doing_and_times_this_invocation():
    from moozi.cli import _Progress

    p = _Progress("moozi train", 1.0, started=time.monotonic() - 30.0)
    assert "starting: building the game and the model" in _text(p._render())
    assert "30 s / 60 s" in _text(p._render())  # not dashes: this invocation's time against its --minutes
    # a resumed run: this invocation's 30 s against its limit, the run's own total beside it
    p({"env_steps": 100, "updates": 0, "wall_s": 500.0}, {}, {})
    text = _text(p._render())
    assert "acting: filling replay before the first update" in text and "(run total 500 s)" in text
    p({"env_steps": 200, "updates": 4, "wall_s": 510.0}, {"health/ok": 1.0}, {"test/return_mean": 3.0})
    text = _text(p._render())
    assert "training" in text and "health" in text and "3.00" in text


def test_each_checkpoint_is_logged_once(two_checkpoints):
    log = (two_checkpoints / "train.log").read_text()
    assert log.count("final checkpoint written") == 2  # two invocations, one final checkpoint each
    assert "saved checkpoint" not in log  # the checkpoint module's own line is debug-level


def test_tensorboard_comes_with_the_set_up_the_readme_gives():
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(d.startswith("tensorboard>=") for d in extras["tensorboard"])
    install = next(line for line in (REPO / "Makefile").read_text().splitlines() if "pip install -q -e" in line)
    assert "tensorboard" in install.split("[", 1)[1]
    assert "moozi[tensorboard]" in (REPO / "README.md").read_text()
