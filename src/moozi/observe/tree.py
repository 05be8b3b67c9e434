"""Search-tree views: the planner's tree at one position, checked against the real game, as SVG and DOT.

:func:`tree_nodes` turns one element of an ``mctx.Tree`` (the planner's
``return_tree`` output) into visited :class:`TreeNode` records: visits, the
backed-up value and Q, the prior, and the model's predicted reward and value.
:func:`check_against_game` follows every node's actions in the real game from
the same position and adds the true reward, whether each move was legal and
whether the game had already ended, flagging the nodes where the model
disagrees with the game: a predicted reward more than ``threshold`` from the
true one, or an illegal move the search visited. Stochastic games are
followed with the game's own random stream from the position (one sample of
what could happen), so a flag there is a hint, not a proof.

A Stochastic MuZero run's tree is drawn with its two kinds of node: a move's
box is the afterstate it leads to (legality checked there), and each of the
model's chance outcomes below it (``chance c``, its probability and the
model's reward of the move with it, checked against the game's reward of the
move as the game's own chance played it).

``moozi tree RUN`` (:func:`view_position`) reaches a position (moves from the
start, or the test planner's own game after N steps), searches it with the
test planner and writes ``RUN/trees/tree-UPDATES-POSITION.svg`` and ``.dot``.
"""

from __future__ import annotations

import html
from dataclasses import replace
from pathlib import Path

import numpy as np

from moozi.search_tree import TreeNode, path_to, principal_path, tree_nodes  # noqa: F401  (re-exported)


def check_against_game(nodes: list[TreeNode], follow, threshold: float = 0.25) -> list[TreeNode]:
    """Add the real game's reward and legality to every node, with disagreement flags.

    ``follow(env_actions) -> [(legal, reward, over_before)]``, one entry per action:
    whether the real game allowed it, the reward it paid the mover, and whether the
    game had already ended before it (then nothing is played and the reward is 0).
    """
    out = []
    for node in nodes:
        if node.parent < 0:
            out.append(node)
            continue
        steps = follow([a - 1 for a in path_to(nodes, node)])  # an outcome's last step: the move above it
        legal, reward, over = steps[-1]
        blocked = any(not ok for ok, _, done in steps[:-1] if not done)  # an earlier illegal move: no real game below
        if blocked or (node.outcome is not None and not over and not legal):
            out.append(replace(node, legal=None, flags=("below an illegal move",)))
            continue
        flags = []
        if over:
            truth, legal_flag = 0.0, None
        else:
            truth, legal_flag = (float(reward) if legal else None), bool(legal)
            if not legal:
                flags.append("illegal move searched")
        if node.afterstate:  # the move's reward is the model's on its outcomes' edges, checked there
            truth = None
        elif node.outcome is not None:  # the move's legality is its afterstate's
            legal_flag = None
        if truth is not None and abs(node.reward - truth) > threshold:
            flags.append(f"reward {_signed(node.reward, 2)}, game {_signed(truth, 2)}")
        out.append(replace(node, true_reward=truth, legal=legal_flag, game_over=over, flags=tuple(flags)))
    return out


def _signed(x: float, digits: int) -> str:
    """``x`` with its sign and ``digits`` decimals; a value that rounds to zero reads +0.000, never -0.000."""
    rounded = round(float(x), digits)
    return f"{rounded if rounded != 0 else 0.0:+.{digits}f}"


def _label(n: TreeNode, action_name) -> list[str]:
    """A node's lines; ``action_name(node, env_action)`` names its move (the game's notation where it has one)."""
    if n.outcome is not None:
        head = f"chance {n.outcome}"
    else:
        head = "root" if n.parent < 0 else "dummy" if n.action == 0 else f"{action_name(n, n.action - 1)}"
    lines = [f"{head}  N={n.visits}", f"Q={_signed(n.q, 3)}  v={_signed(n.raw_value, 3)}"]
    if n.afterstate:
        lines.append(f"p={n.prior:.2f}  afterstate")
    elif n.parent >= 0:
        lines.append(f"p={n.prior:.2f}  r={_signed(n.reward, 2)}")
        if n.game_over:
            lines.append("game over before")
        elif n.legal is False:
            lines.append("illegal in the game")
        elif n.true_reward is not None:
            lines.append(f"game r={_signed(n.true_reward, 2)}")
    return lines


def _index_name(node: TreeNode, action: int) -> str:
    return str(action)


LEGEND = ("N visits, Q the move's value for its mover (reward + discount x value), v the network's value,",
          "p the prior, r the model's reward, game r the game's; red: the model and the game disagree")
CHANCE_LEGEND = ("a move's box is its afterstate (Q and v for the mover); 'chance c': the model's outcome c below it,",
                 "p its probability, r the model's reward of the move with it, game r the game's (its own chance)")


