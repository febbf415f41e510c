"""tape.autograd.graph.saved_tensors_hooks: what is packed and when, what the
VJPs read, nesting, custom Functions, create_graph, errors and lifetime. The
expected values were checked against PyTorch 2.13."""
import gc
import tracemalloc

import pytest

import tape
from tape.autograd.graph import disable_saved_tensors_hooks, saved_tensors_hooks
from test_function import Exp
from test_lifetime import _in_fresh_thread


class Log:
    """Hooks that note each call and pass values through (scaled on unpack)."""

    def __init__(self, scale=1.0):
        self.calls, self.scale = [], scale

    def pack(self, t):
        self.calls.append("pack")
        return t

    def unpack(self, t):
        self.calls.append("unpack")
        return t * self.scale if self.scale != 1.0 else t

    def hooks(self):
        return saved_tensors_hooks(self.pack, self.unpack)


x0, y0 = [1.0, 2.0], [3.0, 4.0]


@pytest.mark.parametrize("f, saved", [
    (lambda x, y: x * y, 2), (lambda x, y: x * 2, 0), (lambda x, y: x * y.detach(), 1),
    (lambda x, y: x.exp(), 1), (lambda x, y: x.sin(), 1), (lambda x, y: x + y, 0),
    (lambda x, y: x / y, 2), (lambda x, y: x ** y, 3), (lambda x, y: x * x, 2),
    (lambda x, y: x.sum(), 0), (lambda x, y: x.tanh(), 1)])
def test_each_saved_tensor_is_packed_once_at_record_and_unpacked_once_in_backward(f, saved):
    x, y = tape.tensor(x0, requires_grad=True), tape.tensor(y0, requires_grad=True)
    log = Log()
    with log.hooks():
        z = f(x, y).sum()
    packed = list(log.calls)
    z.backward()
    assert (packed, log.calls) == (["pack"] * saved, ["pack"] * saved + ["unpack"] * saved)


def test_pack_hook_sees_the_value_and_whether_it_requires_grad():
    x = tape.tensor(x0, requires_grad=True)
    seen = []
    with saved_tensors_hooks(lambda t: seen.append((t.tolist(), t.requires_grad)) or t, lambda p: p):
        x * tape.tensor(y0)
    assert sorted(seen) == [([3.0, 4.0], False)]


def test_what_pack_hook_returns_is_what_unpack_hook_gets():
    x = tape.tensor(x0, requires_grad=True)
    token, got = object(), []
    with saved_tensors_hooks(lambda t: (token, t), lambda p: got.append(p[0] is token) or p[1]):
        z = x.exp().sum()
    z.backward()
    assert got == [True]


def test_a_pack_that_scales_changes_the_gradient():
    x, y = tape.tensor(x0, requires_grad=True), tape.tensor(y0, requires_grad=True)
    with saved_tensors_hooks(lambda t: t * 2, lambda p: p):
        z = (x * y).sum()
    z.backward()
    assert (x.grad.tolist(), y.grad.tolist()) == ([6.0, 8.0], [2.0, 4.0])


def test_an_unpack_that_scales_changes_the_gradient_of_a_scalar_graph():
    s = tape.tensor(2.0, requires_grad=True)
    with saved_tensors_hooks(lambda t: t, lambda p: p * 3):
        z = s * s
    z.backward()
    assert s.grad.item() == 12.0


def test_identity_hooks_leave_the_gradient_unchanged():
    x = tape.tensor(x0, requires_grad=True)
    with Log().hooks():
        z = (x.sin() * x).sum()
    (g,) = tape.autograd.grad(z, x)
    (expected,) = tape.autograd.grad((x.sin() * x).sum(), x)  # by the native sweep
    assert g.tolist() == pytest.approx(expected.tolist(), rel=1e-15)


def test_nested_hooks_the_innermost_pair_applies():
    x, y = tape.tensor(x0, requires_grad=True), tape.tensor(y0, requires_grad=True)
    calls = []

    def pair(tag):
        return saved_tensors_hooks(lambda t: (tag, t), lambda p: calls.append(p[0]) or p[1])
    with pair("outer"):
        with pair("inner"):
            z = x * y
        w = x.sin()
    (z.sum() + w.sum()).backward()
    assert sorted(calls) == ["inner", "inner", "outer"]


def test_hooks_run_with_grad_mode_off_and_unpack_with_create_graphs_mode():
    x = tape.tensor(x0, requires_grad=True)
    modes = []
    with saved_tensors_hooks(lambda t: modes.append(("pack", tape.is_grad_enabled())) or t,
                             lambda p: modes.append(("unpack", tape.is_grad_enabled())) or p):
        z = x.sin().sum()
    tape.autograd.grad(z, x, create_graph=True)
    assert modes == [("pack", False), ("unpack", True)]


