"""moozi tune: search-space forms (golden), and a 2-trial sweep and a 2-trial population of seconds on Ray Tune."""

from __future__ import annotations

import json

import pytest

from moozi.cli.main import main
from moozi.config import ConfigError
from moozi.tuning import Param, check_params, parse_param, trial_config
from tests.helpers import TINY


def test_param_forms_golden():
    assert parse_param("learner.learning_rate=loguniform(1e-4, 1e-2)") == Param("learner.learning_rate", "loguniform",
                                                                               (1e-4, 1e-2))
    assert parse_param("planner.num_simulations = choice(4, 8)") == Param("planner.num_simulations", "choice", (4, 8))
    assert parse_param("model.kind=grid('mlp', 'resnet')").args == ("mlp", "resnet")
    assert parse_param("schedule.batch_size=randint(8, 65)").args == (8, 65)
    for bad, why in [("learning_rate=uniform(0, 1)", "SECTION.KEY"), ("learner.x=normal(0, 1)", "unknown form"),
                     ("learner.x=uniform(1, 0)", "lo < hi"), ("learner.x=loguniform(0, 1)", "lo > 0"),
                     ("learner.x=choice()", "at least one"), ("learner.x=choice(a b)", "literals")]:
        with pytest.raises(ConfigError, match=why):
            parse_param(bad)


def test_values_are_checked_and_applied():
    from moozi.presets import load_preset

    base = load_preset("cartpole")
    check_params([parse_param("learner.learning_rate=loguniform(1e-4, 1e-2)")], base)
    with pytest.raises(ConfigError, match="unknown key learner.learning_rat"):
        check_params([parse_param("learner.learning_rat=uniform(0.1, 0.2)")], base)
    with pytest.raises(ConfigError, match="planner.kind"):
        check_params([parse_param("planner.kind=choice('gumbel', 'beam')")], base)
    c = trial_config(base, {"learner.learning_rate": 0.003, "planner.num_simulations": 9.6})  # a perturbed integer
    assert c.learner.learning_rate == 0.003 and c.planner.num_simulations == 10


@pytest.fixture(scope="module")
def tune_ready():
    pytest.importorskip("ray.tune", reason="the [tune] extra is not installed")


@pytest.mark.slow
def test_a_two_trial_sweep_writes_runs_and_a_summary(tune_ready, tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["tune", "--preset", "cartpole", "--param", "learner.learning_rate=choice(0.001, 0.01)", "--trials", "2",
            "--minutes", "0.15", "--out", str(out), "--cpus", "2", *TINY, "schedule.max_env_steps=48"]
    assert main(argv) == 0  # each trial ends after its third epoch (or at 0.15 minutes on a slow machine)
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["trials"]) == 2 and all(t["error"] is None for t in summary["trials"])
    for t in summary["trials"]:  # every trial is a run directory moozi reads like any other
        assert t["config"]["learner.learning_rate"] in (0.001, 0.01) and t["env_steps"] > 0
        assert (tmp_path / "sweep" / "trials").is_dir() and t["run_dir"] and (
            __import__("pathlib").Path(t["run_dir"]) / "config.yaml").exists()
    assert "| trial | learner.learning_rate |" in (out / "summary.md").read_text()
    assert main(argv) == 2 and "finished sweep" in capsys.readouterr().err  # never overwrites a sweep


@pytest.mark.slow
@pytest.mark.extended  # CI: `moozi tune` in the two-trial sweep above; PBT's six chunks took 138 s of a 2-core CI run
def test_population_based_training_exploits_and_explores(tune_ready, tmp_path):
    out = tmp_path / "pbt"
    # Six chunks of 6 s: PBT ranks only trials that have tested, and on a loaded machine a trial's first chunk
    # or two can end before its first test (compiling counts); three chunks left no exploit in one CI-like run.
    argv = ["tune", "--preset", "cartpole", "--param", "learner.learning_rate=loguniform(1e-4, 1e-2)",
            "--scheduler", "pbt", "--trials", "2", "--minutes", "0.6", "--chunk-minutes", "0.1", "--out", str(out),
            "--cpus", "2", *TINY, "schedule.max_env_steps=100000"]
    assert main(argv) == 0
    exploits = [json.loads(line) for line in (out / "pbt.jsonl").read_text().splitlines()]
    assert exploits and all(e["exploited"] != e["trial"] for e in exploits)
    me = out / "trials" / exploits[0]["trial"]
    assert list((me / "checkpoints" / "replaced").glob("*/step_*"))  # its own checkpoints set aside, not lost
    assert "learner" in (me / "config.yaml").read_text()
