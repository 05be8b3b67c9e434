"""Value transform and two-hot projection: golden numbers and round-trip properties."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moozi.model.transform import (
    logits_to_scalar,
    phi,
    phi_inverse,
    probs_to_scalar,
    scalar_to_probs,
    support,
    two_hot,
)

finite = st.floats(min_value=-1e5, max_value=1e5, allow_nan=False, width=32)


def test_phi_golden():
    # phi(3) = sqrt(4) - 1 + 0.001 * 3; phi(-8) = -(3 - 1) - 0.008; phi(0) = 0
    np.testing.assert_allclose(phi(jnp.array([3.0, -8.0, 0.0])), [1.003, -2.008, 0.0], rtol=1e-6)


def test_two_hot_golden():
    p = np.asarray(two_hot(jnp.array(2.3), 3))  # bins -3..3; 2.3 -> 0.7 on 2, 0.3 on 3
    expected = np.zeros(7)
    expected[5], expected[6] = 0.7, 0.3
    np.testing.assert_allclose(p, expected, atol=1e-6)
    p = np.asarray(two_hot(jnp.array(-1.0), 3))  # exactly on a bin
    np.testing.assert_allclose(p, np.eye(7)[2], atol=1e-7)


def test_two_hot_past_the_edge_goes_to_edge_bin():
    p = np.asarray(two_hot(jnp.array([7.5, -40.0, 3.0, -3.0]), 3))
    np.testing.assert_allclose(p, np.eye(7)[[6, 0, 6, 0]], atol=1e-7)


@settings(max_examples=200, deadline=None)
@given(finite)
def test_phi_round_trip(x):
    y = float(phi_inverse(phi(jnp.float32(x))))
    assert y == pytest.approx(x, rel=1e-4, abs=1e-4)


# A few support sizes (each size compiles every operation again): the smallest, small ones and the largest.
@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=-40.0, max_value=40.0, allow_nan=False, width=32), st.sampled_from([1, 2, 3, 7, 30]))
def test_two_hot_expectation_is_clipped_value(y, size):
    p = np.asarray(two_hot(jnp.float32(y), size))
    assert p.shape == (2 * size + 1,)
    assert np.all(p >= 0) and np.sum(p) == pytest.approx(1.0, abs=1e-5)
    assert np.count_nonzero(p > 1e-7) <= 2
    assert float(np.sum(p * np.asarray(support(size)))) == pytest.approx(np.clip(y, -size, size), abs=1e-4)


@settings(max_examples=200, deadline=None)
@given(finite)
def test_scalar_round_trip_within_and_past_support(x):
    size = 30
    edge = float(phi_inverse(jnp.float32(size)))  # largest representable magnitude (~ 899.6)
    got = float(probs_to_scalar(scalar_to_probs(jnp.float32(x), size), size))
    expected = float(np.clip(x, -edge, edge))
    assert got == pytest.approx(expected, rel=1e-3, abs=1e-3)


def test_logits_to_scalar():
    probs = scalar_to_probs(jnp.array([0.0, 5.0, -120.0]), 30)
    logits = jnp.log(jnp.maximum(probs, 1e-30))
    np.testing.assert_allclose(logits_to_scalar(logits), [0.0, 5.0, -120.0], rtol=1e-3, atol=1e-3)
    assert float(logits_to_scalar(jnp.zeros(61))) == pytest.approx(0.0, abs=1e-5)  # uniform -> 0


def test_logits_with_even_bins_are_rejected():
    with pytest.raises(ValueError, match="odd number of bins"):
        logits_to_scalar(jnp.zeros(60))


def test_identity_transform_golden():
    from moozi.model.transform import scalar_to_target

    # bins -1, 0, 1: 0.5 -> half on 0, half on 1; -1 -> all on -1; 3 clips to 1
    np.testing.assert_allclose(scalar_to_target(jnp.array([0.5, -1.0, 3.0]), 1, "identity"),
                               [[0, 0.5, 0.5], [1, 0, 0], [0, 0, 1]], atol=1e-7)
    logits = jnp.log(jnp.array([0.25, 0.25, 0.5]))
    assert float(logits_to_scalar(logits, "identity")) == pytest.approx(0.25, abs=1e-6)
    # phi squashes a win (+1) to 0.415 of a bin; identity keeps it a whole bin
    assert float(scalar_to_target(jnp.array(1.0), 1, "phi")[2]) == pytest.approx(np.sqrt(2) - 1 + 1e-3, abs=1e-6)
