"""Graph and autograd semantics, as PyTorch users know them: grad_fn nodes and
next_functions, leaves, the options of backward and autograd.grad, detach and
.data, grad modes, version counters and recorded in-place ops, dtypes, printing.
"""
import gc
import math
import re
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

import tape
from tape import autograd


# -- the issue example ----------------------------------------------------------

def _issue_graph():
    x = tape.tensor(2.0, requires_grad=True)
    y = x * x
    z = y.sin()
    return x, y, z


def test_issue_example_grad_fn_repr():
    _, _, z = _issue_graph()

    assert repr(z.grad_fn).startswith("<SinBackward0 object at 0x")


def test_issue_example_next_functions_point_at_the_mul_node():
    _, y, z = _issue_graph()

    assert z.grad_fn.next_functions == ((y.grad_fn, 0),)


def test_issue_example_next_function_is_a_mul_backward():
    _, _, z = _issue_graph()

    (node, _), = z.grad_fn.next_functions

    assert type(node).__name__ == "MulBackward0"


def test_issue_example_leaves():
    x, y, _ = _issue_graph()

    assert x.is_leaf and not y.is_leaf


def test_issue_example_first_and_second_derivatives():
    x, _, z = _issue_graph()

    g, = autograd.grad(z, x, create_graph=True)
    h, = autograd.grad(g, x)

    assert (round(g.item(), 4), round(h.item(), 4)) == (-2.6146, 10.8016)


# -- grad_fn names ----------------------------------------------------------------

def _leaves():
    a = tape.tensor([[0.5, 1.0, 1.5], [2.0, 2.5, 3.0]], requires_grad=True)
    m = tape.tensor([[1.0, 2.0, 0.5], [0.0, 1.0, 3.0], [2.0, 1.0, 1.0]], requires_grad=True)
    v = tape.tensor([1.0, -2.0, 0.5], requires_grad=True)
    return a, m, v


GRAD_FN_NAMES = [
    pytest.param(lambda a, m, v: a + a, "AddBackward0", id="a + a"),
    pytest.param(lambda a, m, v: a + 1, "AddBackward0", id="a + 1"),
    pytest.param(lambda a, m, v: a - a, "SubBackward0", id="a - a"),
    pytest.param(lambda a, m, v: a - 1, "SubBackward0", id="a - 1"),
    pytest.param(lambda a, m, v: 1 - a, "RsubBackward1", id="1 - a"),
    pytest.param(lambda a, m, v: a * a, "MulBackward0", id="a * a"),
    pytest.param(lambda a, m, v: 2 * a, "MulBackward0", id="2 * a"),
    pytest.param(lambda a, m, v: a / a, "DivBackward0", id="a / a"),
    pytest.param(lambda a, m, v: a / 2, "DivBackward0", id="a / 2"),
    pytest.param(lambda a, m, v: 1 / a, "MulBackward0", id="1 / a"),
    pytest.param(lambda a, m, v: -a, "NegBackward0", id="-a"),
    pytest.param(lambda a, m, v: a ** 2, "PowBackward0", id="a ** 2"),
    pytest.param(lambda a, m, v: a ** a, "PowBackward1", id="a ** a"),
    pytest.param(lambda a, m, v: 2 ** a, "PowBackward2", id="2 ** a"),
    pytest.param(lambda a, m, v: a.exp(), "ExpBackward0", id="exp"),
    pytest.param(lambda a, m, v: a.log(), "LogBackward0", id="log"),
    pytest.param(lambda a, m, v: a.sin(), "SinBackward0", id="sin"),
    pytest.param(lambda a, m, v: a.cos(), "CosBackward0", id="cos"),
    pytest.param(lambda a, m, v: a.tanh(), "TanhBackward0", id="tanh"),
    pytest.param(lambda a, m, v: a.sigmoid(), "SigmoidBackward0", id="sigmoid"),
    pytest.param(lambda a, m, v: a.relu(), "ReluBackward0", id="relu"),
    pytest.param(lambda a, m, v: a.sqrt(), "SqrtBackward0", id="sqrt"),
    pytest.param(lambda a, m, v: a.abs(), "AbsBackward0", id="abs method"),
    pytest.param(lambda a, m, v: abs(a), "AbsBackward0", id="abs()"),
    pytest.param(lambda a, m, v: a.sum(), "SumBackward0", id="sum()"),
    pytest.param(lambda a, m, v: a.sum(0), "SumBackward1", id="sum(0)"),
    pytest.param(lambda a, m, v: a.mean(), "MeanBackward0", id="mean()"),
    pytest.param(lambda a, m, v: a.mean(1), "MeanBackward1", id="mean(1)"),
    pytest.param(lambda a, m, v: m.mm(m), "MmBackward0", id="mm"),
    pytest.param(lambda a, m, v: m @ m, "MmBackward0", id="matrix @ matrix"),
    pytest.param(lambda a, m, v: m.mv(v), "MvBackward0", id="mv"),
    pytest.param(lambda a, m, v: m @ v, "MvBackward0", id="matrix @ vector"),
    pytest.param(lambda a, m, v: v.dot(v), "DotBackward0", id="dot"),
    pytest.param(lambda a, m, v: v @ v, "DotBackward0", id="vector @ vector"),
    pytest.param(lambda a, m, v: a.reshape(3, 2), "ViewBackward0", id="reshape"),
    pytest.param(lambda a, m, v: a.view(6), "ViewBackward0", id="view"),
    pytest.param(lambda a, m, v: a.T, "PermuteBackward0", id="T"),
    pytest.param(lambda a, m, v: a.permute(1, 0), "PermuteBackward0", id="permute"),
    pytest.param(lambda a, m, v: a.t(), "TBackward0", id="t()"),
    pytest.param(lambda a, m, v: a.transpose(0, 1), "TransposeBackward0", id="transpose"),
    pytest.param(lambda a, m, v: a.mT, "TransposeBackward0", id="mT"),
    pytest.param(lambda a, m, v: v.expand(2, 3), "ExpandBackward0", id="expand"),
    pytest.param(lambda a, m, v: v.unsqueeze(0), "UnsqueezeBackward0", id="unsqueeze"),
    pytest.param(lambda a, m, v: v.unsqueeze(0).squeeze(), "SqueezeBackward0", id="squeeze()"),
    pytest.param(lambda a, m, v: v.unsqueeze(0).squeeze(0), "SqueezeBackward1", id="squeeze(0)"),
    pytest.param(lambda a, m, v: a[0], "SelectBackward0", id="a[0]"),
    pytest.param(lambda a, m, v: v[1:3], "SliceBackward0", id="v[1:3]"),
    pytest.param(lambda a, m, v: a.clone(), "CloneBackward0", id="clone"),
]


@pytest.mark.parametrize("op, name", GRAD_FN_NAMES)
def test_grad_fn_type_name_is_pytorchs(op, name):
    out = op(*_leaves())

    assert type(out.grad_fn).__name__ == name


@pytest.mark.parametrize("op, name", GRAD_FN_NAMES)
def test_node_name_is_its_type_name(op, name):
    node = op(*_leaves()).grad_fn

    assert node.name() == type(node).__name__


def test_leaf_has_no_grad_fn():
    x = tape.tensor(1.0, requires_grad=True)

    assert x.grad_fn is None


def test_result_of_constants_has_no_grad_fn():
    c = tape.tensor([1.0, 2.0])

    assert (c * c).grad_fn is None


# -- next_functions -----------------------------------------------------------------

def test_leaf_input_edge_is_accumulate_grad():
    x = tape.tensor(2.0, requires_grad=True)

    node, index = (x * 3.0).grad_fn.next_functions[0]

    assert (type(node).__name__, index) == ("AccumulateGrad", 0)


@pytest.mark.parametrize("shape", [(), (3,)])
@pytest.mark.parametrize("expr", [lambda x: 2.0 * x, lambda x: 2.0 + x])
def test_number_on_the_left_keeps_the_tensor_edge_first(expr, shape):
    # PyTorch's __rmul__/__radd__ call self.mul(other): the number is the second edge
    x = tape.ones(shape, requires_grad=True)

    (node, _), (none, _) = expr(x).grad_fn.next_functions

    assert node.variable is x and none is None


