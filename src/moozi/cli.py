"""Command-line entry point: ``moozi <command>``.

Commands are added as the system grows; each parses its own arguments and
imports its heavy dependencies only when it runs (no work at import time).
"""

from __future__ import annotations

import argparse
import errno
import json
import sys

# Commands that compile nothing, so need not import JAX to point it at the compile cache.
_NO_COMPILE = ("presets", "envs", "report")

# Disk problems a user fixes (read-only, full, no permission, quota): one line, no traceback.
_DISK_ERRORS = {errno.EROFS, errno.ENOSPC, errno.EACCES, errno.EPERM, errno.EDQUOT}


def _demo(args: argparse.Namespace) -> int:
    """Search tic-tac-toe positions with the exact model; print move and root value."""
    import jax
    import jax.numpy as jnp
    from rich.console import Console
    from rich.table import Table

    from moozi.config import PlannerConfig
    from moozi.games import tictactoe as ttt
    from moozi.planner import search

    positions = [
        ("XX./OO./...", "X", "X completes the top row at cell 2"),
        ("XX./OO./X..", "O", "O completes the middle row at cell 5"),
        ("XX./XO./..O", "O", "O is lost: X threatens cells 2 and 6"),
    ]
    cells = jnp.stack([ttt.from_string(board, mover) for board, mover, _ in positions])
    console = Console()
    console.print(f"[bold]moozi demo[/bold]: tic-tac-toe searched with the exact model, {args.simulations} simulations")
    for i, (board, mover, note) in enumerate(positions):
        console.print(f"  position {i}: {board} ({mover} to move) - {note}")
    table = Table()
    for col in ("position", "planner", "move (cell)", "root value", "p*(move)"):
        table.add_column(col, justify="right")
    for kind in ("puct", "gumbel"):
        config = PlannerConfig(
            kind=kind, num_simulations=args.simulations, dirichlet_fraction=0.0, gumbel_scale=0.0
        )
        run = jax.jit(
            lambda rng, c: search(None, rng, ttt.root(c), ttt.step, ttt.legal_actions(c), config, discount=1.0,
                                  two_player=True, temperature=0.0)
        )
        out = run(jax.random.key(args.seed), cells)
        for i in range(len(positions)):
            move = int(out.env_action[i])
            table.add_row(
                str(i), kind, str(move), f"{float(out.root_value[i]):+.3f}", f"{float(out.root_policy[i, move + 1]):.2f}"
            )
    console.print(table)
    console.print("Cells are numbered 0..8 row by row; values are from the point of view of the player to move.")
    return 0


class _Progress:
    """Rich live display: what the run is doing, env steps, rates, last test return, health, time."""

    def __init__(self, title: str, minutes, started: float):
        from rich.console import Console
        from rich.live import Live

        self.title = title
        self.minutes = minutes
        self.started = started
        self.status = "starting: building the game and the model"
        self.counters, self.row, self.test = {}, {}, {}
        self.console = Console(stderr=True)
        self.live = Live(self._render(), console=self.console, refresh_per_second=2, transient=False,
                         get_renderable=self._render)

    def _render(self):
        import time

        from rich.table import Table

        counters, row, test = self.counters, self.row, self.test
        table = Table(title=self.title, show_header=False, box=None)
        fmt = lambda v, p=0: "-" if v is None else f"{v:,.{p}f}"  # noqa: E731
        table.add_row("status", self.status)
        table.add_row("env steps", fmt(counters.get("env_steps")))
        table.add_row("env steps/s", fmt(row.get("perf/env_steps_per_s"), 1))
        table.add_row("updates", fmt(counters.get("updates")))
        table.add_row("updates/s", fmt(row.get("perf/updates_per_s"), 2))
        table.add_row("episodes", fmt(counters.get("episodes")))
        table.add_row("last test return", fmt(test.get("test/return_mean"), 2))
        if "health/ok" in row:
            table.add_row("health", "ok" if row["health/ok"] else "[yellow]not learning? see the warning above")
        elapsed = time.monotonic() - self.started  # this invocation, the time --minutes limits
        limit = f" / {self.minutes * 60:.0f} s" if self.minutes else ""
        total = counters.get("wall_s")
        table.add_row("time", f"{elapsed:,.0f} s{limit}" + (f" (run total {total:,.0f} s)" if total else ""))
        return table

    def __call__(self, counters, row, test):
        self.counters, self.row, self.test = counters, row, test
        self.status = "training" if counters.get("updates") else "acting: filling replay before the first update"

    def __enter__(self):
        self.live.__enter__()
        return self

    def __exit__(self, exc_type, *rest):
        if exc_type is not None:  # an error or Ctrl-C: leave its message alone on the console
            self.live.transient = True
        return self.live.__exit__(exc_type, *rest)


