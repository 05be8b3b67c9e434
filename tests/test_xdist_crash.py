"""The suite's crash-safe loadscope scheduler (tests/xdist_crash.py): a worker that dies does not hang the run,
the test it died on runs once more, and a test that kills every worker it runs on still fails."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xdist")

REPO = Path(__file__).resolve().parent.parent

FILES = {
    "test_a.py": "def test_one(): pass\ndef test_two(): pass\n",
    "test_b.py": ("import os, pathlib\n"
                  "def test_crash_once():\n"
                  "    marker = pathlib.Path(__file__).with_name('crashed-once')\n"
                  "    if not marker.exists():\n"
                  "        marker.write_text('')\n"
                  "        os._exit(1)\n"
                  "def test_after(): pass\n"),
    "test_c.py": "import os\ndef test_always_crashes(): os._exit(1)\ndef test_c_after(): pass\n",
}


def _run(folder: Path, *names: str) -> subprocess.CompletedProcess:
    for name, text in FILES.items():
        (folder / name).write_text(text)
    # The timeout only turns a hang (stock pytest-xdist 3.8 hangs here) into a failure; it times nothing.
    return subprocess.run([sys.executable, "-m", "pytest", "-n", "1", "--dist", "loadscope", "-p", "tests.xdist_crash",
                           "-q", "-p", "no:cacheprovider", *names], cwd=folder, capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_a_test_that_crashed_once_runs_again_and_the_run_passes(tmp_path):
    out = _run(tmp_path, "test_a.py", "test_b.py")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "4 passed, 1 rerun" in out.stdout
    assert "RERUN test_b.py::test_crash_once: worker 'gw0' crashed" in out.stdout


def test_a_test_that_always_crashes_fails_and_its_module_finishes(tmp_path):
    out = _run(tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "1 failed, 5 passed, 2 rerun" in out.stdout
    assert "FAILED test_c.py::test_always_crashes - worker 'gw2' crashed" in out.stdout


def test_modules_go_out_longest_first():
    """By measured seconds where known, else one second per test; ties keep xdist's order."""
    from tests.xdist_crash import longest_first

    queue = {"a.py": {"a::1": False}, "b.py": {"b::1": False, "b::2": False, "b::3": False},
             "c.py": {"c::1": False}, "d.py": {"d::1": False, "d::2": False}}
    assert [scope for scope, _ in longest_first(queue, {"c.py": 50.0, "a.py": 2.0})] == ["c.py", "b.py", "a.py", "d.py"]
