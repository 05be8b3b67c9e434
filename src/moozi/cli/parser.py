"""The argument parser of every command."""

from __future__ import annotations

import argparse

from moozi.cli.commands import (
    _baseline,
    _curves,
    _embed,
    _envs,
    _eval,
    _export,
    _grade,
    _gtp,
    _match,
    _play,
    _presets,
    _ratings,
    _report,
    _serve,
    _sweep,
    _tree,
    _tune,
    _watch,
    _zoo,
)
from moozi.cli.demo import DEMO_ENV_STEPS, _demo
from moozi.cli.train import _train, add_train_arguments


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("moozi")
    except PackageNotFoundError:  # run from a source tree without installing
        return "(not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="moozi", description="moozi learns to play games by planning with a learned model (MuZero family). "
                                  "Start with `moozi demo`; `moozi COMMAND --help` says more.")
    parser.add_argument("--version", action="version", version=f"moozi {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _COMMANDS:
        add(sub)
    return parser


def _add_demo(sub) -> None:
    demo = sub.add_parser("demo", help="train CartPole for 300,000 environment steps (about two minutes on 2 cores), "
                                       "evaluate it and say what it learned "
                                       "(--search: search tic-tac-toe positions with the exact model instead)")
    demo.add_argument("--env-steps", type=int, default=None,
                      help=f"training budget in environment steps: a seed makes the same run each time (default "
                           f"{DEMO_ENV_STEPS:,} unless --minutes is given)")
    demo.add_argument("--minutes", type=float, default=None,
                      help="training budget in wall-clock minutes, compiling included, instead (with --env-steps too: "
                           "whichever ends first); what a fixed time trains varies with the machine")
    demo.add_argument("--episodes", type=int, default=20, help="test episodes of the trained agent (default 20)")
    demo.add_argument("--run-dir", default=None, help="where the run goes (default: runs/demo, or runs/demo-N)")
    demo.add_argument("--max-frames", type=int, default=200, help="frames of the GIF at most (default 200)")
    demo.add_argument("--search", action="store_true",
                      help="instead: search three tic-tac-toe positions with the exact model (no training)")
    demo.add_argument("--simulations", type=int, default=64, help="--search: simulations per search (default 64)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("overrides", nargs="*", help="config overrides for the training, section.key=value")
    demo.set_defaults(func=_demo)



def _add_train(sub) -> None:
    train = sub.add_parser(
        "train", help="train an agent from a preset, or resume a run",
        description="Train an agent from a preset (`moozi presets` lists them), with KEY=VALUE overrides of its "
                    "config, or continue a run with --resume. Without --minutes a run trains until "
                    "schedule.max_env_steps (or forever); Ctrl-C stops it cleanly with a final checkpoint.",
        epilog="examples:\n  moozi train --preset cartpole --minutes 2\n"
               "  moozi train --preset tictactoe --minutes 5 --run-dir runs/ttt schedule.batch_size=128\n"
               "  moozi train --resume runs/ttt --minutes 5",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_train_arguments(train)
    train.set_defaults(func=_train)



def _add_eval(sub) -> None:
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
    ev.add_argument("--simulations", type=int, default=None, metavar="N",
                    help="the test planner's simulations per move (default: as trained; 1: the prior alone)")
    ev.add_argument("--package", choices=["minatar", "gymnax"], default=None,
                    help="MinAtar games: play the run's game under the same rules on this package (minatar: the "
                         "original one, host path; gymnax: its JAX port); default: the run's own")
    ev.add_argument("--planner", choices=["thesis"], default=None,
                    help="thesis: the MooZi thesis's test planner (Table 5.1: PUCT, 40 simulations, c1 1.75, "
                         "Dirichlet noise 0.1, temperature 0.25) instead of the run's; --simulations and "
                         "--temperature still apply")
    _test_randomness(ev)
    ev.set_defaults(func=_eval)



def _add_modules(parser) -> None:
    """``--module MODULE`` (repeatable): the games of a user's own that a command imports before it starts."""
    parser.add_argument("--module", dest="modules", action="append", default=[], metavar="MODULE",
                        help="import MODULE first: a game of your own that registers itself (see docs/custom-game.md); "
                             "repeatable")


def _add_match(sub) -> None:
    match = sub.add_parser(
        "match", help="play two players against each other in pairs of games; W/D/L, score and Elo with intervals",
        description="Play PAIRS pairs of games between A and B: each pair starts from the same seeded random "
                    "opening and the players swap seats. Players: random, perfect (tic-tac-toe), ab / ab-D "
                    "(OpenSpiel alpha-beta, whole game / D plies), os-mcts-N (OpenSpiel MCTS, N simulations, "
                    "random rollouts), mcts-N (rollout MCTS on the real game), RUN[@CKPT] (a trained run's "
                    "search), prior:RUN[@CKPT] (its prior only), az:RUN[@CKPT] (its network searching the real "
                    "game), human (you, at the terminal), gtp:COMMAND; options after commas: eps=P (any player), "
                    "sims=N, ms=T and temp=T (runs), sym=P, ptemp=T, pick=policy|visits|value|lcb, lcb=C (runs and az: "
                    "play-time search options), rollouts=K, uct=C, solve=0|1 (os-mcts). E.g. "
                    "`moozi match runs/c4@best os-mcts-100 --pairs 100`.")
    match.add_argument("a", metavar="A", help="player A (results are from A's point of view)")
    match.add_argument("b", metavar="B", help="player B")
    match.add_argument("--game", default=None, help="the game (default: the game of the run among the players)")
    _add_modules(match)
    match.add_argument("--pairs", type=int, default=100, help="pairs of games (default 100)")
    match.add_argument("--games", type=int, default=None,
                       help="single-player games: each agent plays this many games (default 100) from the same "
                            "starting states; the paired difference of returns gets a bootstrap interval and a "
                            "sign test")
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



def _add_gtp(sub) -> None:
    gtp = sub.add_parser(
        "gtp", help="speak the Go Text Protocol (v2 framing) on stdin/stdout for a player, any two-player game",
        description="A GTP engine for PLAYER (a run directory or any `moozi match` player): clear_board, play, "
                    "genmove, undo, showboard, legal_moves, final_score, time_settings/time_left, the administrative "
                    "commands, and the extensions moozi-game NAME and moozi-analyze. See docs/protocol.md.")
    gtp.add_argument("player", metavar="PLAYER", help="a run directory (RUN[@CKPT]) or a player string")
    gtp.add_argument("--game", default=None, help="the game (default: the run's)")
    _add_modules(gtp)
    gtp.add_argument("--seed", type=int, default=0)
    gtp.set_defaults(func=_gtp)



def _add_play(sub) -> None:
    play = sub.add_parser("play", help="play against a trained agent (or any player) at the terminal",
                          description="Draws the board after every move; at the prompt give a move, or legal, undo, "
                                      "hint (the agent's search at your position) or quit.")
    play.add_argument("player", metavar="PLAYER", help="a run directory (RUN[@CKPT]) or a player string")
    side = play.add_mutually_exclusive_group()
    side.add_argument("--first", action="store_true", help="you move first (default)")
    side.add_argument("--second", action="store_true", help="you move second")
    play.add_argument("--game", default=None, help="the game (default: the run's)")
    _add_modules(play)
    play.add_argument("--seed", type=int, default=0)
    play.set_defaults(func=_play)



def _add_serve(sub) -> None:
    serve = sub.add_parser("serve", help="a local web page to play a board game against an agent by clicking",
                           description="Starts a web server (127.0.0.1 unless --host) with a page where you play "
                                       "AGENT by clicking the board, see its search of each move, and start new "
                                       "games; prints the address. Ctrl-C stops it. Needs the serve extra: pip "
                                       "install 'moozi[serve]'.")
    serve.add_argument("player", metavar="AGENT", help="a run directory (RUN[@CKPT]), an agent file, zoo:NAME or a "
                                                      "player string")
    serve.add_argument("--game", default=None, help="the game (default: the run's)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="the address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 exposes the "
                            "page to everyone who can reach this machine)")
    serve.add_argument("--port", type=int, default=8000, help="the port (default 8000; 0: any free port)")
    _add_modules(serve)
    serve.add_argument("--seed", type=int, default=0)
    serve.set_defaults(func=_serve)



def _add_ratings(sub) -> None:
    ratings = sub.add_parser(
        "ratings", help="fit ratings (Bradley-Terry with draws and a first-move term) to a pool of games",
        description="Fit Elo ratings with 95% intervals to every game in the pool files (written by "
                    "`moozi match --pool FILE`); a run directory stands for its ratings/games.jsonl.")
    ratings.add_argument("pools", nargs="+", metavar="POOL", help="pool files (JSON lines) or run directories")
    ratings.add_argument("--anchor", default="random", help="the player fixed at rating 0 (default random)")
    ratings.add_argument("--game", default=None, help="only the games of this game (needed when the pool mixes games)")
    ratings.add_argument("--json", action="store_true", help="print the table as one JSON line")
    ratings.set_defaults(func=_ratings)



def _add_grade(sub) -> None:
    grade = sub.add_parser(
        "grade", help="a connect four player's mistake rate against perfect play, per position category",
        description="Play PLAYER (a run directory or any `moozi match` player) on a fixed benchmark of connect "
                    "four positions like Pascal Pons' (begin / middle / end by plies played, easy / medium / hard "
                    "by plies left under perfect play) and count its mistakes: moves that change the solved "
                    "result for the worse. Rates with Wilson 95% intervals per category. The positions ship with "
                    "moozi, solved; only --make-positions and the solver player need the extra moozi[solver].")
    grade.add_argument("player", metavar="PLAYER", nargs="?", help="a run directory (RUN[@CKPT]) or a player string")
    grade.add_argument("--game", default=None, help="pgx:connect_four (default) or openspiel:connect_four")
    grade.add_argument("--per-category", type=int, default=200, metavar="N",
                       help="the first N positions of each category (default 200; the benchmark holds 1000)")
    grade.add_argument("--categories", default=None, metavar="C,C",
                       help="only these categories (end-easy, middle-easy, middle-medium, begin-easy, "
                            "begin-medium, begin-hard)")
    grade.add_argument("--positions", default=None, metavar="FILE", help="another benchmark file (default the "
                       "packaged connect4-positions-v1)")
    grade.add_argument("--batch", type=int, default=64, help="positions played at once (default 64)")
    grade.add_argument("--seed", type=int, default=0, help="seeds the player's stream")
    grade.add_argument("--vs", default=None, metavar="PLAYER",
                       help="grade this player on the same positions too and compare the two position by position: "
                            "mistakes by each only, the difference of rates and an exact sign test (McNemar)")
    grade.add_argument("--json", action="store_true", help="print the whole result as one JSON line")
    grade.add_argument("--make-positions", metavar="FILE", default=None,
                       help="instead: generate a benchmark file (needs moozi[solver]); --per-category positions "
                            "of each category from --seed")
    grade.set_defaults(func=_grade)



def _add_sweep(sub) -> None:
    sweep = sub.add_parser(
        "sweep", help="strength against the search budget over a run's checkpoints (table and plot)",
        description="Play each checkpoint the run holds (or --checkpoints) at each simulation count (1: the prior "
                    "alone) and write the table (JSON lines, Markdown) and a plot against env steps to DIR/sweeps/. "
                    "Keep a series while training with output.keep_every_updates=N.")
    sweep.add_argument("run_dir", metavar="DIR", help="a run directory written by `moozi train`")
    sweep.add_argument("--simulations", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64], metavar="N",
                       help="simulation counts (default 1 2 4 8 16 32 64)")
    sweep.add_argument("--episodes", type=int, default=30, help="test games per point (default 30)")
    sweep.add_argument("--checkpoints", type=int, nargs="+", default=None, metavar="UPDATES",
                       help="update counts to play (default: every checkpoint the run holds)")
    sweep.add_argument("--opponent", default="random", help="two-player games: the opponent (default random)")
    _test_randomness(sweep)
    sweep.add_argument("--seed", type=int, default=0)
    sweep.add_argument("--out-dir", metavar="DIR", help="where to write (default RUN/sweeps)")
    sweep.set_defaults(func=_sweep)



def _add_tune(sub) -> None:
    tune = sub.add_parser(
        "tune", help="a hyperparameter sweep or population-based training on Ray Tune; each trial a run directory",
        description="Train TRIALS runs of a preset for MINUTES each with values drawn from the --param forms "
                    "(random search, or --scheduler pbt: every CHUNK minutes the bottom half copies a top trial's "
                    "checkpoint and perturbs its values). Trials are ordinary run directories under OUT/trials; "
                    "OUT/summary.md ranks them by their last test return. Needs pip install 'moozi[tune]'.")
    tune.add_argument("--preset", required=True, help="preset name or path to a preset YAML file")
    tune.add_argument("--param", dest="params", action="append", default=[], metavar="KEY=FORM(ARGS)",
                      help="a searched key: choice(a, b), grid(a, b), uniform(lo, hi), loguniform(lo, hi), "
                           "randint(lo, hi); repeatable, e.g. learner.learning_rate=loguniform(1e-4, 1e-2)")
    tune.add_argument("--trials", type=int, default=4, help="trials (the population's size with pbt; default 4)")
    tune.add_argument("--minutes", type=float, default=2.0, help="training minutes per trial (default 2)")
    tune.add_argument("--chunk-minutes", type=float, default=None,
                      help="minutes between reports (and PBT steps); default: --minutes (one report) for random "
                           "search, a quarter of it for pbt")
    tune.add_argument("--scheduler", choices=["random", "pbt"], default="random")
    tune.add_argument("--out", required=True, metavar="DIR", help="the sweep's folder (trials, summary)")
    tune.add_argument("--cpus", type=int, default=None, help="CPUs of the sweep's private Ray cluster (default all)")
    tune.add_argument("--cpus-per-trial", type=float, default=1.0, help="CPUs each trial reserves (default 1)")
    tune.add_argument("--seed", type=int, default=0, help="schedule.seed of every trial")
    tune.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="fixed overrides for every trial")
    tune.set_defaults(func=_tune)



def _add_watch(sub) -> None:
    watch = sub.add_parser("watch", help="play a trained agent and draw the games as an animated GIF",
                           description="Play episodes of a run's checkpoint (test planner, greedy moves) and write "
                                       "them as one GIF, each frame captioned with the step, the reward, the search "
                                       "value v* and the action; prints one JSON line with the file and the returns.")
    watch.add_argument("run_dir", metavar="DIR", help="a run directory written by `moozi train`")
    watch.add_argument("--episodes", type=int, default=1, help="episodes to play (default 1)")
    watch.add_argument("--out", metavar="FILE.gif", help="where to write (default DIR/gifs/watch-UPDATES.gif)")
    watch.add_argument("--checkpoint", default="latest", metavar="WHICH", help="latest (default), best or an update count")
    watch.add_argument("--opponent", default="random",
                       help="two-player games: the other seat: random (default), perfect (tic-tac-toe) or any "
                            "`moozi match` player (os-mcts-100, another RUN[@CKPT], zoo:NAME, gtp:COMMAND, ...; "
                            "the agent takes each seat in turn)")
    watch.add_argument("--seed", type=int, default=0, help="random seed of the games (default 0)")
    watch.add_argument("--fps", type=float, default=4.0, help="frames per second of the GIF (default 4)")
    watch.add_argument("--max-frames", type=int, default=0, metavar="N",
                       help="keep only the first N frames (a smaller file; default: every frame)")
    watch.set_defaults(func=_watch)



def _add_tree(sub) -> None:
    tree = sub.add_parser("tree", help="draw the search tree at one position, checked against the real game",
                          description="Search one position with the run's test planner and write the tree as SVG and "
                                      "DOT (DIR/trees/): per node visits, Q, prior, the model's predicted reward and "
                                      "value, and the real game's reward and legality, flagging nodes where the model "
                                      "and the game disagree. Prints one JSON line.")
    tree.add_argument("run_dir", metavar="DIR", help="a run directory written by `moozi train`")
    where = tree.add_mutually_exclusive_group()
    where.add_argument("--position", metavar="MOVES",
                       help="moves from the start in the game's notation or as action indices, e.g. "
                            "\"x(1,1) o(0,0)\" or '4 0 8' (default: the start)")
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



def _add_embed(sub) -> None:
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
    embed.add_argument("--max-points", type=int, default=2000, metavar="N",
                       help="map at most N positions, spread evenly over the games (default 2000; 0: all; the "
                            "projector file keeps every position)")
    embed.add_argument("--paths", type=int, default=8, metavar="N",
                       help="imagined paths drawn (default 8; 0: none): the dynamics unrolled from real positions "
                            "under the actions taken, beside the real path")
    embed.add_argument("--unroll", type=int, default=None, metavar="K",
                       help="steps of each imagined path (default the run's targets.unroll_steps)")
    embed.set_defaults(func=_embed)



def _add_report(sub) -> None:
    report = sub.add_parser("report", help="write one static HTML page with a run's curves, pictures and config",
                            description="Write one self-contained HTML page (no server, images embedded) for one run "
                                        "or several (curves overlaid): learning curves against env steps and wall "
                                        "clock, losses by term, throughput, ratios and lags where logged, the newest "
                                        "GIFs and tree views, and each run's config and commands.")
    report.add_argument("run_dirs", nargs="+", metavar="DIR", help="run directories written by `moozi train`")
    report.add_argument("--out", metavar="FILE.html", help="where to write (default: the first DIR/report.html)")
    report.set_defaults(func=_report)



def _add_curves(sub) -> None:
    curves = sub.add_parser("curves", help="learning curves of runs over seeds beside published scores, as a PNG",
                            description="Draw the test return of runs (seeds of one game, or several games) against "
                                        "env steps and against wall clock, the mean over the runs of each game, and "
                                        "the game's published reference scores (the MooZi thesis, gymnax PPO, the "
                                        "MinAtar paper) as dashed lines; one row per game. Prints one JSON line.")
    curves.add_argument("run_dirs", nargs="+", metavar="DIR", help="run directories written by `moozi train`")
    curves.add_argument("--out", metavar="FILE.png", help="where to write (default: the first DIR/curves.png)")
    curves.add_argument("--title", default=None, help="a title above the panels")
    curves.set_defaults(func=_curves)



def _add_baseline(sub) -> None:
    baseline = sub.add_parser(
        "baseline", help="train a model-free baseline (PPO, by rejax) on a MinAtar game under a named protocol",
        description="Train PPO with gymnax-blines' MinAtar recipe (the one behind gymnax's published figures) by "
                    "rejax on gymnax's port under the protocol's rules, testing every --eval-every frames; then "
                    "play its last params over --games games on the original MinAtar package and on the port. "
                    "Writes OUT/result.json (curve, final scores with 95%% intervals, wall time) and "
                    "OUT/params.msgpack; prints the result as one JSON line. Needs pip install 'moozi[baselines]'.")
    baseline.add_argument("algorithm", choices=["ppo"], help="the baseline (ppo)")
    baseline.add_argument("--game", required=True, choices=["asterix", "breakout", "freeway", "space_invaders"])
    baseline.add_argument("--protocol", choices=["thesis", "gymnax"], default="thesis",
                          help="thesis (7200-move episodes, default) or gymnax (1000; Freeway 2500 in both)")
    baseline.add_argument("--seed", type=int, default=0)
    baseline.add_argument("--frames", type=int, default=None, help="env frames to train (default 10M, the protocol's)")
    baseline.add_argument("--eval-every", type=int, default=500_000, metavar="N", help="frames between tests")
    baseline.add_argument("--curve-games", type=int, default=32, metavar="N", help="games per test (default 32)")
    baseline.add_argument("--games", type=int, default=64, help="final games on each package (default 64)")
    baseline.add_argument("--out", default=None, metavar="DIR",
                          help="where to write (default runs/ppo-GAME-PROTOCOL-sSEED)")
    baseline.set_defaults(func=_baseline)



def _add_export(sub) -> None:
    export = sub.add_parser("export", help="write a trained run's agent to one file (NAME.moozi) that every "
                            "command taking a run also takes")
    export.add_argument("run_dir", metavar="DIR", help="a run directory written by `moozi train`")
    export.add_argument("--to", required=True, metavar="NAME.moozi", help="the agent file to write")
    export.add_argument("--checkpoint", default="latest", help="latest (default), best or an update count")
    export.add_argument("--note", default=None, help="a line for the agent's card (e.g. its measured strength)")
    export.set_defaults(func=_export)



def _add_zoo(sub) -> None:
    zoo = sub.add_parser("zoo", help="list the trained agents shipped with moozi (zoo:NAME wherever a run is taken)")
    zoo.add_argument("--json", action="store_true", help="print the zoo's index as one JSON object")
    zoo.set_defaults(func=_zoo)



def _add_presets(sub) -> None:
    presets = sub.add_parser("presets", help="list the presets (name, game, what each is), or show one in full",
                             description="Without NAME: one line per packaged preset (its name, its game, the first "
                                         "line of its header). With NAME: its header and every key it sets, its "
                                         "base merged in (what `moozi train --preset NAME` starts from).")
    presets.add_argument("name", nargs="?", default=None, help="a preset to show in full")
    presets.add_argument("--json", action="store_true", help="the list as one JSON object: name -> {game, header}")
    presets.set_defaults(func=_presets)



def _add_envs(sub) -> None:
    envs = sub.add_parser("envs", help="list the registered environment names")
    envs.set_defaults(func=_envs)


# Every command's arguments, in the order `moozi --help` lists them.
_COMMANDS = (
    _add_demo, _add_train, _add_eval, _add_match, _add_gtp, _add_play, _add_serve, _add_ratings, _add_grade,
    _add_sweep, _add_tune, _add_watch, _add_tree, _add_embed, _add_report, _add_curves, _add_baseline,
    _add_export, _add_zoo, _add_presets, _add_envs,
)


def _test_randomness(parser: argparse.ArgumentParser) -> None:
    """The options that add randomness to test games (default: the run's ``testing`` section)."""
    parser.add_argument("--temperature", type=float, default=None, metavar="T",
                        help="draw moves from the search's policy raised to 1/T (default: the run's "
                             "testing.temperature; 0: greedy)")
    parser.add_argument("--random-moves", type=int, default=None, metavar="N",
                        help="the agent's first N moves are uniformly random (default: testing.random_moves)")
    parser.add_argument("--random-move-prob", type=float, default=None, metavar="P",
                        help="each later move is uniformly random with probability P, an epsilon test (default: "
                             "testing.random_move_prob). A deterministic game (gymnax MinAtar) needs some "
                             "randomness, or every game is the same game")
