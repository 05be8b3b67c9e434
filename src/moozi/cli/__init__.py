"""Command-line entry point: ``moozi <command>``.

Each command parses its own arguments and imports its heavy dependencies only when it runs (no work at import
time): :mod:`.main` (the program), :mod:`.parser`, :mod:`.console` (progress, warnings, one-line errors,
Ctrl-C), :mod:`.train`, :mod:`.commands` (everything that uses a trained run or a game) and :mod:`.demo`.
"""

from moozi.cli.console import _drop_console, _log_console, _Progress
from moozi.cli.main import main, run
from moozi.cli.parser import build_parser

__all__ = ["build_parser", "main", "run", "_Progress", "_drop_console", "_log_console"]
