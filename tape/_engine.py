"""Backward: the native sweep for first-order gradients, the re-taped sweep
for create_graph=True, and what both share (roots, seeds, checks, results).
"""
import functools
import itertools
import math
import re
import threading
import warnings
import weakref

import numpy as np

from . import _kernels, _sweep
from ._native import compiling
from ._dtypes import float32, float64, scalar_type_name
from ._registry import CONST, LEAF, REGISTRY, SAVES_OUT, SAVES_X, SAVES_Y, SAVES_Z
from ._saved import FREED_MESSAGE, drop_packed, keep_stand_in_reads, unpack_saved
from ._saved import row_tensor as _row_tensor
from ._tape import DATA_FIELD, FREED, RETAIN, RG, TARGET, anomaly, current_row, state, where
from ._tensor import DetachedInPlace, Size, Tensor, new_tensor, warn_once, wrap_value

__all__ = ["backward", "grad", "force_retaped", "raise_modified", "current_graph_task_id", "will_execute"]

_SWEEP_CHECKED = []


class force_retaped:
    """Context manager: run first-order sweeps through the re-taped (Python)
    path too, so tests can compare it with the native sweep."""
    active = False

    def __enter__(self):
        force_retaped.active = True

    def __exit__(self, *exc):
        force_retaped.active = False


def _check_sweep_module():
    if not _SWEEP_CHECKED:
        names = tuple(None if d is None else d.name for d in REGISTRY)
        if getattr(_sweep, "OPCODES", None) != names:
            raise RuntimeError("tape/_sweep.py does not match the op registry; regenerate it with "
                               "`python -m tape._gen`")
        _SWEEP_CHECKED.append(True)


def _as_list(x):
    if x is None:
        return None
    if isinstance(x, Tensor):
        return [x]
    return list(x)


def _seeds(outputs, grad_outputs):
    if grad_outputs is not None and len(grad_outputs) != len(outputs):
        raise RuntimeError(f"got {len(outputs)} tensors and {len(grad_outputs)} gradients")
    seeds = []
    for i, t in enumerate(outputs):
        g = grad_outputs[i] if grad_outputs is not None else None
        if g is None:
            if type(t._value) is float:
                seeds.append(new_tensor(1.0))
                continue
            if t.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            g = new_tensor(wrap_value(np.ones(t.shape, t.dtype)))
        elif not isinstance(g, Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
        if g.shape != t.shape:
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {_size(g.shape)} "
                               f"and output[{i}] has a shape of {_size(t.shape)}.")
        seeds.append(g)
    return seeds


def _size(shape):
    return repr(Size(shape))


def _root_rows(tp, outputs):
    rows = []
    ep = tp.ep
    for i, t in enumerate(outputs):
        if not t._rg:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a "
                               f"grad_fn")
        rows.append(t._row if t._ep is ep else tp.adopt(t))
    return np.array(rows, np.int64)


def _raise_sweep_error(tp, status, bad):
    name = REGISTRY[tp.op[bad]].grad_fn
    if status == _sweep.ERR_NOT_DIFFERENTIABLE:
        raise RuntimeError(REGISTRY[tp.op[bad]].not_differentiable)
    if status == _sweep.ERR_TENSOR:
        raise RuntimeError(f"internal error: the scalar sweep met {name}, a tensor row")
    if status == _sweep.ERR_PYTHON_ONLY:
        raise RuntimeError(f"internal error: the native sweep met {name}, which only the Python walk runs")
    if status == _sweep.ERR_FREED:
        raise RuntimeError(FREED_MESSAGE)
    if type(tp.owners[bad]) is DetachedInPlace:
        raise RuntimeError("Trying to use a saved tensor that has been detached in-place, i.e. with "
                           ".detach_().This is not supported, please use out-of-place `.detach()` instead")
    shape = list(tp.shape(bad))
    dtype = scalar_type_name(float32 if tp.dt[bad] == 1 else float64)  # as Tensor.type(): tape.DoubleTensor
    # as PyTorch, name the op that made the tensor (MulBackward0 is Mul),
    # unless it is a leaf or a constant; a graph input's was another
    # thread's (Note [Graphs across threads])
    made_tp, made = tp, bad
    if bad in tp.graph_inputs:
        made_tp, made = tp.owners[bad]._ep.tape, tp.owners[bad].row()
    op = made_tp.op[made]
    vc, saved, written = made_tp.dirtied.get(made, (None, None, None))
    written = None if written is None else written()
    # PyTorch names a saved input's grad_fn as it is now (the write's op:
    # CopySlices for a view's), and a saved result's as it was made
    if written is not None and not any(s & SAVES_OUT for s in REGISTRY[op].saves_for):
        name = None if written.grad_fn is None else written.grad_fn.name()
    else:
        name = REGISTRY[op].grad_fn if op > CONST else None
    made_by = f", which is output 0 of {re.sub(r'Backward[0-9]*$', '', name)}," if name else ""
    versions = (f" is at version {vc.n}; expected version {saved} instead." if vc is not None
                else " has been modified since it was saved.")
    hint = (" Hint: the backtrace further above shows the operation that failed to compute its gradient. The "
            "variable in question was changed in there or anywhere later. Good luck!" if anomaly.enabled else
            " Hint: enable anomaly detection to find the operation that failed to compute its gradient, with "
            "tape.autograd.set_detect_anomaly(True, check_nan=False).")
    raise RuntimeError("one of the variables needed for gradient computation has been modified by an inplace "
                       f"operation: [tape.{dtype}Tensor {shape}]{made_by}{versions}{hint}")


def raise_modified(tp, r):
    """PyTorch's error for a saved value (row r's) that an in-place op changed since."""
    _raise_sweep_error(tp, _sweep.ERR_DIRTY, r)


class _ThreadLocals:
    """The thread's state that user code in a backward (hooks, a Function's
    backward, unpack hooks) may change: grad and inference mode, the
    saved_tensors_hooks stack and its disabling. As PyTorch's engine runs
    every node under the state captured when the backward began (grad mode
    being create_graph's), the walk restores it before each node, and the
    backward restores the caller's however it exits. Anomaly mode is
    global, as PyTorch's, and stays as a node leaves it. The state is the
    calling thread's (its tape's, `tp`), also when the graph being walked
    is another thread's (Note [Graphs across threads])."""
    __slots__ = ("tp", "grad_enabled", "inference", "saved_hooks", "hooks_disabled")

    def __init__(self, tp, grad_enabled):
        self.tp = tp
        self.grad_enabled, self.inference = grad_enabled, tp.inference
        self.saved_hooks, self.hooks_disabled = list(tp.saved_hooks), tp.saved_hooks_disabled

    def restore(self):
        tp = self.tp
        tp.grad_enabled, tp.inference = self.grad_enabled, self.inference
        if tp.saved_hooks != self.saved_hooks:
            tp.saved_hooks[:] = self.saved_hooks  # the same list: a hooks context's exit pops from it
        tp.saved_hooks_disabled = self.hooks_disabled


class _backward_scope:
    """Around a backward or autograd.grad: compaction must not renumber the
    rows it holds (the re-taped sweep records new rows, and so may `.grad`
    accumulation), and the caller's thread state comes back at the end,
    however it ends (_ThreadLocals). It is PyTorch's graph task: its `id`
    and, once the sweeps have marked them while tensor hooks exist, the rows
    whose hooks it may run (`reached`: tape -> rows, for the tapes it swept,
    Note [Graphs across threads]), which register_multi_grad_hook asks about
    (current_graph_task_id, will_execute)."""

    def __init__(self, tp):
        self.tp = tp
        self.reached = {}

    def __enter__(self):
        self.tp.sweeping += 1
        self.caller = _ThreadLocals(self.tp, self.tp.grad_enabled)
        self.id = next(_GRAPH_TASK_IDS)
        self.tp.graph_tasks.append(self)

    def __exit__(self, *exc):
        self.tp.sweeping -= 1
        self.tp.graph_tasks.pop()
        self.caller.restore()


