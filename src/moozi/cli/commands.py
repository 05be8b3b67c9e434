"""The commands that use a trained run or a game: eval, match, grade, tune, gtp, play, ratings, watch, tree, embed, report, curves,
presets, envs. Each imports what it needs when it runs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from moozi.cli.console import _log_console


def _eval(args: argparse.Namespace) -> int:
    from moozi.eval.evaluate import evaluate, few_outcomes_note

    if args.games < 1:
        print("moozi eval: --games must be >= 1", file=sys.stderr)
        return 2
    settings = _test_settings(args)
    _log_console()
    result = evaluate(args.run_dir, opponent=args.opponent, games=args.games, seed=args.seed,
                      checkpoint=args.checkpoint, settings=settings,
                      say=lambda line: print(line, file=sys.stderr, flush=True))
    print(json.dumps(result))
    note = few_outcomes_note(result)
    if note:
        print(f"moozi eval: {note}", file=sys.stderr)
    return 0


def _baseline(args: argparse.Namespace) -> int:
    from moozi.eval.ppo import train_ppo

    _log_console()
    result = train_ppo(args.game, protocol=args.protocol, seed=args.seed, frames=args.frames,
                       eval_every=args.eval_every, curve_games=args.curve_games, games=args.games, out=args.out,
                       say=lambda line: print(line, file=sys.stderr, flush=True))
    print(json.dumps(result))
    return 0


def _test_settings(args: argparse.Namespace, simulations: bool = True):
    """The eval/sweep options as :class:`moozi.eval.evaluate.TestSettings` (a bad value: ConfigError)."""
    from moozi.eval.evaluate import TestSettings

    return TestSettings(simulations=args.simulations if simulations else None, temperature=args.temperature,
                        random_moves=args.random_moves, random_move_prob=args.random_move_prob,
                        package=getattr(args, "package", None), planner=getattr(args, "planner", None))


def _match(args: argparse.Namespace) -> int:
    from moozi.eval.gating import gate_spec
    from moozi.eval.single import match

    gate = None if not args.gate else gate_spec(args.gate, args.elo0, args.elo1, args.alpha, args.beta,
                                                 args.margin, args.threshold)
    _log_console()
    result = match(args.a, args.b, game=args.game, pairs=args.pairs, opening_plies=args.opening_plies,
                       seed=args.seed, batch=args.batch, records=args.records, pool_file=args.pool, gate=gate,
                       modules=args.modules, games=args.games)
    if args.json:
        print(json.dumps(result))
    else:
        print(_single_table(result) if "paired_difference" in result else _match_table(result))
    return 0


def _single_table(r: dict) -> str:
    """A single-player match in a few lines (``--json`` prints everything)."""
    def ret(x):
        return f"{x['mean']:.2f} [{x['low']:.2f}, {x['high']:.2f}] (min {x['min']:g}, max {x['max']:g})"

    d = r["paired_difference"]
    lines = [f"{r['game']}: {_count(r['games'], 'game')} each, the same starting states (seed {r['seed']})",
             f"A = {r['a']['id']}: {ret(r['a_return'])}", f"B = {r['b']['id']}: {ret(r['b_return'])}",
             f"A - B, paired (95% bootstrap): {d['value']:+.2f} [{d['low']:+.2f}, {d['high']:+.2f}]; A better in "
             f"{d['better']}, worse in {d['worse']}, tied in {d['ties']}; sign test p = {d['p_value']:.3g}"]
    if "gate" in r:
        lines.append(f"gate (paired): {'A passes' if r['gate']['decision'] == 'accept' else 'A fails'}")
    lines += [f"{r['wall_s']:.1f} s; records: {r['records']}"]
    return "\n".join(lines)


def _match_table(r: dict) -> str:
    """A short human summary of a match (``--json`` prints everything)."""
    def fmt(i, scale=1.0, digits=3):
        return f"{_num(i['value'], scale, digits)} [{_num(i['low'], scale, digits)}, {_num(i['high'], scale, digits)}]"

    lines = [
        f"{r['game']}: {_count(r['games'], 'game')} ({_count(r['pairs'], 'pair')}, "
        f"{_count(r['opening_plies'], 'random opening ply', 'random opening plies')}, "
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
    if "forfeits" in r:  # an engine that crashed, hung or answered no legal move (reasons: the log, the records)
        lines.insert(4, f"forfeits: A {r['forfeits']['a']}, B {r['forfeits']['b']} (lost games; each reason is in "
                        "the records and the log)")
    if "gate" in r:
        g = r["gate"]
        detail = (f"LLR {g['llr']:.2f} in [{g['bounds'][0]:.2f}, {g['bounds'][1]:.2f}]" if g["method"] == "sprt"
                  else _count(g['pairs_used'], 'pair'))
        verdict = {"accept": "A passes", "reject": "A fails", "undecided": "no decision on A"}.get(
            g["decision"], g["decision"])
        lines.append(f"gate ({g['method']}): {verdict} after {_count(g['pairs_used'], 'pair')}; {detail}")
    return "\n".join(lines)


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _num(x, scale, digits):
    return f"{round(x * scale, digits) + 0.0:.{digits}f}" if isinstance(x, float) else str(x)  # no "-0"


def _gtp(args: argparse.Namespace) -> int:
    from moozi.eval.arena import game_of
    from moozi.eval.gtp import GTPEngine

    _log_console()
    game, kwargs, modules = game_of([args.player], args.game, args.modules)
    GTPEngine(args.player, game, seed=args.seed, game_kwargs=kwargs, modules=modules).serve()
    return 0


def _serve(args: argparse.Namespace) -> int:
    import sys

    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401

        from moozi.web.server import serve
    except ImportError:
        print("moozi serve: needs a web server: pip install 'moozi[serve]'", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"moozi serve: --port {args.port} is invalid: allowed 0 (any free port) to 65535", file=sys.stderr)
        return 2
    _log_console()

    def ready(url: str) -> None:
        if args.host not in ("127.0.0.1", "localhost", "::1"):
            print(f"moozi serve: listening on {args.host}: anyone who can reach this machine's port can use the page",
                  file=sys.stderr)
        print(f"moozi serve: open {url} (Ctrl-C stops)", flush=True)

    try:
        serve(args.player, args.game, args.host, args.port, args.seed, args.modules, ready=ready)
    except OSError as e:  # the port is taken, the address is not this machine's
        print(f"moozi serve: cannot listen on {args.host}:{args.port}: {e.strerror or e}", file=sys.stderr)
        return 2
    return 0


def _play(args: argparse.Namespace) -> int:
    from moozi.eval.arena import game_of
    from moozi.eval.play import play_games
    from moozi.eval.players import make_player
    from moozi.eval.session import GameSession

    _log_console()
    game, kwargs, modules = game_of([args.player], args.game, args.modules)
    session = GameSession(game, make_player(args.player, game, args.seed, kwargs), args.seed, kwargs, modules)
    try:
        play_games(session, 1 if args.second else 0)
    finally:
        session.close()
    return 0


def _ratings(args: argparse.Namespace) -> int:
    from moozi.eval.ratings import ratings_table, read_pool, returns_table

    games, returns = read_pool(args.pools), read_pool(args.pools, returns=True)
    if not games and returns:  # single-player agents: by return
        table = returns_table(returns, game=args.game)
        if args.json:
            print(json.dumps(table))
            return 0
        width = max(len(r["player"]) for r in table["players"])
        print(f"{table['game']}: single-player agents by mean return (95% intervals); paired difference against "
              "the first over the games both played")
        for r in table["players"]:
            v = r.get("vs_leader")
            vs = f"  {v['value']:+.2f} [{v['low']:+.2f}, {v['high']:+.2f}] p {v['p_value']:.3g}" if v else ""
            print(f"{r['player']:<{width}}  {r['return']:9.2f}  [{r['low']:9.2f}, {r['high']:9.2f}]  {r['games']:5d}{vs}")
        return 0
    table = ratings_table(games, anchor=args.anchor, game=args.game)
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


def _sweep(args: argparse.Namespace) -> int:
    from moozi.eval.sweep import run_sweep

    if args.episodes < 1 or any(n < 1 for n in args.simulations):
        print("moozi sweep: --episodes and every --simulations must be >= 1", file=sys.stderr)
        return 2
    settings = _test_settings(args, simulations=False)
    _log_console()
    result = run_sweep(args.run_dir, args.simulations, args.episodes, args.seed, args.checkpoints, args.opponent,
                       args.out_dir, settings)
    print(Path(result["markdown"]).read_text(), file=sys.stderr)
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}))
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
    from moozi.envs.notation import IllegalMove
    from moozi.observe.tree import view_position

    _log_console()
    try:
        result = view_position(args.run_dir, position=args.position, episode_step=args.episode_step,
                               checkpoint=args.checkpoint, seed=args.seed, threshold=args.threshold,
                               out_dir=args.out_dir, simulations=args.simulations)
    except IllegalMove as err:
        raise ConfigError(f"--position {args.position!r}: {err}") from None
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
                           seed=args.seed, out_dir=args.out_dir, max_points=args.max_points, paths=args.paths,
                           unroll=args.unroll)
    except (ImportError, ValueError) as err:
        print(f"moozi embed: {err}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


def _report(args: argparse.Namespace) -> int:
    from moozi.observe.report import write_report

    out = Path(args.out) if args.out else Path(args.run_dirs[0]) / "report.html"
    try:
        write_report(args.run_dirs, out)
    except FileNotFoundError as err:
        print(f"moozi report: {err}", file=sys.stderr)
        return 2
    print(json.dumps({"report": str(out), "runs": args.run_dirs}))
    return 0


def _curves(args: argparse.Namespace) -> int:
    from moozi.observe.curves import draw_curves

    out = Path(args.out) if args.out else Path(args.run_dirs[0]) / "curves.png"
    print(json.dumps(draw_curves(args.run_dirs, out, args.title)))
    return 0


def _grade(args: argparse.Namespace) -> int:
    from moozi.eval import grade

    if args.make_positions:
        if args.player:
            print("moozi grade: --make-positions takes no PLAYER", file=sys.stderr)
            return 2
        header, positions = grade.generate_positions(args.per_category, args.seed)
        grade.write_positions(args.make_positions, header, positions)
        print(json.dumps({"positions": args.make_positions, "count": len(positions), **header}))
        return 0
    if not args.player:
        print("moozi grade: give a PLAYER (or --make-positions FILE)", file=sys.stderr)
        return 2
    categories = [c.strip() for c in args.categories.split(",")] if args.categories else None
    _log_console()
    result = grade.run_grade(args.player, game=args.game, per_category=args.per_category, categories=categories,
                             positions_file=args.positions, seed=args.seed, batch=args.batch, vs=args.vs)
    print(json.dumps(result) if args.json else grade.grade_table(result))
    return 0


def _tune(args: argparse.Namespace) -> int:
    try:
        import ray.tune  # noqa: F401
    except ImportError:
        print("moozi tune: needs Ray Tune: pip install 'moozi[tune]'", file=sys.stderr)
        return 2
    from moozi.tuning import run_tune, summary_table

    chunk = args.chunk_minutes or (args.minutes / 4 if args.scheduler == "pbt" else args.minutes)
    _log_console()
    summary = run_tune(args.preset, args.overrides, args.params, args.trials, args.minutes, chunk, args.out,
                       scheduler=args.scheduler, cpus=args.cpus, cpus_per_trial=args.cpus_per_trial, seed=args.seed)
    print(summary_table(summary))
    return 0


def _presets(args: argparse.Namespace) -> int:
    import yaml

    from moozi.presets import load_preset, preset_header, preset_names

    if args.name is not None:
        data = load_preset(args.name)  # an unknown name: one line listing the presets (exit 2)
        data.pop("base", None)
        if args.name in preset_names():
            print("# " + preset_header(args.name) + f"\n# why each setting: docs/presets.md#{args.name}")
        print(yaml.safe_dump(data, sort_keys=False).rstrip())
        return 0
    rows = {n: {"game": load_preset(n).get("env", {}).get("name", "?"), "header": preset_header(n)}
            for n in preset_names()}
    if args.json:
        print(json.dumps(rows))
        return 0
    import textwrap

    wide = max(map(len, rows)), max(len(r["game"]) for r in rows.values())
    for name, row in rows.items():
        print(f"{name:<{wide[0]}}  {row['game']:<{wide[1]}}  {textwrap.shorten(row['header'], 80, placeholder=' ...')}")
    print("moozi presets NAME shows one in full; docs/presets.md says why each setting")
    return 0


def _envs(args: argparse.Namespace) -> int:
    from moozi.envs import list_envs

    for name in list_envs():
        print(name)
    return 0


def _export(args: argparse.Namespace) -> int:
    """``moozi export RUN --to NAME.moozi``: the run's params at a checkpoint, its config and a short card."""
    import subprocess

    from moozi.agent_file import SUFFIX, write_agent
    from moozi.config import to_dict
    from moozi.run_dir import is_run_dir, open_run, run_identity

    if not is_run_dir(args.run_dir):
        print(f"moozi export: {args.run_dir} is not a run directory (no config.yaml)", file=sys.stderr)
        return 2
    to = Path(args.to if args.to.endswith(SUFFIX) else args.to + SUFFIX)
    opened = open_run(args.run_dir, args.checkpoint)
    here = Path(__file__).resolve().parent
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=here).stdout.strip() or None
    last_test = opened.meta.get("last_test") or {}
    card = {"game": opened.config.env.name, "updates": opened.updates,
            "env_steps": int(opened.meta["counters"].get("env_steps", 0)), "run": str(args.run_dir),
            "run_id": run_identity(args.run_dir), "checkpoint": Path(opened.meta["path"]).name,
            "exported_by_commit": commit, "last_test_return": last_test.get("test/return_mean"),
            "note": args.note}
    written = write_agent(to, to_dict(opened.config), opened.params, card)
    print(json.dumps({**written, "game": card["game"], "updates": card["updates"]}))
    return 0


def _zoo(args: argparse.Namespace) -> int:
    """``moozi zoo``: the shipped agents, their games, measured strength and cards."""
    from moozi.zoo import PREFIX, index

    agents = index()
    if args.json:
        print(json.dumps(agents))
        return 0
    if not agents:
        print("the zoo is empty")
        return 0
    names = max(len(PREFIX + name) for name in agents)
    games = max(len(e["game"]) for e in agents.values())
    for name, e in sorted(agents.items()):
        print(f"{PREFIX + name:<{names}} {e['game']:<{games}} {e['bytes'] / 1e6:5.2f} MB  {e['strength']}  "
              f"(card: {e['card']})")
    print("use one wherever a run is taken: moozi play zoo:NAME, moozi eval zoo:NAME, moozi match zoo:NAME random")
    return 0
