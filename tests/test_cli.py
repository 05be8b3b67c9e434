"""Smoke tests of every CLI command."""

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
    """`make demo`'s command, on a tiny budget (the default trains CartPole for two minutes)."""
    from tests.test_train_smoke import TINY

    run = tmp_path / "demo"
    assert main(["demo", "--minutes", "1", "--episodes", "2", "--max-frames", "20", "--run-dir", str(run),
                 *TINY]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    assert "What it learned: the agent keeps the pole up for" in out and "over 2 episodes" in out
    for name in ("report.html", "demo.gif", "config.yaml", "metrics.jsonl"):
        assert (run / name).exists(), name
    assert f"run directory: {run}" in out and str(run / "demo.gif") in out


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
