"""Stochastic MuZero (model.chance_outcomes): its targets, code, loss terms and search, with hand-computed numbers."""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.config import ConfigError, LearnerConfig, ModelConfig, PlannerConfig, TargetConfig, config_from_dict
from moozi.losses import loss_fn
from moozi.model.networks import build_model
from moozi.model.stochastic import AfterstateOutput, StochasticModel, straight_through
from moozi.model.transform import scalar_to_target
from moozi.planner import RootEval, stochastic_search
from moozi.targets import make_targets
from moozi.types import Batch, ModelOutput, Trajectory
from tests.helpers import coin_game

A = 3  # augmented: dummy + 2 moves


def _episode(last=4, size=8):
    """Frames whose one value is 10 * step, so a stacked history names the steps it holds."""
    frames = (10.0 * np.arange(size, dtype=np.float32) + 10.0).reshape(size, 1, 1, 1)
    return Trajectory(
        frames=jnp.asarray(frames), actions=jnp.asarray([1, 2, 1, 2, 0, 0, 0, 0][:size], jnp.int32),
        rewards=jnp.asarray([0, 1, 0, 2, 0, 0, 0, 0][:size], jnp.float32), root_values=jnp.zeros(size),
        root_policies=jnp.full((size, A), 1.0 / A), to_play=jnp.zeros(size, jnp.int32),
        first=jnp.asarray(0, jnp.int32), last=jnp.asarray(last, jnp.int32), is_terminal=jnp.asarray(True))


def test_targets_hold_the_observations_on_both_sides_of_each_transition():
    """t = 2, K = 3, T = 4, L = 1: the encoder reads the histories at min(t + k, T) = steps 2, 3, 4, 4 (frames 30,
    40, 50, 50 and the plane of the move that led there: a_1 = 2, a_2 = 1, a_3 = 2, a_3 = 2), and the
    transitions 2->3 and 3->4 are real, 4->5 is past the end (mask 1, 1, 0)."""
    cfg = TargetConfig(history_length=1, unroll_steps=3, td_steps=2, discount=1.0)
    out = make_targets(_episode(), 2, cfg, A, chance=True)
    obs = np.asarray(out.unroll_observations)
    assert obs.shape == (4, 1, 1, 1 + A)
    np.testing.assert_array_equal(obs[:, 0, 0, 0], [30, 40, 50, 50])
    np.testing.assert_allclose(obs[:, 0, 0, 1:], np.eye(A)[[2, 1, 2, 2]] / A)  # action planes are one-hot / A
    np.testing.assert_array_equal(out.transition_mask, [1, 1, 0])
    np.testing.assert_array_equal(obs[0], out.observation)  # k = 0 is the position itself
    np.testing.assert_array_equal(obs[1], out.next_observation)
    plain = make_targets(_episode(), 2, cfg, A)
    assert plain.unroll_observations is None and plain.transition_mask is None


def test_straight_through_code_is_one_hot_forward_and_softmax_backward():
    logits = jnp.log(jnp.asarray([[0.5, 0.3, 0.2]]))
    code, onehot, probs = straight_through(logits)
    np.testing.assert_allclose(code, [[1, 0, 0]], atol=1e-7)
    np.testing.assert_array_equal(onehot, [[1, 0, 0]])
    np.testing.assert_allclose(probs, [[0.5, 0.3, 0.2]], rtol=1e-6)
    # d/dlogit_j of sum_i w_i code_i = sum_i w_i p_i (delta_ij - p_j): w = (1, 0, 0) gives p_0 (delta_0j - p_j)
    grad = jax.grad(lambda x: straight_through(x)[0][0, 0])(logits)
    np.testing.assert_allclose(grad, [[0.5 * 0.5, -0.5 * 0.3, -0.5 * 0.2]], rtol=1e-6)