def legend(nodes: list[TreeNode]) -> tuple[str, ...]:
    """The legend's lines for this tree (two more where it has chance outcomes)."""
    return LEGEND + (CHANCE_LEGEND if any(n.afterstate for n in nodes) else ())


CHAR_W = 6.8  # monospace 11 px: the width of one character


def to_dot(nodes: list[TreeNode], title: str = "", action_name=_index_name) -> str:
    """Graphviz DOT text of the tree (flagged nodes in red)."""
    out = ["digraph search {", f"  label={_dot_str(chr(10).join((title, *legend(nodes))))}; labelloc=t;",
           "  node [shape=box fontsize=10];"]
    for n in nodes:
        colour = ' color=red fontcolor=red' if n.flags else ""
        out.append(f"  n{n.id} [label={_dot_str(chr(10).join(_label(n, action_name) + list(n.flags)))}{colour}];")
    for n in nodes:
        if n.parent >= 0:
            out.append(f"  n{n.parent} -> n{n.id};")
    out.append("}")
    return "\n".join(out) + "\n"


def _dot_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_svg(nodes: list[TreeNode], title: str = "", action_name=_index_name, box_w: int | None = None,
           line_h: int = 13, position_png: bytes | None = None) -> str:
    """A self-contained SVG drawing: depth downwards, children ordered by visits, flagged nodes red, a legend
    under the title, and the searched position drawn at the top left (``position_png``, a PNG image)."""
    children: dict[int, list[TreeNode]] = {}
    for n in nodes:
        if n.parent >= 0:
            children.setdefault(n.parent, []).append(n)
    for kids in children.values():
        kids.sort(key=lambda k: (-k.visits, k.action))
    x_of: dict[int, float] = {}
    next_x = [0]

    def place(n: TreeNode) -> float:  # leaves left to right; a parent centred over its children
        kids = children.get(n.id, [])
        x_of[n.id] = sum(place(k) for k in kids) / len(kids) if kids else float(next_x[0])
        if not kids:
            next_x[0] += 1
        return x_of[n.id]

    root = nodes[0]
    place(root)
    labels = {n.id: _label(n, action_name) + list(n.flags) for n in nodes}
    if box_w is None:  # every line fits its box
        box_w = int(max(len(line) for lines in labels.values() for line in lines) * CHAR_W + 12)
    rows = max(len(lines) for lines in labels.values())
    box_h = rows * line_h + 8
    notes = legend(nodes)
    picture = 0 if position_png is None else 96
    gap_x, gap_y = 12, 36
    top = 40 + 12 * len(notes) + picture
    text_w = max(len(title) * 7.5, max(len(line) for line in notes) * 6.2) + 2 * gap_x  # 13 px and 10 px fonts
    width = int(max(max(next_x[0], 1) * (box_w + gap_x) + gap_x, text_w))
    depth = max(n.depth for n in nodes)
    height = int(top + (depth + 1) * (box_h + gap_y))

    def pos(n):
        return gap_x + x_of[n.id] * (box_w + gap_x), top + n.depth * (box_h + gap_y)

    esc = html.escape
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
           f"viewBox='0 0 {width} {height}' font-family='monospace' font-size='11'>",
           f"<rect width='{width}' height='{height}' fill='white'/>",
           f"<text x='{gap_x}' y='20' font-size='13' font-weight='bold'>{esc(title)}</text>",
           *(f"<text x='{gap_x}' y='{36 + 12 * i}' font-size='10' fill='#555'>{esc(line)}</text>"
             for i, line in enumerate(notes))]
    if position_png is not None:
        import base64

        data = base64.b64encode(position_png).decode()
        out.append(f"<image x='{gap_x}' y='{34 + 12 * len(notes)}' width='{picture - 8}' height='{picture - 8}' "
                   f"href='data:image/png;base64,{data}'/>")
    for n in nodes:
        if n.parent >= 0:
            (x0, y0), (x1, y1) = pos(next(p for p in nodes if p.id == n.parent)), pos(n)
            w = 1 + 3 * n.visits / max(root.visits, 1)
            out.append(f"<line x1='{x0 + box_w / 2:.1f}' y1='{y0 + box_h:.1f}' x2='{x1 + box_w / 2:.1f}' y2='{y1:.1f}' "
                       f"stroke='#888' stroke-width='{w:.2f}'/>")
    for n in nodes:
        x, y = pos(n)
        bad = bool(n.flags)
        out.append(f"<rect x='{x:.1f}' y='{y:.1f}' width='{box_w}' height='{box_h}' rx='4' "
                   f"fill='{'#fde8e8' if bad else '#f4f6fb'}' stroke='{'#d22' if bad else '#567'}'/>")
        plain = len(labels[n.id]) - len(n.flags)
        for i, line in enumerate(labels[n.id]):
            colour = "#b00" if i >= plain else "#111"
            out.append(f"<text x='{x + 5:.1f}' y='{y + 14 + i * line_h:.1f}' fill='{colour}'>{esc(line)}</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


# --- moozi tree: reach a position, search it, compare with the game ---------------------------------


class GameReplay:
    """The real game replayed from its start (``seed``) through ``moves`` (environment actions).

    :meth:`follow` plays further actions from that position, from scratch each
    time (the game's own state is never shared with the search).
    """

    def __init__(self, name: str, kwargs: dict, modules, seed: int, moves: list[int]):
        from moozi.envs.pool import make_pool

        self.pool = make_pool(name, 1, seed=seed, modules=modules, **kwargs)
        self.seed, self.moves = seed, list(moves)
        self.timesteps = [self.pool.reset(seed)]  # the position's history (for the network's frames)
        for m in self.moves:
            self._check(self.timesteps[-1], m)
            self.timesteps.append(self.pool.step(np.asarray([m])))

    @staticmethod
    def _check(ts, m: int) -> None:
        from moozi.envs.contract import IllegalActionError

        legal = np.asarray(ts.legal_actions)[0]
        if bool(np.asarray(ts.is_last)[0]):
            raise IllegalActionError(f"the game ended before move {m}")
        if not 0 <= m < legal.size or not legal[m]:
            raise IllegalActionError(f"move {m} is not legal here: legal moves are {np.flatnonzero(legal).tolist()}")

    def follow(self, actions: list[int]) -> list[tuple[bool, float, bool]]:
        ts = self.pool.reset(self.seed)
        for m in self.moves:
            ts = self.pool.step(np.asarray([m]))
        out = []
        over = False
        for a in actions:
            over = over or bool(np.asarray(ts.is_last)[0])
            legal = np.asarray(ts.legal_actions)[0]
            ok = (not over) and 0 <= a < legal.size and bool(legal[a])
            if over or not ok:
                out.append((ok, 0.0, over))
                if not over:
                    over = True  # nothing real below an illegal move
                continue
            ts = self.pool.step(np.asarray([a]))
            out.append((True, float(np.asarray(ts.reward)[0]), False))
        return out

    def close(self) -> None:
        self.pool.close()


def _twin(game: str, kwargs: dict):
    """The game's OpenSpiel form, to name moves as the game writes them (None: it has none, or it has chance: its
    moves alone do not replay it)."""
    from moozi.config import ConfigError
    from moozi.envs.openspiel_bridge import openspiel_game

    try:
        twin = openspiel_game(game, kwargs)
    except (ConfigError, ImportError):
        return None
    import pyspiel

    return twin if twin.get_type().chance_mode == pyspiel.GameType.ChanceMode.DETERMINISTIC else None


def move_namer(nodes: list[TreeNode], twin, moves: list[int]):
    """``(node, env_action) -> str``: a node's move in the game's notation, from the position after ``moves``
    (indices where the game has no OpenSpiel form, or below a move the game does not allow)."""
    if twin is None:
        return _index_name
    root = twin.new_initial_state()
    for m in moves:
        root.apply_action(m)

    def name(node: TreeNode, action: int) -> str:
        state = root.clone()
        for a in path_to(nodes, node)[:-1]:
            if a == 0 or state.is_terminal() or a - 1 not in state.legal_actions():
                return str(action)
            state.apply_action(a - 1)
        if state.is_terminal():
            return str(action)
        try:
            return state.action_to_string(state.current_player(), action)
        except Exception:  # OpenSpiel cannot name every index
            return str(action)

    return name


def _position_png(spec, ts) -> bytes | None:
    """The searched position drawn as a PNG (None where it cannot be drawn)."""
    from moozi.observe.render import render_png

    return render_png(spec, np.asarray(ts.observation)[0], int(np.asarray(ts.to_play)[0]), size=88)


def _check_drawable(run_dir, config) -> None:
    """A ConfigError for the runs whose search this view does not draw: AlphaZero mode."""
    from moozi.errors import ConfigError

    if config.model.dynamics == "simulator":
        raise ConfigError(f"{run_dir} was trained in AlphaZero mode (model.dynamics = simulator): its search steps "
                          "the game itself, and the tree view shows the learned model's search; its search per move "
                          "is shown by `moozi play RUN` (hint) and `moozi gtp RUN` (moozi-analyze)")


def view_position(run_dir, moves: list[int] | None = None, episode_step: int | None = None,
                  checkpoint: str = "latest", seed: int = 0, threshold: float = 0.25, out_dir=None,
                  simulations: int | None = None, position: str | None = None) -> dict:
    """Search one position of a run's game with its test planner and write the tree as SVG and DOT.

    The position: ``moves`` (environment actions from the start of a game seeded
    with ``seed``), ``position`` (the same written as text, in the game's notation
    or as indices: ``"x(1,1) o(0,0)"``, ``"4 0 8"``), or the test planner's own
    greedy game after ``episode_step`` moves. ``simulations`` replaces the test
    planner's simulation count. Returns the paths, the nodes and the number of flagged nodes.
    """
    import dataclasses

    import jax
    import jax.numpy as jnp

    from moozi.model.history import history_init, history_observation, history_push
    from moozi.planner import plan, readable_tree
    from moozi.run_dir import load_run_config, open_run, views_dir

    config = load_run_config(run_dir)
    _check_drawable(run_dir, config)
    if simulations is not None:
        config = dataclasses.replace(config, test_planner=dataclasses.replace(config.test_planner,
                                                                              num_simulations=int(simulations)))
    opened = open_run(run_dir, checkpoint, config)
    spec, model, meta = opened.spec, opened.model, opened.meta
    params = jax.device_put(opened.params)
    A, L = model.num_actions, config.targets.history_length
    two = spec.two_player

    @jax.jit
    def search(frames, actions, legal, key):
        obs = history_observation((frames, actions), A)
        out, tree = plan(model, params, key, obs, legal, config.test_planner, discount=config.targets.discount,
                         two_player=two, temperature=jnp.zeros(1), gumbel_scale=jnp.zeros(1), return_tree=True)
        return out, readable_tree(model, params, tree, discount=config.targets.discount, two_player=two)

    def history_of(timesteps, played):
        h = history_init(1, spec.observation_shape, L)
        for i, ts in enumerate(timesteps):
            prev = jnp.asarray([played[i - 1] + 1 if i else 0])
            h = history_push(h, jnp.asarray(ts.observation), prev, jnp.asarray([i == 0]))
        return h

    key = jax.random.key(seed)
    twin = _twin(config.env.name, config.env.kwargs)
    if position is not None:
        from moozi.envs.notation import parse_position

        moves = parse_position(position, twin, spec.num_actions)  # the replay below checks moves without a twin
    if moves is None:  # the test planner's own game up to episode_step
        moves = []
        game = GameReplay(config.env.name, config.env.kwargs, config.env.modules, seed, [])
        try:
            for _ in range(int(episode_step or 0)):
                ts = game.timesteps[-1]
                if bool(np.asarray(ts.is_last)[0]):
                    break
                h = history_of(game.timesteps, moves)
                out, _ = search(h[0], h[1], jnp.asarray(ts.legal_actions), key)
                move = int(out.env_action[0])
                moves.append(move)
                game.timesteps.append(game.pool.step(np.asarray([move])))
        finally:
            game.close()
    game = GameReplay(config.env.name, config.env.kwargs, config.env.modules, seed, moves)
    try:
        ts = game.timesteps[-1]
        if bool(np.asarray(ts.is_last)[0]):
            from moozi.envs.contract import IllegalActionError

            raise IllegalActionError(f"the game is over after moves {moves}: nothing to search")
        h = history_of(game.timesteps, moves)
        out, tree = search(h[0], h[1], jnp.asarray(ts.legal_actions), key)
        nodes = check_against_game(tree_nodes(jax.device_get(tree)), game.follow, threshold)
        picture = _position_png(spec, ts)
    finally:
        game.close()
    namer = move_namer(nodes, twin, moves)
    root_name = lambda a: namer(nodes[0], a)  # noqa: E731  (moves from the searched position)
    updates = int(meta["counters"]["updates"])
    where = "-".join(str(m) for m in moves) or "start"
    played = _played_names(twin, moves)
    title = (f"{config.env.name}, update {updates:,}, after [{' '.join(played)}]: "
             f"{config.test_planner.kind} {config.test_planner.num_simulations} simulations, "
             f"chose {root_name(int(out.env_action[0]))}")
    out_dir = Path(out_dir) if out_dir else views_dir(run_dir, "trees")
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"tree-{updates:09d}-{where[:60]}"
    svg, dot = stem.with_suffix(".svg"), stem.with_suffix(".dot")
    svg.write_text(to_svg(nodes, title, namer, position_png=picture))
    dot.write_text(to_dot(nodes, title, namer))
    return {"svg": str(svg), "dot": str(dot), "moves": moves, "chosen": int(out.env_action[0]),
            "root_value": float(out.root_value[0]), "nodes": len(nodes),
            "flagged": sum(bool(n.flags) for n in nodes), "checkpoint": meta["path"]}


def _played_names(twin, moves: list[int]) -> list[str]:
    """The moves of the position in the game's notation (indices without an OpenSpiel form)."""
    if twin is None:
        return [str(m) for m in moves]
    state, names = twin.new_initial_state(), []
    for m in moves:
        names.append(state.action_to_string(state.current_player(), m))
        state.apply_action(m)
    return names
