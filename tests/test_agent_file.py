"""Agent files (``moozi export``): one file that plays wherever a run does, checked before anything is decoded."""

from __future__ import annotations

import json

import pytest

from moozi.cli import main

TINY = ["env.num_envs=2", "acting.steps_per_epoch=4", "schedule.batch_size=8", "schedule.min_replay_steps=1",
        "schedule.max_env_steps=48", "testing.every=2", "testing.episodes=2", "testing.envs=2",
        "planner.num_simulations=2", "test_planner.num_simulations=2", "model.kind=mlp", "model.mlp_hidden=[8]",
        "model.mlp_embedding=8", "model.head_hidden=8", "model.support_size=2"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A tiny tic-tac-toe run and its agent file."""
    tmp = tmp_path_factory.mktemp("agent")
    run = tmp / "run"
    assert main(["train", "--preset", "tictactoe", "--run-dir", str(run), *TINY]) == 0
    agent = tmp / "ttt.moozi"
    assert main(["export", str(run), "--to", str(tmp / "ttt"), "--note", "tiny test agent"]) == 0
    return run, agent


def test_an_agent_file_plays_as_its_run_does(exported, capsys):
    """``moozi eval`` of the file and of the run: the same games, the same numbers; the card says where the file
    came from; the file is small (the params zlib-compressed)."""
    from moozi.agent_file import read_agent

    run, agent = exported
    capsys.readouterr()
    outs = []
    for source in (run, agent):
        assert main(["eval", str(source), "--games", "6", "--opponent", "random", "--seed", "3"]) == 0
        outs.append(json.loads(capsys.readouterr().out.strip().splitlines()[-1]))
    keys = ("wins", "draws", "losses", "updates", "env_steps", "simulations")
    assert {k: outs[0][k] for k in keys} == {k: outs[1][k] for k in keys}
    header, _ = read_agent(agent)
    assert header["card"]["game"] == "pgx:tic_tac_toe" and header["card"]["note"] == "tiny test agent"
    assert header["card"]["updates"] == outs[0]["updates"] and header["card"]["run"] == str(run)
    assert agent.stat().st_size < 200_000


def test_an_agent_file_is_a_player_and_keeps_its_runs_identity(exported):
    from moozi.eval.players import make_player
    from moozi.run_dir import run_identity

    run, agent = exported
    player = make_player(str(agent), "pgx:tic_tac_toe")
    assert player.spec.updates > 0 and run_identity(agent) == run_identity(run)


@pytest.mark.parametrize("damage", ["truncate", "flip", "not-an-agent", "checkpoint"])
def test_a_damaged_agent_file_is_one_line_and_exit_2(damage, exported, tmp_path, capsys):
    _, agent = exported
    data = bytearray(agent.read_bytes())
    bad = tmp_path / "bad.moozi"
    args = ["eval", str(bad), "--games", "2"]
    if damage == "truncate":
        bad.write_bytes(bytes(data[: len(data) // 2]))
        words = "truncated or corrupt"
    elif damage == "flip":
        data[-50] ^= 0xFF
        bad.write_bytes(bytes(data))
        words = "do not match the size and sha256"
    elif damage == "not-an-agent":
        bad.write_text("hello\n")
        words = "not a moozi agent file"
    else:
        bad.write_bytes(bytes(data))
        args += ["--checkpoint", "best"]
        words = "holds one set of params"
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and "Traceback" not in err[0], err