def _with_backend(config, args: argparse.Namespace):
    """Apply --backend / --address (also on --resume: where a run executes is not part of what it is)."""
    import dataclasses

    if args.address and (args.backend or config.distributed.backend) != "ray":
        raise SystemExit("moozi train: --address needs --backend ray")
    changes = {}
    if args.backend:
        changes["backend"] = args.backend
    if args.address:
        changes["address"] = args.address
    if args.backend == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise SystemExit("moozi train: --backend ray needs Ray: pip install 'moozi[ray]'") from None
    return dataclasses.replace(config, distributed=dataclasses.replace(config.distributed, **changes)) if changes else config


def _train(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from moozi.config import apply_overrides, config_from_dict
    from moozi.driver import Trainer, load_run_config
    from moozi.presets import load_preset, preset_names

    started = time.monotonic()
    if args.minutes is not None and not args.minutes > 0:
        print(f"moozi train: --minutes {args.minutes:g} is invalid: allowed a number > 0 (leave it out to train "
              "until schedule.max_env_steps)", file=sys.stderr)
        return 2
    if args.resume:
        if args.preset or args.overrides or args.seed is not None or args.run_dir:
            print("moozi train: --resume DIR takes only --minutes, --backend and --address (the run's config is reused)", file=sys.stderr)
            return 2
        run_dir = Path(args.resume)
        config = load_run_config(run_dir)
        resume = True
        config = _with_backend(config, args)
    else:
        if not args.preset:
            print("moozi train: give --preset NAME (one of " + ", ".join(preset_names()) + ") or --resume DIR", file=sys.stderr)
            return 2
        data = load_preset(args.preset)
        overrides = list(args.overrides)
        if args.seed is not None:
            overrides.append(f"schedule.seed={args.seed}")
        config = _with_backend(config_from_dict(apply_overrides(data, overrides)), args)
        run_dir = Path(args.run_dir or f"runs/{Path(args.preset).stem}-{time.strftime('%Y%m%d-%H%M%S')}")
        if (run_dir / "checkpoints").exists() and any((run_dir / "checkpoints").iterdir()):
            print(f"moozi train: {run_dir} already holds checkpoints; use --resume {run_dir} or another --run-dir", file=sys.stderr)
            return 2
        resume = False
    progress = _Progress(f"moozi train {config.env.name} -> {run_dir}", args.minutes, started)
    _log_console(progress.console)
    trainer = None
    with progress:
        try:
            trainer = Trainer(config, run_dir, resume=resume, progress=progress)
            _record_command(run_dir, args.argv)
            _check_interrupted()
            progress.status = "compiling the acting and learning steps (the first epoch)"
            counters = trainer.run(minutes=args.minutes, started=started)
        finally:
            if trainer is not None:
                trainer.close()
    summary = {"run_dir": str(run_dir), **counters, **trainer.last_test}
    print(json.dumps(summary))
    return 0


def _record_command(run_dir, argv: list[str]) -> None:
    """Append the command as typed to RUN/commands.txt (the report shows how a run was made and resumed)."""
    import datetime
    import shlex

    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    with open(run_dir / "commands.txt", "a") as f:
        f.write(f"{stamp}  moozi {shlex.join(argv)}\n")


def _eval(args: argparse.Namespace) -> int:
    from moozi.eval.evaluate import evaluate

    if args.games < 1:
        print("moozi eval: --games must be >= 1", file=sys.stderr)
        return 2
    _log_console()
    result = evaluate(args.run_dir, opponent=args.opponent, games=args.games, seed=args.seed,
                      checkpoint=args.checkpoint)
    print(json.dumps(result))
    return 0


def _match(args: argparse.Namespace) -> int:
    from moozi.eval.arena import run_match
    from moozi.eval.gating import gate_spec

    gate = None if not args.gate else gate_spec(args.gate, args.elo0, args.elo1, args.alpha, args.beta,
                                                 args.margin, args.threshold)
    _log_console()
    result = run_match(args.a, args.b, game=args.game, pairs=args.pairs, opening_plies=args.opening_plies,
                       seed=args.seed, batch=args.batch, records=args.records, pool_file=args.pool, gate=gate)
    if args.json:
        print(json.dumps(result))
    else:
        print(_match_table(result))
    return 0


def _match_table(r: dict) -> str:
    """A short human summary of a match (``--json`` prints everything)."""
    def fmt(i, scale=1.0, digits=3):
        return f"{_num(i['value'], scale, digits)} [{_num(i['low'], scale, digits)}, {_num(i['high'], scale, digits)}]"

    lines = [
        f"{r['game']}: {r['games']} games ({r['pairs']} pairs, {r['opening_plies']} random opening plies, "
        f"seed {r['seed']})",
        f"A = {r['a']['id']}",
        f"B = {r['b']['id']}",
        f"A: {r['wins']} wins / {r['draws']} draws / {r['losses']} losses"
        f"  (moving first {r['a_first']['wins']}/{r['a_first']['draws']}/{r['a_first']['losses']}, "
        f"second {r['a_second']['wins']}/{r['a_second']['draws']}/{r['a_second']['losses']})",
        f"score of A (95%, from pairs): {fmt(r['score'])}",
        f"Elo of A - B (95%): {fmt(r['elo'], digits=0)}",
        f"win rate {fmt(r['win_rate'])}, loss rate {fmt(r['loss_rate'])} (Wilson 95%)",
        f"distinct games {100 * r['distinct_games']:.0f}%, mean plies {r['mean_plies']:.1f}, ms per move: "
        f"A {r['ms_per_move']['a']:.3f}, B {r['ms_per_move']['b']:.3f}; {r['wall_s']:.1f} s",
        f"records: {r['records']}",
    ]
    if "gate" in r:
        g = r["gate"]
        detail = (f"LLR {g['llr']:.2f} in [{g['bounds'][0]:.2f}, {g['bounds'][1]:.2f}]" if g["method"] == "sprt"
                  else f"{g['pairs_used']} pairs")
        lines.append(f"gate ({g['method']}): {g['decision'].upper()} A after {g['pairs_used']} pairs; {detail}")
    return "\n".join(lines)


def _num(x, scale, digits):
    return f"{round(x * scale, digits) + 0.0:.{digits}f}" if isinstance(x, float) else str(x)  # no "-0"


def _gtp(args: argparse.Namespace) -> int:
    from moozi.eval.arena import game_of
    from moozi.eval.gtp import GTPEngine

    _log_console()
    game, kwargs, modules = game_of([args.player], args.game)
    GTPEngine(args.player, game, seed=args.seed, game_kwargs=kwargs, modules=modules).serve()
    return 0


def _play(args: argparse.Namespace) -> int:
    from moozi.eval.arena import game_of
    from moozi.eval.play import play_terminal
    from moozi.eval.players import make_player
    from moozi.eval.session import GameSession

    _log_console()
    game, kwargs, modules = game_of([args.player], args.game)
    session = GameSession(game, make_player(args.player, game, args.seed, kwargs), args.seed, kwargs, modules)
    try:
        play_terminal(session, 1 if args.second else 0)
    finally:
        session.close()
    return 0


def _ratings(args: argparse.Namespace) -> int:
    from moozi.eval.ratings import ratings_table, read_pool

    table = ratings_table(read_pool(args.pools), anchor=args.anchor, game=args.game)
    if args.json:
        print(json.dumps(table))
        return 0
    width = max(len(r["player"]) for r in table["players"])
    print(f"{table['game']}: {table['games']} games; Elo (logistic) with 95% intervals, {table['anchor']} = 0; first-move advantage "
          f"{table['first_move']:+.0f} +- {1.96 * table['first_move_sd']:.0f}")
    print(f"{'player':<{width}}  {'rating':>7}  {'95% interval':>17}  {'games':>6}  {'score':>5}")
    for r in table["players"]:
        print(f"{r['player']:<{width}}  {r['rating']:7.0f}  [{r['low']:7.0f}, {r['high']:7.0f}]  {r['games']:6d}  "
              f"{r['score']:5.3f}")
    return 0


def _watch(args: argparse.Namespace) -> int:
    from moozi.observe.gif import watch_run

    if args.episodes < 1:
        print("moozi watch: --episodes must be >= 1", file=sys.stderr)
        return 2
    _log_console()
    print(json.dumps(watch_run(args.run_dir, args.episodes, args.opponent, args.seed, args.checkpoint, args.out,
                               args.fps, args.max_frames)))
    return 0


def _tree(args: argparse.Namespace) -> int:
    from moozi.config import ConfigError
    from moozi.observe.tree import view_position

    moves = None
    if args.position is not None:
        try:
            moves = [int(m) for m in args.position.replace(",", " ").split()]
        except ValueError:
            raise ConfigError(f"--position {args.position!r}: allowed environment action numbers separated by "
                              "spaces, e.g. --position '4 0 8'") from None
    _log_console()
    result = view_position(args.run_dir, moves=moves, episode_step=args.episode_step, checkpoint=args.checkpoint,
                           seed=args.seed, threshold=args.threshold, out_dir=args.out_dir,
                           simulations=args.simulations)
    print(json.dumps(result))
    return 0


def _embed(args: argparse.Namespace) -> int:
    from moozi.observe.embed import embed_run

    if args.episodes < 1:
        print("moozi embed: --episodes must be >= 1", file=sys.stderr)
        return 2
    _log_console()
    try:
        result = embed_run(args.run_dir, episodes=args.episodes, colour_by=args.colour, checkpoint=args.checkpoint,
                           seed=args.seed, out_dir=args.out_dir)
    except ImportError as err:
        print(f"moozi embed: {err}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


def _report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from moozi.observe.report import write_report

    out = Path(args.out) if args.out else Path(args.run_dirs[0]) / "report.html"
    try:
        write_report(args.run_dirs, out)
    except FileNotFoundError as err:
        print(f"moozi report: {err}", file=sys.stderr)
        return 2
    print(json.dumps({"report": str(out), "runs": args.run_dirs}))
    return 0


def _presets(args: argparse.Namespace) -> int:
    from moozi.presets import preset_names

    print("\n".join(preset_names()))
    return 0


def _envs(args: argparse.Namespace) -> int:
    from moozi.envs import list_envs

    for name in list_envs():
        print(name)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="moozi", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="search a few tic-tac-toe positions and print the chosen moves")
    demo.add_argument("--simulations", type=int, default=64, help="simulations per search (default 64)")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=_demo)

    train = sub.add_parser("train", help="train an agent from a preset, or resume a run")
    train.add_argument("--preset", help="preset name (see `moozi presets`) or path to a preset YAML file")
    train.add_argument("--resume", metavar="DIR", help="continue the run in DIR from its newest good checkpoint")
    train.add_argument("--run-dir", help="run directory (default runs/PRESET-TIMESTAMP)")
    train.add_argument("--minutes", type=float, default=None, help="stop cleanly after M minutes, with a final checkpoint")
    train.add_argument("--seed", type=int, default=None, help="random seed (schedule.seed)")
    train.add_argument("--backend", choices=["local", "ray"], default=None,
                       help="where components run: local (default, one process) or ray (pip install 'moozi[ray]')")
    train.add_argument("--address", default=None, metavar="HOST:PORT",
                       help="with --backend ray: an existing Ray cluster (default: start a private one)")
    train.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="dotted overrides, e.g. schedule.batch_size=64")
    train.set_defaults(func=_train)

    ev = sub.add_parser("eval", help="play a trained agent against an opponent; prints one JSON line",
                        description="Play a checkpoint of a run (test planner, greedy moves) and "
                                    "print one JSON line: wins/draws/losses (two-player games, the agent taking "
                                    "each seat in half the games) or return statistics (single-player games).")
    ev.add_argument("run_dir", metavar="DIR", help="a run directory written by `moozi train`")
    ev.add_argument("--opponent", default="random",
                    help="two-player games: random (uniform legal moves, any game), perfect (tic-tac-toe only) "
                         "or any `moozi match` player (os-mcts-100, mcts-200, another RUN[@CKPT], ...); "
                         "single-player games have no opponent and ignore it (default random)")
    ev.add_argument("--games", type=int, default=100, help="games (episodes) to play (default 100)")
    ev.add_argument("--seed", type=int, default=0, help="random seed of the games (default 0)")
    ev.add_argument("--checkpoint", default="latest", metavar="WHICH",
                    help="latest (the newest good checkpoint, default), best (the params with the best test "
                         "score, testing.keep_best) or an update count of a kept checkpoint")
    ev.set_defaults(func=_eval)

    match = sub.add_parser(
        "match", help="play two players against each other in pairs of games; W/D/L, score and Elo with intervals",
        description="Play PAIRS pairs of games between A and B: each pair starts from the same seeded random "
                    "opening and the players swap seats. Players: random, perfect (tic-tac-toe), ab / ab-D "
                    "(OpenSpiel alpha-beta, whole game / D plies), os-mcts-N (OpenSpiel MCTS, N simulations, "
                    "random rollouts), mcts-N (rollout MCTS on the real game), RUN[@CKPT] (a trained run's "
                    "search), prior:RUN[@CKPT] (its prior only), az:RUN[@CKPT] (its network searching the real "
                    "game), human (you, at the terminal), gtp:COMMAND; options after commas: eps=P (any player), "
                    "sims=N, ms=T and temp=T (runs), rollouts=K, uct=C, solve=0|1 (os-mcts). E.g. "
                    "`moozi match runs/c4@best os-mcts-100 --pairs 100`.")
    match.add_argument("a", metavar="A", help="player A (results are from A's point of view)")
    match.add_argument("b", metavar="B", help="player B")
    match.add_argument("--game", default=None, help="the game (default: the game of the run among the players)")
    match.add_argument("--pairs", type=int, default=100, help="pairs of games (default 100)")
    match.add_argument("--opening-plies", type=int, default=2,
                       help="random plies played before the players take over, the same in both games of a pair "
                            "(default 2)")
    match.add_argument("--seed", type=int, default=0, help="seeds the openings, the game and each player's stream")
    match.add_argument("--batch", type=int, default=256, help="games played at once in lock-step (default 256)")
    match.add_argument("--records", metavar="FILE.jsonl", default=None,
                       help="where the game records go (default matches/match-TIMESTAMP.jsonl)")
    match.add_argument("--pool", metavar="FILE.jsonl", default=None,
                       help="also append the games to this rating pool file (see `moozi ratings`)")
    match.add_argument("--json", action="store_true", help="print the whole summary as one JSON line")
    match.add_argument("--gate", choices=["sprt", "hoeffding", "fixed"], default=None,
                       help="decide whether A (a new network) replaces B: sprt (sequential, stops when decided; "
                            "--pairs is the most it plays), hoeffding (plays the games Hoeffding needs for "
                            "--margin at confidence 1 - --alpha) or fixed (score >= --threshold after --pairs)")
    match.add_argument("--elo0", type=float, default=0.0, help="sprt: H0, A is this many Elo better (default 0)")
    match.add_argument("--elo1", type=float, default=50.0, help="sprt: H1, A is this many Elo better (default 50)")
    match.add_argument("--alpha", type=float, default=0.05, help="sprt: false-accept rate; hoeffding: delta")
    match.add_argument("--beta", type=float, default=0.05, help="sprt: false-reject rate")
    match.add_argument("--margin", type=float, default=0.05, help="hoeffding: score margin above 1/2 (default 0.05)")
    match.add_argument("--threshold", type=float, default=0.55, help="fixed: score to accept (default 0.55)")
    match.set_defaults(func=_match)

    gtp = sub.add_parser(
        "gtp", help="speak the Go Text Protocol (v2 framing) on stdin/stdout for a player, any two-player game",
        description="A GTP engine for PLAYER (a run directory or any `moozi match` player): clear_board, play, "
                    "genmove, undo, showboard, legal_moves, final_score, time_settings/time_left, the administrative "
                    "commands, and the extensions moozi-game NAME and moozi-analyze. See docs/protocol.md.")
    gtp.add_argument("player", metavar="PLAYER", help="a run directory (RUN[@CKPT]) or a player string")
    gtp.add_argument("--game", default=None, help="the game (default: the run's)")
    gtp.add_argument("--seed", type=int, default=0)
    gtp.set_defaults(func=_gtp)

    play = sub.add_parser("play", help="play against a trained agent (or any player) at the terminal",
                          description="Draws the board after every move; at the prompt give a move, or legal, undo, "
                                      "hint (the agent's search at your position) or quit.")
    play.add_argument("player", metavar="PLAYER", help="a run directory (RUN[@CKPT]) or a player string")
    side = play.add_mutually_exclusive_group()
    side.add_argument("--first", action="store_true", help="you move first (default)")
    side.add_argument("--second", action="store_true", help="you move second")
    play.add_argument("--game", default=None, help="the game (default: the run's)")
    play.add_argument("--seed", type=int, default=0)
    play.set_defaults(func=_play)

    ratings = sub.add_parser(
        "ratings", help="fit ratings (Bradley-Terry with draws and a first-move term) to a pool of games",
        description="Fit Elo ratings with 95% intervals to every game in the pool files (written by "
                    "`moozi match --pool FILE`); a run directory stands for its ratings/games.jsonl.")
    ratings.add_argument("pools", nargs="+", metavar="POOL", help="pool files (JSON lines) or run directories")
    ratings.add_argument("--anchor", default="random", help="the player fixed at rating 0 (default random)")
    ratings.add_argument("--game", default=None, help="only the games of this game (needed when the pool mixes games)")
    ratings.add_argument("--json", action="store_true", help="print the table as one JSON line")
    ratings.set_defaults(func=_ratings)

    watch = sub.add_parser("watch", help="play a trained agent and draw the games as an animated GIF",
                           description="Play episodes of a run's checkpoint (test planner, greedy moves) and write "
                                       "them as one GIF, each frame captioned with the step, the reward, the search "
                                       "value v* and the action; prints one JSON line with the file and the returns.")
    watch.add_argument("run_dir", metavar="DIR", help="a run directory written by `moozi train`")
    watch.add_argument("--episodes", type=int, default=1, help="episodes to play (default 1)")
    watch.add_argument("--out", metavar="FILE.gif", help="where to write (default DIR/gifs/watch-UPDATES.gif)")
    watch.add_argument("--checkpoint", default="latest", metavar="WHICH", help="latest (default), best or an update count")
    watch.add_argument("--opponent", choices=["random", "perfect"], default="random",
                       help="two-player games: the other seat (default random)")
    watch.add_argument("--seed", type=int, default=0, help="random seed of the games (default 0)")
    watch.add_argument("--fps", type=float, default=4.0, help="frames per second of the GIF (default 4)")
    watch.add_argument("--max-frames", type=int, default=0, metavar="N",
                       help="keep only the first N frames (a smaller file; default: every frame)")
    watch.set_defaults(func=_watch)

    tree = sub.add_parser("tree", help="draw the search tree at one position, checked against the real game",
                          description="Search one position with the run's test planner and write the tree as SVG and "
                                      "DOT (DIR/trees/): per node visits, Q, prior, the model's predicted reward and "
                                      "value, and the real game's reward and legality, flagging nodes where the model "
                                      "and the game disagree. Prints one JSON line.")
    tree.add_argument("run_dir", metavar="DIR", help="a run directory written by `moozi train`")
    where = tree.add_mutually_exclusive_group()
    where.add_argument("--position", metavar="MOVES", help="environment actions from the start, e.g. '4 0 8' "
                                                            "(default: the start)")
    where.add_argument("--episode-step", type=int, metavar="N",
                       help="the position after N moves of the test planner's own greedy game")
    tree.add_argument("--checkpoint", default="latest", metavar="WHICH", help="latest (default), best or an update count")
    tree.add_argument("--simulations", type=int, default=None,
                      help="simulations of the search (default: the run's test_planner.num_simulations)")
    tree.add_argument("--seed", type=int, default=0, help="seed of the game and the search (default 0)")
    tree.add_argument("--threshold", type=float, default=0.25,
                      help="flag a node when its predicted reward is further than this from the game's (default 0.25)")
    tree.add_argument("--out-dir", metavar="DIR", help="where to write (default RUN/trees)")
    tree.set_defaults(func=_tree)

    embed = sub.add_parser("embed", help="map the model's hidden states over test games to 2-D (t-SNE)",
                           description="Play test games, project every position's hidden state to 2-D with t-SNE and "
                                       "write a PNG coloured by the search value (or the step) and a TensorBoard "
                                       "projector file (DIR/embed/). Needs scikit-learn: pip install 'moozi[viz]'.")
    embed.add_argument("run_dir", metavar="DIR", help="a run directory written by `moozi train`")
    embed.add_argument("--episodes", type=int, default=8, help="test games to play (default 8)")
    embed.add_argument("--colour", choices=["value", "step"], default="value", help="colour points by (default value)")
    embed.add_argument("--checkpoint", default="latest", metavar="WHICH", help="latest (default), best or an update count")
    embed.add_argument("--seed", type=int, default=0, help="seed of the games and the projection (default 0)")
    embed.add_argument("--out-dir", metavar="DIR", help="where to write (default RUN/embed)")
    embed.set_defaults(func=_embed)

    report = sub.add_parser("report", help="write one static HTML page with a run's curves, pictures and config",
                            description="Write one self-contained HTML page (no server, images embedded) for one run "
                                        "or several (curves overlaid): learning curves against env steps and wall "
                                        "clock, losses by term, throughput, ratios and lags where logged, the newest "
                                        "GIFs and tree views, and each run's config and commands.")
    report.add_argument("run_dirs", nargs="+", metavar="DIR", help="run directories written by `moozi train`")
    report.add_argument("--out", metavar="FILE.html", help="where to write (default: the first DIR/report.html)")
    report.set_defaults(func=_report)

    presets = sub.add_parser("presets", help="list the preset names")
    presets.set_defaults(func=_presets)
    envs = sub.add_parser("envs", help="list the registered environment names")
    envs.set_defaults(func=_envs)
    return parser