def test_accumulate_grad_repr_uses_class_name_and_name_is_torchs():
    node, _ = (tape.tensor(2.0, requires_grad=True) * 3.0).grad_fn.next_functions[0]

    assert repr(node).startswith("<AccumulateGrad object at 0x")
    assert node.name() == "torch::autograd::AccumulateGrad"


def test_accumulate_grad_variable_is_the_leaf():
    x = tape.tensor(2.0, requires_grad=True)
    c = tape.tensor(3.0)

    node, _ = (x * c).grad_fn.next_functions[0]

    assert node.variable is x


def test_constant_input_edge_is_none():
    x = tape.tensor(2.0, requires_grad=True)
    c = tape.tensor(3.0)

    assert (x * c).grad_fn.next_functions[1] == (None, 0)


def test_constant_first_operand_edge_is_none():
    x = tape.tensor(2.0, requires_grad=True)
    c = tape.tensor(3.0)

    assert (c * x).grad_fn.next_functions[0] == (None, 0)


def test_asking_the_same_tensor_twice_gives_equal_nodes():
    x = tape.tensor(2.0, requires_grad=True)
    y = x * x

    first, second = y.grad_fn, y.grad_fn

    assert first == second and hash(first) == hash(second)


def test_both_edges_to_one_leaf_are_equal():
    x = tape.tensor(2.0, requires_grad=True)

    (left, _), (right, _) = (x * x).grad_fn.next_functions

    assert left == right and hash(left) == hash(right)


def test_nodes_of_different_tensors_differ():
    x = tape.tensor(2.0, requires_grad=True)

    assert (x * x).grad_fn != (x * x).grad_fn


def test_walk_of_first_edges_ends_at_accumulate_grad():
    x = tape.tensor([0.5, 1.0], requires_grad=True)
    out = ((x * 2).sin().exp() + 1).sum()

    names = []
    fn = out.grad_fn
    while type(fn).__name__ != "AccumulateGrad":
        names.append(fn.name())
        fn = fn.next_functions[0][0]

    assert names == ["SumBackward0", "AddBackward0", "ExpBackward0", "SinBackward0", "MulBackward0"]


def test_walk_of_first_edges_ends_at_none_for_a_constant_branch():
    x = tape.tensor(2.0, requires_grad=True)
    c = tape.tensor(3.0)
    out = (c * 2).sin() * x

    assert out.grad_fn.next_functions[0][0] is None


def test_implicit_broadcast_is_not_a_node():
    a = tape.tensor(2.0, requires_grad=True)
    xs = tape.tensor([1.0, 2.0, 3.0])

    node, _ = (a * xs).grad_fn.next_functions[0]

    assert node.variable is a


# -- requires_grad and leaves -------------------------------------------------------

def test_op_with_one_input_requiring_grad_requires_grad():
    x = tape.tensor(2.0, requires_grad=True)
    c = tape.tensor(3.0)

    assert (x * c).requires_grad


def test_op_of_constants_does_not_require_grad():
    c = tape.tensor([1.0, 2.0])

    assert not (c * c + 1).requires_grad


def test_tensors_that_do_not_require_grad_are_leaves():
    c = tape.tensor([1.0, 2.0])

    assert c.is_leaf and (c * c).is_leaf


def test_result_of_an_op_on_a_grad_leaf_is_not_a_leaf():
    x = tape.tensor([1.0, 2.0], requires_grad=True)

    assert not (x + 1).is_leaf


def test_integer_tensor_does_not_require_grad():
    i = tape.tensor([1, 2])

    assert not i.requires_grad and not (i * 2).requires_grad


# -- .grad, retain_grad, accumulation -------------------------------------------------

def test_retain_grad_populates_a_non_leaf_grad():
    x = tape.tensor(3.0, requires_grad=True)
    y = x * 2
    y.retain_grad()

    (y * y).backward()

    assert y.grad.item() == 12.0


def test_autograd_grad_also_fills_a_retained_non_leaf_grad():
    # PyTorch's retains_grad hooks fire in autograd.grad too, accumulating
    x = tape.ones(2, requires_grad=True)
    y = x * 2
    y.retain_grad()
    z = (y * y).sum()
    (g,) = tape.autograd.grad(z, y, retain_graph=True)
    assert y.grad.tolist() == [4.0, 4.0] and y.grad is not g
    g.mul_(0)  # the returned gradient is not y.grad
    assert y.grad.tolist() == [4.0, 4.0]
    tape.autograd.grad(z, x, create_graph=True)
    assert y.grad.tolist() == [8.0, 8.0] and y.grad.requires_grad
    assert x.grad is None
    s = tape.tensor(2.0, requires_grad=True)
    t = s * s
    t.retain_grad()
    tape.autograd.grad(t * 3, s)
    assert t.grad.item() == 3.0


def test_retains_grad_reports_retain_grad():
    y = tape.tensor(3.0, requires_grad=True) * 2

    y.retain_grad()

    assert y.retains_grad


def test_non_leaf_grad_without_retain_grad_is_none_and_warns():
    x = tape.tensor(3.0, requires_grad=True)
    y = x * 2
    (y * y).backward()

    with pytest.warns(UserWarning, match="is not a leaf Tensor"):
        assert y.grad is None


def test_grads_accumulate_over_two_backwards_with_retain_graph():
    x = tape.tensor(3.0, requires_grad=True)
    y = x * x

    y.backward(retain_graph=True)
    y.backward()

    assert x.grad.item() == 12.0


def test_grads_accumulate_over_two_fresh_graphs():
    x = tape.tensor([1.0, 3.0], requires_grad=True)

    (x * x).sum().backward()
    (x * x).sum().backward()

    assert x.grad.tolist() == [4.0, 12.0]


def test_number_gradients_reach_every_kind_of_0d_receiver_in_one_backward():
    # the 0-d float64 leaves (c with an assigned .grad) take backward's bulk
    # path; a float32 leaf and a retained non-leaf take the general one
    a, b = tape.tensor(2.0, requires_grad=True), tape.tensor(3.0, requires_grad=True)
    h = tape.tensor(0.5, dtype=tape.float32, requires_grad=True)
    c = tape.tensor(4.0, requires_grad=True)
    c.grad = tape.tensor(1.0)
    for _ in range(2):
        ab = a * b
        ab.retain_grad()
        (ab * c + h.double() * a).backward()

    assert (a.grad.item(), b.grad.item(), c.grad.item()) == (2 * (3.0 * 4 + 0.5), 2 * 2.0 * 4, 1 + 2 * 6.0)
    assert (h.grad.item(), h.grad.dtype) == (2 * 2.0, tape.float32)
    assert ab.grad.item() == 4.0


def test_a_0d_leaf_gets_its_own_gradient_beside_empty_and_vector_leaves():
    # the flat gradients of an empty leaf (no element), a 0-d leaf and a
    # 2-vector: the 0-d leaf's is not at its row's position among them
    e, s = tape.zeros(0, requires_grad=True), tape.tensor(2.0, requires_grad=True)
    v = tape.tensor([1.0, 5.0], requires_grad=True)

    (s * v.sum() + e.sum()).backward()

    assert (s.grad.item(), v.grad.tolist(), e.grad.shape) == (6.0, [2.0, 2.0], (0,))


def test_subnormal_adjoints_of_a_decaying_chain_flush_to_zero():
    # Note [Subnormal adjoints]: the adjoint of x underflows, and in exact
    # float64 arithmetic it would stick at 4.9e-324; a's gradient, summed over
    # the chain, is the same as an exact Python-float sweep gives
    x = tape.tensor(0.5, requires_grad=True)
    a = tape.tensor(0.9, requires_grad=True)
    y, ys = x, []
    for _ in range(3000):
        ys.append(y.item())
        y = y.sin() * a + 0.1
    y.backward()
    g, grad_a = 1.0, 0.0
    for v in reversed(ys):
        grad_a += g * math.sin(v)
        g *= 0.9 * math.cos(v)
    assert 0 < g < 2.3e-308
    assert x.grad.item() == 0.0
    assert a.grad.item() == pytest.approx(grad_a, rel=1e-12)


def test_a_grad_is_not_overwritten_by_later_backwards():
    # backward() reuses one buffer for its flat gradients (engine._native)
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    first = x.grad
    x.grad = None
    (3 * x).sum().backward()
    (g,) = autograd.grad((x * x * x).sum(), x)
    (5 * x).sum().backward()

    assert first.tolist() == [2.0, 4.0]
    assert g.tolist() == [3.0, 12.0]
    assert x.grad.tolist() == [8.0, 8.0]


