"""`moozi serve`: the page to play an agent by clicking, driven in a real Chromium; the JSON API's errors."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.fixture(scope="module")
def server():
    """`moozi serve zoo:tictactoe-v1 --port 0` in a process of its own; its address."""
    pytest.importorskip("uvicorn", reason="the serve extra is not installed")
    proc = subprocess.Popen([sys.executable, "-m", "moozi.cli", "serve", "zoo:tictactoe-v1", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    line = proc.stdout.readline()
    if "open http://" not in line:
        proc.kill()
        pytest.fail(f"moozi serve did not start: {line!r} {proc.stderr.read()[-2000:]}")
    url = line.split("open ", 1)[1].split()[0]
    yield url
    proc.terminate()
    proc.wait(timeout=30)


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
    browser = _chromium()
    if browser is None:
        if os.geteuid() == 0 and shutil.which("apt-get"):  # where make installs it (CI): never skipped
            pytest.fail("no chromium, though make installs Debian's package where it runs as root")
        pytest.skip("no chromium: `make` installs Debian's package when run as root")
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
    assert sum(m != "" for m in marks) >= 5 and all(m == "" for m in other_marks)  # the tabs are apart
    assert later == marks  # playing in the second tab changed nothing in the first
