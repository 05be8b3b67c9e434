"""CLI forms of train / eval and their errors (tiny runs)."""

import json

import pytest

from moozi.cli import main
from tests.helpers import TINY


# The host path (OpenSpiel) in the extended tier: it compiles every player again (~70 s on a slow machine).
@pytest.fixture(scope="module", params=["tictactoe", pytest.param("openspiel-tictactoe", marks=pytest.mark.extended)])
def ttt_run(request, tmp_path_factory):
    """A tiny tic-tac-toe run on the device path (pgx) and on the host path (OpenSpiel)."""
    run = tmp_path_factory.mktemp("runs") / request.param
    assert main(["train", "--preset", request.param, "--run-dir", str(run), *TINY]) == 0
    return run


def test_eval_against_random_and_perfect(ttt_run, capsys):
    capsys.readouterr()
    results = {}
    for opponent in ("random", "perfect"):
        assert main(["eval", str(ttt_run), "--opponent", opponent, "--games", "20"]) == 0
        result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert result["wins"] + result["draws"] + result["losses"] == 20
        assert result["games_as_first_seat"] == 10  # half the games moving first
        assert result["opponent"] == opponent
        results[opponent] = result
    # The perfect player never loses: a barely trained agent cannot win a game, and
    # loses some. (Flipped return signs would show up here as wins.)
    assert results["perfect"]["wins"] == 0 and results["perfect"]["losses"] > 0


def test_resume_continues_counters(ttt_run, capsys):
    capsys.readouterr()
    assert main(["train", "--resume", str(ttt_run), "--minutes", "0.05"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["env_steps"] >= 64


def test_train_refuses_to_overwrite_a_run(ttt_run, capsys):
    assert main(["train", "--preset", "tictactoe", "--run-dir", str(ttt_run)]) == 2
    assert "--resume" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--preset", "nope"], "unknown preset 'nope': available presets are 2048, asterix, asterix-gpu, atari-pong"),
        (["train", "--preset", "cartpole", "schedule.batchsize=3"], "unknown key schedule.batchsize"),
        (["train", "--preset", "cartpole", "driver.batch_size=3"], "driver.batch_size has moved: it is now schedule.batch_size"),
        (["train", "--preset", "cartpole", "planner.temperature=0.5"], "planner.temperature has moved: it is now acting.temperature"),
        (["train", "--preset", "cartpole", "planner.kind=beam"], "planner.kind = 'beam' is invalid"),
        (["train", "--preset", "cartpole", "env.name=gymnax:Pong"], "unknown environment"),
        (["train", "--resume", "/nonexistent/run"], "not a moozi run directory"),
        (["train"], "give --preset NAME"),
    ],
)
def test_bad_input_fails_before_work_with_a_clear_message(argv, message, capsys, tmp_path):
    if argv[:2] == ["train", "--preset"] and len(argv) > 2:
        argv = argv[:3] + ["--run-dir", str(tmp_path / "r")] + argv[3:]
    assert main(argv) == 2
    assert message.lower() in capsys.readouterr().err.lower()


def test_perfect_opponent_only_for_tictactoe(ttt_run, tmp_path, capsys):
    """Two-player games other than tic-tac-toe refuse it; single-player games have no opponent (ignored)."""
    import shutil

    import yaml

    run = tmp_path / "c4"
    shutil.copytree(ttt_run, run)
    data = yaml.safe_load((run / "config.yaml").read_text())
    data["env"]["name"] = "pgx:connect_four" if "pgx" in data["env"]["name"] else "openspiel:connect_four"
    (run / "config.yaml").write_text(yaml.safe_dump(data))
    capsys.readouterr()
    assert main(["eval", str(run), "--opponent", "perfect", "--games", "2"]) == 2
    assert "only available for tic-tac-toe" in capsys.readouterr().err


