"""Lifetime of graphs on the tape: backward frees what it walked, dropped
graphs do not pile up, and very long graphs are walked without recursion.

The loops run in a fresh thread: each thread has its own tape, so what they
measure does not depend on what earlier tests left on the main thread's tape,
and the large tape of the long chain goes away with its thread.
"""
import gc
import os
import threading
import tracemalloc
import typing
import weakref

import numpy as np
import pytest

import tape

# Note [Measuring a loop]
# Rows of dropped graphs stay on the tape until the next compaction, which
# runs when the tape is full or its values fill their budget (Note [When to
# compact] in tape._tape), drops every row no live tensor reaches, and grows
# the tape if the live rows fill more than a quarter of it. So a loop whose
# memory is flat compacts again and again at the same capacity and with the
# same heap, while a loop that keeps rows alive makes the tape grow. The
# measured loops run long enough to compact at least twice; the heap is
# compared right after the first and the last compaction, when no dropped
# graph is waiting, so the bound can be tight. The values the tape holds
# are counted exactly (held_bytes), so their bound is tight too; the
# process's resident memory is compared after a warm-up with its peak over
# the rest of the loop, with room for the allocator's own slack.
HEAP_GROWTH_BOUND = 2**20
HELD_BYTES_BOUND = 4 * 2**20
RSS_GROWTH_BOUND = 5 * 2**20
WARM_UP = 500


class _Measured(typing.NamedTuple):
    capacity_at_start: int
    capacities: list  # right after each compaction
    heaps: list  # traced heap bytes right after a compaction, at most 20 of them
    held_bytes_peak: int  # the most value bytes the tape held after an iteration
    rss_growth: int  # peak resident bytes after the warm-up, less those at its end

    @property
    def compactions(self):
        return len(self.capacities)

    @property
    def heap_growth(self):
        return self.heaps[-1] - self.heaps[0]


def _resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


needs_proc = pytest.mark.skipif(not os.path.exists("/proc/self/statm"),
                                reason="reads resident memory from /proc")


def _in_fresh_thread(fn):
    """fn() run in a new thread (so on a new, empty tape); its result or its exception."""
    outcome = {}

    def target():
        try:
            outcome["result"] = fn()
        except BaseException as e:  # re-raised in the calling thread
            outcome["error"] = e

    worker = threading.Thread(target=target)
    worker.start()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def _measure(make_step, iterations, trace_heap=True):
    """Run step() `iterations` times on a fresh tape (make_step() builds the
    step there), noting the tape's capacity and the heap after each
    compaction, the values it holds and the resident memory. See Note
    [Measuring a loop]."""
    def run():
        tp = tape._tape.state.tape
        capacity_at_start = tp.cap
        step = make_step()
        capacities, heaps = [], []
        rows = held_bytes_peak = 0
        rss_at_warm_up = rss_peak = None
        if trace_heap:
            tracemalloc.start()
        sampled_at = -iterations
        for i in range(iterations):
            capacity = tp.cap
            step()
            if tp.n < rows or tp.cap != capacity:
                capacities.append(tp.cap)
                # the heap after a compaction, at most 20 times a loop: a
                # collection costs more than a small compaction
                if trace_heap and i - sampled_at >= iterations // 20:
                    gc.collect()
                    heaps.append(tracemalloc.get_traced_memory()[0])
                    sampled_at = i
            rows = tp.n
            held_bytes_peak = max(held_bytes_peak, tp.held_bytes)
            if i == WARM_UP:
                rss_at_warm_up = rss_peak = _resident_bytes()
            elif i > WARM_UP:
                rss_peak = max(rss_peak, _resident_bytes())
        if trace_heap:
            tracemalloc.stop()
        return _Measured(capacity_at_start, capacities, heaps, held_bytes_peak,
                         rss_peak - rss_at_warm_up)

    return _in_fresh_thread(run)


# -- backward frees what it walked --------------------------------------------------

def test_second_backward_through_a_walked_graph_raises():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    loss = (x * x).sum()
    loss.backward()

    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        loss.backward()


def test_retain_graph_allows_two_backwards_that_accumulate():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    loss = (x * x).sum()

    loss.backward(retain_graph=True)
    loss.backward()

    assert x.grad.tolist() == [4.0, 8.0]


# -- memory stays flat ------------------------------------------------------------

def _dropped_graphs(create_graph):
    """Each step builds a 20-op graph on 100 elements and drops it, after
    autograd.grad(create_graph=True) of its sum, whose result is dropped
    too, or without any backward."""
    x = tape.tensor(np.linspace(-1.0, 1.0, 100), requires_grad=True)

    def step():
        y = x
        for i in range(20):
            y = _STEPS[i % len(_STEPS)](y, x)
        out = y.sum()
        if create_graph:
            tape.autograd.grad(out, x, create_graph=True)

    return step


