"""Loss and update step: golden pieces, weights, masks, target network, overfitting."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.config import LearnerConfig, ModelConfig
from moozi.losses import cosine_distance, cross_entropy, entropy, loss_fn, q_head_term, scale_gradient, squared_error
from moozi.model.networks import build_model
from moozi.types import Batch, Targets
from moozi.update import init_train_state, learning_rate_schedule, make_update_fn

B, K, A = 8, 5, 4


def _batch(shape, seed=0):
    rng = np.random.default_rng(seed)
    policy = rng.dirichlet(np.ones(A), size=(B, K + 1)).astype(np.float32)
    targets = Targets(
        observation=rng.normal(size=(B, *shape)).astype(np.float32),
        next_observation=rng.normal(size=(B, *shape)).astype(np.float32),
        actions=rng.integers(0, A, size=(B, K)).astype(np.int32),
        policy=policy,
        value=rng.uniform(-5, 5, size=(B, K + 1)).astype(np.float32),
        value_mask=np.ones((B, K + 1), np.float32),
        reward=np.concatenate([np.zeros((B, 1)), rng.uniform(-3, 3, size=(B, K))], 1).astype(np.float32),
        consistency_mask=np.ones((B,), np.float32),
        priority=np.zeros((B,), np.float32),
    )
    return Batch(targets, np.ones((B,), np.float32))


MODELS = {
    "mlp": (ModelConfig(kind="mlp", mlp_hidden=(64, 64), mlp_embedding=32, head_hidden=32, support_size=10), (1, 1, 16)),
    "resnet": (ModelConfig(kind="resnet", channels=16, repr_blocks=1, dyn_blocks=1, head_hidden=32, support_size=10), (6, 6, 12)),
}


# CI runs the resnet variant (the presets' model); the MLP one, with the same loss code, is in the extended tier
# (each takes its gradients op by op: 9-26 s on a slow 2-core machine).
KINDS = [pytest.param("mlp", marks=pytest.mark.extended), "resnet"]


def test_cross_entropy_and_entropy_golden():
    p = jnp.array([0.5, 0.5, 0.0])
    logits = jnp.log(jnp.array([0.25, 0.25, 0.5]))
    assert float(cross_entropy(p, logits)) == pytest.approx(np.log(4.0), rel=1e-6)  # -2 * 0.5 * log(1/4)
    assert float(entropy(p)) == pytest.approx(np.log(2.0), rel=1e-6)


def test_cosine_distance_golden():
    a = jnp.array([[1.0, 0.0], [1.0, 1.0], [2.0, 0.0]])
    b = jnp.array([[0.0, 3.0], [2.0, 2.0], [-1.0, 0.0]])
    np.testing.assert_allclose(cosine_distance(a, b), [1.0, 0.0, 2.0], atol=1e-6)


def test_cosine_distance_gradient_is_finite_at_zero():
    # A projection whose weights decayed to zero must not turn the gradient NaN.
    zero = jnp.zeros((2, 3))
    b = jnp.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    np.testing.assert_allclose(cosine_distance(zero, b), [1.0, 1.0])
    grad = jax.grad(lambda a: jnp.sum(cosine_distance(a, b)))(zero)
    assert np.all(np.isfinite(grad))


def test_scale_gradient_halves_gradient_only():
    f = lambda x: jnp.sum(scale_gradient(x, 0.5) ** 2)
    x = jnp.array([1.0, -2.0])
    assert float(f(x)) == 5.0
    np.testing.assert_allclose(jax.grad(f)(x), [1.0, -2.0])  # 0.5 * 2x


@pytest.fixture(scope="module")
def mlp():
    cfg, shape = MODELS["mlp"]
    model = build_model(cfg, shape, A)
    return model, model.init(jax.random.key(0)), shape


def test_metrics_report_every_term_and_floor(mlp):
    model, params, shape = mlp
    loss, aux = jax.jit(loss_fn, static_argnums=(1, 3))(params, model, _batch(shape), LearnerConfig())
    m = aux["metrics"]
    for key in ["loss/policy", "loss/value", "loss/reward", "loss/consistency", "loss/l2", "loss/total", "loss/floor", "loss/excess"]:
        assert np.isfinite(float(m[key])), key
    parts = m["loss/policy"] + m["loss/value"] + m["loss/reward"] + m["loss/consistency"] + m["loss/l2"]
    assert float(m["loss/total"]) == pytest.approx(float(parts), rel=1e-5)
    assert float(loss) == pytest.approx(float(m["loss/total"]), rel=1e-6)
    assert aux["priorities"].shape == (B,)
    # a fresh model predicts uniform policies: policy term = (1 + K/K) * log(A)
    assert float(m["loss/policy"]) == pytest.approx(2 * np.log(A), rel=1e-4)


def test_reward_coef_weighs_the_summed_reward_term_golden(mlp):
    """A fresh model's reward distribution is uniform over the 2 * 10 + 1 bins of support 10, so each unrolled
    step's reward cross-entropy is log 21 whatever the target: the thesis's term sums K = 5 of them (c^r = 1);
    c^r = 1/K weighs each step's reward as the policy and value terms weigh theirs."""
    model, params, shape = mlp
    f = jax.jit(loss_fn, static_argnums=(1, 3))
    thesis = f(params, model, _batch(shape), LearnerConfig())[1]["metrics"]
    per_step = f(params, model, _batch(shape), LearnerConfig(reward_coef=1 / K))[1]["metrics"]
    assert float(thesis["loss/reward"]) == pytest.approx(K * np.log(21), rel=1e-4)
    assert float(per_step["loss/reward"]) == pytest.approx(np.log(21), rel=1e-4)
    assert float(per_step["loss/policy"]) == pytest.approx(float(thesis["loss/policy"]), rel=1e-6)
    with pytest.raises(ValueError, match="reward_coef"):
        LearnerConfig(reward_coef=-1.0)