_GRAPH_TASK_IDS = itertools.count()


def _note_reached(tp, rows):
    """Tell the running graph task (the calling thread's) the rows of tape
    tp whose hooks its sweep of tp may run (will_execute)."""
    state.tape.graph_tasks[-1].reached[tp] = rows


def current_graph_task_id():
    """The running backward's id, -1 outside one (torch._C._current_graph_task_id)."""
    tasks = state.tape.graph_tasks
    return tasks[-1].id if tasks else -1


def will_execute(t):
    """Whether the running backward runs the hooks of tensor t, which must
    have hooks (torch._C._will_engine_execute_node of t's node)."""
    tp = state.tape
    if not tp.graph_tasks:
        raise RuntimeError("_will_engine_execute_node should only be called during the backward pass")
    return any(swept.row_of(t) in rows for swept, rows in tp.graph_tasks[-1].reached.items())


def _run(outputs, grad_outputs, targets, retain_graph, create_graph, into_grad=False):
    """Sweep from `outputs`; return (captured rows, their gradients as Tensors).

    `targets` are the tensors whose gradients autograd.grad returns; None
    means backward(): capture every reached leaf and retained tensor. With
    `into_grad` (backward() without `inputs`), a native sweep accumulates
    them into `.grad` itself and returns no rows.
    """
    _check_sweep_module()
    tp = state.tape
    if retain_graph is None:
        retain_graph = create_graph
    tp.reserve(len(outputs) + (len(targets) if targets else 0) + 1)
    seeds = _seeds(outputs, grad_outputs)
    roots = _root_rows(tp, outputs)
    target_rows = None
    if targets is not None:
        for t in targets:
            if not t._rg:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
        target_rows = np.array([r for t in targets for r in (tp.adopt(t), *t._left_rows_on(tp))], np.int64)
    if tp.graph_inputs:
        return _run_across(tp, roots, seeds, targets, target_rows, retain_graph, create_graph)
    with tp.lock:
        return _sweep_tape(tp, roots, seeds, target_rows, retain_graph, create_graph, into_grad)


def _sweep_tape(tp, roots, seeds, target_rows, retain, create_graph, into_grad):
    """The sweep of tape tp from `roots`, with tp's lock held: the native
    one, or the Python walk; see _run."""
    # the TARGET marks are this sweep's alone: an autograd.grad that a VJP
    # runs (a checkpoint's) must not capture, and walk on to, the rows of
    # the one that runs the VJP
    outer_targets, tp.target_rows = tp.target_rows, target_rows
    if outer_targets is not None:
        tp.flags[outer_targets] &= ~np.uint8(TARGET)
    if target_rows is not None:
        tp.flags[target_rows] |= TARGET
    try:
        if (create_graph or force_retaped.active or anomaly.enabled
                or _reaches_a_python_row(tp, roots)):
            return _retaped(tp, roots, seeds, target_rows, retain, create_graph)
        return _native(tp, roots, seeds, target_rows, retain, into_grad)
    finally:
        if target_rows is not None:
            tp.flags[target_rows] &= ~np.uint8(TARGET)
        tp.target_rows = outer_targets
        if outer_targets is not None:
            tp.flags[outer_targets] |= TARGET


def _run_across(tp, roots, seeds, targets, target_rows, retain, create_graph):
    """_run for a tape with graph inputs: its own sweep, then the sweeps of
    the tapes whose graphs it reached (Note [Graphs across threads]). The
    gradients those find for `targets` are returned at the targets' rows
    here."""
    leading = None if targets is None else _leading_inputs(tp, targets)
    with tp.lock:
        if target_rows is not None:  # the graph inputs are captured too, to be handed on
            target_rows = np.concatenate([target_rows, _leading_rows(tp, leading)])
        rows, grads = _sweep_tape(tp, roots, seeds, target_rows, retain, create_graph, False)
        rows, grads, handed = _split_graph_inputs(tp, rows, grads)
    found = _hand_on(handed, targets, leading, retain, create_graph)
    at = {r: k for k, r in enumerate(rows)}
    for i, g in found.items():
        r = tp.row_of(targets[i])
        k = at.get(r)
        if k is None:
            at[r] = len(rows)
            rows.append(r)
            grads.append(g)
        else:
            grads[k] = g if grads[k] is None else grads[k] + g
    return rows, grads


def _split_graph_inputs(tp, rows, grads):
    """(rows, gradients) of a sweep of tp without its graph inputs, and the
    (token, gradient) pairs those got, to hand on."""
    kept_rows, kept_grads, handed = [], [], []
    graph_inputs = tp.graph_inputs
    for r, g in zip(rows, grads):
        if r not in graph_inputs:
            kept_rows.append(r)
            kept_grads.append(g)
        elif g is not None:
            handed.append((tp.owners[r], g))
    return kept_rows, kept_grads, handed


def _hand_on(handed, targets, leading, retain, create_graph):
    """Run the backward over each tape whose rows the (token, gradient)
    pairs in `handed` name, from those rows, once per tape, after every tape
    that hands gradients on to it (Note [Graphs across threads]).
    backward() (`targets` None) accumulates into each tape's leaves;
    autograd.grad's gradients for `targets` come back as {index in targets:
    gradient}, handed on along the graph inputs in `leading` only."""
    found = {}
    pending = {}  # tape -> the (token, gradient) pairs for its rows
    for token, g in handed:
        pending.setdefault(token._ep.tape, []).append((token, g))
    order, _ = _tape_order([token for token, _ in handed])
    while pending:
        tp = next((t for t in order if t in pending), None) or next(iter(pending))
        items = pending.pop(tp)
        with tp.lock:
            seeds = {}
            for token, g in items:
                r = token.row()
                seeds[r] = g if r not in seeds else seeds[r] + g
            roots = np.fromiter(seeds, np.int64, len(seeds))
            wanted = {}  # row -> the indices of the targets it stands for
            target_rows = None
            if targets is not None:
                for i, t in enumerate(targets):
                    for r in (tp.row_of(t), *t._left_rows_on(tp)):
                        if r >= 0 and r not in tp.graph_inputs:
                            wanted.setdefault(r, []).append(i)
                target_rows = np.concatenate([np.fromiter(wanted, np.int64), _leading_rows(tp, leading)])
            tp.swept_across = True
            try:
                rows, grads = _sweep_tape(tp, roots, list(seeds.values()), target_rows, retain,
                                          create_graph, False)
            finally:
                tp.swept_across = False
                # the rows above the roots may be half-written by tp's own
                # thread: its next sweep scans them for kernels again
                tp.kernels_scanned = min(tp.kernels_scanned, int(roots.max()) + 1)
            rows, grads, handed = _split_graph_inputs(tp, rows, grads)
            if targets is None:
                _into_grads(tp, rows, grads, None, create_graph)
        for r, g in zip(rows, grads):
            for i in wanted.get(r, ()):
                found[i] = g if found.get(i) is None else found[i] + g
        for token, g in handed:
            pending.setdefault(token._ep.tape, []).append((token, g))
    return found


