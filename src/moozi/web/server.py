"""``moozi serve AGENT``: a local page where a person plays a board game against an agent by clicking, or watches
it play a single-player game live.

The server (Starlette on uvicorn; 127.0.0.1 unless ``--host`` says otherwise) serves one agent on one game.
Two-player games: one :class:`~moozi.eval.session.GameSession` over the agent's player and any number of
games, one per browser tab. Each game is its moves from the start: a request replays them into the session
when another game used it last (the session's own undo does the same), under one lock, so two tabs never see
each other's position and the player is built (and compiled) once. Single-player games: each tab's episode is
its own game and player, stepped as the page asks (:mod:`moozi.web.watch`). What the page gets is plain JSON
(:meth:`Games.state`, :meth:`~moozi.web.watch.Episode.view`): the board as text and, where the text is a grid,
its cells, or the frame as a PNG; the legal moves by name; how clicking maps to moves; the agent's search of
its move (visit shares, prior, values, and the line the model predicts) when the player can explain itself;
the result; and, once, what is known of the agent (:func:`about`: an agent file's card, a run's curves).

Bad input never stops the server: an unknown game, an illegal move, a move after the end or out of turn gets
a 4xx reply with one line saying why; a closed tab's game is simply never asked for again (the oldest games
beyond :data:`MAX_GAMES` are forgotten).
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from pathlib import Path

from moozi.web.views import line_namer, search_view

MAX_GAMES = 256  # games kept (one per tab); the oldest is forgotten past this


def grid_of(board: str, num_actions: int) -> dict | None:
    """How the board text maps to clicks: ``{"rows", "cols", "cells", "click"}`` where the text is a rectangle of
    one-character cells and the actions name its cells (``"cell"``: action = row * cols + col, tic-tac-toe) or
    its columns (``"column"``, connect four); None otherwise (the page shows move buttons only)."""
    lines = [line for line in board.splitlines() if line.strip()]
    if not lines or len({len(line) for line in lines}) != 1:
        return None
    rows, cols = len(lines), len(lines[0])
    click = "cell" if rows * cols == num_actions else "column" if cols == num_actions else None
    if click is None:
        return None
    return {"rows": rows, "cols": cols, "cells": [list(line) for line in lines], "click": click}


class Games:
    """Games by id over one session (see the module doc). ``session``: a two-player GameSession."""

    def __init__(self, session, agent_id: str):
        self.session, self.agent_id = session, agent_id
        self.lock = threading.Lock()
        self.games: OrderedDict[str, dict] = OrderedDict()  # id -> {"moves", "human_seat", "search", "forfeit"}
        self.current: str | None = None  # the game whose moves the session holds

    def _load(self, gid: str) -> dict:
        game = self.games.get(gid)
        if game is None:
            raise KeyError(f"no game {gid!r} here (the server was restarted, or the game was forgotten): start a new one")
        if self.current != gid or self.session.moves != game["moves"]:
            self.session.new_game()
            for move in game["moves"]:
                self.session.play(move)
            self.current = gid
        self.games.move_to_end(gid)
        return game

    def _agent_turns(self, game: dict) -> None:
        """The agent moves while it is to move (its search kept for the page), or the game ends."""
        s = self.session
        while not s.over and s.seat_to_move != game["human_seat"]:
            found = s.analyze()  # named in this position, before the move
            game["search"] = None if found is None else search_view(found, line_namer(s.twin_state,
                                                                                       found.get("path", [])))
            action = s.genmove()
            if action is None:  # the player forfeited (an external engine that failed)
                game["forfeit"] = s.forfeit[1]
                break
            game["moves"].append(action)
            game["last_agent_move"] = action

    def new(self, human_seat: int) -> dict:
        if human_seat not in (0, 1):
            raise ValueError(f"human_seat = {human_seat!r} is invalid: allowed 0 (move first) or 1 (second)")
        with self.lock:
            gid = secrets.token_hex(8)
            self.games[gid] = {"moves": [], "human_seat": human_seat, "search": None, "forfeit": None}
            while len(self.games) > MAX_GAMES:
                self.games.popitem(last=False)
            game = self._load(gid)
            self._agent_turns(game)
            return self._state(gid, game)

    def move(self, gid: str, action: int) -> dict:
        from moozi.eval.session import IllegalMove

        with self.lock:
            game = self._load(gid)
            s = self.session
            if s.over or game["forfeit"] is not None:  # a forfeit is not replayed into the session: kept here
                raise IllegalMove("the game is over: start a new one")
            if s.seat_to_move != game["human_seat"]:
                raise IllegalMove("it is the agent's turn")
            s.play(int(action))  # IllegalMove for a move that is not legal here
            game["moves"].append(int(action))
            if s.forfeit is not None:
                game["forfeit"] = s.forfeit[1]
            self._agent_turns(game)
            return self._state(gid, game)

    def state(self, gid: str) -> dict:
        with self.lock:
            return self._state(gid, self._load(gid))

    def _state(self, gid: str, game: dict) -> dict:
        s = self.session
        board = s.board()
        result = s.result()
        if game["forfeit"] is not None:  # the agent's player failed (an external engine): the person wins
            result = 1.0 if game["human_seat"] == 0 else 0.0
        over = s.over or game["forfeit"] is not None
        mine = None if result is None else (result if game["human_seat"] == 0 else 1.0 - result)
        return {
            "id": gid, "game": s.game, "agent": self.agent_id, "human_seat": game["human_seat"],
            "board": board, "grid": grid_of(board, s.spec.num_actions),
            "legal": [] if over else [{"action": a, "name": s.move_name(a)} for a in s.legal()],
            "moves": _names(s, game["moves"]),
            "to_move": None if over else "you" if s.seat_to_move == game["human_seat"] else "agent",
            "over": over, "result": mine, "forfeit": game["forfeit"],
            "last_agent_move": game.get("last_agent_move"),
            "search": game["search"],
        }


def _names(session, moves: list[int]) -> list[str]:
    """The moves' names as they were played (each named in its own position, replayed on the game's twin)."""
    from moozi.envs.notation import move_name

    twin = session.twin
    state = twin.new_initial_state() if twin is not None else None
    out = []
    for m in moves:
        out.append(move_name(state, m))
        if state is not None and not state.is_terminal():
            state.apply_action(m)
    return out


def about(agent: str) -> dict:
    """What the page shows of where the agent comes from: ``kind`` (player, run, agent), for an agent file (or
    ``zoo:NAME``) its card and the zoo's measured strength, for a run its counters and its curves against env
    steps (``curves``: ``[{"title", "uri"}]``, PNG data URIs; none without matplotlib, the viz extra)."""
    from moozi.agent_file import is_agent_file, read_agent
    from moozi.eval.players import parse_player
    from moozi.eval.players.registry import is_builtin, run_of
    from moozi.zoo import PREFIX, index, resolve

    head = parse_player(agent)[0]
    if is_builtin(head):
        return {"kind": "player", "name": head}
    run = run_of(head)[1].partition("@")[0]
    path = resolve(run)
    if is_agent_file(path):
        card = read_agent(path)[0].get("card") or {}
        out = {"kind": "agent", "name": run, "card": card}
        if run.startswith(PREFIX):
            entry = index().get(run[len(PREFIX):], {})
            out["strength"], out["card_doc"] = entry.get("strength"), entry.get("card")
        return out
    from moozi.observe.metrics import read_metrics, training_rows

    rows = read_metrics(path)
    last = (training_rows(rows) or [{}])[-1]
    out = {"kind": "run", "name": run, "updates": last.get("updates"), "env_steps": last.get("env_steps"),
           "curves": []}
    tests = [r["test/return_mean"] for r in rows if isinstance(r.get("test/return_mean"), (int, float))]
    if tests:
        out["last_test"] = tests[-1]
    try:
        from moozi.observe.report import PANELS, chart
    except ImportError:  # no matplotlib: the page says so
        return out
    wanted = {"Test return", "Training episode return", "Mistakes against perfect play (grade)",
              "Score against the anchors (tournament)"}
    for title, keys in PANELS:
        if title in wanted:
            uri = chart({run: rows}, title, keys, "env_steps")
            if uri:
                out["curves"].append({"title": title, "uri": uri})
    return out


class Served:
    """One agent on one game: :class:`Games` (two-player) or :class:`~moozi.web.watch.Watches` (single-player)."""

    def __init__(self, agent: str, game: str, agent_id: str, games: Games | None = None, watches=None):
        self.agent, self.game, self.agent_id, self.games, self.watches = agent, game, agent_id, games, watches
        self._about: dict | None = None
        self._about_lock = threading.Lock()

    @property
    def mode(self) -> str:
        return "play" if self.games is not None else "watch"

    def about(self) -> dict:
        with self._about_lock:  # drawn once, on the first ask
            if self._about is None:
                self._about = about(self.agent)
            return self._about

    def close(self) -> None:
        if self.games is not None:
            try:
                self.games.session.player.close()
            finally:
                self.games.session.close()
        if self.watches is not None:
            self.watches.close()


def make_app(served: Served):
    """The Starlette app: ``/`` the page, ``GET /api/info``, ``GET /api/about``; two-player games ``POST /api/new``,
    ``GET /api/game/ID``, ``POST /api/game/ID/move``; single-player games ``POST /api/watch``,
    ``GET /api/watch/ID``, ``POST /api/watch/ID/step``. 4xx replies carry ``{"error": "one line"}``."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse
    from starlette.routing import Route

    from moozi.eval.session import IllegalMove

    page = (Path(__file__).parent / "page.html").read_text()
    games, watches = served.games, served.watches

    def error(status: int, text: str) -> JSONResponse:
        return JSONResponse({"error": text}, status_code=status)

    async def body(request: Request) -> dict:
        try:
            data = await request.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise ValueError("the request body must be a JSON object")
        return data

    def integer(data: dict, key: str, default, allowed: str) -> int:
        value = data.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{key} = {value!r} is invalid: allowed {allowed}")
        return value

    def guarded(handler, needs=None):
        async def wrapped(request: Request):
            if needs is not None and served.mode != needs:
                return error(404, f"{served.game} is a {'two' if served.mode == 'play' else 'single'}-player game: "
                                  f"this page {'plays' if served.mode == 'play' else 'watches'} it (see /api/info)")
            try:
                return JSONResponse(await handler(request))
            except KeyError as e:
                return error(404, str(e.args[0]) if e.args else "not found")
            except IllegalMove as e:
                return error(409, str(e))
            except (ValueError, TypeError) as e:
                return error(400, str(e))
        return wrapped

    async def info(request: Request):
        out = {"game": served.game, "agent": served.agent_id, "source": served.agent, "mode": served.mode}
        if games is not None:
            out["num_actions"] = games.session.spec.num_actions
        return out

    async def about_agent(request: Request):
        return await run_in_threadpool(served.about)

    async def new(request: Request):
        seat = integer(await body(request), "human_seat", 0, "0 (move first) or 1 (second)")
        return await run_in_threadpool(games.new, seat)  # the agent thinks off the event loop

    async def get(request: Request):
        return await run_in_threadpool(games.state, request.path_params["gid"])

    async def move(request: Request):
        action = integer(await body(request), "action", None, "a move's action index (see legal)")
        return await run_in_threadpool(games.move, request.path_params["gid"], action)

    async def watch_new(request: Request):
        return await run_in_threadpool(watches.new)

    async def watch_get(request: Request):
        return await run_in_threadpool(watches.state, request.path_params["gid"])

    async def watch_step(request: Request):
        data = await body(request)
        steps = integer(data, "steps", 1, "an integer from 1 to 64")
        explain = data.get("explain", True)
        if not isinstance(explain, bool):
            raise ValueError(f"explain = {explain!r} is invalid: allowed true or false")
        return await run_in_threadpool(watches.step, request.path_params["gid"], steps, explain)

    async def index(request: Request):
        return HTMLResponse(page)

    return Starlette(routes=[
        Route("/", index), Route("/api/info", guarded(info)), Route("/api/about", guarded(about_agent)),
        Route("/api/new", guarded(new, "play"), methods=["POST"]),
        Route("/api/game/{gid}", guarded(get, "play")),
        Route("/api/game/{gid}/move", guarded(move, "play"), methods=["POST"]),
        Route("/api/watch", guarded(watch_new, "watch"), methods=["POST"]),
        Route("/api/watch/{gid}", guarded(watch_get, "watch")),
        Route("/api/watch/{gid}/step", guarded(watch_step, "watch"), methods=["POST"]),
    ])


