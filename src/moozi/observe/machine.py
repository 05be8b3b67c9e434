"""What machine a run or a benchmark ran on, so that its wall-clock numbers can be read.

The same nominal machine (2 cores of a cloud "AMD EPYC") has run the
breakout preset at 3.3 and at 10.8 updates per second on different days: a
result in minutes means little without the processor that produced it.
:func:`machine_info` gathers what can be read cheaply and without starting
anything: the CPU's model name, family / model numbers (``AMD EPYC`` alone
names several generations), whether it has AVX-512 (XLA's CPU kernels use
it), cores, memory and the versions of Python and JAX.
"""

from __future__ import annotations

import os
import platform
import sys
import threading
import time
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
STAT = Path("/proc/stat")


def parse_cpuinfo(text: str) -> dict:
    """The first processor's ``model name``, ``cpu family``, ``model`` and flags of a ``/proc/cpuinfo`` text.

    Returns ``{"model_name", "family", "model", "flags"}``; a field the text
    lacks is None (``flags``: an empty list), as on ARM, whose cpuinfo names
    ``CPU implementer`` / ``CPU part`` instead.
    """
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:  # the end of the first processor's block
                break
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    flags = (fields.get("flags") or fields.get("Features") or "").split()
    return {"model_name": fields.get("model name") or fields.get("Processor"),
            "family": fields.get("cpu family"), "model": fields.get("model"), "flags": sorted(flags)}


def cpu_description(info: dict | None = None) -> str:
    """One phrase for the CPU, e.g. ``"AMD EPYC (family 25 model 1, AVX2, no AVX-512)"``."""
    if info is None:
        info = read_cpuinfo()
    name = info.get("model_name") or platform.processor() or platform.machine() or "unknown CPU"
    details = []
    if info.get("family") is not None:
        details.append(f"family {info['family']} model {info['model']}")
    flags = set(info.get("flags") or ())
    if flags:
        if "avx2" in flags:
            details.append("AVX2")
        details.append("AVX-512" if "avx512f" in flags else "no AVX-512")
    return f"{name} ({', '.join(details)})" if details else name


def read_cpuinfo() -> dict:
    """:func:`parse_cpuinfo` of this machine (all fields None where there is no ``/proc/cpuinfo``)."""
    try:
        return parse_cpuinfo(CPUINFO.read_text())
    except OSError:
        return parse_cpuinfo("")


def _memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def machine_info() -> dict:
    """This process's machine: CPU, cores (all and usable), memory, OS, Python, and JAX if it is imported.

    JAX's version and devices are read only where the process has imported
    JAX already (reading them would otherwise start a backend).
    """
    cpu = read_cpuinfo()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    out = {
        "cpu": cpu_description(cpu),
        "avx512": "avx512f" in cpu["flags"],
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gib": _memory_gib(),
        "os": platform.platform(),
        "python": platform.python_version(),
    }
    jax = sys.modules.get("jax")
    if jax is not None:
        out["jax"] = jax.__version__
        try:
            out["devices"] = sorted({f"{d.platform}:{d.device_kind}" for d in jax.devices()})
        except RuntimeError:  # no backend could start: the versions still say something
            pass
    return out


def machine_line(info: dict | None = None) -> str:
    """:func:`machine_info` as one line for a log."""
    info = machine_info() if info is None else info
    line = f"{info['cpu']}, {info['usable_cores']} of {info['cores']} cores usable"
    if info.get("memory_gib"):
        line += f", {info['memory_gib']} GiB"
    line += f", Python {info['python']}"
    if "jax" in info:
        line += f", jax {info['jax']} on {', '.join(info.get('devices', [])) or 'no device'}"
    return line