def _tape_order(tokens):
    """The tapes that the graph inputs named by `tokens` lead to, each after
    every tape whose graph inputs lead to it, so that its sweep starts with
    all of its gradients. The walk that finds them follows every input
    edge (a gradient may or may not flow along it). Tapes whose graphs lead
    to each other (A -> B -> A) come in the order found: Note [Graphs across
    threads]. Also returns tape -> the tokens found that name its rows."""
    leads_to = {}  # tape -> the tapes its reached graph inputs name
    named_on = {}
    explored = set()
    frontier = list(tokens)
    while frontier:
        by_tape = {}
        for token in frontier:
            if token not in explored:
                explored.add(token)
                by_tape.setdefault(token._ep.tape, []).append(token)
        frontier = []
        for tp, named in by_tape.items():
            named_on.setdefault(tp, []).extend(named)
            successors = leads_to.setdefault(tp, set())
            with tp.lock:
                rows = np.array([token.row() for token in named], np.int64)
                reached = tp.reachable(rows)
                for r in np.intersect1d(reached, np.fromiter(tp.graph_inputs, np.int64)).tolist():
                    successors.add(tp.owners[r]._ep.tape)
                    frontier.append(tp.owners[r])
    before = {tp: 0 for tp in leads_to}  # how many tapes lead to each
    for successors in leads_to.values():
        for tp in successors:
            before[tp] += 1
    order = [tp for tp, n in before.items() if n == 0]
    for tp in order:  # (Kahn's)
        for successor in leads_to[tp]:
            before[successor] -= 1
            if before[successor] == 0:
                order.append(successor)
    order.extend(tp for tp in leads_to if tp not in order)
    return order, named_on


def _leading_inputs(tp, targets):
    """The tokens of the graph inputs of tape tp, and of the tapes their
    graphs reach, whose graphs lead to one of `targets` (autograd.grad's
    inputs): those it hands gradients on along, as PyTorch's engine runs
    only the nodes on paths to its inputs, and frees only those. Decided
    from the last tapes back; where tapes' graphs lead to each other, a
    graph input not decided yet counts as leading."""
    with tp.lock:
        tokens = [tp.owners[r] for r in tp.graph_inputs]
    order, named_on = _tape_order(tokens)
    leading, decided = set(), set()
    for home in reversed(order):
        with home.lock:
            rows = [r for t in targets for r in (home.row_of(t), *t._left_rows_on(home))
                    if r >= 0 and r not in home.graph_inputs]
            rows += [r for r in home.graph_inputs if home.owners[r] in leading or home.owners[r] not in decided]
            roots = np.array([token.row() for token in named_on[home]], np.int64)
            top = max([int(roots.max()), *rows]) + 1
            marks = np.zeros(top, np.uint8)  # TARGET marks of its own: the tape's belong to its thread
            marks[rows] = TARGET
            leads = np.zeros(top, np.int64)
            _sweep.mark_leads(home.a0, home.a1, home.xs, home.nx, home.pool, marks, leads, roots, 1,
                              np.empty(top, np.int64))
            for token, r in zip(named_on[home], roots.tolist()):
                decided.add(token)
                if leads[r] == 1:
                    leading.add(token)
    return leading


def _leading_rows(tp, leading):
    """The rows of tp's graph inputs that autograd.grad hands on along
    (`leading`, from _leading_inputs)."""
    return np.fromiter((r for r in tp.graph_inputs if tp.owners[r] in leading), np.int64)


def _sweep_call(tp, roots, seed_off, seeds, retain, targeted, compute, scratch=None):
    tp.sweep_id += 1
    scalar = tp.tensor_rows == 0 and not tp.ndim[roots].any()
    sweep = _sweep.sweep_scalar if scalar else _sweep.sweep
    if sweep in _called and (not targeted or _sweep.mark_leads in _called):
        status, bad, ncaps, nvisited, nreleased, grads = _sweep_loading_kernels(
            tp, sweep, roots, seed_off, seeds, retain, targeted, compute, scratch)
    else:  # Note [Compile notice]: what this call may compile first, and about how long
        parts = []
        if sweep not in _called:
            parts.append((f"the native backward sweep of {'0-d tensors' if scalar else 'tensors'} "
                          "and its graph's kernels", 3 if scalar else 10))
        if targeted and _sweep.mark_leads not in _called:
            parts.append(("autograd.grad's graph walk", 1))
        with compiling(" and ".join(what for what, _ in parts), sum(seconds for _, seconds in parts)):
            status, bad, ncaps, nvisited, nreleased, grads = _sweep_loading_kernels(
                tp, sweep, roots, seed_off, seeds, retain, targeted, compute, scratch)
        _called.update((sweep, _sweep.mark_leads) if targeted else (sweep,))
    if status != _sweep.OK:
        tp.last_sweep_error = (status, bad)
        _raise_sweep_error(tp, status, bad)
    # lists now: a sweep that a hook or a VJP runs would overwrite `work`; the
    # offsets are read (by add_into) before any other sweep can run
    work = tp.work
    return (work[0, :ncaps].tolist(), grads, work[4, :ncaps + 1], work[1, :nvisited].tolist(),
            work[2, :nreleased].tolist())


_called = set()  # the native sweeps called once in this process


# Note [Adjoint arena]
# ~~~~~~~~~~~~~~~~~~~~
# The native sweep makes each array row's adjoint zero on first use. Made
# with np.zeros, a large one was fresh memory from the OS on every backward
# (glibc gives a freed block at the heap's top back): W4 spent a fifth of
# its backward in page faults and zeroing. A tape keeps an arena, sized by
# its last sweep's adjoints (at most _ARENA_LARGEST times the largest one),
# which the sweep hands out in turn, zeroed in warm memory, before it makes
# new arrays; nothing outlives the sweep in it (the captured gradients are
# copied out). Its memory stays with the tape between backwards, as much
# as the next sweep will ask for. A sweep that asks for none (a re-taped
# backward's walk, a sweep of 0-d rows) gives it back, so the computing
# sweep after such a walk (W7's second autograd.grad) makes its adjoints
# anew: keeping the arena through the walk measured slower there (1.6 ->
# 2.9 ms compiled, 650 more page faults a call, as glibc then gave W7's
# other blocks back to the OS).
_ARENA_LARGEST = 4


def _adjoint_arena(tp):
    """The arena for tp's next sweep and its counts (Note [Adjoint arena]):
    resized to what the last sweep asked for when it is smaller or far
    larger."""
    at = tp.arena_at
    asked = int(min(at[1], _ARENA_LARGEST * at[2]))
    size = tp.adjoint_arena.size
    if asked > size or _ARENA_LARGEST * asked < size:
        tp.adjoint_arena = np.empty(asked)
    at[:] = 0
    return tp.adjoint_arena, at


def _sweep_loading_kernels(tp, sweep, roots, seed_off, seeds, retain, targeted, compute, scratch):
    """Call `sweep`; first load the kernels it reports missing, if any
    (Note [Kernels by opcode]): it stops before it begins, so it is called
    again, with the same marks."""
    if tp.strided:  # Note [Strided values] in tape/_tape.py
        tp.copy_strided()
    flags, nuse = tp.flags, tp.nuse
    if not retain and tp.swept_across:
        # another thread's tape, whose own thread writes these columns
        # meanwhile: the sweep frees into copies (Note [Graphs across threads])
        top = int(roots.max()) + 1
        flags, nuse = flags[:top].copy(), nuse[:top].copy()
    if targeted:
        _sweep.mark_leads(tp.a0, tp.a1, tp.xs, tp.nx, tp.pool, flags, tp.work[3], roots, tp.sweep_id, tp.work[1])
    arena, arena_at = _adjoint_arena(tp)
    while True:
        n = tp.n
        result = sweep(tp.op, tp.a0, tp.a1, tp.xs, tp.nx, tp.c, tp.p, tp.sval, tp.ptr, tp.numel, tp.ndim, tp.shp,
                       tp.ia, tp.ian, tp.dt, flags, tp.fresh_from, tp.stamp, tp.sadj, nuse, tp.pool,
                       tp.work, tp.sweep_id, roots, seed_off, seeds, retain, targeted, compute,
                       _NO_SCRATCH if scratch is None else scratch, _kernels.ADDRESSES,
                       tp.kernels_scanned, n, tp.release_address if compute else 0, arena, arena_at)
        if result[0] != _sweep.ERR_KERNELS:
            if compute:
                tp.kernels_scanned = n
            if flags is not tp.flags:
                _merge_freed(tp, flags)
            return result
        missing = tp.work[2, :result[1]]
        with compiling(f"the native backward kernels of {', '.join(_kernels.names(missing))}",
                       _KERNEL_SECONDS * len(missing)):
            _kernels.load(missing)