@dataclass(frozen=True)
class _FixedModel:
    """A stand-in with fixed outputs (no parameters matter), so the loss's new terms can be computed by hand:
    sigma = (0.5, 0.25, 0.25) everywhere, the encoder's softmax (0.2, 0.6, 0.2) (code 1), Q's logits uniform."""

    config: ModelConfig
    num_actions: int = A

    def check_observation(self, observation):
        pass

    def _out(self, batch):
        n = self.config.num_bins
        zeros = jnp.zeros((batch, n))
        return ModelOutput(hidden=jnp.zeros((batch, 2)), value_logits=zeros, reward_logits=zeros,
                           policy_logits=jnp.zeros((batch, A)), value=jnp.zeros(batch), reward=jnp.zeros(batch))

    def initial_inference(self, params, observation):
        return self._out(observation.shape[0])

    def afterstate_inference(self, params, hidden, action):
        b = hidden.shape[0]
        sigma = jnp.log(jnp.asarray([0.5, 0.25, 0.25]))
        return AfterstateOutput(hidden * params, jnp.zeros((b, self.config.num_bins)), jnp.zeros(b),
                                jnp.broadcast_to(sigma, (b, 3)))

    def encode(self, params, before, after):
        return jnp.broadcast_to(jnp.log(jnp.asarray([0.2, 0.6, 0.2])), (before.shape[0], 3))

    def chance_inference(self, params, afterstate, code):
        return self._out(afterstate.shape[0])


def test_stochastic_loss_terms_by_hand():
    """One sample, K = 2, both transitions real: Q's CE against a two-hot target is log N for uniform logits
    (N = 3 bins, support 1, identity), the chance prior's CE is -log sigma(code 1) = log 4 per step, the
    commitment ||(0, 1, 0) - (0.2, 0.6, 0.2)||^2 = 0.24 per step, the diversity log 3 - H(u) + mean H(p) = log 3."""
    cfg = ModelConfig(kind="mlp", support_size=1, value_transform="identity", chance_outcomes=3)
    model = _FixedModel(cfg)
    k = 2
    targets = make_targets(_episode(last=6), 1, TargetConfig(history_length=1, unroll_steps=k, td_steps=1), A,
                           chance=True)
    batch = Batch(jax.tree.map(lambda x: x[None], targets), jnp.ones(1))
    learner = LearnerConfig(value_coef=0.5, chance_coef=1.5, commitment_coef=0.25, consistency_coef=0.0,
                            l2_coef=0.0, chance_diversity_coef=2.0)
    from moozi.losses import stochastic_unroll

    t = batch.targets
    value_probs = scalar_to_target(t.value, cfg.support_size, cfg.value_transform)
    _, _, extra, metrics = stochastic_unroll(jnp.ones(()), model, t, value_probs, learner)
    q = 0.5 * (math.log(3) + math.log(3)) / k  # value_coef * mean over k of log 3
    chance = 1.5 * 2 * math.log(4)
    commitment = 0.25 * 2 * 0.24
    np.testing.assert_allclose(metrics["loss/afterstate_value"], [q], rtol=1e-5)
    np.testing.assert_allclose(metrics["loss/chance"], [chance], rtol=1e-5)
    np.testing.assert_allclose(metrics["loss/commitment"], [commitment], rtol=1e-5)
    # diversity: every transition's softmax is (0.2, 0.6, 0.2), so is the batch's mean u: no information
    # about the transition in its code, 2 (log 3 - H(u) + H(p)) = 2 log 3
    diversity = 2.0 * math.log(3)
    np.testing.assert_allclose(metrics["loss/chance_diversity"], [diversity], rtol=1e-5)
    np.testing.assert_allclose(extra, [q + chance + commitment + diversity], rtol=1e-5)
    np.testing.assert_allclose(metrics["chance/codes_used"], 1.0, rtol=1e-6)  # one code only


@pytest.fixture(scope="module")
def tiny():
    cfg = ModelConfig(kind="mlp", mlp_hidden=(16,), mlp_embedding=8, head_hidden=16, support_size=3,
                      chance_outcomes=4)
    model = build_model(cfg, (1, 1, 5), A)
    return model, model.init(jax.random.key(0))


