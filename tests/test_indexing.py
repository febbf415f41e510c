"""Properties of indexing, drawn by hypothesis: for any basic key (ints,
slices with any positive step, None, ...) on any shape, x[key] and x[key] = v match
NumPy, their gradients are NumPy's scatter and mask, and the native and
re-taped sweeps agree. Basic indexing is recorded as a strided descriptor
(ops/shape.py), whose native kernels index memory directly."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tape
from tape._engine import force_retaped

ARRAY_SHAPES = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)


@st.composite
def shape_and_basic_key(draw):
    shape = draw(ARRAY_SHAPES)
    key = draw(hnp.basic_indices(shape, min_dims=0, allow_newaxis=True, allow_ellipsis=True))
    return shape, _with_positive_steps(key)


def _with_positive_steps(key):
    # PyTorch refuses negative steps ("step must be greater than zero")
    if isinstance(key, tuple):
        return tuple(_with_positive_steps(k) for k in key)
    if isinstance(key, slice) and key.step is not None and key.step < 0:
        return slice(key.start, key.stop, -key.step)
    return key


def _leaf(shape, seed):
    return tape.tensor(np.random.default_rng(seed).uniform(-2, 2, shape), requires_grad=True)


@settings(max_examples=60, deadline=None)
@given(shape_and_basic_key(), st.integers(0, 2**16))
def test_getitem_and_its_gradient_match_numpy(shape_key, seed):
    shape, key = shape_key
    x = _leaf(shape, seed)
    a = x.detach().numpy()
    weights = np.random.default_rng(seed + 1).uniform(-1, 1, np.shape(a[key]))

    y = x[key]
    (g,) = tape.autograd.grad((y * tape.tensor(weights)).sum(), x)

    np.testing.assert_array_equal(y.detach().numpy(), a[key])
    expected = np.zeros(shape)
    expected[key] += weights  # basic keys select each element at most once
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(shape_and_basic_key(), st.integers(0, 2**16))
def test_getitem_native_and_retaped_sweeps_agree_to_second_order(shape_key, seed):
    shape, key = shape_key
    x = _leaf(shape, seed)

    def grads():
        (g,) = tape.autograd.grad((x[key] ** 3).sum(), x, create_graph=True)
        (h,) = tape.autograd.grad((g * g).sum(), x)
        return g.detach().numpy(), h.numpy()
    native = grads()
    with force_retaped():
        retaped = grads()
    for n, r in zip(native, retaped):
        np.testing.assert_allclose(n, r, rtol=1e-12)


@settings(max_examples=60, deadline=None)
@given(shape_and_basic_key(), st.integers(0, 2**16))
def test_setitem_and_its_gradients_match_numpy(shape_key, seed):
    shape, key = shape_key
    x = _leaf(shape, seed)
    a = x.detach().numpy()
    region = np.shape(a[key])
    v = _leaf(region, seed + 1)

    out = x * 1.0
    out[key] = v * 2.0
    gx, gv = tape.autograd.grad((out * out).sum(), [x, v])

    expected = np.array(a, copy=True)
    expected[key] = v.detach().numpy() * 2.0
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-12)
    kept = np.ones(shape, bool)
    kept[key] = False
    np.testing.assert_allclose(gx.numpy(), np.where(kept, 2 * a, 0.0), rtol=1e-12)
    np.testing.assert_allclose(gv.numpy(), 8 * v.detach().numpy(), rtol=1e-12)
