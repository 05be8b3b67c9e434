"""``moozi <command>``: parse, run the command, turn the user's mistakes into one line and an exit code."""

from __future__ import annotations

import sys

import moozi.cli.console as console
from moozi.cli.console import _catch_sigint, _drop_console, _user_error

# Commands that compile nothing, so need not import JAX to point it at the compile cache.
_NO_COMPILE = ("presets", "envs", "report", "curves")


def parse_args(argv: list[str] | None):
    """The command line parsed; KEY=VALUE overrides after an option (``--seed 3 a.b=1``) are overrides too."""
    from moozi.cli.parser import build_parser  # here: main() takes over Ctrl-C before the commands are imported

    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        if hasattr(args, "overrides") and all("=" in e and not e.startswith("-") for e in extra):
            args.overrides = list(args.overrides) + extra
        else:
            parser.parse_args(argv)  # argparse's own message and exit code
    return args


def main(argv: list[str] | None = None) -> int:
    import logging

    restore_sigint = _catch_sigint()  # before anything is imported: a Ctrl-C there waits for the import's end
    logger = logging.getLogger("moozi")
    propagate = logger.propagate
    try:
        args = parse_args(argv)
        args.argv = list(sys.argv[1:] if argv is None else argv)
        sims = getattr(args, "simulations", None)
        if sims is not None and min(sims if isinstance(sims, list) else [sims]) < 1:
            print("moozi: --simulations must be >= 1", file=sys.stderr)
            return 2
        if args.command not in _NO_COMPILE:
            from moozi import compile_cache

            compile_cache.enable()
        return args.func(args)
    except KeyboardInterrupt:
        print("moozi: interrupted", file=sys.stderr)
        return 130
    except console.Terminated:
        print("moozi: stopped by SIGTERM before training began; nothing was trained or written", file=sys.stderr)
        return 143
    except Exception as err:
        if console._interrupted:  # an interrupt a library turned into another error (no SIGALRM to wait with): still it
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

    try:
        code = main()
    except BrokenPipeError:  # the reader went away (`moozi presets | head`): nothing more to say to it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        code = 0
    if code == 130:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    sys.exit(code)