def test_model_kind_parts_and_most_likely_outcome(tiny):
    model, params = tiny
    assert isinstance(model, StochasticModel) and model.chance_outcomes == 4
    model.check_params(params)
    assert {"after_net", "after_chance_head", "chance_net", "encoder_net"} <= set(params["params"])
    obs = jax.random.normal(jax.random.key(1), (3, 1, 1, 5))
    action = jnp.asarray([1, 2, 1])

    @jax.jit  # one program, not op by op (each eager op compiles one: this test took 58 s so)
    def parts(params, obs, action):
        hidden = model.initial_inference(params, obs).hidden
        after = model.afterstate_inference(params, hidden, action)
        best = jax.nn.one_hot(jnp.argmax(after.chance_logits, -1), 4)
        return (hidden, after.chance_logits, after.afterstate, model.chance_inference(params, after.afterstate, best)
                .hidden, model.recurrent_inference(params, hidden, action).hidden, model.encode(params, obs, obs))

    hidden, chance_logits, afterstate, expect, got, code = parts(params, obs, action)
    assert chance_logits.shape == (3, 4) and afterstate.shape == hidden.shape
    np.testing.assert_allclose(got, expect, rtol=1e-6)
    assert code.shape == (3, 4)
    # the loss trains every part: the encoder through the straight-through code
    traj = _episode(last=6)
    traj = traj.replace(frames=jnp.broadcast_to(traj.frames, (8, 1, 1, 2)))

    @jax.jit
    def grads_of(params, traj):
        targets = make_targets(traj, 1, TargetConfig(history_length=1, unroll_steps=2, td_steps=2), A, chance=True)
        batch = Batch(jax.tree.map(lambda x: jnp.stack([x, x]), targets), jnp.ones(2))
        return jax.grad(lambda p: loss_fn(p, model, batch, LearnerConfig())[0])(params)

    grads = grads_of(params, traj)
    for part in ("encoder_net", "after_chance_head", "chance_net", "after_value_head"):
        assert sum(float(jnp.sum(jnp.abs(g))) for g in jax.tree_util.tree_leaves(grads["params"][part])) > 0, part


@pytest.mark.parametrize("two_player", [False, True])
def test_stochastic_search_weighs_outcomes_by_their_chance(two_player):
    """The sure 0.4 beats the fair coin's expected 0, from the mover's point of view in both kinds of game (one
    move deep: ``max_depth`` counts moves, each a move and its chance outcome)."""
    root = RootEval(jnp.zeros(2), jnp.zeros(2), jnp.zeros((2, A)))
    out = stochastic_search(None, jax.random.key(0), root, coin_game(), jnp.ones((2, A - 1), bool),
                            PlannerConfig(num_simulations=64, dirichlet_fraction=0.0, max_depth=1), discount=1.0,
                            two_player=two_player, temperature=0.0)
    np.testing.assert_array_equal(out.action, [2, 2])
    assert (out.root_policy[:, 2] > 0.7).all() and (out.root_policy[:, 0] == 0).all()
    assert (out.root_value > 0.2).all() and (out.root_value < 0.41).all()
    assert (out.max_depth == 1).all()


def test_config_refuses_what_stochastic_muzero_cannot_do():
    with pytest.raises(ConfigError, match=r"model.chance_outcomes = 1 is invalid: allowed 0 .* or an integer >= 2"):
        ModelConfig(chance_outcomes=1)
    with pytest.raises(ConfigError, match=r"model.chance_outcomes .*model.dynamics = simulator"):
        ModelConfig(chance_outcomes=4, dynamics="simulator")
    with pytest.raises(ConfigError, match=r"planner.kind = 'gumbel' with model.chance_outcomes = 8.*allowed: puct"):
        config_from_dict({"model": {"chance_outcomes": 8}, "planner": {"kind": "gumbel"}})
    with pytest.raises(ConfigError, match=r"test_planner.kind = 'gumbel'"):
        config_from_dict({"model": {"chance_outcomes": 8}, "test_planner": {"kind": "gumbel"}})


