"""Actors (docs/architecture.md §1-2): one policy step behind two implementations, episodes as numpy.

* The pool actor over a device game stepped from Python produces, episode
  for episode, what the device actor produces (same params, keys, planner).
* Episodes assemble across segments, carry the params version, and the
  assembler state round-trips.
* Exploration switches, random moves, test games (seats by move order).
* The reanalyze seam: a pool actor in forced-action mode over a
  ``ReplayEnvPool`` stacks exactly the stored histories (``history_at``)
  and, with the same params and no noise, reproduces the stored v* and p*.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("pgx")

from moozi.config import ActingConfig, ModelConfig, PlannerConfig  # noqa: E402
from moozi.envs import decode_frames, make_env  # noqa: E402
from moozi.envs.contract import EnvSpec  # noqa: E402
from moozi.envs.host import GameStep, HostEnv  # noqa: E402
from moozi.envs.pool import HostPool  # noqa: E402
from moozi.envs.replay_env import ReplayEnvPool  # noqa: E402
from moozi.model.history import history_at, stacked_channels  # noqa: E402
from moozi.model.networks import build_model  # noqa: E402
from moozi.workers import EpisodeAssembler, PolicyConfig, agent_return, play_games  # noqa: E402
from moozi.workers.device_actor import DeviceActor  # noqa: E402
from moozi.workers.pool_actor import PoolActor, host_random_opponent  # noqa: E402

B, T, L = 4, 14, 2


class DeviceAsHost(HostEnv):
    """A device game stepped one environment at a time from Python (test adapter).

    Its first episode starts from a given key (the one the device actor would
    use), so both actors see the same games.
    """

    def __init__(self, env, first_key):
        self.env = env
        self.spec = dataclasses.replace(env.spec, path="host")
        self._first_key = first_key
        self._reset = jax.jit(env.reset)
        self._step = jax.jit(env.step)

    def _game_step(self, ts) -> GameStep:
        return GameStep(observation=np.asarray(ts.observation), legal_actions=np.asarray(ts.legal_actions),
                        reward=float(ts.reward), terminated=bool(ts.is_terminal),
                        truncated=bool(ts.is_last & ~ts.is_terminal), to_play=int(ts.to_play))

    def reset(self, seed):
        key = self._first_key if self._first_key is not None else jax.random.key(seed)
        self._first_key = None
        self.state, ts = self._reset(key)
        return self._game_step(ts)

    def step(self, action):
        self.state, ts = self._step(self.state, jnp.int32(action))
        return self._game_step(ts)


@pytest.fixture(scope="module")
def games():
    out = {}
    for name, kwargs in (("pgx:tic_tac_toe", {}), ("gymnax:CartPole-v1", {"max_episode_steps": 9})):
        env = make_env(name, **kwargs)
        a = env.spec.num_actions + 1
        h, w, c = env.spec.observation_shape
        model = build_model(ModelConfig(kind="mlp", mlp_hidden=(32,), mlp_embedding=16, head_hidden=16,
                                        support_size=3), (h, w, stacked_channels(c, a, L)), a)
        params = model.init(jax.random.key(1))
        # Nudge the zero-initialised heads so the search is not trivially uniform.
        params = jax.tree_util.tree_map(lambda x: x + 0.05 * jax.random.normal(jax.random.key(2), x.shape), params)
        out[name] = (env, model, params)
    return out


PLANNERS = {
    "puct": PlannerConfig(kind="puct", num_simulations=6, dirichlet_fraction=0.25),
    "gumbel": PlannerConfig(kind="gumbel", num_simulations=6, max_num_considered_actions=4),
    "greedy": PlannerConfig(kind="gumbel", num_simulations=6, max_num_considered_actions=4, gumbel_scale=0.0),
}


def _policy(env, planner, mode="train", **kw):
    return PolicyConfig(spec=env.spec, planner=PLANNERS[planner], discount=0.97, history_length=L, mode=mode, **kw)


def _first_episodes(episodes):
    first = {}
    for ep in episodes:
        first.setdefault(ep.env_index, ep)
    return first


@pytest.mark.parametrize(
    "name,planner,random_moves,random_move_prob",
    [pytest.param("pgx:tic_tac_toe", "puct", 2, 0.3, marks=pytest.mark.extended), ("gymnax:CartPole-v1", "gumbel", 0, 0.0)],
)
def test_pool_actor_equals_device_actor(games, name, planner, random_moves, random_move_prob):
    env, model, params = games[name]
    cfg = _policy(env, planner, explore_moves=3, random_moves=random_moves, random_move_prob=random_move_prob)
    acting = ActingConfig(temperature=((0, 1.0),))
    device = DeviceActor(env, model, cfg, B, T, jax.random.key(7), acting=acting)
    # DeviceActor splits its key into (reset key, policy key) and the reset key into B.
    reset_key, policy_key = jax.random.split(jax.random.key(7))
    keys = list(jax.random.split(reset_key, B))
    pool = HostPool(lambda: DeviceAsHost(env, keys.pop(0)), B, seed=0)
    host = PoolActor(pool, model, dataclasses.replace(cfg, spec=pool.spec), T, policy_key, acting=acting)
    for actor in (device, host):
        actor.set_params(3, params)
    dev_eps, dev_metrics = device.run()
    host_eps, host_metrics = host.run()
    d, h = _first_episodes(dev_eps), _first_episodes(host_eps)
    assert set(d) == set(h) and len(d) >= B - 1
    for b in d:
        assert d[b].version == h[b].version == 3
        for field in dataclasses.fields(d[b].trajectory):
            x, y = getattr(d[b].trajectory, field.name), getattr(h[b].trajectory, field.name)
            assert np.asarray(x).dtype == np.asarray(y).dtype, field.name
            np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-5, err_msg=f"{field.name} env {b}")
        flags = d[b].trajectory.random_actions
        assert not flags[-1]  # no move is made on a last step
        if random_moves:
            assert flags[:random_moves].all()
    assert dev_metrics.keys() == host_metrics.keys()
    host.close()


def test_segments_assemble_into_whole_episodes(games):
    env, model, params = games["pgx:tic_tac_toe"]
    actor = DeviceActor(env, model, _policy(env, "puct"), B, 7, jax.random.key(1), acting=ActingConfig())
    actor.set_params(0, params)
    episodes = []
    for i in range(4):  # 28 steps per env: several games, some spanning segments
        actor.set_params(i, params)
        episodes += actor.run()[0]
    assert len(episodes) >= B * 2
    assert {ep.version for ep in episodes} <= {0, 1, 2, 3} and len({ep.version for ep in episodes}) > 1
    for ep in episodes:
        traj = ep.trajectory
        n = int(traj.last) + 1
        assert traj.frames.shape[0] == n and 6 <= n <= 10 and traj.frames.dtype == np.uint8
        assert traj.actions[-1] == 0 and np.all(traj.actions[:-1] >= 1)  # dummy only at the end
        assert traj.rewards[0] == 0 and bool(traj.is_terminal)
        np.testing.assert_array_equal(traj.to_play[1:], 1 - traj.to_play[:-1])  # turns alternate
        np.testing.assert_allclose(traj.root_policies[:-1].sum(-1), 1.0, atol=1e-5)
        # legal masks (kept for reanalyze): 9 - i free squares at move i, the move played among them
        np.testing.assert_array_equal(traj.legal_actions.sum(-1), np.r_[9 - np.arange(n - 1), 0])
        assert traj.legal_actions[np.arange(n - 1), traj.actions[:-1] - 1].all()
    total = sum(int(ep.trajectory.last) + 1 for ep in episodes) + actor.assembler.pending_steps()
    assert total == 4 * 7 * B


def test_actor_state_round_trips(games):
    env, model, params = games["pgx:tic_tac_toe"]
    actor = DeviceActor(env, model, _policy(env, "puct"), B, 5, jax.random.key(1), acting=ActingConfig())
    actor.set_params(0, params)
    actor.run()
    assert actor.assembler.pending_steps() > 0
    state = jax.tree_util.tree_map(lambda x: x, actor.state_dict())
    a = actor.run()[0]
    again = DeviceActor(env, model, _policy(env, "puct"), B, 5, jax.random.key(9), acting=ActingConfig())
    again.set_params(0, params)
    again.load_state_dict(state)
    b = again.run()[0]
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.trajectory.actions, y.trajectory.actions)
        np.testing.assert_array_equal(x.trajectory.root_policies, y.trajectory.root_policies)
        np.testing.assert_array_equal(x.trajectory.legal_actions, y.trajectory.legal_actions)
    # A state saved before legal masks were kept: its unfinished steps count every move as legal.
    for pending in (v for k, v in state["assembler"].items() if k.isdigit() and v):
        del pending["legal"]
    old = DeviceActor(env, model, _policy(env, "puct"), B, 5, jax.random.key(9), acting=ActingConfig())
    old.set_params(0, params)
    old.load_state_dict(state)
    c = old.run()[0]
    assert [x.trajectory.actions.tolist() for x in c] == [x.trajectory.actions.tolist() for x in a]
    extra = [int(x.trajectory.legal_actions.sum() - y.trajectory.legal_actions.sum()) for x, y in zip(c, a)]
    assert min(extra) >= 0 and max(extra) > 0  # occupied squares of the saved steps now count as legal


@pytest.mark.extended  # compiles its own acting program (~26 s on a slow machine)
def test_no_exploration_after_explore_moves_is_greedy(games):
    env, model, params = games["pgx:tic_tac_toe"]
    outs = []
    for temp, explore in ((0.0, None), (1.0, 0)):
        actor = DeviceActor(env, model, _policy(env, "puct", explore_moves=explore), B, 9, jax.random.key(2),
                            acting=ActingConfig(temperature=((0, temp),)))
        actor.set_params(0, params)
        outs.append(actor.run()[0])
    for x, y in zip(*outs):
        np.testing.assert_array_equal(x.trajectory.actions, y.trajectory.actions)


@pytest.mark.extended  # compiles its own acting program (~30 s on a slow machine)
def test_random_moves_open_with_uniform_legal_moves(games):
    """Greedy search plays one opening everywhere; with random_moves=1 the first moves spread out."""
    env, model, params = games["pgx:tic_tac_toe"]
    firsts = {}
    for k in (0, 1):
        actor = DeviceActor(env, model, _policy(env, "greedy", random_moves=k), 32, 10, jax.random.key(0),
                            acting=ActingConfig())
        actor.set_params(0, params)
        firsts[k] = np.array([ep.trajectory.actions[0] for ep in actor.run()[0] if ep.trajectory.first == 0])
    assert len(set(firsts[0].tolist())) == 1
    assert len(set(firsts[1].tolist())) >= 6 and np.all((firsts[1] >= 1) & (firsts[1] <= 9))


def _cycle_opponent(rng, ts):
    """Plays the lowest legal cell (deterministic)."""
    legal = np.asarray(ts.legal_actions)
    return np.where(legal.any(-1), np.argmax(legal, -1), 0)


def _tic_tac_toe_test_actor(env, model, path: str, device_steps: int):
    """A greedy test actor for tic-tac-toe: 8 device games, or 4 host games against ``_cycle_opponent``."""
    cfg = _policy(env, "greedy", mode="test", record_frames=False)
    if path == "device":
        return DeviceActor(env, model, cfg, 8, device_steps, jax.random.key(3))
    pool = HostPool(lambda: DeviceAsHost(env, None), 4, seed=5)
    return PoolActor(pool, model, dataclasses.replace(cfg, spec=pool.spec), 1, jax.random.key(0),
                     opponent=_cycle_opponent)


@pytest.mark.parametrize("path", ["device", "pool"])
def test_test_games_balance_seats_by_move_order(games, path):
    env, model, params = games["pgx:tic_tac_toe"]
    actor = _tic_tac_toe_test_actor(env, model, path, device_steps=10)
    actor.set_params(0, params)
    results = play_games(actor, 16)
    seats = [g.agent_seat for g in results]
    assert len(results) == 16 and seats.count(0) == 8
    for g in results:
        assert agent_return(g.trajectory, g.agent_seat, True) in (-1.0, 0.0, 1.0) and 5 <= g.length <= 9
    actor.close()


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


def test_single_player_test_game_returns():
    a = 3
    model = build_model(ModelConfig(kind="mlp", mlp_hidden=(8,), mlp_embedding=8, head_hidden=8, support_size=3),
                        (1, 1, stacked_channels(1, a, 1)), a)
    pool = HostPool(_Countdown, 3, seed=0)
    cfg = PolicyConfig(spec=pool.spec, planner=PLANNERS["greedy"], discount=1.0, history_length=1, mode="test")
    actor = PoolActor(pool, model, cfg, 1, jax.random.key(0))
    actor.set_params(0, model.init(jax.random.key(0)))
    calls = []
    results = play_games(actor, 6, progress=lambda *c: calls.append(c))
    assert [(agent_return(g.trajectory, 0, False), g.length) for g in results] == [(3.0, 3)] * 6
    # progress after every segment (1 step of 3 games): the moves climb by 3, the games over up to 2 a game slot
    assert [c[2] for c in calls] == [3 * (i + 1) for i in range(len(calls))]
    assert all(c[1] == 6 for c in calls) and calls[-1][0] == 6
    assert [c[0] for c in calls] == sorted(c[0] for c in calls) and calls[0][0] == 0


def test_eval_progress_says_a_line_a_minute_and_none_before():
    from moozi.eval.evaluate import EvalProgress

    ticks, lines = iter([0.0, 10.0, 61.0, 70.0, 125.0]), []
    progress = EvalProgress(lines.append, every_s=60.0, clock=lambda: next(ticks))
    for finished, moves in [(0, 640), (1, 7_040), (1, 7_680), (3, 12_800)]:
        progress(finished, 6, moves)
    assert lines == ["moozi eval: 1 of 6 games over, 7,040 moves played, 1.0 min",
                     "moozi eval: 3 of 6 games over, 12,800 moves played, 2.1 min"]


def test_host_random_opponent_is_legal():
    rng = np.random.default_rng(0)
    legal = np.array([[False, True, False], [False, False, False], [True, True, True]])
    ts = type("TS", (), {"legal_actions": legal})()
    for _ in range(20):
        a = host_random_opponent(rng, ts)
        assert legal[0, a[0]] and a[1] == 0 and 0 <= a[2] < 3


def test_assembler_drops_idle_steps_and_state_round_trips():
    asm = EpisodeAssembler(2)
    assert asm.state_dict()["0"] == {}
    again = EpisodeAssembler(2)
    again.load_state_dict(asm.state_dict())
    assert again.pending_steps() == 0
    with pytest.raises(ValueError, match="environments"):
        EpisodeAssembler(3).load_state_dict(asm.state_dict())


@pytest.mark.parametrize("name,planner", [("pgx:tic_tac_toe", "greedy"), ("gymnax:CartPole-v1", "greedy")])
def test_forced_actions_over_replay_reproduce_histories_and_search(games, name, planner):
    """The reanalyze seam: replaying stored games with the same params and no noise."""
    env, model, params = games[name]
    actor = DeviceActor(env, model, _policy(env, planner), B, 12, jax.random.key(5), acting=ActingConfig())
    actor.set_params(1, params)
    stored = [ep.trajectory for ep in actor.run()[0]][:5]
    assert len(stored) >= 3
    # Episodes do not store legal masks; tic-tac-toe's are the empty cells of its board planes.
    masks = None
    if env.spec.two_player:
        masks = [~np.asarray(t.frames[..., :2].reshape(-1, 9, 2).any(-1)) for t in stored]
    pool = ReplayEnvPool(env.spec, 2)
    pool.add(stored, legal_actions=masks)
    forced = PoolActor(pool, model, _policy(env, planner, mode="forced"), 3, jax.random.key(11))
    forced.set_params(1, params)
    a = model.num_actions
    checked = 0
    while not pool.exhausted:
        ids, steps, active = pool.slot_trajectory_id.copy(), pool.slot_step.copy(), pool.active.copy()
        _, obs = forced.step()
        for b in np.flatnonzero(active):
            tr = stored[ids[b]]
            frames = decode_frames(env.spec, jnp.asarray(tr.frames))
            want = history_at(frames, jnp.asarray(tr.actions), 0, int(steps[b]), L, a)
            np.testing.assert_array_equal(np.asarray(obs[b]), np.asarray(want))
            checked += 1
    assert checked == sum(int(t.last) + 1 for t in stored)
    # Whole replays come out of run() as episodes tagged with the stored id.
    pool.add(stored, legal_actions=masks, ids=list(range(len(stored))))
    replayed = []
    while len(replayed) < len(stored):
        replayed += forced.run()[0]
    for ep in replayed:
        tr = stored[ep.source_id]
        np.testing.assert_array_equal(ep.trajectory.actions, tr.actions)
        np.testing.assert_array_equal(ep.trajectory.frames, tr.frames)
        np.testing.assert_allclose(ep.trajectory.root_values, tr.root_values, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(ep.trajectory.root_policies, tr.root_policies, rtol=1e-4, atol=1e-4)
    assert sorted(ep.source_id for ep in replayed) == list(range(len(stored)))


class _Halves(_Countdown):
    """Declares uint8 frames but emits 0.5: a wrong declaration must not be quantized silently."""

    spec = EnvSpec("test:halves", (1, 1, 1), 2, path="host", observation_dtype="uint8")

    def reset(self, seed):
        return GameStep(np.array([0.5], np.float32), np.array([True, True]))


def test_a_wrong_frame_dtype_declaration_is_an_error_naming_the_game():
    model = build_model(ModelConfig(kind="mlp", mlp_hidden=(8,), mlp_embedding=8, head_hidden=8, support_size=3),
                        (1, 1, stacked_channels(1, 3, 1)), 3)
    pool = HostPool(_Halves, 2, seed=0)
    cfg = PolicyConfig(spec=pool.spec, planner=PLANNERS["greedy"], discount=1.0, history_length=1)
    actor = PoolActor(pool, model, cfg, 1, jax.random.key(0))
    actor.set_params(0, model.init(jax.random.key(0)))
    with pytest.raises(ValueError, match="test:halves: the spec declares observation_dtype uint8"):
        actor.run()
    actor.close()


@pytest.mark.parametrize("path", ["device", "pool"])
def test_new_episodes_leave_no_game_begun_by_older_params(games, path):
    """A test scores only games its own params began: without new_episodes(), games left unfinished by
    the previous segment come back with the old version."""
    env, model, params = games["pgx:tic_tac_toe"]
    versions = {}
    for fresh in (False, True):
        actor = _tic_tac_toe_test_actor(env, model, path, device_steps=3)
        actor.set_params(1, params)
        actor.run()  # games in progress with version 1
        actor.set_params(2, params)
        if fresh:
            actor.new_episodes()
        versions[fresh] = {g.version for g in play_games(actor, 8)}
        actor.close()
    assert 1 in versions[False]
    assert versions[True] == {2}


def test_test_temperature_samples_the_search_policy_golden():
    """testing.temperature T draws test moves from the search's policy raised to 1/T: 0.75 / 0.25 at T = 1,
    0.75² / (0.75² + 0.25²) = 0.9 at T = 0.5; moves of probability 0 (illegal, the dummy) never."""
    import jax.numpy as jnp

    from moozi.workers.policy import sample_with_temperature

    policy = jnp.tile(jnp.array([[0.0, 0.75, 0.25, 0.0]]), (8000, 1))
    for temp, share in ((1.0, 0.75), (0.5, 0.9), (0.01, 1.0)):
        draws = np.asarray(sample_with_temperature(jax.random.key(1), policy, temp))
        assert set(draws.tolist()) <= {1, 2}
        assert abs(np.mean(draws == 1) - share) < 0.02
