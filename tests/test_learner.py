"""The learner: episodes in, train(n) in chunks (targets built on the device), versioned numpy params out."""

from __future__ import annotations

import ast
from pathlib import Path

import jax
import numpy as np
import pytest

from moozi.config import LearnerConfig, ModelConfig, ReplayConfig, TargetConfig
from moozi.envs.contract import EnvSpec
from moozi.learner import Learner, episode_priorities
from moozi.model.history import stacked_channels
from moozi.model.networks import build_model
from moozi.types import Trajectory

SPEC = EnvSpec("test:grid", (2, 2, 1), 2, path="host", observation_dtype="uint8")
TCFG = TargetConfig(history_length=2, unroll_steps=2, td_steps=3, discount=0.9)
A = SPEC.num_actions + 1


def _episode(n, seed):
    rng = np.random.default_rng(seed)
    return Trajectory(
        frames=rng.integers(0, 2, (n, 2, 2, 1)).astype(np.uint8),
        actions=np.r_[rng.integers(1, A, n - 1), 0].astype(np.int32),
        rewards=np.r_[0.0, rng.normal(size=n - 1)].astype(np.float32),
        root_values=rng.normal(size=n).astype(np.float32),
        root_policies=np.c_[np.zeros((n, 1)), rng.dirichlet(np.ones(A - 1), n)].astype(np.float32),
        to_play=np.zeros(n, np.int32), first=np.int32(0), last=np.int32(n - 1), is_terminal=np.bool_(True),
        random_actions=rng.random(n) < 0.2,
    )


@pytest.fixture(scope="module")
def model():
    return build_model(ModelConfig(kind="mlp", mlp_hidden=(16,), mlp_embedding=8, head_hidden=8, support_size=3),
                       (2, 2, stacked_channels(1, A, TCFG.history_length)), A)


def _learner(model, seed=0):
    learner = Learner(model, SPEC, LearnerConfig(learning_rate=1e-2), TCFG, ReplayConfig(capacity=200),
                      jax.random.key(seed), replay_seed=seed)
    assert learner.add_episodes([_episode(9, s) for s in range(6)]) == 54
    return learner


def test_train_runs_n_updates_and_writes_back_priorities(model):
    learner = _learner(model)
    assert learner.ready(50) and not learner.ready(55)
    before = learner.replay._priority.copy()
    metrics = learner.train(3, batch_size=8)
    assert learner.updates == 3 and learner.train(0, 8) == {}
    assert np.isfinite(metrics["loss/total"]) and "train/grad_norm" in metrics and "train/step" not in metrics
    assert not np.array_equal(before, learner.replay._priority)


def test_train_is_deterministic_given_the_seeds(model):
    a, c = _learner(model), _learner(model)
    a.train(4, 8)
    c.train(4, 8)
    for x, y in zip(jax.tree_util.tree_leaves(a.state.params), jax.tree_util.tree_leaves(c.state.params)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_publish_hands_out_versioned_numpy_params(model):
    learner = _learner(model)
    version, params = learner.publish()
    assert version == 1 and learner.params()[0] == 1
    assert all(isinstance(x, np.ndarray) for x in jax.tree_util.tree_leaves(params))
    learner.train(2, 8)
    assert learner.publish()[0] == 2


def test_reanalyze_results_refresh_priorities(model):
    learner = _learner(model)
    ids = learner.replay.trajectory_indices(0)
    values = np.linspace(-2, 2, ids.size).astype(np.float32)
    assert learner.update_search_stats(ids, values) == 1
    stored = learner.replay.get_trajectory(0)
    np.testing.assert_array_equal(stored.root_values, values)
    slots = ids % learner.replay.config.capacity
    expected = episode_priorities(stored, TCFG)[:-1] + learner.replay.config.epsilon
    np.testing.assert_allclose(learner.replay._priority[slots][:-1], expected, rtol=1e-6)


def test_the_driver_does_not_branch_on_the_acting_path():
    """DESIGN §1: the schedule is written once over the Actor interface."""
    for path in Path(__file__).parents[1].joinpath("src/moozi/driver").glob("*.py"):
        tree = ast.parse(path.read_text())
        names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert "path" not in names and not {"host", "device"} & strings, path.name


def test_replayed_episodes_flow_back_by_source_id(model):
    from moozi.workers import Episode

    learner = _learner(model)
    stored = learner.replay.get_trajectory(2)
    fresh = stored.replace(root_values=stored.root_values + 1.0)
    gone = Episode(fresh, version=1, env_index=0, source_id=99)  # never stored: skipped
    out = learner.apply_reanalyzed([Episode(fresh, version=1, env_index=0, source_id=2), gone])
    assert out["reanalyze/trajectories"] == 1 and out["reanalyze/skipped"] == 1
    assert out["reanalyze/abs_dv"] == pytest.approx(1.0)
    np.testing.assert_allclose(learner.replay.get_trajectory(2).root_values, stored.root_values + 1.0)