def test_the_code_diversity_gap_is_log_m_less_the_codes_information_by_hand():
    """Two transitions, M = 2: named apart with certainty, 0; both named alike (the collapse), log 2; both with
    flat softmaxes, log 2 too (log M - H(u) alone would call that 0); a padded transition does not count."""
    from moozi.losses import code_diversity_gap

    both = jnp.ones((1, 2))
    apart = jnp.array([[[1.0, 0.0], [0.0, 1.0]]])
    alike = jnp.array([[[1.0, 0.0], [1.0, 0.0]]])
    flat = jnp.full((1, 2, 2), 0.5)
    assert float(code_diversity_gap(apart, both)) == pytest.approx(0.0, abs=1e-6)
    assert float(code_diversity_gap(alike, both)) == pytest.approx(math.log(2), rel=1e-6)
    assert float(code_diversity_gap(flat, both)) == pytest.approx(math.log(2), rel=1e-6)
    # (0.9, 0.1) and a padded (0, 1): only the first counts, u = p, the gap log 2
    assert float(code_diversity_gap(jnp.array([[[0.9, 0.1], [0.0, 1.0]]]), jnp.array([[1.0, 0.0]]))) == \
        pytest.approx(math.log(2), rel=1e-6)


def test_targets_carry_the_games_own_code_for_each_real_transition():
    """A toy code function ``(next frame / 10 + env action) mod 3``; t = 2, K = 3, T = 4: transition 2->3 reads
    frame 40 and a_2 = 1 (environment action 0): 4 mod 3 = 1; 3->4 reads frame 50 and a_3 = 2 (action 1): 6 mod 3
    = 0; 4->5 lies past the end: 0. Without a code function the targets have none."""
    def toy(frame, action, next_frame):
        return (next_frame[0, 0, 0].astype(jnp.int32) // 10 + action) % 3

    cfg = TargetConfig(history_length=1, unroll_steps=3, td_steps=2, discount=1.0)
    out = make_targets(_episode(), 2, cfg, A, chance=True, chance_code=toy)
    np.testing.assert_array_equal(out.chance_codes, [1, 0, 0])
    assert out.chance_codes.dtype == jnp.int32
    assert make_targets(_episode(), 2, cfg, A, chance=True).chance_codes is None


class _NoEncoder(_FixedModel):
    def encode(self, params, before, after):
        raise AssertionError("the encoder is not called when the game names the outcomes")


def test_stochastic_loss_with_the_games_codes_by_hand():
    """K = 2 with the game's codes 2 then 0: the chance prior's CE is -log sigma_2 - log sigma_0 = log 4 + log 2;
    no encoder, so commitment 0 and diversity 0 whatever its weight; the batch used codes 0 and 2 evenly: 2."""
    cfg = ModelConfig(kind="mlp", support_size=1, value_transform="identity", chance_outcomes=3)
    targets = make_targets(_episode(last=6), 1, TargetConfig(history_length=1, unroll_steps=2, td_steps=1), A,
                           chance=True, chance_code=lambda f, a, nf: jnp.where(nf[0, 0, 0] > 35, 0, 2))
    np.testing.assert_array_equal(targets.chance_codes, [2, 0])  # frames 30 and 40 follow steps 1 and 2 (t = 1)
    t = jax.tree.map(lambda x: x[None], targets)
    learner = LearnerConfig(chance_coef=1.5, commitment_coef=0.25, chance_diversity_coef=2.0, consistency_coef=0.0)
    from moozi.losses import stochastic_unroll

    value_probs = scalar_to_target(t.value, cfg.support_size, cfg.value_transform)
    _, _, _, metrics = stochastic_unroll(jnp.ones(()), _NoEncoder(cfg), t, value_probs, learner)
    np.testing.assert_allclose(metrics["loss/chance"], [1.5 * (math.log(4) + math.log(2))], rtol=1e-5)
    np.testing.assert_allclose(metrics["loss/commitment"], [0.0], atol=1e-7)
    np.testing.assert_allclose(metrics["loss/chance_diversity"], [0.0], atol=1e-7)
    np.testing.assert_allclose(metrics["chance/codes_used"], 2.0, rtol=1e-5)


def _board_frame(rows):
    """A pgx 2048 observation ``[4, 4, 31]`` (one-hot exponents) of a board of exponents."""
    return jax.nn.one_hot(jnp.asarray(rows, jnp.int32), 31)


def test_2048_names_its_new_tile_by_hand():
    """Board (exponents) 1 1 0 0 / 0 0 0 2 / 0 / 0. Left: the 2s merge to a 4 in cell 0, the 4 slides to cell 4;
    a new 4 in cell 7 is code 2 * 7 + 1 = 15. Up: only the 4 moves (cell 7 -> 3); a new 2 in cell 15 is code 30."""
    from moozi.envs.chance import tile_2048

    before = _board_frame([[1, 1, 0, 0], [0, 0, 0, 2], [0, 0, 0, 0], [0, 0, 0, 0]])
    left = _board_frame([[2, 0, 0, 0], [2, 0, 0, 2], [0, 0, 0, 0], [0, 0, 0, 0]])
    up = _board_frame([[1, 1, 0, 2], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]])
    assert int(tile_2048(before, 0, left)) == 15
    assert int(tile_2048(before, 1, up)) == 30


