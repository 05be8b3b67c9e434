"""Device acting: rollouts, trajectory assembly across segments, exploration switch, matches."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi import acting
from moozi.config import ModelConfig, PlannerConfig
from moozi.envs import make_env
from moozi.model.history import stacked_channels
from moozi.model.networks import build_model

pytest.importorskip("pgx")

B, T, L = 4, 7, 2


@pytest.fixture(scope="module")
def setup():
    env = make_env("pgx:tic_tac_toe")
    a = env.spec.num_actions + 1
    h, w, c = env.spec.observation_shape
    model = build_model(ModelConfig(kind="mlp", mlp_hidden=(16,), mlp_embedding=8, head_hidden=8, support_size=2),
                        (h, w, stacked_channels(c, a, L)), a)
    params = model.init(jax.random.key(0))
    planner = PlannerConfig(kind="puct", num_simulations=4)
    rollout = acting.make_rollout(env, model, planner, 1.0, T)
    return env, model, params, planner, rollout


def test_segments_assemble_into_whole_episodes(setup):
    env, model, params, planner, rollout = setup
    carry = acting.init_actor(env, B, L, jax.random.key(1))
    assembler = acting.TrajectoryAssembler(B)
    episodes = []
    all_samples = []
    for _ in range(4):  # 28 steps per env: several tic-tac-toe games, some spanning segments
        carry, samples = rollout(params, carry, jnp.float32(1.0))
        all_samples.append(jax.tree_util.tree_map(np.asarray, samples))
        episodes += assembler.add(samples)
    assert len(episodes) >= B * 2
    for traj in episodes:
        n = int(traj.last) + 1
        assert traj.frames.shape[0] == n and 6 <= n <= 10  # 5..9 moves + the last step
        assert traj.actions[-1] == 0 and np.all(traj.actions[:-1] >= 1)  # dummy only at the end
        assert traj.rewards[0] == 0 and bool(traj.is_terminal)
        assert np.all(np.abs(traj.rewards[1:-1]) == 0)  # tic-tac-toe pays only at the end
        np.testing.assert_array_equal(traj.to_play[1:], 1 - traj.to_play[:-1])  # turns alternate
        np.testing.assert_allclose(traj.root_policies[:-1].sum(-1), 1.0, atol=1e-5)
    # Every acted step of every env is in exactly one episode or still pending.
    total = sum(int(t.last) + 1 for t in episodes) + assembler.pending_steps()
    assert total == 4 * T * B


def test_assembler_state_round_trips_and_loads_states_without_random_flags(setup):
    env, model, params, planner, rollout = setup
    carry = acting.init_actor(env, B, L, jax.random.key(1))
    asm = acting.TrajectoryAssembler(B)
    asm.add(rollout(params, carry, jnp.float32(1.0))[1])
    assert asm.pending_steps() > 0
    state = asm.state_dict()
    old = [{k: v for k, v in piece.items() if k != "random_action"} for piece in state]
    for saved, flags in ((state, None), (old, False)):
        again = acting.TrajectoryAssembler(B)
        again.load_state_dict(saved)
        assert again.pending_steps() == asm.pending_steps()
        for mine, theirs in zip(asm._pending, again._pending):
            if mine:
                expected = mine[0].random_action if flags is None else np.zeros_like(mine[0].random_action)
                np.testing.assert_array_equal(np.concatenate([p.random_action for p in theirs]), expected)


def test_no_exploration_after_explore_moves_is_greedy(setup):
    env, model, params, planner, _ = setup
    greedy = acting.make_rollout(env, model, planner, 1.0, T)
    switched = acting.make_rollout(env, model, planner, 1.0, T, explore_moves=0)
    carry = acting.init_actor(env, B, L, jax.random.key(2))
    _, a = greedy(params, carry, jnp.float32(0.0))
    _, b = switched(params, carry, jnp.float32(1.0))
    np.testing.assert_array_equal(a.action, b.action)


def test_match_seats_are_balanced_by_move_order(setup):
    env, model, params, planner, _ = setup
    rollout = acting.make_match_rollout(env, model, PlannerConfig(kind="gumbel", num_simulations=4), 1.0, 10)
    carry = acting.init_match(env, 8, L, jax.random.key(3))
    _, results = acting.play_matches(rollout, params, carry, 16)
    seats = [s for _, _, s in results]
    assert len(results) == 16 and seats.count(0) == 8
    assert all(r in (-1.0, 0.0, 1.0) for r, _, _ in results)
