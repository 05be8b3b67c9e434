"""learner.devices: the update data parallel over several devices equals one device at the same global batch.

JAX fixes its device count when it starts, so the check runs in a child process with two host devices
(``--xla_force_host_platform_device_count=2``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import dataclasses, json
import jax, numpy as np
from moozi.config import ConfigError, LearnerConfig, ModelConfig, ReplayConfig
from moozi.learner import Learner
from moozi.model.history import stacked_channels
from moozi.model.networks import build_model
from tests.helpers import A, SPEC, TCFG, _episode

model = build_model(ModelConfig(kind="mlp", mlp_hidden=(16,), mlp_embedding=8, head_hidden=8, support_size=3),
                    (2, 2, stacked_channels(1, A, TCFG.history_length)), A)
def learner(devices):
    l = Learner(model, SPEC, LearnerConfig(learning_rate=1e-2, devices=devices), TCFG, ReplayConfig(capacity=200),
                jax.random.key(0), replay_seed=0)
    l.add_episodes([_episode(9, s) for s in range(6)])
    return l
one, two = learner(1), learner(2)
m1, m2 = one.train(5, batch_size=8), two.train(5, batch_size=8)
leaves = lambda l: [np.asarray(x) for x in jax.tree_util.tree_leaves(jax.device_get(l.state.params))]
diff = max(float(np.max(np.abs(a - b))) for a, b in zip(leaves(one), leaves(two)))
scale = max(float(np.max(np.abs(a))) for a in leaves(one))
shardings = {str(x.sharding.spec) for x in jax.tree_util.tree_leaves(two.state.params)}
devices = {len(x.sharding.device_set) for x in jax.tree_util.tree_leaves(two.state.params)}
state = two.state_dict(); two.load_state_dict(state); two.train(1, 8)  # a restored state is placed again
errors = []
for bad in (lambda: learner(3), lambda: two.train(1, 7)):
    try:
        bad()
    except ConfigError as e:
        errors.append(str(e))
print(json.dumps({"diff": diff, "scale": scale, "loss": [m1["loss/total"], m2["loss/total"]],
                  "shardings": sorted(shardings), "devices": sorted(devices), "errors": errors,
                  "updates": [one.updates, two.updates]}))
"""


def test_two_devices_equal_one_at_the_same_global_batch():
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["updates"] == [5, 6]
    assert r["devices"] == [2] and r["shardings"] in (["P()"], ["PartitionSpec()"])  # params replicated on both devices
    assert r["diff"] <= 1e-5 * max(r["scale"], 1.0), r  # float rounding only (the all-reduce sums in another order)
    assert abs(r["loss"][0] - r["loss"][1]) <= 1e-5 * abs(r["loss"][0]), r
    assert "learner.devices = 3" in r["errors"][0] and "allowed: 1..2" in r["errors"][0]
    assert "schedule.batch_size = 7" in r["errors"][1]