def _user_error(err: BaseException) -> str | None:
    """The one-line message for an error that is the user's to fix (None: a moozi bug, keep the traceback)."""
    from moozi.checkpoint import CheckpointError
    from moozi.config import ConfigError
    from moozi.envs import GameContractError, IllegalActionError, UnknownEnvError
    from moozi.errors import ReplayError

    if isinstance(err, (ConfigError, ReplayError)):
        return f"configuration error: {err}"
    if isinstance(err, (CheckpointError, UnknownEnvError, GameContractError, IllegalActionError)):
        return str(err)
    if isinstance(err, OSError) and err.errno in _DISK_ERRORS:
        what = f" {err.filename}" if err.filename else ""
        return f"cannot write{what}: {err.strerror or err}"
    return None


def _log_console(console=None) -> None:
    """moozi's warnings on the console (stderr), the same way for every game.

    Some game libraries install a handler on the root logger (absl, through
    OpenSpiel); moozi's records stop at its own handlers so they are printed
    once, whatever game was imported.
    """
    import logging

    class _Console(logging.Handler):
        def emit(self, record):
            msg = f"moozi: {record.getMessage()}"
            if console is not None:
                from rich.text import Text

                console.print(Text(msg, style="yellow" if record.levelno < logging.ERROR else "red"), soft_wrap=True)
            else:
                print(msg, file=sys.stderr)

    logger = logging.getLogger("moozi")
    _drop_console(logger)
    handler = _Console(logging.WARNING)
    handler._moozi_console = True
    logger.addHandler(handler)
    logger.propagate = False


