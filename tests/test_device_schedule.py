"""``schedule.kind = device`` (moozi.driver.device_schedule, moozi.fused.DeviceLoop): a run trains with acting, the
ring and the updates in the learner, keeps its replay ratio, resumes exactly, and refuses what it cannot run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from moozi.config import ConfigError, apply_overrides, config_from_dict
from moozi.driver import Trainer
from moozi.presets import load_preset
from tests.helpers import TINY
from tests.helpers import leaves as _leaves

# Short windows (1 + 2 + 3 + 1 steps), so the ring is ready after two 4-step segments; 16 steps an epoch at a
# ratio of 1 over batches of 8: 2 updates an epoch.
DEVICE = ("schedule.kind=device", "targets.unroll_steps=2", "targets.td_steps=3", "learner.lr_decay_over=updates",
          "schedule.samples_per_env_step=1")


def _config(max_env_steps: int, preset: str = "cartpole", *extra):
    overrides = [o for o in TINY if not o.startswith("schedule.max_env_steps")]
    return config_from_dict(apply_overrides(load_preset(preset), [*overrides, *DEVICE,
                                                                  f"schedule.max_env_steps={max_env_steps}", *extra]))



def test_a_device_run_trains_keeps_its_ratio_and_resumes_exactly(tmp_path):
    """128 steps straight (8 epochs: two filling the ring, then 2 updates each) against 64, a stop, and a resume
    to 128: the same counters, train state, ring (steps, priorities, write column) and environments. The ratio
    is the config's: updates x batch over the steps acted since the ring was ready."""
    straight = Trainer(_config(128), tmp_path / "a")
    try:
        straight.run()
        c = straight.counters
        assert c["epochs"] == 8 and c["env_steps"] == 128 and c["updates"] == 2 * (8 - c["ready_env_steps"] // 16)
        assert c["updates"] * 8 == c["env_steps"] - c["ready_env_steps"] and c["updates"] >= 8
        rows = [json.loads(line) for line in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
        trained = [r for r in rows if "loss/total" in r]
        assert trained and all(np.isfinite(r["loss/total"]) for r in trained)
        assert any("train/episode_return" in r for r in rows) and any("time/chunk_s" in r for r in rows)
        assert any("test/return_mean" in r for r in rows)
        assert rows[-2]["replay/size_steps"] == 128 and rows[-2]["replay/num_positions"] > 0  # the ring's figures
        from moozi.run_dir import open_run

        opened = open_run(tmp_path / "a")  # what eval, watch, play and export read: the learner part with its ring
        for x, y in zip(_leaves(opened.params), _leaves(straight.learner.publish()[1])):
            np.testing.assert_array_equal(x, y)
        first = Trainer(_config(64), tmp_path / "b")
        try:
            first.run()
        finally:
            first.close()
        assert first.counters["updates"] > 0
        resumed = Trainer(_config(128), tmp_path / "b", resume=True)
        try:
            assert resumed.counters["env_steps"] == 64
            resumed.run()
            for key in ("env_steps", "updates", "epochs", "episodes", "ready_env_steps"):
                assert resumed.counters[key] == straight.counters[key], key
            a, b = straight.learner, resumed.learner
            for x, y in zip(_leaves(a.state), _leaves(b.state)):
                np.testing.assert_array_equal(x, y)
            for x, y in zip(_leaves(a.loop.state_dict()), _leaves(b.loop.state_dict())):
                np.testing.assert_array_equal(x, y)
            assert int(a.loop.ring.filled) == 32 and float(np.asarray(a.loop.ring.priority).max()) > 0
        finally:
            resumed.close()
    finally:
        straight.close()


@pytest.mark.parametrize("preset,extra,words", [
    ("openspiel-tictactoe", (), "openspiel:tic_tac_toe is stepped on the host"),
    ("cartpole", ("reanalyze.fraction=0.5",), "reanalyze.fraction > 0: the ring is not reanalyzed yet"),
    ("cartpole", ("replay.sampling=rank", "reanalyze.fraction=0.5"), "(reanalyze.fraction = 0); replay.sampling = "
                                                                      "rank: the ring samples uniform or proportional"),
])
def test_the_device_schedule_refuses_what_it_cannot_run(tmp_path, preset, extra, words):
    with pytest.raises(ConfigError, match="schedule.kind = device cannot run this config") as err:
        Trainer(_config(64, preset, *extra), tmp_path / "run")
    assert words in str(err.value) and not (tmp_path / "run").exists()
