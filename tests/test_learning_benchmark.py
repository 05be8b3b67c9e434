"""benchmarks/learning.py: its interval math (hand-computed) and a tiny two-seed run end to end."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))
import learning  # noqa: E402
from tests.helpers import TINY  # noqa: E402


def test_wilson_interval_golden():
    # z = 1.959964, z^2 = 3.841459. 0 of 100: centre = (z^2 / 200) / (1 + z^2 / 100) = 0.0184967 and the
    # half-width is the same -> [0, 0.036993]
    lo, hi = learning.wilson_interval(0, 100)  # the benchmark uses moozi.eval.stats's
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(0.036993, abs=2e-6)
    # 50 of 100: centre 0.5, half = z * sqrt(0.0025 + z^2 / 40000) / 1.0384146 = 0.096169
    lo, hi = learning.wilson_interval(50, 100)
    assert (lo, hi) == (pytest.approx(0.403831, abs=2e-6), pytest.approx(0.596169, abs=2e-6))
    assert learning.wilson_interval(0, 0) == (0.0, 1.0)  # nothing known


def test_mean_interval_golden():
    # mean 2, sample std 1, standard error 1 / sqrt(3) = 0.577350 -> +- 1.959964 * 0.577350 = 1.131586
    r = learning.mean_interval([1.0, 2.0, 3.0])
    assert r["mean"] == 2.0 and r["n"] == 3
    assert (r["low"], r["high"]) == (pytest.approx(0.868414, abs=2e-6), pytest.approx(3.131586, abs=2e-6))


@pytest.mark.extended
def test_two_seeds_end_to_end(tmp_path):
    out = tmp_path / "bench"
    assert learning.main(["--preset", "cartpole", "--seeds", "0", "1", "--target", "1", "--eval-games", "4",
                          "--out", str(out), "--load-every-s", "0.5", *TINY, "testing.best_window=1"]) == 0
    report = json.loads((out / "learning.json").read_text())
    assert [s["seed"] for s in report["per_seed"]] == [0, 1]
    for s in report["per_seed"]:
        assert s["first_at_target"] is not None  # every CartPole test lasts more than one step
        assert s["final_eval"]["games"] == 4 and s["final_eval"]["return"]["low"] <= s["final_eval"]["return"]["mean"]
        assert s["load_before"] >= 0 and s["env_steps"] == 64 and s["tests"] >= 1
        assert (out / f"seed-{s['seed']}" / "checkpoints").is_dir()
        assert "/best/" in s["best_eval"]["path"] and s["best_eval"]["games"] == 4
    assert report["overall"]["reached_target"] == 2 and report["two_player"] is False
    table = (out / "learning.md").read_text()
    assert "| 0 |" in table and "| 1 |" in table and "Reached the target in 2 of 2 seeds." in table
    assert f"Machine: {report['machine']['cpu']}" in table  # minutes mean little without the processor


@pytest.mark.extended  # the benchmark's statistics are checked above; its runs cost a minute each
def test_exact_tictactoe_column(tmp_path):
    out = tmp_path / "ttt"
    assert learning.main(["--preset", "tictactoe", "--seeds", "0", "--target", "0", "--eval-games", "4",
                          "--opponent", "perfect", "--exact-tictactoe", "--out", str(out), *TINY,
                          "testing.best_window=1"]) == 0
    report = json.loads((out / "learning.json").read_text())
    exact = report["per_seed"][0]["exact"]
    assert set(exact) == {"latest", "best"}
    for e in exact.values():  # a barely trained agent: exact probabilities, and it loses some lines
        assert 0.0 <= e["p_loss_first"] <= 1.0 and 0.0 <= e["p_loss_second"] <= 1.0
        assert (e["losing_lines_first"] + e["losing_lines_second"] > 0) == (e["p_loss_first"] + e["p_loss_second"] > 0)
    table = (out / "learning.md").read_text()
    assert "Exact P(loss) against the perfect player" in table
    assert f"Machine: {report['machine']['cpu']}" in table  # minutes mean little without the processor
