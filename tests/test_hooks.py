"""Tensor.register_hook, against the values and errors PyTorch 2.13 gives."""
import numpy as np
import pytest

import tape
from tape import autograd


def test_hooks_replace_the_gradient_for_grad_and_for_what_flows_on():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    calls = []
    x.register_hook(lambda g: calls.append(("x", g.tolist())) or g * 10)
    y = x * x
    y.register_hook(lambda g: calls.append(("y", g.tolist())) or g + 1)
    y.retain_grad()

    (y * 3).sum().backward()

    assert calls == [("y", [3.0, 3.0]), ("x", [8.0, 16.0])]
    assert y.grad.tolist() == [4.0, 4.0]  # retain_grad sees the hooked value
    assert x.grad.tolist() == [80.0, 160.0]


def test_a_leaf_hook_runs_once_with_the_summed_gradient_of_a_native_sweep():
    x = tape.tensor(3.0, requires_grad=True)
    seen = []
    x.register_hook(seen.append)

    (x * x + x.sin()).backward()

    assert len(seen) == 1
    assert seen[0].item() == pytest.approx(6.0 + 0.9899924966004454 * -1)
    assert x.grad.item() == seen[0].item()


def test_hook_on_an_input_of_autograd_grad_changes_what_it_returns():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g * 10)

    (g,) = autograd.grad((x * x).sum(), x)

    assert g.tolist() == [20.0, 40.0]
    assert x.grad is None


def test_hooks_run_in_the_order_they_were_registered():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g + 1)
    x.register_hook(lambda g: g * 2)

    x.sum().backward()

    assert x.grad.tolist() == [4.0, 4.0]


def test_removed_hook_is_not_called_and_a_handle_is_a_context_manager():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    calls = []
    handle = x.register_hook(lambda g: calls.append(1))
    handle.remove()
    handle.remove()  # a second remove does nothing, as in PyTorch
    with x.register_hook(lambda g: g * 0):
        (x * x).sum().backward()
    (x * x).sum().backward()

    assert calls == []
    assert x.grad.tolist() == [2.0, 4.0]


def test_hook_on_a_tensor_that_does_not_require_grad_raises():
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
        tape.tensor(1.0).register_hook(lambda g: g)


def test_hook_that_changes_the_shape_raises_and_the_next_backward_is_right():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2

    def shrink(g):
        return g[:1]
    y.register_hook(shrink)
    with pytest.raises(RuntimeError, match="hook 'shrink' has changed the size of value"):
        y.sum().backward()
    x.grad = None

    (x * x).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]


def test_hook_that_returns_a_non_tensor_raises_type_error():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: 3)
    with pytest.raises(TypeError, match="expected Variable, but hook returned 'int'"):
        y.sum().backward()


def test_hooked_gradient_is_differentiable_under_create_graph():
    x = tape.tensor(2.0, requires_grad=True)
    y = x ** 3
    y.register_hook(lambda g: g * 2)

    (gx,) = autograd.grad(y, x, create_graph=True)
    (hx,) = autograd.grad(gx, x)

    assert gx.item() == 24.0
    assert type(gx.grad_fn).__name__ == "MulBackward0"
    assert hx.item() == 24.0


def test_leaf_hook_survives_compaction_of_the_tape():
    w = tape.tensor([1.0, -1.0], requires_grad=True)
    w.register_hook(lambda g: g * 0.5)
    for _ in range(40_000):  # graphs dropped without backward: the tape compacts
        (w * 2).sum()

    (w * 4).sum().backward()

    assert w.grad.tolist() == [2.0, 2.0]


def test_hooks_of_a_dropped_graph_leave_other_graphs_to_the_native_sweep():
    # through float32 rows the native sweep keeps float64 adjoints and rounds
    # once, the Python walk rounds at every row: the gradient tells which ran
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: g)
    y.sum().backward()
    del y
    a = tape.tensor([1.0], dtype=tape.float32, requires_grad=True)
    c = float(np.float32(1.7))  # a float32 number: the native sweep reads it as it is

    (a * c * c * c).sum().backward()

    assert a.grad.tolist() == [float(np.float32(c ** 3))]  # rounding at every row gives 4.913000106811523


