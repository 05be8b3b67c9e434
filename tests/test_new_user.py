"""What a new user hit after training (issue 48), item by item, on the cheap paths: no training here (the
run-based checks live in tests/test_cli_train.py with its tiny tic-tac-toe run)."""

from __future__ import annotations

import html
import io
import json
import shutil
import sys
import textwrap

import pytest
import yaml

from moozi.cli import main
from moozi.cli.console import _Progress
from moozi.cli.main import parse_args
from moozi.config import ConfigError, config_from_dict, to_dict
from moozi.envs.notation import IllegalMove, parse_move, parse_position, split_moves
from moozi.eval.players import make_player
from moozi.eval.players.base import PlayerSpec
from moozi.eval.players.registry import run_of
from moozi.presets import load_preset
from moozi.run_dir import find_checkpoint, new_identity, run_identity


def _run_dir(path, preset="tictactoe"):
    """A run directory as far as the commands that read one look: its config."""
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(yaml.safe_dump(to_dict(config_from_dict(load_preset(preset)))))
    return path


def _no_traceback(err: str) -> None:
    assert "Traceback" not in err and "Error:" not in err.replace("configuration error:", ""), err


# --- 2. one network, one id ------------------------------------------------------------------


def test_a_run_keeps_its_identity_when_moved_and_however_its_path_is_typed(tmp_path, monkeypatch):
    run = _run_dir(tmp_path / "runs" / "ttt")
    run_id = new_identity(run)
    assert run_id.startswith("ttt-") and run_identity(run) == run_id
    monkeypatch.chdir(tmp_path / "runs")
    assert run_identity("ttt") == run_identity("./ttt/") == run_id
    shutil.move(str(run), str(tmp_path / "renamed"))
    assert run_identity(tmp_path / "renamed") == run_id
    old = _run_dir(tmp_path / "old")  # written before identities: named by its config, as stably
    assert run_identity(old) == run_identity(str(old) + "/") and run_identity(old).startswith("run-")


def test_a_player_id_names_the_run_and_its_player_string_builds_it_again():
    spec = PlayerSpec("mcts", (("sims", 64),), "runs/ttt", 348, "ttt-3fa2b1")
    assert spec.id == "mcts:ttt-3fa2b1@348,sims=64"
    assert spec.player == "runs/ttt@348,sims=64"
    assert PlayerSpec("prior", (), "../ttt", 348, "ttt-3fa2b1").player == "prior:../ttt@348"
    assert PlayerSpec("mcts-50").player == PlayerSpec("mcts-50").id == "mcts-50"
    assert run_of("mcts:runs/ttt@348") == ("mcts:", "runs/ttt@348")  # an id's form is a player string too


def test_the_update_count_best_resolves_to_is_a_checkpoint(tmp_path):
    run = _run_dir(tmp_path / "run")
    (run / "checkpoints" / "best" / "step_000000348").mkdir(parents=True)
    (run / "checkpoints" / "step_000000400").mkdir()
    assert find_checkpoint(run, "348") == run / "checkpoints" / "best" / "step_000000348"
    assert find_checkpoint(run, "400") == run / "checkpoints" / "step_000000400"
    with pytest.raises(Exception, match=r"\[348, 400\]"):
        find_checkpoint(run, "7")


# --- 3. numbers that are not numbers ------------------------------------------------------------


@pytest.mark.parametrize("text, named", [("random,eps=abc", "eps"), ("random,eps=2", "eps"),
                                         ("mcts-8,rollouts=0", "rollouts"), ("os-mcts-8,uct=-1", "uct")])
def test_a_bad_player_option_is_named(text, named):
    with pytest.raises(ConfigError, match=f"{named}=.* is not .*: allowed"):
        make_player(text, "pgx:tic_tac_toe")


def test_a_bad_run_option_fails_by_name_before_anything_is_built(tmp_path, capsys):
    run = _run_dir(tmp_path / "ttt")
    assert main(["match", f"{run},sims=abc", "random", "--pairs", "1"]) == 2
    err = capsys.readouterr().err
    assert "sims='abc' is not simulations per move: allowed an integer >= 1" in err
    _no_traceback(err)