def test_backward_with_gradient_for_a_non_scalar():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)

    (x * x).backward(gradient=tape.tensor([1.0, 10.0, 100.0]))

    assert x.grad.tolist() == [2.0, 40.0, 600.0]


def test_backward_inputs_accumulates_only_into_those():
    a = tape.tensor(2.0, requires_grad=True)
    b = tape.tensor(5.0, requires_grad=True)

    (a * b).backward(inputs=[a])

    assert (a.grad.item(), b.grad) == (5.0, None)


def test_backward_create_graph_gives_grads_with_grad_fn():
    x = tape.tensor(3.0, requires_grad=True)

    (x ** 3).backward(create_graph=True)

    assert x.grad.grad_fn is not None


def test_autograd_grad_create_graph_can_be_differentiated_again():
    x = tape.tensor(3.0, requires_grad=True)

    g, = autograd.grad(x ** 3, x, create_graph=True)
    h, = autograd.grad(g, x)

    assert (g.item(), h.item()) == (27.0, 18.0)


def test_autograd_backward_with_grad_tensors():
    a = tape.tensor(2.0, requires_grad=True)
    b = tape.tensor(5.0, requires_grad=True)

    autograd.backward([a * a, a * b], grad_tensors=[tape.tensor(1.0), tape.tensor(2.0)])

    assert (a.grad.item(), b.grad.item()) == (14.0, 4.0)


def test_autograd_grad_with_grad_outputs():
    x = tape.tensor([1.0, 2.0], requires_grad=True)

    g, = autograd.grad(x * x, x, grad_outputs=tape.tensor([3.0, 4.0]))

    assert g.tolist() == [6.0, 16.0]


def test_autograd_grad_allow_unused_returns_none():
    a = tape.tensor(2.0, requires_grad=True)
    b = tape.tensor(5.0, requires_grad=True)

    ga, gb = autograd.grad(a * a, [a, b], allow_unused=True)

    assert (ga.item(), gb) == (4.0, None)


def test_autograd_grad_materialize_grads_returns_zeros():
    a = tape.tensor(2.0, requires_grad=True)
    b = tape.tensor([5.0, 1.0], requires_grad=True)

    _, gb = autograd.grad(a * a, [a, b], materialize_grads=True)

    assert gb.tolist() == [0.0, 0.0]


def test_autograd_grad_retain_graph_allows_a_second_call():
    x = tape.tensor(1.0, requires_grad=True)
    y = x.exp()

    first, = autograd.grad(y, x, retain_graph=True)
    second, = autograd.grad(y, x)

    assert first.item() == second.item() == pytest.approx(np.e)


def test_autograd_grad_does_not_touch_dot_grad():
    x = tape.tensor(3.0, requires_grad=True)

    autograd.grad(x * x, x)

    assert x.grad is None


# -- detach, requires_grad_, .grad assignment, .data -----------------------------------

def test_detach_does_not_require_grad():
    x = tape.tensor([1.0, 2.0], requires_grad=True)

    d = x.detach()

    assert not d.requires_grad and d.grad_fn is None


@pytest.mark.parametrize("value, updated", [(2.0, 12.0), ([2.0, 3.0], [12.0, 13.0])],
                         ids=["0-d", "1-d"])
def test_detach_shares_values(value, updated):
    x = tape.tensor(value, requires_grad=True)

    x.detach().add_(10.0)

    assert x.tolist() == updated


def test_detach_in_place_turns_a_result_into_a_leaf():
    y = tape.tensor([1.0, 2.0], requires_grad=True) * 2

    returned = y.detach_()

    assert returned is y and not y.requires_grad and y.is_leaf


def test_requires_grad_in_place_returns_the_tensor():
    t = tape.tensor([1.0, 2.0])

    returned = t.requires_grad_()

    assert returned is t and t.requires_grad


def test_requires_grad_in_place_false_turns_it_off():
    t = tape.tensor([1.0, 2.0], requires_grad=True)

    t.requires_grad_(False)

    assert not t.requires_grad


def test_grad_can_be_assigned_a_same_shape_tensor():
    p = tape.tensor([1.0, 2.0], requires_grad=True)

    p.grad = tape.tensor([5.0, 6.0])

    assert p.grad.tolist() == [5.0, 6.0]


def test_assigned_grad_accumulates():
    p = tape.tensor(3.0, requires_grad=True)
    p.grad = tape.tensor(1.5)

    (p * p).backward()

    assert p.grad.item() == 7.5


def test_backward_adds_into_the_grad_tensor_in_place():
    # as PyTorch's AccumulateGrad: the same .grad Tensor, its values updated,
    # whatever layout and dtype it has
    w = tape.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    v = tape.tensor([1.0, 2.0], dtype=tape.float32, requires_grad=True)
    h = tape.tensor([1.0, 2.0], requires_grad=True) * 1
    h.retain_grad()
    w.grad = tape.tensor([[10.0, 30.0], [20.0, 40.0]]).t()  # not contiguous
    v.grad = tape.tensor([1.0, 1.0], dtype=tape.float32)
    (w * w).sum().backward()
    (v * v).sum().backward()
    (h * h).sum().backward(retain_graph=True)
    grads = (w.grad, v.grad, h.grad)
    (w * w).sum().backward()
    (v * v).sum().backward()
    (h * 3).sum().backward()
    assert (w.grad, v.grad, h.grad) == grads  # the same Tensors
    assert w.grad.tolist() == [[14.0, 28.0], [42.0, 56.0]]
    assert v.grad.dtype == tape.float32 and v.grad.tolist() == [5.0, 9.0]
    assert h.grad.tolist() == [5.0, 7.0]


def test_grad_can_be_assigned_none():
    p = tape.tensor([1.0, 2.0], requires_grad=True)
    (p * p).sum().backward()

    p.grad = None

    assert p.grad is None


def test_grad_of_a_different_shape_cannot_be_assigned():
    p = tape.tensor([1.0, 2.0], requires_grad=True)

    with pytest.raises(RuntimeError):
        p.grad = tape.tensor([1.0, 2.0, 3.0])


@pytest.mark.parametrize("value, updated", [(3.0, 2.4), ([3.0, 1.0], [2.4, 0.8])],
                         ids=["0-d", "1-d"])
def test_data_write_through_updates_the_leaf(value, updated):
    p = tape.tensor(value, requires_grad=True)
    (p * p).sum().backward()

    p.data -= 0.1 * p.grad

    assert p.tolist() == pytest.approx(updated)


def test_data_write_through_leaves_a_usable_leaf():
    p = tape.tensor(3.0, requires_grad=True)
    for _ in range(2):
        p.grad = None
        (p * p).backward()
        p.data -= 0.1 * p.grad

    assert (p.item(), p.grad.item()) == pytest.approx((1.92, 4.8))


def _overwrite_freed_memory():
    gc.collect()
    return [np.full(1000, 7.0) for _ in range(100)]


def test_data_replaced_after_use_leaves_the_graph_its_saved_value():
    # the graph read freed memory here once: the tape held the tensor, whose array went
    w = tape.ones(1000, requires_grad=True)
    c = tape.full((1000,), 3.0)
    y = (w * c).sum()
    c.data = tape.full((1000,), 5.0)
    junk = _overwrite_freed_memory()

    y.backward()

    assert len(junk) and w.grad.tolist() == [3.0] * 1000


def test_data_of_a_saved_result_replaced_leaves_the_graph_its_saved_value():
    x = tape.ones(1000, requires_grad=True)
    e = x.exp()  # exp saves its result
    e.data = tape.zeros(1000)
    junk = _overwrite_freed_memory()

    e.sum().backward()

    assert len(junk) and x.grad.tolist() == pytest.approx([math.e] * 1000)


@pytest.mark.parametrize("write", [lambda d: d.add_(4), lambda d: d.copy_(tape.tensor(10.0)),
                                   lambda d: d.fill_(10.0)])