def test_2048_codes_rebuild_pgx_boards():
    """Over 200 random pgx 2048 moves, the slid board with the coded tile placed is exactly pgx's next board."""
    import pgx

    from moozi.envs.chance import _slide_2048, tile_2048

    # Everything jitted: run op by op, pgx's step and the slide compile a program per move (41,000 memory maps
    # in one worker, near Linux's 65,530 limit; XLA then segfaults in a later compile).
    env, code, slide = pgx.make("2048"), jax.jit(tile_2048), jax.jit(_slide_2048)
    init, step = jax.jit(env.init), jax.jit(env.step)
    rng, key = np.random.default_rng(0), jax.random.key(0)
    state, fours, checked = init(key), 0, 0
    while checked < 200:
        key, k1, k2 = jax.random.split(key, 3)
        legal = np.flatnonzero(np.asarray(state.legal_action_mask))
        if state.terminated or not legal.size:
            state = init(k1)
            continue
        a = int(rng.choice(legal))
        nxt = step(state, a, k2)
        c = int(code(state.observation.astype(jnp.float32), a, nxt.observation.astype(jnp.float32)))
        board = np.asarray(slide(state._board.reshape(4, 4), a)).reshape(-1).copy()
        assert board[c // 2] == 0
        board[c // 2] = 1 + c % 2
        np.testing.assert_array_equal(board, np.asarray(nxt._board))
        fours, checked, state = fours + c % 2, checked + 1, nxt
    assert 5 <= fours <= 40  # pgx draws a 4 one time in ten


def test_game_codes_are_refused_where_no_game_names_them():
    from moozi.envs.contract import EnvSpec
    from moozi.learner import training_chance_code

    with pytest.raises(ConfigError, match=r"learner.chance_codes = 'game' with model.chance_outcomes = 0"):
        config_from_dict({"learner": {"chance_codes": "game"}})
    with pytest.raises(ConfigError, match=r"learner.chance_codes = 'dice' is invalid"):
        LearnerConfig(chance_codes="dice")
    with pytest.raises(ConfigError, match=r"env_spec.chance_code = 'pgx:dice' is invalid: allowed '' or one of 'pgx:2048'"):
        EnvSpec(name="toy:dice", observation_shape=(1, 1, 3), num_actions=2, chance_code="pgx:dice")
    game = LearnerConfig(chance_codes="game")
    plain = EnvSpec(name="toy:plain", observation_shape=(1, 1, 3), num_actions=2)
    with pytest.raises(ConfigError, match=r"toy:plain names none .*Allowed for it: encoder"):
        training_chance_code(game, plain, 32)
    tiles = EnvSpec(name="pgx:2048", observation_shape=(4, 4, 31), num_actions=4, chance_code="pgx:2048")
    with pytest.raises(ConfigError, match=r"model.chance_outcomes = 8 .*allowed: model.chance_outcomes = 32"):
        training_chance_code(game, tiles, 8)
    assert training_chance_code(game, tiles, 32) is not None
    assert training_chance_code(LearnerConfig(), tiles, 32) is None