def _merge_freed(tp, flags):
    """Mark FREED the rows of tp that a sweep into a copy of its flags
    marked: one row at a time, under the GIL, as tp's own thread writes its
    flags. The copy's counts of saved values are dropped: the values they
    would release stay until compaction drops their rows."""
    m_flags = tp.m_flags
    for r in np.flatnonzero(flags & FREED).tolist():
        m_flags[r] |= FREED


# an empty cache's compile time of one kernel, measured: 0.2-1 s
_KERNEL_SECONDS = 0.5


def _release(tp, released, retain):
    """After a sweep: drop the values it freed, then any whose Tensors died."""
    if not retain and released:
        tp.release(released)
    tp.release_dead()


def _native(tp, roots, seeds, target_rows, retain, into_grad):
    if len(seeds) == 1:
        v = seeds[0]._value
        flat = _ONE if type(v) is float and v == 1.0 else np.asarray(v, np.float64).reshape(-1)
        seed_off = _FIRST
    else:
        flat = [np.asarray(s._value, np.float64).reshape(-1) for s in seeds]
        seed_off = np.zeros(len(seeds), np.int64)
        seed_off[1:] = np.cumsum([f.size for f in flat])[:-1]
        flat = np.concatenate(flat)
    # backward() adds the flat gradients into .grad and drops them, so they go
    # in the tape's scratch: a new array each time was fresh memory to zero
    # and fault in (W5: a third of its page faults, which were 20% of its time)
    scratch = tp.grad_scratch if into_grad else None
    rows, flat_grads, offsets, _, released = _sweep_call(tp, roots, seed_off, flat, retain,
                                                         target_rows is not None, True, scratch)
    if tp.hooks:
        _note_reached(tp, set(rows))
    node_state = _ThreadLocals(state.tape, False) if tp.hooks else None  # what leaf hooks run in
    _release(tp, released, retain)
    spans = offsets.tolist()
    if into_grad:
        if flat_grads.size > scratch.size:  # it did not fit: keep the larger one
            tp.grad_scratch = flat_grads
        _add_into_grads(tp, rows, flat_grads, offsets, spans, node_state)
        return (), ()
    return rows, [_hooked(tp, r, _flat_grad(tp, r, flat_grads, spans[k], spans[k + 1]), node_state)
                  for k, r in enumerate(rows)]


def _flat_grad(tp, r, flat_grads, lo, hi, copy=False):
    """Row r's gradient, flat_grads[lo:hi] from the native sweep, as a Tensor
    (of a copy when flat_grads will be reused)."""
    if tp.m_ndim[r] == 0 and tp.m_dt[r] == 0:
        return new_tensor(float(flat_grads[lo]))
    g = flat_grads[lo:hi].reshape(tp.shape(r))
    if tp.m_dt[r] != 0:
        return new_tensor(g.astype(np.float32))
    return new_tensor(g.copy() if copy else g)


def _add_into_grads(tp, rows, flat_grads, offsets, spans, node_state):
    """backward()'s accumulation of a native sweep's gradients into the
    `.grad` of the leaves and retained tensors it reached. Every `.grad` that
    already holds a C-contiguous float64 array of the gradient's size is added
    into in place, by one native call: a NumPy add per tensor, with a Tensor
    and a view made for it, was a quarter of a small MLP's backward. A first
    gradient, or a float32 one, goes through _accumulate_grad; see
    _add_into_number_grads for 0-d ones."""
    pending = enumerate(rows)
    if spans[-1] <= 2 * len(rows) and not tp.hooks:  # mostly 0-d: see _add_into_number_grads
        pending = _add_into_number_grads(tp, rows, flat_grads, offsets)
    ops, owners, hooks = tp.m_op, tp.owners, tp.hooks
    dest = [0] * len(rows)
    in_place = False
    rest = []
    for k, r in pending:
        if ops[r] == LEAF:
            owner = owners[r]  # tp.tensor_at(r), inline
            if isinstance(owner, weakref.ref):
                owner = owner()
        else:
            owner = _retained_tensor(tp, r)
        if owner is None:
            continue
        grad = owner._grad
        if grad is not None and not (hooks and hooks.get(r)):
            value = grad._value
            if (type(value) is np.ndarray and (value.dtype is float64 or value.dtype == float64)
                    and value.flags.c_contiguous and value.size == spans[k + 1] - spans[k]):
                dest[k] = id(value) + DATA_FIELD
                in_place = True
                _changing_in_place(grad)
                continue
        rest.append((owner, k, r))
    if in_place:
        _sweep.add_into(flat_grads, offsets, np.array(dest, np.int64))
    for owner, k, r in rest:  # flat_grads is the scratch: each .grad gets a copy
        g = _hooked(tp, r, _flat_grad(tp, r, flat_grads, spans[k], spans[k + 1], True), node_state)
        _accumulate_grad(owner, g, False)


def _add_into_number_grads(tp, rows, flat_grads, offsets):
    """The 0-d float64 leaves among `rows` get their gradient (row k's at
    flat_grads[offsets[k]]) added to the Python float of their `.grad`, or as
    their first `.grad`, here: the general path made two Tensors for each,
    most of a scalar network's backward (353 weights in W2). Which rows are
    such leaves is found for all at once (a column read per row in Python
    was a third of this). Returns the (k, row) pairs left to it."""
    at = np.array(rows, np.int64)
    plain = (tp.op[at] == LEAF) & (tp.ndim[at] == 0) & (tp.dt[at] == 0)
    numbers = iter(flat_grads[offsets[:-1][plain]].tolist())  # the plain rows' gradients, in order
    owners = tp.owners
    left = []
    for k, r, one in zip(itertools.count(), rows, plain.tolist()):
        if not one:
            left.append((k, r))  # a retained tensor, a float32 leaf
            continue
        g = next(numbers)
        owner = owners[r]
        if type(owner) is not Tensor:
            left.append((k, r))  # a leaf that left its row
            continue
        grad = owner._grad
        if grad is None:
            owner._grad = new_tensor(g)
        elif type(grad._value) is float:
            _changing_in_place(grad)
            grad._value += g
        else:
            left.append((k, r))
    return left


# what a sweep whose flat gradients are returned gets as scratch: never large enough
_NO_SCRATCH = np.zeros(0)
# the seed of one output whose gradient is 1, and its offset (the sweep only reads them)
_ONE = np.ones(1)
_FIRST = np.zeros(1, np.int64)