def test_unroll_value_priority_golden(mlp):
    """A fresh model values every state 0, so the new priority is |G_t| (MuZero's root value error) or, with
    ``unroll_value``, the largest |G_{t+k}| over the unroll where the value is masked in."""
    model, params, shape = mlp
    batch = _batch(shape)
    value = np.zeros((B, K + 1), np.float32)
    value[0] = [1.0, -3.0, 2.0, 0.5, 0.0, 0.0]
    value[1] = [0.5, -4.0, 1.5, 0.0, 0.0, 0.0]
    mask = np.ones((B, K + 1), np.float32)
    mask[1, 1] = 0.0  # past the episode's end: not a target
    batch = batch.replace(targets=batch.targets.replace(value=value, value_mask=mask))
    root = loss_fn(params, model, batch, LearnerConfig())[1]["priorities"]
    unroll = loss_fn(params, model, batch, LearnerConfig(priority="unroll_value"))[1]["priorities"]
    np.testing.assert_allclose(root[:2], [1.0, 0.5], atol=1e-5)
    np.testing.assert_allclose(unroll[:2], [3.0, 1.5], atol=1e-5)
    np.testing.assert_allclose(unroll[2:], 0.0, atol=1e-5)
    with pytest.raises(ValueError, match="priority"):
        LearnerConfig(priority="loss")


def test_importance_weights_and_value_mask(mlp):
    model, params, shape = mlp
    cfg = LearnerConfig(l2_coef=0.0)
    f = jax.jit(loss_fn, static_argnums=(1, 3))
    batch = _batch(shape)
    _, base = f(params, model, batch, cfg)
    _, doubled = f(params, model, batch.replace(weights=2 * batch.weights), cfg)
    for key in ["loss/policy", "loss/value", "loss/reward", "loss/consistency"]:
        assert float(doubled["metrics"][key]) == pytest.approx(2 * float(base["metrics"][key]), rel=1e-5)
    masked = batch.replace(targets=batch.targets.replace(value_mask=np.zeros((B, K + 1), np.float32)))
    _, m = f(params, model, masked, cfg)
    assert float(m["metrics"]["loss/value"]) == 0.0


