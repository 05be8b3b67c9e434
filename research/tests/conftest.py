"""Setup for the research tests (``make test-research``; outside CI): the test suite's compile cache and
XLA settings, and the repository root importable (``tests.helpers``, ``research.tests.helpers``)."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(ROOT / ".pytest_cache" / "moozi-xla"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.1")
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(4 * 1024**3))
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
