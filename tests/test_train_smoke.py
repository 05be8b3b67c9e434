"""Smoke tests: every preset trains for a few updates with tiny settings, through the CLI."""

import json

import pytest

from moozi.cli import main
from moozi.observe.metrics import read_metrics
from moozi.presets import preset_names

TINY = [
    "env.num_envs=4",
    "env.kwargs.max_episode_steps=12",  # every game finishes episodes quickly
    "acting.steps_per_epoch=4",
    "schedule.batch_size=8",
    "schedule.samples_per_env_step=2",  # several updates even for presets with a low ratio
    "schedule.min_replay_steps=1",
    "testing.every=2",
    "testing.episodes=2",
    "testing.envs=2",
    "testing.steps_per_segment=13",
    "schedule.max_env_steps=64",
    "planner.num_simulations=2",
    "test_planner.num_simulations=2",
    "model.channels=4",
    "model.repr_blocks=1",
    "model.dyn_blocks=1",
    "model.head_hidden=8",
    "model.mlp_hidden=[8]",
    "model.mlp_embedding=8",
    "replay.capacity=2000",
]

PRESETS = [
    "asterix", "atari-pong", "breakout", "cartpole", "connect4", "freeway", "minatar-breakout",
    "openspiel-breakthrough5", "openspiel-connect4", "openspiel-tictactoe", "space_invaders", "tictactoe",
]


def test_every_preset_is_covered():
    assert sorted(preset_names()) == PRESETS


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_trains_a_few_updates(preset, tmp_path, capsys):
    run = tmp_path / preset
    assert main(["train", "--preset", preset, "--run-dir", str(run), "--seed", "1", *TINY]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["env_steps"] == 64 and summary["updates"] > 0
    rows = read_metrics(run)
    assert rows and all({"env_steps", "updates", "wall_s"} <= row.keys() for row in rows)
    assert any("test/return_mean" in row for row in rows)
    assert any("loss/total" in row for row in rows)
    assert (run / "config.yaml").exists() and (run / "train.log").exists()
    assert list((run / "checkpoints").iterdir())
    assert list((run / "tb").iterdir())
