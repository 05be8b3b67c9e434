"""XLA:CPU compile options moozi gives particular programs, chosen by measurement.

XLA:CPU hands some fused operations to a kernel library (YNNPACK). For the
learner's update (forward, backward through K unrolled steps, Adam) that is
slower on the 2-core development machine: with those library fusions off the
update ran 1.10x (CartPole MLP), 1.26x (tic-tac-toe), 1.24x (breakout) and
1.58x (connect four) faster, interleaved A/B in one process
(``benchmarks/xla_tuning.py``, docs/results/xla-tuning.md). Three of four
presets' training rollouts ran 12-21% slower with them off, so only the
update gets the option; every other program compiles with XLA's defaults.

``MOOZI_XLA_TUNING=off`` compiles everything with XLA's defaults (to compare,
or should a later XLA make the choice wrong). An XLA that does not know the
option gets none (checked once per process with a trivial compile), so a JAX
upgrade cannot turn this into an error. On other backends (GPU) the option is
an XLA:CPU one and changes nothing.
"""

from __future__ import annotations

import functools
import logging
import os

from moozi.compile_cache import OFF

ENV = "MOOZI_XLA_TUNING"

# An empty list of library fusion types: the update's operations are emitted by XLA itself.
UPDATE_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": ""}

log = logging.getLogger("moozi")


def enabled(environ=None) -> bool:
    """False when ``MOOZI_XLA_TUNING`` turns the tuning off (``off``, ``0``, ``false``, ``no``, ``none`` or empty)."""
    env = os.environ if environ is None else environ
    return env.get(ENV, "on").strip().lower() not in OFF


@functools.cache
def _supported(options: tuple) -> bool:
    """Whether this process's XLA accepts ``options`` (a trivial compile; JAX refuses unknown ones)."""
    import jax
    import jax.numpy as jnp

    try:
        jax.jit(lambda x: x + 1, compiler_options=dict(options)).lower(jnp.zeros((), jnp.float32)).compile()
    except Exception as err:  # noqa: BLE001 - any refusal means: compile without them
        log.debug("XLA options %s not used: %s", dict(options), err)
        return False
    return True


def update_options(environ=None) -> dict | None:
    """``compiler_options`` for ``jax.jit`` of the learner's update, or None for XLA's defaults."""
    if not enabled(environ) or not _supported(tuple(sorted(UPDATE_OPTIONS.items()))):
        return None
    return dict(UPDATE_OPTIONS)


def forward_env(environ=None) -> dict[str, str]:
    """The variable that carries this process's choice to another (a Ray worker on any node)."""
    env = os.environ if environ is None else environ
    return {ENV: env[ENV]} if ENV in env else {}
