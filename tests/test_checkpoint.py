"""tape.utils.checkpoint, as torch.utils.checkpoint.checkpoint: the results
and gradients of the unchecked function, its intermediates not kept, and
PyTorch's warnings and errors (checked side by side with PyTorch 2.13)."""
import threading
import tracemalloc

import numpy as np
import pytest
from test_lifetime import HEAP_GROWTH_BOUND, _in_fresh_thread, _measure

import tape
from tape.utils import checkpoint

W = [0.5, -1.0, 2.0]


def _block(x, w, scale=1.0):
    return ((x * w).sin() * scale).exp().sum()


def _inputs():
    return tape.tensor([1.0, 2.0, 3.0], requires_grad=True), tape.tensor(W, requires_grad=True)


def _unchecked_gradients():
    x, w = _inputs()
    _block(x, w).backward()
    return x.grad.tolist(), w.grad.tolist()


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_result_equals_the_unchecked_one(use_reentrant):
    x, w = _inputs()
    assert checkpoint(_block, x, w, use_reentrant=use_reentrant).item() == _block(x, w).item()


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_backward_gives_the_unchecked_gradients(use_reentrant):
    x, w = _inputs()
    checkpoint(_block, x, w, use_reentrant=use_reentrant).backward()
    assert (x.grad.tolist(), w.grad.tolist()) == _unchecked_gradients()


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_a_weight_the_function_closes_over_gets_its_gradient(use_reentrant):
    x, w = _inputs()
    checkpoint(lambda x: _block(x, w), x, use_reentrant=use_reentrant).backward()
    assert w.grad.tolist() == _unchecked_gradients()[1]


def test_autograd_grad_gives_the_unchecked_gradients():
    x, w = _inputs()
    grads = tape.autograd.grad(checkpoint(_block, x, w, use_reentrant=False), (x, w))
    assert [g.tolist() for g in grads] == list(_unchecked_gradients())


def test_second_derivative_equals_the_unchecked_one():
    x, w = _inputs()
    (g,) = tape.autograd.grad(_block(x, w), x, create_graph=True)
    (expected,) = tape.autograd.grad(g.sum(), x)
    (g,) = tape.autograd.grad(checkpoint(_block, x, w, use_reentrant=False), x, create_graph=True)
    (h,) = tape.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), expected.numpy(), rtol=1e-13)


def test_keyword_arguments_reach_the_function():
    x, w = _inputs()
    checkpoint(_block, x, w, scale=2.0, use_reentrant=False).backward()
    x2, w2 = _inputs()
    _block(x2, w2, scale=2.0).backward()
    assert x.grad.tolist() == x2.grad.tolist()


def test_ops_before_and_after_the_checkpoint_chain_through_it():
    x, w = _inputs()
    (checkpoint(lambda h: (h * w).sin(), x * 2, use_reentrant=False).sum() ** 2).backward()
    x2, w2 = _inputs()
    ((x2 * 2 * w2).sin().sum() ** 2).backward()
    assert x.grad.tolist() == x2.grad.tolist()


def test_tuple_output_with_a_non_tensor_passes_through():
    x, w = _inputs()
    y, label = checkpoint(lambda x: (x * w, "label"), x, use_reentrant=False)
    y.sum().backward()
    assert (label, x.grad.tolist()) == ("label", W)


def test_the_function_runs_again_in_backward():
    calls = []

    def block(x):
        calls.append(1)
        return (x * x).sum()

    x, _ = _inputs()
    y = checkpoint(block, x, use_reentrant=False)
    y.backward()
    assert len(calls) == 2


def test_random_numbers_are_the_forwards_in_the_recomputation():
    x, _ = _inputs()
    y = checkpoint(lambda x: x * tape.rand(3), x, use_reentrant=False)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), (y / x).detach().numpy(), rtol=1e-15)


