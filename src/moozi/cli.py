"""Command-line entry point: ``moozi <command>``.

Commands are added as the system grows; each parses its own arguments and
imports its heavy dependencies only when it runs (no work at import time).
"""

from __future__ import annotations

import argparse
import json
import sys


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
    """Rich live display: env steps, env steps/s, updates/s, last test return."""

    def __init__(self, title: str, minutes):
        from rich.console import Console
        from rich.live import Live

        self.title = title
        self.minutes = minutes
        self.console = Console(stderr=True)
        self.live = Live(self._render({}, {}, {}), console=self.console, refresh_per_second=2, transient=False)

    def _render(self, counters, row, test):
        from rich.table import Table

        table = Table(title=self.title, show_header=False, box=None)
        fmt = lambda v, p=0: "-" if v is None else f"{v:,.{p}f}"
        table.add_row("env steps", fmt(counters.get("env_steps")))
        table.add_row("env steps/s", fmt(row.get("perf/env_steps_per_s"), 1))
        table.add_row("updates", fmt(counters.get("updates")))
        table.add_row("updates/s", fmt(row.get("perf/updates_per_s"), 2))
        table.add_row("episodes", fmt(counters.get("episodes")))
        table.add_row("last test return", fmt(test.get("test/return_mean"), 2))
        table.add_row("wall", fmt(counters.get("wall_s"), 0) + " s" + (f" / {self.minutes * 60:.0f} s" if self.minutes else ""))
        return table

    def __call__(self, counters, row, test):
        self.live.update(self._render(counters, row, test))

    def __enter__(self):
        self.live.__enter__()
        return self

    def __exit__(self, *exc):
        return self.live.__exit__(*exc)


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
    progress = _Progress(f"moozi train {config.env.name} -> {run_dir}", args.minutes)
    trainer = Trainer(config, run_dir, resume=resume, progress=progress)
    try:
        with progress:
            counters = trainer.run(minutes=args.minutes)
    finally:
        trainer.close()
    summary = {"run_dir": str(run_dir), **counters, **trainer.last_test}
    print(json.dumps(summary))
    return 0


def _eval(args: argparse.Namespace) -> int:
    from moozi.eval.evaluate import evaluate

    if args.games < 1:
        print("moozi eval: --games must be >= 1", file=sys.stderr)
        return 2
    result = evaluate(args.run_dir, opponent=args.opponent, games=args.games, seed=args.seed)
    print(json.dumps(result))
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

    ev = sub.add_parser("eval", help="play a trained agent against an opponent; prints one JSON line")
    ev.add_argument("run_dir", metavar="DIR")
    ev.add_argument("--opponent", choices=["random", "perfect"], default="random")
    ev.add_argument("--games", type=int, default=100)
    ev.add_argument("--seed", type=int, default=0)
    ev.set_defaults(func=_eval)

    presets = sub.add_parser("presets", help="list the preset names")
    presets.set_defaults(func=_presets)
    envs = sub.add_parser("envs", help="list the registered environment names")
    envs.set_defaults(func=_envs)
    return parser


def main(argv: list[str] | None = None) -> int:
    from moozi.config import ConfigError

    args = build_parser().parse_args(argv)
    if getattr(args, "simulations", 1) < 1:
        print("moozi: --simulations must be >= 1", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except ConfigError as err:
        print(f"moozi: configuration error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # user-facing errors from bridges, checkpoints, presets
        from moozi.checkpoint import CheckpointError
        from moozi.envs import UnknownEnvError

        if isinstance(err, (CheckpointError, UnknownEnvError)):
            print(f"moozi: {err}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
