"""The MinAtar, Gymnasium and Atari host bridges (``minatar:``, ``gym:``, ``ale:``).

The conformance suite (tests/test_env_conformance.py) checks the step contract
for ``minatar:breakout``, ``gym:CartPole-v1`` and ``ale:Pong``; these tests pin
down what is particular to each bridge: shapes and scaling, seeds (sticky
actions included), bridge parameters, truncation versus termination, clear
errors, and worker processes giving the same steps as in-process pools.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys

import numpy as np
import pytest

from moozi.config import ConfigError
from moozi.envs import make_env
from moozi.envs.contract import TimeStep, UnknownEnvError
from moozi.envs.pool import EnvFactory, HostPool, make_pool


def _needs(module, extra):
    missing = importlib.util.find_spec(module) is None
    return pytest.mark.skipif(missing, reason=f"needs {module}: pip install 'moozi[{extra}]'")


needs_minatar = _needs("minatar", "minatar")
needs_gym = _needs("gymnasium", "gym")
needs_ale = pytest.mark.skipif(
    importlib.util.find_spec("ale_py") is None or importlib.util.find_spec("gymnasium") is None,
    reason="needs ale-py and gymnasium: pip install 'moozi[atari]'",
)

FIELDS = [f.name for f in dataclasses.fields(TimeStep)]


def assert_ts_equal(a, b):
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)


def drive(pool, actions, seed):
    """``pool.reset(seed)`` then one step per row of ``actions [T, B]``; the time steps."""
    out = [pool.reset(seed)]
    for a in actions:
        out.append(pool.step(a))
    return out


def random_actions(n, steps, num_envs, seed=0):
    return np.random.default_rng(seed).integers(0, n, size=(steps, num_envs))


def test_import_is_light_and_names_are_listed():
    code = (
        "import sys, moozi.envs as e; names = e.list_envs(path='host'); "
        "heavy = [m for m in ('minatar', 'gymnasium', 'ale_py') if m in sys.modules]; "
        "assert not heavy, heavy; "
        "assert {'minatar:breakout', 'minatar:space_invaders', 'gym:CartPole-v1', 'ale:Pong'} <= set(names), names"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    "module, name, extra",
    [("minatar", "minatar:breakout", "minatar"), ("gymnasium", "gym:CartPole-v1", "gym"),
     ("gymnasium", "ale:Pong", "atari"), ("ale_py", "ale:Pong", "atari")],
)
def test_missing_package_names_the_extra(monkeypatch, module, name, extra):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if it were not installed
    with pytest.raises(ImportError, match=rf"pip install 'moozi\[{extra}\]'"):
        make_env(name)


# ============================================================================= MinAtar


@needs_minatar
def test_minatar_shapes_and_dtypes():
    with make_pool("minatar:breakout", 3, seed=0) as pool:
        spec = pool.spec
        assert spec.name == "minatar:breakout" and spec.path == "host"
        assert spec.observation_shape == (10, 10, 4) and spec.num_actions == 6 and spec.max_episode_steps is None
        ts = pool.reset()
        assert ts.observation.shape == (3, 10, 10, 4) and ts.observation.dtype == np.float32
        assert set(np.unique(ts.observation)) <= {0.0, 1.0}
        assert ts.legal_actions.all() and (ts.to_play == 0).all()
        assert pool.call("render")[0].shape == (10, 10, 3)
    for game, c in [("asterix", 4), ("freeway", 7), ("seaquest", 10), ("space_invaders", 6)]:
        assert make_env(f"minatar:{game}").spec.observation_shape == (10, 10, c)


@needs_minatar
@pytest.mark.parametrize("sticky", [0.0, 0.1, 0.5])
def test_minatar_seeded_episodes_reproduce(sticky):
    """Same seed and actions -> the same steps (sticky actions included, across auto-resets)."""
    kw = dict(sticky_action_prob=sticky, max_episode_steps=15)
    acts = random_actions(6, 60, 4)
    with make_pool("minatar:breakout", 4, seed=0, **kw) as a, make_pool("minatar:breakout", 4, seed=0, **kw) as b:
        first = drive(a, acts, seed=5)
        assert any(ts.is_last.any() for ts in first)
        for x, y in zip(first, drive(b, acts, seed=5)):
            assert_ts_equal(x, y)
        for x, y in zip(first, drive(a, acts, seed=5)):  # the same pool, reset again
            assert_ts_equal(x, y)
        other = drive(a, acts, seed=6)
        assert any(not np.array_equal(x.observation, y.observation) for x, y in zip(first, other))


def _paddle(obs):
    """Breakout paddle column per environment (channel 0, bottom row)."""
    return np.argmax(obs[:, 9, :, 0], axis=-1)


@needs_minatar
def test_minatar_sticky_action_prob_is_applied():
    """Breakout: 'left' (action 1) moves the paddle every step without stickiness; with
    probability 1 the previous action (no-op at the start of an episode) is always replayed."""
    left = np.ones((4, 2), int)
    assert make_env("minatar:breakout").env.sticky_action_prob == 0.1  # the MinAtar paper's default
    with make_pool("minatar:breakout", 2, sticky_action_prob=0.0) as pool:
        steps = drive(pool, left, seed=0)
        assert [list(_paddle(ts.observation)) for ts in steps] == [[4, 4], [3, 3], [2, 2], [1, 1], [0, 0]]
    with make_pool("minatar:breakout", 2, sticky_action_prob=1.0) as pool:
        assert all((_paddle(ts.observation) == 4).all() for ts in drive(pool, left, seed=0))


@needs_minatar
def test_minatar_minimal_action_set():
    env = make_env("minatar:breakout", minimal_action_set=True, sticky_action_prob=0.0)
    assert env.spec.num_actions == 3 and env.action_set == (0, 1, 3)  # no-op, left, right
    env.reset(0)
    assert _paddle(env.step(2).observation[None])[0] == 5  # index 2 is 'right'
    sizes = {g: make_env(f"minatar:{g}", minimal_action_set=True).spec.num_actions
             for g in ("asterix", "freeway", "seaquest", "space_invaders")}
    assert sizes == {"asterix": 5, "freeway": 3, "seaquest": 6, "space_invaders": 4}


@needs_minatar
def test_minatar_terminates():
    """Breakout with a paddle that never moves: the ball is missed, the episode terminates."""
    with make_pool("minatar:breakout", 2, sticky_action_prob=0.0) as pool:
        ts, n = pool.reset(0), 0
        while not ts.is_last.all() and n < 200:
            ts, n = pool.step(np.zeros(2, int)), n + 1
        assert ts.is_last.all() and ts.is_terminal.all() and not ts.legal_actions.any()


@needs_minatar
def test_minatar_errors():
    with pytest.raises(UnknownEnvError, match=r"unknown MinAtar game 'pong'.*minatar:breakout.*minatar:space_invaders"):
        make_env("minatar:pong")
    with pytest.raises(UnknownEnvError, match=r"did you mean minatar:space_invaders"):
        make_env("minatar:SpaceInvaders")
    with pytest.raises(ConfigError, match=r"minatar:breakout: sticky_action_prob = 1.5 is invalid: .* \[0, 1\]"):
        make_env("minatar:breakout", sticky_action_prob=1.5)
    with pytest.raises(ConfigError, match=r"minimal_action_set = 'yes' is invalid: allowed True or False"):
        make_env("minatar:breakout", minimal_action_set="yes")
    with pytest.raises(ConfigError, match=r"max_episode_steps = 0 is invalid"):
        make_env("minatar:breakout", max_episode_steps=0)
    with pytest.raises(ConfigError, match=r"unknown parameter 'sticky'; allowed: sticky_action_prob, minimal_action"):
        make_env("minatar:breakout", sticky=0.1)


# ============================================================================= Gymnasium


@needs_gym
def test_gym_cartpole_shapes_and_default_cap():
    with make_pool("gym:CartPole-v1", 2, seed=0) as pool:
        assert pool.spec.observation_shape == (1, 1, 4) and pool.spec.num_actions == 2
        assert pool.spec.max_episode_steps == 500  # Gymnasium's TimeLimit
        ts = pool.reset()
        assert ts.observation.shape == (2, 1, 1, 4) and ts.observation.dtype == np.float32
        assert not np.array_equal(ts.observation[0], ts.observation[1])  # different episode seeds
    assert make_env("gym:CartPole-v1", max_episode_steps=None).spec.max_episode_steps is None


@needs_gym
def test_gym_seeded_reset_reproduces():
    acts = random_actions(2, 40, 3)
    with make_pool("gym:CartPole-v1", 3, seed=1) as a, make_pool("gym:CartPole-v1", 3, seed=1) as b:
        for x, y in zip(drive(a, acts, 9), drive(b, acts, 9)):
            assert_ts_equal(x, y)


def _balance(observation):
    """A CartPole controller that keeps the pole up for well over 30 steps: ``[B, 1, 1, 4]`` -> ``[B]``."""
    obs = observation.reshape(-1, 4)
    return (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(int)


@needs_gym
def test_gym_cartpole_truncation_versus_termination():
    env = make_env("gym:CartPole-v1", max_episode_steps=30)
    assert env.spec.max_episode_steps == 30
    # a balanced pole reaches the TimeLimit: truncated (is_last, not is_terminal), bridge and pool agree
    g = env.reset(0)
    for n in range(1, 31):
        g = env.step(int(_balance(g.observation)[0]))
        assert g.truncated == (n == 30) and not g.terminated
    with make_pool("gym:CartPole-v1", 2, seed=0, max_episode_steps=30) as pool:
        ts, n = pool.reset(), 0
        while not ts.is_last.any():
            ts, n = pool.step(_balance(ts.observation)), n + 1
        assert n == 30 and ts.is_last.all() and not ts.is_terminal.any() and (ts.reward == 1).all()
        ts = pool.step(np.zeros(2, int))
        assert ts.is_first.all()
        # always pushing left drops the pole long before the cap: terminated
        n = 0
        while not ts.is_last.all():
            ts, n = pool.step(np.zeros(2, int)), n + 1
        assert n < 30 and ts.is_terminal.all()


@needs_gym
def test_gym_discrete_observations_and_action_masks():
    env = make_env("gym:FrozenLake-v1", params={"is_slippery": False})
    assert env.spec.observation_shape == (1, 1, 16) and env.spec.num_actions == 4
    g = env.reset(0)
    assert g.observation.sum() == 1 and g.observation[0, 0, 0] == 1  # one-hot, start square
    g = env.step(2)  # right
    assert g.observation[0, 0, 1] == 1
    import gymnasium

    taxi = make_env("gym:" + next(i for i in ("Taxi-v4", "Taxi-v3") if i in gymnasium.registry))
    g = taxi.reset(3)
    _, info = taxi.env.reset(seed=3)
    np.testing.assert_array_equal(g.legal_actions, info["action_mask"].astype(bool))
    assert not g.legal_actions.all()  # Taxi reports illegal moves


@needs_gym
def test_gym_errors():
    with pytest.raises(ConfigError, match=r"gym:Pendulum-v1: action space Box.* is not Discrete"):
        make_env("gym:Pendulum-v1")
    with pytest.raises(UnknownEnvError, match=r"unknown Gymnasium environment 'CartPol-v1'.*CartPole"):
        make_env("gym:CartPol-v1")
    with pytest.raises(UnknownEnvError, match=r"gym:no_such_module:Foo-v0: cannot import 'no_such_module'"):
        make_env("gym:no_such_module:Foo-v0")
    assert make_env("gym:gymnasium.envs.classic_control:CartPole-v1").spec.num_actions == 2  # "module:Id"
    with pytest.raises(ConfigError, match=r"gym:CartPole-v1: gymnasium.make rejected params .*bogus"):
        make_env("gym:CartPole-v1", params={"bogus": 1})
    with pytest.raises(ConfigError, match=r"params.max_episode_steps: give max_episode_steps as a bridge parameter"):
        make_env("gym:CartPole-v1", params={"max_episode_steps": 3})
    with pytest.raises(ConfigError, match=r"max_episode_steps = -1 is invalid"):
        make_env("gym:CartPole-v1", max_episode_steps=-1)
    with pytest.raises(ConfigError, match=r"unknown parameter 'env_kwargs'; allowed: params"):
        make_env("gym:CartPole-v1", env_kwargs={})


# ============================================================================= Atari


@pytest.fixture(scope="module")
def pong():
    pool = make_pool("ale:Pong", 2, seed=0, max_episode_steps=6)
    yield pool
    pool.close()


@needs_ale
def test_ale_shapes_scaling_and_truncation(pong):
    spec = pong.spec
    assert spec.name == "ale:Pong" and spec.observation_shape == (84, 84, 1) and spec.num_actions == 6
    assert spec.max_episode_steps == 6
    steps = drive(pong, random_actions(6, 6, 2), seed=0)
    for ts in steps:
        assert ts.observation.shape == (2, 84, 84, 1) and ts.observation.dtype == np.float32
        assert 0.0 <= ts.observation.min() and ts.observation.max() <= 1.0 and ts.observation.max() > 0.3
    assert [bool(ts.is_last.all()) for ts in steps] == [False] * 6 + [True]
    assert not steps[6].is_terminal.any()  # Pong is not over after 6 steps: truncated by the cap
    assert pong.call("render")[0].shape == (210, 160, 3)


@needs_ale
def test_ale_defaults_and_parameters():
    env = make_env("ale:Pong")
    ale = env.env.unwrapped.ale
    assert env.spec.max_episode_steps == 27000 and env.frame_skip == 4 and env.noop_max == 30
    assert ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
    env.close()
    env = make_env("ale:Pong", sticky_action_prob=0.0, full_action_space=True, grayscale=False, screen_size=64,
                   max_episode_steps=None)
    assert env.env.unwrapped.ale.getFloat("repeat_action_probability") == 0.0
    assert env.spec.num_actions == 18 and env.spec.observation_shape == (64, 64, 3)
    assert env.spec.max_episode_steps is None
    assert env.reset(0).observation.shape == (64, 64, 3)
    env.close()


@needs_ale
def test_ale_seeded_reset_reproduces(pong):
    acts = random_actions(6, 8, 2, seed=3)
    first = drive(pong, acts, seed=4)
    for x, y in zip(first, drive(pong, acts, seed=4)):
        assert_ts_equal(x, y)


@needs_ale
def test_ale_errors():
    with pytest.raises(UnknownEnvError, match=r"unknown Atari game 'Pongg'.*did you mean ale:Pong"):
        make_env("ale:Pongg")
    with pytest.raises(ConfigError, match=r"ale:Pong: screen_size = 0 is invalid: allowed an integer in \[1, 160\]"):
        make_env("ale:Pong", screen_size=0)
    with pytest.raises(ConfigError, match=r"ale:Pong: frame_skip = 0 is invalid"):
        make_env("ale:Pong", frame_skip=0)
    with pytest.raises(ConfigError, match=r"ale:Pong: sticky_action_prob = -0.1 is invalid"):
        make_env("ale:Pong", sticky_action_prob=-0.1)
    with pytest.raises(ConfigError, match=r"unknown parameter 'repeat_action_probability'; allowed: sticky_action"):
        make_env("ale:Pong", repeat_action_probability=0.0)


@needs_ale
@pytest.mark.parametrize("game, grayscale, size", [("Pong", True, 84), ("Breakout", False, 64)])
def test_ale_matches_gymnasium_atari_preprocessing(game, grayscale, size):
    """The bridge's preprocessing equals gymnasium.wrappers.AtariPreprocessing (which needs OpenCV)."""
    pytest.importorskip("cv2")
    import ale_py
    import gymnasium

    gymnasium.register_envs(ale_py)
    ref = gymnasium.wrappers.AtariPreprocessing(
        gymnasium.make(f"ALE/{game}-v5", frameskip=1, max_num_frames_per_episode=0), noop_max=30, frame_skip=4,
        screen_size=size, grayscale_obs=grayscale, grayscale_newaxis=True, scale_obs=True)
    env = make_env(f"ale:{game}", grayscale=grayscale, screen_size=size)
    obs, _ = ref.reset(seed=5)
    np.testing.assert_array_equal(env.reset(5).observation, obs)
    for a in random_actions(env.spec.num_actions, 100, 1)[:, 0]:
        obs, reward, terminated, truncated, _ = ref.step(int(a))
        g = env.step(int(a))
        np.testing.assert_array_equal(g.observation, obs)
        assert (g.reward, g.terminated, g.truncated) == (reward, terminated, truncated)
    ref.close()
    env.close()


