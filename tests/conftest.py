"""Test session setup: one compile cache for the whole suite.

Every test process (the pytest workers and the ``moozi`` subprocesses the CLI
tests start) shares one on-disk XLA compile cache under ``.pytest_cache``, so
a program compiled by one test is loaded by the next that builds the same one,
and the user's own cache (``~/.cache/moozi``) is never written by tests. Set
before any test module imports JAX, which reads the variable at import.
"""

import os
from pathlib import Path

import pytest

# A worker that dies (XLA has segfaulted writing the compile cache) must not hang the run: see tests/xdist_crash.py.
from tests.xdist_crash import (  # noqa: F401
    pytest_handlecrashitem,
    pytest_report_teststatus,
    pytest_terminal_summary,
    pytest_xdist_make_scheduler,
)

os.environ.setdefault("JAX_COMPILATION_CACHE_DIR",
                      str(Path(__file__).resolve().parent.parent / ".pytest_cache" / "moozi-xla"))
# Keep the many programs that compile in 0.1-1 s too (JAX keeps only >= 1 s ones by default).
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.1")
# A size makes JAX lock the folder while it writes, so two pytest workers never read a half-written program.
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(4 * 1024**3))
# Tests spend their time compiling, not running: with XLA's backend optimisations off (LLVM -O0, no expensive
# passes) the CI tier took 609-708 s instead of 844 s from a cold cache (2026-11-27, 2 cores). The programs compute
# the same operations; `JAX_DISABLE_MOST_OPTIMIZATIONS=0 make test` tests them as users compile them, and tests
# about compile options turn optimisations back on (the `xla_optimized` fixture).
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")


@pytest.fixture
def xla_optimized():
    """XLA's optimisations on for one test (the suite turns them off above), restored afterwards."""
    import jax

    before = jax.config.values["jax_disable_most_optimizations"]
    jax.config.update("jax_disable_most_optimizations", False)
    yield
    jax.config.update("jax_disable_most_optimizations", before)


def _memory_maps() -> int | None:
    try:
        with open(f"/proc/{os.getpid()}/maps") as f:
            return sum(1 for _ in f)
    except OSError:  # not Linux
        return None


@pytest.fixture(scope="module", autouse=True)
def _few_compiled_programs():
    """A module may not leave 20,000 more memory maps in its worker than it found. Every program XLA compiles keeps
    about three maps per kernel while it lives, and Linux allows 65,530 per process: a test that ran pgx's step op
    by op compiled a program per move (41,000 maps), and XLA segfaulted in a later module's compile (CI, 2026-12-06).
    The whole tier peaks near 28,000 per worker; the busiest single test adds about 4,400."""
    before = _memory_maps()
    yield
    after = _memory_maps()
    if before is not None and after is not None and after - before > 20_000:
        pytest.fail(f"this module left {after - before:,} more memory maps ({after:,} of Linux's 65,530): it compiles "
                    "thousands of programs; jit the loop (or its step) instead of running JAX op by op", pytrace=False)