_interrupted = False


def _catch_sigint():
    """Ctrl-C raises KeyboardInterrupt and is remembered: Python drops one raised inside a garbage-collector
    callback (JAX has one), so start-up checks :func:`_check_interrupted` at its milestones. Returns the undo."""
    import signal
    import threading

    global _interrupted
    _interrupted = False
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGINT)

    def on_sigint(signum, frame):
        global _interrupted
        _interrupted = True
        raise KeyboardInterrupt

    hook = sys.unraisablehook

    def quiet_interrupt(unraisable):  # the interrupt is remembered; its "Exception ignored" trace is noise
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            hook(unraisable)

    signal.signal(signal.SIGINT, on_sigint)
    sys.unraisablehook = quiet_interrupt

    def restore():
        signal.signal(signal.SIGINT, previous)
        sys.unraisablehook = hook

    return restore


def _check_interrupted() -> None:
    if _interrupted:
        raise KeyboardInterrupt


def _drop_console(logger) -> None:
    for h in [h for h in logger.handlers if getattr(h, "_moozi_console", False)]:
        logger.removeHandler(h)


def main(argv: list[str] | None = None) -> int:
    import logging

    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if getattr(args, "simulations", None) is not None and args.simulations < 1:
        print("moozi: --simulations must be >= 1", file=sys.stderr)
        return 2
    logger = logging.getLogger("moozi")
    propagate = logger.propagate
    restore_sigint = _catch_sigint()
    try:
        if args.command not in _NO_COMPILE:
            from moozi import compile_cache

            compile_cache.enable()
        return args.func(args)
    except KeyboardInterrupt:
        print("moozi: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        if _interrupted:  # a Ctrl-C inside an import surfaces as that module's ImportError: it is the interrupt
            print("moozi: interrupted", file=sys.stderr)
            return 130
        message = _user_error(err)
        _drop_console(logger)
        if not getattr(err, "_moozi_logged", False) and any(getattr(h, "_moozi_run_log", False)
                                                            for h in logger.handlers):  # the traceback: train.log
            logger.propagate = False
            logger.error("stopped by %s: %s", type(err).__name__, err, exc_info=err)
        if message is None:
            raise
        print(f"moozi: {message}", file=sys.stderr)
        return 2
    finally:
        restore_sigint()
        _drop_console(logger)
        logger.propagate = propagate


def run() -> None:
    """The ``moozi`` program: :func:`main`, then exit with its code.

    After a Ctrl-C during start-up the process leaves with ``os._exit(130)``:
    CPython remembers a KeyboardInterrupt that passed through code some
    libraries run at import time, and at a normal exit kills itself with
    SIGINT even though moozi handled it (seen as exit -2 under ``python -m``).
    """
    import os

    code = main()
    if code == 130:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