def test_no_intermediates_are_kept():
    def held_after(run):
        def target():
            x = tape.tensor(np.linspace(0, 1, 200_000), requires_grad=True)
            w = tape.tensor(np.linspace(1, 2, 200_000), requires_grad=True)
            x * w  # registers the leaves
            tracemalloc.start()
            kept = run(x, w)
            outcome.append(tracemalloc.get_traced_memory()[0])
            tracemalloc.stop()
            del kept
        outcome = []
        worker = threading.Thread(target=target)
        worker.start()
        worker.join()
        return outcome[0]

    unchecked = held_after(lambda x, w: _block(x, w))
    checked = held_after(lambda x, w: checkpoint(_block, x, w, use_reentrant=False))
    # the unchecked graph saves x * w and exp's output (1.6 MB each)
    assert checked < unchecked - 2_500_000


def _dropped_checkpoints():
    """Each step checkpoints a small block and drops the result without backward."""
    x, w = _inputs()

    def step():
        checkpoint(_block, x, w, use_reentrant=False)

    return step


@pytest.fixture(scope="module")
def dropped_checkpoints():
    return _measure(_dropped_checkpoints, iterations=25_000)


def test_checkpoints_dropped_without_backward_do_not_grow_the_tape(dropped_checkpoints):
    assert set(dropped_checkpoints.capacities) == {dropped_checkpoints.capacity_at_start}


def test_checkpoints_dropped_without_backward_do_not_grow_the_heap(dropped_checkpoints):
    assert dropped_checkpoints.compactions >= 2 and dropped_checkpoints.heap_growth < HEAP_GROWTH_BOUND


def test_compaction_inside_the_function_keeps_gradients_right():
    def run():
        tp = tape._tape.state.tape
        x = tape.tensor(0.5, requires_grad=True)
        for _ in range(50_000):  # garbage, so that the tape compacts inside the function
            x * 2.0
        epoch = tp.ep

        def chain(y):
            for _ in range(20_000):
                y = y * 1.0001
            return y

        checkpoint(chain, x, use_reentrant=False).backward()
        return tp.ep is not epoch, x.grad.item()

    compacted, g = _in_fresh_thread(run)
    assert compacted and g == pytest.approx(1.0001 ** 20_000, rel=1e-12)


def test_grad_fn_is_the_checkpoints_node():
    x, w = _inputs()
    y = checkpoint(_block, x, w, use_reentrant=True)
    assert y.grad_fn.name() == "CheckpointFunctionBackward"


def test_under_no_grad_the_result_does_not_require_grad():
    x, w = _inputs()
    with tape.no_grad():
        y = checkpoint(_block, x, w, use_reentrant=False)
    assert not y.requires_grad


def test_input_modified_in_place_before_backward_raises():
    x, w = _inputs()
    h = x * 1
    y = checkpoint(_block, h, w, use_reentrant=False)
    with tape.no_grad():
        h.add_(1)
    with pytest.raises(RuntimeError, match="one of the variables needed for gradient computation has been "
                                           "modified by an inplace operation"):
        y.backward()


# -- PyTorch's warnings and errors ---------------------------------------------------------------

def test_not_passing_use_reentrant_warns():
    x, w = _inputs()
    with pytest.warns(UserWarning, match="the use_reentrant parameter should be passed explicitly"):
        checkpoint(_block, x, w)


def test_reentrant_refuses_autograd_grad():
    x, w = _inputs()
    y = checkpoint(_block, x, w, use_reentrant=True)
    with pytest.raises(RuntimeError, match="When use_reentrant=True, torch.utils.checkpoint is incompatible "
                                           "with .grad()"):
        tape.autograd.grad(y, x)


def test_reentrant_refuses_keyword_arguments():
    x, w = _inputs()
    with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
        checkpoint(_block, x, w, scale=2.0, use_reentrant=True)


def test_reentrant_without_an_input_requiring_grad_warns_and_gives_no_graph():
    _, w = _inputs()
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True. Gradients will be None"):
        y = checkpoint(lambda c: _block(c, w), tape.ones(3), use_reentrant=True)
    assert not y.requires_grad


def test_non_reentrant_follows_a_closed_over_weight_from_a_constant_input():
    _, w = _inputs()
    y = checkpoint(lambda c: _block(c, w), tape.ones(3), use_reentrant=False)
    assert y.requires_grad


