"""Properties of broadcasting, drawn by hypothesis: results match NumPy, and
gradients sum back to each input's shape."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tape
from tape._engine import force_retaped

SHAPES = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3)


def _inputs(shapes, seed):
    rng = np.random.default_rng(seed)
    return [tape.tensor(rng.uniform(0.5, 2.0, s), requires_grad=True) for s in shapes.input_shapes]


@settings(max_examples=40, deadline=None)
@given(SHAPES, st.integers(0, 2**16))
def test_binary_ops_broadcast_like_numpy(shapes, seed):
    x, y = _inputs(shapes, seed)
    out = (x * y + x / y - y).sin()
    a, b = x.detach().numpy(), y.detach().numpy()
    np.testing.assert_allclose(out.detach().numpy(), np.sin(a * b + a / b - b), rtol=1e-12)


def _sum_to(a, shape):
    """NumPy reference for un-broadcasting: sum `a` down to `shape`."""
    a = a.sum(axis=tuple(range(a.ndim - len(shape))))
    axes = tuple(k for k, d in enumerate(shape) if d == 1 and a.shape[k] != 1)
    return a.sum(axis=axes, keepdims=True).reshape(shape)


@settings(max_examples=40, deadline=None)
@given(SHAPES, st.integers(0, 2**16))
def test_gradients_sum_back_to_input_shapes(shapes, seed):
    x, y = _inputs(shapes, seed)
    gx, gy = tape.autograd.grad((x * y).sum(), [x, y])
    a, b = x.detach().numpy(), y.detach().numpy()
    full = shapes.result_shape
    np.testing.assert_allclose(gx.numpy(), _sum_to(np.broadcast_to(b, full), a.shape), rtol=1e-12)
    np.testing.assert_allclose(gy.numpy(), _sum_to(np.broadcast_to(a, full), b.shape), rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(SHAPES, st.integers(0, 2**16))
def test_sums_and_differences_send_g_back_with_their_partials_signs(shapes, seed):
    # partials 1 and -1: the native sweep sums g straight into a broadcast input
    x, y = _inputs(shapes, seed)
    g = np.random.default_rng(seed + 1).uniform(-1.0, 1.0, shapes.result_shape)
    for out, sx, sy in ((x + y, 1.0, 1.0), (x - y, 1.0, -1.0), (y - x, -1.0, 1.0)):
        gx, gy = tape.autograd.grad(out, [x, y], tape.tensor(g))
        np.testing.assert_allclose(gx.numpy(), sx * _sum_to(g, x.shape), rtol=1e-12)
        np.testing.assert_allclose(gy.numpy(), sy * _sum_to(g, y.shape), rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(SHAPES, st.integers(0, 2**16))
def test_native_and_retaped_sweeps_agree_under_broadcasting(shapes, seed):
    x, y = _inputs(shapes, seed)

    def grads():
        return [g.numpy() for g in tape.autograd.grad(((x + y) * x).exp().sum(), [x, y])]
    native = grads()
    with force_retaped():
        retaped = grads()
    for n, r in zip(native, retaped):
        np.testing.assert_allclose(n, r, rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(SHAPES, st.integers(0, 2**16))
def test_second_order_sums_back_through_broadcasting(shapes, seed):
    x, y = _inputs(shapes, seed)
    (gx,) = tape.autograd.grad(((x * y) ** 2).sum(), x, create_graph=True)
    (gy,) = tape.autograd.grad(gx.sum(), y)
    a, b = x.detach().numpy(), y.detach().numpy()
    full = shapes.result_shape
    np.testing.assert_allclose(gx.detach().numpy(), _sum_to(np.broadcast_to(2 * a * b * b, full), a.shape),
                               rtol=1e-12)
    np.testing.assert_allclose(gy.numpy(), _sum_to(np.broadcast_to(4 * a * b, full), b.shape), rtol=1e-12)


def test_a_bias_is_an_input_of_the_add_node_itself():
    x = tape.ones(4, 3)
    b = tape.zeros(3, requires_grad=True)
    out = x + b
    assert out.grad_fn.name() == "AddBackward0"
    assert out.grad_fn.next_functions[0][0] is None
    assert out.grad_fn.next_functions[1][0].variable is b


@settings(max_examples=30, deadline=None)
@given(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), st.data())
def test_sum_over_any_dims_has_gradient_one(shape, data):
    dims = data.draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, unique=True))
    keepdim = data.draw(st.booleans())
    x = tape.ones(*shape, requires_grad=True)
    out = x.sum(dim=tuple(dims), keepdim=keepdim)
    assert out.shape == np.ones(shape).sum(axis=tuple(dims), keepdims=keepdim).shape
    (g,) = tape.autograd.grad(out.sum(), x)
    assert np.array_equal(g.numpy(), np.ones(shape))


def test_one_element_constant_of_any_ndim_broadcasts_in_the_graph():
    x = tape.ones(3, requires_grad=True)

    (x * tape.tensor([[2.0]])).sum().backward()

    assert x.grad.tolist() == [2.0, 2.0, 2.0]


@settings(max_examples=40, deadline=None)
@given(SHAPES, st.integers(0, 2**16), st.sampled_from(["tensor", "ndarray"]),
       st.sampled_from(["+", "-", "*", "/", "**"]), st.booleans())
def test_a_constant_operand_gives_the_gradient_of_a_grad_requiring_one(shapes, seed, kind, op, swap):
    # a constant operand is recorded only when a partial reads it (x * c, not
    # x - c): either way x's gradient is what it is with c requiring grad
    x, y = _inputs(shapes, seed)
    if swap:
        x, y = y, x
    constant = y.detach() if kind == "tensor" else y.detach().numpy()
    apply = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
             "/": lambda a, b: a / b, "**": lambda a, b: a ** b}[op]

    (expected,) = tape.autograd.grad(apply(x, y).sin().sum(), x)
    out = apply(x, constant)
    (got,) = tape.autograd.grad(out.sin().sum(), x)

    np.testing.assert_allclose(out.detach().numpy(), apply(x.detach().numpy(), y.detach().numpy()),
                               rtol=1e-12)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12)