class _Ctx:
    """What a differentiable VJP sees of its row: the inputs and output as
    Tensors (or the float constant of a one-element operand), made when first
    asked for; the parameter p, the shapes and the static ints."""

    # what a python-only op's VJP reads of the walk (Note [Python-only rows])
    retain = True
    # whether saved_tensors_hooks packed the row's saved values (Note [Saved tensor hooks])
    packed = False

    def __init__(self, tp, r, leads=None):
        self._tp, self._r = tp, r
        a, b = self._a, self._b = tp.m_a0[r], tp.m_a1[r]
        self.c, self.p = tp.m_c[r], tp.m_p[r]
        flags = tp.m_flags
        # an input needs a gradient when it requires grad and, for
        # autograd.grad, leads to one of its inputs (the walk's copy of the
        # sweep's marks, `leads`)
        self.leads = leads
        if tp.m_nx[r]:  # a row of more inputs, or a variadic op's (Note [Tape layout])
            self.rows = rows = tp.inputs(r)
            self.needs = tuple(q >= 0 and bool(flags[q] & RG) and (leads is None or bool(leads[q]))
                               for q in rows)
            return
        self.needs = (a >= 0 and bool(flags[a] & RG) and (leads is None or bool(leads[a])),
                      b >= 0 and bool(flags[b] & RG) and (leads is None or bool(leads[b])))
        # the rows that the VJP's gradients go to, in order with `needs`
        self.rows = (a, b)

    # the rest is read by some VJPs only, so made when asked for
    @functools.cached_property
    def shape(self):
        return self._tp.shape(self._r)

    @functools.cached_property
    def x_shape(self):
        return self._tp.shape(self._a) if self._a >= 0 else ()

    @functools.cached_property
    def y_shape(self):
        return self._tp.shape(self._b) if self._b >= 0 else ()

    @functools.cached_property
    def ints(self):
        return self._tp.ints(self._r).copy()

    @property
    def x(self):
        if self._a < 0:
            return self.c
        return self._unpacked(0, self._a) if self.packed else _row_tensor(self._tp, self._a)

    @property
    def y(self):
        if self._b < 0:
            return self.c
        return self._unpacked(1, self._b) if self.packed else _row_tensor(self._tp, self._b)

    @property
    def z(self):
        """The third input of an op of three."""
        z = self.rows[2]
        return self._unpacked(3, z) if self.packed else _row_tensor(self._tp, z)

    @functools.cached_property
    def z_shape(self):
        return self._tp.shape(self.rows[2])

    def input_shape(self, j):
        """The shape of input j (in `rows`' order)."""
        return self._tp.shape(self.rows[j])

    @property
    def out(self):
        return self._unpacked(2, self._r) if self.packed else _row_tensor(self._tp, self._r)

    def _unpacked(self, k, r):
        """Saved value k (x, y, out, z) at row r of a row whose values
        saved_tensors_hooks packed: unpacked once per walk of the row, as
        PyTorch unpacks once per node call."""
        done = self.__dict__.setdefault("_unpacked_values", {})
        t = done.get(k)
        if t is None:
            t = done[k] = unpack_saved(self._tp, self._r, k, _row_tensor(self._tp, r))
        return t


_VJPS = {}


def _vjp_of(opdef):
    vjp = _VJPS.get(opdef.code)
    if vjp is None:
        if opdef.elementwise:
            from ._record import elementwise_vjp
            vjp = elementwise_vjp(opdef)
        else:
            vjp = opdef.vjp
        _VJPS[opdef.code] = vjp
    return vjp


def _accumulate(grads, r, g):
    prev = grads.get(r)
    grads[r] = g if prev is None else prev + g


# Note [Undefined gradients]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# In the Python walk a row's gradient is one of three things, as in
# PyTorch's engine: a Tensor; a zero that no tensor holds (`zeros`: a VJP of
# tape's returned None for an input that needs a gradient, which the native
# sweep would have added nothing to, and which PyTorch's formulas give as
# zeros); or undefined, when nothing reached it but None from a custom
# Function's backward (PyTorch's undefined tensor). A zero flows on as a
# zero, without being computed, and ends as a zeros tensor; an undefined
# gradient flows on as nothing and ends as None (x.grad stays None). The
# hooks of a row reached with a zero see zeros, those of one reached with an
# undefined gradient see None, as do those of the sibling outputs of a node
# that the walk ran that got no gradient (unbind's parts: `tp.hook_groups`;
# a Function's outputs, whose node runs their hooks itself); a Function's
# node still runs its backward, on materialized zeros.


def _retaped(tp, roots, seeds, target_rows, retain, create_graph):
    """Walk the reached rows in reverse in Python, running each op's
    differentiable VJP; with create_graph the VJPs record on the tape."""
    node_state = _ThreadLocals(state.tape, bool(create_graph))
    empty = np.zeros(0)
    try:
        caps, _, _, visited, released = _sweep_call(
            tp, roots, np.zeros(len(roots), np.int64), empty, retain, target_rows is not None, False)
    except RuntimeError:
        if anomaly.enabled:
            _warn_error_detected(tp, _failed_row(tp, roots, *tp.last_sweep_error))
        raise
    captured = set(caps)
    if tp.hooks:
        _note_reached(tp, captured.union(visited))
    # the sweep's marks of the rows leading to autograd.grad's inputs, copied:
    # a VJP or hook that runs a backward of its own (a checkpoint's
    # recomputation) overwrites the tape's
    leads = (None if target_rows is None
             else (tp.work[3, :int(roots.max()) + 1] == tp.sweep_id).tolist())
    grads = {}
    zeros = set()  # Note [Undefined gradients]
    hooked = set()  # rows whose hooks ran when the walk reached them
    groups_done = set()
    nodes_run = set()  # the multi-output nodes with hooks that the walk ran
    for r, s in zip(roots.tolist(), seeds):
        _accumulate(grads, r, s)
    node_state.restore()
    user_code_ran = False  # a row's hooks, Function or unpack hooks may have changed the state
    for r in visited:
        if user_code_ran:
            node_state.restore()
            user_code_ran = False
        opdef = REGISTRY[tp.op[r]]
        hooks = tp.hooks.get(r)
        node = r - tp.m_oi[r]
        node_hooks = tp.node_hooks.get(node) if tp.node_hooks and opdef.arity else None
        if opdef.python_only:
            # a custom Function's node runs once, where the walk first meets
            # one of its rows, on all of their gradients (Note [Function rows])
            if node in nodes_run:
                continue
            nodes_run.add(node)
            r, hooks, g = node, None, None
        else:
            outputs = tp.outputs(r) if node_hooks else None
            if outputs is not None and len(outputs) > 1:
                # a node of several outputs runs its hooks once, on all of their gradients
                if node not in nodes_run:
                    nodes_run.add(node)
                    node_state.restore()
                    _run_outputs(tp, outputs, node_hooks, grads, captured, zeros, leads, node_state)
                    user_code_ran = True
                continue
            g = grads.get(r) if r in captured else grads.pop(r, None)
            if g is None and r in zeros:
                if not (hooks or node_hooks):  # passed on without being computed
                    ctx = _Ctx(tp, r, leads)
                    zeros.update(row for row, need in zip(ctx.rows, ctx.needs) if need)
                    continue
                g = _zeros_of(tp, r)
            elif g is None and not (hooks or r in tp.hook_groups):
                continue
        user_code_ran = bool(hooks or opdef.python_only or tp.packed or tp.hook_groups or node_hooks)
        try:
            if opdef.python_only:
                grad_outputs = _function_output_grads(tp, node, grads, captured, zeros, hooked, node_state)
            else:
                if tp.hook_groups and r in tp.hook_groups:
                    _hook_silent_siblings(tp, r, grads, zeros, hooked, groups_done, node_state)
                if hooks:
                    g = _hooked(tp, r, g, node_state)
                    hooked.add(r)
                    if r in captured and g is not None:  # what .grad or autograd.grad gets is the hooked value
                        grads[r] = g
                if g is None:
                    continue
                grad_outputs = (g,)
            ctx = _Ctx(tp, r, leads)
            if tp.packed and r in tp.packed:
                ctx.packed = True
            if opdef.python_only:
                if not any(ctx.needs):  # autograd.grad's input that leads to no other: no node runs
                    continue
                ctx.retain = retain
            # PyTorch runs a node (and its hooks) only when it passes a
            # gradient on: not autograd.grad's input that leads to no other
            if node_hooks and not any(ctx.needs):
                node_hooks = None
            if node_hooks and node_hooks[1]:
                grad_outputs = _node_hooked(tp, node_hooks[1], grad_outputs, (grad_outputs,), node_state)
            if create_graph:
                input_grads = _recorded_vjp(opdef, ctx, grad_outputs)
            else:
                input_grads = _vjp_of(opdef)(ctx, *grad_outputs)
            if node_hooks and node_hooks[0]:
                input_grads = _input_hooked(tp, opdef, node_hooks[0], ctx, input_grads, grad_outputs, node_state)
            if anomaly.enabled and anomaly.check_nan:
                _check_nan(tp, r, input_grads)
        except BaseException:
            if anomaly.enabled:
                _warn_error_detected(tp, r)
            raise
        _pass_on(tp, ctx, input_grads, grads, zeros, opdef.python_only)
    if tp.packed and not retain:  # the walk freed these rows, and what they packed goes too
        drop_packed(tp, visited)
    _release(tp, released, retain)
    out = []
    for r in caps:
        g = grads.get(r)
        if g is None and r in zeros:
            g = _zeros_of(tp, r)
        if r not in hooked:
            g = _hooked(tp, r, g, node_state)
        out.append(g)
    return caps, out