# -- hooks on outputs that get no gradient (Note [Undefined gradients]), as in PyTorch 2.13 --

def test_a_hook_on_an_unbind_part_without_gradient_sees_none_when_a_sibling_backpropagates():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    parts = x.unbind()
    calls = []
    parts[0].register_hook(calls.append)

    parts[1].backward()

    assert calls == [None] and x.grad.tolist() == [0.0, 1.0]


def test_the_hooks_of_a_node_run_with_none_first_then_with_the_gradient():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    parts = x.unbind()
    calls = []
    parts[0].register_hook(lambda g: calls.append(("h0", g)))
    parts[1].register_hook(lambda g: calls.append(("h1", None if g is None else g.item())))
    parts[0].register_hook(lambda g: calls.append(("h0b", g)))

    (parts[1] * 3).backward()

    assert calls == [("h0", None), ("h0b", None), ("h1", 3.0)]


def test_a_sibling_hook_sees_none_under_autograd_grad_too():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    parts = x.unbind()
    calls = []
    parts[0].register_hook(calls.append)

    (g,) = autograd.grad(parts[1], x)

    assert calls == [None] and g.tolist() == [0.0, 1.0]


def test_a_hook_is_not_called_when_its_node_does_not_run():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    parts = x.unbind()
    calls = []
    parts[0].register_hook(calls.append)

    (x * 2).sum().backward()

    assert calls == []


def test_a_hook_cannot_replace_a_none_gradient():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    parts = x.unbind()
    parts[0].register_hook(lambda g: tape.tensor(5.0))

    with pytest.raises(RuntimeError, match="can't replace a None gradient with a non-None value"):
        parts[1].backward()


def test_a_hook_on_an_unused_output_of_a_function_sees_none():
    x = tape.tensor([1.0], requires_grad=True)

    class Two(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 3

    first, second = Two.apply(x)
    calls = []
    first.register_hook(calls.append)

    second.sum().backward()

    assert calls == [None] and x.grad.tolist() == [3.0]


def test_a_leaf_hook_sees_none_when_only_a_none_gradient_reaches_it():
    from test_function import NoGradient
    x = tape.tensor([1.0], requires_grad=True)
    calls = []
    x.register_hook(calls.append)

    NoGradient.apply(x).sum().backward()

    assert calls == [None] and x.grad is None


def test_a_hook_reached_by_a_zero_gradient_sees_zeros():
    x = tape.tensor([1.0], requires_grad=True)
    y = x * 1
    calls = []
    y.register_hook(lambda g: calls.append(g.tolist()))

    y.clone().zero_().sum().backward()

    assert calls == [[0.0]] and x.grad.tolist() == [0.0]


# -- backward restores the thread's state, as PyTorch's engine does --

def test_a_hook_that_turns_grad_mode_off_leaves_it_on_after_backward():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: tape.set_grad_enabled(False) and None)

    (y * y).sum().backward()

    assert tape.is_grad_enabled()


def test_a_leaf_hook_that_turns_grad_mode_off_leaves_it_on_after_a_native_backward():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: tape.set_grad_enabled(False) and None)

    (x * x).sum().backward()

    assert tape.is_grad_enabled()


def test_a_hook_that_raises_after_turning_grad_mode_off_leaves_it_on():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2

    def hook(g):
        tape.set_grad_enabled(False)
        raise ValueError("from the hook")

    y.register_hook(hook)
    with pytest.raises(ValueError, match="from the hook"):
        (y * y).sum().backward()

    assert tape.is_grad_enabled() and (x * x).requires_grad


def test_each_node_starts_in_the_backwards_grad_mode():
    x = tape.tensor([1.0], requires_grad=True)
    seen = []

    class Seen(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            seen.append(tape.is_grad_enabled())
            return g

    y = Seen.apply(x) * 2
    y.register_hook(lambda g: tape.set_grad_enabled(True) and None)

    y.sum().backward()

    assert seen == [False]


def test_backward_inside_no_grad_leaves_grad_mode_off():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: tape.set_grad_enabled(True) and None)
    y = (x * x).sum()

    with tape.no_grad():
        y.backward()
        inside = tape.is_grad_enabled()

    assert inside is False
