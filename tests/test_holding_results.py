"""What makes the end of a run hold its result (issue 15): the learning rate decayed over the run's
budget, and the best-tested params kept as ``checkpoints/best`` and evaluated with ``--checkpoint best``."""

import json

import numpy as np
import pytest

from moozi.checkpoint import load_checkpoint
from moozi.cli import main
from moozi.driver import Trainer, load_run_config
from moozi.observe.metrics import read_metrics
from moozi.run_dir import find_checkpoint
from tests.helpers import TINY

SETTINGS = ["schedule.max_env_steps=192", "learner.learning_rate=0.01", "learner.lr_schedule=cosine",
            "learner.lr_decay_over=budget", "learner.lr_final_fraction=0.1",
            "testing.best_window=2"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "cartpole"
    tiny = [t for t in TINY if not t.startswith("schedule.max_env_steps")]
    assert main(["train", "--preset", "cartpole", "--run-dir", str(run), "--seed", "3", *tiny, *SETTINGS]) == 0
    return run


def test_learning_rate_decays_over_the_budget(run):
    rates = [r["train/learning_rate"] for r in read_metrics(run) if "train/learning_rate" in r]
    assert len(rates) >= 3 and all(a > b for a, b in zip(rates, rates[1:]))
    # env steps / max_env_steps reaches 1 at the end: the rate ends near its floor of 0.1 * 0.01
    assert rates[0] > 0.006 and 0.001 <= rates[-1] < 0.002


def test_best_params_are_kept_with_their_score(run):
    tests = [r["test/return_mean"] for r in read_metrics(run) if "test/return_mean" in r]
    windows = [np.mean(tests[i - 1:i + 1]) for i in range(1, len(tests))]
    _, meta = load_checkpoint(find_checkpoint(run, "best"), parts=[])
    assert meta["score"] == pytest.approx(max(windows)) and meta["best_window"] == 2
    # ties go to the newer params: the kept ones are those of the last window with the best score
    last_best = max(i for i, w in enumerate(windows) if w == pytest.approx(max(windows)))
    assert meta["tests"] == pytest.approx(tests[last_best:last_best + 2])


def test_eval_reads_latest_best_or_a_step(run, capsys):
    capsys.readouterr()
    for which in ("best", "latest"):
        assert main(["eval", str(run), "--games", "2", "--checkpoint", which]) == 0
        out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert ("/best/" in out["checkpoint"]) == (which == "best") and out["games"] == 2
    assert main(["eval", str(run), "--games", "2", "--checkpoint", "7"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--checkpoint 7: allowed latest, best or one of the kept update counts" in err[0]


def test_resume_remembers_the_best_score(run):
    _, meta = load_checkpoint(find_checkpoint(run, "best"), parts=[])
    trainer = Trainer(load_run_config(run), run, resume=True)
    try:
        assert trainer.keeper.best_score == pytest.approx(meta["score"])
        assert trainer.budget_progress() == 1.0  # 192 of schedule.max_env_steps = 192 env steps
    finally:
        trainer.close()


def test_a_run_without_enough_tests_has_no_best(tmp_path, capsys):
    run = tmp_path / "short"
    tiny = [t for t in TINY if not t.startswith("schedule.max_env_steps")]
    assert main(["train", "--preset", "cartpole", "--run-dir", str(run), *tiny, "schedule.max_env_steps=32",
                 "testing.best_window=50"]) == 0
    capsys.readouterr()
    assert main(["eval", str(run), "--games", "2", "--checkpoint", "best"]) == 2
    assert "has no best checkpoint" in capsys.readouterr().err