def cpu_times(stat: str) -> tuple[int, int]:
    """(busy, total) clock ticks of all cores from /proc/stat's text: its first line, ``cpu  user nice
    system idle iowait irq softirq steal guest guest_nice``. Busy is user + nice + system + irq +
    softirq (guest time is already inside user and nice), idle is idle + iowait; steal (another
    virtual machine ran) is neither, so the busy share is of the time this machine had its cores."""
    fields = stat.split("\n", 1)[0].split()
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        raise ValueError(f"not /proc/stat's first line: {stat[:80]!r}")
    user, nice, system, idle, iowait, irq, softirq = (int(v) for v in fields[1:8])
    busy = user + nice + system + irq + softirq
    return busy, busy + idle + iowait


def cpu_sample(path: Path = STAT) -> tuple[float, int, int]:
    """``(time.time(), busy, total)``: :func:`cpu_times` now; OSError where there is no /proc/stat."""
    return (time.time(), *cpu_times(Path(path).read_text()))


class Sampler:
    """``read()`` every ``every_s`` seconds in a thread while the ``with`` block runs (the machine's load
    beside a run), and with ``edges`` also at its start and at exit, into ``samples``; a read that raises
    OSError (no /proc: not Linux) adds nothing."""

    def __init__(self, read, every_s: float, edges: bool = True):
        self.read, self.every_s, self.edges, self.samples = read, every_s, edges, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        try:
            self.samples.append(self.read())
        except OSError:
            pass

    def _run(self) -> None:
        if self.edges:
            self._sample()
        while not self._stop.wait(self.every_s):
            self._sample()

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        if self.edges:
            self._sample()


def record_machine(run_dir) -> dict:
    """Append this machine (:func:`machine_info`, with the time) to ``run_dir/machines.jsonl`` and return it: one
    line per command that made or resumed a run (it may go on elsewhere), so its minutes can be read against
    the processor that made them."""
    import json
    import time
    from pathlib import Path

    info = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **machine_info()}
    with open(Path(run_dir) / "machines.jsonl", "a") as f:
        f.write(json.dumps(info) + "\n")
    return info


def parse_gpu_utilization(text: str, indices: list[int] | None = None) -> float | None:
    """``nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader,nounits`` output -> the mean busy
    fraction (0..1) of the GPUs ``indices`` (all listed where None); None where none is read."""
    busy = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2 or not parts[0].isdigit():
            continue
        try:
            value = float(parts[1])
        except ValueError:  # "[N/A]" on some boards
            continue
        if indices is None or int(parts[0]) in indices:
            busy.append(value / 100.0)
    return sum(busy) / len(busy) if busy else None


def _visible_gpus() -> list[int] | None:
    """The physical indices ``CUDA_VISIBLE_DEVICES`` names (None: all, or names that are not indices)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if not visible:
        return None
    names = [v.strip() for v in visible.split(",") if v.strip()]
    return [int(v) for v in names] if all(v.isdigit() for v in names) else None


def gpu_busy_fraction(timeout_s: float = 2.0) -> float | None:
    """The share of time a kernel ran on this process's GPUs over nvidia-smi's last sample period (its
    ``utilization.gpu``, averaged over the visible GPUs), or None: JAX runs on no GPU here, or nvidia-smi
    cannot say (absent, slow, or an answer it cannot parse). An instant sample, not an average over a row."""
    jax = sys.modules.get("jax")
    if jax is None:
        return None
    try:
        if jax.default_backend() != "gpu":
            return None
    except RuntimeError:
        return None
    import subprocess

    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_gpu_utilization(done.stdout, _visible_gpus()) if done.returncode == 0 else None


def device_peak_memory_bytes() -> int | None:
    """The most device memory this process has held on any of its local devices (JAX's ``peak_bytes_in_use``),
    or None where the backend keeps no such count (the CPU) or JAX is not imported."""
    jax = sys.modules.get("jax")
    if jax is None:
        return None
    peaks = []
    try:
        for device in jax.local_devices():
            stats = device.memory_stats()
            if stats and "peak_bytes_in_use" in stats:
                peaks.append(int(stats["peak_bytes_in_use"]))
    except (RuntimeError, AttributeError):
        return None
    return max(peaks) if peaks else None
