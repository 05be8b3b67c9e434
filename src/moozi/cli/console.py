"""The console of every command: the live progress table, moozi's warnings on stderr, one-line errors for the
user's mistakes, and Ctrl-C remembered through start-up."""

from __future__ import annotations

import errno
import sys

# Disk problems a user fixes (read-only, full, no permission, quota): one line, no traceback.
_DISK_ERRORS = {errno.EROFS, errno.ENOSPC, errno.EACCES, errno.EPERM, errno.EDQUOT}


_interrupted = False


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