def _recorded_vjp(opdef, ctx, grad_outputs):
    """A row's VJP under create_graph: the rows it records on the stand-ins
    of the saved values it unpacked save their values (Note [Saved tensor
    hooks]). A VJP that runs a backward of its own (a checkpoint's) has its
    stand-ins apart from that backward's."""
    recording = state.tape
    outer, recording.stand_ins = recording.stand_ins, []
    lo = recording.n
    try:
        input_grads = _vjp_of(opdef)(ctx, *grad_outputs)
        if recording.stand_ins:
            keep_stand_in_reads(recording, lo)
    finally:
        recording.stand_ins = outer
    return input_grads


def _pass_on(tp, ctx, input_grads, grads, zeros, python_only):
    """Add the gradients a row's VJP gave into those of its inputs' rows."""
    for row, need, gi in zip(ctx.rows, ctx.needs, input_grads):
        if not need:
            continue
        if gi is None:
            if not python_only:
                zeros.add(row)
            continue
        # as PyTorch's engine, a gradient takes its input's dtype
        # (what a python-only op hands on may be no Tensor)
        if type(gi) is Tensor and (gi.dtype == float32) != (tp.m_dt[row] == 1):
            gi = gi.to(float32 if tp.m_dt[row] == 1 else float64)
        _accumulate(grads, row, gi)


def _run_outputs(tp, outputs, node_hooks, grads, captured, zeros, leads, node_state):
    """Run a node of several outputs (rows `outputs`, Note [Tape layout])
    that has hooks: its pre-hooks on the gradients of all its outputs (None
    where none came), each output row's VJP, their sum for each input, then
    its hooks, as PyTorch runs the node once. Every gradient of its outputs
    is complete here: their consumers are above them all."""
    gs = _output_grads(tp, outputs, grads, captured, zeros)
    if all(g is None for g in gs):
        return
    ctx = _Ctx(tp, outputs[0], leads)
    if not any(ctx.needs):  # PyTorch runs no node that passes no gradient on
        return
    prehooks, hooks = node_hooks[1], node_hooks[0]
    if prehooks:
        gs = _node_hooked(tp, prehooks, gs, (gs,), node_state)
    total = [None] * len(ctx.rows)
    for q, g in zip(outputs, gs):
        if g is None:
            continue
        part = _vjp_of(REGISTRY[tp.op[q]])(_Ctx(tp, q, leads), g)
        total = [t if p is None else p if t is None else t + p for t, p in zip(total, part)]
    if hooks:
        total = _input_hooked(tp, REGISTRY[tp.op[outputs[0]]], hooks, ctx, total, gs, node_state)
    _pass_on(tp, ctx, total, grads, zeros, False)


def _output_grads(tp, outputs, grads, captured, zeros):
    """The gradients of a node's output rows `outputs`, taken from the
    walk's (a captured row's stays), None where none came."""
    gs = []
    for q in outputs:
        g = grads.get(q) if q in captured else grads.pop(q, None)
        gs.append(_zeros_of(tp, q) if g is None and q in zeros else g)
    return tuple(gs)


def _function_output_grads(tp, node, grads, captured, zeros, hooked, node_state):
    """The gradients of the outputs of a custom Function's node (Note
    [Function rows]), after the hooks of their tensors, on None where no
    gradient came (Note [Undefined gradients]): tensor by tensor in the
    order each got its first hook, as PyTorch runs a node's tensor pre-hooks."""
    outputs = tp.outputs(node)
    gs = list(_output_grads(tp, outputs, grads, captured, zeros))
    for q in [q for q, hooks in tp.hooks.items() if hooks and q in outputs]:
        k = q - node
        gs[k] = _hooked(tp, q, gs[k], node_state)
        hooked.add(q)
        if q in captured and gs[k] is not None:
            grads[q] = gs[k]
    return tuple(gs)


def _input_hooked(tp, opdef, hooks, ctx, input_grads, grad_outputs, node_state):
    """A node's gradients of its inputs after its hooks, which see them in
    PyTorch's order of next_functions (the row's own, but for an op that
    keeps its inputs in another: `edge_order`)."""
    grad_inputs = tuple(gi if need else None for need, gi in zip(ctx.needs, input_grads))
    order = opdef.edge_order
    if order is None:
        return _node_hooked(tp, hooks, grad_inputs, (grad_inputs, grad_outputs), node_state)
    shown = tuple(grad_inputs[k] for k in order)
    hooked = _node_hooked(tp, hooks, shown, (shown, grad_outputs), node_state)
    back = [None] * len(order)
    for position, k in enumerate(order):
        back[k] = hooked[position]
    return tuple(back)


def _zeros_of(tp, r):
    """Row r's zero gradient as a tensor (Note [Undefined gradients])."""
    return new_tensor(wrap_value(np.zeros(tp.shape(r), np.float64 if tp.dt[r] == 0 else np.float32)))


def _hook_silent_siblings(tp, r, grads, zeros, hooked, groups_done, node_state):
    """The walk runs the node whose outputs include row r's (the first of
    them it reaches): the hooks of its other outputs that got no gradient
    see None, as PyTorch runs every pre-hook of a node it runs. All of them
    are complete by now: their consumers are above them all."""
    group = tp.hook_groups[r]
    if group in groups_done:
        return
    groups_done.add(group)
    for q in group:
        if q != r and q >= 0 and tp.hooks.get(q) and q not in hooked and q not in zeros \
                and grads.get(q) is None:
            _hooked(tp, q, None, node_state)
            hooked.add(q)


def _node_name(tp, r):
    state = tp.python_rows.get(r)  # a custom Function's node is named by its class
    return REGISTRY[tp.op[r]].grad_fn if state is None else state._node_type().__name__


def _warn_error_detected(tp, r):
    """Anomaly mode: as PyTorch, a node whose backward raised is named in a
    warning with the forward call that recorded it, before the error goes on."""
    if r < 0:
        return
    trace = tp.traces.get(r)
    where_from = ("Traceback of forward call that caused the error:\n" + "".join(trace)
                  if trace else "No forward pass information available. Enable detect "
                  "anomaly during forward pass for more information.")
    warnings.warn(f"Error detected in {_node_name(tp, r)}. {where_from}", UserWarning, stacklevel=3)


def _failed_row(tp, roots, status, bad):
    """The row whose backward the structural sweep refused to run: the one
    it reports, or for a modified saved value, the highest reached row that
    saved it (the first the walk met)."""
    if status != _sweep.ERR_DIRTY:
        return bad
    reached = tp.reachable(roots)
    for r in reached[::-1].tolist():
        saves_for = REGISTRY[tp.op[r]].saves_for
        saves = saves_for[0] | saves_for[1] | saves_for[2]
        inputs = tp.inputs(r)
        if r == bad and saves & SAVES_OUT or r < tp.fresh_from[bad] and (
                inputs[0] == bad and saves & SAVES_X or inputs[1:2] == (bad,) and saves & SAVES_Y
                or inputs[2:3] == (bad,) and saves & SAVES_Z):
            return r
    return -1


