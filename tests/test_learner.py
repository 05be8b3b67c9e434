"""The learner: episodes in, train(n) in chunks (targets built on the device), versioned numpy params out."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import jax
import numpy as np
import pytest

from moozi.config import ConfigError, LearnerConfig, ModelConfig, ReplayConfig
from moozi.learner import Learner, episode_priorities
from moozi.model.history import stacked_channels
from moozi.model.networks import build_model
from tests.helpers import SPEC, TCFG, A, _episode


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


def test_tuned_update_computes_what_the_default_one_does(model, monkeypatch, xla_optimized):
    """The update compiled with moozi's XLA:CPU options (moozi.xla_tuning) against XLA's defaults: the same
    params after four updates, to float rounding (the options change how operations are emitted, not what).
    Compiled with XLA's optimisations on, as users compile it."""
    tuned = _learner(model)
    monkeypatch.setenv("MOOZI_XLA_TUNING", "off")
    default = _learner(model)
    a, b = tuned.train(4, 8), default.train(4, 8)
    np.testing.assert_allclose(a["loss/total"], b["loss/total"], rtol=1e-5)
    for x, y in zip(jax.tree_util.tree_leaves(tuned.state.params), jax.tree_util.tree_leaves(default.state.params)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=1e-6)


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
    """docs/architecture.md §1: the schedule is written once over the Actor interface."""
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


# --- holding the result at the end of a run (issue 15): budget decay, moving average ---------------

def _leaves(tree):
    return [np.asarray(x, np.float64) for x in jax.tree_util.tree_leaves(tree)]


def test_budget_lr_scale_goldens():
    from moozi.update import budget_lr_scale

    cos = LearnerConfig(lr_schedule="cosine", lr_decay_over="budget", lr_final_fraction=0.1)
    # f + (1 - f) (1 + cos(pi p)) / 2: 1 at the start, 0.55 half way, the floor 0.1 at the end (and after)
    assert [budget_lr_scale(cos, p) for p in (0.0, 0.5, 1.0, 1.7)] == pytest.approx([1.0, 0.55, 0.1, 0.1])
    lin = LearnerConfig(lr_schedule="linear", lr_decay_over="budget")
    assert budget_lr_scale(lin, 0.25) == pytest.approx(0.75)  # 1 - (1 - 0) * 0.25
    assert budget_lr_scale(LearnerConfig(lr_schedule="cosine"), 0.9) == 1.0  # decay over updates: in-graph
    assert budget_lr_scale(LearnerConfig(lr_decay_over="budget"), 0.9) == 1.0  # constant schedule
    # held at the peak for the first 60%, then the whole cosine over the last 40%: q = (p - 0.6) / 0.4
    held = LearnerConfig(lr_schedule="cosine", lr_decay_over="budget", lr_final_fraction=0.1, lr_decay_start=0.6)
    assert [budget_lr_scale(held, p) for p in (0.3, 0.6, 0.8, 1.0)] == pytest.approx([1.0, 1.0, 0.55, 0.1])
    assert budget_lr_scale(dataclasses.replace(held, lr_schedule="linear"), 0.9) == pytest.approx(1 - 0.9 * 0.75)


def test_budget_progress_follows_env_steps_when_they_are_the_budget(monkeypatch):
    from types import SimpleNamespace

    from moozi.driver import budget as budget_module

    clock = [1000.0]
    monkeypatch.setattr(budget_module.time, "monotonic", lambda: clock[0])
    timed = budget_module.Budget(SimpleNamespace(max_env_steps=None), LearnerConfig())
    assert timed.progress(10**6) == 0.0  # no budget at all
    timed.start(minutes=10.0, started=1000.0, now=1000.0, wall0=1200.0)  # 20 min earlier, 10 more: 30 in all
    clock[0] = 1300.0
    assert timed.progress(0) == pytest.approx((1200 + 300) / 1800)
    # an env-step budget alone counts, however short this sitting's --minutes: 2 minutes of a
    # 10M-step run are not the end of its decay
    framed = budget_module.Budget(SimpleNamespace(max_env_steps=10_000_000), LearnerConfig())
    framed.start(minutes=2.0, started=1000.0, now=1000.0, wall0=0.0)
    clock[0] = 1120.0
    assert framed.progress(2_500_000) == pytest.approx(0.25)
    assert framed.progress(12_000_000) == 1.0


