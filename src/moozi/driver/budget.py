"""A run's budget and its stop signals: the wall clock of this invocation (``--minutes``, on top of the run's
earlier time), the env-step budget, the learning-rate decay over them, and stop requests (Ctrl-C, SIGTERM, or a
caller's :meth:`Budget.request_stop`), which end the run after the epoch's phase they came in, with a checkpoint;
and what a run says when it starts or diverges."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from moozi.model.size import describe, footprint  # noqa: F401 - footprint: the Trainer's, with announce
from moozi.update import budget_lr_scale

log = logging.getLogger("moozi")


class Budget:
    """The budget of one ``Trainer.run`` (see the module doc).

    schedule, learner: the run's ``ScheduleConfig`` (``max_env_steps``) and ``LearnerConfig`` (the decay).
    """

    def __init__(self, schedule, learner):
        self.schedule, self.learner = schedule, learner
        self.deadline: float | None = None  # time.monotonic() at which this invocation stops
        self.stop_requested = False
        self.stop_signal: str | None = None  # "SIGINT" / "SIGTERM": what asked the run to stop, if a signal did
        self._total = (None, 0.0, 0.0)  # (seconds the run may have in all; when this invocation began; its wall0)
        self._overdue = None  # a threading.Timer: a SIGTERM's stop that takes longer than its grace ends the process
        self._overdue_lock = threading.Lock()  # the watcher thread and the main thread may both start it

    def start(self, minutes: float | None, started: float, now: float, wall0: float) -> None:
        """This invocation runs ``minutes`` from ``started`` (its clock began at ``now``; the run had ``wall0`` s)."""
        self.deadline = None if minutes is None else started + 60.0 * minutes
        self._total = (None if self.deadline is None else wall0 + self.deadline - now, now, wall0)
        self.stop_requested = False

    def progress(self, env_steps: int) -> float:
        """Share of the run's budget used: env steps / ``max_env_steps`` when that is set, else run time /
        (run time before this invocation + its ``--minutes``); 0 without a budget.

        An env-step budget alone counts when there is one: it is what a run in several sittings
        (``--continue``) aims at, and each sitting's ``--minutes`` would otherwise end the decay at the
        end of the first sitting.
        """
        if self.schedule.max_env_steps is not None:
            return min(env_steps / self.schedule.max_env_steps, 1.0)
        total_s, start, wall0 = self._total
        if not total_s:
            return 0.0
        return min((wall0 + time.monotonic() - start) / total_s, 1.0)

    def lr_scale(self, env_steps: int) -> float:
        """The learning-rate multiplier of the decay over the budget (1 unless ``lr_decay_over = budget``)."""
        return budget_lr_scale(self.learner, self.progress(env_steps))

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def winding_up(self) -> bool:
        """Out of time or asked to stop: the epoch's later phases (learning, reanalyze, a test) are left for the
        next sitting (``--resume`` runs the due updates), so a stop takes at most the phase it came in."""
        return self.stop_requested or self.out_of_time()

    def request_stop(self) -> None:
        """Finish the current epoch, checkpoint and return (what Ctrl-C and SIGTERM do)."""
        self.stop_requested = True

    def install_stop_handlers(self, grace_s: float | None = None, run_dir=None, counters: dict | None = None,
                              earlier: Callable[[], str | None] | None = None) -> Callable[[], None]:
        """Ctrl-C / SIGTERM finish the current epoch and checkpoint; a second Ctrl-C aborts. Returns the undo.

        Stopping only between epochs means no update is cut in half (its input
        state is donated), so the final checkpoint is always consistent.

        With ``grace_s``, a SIGTERM's stop that has not ended the process ``grace_s`` seconds after the signal
        (a phase that cannot be cut is running: the first epoch's compiling, a long learning phase on a CPU)
        ends it then with exit 143 and a line saying which checkpoint holds the run (:func:`overdue_exit`),
        before the sender's own deadline sends SIGKILL. ``run_dir``, ``counters``: what that line names.
        :meth:`cancel_overdue` (the end of the run's process) stops that clock.

        ``earlier``: the name of a signal that came before these handlers were in (the CLI's start-up handler
        remembers it), or None; such a signal is a stop request now, its grace clock starting here.
        """
        import signal

        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

        def on_signal(signum, frame):
            if self.stop_requested and signum == signal.SIGINT:
                raise KeyboardInterrupt
            self.stop_requested = True
            self.stop_signal = self.stop_signal or signal.Signals(signum).name

        for sig in previous:
            signal.signal(sig, on_signal)
        undo_clock = self._grace_clock(grace_s, run_dir, counters) if grace_s else (lambda: None)
        if earlier is not None and (name := earlier()) is not None:
            self.stop_requested, self.stop_signal = True, self.stop_signal or name
            if name == "SIGTERM" and grace_s:
                self._start_overdue(grace_s, run_dir, counters)

        def restore():
            undo_clock()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore

    def _grace_clock(self, grace_s: float, run_dir, counters: dict | None) -> Callable[[], None]:
        """Start the grace clock the moment a SIGTERM arrives, even while the main thread is inside one long call
        (an XLA compile, a blocking wait), where Python runs no signal handler until the call returns: the
        interpreter's C-level handler writes the signal's number to a wakeup socket, which a thread reads.
        Returns the undo (the socket and the thread go; a clock already started keeps running)."""
        import signal
        import socket

        reader, writer = socket.socketpair()
        writer.setblocking(False)
        before = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)

        def watch():
            while (got := reader.recv(64)):
                if signal.SIGTERM in got:
                    self._start_overdue(grace_s, run_dir, counters)
            reader.close()

        threading.Thread(target=watch, name="moozi-sigterm-grace", daemon=True).start()

        def undo():
            signal.set_wakeup_fd(before)
            writer.close()  # the reader sees the end and its thread returns

        return undo

    def _start_overdue(self, grace_s: float, run_dir, counters: dict | None) -> None:
        """The grace clock of a SIGTERM's stop (once: a second SIGTERM does not restart it)."""
        with self._overdue_lock:
            if self._overdue is None:
                self._overdue = threading.Timer(grace_s, overdue_exit, (run_dir, grace_s, dict(counters or {})))
                self._overdue.daemon = True
                self._overdue.start()

    def cancel_overdue(self) -> None:
        """The run's process is done with its stop: a SIGTERM's grace clock (if one runs) no longer ends it."""
        if self._overdue is not None:
            self._overdue.cancel()


def overdue_exit(run_dir, grace_s: float, at_stop: dict) -> None:
    """A SIGTERM's stop still running ``grace_s`` seconds after the signal: say where the run stands and exit 143
    now. What is on disk is what a SIGKILL would leave (checkpoints are committed by one rename, metrics rows are
    appended whole), so the run resumes from its newest checkpoint; ``at_stop``: its counters at the signal."""
    import os
    import sys
    from pathlib import Path

    from moozi.checkpoint import checkpoint_name, list_checkpoints

    root = Path(run_dir) / "checkpoints"
    found = list_checkpoints(root) if run_dir is not None else []
    reached = at_stop.get("updates")
    if not found:
        where = (f"no checkpoint was written yet, so nothing of this run is saved; start it again with its command "
                 f"(in {Path(run_dir) / 'commands.txt'}) and --continue")
    else:
        step = found[-1].step
        lost = ("no update since it is lost, only the epoch in progress" if reached == step else
                f"the updates since it (the run was at update {reached:,} at the signal) are not saved"
                if reached is not None else "the work since it is not saved")
        where = (f"the newest checkpoint is {root / checkpoint_name(step)} (update {step:,}); {lost}; continue "
                 f"with: moozi train --resume {run_dir}")
    line = (f"the stop asked by SIGTERM still waited on a phase that cannot be cut (compiling, or a long learning "
            f"or acting phase) after {grace_s:g} s (--stop-grace): exiting now; {where}")
    log.warning(line)  # train.log and the CLI's console
    for h in logging.getLogger("moozi").handlers:
        h.flush()
    sys.stderr.flush()
    os._exit(143)


def diverged_error(err, run_dir, learning_rate: float):
    """``err`` (a :class:`~moozi.errors.NonFiniteError`) with what to do: the newest checkpoint on disk (the last
    good state: the diverged one is never saved) and how to go on from it."""
    from pathlib import Path

    from moozi.checkpoint import checkpoint_name, list_checkpoints
    from moozi.errors import NonFiniteError

    root = Path(run_dir) / "checkpoints"
    good = list_checkpoints(root)
    lower = f"a lower learner.learning_rate (now {learning_rate:g})"
    where = (f"the last good state is {root / checkpoint_name(good[-1].step)} (update {good[-1].step:,}); resume "
             f"from it with `moozi train --resume {run_dir}`, or start a new run with {lower}") if good else \
        f"no checkpoint was written before it; start again with {lower}"
    return NonFiniteError(f"training diverged: {err}; the run stopped without saving that state; {where}", err.update)


def announce(config, minutes: float | None, backend: str, run_dir, size: dict) -> None:
    """A run's first lines in train.log: what it trains, for how long, where, how big its network and memory are
    (``size``: :func:`moozi.model.size.footprint`, to which the memory measured now is added); and a warning when
    the learning rate is to decay over a budget the run does not have."""
    from moozi.observe.machine import machine_line, record_machine
    from moozi.observe.memory import run_resident_mb

    s = config.schedule
    size["memory_mb"]["measured"], size["memory_mb"]["measured_of"] = run_resident_mb(run_dir)  # before the lines
    if config.learner.lr_decay_over == "budget" and minutes is None and s.max_env_steps is None:
        log.warning("learner.lr_decay_over = budget, but the run has no budget (no --minutes and no "
                    "schedule.max_env_steps): the learning rate stays at its peak")
    acting = (f"acting in the learner, {s.epochs_per_call} epoch{'s' if s.epochs_per_call > 1 else ''} per call"
              if s.acts_in_learner else f"{config.distributed.train_workers} training workers")
    log.info("training %s %s (%s schedule, %s backend, %s)", config.env.name,
             "without a time limit" if minutes is None else f"for {minutes:g} minutes", s.kind, backend, acting)
    log.info("on %s", machine_line(record_machine(run_dir)))
    log.info("%s", describe(size))


def last_writes(writes: list[tuple[str, Callable[[], object]]], failing: BaseException | None) -> None:
    """A run's last writes (the last metrics row, the final checkpoint, closing the metrics), each tried even if
    one before it failed (a full disk). ``writes``: ``(what, call)`` pairs. With ``failing`` (the error already
    ending the run) their own failures are logged and never raised over it, so the user sees the first error;
    without, the first failure is raised once all were tried."""
    first = None
    for what, call in writes:
        try:
            call()
        except Exception as e:  # noqa: BLE001 - each is reported; the first one raised below
            if failing is None and first is None:
                first = e
            else:
                log.error("%s was not written either: %s", what, e)
    if first is not None:
        raise first
