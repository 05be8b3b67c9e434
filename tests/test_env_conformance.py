"""Conformance suite for every environment bridge, device and host (docs/architecture.md §3).

Device environments: every check runs on each name in ``list_envs(path="device")``.
To keep JAX compile time down, each env is built once (with a small truncation
cap), and only its batched ``reset_batch`` / ``step_batch`` (batch 2) are
compiled; the rollouts are driven from the host and cached for all checks.

Host environments: every check runs on each name in ``HOST_ENVS`` (built
through ``moozi.envs.pool.make_pool``, batch 2, with a small cap where the
bridge takes ``max_episode_steps``), on a small two-player game defined here
and registered with ``moozi.envs.register`` (the user's own game), and on a
``ReplayEnvPool`` replaying recorded games of it. Each pool is built once and
its seeded random rollout cached for all checks.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import re
import subprocess
import sys

import jax
import numpy as np
import pytest

from moozi.config import ConfigError
from moozi.envs import (
    EnvSpec,
    IllegalActionError,
    TimeStep,
    UnknownEnvError,
    check_lossless,
    checked_step,
    decode_frames,
    encode_frames,
    list_envs,
    make_env,
    register,
    step_batch,
    unregister,
)
from moozi.envs.host import GameStep, HostEnv
from moozi.envs.pool import HostPool, make_pool
from moozi.envs.replay_env import ReplayEnvPool
from moozi.types import Trajectory, to_augmented

needs_device = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("gymnax", "pgx")),
    reason="the device bridges need gymnax and pgx (pip install 'moozi[gymnax,pgx]')",
)

B = 2  # batch size of every compiled call
CAP = 12  # truncation cap for the shared env instances
STEPS = CAP + 6  # every rollout reaches a last step and goes on into the next episode
DEVICE_ENVS = list_envs(path="device")


@functools.lru_cache(maxsize=None)
def get_env(name):
    return make_env(name, max_episode_steps=CAP)


def _np(tree):
    return jax.tree.map(np.asarray, jax.device_get(tree))


def _random_actions(rng, ts, num_actions):
    """A random legal action per batch element; a random (ignored) one on last steps."""
    out = []
    for legal in np.asarray(ts.legal_actions):
        idx = np.flatnonzero(legal)
        out.append(rng.choice(idx) if idx.size else rng.integers(num_actions))
    return np.asarray(out, np.int32)


def _run(env, key, actions_fn, steps):
    """Roll ``steps`` steps from ``reset_batch(keys)``; returns (timesteps, actions, states) as lists."""
    state, ts = env.jitted.reset_batch(jax.random.split(key, B))
    tss, acts, states = [_np(ts)], [], [state]
    for t in range(steps):
        a = actions_fn(t, tss[-1])
        state, ts = env.jitted.step_batch(state, a)
        tss.append(_np(ts))
        acts.append(a)
        states.append(state)
    return tss, acts, states


@functools.lru_cache(maxsize=None)
def rollout(name, seed=0):
    env = get_env(name)
    rng = np.random.default_rng(seed)
    return _run(env, jax.random.PRNGKey(seed), lambda t, ts: _random_actions(rng, ts, env.num_actions), STEPS)


def _fixed_actions(seq):
    """actions_fn playing ``seq[t]`` (a length-B sequence) at step t."""
    return lambda t, ts: np.asarray(seq[t], np.int32)


# ----------------------------------------------------------------------------- generic checks


@needs_device
def _frames_are_lossless(spec, tss):
    """Observations survive the storage dtype the spec declares (replay, process boundaries)."""
    assert spec.observation_dtype in ("uint8", "float32") and spec.observation_scale > 0
    for ts in tss:
        obs = np.asarray(ts.observation)
        frames = encode_frames(spec, obs)
        assert frames.dtype == np.dtype(spec.observation_dtype)
        check_lossless(spec, obs, frames)
        np.testing.assert_allclose(decode_frames(spec, frames), obs, rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", DEVICE_ENVS)
def test_spec_shapes_and_dtypes(name):
    env = get_env(name)
    spec = env.spec
    assert isinstance(spec, EnvSpec) and spec.name == name and spec.max_episode_steps == CAP
    assert len(spec.observation_shape) == 3 and spec.num_players in (1, 2)
    tss, _, states = rollout(name)
    for ts in tss[:2]:
        assert isinstance(ts, TimeStep)
        assert ts.observation.shape == (B, *spec.observation_shape) and ts.observation.dtype == np.float32
        assert ts.reward.shape == (B,) and ts.reward.dtype == np.float32
        for f in (ts.is_first, ts.is_last, ts.is_terminal):
            assert f.shape == (B,) and f.dtype == np.bool_
        assert ts.legal_actions.shape == (B, spec.num_actions) and ts.legal_actions.dtype == np.bool_
        assert ts.to_play.shape == (B,) and ts.to_play.dtype == np.int32
        assert np.all(np.isfinite(ts.observation))
    _frames_are_lossless(spec, tss)
    # reset and step produce the same state types (so a scan can carry them)
    t0 = jax.tree.map(lambda x: (x.shape, x.dtype, getattr(x, "weak_type", False)), states[0])
    t1 = jax.tree.map(lambda x: (x.shape, x.dtype, getattr(x, "weak_type", False)), states[1])
    assert t0 == t1


@needs_device
@pytest.mark.parametrize("name", DEVICE_ENVS)
def test_episode_semantics(name):
    """first/last/auto-reset, truncation at the cap, legal masks, to_play."""
    spec = get_env(name).spec
    tss, _, _ = rollout(name)
    assert tss[0].is_first.all() and not tss[0].is_last.any() and (tss[0].reward == 0).all()
    seen_last = np.zeros(B, bool)
    for b in range(B):
        length = 0  # actions taken in the current episode
        for t in range(len(tss)):
            ts = jax.tree.map(lambda x: x[b], tss[t])
            if t > 0:
                prev = jax.tree.map(lambda x: x[b], tss[t - 1])
                assert bool(ts.is_first) == bool(prev.is_last), (t, "the step after a last step (only) is first")
                length = 0 if ts.is_first else length + 1
            if ts.is_first:
                assert ts.reward == 0 and not ts.is_last
            assert not ts.is_terminal or ts.is_last
            assert length <= CAP
            if length == CAP:
                assert ts.is_last, "an episode ends at the cap"
            if ts.is_last:
                seen_last[b] = True
                assert not ts.legal_actions.any(), "nothing is legal on a last step"
                if not ts.is_terminal:
                    assert length == CAP, "truncation happens only at the cap here"
            else:
                assert ts.legal_actions.any(), "a non-last step has a legal action"
            assert 0 <= ts.to_play < spec.num_players
            if spec.num_players == 1:
                # every move is legal in MinAtar and gymnax's games; 2048 masks the moves that change nothing
                assert ts.to_play == 0 and (ts.is_last or ts.legal_actions.all() or name == "pgx:2048")
            elif t > 0 and not ts.is_first and not ts.is_last:
                assert ts.to_play == 1 - tss[t - 1].to_play[b], "turns alternate"
                assert ts.reward == 0, "board games pay only at the end"
            if spec.num_players == 2 and ts.is_terminal:
                assert ts.reward in (-1.0, 0.0, 1.0)
    assert seen_last.all()


@needs_device
@pytest.mark.parametrize("name", DEVICE_ENVS)
def test_seeded_reset_reproduces(name):
    """Same key + same actions -> same steps, also across the auto-reset."""
    env = get_env(name)
    tss, acts, _ = rollout(name)
    again, _, _ = _run(env, jax.random.PRNGKey(0), lambda t, ts: acts[t], STEPS)
    for a, b in zip(tss, again):
        jax.tree.map(np.testing.assert_array_equal, a, b)


@needs_device
@pytest.mark.parametrize("name", DEVICE_ENVS)
def test_step_after_last_ignores_action(name):
    env = get_env(name)
    tss, _, states = rollout(name)
    t, b = next((t, b) for t in range(len(tss)) for b in range(B) if tss[t].is_last[b])
    last = jax.tree.map(lambda x: np.stack([np.asarray(x)[b]] * 2), states[t])  # on the host: no tiny compiles
    new_state, ts = env.jitted.step_batch(last, np.array([0, env.num_actions - 1], np.int32))
    ts, new_state = _np(ts), _np(new_state)
    assert ts.is_first.all() and (ts.reward == 0).all() and not ts.is_last.any()
    jax.tree.map(lambda x: np.testing.assert_array_equal(x[0], x[1]), (ts, new_state))
    # the checked helper accepts any action (even the dummy, -1) on a last step
    _, ts2 = checked_step(env, last, np.array([-1, 10**6]))
    jax.tree.map(np.testing.assert_array_equal, ts, _np(ts2))


@needs_device
@pytest.mark.parametrize("name", DEVICE_ENVS)
def test_checked_step_rejects_bad_actions(name):
    env = get_env(name)
    n = env.num_actions
    tss, _, states = rollout(name)
    # a step where both batch elements are live, preferably with an illegal action
    live = [t for t in range(len(tss)) if not tss[t].is_last.any()]
    t = next((t for t in live if not tss[t].legal_actions.all()), live[0])
    state, ts = states[t], tss[t]
    good = _random_actions(np.random.default_rng(1), ts, n)
    _, ok = checked_step(env, state, good)
    jax.tree.map(np.testing.assert_array_equal, _np(ok), _np(env.jitted.step_batch(state, good)[1]))
    for bad in (n, -1):
        with pytest.raises(IllegalActionError, match=rf"out of range.*0\.\.{n - 1}"):
            checked_step(env, state, np.array([good[0], bad]))
    with pytest.raises(IllegalActionError, match="shape"):
        checked_step(env, state, good[0])
    with pytest.raises(IllegalActionError, match="integer"):
        checked_step(env, state, good.astype(np.float32))
    illegal = np.flatnonzero(~ts.legal_actions[0])
    if illegal.size:  # (single-player games here have none; tic-tac-toe, Go and Othello do)
        with pytest.raises(IllegalActionError, match=rf"action {illegal[0]} .*illegal.*legal actions: \["):
            checked_step(env, state, np.array([illegal[0], good[1]]))


# ----------------------------------------------------------------------------- games with known outcomes


def _play(name, seq):
    env = get_env(name)
    return env, _run(env, jax.random.PRNGKey(3), _fixed_actions(seq), len(seq))[0]


@needs_device
@pytest.mark.parametrize(
    "name, moves",
    [
        # slot 0: the first player wins on a row (moves 0, 1, 2); slot 1: the second player wins (3, 4, 5)
        ("pgx:tic_tac_toe", [(0, 0), (3, 3), (1, 1), (4, 4), (2, 8), (0, 5)]),
        # slot 0: first player wins in column 0 at ply 7; slot 1: second player wins in column 1 at ply 8
        ("pgx:connect_four", [(0, 0), (1, 1), (0, 0), (1, 1), (0, 0), (1, 1), (0, 2), (0, 1)]),
    ],
)
def test_two_player_winner_gets_plus_one(name, moves):
    env, tss = _play(name, moves)
    end = {0: len(moves) - 1, 1: len(moves)}  # step index of each slot's winning move
    for b in range(B):
        first_player = tss[0].to_play[b]
        for t in range(1, end[b] + 1):
            ts = jax.tree.map(lambda x: x[b], tss[t])
            mover = tss[t - 1].to_play[b]
            assert mover == (first_player + t - 1) % 2, "to_play alternates from the first player"
            if t < end[b]:
                assert not ts.is_last and ts.reward == 0 and ts.to_play == 1 - mover
            else:
                assert ts.is_last and ts.is_terminal and ts.reward == 1.0, "the winning mover gets +1"
                assert not ts.legal_actions.any()
        assert mover == (first_player + (0 if b == 0 else 1)) % 2
    # slot 0 auto-reset after its win and ignored the action (0) given there
    if end[0] < len(moves):
        assert tss[end[0] + 1].is_first[0] and tss[end[0] + 1].reward[0] == 0


@needs_device
def test_illegal_move_raises_on_host_and_loses_inside_jit():
    env = get_env("pgx:tic_tac_toe")
    _, _, states = _run(env, jax.random.PRNGKey(3), _fixed_actions([(4, 4)]), 1)
    with pytest.raises(IllegalActionError, match=r"action 4 \(batch index 0\) is illegal here; legal actions: \[0, 1, 2, 3, 5"):
        checked_step(env, states[1], np.array([4, 0]))
    # inside jit nothing can raise: pgx ends the game and the mover loses; out of range is clipped
    _, ts = env.jitted.step_batch(states[1], np.array([4, 99], np.int32))
    _, ts_clipped = env.jitted.step_batch(states[1], np.array([4, 8], np.int32))
    ts, ts_clipped = _np(ts), _np(ts_clipped)
    assert ts.is_terminal[0] and ts.reward[0] == -1.0
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(a[1], b[1]), ts, ts_clipped)


@needs_device
def test_go_two_passes_white_wins_on_komi():
    env, tss = _play("pgx:go_9x9", [(81, 81), (81, 81)])
    last = tss[2]
    assert last.is_last.all() and last.is_terminal.all()
    # black moves first; the second pass is white's, who wins an empty board on komi 7.5
    np.testing.assert_array_equal(last.reward, [1.0, 1.0])
    np.testing.assert_array_equal(tss[1].reward, [0.0, 0.0])


@needs_device
@pytest.mark.parametrize("name", ["gymnax:CartPole-v1", "gymnax:Breakout-MinAtar", "pgx:minatar-breakout"])
def test_single_player_terminates(name):
    """Always pushing right drops the pole; never moving loses the first ball."""
    action = 1 if "CartPole" in name else 0
    env, tss = _play(name, [(action, action)] * CAP)
    t = next(t for t in range(len(tss)) if tss[t].is_last.any())
    assert t < CAP and tss[t].is_terminal[tss[t].is_last].all()


@needs_device
def test_truncation_is_last_not_terminal():
    """CartPole balanced by alternating pushes reaches the cap: last, not terminal, then a first step."""
    env, tss = _play("gymnax:CartPole-v1", [(t % 2, (t + 1) % 2) for t in range(CAP + 1)])
    for t in range(1, CAP):
        assert not tss[t].is_last.any()
    assert tss[CAP].is_last.all() and not tss[CAP].is_terminal.any()
    np.testing.assert_array_equal(tss[CAP].reward, [1.0, 1.0])
    assert tss[CAP + 1].is_first.all()


@needs_device
def test_unbatched_and_scanned_match_batched():
    """``reset``/``step`` unbatched and a ``lax.scan`` rollout agree with the batched calls."""
    env = get_env("gymnax:CartPole-v1")
    keys = jax.random.split(jax.random.PRNGKey(5), B)
    actions = np.array([[t % 2, 1] for t in range(CAP + 2)], np.int32)
    state, ts = env.jitted.reset_batch(keys)

    @jax.jit
    def scanned(state):
        return jax.lax.scan(lambda s, a: step_batch(env, s, a), state, actions)

    _, scan_ts = scanned(state)
    loop_tss = _run(env, jax.random.PRNGKey(5), lambda t, ts: actions[t], len(actions))[0]
    for t in range(len(actions)):
        jax.tree.map(np.testing.assert_array_equal, jax.tree.map(lambda x: np.asarray(x[t]), scan_ts), loop_tss[t + 1])
    s1, t1 = env.reset(keys[1])
    s1, t1 = env.step(s1, actions[0, 1])
    jax.tree.map(np.testing.assert_array_equal, _np(t1), jax.tree.map(lambda x: x[1], loop_tss[1]))


# ----------------------------------------------------------------------------- registry


@needs_device
def test_registry_names():
    expected = {
        "gymnax:Breakout-MinAtar", "gymnax:SpaceInvaders-MinAtar", "gymnax:Freeway-MinAtar",
        "gymnax:Asterix-MinAtar", "gymnax:CartPole-v1", "pgx:tic_tac_toe", "pgx:connect_four",
        "pgx:othello", "pgx:go_9x9", "pgx:minatar-breakout", "pgx:minatar-asterix",
        "pgx:minatar-freeway", "pgx:minatar-space_invaders", "pgx:minatar-seaquest", "pgx:2048",
    }  # fmt: skip
    assert expected <= set(DEVICE_ENVS)
    assert list_envs(path="host") == [] or all(n not in expected for n in list_envs(path="host"))


@needs_device
def test_unknown_name_lists_available():
    for bad in ("gymnax:Pong-Atari", "nope:thing", "tic_tac_toe"):
        with pytest.raises(UnknownEnvError) as e:
            make_env(bad)
        assert isinstance(e.value, ValueError)
        assert "gymnax:CartPole-v1" in str(e.value) and "pgx:tic_tac_toe" in str(e.value)


@needs_device
def test_bad_parameter_is_named():
    with pytest.raises(ConfigError, match=r"unknown parameter 'foo'.*allowed: max_episode_steps, params"):
        make_env("gymnax:CartPole-v1", foo=1)
    with pytest.raises(ConfigError, match=r"params\.nope.*allowed: .*gravity"):
        make_env("gymnax:CartPole-v1", params={"nope": 1.0})
    with pytest.raises(ConfigError, match=r"max_episode_steps = 0 .*None or an integer >= 1"):
        make_env("pgx:tic_tac_toe", max_episode_steps=0)
    with pytest.raises(ConfigError, match=r"unknown parameter 'komi'.*allowed: max_episode_steps"):
        make_env("pgx:tic_tac_toe", komi=6.5)
    with pytest.raises(ConfigError, match=r"unknown parameter 'colour'.*komi"):
        make_env("pgx:go_9x9", colour=1)
    # defaults and overrides of the caps (construction only, nothing compiles)
    assert make_env("gymnax:CartPole-v1").spec.max_episode_steps == 500
    assert make_env("gymnax:CartPole-v1", max_episode_steps=None).spec.max_episode_steps is None
    assert make_env("pgx:tic_tac_toe").spec.max_episode_steps is None
    assert make_env("pgx:minatar-breakout", sticky_action_prob=0.0).spec.num_actions == 3


def test_register_a_prefix_and_a_name():
    made = []

    def family(game, *, size=3):
        if game not in ("a", "b"):
            raise ValueError(f"toy: unknown game {game!r}; available: a, b")
        made.append((game, size))
        return game

    try:
        register("toy:", family, path="host", games=("a", "b"))
        register("toy:special", lambda: "special", path="host")
        assert {"toy:a", "toy:b", "toy:special"} <= set(list_envs(path="host"))
        assert not {"toy:a", "toy:special"} & set(list_envs(path="device"))
        assert make_env("toy:b", size=4) == "b" and made == [("b", 4)]
        assert make_env("toy:special") == "special"
        with pytest.raises(ConfigError, match="unknown parameter 'depth'.*allowed: size"):
            make_env("toy:a", depth=2)
        with pytest.raises(ValueError, match="unknown game 'c'"):
            make_env("toy:c")
        with pytest.raises(ConfigError, match="already registered"):
            register("toy:", family)
        with pytest.raises(ConfigError, match="path"):
            register("toy2:", family, path="gpu")
    finally:
        unregister("toy:")
        unregister("toy:special")
    assert not any(n.startswith("toy:") for n in list_envs())


@needs_device
def test_import_is_light():
    """Importing the envs package (and listing names) imports neither gymnax nor pgx."""
    code = (
        "import sys, moozi.envs as e; names = e.list_envs(); "
        "assert 'gymnax' not in sys.modules and 'pgx' not in sys.modules, 'heavy import'; "
        "assert 'pgx:go_9x9' in names"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ============================================================================= host environments

HOST_ENVS = [
    "openspiel:tic_tac_toe",
    "openspiel:connect_four",
    "openspiel:breakthrough(rows=5,columns=5)",
    "openspiel:einstein_wurfelt_nicht",  # chance nodes (the starting layout, a die each turn), sampled by the bridge
    "minatar:breakout",
    "gym:CartPole-v1",
    "ale:Pong",
]
CUSTOM = "custom:nim"  # the user's own game: registered below with moozi.envs.register
REPLAY = "replay:nim"  # not registered: a ReplayEnvPool replaying recorded custom:nim games
ALL_HOST = HOST_ENVS + [CUSTOM, REPLAY]
TWO_PLAYER_HOST = ["openspiel:tic_tac_toe", "openspiel:connect_four", "openspiel:breakthrough(rows=5,columns=5)",
                   "openspiel:einstein_wurfelt_nicht", CUSTOM]
HOST_STEPS = 40  # several episodes (and caps) per rollout
_HOST_POOLS = []  # every pool built here, closed at the end of the module


class Nim(HostEnv):
    """Two players take 1 (action 0) or 2 (action 1) stones in turn; taking the last one wins.

    The pile (5..20) comes from the reset seed. Observation ``[pile, to_play]``.
    Taking 2 is illegal with one stone left.
    """

    def __init__(self, max_episode_steps=None):
        self.spec = EnvSpec(CUSTOM, (1, 1, 2), 2, num_players=2, max_episode_steps=max_episode_steps, path="host")

    def _step(self, reward=0.0):
        return GameStep(np.array([self.pile, self.player], np.float32), np.array([self.pile >= 1, self.pile >= 2]),
                        reward=reward, terminated=self.pile == 0, to_play=self.player)

    def reset(self, seed):
        self.pile, self.player = 5 + seed % 16, 0
        return self._step()

    def step(self, action):
        self.pile -= action + 1
        self.player = 1 - self.player
        return self._step(reward=1.0 if self.pile == 0 else 0.0)  # the mover took the last stone


def make_nim(max_episode_steps=None):
    return Nim(max_episode_steps)


@functools.lru_cache(maxsize=None)
def _nim_recordings():
    """30 custom:nim episodes played at random on a live pool (cap 8, so some are truncated):
    (trajectories, legal masks), for the replay case."""
    pool = HostPool(functools.partial(Nim, 8), 1, seed=7)
    rng = np.random.default_rng(7)
    trajs, masks = [], []
    ts = pool.reset()
    for k in range(30):
        steps, actions = [ts], []
        while not steps[-1].is_last[0]:
            actions.append(int(_random_actions(rng, steps[-1], 2)[0]))
            steps.append(pool.step(np.array(actions[-1:])))
        pad = k % 3  # padding after the last step is never read
        n = len(steps) + pad
        field = lambda f, dtype: np.concatenate([np.stack([getattr(s, f)[0] for s in steps]),  # noqa: E731
                                                 np.zeros((pad, *getattr(steps[0], f).shape[1:]), dtype)]).astype(dtype)
        trajs.append(Trajectory(
            frames=field("observation", np.float32),
            actions=np.array([to_augmented(a) for a in actions] + [0] * (pad + 1), np.int32),
            rewards=field("reward", np.float32),
            root_values=np.zeros((n,), np.float32),
            root_policies=np.full((n, 3), 1 / 3, np.float32),
            to_play=field("to_play", np.int32),
            first=np.int32(0),
            last=np.int32(len(steps) - 1),
            is_terminal=np.bool_(steps[-1].is_terminal[0]),
        ))
        masks.append(field("legal_actions", bool))
        ts = pool.step(np.zeros(1, np.int32))  # the next episode
    pool.close()
    assert any(t.is_terminal for t in trajs) and not all(t.is_terminal for t in trajs)
    return trajs, masks


def _replay_pool():
    trajs, masks = _nim_recordings()
    pool = ReplayEnvPool(dataclasses.replace(Nim().spec, name=REPLAY), B)
    pool.add(trajs, legal_actions=masks)
    _HOST_POOLS.append(pool)
    return pool


def _make_host_pool(name, cap=CAP):
    """A fresh pool of B environments ``name`` (seed 0), capped at ``cap`` steps where the bridge
    takes ``max_episode_steps`` (``cap=None``: the bridge's default)."""
    if name == REPLAY:
        return _replay_pool()
    if name == CUSTOM:
        register(CUSTOM, make_nim, path="host", overwrite=True)
    kwargs = {} if cap is None else {"max_episode_steps": cap}
    try:
        try:
            pool = make_pool(name, B, seed=0, **kwargs)
        except ConfigError as e:
            if "unknown parameter 'max_episode_steps'" not in str(e):
                raise
            pool = make_pool(name, B, seed=0)  # the bridge has no cap parameter
    except ImportError as e:  # an optional extra that is not installed (like importorskip)
        pytest.skip(f"{name}: {e}")
    _HOST_POOLS.append(pool)
    return pool


@pytest.fixture(scope="module", autouse=True)
def _close_host_pools():
    yield
    for pool in _HOST_POOLS:
        pool.close()
    _HOST_POOLS.clear()
    host_pool.cache_clear()
    host_rollout.cache_clear()
    unregister(CUSTOM)


@functools.lru_cache(maxsize=None)
def host_pool(name):
    """The shared pool of ``name`` (each test that steps it resets it first)."""
    return _make_host_pool(name)


def _fresh(name):
    """The shared pool, or a new one for the replay case (whose queue a rollout consumes)."""
    return _replay_pool() if name == REPLAY else host_pool(name)


def _drive(pool, actions_fn, steps, seed=0):
    """``pool.reset(seed)`` then ``steps`` steps; returns (timesteps, actions, episode_steps) as lists."""
    tss, acts, eps = [pool.reset(seed)], [], [pool.episode_step.copy()]
    for t in range(steps):
        a = actions_fn(t, tss[-1])
        tss.append(pool.step(a))
        acts.append(a)
        eps.append(pool.episode_step.copy())
    return tss, acts, eps


@functools.lru_cache(maxsize=None)
def host_rollout(name):
    pool = host_pool(name)
    rng = np.random.default_rng(0)
    return _drive(pool, lambda t, ts: _random_actions(rng, ts, pool.spec.num_actions), HOST_STEPS)


def _assert_ts_equal(a, b):
    for f in dataclasses.fields(TimeStep):
        np.testing.assert_array_equal(getattr(a, f.name), getattr(b, f.name), err_msg=f.name)


@pytest.mark.parametrize("name", ALL_HOST)
def test_host_spec_shapes_and_dtypes(name):
    pool = host_pool(name)
    spec = pool.spec
    assert isinstance(spec, EnvSpec) and spec.name == name and spec.path == "host" and pool.num_envs == B
    assert len(spec.observation_shape) == 3 and spec.num_players in (1, 2) and spec.num_actions >= 1
    tss, _, eps = host_rollout(name)
    for ts, ep in zip(tss, eps):
        assert isinstance(ts, TimeStep)
        assert ts.observation.shape == (B, *spec.observation_shape) and ts.observation.dtype == np.float32
        assert ts.reward.shape == (B,) and ts.reward.dtype == np.float32
        for f in (ts.is_first, ts.is_last, ts.is_terminal):
            assert f.shape == (B,) and f.dtype == np.bool_
        assert ts.legal_actions.shape == (B, spec.num_actions) and ts.legal_actions.dtype == np.bool_
        assert ts.to_play.shape == (B,) and ts.to_play.dtype == np.int32
        assert ep.shape == (B,) and ep.dtype == np.int32
        assert np.all(np.isfinite(ts.observation)) and np.all(np.isfinite(ts.reward))
    _frames_are_lossless(spec, tss)


@pytest.mark.parametrize("name", ALL_HOST)
def test_host_episode_semantics(name):
    """first/last/auto-reset, the cap, legal masks, to_play, two-player terminal rewards."""
    spec = host_pool(name).spec
    cap = spec.max_episode_steps
    tss, _, eps = host_rollout(name)
    assert tss[0].is_first.all() and not tss[0].is_last.any() and (tss[0].reward == 0).all()
    seen_last = np.zeros(B, bool)
    for b in range(B):
        length = 0  # actions taken in the current episode
        for t in range(len(tss)):
            ts = jax.tree.map(lambda x: x[b], tss[t])
            if t > 0:
                prev = jax.tree.map(lambda x: x[b], tss[t - 1])
                assert bool(ts.is_first) == bool(prev.is_last), (t, "the step after a last step (only) is first")
                length = 0 if ts.is_first else length + 1
            assert eps[t][b] == length, "episode_step counts the actions of this episode"
            if ts.is_first:
                assert ts.reward == 0 and not ts.is_last
            assert not ts.is_terminal or ts.is_last, "is_terminal implies is_last"
            if cap is not None:
                assert length <= cap
                if length == cap:
                    assert ts.is_last, "an episode ends at the cap"
            if ts.is_last:
                seen_last[b] = True
                assert not ts.legal_actions.any(), "nothing is legal on a last step"
            else:
                assert ts.legal_actions.any(), "a non-last step has a legal action"
            assert 0 <= ts.to_play < spec.num_players
            if spec.num_players == 1:
                assert ts.to_play == 0
            elif t > 0 and not ts.is_first and not ts.is_last:
                assert ts.to_play == 1 - tss[t - 1].to_play[b], "turns alternate"
            if spec.num_players == 2 and ts.is_terminal:
                assert ts.reward in (-1.0, 0.0, 1.0)
    assert seen_last.all(), "every rollout reaches a last step (raise HOST_STEPS or lower the cap)"


@pytest.mark.parametrize("name", ALL_HOST)
def test_host_seeded_reset_reproduces(name):
    """Same seed + same actions -> the same steps, also across auto-resets."""
    tss, acts, eps = host_rollout(name)
    again, _, eps_again = _drive(_fresh(name), lambda t, ts: acts[t], HOST_STEPS, seed=0)
    for a, b in zip(tss, again):
        _assert_ts_equal(a, b)
    np.testing.assert_array_equal(eps, eps_again)


@pytest.mark.parametrize("name", ALL_HOST)
def test_host_step_after_last_ignores_action(name):
    tss, acts, _ = host_rollout(name)
    n = host_pool(name).spec.num_actions
    found = [(t, b) for t in range(HOST_STEPS) for b in range(B) if tss[t].is_last[b]]
    assert found, "the rollout reaches a last step (raise HOST_STEPS or lower the cap)"
    t, b = found[0]
    pool = _fresh(name)
    _drive(pool, lambda k, ts: acts[k], t)
    other = acts[t].copy()
    other[b] = n + 7  # out of range: ignored after a last step
    ts = pool.step(other)
    assert ts.is_first[b] and ts.reward[b] == 0 and not ts.is_last[b]
    _assert_ts_equal(ts, tss[t + 1])


@pytest.mark.parametrize("name", ALL_HOST)
def test_host_bad_actions_raise(name):
    """Out-of-range and illegal actions raise IllegalActionError naming the game and the
    environment, before anything steps; a replay ignores actions (only their shape counts)."""
    tss, acts, _ = host_rollout(name)
    spec = host_pool(name).spec
    n = spec.num_actions
    live = [t for t in range(HOST_STEPS) if not tss[t].is_last.any()]
    t = next((t for t in live if not tss[t].legal_actions[1].all()), live[0])  # one with an illegal action
    pool = _fresh(name)
    _drive(pool, lambda k, ts: acts[k], t)
    with pytest.raises(IllegalActionError, match=r"shape"):
        pool.step(np.zeros(B + 1, np.int32))
    if name == REPLAY:
        _assert_ts_equal(pool.step(np.array([n + 5, -1])), tss[t + 1])
        return
    for bad in (n, -1):
        with pytest.raises(IllegalActionError, match=rf"{re.escape(spec.name)}: environment 1: action {bad} is out of range"):
            pool.step(np.array([acts[t][0], bad]))
    illegal = np.flatnonzero(~tss[t].legal_actions[1])
    if illegal.size:
        with pytest.raises(IllegalActionError,
                           match=rf"{re.escape(spec.name)}: environment 1: action {illegal[0]} is not legal"):
            pool.step(np.array([acts[t][0], illegal[0]]))
    _assert_ts_equal(pool.step(acts[t]), tss[t + 1])  # nothing stepped on the errors


@pytest.mark.parametrize("name", TWO_PLAYER_HOST)
def test_host_two_player_game_ends_with_reward_in_minus1_0_1(name):
    """Random games played to their end (the bridge's default cap): the mover's final reward is -1, 0 or 1."""
    pool = _make_host_pool(name, cap=None)
    assert pool.spec.num_players == 2
    rng = np.random.default_rng(1)
    ts = pool.reset(1)
    ended = np.zeros(B, bool)
    for _ in range(2000):
        ts = pool.step(_random_actions(rng, ts, pool.spec.num_actions))
        for b in np.flatnonzero(ts.is_terminal):
            assert ts.reward[b] in (-1.0, 0.0, 1.0)
            ended[b] = True
        if ended.all():
            break
    assert ended.all(), "every environment finished a game"


def test_host_tic_tac_toe_scripted_outcomes():
    """OpenSpiel tic-tac-toe: X (player 0) moves first; the winner's last move pays +1, a draw 0."""
    name = "openspiel:tic_tac_toe"
    pool = host_pool(name)
    # slot 0: X wins on the top row (0, 1, 2) at ply 5; slot 1: O wins on the middle row (3, 4, 5) at ply 6
    moves = [(0, 0), (3, 3), (1, 1), (4, 4), (2, 8), (0, 5)]
    tss, _, _ = _drive(pool, lambda t, ts: np.array(moves[t]), len(moves))
    end = {0: 5, 1: 6}
    for b in range(B):
        assert tss[0].to_play[b] == 0
        for t in range(1, end[b] + 1):
            mover = tss[t - 1].to_play[b]
            assert mover == (t - 1) % 2, "to_play alternates from player 0"
            if t < end[b]:
                assert not tss[t].is_last[b] and tss[t].reward[b] == 0 and tss[t].to_play[b] == 1 - mover
            else:
                assert tss[t].is_last[b] and tss[t].is_terminal[b] and tss[t].reward[b] == 1.0, "the winner gets +1"
                assert not tss[t].legal_actions[b].any()
    assert tss[6].is_first[0] and tss[6].reward[0] == 0, "slot 0 started a new game and ignored its action"
    # a draw: X 0 2 3 7 8, O 1 4 5 6
    draw = [0, 1, 2, 4, 3, 5, 7, 6, 8]
    tss, _, _ = _drive(pool, lambda t, ts: np.array([draw[t]] * B), len(draw))
    assert not any(ts.is_last.any() for ts in tss[:-1])
    assert tss[-1].is_last.all() and tss[-1].is_terminal.all() and (tss[-1].reward == 0).all()


def test_replay_gives_back_the_recorded_games():
    """The replay case yields exactly the steps of the live games it recorded."""
    trajs, masks = _nim_recordings()
    pool = ReplayEnvPool(Nim().spec, 1, trajs)
    pool.add(trajs[:1], legal_actions=masks[:1])
    ts = pool.reset()
    for k, (tr, m) in enumerate(zip(trajs + trajs[:1], masks + masks[:1])):
        for i in range(int(tr.last) + 1):
            if i or k:
                ts = pool.step(None)
            np.testing.assert_array_equal(ts.observation[0], tr.frames[i])
            assert ts.reward[0] == tr.rewards[i] and ts.to_play[0] == tr.to_play[i]
            assert ts.is_first[0] == (i == 0) and ts.is_last[0] == (i == tr.last)
            assert ts.is_terminal[0] == (i == tr.last and tr.is_terminal)
            if k == len(trajs):  # the one added with its masks
                np.testing.assert_array_equal(ts.legal_actions[0], m[i])
            assert pool.stored_action[0] == (tr.actions[i] - 1 if i < tr.last else -1)
    pool.step(None)
    assert pool.exhausted