def _check_nan(tp, r, input_grads):
    """Anomaly mode: raise PyTorch's error for the first nan gradient row r's VJP returned."""
    for k, gi in enumerate(input_grads):
        if type(gi) is not Tensor:
            continue
        v = gi._value
        if math.isnan(v) if type(v) is float else np.isnan(v).any():
            raise RuntimeError(f"Function '{_node_name(tp, r)}' returned nan values in its {k}th output.")


def _accumulate_grad(t, g, create_graph):
    if create_graph:  # out of place, and recorded: not under the lock (recording may wait for a tape's)
        if g.dtype != t.dtype:
            g = g.to(t.dtype)
        grad = t._grad
        t._grad = g if grad is None else grad + g
        return
    with _ACCUMULATING:
        grad = t._grad
        if grad is None:
            t._grad = g if g.dtype == t.dtype else g.to(t.dtype)
            return
        # in place, as PyTorch's AccumulateGrad; += casts to the grad's dtype
        _changing_in_place(grad)
        value = grad._value
        if type(value) is float:
            grad._value += float(g._value)
        else:
            if not value.flags.writeable:
                # a broadcast view that the Python walk made the first .grad
                # (sum's gradient, or a custom Function's backward returning it)
                grad._value = value = value.copy()
            value += g._value


# Held while a gradient goes into a `.grad`, as PyTorch's AccumulateGrad holds
# a mutex: threads that backward at once may share leaves (Note [Leaves
# shared by threads]), and neither a first `.grad` nor NumPy's in-place add
# is one step the GIL keeps whole.
_ACCUMULATING = threading.Lock()


def _changing_in_place(grad):
    """As PyTorch's in-place accumulation bumps `.grad`'s version, the graphs
    that saved `.grad` (as a constant, or through a view) raise rather than
    read its new values. One that no graph or view has seen has no version
    counter yet, and needs none to be bumped."""
    if grad._vc is not None or grad._ep is not None:
        grad.bump_version()


def _retained_tensor(tp, r):
    """The live tensor that called retain_grad() for row r, or None."""
    ref = tp.retained.get(r)
    return ref() if ref is not None else None


class RemovableHandle:
    """What `Tensor.register_hook` returns: `remove()` unregisters the hook
    (also on leaving a `with` block), as torch.utils.hooks.RemovableHandle."""

    def __init__(self, hooks, hook):
        self._hooks = hooks
        self._hook = hook

    def remove(self):
        hooks, self._hooks = self._hooks, None
        if hooks is not None:
            for k, h in enumerate(hooks):
                if h is self._hook:
                    del hooks[k]
                    break

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _registered(t):
    """(tape, row) of t, which requires grad; a leaf not yet on a tape
    registers on this thread's."""
    tp, r = where(t)
    if tp is None:
        tp = state.tape
        r = tp.adopt(t)
    return tp, r


def register_hook(self, hook):
    """Register `hook(grad)`, called with this tensor's gradient each time a
    backward or autograd.grad computes it; a Tensor it returns (same shape)
    replaces the gradient, for `.grad` and for what flows on, as in PyTorch.
    Hooks on a leaf run after the native sweep; a hook on a non-leaf makes
    the tape's backwards walk in Python, which can call it mid-walk.

    >>> import tape
    >>> x = tape.tensor([1.0, 2.0], requires_grad=True)
    >>> handle = x.register_hook(lambda g: g * 10)
    >>> (x * x).sum().backward()
    >>> x.grad
    tensor([20., 40.])
    """
    if not self._rg:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    tp, r = _registered(self)
    hooks = tp.hooks.setdefault(r, [])
    hooks.append(hook)
    if self._siblings is not None:  # Note [Undefined gradients]
        group = tuple(sorted(current_row(ep, q)[1] for ep, q in self._siblings))
        for q in group:
            if q >= 0:
                tp.hook_groups[q] = group
    return RemovableHandle(hooks, hook)


Tensor.register_hook = register_hook


def register_post_accumulate_grad_hook(self, hook):
    """Register `hook(tensor)` on a leaf, called after each backward()
    accumulates into its `.grad`, as in PyTorch (autograd.grad, which
    accumulates nothing, does not call it).

    >>> import tape
    >>> x = tape.tensor([1.0, 2.0], requires_grad=True)
    >>> handle = x.register_post_accumulate_grad_hook(lambda t: print(t.grad))
    >>> (x * 3).sum().backward()
    tensor([3., 3.])
    """
    if not self._rg:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if not self.is_leaf:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    tp, r = _registered(self)
    hooks = tp.post_accumulate_hooks.setdefault(r, [])
    hooks.append(hook)
    return RemovableHandle(hooks, hook)


Tensor.register_post_accumulate_grad_hook = register_post_accumulate_grad_hook


# Note [Python-only rows]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# The native sweep cannot call Python, so a row whose VJP is Python code (a
# python-only op: a custom autograd Function's node) runs only in the Python
# walk, `_retaped`, as a non-leaf with hooks does; the native sweep refuses
# such a row (ERR_PYTHON_ONLY, which the engine never meets), and `_run`
# sends every graph that reaches one to the Python walk. `tp.python_rows`
# keeps each such row's Python state (the ctx) while the row lives: while it
# is empty, as for every ordinary graph, no backward looks further.
#
# The walk runs a python-only op's node once, its VJP getting the gradients
# of all the node's output rows (Note [Function rows] in
# tape.autograd.function); the VJP sets `ctx.rows` and `ctx.needs` to the
# rows it hands gradients to, and `ctx.retain` tells it whether the walk
# frees the graph.


def _reaches_a_python_row(tp, roots):
    """Whether the walk from `roots` meets a row only the Python walk can
    run: a non-leaf with hooks, which it calls mid-way, a row whose node has
    hooks or pre-hooks, a python-only op's row, or one whose saved values
    saved-tensor hooks packed. The hooks, the Function rows and the packed
    rows of a graph that nothing reaches any more stay until compaction
    drops its rows, and must not send other graphs through the Python walk
    meanwhile."""
    if not tp.hooks and not tp.python_rows and not tp.packed and not tp.node_hooks:
        return False  # hook_groups matter only while a row has hooks
    rows = [r for r, hooks in tp.hooks.items() if hooks and tp.m_op[r] != LEAF]
    # (an AccumulateGrad node's hooks run where its leaf's .grad is accumulated)
    rows.extend(q for r, (hooks, prehooks) in tp.node_hooks.items() if (hooks or prehooks) and tp.m_op[r] != LEAF
                for q in tp.outputs(r))
    rows.extend(q for r in tp.python_rows for q in tp.outputs(r))
    rows.extend(tp.packed)  # Note [Saved tensor hooks]
    rows.extend(tp.hook_groups)  # Note [Undefined gradients]
    if not rows or not roots.size:
        return False
    reached = tp.reachable(roots)
    return bool(np.isin(np.array(rows, np.int64), reached).any())


def _node_hooked(tp, hooks, grads, args, node_state):
    """`grads` after a node's hooks (`hook(grad_inputs, grad_outputs)`) or
    pre-hooks (`hook(grad_outputs)`), `args` being what the first is
    called with, in the backward's node state (_ThreadLocals): a tuple a
    hook returns replaces them, as in PyTorch."""
    for hook in tuple(hooks):
        node_state.restore()
        out = hook(*args)
        if out is None:
            continue
        if not isinstance(out, tuple):
            raise TypeError(f"expected tuple, but hook returned '{type(out).__name__}'")
        if len(out) != len(grads):
            raise RuntimeError(f"hook '{getattr(hook, '__name__', hook)}' has returned an incorrect number of "
                               f"values (got {len(out)}, but expected {len(grads)})")
        for old, new in zip(grads, out):
            if old is None and new is not None:
                raise RuntimeError("can't replace a None gradient with a non-None value")
            if isinstance(old, Tensor) and isinstance(new, Tensor) and new.shape != old.shape:
                raise RuntimeError(f"hook '{getattr(hook, '__name__', hook)}' has changed the size of value")
        grads = out
        args = (grads,) if len(args) == 1 else (grads, args[1])
    return grads


