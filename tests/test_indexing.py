"""Properties of indexing, drawn by hypothesis: for any basic key (ints,
slices with any positive step, None, ...) on any shape, x[key] and x[key] = v match
NumPy, their gradients are NumPy's scatter and mask, and the native and
re-taped sweeps agree. Basic indexing is recorded as a strided descriptor
(ops/shape.py), whose native kernels index memory directly."""
import numpy as np
import pytest
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


# PyTorch takes an int's dim away first, then indexes with the arrays; NumPy
# counts the int among the arrays. Each case: the key, PyTorch's select as a
# NumPy view, and the rest of the key, which NumPy and PyTorch read alike.
MIXED_KEYS = [
    ((0, slice(None), [1, 1, 3]), lambda a: a[0], (slice(None), [1, 1, 3])),
    ((1, slice(None), slice(None), [0, 2]), lambda a: a[1], (slice(None), slice(None), [0, 2])),
    (([0, 1], slice(None), 0), lambda a: a[:, :, 0], ([0, 1], slice(None))),
    ((0, None, slice(None), [1, 2]), lambda a: a[0], (None, slice(None), [1, 2])),
    ((0, slice(1, 3), None, [1, 2], slice(None, None, 2)), lambda a: a[0],
     (slice(1, 3), None, [1, 2], slice(None, None, 2))),
    ((Ellipsis, 0, [1, 2]), lambda a: a[:, :, 0], (Ellipsis, [1, 2])),
    ((0, Ellipsis, [1, 2]), lambda a: a[0], (Ellipsis, [1, 2])),
    ((0, slice(None), [[1], [2]]), lambda a: a[0], (slice(None), [[1], [2]])),
    (([0, 1], 0, slice(None), [1, 2]), lambda a: a[:, 0], ([0, 1], slice(None), [1, 2])),
    ((0, slice(None), [True, False, True, True]), lambda a: a[0], (slice(None), [True, False, True, True])),
    ((-1, slice(2, None), [0, -1]), lambda a: a[-1], (slice(2, None), [0, -1])),
    ((0, slice(None), []), lambda a: a[0], (slice(None), np.zeros(0, np.int64))),
]


@pytest.mark.parametrize("key, select, rest", MIXED_KEYS)
def test_ints_mixed_with_index_arrays_select_first_as_pytorch_does(key, select, rest):
    a = np.arange(120.0).reshape(2, 3, 4, 5)
    expected = select(a)[rest]
    w = np.random.default_rng(0).uniform(-1, 1, expected.shape)
    x = tape.tensor(a, requires_grad=True)

    out = x[key]
    (out * tape.tensor(w)).sum().backward()
    z = tape.zeros(2, 3, 4, 5)
    z[key] = tape.tensor(w)

    grad, written = np.zeros_like(a), np.zeros_like(a)
    np.add.at(select(grad), rest, w)
    select(written)[rest] = w
    assert out.shape == expected.shape and np.array_equal(out.detach().numpy(), expected)
    assert np.array_equal(x.grad.numpy(), grad)
    assert np.array_equal(z.numpy(), written)


def test_known_value_of_an_int_and_a_list_split_by_a_slice():
    x = tape.tensor(np.arange(24.0).reshape(2, 3, 4))

    assert x[0, :, [1, 1, 3]].tolist() == [[1, 1, 3], [5, 5, 7], [9, 9, 11]]


@pytest.mark.parametrize("value_requires_grad", [False, True])
@pytest.mark.parametrize("key", [[0, 2], [True, False, True]])
def test_index_put_broadcasts_its_value_while_recording(key, value_requires_grad):
    x = tape.ones(3, 4, requires_grad=True)
    v = tape.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=value_requires_grad)
    z = x * 1
    z[tape.tensor(key)] = v * 2 if value_requires_grad else v

    gx, *gv = tape.autograd.grad((z * z).sum(), [x] + ([v] if value_requires_grad else []))

    scale = 2.0 if value_requires_grad else 1.0
    assert z.tolist() == [[scale * k for k in (1, 2, 3, 4)], [1.0] * 4, [scale * k for k in (1, 2, 3, 4)]]
    assert gx.tolist() == [[0.0] * 4, [2.0] * 4, [0.0] * 4]
    if value_requires_grad:  # two rows of 2 * (2 v) * 2
        assert gv[0].tolist() == [16.0, 32.0, 48.0, 64.0]