def test_evaluation_commands_with_a_run(ttt_run, tmp_path, monkeypatch, capsys):
    """A trained run through every evaluation command: `moozi match` (its search, its prior, a time budget,
    AlphaZero mode), `moozi ratings`, `moozi eval` against an arena player, `moozi gtp` (with the search's
    analysis) and `moozi play`. Once per path: the host path (OpenSpiel) checks what differs there (notation,
    OpenSpiel twins, no true simulator)."""
    import io

    capsys.readouterr()
    host = "openspiel" in ttt_run.name
    pool = tmp_path / "pool.jsonl"
    matches = [(f"{ttt_run}", "perfect"), (f"prior:{ttt_run},temp=1", "os-mcts-8")]
    if not host:
        matches += [(f"{ttt_run},ms=0.001", "random"), (f"az:{ttt_run}", "random"),
                    (f"az:{ttt_run},sym=0.5,ptemp=2,pick=lcb", "random")]
    for a, b in matches:
        assert main(["match", a, b, "--pairs", "2", "--records", str(tmp_path / "m.jsonl"), "--pool", str(pool),
                     "--json"]) == 0
        out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert out["games"] == 4 and out["a"]["source"] == str(ttt_run) and out["a"]["updates"] > 0
        assert out["a"]["kind"] == {"perfect": "mcts", "os-mcts-8": "prior"}.get(b, out["a"]["kind"])
        assert out["ms_per_move"]["a"] > 0
        if "ms=" in a:  # a budget below the smallest rung's time: the smallest rung, recorded in the spec
            assert out["a"]["settings"] == {"ms": 0.001, "sims": 4}
        if a.startswith("az:"):  # play-time search options: the network sees symmetries, the game stays real
            options = {"sym": 0.5, "ptemp": 2.0, "pick": "lcb", "lcb": 1.0} if "sym=" in a else {}
            assert out["a"]["kind"] == "az" and out["a"]["settings"] == {"sims": 2, **options}
    if host:  # no true simulator on the host path
        assert main(["match", f"az:{ttt_run}", "random", "--pairs", "1", "--records", str(tmp_path / "m.jsonl")]) == 2
        assert "needs a JAX-native game" in capsys.readouterr().err
    assert main(["ratings", str(pool), "--anchor", "perfect"]) == 0
    assert "perfect" in capsys.readouterr().out

    import glob
    import tempfile

    left = set(glob.glob(f"{tempfile.gettempdir()}/moozi-eval-*"))
    assert main(["eval", str(ttt_run), "--opponent", "os-mcts-10", "--games", "4"]) == 0
    r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert r["opponent"] == "os-mcts-10" and r["games"] == 4 and r["games_as_first_seat"] == 2
    assert r["wins"] + r["draws"] + r["losses"] == 4 and "low" in r["score"] and r["match"]["a"]["kind"] == "mcts"
    # The same shape as against random (issue 48): the checkpoint folder, its env steps; no folder left behind.
    assert "/checkpoints/step_" in r["checkpoint"] and r["env_steps"] > 0
    assert set(glob.glob(f"{tempfile.gettempdir()}/moozi-eval-*")) == left
    # One network, one id: the run's identity, however its path is typed; the printed player builds it again.
    import os

    a = r["match"]["a"]
    assert a["id"].startswith(f"mcts:{ttt_run.name}-") and str(ttt_run.parent) not in a["id"]
    cwd = os.getcwd()
    try:
        os.chdir(ttt_run.parent)
        assert main(["match", f"./{ttt_run.name}", "random", "--pairs", "1", "--records", str(tmp_path / "m.jsonl"),
                     "--json"]) == 0
    finally:
        os.chdir(cwd)
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["a"]["id"] == a["id"]
    assert main(["match", a["player"], "random", "--pairs", "1", "--records", str(tmp_path / "m.jsonl"),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["a"]["id"] == a["id"]

    monkeypatch.setattr("sys.stdin", io.StringIO("moozi-analyze\ngenmove b\nlegal_moves\nquit\n"))
    assert main(["gtp", str(ttt_run)]) == 0
    replies = capsys.readouterr().out.split("\n\n")
    assert replies[0].startswith("= value ") and len(replies[0].splitlines()) == 1 + 9
    assert replies[1].startswith("= x(") and len(replies[2].split()) == 1 + 8
    monkeypatch.setattr("sys.stdin", io.StringIO("hint\nquit\n"))
    assert main(["play", str(ttt_run), "--second"]) == 0
    out = capsys.readouterr().out
    assert "moozi plays x(" in out and "value for you" in out and "search" in out


def test_tournaments_during_training(ttt_run, tmp_path, capsys):
    """tournament.every_checkpoints: the newest checkpoint plays the anchors (in a run), and the previous
    checkpoint (run_tournament); the games go to the run's pool, the ratings to the metrics; single-player
    games refuse it by name."""
    import shutil

    from moozi.checkpoint import list_checkpoints
    from moozi.config import TournamentConfig
    from moozi.eval.tournament import run_tournament

    if "openspiel" in ttt_run.name:
        pytest.skip("the driver's hook does not depend on the path; the pgx run covers it")
    run = tmp_path / "ttt"
    # Bounded by env steps, not wall clock (on a slow CPU compiling can fill a short time limit): four epochs, a
    # checkpoint (a tournament and a gate) after nearly every one, updates once the first games have ended.
    argv = ["train", "--preset", "tictactoe", "--run-dir", str(run), *TINY,
            "schedule.max_env_steps=64", "output.checkpoint_every_minutes=0.0001",
            "tournament.every_checkpoints=1", "tournament.pairs=2", "tournament.anchors=[random, perfect]",
            "tournament.max_share=0.9", "gating.every_checkpoints=1", "gating.method=fixed", "gating.max_pairs=2",
            "gating.threshold=0.0", "gating.max_share=0.9"]
    assert main(argv) == 0
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    # Gating (threshold 0: every gate accepts): best follows the gated checkpoints; its games stay out of ratings.
    gated = [r for r in rows if "gate/accepted" in r]
    best = list_checkpoints(run / "checkpoints" / "best")
    assert gated and all(r["gate/accepted"] == 1.0 and r["gate/pairs"] == 2 for r in gated)
    assert best and best[-1].step == int(gated[-1]["gate/best_updates"])
    assert list((run / "gating").glob("*-vs-*.jsonl"))
    pool_games = len((run / "ratings" / "games.jsonl").read_text().splitlines())
    tournament_games = sum(len(f.read_text().splitlines()) - 1 for f in (run / "ratings" / "matches").glob("*.jsonl"))
    assert pool_games == tournament_games
    rated = [r for r in rows if "rating/latest" in r]
    assert rated and all(r["rating/latest_low"] <= r["rating/latest"] <= r["rating/latest_high"] for r in rated)
    assert "rating/score_vs/random" in rated[0] and "rating/score_vs/perfect" in rated[0]
    # Against the previous checkpoint, called directly (a run's timing decides how many tournaments fit in it).
    steps = sorted(c.step for c in list_checkpoints(run / "checkpoints"))
    assert len(steps) >= 2
    out = run_tournament(run, steps[-1], steps[:-1][-1:], TournamentConfig(pairs=1, anchors=("random",)), seed=1)
    assert "rating/score_vs/previous_1" in out and out["rating/pool_games"] > 2
    capsys.readouterr()
    assert main(["ratings", str(run)]) == 0
    assert "random" in capsys.readouterr().out
    shutil.rmtree(run)
    assert main(["train", "--preset", "cartpole", "--run-dir", str(tmp_path / "cp"), "--minutes", "0.1",
                 "tournament.every_checkpoints=1"]) == 2
    assert "is single-player, judged between trained agents; ['random'] are not" in capsys.readouterr().err


def test_ctrl_c_stops_cleanly_says_where_and_resume_says_from_where(tmp_path, capsys, monkeypatch):
    """Ctrl-C (here: a stop requested as the run starts) ends with the final checkpoint named, how to go on, and
    exit code 130; the JSON summary is a line of its own; --resume says at which update it continues."""
    from moozi.driver.budget import Budget

    start = Budget.start

    def interrupted(self, *args):
        start(self, *args)
        self.stop_requested, self.stop_signal = True, "SIGINT"  # what the SIGINT handler does

    monkeypatch.setattr(Budget, "start", interrupted)
    run = tmp_path / "run"
    assert main(["train", "--preset", "cartpole", "--run-dir", str(run), *TINY]) == 130
    out, err = capsys.readouterr()
    assert "stopped by Ctrl-C at update 0; the final checkpoint is" in err and f"moozi train --resume {run}" in err
    assert json.loads(out.strip().splitlines()[-1])["run_dir"] == str(run)
    assert main(["train", "--resume", str(run)]) == 130
    assert f"resuming {run} at update 0 (" in capsys.readouterr().err


@pytest.mark.parametrize("backend", ["local", pytest.param("ray", marks=pytest.mark.slow)])
def test_sigterm_to_the_process_group_is_a_clean_stop(tmp_path, backend):
    """What Docker, Kubernetes, Slurm and systemd do: SIGTERM to the whole process group of a host-path run with
    environment worker processes (local), or of a run on a private Ray (whose daemons and workers start in their
    own group: before, the signal killed them under the driver, which exited 1 after 60 s). The workers ignore it
    and end when the run closes them; the run finishes the phase it is in, writes its final checkpoint and exits
    143 naming the signal; no traceback, nothing left."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from moozi.checkpoint import list_checkpoints

    run = tmp_path / "term"
    cmd = [sys.executable, "-m", "moozi.cli", "train", "--preset", "openspiel-tictactoe", "--run-dir", str(run),
           *[o for o in TINY if not o.startswith("schedule.max_env_steps")], "schedule.max_env_steps=100000000",
           *(["env.num_workers=2"] if backend == "local" else ["--backend", "ray"])]
    if backend == "ray":
        pytest.importorskip("ray", reason="the [ray] extra is not installed")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 300
        while not (run / "metrics.jsonl").exists() or not (run / "metrics.jsonl").read_text().strip():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-2000:]
            time.sleep(0.2)
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    err = err.decode()
    assert proc.returncode == 143, err[-2000:]
    assert "stopped by SIGTERM at update" in err and "Traceback" not in err and "Error" not in err, err[-2000:]
    assert list_checkpoints(run / "checkpoints") and took < 60
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the group's other processes end once their parent has
        try:
            os.killpg(proc.pid, 0)  # raises once no process of the group is left
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        left = subprocess.run(["ps", "-o", "pid,stat,cmd", "-g", str(proc.pid)], capture_output=True, text=True)
        raise AssertionError(f"processes left in the run's group: {left.stdout}")
    if backend == "ray":  # Ray's own group: its daemons and workers go with the driver's shutdown of Ray
        pointer = run / "ray-temp-dir.txt"
        temp = pointer.read_text().strip() if pointer.exists() else str(run / "ray")
        deadline = time.monotonic() + 30
        while (left := subprocess.run(["pgrep", "-f", temp], capture_output=True, text=True).stdout.split()):
            assert time.monotonic() < deadline, f"Ray processes left: {left}"
            time.sleep(0.5)


def _term_at_first_epoch(cmd: list[str], run, epochs_before: int = 0) -> tuple[int, str, float, int]:
    """Start ``cmd`` in a session of its own, SIGTERM its group the moment its first epoch begins (train.log's
    "training ..." line number ``epochs_before + 1``: compiling comes next); its exit code, stderr, seconds from
    the signal to the exit, and how many processes of the group were left running (zombies aside) 10 s on."""
    import os
    import signal
    import subprocess
    import time

    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    log = run / "train.log"
    try:
        deadline = time.monotonic() + 300
        while not log.exists() or log.read_text().count("moozi: training ") <= epochs_before:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-2000:]
            time.sleep(0.05)
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    deadline, left = time.monotonic() + 10, []
    while time.monotonic() < deadline:
        ps = subprocess.run(["ps", "-o", "stat=", "-s", str(proc.pid)], capture_output=True, text=True).stdout
        if not (left := [s for s in ps.split() if not s.startswith("Z")]):
            break
        time.sleep(0.2)
    return proc.returncode, err.decode(), took, len(left)


@pytest.mark.slow
def test_a_sigterm_stop_that_outlasts_its_grace_ends_the_process_then(tmp_path):
    """A SIGTERM that lands as the first epoch begins (compiling: Python runs no signal handler inside an XLA
    compile) with ``--stop-grace 0.3``: the process ends 0.3 s on, exit 143, one line saying what holds the run
    and how to go on, no traceback, no process of its group left. Both pieces of advice work: with no checkpoint
    yet, the same command with --continue trains; a resumed run stopped so names its newest checkpoint, and
    --resume goes on from it."""
    import re
    import sys

    from moozi.checkpoint import list_checkpoints

    run = tmp_path / "grace"
    base = [sys.executable, "-m", "moozi.cli", "train", "--preset", "openspiel-tictactoe", "--run-dir", str(run),
            *[o for o in TINY if not o.startswith("schedule.max_env_steps")], "schedule.max_env_steps=100000000",
            "env.num_workers=2"]
    code, err, took, left = _term_at_first_epoch([*base, "--stop-grace", "0.3"], run)
    assert code == 143 and "after 0.3 s (--stop-grace): exiting now" in err, err[-2000:]
    # On a loaded machine the handler can run before the compile starts: the stop then proceeds normally, writes
    # the final checkpoint at update 0, and it is those last writes that outlast the grace. Either is right, as
    # long as the advice matches what is on disk (CI failed once on the second branch, 2026-12-06).
    if list_checkpoints(run / "checkpoints"):
        assert f"the newest checkpoint is {run / 'checkpoints'}" in err and "(update 0)" in err and \
            f"continue with: moozi train --resume {run}" in err, err[-2000:]
    else:
        assert "no checkpoint was written yet" in err and "commands.txt) and --continue" in err, err[-2000:]
    assert "Traceback" not in err and took < 15 and left == 0, (took, left, err[-2000:])
    assert main(["train", *base[4:], "--continue", "--minutes", "0.3"]) == 0  # the advice: the same, --continue
    step = list_checkpoints(run / "checkpoints")[-1].step
    resume = [sys.executable, "-m", "moozi.cli", "train", "--resume", str(run), "--stop-grace", "0.3"]
    code, err, took, left = _term_at_first_epoch(resume, run, epochs_before=2)
    assert code == 143 and "(--stop-grace): exiting now" in err and "Traceback" not in err, err[-2000:]
    assert f"the newest checkpoint is {run / 'checkpoints'}" in err and f"(update {step:,}); no update since it is " \
        "lost" in err and f"continue with: moozi train --resume {run}" in err, err[-2000:]
    assert took < 15 and left == 0 and list_checkpoints(run / "checkpoints")[-1].step == step
    assert re.search(r"exiting now", (run / "train.log").read_text())  # said in the run's log too
    assert main(["train", "--resume", str(run), "--minutes", "0.2"]) == 0