def test_no_grad_saves_nothing():
    log = Log()
    with tape.no_grad(), log.hooks():
        tape.tensor(x0, requires_grad=True).exp()
    assert log.calls == []


def test_create_graph_second_order_through_a_scaling_unpack():
    # d/dx of 3 x_u^2 with x_u = 2x in x's place: 12 x, as in PyTorch
    x = tape.tensor(x0, requires_grad=True)
    with saved_tensors_hooks(lambda t: t, lambda p: p * 2):
        z = (x ** 3).sum()
    (g,) = tape.autograd.grad(z, x, create_graph=True)
    (h,) = tape.autograd.grad(g.sum(), x)
    assert (g.tolist(), h.tolist()) == ([12.0, 48.0], [12.0, 24.0])


def test_create_graph_third_order_through_a_scaling_unpack():
    # torch 2.13: the rows a VJP records on an unpacked value keep that value
    # for the next order, itself unpacked again
    x = tape.tensor(x0, requires_grad=True)
    h0 = x * 1
    with saved_tensors_hooks(lambda t: t, lambda p: p * 2):
        z = (h0 ** 3).sum()
    (g,) = tape.autograd.grad(z, x, create_graph=True)
    (h,) = tape.autograd.grad(g.sum(), x, create_graph=True)
    (k,) = tape.autograd.grad(h.sum(), x)
    assert (g.tolist(), h.tolist(), k.tolist()) == ([12.0, 48.0], [12.0, 24.0], [6.0, 6.0])


def test_create_graph_second_order_through_identity_hooks():
    x = tape.tensor(x0, requires_grad=True)
    with Log().hooks():
        z = (x.sin() * x).sum()
    (g,) = tape.autograd.grad(z, x, create_graph=True)
    (h,) = tape.autograd.grad(g.sum(), x)
    expected = [2 * v.cos().item() - v.item() * v.sin().item() for v in tape.tensor(x0)]
    assert h.tolist() == pytest.approx(expected, rel=1e-12)