_STEPS = (lambda y, x: y.sin(), lambda y, x: y * x, lambda y, x: y.tanh(), lambda y, x: y + x)


@pytest.fixture(scope="module")
def dropped_graphs():
    return _measure(lambda: _dropped_graphs(create_graph=False), iterations=20_000, trace_heap=False)


@pytest.fixture(scope="module")
def dropped_create_graph_backwards():
    return _measure(lambda: _dropped_graphs(create_graph=True), iterations=2_500, trace_heap=False)


def _view_changes(backward):
    """Each step changes views of a 100-element result in place (a slice by
    a slice of the leaf, a transposed reshape by sin_: CopySlices and
    AsStridedBackward0 rows, live views rebased) and drops the graph, after
    a backward or without one."""
    x = tape.tensor(np.linspace(-1.0, 1.0, 100), requires_grad=True)

    def step():
        b = x * 1
        part = b[10:50]
        square = b.view(10, 10).t()
        part.mul_(x[:40])
        square.sin_()
        out = (b * part.sum()).sum()
        if backward:
            out.backward()

    return step


@pytest.fixture(scope="module")
def view_changes():
    return _measure(lambda: _view_changes(backward=False), iterations=20_000, trace_heap=False)


@pytest.fixture(scope="module")
def view_changes_with_backward():
    return _measure(lambda: _view_changes(backward=True), iterations=20_000, trace_heap=False)


@pytest.fixture(params=["dropped_graphs", "dropped_create_graph_backwards", "view_changes",
                        "view_changes_with_backward"])
def dropped(request):
    return request.getfixturevalue(request.param)


def test_dropped_graphs_do_not_grow_the_tape(dropped):
    assert dropped.compactions >= 2
    assert set(dropped.capacities) == {dropped.capacity_at_start}


def test_dropped_graphs_give_their_values_back_a_megabyte_later(dropped):
    assert dropped.held_bytes_peak < HELD_BYTES_BOUND


@needs_proc
def test_dropped_graphs_do_not_grow_resident_memory(dropped):
    assert dropped.rss_growth < RSS_GROWTH_BOUND


SAMPLES = [(0.5, 2.0), (1.0, 3.0), (1.5, 4.0), (2.0, 5.0)]


def _training_loop():
    """Each step is an SGD step on a small least-squares fit, with the
    micrograd idiom; `loss` still names the previous graph while the next one
    is built."""
    w = tape.tensor(0.3, requires_grad=True)
    b = tape.tensor(0.0, requires_grad=True)
    v = tape.tensor([0.1, -0.1], requires_grad=True)
    loss = None

    def step():
        nonlocal loss
        loss = sum(((w * x + b - y) ** 2 for x, y in SAMPLES), (v * v).sum())
        loss.backward()
        for p in (w, b, v):
            p.data -= 0.01 * p.grad
            p.grad = None

    return step


@pytest.fixture(scope="module")
def training_loop():
    return _measure(_training_loop, iterations=8_000)


def test_loss_held_across_iterations_does_not_grow_the_tape(training_loop):
    assert set(training_loop.capacities) == {training_loop.capacity_at_start}


def test_loss_held_across_iterations_does_not_grow_the_heap(training_loop):
    assert training_loop.compactions >= 2 and training_loop.heap_growth < HEAP_GROWTH_BOUND


def test_a_constant_used_every_step_leaves_no_rows_behind():
    # each use of a constant gets a row; the rows lived as long as the
    # constant, so a fixed batch kept one row per training step, forever
    def run():
        tp = tape._tape.state.tape
        batch = tape.tensor(np.ones((8, 4)))
        w = tape.tensor(np.ones(4), requires_grad=True)
        for _ in range(500):
            ((batch @ w) ** 2).mean().backward()
        tp.compact()
        return tp.n

    assert _in_fresh_thread(run) < 10


def test_a_constant_used_across_compactions_keeps_no_old_numbering_alive():
    # each compaction gave the constant a new row, and its version counter
    # kept naming the old ones, each holding its epoch's map of the rows:
    # every later compaction remapped all of them
    def run():
        tp = tape._tape.state.tape
        batch = tape.tensor(np.ones(4))
        w = tape.tensor(np.ones(4), requires_grad=True)
        for _ in range(40):
            (batch * w).sum().backward()
            tp.compact()
        return sum(ref() is not None for ref in tp.old_epochs)

    assert _in_fresh_thread(run) <= 2


def test_a_constant_takes_one_row_for_all_its_uses():
    def run():
        tp = tape._tape.state.tape
        batch = tape.tensor(np.ones((8, 4)))
        w = tape.tensor(np.ones(4), requires_grad=True)
        (batch @ w).sum().backward()
        before = tp.n
        (batch @ w).sum().backward()
        return tp.n - before  # the product and the sum only

    assert _in_fresh_thread(run) == 2