def test_zero_consistency_coef_drops_the_term_and_keeps_gradients_finite(mlp):
    # With c^s = 0 the projection gets only the L2 gradient, so Adam decays it
    # to zero; that must not matter (it once turned every parameter NaN).
    model, params, shape = mlp
    cfg = LearnerConfig(consistency_coef=0.0)
    zeroed = jax.tree_util.tree_map_with_path(
        lambda path, x: jnp.zeros_like(x) if "proj" in jax.tree_util.keystr(path) else x, params
    )
    # Jitted: eagerly, each of the loss's ~300 operations compiles on its own (30 s on a slow machine).
    grads, aux = jax.jit(lambda p, b: jax.grad(loss_fn, has_aux=True)(p, model, b, cfg))(zeroed, _batch(shape))
    assert float(aux["metrics"]["loss/consistency"]) == 0.0
    assert all(np.all(np.isfinite(g)) for g in jax.tree_util.tree_leaves(grads))


def test_q_head_term_golden():
    """The q head's term is the cross-entropy of the taken move's q logits against the value target's
    support probabilities: row 0 took move 1, whose q distribution is (1/4, 1/4, 1/2), against the target
    (1/2, 1/2, 0): log 4; row 1 took the dummy (past the episode's end) and row 2 has no value target: 0."""
    q = np.full((3, 3, 3), np.log(1 / 3), np.float32)
    q[0, 1] = np.log([0.25, 0.25, 0.5])
    target = np.array([[0.5, 0.5, 0.0]] * 3, np.float32)
    out = q_head_term(jnp.asarray(q), jnp.array([1, 0, 2]), jnp.asarray(target), jnp.array([1.0, 1.0, 0.0]))
    np.testing.assert_allclose(out, [np.log(4.0), 0.0, 0.0], rtol=1e-6)


def test_q_head_adds_its_term_to_the_loss(mlp):
    """A fresh q head predicts a uniform distribution over the 21 bins of support 10, so its term is
    ``q_coef * log 21`` for each sample whose first move is a real one (the batch's dummies count 0), and
    it adds to the total; a model without the head has no such term."""
    cfg, shape = MODELS["mlp"]
    model = build_model(dataclasses.replace(cfg, q_head=True), shape, A)
    params = model.init(jax.random.key(0))
    batch = _batch(shape)
    real = float(np.mean(np.asarray(batch.targets.actions[:, 0]) > 0))
    assert 0 < real < 1  # the batch has both
    f = jax.jit(loss_fn, static_argnums=(1, 3))
    m = f(params, model, batch, LearnerConfig(q_coef=0.5))[1]["metrics"]
    assert float(m["loss/q"]) == pytest.approx(0.5 * real * np.log(21), rel=1e-4)
    parts = sum(float(m[k]) for k in ("loss/policy", "loss/value", "loss/reward", "loss/consistency", "loss/l2",
                                      "loss/q"))
    assert float(m["loss/total"]) == pytest.approx(parts, rel=1e-5)
    assert "loss/q" not in f(mlp[1], mlp[0], batch, LearnerConfig())[1]["metrics"]
    with pytest.raises(ValueError, match="q_coef"):
        LearnerConfig(q_coef=-1.0)


def test_squared_error_golden():
    decoded = jnp.array([[[1.0, 0.0], [0.5, 2.0]], [[0.0, 0.0], [0.0, 0.0]]])
    observation = jnp.array([[[1.0, 1.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 3.0]]])
    # sample 0: 0 + 1 + 0.25 + 4; sample 1: 9 (summed, not averaged)
    np.testing.assert_allclose(squared_error(decoded, observation), [5.25, 9.0])