# -- sources computed from other sources (PyTorch 2.13's values) ----------------

def test_an_argument_computed_from_a_closed_over_weight_gets_each_path_once():
    w = tape.tensor([2.0], requires_grad=True)
    x = tape.tensor([3.0], requires_grad=True)
    h = w * x

    checkpoint(lambda x: w * x, h, use_reentrant=False).sum().backward()

    assert (w.grad.tolist(), x.grad.tolist()) == ([12.0], [4.0])


def test_second_derivatives_through_sources_computed_from_each_other():
    w = tape.tensor([2.0], requires_grad=True)
    x = tape.tensor([3.0], requires_grad=True)
    h = w * x
    out = checkpoint(lambda x: (w * x).sin(), h, use_reentrant=False)

    gw, gx = tape.autograd.grad(out.sum(), [w, x], create_graph=True)
    second = tape.autograd.grad(gw.sum(), [w, x])

    assert np.allclose([gw.item(), gx.item()], [10.126247504789905, 3.3754158349299686], rtol=1e-12)
    assert np.allclose([g.item() for g in second], [82.32962394445758, 29.130915898950846], rtol=1e-12)


def test_backward_with_create_graph_into_grad_then_second_order():
    # torch 2.13 (float64)
    x = tape.tensor([0.5, 1.5], requires_grad=True)
    w = tape.tensor([2.0, -1.0], requires_grad=True)
    checkpoint(lambda a: (a * a * w).exp().sum(), x, use_reentrant=False).backward(create_graph=True)
    assert x.grad.requires_grad
    np.testing.assert_allclose(x.grad.detach().numpy(), [3.2974425414002564, -0.316197673685593], rtol=1e-13)
    np.testing.assert_allclose(w.grad.detach().numpy(), [0.41218031767503205, 0.23714825526419475], rtol=1e-13)
    gx, gw = tape.autograd.grad((x.grad ** 2).sum(), (x, w))
    np.testing.assert_allclose(gx.numpy(), [86.98501851068946, -0.46657785460617696], rtol=1e-13)
    np.testing.assert_allclose(gw.numpy(), [16.309690970754275, 0.24995242211045188], rtol=1e-13)


def test_second_derivative_of_a_0d_checkpoint():
    a = tape.tensor(0.7, requires_grad=True)
    (g,) = tape.autograd.grad(checkpoint(lambda t: t.sin() * t, a, use_reentrant=False), a, create_graph=True)
    (h,) = tape.autograd.grad(g, a)
    assert (g.item(), h.item()) == pytest.approx((1.179607218336833, 1.0787319935025934), rel=1e-14)


class _SavesFive(tape.autograd.Function):
    second_access = []

    @staticmethod
    def forward(ctx, x, y, z):
        w = x * y * z
        out = w + w
        ctx.save_for_backward(x, y, z, w, out)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        x, y, z, w, out = ctx.saved_tensors
        with pytest.raises(tape.utils.CheckpointError) as raised:
            ctx.saved_tensors
        _SavesFive.second_access.append(str(raised.value))
        return x, y, z


def test_a_second_saved_tensors_access_in_a_recomputed_function_raises_pytorchs_error():
    x, y, z = (tape.tensor(v, requires_grad=True) for v in (1.0, 2.0, 3.0))

    def foo(x, y, z):
        return _SavesFive.apply(x * y * z, y * y * z, z * z)

    _SavesFive.second_access.clear()
    checkpoint(foo, x, y, z, use_reentrant=False).sum().backward()

    assert _SavesFive.second_access == [
        "torch.utils.checkpoint: Unpack is being triggered for a tensor that was already unpacked once. "
        "If you are calling ctx.saved_tensors in backward, make sure to do so only once. Otherwise please "
        "open an issue with details on your use case."]
    assert (x.grad.item(), y.grad.item(), z.grad.item()) == (36.0, 162.0, 114.0)
    assert issubclass(tape.utils.CheckpointError, RuntimeError)
