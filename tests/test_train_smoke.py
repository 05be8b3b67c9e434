"""Smoke tests: every preset builds (config, game, model shapes), and trains for a few updates with tiny
settings through the CLI: in CI one preset per acting path and kind of game, the others (more games of the
same bridges, MinAtar, Atari) in the extended tier (``make test-all``; each costs 40-90 s of compiling on a
slow 2-core machine)."""

import json

import jax
import pytest

from moozi.cli import main
from moozi.observe.metrics import read_metrics
from moozi.presets import preset_names
from tests.helpers import TINY

PRESETS = [
    "2048", "asterix", "asterix-gpu", "atari-pong", "breakout", "breakout-gpu", "cartpole", "connect4", "connect4-az",
    "connect4-gpu", "freeway", "freeway-az", "freeway-gpu", "minatar-breakout",
    "openspiel-breakthrough5", "openspiel-connect4", "openspiel-ewn", "openspiel-go9", "openspiel-tictactoe", "space_invaders",
    "space_invaders-gpu", "thesis-minatar",
    "thesis-minatar-repo",
    "tictactoe",
]
# Trained in CI: one per acting path and kind of game (device: gymnax single-player, pgx two-player; host:
# OpenSpiel), and AlphaZero mode on a single-player game (rewards inside the true-model tree); the other
# bridges differ from these only below the step contract, which the conformance suite checks in CI for every game;
# Stochastic MuZero on each acting path (2048 on the device, Einstein wurfelt nicht on the host).
TRAINED_IN_CI = {"2048", "cartpole", "freeway-az", "openspiel-ewn", "openspiel-tictactoe", "tictactoe"}


def test_every_preset_is_covered():
    assert sorted(preset_names()) == PRESETS


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_builds_its_game_and_model(preset):
    """The preset as shipped (no overrides): a valid config, a game that builds, and a model whose
    parameters initialise for that game's observations (shapes traced, nothing compiled)."""
    from moozi.config import config_from_dict
    from moozi.parts import build_parts
    from moozi.presets import load_preset

    config = config_from_dict(load_preset(preset))
    env, model = build_parts(config)
    params = jax.eval_shape(model.init, jax.random.key(0))
    assert jax.tree_util.tree_leaves(params)
    assert env.spec.num_actions >= 2 and len(model.observation_shape) == 3
    if hasattr(env, "close"):
        env.close()


@pytest.mark.parametrize("preset", [p if p in TRAINED_IN_CI else pytest.param(p, marks=pytest.mark.extended)
                                    for p in PRESETS])
def test_preset_trains_a_few_updates(preset, tmp_path, capsys):
    run = tmp_path / preset
    assert main(["train", "--preset", preset, "--run-dir", str(run), "--seed", "1", *TINY]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["env_steps"] == 64 and summary["updates"] > 0
    # every run says how big it is: parameters by part in the summary and train.log, memory estimated and measured
    p, m = summary["parameters"], summary["memory_mb"]
    assert p["total"] == sum(v for k, v in p.items() if k != "total") and {"representation", "dynamics"} <= set(p)
    assert abs(m["estimate"] - m["learner_state"] - m["replay"]) < 0.11 and m["measured"] > 0
    assert f"network: {p['total']:,} parameters (representation {p['representation']:,}" in (
        run / "train.log").read_text()
    # and what it did with the machine: search simulations per second and the replay ratio (no GPU here)
    from moozi.driver.ledger import fed_positions, simulations
    from moozi.run_dir import load_run_config

    cfg = load_run_config(run)
    assert summary["simulations_per_s"] == pytest.approx(simulations(summary, cfg) / summary["wall_s"])
    assert simulations(summary, cfg) >= 64 * 2  # every acted env step searched with 2 simulations
    assert summary["replay_ratio"] == pytest.approx(summary["updates"] * 8 / fed_positions(summary, cfg))
    assert summary["device_busy_fraction"] is None and summary["peak_device_memory_bytes"] is None  # a CPU
    rows = read_metrics(run)
    assert any(row.get("perf/simulations_per_s", 0) > 0 for row in rows)
    assert rows and all({"env_steps", "updates", "wall_s"} <= row.keys() for row in rows)
    assert any("test/return_mean" in row for row in rows)
    assert any("loss/total" in row for row in rows)
    assert (run / "config.yaml").exists() and (run / "train.log").exists()
    assert list((run / "checkpoints").iterdir())
    if preset == "openspiel-ewn":  # Stochastic MuZero's search drawn: afterstates and chance outcomes (two players)
        capsys.readouterr()
        assert main(["tree", str(run), "--episode-step", "1", "--simulations", "8", "--out-dir", str(tmp_path)]) == 0
        tree = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        svg = open(tree["svg"]).read()
        assert tree["nodes"] > 3 and "afterstate" in svg and "chance " in svg
    assert list((run / "tb").iterdir())