def test_gtp_numbers_and_a_finished_game():
    from moozi.eval.gtp import GTPEngine

    engine = GTPEngine("random", "pgx:tic_tac_toe")
    try:
        assert engine.handle("time_left b abc 0").startswith("? time_left needs a colour, a time in seconds")
        assert engine.handle("time_left b 30 0") == "=\n\n"
        assert engine.handle("komi abc").startswith("? komi needs a number")
        assert engine.handle("komi -6.5") == "=\n\n"
        assert engine.handle("play b 99").startswith("? '99' is out of range: move indices are 0..8")
        for move in ("b x(0,0)", "w o(1,0)", "b x(0,1)", "w o(1,1)", "b x(0,2)"):
            assert engine.handle(f"play {move}") == "=\n\n", move
        assert engine.handle("genmove w") == "= pass\n\n"  # GTP's answer when the game is over
    finally:
        engine.session.close()


# --- 4. errors that say what is wrong ------------------------------------------------------------


@pytest.mark.parametrize("argv", [["match", "{nope}", "random"], ["play", "{nope}"], ["gtp", "{nope}"]])
def test_a_missing_run_is_named_as_such(argv, tmp_path, capsys):
    nope = str(tmp_path / "runs" / "nope")
    assert main([a.format(nope=nope) for a in argv]) == 2
    err = capsys.readouterr().err
    assert f"{nope} is not a run directory (no such folder)" in err and "--game" not in err
    _no_traceback(err)


def test_report_of_a_missing_run_writes_nothing(tmp_path, capsys):
    nope = tmp_path / "runs" / "nope"
    assert main(["report", str(nope)]) == 2
    assert "is not a moozi run directory" in capsys.readouterr().err
    assert not nope.exists() and not (tmp_path / "runs").exists()


def test_overrides_after_an_option_are_overrides():
    args = parse_args(["train", "--preset", "cartpole", "a.b=1", "--seed", "3", "schedule.min_replay_steps=300"])
    assert args.overrides == ["a.b=1", "schedule.min_replay_steps=300"] and args.seed == 3
    with pytest.raises(SystemExit):
        parse_args(["train", "--preset", "cartpole", "a.b=1", "--seed", "3", "stray"])


# --- 5. moves outside the board ----------------------------------------------------------------


def test_moves_out_of_range_are_refused_as_such():
    from moozi.envs.openspiel_bridge import openspiel_game

    state = openspiel_game("pgx:tic_tac_toe").new_initial_state()
    legal = list(range(9))
    for text in ("9", "100", "-1"):
        with pytest.raises(IllegalMove, match="out of range: move indices are 0..8"):
            parse_move(text, legal, state, 9)
    assert parse_move("x(1,1)", legal, state, 9) == 4 and parse_move("4", legal, state, 9) == 4


def test_a_position_in_the_games_notation():
    from moozi.envs.openspiel_bridge import openspiel_game

    twin = openspiel_game("pgx:tic_tac_toe")
    assert split_moves("x(1,1) o(0,0)") == ["x(1,1)", "o(0,0)"] and split_moves("4,0, 8") == ["4", "0", "8"]

    assert parse_position("x(1,1) o(0,0) 8", twin, 9) == [4, 0, 8]
    with pytest.raises(IllegalMove, match="move 2 of the position"):
        parse_position("4 4", twin, 9)
    assert parse_position("4 4", None, 9) == [4, 4]  # no twin: indices, checked when played


# --- 6 and 8. the console, with and without a terminal ---------------------------------------------


def test_the_console_says_what_it_does_not_know_yet(capsys):
    progress = _Progress("moozi train pgx:connect_four", 2.0, 0.0, tested_against="random player")
    assert progress.live is None  # pytest's stderr is no terminal: lines, not a live table
    progress({"env_steps": 4096, "updates": 24}, {"health/ok": 1.0, "health/tests": 0.0}, {})
    fields = dict(progress._fields())
    assert fields["health"] == "not judged yet (no test has run)"
    assert fields["last test return (vs random player)"] == "- (no test yet)"
    err = capsys.readouterr().err
    assert err.startswith("moozi: status training; env steps 4,096;") and err.endswith("\n")
    progress({"env_steps": 8192, "updates": 48}, {"health/ok": 1.0, "health/tests": 1.0}, {"test/return_mean": -1})
    assert capsys.readouterr().err == ""  # at most one line per LINE_EVERY_S
    assert dict(progress._fields())["health"] == "ok"


# --- 9. a game of one's own, away from its folder ----------------------------------------------------


