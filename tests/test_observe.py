"""Seeing what the agent does (issue 14): frames drawn per game kind, captioned GIFs, the HTML report,
and the report opened in a real (headless) browser."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from moozi.cli import main
from moozi.envs.contract import EnvSpec
from moozi.observe.gif import caption, episode_frames, tensorboard_strip, write_gif
from moozi.observe.render import PLAYER_COLOURS, cubehelix, kind_of, render
from moozi.types import Trajectory
from moozi.workers import agent_return
from tests.helpers import TINY


def _spec(name, shape, two_player=False, dtype="float32", scale=1.0, actions=3):
    return EnvSpec(name, shape, actions, num_players=2 if two_player else 1, observation_dtype=dtype,
                   observation_scale=scale)


def test_cubehelix_matches_seaborn_golden():
    # seaborn.color_palette("cubehelix", 4), as MinAtar's GUI builds it (printed by seaborn 0.13, x 255)
    got = cubehelix(4).astype(int)
    want = np.array([[0.0861, 0.2382, 0.3056], [0.3293, 0.4763, 0.1837], [0.8146, 0.4955, 0.5753],
                     [0.7587, 0.7922, 0.9544]]) * 255
    np.testing.assert_allclose(got, want, atol=2.0)


def test_each_game_kind_is_drawn():
    minatar = _spec("gymnax:Breakout-MinAtar", (10, 10, 4), dtype="uint8")
    frame = np.zeros((10, 10, 4), np.uint8)
    frame[0, 0, 1] = 1
    frame[9, 9, 3] = 1
    img = render(minatar, frame)
    assert kind_of(minatar) == "minatar" and img.shape == (160, 160, 3) and img.dtype == np.uint8
    palette = cubehelix(4)
    assert (img[0, 0] == palette[1]).all() and (img[-1, -1] == palette[3]).all() and (img[80, 80] == 0).all()

    pixels = _spec("ale:Pong", (84, 84, 4), dtype="uint8", scale=1 / 255)
    frame = np.zeros((84, 84, 4), np.uint8)
    frame[..., -1] = 200  # the newest frame of the stack is drawn
    img = render(pixels, frame)
    assert kind_of(pixels) == "pixels" and (img == 200).all()

    board = _spec("pgx:tic_tac_toe", (3, 3, 2), two_player=True, actions=9)
    frame = np.zeros((3, 3, 2), np.float32)
    frame[1, 1, 0] = 1  # the mover's stone in the centre
    first, second = render(board, frame, to_play=0), render(board, frame, to_play=1)
    centre = (first.shape[0] // 2, first.shape[1] // 2)
    assert kind_of(board) == "board" and not (first[centre] == second[centre]).all()  # colours stay per player

    cart = _spec("gymnax:CartPole-v1", (1, 1, 4), actions=2)
    upright, leaning = render(cart, np.zeros((1, 1, 4), np.float32)), render(cart, np.array([[[0, 0, 0.2, 0]]]))
    assert kind_of(cart) == "cartpole" and not np.array_equal(upright, leaning)
    assert kind_of(_spec("gym:Acrobot-v1", (1, 1, 6))) == "vector"
    with pytest.raises(ValueError, match="observation_shape"):
        render(cart, np.zeros((4,)))


def _trajectory(n=4, two_player=False):
    return Trajectory(
        frames=np.zeros((n, 3, 3, 2), np.float32), actions=np.r_[np.arange(1, n), 0].astype(np.int32),
        rewards=np.r_[0.0, 0.0, 0.0, 1.0][:n].astype(np.float32), root_values=np.full(n, 0.5, np.float32),
        root_policies=np.zeros((n, 10), np.float32), to_play=(np.arange(n) % 2 if two_player else np.zeros(n)).astype(np.int32),
        first=np.int32(0), last=np.int32(n - 1), is_terminal=np.bool_(True), random_actions=np.zeros(n, bool))


def test_captions_golden():
    spec = _spec("pgx:tic_tac_toe", (3, 3, 2), two_player=True, actions=9)
    traj = _trajectory(two_player=True)  # player 0 moves first; the last move (step 2) wins
    # step 1: who is to move, v*, the game's action index (stored index 2 -> action 1), whose reward r_1 is
    assert caption(spec, traj, 1, agent_seat=0) == ["step 1/3  opponent to move", "action 1", "r +0 to agent"]
    assert caption(spec, traj, 2, agent_seat=0) == ["step 2/3  agent to move", "v* +0.500  action 2",
                                                    "r +0 to opponent"]
    assert caption(spec, traj, 1) == ["step 1/3  second player to move", "v* +0.500  action 1",
                                      "r +0 to first player"]  # self-play: both search
    assert caption(spec, traj, 3, agent_seat=0) == ["step 3/3  end of episode", "", "r +1 to agent"]
    assert caption(spec, traj, 0, agent_seat=1) == ["step 0/3  opponent to move", "action 0", ""]
    single = _spec("minatar:breakout", (10, 10, 4))
    assert caption(single, _trajectory(), 3) == ["step 3/3  r +1", "end of episode"]


def test_captions_and_colours_follow_the_order_of_play_not_the_player_id():
    """pgx draws which player id moves first: with player 1 first and the agent in seat 0, the agent is player 1
    (issue 48: the captions compared the seat with the id, so half the games named the wrong side)."""
    spec = _spec("pgx:tic_tac_toe", (3, 3, 2), two_player=True, actions=9)
    traj = _trajectory(two_player=True).replace(to_play=np.array([1, 0, 1, 0], np.int32))
    assert caption(spec, traj, 0, agent_seat=0)[0] == "step 0/3  agent to move"
    assert caption(spec, traj, 2, agent_seat=0)[1] == "v* +0.500  action 2"  # the agent's move carries its search
    assert caption(spec, traj, 3, agent_seat=0)[2] == "r +1 to agent"  # the winner's reward on the winner
    assert agent_return(traj, 0, True) == 1.0 and agent_return(traj, 1, True) == -1.0
    frame = np.zeros((3, 3, 2), np.float32)
    frame[0, 0, 0] = 1  # pgx: plane 0 holds the pieces of the player to move
    red = render(spec, frame, to_play=1, first_player=1)[26, 26]  # the first mover to move: its piece
    assert tuple(red) == tuple(PLAYER_COLOURS[0])
    blue = render(spec, frame, to_play=0, first_player=1)[26, 26]  # the second mover to move: its piece
    assert tuple(blue) == tuple(PLAYER_COLOURS[1])


def test_gif_has_one_frame_per_step(tmp_path):
    spec = _spec("pgx:tic_tac_toe", (3, 3, 2), two_player=True, actions=9)
    frames = episode_frames(spec, _trajectory(two_player=True), agent_seat=1)
    assert len(frames) == 4 and len({f.shape for f in frames}) == 1
    path = write_gif(tmp_path / "a.gif", frames)
    with Image.open(path) as im:
        assert im.format == "GIF" and im.n_frames == 4
    assert tensorboard_strip(frames, max_frames=2).shape[1] == 2 * frames[0].shape[1]
    with pytest.raises(ValueError, match="record_frames"):  # a test game played without frames
        episode_frames(spec, _trajectory().replace(frames=np.zeros((4, 1, 1, 1), np.float32)))


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("observe") / "cartpole"
    assert main(["train", "--preset", "cartpole", "--run-dir", str(run), *TINY, "testing.record_every=2",
                 "output.histogram_every_updates=2"]) == 0
    return run


def test_training_records_test_episodes(cartpole_run):
    gifs = sorted((cartpole_run / "gifs").glob("test-*.gif"))
    rows = [json.loads(line) for line in (cartpole_run / "metrics.jsonl").read_text().splitlines()]
    tests = sum("test/return_mean" in r for r in rows)
    assert len(gifs) == (tests + 1) // 2 and gifs  # tests 1, 3, 5, ...
    with Image.open(gifs[0]) as im:
        assert im.n_frames >= 2
    assert "moozi train --preset cartpole" in (cartpole_run / "commands.txt").read_text()
    log = (cartpole_run / "train.log").read_text()  # the progress is in the log too (a run without a terminal)
    assert "progress: status" in log and "without a time limit" in log and "None minutes" not in log
    machines = [json.loads(line) for line in (cartpole_run / "machines.jsonl").read_text().splitlines()]
    assert len(machines) == 1 and machines[0]["cores"] >= 1 and machines[0]["jax"] and machines[0]["devices"]
    assert "on " + machines[0]["cpu"] in (cartpole_run / "train.log").read_text()
    placement = json.loads((cartpole_run / "workers.json").read_text())
    assert {p["cpu"] for p in placement.values()} == {machines[0]["cpu"]}


def test_watch_writes_a_gif(cartpole_run, tmp_path, capsys):
    capsys.readouterr()
    out = tmp_path / "w.gif"
    assert main(["watch", str(cartpole_run), "--episodes", "2", "--out", str(out)]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["gif"] == str(out) and line["episodes"] == 2
    with Image.open(out) as im:
        assert im.n_frames == line["frames"] and im.n_frames >= 2


def test_tree_on_cartpole(cartpole_run, tmp_path, capsys):
    capsys.readouterr()
    assert main(["tree", str(cartpole_run), "--episode-step", "3", "--out-dir", str(tmp_path)]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert len(result["moves"]) == 3 and result["nodes"] >= 2
    assert Path(result["svg"]).read_text().startswith("<svg") and Path(result["dot"]).read_text().startswith("digraph")


def test_report_is_self_contained(cartpole_run, tmp_path, capsys):
    other = tmp_path / "copy"
    shutil.copytree(cartpole_run, other)
    capsys.readouterr()
    out = tmp_path / "report.html"
    assert main(["report", str(cartpole_run), str(other), "--out", str(out)]) == 0
    page = out.read_text()
    assert page.count("data:image/png;base64,") >= 6 and "data:image/gif;base64," in page
    assert "http://" not in page and "https://" not in page  # nothing to fetch
    assert "moozi train --preset cartpole" in page and "gymnax:CartPole-v1" in page
    assert "<h3>Machines</h3>" in page and "cores usable" in page
    assert main(["report", str(tmp_path / "nothing")]) == 2


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def test_report_opens_in_a_browser(cartpole_run, tmp_path):
    browser = _chromium()
    if browser is None:
        if os.geteuid() == 0 and shutil.which("apt-get"):  # where make installs it (CI): never skipped
            pytest.fail("no chromium, though make installs Debian's package where it runs as root")
        pytest.skip("no chromium: `make` installs Debian's package when run as root")
    from playwright.sync_api import sync_playwright

    out = tmp_path / "report.html"
    assert main(["report", str(cartpole_run), "--out", str(out)]) == 0
    shot = tmp_path / "report.png"
    errors: list[str] = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=browser, args=["--no-sandbox"])
        page = b.new_page(viewport={"width": 1200, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(Path(out).as_uri())
        page.wait_for_load_state("load")
        images = page.eval_on_selector_all("img", "els => els.map(e => [e.complete, e.naturalWidth, e.alt])")
        page.screenshot(path=str(shot), full_page=True)
        b.close()
    assert not errors, errors
    assert len(images) >= 6 and all(done and width > 0 for done, width, _ in images), images
    pixels = np.asarray(Image.open(shot).convert("L"), np.float64)
    assert pixels.shape[0] > 900 and pixels.std() > 10  # not a blank page: charts and text drawn


def test_embed_writes_a_map_and_a_projector(cartpole_run, tmp_path, capsys):
    capsys.readouterr()
    assert main(["embed", str(cartpole_run), "--episodes", "2", "--out-dir", str(tmp_path / "e")]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    with Image.open(line["png"]) as im:
        assert im.format == "PNG" and im.size[0] > 100
        assert np.asarray(im.convert("L")).std() > 5  # points drawn, not a blank figure
    projector = Path(line["projector"])
    assert (projector / "projector_config.pbtxt").exists() and line["positions"] >= 4
    tensors = list(projector.rglob("tensors.tsv"))
    assert tensors and len(tensors[0].read_text().splitlines()) == line["positions"] == line["mapped"]
    # imagined paths: the dynamics unrolled from real positions under the actions taken, and how far it strays
    assert line["imagined_paths"] == 8 and line["unroll"] == 5 and len(line["drift"]) == 5
    assert all(d >= 0 for d in line["drift"])
    # a map of some of the positions; the projector still holds them all
    assert main(["embed", str(cartpole_run), "--episodes", "2", "--max-points", "5", "--paths", "0", "--out-dir",
                 str(tmp_path / "f")]) == 0
    few = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert few["mapped"] == 5 < few["positions"] == line["positions"] and few["imagined_paths"] == 0
    assert main(["embed", str(cartpole_run), "--max-points", "3"]) == 2
    assert "--max-points 3: allowed 0" in capsys.readouterr().err


def test_imagined_paths_golden():
    from moozi.observe.embed import drift, path_starts

    # games of 4 and 2 positions, 2-step paths: starts (0, 0), (0, 1) only; 5 asked, 2 there
    assert path_starts([4, 2], 5, 2) == [(0, 0), (0, 1)] and path_starts([4, 2], 0, 2) == []
    real = np.array([[[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]]])  # one path: real steps of length 1
    imagined = np.array([[[1.0, 0.0], [2.0, 3.0]]])  # exact at depth 1, 3 away at depth 2
    assert drift(imagined, real) == [0.0, 3.0]


def test_embed_spreads_the_mapped_positions_evenly():
    from moozi.observe.embed import spread

    assert spread(10, 4).tolist() == [0, 3, 6, 9]  # round(0, 3, 6, 9): linspace(0, 9, 4)
    assert spread(10, 0).tolist() == list(range(10)) == spread(10, 10).tolist() == spread(10, 50).tolist()
    assert spread(7, 3).tolist() == [0, 3, 6]


# Breakout in the extended tier: tic-tac-toe shares most of its compiled programs with the other tiny tic-tac-toe runs.
@pytest.fixture(scope="module", params=["tictactoe", pytest.param("breakout", marks=pytest.mark.extended)])
def tiny_run(request, tmp_path_factory):
    run = tmp_path_factory.mktemp("smoke") / request.param
    assert main(["train", "--preset", request.param, "--run-dir", str(run), *TINY, "testing.record_every=1"]) == 0
    return run


def test_every_command_on_a_tiny_run(tiny_run, tmp_path, capsys):
    """watch, tree, embed and report on tic-tac-toe and Breakout-MinAtar (CartPole: the tests above)."""
    assert list((tiny_run / "gifs").glob("test-*.gif"))
    capsys.readouterr()
    assert main(["watch", str(tiny_run), "--out", str(tmp_path / "w.gif")]) == 0
    with Image.open(tmp_path / "w.gif") as im:
        assert im.format == "GIF" and im.n_frames >= 2
    assert main(["tree", str(tiny_run), "--episode-step", "1", "--out-dir", str(tmp_path / "t")]) == 0
    tree = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert Path(tree["svg"]).read_text().startswith("<svg") and tree["nodes"] > 1
    assert main(["embed", str(tiny_run), "--episodes", "2", "--colour", "step", "--out-dir", str(tmp_path / "e")]) == 0
    with Image.open(json.loads(capsys.readouterr().out.strip().splitlines()[-1])["png"]) as im:
        assert im.format == "PNG"
    assert main(["report", str(tiny_run), "--out", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>") and "data:image/gif" in page


@pytest.mark.parametrize("game, empty", [("tic_tac_toe", 0), ("connect_four", 2), ("breakthrough(rows=5,columns=5)", 2)])
def test_openspiel_boards_draw_pieces_not_empty_cells(game, empty):
    from moozi.envs import make_env
    from moozi.observe.render import board_planes

    env = make_env(f"openspiel:{game}")
    try:
        h, w, c = env.spec.observation_shape
        frame = np.zeros((h, w, c), np.float32)
        frame[..., empty] = 1.0  # an empty board, player 0 to move (the to_play plane, last, is 0)
        planes = board_planes(env.spec, frame)
        assert empty not in planes and c - 1 not in planes and len(planes) == 2
        img = render(env.spec, frame, planes=planes)
        assert len(np.unique(img.reshape(-1, 3), axis=0)) == 2  # board and grid only: no discs on empty cells
    finally:
        env.close()


def test_parameter_histograms(cartpole_run):
    """output.histogram_every_updates: TensorBoard holds histograms of every parameter and of Adam's gradient
    average, at the rows past each multiple of the interval; each leaf's counts add up to its size."""
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    from moozi.observe.histograms import leaf_histogram

    h = leaf_histogram(np.array([[0.0, 1.0], [1.0, 3.0]]), bins=3)  # edges 0, 1, 2, 3: [0, 1) [1, 2) [2, 3]
    assert h["bucket_limits"] == [1.0, 2.0, 3.0] and h["bucket_counts"] == [1, 2, 1]
    assert (h["num"], h["sum"], h["sum_squares"], h["min"], h["max"]) == (4, 5.0, 11.0, 0.0, 3.0)
    assert leaf_histogram(np.full(3, 2.0))["bucket_counts"] == [3]
    a = accumulator.EventAccumulator(str(cartpole_run / "tb"), size_guidance={accumulator.HISTOGRAMS: 0})
    a.Reload()
    tags = a.Tags()["histograms"]
    assert any(t.startswith("params/") for t in tags) and any(t.startswith("grad_mean/") for t in tags)
    rows = [json.loads(line) for line in (cartpole_run / "metrics.jsonl").read_text().splitlines()]
    written = [r for r in rows if "perf/histograms_s" in r]
    assert written and len(a.Histograms(tags[0])) == len(written)
    kernel = next(t for t in tags if t.startswith("params/") and t.endswith("kernel"))
    first = a.Histograms(kernel)[0].histogram_value
    assert sum(first.bucket) == first.num > 0
