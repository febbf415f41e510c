"""Threads: each records on a tape of its own, and shares leaves and graphs
with the others, as in PyTorch (Note [Leaves shared by threads], Note [Graphs
across threads]). Known values are PyTorch 2.13's, for the same programs run
with the same threads."""
import sys
import threading

import numpy as np
import pytest

import tape
from tape import autograd
from test_lifetime import _in_fresh_thread

FREED = "Trying to backward through the graph a second time"


def _in_threads(work, n):
    """work(k) in n threads at once; the exceptions they raised."""
    errors = []
    start = threading.Barrier(n)

    def target(k):
        start.wait()
        try:
            work(k)
        except BaseException as e:  # reported in the calling thread
            errors.append(e)

    workers = [threading.Thread(target=target, args=(k,)) for k in range(n)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return errors


def _main_graph():
    """Leaves x, w and m = sin(x * w), recorded on this thread's tape."""
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = tape.tensor(0.5, requires_grad=True)
    return x, w, (x * w).sin()


# -- leaves shared by threads --------------------------------------------------------

def test_a_leaf_used_by_another_thread_between_recording_and_grad_stays_in_the_graph():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    recorded, used = threading.Event(), threading.Event()
    results = []

    def first(k):
        if k == 0:
            y = (x * x).sum()
            recorded.set()
            used.wait()
            results.append(autograd.grad(y, x)[0].tolist())
        else:
            recorded.wait()
            results.append(autograd.grad((x * 3).sum(), x)[0].tolist())
            used.set()

    assert _in_threads(first, 2) == [] and sorted(results) == [[2.0, 4.0], [3.0, 3.0]]


def test_threads_differentiating_with_respect_to_one_leaf_all_get_its_gradient():
    # many switches between threads, so their records and grads interleave
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        def work(k):
            for _ in range(100):
                (g,) = autograd.grad((x * x).sum(), x)
                assert g.tolist() == [2.0, 4.0, 6.0]

        errors = _in_threads(work, 4)
    finally:
        sys.setswitchinterval(interval)

    assert errors == []


def test_threads_first_using_one_leaf_at_once_each_find_it_in_their_graph():
    # the leaf names no row until its first use, and each thread's first op
    # may be that use: one tape must become its home, the others' rows foreign
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(60):
            x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)

            def work(k):
                (g,) = autograd.grad((x * x).sum(), x)
                assert g.tolist() == [2.0, 4.0, 6.0]

            assert _in_threads(work, 4) == []
    finally:
        sys.setswitchinterval(interval)


def test_threads_backward_into_one_leaf_sum_their_gradients():
    # PyTorch's test_simple_backward_same_input
    x = tape.ones(5, 5, requires_grad=True)

    def work(k):
        ((x + 3) * (x + 4) * 0.5).sum().backward()

    assert _in_threads(work, 10) == []
    assert x.grad.tolist() == [[45.0] * 5] * 5


# -- graphs across threads ----------------------------------------------------------

def test_backward_in_another_thread_reaches_the_leaves_of_this_threads_graph():
    x, w, m = _main_graph()

    _in_fresh_thread(lambda: ((m * m).sum() + (x * 2).sum()).backward())

    np.testing.assert_allclose(x.grad.tolist(), [2.4207354924039484, 2.454648713412841, 2.0705600040299337],
                               rtol=1e-14)
    assert w.grad.item() == pytest.approx(3.0834258626388618, rel=1e-14)


def test_grad_in_another_thread_differentiates_this_threads_leaves_and_intermediates():
    x, w, m = _main_graph()

    gx, gw, gm = _in_fresh_thread(lambda: autograd.grad((m * m).sum() * w, (x, w, m)))

    np.testing.assert_allclose(gx.tolist(), [0.21036774620197413, 0.22732435670642046, 0.0352800020149668],
                               rtol=1e-14)
    assert gw.item() == pytest.approx(3.474631444959155, rel=1e-14)
    np.testing.assert_allclose(gm.tolist(), [0.479425538604203, 0.8414709848078965, 0.9974949866040544],
                               rtol=1e-14)


def test_second_order_grad_in_another_thread_through_this_threads_graph():
    x, w, m = _main_graph()

    def second():
        (gx,) = autograd.grad((m * m * m).sum(), x, create_graph=True)
        (hx,) = autograd.grad((gx * gx).sum(), x)
        return gx.tolist(), hx.tolist()

    gx, hx = _in_fresh_thread(second)

    np.testing.assert_allclose(gx, [0.30256701008350123, 0.5738605509257195, 0.10557487541193097], rtol=1e-14)
    np.testing.assert_allclose(hx, [0.28513832821390006, -0.089976519830338, -0.1555943512824215], rtol=1e-13)


