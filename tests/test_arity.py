"""Rows of any arity (Note [Tape layout]): an op of many tensor inputs is one
node, whose next_functions has one entry per input, as PyTorch's. Known
values from PyTorch 2.13."""
import gc

import numpy as np
import pytest

import tape
from tape.utils import checkpoint


def edges(t):
    return [(None if n is None else type(n).__name__, k) for n, k in t.grad_fn.next_functions]


A = np.arange(6.0).reshape(2, 3) / 7
B = np.cos(np.arange(6.0)).reshape(2, 3)
C = np.sin(np.arange(6.0)).reshape(2, 3)


def leaves():
    return (tape.tensor(A, requires_grad=True), tape.tensor(B, requires_grad=True), tape.tensor(C))


@pytest.mark.parametrize("build, expected", [
    (lambda a, b, c: tape.cat([a, b, c, a * 2], 1),
     [("AccumulateGrad", 0), ("AccumulateGrad", 0), (None, 0), ("MulBackward0", 0)]),
    (lambda a, b, c: tape.stack([a, c, b], 0), [("AccumulateGrad", 0), (None, 0), ("AccumulateGrad", 0)]),
    (lambda a, b, c: tape.hstack([a, b, c]), [("AccumulateGrad", 0), ("AccumulateGrad", 0), (None, 0)]),
    (lambda a, b, c: tape.vstack([a[0], b[0], c[0]]),
     [("UnsqueezeBackward0", 0), ("UnsqueezeBackward0", 0), (None, 0)]),
    (lambda a, b, c: tape.hstack([a[0], b[0]]), [("SelectBackward0", 0), ("SelectBackward0", 0)]),
    (lambda a, b, c: tape.cat([c, a], 0), [(None, 0), ("AccumulateGrad", 0)]),
    (lambda a, b, c: tape.cat([a], 0), [("AccumulateGrad", 0)]),
    (lambda a, b, c: tape.stack([a], 0), [("AccumulateGrad", 0)]),
])
def test_a_join_is_one_node_with_an_edge_per_tensor(build, expected):
    assert edges(build(*leaves())) == expected


def test_a_join_saves_its_dim_as_pytorchs():
    a, b, c = leaves()
    assert tape.cat([a, b, c], 1).grad_fn._saved_dim == 1
    assert tape.stack([a, b]).grad_fn._saved_dim == 0


def test_a_function_of_four_arguments_is_one_node():
    class F(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, z, w):
            return x * y * z * w

        @staticmethod
        def backward(ctx, g):
            return g, g, None, g * 3

    a, b, c = leaves()
    out = F.apply(a, c, b, a)
    assert edges(out) == [("AccumulateGrad", 0), (None, 0), ("AccumulateGrad", 0), ("AccumulateGrad", 0)]
    out.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full((2, 3), 4.0))
    assert b.grad is None


def _joined_gradients(join, n, **kwargs):
    xs = [tape.tensor(A * (k + 1), requires_grad=True) for k in range(n)]
    w = tape.tensor(np.arange(float(np.prod(join(xs, **kwargs).shape))).reshape(join(xs, **kwargs).shape))
    (join(xs, **kwargs) * w).sum().backward()
    return [x.grad.numpy() for x in xs], w.numpy()


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8])
def test_cat_of_n_tensors_sends_each_its_slice(n):
    grads, w = _joined_gradients(tape.cat, n, dim=1)
    for k, g in enumerate(grads):
        np.testing.assert_array_equal(g, w[:, 3 * k:3 * k + 3])


@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_stack_of_n_tensors_sends_each_its_slice(n, dim):
    grads, w = _joined_gradients(tape.stack, n, dim=dim)
    for k, g in enumerate(grads):
        np.testing.assert_array_equal(g, np.take(w, k, axis=dim))


def test_autograd_grad_of_an_input_past_the_second():
    xs = [tape.tensor(A * (k + 1), requires_grad=True) for k in range(5)]
    y = tape.cat(xs, 0)
    (g,) = tape.autograd.grad((y ** 3).sum(), xs[4], create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), 3 * (5 * A) ** 2)
    (gg,) = tape.autograd.grad(g.sum(), xs[4])
    np.testing.assert_allclose(gg.numpy(), 6 * (5 * A))
    # the other inputs were not walked: their graph is still there
    (g1,) = tape.autograd.grad((y ** 3).sum(), xs[1])
    np.testing.assert_allclose(g1.numpy(), 3 * (2 * A) ** 2)


def test_the_native_and_re_taped_sweeps_agree_past_the_second_input():
    xs = [tape.tensor(A * (k + 1), requires_grad=True) for k in range(5)]
    loss = (tape.stack(xs, 1).sin() * tape.cat(xs[::-1], 1).reshape(2, 5, 3)).sum()
    native = tape.autograd.grad(loss, xs, retain_graph=True)
    retaped = tape.autograd.grad(loss, xs, create_graph=True)
    for n, r in zip(native, retaped):
        np.testing.assert_allclose(n.numpy(), r.detach().numpy(), rtol=1e-15)


def test_compaction_keeps_a_join_and_renumbers_its_inputs():
    xs = [tape.tensor(A * (k + 1), requires_grad=True) for k in range(5)]
    # garbage between the inputs and the join: compaction drops it and moves them down
    parts = []
    for k, x in enumerate(xs):
        for _ in range(50):
            (x * 2).exp()
        parts.append(x * (k + 1))
    y = tape.cat(parts, 0)
    gc.collect()
    tp = tape._tape.state.tape
    before = tp.n
    tp.compact()
    assert tp.n < before
    y.sum().backward()
    for k, x in enumerate(xs):
        np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 3), k + 1.0))


def test_checkpoint_of_a_join_of_outside_tensors():
    xs = [tape.tensor(A * (k + 1), requires_grad=True) for k in range(3)]
    ys = [x.sin() for x in xs]
    out = checkpoint(lambda *ts: tape.cat(ts, 1).exp(), *ys, use_reentrant=False)
    out.sum().backward()
    for x in xs:
        np.testing.assert_allclose(x.grad.numpy(), np.exp(np.sin(x.detach().numpy())) * np.cos(x.detach().numpy()))
