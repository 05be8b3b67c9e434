"""The agent's search as the page shows it (plain JSON), for both the board page and the watched episodes."""

from __future__ import annotations


def index_name(step: int, action: int) -> str:
    """A move named by its action index (games with no notation of their own)."""
    return str(action)


def search_view(search: dict, name, two_player: bool = True) -> dict:
    """The agent's search, JSON-ready: its value for itself, simulations, per move visit share and prior, and the
    line its model predicts (``path``: each move named by ``name(step, action)``, the model's reward and value
    for the agent, visits)."""
    view = {"value": float(search["value"]), "network_value": float(search["network_value"]),
            "simulations": int(search["simulations"]),
            "moves": [{"action": int(m["action"]), "name": name(-1, int(m["action"])), "policy": float(m["policy"]),
                       "prior": float(m["prior"])} for m in search["moves"][:12]]}
    if "path" in search:
        view["path"] = [{"action": int(step["action"]),
                         "name": "(no move)" if step["action"] < 0 else name(i, step["action"]),
                         "by": ("agent" if i % 2 == 0 else "opponent") if two_player else "agent",
                         "visits": int(step["visits"]), "reward": float(step["reward"]),
                         "value": float(step["value"])} for i, step in enumerate(search["path"])]
    return view


def line_namer(root, path: list[dict]):
    """``(step, action) -> name``: a move of the predicted ``path`` named in its own position (``root``: the game's
    OpenSpiel twin at the searched position, followed along the line; step -1: a move at the root); the action
    index where there is no twin or it cannot follow."""
    from moozi.envs.notation import move_name

    states = [root]
    for step in path:
        state = states[-1]
        if state is None or step["action"] < 0 or state.is_terminal() or step["action"] not in state.legal_actions():
            states.append(None)
            continue
        state = state.clone()
        state.apply_action(step["action"])
        states.append(state)

    def name(i: int, action: int) -> str:
        state = states[max(i, 0)] if i < len(states) else None
        return move_name(state, action) if state is not None else str(action)

    return name
