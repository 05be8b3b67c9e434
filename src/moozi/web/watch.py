"""Single-player games watched live in the page: each tab's episode is its own game and player, stepped on request.

The page asks for the next few moves at the speed the person set (``POST /api/watch/ID/step``) and draws each
frame as it arrives, so a game is shown as it is played and a closed tab costs nothing: its episode is simply
never stepped again, and the oldest episodes beyond :data:`MAX_WATCHES` are closed. An episode holds a one-game
pool and its own player (a run's player shares its compiled search with every other player of the same network,
so a new tab does not compile again).
"""

from __future__ import annotations

import base64
import secrets
import threading
from collections import OrderedDict

import numpy as np

from moozi.web.views import index_name, search_view

MAX_WATCHES = 8  # episodes kept open (one per tab); the oldest is closed past this
MAX_STEPS = 64  # moves one request may ask for


def frame_uri(spec, observation, to_play: int = 0, size: int = 240) -> str | None:
    """One observation drawn as a PNG data URI (:func:`moozi.observe.render.render_png`); None where it cannot be."""
    from moozi.observe.render import render_png

    png = render_png(spec, np.asarray(observation), int(to_play), size=size)
    return None if png is None else "data:image/png;base64," + base64.b64encode(png).decode()


class Episode:
    """One game of a single-player game played by ``player`` (built by the caller, closed here)."""

    def __init__(self, game: str, player, seed: int, game_kwargs: dict, modules=()):
        from moozi.envs.pool import make_pool

        self.player = player
        self.pool = make_pool(game, 1, seed=seed, modules=modules, **(game_kwargs or {}))
        self.spec = self.pool.spec
        self.lock = threading.Lock()
        self.ts = self.pool.reset(seed)
        self.player.reset(self.ts)
        self.steps, self.total = 0, 0.0
        self.last_action: int | None = None
        self.last_reward = 0.0
        self.search: dict | None = None
        self.forfeit: str | None = None
        self.closed = False

    @property
    def over(self) -> bool:
        return bool(np.asarray(self.ts.is_last)[0]) or self.forfeit is not None

    def step(self, n: int, explain: bool = True) -> None:
        """Up to ``n`` moves (fewer if the episode ends); the search of the last one kept when ``explain``."""
        with self.lock:
            if self.closed:
                raise KeyError("this episode was closed for a newer one: start a new one")
            for i in range(n):
                if self.over:
                    return
                if explain and i == n - 1 and hasattr(self.player, "analyze"):
                    self.search = search_view(self.player.analyze(self.ts), index_name, two_player=False)
                action = int(self.player.act(self.ts, np.array([True]))[0])
                faults = self.player.take_forfeits() if hasattr(self.player, "take_forfeits") else {}
                if faults:
                    self.forfeit = next(iter(faults.values()))
                    return
                self.ts = self.pool.step(np.array([action], np.int32))
                self.player.observe(self.ts, np.array([action], np.int32))
                self.steps += 1
                self.last_action, self.last_reward = action, float(np.asarray(self.ts.reward)[0])
                self.total += self.last_reward

    def view(self) -> dict:
        ts = self.ts
        return {"steps": self.steps, "return": self.total, "last_action": self.last_action,
                "last_reward": self.last_reward, "over": self.over, "forfeit": self.forfeit,
                "truncated": bool(np.asarray(ts.is_last)[0] and not np.asarray(ts.is_terminal)[0]),
                "frame": frame_uri(self.spec, np.asarray(ts.observation)[0], int(np.asarray(ts.to_play)[0])),
                "search": self.search}

    def close(self) -> None:
        with self.lock:  # never under a step of another tab's request
            if self.closed:
                return
            self.closed = True
            try:
                self.player.close()
            finally:
                self.pool.close()


class Watches:
    """Episodes by id. ``new_player()`` builds a fresh player for each episode."""

    def __init__(self, game: str, new_player, seed: int, game_kwargs: dict, modules=()):
        self.game, self.new_player, self.seed = game, new_player, int(seed)
        self.game_kwargs, self.modules = game_kwargs, modules
        self.lock = threading.Lock()
        self.episodes: OrderedDict[str, Episode] = OrderedDict()
        self.started = 0

    def new(self) -> dict:
        with self.lock:
            seed = self.seed + self.started  # each episode a game of its own, reproducible from the server's seed
            self.started += 1
        episode = Episode(self.game, self.new_player(), seed, self.game_kwargs, self.modules)
        gid = secrets.token_hex(8)
        with self.lock:
            self.episodes[gid] = episode
            while len(self.episodes) > MAX_WATCHES:
                self.episodes.popitem(last=False)[1].close()
        return {"id": gid, "seed": seed, **episode.view()}

    def _get(self, gid: str) -> Episode:
        with self.lock:
            episode = self.episodes.get(gid)
            if episode is None:
                raise KeyError(f"no episode {gid!r} here (the server was restarted, or the episode was closed for a "
                               f"newer one: at most {MAX_WATCHES} are kept): start a new one")
            self.episodes.move_to_end(gid)
            return episode

    def step(self, gid: str, n: int, explain: bool = True) -> dict:
        if not 1 <= n <= MAX_STEPS:
            raise ValueError(f"steps = {n} is invalid: allowed 1 to {MAX_STEPS}")
        episode = self._get(gid)
        episode.step(n, explain)
        return {"id": gid, **episode.view()}

    def state(self, gid: str) -> dict:
        return {"id": gid, **self._get(gid).view()}

    def close(self) -> None:
        with self.lock:
            while self.episodes:
                self.episodes.popitem(last=False)[1].close()