def test_a_constant_changed_between_uses_gives_each_graph_its_value():
    c = tape.tensor([1.0, 2.0])
    w = tape.ones(2, requires_grad=True)
    first = (w * c).sum()
    c.data = tape.tensor([10.0, 20.0])  # not an in-place change: no error
    second = (w * c).sum()
    first.backward()
    assert w.grad.tolist() == [1.0, 2.0]
    w.grad = None
    second.backward()
    assert w.grad.tolist() == [10.0, 20.0]
    third = (w * c).sum()
    c.mul_(2.0)
    fourth = (w * c).sum()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        third.backward()
    w.grad = None
    fourth.backward()
    assert w.grad.tolist() == [20.0, 40.0]


# -- very long graphs ---------------------------------------------------------------

CHAIN_LENGTH = 1_000_000
FACTOR = 1.0000001


def _long_chain(inspect):
    """inspect(x, y) for y = x * FACTOR ** CHAIN_LENGTH built op by op, on a fresh tape."""
    def run():
        x = tape.tensor(1.0, requires_grad=True)
        y = x
        for _ in range(CHAIN_LENGTH):
            y = y * FACTOR
        return inspect(x, y)

    return _in_fresh_thread(run)


def test_value_of_a_dead_tensor_no_backward_reads_is_released_by_the_next_backward():
    # not at the next compaction: a loop's temporaries return to the allocator
    # while the loop runs, as PyTorch's do
    x = tape.ones(1000, requires_grad=True)
    unused = x * 3.0
    value = weakref.ref(unused.detach().numpy())
    del unused
    assert value() is not None  # the tape holds it until it knows

    (x * 2.0).sum().backward()

    assert value() is None


def test_unsaved_large_temporary_of_an_expression_is_released_when_the_next_op_records():
    # Note [Early release]: large values only, small ones wait for a backward
    x = tape.ones(100_000, requires_grad=True)
    temporary = x * 3.0
    value = weakref.ref(temporary.detach().numpy())
    y = temporary + 1.0  # add saves neither input
    del temporary

    z = y * 2.0  # the next op to record: y + 1.0's inputs are looked at

    assert value() is None
    z.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6.0)


def test_unsaved_large_temporary_is_released_when_a_compaction_comes_between_the_ops():
    def run():
        x = tape.ones(100_000, requires_grad=True)
        temporary = x * 3.0
        value = weakref.ref(temporary.detach().numpy())
        y = temporary + 1.0
        del temporary
        tape._tape.state.tape.compact()  # as the values' budget may make it, between two ops

        z = y * 2.0

        return value() is None

    assert _in_fresh_thread(run)


def test_a_large_value_is_released_while_the_sweep_runs(monkeypatch):
    # Note [Release during the sweep]: once the last VJP that reads it has
    # run, as PyTorch frees a node's saved tensors, not after the whole sweep
    sweep = tape._sweep.sweep
    running = []

    def watched(*args):
        running.append(True)
        try:
            return sweep(*args)
        finally:
            running.pop()

    monkeypatch.setattr(tape._sweep, "sweep", watched)
    x = tape.full((300_000,), 0.5, requires_grad=True)  # more than the sweep releases at once
    y = x.exp()  # saved by this exp, read by its VJP, the sweep's last row
    released_while_running = []
    value = weakref.ref(y.detach().numpy(), lambda _: released_while_running.append(bool(running)))
    z = y.exp().sum()
    del y

    z.backward()

    assert value() is None
    assert released_while_running == [True]
    np.testing.assert_allclose(x.grad.numpy(), np.exp(np.exp(0.5)) * np.exp(0.5))


def test_saved_temporaries_survive_the_ops_recorded_after_them():
    x = tape.full((1000,), 0.5, requires_grad=True)
    y = ((x * 3.0).sin() * 2.0 + 1.0).tanh()  # sin saved x * 3.0, tanh its output

    y.sum().backward()

    expected = (1 - np.tanh(2 * np.sin(1.5) + 1) ** 2) * 2 * np.cos(1.5) * 3
    np.testing.assert_allclose(x.grad.numpy(), expected)


def test_value_a_live_graph_saved_survives_the_release_of_dead_tensors():
    x = tape.ones(1000, requires_grad=True)
    saved = (x * 3.0).sin()  # sin saved x * 3.0, whose Tensor is dead
    (x * 2.0).sum().backward()

    saved.sum().backward()

    np.testing.assert_allclose(x.grad.numpy(), 2.0 + 3.0 * np.cos(3.0))


