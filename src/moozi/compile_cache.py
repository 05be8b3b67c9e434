"""The on-disk cache of compiled XLA programs, shared by every moozi process of a user.

A moozi command spends most of its start-up compiling (the acting scan, the
search, the learner update), and a Ray run compiles once per process. JAX can
keep compiled programs on disk (its persistent compilation cache); moozi turns
it on, so a second run of a preset, a restarted worker and every Ray process
after the first load a program instead of compiling it.

Where: ``$MOOZI_COMPILE_CACHE`` if set (a folder, or ``off`` to disable), else
``$XDG_CACHE_HOME/moozi/xla`` (``~/.cache/moozi/xla``). A folder JAX was
already told about (``JAX_COMPILATION_CACHE_DIR``) wins. The cache is bounded
(least recently used programs are evicted past :data:`MAX_BYTES`); deleting
the folder is always safe. Anyone who can write to it can run code in your
moozi processes (JAX's warning): keep it private.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

ENV = "MOOZI_COMPILE_CACHE"
MAX_BYTES = 2 * 1024**3
# JAX keeps only programs that took >= 1 s to compile; a Ray CartPole run starts in 16 s instead of 18-20
# when the many 0.1-1 s programs are kept too (docs/results/distributed). They are small (1.4 MB in all).
MIN_COMPILE_S = 0.1
OFF = ("", "0", "off", "false", "no", "none")  # the values that turn a MOOZI_* switch off (also xla_tuning)

log = logging.getLogger("moozi")


def cache_dir(environ=None) -> str | None:
    """The folder moozi's compile cache lives in, or None when turned off (``MOOZI_COMPILE_CACHE=off``)."""
    env = os.environ if environ is None else environ
    if ENV in env:
        value = env[ENV].strip()
        return None if value.lower() in OFF else str(Path(value).expanduser().absolute())
    base = env.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    return str(Path(base) / "moozi" / "xla")


def enable() -> str | None:
    """Point JAX at the cache (before the first compile counts; later compiles still use it).

    Returns the folder in use, or None (turned off, or the folder cannot be
    made: a warning, never an error; moozi then compiles as before).
    """
    import jax

    given = jax.config.jax_compilation_cache_dir
    if given:  # the user told JAX directly
        return given
    path = cache_dir()
    if path is None:
        return None
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        log.warning("compile cache off: cannot make %s (%s); set %s to another folder or to off", path, err, ENV)
        return None
    jax.config.update("jax_compilation_cache_dir", path)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_S)
    jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)  # evicting past it needs filelock (a dependency)
    return path


def forward_env(environ=None) -> dict[str, str]:
    """The variables that carry this process's cache choice to another (a Ray worker on any node)."""
    env = os.environ if environ is None else environ
    out = {k: env[k] for k in (ENV, "JAX_COMPILATION_CACHE_DIR") if k in env}
    if ENV in out:  # resolved: a relative folder means the driver's, not the worker's cwd
        out[ENV] = cache_dir(env) or "off"
    return out
