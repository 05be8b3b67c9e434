"""The host acting path produces what the device path produces (DESIGN §2).

A device game is put behind the host interface (one Python object per
environment, stepped outside jit) and both paths act with the same params,
keys and planner: every StepSample field must agree step for step until each
environment's first episode ends (after that the two paths seed new episodes
differently by design). Also: host matches against a fixed opponent, and the
trajectories assembled from host segments.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("pgx")

from moozi import acting  # noqa: E402
from moozi.config import ModelConfig, PlannerConfig  # noqa: E402
from moozi.envs import make_env  # noqa: E402
from moozi.envs.contract import EnvSpec  # noqa: E402
from moozi.envs.host import GameStep, HostEnv  # noqa: E402
from moozi.envs.pool import HostPool  # noqa: E402
from moozi.host_acting import HostActor, HostMatch, host_random_opponent  # noqa: E402
from moozi.model.history import stacked_channels  # noqa: E402
from moozi.model.networks import build_model  # noqa: E402

B, T, L = 4, 14, 2


class DeviceAsHost(HostEnv):
    """A device game stepped one environment at a time from Python (test adapter).

    Its first episode starts from a given key (the one the device path would
    use), so both paths see the same games.
    """

    def __init__(self, env, first_key):
        self.env = env
        self.spec = dataclasses.replace(env.spec, path="host")
        self._first_key = first_key
        self._reset = jax.jit(env.reset)
        self._step = jax.jit(env.step)

    def _game_step(self, ts) -> GameStep:
        return GameStep(
            observation=np.asarray(ts.observation),
            legal_actions=np.asarray(ts.legal_actions),
            reward=float(ts.reward),
            terminated=bool(ts.is_terminal),
            truncated=bool(ts.is_last & ~ts.is_terminal),
            to_play=int(ts.to_play),
        )

    def reset(self, seed):
        key = self._first_key if self._first_key is not None else jax.random.key(seed)
        self._first_key = None
        self.state, ts = self._reset(key)
        return self._game_step(ts)

    def step(self, action):
        self.state, ts = self._step(self.state, jnp.int32(action))
        return self._game_step(ts)


def _parts(name, **kwargs):
    env = make_env(name, **kwargs)
    a = env.spec.num_actions + 1
    h, w, c = env.spec.observation_shape
    model = build_model(ModelConfig(kind="mlp", mlp_hidden=(32,), mlp_embedding=16, head_hidden=16, support_size=3),
                        (h, w, stacked_channels(c, a, L)), a)
    params = model.init(jax.random.key(1))
    # Nudge the zero-initialised heads so the search is not trivially uniform.
    params = jax.tree_util.tree_map(lambda x: x + 0.05 * jax.random.normal(jax.random.key(2), x.shape), params)
    return env, model, params


PLANNERS = {
    "puct": PlannerConfig(kind="puct", num_simulations=6, dirichlet_fraction=0.25, temperature=1.0),
    "gumbel": PlannerConfig(kind="gumbel", num_simulations=6, max_num_considered_actions=4),
}


@pytest.mark.parametrize(
    "name,kwargs,planner,random_moves,random_move_prob",
    [("pgx:tic_tac_toe", {}, "puct", 2, 0.3), ("gymnax:CartPole-v1", {"max_episode_steps": 9}, "gumbel", 0, 0.0)],
)
def test_host_path_matches_device_path(name, kwargs, planner, random_moves, random_move_prob):
    env, model, params = _parts(name, **kwargs)
    cfg = PLANNERS[planner]
    carry = acting.init_actor(env, B, L, jax.random.key(7))
    # init_actor splits its key into (reset key, search rng) and the reset key into B.
    reset_key, _ = jax.random.split(jax.random.key(7))
    keys = list(jax.random.split(reset_key, B))
    rollout = acting.make_rollout(env, model, cfg, 0.97, T, explore_moves=3, random_moves=random_moves,
                                  random_move_prob=random_move_prob)
    _, dev = rollout(params, carry, jnp.float32(1.0))
    dev = jax.tree_util.tree_map(np.asarray, dev)

    pool = HostPool(lambda: DeviceAsHost(env, keys.pop(0)), B, seed=0)
    actor = HostActor(pool, model, cfg, 0.97, L, T, carry.rng, explore_moves=3, random_moves=random_moves,
                      random_move_prob=random_move_prob)
    host = actor.rollout(params, 1.0)
    assert jax.tree_util.tree_structure(host) == jax.tree_util.tree_structure(dev)
    compared = 0
    for b in range(B):
        lasts = np.flatnonzero(dev.is_last[:, b])
        end = int(lasts[0]) + 1 if len(lasts) else T
        for field in dataclasses.fields(acting.StepSample):
            d, h = getattr(dev, field.name)[:end, b], getattr(host, field.name)[:end, b]
            assert d.dtype == h.dtype or np.can_cast(h.dtype, d.dtype), field.name
            np.testing.assert_allclose(h, d, rtol=1e-5, atol=1e-5, err_msg=f"{field.name} env {b}")
        compared += end
        flags = dev.random_action[:end, b]
        assert not flags[dev.is_last[:end, b]].any()  # no move is made on a last step
        if random_moves:
            assert flags[:random_moves].all()
    assert compared >= B * 3
    if random_move_prob:  # some later moves were random too
        assert dev.random_action[random_moves:].any()
    else:
        assert not dev.random_action[random_moves:].any()
    pool.close()


def test_host_segments_assemble_into_trajectories():
    env, model, params = _parts("pgx:tic_tac_toe")
    pool = HostPool(lambda: DeviceAsHost(env, None), B, seed=3)
    actor = HostActor(pool, model, PLANNERS["puct"], 1.0, L, 5, jax.random.key(0))
    asm = acting.TrajectoryAssembler(B)
    trajs = []
    for _ in range(4):  # 20 steps: every env finishes at least one game (<= 10 steps each)
        trajs += asm.add(actor.rollout(params, 1.0))
    assert len(trajs) >= B
    for t in trajs:
        n = int(t.last)
        assert 5 <= n <= 9 and t.frames.shape[0] == n + 1
        assert t.actions[-1] == 0 and np.all(t.actions[:-1] >= 1)  # dummy only on the last step
        assert t.rewards[0] == 0 and abs(float(t.rewards[-1])) in (0.0, 1.0)
        assert np.all(np.diff(t.to_play) != 0)  # alternating movers


def test_actor_restart_and_state_dict_roundtrip():
    env, model, params = _parts("pgx:tic_tac_toe")
    pool = HostPool(lambda: DeviceAsHost(env, None), 2, seed=0)
    actor = HostActor(pool, model, PLANNERS["puct"], 1.0, L, 3, jax.random.key(4))
    state = actor.state_dict()
    a = actor.rollout(params, 1.0)
    actor.load_state_dict(state)
    actor.restart(seed=0)
    b = actor.rollout(params, 1.0)
    for field in ("frame", "action", "root_policy"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


def _cycle_opponent(rng, ts):
    """Plays the lowest legal cell (deterministic)."""
    legal = np.asarray(ts.legal_actions)
    return np.where(legal.any(-1), np.argmax(legal, -1), 0)


def test_host_match_seats_and_results():
    env, model, params = _parts("pgx:tic_tac_toe")
    pool = HostPool(lambda: DeviceAsHost(env, None), 4, seed=5)
    match = HostMatch(pool, model, PlannerConfig(kind="gumbel", num_simulations=4, gumbel_scale=0.0), 1.0, L,
                      jax.random.key(0), opponent=_cycle_opponent)
    results = match.play(params, 10)
    assert len(results) == 10
    seats = [s for _, _, s in results]
    assert abs(seats.count(0) - seats.count(1)) <= 2
    for ret, length, _ in results:
        assert ret in (-1.0, 0.0, 1.0) and 5 <= length <= 9


def test_host_random_opponent_is_legal():
    rng = np.random.default_rng(0)
    legal = np.array([[False, True, False], [False, False, False], [True, True, True]])
    ts = type("TS", (), {"legal_actions": legal})()
    for _ in range(20):
        a = host_random_opponent(rng, ts)
        assert legal[0, a[0]] and a[1] == 0 and 0 <= a[2] < 3


class _Countdown(HostEnv):
    """Single-player: reward 1 per step, 3 steps, observation = steps left."""

    spec = EnvSpec("test:countdown", (1, 1, 1), 2, path="host")

    def reset(self, seed):
        self.left = 3
        return GameStep(np.array([self.left], np.float32), np.array([True, True]))

    def step(self, action):
        self.left -= 1
        return GameStep(np.array([self.left], np.float32), np.array([True, True]), reward=1.0,
                        terminated=self.left == 0)


def test_single_player_host_match_returns():
    a = 3
    model = build_model(ModelConfig(kind="mlp", mlp_hidden=(8,), mlp_embedding=8, head_hidden=8, support_size=3),
                        (1, 1, stacked_channels(1, a, 1)), a)
    pool = HostPool(_Countdown, 3, seed=0)
    match = HostMatch(pool, model, PlannerConfig(kind="gumbel", num_simulations=2, gumbel_scale=0.0), 1.0, 1,
                      jax.random.key(0))
    results = match.play(model.init(jax.random.key(0)), 6)
    assert [(r, n) for r, n, _ in results] == [(3.0, 3)] * 6


def test_random_moves_open_with_uniform_legal_moves():
    """Greedy search plays one opening everywhere; with random_moves=1 the first moves spread out."""
    env, model, params = _parts("pgx:tic_tac_toe")
    greedy = PlannerConfig(kind="gumbel", num_simulations=4, gumbel_scale=0.0)
    firsts = {}
    for k in (0, 1):
        pool = HostPool(lambda: DeviceAsHost(env, None), 32, seed=0)
        actor = HostActor(pool, model, greedy, 1.0, L, 2, jax.random.key(0), random_moves=k)
        s = actor.rollout(params, 0.0)
        firsts[k] = s.action[0]
        if k:
            assert len(set(s.action[1].tolist()) | set()) >= 1  # the second move is the search's again
        pool.close()
    assert len(set(firsts[0].tolist())) == 1
    assert len(set(firsts[1].tolist())) >= 6 and np.all((firsts[1] >= 1) & (firsts[1] <= 9))
