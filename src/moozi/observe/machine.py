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
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


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
