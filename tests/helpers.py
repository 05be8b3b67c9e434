"""Helpers several test modules share (a test module never imports another: DESIGN.md, issue 90)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from moozi.config import TargetConfig
from moozi.envs.contract import EnvSpec
from moozi.types import Trajectory

# Tiny settings for any preset: a run of a few updates, compiled in seconds.
TINY = [
    "env.num_envs=4",
    "env.kwargs.max_episode_steps=12",  # every game finishes episodes quickly
    "acting.steps_per_epoch=4",
    "schedule.batch_size=8",
    "schedule.samples_per_env_step=2",  # several updates even for presets with a low ratio
    "schedule.min_replay_steps=1",
    "testing.every=2",
    "testing.episodes=2",
    "testing.envs=2",
    "testing.steps_per_segment=13",
    "schedule.max_env_steps=64",
    "planner.num_simulations=2",
    "test_planner.num_simulations=2",
    "model.channels=4",
    "model.repr_blocks=1",
    "model.dyn_blocks=1",
    "model.head_hidden=8",
    "model.mlp_hidden=[8]",
    "model.mlp_embedding=8",
    "replay.capacity=2000",
]


# The learner tests' game: 2x2 one-channel frames, two moves; episodes of random data.
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


def _bench(name: str):
    """A script of benchmarks/ imported as a module (its functions tested with hand-computed answers; research/'s
    scripts are tested in research/tests)."""
    spec = importlib.util.spec_from_file_location(f"moozi_bench_{name}",
                                                  Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def leaves(tree) -> list:
    """A tree's leaves as numpy arrays (PRNG keys as their key data), for exact comparisons."""
    import jax
    import numpy as np

    def data(x):
        if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return np.asarray(jax.random.key_data(x))
        return np.asarray(x)

    return [data(x) for x in jax.tree_util.tree_leaves(tree)]


def coin_game():
    """A hand-made search model with chance (augmented actions: dummy + 2 moves): move 1 flips a fair coin that
    pays +1 or -1 (Q = 0), move 2 pays 0.4 for sure (one outcome); values after are 0, move 2's afterstate 0.4."""
    import jax.numpy as jnp

    from moozi.planner import ChanceSteps, StepEval

    def afterstate(params, embedding, action):
        probs = jnp.where((action == 1)[:, None], jnp.asarray([0.5, 0.5]), jnp.asarray([1.0, 0.0]))
        return action.astype(jnp.float32), jnp.where(action == 1, 0.0, 0.4), jnp.log(jnp.maximum(probs, 1e-9))

    def chance(params, after, outcome):
        reward = jnp.where(after == 1, jnp.where(outcome == 0, 1.0, -1.0), 0.4)
        b = outcome.shape[0]
        return StepEval(jnp.zeros(b), reward, jnp.zeros(b), jnp.zeros((b, 3)))

    return ChanceSteps(afterstate, chance)
