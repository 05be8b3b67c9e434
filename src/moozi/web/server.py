"""``moozi serve AGENT``: a page where a person plays a two-player board game against an agent by clicking.

The server (Starlette on uvicorn; 127.0.0.1 unless ``--host`` says otherwise) holds one
:class:`~moozi.eval.session.GameSession` over the agent's player and any number of games, one per browser tab.
Each game is its moves from the start: a request replays them into the session when another game used it last
(the session's own undo does the same), under one lock, so two tabs never see each other's position and the
player is built (and compiled) once. What the page gets is plain JSON (:func:`game_state`): the board as text
and, where the text is a grid, its cells; the legal moves by name; how clicking maps to moves; the agent's
search of its last move (visit shares, prior, values) when the player can explain itself; the result.

Bad input never stops the server: an unknown game, an illegal move, a move after the end or out of turn gets
a 4xx reply with one line saying why; a closed tab's game is simply never asked for again (the oldest games
beyond :data:`MAX_GAMES` are forgotten).
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from pathlib import Path

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

    def __init__(self, session, agent_id: str, card: dict | None = None):
        self.session, self.agent_id, self.card = session, agent_id, card or {}
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
            game["search"] = None if found is None else _search_view(found, s)
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
            if s.over:
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
        mine = None if result is None else (result if game["human_seat"] == 0 else 1.0 - result)
        return {
            "id": gid, "game": s.game, "agent": self.agent_id, "human_seat": game["human_seat"],
            "board": board, "grid": grid_of(board, s.spec.num_actions),
            "legal": [{"action": a, "name": s.move_name(a)} for a in s.legal()],
            "moves": _names(s, game["moves"]),
            "to_move": "you" if not s.over and s.seat_to_move == game["human_seat"] else None if s.over else "agent",
            "over": s.over, "result": mine, "forfeit": game["forfeit"],
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


def _search_view(search: dict, session) -> dict:
    """The agent's search, JSON-ready: its value for itself, simulations, per move visit share and prior."""
    return {"value": float(search["value"]), "network_value": float(search["network_value"]),
            "simulations": int(search["simulations"]),
            "moves": [{"action": int(m["action"]), "name": session.move_name(int(m["action"])),
                       "policy": float(m["policy"]), "prior": float(m["prior"])} for m in search["moves"][:12]]}


def make_app(games: Games):
    """The Starlette app: ``/`` the page, ``/api/info``, ``POST /api/new``, ``GET /api/game/ID``,
    ``POST /api/game/ID/move``; 4xx replies carry ``{"error": "one line"}``."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse
    from starlette.routing import Route

    from moozi.eval.session import IllegalMove

    page = (Path(__file__).parent / "page.html").read_text()

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

    def guarded(handler):
        async def wrapped(request: Request):
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
        s = games.session
        return {"game": s.game, "agent": games.agent_id, "card": games.card, "num_actions": s.spec.num_actions}

    async def new(request: Request):
        data = await body(request)
        seat = data.get("human_seat", 0)
        if not isinstance(seat, int) or isinstance(seat, bool):
            raise ValueError(f"human_seat = {seat!r} is invalid: allowed 0 (move first) or 1 (second)")
        return await run_in_threadpool(games.new, seat)  # the agent thinks off the event loop

    async def get(request: Request):
        return await run_in_threadpool(games.state, request.path_params["gid"])

    async def move(request: Request):
        data = await body(request)
        action = data.get("action")
        if not isinstance(action, int) or isinstance(action, bool):
            raise ValueError(f"action = {action!r} is invalid: allowed a move's action index (see legal)")
        return await run_in_threadpool(games.move, request.path_params["gid"], action)

    async def index(request: Request):
        return HTMLResponse(page)

    return Starlette(routes=[Route("/", index), Route("/api/info", guarded(info)),
                             Route("/api/new", guarded(new), methods=["POST"]),
                             Route("/api/game/{gid}", guarded(get)),
                             Route("/api/game/{gid}/move", guarded(move), methods=["POST"])])


def build(agent: str, game: str | None = None, seed: int = 0, modules=()) -> Games:
    """The games over ``agent`` (a run, an agent file, ``zoo:NAME`` or any player string) on its game."""
    from moozi.config import ConfigError
    from moozi.eval.arena import game_of
    from moozi.eval.players import make_player
    from moozi.eval.session import GameSession

    name, kwargs, modules = game_of([agent], game, modules)
    player = make_player(agent, name, seed=seed, game_kwargs=kwargs)
    try:
        session = GameSession(name, player, seed, kwargs, modules)
    except ConfigError:
        player.close()
        raise
    return Games(session, player.spec.id, {"agent": agent, "game": name})


def serve(agent: str, game: str | None = None, host: str = "127.0.0.1", port: int = 8000, seed: int = 0,
          modules=(), ready=None) -> None:
    """Build the games and serve them until Ctrl-C; ``ready(url)`` is called once the server listens."""
    import socket

    import uvicorn

    games = build(agent, game, seed, modules)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    url = f"http://{host if ':' not in host else f'[{host}]'}:{sock.getsockname()[1]}/"
    config = uvicorn.Config(make_app(games), log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    if ready is not None:
        original = server.startup

        async def startup(sockets=None):
            await original(sockets=sockets)
            ready(url)

        server.startup = startup
    try:
        server.run(sockets=[sock])
    finally:
        games.session.player.close()
        games.session.close()