def test_a_write_through_data_into_a_0d_result_is_read_by_every_backward(write):
    # torch 2.13: .data shares the storage, not the version counter: graphs
    # recorded before and after read the new value, exp's saved result too
    x = tape.tensor(2.0, requires_grad=True)
    y = x * 3
    before = y * y
    write(y.data)
    after = y.sin()
    assert (y.item(), y._version) == (10.0, 0)
    assert tape.autograd.grad(before, x, retain_graph=True)[0].item() == 60.0
    assert tape.autograd.grad(after, x)[0].item() == pytest.approx(-2.517214587229357)
    e = x.exp()
    e.data.fill_(1.0)
    assert tape.autograd.grad(e * e, x)[0].item() == 2.0


# -- grad modes ---------------------------------------------------------------------

def test_no_grad_records_nothing():
    x = tape.tensor(1.0, requires_grad=True)

    with tape.no_grad():
        y = x * 2

    assert not y.requires_grad and y.grad_fn is None


def test_no_grad_disables_and_restores_grad_mode():
    with tape.no_grad():
        inside = tape.is_grad_enabled()

    assert (inside, tape.is_grad_enabled()) == (False, True)


def test_no_grad_restores_grad_mode_after_an_exception():
    with pytest.raises(ValueError), tape.no_grad():
        raise ValueError

    assert tape.is_grad_enabled()


def test_enable_grad_inside_no_grad_records():
    x = tape.tensor(1.0, requires_grad=True)

    with tape.no_grad(), tape.enable_grad():
        y = x * 2

    assert y.requires_grad


@pytest.mark.parametrize("decorate", [tape.no_grad(), tape.no_grad], ids=["no_grad()", "no_grad"])
def test_no_grad_as_decorator(decorate):
    x = tape.tensor(1.0, requires_grad=True)

    @decorate
    def double(t):
        return t * 2

    assert not double(x).requires_grad and tape.is_grad_enabled()


def test_no_grad_decorator_keeps_the_function_name():
    @tape.no_grad()
    def double(t):
        return t * 2

    assert double.__name__ == "double"


@pytest.mark.parametrize("decorate", [tape.enable_grad(), tape.enable_grad],
                         ids=["enable_grad()", "enable_grad"])
def test_enable_grad_as_decorator(decorate):
    x = tape.tensor(1.0, requires_grad=True)

    @decorate
    def double(t):
        return t * 2

    with tape.no_grad():
        y = double(x)

    assert y.requires_grad


def test_set_grad_enabled_as_a_plain_call():
    x = tape.tensor(1.0, requires_grad=True)

    tape.set_grad_enabled(False)
    try:
        y = x * 2
    finally:
        tape.set_grad_enabled(True)

    assert not y.requires_grad and tape.is_grad_enabled()


def test_set_grad_enabled_as_context_manager():
    with tape.set_grad_enabled(False):
        inside = tape.is_grad_enabled()

    assert (inside, tape.is_grad_enabled()) == (False, True)


def test_set_grad_enabled_as_decorator():
    x = tape.tensor(1.0, requires_grad=True)

    @tape.set_grad_enabled(False)
    def double(t):
        return t * 2

    assert tape.is_grad_enabled() and not double(x).requires_grad


def test_grad_mode_is_per_thread():
    seen = []
    with tape.no_grad():
        worker = threading.Thread(target=lambda: seen.append(tape.is_grad_enabled()))
        worker.start()
        worker.join()

    assert seen == [True]


def test_thread_started_inside_no_grad_records():
    x = tape.tensor(1.0, requires_grad=True)
    seen = []
    with tape.no_grad():
        worker = threading.Thread(target=lambda: seen.append((x * 2).requires_grad))
        worker.start()
        worker.join()

    assert seen == [True]


def test_inference_mode_records_nothing():
    x = tape.tensor(1.0, requires_grad=True)

    with tape.inference_mode():
        y = x * 2

    assert not y.requires_grad


def test_inference_mode_is_reported_and_restored():
    with tape.inference_mode():
        inside = (tape.is_inference_mode_enabled(), tape.is_grad_enabled())

    assert (inside, tape.is_inference_mode_enabled()) == ((True, False), False)


def test_inference_mode_false_leaves_grad_on():
    with tape.inference_mode(False):
        inside = (tape.is_inference_mode_enabled(), tape.is_grad_enabled())

    assert inside == (False, True)


@pytest.mark.parametrize("decorate", [tape.inference_mode(), tape.inference_mode],
                         ids=["inference_mode()", "inference_mode"])
def test_inference_mode_as_decorator(decorate):
    @decorate
    def mode():
        return tape.is_inference_mode_enabled()

    assert mode() and not tape.is_inference_mode_enabled()


# -- version counters and in-place ops ---------------------------------------------

def test_version_starts_at_zero():
    assert tape.zeros(3)._version == 0


IN_PLACE = [
    pytest.param(lambda t: t.add_(1.0), id="add_"),
    pytest.param(lambda t: t.sub_(1.0), id="sub_"),
    pytest.param(lambda t: t.mul_(2.0), id="mul_"),
    pytest.param(lambda t: t.div_(2.0), id="div_"),
    pytest.param(lambda t: t.zero_(), id="zero_"),
    pytest.param(lambda t: t.fill_(2.0), id="fill_"),
]


@pytest.mark.parametrize("op", IN_PLACE)
def test_in_place_op_bumps_the_version(op):
    t = tape.ones(3)

    op(t)

    assert t._version == 1


@pytest.mark.parametrize("op", IN_PLACE)
def test_in_place_op_returns_the_same_tensor(op):
    t = tape.ones(3)

    assert op(t) is t


def test_in_place_ops_chain():
    t = tape.zeros(3)

    returned = t.add_(1.0).mul_(2.0).sub_(1.0).div_(2.0)

    assert (returned is t, t._version, t.tolist()) == (True, 4, [0.5, 0.5, 0.5])


def test_augmented_assignment_is_in_place():
    t = tape.zeros(2)
    alias = t

    t += 1

    assert alias is t and t._version == 1


def test_in_place_op_on_a_result_is_recorded():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2

    y.add_(1.0)

    assert type(y.grad_fn).__name__ == "AddBackward0"


def test_gradient_through_add_in_place():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y.add_(1.0)

    y.sum().backward()

    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_gradient_through_add_and_mul_in_place():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y.add_(1.0)
    y.mul_(3.0)

    y.sum().backward()

    assert x.grad.tolist() == [6.0, 6.0, 6.0]


def test_modifying_a_value_no_backward_needs_is_allowed():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = y * 3  # its gradient, g * 3, does not need y
    y.add_(5.0)

    z.sum().backward()

    assert x.grad.tolist() == [6.0, 6.0]


@pytest.mark.parametrize("make_view", [lambda w: w.T, lambda w: w.view(4), lambda w: w.reshape(4),
                                       lambda w: w.unsqueeze(0), lambda w: w.expand(2, 2, 2),
                                       lambda w: w.permute(1, 0), lambda w: w.flatten()])
def test_view_kept_across_no_grad_updates_of_its_base(make_view):
    # a training loop that keeps W.T: each use after an update saves the
    # view's new value, so it is not "modified since it was saved"; torch
    # 2.13 regenerates the view's grad_fn after its version changed
    w = tape.ones(2, 2, requires_grad=True)
    v = make_view(w)
    for _ in range(3):
        (v * v).sum().backward()
        with tape.no_grad():
            w.sub_(0.1 * w.grad)
            w.grad.zero_()
    scale = v.numel() // w.numel()  # expand sees each element twice
    expected = (1 - 0.2 * scale) ** 3
    np.testing.assert_allclose(w.detach().numpy(), np.full((2, 2), expected))
    assert v.grad_fn.name() == "AsStridedBackward0"
    ((accumulate, _),) = v.grad_fn.next_functions
    assert accumulate.variable is w


def test_view_used_before_a_no_grad_update_still_raises():
    w = tape.ones(2, 2, requires_grad=True)
    v = w.T
    out = (v * v).sum()
    with tape.no_grad():
        w.mul_(2)

    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


def test_copying_reshape_has_its_own_version_counter():
    # reshape of a transpose copies: a change to the copy is not one to x
    x = tape.tensor([[1.0, 2.0], [3.0, 4.0]])
    w = tape.ones(2, 2, requires_grad=True)
    out = (x * w).sum()
    r = x.T.reshape(4)
    r.add_(1)

    out.backward()

    assert x._version == 0 and r._version == 1
    assert w.grad.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert x.reshape(4)._version == x._version  # a true view shares it


