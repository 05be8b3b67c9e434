"""`moozi serve`: the page to play an agent by clicking and to watch one play, driven in a real Chromium; the JSON
API's errors."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from moozi.cli import main
from tests.helpers import TINY


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _start(*args: str):
    """`moozi serve ARGS --port 0` in a process of its own: (process, its address)."""
    pytest.importorskip("uvicorn", reason="the serve extra is not installed")
    proc = subprocess.Popen([sys.executable, "-m", "moozi.cli", "serve", *args, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    line = proc.stdout.readline()
    if "open http://" not in line:
        proc.kill()
        pytest.fail(f"moozi serve did not start: {line!r} {proc.stderr.read()[-2000:]}")
    return proc, line.split("open ", 1)[1].split()[0]


def _stop(proc) -> None:
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server():
    """`moozi serve zoo:tictactoe-v1`: its address."""
    proc, url = _start("zoo:tictactoe-v1")
    yield url
    _stop(proc)


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    """`moozi serve RUN` on a tiny CartPole run (a single-player game: the page watches it): its address."""
    run = tmp_path_factory.mktemp("web") / "cartpole"
    assert main(["train", "--preset", "cartpole", "--run-dir", str(run), *TINY]) == 0
    proc, url = _start(str(run))
    yield url
    _stop(proc)


def _call(url: str, method: str, path: str, data=None) -> tuple[int, dict]:
    import urllib.error
    import urllib.request

    body = None if data is None else (data if isinstance(data, bytes) else json.dumps(data).encode())
    request = urllib.request.Request(url + path, data=body, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_the_api_refuses_bad_input_with_one_line_and_goes_on(server):
    code, info = _call(server, "GET", "api/info")
    assert code == 200 and info["game"] == "pgx:tic_tac_toe" and info["num_actions"] == 9
    code, game = _call(server, "POST", "api/new", {"human_seat": 1})  # the agent moves first
    assert code == 200 and len(game["moves"]) == 1 and game["to_move"] == "you" and game["search"]["moves"]
    gid, taken = game["id"], game["last_agent_move"]
    code, said = _call(server, "POST", f"api/game/{gid}/move", {"action": taken})  # the agent's own cell
    assert code == 409 and said["error"].endswith("is not legal here"), said
    assert _call(server, "POST", f"api/game/{gid}/move", b"garbage")[0] == 400
    assert _call(server, "POST", f"api/game/{gid}/move", {"action": "x"})[0] == 400
    assert _call(server, "POST", "api/new", {"human_seat": 2})[0] == 400
    assert _call(server, "GET", "api/game/nope")[0] == 404
    while not game["over"]:  # play it out (the first legal move each time); then a move after the end
        code, game = _call(server, "POST", f"api/game/{gid}/move", {"action": game["legal"][0]["action"]})
        assert code == 200
    assert game["result"] in (0.0, 0.5) and _call(server, "POST", f"api/game/{gid}/move", {"action": 0})[0] == 409


def test_a_whole_game_by_clicks_in_chromium_and_two_tabs_apart(server):
    browser = _browser()
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=browser, args=["--no-sandbox"])
        context = b.new_context()
        page, other = context.new_page(), context.new_page()
        for tab in (page, other):
            tab.on("pageerror", lambda e: errors.append(str(e)))
            tab.goto(server)
            tab.wait_for_selector("#board button")
        clicks = 0
        deadline = time.monotonic() + 300
        while not page.eval_on_selector("#status", "e => e.dataset.result"):
            assert time.monotonic() < deadline
            page.wait_for_selector("#board button.legal")
            page.click("#board button.legal >> nth=0")  # the person clicks a free cell
            clicks += 1
            page.wait_for_function("n => document.querySelectorAll('#board button:not(.legal):disabled').length"
                                   " >= 2 * n || document.querySelector('#status').dataset.result", arg=clicks)
        status = page.inner_text("#status")
        searched = page.inner_text("#search")
        marks = page.eval_on_selector_all("#board button", "els => els.map(e => e.textContent)")
        other_marks = other.eval_on_selector_all("#board button", "els => els.map(e => e.textContent)")
        other.click("#board button.legal >> nth=0")  # the second tab's own game goes on
        other.wait_for_selector("#board button.legal")
        later = page.eval_on_selector_all("#board button", "els => els.map(e => e.textContent)")
        b.close()
    assert not errors, errors
    assert status in ("A draw.", "You lost.") and 3 <= clicks <= 5, (status, clicks)  # never a loss for the agent
    assert "The agent's search of its last move" in searched and "visits" in searched
    assert "The line the model predicts" in searched
    assert sum(m != "" for m in marks) >= 5 and all(m == "" for m in other_marks)  # the tabs are apart
    assert later == marks  # playing in the second tab changed nothing in the first


def test_a_single_player_agent_is_watched_move_by_move_with_its_search_and_curves(watched):
    code, info = _call(watched, "GET", "api/info")
    assert code == 200 and info["mode"] == "watch" and info["game"] == "gymnax:CartPole-v1"
    code, about = _call(watched, "GET", "api/about")
    assert code == 200 and about["kind"] == "run" and about["updates"] > 0
    assert [c["title"] for c in about["curves"]][:1] == ["Test return"]
    assert about["curves"][0]["uri"].startswith("data:image/png;base64,")
    code, episode = _call(watched, "POST", "api/watch", {})
    assert code == 200 and episode["steps"] == 0 and episode["frame"].startswith("data:image/png;base64,")
    gid = episode["id"]
    code, episode = _call(watched, "POST", f"api/watch/{gid}/step", {"steps": 1})
    assert code == 200 and episode["steps"] == 1 and episode["last_action"] in (0, 1)
    search = episode["search"]
    assert search["simulations"] == 2 and {m["action"] for m in search["moves"]} == {0, 1}
    assert search["path"] and search["path"][0]["action"] == search["moves"][0]["action"]  # its line starts with its move
    code, quiet = _call(watched, "POST", f"api/watch/{gid}/step", {"steps": 2, "explain": False})
    assert code == 200 and quiet["steps"] == 3 and quiet["search"] == search  # no new search asked for
    for bad in ({"steps": 0}, {"steps": 65}, {"steps": "2"}, {"explain": "yes"}):
        code, said = _call(watched, "POST", f"api/watch/{gid}/step", bad)
        assert code == 400 and "is invalid: allowed" in said["error"], (bad, said)
    assert _call(watched, "POST", "api/watch/nope/step", {"steps": 1})[0] == 404
    code, said = _call(watched, "POST", "api/new", {"human_seat": 0})  # a board game's route
    assert code == 404 and "single-player game" in said["error"]
    while not episode["over"]:
        code, episode = _call(watched, "POST", f"api/watch/{gid}/step", {"steps": 64})
        assert code == 200
    assert episode["steps"] <= 12 and episode["return"] == episode["steps"]  # CartPole pays 1 a move; TINY caps 12
    assert _call(watched, "POST", f"api/watch/{gid}/step", {"steps": 1})[1]["steps"] == episode["steps"]


def _browser():
    browser = _chromium()
    if browser is None:
        if os.geteuid() == 0 and shutil.which("apt-get"):  # where make installs it (CI): never skipped
            pytest.fail("no chromium, though make installs Debian's package where it runs as root")
        pytest.skip("no chromium: `make` installs Debian's package when run as root")
    return browser


def test_the_page_draws_a_single_player_game_as_it_is_played(watched):
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=_browser(), args=["--no-sandbox"])
        page = b.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(watched)
        page.wait_for_selector("#frame:not([hidden])")
        page.wait_for_function("Number(document.querySelector('#status').dataset.steps) >= 1")
        frames = {page.get_attribute("#frame", "src")}
        page.wait_for_selector("#search-path")  # the search of the move and the line the model predicts
        page.wait_for_function("document.querySelector('#status').dataset.result", timeout=120_000)
        frames.add(page.get_attribute("#frame", "src"))
        status = page.inner_text("#status")
        heading = page.inner_text("h1")
        page.wait_for_selector("#about img")  # the run's curves
        curves = page.eval_on_selector_all("#about img", "els => els.map(e => e.alt)")
        b.close()
    assert not errors, errors
    assert heading == "moozi: watch gymnax:CartPole-v1"
    assert status.startswith("Episode over after") and len(frames) == 2, (status, len(frames))  # drawn as it went
    assert "Test return" in curves


def test_serve_refuses_a_taken_port_a_bad_port_and_a_bad_agent_in_one_line(tmp_path, capsys):
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = str(taken.getsockname()[1])
        assert main(["serve", "random", "--game", "pgx:tic_tac_toe", "--port", port]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"cannot listen on 127.0.0.1:{port}" in err[0], err
    finally:
        taken.close()
    assert main(["serve", "random", "--game", "pgx:tic_tac_toe", "--port", "70000"]) == 2
    assert "--port 70000 is invalid: allowed 0" in capsys.readouterr().err
    assert main(["serve", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a run directory" in err[0], err


def test_an_engine_that_fails_forfeits_and_the_person_wins():
    """A GTP engine as the agent (tests/data/ttt_gtp_engine.py, crashing at its second genmove): the game ends as
    the person's win with the reason, a move after it is refused, and the server goes on to a new game."""
    from pathlib import Path

    engine = f"gtp:{sys.executable} {Path(__file__).parent / 'data' / 'ttt_gtp_engine.py'} crash,timeout=5"
    proc, url = _start(engine, "--game", "pgx:tic_tac_toe")
    try:
        code, game = _call(url, "POST", "api/new", {"human_seat": 1})  # the engine's first genmove: answered
        assert code == 200 and len(game["moves"]) == 1
        code, game = _call(url, "POST", f"api/game/{game['id']}/move", {"action": game["legal"][0]["action"]})
        assert code == 200 and game["over"] and game["result"] == 1.0 and game["legal"] == [], game
        assert "the engine ended after 'genmove" in game["forfeit"]
        assert _call(url, "GET", f"api/game/{game['id']}")[1]["over"]  # still over when asked again
        code, said = _call(url, "POST", f"api/game/{game['id']}/move", {"action": 0})
        assert code == 409 and "the game is over" in said["error"]
        code, again = _call(url, "POST", "api/new", {"human_seat": 0})
        assert code == 200 and not again["over"]
    finally:
        _stop(proc)