def test_index_put_of_a_broadcast_value_differentiates_twice():
    # PyTorch's figures for the same script
    x = tape.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]],
                    requires_grad=True)
    z = x * 1
    z[tape.tensor([0, 2])] = x[1] ** 2

    (g,) = tape.autograd.grad((z * z).sum(), x, create_graph=True)
    (h,) = tape.autograd.grad(g.sum(), x)

    assert g.tolist() == [[0.0] * 4, [1010.0, 1740.0, 2758.0, 4112.0], [0.0] * 4]
    assert h.tolist() == [[0.0] * 4, [602.0, 866.0, 1178.0, 1538.0], [0.0] * 4]


def test_advanced_index_assignment_requires_the_value_s_dtype_as_pytorch():
    # PyTorch 2.13: index_put_ refuses another dtype; a 0-d value into one bool mask is masked_fill_, which casts
    message = "Index put requires the source and destination dtypes match, got Float for the destination and Double"
    for key, value in ((tape.tensor([0]), tape.tensor(3.0)), ([0, 1], tape.tensor([3.0, 4.0])),
                       (tape.tensor([True, False, True]), tape.tensor([3.0, 4.0])), ((0, tape.tensor([1])), tape.tensor(3.0))):
        t = tape.zeros(2, 3, dtype=tape.float32) if isinstance(key, tuple) else tape.zeros(3, dtype=tape.float32)
        with pytest.raises(RuntimeError, match=message):
            t[key] = value
        assert not t.any()
    t = tape.zeros(2, 3, dtype=tape.float32)
    t[tape.tensor([True, False])] = tape.tensor(3.0)
    t[..., tape.tensor([False, True, False])] = tape.tensor(2)
    t[tape.tensor([1])] = 5.0
    assert t.tolist() == [[3.0, 2.0, 3.0], [5.0, 5.0, 5.0]]


def test_index_put_accumulates_repeated_positions_and_differentiates_as_pytorch():
    # PyTorch 2.13: the values at a repeated position add up, and both inputs get their gradients
    x = tape.tensor([[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0]], requires_grad=True)
    v = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.index_put((tape.tensor([0, 0, 2]), tape.tensor([1, 1, 3])), v, accumulate=True)
    assert y.tolist() == [[0.0, 4.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 14.0]]
    assert (type(y.grad_fn).__name__, y.grad_fn._saved_accumulate) == ("IndexPutBackward0", True)
    gx, gv = tape.autograd.grad((y * y).sum(), (x, v))
    assert gv.tolist() == [8.0, 8.0, 28.0]
    assert gx.tolist() == [[0.0, 8.0, 4.0, 6.0], [8.0, 10.0, 12.0, 14.0], [16.0, 18.0, 20.0, 28.0]]
    q = tape.zeros(5).index_put_([tape.tensor([4, 4, 0])], tape.tensor([1.0, 2.0, 3.0]), True)
    assert q.tolist() == [3.0, 0.0, 0.0, 0.0, 3.0]
    masked = tape.zeros(3, 2).index_put_((tape.tensor([True, False, True]),), tape.tensor(7.0), accumulate=True)
    assert masked.tolist() == [[7.0, 7.0], [0.0, 0.0], [7.0, 7.0]]


@pytest.mark.parametrize("call, error, message", [
    (lambda x, v: x.clone().index_put_((tape.tensor([0]),), 1.0), TypeError,
     "index_put_(): argument 'values' (position 2) must be Tensor, not float"),
    (lambda x, v: x.clone().index_put_([0], v), TypeError, "expected Tensor as element 0 in argument 0, but got int"),
    (lambda x, v: x.clone().index_put_(tape.tensor([0]), v), TypeError,
     "index_put_(): argument 'indices' (position 1) must be tuple of Tensors, not Tensor"),
    (lambda x, v: tape.index_put(x, (tape.tensor([0]),), v.float()), RuntimeError,
     "Index put requires the source and destination dtypes match, got Double for the destination and Float for "
     "the source."),
    (lambda x, v: x.index_put_((tape.tensor([0]),), v), RuntimeError,
     "a leaf Variable that requires grad is being used in an in-place operation."),
    (lambda x, v: x.clone().index_put_((tape.tensor([0]),) * 3, v), IndexError,
     "too many indices for tensor of dimension 2 (got 3)"),
    (lambda x, v: x.index_put((tape.tensor([5]),), v, accumulate=True), IndexError,
     "index 5 is out of bounds for dimension 0 with size 3"),
])
def test_index_put_refuses_bad_arguments_as_pytorch(call, error, message):
    x = tape.zeros(3, 4, requires_grad=True)
    with pytest.raises(error) as info:
        call(x, tape.ones(4))
    assert str(info.value) == message
    assert x.grad is None and not x.detach().any()
