"""``moozi demo``."""

from __future__ import annotations

import argparse


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
