"""Judging single-player games: two agents on the same starting states, their paired difference."""

from __future__ import annotations

import json

import numpy as np
import pytest

from moozi.cli.main import main
from moozi.config import ConfigError
from moozi.eval import single
from moozi.eval.single import paired_difference, paired_returns


def test_paired_difference_golden():
    d = paired_difference(np.array([3.0, 1.0, 2.0, 5.0]), np.array([1.0, 1.0, 0.0, 4.0]))
    assert d["value"] == pytest.approx(1.25) and (d["better"], d["worse"], d["ties"]) == (3, 0, 1)
    assert d["p_value"] == pytest.approx(0.25)  # 3 against 0: 2 / 2^3
    assert d["low"] <= 1.25 <= d["high"] and 0.0 <= d["low"] and d["high"] <= 2.0  # within the differences' range
    same = paired_difference(np.array([4.0, 7.0]), np.array([4.0, 7.0]))
    assert (same["value"], same["low"], same["high"], same["p_value"], same["ties"]) == (0.0, 0.0, 0.0, 1.0, 2)


def test_both_agents_start_every_game_alike(monkeypatch):
    """The same agent twice on the same seed plays the same games, across chunks (here of 4), random moves
    included (half its moves); another seed plays others."""
    monkeypatch.setattr(single, "CHUNK", 4)
    weak = "zoo:cartpole-v1,sims=1,eps=0.5"
    first, spec, env = paired_returns(weak, 6, seed=3)
    again, _, _ = paired_returns(weak, 6, seed=3)
    assert first.shape == (6,) and np.array_equal(first, again) and env.name == "gymnax:CartPole-v1"
    assert len(set(first.tolist())) > 1  # the games differ from each other
    assert spec["settings"] == {"eps": 0.5, "sims": 1} and spec["id"].endswith(",eps=0.5,sims=1")
    other, _, _ = paired_returns(weak, 6, seed=4)
    assert not np.array_equal(first, other)


def test_match_on_a_single_player_game(tmp_path, capsys):
    records = tmp_path / "m.jsonl"
    assert main(["match", "zoo:cartpole-v1", "zoo:cartpole-v1,sims=1", "--games", "6", "--records", str(records),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    d = out["paired_difference"]
    assert out["games"] == 6 and {"value", "low", "high", "p_value"} <= set(d) and d["low"] <= d["value"] <= d["high"]
    assert out["a_return"]["mean"] - out["b_return"]["mean"] == pytest.approx(d["value"])
    lines = [json.loads(x) for x in records.read_text().splitlines()]
    assert len(lines) == 7 and lines[0]["a"]["id"] == out["a"]["id"]
    assert sum(x["a"] - x["b"] for x in lines[1:]) / 6 == pytest.approx(d["value"])
    assert main(["match", "zoo:cartpole-v1", "zoo:cartpole-v1,sims=1", "--games", "2", "--gate", "fixed"]) == 0
    assert "gate (paired): A" in capsys.readouterr().out
    assert main(["match", "zoo:cartpole-v1", "os-mcts-10", "--games", "2"]) == 2
    assert "a single-player game is judged between trained agents" in capsys.readouterr().err
    assert main(["match", "zoo:cartpole-v1", "zoo:cartpole-v1", "--games", "2", "--gate", "sprt"]) == 2
    assert "give --gate fixed" in capsys.readouterr().err
    assert main(["match", "zoo:connect4-v1", "random", "--games", "4"]) == 2
    assert "give --pairs" in capsys.readouterr().err


def test_a_player_of_another_game_is_refused():
    with pytest.raises(ConfigError, match="was trained on gymnax:CartPole-v1, not gymnax:Freeway-MinAtar"):
        paired_returns("zoo:cartpole-v1", 2, 0, game="gymnax:Freeway-MinAtar")


def test_gating_tournaments_and_play_best_on_a_single_player_game(tmp_path, capsys):
    """gating.every_checkpoints on CartPole: the newest checkpoint against best on paired games (2 x max_pairs),
    best follows the accepted ones, and acting.play_best plays it; a sequential gate is refused by name.
    tournament.every_checkpoints: the newest against earlier checkpoints on paired games, rated by return."""
    from moozi.checkpoint import list_checkpoints
    from tests.helpers import TINY

    run = tmp_path / "cp"
    argv = ["train", "--preset", "cartpole", "--run-dir", str(run), *TINY, "output.checkpoint_every_minutes=0.0001",
            "gating.every_checkpoints=1", "gating.method=fixed", "gating.max_pairs=2", "gating.max_share=0.9",
            "acting.play_best=true", "tournament.every_checkpoints=1", "tournament.anchors=[]", "tournament.pairs=2",
            "tournament.max_share=0.9"]
    assert main(argv) == 0
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    rated = [r for r in rows if "rating/latest" in r]
    assert rated and all(r["rating/latest_low"] <= r["rating/latest"] <= r["rating/latest_high"] for r in rated)
    assert any("rating/score_vs/previous_1" in r for r in rated)
    gated = [r for r in rows if "gate/accepted" in r]
    assert gated and all(r["gate/games"] == 4 and "gate/difference" in r for r in gated)
    assert list_checkpoints(run / "checkpoints" / "best") and list((run / "gating").glob("*-vs-*.jsonl"))
    accepted = [r for r in gated if r["gate/accepted"] == 1.0]
    assert all(r["gate/difference_low"] > 0 for r in accepted)
    capsys.readouterr()
    assert main(["train", "--preset", "cartpole", "--run-dir", str(tmp_path / "x"), *TINY,
                 "gating.every_checkpoints=1"]) == 2
    assert "gating.method = 'sprt': gymnax:CartPole-v1 is single-player" in capsys.readouterr().err


def test_single_player_agents_ranked_by_return(tmp_path, capsys):
    """`moozi match --pool` on a single-player game keeps each agent's return per starting state; `moozi ratings`
    ranks the agents by mean return, each with the paired difference against the leader (a start played twice
    counts once)."""
    pool = tmp_path / "pool.jsonl"
    strong, weak = "zoo:cartpole-v1", "zoo:cartpole-v1,sims=1,eps=0.5"
    for _ in range(2):
        assert main(["match", strong, weak, "--games", "4", "--pool", str(pool), "--records",
                     str(tmp_path / "m.jsonl")]) == 0
    capsys.readouterr()
    assert main(["ratings", str(pool), "--json"]) == 0
    table = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    first, second = table["players"]
    assert table["single_player"] and first["games"] == second["games"] == 4
    assert first["return"] == 500.0 and second["return"] < 500.0 and "vs_leader" not in first
    v = second["vs_leader"]
    assert v["games"] == 4 and v["value"] == pytest.approx(second["return"] - 500.0) and v["low"] <= v["value"]
    assert main(["ratings", str(pool)]) == 0
    assert "single-player agents by mean return" in capsys.readouterr().out
