"""Custom autograd functions (tape.autograd.Function), as PyTorch's: values,
gradients to second order, the ctx API, the graph nodes, PyTorch's errors,
and the lifetime of what a ctx saves. The expected values and messages were
checked side by side with PyTorch 2.13."""
import math

import numpy as np
import pytest
from test_lifetime import HEAP_GROWTH_BOUND, _in_fresh_thread, _measure

import tape
from tape.autograd import Function
from tape.autograd.function import once_differentiable


class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class Linear(Function):
    """x @ w + b and its sum: three inputs, two outputs."""

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        out = x @ w + b
        return out, out.sum()

    @staticmethod
    def backward(ctx, g_out, g_sum):
        x, w = ctx.saved_tensors
        g = g_out + g_sum
        return g @ w.T, x.T @ g, g.sum(0)


class ClampWithMax(Function):
    """clamp(x, 0, 1), and max(x) marked non-differentiable."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        peak = x.max()
        ctx.mark_non_differentiable(peak)
        return x.clamp(0.0, 1.0), peak

    @staticmethod
    def backward(ctx, g, g_peak):
        (x,) = ctx.saved_tensors
        return g * ((x >= 0) & (x <= 1)).double()


class Cube(Function):
    """The new style: forward without ctx, and setup_context."""

    @staticmethod
    def forward(x, scale=1.0):
        return scale * x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, scale = inputs
        ctx.save_for_backward(x)
        ctx.scale = scale

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * ctx.scale * x ** 2 * g, None


def _vector(values=(0.5, -1.0, 2.0)):
    return tape.tensor(list(values), requires_grad=True)


# -- values and gradients -------------------------------------------------------------

def test_custom_exp_gives_exp_and_its_gradient():
    x = _vector()
    Exp.apply(x).sum().backward()
    assert np.allclose(x.grad.numpy(), np.exp([0.5, -1.0, 2.0]))


def test_linear_with_three_inputs_and_two_outputs_gives_known_gradients():
    x = tape.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    w = tape.tensor(np.ones((3, 2)), requires_grad=True)
    b = tape.tensor([1.0, 2.0], requires_grad=True)
    out, total = Linear.apply(x, w, b)
    (out.sum() + total).backward()
    assert (x.grad.tolist(), w.grad.tolist(), b.grad.tolist()) == (
        [[4.0] * 3] * 2, [[6.0, 6.0], [10.0, 10.0], [14.0, 14.0]], [4.0, 4.0])


def test_clamp_like_gradient_is_zero_outside_the_bounds():
    x = tape.tensor([-0.5, 0.5, 1.5], requires_grad=True)
    clamped, _ = ClampWithMax.apply(x)
    clamped.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 0.0]


def test_new_style_setup_context_sees_the_default_arguments():
    x = tape.tensor(2.0, requires_grad=True)
    Cube.apply(x).backward()
    assert x.grad.item() == 12.0


def test_new_style_keyword_argument_reaches_forward_and_ctx():
    x = tape.tensor(2.0, requires_grad=True)
    Cube.apply(x, scale=2.0).backward()
    assert x.grad.item() == 24.0


def test_keyword_tensor_argument_of_old_style_is_an_input():
    class Mul(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g, 2 * g

    x, y = _vector(), _vector()
    Mul.apply(x, y=y).sum().backward()
    assert y.grad.tolist() == [2.0, 2.0, 2.0]


def test_ops_before_and_after_a_function_chain_through_it():
    s = tape.tensor(2.0, requires_grad=True)
    (Exp.apply(s * 2) * 3).sin().backward()
    assert math.isclose(s.grad.item(), 6 * math.exp(4) * math.cos(3 * math.exp(4)))


class _ReturnedTwice(Function):
    @staticmethod
    def forward(ctx, x):
        out = x.exp()
        ctx.save_for_backward(out)
        return out, out

    @staticmethod
    def backward(ctx, g1, g2):
        (out,) = ctx.saved_tensors
        return (g1 * 3 + g2) * out


@pytest.mark.parametrize("start", [0.5, [0.5, 1.0]])
def test_a_tensor_returned_twice_is_one_tensor_of_the_last_output(start):
    # torch 2.13: a is b, and its gradient comes in as the second output's
    # (the first's is zeros): x.grad is 2 exp(2 x)
    x = tape.tensor(start, requires_grad=True)
    a, b = _ReturnedTwice.apply(x)
    assert a is b and b.grad_fn.name() == "_ReturnedTwiceBackward"
    (a * b).sum().backward()
    assert x.grad.tolist() == pytest.approx([5.43656365691809, 14.7781121978613][:x.numel()] if x.ndim
                                            else 5.43656365691809)


def test_function_applied_twice_accumulates_both_paths():
    x = _vector()
    (Exp.apply(x) + Exp.apply(x)).sum().backward()
    assert np.allclose(x.grad.numpy(), 2 * np.exp([0.5, -1.0, 2.0]))


def test_nested_functions_chain():
    x = tape.tensor(0.5, requires_grad=True)
    Exp.apply(Exp.apply(x)).backward()
    assert math.isclose(x.grad.item(), math.exp(0.5) * math.exp(math.exp(0.5)))


def test_many_tensor_inputs_each_get_their_gradient():
    class WeightedSum(Function):
        @staticmethod
        def forward(ctx, *xs):
            return sum((k + 1) * x for k, x in enumerate(xs))

        @staticmethod
        def backward(ctx, g):
            return tuple((k + 1) * g for k in range(5))

    xs = [tape.tensor(float(k), requires_grad=True) for k in range(5)]
    WeightedSum.apply(*xs).backward()
    assert [x.grad.item() for x in xs] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_float32_input_gets_a_float32_gradient():
    x = tape.tensor([1.0, 2.0], dtype=tape.float32, requires_grad=True)
    Exp.apply(x).sum().backward()
    assert x.grad.dtype == tape.float32


def test_a_float64_gradient_for_a_float32_input_is_cast_to_float32():
    class Widening(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g.double()

    x = tape.tensor([1.0, 2.0], dtype=tape.float32, requires_grad=True)
    Widening.apply(x).sum().backward()
    assert x.grad.dtype == tape.float32


def test_backward_returning_a_broadcast_gradient_is_summed_to_the_input():
    class Broadcasting(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g.expand(2, 3)

    x = _vector()
    Broadcasting.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_gradient_for_an_input_that_does_not_require_grad_is_ignored():
    class Scale(Function):
        @staticmethod
        def forward(ctx, x, c):
            return x * c

        @staticmethod
        def backward(ctx, g):
            return g, g

    c = tape.ones(3)
    Scale.apply(_vector(), c).sum().backward()
    assert c.grad is None


def test_an_incoming_gradient_passed_on_is_not_changed_by_accumulation():
    class Pass(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g

    x, v = _vector(), tape.ones(3)
    y = Pass.apply(x)
    y.backward(v, retain_graph=True)
    y.backward(v)
    assert (x.grad.tolist(), v.tolist()) == ([2.0, 2.0, 2.0], [1.0, 1.0, 1.0])


def test_a_broadcast_view_returned_as_a_first_grad_accumulates():
    class Total(Function):
        @staticmethod
        def forward(ctx, x):
            return x.sum()

        @staticmethod
        def backward(ctx, g):
            return g.expand(3)

    x = _vector()
    Total.apply(x).backward()
    Total.apply(x).backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_retain_graph_lets_two_backwards_accumulate():
    x = _vector()
    y = Exp.apply(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert np.allclose(x.grad.numpy(), 2 * np.exp([0.5, -1.0, 2.0]))


def test_autograd_grad_through_a_function_leaves_grad_untouched():
    x = _vector()
    (g,) = tape.autograd.grad(Exp.apply(x).sum(), x)
    assert x.grad is None and np.allclose(g.numpy(), np.exp([0.5, -1.0, 2.0]))


def test_hook_on_a_function_output_changes_its_gradient():
    x = _vector()
    y = Exp.apply(x)
    y.register_hook(lambda g: g * 10)
    y.sum().backward()
    assert np.allclose(x.grad.numpy(), 10 * np.exp([0.5, -1.0, 2.0]))


def test_retain_grad_on_a_function_output():
    x = _vector()
    y = Exp.apply(x)
    y.retain_grad()
    (2 * y).sum().backward()
    assert y.grad.tolist() == [2.0, 2.0, 2.0]


def test_second_derivative_through_a_backward_written_with_tape_ops():
    x = _vector()
    (g,) = tape.autograd.grad(Exp.apply(x).sum(), x, create_graph=True)
    (h,) = tape.autograd.grad(g.sum(), x)
    assert np.allclose(h.numpy(), np.exp([0.5, -1.0, 2.0]))


def test_gradcheck_of_linear():
    rng = np.random.default_rng(0)
    inputs = tuple(tape.tensor(rng.standard_normal(s), requires_grad=True) for s in ((2, 3), (3, 2), (2,)))
    assert tape.autograd.gradcheck(lambda x, w, b: Linear.apply(x, w, b), inputs)


def test_gradgradcheck_of_linear():
    rng = np.random.default_rng(1)
    inputs = tuple(tape.tensor(rng.standard_normal(s), requires_grad=True) for s in ((2, 3), (3, 2), (2,)))
    assert tape.autograd.gradgradcheck(lambda x, w, b: Linear.apply(x, w, b), inputs)


def test_gradgradcheck_of_exp_and_cube():
    x = tape.tensor([0.3, -0.7], requires_grad=True)
    assert tape.autograd.gradgradcheck(lambda x: Cube.apply(Exp.apply(x), 2.0), (x,))


# -- the ctx ---------------------------------------------------------------------------

def test_forward_runs_with_grad_mode_off_and_backward_with_it_off():
    modes = []

    class Spy(Function):
        @staticmethod
        def forward(ctx, x):
            modes.append(tape.is_grad_enabled())
            return x * 1

        @staticmethod
        def backward(ctx, g):
            modes.append(tape.is_grad_enabled())
            return g

    Spy.apply(_vector()).sum().backward()
    assert modes == [False, False]


def test_backward_runs_with_grad_mode_on_under_create_graph():
    modes = []

    class Spy(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            modes.append(tape.is_grad_enabled())
            return g

    x = _vector()
    tape.autograd.grad(Spy.apply(x).sum(), x, create_graph=True)
    assert modes == [True]


def test_needs_input_grad_has_one_flag_per_argument():
    seen = []

    class Spy(Function):
        @staticmethod
        def forward(ctx, x, k, c):
            seen.append(ctx.needs_input_grad)
            return x * k * c

        @staticmethod
        def backward(ctx, g):
            return g, None, None

    Spy.apply(_vector(), 2, tape.ones(3))
    assert seen == [(True, False, False)]


def test_saved_none_comes_back_as_none_and_attributes_persist():
    seen = []

    class Spy(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, None)
            ctx.k = 3
            return x * 1

        @staticmethod
        def backward(ctx, g):
            seen.append((ctx.saved_tensors[1], ctx.k))
            return g

    Spy.apply(_vector()).sum().backward()
    assert seen == [(None, 3)]


def test_unused_output_gets_zeros_in_backward():
    seen = []

    class Two(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1, x * 2

        @staticmethod
        def backward(ctx, g1, g2):
            seen.append(g1.tolist())
            return g1 + 2 * g2

    _, second = Two.apply(_vector())
    second.sum().backward()
    assert seen == [[0.0, 0.0, 0.0]]


def test_without_materialized_grads_an_unused_output_gets_none():
    seen = []

    class Two(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 1, x * 2

        @staticmethod
        def backward(ctx, g1, g2):
            seen.append(g1)
            return 2 * g2

    _, second = Two.apply(_vector())
    second.sum().backward()
    assert seen == [None]


def test_non_differentiable_output_does_not_require_grad():
    _, peak = ClampWithMax.apply(_vector())
    assert not peak.requires_grad and peak.grad_fn is None


def test_non_differentiable_output_gets_zeros_in_backward():
    seen = []

    class Spy(ClampWithMax):
        @staticmethod
        def backward(ctx, g, g_peak):
            seen.append(g_peak.item())
            return g

    clamped, _ = Spy.apply(_vector())
    clamped.sum().backward()
    assert seen == [0.0]


def test_non_tensor_outputs_pass_through_and_get_none():
    seen = []

    class Mixed(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, 5, "label"

        @staticmethod
        def backward(ctx, g, g_number, g_label):
            seen.append((g_number, g_label))
            return 2 * g

    y, number, label = Mixed.apply(_vector())
    y.sum().backward()
    assert (number, label, seen) == (5, "label", [(None, None)])


def test_integer_output_does_not_require_grad():
    class WithMask(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x > 1

        @staticmethod
        def backward(ctx, g, g_mask):
            return 2 * g

    _, mask = WithMask.apply(_vector())
    assert not mask.requires_grad


def test_mark_dirty_makes_the_modified_input_the_output():
    class DoubleInPlace(Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return 2 * g

    x = _vector()
    h = x * 1
    y = DoubleInPlace.apply(h)
    y.sum().backward()
    assert (y is h, type(h.grad_fn).__name__, h._version, x.grad.tolist()) == (
        True, "DoubleInPlaceBackward", 2, [2.0, 2.0, 2.0])


def test_returning_an_input_gives_a_new_tensor_with_the_node():
    class Identity(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return 2 * g

    x = _vector()
    y = Identity.apply(x)
    y.sum().backward()
    assert (y is not x, y.grad_fn.name(), x.grad.tolist()) == (True, "IdentityBackward", [2.0, 2.0, 2.0])


def test_returning_a_view_of_the_input():
    class Tail(Function):
        @staticmethod
        def forward(ctx, x):
            return x[1:]

        @staticmethod
        def backward(ctx, g):
            return tape.cat([tape.zeros(1), g])

    x = _vector()
    Tail.apply(x).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0]


class _View(Function):
    @staticmethod
    def forward(ctx, x):
        return x.view(-1)

    @staticmethod
    def backward(ctx, g):
        return g


class _Head(Function):
    @staticmethod
    def forward(ctx, x):
        return x[:2]

    @staticmethod
    def backward(ctx, g):
        return tape.cat([g, g.new_zeros(1)])


class _Same(Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g


@pytest.mark.parametrize("fn, modify, name", [
    (_View, lambda y: y.mul_(2), "_View"), (_Head, lambda y: y.mul_(2), "_Head"),
    (_Same, lambda y: y.add_(1), "_Same"), (_View, lambda y: y[:1].mul_(2), "Slice")])
@pytest.mark.parametrize("non_leaf", [False, True])
def test_in_place_on_a_view_a_function_returned_raises_pytorchs_error(fn, modify, name, non_leaf):
    # torch 2.13's text, for a leaf input and a non-leaf one
    x = tape.ones(3, requires_grad=True)
    y = fn.apply(x * 1 if non_leaf else x)
    with pytest.raises(RuntimeError, match=f"^Output 0 of {name} is a view and is being modified inplace. This "
                                           "view was created inside a custom Function \\(or because an input "
                                           "was returned as-is\\) and the autograd logic to handle view\\+"
                                           "inplace would override the custom backward associated with the "
                                           "custom Function, leading to incorrect gradients. This behavior is "
                                           "forbidden. You can fix this by cloning the output of the custom "
                                           "Function.$"):
        modify(y)
    assert x.tolist() == [1.0, 1.0, 1.0]


def test_in_place_on_a_view_a_function_returned_is_allowed_without_grad():
    x = tape.ones(3)
    y = _View.apply(x)
    y.mul_(2)
    assert not y.requires_grad and x.tolist() == [2.0, 2.0, 2.0]


def test_0d_input_and_output():
    x = tape.tensor(3.0, requires_grad=True)
    Cube.apply(x).backward()
    assert x.grad.item() == 27.0


class OnceDifferentiableSquare(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


def test_once_differentiable_backward_runs_without_grad_and_gives_no_graph():
    x = _vector()
    (g,) = tape.autograd.grad(OnceDifferentiableSquare.apply(x).sum(), x, create_graph=True)
    assert (g.tolist(), g.requires_grad) == ([1.0, -2.0, 4.0], False)


def test_once_differentiable_refuses_a_second_derivative():
    x = _vector()
    y = OnceDifferentiableSquare.apply(x)
    v = tape.ones(3, requires_grad=True)
    (g,) = tape.autograd.grad(y, x, v, create_graph=True)
    with pytest.raises(RuntimeError, match="trying to differentiate twice a function that was marked "
                                           "with @once_differentiable"):
        g.sum().backward()


def test_once_differentiable_graph_is_an_error_node_over_a_new_leaf():
    # torch 2.13: torch::autograd::Error, whose one edge is the AccumulateGrad
    # of a leaf with the gradient's value (not v)
    x = _vector()
    v = tape.ones(3, requires_grad=True)
    (g,) = tape.autograd.grad(OnceDifferentiableSquare.apply(x), x, v, create_graph=True)
    node = g.grad_fn
    assert (type(node).__name__, node.name()) == ("Error", "torch::autograd::Error")
    ((accumulate, k),) = node.next_functions
    assert (accumulate.name(), k) == ("torch::autograd::AccumulateGrad", 0)
    leaf = accumulate.variable
    assert leaf is not v and leaf.is_leaf and leaf.requires_grad and leaf.tolist() == g.tolist()


# -- grad mode -----------------------------------------------------------------------------

def test_apply_under_no_grad_gives_no_grad_fn():
    with tape.no_grad():
        y = Exp.apply(_vector())
    assert y.grad_fn is None and not y.requires_grad


def test_apply_on_constants_gives_no_grad_fn():
    y = Exp.apply(tape.ones(3))
    assert y.grad_fn is None and not y.requires_grad


# -- the graph -------------------------------------------------------------------------------

def test_node_type_and_name_are_the_class_name_and_backward():
    y = Exp.apply(_vector())
    assert (type(y.grad_fn).__name__, y.grad_fn.name()) == ("ExpBackward", "ExpBackward")


def test_node_repr_and_tensor_repr_name_it():
    y = Exp.apply(tape.tensor(0.0, requires_grad=True))
    assert repr(y) == "tensor(1., grad_fn=<ExpBackward>)"


def test_next_functions_has_one_pair_per_tensor_argument():
    class Scale(Function):
        @staticmethod
        def forward(ctx, c, k, x):
            return c * k * x

        @staticmethod
        def backward(ctx, g):
            return None, None, g

    x = _vector()
    edges = Scale.apply(tape.ones(3), 2.0, x).grad_fn.next_functions
    assert (edges[0], edges[1][0].variable is x, len(edges)) == ((None, 0), True, 2)


def test_next_functions_of_many_inputs_keep_their_order():
    xs = [tape.tensor(float(k), requires_grad=True) for k in range(5)]

    class Sum(Function):
        @staticmethod
        def forward(ctx, *xs):
            return sum(xs)

        @staticmethod
        def backward(ctx, g):
            return (g,) * 5

    edges = Sum.apply(*xs).grad_fn.next_functions
    assert all(node.variable is x for (node, _), x in zip(edges, xs))


def test_all_outputs_of_one_apply_share_an_equal_node():
    x = tape.tensor(np.ones((2, 3)), requires_grad=True)
    out, total = Linear.apply(x, tape.tensor(np.ones((3, 2)), requires_grad=True), tape.ones(2))
    assert out.grad_fn == total.grad_fn and hash(out.grad_fn) == hash(total.grad_fn)


def test_downstream_edge_reaches_the_function_node():
    y = Exp.apply(_vector())
    assert (y * 2).grad_fn.next_functions[0][0] == y.grad_fn


class Pair(Function):
    """x * 2 and x + y, whose backward notes the gradients it gets."""
    seen = []

    @staticmethod
    def forward(ctx, x, y):
        return x * 2, x + y

    @staticmethod
    def backward(ctx, ga, gb):
        Pair.seen.append((None if ga is None else ga.tolist(), None if gb is None else gb.tolist()))
        return ga * 2 + gb, gb


def test_outputs_are_numbered_in_their_one_node():
    # torch 2.13: output_nr 0 and 1 of one node, which a consumer's edge names
    a, b = Pair.apply(_vector(), _vector())
    assert (a.output_nr, b.output_nr, a.grad_fn == b.grad_fn) == (0, 1, True)
    assert (b * a).grad_fn.next_functions == ((b.grad_fn, 1), (a.grad_fn, 0))


def test_output_numbers_count_the_outputs_that_are_not_differentiable():
    # torch 2.13: (mask, 3, s, t) gives s and t output_nr 2 and 3; backward
    # gets zeros for the mask, None for the number
    seen = []

    class Mixed(Function):
        @staticmethod
        def forward(ctx, x):
            mask = (x > 0).long()
            ctx.mark_non_differentiable(mask)
            return mask, 3, x.sin(), x * 1

        @staticmethod
        def backward(ctx, g_mask, g_three, g_sin, g_x):
            seen.append((g_mask.tolist(), g_three, g_x.tolist()))
            return g_sin * x.cos() + g_x

    x = tape.tensor([1.0, 2.0], requires_grad=True)
    mask, three, s, t = Mixed.apply(x)
    assert (mask.requires_grad, mask.grad_fn, three, s.output_nr, t.output_nr) == (False, None, 3, 2, 3)
    t.sum().backward()
    assert seen == [([0, 0], None, [1.0, 1.0])] and x.grad.tolist() == [1.0, 1.0]


def test_backward_runs_once_with_every_outputs_gradient():
    # torch 2.13: the unused output's gradient is materialized as zeros
    x, y = _vector(), _vector()
    a, b = Pair.apply(x, y)
    Pair.seen.clear()
    (b * 3).sum().backward()
    assert Pair.seen == [([0.0, 0.0, 0.0], [3.0, 3.0, 3.0])]
    assert (x.grad.tolist(), y.grad.tolist()) == ([3.0, 3.0, 3.0], [3.0, 3.0, 3.0])


def test_grad_with_respect_to_an_output_runs_no_backward():
    # torch 2.13: the node is on no path to the input
    a, b = Pair.apply(_vector(), _vector())
    Pair.seen.clear()
    (g,) = tape.autograd.grad((a * b).sum(), [a])
    assert Pair.seen == [] and g.tolist() == b.tolist()


def test_the_second_output_alone_keeps_the_node():
    x, y = _vector(), _vector()
    _, b = Pair.apply(x, y)
    tape._tape.state.tape.compact()
    Pair.seen.clear()
    b.sum().backward()
    assert Pair.seen == [([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])] and y.grad.tolist() == [1.0, 1.0, 1.0]


def test_tensor_hooks_of_the_outputs_run_in_the_order_of_their_first_hook():
    # torch 2.13: b, b2, c, a; a's hook sees None (no gradient reached it)
    class Three(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3, x * 4

        @staticmethod
        def backward(ctx, ga, gb, gc):
            return gb + gc

    calls = []
    a, b, c = Three.apply(_vector())
    b.register_hook(lambda g: calls.append("b"))
    c.register_hook(lambda g: calls.append("c"))
    a.register_hook(lambda g: calls.append(("a", g)))
    b.register_hook(lambda g: calls.append("b2"))
    (b.sum() + c.sum()).backward()
    assert calls == ["b", "b2", "c", ("a", None)]


def test_node_hooks_see_the_gradients_of_all_outputs():
    # torch 2.13: the pre-hook gets (None, g_b); the hook gets the inputs'
    # gradients and the same outputs' gradients
    calls = []

    def listed(gs):
        return [None if g is None else g.tolist() for g in gs]

    a, b = Pair.apply(_vector(), _vector())
    a.grad_fn.register_prehook(lambda go: calls.append(("pre", listed(go))))
    a.grad_fn.register_hook(lambda gi, go: calls.append(("post", listed(gi), listed(go))))
    b.sum().backward()
    ones = [1.0, 1.0, 1.0]
    assert calls == [("pre", [None, ones]), ("post", [ones, ones], [None, ones])]


def test_second_derivative_through_a_second_output():
    class Powers(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3, x ** 2

        @staticmethod
        def backward(ctx, g_cube, g_square):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * g_cube + 2 * x * g_square

    z = tape.tensor(2.0, requires_grad=True)
    _, square = Powers.apply(z)
    (g,) = tape.autograd.grad(square, z, create_graph=True)
    (h,) = tape.autograd.grad(g, z)
    assert (g.item(), h.item()) == (4.0, 2.0)


def test_an_output_returned_twice_is_one_tensor_numbered_last():
    # torch 2.13: one tensor, output_nr 1; backward gets zeros for output 0
    seen = []

    class Twice(Function):
        @staticmethod
        def forward(ctx, x):
            out = x * 2
            return out, out

        @staticmethod
        def backward(ctx, g0, g1):
            seen.append((g0.tolist(), g1.tolist()))
            return 2 * (g0 + g1)

    x = tape.tensor([1.0, 2.0], requires_grad=True)
    u, v = Twice.apply(x)
    assert (u is v, v.output_nr, (v * 1).grad_fn.next_functions[0][1]) == (True, 1, 1)
    v.sum().backward()
    assert seen == [([0.0, 0.0], [1.0, 1.0])] and x.grad.tolist() == [2.0, 2.0]


def test_ctx_attributes_and_saved_tensors_read_through_the_node():
    x = _vector()
    y = Cube.apply(x, 2.0)
    assert y.grad_fn.scale == 2.0 and y.grad_fn.saved_tensors[0] is x


def test_saved_output_read_through_the_node_is_in_the_graph():
    y = Exp.apply(_vector())
    assert y.grad_fn.saved_tensors[0].grad_fn == y.grad_fn


def test_an_apply_of_three_inputs_records_every_python_only_op():
    # how the python-only ops are covered (tests/test_ops.py's coverage test
    # walks grad_fn nodes, which do not show the join and output rows)
    from tape._registry import REGISTRY, opdefs
    tp = tape._tape.state.tape
    xs = [tape.tensor(np.ones((2, 2)), requires_grad=True) for _ in range(3)]
    for x in xs:
        x * 1  # registers the leaves first
    start = tp.n
    Linear.apply(*xs)
    recorded = {REGISTRY[op].name for op in tp.op[start:tp.n].tolist()}
    assert recorded == {d.name for d in opdefs() if d.python_only}


# -- errors --------------------------------------------------------------------------------------

def test_wrong_number_of_gradients_raises_pytorchs_error():
    class Two(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match=r"function TwoBackward returned an incorrect number of "
                                           r"gradients \(expected 2, got 1\)"):
        Two.apply(_vector(), _vector()).sum().backward()


def test_extra_trailing_nones_are_allowed():
    class Extra(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return 2 * g, None, None

    x = _vector()
    Extra.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_extra_gradient_tensor_raises():
    class Extra(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    with pytest.raises(RuntimeError, match=r"expected 1, got 2"):
        Extra.apply(_vector()).sum().backward()


def test_wrong_gradient_shape_raises_pytorchs_error():
    class Short(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g[:2]

    with pytest.raises(RuntimeError, match=r"Function ShortBackward returned an invalid gradient at index 0 "
                                           r"- got \[2\] but expected shape compatible with \[3\]"):
        Short.apply(_vector()).sum().backward()


def test_non_tensor_gradient_raises_pytorchs_error():
    class Number(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return 1.0

    with pytest.raises(RuntimeError, match=r"expected Variable or None \(got float\)"):
        Number.apply(_vector()).sum().backward()


def test_saving_a_non_tensor_raises_pytorchs_error():
    class SavesInt(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3)
            return x * 1

    with pytest.raises(TypeError, match="save_for_backward can only save variables, but argument 1 is of "
                                        "type int"):
        SavesInt.apply(_vector())


def test_second_backward_raises_the_freed_graph_error():
    y = Exp.apply(_vector()).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()


def test_saved_tensors_after_backward_raise_the_freed_graph_error():
    y = Exp.apply(_vector())
    y.sum().backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.grad_fn.saved_tensors


def test_saved_output_modified_in_place_raises_pytorchs_error():
    y = Exp.apply(_vector())
    with tape.no_grad():
        y.mul_(2)
    with pytest.raises(RuntimeError, match=r"one of the variables needed for gradient computation has been "
                                           r"modified by an inplace operation: \[tape.DoubleTensor \[3\]\], which "
                                           r"is output 0 of Exp, is at version 1; expected version 0"):
        y.sum().backward()


def test_saved_input_modified_in_place_raises_pytorchs_error():
    x = _vector()
    h = x * 1
    y = Cube.apply(h)
    with tape.no_grad():
        h.add_(1)
    with pytest.raises(RuntimeError, match=r"modified by an inplace operation: \[tape.DoubleTensor \[3\]\], which "
                                           r"is output 0 of Mul, is at version 1; expected version 0"):
        y.sum().backward()


def test_the_tape_works_after_a_failed_backward():
    class Short(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g[:2]

    x = _vector()
    with pytest.raises(RuntimeError):
        Short.apply(x).sum().backward()
    (x * x).sum().backward()
    assert x.grad.tolist() == [1.0, -2.0, 4.0]


def test_missing_forward_raises_pytorchs_error():
    class Bare(Function):
        pass

    with pytest.raises(NotImplementedError, match="You must implement the forward function for custom "
                                                  "autograd.Function."):
        Bare.apply(_vector())


def test_missing_backward_raises_pytorchs_error():
    class NoBackward(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

    with pytest.raises(NotImplementedError, match="You must implement either the backward or vjp method"):
        NoBackward.apply(_vector()).sum().backward()


def test_mark_dirty_on_a_leaf_that_requires_grad_raises():
    class InPlace(Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return 2 * g

    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad has been used in an in-place "
                                           "operation."):
        InPlace.apply(_vector())


def test_mark_dirty_of_an_input_not_returned_raises():
    class NotReturned(Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="Some elements marked as dirty during the forward method were not "
                                           "returned as output."):
        NotReturned.apply(_vector() * 1)


def test_anomaly_mode_names_the_function_that_returned_nan():
    class NanGrad(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")

    x = _vector()
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        anomaly_mode = tape.autograd.detect_anomaly()
    with anomaly_mode, pytest.warns(UserWarning, match="Error detected in NanGradBackward"):
        with pytest.raises(RuntimeError, match="Function 'NanGradBackward' returned nan values in its 0th "
                                               "output."):
            NanGrad.apply(x).sum().backward()


def test_instantiating_a_function_warns():
    with pytest.warns(DeprecationWarning, match="should not be instantiated"):
        Exp()


# -- lifetime -------------------------------------------------------------------------------------

def _dropped_applies():
    """Each step applies a Function that saves its output, and drops the graph without backward."""
    x = tape.tensor([0.5, -1.0, 2.0], requires_grad=True)

    def step():
        Exp.apply(x * 2).sum()

    return step


@pytest.fixture(scope="module")
def dropped_applies():
    return _measure(_dropped_applies, iterations=40_000)


def test_applies_dropped_without_backward_do_not_grow_the_tape(dropped_applies):
    assert set(dropped_applies.capacities) == {dropped_applies.capacity_at_start}


def test_applies_dropped_without_backward_do_not_grow_the_heap(dropped_applies):
    assert dropped_applies.compactions >= 2 and dropped_applies.heap_growth < HEAP_GROWTH_BOUND


def test_compaction_drops_the_ctx_of_a_dropped_graph():
    def run():
        tp = tape._tape.state.tape
        Exp.apply(tape.tensor([1.0], requires_grad=True))
        before = len(tp.python_rows)
        tp.compact()
        return before, len(tp.python_rows)

    assert _in_fresh_thread(run) == (1, 0)


def test_a_saved_output_that_died_keeps_its_row_for_a_second_derivative():
    class ExpTwice(Function):
        @staticmethod
        def forward(ctx, x):
            e = x.exp()
            ctx.save_for_backward(e)
            return e * 1, e

        @staticmethod
        def backward(ctx, g1, g2):
            (e,) = ctx.saved_tensors
            return (g1 + g2) * e

    def run():
        x = tape.tensor([0.5, 1.0], requires_grad=True)
        first = ExpTwice.apply(x)[0]  # the second output, which is saved, dies
        tape._tape.state.tape.compact()
        (g,) = tape.autograd.grad(first.sum(), x, create_graph=True)
        (h,) = tape.autograd.grad(g.sum(), x)
        return h.tolist()

    assert np.allclose(_in_fresh_thread(run), np.exp([0.5, 1.0]))


def test_backward_frees_what_the_ctx_saved():
    x = tape.tensor(np.ones(100_000), requires_grad=True)
    tp = tape._tape.state.tape
    Exp.apply(x * 2).sum().backward()
    before = tp.held_bytes
    Exp.apply(x * 2).sum().backward()
    assert tp.held_bytes == before


# -- a None gradient stays None (Note [Undefined gradients]), as in PyTorch 2.13 --

class NoGradient(Function):
    """A Function whose backward gives its input no gradient."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return None


