"""Command-line entry point: ``moozi <command>``.

Each command parses its own arguments and imports its heavy dependencies only when it runs (no work at import
time): :mod:`.main` (the program), :mod:`.parser`, :mod:`.console` (progress, warnings, one-line errors,
Ctrl-C), :mod:`.train`, :mod:`.commands` (everything that uses a trained run or a game) and :mod:`.demo`.
``build_parser`` resolves lazily, so ``moozi`` takes over Ctrl-C before it imports its commands.
"""

from __future__ import annotations

from moozi.cli.console import _drop_console, _log_console, _Progress
from moozi.cli.main import main, run

__all__ = ["build_parser", "main", "run", "_Progress", "_drop_console", "_log_console"]


def __getattr__(name: str):
    if name == "build_parser":  # imports every command's module: only when asked for
        from moozi.cli.parser import build_parser

        return build_parser
    raise AttributeError(f"module 'moozi.cli' has no attribute {name!r}")
