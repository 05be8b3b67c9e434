"""Shapes, dtypes and input validation for both network families."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.config import ModelConfig
from moozi.model.networks import build_model, normalize_hidden

A = 4
CASES = {
    "resnet": (ModelConfig(kind="resnet", channels=8, repr_blocks=1, dyn_blocks=1, head_hidden=16, support_size=5), (5, 5, 6)),
    "mlp": (ModelConfig(kind="mlp", mlp_hidden=(16,), mlp_embedding=12, head_hidden=16, support_size=5), (1, 1, 7)),
    "resnet-atari": (ModelConfig(kind="resnet", channels=8, repr_blocks=1, dyn_blocks=1, head_hidden=16, support_size=5,
                                 downsample="atari"), (20, 20, 6)),  # 20 x 20 -> 10 -> 5 -> 3 -> 2
}
HIDDEN = {"resnet": (3, 5, 5, 8), "mlp": (3, 12), "resnet-atari": (3, 2, 2, 8)}


@pytest.fixture(scope="module", params=sorted(CASES))
def built(request):
    cfg, shape = CASES[request.param]
    model = build_model(cfg, shape, A)
    params = model.init(jax.random.key(0))
    return request.param, model, params


def test_output_shapes_and_dtypes(built):
    kind, model, params = built
    obs = jnp.ones((3, *model.observation_shape))
    out = model.initial_inference(params, obs)
    hidden_shape = HIDDEN[kind]
    assert out.hidden.shape == hidden_shape
    shapes = [("value_logits", (3, 11)), ("reward_logits", (3, 11)), ("policy_logits", (3, A)), ("value", (3,)),
              ("reward", (3,))]
    for name, shape in shapes:
        arr = getattr(out, name)
        assert arr.shape == shape, name
        assert arr.dtype == jnp.float32, name
    np.testing.assert_allclose(out.reward, 0.0, atol=1e-6)  # no reward at the root
    nxt = model.recurrent_inference(params, out.hidden, jnp.array([0, 1, 3]))
    assert nxt.hidden.shape == hidden_shape
    assert nxt.value_logits.shape == (3, 11) and nxt.reward.shape == (3,)
    proj = model.projection(params, nxt.hidden)
    assert proj.shape == (3, int(np.prod(hidden_shape[1:])))


def test_fresh_model_predicts_zero_and_uniform(built):
    _, model, params = built
    out = model.initial_inference(params, jnp.ones((2, *model.observation_shape)))
    np.testing.assert_allclose(out.value, 0.0, atol=1e-6)
    np.testing.assert_allclose(jax.nn.softmax(out.policy_logits), 1 / A, atol=1e-6)


def test_hidden_states_are_normalised(built):
    _, model, params = built
    obs = jax.random.normal(jax.random.key(1), (2, *model.observation_shape))
    out = model.initial_inference(params, obs)
    h = np.asarray(out.hidden).reshape(2, -1)
    np.testing.assert_allclose(h.min(axis=1), 0.0, atol=1e-6)
    np.testing.assert_allclose(h.max(axis=1), 1.0, atol=1e-5)
    nxt = np.asarray(model.recurrent_inference(params, out.hidden, jnp.array([1, 2])).hidden)
    assert nxt.min() >= 0.0 and nxt.max() <= 1.0 + 1e-6


def test_wrong_observation_shape_is_a_clear_error(built):
    _, model, params = built
    bad = jnp.ones((2, 3, 3, 2))
    with pytest.raises(ValueError, match="does not match the model"):
        model.initial_inference(params, bad)


def test_wrong_action_shape_is_a_clear_error(built):
    _, model, params = built
    out = model.initial_inference(params, jnp.ones((2, *model.observation_shape)))
    with pytest.raises(ValueError, match="action must be"):
        model.recurrent_inference(params, out.hidden, jnp.array([[1], [2]]))


def test_support_size_mismatch_is_a_clear_error(built):
    kind, model, params = built
    cfg, shape = CASES[kind]
    other = build_model(ModelConfig(**{**cfg.__dict__, "support_size": 7}), shape, A)
    model.check_params(params)  # matches itself
    with pytest.raises(ValueError, match="support_size=7"):
        other.check_params(params)


def test_resnet_refuses_vector_observations():
    with pytest.raises(ValueError, match="model.kind='mlp'"):
        build_model(ModelConfig(kind="resnet"), (7,), A)


def test_normalize_hidden_constant_input_is_finite():
    out = normalize_hidden(jnp.ones((2, 3)))
    assert np.all(np.isfinite(out))


def test_normalize_hidden_gradient_golden():
    # x = [0, 1, 3], loss = w . f(x) with w = [1, 2, 3]; d = hi - lo = 3, f = [0, 1/3, 1].
    # dL/dlo = -sum(w)/d + sum(w (x - lo))/d^2 = -2 + 11/9; dL/dhi = -11/9; the middle element w_1/d = 2/3.
    # So the gradient is [1/3 - 7/9, 2/3, 1 - 11/9] = [-4/9, 6/9, -2/9] (sums to 0: f ignores a shift).
    x = jnp.array([[0.0, 1.0, 3.0]])
    w = jnp.array([[1.0, 2.0, 3.0]])
    grad = jax.jit(jax.grad(lambda h: jnp.sum(w * normalize_hidden(h))))(x)
    np.testing.assert_allclose(grad, [[-4 / 9, 6 / 9, -2 / 9]], atol=1e-6)
    # A constant hidden state (hi == lo) keeps a finite gradient.
    assert np.all(np.isfinite(jax.grad(lambda h: jnp.sum(w * normalize_hidden(h)))(jnp.ones((1, 3)))))


def test_action_kernels_let_one_move_shift_the_state():
    """``dynamics_action = kernels``: each move has its own 3x3 first convolution (golden, hand-set kernels)."""
    import dataclasses

    cfg, shape = CASES["resnet"]
    cfg = dataclasses.replace(cfg, dyn_blocks=0, normalize_hidden=False, dynamics_action="kernels")
    model = build_model(cfg, shape, A)
    params = model.init(jax.random.key(0))
    assert params["params"]["dyn_kernels"]["kernel"].shape == (3, 3, 8, A * 8)
    assert {"dyn_kernels", "dyn_norm"} <= set(params["params"]) and "dyn_in" not in params["params"]
    # Move 1's kernel copies each channel from the row above (tap [0, 1]); every other move's is zero.
    kernel = np.zeros((3, 3, 8, A, 8), np.float32)
    kernel[0, 1, :, 1, :] = np.eye(8)
    params = jax.tree_util.tree_map(lambda x: x, params)
    params["params"]["dyn_kernels"] = {"kernel": jnp.asarray(kernel.reshape(3, 3, 8, A * 8)),
                                       "bias": jnp.zeros((A * 8,))}
    hidden = jax.random.uniform(jax.random.key(1), (2, 5, 5, 8))
    out = model.recurrent_inference(params, hidden, jnp.array([1, 2])).hidden
    shifted = np.concatenate([np.zeros((1, 5, 8)), np.asarray(hidden[0, :-1])], axis=0)  # row y gets row y - 1

    def layer_norm(x):  # flax's LayerNorm at its initial scale 1 and bias 0, over the channels
        return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-6)

    np.testing.assert_allclose(out[0], np.maximum(layer_norm(shifted), 0.0), atol=1e-5)
    np.testing.assert_allclose(out[1], 0.0, atol=1e-6)  # move 2's kernel is zero: nothing moved


def test_action_kernels_are_validated():
    with pytest.raises(ValueError, match="dynamics_action"):
        ModelConfig(dynamics_action="bias")
    with pytest.raises(ValueError, match="dynamics_action"):
        ModelConfig(kind="mlp", dynamics_action="kernels")


def test_atari_downsampling_reads_84_by_84_frames_into_6_by_6():
    """The atari-pong preset's network (32 channels, 2 + 2 + 1 + 1 blocks, 64-unit heads, support 20; 4 frames of
    Pong and 7 action planes): 6 x 6 hidden states and about 1% of the parameters of the 84 x 84 ones."""
    sizes = {}
    for downsample in ("none", "atari"):
        cfg = ModelConfig(channels=32, repr_blocks=2, dyn_blocks=2, pred_blocks=1, proj_blocks=1, head_hidden=64,
                          support_size=20, downsample=downsample)
        model = build_model(cfg, (84, 84, 4 * (1 + 7)), 7)
        params = jax.eval_shape(model.init, jax.random.key(0))
        sizes[downsample] = sum(x.size for x in jax.tree_util.tree_leaves(params))
        out = jax.eval_shape(model.initial_inference, params, jnp.zeros((2, *model.observation_shape)))
        assert out.hidden.shape == ((2, 84, 84, 32) if downsample == "none" else (2, 6, 6, 32))
    assert sizes["none"] > 40_000_000 and sizes["atari"] < 500_000
    # Stochastic MuZero's encoder reads the frames through the same stem
    chance = build_model(ModelConfig(channels=8, repr_blocks=1, dyn_blocks=1, head_hidden=16, support_size=5,
                                     downsample="atari", chance_outcomes=4), (84, 84, 6), 4)
    params = jax.eval_shape(chance.init, jax.random.key(0))
    frames = jnp.zeros((2, 84, 84, 6))
    assert jax.eval_shape(chance.encode, params, frames, frames).shape == (2, 4)
    assert params["params"]["encoder_hidden"]["kernel"].shape == (6 * 6 * 8, 16)


def test_downsampling_is_validated():
    with pytest.raises(ValueError, match=r"model.downsample = 'pool' is invalid"):
        ModelConfig(downsample="pool")
    with pytest.raises(ValueError, match=r"model.downsample = 'atari' is invalid: allowed none with model.kind = mlp"):
        ModelConfig(kind="mlp", downsample="atari")


@pytest.mark.parametrize("kind", ["resnet", "mlp"])
def test_bfloat16_compute_keeps_the_parameters_and_what_leaves_the_model(kind):
    """``model.compute_dtype = bfloat16``: the same parameter tree in float32 (checkpoints load either way), the
    layers multiply in bfloat16 (the outputs differ from float32's by bfloat16's rounding, 8 bits of mantissa), and
    everything that leaves the model is float32, gradients included; Stochastic MuZero's parts too."""
    import dataclasses

    from moozi.model.core import _ResBlock

    cfg, shape = CASES[kind]
    models = {dt: build_model(dataclasses.replace(cfg, compute_dtype=dt), shape, A) for dt in ("float32", "bfloat16")}
    params = models["float32"].init(jax.random.key(0))
    other = models["bfloat16"].init(jax.random.key(0))
    assert jax.tree_util.tree_structure(params) == jax.tree_util.tree_structure(other)
    assert all(x.dtype == jnp.float32 for x in jax.tree_util.tree_leaves(other))
    obs = jax.random.uniform(jax.random.key(1), (3, *shape))

    def outputs(model, p):
        out = model.initial_inference(p, obs)
        nxt = model.recurrent_inference(p, out.hidden, jnp.array([0, 1, 3]))
        return out, nxt, model.projection(p, nxt.hidden)

    full, half = (jax.jit(outputs, static_argnums=0)(models[dt], params) for dt in ("float32", "bfloat16"))
    for a, b in zip(jax.tree_util.tree_leaves(full), jax.tree_util.tree_leaves(half)):
        assert b.dtype == jnp.float32
        np.testing.assert_allclose(b, a, atol=0.05)  # hidden states in [0, 1]; fresh heads near 0
    assert any(not np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(full), jax.tree_util.tree_leaves(half)))

    def value_sum(p):
        return jnp.sum(outputs(models["bfloat16"], p)[1].hidden)

    grads = jax.jit(jax.grad(value_sum))(params)
    assert all(g.dtype == jnp.float32 and np.isfinite(g).all() for g in jax.tree_util.tree_leaves(grads))
    if kind == "resnet":  # the layers really multiply in bfloat16
        x = jnp.ones((1, 3, 3, 4))
        block = _ResBlock(4, "bfloat16")
        jaxpr = str(jax.make_jaxpr(block.apply)(block.init(jax.random.key(0), x), x))
        assert "conv_general_dilated" in jaxpr and "bf16" in jaxpr
    chance = build_model(dataclasses.replace(cfg, compute_dtype="bfloat16", chance_outcomes=4), shape, A)
    p = chance.init(jax.random.key(0))
    after = chance.afterstate_inference(p, chance.represent(p, obs), jnp.array([0, 1, 3]))
    code = jax.nn.one_hot(jnp.array([0, 1, 2]), 4)
    leaves = [after.afterstate, after.chance_logits, chance.chance_inference(p, after.afterstate, code).hidden,
              chance.encode(p, obs, obs)]
    assert all(x.dtype == jnp.float32 for x in leaves)


def test_compute_dtype_is_validated():
    with pytest.raises(ValueError, match=r"model.compute_dtype = 'float16' is invalid"):
        ModelConfig(compute_dtype="float16")