@pytest.mark.parametrize("kind", KINDS)
def test_reconstruction_term_decodes_t_and_the_first_dynamics_step(kind):
    cfg, shape = MODELS[kind]
    model = build_model(dataclasses.replace(cfg, decoder=True), shape, A)
    params = model.init(jax.random.key(1))
    batch = _batch(shape)
    mask = np.array([1, 1, 1, 0, 1, 1, 1, 1], np.float32)  # sample 3 ends its episode at t
    batch = batch.replace(targets=batch.targets.replace(consistency_mask=mask))
    coef = 0.5
    _, aux = loss_fn(params, model, batch, LearnerConfig(reconstruction_coef=coef))
    t = batch.targets
    h0 = model.initial_inference(params, t.observation).hidden
    h1 = model.recurrent_inference(params, h0, t.actions[:, 0]).hidden
    assert model.decode(params, h0).shape == (B, *shape)
    expected = squared_error(model.decode(params, h0), t.observation) + mask * squared_error(
        model.decode(params, h1), t.next_observation)
    assert float(aux["metrics"]["loss/reconstruction"]) == pytest.approx(coef * float(jnp.mean(expected)), rel=1e-5)
    # Off by default: no metric, the same loss as a model without a decoder.
    _, off = loss_fn(params, model, batch, LearnerConfig())
    assert "loss/reconstruction" not in off["metrics"]
    # The term trains the dynamics (the point of it), not only the representation.
    grads = jax.grad(lambda p: loss_fn(p, model, batch, LearnerConfig(reconstruction_coef=coef, consistency_coef=0.0,
                                                                       value_coef=0.0))[0])(params)
    dyn = [g for path, g in jax.tree_util.tree_leaves_with_path(grads) if "dyn" in jax.tree_util.keystr(path)]
    assert dyn and any(float(jnp.abs(g).max()) > 0 for g in dyn)


@pytest.mark.parametrize("kind", KINDS)
def test_value_consistency_term_fits_the_first_step_value_to_the_real_next_frame(kind):
    cfg, shape = MODELS[kind]
    model = build_model(cfg, shape, A)
    params = model.init(jax.random.key(2))
    batch = _batch(shape)
    mask = np.array([1, 1, 0, 1, 1, 1, 1, 1], np.float32)  # sample 2 ends its episode at t: no next frame
    batch = batch.replace(targets=batch.targets.replace(consistency_mask=mask))
    coef = 3.0
    only = LearnerConfig(value_consistency_coef=coef, consistency_coef=0.0, value_coef=0.0)
    t = batch.targets

    def expected(p):
        h1 = model.recurrent_inference(p, model.initial_inference(p, t.observation).hidden, t.actions[:, 0])
        real = jax.nn.softmax(jax.lax.stop_gradient(model.initial_inference(p, t.next_observation).value_logits))
        return coef * jnp.mean(mask * cross_entropy(real, h1.value_logits))

    _, aux = loss_fn(params, model, batch, only)
    assert float(aux["metrics"]["loss/value_consistency"]) == pytest.approx(float(expected(params)), rel=1e-5)
    _, off = loss_fn(params, model, batch, LearnerConfig())
    assert "loss/value_consistency" not in off["metrics"]
    # The real frame's value is the target, not a second prediction: the gradient is the stop-gradient one's
    # (the policy and reward terms are in both losses, so compare against them added back).
    rest = LearnerConfig(consistency_coef=0.0, value_coef=0.0)
    grads = jax.grad(lambda p: loss_fn(p, model, batch, only)[0])(params)
    manual = jax.grad(lambda p: loss_fn(p, model, batch, rest)[0] + expected(p))(params)
    for g, m in zip(jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(manual)):
        np.testing.assert_allclose(g, m, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="value_consistency_coef"):
        LearnerConfig(value_consistency_coef=-1.0)


