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


# -- nodes of several outputs ---------------------------------------------------
X = np.arange(12.0).reshape(4, 3) / 5


def test_the_parts_of_unbind_are_the_outputs_of_one_node():
    x = tape.tensor(X, requires_grad=True)
    u = x.unbind(0)
    assert type(u[2].grad_fn).__name__ == "UnbindBackward0"
    assert u[0].grad_fn == u[2].grad_fn
    assert [t.output_nr for t in u] == [0, 1, 2, 3]
    assert edges(u[1] * u[3]) == [("UnbindBackward0", 1), ("UnbindBackward0", 3)]
    assert edges(u[1]) == [("AccumulateGrad", 0)]


@pytest.mark.parametrize("parts, name, numbers", [
    (lambda x: x.split(1), "SplitBackward0", [0, 1, 2, 3]),
    (lambda x: x.split([1, 3]), "SplitWithSizesBackward0", [0, 1]),
    (lambda x: x.chunk(2), "SplitBackward0", [0, 1]),
    (lambda x: x.unbind(1), "UnbindBackward0", [0, 1, 2]),
])
def test_split_and_chunk_number_their_outputs(parts, name, numbers):
    x = tape.tensor(X, requires_grad=True)
    out = parts(x)
    assert {type(t.grad_fn).__name__ for t in out} == {name}
    assert len({t.grad_fn for t in out}) == 1
    assert [t.output_nr for t in out] == numbers


def test_a_functions_outputs_are_numbered_by_their_place():
    class F(tape.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * 2, 5, b * 3

        @staticmethod
        def backward(ctx, g1, g2, g3):
            return g1, g3

    a, b = tape.tensor([1.0, 2.0], requires_grad=True), tape.tensor([3.0, 4.0], requires_grad=True)
    o = F.apply(a, b)
    assert (o[0].output_nr, o[2].output_nr) == (0, 2)
    assert edges(o[0] + o[2]) == [("FBackward", 0), ("FBackward", 2)]


def test_a_multi_output_nodes_hooks_run_once_on_all_its_gradients():
    x = tape.tensor(X, requires_grad=True)
    u = x.unbind(0)
    seen = []
    u[0].grad_fn.register_prehook(lambda go: seen.append(("pre", [None if g is None else g.shape for g in go])))
    u[0].grad_fn.register_hook(lambda gi, go: seen.append(("post", [g.shape for g in gi], len(go))))
    (u[1].sum() + u[2].sum() * 2).backward()
    # PyTorch 2.13: pre [None, (3,), (3,), None]; post [(4, 3)] 4
    assert seen == [("pre", [None, (3,), (3,), None]), ("post", [(4, 3)], 4)]
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0, 0], [1, 1, 1], [2, 2, 2], [0, 0, 0]])


def test_a_prehook_replaces_the_gradients_of_every_output():
    x = tape.tensor(X, requires_grad=True)
    a, b = x.split(2)
    a.grad_fn.register_prehook(lambda go: tuple(None if g is None else g * 10 for g in go))
    (a.sum() + 2 * b.sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[10] * 3] * 2 + [[20] * 3] * 2)


def test_compaction_keeps_a_nodes_outputs_together():
    x = tape.tensor(X, requires_grad=True)
    u = list(x.unbind(0))
    del u[1]  # output 1's tensor dies; its row stays for the others' numbering
    gc.collect()
    for _ in range(100):
        (x * 2).exp()
    tp = tape._tape.state.tape
    tp.compact()
    assert [t.output_nr for t in u] == [0, 2, 3]
    assert edges(u[1] * u[2]) == [("UnbindBackward0", 2), ("UnbindBackward0", 3)]
    (u[0] + 2 * u[1] + 3 * u[2]).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1] * 3, [0] * 3, [2] * 3, [3] * 3])


def test_second_order_through_the_outputs_of_unbind():
    x = tape.tensor(X, requires_grad=True)
    u = x.unbind(1)
    (g,) = tape.autograd.grad((u[0] ** 2 * u[2]).sum(), x, create_graph=True)
    (gg,) = tape.autograd.grad(g.sum(), x)
    expected = np.zeros((4, 3))
    expected[:, 0] = 2 * X[:, 2] + 2 * X[:, 0]
    expected[:, 2] = 2 * X[:, 0]
    np.testing.assert_allclose(gg.numpy(), expected)


# -- ops of three inputs --------------------------------------------------------
R = np.random.default_rng(7)
I3, M24, M43, V4, I2 = R.standard_normal(3), R.standard_normal((2, 4)), R.standard_normal((4, 3)), R.standard_normal(4), \
    R.standard_normal(2)
B243, B234 = R.standard_normal((5, 2, 4)), R.standard_normal((5, 4, 3))
A23, P13, W23 = R.standard_normal((2, 3)), R.uniform(0.5, 1, (1, 3)), R.uniform(0, 1, (2, 3))


def grads_of(*arrays):
    return [tape.tensor(a, requires_grad=True) for a in arrays]