class Square(tape.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        (x,) = ctx.saved_tensors
        return 2 * x * g


class NotedSquare(Square):
    """Square whose backward notes the saved tensor it unpacked."""
    seen = []

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        NotedSquare.seen.append((x.requires_grad, type(x.grad_fn).__name__, x.output_nr, x.tolist()))
        return 2 * x * g


def test_an_unpacked_value_under_create_graph_has_the_saved_tensors_grad_fn():
    # torch 2.13: in the saved tensor's place (MulBackward0, output 0), with the unpacked value
    x = tape.tensor(x0, requires_grad=True)
    with saved_tensors_hooks(lambda t: t, lambda p: p * 2):
        y = NotedSquare.apply(x * 1)
    NotedSquare.seen.clear()
    (g,) = tape.autograd.grad(y.sum(), x, create_graph=True)
    (h,) = tape.autograd.grad(g.sum(), x)
    assert NotedSquare.seen == [(True, "MulBackward0", 0, [2.0, 4.0])]
    assert (g.tolist(), h.tolist()) == ([4.0, 8.0], [2.0, 2.0])


def test_a_function_packs_at_apply_and_unpacks_at_each_saved_tensors():
    x = tape.tensor(x0, requires_grad=True)
    log = Log(scale=2.0)
    with log.hooks():
        y = Square.apply(x)
    y.sum().backward()
    assert (log.calls, x.grad.tolist()) == (["pack", "unpack", "unpack"], [4.0, 8.0])


def test_hooks_entered_inside_a_functions_forward_do_not_apply_to_its_saves():
    class Inside(Square):
        @staticmethod
        def forward(ctx, x):
            with log.hooks():
                ctx.save_for_backward(x)
            return x * x
    x = tape.tensor(x0, requires_grad=True)
    log = Log(scale=2.0)
    Inside.apply(x).sum().backward()
    assert (log.calls, x.grad.tolist()) == ([], [2.0, 4.0])


def test_a_functions_saved_output_unpacked_under_create_graph():
    x = tape.tensor(x0, requires_grad=True)
    with Log(scale=2.0).hooks():
        y = Exp.apply(x)
    (g,) = tape.autograd.grad(y.sum(), x, create_graph=True)
    (h,) = tape.autograd.grad(g.sum(), x)
    expected = [2 * v.exp().item() for v in tape.tensor(x0)]
    assert g.tolist() == pytest.approx(expected) and h.tolist() == pytest.approx(expected)


def test_unpack_hook_must_return_a_tensor():
    x = tape.tensor(x0, requires_grad=True)
    with saved_tensors_hooks(lambda t: t, lambda p: 3.0):
        z = x.exp().sum()
    with pytest.raises(TypeError, match="Output of saved tensor unpack_hook expected to be a Tensor but "
                                        "got result of type float"):
        z.backward()


def test_pack_hook_may_not_modify_its_input_in_place():
    a = tape.tensor(x0, requires_grad=True) * 1.0
    with pytest.raises(RuntimeError, match="A saved tensor pack hook is modifying its input in place"):
        with saved_tensors_hooks(lambda t: t.mul_(2), lambda p: p):
            a.exp()


def test_disable_saved_tensors_hooks_refuses_hooks_with_its_message_until_it_exits():
    with disable_saved_tensors_hooks("msg one"):
        with pytest.raises(RuntimeError, match="^msg two$"):
            with disable_saved_tensors_hooks("msg two"):
                with saved_tensors_hooks(lambda t: t, lambda p: p):
                    pass
        with pytest.raises(RuntimeError, match="^msg one$"):
            with saved_tensors_hooks(lambda t: t, lambda p: p):
                pass
    with saved_tensors_hooks(lambda t: t, lambda p: p):
        with pytest.raises(RuntimeError, match="^nope$"):
            with disable_saved_tensors_hooks("nope"):
                pass


def test_a_second_backward_raises_and_retain_graph_allows_it():
    x = tape.tensor(x0, requires_grad=True)
    with Log().hooks():
        z = (x * x).sum()
    z.backward(retain_graph=True)
    z.backward()
    assert x.grad.tolist() == [4.0, 8.0]
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        z.backward()


def test_backward_drops_what_the_rows_packed():
    def run():
        x = tape.tensor(x0, requires_grad=True)
        with Log().hooks():
            z = (x * x).exp().sum()
        packed = len(tape._tape.state.tape.packed)
        z.backward()
        return packed, len(tape._tape.state.tape.packed)
    assert _in_fresh_thread(run) == (2, 0)


def test_graphs_recorded_under_hooks_and_dropped_keep_memory_flat():
    # every step packs copies (96 KB), half the graphs are dropped without
    # backward: compaction, which the packed bytes trigger, reclaims them
    def run():
        tp = tape._tape.state.tape
        w = tape.ones(4096, requires_grad=True)
        hooks = saved_tensors_hooks(lambda t: t.clone(), lambda p: p)
        heaps, rows, sampled_at = [], 0, -4500
        tracemalloc.start()
        for k in range(4500):
            with hooks:
                z = (w * w).exp().sum()
            if k % 2:
                z.backward()
            if tp.n < rows and k - sampled_at >= 225:  # compacted; a collection costs more than that
                gc.collect()
                heaps.append(tracemalloc.get_traced_memory()[0])
                sampled_at = k
            rows = tp.n
        tracemalloc.stop()
        return heaps
    heaps = _in_fresh_thread(run)
    assert len(heaps) >= 3 and max(heaps) - heaps[0] < 4 << 20


def test_hooks_are_per_thread():
    log = Log()

    def other():
        tape.tensor(x0, requires_grad=True).exp()
        return list(log.calls)
    with log.hooks():
        assert _in_fresh_thread(other) == []


def test_an_unpack_hook_that_enters_hooks_leaves_the_stack_as_it_was():
    # as PyTorch: backward restores the thread's hooks however its nodes leave them
    packed = []

    def unpack(p):
        saved_tensors_hooks(lambda t: packed.append("inner") or t, lambda t: t).__enter__()
        return p

    x = tape.tensor([1.0, 2.0], requires_grad=True)
    with saved_tensors_hooks(lambda t: t, unpack):
        y = (x * x).sum()
    y.backward()
    (x * x).sum()

    assert packed == [] and x.grad.tolist() == [2.0, 4.0]


def test_an_unpack_hook_that_raises_inside_disabled_hooks_leaves_them_enabled():
    def unpack(p):
        disable_saved_tensors_hooks("disabled in unpack").__enter__()
        raise ValueError("from unpack")

    x = tape.tensor([1.0, 2.0], requires_grad=True)
    with saved_tensors_hooks(lambda t: t, unpack):
        y = (x * x).sum()
    with pytest.raises(ValueError, match="from unpack"):
        y.backward()

    with saved_tensors_hooks(lambda t: t, lambda t: t):
        z = (x * x).sum()
    z.backward()
    assert x.grad.tolist() == [2.0, 4.0]
