"""Resident memory of this machine's processes, read from /proc (Linux; zeros elsewhere)."""

from __future__ import annotations

import os
from pathlib import Path


def _status(pid: int) -> dict[str, float]:
    """``VmRSS`` / ``RssShmem`` etc. of ``/proc/PID/status`` in MB (empty if the process is gone)."""
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if rest.strip().endswith("kB"):
                out[key] = float(rest.split()[0]) / 1024.0
    except (OSError, ValueError):
        pass
    return out


def rss_mb(pid: int | None = None) -> float:
    """Resident memory of one process (default: this one), in MB."""
    return _status(os.getpid() if pid is None else pid).get("VmRSS", 0.0)


def shared_mb(pid: int) -> float:
    """Resident shared memory of one process in MB (for Ray's raylet: the object store pages in use)."""
    return _status(pid).get("RssShmem", 0.0)


def pids_with(text: str) -> list[int]:
    """Pids whose command line contains ``text`` (e.g. a Ray session folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def run_resident_mb(run_dir) -> tuple[float, str]:
    """Resident memory of this process and of the run's components on this machine (pids of ``workers.json``),
    in MB, and what it covers (``"this process"`` or ``"this process and N components"``)."""
    import json
    import socket

    try:
        placed = json.loads((Path(run_dir) / "workers.json").read_text())
    except (OSError, ValueError):
        placed = {}
    here = socket.gethostname()
    pids = {int(v["pid"]) for v in placed.values()
            if isinstance(v, dict) and "pid" in v and v.get("hostname", here) == here} - {os.getpid()}
    total = rss_mb() + sum(rss_mb(p) for p in pids)
    return round(total, 1), "this process" + (f" and {len(pids)} components" if pids else "")


class PeakRss:
    """The peak resident memory of this process inside a ``with`` block, above what it held at the start.

    Linux keeps a high-water mark of each process's resident memory
    (``VmHWM``); entering resets it (``/proc/self/clear_refs``), leaving reads
    it, so a peak between two samples is not missed. ``extra_mb`` is ``None``
    where the kernel does not allow the reset. Nothing else in moozi reads
    the mark, so moving it is harmless; it is one per process, so blocks must
    not overlap.
    """

    def __init__(self):
        self.start_mb = 0.0
        self.extra_mb: float | None = None

    def __enter__(self) -> "PeakRss":
        self.start_mb = rss_mb()
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self._reset = True
        except OSError:
            self._reset = False
        return self

    def __exit__(self, *exc) -> None:
        if self._reset:
            peak = _status(os.getpid()).get("VmHWM")
            self.extra_mb = None if peak is None else max(peak - self.start_mb, 0.0)