def test_a_gradient_made_with_create_graph_in_another_thread_differentiates_here():
    x, w, m = _main_graph()
    _in_fresh_thread(lambda: (m * m * w).sum().backward(create_graph=True))
    gx, first = x.grad, (x.grad.tolist(), w.grad.item())
    x.grad = w.grad = None

    (gx * gx).sum().backward()

    np.testing.assert_allclose(first[0], [0.21036774620197413, 0.22732435670642046, 0.0352800020149668],
                               rtol=1e-14)
    assert first[1] == pytest.approx(3.474631444959155, rel=1e-14)
    np.testing.assert_allclose(x.grad.tolist(), [0.05683108917660511, -0.04730015595674551, -0.017463468637432866],
                               rtol=1e-13)
    assert w.grad.item() == pytest.approx(0.5970857853917282, rel=1e-13)


def test_a_graph_from_a_finished_thread_is_used_here():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    m = _in_fresh_thread(lambda: (x * x).exp().sum())

    (m.log() * 3).backward()

    np.testing.assert_allclose(x.grad.tolist(), [0.0019986385780561785, 0.08028745791130934, 17.873572897398866],
                               rtol=1e-14)


def test_graphs_across_three_threads_meet_in_one_backward():
    # a (here) -> b (a second thread) -> the backward (a third), which uses a too
    x = tape.tensor([0.5, 1.5], requires_grad=True)
    a = (x * x).sin()
    b = _in_fresh_thread(lambda: a.exp() * x)

    _in_fresh_thread(lambda: (b.sum() * a.sum()).backward())

    np.testing.assert_allclose(x.grad.tolist(), [5.734394895494263, -11.440158810542833], rtol=1e-14)


def test_grad_frees_only_the_graph_that_leads_to_its_inputs_across_threads():
    z = tape.tensor([0.5, 1.5], requires_grad=True)
    m = (z * z).exp()  # this thread's graph leads to z, not to the other's x

    def other():
        x = tape.tensor([2.0, 3.0], requires_grad=True)
        y1, y2 = (x * x).sum(), (m * m).sum()
        (gx,) = autograd.grad(y1 + y2, x)
        y2.backward()  # the part autograd.grad did not need is not freed, as in PyTorch
        return gx.tolist()

    assert _in_fresh_thread(other) == [4.0, 6.0]
    np.testing.assert_allclose(z.grad.tolist(), [3.297442541400256, 540.1027878031309], rtol=1e-14)


def test_a_second_backward_through_another_threads_graph_raises_unless_retained():
    x, w, m = _main_graph()

    def twice(retain):
        (m * m).sum().backward(retain_graph=retain)
        (m * 3).sum().backward()

    _in_fresh_thread(lambda: twice(True))
    with pytest.raises(RuntimeError, match=FREED):
        _in_fresh_thread(lambda: twice(False))


def test_backward_with_inputs_in_another_thread_accumulates_into_this_threads_tensors():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    m = (x * 2).sin()
    u = m * x

    _in_fresh_thread(lambda: (u * m).sum().backward(inputs=[m, x]))

    np.testing.assert_allclose(m.grad.tolist(), [1.8185948536513634, -3.027209981231713, -1.6764929891935552],
                               rtol=1e-14)
    np.testing.assert_allclose(x.grad.tolist(), [-0.6867831801840506, 4.530183003397834, -3.1413644873688553],
                               rtol=1e-14)