def test_non_contiguous_result_changed_under_no_grad_keeps_its_value():
    # its fresh row reads a contiguous copy, which once was dropped and read freed
    x = tape.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    y = (x * 1).T
    with tape.no_grad():
        y.mul_(2)
    reused = [np.full((3, 2), 777.0) for _ in range(50)]

    (y * y).sum().backward()

    assert reused and x.grad.tolist() == [[4.0, 8.0, 12.0], [16.0, 20.0, 24.0]]


def test_gradient_through_augmented_assignments_on_a_0d_result():
    x = tape.tensor(1.0, requires_grad=True)
    y = x * 2
    y += 1
    y *= 3

    y.backward()

    assert x.grad.item() == 6.0


# -- __setitem__ ------------------------------------------------------------------

def test_setitem_of_a_graph_value_is_copy_slices_and_differentiable():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    out = tape.zeros(3)

    out[0] = x[1] * 2

    assert type(out.grad_fn).__name__ == "CopySlices" and out.requires_grad
    assert out.grad_fn.name() == "torch::autograd::CopySlices"
    assert repr(out) == "tensor([4., 0., 0.], grad_fn=<CopySlices>)"
    out.sum().backward()
    assert x.grad.tolist() == [0.0, 2.0, 0.0]


def test_setitem_zeroes_the_gradient_of_what_it_overwrote():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1.0

    y[y > 1.5] = 0.0

    assert type(y.grad_fn).__name__ == "IndexPutBackward0"
    (y * x).sum().backward()
    assert x.grad.tolist() == [2.0, 0.0, 0.0]


def test_setitem_bumps_the_version_and_writes_in_place_without_grad():
    a = tape.zeros(2, 3)
    storage = a.numpy()

    a[1, 1:] = 7

    assert a._version == 1 and storage.tolist() == [[0, 0, 0], [0, 7, 7]]


def test_setitem_through_a_transposed_view_writes_the_base():
    a = tape.zeros(2, 3)

    a.t()[0] = 5.0

    assert a.tolist() == [[5.0, 0.0, 0.0], [5.0, 0.0, 0.0]]


def test_setitem_on_a_leaf_that_requires_grad_raises():
    w = tape.zeros(3, requires_grad=True)

    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an "
                                           "in-place operation."):
        w[0] = 1.0


def test_setitem_on_a_leaf_under_no_grad_keeps_it_a_leaf():
    w = tape.zeros(3, requires_grad=True)

    with tape.no_grad():
        w[0] = 5.0

    (w * w).sum().backward()
    assert w.is_leaf and w.grad.tolist() == [10.0, 0.0, 0.0]


def test_setitem_shape_mismatch_raises_pytorchs_error():
    a = tape.zeros(2, 3)

    with pytest.raises(RuntimeError, match=r"shape mismatch: value tensor of shape \[4\] cannot be "
                                           r"broadcast to indexing result of shape \[3\]"):
        a[0] = tape.ones(4)


def test_setitem_over_a_saved_value_fails_the_backward():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()  # exp saves its output

    y[0] = 0.0

    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_in_place_on_a_recorded_indexing_result_writes_through_as_copy_slices():
    # PyTorch's result is a view: the write reaches y, whose node is CopySlices
    # (values and gradients as torch 2.13 gives them)
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1.0
    part = y[0:2]
    part.mul_(10)
    with tape.no_grad():
        part[0] = 5.0
    assert y.tolist() == [5.0, 20.0, 3.0] and part.tolist() == [5.0, 20.0]
    assert type(y.grad_fn).__name__ == "CopySlices"
    y.sum().backward()
    assert x.grad.tolist() == [10.0, 10.0, 1.0]


def test_in_place_on_an_element_writes_through_chains_of_indexing():
    b = tape.zeros(3)
    b[1].fill_(5.0)
    m = tape.zeros(2, 3)
    m[1, 2].add_(7.0)
    m[0][1].fill_(5.0)
    for element in b:
        element += 1
    assert b.tolist() == [1.0, 6.0, 1.0]
    assert m.tolist() == [[0.0, 5.0, 0.0], [0.0, 0.0, 7.0]]
    w = tape.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    with tape.no_grad():
        w[0, 0].zero_()
    assert w.tolist() == [[0.0, 2.0], [3.0, 4.0]] and w.is_leaf


def test_in_place_on_elements_of_integer_tensors_and_diagonals_writes_through():
    b = tape.tensor([1, 2, 3])
    b[1].fill_(7)
    c = tape.tensor([1.0, 2.0, 3.0])
    c[tape.tensor(1)].add_(10)  # a 0-d integer tensor indexes as its int
    m = tape.tensor([[1.0, 2.0], [3.0, 4.0]])
    m.diagonal().fill_(0)
    assert b.tolist() == [1, 7, 3] and c.tolist() == [1.0, 12.0, 3.0]
    assert m.tolist() == [[0.0, 2.0], [3.0, 0.0]]
    a = tape.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    h = a * 1
    h.diagonal().mul_(3)
    (h * h).sum().backward()
    assert h.tolist() == [[3.0, 2.0], [3.0, 12.0]] and a.grad.tolist() == [[18.0, 4.0], [6.0, 72.0]]


def test_results_of_indexing_follow_an_in_place_change_to_the_tensor():
    # views in PyTorch: values and gradients as torch 2.13 gives them
    a = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 1
    v = b[1:]
    w = b[:2]
    w.mul_(10)
    b.mul_(2)
    (v * v).sum().backward()
    assert v.tolist() == [40.0, 6.0] and a.grad.tolist() == [0.0, 1600.0, 24.0]
    plain = tape.tensor([1.0, 2.0, 3.0])
    element = plain[1]
    plain[1] = 5.0
    assert element.item() == 5.0


def test_a_graph_that_saved_an_indexing_result_raises_after_its_tensor_changes():
    a = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 1
    v = b[1:]
    c = v * v
    b.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        c.sum().backward()


def test_in_place_through_indexing_is_differentiable():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = x * 2
    h[1:] += x[:2] ** 2
    h[0] *= 3
    h.sum().backward()
    assert h.tolist() == [6.0, 5.0, 10.0] and x.grad.tolist() == [8.0, 6.0, 2.0]
    y = tape.tensor([1.0, 2.0], requires_grad=True)
    b = tape.ones(4)
    b[:2].copy_(y)
    assert b.requires_grad and type(b.grad_fn).__name__ == "CopySlices"
    (b * b).sum().backward()
    assert y.grad.tolist() == [2.0, 4.0]


def test_a_parameter_changed_through_a_view_under_no_grad_takes_a_fresh_row():
    # a saved old value makes the old graph raise; new graphs use the new value
    w = tape.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    x = tape.ones(2, 2, requires_grad=True)
    old = (w * x).sum()
    with tape.no_grad():
        w[0].mul_(2)
        w.view(4)[3] = 0.0
    (w * x).sum().backward()
    assert x.grad.tolist() == [[2.0, 4.0], [3.0, 0.0]]
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        old.backward()


def test_in_place_on_an_indexed_leaf_raises_pytorchs_error():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)

    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being "
                                           "used in an in-place operation."):
        x[0:2].mul_(2)


def test_in_place_on_an_indexing_result_without_grad_writes_through():
    y = tape.tensor([1.0, 2.0, 3.0])

    y[0:2].mul_(10)

    assert y.tolist() == [10.0, 20.0, 3.0]


def test_a_leaf_detached_in_place_gets_no_gradient_from_earlier_graphs():
    # torch 2.13: no error, a.grad stays None
    a = tape.ones(3, requires_grad=True)
    y = a.sin()
    a.detach_()
    y.sum().backward()
    assert a.grad is None and not a.requires_grad


@pytest.mark.parametrize("make_view", [lambda a: a[:], lambda a: a.view(3), lambda a: a[1]])
def test_in_place_on_a_view_made_before_its_leaf_required_grad_raises_pytorchs_error(make_view):
    a = tape.ones(3)
    b = make_view(a)
    a.requires_grad = True
    with pytest.raises(RuntimeError, match="^a view of a leaf Variable that requires grad is being used in an "
                                           "in-place operation.$"):
        b.add_(5)
    assert a.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("detach", [lambda a: a[1:].detach(), lambda a: a[1:].data, lambda a: a.detach()[1:]])