NIM = '''
import numpy as np

from moozi.envs import EnvSpec, register
from moozi.envs.host import GameStep, HostEnv


class TakeAway(HostEnv):
    def __init__(self):
        self.spec = EnvSpec("takeaway:v0", (1, 1, 2), 2, num_players=2, path="host")

    def _step(self, reward=0.0):
        return GameStep(np.array([self.pile, self.player], np.float32), np.array([self.pile >= 1, self.pile >= 2]),
                        reward=reward, terminated=self.pile == 0, to_play=self.player)

    def reset(self, seed):
        self.pile, self.player = 5, 0
        return self._step()

    def step(self, action):
        self.pile -= action + 1
        self.player = 1 - self.player
        return self._step(reward=1.0 if self.pile == 0 else 0.0)

    def render(self):
        return "pile: " + "|" * self.pile


register("takeaway:v0", TakeAway, path="host", overwrite=True)
'''


def test_a_registered_game_of_ones_own_with_built_in_players(tmp_path, monkeypatch, capsys):
    from moozi.envs import unregister

    (tmp_path / "takeaway_game.py").write_text(textwrap.dedent(NIM))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert main(["play", "random", "--game", "takeaway:v0"]) == 2
        err = capsys.readouterr().err
        assert "needs --module MODULE" in err
        _no_traceback(err)
        monkeypatch.setattr("sys.stdin", io.StringIO("0\n0\nquit\n"))
        assert main(["play", "random", "--game", "takeaway:v0", "--module", "takeaway_game"]) == 0
        out = capsys.readouterr().out
        assert "pile: |||||" in out and "moves: (none)" in out  # the game's own drawing, then the moves
        assert main(["match", "random", "random", "--game", "takeaway:v0", "--module", "takeaway_game",
                     "--pairs", "1", "--opening-plies", "0", "--records", str(tmp_path / "m.jsonl"), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["games"] == 2
    finally:
        unregister("takeaway:v0")
        sys.modules.pop("takeaway_game", None)


# --- 10. the tree view -------------------------------------------------------------------------------


def test_the_tree_view_fits_its_text_and_explains_itself():
    from moozi.observe.tree import LEGEND, TreeNode, move_namer, to_svg

    nodes = [TreeNode(0, -1, 0, 0, 10, 0.1, 0.1, 1.0, 0.0, 0.0),
             TreeNode(1, 0, 5, 1, 6, -0.2, -0.2, 0.6, 0.0, 0.2, flags=("a very long flag that used to be clipped",)),
             TreeNode(2, 1, 1, 2, 3, 0.3, 0.3, 0.5, 0.0, -0.3)]
    from moozi.envs.openspiel_bridge import openspiel_game

    namer = move_namer(nodes, openspiel_game("pgx:tic_tac_toe"), [0])  # x took (0,0): o to move
    assert namer(nodes[1], 4) == "o(1,1)" and namer(nodes[2], 2) == "x(0,2)"  # below o(1,1): x to move
    svg = to_svg(nodes, "a title", namer, position_png=b"\x89PNG")
    assert all(html.escape(line) in svg for line in LEGEND) and "o(1,1)  N=6" in svg
    assert "data:image/png;base64," in svg
    width = float(svg.split("width='")[1].split("'")[0])
    box = float(svg.split("<rect x=")[1].split("width='")[1].split("'")[0])
    assert box >= len("a very long flag that used to be clipped") * 6.8 and width >= box


# --- 12. polish -----------------------------------------------------------------------------------


def test_version_help_and_preset_spellings(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.startswith("moozi ")
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "``" not in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    assert "examples:" in out and "default: no time limit" in out
    assert load_preset("minatar_breakout") == load_preset("minatar-breakout")
    assert load_preset("space-invaders") == load_preset("space_invaders")


def test_match_table_counts_and_gate_words():
    from moozi.cli.commands import _match_table

    iv = {"value": 0.5, "low": 0.1, "high": 0.9}
    r = {"game": "g", "games": 2, "pairs": 1, "opening_plies": 1, "seed": 0, "a": {"id": "a"}, "b": {"id": "b"},
         "wins": 1, "draws": 0, "losses": 1, "a_first": {"wins": 1, "draws": 0, "losses": 0},
         "a_second": {"wins": 0, "draws": 0, "losses": 1}, "score": iv, "elo": iv, "win_rate": iv, "loss_rate": iv,
         "distinct_games": 1.0, "mean_plies": 5.0, "ms_per_move": {"a": 1.0, "b": 1.0}, "wall_s": 1.0,
         "records": "r", "gate": {"method": "fixed", "decision": "undecided", "pairs_used": 1}}
    table = _match_table(r)
    assert "2 games (1 pair, 1 random opening ply," in table
    assert "gate (fixed): no decision on A after 1 pair" in table and "UNDECIDED" not in table
    from moozi.eval.arena import _finite

    assert json.dumps(_finite(-0.0)) == "0.0"  # an even match printed its Elo as -0.0
