"""Command-line entry point: ``moozi <command>``.

Commands are added as the system grows; each parses its own arguments and
imports its heavy dependencies only when it runs (no work at import time).
"""

from __future__ import annotations

import argparse
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
            kind=kind, num_simulations=args.simulations, dirichlet_fraction=0.0, temperature=0.0, gumbel_scale=0.0
        )
        run = jax.jit(
            lambda rng, c: search(None, rng, ttt.root(c), ttt.step, ttt.legal_actions(c), config, discount=1.0, two_player=True)
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="moozi", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="search a few tic-tac-toe positions and print the chosen moves")
    demo.add_argument("--simulations", type=int, default=64, help="simulations per search (default 64)")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "simulations", 1) < 1:
        print("moozi: --simulations must be >= 1", file=sys.stderr)
        return 2
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
