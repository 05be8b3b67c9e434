"""Long runs and the search budget (issue 44, items 2, 4 and 5): `moozi train --continue` across sittings, params
kept every N updates, `moozi eval --simulations` (and test randomness), `moozi sweep` over the kept checkpoints
and `moozi curves` (tiny CartPole runs)."""

import json

import pytest

from moozi.checkpoint import list_checkpoints
from moozi.cli import main
from moozi.eval.evaluate import mean_interval
from moozi.eval.sweep import cell, markdown
from moozi.observe.curves import mean_curve, references_for
from moozi.run_dir import find_checkpoint, kept_updates
from tests.helpers import TINY


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("sweep") / "cartpole"
    assert main(["train", "--preset", "cartpole", "--run-dir", str(run), *TINY, "schedule.max_env_steps=160",
                 "output.keep_every_updates=2",
                 "output.checkpoint_every_minutes=0.0001", "output.log_every_epochs=1", "output.keep_checkpoints=1"]) == 0
    return run


def test_params_are_kept_every_n_updates_and_never_pruned(kept_run):
    kept = [c.step for c in list_checkpoints(kept_run / "checkpoints" / "kept")]
    periodic = [c.step for c in list_checkpoints(kept_run / "checkpoints")]
    assert len(periodic) == 1 and len(kept) >= 2  # keep_checkpoints=1 pruned the rest; kept/ holds on
    assert [k // 2 for k in kept] == sorted(set(k // 2 for k in kept)) and kept[0] >= 2  # one per 2 updates
    assert set(kept) | set(periodic) <= set(kept_updates(kept_run))
    assert find_checkpoint(kept_run, str(kept[0])) == kept_run / "checkpoints" / "kept" / f"step_{kept[0]:09d}"


def test_eval_with_a_search_budget(kept_run, capsys):
    capsys.readouterr()
    assert main(["eval", str(kept_run), "--simulations", "1", "--games", "2"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["simulations"] == 1
    assert main(["eval", str(kept_run), "--simulations", "0"]) == 2


def test_eval_with_randomness(kept_run, capsys):
    """Test randomness reaches the games (every move random: both of CartPole's moves appear in 8 games of 12
    steps, all the same with probability 2^-95), the output reports it, and bad values are refused."""
    import numpy as np

    from moozi.eval.evaluate import TestSettings, play

    _, _, games, _ = play(kept_run, games=8, settings=TestSettings(random_move_prob=1.0))
    actions = np.concatenate([g.trajectory.actions[:-1] for g in games])  # the last step's is the dummy
    assert set(actions.tolist()) == {1, 2}  # augmented actions: 0 is the dummy
    capsys.readouterr()
    assert main(["eval", str(kept_run), "--games", "4", "--random-move-prob", "0.5", "--temperature", "0.5",
                 "--random-moves", "2"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (out["random_move_prob"], out["temperature"], out["random_moves"]) == (0.5, 0.5, 2)
    assert out["return_low"] <= out["return_mean"] <= out["return_high"] and out["distinct_returns"] >= 1
    for bad in (["--temperature", "-1"], ["--random-move-prob", "1.5"], ["--random-moves", "-2"]):
        assert main(["eval", str(kept_run), *bad]) == 2
        assert bad[0].lstrip("-").replace("-", "_") in capsys.readouterr().err


def test_eval_says_when_its_games_were_all_alike(monkeypatch, capsys):
    """Greedy play of a deterministic game (gymnax Breakout: two games, by the ball's starting side) gives an
    interval over a few repeated outcomes; `moozi eval` says so on stderr, and stays quiet otherwise."""
    import moozi.eval.evaluate as evaluate_module
    from moozi.eval.evaluate import few_outcomes_note

    alike = {"games": 64, "distinct_returns": 2, "return_mean": 84.0}
    assert "only 2 distinct returns in 64 games" in few_outcomes_note(alike)
    assert "only 1 distinct return in 8 games" in few_outcomes_note({"games": 8, "distinct_returns": 1})
    assert few_outcomes_note({"games": 64, "distinct_returns": 3}) is None
    assert few_outcomes_note({"games": 4, "distinct_returns": 1}) is None  # too few games to say
    assert few_outcomes_note({"games": 64, "wins": 64}) is None  # two-player results have no returns

    monkeypatch.setattr(evaluate_module, "evaluate", lambda *a, **k: dict(alike))
    capsys.readouterr()
    assert main(["eval", "some-run", "--games", "64"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip().splitlines()[-1]) == alike  # stdout stays one JSON line
    assert "--random-move-prob 0.01" in captured.err


def test_sweep_writes_a_table_and_a_plot(kept_run, capsys):
    capsys.readouterr()
    first = kept_updates(kept_run)[0]
    assert main(["sweep", str(kept_run), "--simulations", "1", "2", "--episodes", "2", "--checkpoints",
                 str(first), "--random-move-prob", "0.25"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["cells"] == 2 and out["plot"].endswith(".png")
    rows = [json.loads(line) for line in open(out["jsonl"])]
    assert [(r["updates"], r["simulations"]) for r in rows] == [(first, 1), (first, 2)]
    assert {r["random_move_prob"] for r in rows} == {0.25}
    assert "random_move_prob 0.25" in open(out["markdown"]).read()
    assert "| updates | env steps | 1 sim | 2 sims |" in open(out["markdown"]).read()
    assert main(["sweep", str(kept_run), "--checkpoints", "999999"]) == 2


def test_curves_draw_every_run(kept_run, tmp_path, capsys):
    capsys.readouterr()
    png = tmp_path / "curves.png"
    assert main(["curves", str(kept_run), str(kept_run), "--out", str(png), "--title", "tiny"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert png.stat().st_size > 1000 and out["png"] == str(png)
    (game, drawn), = out["games"].items()
    assert game == "gymnax:CartPole-v1" and len(drawn["runs"]) == 2 and drawn["references"] == {}
    assert drawn["seeds_of_one_recipe"]  # the same run twice: one recipe, so a mean is drawn
    assert main(["curves", str(tmp_path), "--out", str(png)]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_curve_means_and_references_golden():
    import numpy as np

    grid, mean = mean_curve([(np.array([0.0, 10.0]), np.array([0.0, 10.0])),
                             (np.array([0.0, 5.0, 20.0]), np.array([2.0, 2.0, 2.0]))], points=3)
    assert grid.tolist() == [0.0, 5.0, 10.0]  # up to where the shorter curve ends
    assert mean.tolist() == [1.0, 3.5, 6.0]  # (0 + 2) / 2, (5 + 2) / 2, (10 + 2) / 2
    assert mean_curve([(np.array([0.0, 1.0]), np.array([1.0, 1.0]))])[0].size == 0  # one curve: no mean
    refs = {r.label: r.value for r in references_for("gymnax:SpaceInvaders-MinAtar")}
    assert refs["gymnax PPO, 10M steps"] == 131.0 and max(refs.values()) == 300.0


def test_cells_golden():
    mean, low, high = mean_interval([8.0, 12.0, 10.0, 10.0])  # sample std sqrt(8 / 3): half 1.96 * 1.633 / 2
    assert (mean, high - mean) == pytest.approx((10.0, 1.96 * (8 / 3) ** 0.5 / 2))
    assert mean_interval([5.0, 5.0, 5.0]) == (5.0, 5.0, 5.0)  # one game repeated: no width to claim
    one = cell({"games": 4, "return_mean": mean, "return_low": low, "return_high": high})
    assert one == pytest.approx({"value": 10.0, "low": low, "high": high})
    two = cell({"wins": 1, "draws": 2, "losses": 1})  # scores 1, .5, .5, 0: mean .5, std sqrt(.125)
    assert two["value"] == 0.5 and two["high"] - 0.5 == pytest.approx(1.96 * 0.125 ** 0.5 / 2)
    assert cell({"score": {"value": 0.6, "low": 0.4, "high": 0.8}, "wins": 3, "draws": 0, "losses": 2}) == {
        "value": 0.6, "low": 0.4, "high": 0.8}
    table = markdown([{"updates": 4, "env_steps": 64, "simulations": 1, "value": 1.0, "low": 0.5, "high": 1.5}],
                     "test return")
    assert "| 4 | 64 | 1 [0.5, 1.5] |" in table


def test_continue_starts_then_goes_on_and_refuses_another_config(tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", "--preset", "cartpole", "--run-dir", str(run), "--continue", *TINY]
    assert main(argv) == 0  # nothing there yet: it starts
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(argv) == 0  # the same command again: the budget is spent, so it says so and trains nothing
    out, err = capsys.readouterr()
    assert f"{run} has reached its budget of 64 env steps; nothing to train" in err
    again = json.loads(out.strip().splitlines()[-1])
    assert {k: again[k] for k in first} == first  # the summary line of the run's end, read from its checkpoint
    assert len((run / "commands.txt").read_text().splitlines()) == 1  # nothing ran, nothing recorded
    assert main(argv + ["schedule.batch_size=16"]) == 2
    assert "schedule.batch_size: 8 there, 16 now" in capsys.readouterr().err
    assert main(["train", "--preset", "cartpole", "--run-dir", str(run), *TINY]) == 2  # without --continue
    assert "--continue" in capsys.readouterr().err


def test_where_a_long_run_stands():
    from moozi.cli.train import _where_it_stands

    class Rows:
        def __init__(self, rate, over_s):
            self.measured = rate, over_s

        def env_steps_per_s(self):
            return self.measured

    line = _where_it_stands("runs/si", {"env_steps": 1_000_000}, 10_000_000, Rows(100.0, 1200.0))
    assert line == ("runs/si is at 1,000,000 of 10,000,000 env steps (10%); about 25.0 h more at 100 env steps/s "
                    "(its last 20 minutes): run the same command again to go on")
    line = _where_it_stands("runs/si", {"env_steps": 1_000_000}, 10_000_000, Rows(500.0, 300.0))
    assert "about 5.0 h more at 500 env steps/s (this sitting's 5 minutes, compiling included)" in line
    assert "h more" not in _where_it_stands("runs/si", {"env_steps": 0}, 10, Rows(0.0, 0.0))
    assert _where_it_stands("runs/si", {"env_steps": 10}, 10, None) == "runs/si has reached its budget of 10 env steps"


def test_the_rate_a_long_run_estimates_from_is_its_recent_one():
    from moozi.driver.rows import _kept_marks, recent_rate

    # started at t=0 (compiling until 120 s), 300 steps/s while shared until 1800 s, 600 alone after
    marks = [(0.0, 0), (600.0, 144_000), (1200.0, 324_000), (1800.0, 504_000), (2400.0, 864_000)]
    now, steps = 2700.0, 1_044_000
    assert recent_rate(marks, now, steps, 900.0) == (600.0, 900.0)  # from the mark at 1800 s: 540,000 / 900 s
    assert recent_rate(marks, now, steps, 3000.0) == (steps / now, now)  # none that old: from the start
    assert recent_rate(marks[:1], 0.0, 0, 900.0) == (0.0, 0.0)
    assert _kept_marks(marks, now, 900.0) == marks[3:]  # the marks before 1800 s start no rate again
    assert _kept_marks(marks[:1], 100.0, 900.0) == marks[:1]