def test_hooks_and_functions_of_this_threads_graph_run_in_another_threads_backward():
    class Square(autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 2 * a * g

    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    m = (x * 2).sin()
    seen = []
    m.register_hook(lambda g: seen.append(g.tolist()))
    s = Square.apply(x.sin())

    _in_fresh_thread(lambda: ((m * m).sum() + (s * 3).sum()).backward())

    np.testing.assert_allclose(seen, [[1.8185948536513634, -1.5136049906158564, -0.5588309963978517]], rtol=1e-14)
    np.testing.assert_allclose(x.grad.tolist(), [1.2142872898611883, -0.29169099267702125, -1.9113923305976472],
                               rtol=1e-14)
    with pytest.raises(RuntimeError, match=FREED):  # the Function's saved tensors were freed
        _in_fresh_thread(lambda: (s * 3).sum().backward())


def test_python_thread_in_middle():
    # PyTorch's test: a graph begun in one thread, continued and differentiated in several
    outcomes = []

    def no_retain(k):
        try:
            (y_no_retain + y_no_retain ** 2).sum().backward()
            outcomes.append("ok")
        except RuntimeError as error:
            outcomes.append("Specify retain_graph=True" in str(error))

    x_no_retain = tape.ones(5, 5, requires_grad=True)
    y_no_retain = x_no_retain + x_no_retain ** 2
    assert _in_threads(no_retain, 5) == []
    # the first backward frees the shared graph: every later one raises
    assert sorted(outcomes, key=str) == [True, True, True, True, "ok"]
    assert x_no_retain.grad.tolist() == [[15.0] * 5] * 5

    def retain(k):
        (y_retain + y_retain ** 2).sum().backward(retain_graph=True)

    x_retain = tape.ones(5, 5, requires_grad=True)
    y_retain = x_retain + x_retain ** 2
    assert _in_threads(retain, 5) == []
    assert x_retain.grad.tolist() == [[75.0] * 5] * 5


@pytest.mark.parametrize("mode", ["all", "any"])
def test_multi_grad_hooks_run_once_per_backward_of_each_thread(mode):
    # PyTorch's test_multi_grad_all_hooks and test_multi_grad_any_hooks
    t1, t2, t3, t4 = (tape.rand(2, requires_grad=True) for _ in range(4))
    calls = []
    lock = threading.Lock()

    def hook(grads):
        with lock:
            calls.append([g is not None for g in grads] if mode == "all" else True)

    autograd.graph.register_multi_grad_hook((t1, t2, t3, t4), hook, mode=mode)
    out = (t2 * t3).sum()

    assert _in_threads(lambda k: out.backward(inputs=(t2, t3), retain_graph=True), 5) == []
    assert calls == [[False, True, True, False] if mode == "all" else True] * 5


def test_next_functions_of_a_node_name_another_threads_node():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    m = (x * 2).sin()

    (node, index), none = _in_fresh_thread(lambda: (m * 3).grad_fn.next_functions)

    assert (type(node).__name__, index, none) == ("SinBackward0", 0, (None, 0)) and node == m.grad_fn


def test_an_in_place_change_after_another_thread_saved_the_tensor_is_refused():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    m = (x * 2).sin()
    y = _in_fresh_thread(lambda: (m * m).sum())
    m.add_(1)

    with pytest.raises(RuntimeError, match=r"modified by an inplace operation: \[tape.DoubleTensor \[3\]\], which is "
                                           r"output 0 of \w+, is at version 1; expected version 0 instead"):
        y.backward()


def test_compaction_on_either_tape_keeps_a_graph_that_crosses_threads():
    # this thread drops its own names of the graph and compacts; the other
    # thread compacts its tape with the graph's use live, then differentiates
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    m = (x * x).sin() * 2
    y = _in_fresh_thread(lambda: (m * m).sum())
    del m
    tape._tape.state.tape.compact()

    def differentiate():
        z = y * 1.5
        tape._tape.state.tape.compact()
        z.backward()

    _in_fresh_thread(differentiate)

    np.testing.assert_allclose(x.grad.tolist(), [10.91156912190818, 23.74459791896116, -27.035540883780342],
                               rtol=1e-13)


def test_threads_share_leaves_and_a_graph_and_backward_at_once():
    # 8 threads build on one graph made here and on its leaves, and all
    # differentiate at once, many times, with many switches between them,
    # while this thread keeps recording, and compacting, its tape
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = tape.tensor([0.5, -1.0, 2.0], requires_grad=True)
    shared = (x * w).sin()
    odd_grads = [[], [], []]
    lock = threading.Lock()
    done = threading.Event()

    def work(k):
        for _ in range(25):
            y = (shared * (k + 1)).sum() + (shared * x).sum() + (x * w).sum() * 0.25
            if k % 2 == 0:
                y.backward(retain_graph=True)
            else:
                grads = autograd.grad(y, (x, w, shared), retain_graph=True)
                with lock:
                    for found, g in zip(odd_grads, grads):
                        found.append(g._value.copy())

    def workers():
        try:
            return _in_threads(work, 8)
        finally:
            done.set()

    big = tape.rand(20_000, requires_grad=True)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        outcome = []
        runner = threading.Thread(target=lambda: outcome.append(workers()))
        runner.start()
        while not done.is_set():
            v = big
            for _ in range(10):
                v = v * 1.0001 + 0.5  # 3 MB of values: this tape compacts every iteration or so
        runner.join()
    finally:
        sys.setswitchinterval(interval)

    assert outcome == [[]]
    np.testing.assert_allclose(x.grad.tolist(), [279.83819433301346, 133.75835924571726, 1366.2968514906197],
                               rtol=1e-12)
    np.testing.assert_allclose(w.grad.tolist(), [463.7912809451864, -449.3762038565709, 2091.3576019657685],
                               rtol=1e-12)
    sums = [np.sum(found, axis=0).tolist() for found in odd_grads]
    np.testing.assert_allclose(sums[0], [323.7173224275321, 175.37304290043153, 1558.3309088206927], rtol=1e-12)
    np.testing.assert_allclose(sums[1], [551.5495371342237, -532.6055711659993, 2379.4086879608785], rtol=1e-12)
    assert sums[2] == [600.0, 700.0, 800.0]


def test_the_dot_of_a_graph_across_threads_is_that_of_the_same_graph_in_one():
    def program(across):
        x = tape.tensor(1.0, requires_grad=True)
        m = (x * 2).sin()
        y = _in_fresh_thread(lambda: m * 3) if across else m * 3
        del m  # a 0-d tensor: its row lives on without it
        return tape.viz.to_dot(y, params={"x": x})

    assert program(True) == program(False)
    assert "SinBackward0" in program(True)