def build(agent: str, game: str | None = None, seed: int = 0, modules=()) -> Served:
    """``agent`` (a run, an agent file, ``zoo:NAME`` or any player string) served on its game."""
    from moozi.envs.pool import make_pool
    from moozi.eval.arena import game_of
    from moozi.eval.players import make_player
    from moozi.eval.session import GameSession
    from moozi.web.watch import Watches

    name, kwargs, modules = game_of([agent], game, modules)
    player = make_player(agent, name, seed=seed, game_kwargs=kwargs)
    agent_id = player.spec.id
    try:
        probe = make_pool(name, 1, seed=seed, modules=modules, **kwargs)
        two_player = probe.spec.two_player
        probe.close()
        if two_player:
            return Served(agent, name, agent_id, games=Games(GameSession(name, player, seed, kwargs, modules),
                                                               agent_id))
    except BaseException:
        player.close()
        raise
    player.close()  # each watched episode builds its own
    return Served(agent, name, agent_id, watches=Watches(
        name, lambda: make_player(agent, name, seed=seed, game_kwargs=kwargs), seed, kwargs, modules))


def serve(agent: str, game: str | None = None, host: str = "127.0.0.1", port: int = 8000, seed: int = 0,
          modules=(), ready=None) -> None:
    """Build the agent's games and serve them until Ctrl-C; ``ready(url)`` is called once the server listens."""
    import socket

    import uvicorn

    served = build(agent, game, seed, modules)
    try:
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        url = f"http://{host if ':' not in host else f'[{host}]'}:{sock.getsockname()[1]}/"
        config = uvicorn.Config(make_app(served), log_level="warning", lifespan="off")
        server = uvicorn.Server(config)
        if ready is not None:
            original = server.startup

            async def startup(sockets=None):
                await original(sockets=sockets)
                ready(url)

            server.startup = startup
        server.run(sockets=[sock])
    finally:
        served.close()
