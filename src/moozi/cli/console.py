"""The console of every command: the live progress table, moozi's warnings on stderr, one-line errors for the
user's mistakes, and Ctrl-C remembered through start-up."""

from __future__ import annotations

import errno
import sys

# Disk problems a user fixes (read-only, full, no permission, quota): one line, no traceback.
_DISK_ERRORS = {errno.EROFS, errno.ENOSPC, errno.EACCES, errno.EPERM, errno.EDQUOT}


_interrupted = False
_terminated = False  # a SIGTERM came (Docker, Kubernetes, Slurm, systemd): stop cleanly at the next milestone


class Terminated(BaseException):
    """A SIGTERM before training began (start-up stops at its next milestone; exit 143)."""


class _Progress:
    """What the run is doing, env steps, rates, last test return, health, time.

    On a terminal: a Rich live table on stderr. Without one (a pipe, a file, CI): one progress line on stderr
    per ``LINE_EVERY_S`` seconds of metrics rows, as they come. Either way each row's line also goes to
    train.log (``log``). ``tested_against``: the test games' opponent in two-player games (None: one player).
    """

    LINE_EVERY_S = 30.0

    def __init__(self, title: str, minutes, started: float, tested_against: str | None = None):
        from rich.console import Console
        from rich.live import Live

        self.title = title
        self.minutes = minutes
        self.started = started
        self.status = "starting: building the game and the model"
        self.counters, self.row, self.test = {}, {}, {}
        self.tested_against = tested_against
        self.stopping = lambda: False  # the trainer's stop request, once it exists
        self.console = Console(stderr=True)
        self.live = None
        if self.console.is_terminal:
            self.live = Live(self._render(), console=self.console, refresh_per_second=2, transient=False,
                             get_renderable=self._render)
        self._last_line = -float("inf")

    def _render(self):
        from rich.table import Table

        table = Table(title=self.title, show_header=False, box=None)
        for name, value in self._fields():
            table.add_row(name, value)
        return table

    def _fields(self) -> list[tuple[str, str]]:
        import time

        counters, row, test = self.counters, self.row, self.test
        fmt = lambda v, p=0: "-" if v is None else f"{v:,.{p}f}"  # noqa: E731
        status = "stopping: finishing this phase of the epoch, then a checkpoint" if self.stopping() else self.status
        against = f" (vs {self.tested_against})" if self.tested_against else ""
        fields = [("status", status), ("env steps", fmt(counters.get("env_steps"))),
                  ("env steps/s", fmt(row.get("perf/env_steps_per_s"), 1)), ("updates", fmt(counters.get("updates"))),
                  ("updates/s", fmt(row.get("perf/updates_per_s"), 2)), ("episodes", fmt(counters.get("episodes"))),
                  (f"last test return{against}", fmt(test.get("test/return_mean"), 2) if test else "- (no test yet)")]
        if "health/ok" in row:
            if not row.get("health/tests"):
                fields.append(("health", "not judged yet (no test has run)"))
            else:
                fields.append(("health", "ok" if row["health/ok"] else "[yellow]not learning? see the warning above"))
        elapsed = time.monotonic() - self.started  # this invocation, the time --minutes limits
        limit = f" / {self.minutes * 60:.0f} s" if self.minutes else ""
        total = counters.get("wall_s")
        fields.append(("time", f"{elapsed:,.0f} s{limit}" + (f" (run total {total:,.0f} s)" if total else "")))
        return fields

    def line(self) -> str:
        """The progress as one plain line (no terminal, and train.log)."""
        import re

        markup = re.compile(r"\[/?[a-z]+\]")  # Rich's colour tags
        return "; ".join(f"{k} {markup.sub('', v)}" for k, v in self._fields())

    def __call__(self, counters, row, test):
        import logging
        import time

        self.counters, self.row, self.test = counters, row, test
        self.status = "training" if counters.get("updates") else "acting: filling replay before the first update"
        logging.getLogger("moozi").info("progress: %s", self.line())
        if self.live is None and time.monotonic() - self._last_line >= self.LINE_EVERY_S:
            self._last_line = time.monotonic()
            print(f"moozi: {self.line()}", file=sys.stderr, flush=True)

    def __enter__(self):
        if self.live is not None:
            self.live.__enter__()
        return self

    def __exit__(self, exc_type, *rest):
        if self.live is None:
            return None
        if exc_type is not None:  # an error or Ctrl-C: leave its message alone on the console
            self.live.transient = True
        out = self.live.__exit__(exc_type, *rest)
        sys.stderr.flush()
        return out


def _user_error(err: BaseException) -> str | None:
    """The one-line message for an error that is the user's to fix (None: a moozi bug, keep the traceback)."""
    from moozi.checkpoint import CheckpointError
    from moozi.config import ConfigError
    from moozi.envs import GameContractError, IllegalActionError, UnknownEnvError
    from moozi.errors import ReplayError, RunError

    if isinstance(err, (ConfigError, ReplayError)):
        return f"configuration error: {err}"
    if isinstance(err, RunError):
        return str(err)
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
    callback (JAX has one), so start-up checks :func:`_check_interrupted` at its milestones. A Ctrl-C that
    arrives while a module is being imported waits until the import is over (re-tried every
    ``_IMPORT_RETRY_S`` by a timer): raised inside a compiled module's initialisation (numpy's, jaxlib's) it
    can abort or crash the interpreter. Returns the undo."""
    import signal
    import threading

    global _interrupted, _terminated
    _interrupted = _terminated = False
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGINT)
    previous_term = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum, frame):  # remembered, never raised mid-import; a run's own handler takes over
        global _terminated
        _terminated = True
    can_wait = hasattr(signal, "setitimer")
    previous_alarm = signal.getsignal(signal.SIGALRM) if can_wait else None

    def on_sigint(signum, frame):
        global _interrupted
        _interrupted = True
        if can_wait and _importing(frame):
            signal.setitimer(signal.ITIMER_REAL, _IMPORT_RETRY_S)
            return
        raise KeyboardInterrupt

    def on_alarm(signum, frame):  # the retry of a Ctrl-C that came during an import
        if _interrupted:
            on_sigint(signum, frame)

    hook = sys.unraisablehook

    def quiet_interrupt(unraisable):  # the interrupt is remembered; its "Exception ignored" trace is noise
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            hook(unraisable)

    signal.signal(signal.SIGINT, on_sigint)
    signal.signal(signal.SIGTERM, on_sigterm)
    if can_wait:
        signal.signal(signal.SIGALRM, on_alarm)
    sys.unraisablehook = quiet_interrupt

    def restore():
        if can_wait:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous_alarm)
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)
        sys.unraisablehook = hook

    return restore


_IMPORT_RETRY_S = 0.05


def _importing(frame) -> bool:
    """Whether ``frame`` runs inside an import (importlib's own frames are on the stack)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _signalled() -> str | None:
    """The stop signal the start-up handlers remembered ("SIGTERM", "SIGINT"), or None: a run's own handlers,
    installed later, take it as a stop request (one that came between the last check and them is not lost)."""
    return "SIGTERM" if _terminated else "SIGINT" if _interrupted else None


def _check_interrupted() -> None:
    if _interrupted:
        raise KeyboardInterrupt
    if _terminated:
        raise Terminated


def _drop_console(logger) -> None:
    for h in [h for h in logger.handlers if getattr(h, "_moozi_console", False)]:
        logger.removeHandler(h)