def _hooked(tp, r, g, node_state):
    """g after the hooks on row r's tensor, in the order they were registered,
    run in the backward's node state (_ThreadLocals)."""
    for hook in tuple(tp.hooks.get(r, ())):
        node_state.restore()
        out = hook(g)
        if out is None:
            continue
        if g is None:  # Note [Undefined gradients]
            raise RuntimeError("can't replace a None gradient with a non-None value")
        if not isinstance(out, Tensor):
            raise TypeError(f"expected Variable, but hook returned '{type(out).__name__}'")
        if out.shape != g.shape:
            raise RuntimeError(f"hook '{getattr(hook, '__name__', hook)}' has changed the size of value")
        g = out
    return g


_CREATE_GRAPH_WARNING = (
    "Using backward() with create_graph=True will create a reference cycle between the parameter and "
    "its gradient which can cause a memory leak. We recommend using autograd.grad when creating the "
    "graph to avoid this. If you have to use this function, make sure to reset the .grad fields of "
    "your parameters to None after use to break the cycle and avoid the leak.")


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None, inputs=None):
    """Compute the sum of gradients of `tensors` and accumulate them into the
    `.grad` of the graph's leaves (or of `inputs`), as torch.autograd.backward.

    >>> import tape
    >>> x = tape.tensor(3.0, requires_grad=True)
    >>> tape.autograd.backward([x * x])
    >>> x.grad
    tensor(6.)
    """
    if grad_variables is not None:  # PyTorch's deprecated name
        warnings.warn("`grad_variables` is deprecated. Use `grad_tensors` instead.", FutureWarning, stacklevel=2)
        if grad_tensors is not None:
            raise RuntimeError("`grad_tensors` and `grad_variables` (deprecated) arguments both passed to "
                               "`backward()`. Please only use `grad_tensors`.")
        grad_tensors = grad_variables
    tensors = _as_list(tensors)
    grad_tensors = _as_list(grad_tensors)
    inputs = _as_list(inputs)
    if inputs is not None and len(inputs) == 0:
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    for t in inputs or ():
        # as PyTorch: a non-leaf input retains its gradient from now on
        if not t._rg:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if not t.is_leaf:
            t.retain_grad()
    if create_graph:
        warn_once(_CREATE_GRAPH_WARNING, stacklevel=3)
    tp = state.tape
    with _backward_scope(tp):
        # (with hooks around a leaf's accumulation, _into_grads accumulates)
        rows, grads = _run(tensors, grad_tensors, inputs, retain_graph, create_graph,
                           into_grad=inputs is None and not tp.post_accumulate_hooks and not tp.node_hooks)
        receivers = None
        if inputs is not None:
            receivers = {r: t for t in inputs for r in (tp.row_of(t), *t._left_rows_on(tp))}
        _into_grads(tp, rows, grads, receivers, create_graph)


def _into_grads(tp, rows, grads, receivers, create_graph):
    """backward()'s accumulation of the gradients of rows of tp into `.grad`:
    of the tensors `receivers` maps rows to (backward's `inputs`), or of the
    leaves and retained tensors. A leaf's post-accumulate hooks and its
    AccumulateGrad node's hooks run around its own accumulation, here."""
    post_hooks, node_hooks = tp.post_accumulate_hooks, tp.node_hooks
    node_state = _ThreadLocals(state.tape, bool(create_graph)) if node_hooks else None
    for r, g in zip(rows, grads):
        if receivers is not None:
            owner = receivers.get(r)
        elif tp.m_op[r] == LEAF:
            owner = tp.tensor_at(r)
        else:
            owner = _retained_tensor(tp, r)
        if owner is not None and g is not None:
            leaf_hooks = node_hooks.get(r) if node_hooks and tp.m_op[r] == LEAF else None
            if leaf_hooks and leaf_hooks[1]:
                (g,) = _node_hooked(tp, leaf_hooks[1], (g,), ((g,),), node_state)
            _accumulate_grad(owner, g, create_graph)
            if post_hooks and tp.m_op[r] == LEAF:
                for hook in tuple(post_hooks.get(r, ())):
                    hook(owner)
            if leaf_hooks and leaf_hooks[0]:
                _node_hooked(tp, leaf_hooks[0], (), ((), (g,)), node_state)


def _tensor_backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate d(self)/d(leaf) into each leaf's `.grad`; see `tape.autograd.backward`."""
    backward([self], None if gradient is None else [gradient], retain_graph, create_graph, inputs=inputs)


# a method defined here, not in _tensor: an import inside it ran importlib's
# Python code on every call (microseconds, measured)
_tensor_backward.__name__, _tensor_backward.__qualname__ = "backward", "Tensor.backward"
Tensor.backward = _tensor_backward


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Gradients of `outputs` with respect to `inputs`, as a tuple, without
    touching `.grad` (torch.autograd.grad).

    >>> import tape
    >>> x = tape.tensor(2.0, requires_grad=True)
    >>> tape.autograd.grad(x ** 3, x)
    (tensor(12.),)
    """
    if not only_inputs:
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to True). To accumulate "
                      "gradient for other parts of the graph, please use torch.autograd.backward.", FutureWarning,
                      stacklevel=2)
    if isinstance(inputs, dict):  # gradients by name, as PyTorch's
        names = list(inputs)
        return dict(zip(names, grad(outputs, [inputs[k] for k in names], grad_outputs, retain_graph, create_graph,
                                    True, allow_unused, is_grads_batched, materialize_grads)))
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    allow_unused = bool(allow_unused) or materialize_grads
    outputs = _as_list(outputs)
    inputs = _as_list(inputs)
    grad_outputs = _as_list(grad_outputs)
    if not inputs:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    for t in inputs:
        if not isinstance(t, Tensor):
            raise RuntimeError(f"all inputs have to be Tensors or GradientEdges, but got "
                               f"{type(t).__name__}")
    if is_grads_batched:
        from .autograd.functional import batched_grad
        return batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                            materialize_grads)
    tp = state.tape
    with _backward_scope(tp):
        # no outputs: every input is unused, as in PyTorch
        rows, grads = _run(outputs, grad_outputs, inputs, retain_graph, create_graph) if outputs else ((), ())
        by_row = dict(zip(rows, grads))
        located = [tp.row_of(t) for t in inputs]
        left = [t._left_rows_on(tp) for t in inputs]
        # as PyTorch's retains_grad hooks, which fire in autograd.grad too;
        # .grad is its own copy, not the gradient returned for an input
        flags = tp.m_flags
        for r, g in by_row.items():
            if flags[r] & RETAIN and g is not None:
                owner = _retained_tensor(tp, r)
                if owner is not None:
                    _accumulate_grad(owner, g if create_graph else g.clone(), create_graph)
    result = []
    for i, (t, t_row, t_left) in enumerate(zip(inputs, located, left)):
        g = by_row.get(t_row) if t_row >= 0 else None
        for r in t_left:  # the rows a leaf left when it changed in place
            if by_row.get(r) is not None:
                g = by_row[r] if g is None else g + by_row[r]
        if g is None:
            if not allow_unused:
                raise RuntimeError(f"The differentiated Tensor at index {i} appears to not have been "
                                   "used in the graph. Set allow_unused=True if this is the desired "
                                   "behavior.")
            if materialize_grads:  # a leaf requiring grad under create_graph, as PyTorch's
                g = new_tensor(wrap_value(np.zeros(t.shape, t.dtype)), bool(create_graph))
        result.append(g)
    return tuple(result)
