"""benchmarks/gpu_check.py, the prepared GPU check (issue 89): its figures by hand, and its whole run at tiny sizes
on this CPU (``--cpu-smoke``), so the script a session with a lent GPU runs first never rots."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import _bench

FIELDS = {"env_steps_per_s", "simulations_per_s", "updates_per_s", "samples_per_s", "replay_ratio",
          "device_busy_fraction", "peak_device_memory_bytes", "acting_vs_bound", "learner_vs_bound",
          "projected_minutes_10m_frames"}


def test_figures_by_hand():
    """1000 env steps/s and 2 updates/s of 256 (512 samples/s); learning phases ran 4 updates/s, the bare update
    2048 samples/s: 4 x 256 / 2048 = 0.5 of the bound; 10M frames at 1000/s: 166.7 minutes."""
    gpu_check = _bench("gpu_check")
    train = {"env_steps_per_s": 1000.0, "updates_per_s": 2.0, "learn_updates_per_s": 4.0, "simulations_per_s": 8000.0,
             "device_busy_fraction": 0.75, "summary": {"replay_ratio": 1.0, "peak_device_memory_bytes": 2 ** 30}}
    out = gpu_check.figures(train, {"acting_over_bound": 0.6, "learner_samples_per_s": 2048.0}, 256)
    assert set(out) == FIELDS
    assert out == {"env_steps_per_s": 1000.0, "simulations_per_s": 8000.0, "updates_per_s": 2.0, "samples_per_s": 512.0,
                   "replay_ratio": 1.0, "device_busy_fraction": 0.75, "peak_device_memory_bytes": 2 ** 30,
                   "acting_vs_bound": 0.6, "learner_vs_bound": 0.5,
                   "projected_minutes_10m_frames": pytest.approx(1e7 / 1000 / 60)}
    failed = gpu_check.figures({"summary": None}, None, 256)  # a run that failed: every figure null, no error
    assert set(failed) == FIELDS and all(v is None for v in failed.values())


def _smoke(tmp_path, *only: str) -> dict:
    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, str(root / "benchmarks" / "gpu_check.py"), "run", "--cpu-smoke", "--out", str(tmp_path)]
    done = subprocess.run([*cmd, *(["--only", ",".join(only)] if only else [])], capture_output=True, text=True,
                          cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "gpu_check.json").read_text())
    configs = {"breakout-gpu", "connect4-gpu", "thesis-minatar", "atari-pong"}
    assert set(result["configs"]) == (configs & set(only) if only else configs)
    for name, figures in result["configs"].items():
        assert FIELDS <= set(figures), name
        assert figures["train"].get("error") is None, (name, figures["train"])
        assert figures["env_steps_per_s"] > 0 and figures["simulations_per_s"] > 0, name
        assert figures["device_busy_fraction"] is None and figures["peak_device_memory_bytes"] is None  # a CPU
        assert (figures["acting_vs_bound"] is None) == (name == "atari-pong"), name  # the host game has no bound
    if not only or "fused" in only:
        fused = result["fused"]
        assert fused.get("error") is None, fused
        assert fused["fused_env_steps_per_s"] > 0 and fused["fused_updates_per_s"] > 0 and fused["fused_vs_parts"] > 0
    if not only or "device_schedule" in only:
        schedule = result["device_schedule"]  # breakout-gpu trained by the device schedule
        assert schedule["train"].get("error") is None and schedule["env_steps_per_s"] > 0, schedule["train"]
    if not only or "bf16" in only:
        bf16 = result["bf16"]  # breakout-gpu multiplying in bfloat16
        assert bf16["train"].get("error") is None and bf16["env_steps_per_s"] > 0, bf16["train"]
        assert bf16["overrides"] == ["model.compute_dtype=bfloat16"]
    assert result["device"] and result["cpu_smoke"] is True
    return result


def test_the_check_runs_at_tiny_sizes_on_a_cpu(tmp_path):
    """CI's share: one configuration's step, the script's whole path (the preset's bound by device_throughput.py,
    its timed run, the figures). What the other steps add is covered in CI by the subjects they time: each
    configuration's run is ``moozi train`` of a preset (the train smoke tests), the fused chunk tests/test_fused.py's,
    the device schedule's run tests/test_device_schedule.py's. The whole check ran 193 s of a loaded CI-like run
    and this share with the device schedule's step 74 s of a fresh clone's (2026-12-07); the extended tier runs
    the whole check."""
    _smoke(tmp_path, "breakout-gpu")


@pytest.mark.extended
def test_the_whole_check_runs_at_tiny_sizes_on_a_cpu(tmp_path):
    _smoke(tmp_path)


def test_only_names_a_configuration_of_the_check():
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "gpu_check.py"), "run", "--out", "/tmp/x",
                           "--only", "breakout-gpu,pong"], capture_output=True, text=True, cwd=root)
    assert done.returncode == 2 and "--only: pong is not a step of the check; choose from breakout-gpu" \
        in done.stderr, done.stderr
