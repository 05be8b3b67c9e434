"""Connect four against perfect play: solved-score arithmetic (golden), the packaged benchmark, grading and `moozi grade`."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from moozi.cli.main import main
from moozi.config import ConfigError
from moozi.eval.grade import CATEGORIES, STAGES, Position, category_of, grade_actions, load_positions, paired_grades, select
from moozi.eval.solver import is_mistake, remaining_plies, result
from moozi.eval.stats import sign_test


def test_remaining_plies_golden():
    # The empty board scores 1 for the first player: it wins with its 21st stone, the 41st ply.
    assert remaining_plies(1, 0) == 41
    # 10 plies played, the side to move (5 stones) wins now with its 6th stone: score 22 - 6 = 16, one ply left.
    assert remaining_plies(16, 10) == 1
    # 11 plies, the side to move has 5 stones and wins with its 7th: score 15; its 6th, the reply, its 7th.
    assert remaining_plies(15, 11) == 3
    # 10 plies, the opponent (5 stones) wins with its 6th stone right after our move: score -16, two plies.
    assert remaining_plies(-16, 10) == 2
    assert remaining_plies(0, 30) == 12  # a draw fills the board


def test_categories_and_mistakes_golden():
    assert category_of(14, 28) == "begin-hard" and category_of(15, 13) == "middle-easy"
    assert category_of(28, 14) == "middle-medium" and category_of(29, 13) == "end-easy"
    assert category_of(20, 28) is None and category_of(0, 41) is None  # middle-hard cannot exist; no empty board
    scores = (3, 0, -2, None, 0, -1, 5)  # win, draw, loss, full, ...
    assert result(3) == 1 and result(0) == 0 and result(-2) == -1
    assert [is_mistake(scores, a) for a in range(7)] == [False, True, True, True, True, True, False]
    assert not is_mistake((0, 0, -1, -1, -1, -1, -1), 1) and is_mistake((0, 0, -1, -1, -1, -1, -1), 2)
    assert not is_mistake((-3, -1, -5, -1, -1, -1, -1), 0)  # every move loses: losing sooner is no mistake
    assert Position("begin-easy", (3,), (-3, -1, -5, -1, -1, -1, -1)).decisive is False


def test_grade_actions_golden():
    ps = [Position("begin-easy", (3,), (1, -1, 0, 0, 0, 0, 0)), Position("begin-easy", (2,), (0,) * 7),
          Position("end-easy", (1,) * 30, (-1, -1, 2, None, -1, -1, -1)), Position("begin-hard", (0,), (0,) * 7)]
    g = grade_actions(ps, [1, 5, 3, 0])  # a win given up; no mistake possible; a full column; fine
    assert g["begin-easy"]["mistakes"] == 1 and g["begin-easy"]["positions"] == 2 and g["begin-easy"]["decisive"] == 1
    assert g["end-easy"]["rate"] == 1.0 and g["begin-hard"]["rate"] == 0.0
    assert g["begin"]["positions"] == 3 and g["begin"]["mistakes"] == 1
    assert g["all"]["mistakes"] == 2 and g["all"]["decisive"] == 2
    assert 0.0 < g["all"]["low"] < 0.5 < g["all"]["high"] < 1.0  # Wilson interval around 2 / 4
    assert "middle" not in g and "end" not in g  # a stage of one category is that category


def test_paired_grades_golden():
    ps = [Position("begin-easy", (3,), (1, -1, 0, 0, 0, 0, 0)), Position("begin-easy", (2,), (1, -1, 0, 0, 0, 0, 0)),
          Position("end-easy", (1,) * 30, (-1, -1, 2, None, -1, -1, -1)), Position("begin-hard", (0,), (1, -1, 0, 0, 0, 0, 0))]
    # A errs at positions 0 and 2, B at 2 and 3: A only 1, B only 1 (position 2 is both's)
    p = paired_grades(ps, [1, 0, 0, 0], [0, 0, 0, 1])
    assert p["all"] == {"a_only": 1, "b_only": 1, "difference": 0.0, "p_value": 1.0}
    assert p["begin-easy"]["a_only"] == 1 and p["begin-easy"]["difference"] == 0.5 and p["begin-hard"]["b_only"] == 1
    assert p["end-easy"] == {"a_only": 0, "b_only": 0, "difference": 0.0, "p_value": 1.0}
    # the exact sign test: 6 against 0 is 2 / 2^6; 3 against 1 is 2 * 5 / 16
    assert sign_test(6, 0) == pytest.approx(0.03125) and sign_test(3, 1) == pytest.approx(0.625)
    assert sign_test(0, 0) == 1.0


def test_packaged_benchmark():
    header, positions = load_positions()
    assert header["version"] == 1 and len(positions) == 6000
    for c in CATEGORIES:
        mine = [p for p in positions if p.category == c]
        assert len(mine) == 1000
        lo, hi = STAGES[c.split("-")[0]]
        for p in mine[:50]:
            best = max(s for s in p.scores if s is not None)
            assert lo <= len(p.moves) <= hi and category_of(len(p.moves), remaining_plies(best, len(p.moves))) == c
    assert len({p.moves for p in positions}) == 6000  # distinct
    assert [p.category for p in select(positions, 2, ["end-easy", "begin-hard"])] == ["end-easy"] * 2 + ["begin-hard"] * 2
    with pytest.raises(ConfigError, match="begin-hardest"):
        select(positions, 2, ["begin-hardest"])


def test_packaged_scores_are_the_solvers():
    pytest.importorskip("bitbully")
    from moozi.eval.solver import make_solver, move_scores

    engine = make_solver()
    _, positions = load_positions()
    for p in select(positions, 3):
        assert tuple(move_scores(engine, p.moves)) == p.scores


@pytest.fixture(scope="module")
def c4_pool():
    from moozi.envs.pool import make_pool

    pool = make_pool("pgx:connect_four", 8, seed=0)
    yield pool
    pool.close()


def test_play_positions_replays_each_position(c4_pool):
    from moozi.eval.grade import play_positions

    _, positions = load_positions()
    chosen = select(positions, 6, ["begin-easy", "end-easy"])

    class Recorder:
        """Plays the first legal column and records the game it saw through observe."""

        def reset(self, ts):
            self.moves = [[] for _ in range(len(ts.is_first))]

        def observe(self, ts, actions):
            for b in range(len(actions)):
                self.moves[b].append(int(actions[b]))

        def act(self, ts, movers):
            self.seen = [tuple(m) for m, go in zip(self.moves, movers) if go]
            return np.argmax(np.asarray(ts.legal_actions), axis=-1)

    seen = []
    player = Recorder()
    orig = player.act

    def act(ts, movers):
        out = orig(ts, movers)
        seen.extend(player.seen)
        return out

    player.act = act
    actions = play_positions(player, c4_pool, chosen)
    assert sorted(seen) == sorted(p.moves for p in chosen)  # every position asked once, after its own moves
    for p, a in zip(chosen, actions):
        assert a == next(c for c, s in enumerate(p.scores) if s is not None)


def test_solver_player_never_errs(c4_pool):
    pytest.importorskip("bitbully")
    from moozi.eval.grade import play_positions
    from moozi.eval.players import make_player

    _, positions = load_positions()
    chosen = select(positions, 4)
    for text in ("solver", "solver,result=1"):
        player = make_player(text, "pgx:connect_four", seed=1)
        g = grade_actions(chosen, play_positions(player, c4_pool, chosen))
        assert g["all"]["mistakes"] == 0 and g["all"]["decisive"] > 0
    with pytest.raises(ConfigError, match="connect four"):
        make_player("solver", "pgx:tic_tac_toe")


def test_grade_cli(tmp_path, capsys):
    assert main(["grade", "random", "--per-category", "4", "--categories", "begin-hard,end-easy", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["game"] == "pgx:connect_four" and out["player"]["id"] == "random"
    assert out["categories"]["all"]["positions"] == 8 and set(out["categories"]) == {"begin-hard", "end-easy", "all"}
    assert main(["grade", "random", "--per-category", "2"]) == 0
    assert "begin-hard" in capsys.readouterr().out
    # --vs: a second player on the same positions, compared position by position
    assert main(["grade", "random", "--vs", "random,eps=1", "--per-category", "3", "--seed", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    v, a = out["vs"], out["categories"]
    assert v["player"]["id"] == "random,eps=1.0" and v["categories"]["all"]["positions"] == 18
    for name, p in v["paired"].items():
        assert p["a_only"] - p["b_only"] == a[name]["mistakes"] - v["categories"][name]["mistakes"]
        assert 0.0 <= p["p_value"] <= 1.0
    assert main(["grade", "random", "--vs", "random", "--per-category", "2"]) == 0
    assert "on the same positions" in capsys.readouterr().out
    assert main(["grade", "random", "--categories", "begin-hardest"]) == 2
    assert "begin-hardest" in capsys.readouterr().err
    assert main(["grade", "random", "--game", "pgx:tic_tac_toe"]) == 2
    assert main(["grade"]) == 2
    bad = tmp_path / "bad.jsonl.gz"
    with gzip.open(bad, "wt") as f:
        f.write(json.dumps({"format": "other"}) + "\n")
    assert main(["grade", "random", "--positions", str(bad)]) == 2
    assert "not a position benchmark" in capsys.readouterr().err


def test_make_positions_cli(tmp_path, capsys):
    pytest.importorskip("bitbully")
    path = tmp_path / "mine.jsonl.gz"
    assert main(["grade", "--make-positions", str(path), "--per-category", "2", "--seed", "3"]) == 0
    header, positions = load_positions(path)
    assert header["seed"] == 3 and [p.category for p in positions] == [c for c in CATEGORIES for _ in range(2)]
    assert main(["grade", "solver", "--positions", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["categories"]["all"]["mistakes"] == 0 and out["categories"]["all"]["positions"] == 12


def test_grading_keeps_best_and_self_play_uses_it(tmp_path, capsys):
    """grading.every_checkpoints grades each checkpoint (grade/* rows with the counters); keep_best keeps the fewest
    mistakes (ties: the newer) as checkpoints/best; acting.play_best makes training workers act with those params."""
    from moozi.checkpoint import list_checkpoints, load_checkpoint
    from moozi.config import apply_overrides, config_from_dict
    from moozi.driver import Trainer
    from moozi.driver.rows import Gathered
    from moozi.driver.sync_schedule import SyncSchedule
    from moozi.observe.metrics import read_metrics
    from moozi.presets import load_preset
    from tests.helpers import TINY

    # Bounded by env steps, not wall clock (a slow CPU once spent 0.4 minutes on one epoch): episodes of 12 steps
    # end in epoch 3 of 5, so updates follow; a checkpoint (and a grade) after nearly every epoch.
    overrides = TINY + ["schedule.max_env_steps=80", "output.checkpoint_every_minutes=0.0001",
                        "grading.every_checkpoints=1", "grading.per_category=2", "grading.keep_best=true",
                        "grading.max_share=0.9", "acting.play_best=true",
                        "model.channels=8", "model.repr_blocks=1", "model.dyn_blocks=1"]  # the subject is grading
    config = config_from_dict(apply_overrides(load_preset("connect4"), overrides))
    trainer = Trainer(config, tmp_path / "c4")
    try:
        trainer.run()
        graded = [r for r in read_metrics(tmp_path / "c4") if "grade/all" in r]
        assert graded and all(0.0 <= r["grade/all"] <= 1.0 and "env_steps" in r and "wall_s" in r for r in graded)
        assert {"grade/begin", "grade/middle", "grade/end-easy", "grade/begin-hard"} <= set(graded[0])
        fewest = min(r["grade/all"] for r in graded)
        best = list_checkpoints(tmp_path / "c4" / "checkpoints" / "best")
        meta = load_checkpoint(best[-1].path, parts=[])[1]
        assert meta["gate"]["decision"] == "graded" and meta["gate"]["mistake_rate"] == fewest
        assert best[-1].step == max(int(r["updates"]) for r in graded if r["grade/all"] == fewest)
        # Self-play acts with best's params, not the newest.
        best_params = trainer.backend.get(trainer.learner_client.best)
        assert trainer.ctx.acting_params() is trainer.learner_client.best
        SyncSchedule(trainer.ctx).epoch(Gathered())
        assert trainer.actor.version == best_params["version"] != trainer.learner.version
    finally:
        trainer.close()
    assert main(["report", str(tmp_path / "c4"), "--out", str(tmp_path / "report.html")]) == 0
    assert "alt='Mistakes against perfect play (grade)'" in (tmp_path / "report.html").read_text()
    run = str(tmp_path / "ttt")
    assert main(["train", "--preset", "tictactoe", "--run-dir", run, "grading.every_checkpoints=1"]) == 2
    assert "grades connect four" in capsys.readouterr().err
    assert main(["train", "--preset", "tictactoe", "--run-dir", run, "acting.play_best=true"]) == 2
    assert "nothing chooses it by strength" in capsys.readouterr().err
    assert main(["train", "--preset", "connect4", "--run-dir", run, "gating.every_checkpoints=1",
                 "grading.every_checkpoints=1", "grading.keep_best=true"]) == 2
    assert "both would choose" in capsys.readouterr().err