def test_in_place_with_grad_on_on_a_detached_slice_writes_the_tensor_and_its_views(detach):
    # torch 2.13: allowed for a leaf; a view of the tensor follows
    a = tape.ones(3, requires_grad=True)
    detach(a).add_(1)
    assert a.tolist() == [1.0, 2.0, 2.0] and a.grad_fn is None
    b = tape.ones(3, requires_grad=True) * 1
    k = b[2]
    detach(b).mul_(3)
    assert b.tolist() == [1.0, 3.0, 3.0] and k.item() == 3.0


_ONE_ELEMENT_VIEWS = [lambda t: t.view([]), lambda t: t.reshape(()), lambda t: t.squeeze(), lambda t: t[()],
                      lambda t: t.expand(()), lambda t: t.view(1), lambda t: t.unsqueeze(0)]


@pytest.mark.parametrize("make_view", _ONE_ELEMENT_VIEWS)
def test_in_place_on_a_view_of_a_0d_result_reaches_its_gradient(make_view):
    # torch 2.13: x.grad is cos(0.5), y is sin(0.5), y.grad_fn CopySlices
    x = tape.tensor(0.5, requires_grad=True)
    y = x.clone()
    make_view(y).sin_()
    y.backward()
    assert y.item() == pytest.approx(0.479425538604203)
    assert x.grad.item() == pytest.approx(0.8775825618903728)
    assert type(y.grad_fn).__name__ == "CopySlices"


@pytest.mark.parametrize("make_view", _ONE_ELEMENT_VIEWS)
def test_a_view_of_a_0d_tensor_follows_an_in_place_change_to_it(make_view):
    x = tape.tensor(0.5)
    v = make_view(x)
    x.add_(1)
    assert v.tolist() == ([1.5] if v.ndim else 1.5)
    a = tape.tensor(0.5, requires_grad=True)
    b = a * 2
    w = make_view(b)
    b.mul_(3)
    w.sum().backward()
    assert w.tolist() == ([3.0] if w.ndim else 3.0) and a.grad.item() == 6.0


def test_a_0d_view_of_a_one_element_tensor_follows_an_in_place_change_to_it():
    x = tape.tensor([0.5])
    v = x.squeeze()
    x.mul_(3)
    assert v.item() == 1.5


@pytest.mark.parametrize("detach", [tape.Tensor.detach, lambda t: t.data])
def test_in_place_with_grad_on_a_detached_view_of_a_leaf_records_it_and_leaves_the_leaf(detach):
    # torch 2.13: allowed (a non-differentiable view), x.select requires grad, w stays a leaf
    w = tape.ones(3, requires_grad=True)
    r = tape.full((3,), 2.0, requires_grad=True)
    x = detach(w)
    x.add_(r)
    v = x.select(0, 1)
    assert v.requires_grad and type(v.grad_fn).__name__ == "SelectBackward0"
    (x * x).sum().backward()
    assert w.tolist() == [3.0, 3.0, 3.0] and w.is_leaf and w.grad is None
    assert r.grad.tolist() == [6.0, 6.0, 6.0]


@pytest.mark.parametrize("make_base", [lambda: tape.zeros(3), lambda: tape.ones(3, requires_grad=True) * 0])
def test_an_element_taken_before_an_in_place_op_with_grad_follows_its_gradient(make_base):
    # torch 2.13: k = x[0] requires grad after x.add_(r) and r.grad is [4, 0, 0]
    r = tape.full((3,), 2.0, requires_grad=True)
    x = make_base()
    k = x[0]
    x.add_(r)
    assert k.requires_grad
    (k * k).backward()
    assert k.item() == 2.0 and r.grad.tolist() == [4.0, 0.0, 0.0]


@pytest.mark.parametrize("make_view", _ONE_ELEMENT_VIEWS)
def test_in_place_on_a_view_of_a_0d_leaf_raises_pytorchs_error(make_view):
    x = tape.tensor(0.5, requires_grad=True)
    with pytest.raises(RuntimeError, match="^a view of a leaf Variable that requires grad is being used in an "
                                           "in-place operation.$"):
        make_view(x).sin_()


# -- // and % ----------------------------------------------------------------------

