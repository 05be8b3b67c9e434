"""What `moozi serve` costs a person at the page: start-up, the first answer (compiling), then per request.

Starts `moozi serve AGENT --port 0` in a process of its own and times, from outside as a browser would:
the seconds until it prints its address (loading the agent), the first game or episode (the first search
compiles), then ``--requests`` requests one after another: a board game's move (the agent's reply included;
a new game whenever one ends) or a watched episode's step of one move with its search shown and without.
One JSON line per agent: medians and 90th percentiles in milliseconds.

    python benchmarks/serve_latency.py zoo:tictactoe-v1 runs/cartpole --requests 100
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request

import numpy as np


def _call(url: str, method: str, path: str, data: dict | None = None) -> dict:
    body = None if data is None else json.dumps(data).encode()
    request = urllib.request.Request(url + path, data=body, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as reply:
        return json.loads(reply.read())


def _timed(fn) -> tuple[float, dict]:
    t = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t) * 1e3, out


def _stats(ms: list[float]) -> dict:
    return {"n": len(ms), "median_ms": round(float(np.median(ms)), 2), "p90_ms": round(float(np.percentile(ms, 90)), 2)}


def measure(agent: str, requests: int) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "moozi.cli", "serve", agent, "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = proc.stdout.readline()
        if "open http://" not in line:
            raise RuntimeError(f"moozi serve {agent} did not start: {line!r} {proc.stderr.read()[-1000:]}")
        out = {"agent": agent, "startup_s": round(time.perf_counter() - t0, 2)}
        url = line.split("open ", 1)[1].split()[0]
        info = _call(url, "GET", "api/info")
        out.update(game=info["game"], mode=info["mode"])
        if info["mode"] == "play":
            first, game = _timed(lambda: _call(url, "POST", "api/new", {"human_seat": 1}))  # the agent opens
            out["first_answer_s"] = round(first / 1e3, 2)
            moves = []
            while len(moves) < requests:
                if game["over"]:
                    game = _call(url, "POST", "api/new", {"human_seat": 1})
                    continue
                action = game["legal"][0]["action"]
                ms, game = _timed(lambda: _call(url, "POST", f"api/game/{game['id']}/move", {"action": action}))
                moves.append(ms)
            out["move_with_reply"] = _stats(moves)
        else:
            first, episode = _timed(lambda: _call(url, "POST", "api/watch"))
            ms, episode = _timed(lambda: _call(url, "POST", f"api/watch/{episode['id']}/step", {"steps": 1}))
            out["first_answer_s"] = round((first + ms) / 1e3, 2)
            for explain in (True, False):
                steps = []
                while len(steps) < requests:
                    if episode["over"]:
                        episode = _call(url, "POST", "api/watch")
                        continue
                    ms, episode = _timed(lambda: _call(url, "POST", f"api/watch/{episode['id']}/step",
                                                       {"steps": 1, "explain": explain}))
                    steps.append(ms)
                out["step_with_search" if explain else "step"] = _stats(steps)
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("agents", nargs="+", help="what `moozi serve` takes: a run, an agent file, zoo:NAME, a player")
    parser.add_argument("--requests", type=int, default=100)
    args = parser.parse_args()
    for agent in args.agents:
        print(json.dumps(measure(agent, args.requests)), flush=True)


if __name__ == "__main__":
    main()