class DoubleInPlaceNoGradient(Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return None


class Printing(Function):
    """x * 2, recording the gradient its backward gets."""
    seen = []

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        Printing.seen.append(g.tolist())
        return g * 2


def test_a_none_gradient_leaves_grad_none():
    x = tape.tensor([1.0], requires_grad=True)

    NoGradient.apply(x).sum().backward()

    assert x.grad is None


def test_a_none_gradient_stays_none_through_the_ops_below_it():
    x = tape.tensor([1.0], requires_grad=True)

    NoGradient.apply(x * 2).sum().backward()

    assert x.grad is None


def test_a_none_gradient_through_mark_dirty_leaves_grad_none():
    a = tape.tensor([1.0], requires_grad=True)

    DoubleInPlaceNoGradient.apply(a.clone()).sum().backward()

    assert a.grad is None


def test_a_none_gradient_and_a_zero_one_add_up_to_zero():
    x = tape.tensor([1.0], requires_grad=True)

    (NoGradient.apply(x).sum() + (x * 0).sum()).backward()

    assert x.grad.tolist() == [0.0]


def test_autograd_grad_of_a_none_gradient_is_none_unused_or_materialized():
    x = tape.tensor([1.0], requires_grad=True)

    (unused,) = tape.autograd.grad(NoGradient.apply(x).sum(), x, allow_unused=True)
    (zeros,) = tape.autograd.grad(NoGradient.apply(x).sum(), x, materialize_grads=True)
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        tape.autograd.grad(NoGradient.apply(x).sum(), x)

    assert unused is None and zeros.tolist() == [0.0]


def test_a_function_that_gets_no_gradient_still_runs_on_zeros():
    Printing.seen.clear()
    x = tape.tensor([1.0], requires_grad=True)

    NoGradient.apply(Printing.apply(x)).sum().backward()

    assert Printing.seen == [[0.0]] and x.grad.tolist() == [0.0]


def test_a_gradient_for_an_argument_that_is_not_a_tensor_is_pytorchs_error():
    class Scale(tape.autograd.Function):
        @staticmethod
        def forward(ctx, a, k):
            return a * k

        @staticmethod
        def backward(ctx, g):
            return g, g

    a = tape.tensor(1.0, requires_grad=True)
    with pytest.raises(RuntimeError, match="^function ScaleBackward returned a gradient different than None at "
                                           "position 2, but the corresponding forward input was not a Variable$"):
        Scale.apply(a, 2.0).backward()
    (a * 3).backward()  # the tape is not corrupted
    assert a.grad.item() == 3.0


def test_a_backward_may_write_a_gradient_that_a_mul_by_one_made_as_pytorchs_does():
    # x * 1's backward gives a new tensor (PyTorch's mul), not sum's broadcast
    # gradient itself, which PyTorch also refuses to write in place
    class Doubles(tape.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a.clone()

        @staticmethod
        def backward(ctx, g):
            return g.mul_(2)

    x = tape.tensor([1.0, 2.0], requires_grad=True)
    (Doubles.apply(x) * 1).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a single"):
        Doubles.apply(x).sum().backward()