@pytest.mark.parametrize("kind", KINDS)
def test_value_consistency_into_dynamics_holds_the_value_head(kind):
    cfg, shape = MODELS[kind]
    model = build_model(cfg, shape, A)
    params = model.init(jax.random.key(2))
    # The value head's last layer starts at zero, which would pass no gradient to the dynamics at all.
    leaves, tree = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(jax.random.key(3), len(leaves))
    params = jax.tree_util.tree_unflatten(tree, [x + 0.1 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)])
    batch = _batch(shape)
    t = batch.targets
    coef = 3.0
    into = LearnerConfig(value_consistency_coef=coef, value_consistency_into="dynamics", consistency_coef=0.0,
                         value_coef=0.0)
    plain = dataclasses.replace(into, value_consistency_into="model")

    def expected(p):  # the gradient entering the dynamics is halved (MuZero), as in the loss
        h0 = scale_gradient(model.initial_inference(p, t.observation).hidden, 0.5)
        h1 = model.recurrent_inference(p, h0, t.actions[:, 0])
        held = model.module.apply(jax.lax.stop_gradient(p), h1.hidden, method="predict_next")[0]
        real = jax.nn.softmax(jax.lax.stop_gradient(model.initial_inference(p, t.next_observation).value_logits))
        return coef * jnp.mean(t.consistency_mask * cross_entropy(real, held))

    _, aux = loss_fn(params, model, batch, into)
    _, same = loss_fn(params, model, batch, plain)  # the same number; only the gradient differs
    assert float(aux["metrics"]["loss/value_consistency"]) == pytest.approx(float(expected(params)), rel=1e-5)
    assert float(same["metrics"]["loss/value_consistency"]) == pytest.approx(float(expected(params)), rel=1e-5)
    rest = LearnerConfig(consistency_coef=0.0, value_coef=0.0)
    grads = jax.grad(lambda p: loss_fn(p, model, batch, into)[0])(params)
    manual = jax.grad(lambda p: loss_fn(p, model, batch, rest)[0] + expected(p))(params)
    for g, m in zip(jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(manual)):
        np.testing.assert_allclose(g, m, rtol=1e-4, atol=1e-6)
    # value_coef is 0, so the value head's gradient past the L2 term's is this term's: none when held, some
    # when not; the dynamics gets some either way.
    base = jax.grad(lambda p: loss_fn(p, model, batch, rest)[0])(params)
    change = lambda g, part: max(float(jnp.abs(x - y).max()) for x, y in zip(  # noqa: E731
        jax.tree_util.tree_leaves(g["params"][part]), jax.tree_util.tree_leaves(base["params"][part])))
    assert change(grads, "value_head") == 0.0
    assert change(jax.grad(lambda p: loss_fn(p, model, batch, plain)[0])(params), "value_head") > 0.0
    assert change(grads, "dyn_net" if kind == "mlp" else "dyn_in") > 0.0
    with pytest.raises(ValueError, match="value_consistency_into"):
        LearnerConfig(value_consistency_into="head")


def test_decoder_is_switched_on_by_the_reconstruction_coef():
    from moozi.config import Config

    assert Config(learner=LearnerConfig(reconstruction_coef=1.0)).model.decoder
    assert not Config().model.decoder
    cfg, shape = MODELS["mlp"]
    model = build_model(cfg, shape, A)
    with pytest.raises(ValueError, match="model.decoder"):
        model.decode(model.init(jax.random.key(0)), jnp.zeros((1, cfg.mlp_embedding)))
    with pytest.raises(ValueError, match="reconstruction_coef"):
        LearnerConfig(reconstruction_coef=-1.0)
    with pytest.raises(ValueError, match="reconstruction_coef = 1.0 with model.dynamics = simulator"):
        Config(learner=LearnerConfig(reconstruction_coef=1.0), model=ModelConfig(dynamics="simulator"),
               env=dataclasses.replace(Config().env, name="gymnax:CartPole-v1"))


