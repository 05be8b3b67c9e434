"""One external GTP engine process: commands with a timeout, every fault one :class:`EngineFault` with its reason.

A reader thread moves the engine's output lines to a queue, so a reply is waited for with a timeout (an engine
that hangs) and an engine that exits is seen at once (the end of its output). GTP v2 replies are ``= text`` or
``? message`` followed by an empty line; an engine that writes nothing of that shape within the timeout, ends,
or refuses a command is at fault. What :class:`moozi.eval.players.GTPPlayer` plays matches with.
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time

_END = None  # what the reader thread puts on the queue when the engine's output ends


class EngineFault(RuntimeError):
    """The engine crashed, hung, refused a command or answered something that is no reply (``reason`` says)."""


class GTPEngine:
    """An engine started from ``command`` (a list of arguments); :meth:`send` one command, get its reply text.

    timeout_s: the longest wait for one reply (a ``genmove`` included); stderr is discarded.
    """

    def __init__(self, command: list[str], timeout_s: float):
        self.command, self.timeout_s = command, float(timeout_s)
        try:
            self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True, bufsize=1)
        except OSError as e:
            raise EngineFault(f"could not start {' '.join(command)}: {e}") from None
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, name="moozi-gtp-reader", daemon=True).start()

    def _read(self) -> None:
        try:
            for line in self.proc.stdout:
                self.lines.put(line.rstrip("\r\n"))
        except (OSError, ValueError):
            pass
        self.lines.put(_END)

    def _line(self, deadline: float, after: str) -> str:
        try:
            line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.0))
        except queue.Empty:
            raise EngineFault(f"no answer to {after!r} within {self.timeout_s:g} s") from None
        if line is _END:
            code = self.proc.poll()
            raise EngineFault(f"the engine ended after {after!r}" + ("" if code is None else f" (exit {code})"))
        return line

    def send(self, line: str) -> str:
        """The reply to ``line`` (what follows ``=``, stripped); an :class:`EngineFault` for every other outcome."""
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):
            raise EngineFault(f"the engine ended before {line!r}") from None
        deadline = time.monotonic() + self.timeout_s
        first = self._line(deadline, line)
        while not first.strip():  # blank lines before a reply
            first = self._line(deadline, line)
        body = [first]
        while (more := self._line(deadline, line)).strip():
            body.append(more)
        reply = "\n".join(body)
        if reply.startswith("?"):
            raise EngineFault(f"the engine refused {line!r}: {reply[1:].strip() or '(no reason given)'}")
        if not reply.startswith("="):
            raise EngineFault(f"the engine answered {line!r} with {reply[:80]!r}, which is no GTP reply")
        return reply[1:].strip()  # commands are sent without ids, so replies carry none

    def kill(self) -> None:
        """Stop a faulty engine at once (it may hang: no ``quit`` is waited for)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.close()

    def close(self) -> None:
        """``quit``, then kill if it does not end within 5 s."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=5)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except (OSError, ValueError):
                pass