def test_backward_through_a_million_op_chain():
    def grad_of_chain(x, y):
        y.backward()
        return x.grad.item()

    # 1.0000001 ** 1e6 is about e ** 0.1
    assert _long_chain(grad_of_chain) == pytest.approx(FACTOR ** CHAIN_LENGTH, rel=1e-9)


def test_repr_and_a_thousand_step_walk_of_a_million_op_chain():
    def walk(x, y):
        fn = y.grad_fn
        for _ in range(1000):
            fn = fn.next_functions[0][0]
        return repr(y.grad_fn), fn.name()

    head, thousandth = _long_chain(walk)

    assert head.startswith("<MulBackward0 object at 0x") and thousandth == "MulBackward0"



def test_compaction_during_a_create_graph_backward_keeps_gradients_right():
    # Dead rows below the graph, and a tape filled to the brim above it: the
    # first rows the re-taped backward records make the tape compact, which
    # would renumber the rows that backward is walking.
    def run():
        state = tape._tape.state.tape
        garbage = tape.tensor(0.5, requires_grad=True)
        (garbage.sin() * garbage).backward()
        del garbage
        ps = [tape.tensor([0.1, 0.7, -1.2], requires_grad=True) for _ in range(3)]
        loss = sum(((c * p ** 2).sin()).sum() for c, p in zip([1.0, 2.0, 3.0], ps))
        while state.cap - state.n > 8:
            tape.tensor(1.0, requires_grad=True) * 2.0
        loss.backward(create_graph=True)
        return [(c, p.detach().numpy(), p.grad) for c, p in zip([1.0, 2.0, 3.0], ps)]

    for c, p, g in _in_fresh_thread(run):
        assert g is not None
        np.testing.assert_allclose(g.detach().numpy(), 2 * c * p * np.cos(c * p ** 2), rtol=1e-12)


def test_an_in_place_op_after_compaction_rebases_the_base_s_views():
    # compaction renumbers the view's row below where its old number pointed
    # (past the end of the tape here); the write must look it up renumbered.
    # Values and gradient from PyTorch
    def run():
        x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
        for _ in range(200):
            x * 2.0  # dropped: compaction removes these rows
        base = x * 1.0
        v = base[1:]
        tape._tape.state.tape.compact()
        base.mul_(10.0)
        (v * v).sum().backward()
        return v.tolist(), x.grad.tolist()

    assert _in_fresh_thread(run) == ([20.0, 30.0], [0.0, 400.0, 600.0])


def _sin_graph(x, scale):
    return ((x * scale).sin() * x).sum()


def test_gradients_made_in_the_adjoint_arena_outlive_the_next_backward():
    # Note [Adjoint arena]: the second backward reuses the first one's arena;
    # what the first captured (a gradient, a retained one) is a copy
    v = np.linspace(-2.0, 2.0, 3000)
    x = tape.tensor(v, requires_grad=True)
    (g1,) = tape.autograd.grad(_sin_graph(x, 2.0), x)
    y = x * 3.0
    y.retain_grad()
    (y.sin() * x).sum().backward()
    (g2,) = tape.autograd.grad(_sin_graph(x, 0.5), x)
    _sin_graph(x, 4.0).backward()
    np.testing.assert_allclose(g1.numpy(), np.sin(2.0 * v) + 2.0 * v * np.cos(2.0 * v), rtol=1e-13)
    np.testing.assert_allclose(g2.numpy(), np.sin(0.5 * v) + 0.5 * v * np.cos(0.5 * v), rtol=1e-13)
    np.testing.assert_allclose(y.grad.numpy(), v * np.cos(3.0 * v), rtol=1e-13)
    expected = 3.0 * v * np.cos(3.0 * v) + np.sin(3.0 * v) + np.sin(4.0 * v) + 4.0 * v * np.cos(4.0 * v)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("sizes", [(3000, 50, 3000), (50, 3000, 50), (10, 10, 100000)])
def test_backwards_larger_and_smaller_than_the_arena(sizes):
    # a sweep asking more than the arena holds makes the rest anew; one far
    # smaller gets a smaller arena
    for n in sizes:
        v = np.linspace(-1.0, 1.0, n)
        x, w = tape.tensor(v, requires_grad=True), tape.tensor(v[::-1].copy(), requires_grad=True)
        ((x * w).tanh() + (x + w).exp() * x).sum().backward()
        t = np.tanh(v * v[::-1])
        np.testing.assert_allclose(x.grad.numpy(), (1 - t * t) * v[::-1] + np.exp(v + v[::-1]) * (1 + v),
                                   rtol=1e-12)
        np.testing.assert_allclose(w.grad.numpy(), (1 - t * t) * v + np.exp(v + v[::-1]) * v, rtol=1e-12)
