"""Smoke tests of every CLI command."""

import re
import subprocess
import sys

import pytest

from moozi.cli import main


def test_demo_search_prints_moves_and_values(capsys):
    assert main(["demo", "--search", "--simulations", "16"]) == 0
    out = capsys.readouterr().out
    assert "root value" in out and "puct" in out and "gumbel" in out


def test_demo_rejects_bad_simulations(capsys):
    assert main(["demo", "--search", "--simulations", "0"]) == 2
    assert "--simulations" in capsys.readouterr().err


def test_demo_trains_evaluates_and_says_what_it_learned(tmp_path, capsys):
    """`make demo`'s command, on a tiny budget in env steps (the default trains CartPole for 300,000)."""
    import yaml

    from tests.helpers import TINY

    run = tmp_path / "demo"
    assert main(["demo", "--env-steps", "200", "--episodes", "2", "--max-frames", "20", "--run-dir", str(run),
                 *TINY]) == 0  # TINY's own schedule.max_env_steps=64 gives way to --env-steps
    out = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    assert "trained for 200 environment steps" in out
    assert "What it learned: the agent keeps the pole up for" in out and "over 2 episodes" in out
    for name in ("report.html", "demo.gif", "config.yaml", "metrics.jsonl"):
        assert (run / name).exists(), name
    assert f"run directory: {run}" in out and str(run / "demo.gif") in out
    assert yaml.safe_load((run / "config.yaml").read_text())["schedule"]["max_env_steps"] == 200
    env_steps = int(re.search(r"trained \d+ s: ([\d,]+) environment steps", out).group(1).replace(",", ""))
    assert 200 <= env_steps < 200 + 16  # the epoch that crosses the budget ends the run (4 envs x 4 steps)


def test_demo_budget_is_env_steps_unless_minutes_are_given():
    from argparse import Namespace

    from moozi.cli.demo import DEMO_ENV_STEPS, _budget

    def budget(env_steps=None, minutes=None, overrides=()):
        return _budget(Namespace(env_steps=env_steps, minutes=minutes, overrides=list(overrides)))

    assert budget() == (DEMO_ENV_STEPS, None, None)
    assert budget(minutes=2.0) == (None, 2.0, None)
    assert budget(5000, 2.0) == (5000, 2.0, None)
    assert budget(overrides=["schedule.max_env_steps=7000", "schedule.seed=1"]) == (7000, None, None)  # what is said
    assert budget(5000, overrides=["schedule.max_env_steps=7000"]) == (5000, None, None)  # the flag wins
    assert "--env-steps" in budget(0)[2] and "--minutes" in budget(minutes=0.0)[2]


@pytest.mark.parametrize("flag", [["--env-steps", "-5"], ["--minutes", "0"], ["--episodes", "0"]])
def test_demo_rejects_a_bad_budget_before_training(flag, tmp_path, capsys):
    assert main(["demo", "--run-dir", str(tmp_path / "demo"), *flag]) == 2
    assert flag[0] in capsys.readouterr().out
    assert not (tmp_path / "demo").exists()


def test_unknown_command_is_a_usage_error():
    with pytest.raises(SystemExit) as err:
        main(["fly"])
    assert err.value.code == 2


def test_console_script_help():
    out = subprocess.run([sys.executable, "-m", "moozi.cli", "--help"], capture_output=True, text=True, check=True)
    assert "demo" in out.stdout


def _commands() -> list[str]:
    import argparse

    from moozi.cli.parser import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


def test_the_command_list_is_complete():
    assert {"demo", "train", "eval", "match", "grade", "tune", "gtp", "play", "ratings", "sweep", "watch", "tree", "embed", "report",
            "presets", "envs"} <= set(_commands())


@pytest.mark.parametrize("command", _commands())
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as err:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert err.value.code == 0 and f"usage: moozi {command}" in out and "``" not in out


def test_presets_lists_each_with_its_game_and_shows_one_in_full(capsys):
    """`moozi presets`: a line per packaged preset (name, game, header); `moozi presets NAME`: its header and every
    key with its base merged in; an unknown name: one line, exit 2; piped into a reader that stops early: exit 0."""
    import json

    import yaml

    from moozi.presets import load_preset, preset_names

    assert main(["presets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(preset_names()) + 1
    row = next(line for line in lines if line.startswith("space_invaders-gpu "))
    assert row.split()[1] == "gymnax:SpaceInvaders-MinAtar" and "sized for one GPU" in row  # its game from its base
    assert main(["presets", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert set(listed) == set(preset_names()) and listed["tictactoe"]["game"] == "pgx:tic_tac_toe"
    assert main(["presets", "breakout-gpu"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# MinAtar Breakout sized for one GPU") and "docs/presets.md#breakout-gpu" in out
    shown = yaml.safe_load(out)
    assert shown == {k: v for k, v in load_preset("breakout-gpu").items() if k != "base"}
    assert shown["env"] == {"name": "gymnax:Breakout-MinAtar", "num_envs": 1024} and shown["model"]["channels"] == 16
    assert main(["presets", "nope"]) == 2 and "unknown preset 'nope'" in capsys.readouterr().err
    done = subprocess.run(["bash", "-c", f"{sys.executable} -m moozi.cli presets | true; echo ${{PIPESTATUS[0]}}"],
                          capture_output=True, text=True, env={**__import__("os").environ, "PYTHONUNBUFFERED": "1"})
    assert done.stdout.strip() == "0" and "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done
