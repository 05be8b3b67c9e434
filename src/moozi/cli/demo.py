"""``moozi demo``: train a small agent, evaluate it and say what it learned (``--search``: the exact-model search
of three tic-tac-toe positions, which compiles in seconds and trains nothing)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import time
from pathlib import Path

DEMO_PRESET = "cartpole"
# A budget in env steps, not minutes: a seed then makes the same run each time and every machine the same updates
# (two minutes gave seed 0 91, 454 and 500 on one machine, as the updates they allowed varied). Seeds still differ:
# over seeds 0-5, 300,000 steps held the pole 400-500 steps, 400,000 steps 406-500, two minutes 376-500.
# docs/results/demo-budget.
DEMO_ENV_STEPS = 300_000


def _demo(args: argparse.Namespace) -> int:
    return _search_demo(args) if args.search else _train_demo(args)


def _fresh_run_dir(given: str | None) -> Path:
    if given:
        return Path(given)
    base = Path("runs") / "demo"
    n = 1
    while base.exists():
        n += 1
        base = Path("runs") / f"demo-{n}"
    return base


_ENV_STEPS_KEY = "schedule.max_env_steps"


def _overridden_env_steps(overrides: list[str]) -> int | None:
    """``schedule.max_env_steps`` as the user's overrides set it (the config's own parser), if they do; a bad
    override is left for the training's config check to name."""
    from moozi.config import ConfigError, apply_overrides

    try:
        value = apply_overrides({}, overrides).get("schedule", {}).get("max_env_steps")
    except (ConfigError, AttributeError):
        return None
    return value if isinstance(value, int) else None


def _budget(args: argparse.Namespace) -> tuple[int | None, float | None, str | None]:
    """``(env_steps, minutes, error)``: ``--env-steps``, else a ``schedule.max_env_steps`` override, else
    :data:`DEMO_ENV_STEPS` when ``--minutes`` is not given either; ``--minutes``; or the message for a bad one."""
    env_steps, minutes = args.env_steps, args.minutes
    if env_steps is None:
        env_steps = _overridden_env_steps(getattr(args, "overrides", []))
    if env_steps is None and minutes is None:
        env_steps = DEMO_ENV_STEPS
    if env_steps is not None and env_steps < 1:
        return None, None, f"--env-steps must be a positive number of environment steps, got {env_steps}"
    if minutes is not None and not minutes > 0:
        return None, None, f"--minutes must be > 0, got {minutes:g}"
    return env_steps, minutes, None


def _budget_words(env_steps: int | None, minutes: float | None) -> str:
    words = [f"{env_steps:,} environment steps"] if env_steps is not None else []
    if minutes is not None:
        words.append(f"{minutes:g} minute(s), compiling included")
    return " or ".join(words) + (", whichever ends first" if len(words) == 2 else "")


def _train_demo(args: argparse.Namespace) -> int:
    """CartPole trained for ``--env-steps`` (or ``--minutes``, compiling included), its last checkpoint played
    ``--episodes`` times, one game drawn as a GIF and the run's report written; one summary of it all."""
    from rich.console import Console

    from moozi.cli.train import _train, add_train_arguments
    from moozi.eval.evaluate import evaluate
    from moozi.observe.gif import watch_run
    from moozi.observe.report import write_report

    console = Console()  # paths are printed unwrapped (soft_wrap) so they can be copied
    run_dir = _fresh_run_dir(args.run_dir)
    if args.episodes < 1:
        console.print("moozi demo: --episodes must be >= 1")
        return 2
    env_steps, minutes, error = _budget(args)
    if error:
        console.print(f"moozi demo: {error}")
        return 2
    console.print(f"[bold]moozi demo[/bold]: CartPole (keep a pole upright on a moving cart; an episode lasts at most "
                  f"500 steps) trained for {_budget_words(env_steps, minutes)}, into {run_dir}")
    started = time.monotonic()
    budget = [f"{_ENV_STEPS_KEY}={env_steps}"] if env_steps is not None else []  # last: --env-steps wins
    minutes_flag = ["--minutes", str(minutes)] if minutes is not None else []
    argv = ["train", "--preset", DEMO_PRESET, "--run-dir", str(run_dir), "--seed", str(args.seed), *minutes_flag,
            *args.overrides, *budget]
    parser = argparse.ArgumentParser(prog="moozi train")
    add_train_arguments(parser)
    train_args = parser.parse_args(argv[1:])
    train_args.argv = argv
    with contextlib.redirect_stdout(io.StringIO()) as summary:  # the JSON line is for scripts; the demo says it
        code = _train(train_args)
    if code:
        return code
    trained = json.loads(summary.getvalue().strip().splitlines()[-1])
    train_s = time.monotonic() - started
    console.print(f"playing {args.episodes} test episodes with the last checkpoint, drawing one, writing the report")
    result = evaluate(run_dir, games=args.episodes, seed=args.seed)
    gif = watch_run(run_dir, 1, seed=args.seed, out=run_dir / "demo.gif", max_frames=args.max_frames)
    report = run_dir / "report.html"
    write_report([str(run_dir)], report)
    console.print()
    console.print(f"[bold]What it learned[/bold]: the agent keeps the pole up for [bold]{result['return_mean']:.0f}"
                  f"[/bold] steps on average over {args.episodes} episodes (fewest {result['return_min']:.0f}, most "
                  f"{result['return_max']:.0f}); 500 is the most an episode lasts.")
    console.print(f"  trained {train_s:.0f} s: {trained['env_steps']:,} environment steps, {trained['updates']:,} "
                  f"updates, last test during training {trained.get('test/return_mean', float('nan')):.0f}")
    console.print(f"  run directory: {run_dir}  (moozi eval / watch / tree / report take it)", soft_wrap=True)
    console.print(f"  report:        {report}", soft_wrap=True)
    console.print(f"  one episode:   {gif['gif']}", soft_wrap=True)
    console.print("  next: `moozi train --preset tictactoe --minutes 5`, then `moozi eval RUN --opponent perfect`")
    return 0


def _search_demo(args: argparse.Namespace) -> int:
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