def test_target_network_refreshes_every_period(mlp):
    model, _, shape = mlp
    cfg = LearnerConfig(target_update_period=3)
    state = init_train_state(model, cfg, jax.random.key(0))
    initial = jax.tree_util.tree_leaves(state.target_params)[0].copy()
    update = make_update_fn(model, cfg)
    batch = _batch(shape)
    for i in range(1, 4):
        state, metrics, priorities = update(state, batch)
        target = jax.tree_util.tree_leaves(state.target_params)[0]
        online = jax.tree_util.tree_leaves(state.params)[0]
        if i < 3:
            np.testing.assert_array_equal(target, initial)
        else:
            np.testing.assert_array_equal(target, online)
    assert int(state.step) == 3 and int(metrics["train/step"]) == 3
    assert float(metrics["train/grad_norm"]) > 0 and priorities.shape == (B,)


def test_learning_rate_schedules():
    const = learning_rate_schedule(LearnerConfig(learning_rate=0.1))
    assert float(const(0)) == pytest.approx(0.1) and float(const(10_000)) == pytest.approx(0.1)
    warm = learning_rate_schedule(LearnerConfig(learning_rate=0.1, warmup_steps=10))
    assert float(warm(5)) == pytest.approx(0.05) and float(warm(20)) == pytest.approx(0.1)
    cos = learning_rate_schedule(LearnerConfig(learning_rate=0.1, lr_schedule="cosine", decay_steps=100))
    assert float(cos(50)) == pytest.approx(0.05, abs=1e-6) and float(cos(100)) == pytest.approx(0.0, abs=1e-7)
    lin = learning_rate_schedule(LearnerConfig(learning_rate=0.1, lr_schedule="linear", warmup_steps=10, decay_steps=110))
    assert float(lin(10)) == pytest.approx(0.1) and float(lin(60)) == pytest.approx(0.05)


def test_batch_that_does_not_fit_the_model_is_a_clear_error(mlp):
    model, params, shape = mlp
    batch = _batch(shape)
    bad = batch.replace(targets=batch.targets.replace(policy=np.ones((B, K + 1, A + 1), np.float32)))
    with pytest.raises(ValueError, match="policy targets cover 5 actions"):
        loss_fn(params, model, bad, LearnerConfig())


@pytest.mark.parametrize("kind", KINDS)
def test_overfits_one_small_batch(kind):
    """The loss's excess over its floor (target entropies) falls by >= 90% in 300 updates."""
    cfg, shape = MODELS[kind]
    model = build_model(cfg, shape, A)
    learner = LearnerConfig()  # thesis defaults: Adam 1e-2, clip 5, c^v 0.25, c^s 2, L2 1e-4
    state = init_train_state(model, learner, jax.random.key(0))
    update = make_update_fn(model, learner)
    batch = _batch(shape)
    state, metrics, _ = update(state, batch)
    first = float(metrics["loss/excess"])
    for _ in range(299):
        state, metrics, _ = update(state, batch)
    last = float(metrics["loss/excess"])
    assert first > 1.0
    assert last <= 0.1 * first, (first, last)


def test_a_non_finite_update_leaves_the_state_as_it_was(mlp):
    """A batch that makes the loss NaN: the update is flagged (train/nonfinite 1) and every leaf of the state,
    the step count included, is the one before it; a finite batch after it trains on (flag 0)."""
    model, _, shape = mlp
    cfg = LearnerConfig()
    update = make_update_fn(model, cfg)
    state = init_train_state(model, cfg, jax.random.key(0))
    good = _batch(shape)
    state, metrics, _ = update(state, good)
    assert float(metrics["train/nonfinite"]) == 0.0
    before = [np.asarray(x).copy() for x in jax.tree_util.tree_leaves(state)]
    bad = Batch(good.targets.replace(value=np.full_like(good.targets.value, np.nan)), good.weights)
    state, metrics, _ = update(state, bad)
    assert float(metrics["train/nonfinite"]) == 1.0 and not np.isfinite(float(metrics["train/grad_norm"]))
    for a, b in zip(before, jax.tree_util.tree_leaves(state)):
        np.testing.assert_array_equal(a, np.asarray(b))
    assert int(state.step) == 1
    state, metrics, _ = update(state, good)
    assert float(metrics["train/nonfinite"]) == 0.0 and int(state.step) == 2
