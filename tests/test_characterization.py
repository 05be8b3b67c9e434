"""What a tiny run does, pinned before the driver is carved into parts (issue 46): the (component, method)
calls the schedules make through the backend, the counters, the metric keys, the run directory's files and
the final parameters. Sync and async, 2 training workers, reanalyze on, a test every epoch, keep_best on; the
device schedule (acting in the learner, no reanalyze) likewise.

The expected values live in tests/data/characterization.json. A refactor that adds no behaviour leaves
them as they are; a change that means to alter the schedules regenerates them on purpose with
``MOOZI_REGENERATE_CHARACTERIZATION=1 pytest tests/test_characterization.py`` and says so in its commit.
The parameter checksum is compared to 1e-3 relative (XLA's float rounding differs between processors);
everything else exactly.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import jax
import numpy as np
import pytest

from moozi.config import apply_overrides, config_from_dict
from moozi.driver import Trainer
from moozi.driver.backend import LocalBackend
from moozi.observe.metrics import read_metrics
from moozi.presets import load_preset
from tests.helpers import TINY

GOLDEN = Path(__file__).parent / "data" / "characterization.json"
OVERRIDES = [o for o in TINY if not o.startswith(("schedule.max_env_steps", "env.kwargs", "testing.every"))] + [
    "env.kwargs.max_episode_steps=8", "schedule.max_env_steps=192", "distributed.train_workers=2",
    "reanalyze.fraction=0.5", "reanalyze.envs=2", "reanalyze.positions_per_call=16", "testing.every=1",
    "testing.keep_best=true", "output.checkpoint_every_minutes=1000", "output.log_every_epochs=1"]

# The device schedule acts in the learner (no training workers) and has no reanalyze; short windows, so its ring
# trains from the third epoch.
DEVICE = ["reanalyze.fraction=0", "targets.td_steps=3", "targets.unroll_steps=2"]


class RecordingBackend(LocalBackend):
    """The local backend, noting each (component, method) call in order."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def call(self, handle, method, *args):
        self.calls.append([handle.name, method])
        return super().call(handle, method, *args)


def _files(run: Path) -> list[str]:
    """The run directory's files, with the parts that name a time or a machine generalised."""
    names = set()
    for path in run.rglob("*"):
        if path.is_file():
            rel = str(path.relative_to(run))
            names.add(re.sub(r"events\.out\.tfevents\..*", "events.out.tfevents.*", rel))
    return sorted(names)


def _observe(kind: str, tmp_path: Path) -> dict:
    extra = DEVICE if kind == "device" else []
    config = config_from_dict(apply_overrides(load_preset("cartpole"), OVERRIDES + [f"schedule.kind={kind}", *extra]))
    backend = RecordingBackend()
    trainer = Trainer(config, tmp_path / "run", backend=backend)
    try:
        counters = trainer.run()
        leaves = jax.tree_util.tree_leaves(jax.device_get(trainer.learner.state.params))
        checksum = float(sum(np.abs(np.asarray(x, np.float64)).sum() for x in leaves))
    finally:
        trainer.close()
    keys = sorted({k for row in read_metrics(tmp_path / "run") for k in row if k not in ("step", "wall_time")})
    return {"calls": backend.calls, "counters": {k: v for k, v in counters.items() if k != "wall_s"},
            "metric_keys": keys, "files": _files(tmp_path / "run"), "param_checksum": checksum}


@pytest.mark.parametrize("kind", ["sync", "async", "device"])
def test_a_tiny_run_does_what_it_did(kind, tmp_path):
    seen = _observe(kind, tmp_path)
    golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if os.environ.get("MOOZI_REGENERATE_CHARACTERIZATION") == "1":
        golden[kind] = seen
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"regenerated the {kind} characterization")
    want = golden[kind]
    assert seen["counters"] == want["counters"]
    assert seen["calls"] == want["calls"]
    assert seen["metric_keys"] == want["metric_keys"]
    assert seen["files"] == want["files"]
    assert seen["param_checksum"] == pytest.approx(want["param_checksum"], rel=1e-3)