def test_floor_divide_matches_numpy_and_its_backward_raises_as_pytorchs():
    x = tape.tensor([1.5, -2.5, 3.0], requires_grad=True)
    y = tape.tensor([2.0, 2.0, -1.5])

    q = x // y

    assert q.tolist() == [0.0, -2.0, -2.0] and q.requires_grad
    assert q.grad_fn.name() == "torch::autograd::NotImplemented" and type(q.grad_fn).__name__ == "NotImplemented"
    assert (7 // x).tolist() == [4.0, -3.0, 2.0]
    for sweep in (lambda: (x * q).sum().backward(),
                  lambda: tape.autograd.grad((x * q).sum(), x, create_graph=True)):
        with pytest.raises(RuntimeError, match="derivative for aten::floor_divide is not implemented"):
            sweep()
    (g,) = tape.autograd.grad((x * q.detach()).sum(), x)  # a detached quotient is a constant
    assert g.tolist() == [0.0, -2.0, -2.0]
    with tape.no_grad():
        assert not (x // y).requires_grad
    (x * x).sum().backward()  # the tape still works after the error
    assert x.grad.tolist() == [3.0, -5.0, 6.0]


def test_floor_divide_broadcast_mismatch_raises_pytorchs_error():
    with pytest.raises(RuntimeError, match="The size of tensor a"):
        tape.ones(2) // tape.ones(3)


def test_remainder_zero_keeps_the_sign_of_x_as_pytorch_does():
    x = tape.tensor([3.0, -3.0])

    r = x % tape.tensor([-1.5, 1.5])

    assert [math.copysign(1.0, v) for v in r.tolist()] == [1.0, -1.0]


@pytest.mark.parametrize("op", [lambda a, b: a % b, lambda a, b: a // b])
def test_integer_division_by_zero_raises_as_pytorch_does(op):
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        op(tape.tensor([5, -5]), 0)
    value = op(tape.tensor([5.0]), 0.0).item()  # floats: nan for %, inf for //
    assert math.isnan(value) or value == math.inf


def test_remainder_grad_fn_names():
    x = tape.tensor([2.5], requires_grad=True)

    assert type((x % 2).grad_fn).__name__ == "RemainderBackward0"
    assert type((x % x.detach()).grad_fn).__name__ == "RemainderBackward1"


# -- float32 ----------------------------------------------------------------------

FLOAT32_OPS = [
    pytest.param(lambda a: a * 2.0 + 1.0, id="scalar arithmetic"),
    pytest.param(lambda a: (a * a).sin().exp(), id="transcendental"),
    pytest.param(lambda a: a * a.sum(), id="broadcast reduction"),
    pytest.param(lambda a: a.reshape(2, 1).expand(2, 3).mean(1), id="shape"),
]


@pytest.mark.parametrize("op", FLOAT32_OPS)
def test_float32_stays_float32_through_ops(op):
    a = tape.tensor([1.0, 2.0], dtype=tape.float32, requires_grad=True)

    assert op(a).dtype == tape.float32


@pytest.mark.parametrize("op", FLOAT32_OPS)
def test_float32_grads_are_float32(op):
    a = tape.tensor([1.0, 2.0], dtype=tape.float32, requires_grad=True)

    op(a).sum().backward()

    assert a.grad.dtype == tape.float32


def test_float32_0d_grad_is_float32():
    s = tape.tensor(1.5, dtype=tape.float32, requires_grad=True)

    (s * s * 2.0).backward()

    assert (s.grad.dtype, s.grad.item()) == (tape.float32, 6.0)


# -- printing and conversion -----------------------------------------------------

def test_repr_of_a_0d_leaf():
    assert repr(tape.tensor(2.0, requires_grad=True)) == "tensor(2., requires_grad=True)"


def test_repr_of_a_result():
    x = tape.tensor([1.0, 2.0], requires_grad=True)

    assert repr(x * 1) == "tensor([1., 2.], grad_fn=<MulBackward0>)"


def test_repr_shows_a_non_default_dtype():
    x = tape.tensor([1.0, 2.0], dtype=tape.float32, requires_grad=True)

    assert repr(x * 1) == "tensor([1., 2.], dtype=tape.float32, grad_fn=<MulBackward0>)"


def test_repr_pads_elements_to_a_common_width():
    assert repr(tape.tensor([2.0, 40.0, 600.0])) == "tensor([  2.,  40., 600.])"


def test_format_of_a_0d_tensor():
    loss = tape.tensor(1.23456, requires_grad=True) * 1

    assert f"{loss:.4f}" == "1.2346"


def test_item_works_on_a_tensor_that_requires_grad():
    assert tape.tensor(3.5, requires_grad=True).item() == 3.5


def test_tolist_works_on_a_tensor_that_requires_grad():
    assert tape.tensor([1.0, 2.0], requires_grad=True).tolist() == [1.0, 2.0]


@pytest.mark.parametrize("convert", [lambda t: t.numpy(), np.asarray], ids=["numpy()", "np.asarray"])
def test_numpy_refuses_a_tensor_that_requires_grad(convert):
    t = tape.tensor([1.0, 2.0], requires_grad=True)

    with pytest.raises(RuntimeError, match=r"Use tensor\.detach\(\)\.numpy\(\) instead"):
        convert(t)


@pytest.mark.parametrize("op, dtype", [(tape.sin, tape.bool), (tape.exp, tape.int8), (tape.sin, tape.int16),
                                       (tape.log, tape.uint8), (tape.sigmoid, tape.uint8),
                                       (tape.sigmoid, tape.bool), (tape.sqrt, tape.int32)])
def test_float_functions_of_integers_compute_in_the_default_dtype(op, dtype):
    # NumPy computes sin of a bool or int8 in float16 (0.8413 for sin(1)), and
    # -x of a uint8 wraps around; PyTorch computes in its default dtype
    values = [1, 2] if dtype != tape.bool else [True, False]

    out = op(tape.tensor(values, dtype=dtype))

    expected = op(tape.tensor([float(v) for v in values]))
    assert out.dtype == tape.float64 and out.tolist() == expected.tolist()


def test_true_division_of_small_integers_is_exact_to_float64():
    out = tape.tensor([1, 2], dtype=tape.int8) / tape.tensor([3, 3], dtype=tape.int8)

    assert out.dtype == tape.float64 and out.tolist() == [1 / 3, 2 / 3]


@pytest.mark.parametrize("make", [lambda v: tape.tensor(v, requires_grad=True),
                                  lambda v: tape.tensor([v], requires_grad=True)])
def test_relu_of_minus_infinity_is_zero_with_zero_gradient(make):
    x = make(-math.inf)

    y = tape.relu(x)
    y.sum().backward()

    assert y.tolist() in (0.0, [0.0]) and x.grad.tolist() in (0.0, [0.0])


def test_sums_of_unsigned_integers_are_int64():
    x = tape.tensor([200, 100], dtype=tape.uint8)

    assert (x.sum().dtype, x.sum().item()) == (tape.int64, 300)
    assert (x.cumsum(0).dtype, x.cumsum(0).tolist()) == (tape.int64, [200, 300])


def test_a_uint8_index_is_a_mask_with_pytorchs_deprecation_warning():
    x = tape.tensor([[0, 1], [2, 3], [4, 5]])

    with pytest.warns(UserWarning, match="indexing with dtype tape.uint8 is now deprecated"):
        picked = x[tape.tensor([1, 0, 1], dtype=tape.uint8)]

    assert picked.tolist() == [[0, 1], [4, 5]]


def test_log_softmax_keeps_the_precision_of_large_logits():
    # PyTorch's figures: the max is taken away before the log-sum, not added back
    assert tape.log_softmax(tape.tensor([1e10, 1e10 + 1]), 0).tolist() == [-1.3132616875182228,
                                                                          -0.31326168751822286]
    assert tape.log_softmax(tape.tensor([1e16, 1e16]), 0).tolist() == [-math.log(2)] * 2


def test_round_to_decimals_as_pytorch_computes_it():
    x = tape.tensor([1.2345, -2.675, 3.5], requires_grad=True)

    y = tape.round(x, decimals=2)
    y.sum().backward()

    # PyTorch's figures: x * 100 rounded half to even, over 100 (not Python's decimal rounding)
    assert y.tolist() == [1.23, -2.68, 3.5] and type(y.grad_fn).__name__ == "RoundBackward1"
    assert x.grad.tolist() == [0.0, 0.0, 0.0]
    assert x.round(decimals=-1).tolist() == [0.0, -0.0, 0.0]
    assert tape.round(tape.tensor(2.675), decimals=2).item() == 2.68


def test_sign_of_bools_and_logsumexp_of_integers_compute_as_pytorchs():
    assert tape.sign(tape.tensor([True, False])).tolist() == [True, False]
    assert tape.logsumexp(tape.tensor([True, False]), 0).item() == math.log(math.e + 1)
    assert tape.logsumexp(tape.tensor([1, 2]), 0).dtype == tape.float64


def test_a_one_element_tensor_in_a_list_is_an_element():
    assert tape.tensor([tape.tensor([1.0]), tape.tensor(2.5)]).tolist() == [1.0, 2.5]
    assert tape.tensor([[tape.tensor(1)], [tape.tensor(3)]]).tolist() == [[1], [3]]


@pytest.mark.parametrize("make", [lambda v: tape.tensor(v), lambda v: tape.tensor([v])])
def test_square_root_power_of_minus_infinity_is_nan_in_any_shape(make):
    # x ** 0.5 is sqrt(x), as PyTorch computes it; Python's -inf ** 0.5 is inf
    assert math.isnan(float((make(-math.inf) ** 0.5).sum()))


def test_inference_mode_false_turns_grad_on_inside_no_grad():
    with tape.no_grad():
        with tape.inference_mode(False):
            assert tape.is_grad_enabled()
        assert not tape.is_grad_enabled()


def test_where_of_empty_inputs_broadcasts_their_gradients():
    x = tape.zeros(0, 3, requires_grad=True)
    y = tape.zeros(1, 3, requires_grad=True)

    gx, gy = tape.autograd.grad(tape.where(x > 0, x, y).sum(), (x, y))

    assert gx.shape == (0, 3) and gy.tolist() == [[0.0, 0.0, 0.0]]


@pytest.mark.parametrize("write", [lambda v: v.data.mul_(10), lambda v: v.detach().mul_(10)],
                         ids=["data", "detach"])
@pytest.mark.parametrize("key", [0, (slice(None), 0), slice(1, None)])
def test_writing_through_data_or_detach_of_a_slice_reaches_the_tensor(write, key):
    # a slice is a view in PyTorch, and so are its .data and detach()
    w = tape.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    held = w[key]
    expected = np.array([[1.0, 2.0], [3.0, 4.0]])
    expected[key] *= 10

    write(w[key])

    assert w.tolist() == expected.tolist() and held.tolist() == expected[key].tolist()


def test_a_slice_sees_an_in_place_change_made_through_data():
    w = tape.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    row = w[0]

    w.data.mul_(2)

    assert row.tolist() == [2.0, 4.0]


def test_detach_of_a_slice_shares_the_version_counter_and_data_does_not():
    w = tape.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    saved = (w * w).sum()
    unsaved = (w * 2).sum()
    w[0].data.fill_(0.0)
    unsaved.backward()  # .data is not tracked, as in PyTorch

    w[0].detach().fill_(0.0)

    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        saved.backward()
    assert w.grad.tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_ndimension_is_dim():
    assert tape.zeros(2, 3).ndimension() == 2


def test_sum_of_a_bool_tensor_is_int64():
    total = tape.tensor([True, False, True]).sum()

    assert (total.dtype, total.item()) == (tape.int64, 2)


@pytest.mark.parametrize("update", [lambda p: p.add_(1.0), lambda p: p.fill_(2.0),
                                    lambda p: p.__setitem__(0, 5.0)])
def test_leaf_changed_under_no_grad_still_gets_the_gradient_of_earlier_graphs(update):
    # an optimizer step between forward and backward: PyTorch still accumulates
    p = tape.tensor([1.0, 2.0], requires_grad=True)
    before = (p * 3.0).sum()
    with tape.no_grad():
        update(p)
    after = (p * 3.0).sum()

    tape.autograd.backward([before, after])

    assert p.grad.tolist() == [6.0, 6.0]


@pytest.mark.parametrize("update", [lambda p: p.mul_(2.0), lambda p: p.sub_(1.0),
                                    lambda p: p.__setitem__(0, 5.0)])
def test_leaf_saved_by_a_graph_and_changed_under_no_grad_makes_backward_raise(update):
    # the optimizer step before backward: mul saved w, whose value is gone
    w = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = tape.tensor([0.5, -1.0, 2.0], requires_grad=True)
    loss = (w * x).sum()
    with tape.no_grad():
        update(w)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    (w * x).sum().backward()
    assert x.grad.tolist() == w.tolist()


def test_retained_gradient_follows_an_in_place_op():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    y.mul_(3)
    y.sum().backward()
    assert y.retains_grad
    assert y.grad.tolist() == [1.0, 1.0, 1.0]
    assert x.grad.tolist() == [6.0, 6.0, 6.0]


@pytest.mark.parametrize("create_graph", [False, True])
def test_grad_walks_only_the_rows_that_lead_to_its_inputs(create_graph):
    # as PyTorch's engine: the branch of w is neither run nor freed by grad(y, x)
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    w = tape.tensor([3.0, 4.0], requires_grad=True)
    h = w * 3
    h.retain_grad()
    y = x.exp().sum() + (h * h).sum()
    (gx,) = tape.autograd.grad(y, x, create_graph=create_graph)
    assert h.grad is None
    (gw,) = tape.autograd.grad(y, w, create_graph=create_graph)
    assert np.allclose(gx.tolist(), np.exp([1.0, 2.0]))
    assert gw.tolist() == [54.0, 72.0]
    assert h.grad.tolist() == [18.0, 24.0]


def test_backward_inputs_leaves_other_branches_for_a_later_backward():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    w = tape.tensor([3.0, 4.0], requires_grad=True)
    y = x.exp().sum() + w.exp().sum()
    y.backward(inputs=[x])
    assert w.grad is None
    y.backward(inputs=[w])
    assert np.allclose(w.grad.tolist(), np.exp([3.0, 4.0]))


def test_a_node_run_for_one_input_is_freed_for_the_next():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    w = tape.tensor([3.0, 4.0], requires_grad=True)
    y = (x * w).sum()
    tape.autograd.grad(y, x)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        tape.autograd.grad(y, w)


def test_create_graph_gradients_take_their_inputs_dtype():
    x32 = tape.tensor([1.0, 2.0], dtype=tape.float32, requires_grad=True)
    (g,) = tape.autograd.grad((x32 * tape.tensor(3.0)).sum(), x32, create_graph=True)
    assert g.dtype == tape.float32
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    for out in (x.float().sum(), x.sum(dtype=tape.float32), (x.float() ** 2).sum()):
        (g,) = tape.autograd.grad(out, x, create_graph=True)
        assert g.dtype == tape.float64


def test_in_place_division_by_a_tensor_that_requires_grad():
    a = tape.tensor([1.0, 2.0], requires_grad=True)
    b = tape.tensor([4.0, 8.0], requires_grad=True)
    z = a * 1
    z.div_(b)
    z.sum().backward()
    assert a.grad.tolist() == [0.25, 0.125]
    assert b.grad.tolist() == [-1 / 16, -2 / 64]


def _warnings_of_a_fresh_process(setup, statement):
    """Run `statement` twice in a new interpreter, after `setup`, catching
    every warning: (how many, the first one's text)."""
    script = ("import warnings, tape\n" + setup + "\n"
              "with warnings.catch_warnings(record=True) as caught:\n"
              "    warnings.simplefilter('always')\n"
              f"    {statement}\n    {statement}\n"
              "print(len(caught))\nprint(caught[0].message)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    count, message = out.stdout.split("\n", 1)
    return int(count), message


def test_backward_with_create_graph_warns_once_per_process():
    count, message = _warnings_of_a_fresh_process("x = tape.tensor([1.0, 2.0], requires_grad=True)",
                                                  "(x * x).sum().backward(create_graph=True)")

    assert count == 1 and message.startswith("Using backward() with create_graph=True will create a refere")


def test_float_of_a_tensor_that_requires_grad_warns_once_per_process():
    # PyTorch's warning is a TORCH_WARN_ONCE: a fresh process sees it once
    count, message = _warnings_of_a_fresh_process("x = tape.tensor(2.0, requires_grad=True)", "float(x)")

    assert count == 1 and message.startswith("Converting a tensor with requires_grad=True to a scalar")


def test_int_and_bool_of_a_tensor_that_requires_grad_do_not_warn():
    # as PyTorch: only float() warns
    x = tape.tensor(2.0, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert int(x) == 2 and bool(x)


def test_second_backward_error_is_pytorchs_text_exactly():
    x = tape.tensor(2.0, requires_grad=True)
    y = x.exp()
    y.backward()
    with pytest.raises(RuntimeError) as caught:
        y.backward()
    assert str(caught.value).endswith("if you need to access saved tensors after calling backward.")


def test_in_place_on_a_view_of_a_leaf_raises_pytorchs_error():
    x = tape.ones(2, 3, requires_grad=True)
    for view in (x.permute(1, 0), x.view(6)):
        with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being "
                                               "used in an in-place operation."):
            view.mul_(2)


def test_backward_needs_one_gradient_per_tensor():
    x = tape.tensor([1.0, 2.0], requires_grad=True)

    with pytest.raises(RuntimeError, match="got 2 tensors and 1 gradients"):
        autograd.backward([x * 2.0, x + 1.0], [tape.ones(2)])
    with pytest.raises(TypeError, match="gradients can be either Tensors or None, but got list"):
        (x * x).backward([1.0, 1.0])


@pytest.mark.parametrize("call, message", [
    (lambda y, x: autograd.grad(y, []), "`inputs` argument to `grad()` cannot be empty."),
    (lambda y, x: y.backward(inputs=[]), "`inputs` argument to `backward()` cannot be empty."),
])
def test_empty_inputs_are_refused_with_pytorchs_text(call, message):
    x = tape.tensor([1.0, 2.0], requires_grad=True)

    with pytest.raises(RuntimeError, match=re.escape(message)):
        call((x * x).sum(), x)


def test_set_grad_enabled_takes_a_bool():
    with pytest.raises(TypeError, match="argument 'enabled' \\(position 1\\) must be bool, not str"):
        tape.set_grad_enabled("yes")
    assert tape.is_grad_enabled()


def test_non_leaf_grad_that_was_assigned_is_read_without_a_warning():
    h = tape.tensor([1.0, 2.0], requires_grad=True) * 2.0
    h.grad = tape.ones(2)

    assert h.grad.tolist() == [1.0, 1.0]  # filterwarnings = error: no warning


def test_backward_inputs_makes_a_non_leaf_retain_its_gradient():
    a = tape.tensor([1.0, 2.0], requires_grad=True)
    h = a * 2.0

    (h * h).sum().backward(inputs=[h])

    assert h.retains_grad and h.grad.tolist() == [4.0, 8.0] and a.grad is None


def test_backward_inputs_refuses_a_tensor_that_does_not_require_grad():
    a = tape.tensor([1.0, 2.0], requires_grad=True)
    c = tape.tensor([1.0, 2.0])

    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has requires_grad=False"):
        (a * c).sum().backward(inputs=[c])


def test_materialized_zeros_require_grad_under_create_graph():
    b = tape.tensor([1.0, 2.0], requires_grad=True)
    unused = tape.tensor([1.0], requires_grad=True)

    (_, with_graph) = autograd.grad((b * b).sum(), [b, unused], create_graph=True, materialize_grads=True)
    (_, without) = autograd.grad((b * b).sum(), [b, unused], materialize_grads=True)

    assert with_graph.requires_grad and with_graph.grad_fn is None and not without.requires_grad


def test_a_node_is_one_object_while_it_is_referenced():
    # torch 2.13: grad_fn, the sibling outputs' grad_fn and next_functions give the same object
    a = tape.tensor([1.0, 2.0], requires_grad=True)
    y = a.exp()
    node = y.grad_fn
    assert y.grad_fn is node
    u, v = a.unbind(0)
    assert u.grad_fn is v.grad_fn
    z = y * 2
    assert z.grad_fn.next_functions[0][0] is node
    garbage = [(a * 2).sum() for _ in range(10)]
    del garbage
    tape._tape.state.tape.compact()
    assert y.grad_fn is node and z.grad_fn.next_functions[0][0] is node
