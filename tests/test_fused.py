"""The fused chunk (moozi.fused): acting, the device replay and learning in one compiled call equal the same pieces
called one by one, and a chunk's books (env steps, episodes, losses) are what the host needs."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.config import config_from_dict
from moozi.config.loading import apply_overrides
from moozi.fused import LEDGER_FIELDS, act_and_store, learn_from_ring, make_chunk, ring_rows
from moozi.learner import training_chance_code
from moozi.parts import build_parts
from moozi.presets import load_preset
from moozi.replay.ring import RING_FIELDS, ring_init, ring_ready
from moozi.update import init_train_state, update_from_windows
from moozi.workers.device_actor import DeviceActor, make_device_rollout
from moozi.workers.policy import PolicyConfig

from .helpers import TINY

E, U = 2, 2


@pytest.fixture(scope="module")
def parts():
    """CartPole (gymnax, the device path), tiny: 4 environments, 4-step segments, a 8-position batch."""
    config = config_from_dict(apply_overrides(load_preset("cartpole"), [*TINY, "replay.capacity=64"]))
    env, model = build_parts(config)
    tc = config.targets
    policy = PolicyConfig(spec=env.spec, planner=config.planner, discount=tc.discount, history_length=tc.history_length)
    T, B = config.acting.steps_per_epoch, config.env.num_envs
    rollout = make_device_rollout(env, model, policy, T)
    learn = functools.partial(update_from_windows, model=model, config=config.learner, target_config=tc,
                              frame_scale=env.spec.observation_scale,
                              chance_code=training_chance_code(config.learner, env.spec, model.config.chance_outcomes))
    actor = DeviceActor(env, model, policy, B, T, jax.random.key(1))
    state = init_train_state(model, config.learner, jax.random.key(3))
    window = tc.history_length + tc.unroll_steps + tc.td_steps + 1
    _, probe = rollout(state.params, actor.carry, jnp.float32(1.0))
    ring = ring_init({k: getattr(probe, k) for k in RING_FIELDS}, ring_rows(64, B, T, window))
    kw = dict(target_config=tc, replay_config=config.replay)
    act = jax.jit(functools.partial(act_and_store, rollout, **kw))
    carry = actor.carry
    ahead = tc.unroll_steps + tc.td_steps
    while not bool(jnp.any(ring_ready(ring, tc.history_length, ahead))):
        carry, ring, _ = act(state.params, carry, ring, jnp.float32(1.0))
    return dict(config=config, rollout=rollout, learn=learn, state=state, carry=carry, ring=ring, act=act, kw=kw,
                T=T, B=B)


def _copy(tree):
    return jax.tree.map(jnp.copy, tree)


@pytest.mark.parametrize("unroll", [False, pytest.param(True, marks=pytest.mark.extended)])  # CI: the loop (the
def test_a_chunk_equals_its_pieces_one_by_one(parts, unroll):  # unrolled chunk compiles 4 updates, 2 rollouts more)
    """Two epochs of a segment and two updates each, fused (looped, or unrolled as on a CPU), against the pieces
    jitted apart with the same keys: the same parameters, ring (steps, priorities, write column) and metrics."""
    p, s = parts, parts["config"].schedule
    key, temps = jax.random.key(11), jnp.array([1.0, 0.5], jnp.float32)
    one = jax.jit(functools.partial(learn_from_ring, p["learn"], batch_size=s.batch_size, **p["kw"]))
    state, carry, ring = _copy(p["state"]), _copy(p["carry"]), _copy(p["ring"])
    losses, steps = [], []
    for k, temperature in zip(jax.random.split(key, E), temps):
        carry, ring, acted = p["act"](state.params, carry, ring, temperature)
        steps.append(acted)
        per = []
        for ku in jax.random.split(k, U):
            state, ring, metrics = one(state, ring, ku, jnp.float32(0.5))
            per.append(metrics["loss/total"])
        losses.append(np.mean(per))
    chunk = make_chunk(p["rollout"], p["learn"], batch_size=s.batch_size, updates_per_epoch=U, epochs=E,
                       unroll=unroll, **p["kw"])
    got_state, _, got_ring, out = chunk(_copy(p["state"]), _copy(p["carry"]), _copy(p["ring"]), key, temps, 0.5)
    np.testing.assert_allclose(np.asarray(out["metrics"]["loss/total"]), losses, rtol=2e-5)
    assert int(got_state.step) == int(p["state"].step) + E * U
    for a, b in zip(jax.tree.leaves(got_state.params), jax.tree.leaves(state.params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got_ring.priority), np.asarray(ring.priority), rtol=1e-4, atol=1e-6)
    assert int(got_ring.at) == int(ring.at) and int(got_ring.filled) == int(ring.filled)
    for k in LEDGER_FIELDS:
        assert out["steps"][k].shape == (E, p["T"], p["B"])
        np.testing.assert_array_equal(np.asarray(out["steps"][k]), np.stack([np.asarray(a[k]) for a in steps]))


def test_ring_rows_hold_the_capacity_in_whole_segments():
    """100 steps over 4 environments in 8-step segments: 25 per environment, rounded up to 32 columns; a 30-step
    window needs at least 60 columns, so 64."""
    assert ring_rows(100, 4, 8, 3) == 32
    assert ring_rows(100, 4, 8, 30) == 64