def test_a_stop_signal_that_came_before_the_runs_handlers_is_a_stop_request(monkeypatch):
    """A SIGTERM the CLI's start-up handler remembered (it came after the last start-up check, before the run's
    own handlers were in: CI saw one swallowed so, the run going on) stops the run and starts its grace clock."""
    import signal
    from types import SimpleNamespace

    from moozi.driver import budget as budget_module

    started = []
    monkeypatch.setattr(budget_module.Budget, "_start_overdue", lambda self, *a: started.append(a))
    before = signal.getsignal(signal.SIGTERM)
    b = budget_module.Budget(SimpleNamespace(max_env_steps=None), LearnerConfig())
    restore = b.install_stop_handlers(5.0, "run", {"updates": 0}, earlier=lambda: "SIGTERM")
    restore()
    assert b.stop_requested and b.stop_signal == "SIGTERM" and started == [(5.0, "run", {"updates": 0})]
    assert signal.getsignal(signal.SIGTERM) is before
    quiet = budget_module.Budget(SimpleNamespace(max_env_steps=None), LearnerConfig())
    quiet.install_stop_handlers(5.0, earlier=lambda: None)()
    assert not quiet.stop_requested and len(started) == 1
    ctrl_c = budget_module.Budget(SimpleNamespace(max_env_steps=None), LearnerConfig())
    ctrl_c.install_stop_handlers(5.0, earlier=lambda: "SIGINT")()  # a stop, with no grace clock (not a SIGTERM)
    assert ctrl_c.stop_requested and ctrl_c.stop_signal == "SIGINT" and len(started) == 1


def test_in_graph_decay_ends_at_the_floor():
    from moozi.update import learning_rate_schedule

    c = LearnerConfig(learning_rate=0.5, lr_schedule="linear", decay_steps=10, lr_final_fraction=0.2)
    assert float(learning_rate_schedule(c)(5)) == pytest.approx(0.5 - 0.4 * 0.5)
    assert float(learning_rate_schedule(c)(10)) == pytest.approx(0.1)
    # warmup 2, held at the peak until 0.5 * 10 = 5, then linear to the floor at 10
    held = LearnerConfig(learning_rate=0.5, lr_schedule="linear", warmup_steps=2, decay_steps=10,
                         lr_final_fraction=0.2, lr_decay_start=0.5)
    assert [float(learning_rate_schedule(held)(t)) for t in (1, 2, 5, 7.5, 10, 20)] == pytest.approx(
        [0.25, 0.5, 0.5, 0.3, 0.1, 0.1])
    cos = dataclasses.replace(held, lr_schedule="cosine")
    assert [float(learning_rate_schedule(cos)(t)) for t in (5, 7.5, 10)] == pytest.approx([0.5, 0.3, 0.1])
    with pytest.raises(ConfigError, match="learner.lr_decay_start"):
        LearnerConfig(lr_decay_start=1.0)
    budget = LearnerConfig(learning_rate=0.5, lr_schedule="linear", lr_decay_over="budget")
    assert float(learning_rate_schedule(budget)(10**6)) == pytest.approx(0.5)  # the host scales it instead


def test_lr_scale_zero_leaves_params_and_the_scale_is_logged(model):
    learner = _learner(model)
    before = _leaves(learner.state.params)
    metrics = learner.train(2, 8, lr_scale=0.0)
    assert learner.updates == 2 and metrics["train/learning_rate"] == 0.0
    for x, y in zip(before, _leaves(learner.state.params)):
        np.testing.assert_array_equal(x, y)
    half = learner.train(1, 8, lr_scale=0.5)
    assert half["train/learning_rate"] == pytest.approx(0.005)




def test_a_checkpoint_with_the_removed_moving_average_restores_its_four_fields(model):
    """Runs with the removed ``learner.ema_decay`` saved ``ema_params`` beside the four fields: the state restores
    from those four and drops the average (such a run's config is refused first, naming its card)."""
    from flax.serialization import from_state_dict, to_state_dict

    learner = _learner(model)
    data = to_state_dict(learner.state)
    assert set(data) == {"params", "target_params", "opt_state", "step"}
    back = from_state_dict(learner.state, {**data, "ema_params": data["params"]})
    for a, b in zip(_leaves(learner.state), _leaves(back)):
        np.testing.assert_array_equal(a, b)