def test_area_resize():
    from moozi.envs.gym_bridge import area_resize, area_weights

    img = np.arange(12 * 8, dtype=np.uint8).reshape(12, 8) * 2 + 1
    out = area_resize(img, area_weights(12, 6), area_weights(8, 4))  # integer factor 2: block means
    expected = img.reshape(6, 2, 4, 2).astype(float).mean(axis=(1, 3))
    assert out.shape == (6, 4, 1) and np.abs(out[..., 0] - expected).max() <= 0.5
    rgb = np.random.default_rng(0).integers(0, 256, (210, 160, 3), dtype=np.uint8)
    rows, cols = area_weights(210, 84), area_weights(160, 84)
    dense = lambda n_in, iw: np.array([np.bincount(i, w, n_in) for i, w in zip(*iw)])  # noqa: E731
    np.testing.assert_allclose(dense(210, rows).sum(1), 1, rtol=1e-6)  # every output cell averages
    expected = np.einsum("ih,hwc,jw->ijc", dense(210, rows), rgb.astype(float), dense(160, cols))
    assert np.abs(area_resize(rgb, rows, cols).astype(float) - expected).max() <= 0.5 + 1e-3


# ============================================================================= worker processes


@pytest.mark.parametrize(
    "name, kwargs, steps",
    [
        pytest.param("minatar:breakout", {"max_episode_steps": 8}, 20, marks=needs_minatar),
        pytest.param("ale:Pong", {"max_episode_steps": 8}, 20, marks=needs_ale),
    ],
)
def test_multiprocess_pool_matches_in_process(name, kwargs, steps):
    local = make_pool(name, 3, seed=2, **kwargs)
    remote = HostPool(EnvFactory(name, kwargs), 3, seed=2, num_workers=2)
    try:
        assert remote.spec == local.spec and remote.num_workers == 2
        acts = random_actions(local.spec.num_actions, steps, 3, seed=1)
        a, b = drive(local, acts, seed=2), drive(remote, acts, seed=2)
        assert any(ts.is_last.any() for ts in a)
        for x, y in zip(a, b):
            assert_ts_equal(x, y)
    finally:
        local.close()
        remote.close()