@pytest.mark.parametrize("build, name", [
    (lambda i, a, b: tape.addmm(i, a, b, beta=0.5, alpha=2.0), "AddmmBackward0"),
    (lambda i, a, b: tape.addbmm(i, tape.stack([a] * 5), tape.stack([b] * 5)), "AddbmmBackward0"),
    (lambda i, a, b: i.addcmul(a[:, :3], b[:2], value=0.5), "AddcmulBackward0"),
    (lambda i, a, b: tape.addcdiv(i, a[:, :3], b[:2] + 3), "AddcdivBackward0"),
])
def test_an_op_of_three_inputs_is_one_node_in_pytorchs_order(build, name):
    i, a, b = grads_of(I3, M24, M43)
    out = build(i, a, b)
    assert type(out.grad_fn).__name__ == name
    assert [type(n).__name__ for n, _ in out.grad_fn.next_functions][0] == "AccumulateGrad"  # input first
    assert len(out.grad_fn.next_functions) == 3


def test_an_input_needing_no_gradient_is_a_none_edge():
    # PyTorch 2.13: [('AccumulateGrad', 0), ('AccumulateGrad', 0), (None, 0)]
    i, m1 = grads_of(I3, M24)
    assert edges(tape.addmm(i, m1, tape.tensor(M43))) == [("AccumulateGrad", 0), ("AccumulateGrad", 0), (None, 0)]
    assert edges(tape.addcmul(i, tape.tensor(A23), m1[:1, :3])) == [("AccumulateGrad", 0), (None, 0),
                                                                      ("SliceBackward0", 0)]
    assert edges(tape.lerp(tape.tensor(I3), m1[:, :3], tape.tensor(W23, requires_grad=True))) == [
        (None, 0), ("SliceBackward0", 0), ("AccumulateGrad", 0)]


def test_a_constant_factor_is_read_by_the_others_gradient():
    m1 = tape.tensor(M24, requires_grad=True)
    (g,) = tape.autograd.grad(tape.addmm(tape.tensor(I3), m1, tape.tensor(M43), alpha=2).sum(), m1)
    np.testing.assert_allclose(g.numpy(), 2 * np.ones((2, 3)) @ M43.T, rtol=1e-14)
    v = tape.tensor(V4, requires_grad=True)
    (g,) = tape.autograd.grad(tape.addmv(tape.tensor(I2), tape.tensor(M24), v, alpha=-1.5).sum(), v)
    np.testing.assert_allclose(g.numpy(), -1.5 * M24.T @ np.ones(2), rtol=1e-14)


def test_three_input_nodes_save_what_pytorchs_save():
    i, m1, m2, v, i2, b1, b2 = grads_of(I3, M24, M43, V4, I2, B243, B234)
    n = tape.addmm(i, m1, m2, beta=0.5, alpha=2.0).grad_fn
    assert (n._saved_alpha, n._saved_beta, n._saved_mat1.shape, n._saved_mat2.shape) == (2.0, 0.5, (2, 4), (4, 3))
    n = tape.addmv(i2, m1, v).grad_fn
    assert (n._saved_mat.shape, n._saved_vec.shape) == ((2, 4), (4,))
    assert tape.baddbmm(i, b1, b2).grad_fn._saved_batch2.shape == (5, 4, 3)
    a, p, w = grads_of(A23, P13, W23)
    n = tape.addcmul(i, a, p, value=0.5).grad_fn
    assert (n._saved_tensor1.shape, n._saved_tensor2.shape, n._saved_value) == ((2, 3), (1, 3), 0.5)
    n = tape.lerp(i, a, w).grad_fn
    assert type(n).__name__ == "LerpBackward1"
    assert (n._saved_self.shape, n._saved_end.shape, n._saved_weight.shape) == ((3,), (2, 3), (2, 3))


def test_saved_tensor_hooks_pack_what_pytorchs_pack_in_its_order():
    i, a, p, w, m1 = grads_of(I3, A23, P13, W23, M24)
    packed = []
    with tape.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t.shape) or t, lambda t: t):
        out = tape.lerp(i, a, w) + tape.addcdiv(i, a, p) + tape.addmm(i, m1, tape.tensor(M43))
    # PyTorch 2.13: lerp end, self, weight; addcdiv tensor1, tensor2; addmm mat2 only
    assert packed == [(2, 3), (3,), (2, 3), (2, 3), (1, 3), (4, 3)]
    out.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), np.broadcast_to(A23 - I3, (2, 3)), rtol=1e-14)


def test_a_node_hook_sees_the_inputs_gradients_in_pytorchs_order():
    i, m1, m2 = grads_of(I3, M24, M43)
    y = tape.addmm(i, m1, m2)
    shapes = []
    y.grad_fn.register_hook(lambda gi, go: shapes.append([g.shape for g in gi]))
    y.grad_fn.register_hook(lambda gi, go: (gi[0] * 0, gi[1], gi[2]))
    y.sum().backward()
    assert shapes == [[(3,), (2, 4), (4, 3)]]
    np.testing.assert_array_equal(i.grad.numpy(), np.zeros(3))
    np.testing.assert_allclose(m1.grad.numpy(), np.ones((2, 3)) @ M43.T, rtol=1e-14)
