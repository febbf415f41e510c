"""`tape.compile`: a function recorded once and replayed natively for new
inputs, while everything the recording read stays the same (Note [Compiled
replay])."""
import collections
import functools
import gc
import operator
import sys
import threading
import types
import warnings
import weakref
from itertools import repeat

import numpy as np

from . import _factories, _kernels, _sweep, _tensor
from ._dtypes import get_default_dtype
from ._grad_mode import enable_grad, set_grad_enabled
from ._native import compiling
from ._registry import CONST, REGISTRY
from ._tape import DATA_FIELD, DIRTY, FREED, OWNERLESS, RG, ReplayedSegment, anomaly, state, where
from ._tensor import Tensor, new_tensor

__all__ = ["compile", "CompiledFunction"]

# Note [Compiled replay]
# ~~~~~~~~~~~~~~~~~~~~~~
# A call of a compiled function looks up a recording by its guard key: the
# shape, strides, dtype and requires_grad of every tensor argument, the other
# arguments' values, grad mode and the default dtype. A recording is an
# eager call of fn that also notes
#   - the rows it appended: its program;
#   - the tensors that entered the program from outside it (`Tape.adopt`
#     reports each: a fresh epoch at the start makes every older tensor go
#     through adopt once): the arguments, and tensors fn reads from its
#     closure or globals (model parameters), which a replay reads at their
#     current values;
#   - every Python-level read of a tensor's value (item(), bool(), float(),
#     int(), tolist(), numpy()) and its outcome: the guards. A branch on a
#     comparison of 0-d tensors (if y > 0) is guarded by the comparison
#     (ops.comparison reports it), not by y's exact value.
# Outside tensors are held weakly. A replay checks that each is alive, held
# by something other than its tape, of its recorded shape, strides, dtype and
# requires_grad, and that the dicts, lists and closure cells that held it at
# the recording (found with gc.get_referrers, once) still do: a parameter
# rebound through a global, an attribute or a container records again.
# fn sees its arguments as they are: what it computes from tensors that need
# no gradient alone is not recorded (eager mode records no row for it), so a
# recording that uses such a result runs eagerly (below). A call under
# no_grad records with grad mode on, and the replay gives each row the
# requires_grad of the call (a row of inputs that need no gradient is not RG,
# and its result a plain tensor). That recording follows an eager call under
# no_grad, and is kept only if it read the same values, changed nothing and
# gave equal results: fn that reads grad mode or requires_grad may compute
# otherwise with it on (its changes are then undone and the key's calls are
# eager ones). Past cache_size recordings for one key, its calls are eager
# ones too, as torch.compile's past its recompile_limit.
#
# A replay is one native call (tape._sweep.replay, compiled once per machine:
# a recording is data) that appends the program's rows to the caller's tape
# with values computed by each op's native forward (generated from its
# declaration's `forward`), so backward, create_graph, release and errors
# are eager mode's. It checks each value read against its recorded outcome
# right after the row that produced it; a failed guard takes its rows back
# and the next recording for the key is tried, then a new one is made (at
# most `cache_size` per key, the least recently used dropped). The rows of
# the last replay, its Python steps' too, once nothing can reach them, are
# dropped from the tape's end by the next one (Note [Dropping a dead tail] in
# tape/_tape.py); the
# first replay of a recording compacts the tape, whose recorded rows would
# otherwise stay below every later replay.
#
# What a native segment cannot compute (an op without a native forward, a
# custom Function, hooks, random numbers, a backward inside fn, an in-place
# op, a tensor computed without gradient tracking, values other than
# float64) replays as Python steps between native segments (Note [Python
# steps]). What makes a recording an eager one, each call running fn as it
# is (a warning once names the reason): steps under no_grad, and what needs
# Python but was not made by a call of tape's public functions and methods. Python
# numbers and other objects fn reads are part of the recording, as in
# jax.jit: pass them as arguments to vary them.
#
# Note [Fused chains]
# ~~~~~~~~~~~~~~~~~~~
# A run of two or more consecutive elementwise rows on arrays of one size
# (W4's sin, exp, tanh, ...) is a chain, which the replay runs tile by tile
# (_replay_chain in tape/_gen.py's _REPLAY): every row's native forward on
# _TILE elements, then the next tile, so a value is read again while it is
# in cache instead of after a pass over the whole array. A row of a chain
# that only rows of its chain read, whose value no consumer saves (psaves,
# from the ops' declarations, as eager mode counts it) and that fn does not
# return, is not stored: its tile lives in a slot of a buffer of a few
# tiles (slots are reused after the row's last reader), and its tape row
# is the one eager mode leaves once the Tensor has died and the value is
# released (ptr 0, no owner: OWNERLESS). Backward, create_graph, hooks and
# retain_grad on fn's results read only stored values. A bias a chain reads
# is read whole: the tile is a multiple of every bias's size. The grouping
# is data (pchain, pslot, chains), made in _Program._fuse; the replay
# interpreter, compiled once per machine, runs every recording's chains.


class _Recorder:
    """What a recording notes while fn runs (Note [Compiled replay])."""

    def __init__(self, slots, capture=False, repeats=False):
        self.slots = slots  # id of an argument tensor -> its argument number
        self.repeats = repeats  # a recording with grad mode on of a call under no_grad, after its eager call
        self.calls = [] if capture else None  # the outermost calls of tape's functions and methods (_Call)
        self.depth = 0  # > 0 inside a captured call
        self.read_at = []  # (calls made before it, depth) of each value read, while capturing
        self.entered = {}  # row -> the tensor from outside the program that adopt gave it
        self.reads = []  # (tensor, kind, outcome) of each value read
        self.made = {}  # id -> tensor made while recording (new_tensor), kept alive
        self.compared = {}  # id of a comparison's result -> (its op's name, its operands)
        self.static = set()  # ids of those made by a factory from Python data
        self.written = []  # the tensors fn changed in place, once per change
        self.functions = 0  # the custom Functions fn ran (Function.apply reports each): user code, a step each

    def adopted(self, t, r):
        self.entered.setdefault(r, t)

    def read(self, t, kind, outcome):
        self.reads.append((t, kind, outcome))
        if self.calls is not None:
            self.read_at.append((len(self.calls), self.depth))


def _made(t):
    """new_tensor's report while some thread records: a tensor made inside fn."""
    rec = state.tape.recorder
    if rec is not None:
        rec.made[id(t)] = t


def _made_static(t):
    """A factory's report: t holds Python data (zeros, tensor(2.0)), the same each call."""
    rec = state.tape.recorder
    if rec is not None:
        rec.static.add(id(t))


def _compared(result, name, x, y):
    """A comparison's report: `result` is x `name` y (a 0-d bool a branch may read)."""
    rec = state.tape.recorder
    if rec is not None:
        rec.compared[id(result)] = (name, x, y)


def _wrote(t):
    """An in-place change's report (Tensor.bump_version), before the change
    (Note [Side effects of a replay])."""
    _changing(t, _value_restorer)


def _setting(t, name):
    """A setter's report, before it changes t's `name` (grad, data,
    requires_grad): a change of t as an in-place op's is."""
    _changing(t, _ATTRIBUTE_RESTORERS[name])


def _changing(t, restorer):
    """A change of t, to the calling thread's recording, or to the undo log
    of its replay as restorer(t): what sets t back as it is now."""
    rec = state.tape.recorder
    if rec is not None:
        rec.written.append(t)
    log = _undo.log
    if log is not None:
        log.append(restorer(t))


def _value_restorer(t):
    v = t._value
    return functools.partial(_restore_value, t, v if type(v) is float else v.copy(), t._version)


def _restore_value(t, value, version):
    if type(value) is float or type(t._value) is float:
        t._value = value
    else:
        np.copyto(t._value, value)
    if t._vc is not None:
        t._vc.n = version


_ATTRIBUTE_RESTORERS = {
    "grad": lambda t: functools.partial(setattr, t, "_grad", t._grad),
    "data": lambda t: functools.partial(Tensor._set_storage, t, t._value),
    "requires_grad": lambda t: functools.partial(Tensor.requires_grad_, t, t._rg),
}


def note_read(t, kind, outcome):
    """A value read of tensor t (Note [Compiled replay]); `kind` is "truth" for
    bool(), "value" for the rest."""
    rec = state.tape.recorder
    if rec is not None:
        rec.read(t, kind, outcome)


_recordings_running = [0]
_hooks_lock = threading.Lock()


def _install(on):
    """Turn on new_tensor's and the factories' reports while any thread records."""
    with _hooks_lock:
        _recordings_running[0] += 1 if on else -1
        running = _recordings_running[0] > 0
        _tensor.made_hooks[:] = [_made] if running else []
        _tensor.read_hooks[:] = [note_read] if running else []
        _tensor.compared_hooks[:] = [_compared] if running else []
        _set_change_hooks()
        _factories.static_hooks[:] = [_made_static] if running else []


class _UndoLog(threading.local):
    log = None  # (tensor, value, version) before each in-place change of this thread's replay, or None


_undo = _UndoLog()
_undoing = [0]  # replays keeping an undo log, in all threads


def _keep_undo_log(on):
    """Start (or end) the calling thread's undo log of in-place changes."""
    _undo.log = [] if on else None
    with _hooks_lock:
        _undoing[0] += 1 if on else -1
        _set_change_hooks()


def _set_change_hooks():
    """The reports of in-place changes and setters, wanted while any thread
    records or keeps an undo log (called with _hooks_lock held)."""
    wanted = _recordings_running[0] > 0 or _undoing[0] > 0
    _tensor.written_hooks[:] = [_wrote] if wanted else []
    _tensor.set_hooks[:] = [_setting] if wanted else []


def _undo_changes(log):
    """Set the tensors an abandoned replay changed back to their values,
    versions and attributes before it, the last change first."""
    for restore in reversed(log):
        restore()


class _Call:
    """One outermost call of a tape function or Tensor method while a
    recording captures (Note [Python steps]): fn(*args, **kwargs) gave `out`
    and appended rows n0..n1-1 under grad mode `grad`; `changed` when it also
    drew random numbers, ran a backward, retained a gradient or changed a
    tensor in place; `wrote` when it changed one, `graph` when it ran a
    backward, retained a gradient or changed a tensor that requires grad
    after it (Note [Side effects of a replay]). `out_rows`: (tape, row) of
    each tensor of `out` as the call returned it, the row the parts after it
    read (a later in-place op on a view's base moves the view to a new row)."""
    __slots__ = ("fn", "args", "kwargs", "out", "out_rows", "n0", "n1", "changed", "wrote", "graph", "grad")

    def __init__(self, fn, args, kwargs, out, n0, n1, before, after, written, grad):
        self.fn, self.args, self.kwargs, self.out = fn, args, kwargs, out
        self.out_rows = [where(t) for t in _tensors_in(out)]
        self.n0, self.n1, self.grad = n0, n1, grad
        self.wrote = bool(written)
        self.changed = self.wrote or after != before
        self.graph = after[:2] != before[:2] or any(t._rg for t in written)


def _events(tp):
    """What a call may change besides the rows it appends: the generator's
    state, the sweeps run, the retained gradients."""
    return tp.sweep_id, len(tp.retained), _factories._rng[0].bit_generator.state


def _captured(fn):
    """fn, noting its outermost calls in the calling thread's recording while it captures."""
    def captured(*args, **kwargs):
        tp = state.tape
        rec = tp.recorder
        if rec is None or rec.calls is None or rec.depth:
            return fn(*args, **kwargs)
        before, wrote, functions = _events(tp), len(rec.written), rec.functions
        n0 = tp.n
        rec.depth = 1
        try:
            out = fn(*args, **kwargs)
        finally:
            rec.depth = 0
        call = _Call(fn, args, kwargs, out, n0, tp.n, before, _events(tp), rec.written[wrote:], tp.grad_enabled)
        call.changed |= rec.functions != functions  # a custom Function's forward runs on every call
        rec.calls.append(call)
        return out

    captured.__wrapped__ = fn
    return captured


# Tensor's attributes that compute no tensor and need no step: the object's
# protocol, and the value reads, which are guards (Note [Python steps])
_NOT_CAPTURED = {"__init__", "__hash__", "__repr__", "__reduce__", "__format__", "__array__", "__iter__", "__len__",
                 "__bool__", "__float__", "__int__", "__index__", "item", "tolist", "numpy", "shape", "dtype",
                 "ndim", "device", "requires_grad", "is_leaf", "size", "dim", "numel", "stride"}


def _capture_targets():
    """(owner, name, original, captured) for each public function and Tensor
    method that a capturing recording wraps (Note [Python steps])."""
    if not _TARGETS:
        face = sys.modules["tape"]
        from . import autograd
        from .autograd import functional
        targets = []
        for name, v in list(vars(Tensor).items()):
            if name.startswith("_") and not name.endswith("__"):
                continue
            if isinstance(v, property):  # a setter changes the tensor: a step (x.grad = None)
                fget = v.fget if name in _NOT_CAPTURED or v.fget is None else _captured(v.fget)
                fset, fdel = (f and _captured(f) for f in (v.fset, v.fdel))
                if (fget, fset, fdel) != (v.fget, v.fset, v.fdel):
                    targets.append((Tensor, name, v, property(fget, fset, fdel, v.__doc__)))
            elif isinstance(v, types.FunctionType) and name not in _NOT_CAPTURED:
                targets.append((Tensor, name, v, _captured(v)))
        for module in (face, face.linalg, autograd, functional):
            for name in module.__all__:
                v = getattr(module, name, None)
                if isinstance(v, types.FunctionType) and v is not compile:
                    targets.append((module, name, v, _captured(v)))
        apply = vars(autograd.Function)["apply"]
        targets.append((autograd.Function, "apply", apply, classmethod(_captured(apply.__func__))))
        _TARGETS.extend(targets)
    return _TARGETS


_TARGETS = []
_capturing = [0]


def _capture(on):
    """Wrap tape's functions and Tensor's methods while any thread's recording
    captures its calls; other threads' calls pass through."""
    with _hooks_lock:
        _capturing[0] += 1 if on else -1
        if _capturing[0] == (1 if on else 0):
            for owner, name, original, captured in _capture_targets():
                setattr(owner, name, captured if on else original)


class _Unsupported(Exception):
    """A recording that cannot be replayed natively, and why."""


class _Eager(Exception):
    """A call that runs fn eagerly without a word: inside a transform's batching."""


class _Program:
    """A prepared recording: its rows as arrays the replay interpreter reads."""

    def __init__(self, tp, rec, lo, hi, out_spec, arg_rg, grad_enabled, outer=None, reads=None):
        # inputs: the tensors that entered the program, arguments (by number) and outside tensors; a
        # segment's (Note [Python steps]) also rows before it and the steps' results (`outer` says which)
        inputs = []  # ("arg", k) or ("tensor", t); in a segment also ("row", tape row) and ("out", k)
        input_of = {}  # tape row -> input number
        self.outer = outer
        ops = tp.op[lo:hi]
        entries = np.flatnonzero(ops <= CONST) + lo
        for r in entries.tolist():
            if r not in rec.entered:
                raise _Unsupported("it uses a tensor tape could not trace")
            self._input(rec, rec.entered[r], r, inputs, input_of)
        if outer is None:
            for r, t in rec.entered.items():
                if r < lo:
                    self._input(rec, t, r, inputs, input_of)
        else:
            for col in (tp.a0, tp.a1):
                q = col[lo:hi][ops > CONST]
                for r in np.unique(q[(q >= 0) & (q < lo)]).tolist():
                    if r not in input_of:
                        _add_input(outer.row_source(r), r, inputs, input_of)
        self.inputs = inputs
        rows = np.flatnonzero(ops > CONST) + lo
        self.lo = lo
        self.local_of = local_of = np.full(hi - lo, -1, np.int64)  # tape row - lo -> program row
        local_of[rows - lo] = np.arange(rows.size)
        m = self.m = rows.size
        pop = self.pop = tp.op[rows]
        missing = np.flatnonzero(~_has_forward()[pop])
        if missing.size:
            raise _Unsupported(f"it uses {REGISTRY[pop[missing[0]]].name}, which has no native forward yet")
        # FREED: a backward inside fn (a step) freed the value after the row was made; it does so again
        odd = np.flatnonzero((tp.dt[rows] != 0) | (tp.nx[rows] != 0) | (tp.oi[rows] != 0)
                             | ((tp.flags[rows] | FREED) != RG | FREED))
        if odd.size:
            raise _Unsupported(f"its {REGISTRY[pop[odd[0]]].name} is not a plain float64 op (an in-place op, a hook, "
                               "a retained or freed value)")
        # inputs as refs: a program row, -2 - an input's number, or -1 (the constant operand)
        entry_rows = np.array(sorted(input_of), np.int64)
        entry_refs = np.array([-2 - input_of[r] for r in entry_rows.tolist()], np.int64)
        refs = []
        for col in (tp.a0, tp.a1):
            q = col[rows]
            ref = np.full(m, -1, np.int64)
            inside = (q >= lo) & (q < hi)
            ref[inside] = local_of[q[inside] - lo]
            outside = (q >= 0) & ((ref < 0) | ~inside)
            at = np.minimum(np.searchsorted(entry_rows, q[outside]), max(entry_rows.size - 1, 0))
            if outside.any() and (entry_rows.size == 0 or (entry_rows[at] != q[outside]).any()):
                raise _Unsupported("it reads a row tape could not trace")
            ref[outside] = entry_refs[at] if entry_rows.size else -1
            if ((q >= 0) & (tp.dt[np.maximum(q, 0)] != 0)).any():
                raise _Unsupported("it reads a tensor that is not float64")
            refs.append(ref)
        self.pa0, self.pa1 = refs
        self.pc = tp.c[rows]
        self.pp = tp.p[rows]
        self.pndim = tp.ndim[rows]
        self.pnumel = np.where(self.pndim > 0, tp.numel[rows], 1)
        # which inputs require grad in the call: an argument's flag under grad mode, an outside tensor's own
        input_rg = [bool(arg_rg[src[1]]) if src[0] == "arg" else src[1]._rg if src[0] == "tensor" else outer.rg(src)
                    for src in inputs]
        self.rg = np.zeros(m, np.bool_)
        self.psaves = np.zeros(m, np.int64)
        _sweep.prepare_replay(pop, self.pa0, self.pa1, np.array(input_rg + [False], np.bool_), grad_enabled,
                              self.rg, self.psaves)
        elementwise = _sweep.ELEMENTWISE[pop]
        # the array rows' shapes, and the structural rows' int attributes in one block
        self.pshape = np.zeros(m, np.int64)
        self.pia = np.zeros(m, np.int64)
        self.pian = np.zeros(m, np.int64)
        shapes = {}
        ints = []
        array_rows = np.flatnonzero(self.pndim > 0).tolist()
        for k in array_rows:
            r = int(rows[k])
            shape = tp.shape(r)
            self.pshape[k] = shapes.setdefault(shape, len(shapes))
            if elementwise[k]:
                for q in (int(tp.m_a0[r]), int(tp.m_a1[r])):
                    if q >= 0 and tp.m_ndim[q] > 0 and not _trailing(tp.shape(q), shape):
                        raise _Unsupported(f"its {REGISTRY[pop[k]].name} broadcasts {tp.shape(q)} to {shape}")
        for k in np.flatnonzero(~elementwise).tolist():
            r = int(rows[k])
            self.pia[k] = len(ints)
            self.pian[k] = tp.m_ian[r]
            ints.extend(tp.ints(r).tolist())
        self.ints = np.array(ints, np.int64)
        self.shapes = list(shapes)
        self.shape_offsets = None  # (the tape's table of pooled tuples, the shapes' offsets in it): _run
        # 0-d elementwise rows only: the replay variant that compiles without the tensor path
        self.replay = _sweep.replay_scalar if not array_rows and elementwise.all() else _sweep.replay
        self.tensor_rows = int(np.count_nonzero(~elementwise | (self.pndim > 0)))  # as Tape.tensor_rows counts
        kinds = np.where(~elementwise, _sweep.FORWARD_STRUCTURAL,
                         np.where(self.pndim > 0, _sweep.FORWARD_TENSOR, _sweep.FORWARD_SCALAR))
        self.needs_kernels = sorted(set(zip(kinds.tolist(), pop.tolist())))
        self._guards(tp, rec, input_of, rec.reads if reads is None else reads)
        self.out_spec = self._outputs(out_spec, input_of, rec)
        operand_numel = [np.where((q >= 0) & (tp.ndim[np.maximum(q, 0)] > 0), tp.numel[np.maximum(q, 0)], 1)
                         for q in (tp.a0[rows], tp.a1[rows])]
        self._store(self._fuse(elementwise, operand_numel))
        # what a replay reads each input from: an argument by number, an outside tensor through a weak
        # reference (a tensor the caller dropped, a global rebound, records again), or a constant fn made
        self.sources = [(kind, v) if kind != "tensor" else ("constant", v) if id(v) in rec.static
                        else ("tensor", weakref.ref(v)) for kind, v in self.inputs]
        # the outside tensors' shapes, strides, dtypes and flags, which the guard key does not hold
        self.input_meta = [(j, v.shape, v.stride(), v.dtype, v._rg) for j, (kind, v) in enumerate(self.inputs)
                           if kind == "tensor"]
        self.all_arguments = (operator.itemgetter(*(v for _, v in self.sources))
                              if self.sources and all(kind == "arg" for kind, _ in self.sources) else None)
        self.inputs = self.outer = None  # the recording's tensors are not kept
        self.first_replay = True

    def _store(self, stored):
        """Which rows' values are stored: the others are a fused chain's rows
        that live in its tile buffer only (Note [Fused chains])."""
        self.pslot[stored] = -1
        # owned by a Tensor: a stored array row's, and a 0-d result's once fn's result is built (_build)
        self.pflags = (np.where(self.rg, RG, 0) | np.where(stored & (self.pndim > 0), 0, OWNERLESS)).astype(np.uint8)
        self.array_rows = array_rows = np.flatnonzero(stored & (self.pndim > 0)).tolist()
        self.array_shapes = [self.shapes[self.pshape[k]] for k in array_rows]
        self.array_index = np.array(array_rows, np.int64)
        self.array_rg = [bool(self.rg[k]) for k in array_rows]
        self.array_bytes = int(8 * self.pnumel[array_rows].sum()) if array_rows else 0
        self.last_arrays = [None] * len(array_rows)  # Note [Reused arrays]
        self.arrays_lock = threading.Lock()

    def arrays(self):
        """The arrays a replay's stored rows write: the last replay's where
        nothing but this list holds them any more (Note [Reused arrays]),
        else new ones."""
        with self.arrays_lock:  # two threads replaying at once never share one
            arrays = self.last_arrays
            for k, shape in enumerate(self.array_shapes):
                a = arrays[k]
                if a is None or sys.getrefcount(a) > _SPARE_REFS:
                    arrays[k] = np.empty(shape)
            # the caller's list is a second reference until its Tensors hold
            # them: another thread's replay meanwhile makes its own
            self.last_arrays = list(arrays)
        return arrays

    def _fuse(self, elementwise, operand_numel):
        """Group the runs of two or more elementwise array rows of one size
        into chains (Note [Fused chains]): pchain, pslot and chains for the
        replay. Returns which rows are stored: all but the rows of a chain
        that only its own rows read and that nothing saves."""
        m = self.m
        pa0, pa1, psaves, numel = self.pa0, self.pa1, self.psaves, self.pnumel
        fusable = elementwise & (self.pndim > 0)
        joins = np.zeros(m + 1, np.bool_)  # row k continues row k - 1's run
        joins[1:m] = fusable[1:] & fusable[:-1] & (numel[1:] == numel[:-1])
        starts = np.flatnonzero(fusable & ~joins[:m])
        stops = np.flatnonzero(fusable & ~joins[1:]) + 1
        long = stops - starts >= 2
        starts, stops = starts[long], stops[long]
        self.pchain = pchain = np.full(m, -1, np.int64)
        self.pslot = pslot = np.full(m, -1, np.int64)
        if not starts.size:
            self.chains = np.zeros((0, 4), np.int64)
            return np.ones(m, np.bool_)
        for c, (start, stop) in enumerate(zip(starts.tolist(), stops.tolist())):
            pchain[start:stop] = c
        # stored: a row whose value backward reads (its own consumer saves
        # it), that a row outside its chain reads, or that fn returns
        stored = (pchain < 0) | ((psaves & 4) != 0)
        last = np.arange(m)  # each row's last reader in its chain
        for col, bit in ((pa0, 1), (pa1, 2)):
            readers = np.flatnonzero(col >= 0)
            read = col[readers]
            stored[read[(psaves[readers] & bit) != 0]] = True
            stored[read[(pchain[read] != pchain[readers]) | (pchain[readers] < 0)]] = True
            np.maximum.at(last, read, readers)
        stored[[ref for ref in _output_refs(self.out_spec) if ref >= 0]] = True
        chains = []
        for start, stop in zip(starts.tolist(), stops.tolist()):
            # a slot per row kept in the buffer, free again after its last reader
            free, frees, nslots = [], {}, 0
            for k in range(start, stop):
                if not stored[k]:
                    if free:
                        pslot[k] = free.pop()
                    else:
                        pslot[k] = nslots
                        nslots += 1
                    frees.setdefault(int(last[k]), []).append(int(pslot[k]))
                free.extend(frees.pop(k, ()))
            n = int(numel[start])
            # a tile holds whole repeats of every bias the chain reads
            blocks = np.concatenate([b[start:stop] for b in operand_numel])
            period = int(np.lcm.reduce(blocks[(blocks > 1) & (blocks < n)].astype(np.int64), initial=1))
            tile = n if period >= n else period * max(1, _TILE // period)
            chains.append((start, stop, max(tile, 1), nslots))
        self.chains = np.array(chains, np.int64)
        return stored

    def _local(self, r):
        """The program row of tape row r, or -1."""
        k = r - self.lo
        return int(self.local_of[k]) if 0 <= k < self.local_of.size else -1

    def _input(self, rec, t, r, inputs, input_of):
        if self.outer is not None:
            _add_input(self.outer.tensor_source(t), r, inputs, input_of)
            return
        slot = rec.slots.get(id(t))
        if slot is not None:
            source = ("arg", slot)
        elif id(t) in rec.made and id(t) not in rec.static:
            raise _Unsupported("it uses a tensor computed inside it without gradient tracking (a comparison, "
                               "an index, a detached value), which a replay cannot recompute")
        elif id(t) in rec.made and t._rg:
            raise _Unsupported("it makes a tensor that requires grad")
        else:
            source = ("tensor", t)
        _add_input(source, r, inputs, input_of)

    def _ref(self, t, input_of, rec, what):
        tp, r = where(t)
        if tp is state.tape and self._local(r) >= 0:
            return self._local(r)
        if tp is state.tape and r in input_of:
            return -2 - input_of[r]
        if self.outer is not None:
            return -2 - _add_input(self.outer.tensor_source(t), None, self.inputs, {})
        slot = rec.slots.get(id(t))
        if slot is not None:
            for j, s in enumerate(self.inputs):
                if s == ("arg", slot):
                    return -2 - j
            self.inputs.append(("arg", slot))
            return -2 - (len(self.inputs) - 1)
        if id(t) not in rec.made or id(t) in rec.static:
            self.inputs.append(("tensor", t))
            return -2 - (len(self.inputs) - 1)
        raise _Unsupported(f"it {what} a tensor computed inside it without gradient tracking")

    def _guards(self, tp, rec, input_of, reads):
        """The recorded value reads as guards: natively checked for 0-d values
        (a read of a comparison's result checks the comparison), in Python
        for the arrays of inputs."""
        guards = []  # (after row, kind, ref u, ref v or -1, value, truth)
        self.input_guards = []  # (input number, kind, outcome)
        for t, kind, outcome in reads:
            compared = rec.compared.get(id(t))
            if compared is not None and kind in ("truth", "value"):
                name, x, y = compared
                if not isinstance(x, Tensor):  # c < t is t > c
                    name, x, y = _MIRRORED[name], y, x
                u = self._scalar_ref(x, input_of, rec)
                v = self._scalar_ref(y, input_of, rec) if isinstance(y, Tensor) else -1
                guards.append((max(u, v, 0), _GUARD_KINDS[name], u, v, 0.0 if v != -1 else float(y), bool(outcome)))
                continue
            ref = self._ref(t, input_of, rec, "reads the value of")
            if ref < 0 and (t.ndim != 0 or type(t._value) is not float):  # checked in Python
                if self.inputs[-2 - ref][0] == "row":
                    raise _Unsupported("it reads the value of a tensor tape could not trace")
                self.input_guards.append((-2 - ref, kind, outcome))
                continue
            u = self._scalar_ref(t, input_of, rec)
            value = float(np.asarray(outcome, np.float64).reshape(()))
            guards.append((max(u, 0), _GUARD_KINDS[kind], u, -1, value, value != 0.0))
        guards.sort(key=lambda g: g[0])
        columns = list(zip(*guards)) or [()] * 6
        self.gk, self.gkind, self.ga, self.gb = (np.array(c, np.int64) for c in columns[:4])
        self.gval = np.array(columns[4], np.float64)
        self.gtruth = np.array(columns[5], np.int64)

    def _scalar_ref(self, t, input_of, rec):
        """The ref of t, a tensor of one element whose value a guard reads."""
        ref = self._ref(t, input_of, rec, "reads the value of")
        if (self.pndim[ref] != 0 or self.pnumel[ref] != 1) if ref >= 0 else t.ndim != 0:
            raise _Unsupported("it reads the value of a tensor of more than one element")
        if ref < 0 and (t.dtype != np.float64 or type(t._value) is not float):
            raise _Unsupported("it reads the value of a tensor that is not float64")
        return ref

    def _outputs(self, spec, input_of, rec):
        if spec[0] == "tensor":
            return "tensor", self._ref(spec[1], input_of, rec, "returns")
        if spec[0] == "value":
            return spec
        return spec[0], spec[1], [self._outputs(s, input_of, rec) for s in spec[2]]


def _output_refs(spec):
    """The refs of the tensors in a result's spec (Program._outputs)."""
    if spec[0] == "tensor":
        return [spec[1]]
    if spec[0] == "value":
        return []
    return [ref for s in spec[2] for ref in _output_refs(s)]


def _add_input(source, r, inputs, input_of):
    """The number of input `source` (a new one, or the same one already
    there), which tape row r (or None) reads."""
    for j, (kind, value) in enumerate(inputs):
        if kind == source[0] and (value is source[1] if kind == "tensor" else value == source[1]):
            break
    else:
        j = len(inputs)
        inputs.append(source)
    if r is not None:
        input_of[r] = j
    return j


def _has_forward():
    """Whether each opcode has a native forward (Note [Compiled replay])."""
    if not _HAS_FORWARD:
        _HAS_FORWARD.append(np.array([d is not None and (d.forward if d.partials is not None else d.forward_native)
                                      is not None for d in REGISTRY], np.bool_))
    return _HAS_FORWARD[0]


_HAS_FORWARD = []
# the elements of a fused chain's tile (Note [Fused chains]): a few tiles of
# float64 stay in the L1 and L2 caches
_TILE = 2048
# guard kinds (tape/_gen.py's _REPLAY: TRUTH, VALUE, LT, LE, GT, GE, EQ, NE)
_GUARD_KINDS = {"truth": 0, "value": 1, "list": 1, "array": 1, "lt": 2, "le": 3, "gt": 4, "ge": 5, "eq": 6, "ne": 7}
_MIRRORED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


def _trailing(small, big):
    """Whether `small` broadcasts to `big` as a repeated trailing block (a
    bias), or is `big` itself: the broadcasts the forward kernels take."""
    small = tuple(small)
    while small and small[0] == 1:
        small = small[1:]
    return not small or tuple(big[len(big) - len(small):]) == small


_PLAIN = (int, float, complex, bool, str, bytes, type(None))


def _spec(obj):
    """The structure of fn's result: tensors, sequences and dicts of them, and
    plain values (returned as recorded)."""
    if isinstance(obj, Tensor):
        if type(obj) is not Tensor:
            raise _Unsupported("it returns a tensor subclass")
        return "tensor", obj
    if isinstance(obj, (tuple, list)):
        return "seq", type(obj), [_spec(v) for v in obj]
    if type(obj) is dict:
        return "dict", list(obj), [_spec(v) for v in obj.values()]
    if isinstance(obj, _PLAIN) or isinstance(obj, np.dtype):
        return "value", obj
    raise _Unsupported(f"it returns a {type(obj).__name__}, which may hold tensors a replay would not renew")


# Note [Python steps]
# ~~~~~~~~~~~~~~~~~~~
# Rows a native segment cannot compute (an op without a native forward: a
# view, indexing, cat, a matmul of vectors; a custom Function's row, a
# hooked, retained or in-place row, a node that keeps its arguments, a row
# reading a tensor that is not float64) and what is not rows at all (random
# numbers, a backward or autograd.grad inside fn, a hook's registration, an
# in-place change, a tensor computed without gradient tracking) replay as
# Python steps: the outermost call of a tape function or Tensor method that
# made them, run again at its place in the program on the replay's tensors,
# under the grad mode it was called under. A replay is then native segments
# of rows and steps in turn.
#   - Capturing: while a recording captures, tape's public functions,
#     autograd.grad/backward, Function.apply and Tensor's methods and
#     properties are wrapped (other threads' calls pass through; calls
#     inside a captured one are part of it). Each outermost call notes fn,
#     its arguments and result and the rows it appended. A wrapper costs
#     more than a 0-d op, so a first recording does not capture: when it
#     finds what needs Python, the next call records again, capturing, and
#     so do the function's later recordings.
#   - Planning: a call is a step when one of its rows cannot be native, it
#     drew random numbers, ran a sweep, retained a gradient or changed a
#     tensor in place, or its result is not its own rows (a random tensor,
#     a mask, a hook's handle, a gradient). Other calls' rows, and rows made
#     outside any call, are native. A step's tensors are refs: an argument, an outside tensor, a
#     native row or an earlier step's result; a segment's inputs also name
#     rows of earlier parts, which a replay maps to where they are now.
#   - Replaying: a step runs fn eagerly, appending its rows as eager mode
#     does (random numbers come from tape's generator in eager mode's order,
#     hooks and custom Functions run). It must append the rows the recording
#     did (same ops, shapes, requires_grad) and give results of the recorded
#     shapes and rows, else the replay fails as a guard does: the rows it
#     appended stay as an abandoned eager call's do (unreachable garbage),
#     the generator is set back, and the next recording is tried. Value
#     reads outside steps are guards of the segment after them; reads inside
#     a step need none: the step computes what eager mode computes, and the
#     check above catches a different program. No compaction runs during a
#     replay of steps (tp.sweeping), so rows keep their numbers; a segment's
#     array values that no later part reads are released once it is done,
#     and so are a step's results and the rows' tensors steps were given
#     once the last part that reads them is (W7's slices).
# Under no_grad a step would append no rows: such a recording runs eagerly.

# Note [Side effects of a replay]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A replay that fails after a step has run is followed by another replay or
# a recording, which runs fn again: what the step changed besides its rows
# must then be as before it, or eager mode's one call would have changed it
# twice (buf.add_(1), then a branch that goes the other way).
#   - Random numbers: the generator is set back (Note [Python steps]).
#   - In-place changes and setters (x.grad = None, x.data = v): a replay
#     whose steps change tensors keeps an undo log, the value and version of
#     each tensor before each change (Tensor.bump_version reports it first),
#     or the attribute a setter changes, and sets them back. That is
#     all there is to undo for a tensor that needs no gradient (a buffer, a
#     running statistic), whose rows are constants.
#   - A backward, a retained gradient or an in-place change of a tensor that
#     requires grad also changes gradients and graphs, which no log undoes:
#     a recording where one comes before a value read (the guard that may
#     fail) runs eagerly. Other guards hold for the key.
# Under no_grad the first call of a key is an eager call, and the recording
# with grad mode on is made only if that call changed nothing but its
# result: recorded first, the changes would happen twice, under grad mode
# once (buf.add_(w) would give buf a gradient).


class _Ref:
    """A tensor in a step's arguments or fn's result: where a replay finds it."""
    __slots__ = ("source",)

    def __init__(self, source):
        self.source = source


class _Outer:
    """What a recording with steps says about where tensors come from (Note [Python steps])."""

    def __init__(self, tp, rec, lo, hi, native):
        self.tp, self.rec, self.lo, self.hi = tp, rec, lo, hi
        self.native = native  # the op rows lo..hi-1 that segments compute
        self.rg_of_row = (tp.flags[lo:hi] & RG) != 0
        self.out_of = {}  # id of a step's result tensor -> its number in a replay's results of steps
        self.outs = []  # those tensors as recorded
        self.outside = []  # the outside tensors steps read
        self.read_rows = set()  # the rows that later parts read

    def row(self, r):
        self.read_rows.add(r)
        return "row", r

    def row_source(self, r):
        """The source of tape row r, which a segment reads from before it."""
        t = self.rec.entered.get(r)
        if t is not None:
            return self.tensor_source(t)
        if self.lo <= r < self.hi and self.tp.op[r] > CONST:
            return self.row(r)
        raise _Unsupported("it reads a row tape could not trace")

    def tensor_source(self, t):
        slot = self.rec.slots.get(id(t))
        if slot is not None:
            return "arg", slot
        k = self.out_of.get(id(t))
        if k is not None:
            return "out", k
        tp, r = where(t)
        if tp is self.tp and self.lo <= r < self.hi and self.native[r - self.lo]:
            return self.row(r)
        if id(t) in self.rec.made and id(t) not in self.rec.static:
            raise _Unsupported("it uses a tensor computed inside it that tape could not trace (one no call of "
                               "tape's functions or methods returned)")
        return "tensor", t

    def rg(self, source):
        kind, v = source
        return bool(self.rg_of_row[v - self.lo]) if kind == "row" else self.outs[v]._rg

    def refs(self, obj):
        """obj with each tensor in it a _Ref."""
        return _map_structure(obj, lambda v: isinstance(v, Tensor), self._ref)

    def _ref(self, t):
        kind, v = source = self.tensor_source(t)
        if kind == "tensor":
            self.outside.append(v)
            source = ("constant", v) if id(v) in self.rec.static else ("tensor", weakref.ref(v))
        return _Ref(source)


def _map_structure(obj, is_leaf, fn):
    """obj with fn(v) for each v in it where is_leaf(v): tuples, namedtuples,
    lists and dicts are walked, anything else is kept."""
    if is_leaf(obj):
        return fn(obj)
    if type(obj) in (tuple, list):
        return type(obj)(_map_structure(v, is_leaf, fn) for v in obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_map_structure(v, is_leaf, fn) for v in obj))
    if type(obj) is dict:
        return {k: _map_structure(v, is_leaf, fn) for k, v in obj.items()}
    if type(obj) is slice:  # x[:k] for a tensor k
        return slice(*(_map_structure(v, is_leaf, fn) for v in (obj.start, obj.stop, obj.step)))
    return obj


class _Stale(Exception):
    """An outside tensor a step reads is gone."""


class _Env:
    """A replay's tensors: fn's arguments, the tape rows where the recorded
    rows are now, and the steps' results."""
    __slots__ = ("tp", "args", "lo", "rowmap", "outs", "built")

    def __init__(self, tp, args, program):
        self.tp, self.args, self.lo = tp, args, program.lo
        self.rowmap = np.empty(program.size, np.int64)
        self.outs = [None] * program.nouts
        self.built = {}

    def tensor(self, source):
        kind, v = source
        if kind == "arg":
            return self.args[v]
        if kind == "out":
            return self.outs[v]
        if kind == "constant":
            return v
        if kind == "tensor":
            t = v()
            if t is None:
                raise _Stale
            return t
        r = int(self.rowmap[v - self.lo])
        t = self.built.get(r)
        if t is None:
            t = self.tp.owners[r]
            if not isinstance(t, Tensor):
                t = _scalar_tensor(self.tp, self.tp.ep, r, self.tp.m_flags[r] & RG)
            self.built[r] = t
        return t

    def forget(self, sources):
        """Drop the tensors of `sources`, which no later part reads, and release
        the values that nothing else holds or saves (Note [Early release] in tape/_record.py)."""
        tp, rows = self.tp, []
        for kind, v in sources:
            if kind == "out":
                t, self.outs[v] = self.outs[v], None
            else:
                t = self.built.pop(int(self.rowmap[v - self.lo]), None)
            if t is not None:
                t_tp, r = where(t)
                if t_tp is tp:
                    rows.append(r)
        t = None  # not a holder of the last one when release counts its references
        tp.release(rows)

    def values(self, obj):
        """obj with each _Ref the tensor it names now."""
        return _map_structure(obj, _is_ref, self._named)

    def _named(self, ref):
        return self.tensor(ref.source)


def _is_ref(v):
    return type(v) is _Ref


def _result_spec(obj, tensors):
    """The structure of a step's result, its tensors appended to `tensors`:
    plain values are compared at a replay, other objects (a hook's handle) not."""
    if isinstance(obj, Tensor):
        tensors.append(obj)
        return ("tensor",)
    if isinstance(obj, (tuple, list)):
        return "seq", type(obj), len(obj), [_result_spec(v, tensors) for v in obj]
    if type(obj) is dict:
        return "dict", list(obj), len(obj), [_result_spec(v, tensors) for v in obj.values()]
    if isinstance(obj, _PLAIN):
        return "value", obj
    return ("object",)


def _result_matches(spec, obj, tensors):
    kind = spec[0]
    if kind == "tensor":
        tensors.append(obj)
        return isinstance(obj, Tensor)
    if kind == "value":
        return type(obj) is type(spec[1]) and (obj == spec[1] or obj != obj)
    if kind == "object":
        return True
    if type(obj) is not spec[1] if kind == "seq" else type(obj) is not dict or list(obj) != spec[1]:
        return False
    items = obj if kind == "seq" else obj.values()
    return len(obj) == spec[2] and all(_result_matches(s, v, tensors) for s, v in zip(spec[3], items))


class _Step:
    """A captured call that a replay runs in Python (Note [Python steps])."""

    def __init__(self, call, outer):
        tp, lo = outer.tp, outer.lo
        self.fn, self.grad = call.fn, call.grad
        self.args = outer.refs(call.args)
        self.kwargs = outer.refs(call.kwargs)
        rows = np.flatnonzero(tp.op[call.n0:call.n1] > CONST) + call.n0
        self.rows_off = rows - lo
        self.ops = tp.op[rows]
        self.rg = tp.flags[rows] & RG
        self.ndim = tp.ndim[rows]
        self.shapes = [(k, tp.shape(r)) for k, r in enumerate(rows.tolist()) if tp.ndim[r] > 0]
        tensors = []
        self.spec = _result_spec(call.out, tensors)
        self.first = len(outer.outs)
        self.out_meta = []  # shape, dtype and requires_grad of each tensor of the result, and its row - lo or -1
        for t, (t_tp, r) in zip(tensors, call.out_rows):
            own = t_tp is tp and call.n0 <= r < call.n1 and tp.op[r] > CONST
            self.out_meta.append((t.shape, t.dtype, t._rg, r - lo if own else -1))
            outer.out_of[id(t)] = len(outer.outs)
            outer.outs.append(t)

    def run(self, tp, env):
        """Call fn again; whether it did what the recording saw."""
        args, kwargs = env.values(self.args), env.values(self.kwargs)
        n0 = tp.n
        if tp.grad_enabled == self.grad:
            out = self.fn(*args, **kwargs)
        else:  # the grad mode fn set around the call (with no_grad(): ...)
            with set_grad_enabled(self.grad):
                out = self.fn(*args, **kwargs)
        if tp.n == n0 + 1 and self.ops.size == 1:  # one row, the common step (a view): checked without arrays
            if (tp.m_op[n0] != self.ops[0] or tp.m_flags[n0] & RG != self.rg[0] or tp.m_ndim[n0] != self.ndim[0]
                    or self.shapes and tp.shape(n0) != self.shapes[0][1]):
                return False
            env.rowmap[self.rows_off[0]] = n0
        else:
            rows = np.flatnonzero(tp.op[n0:tp.n] > CONST) + n0
            if (rows.size != self.ops.size or (tp.op[rows] != self.ops).any()
                    or ((tp.flags[rows] & RG) != self.rg).any() or (tp.ndim[rows] != self.ndim).any()
                    or any(tp.shape(int(rows[k])) != shape for k, shape in self.shapes)):
                return False
            env.rowmap[self.rows_off] = rows
        tensors = []
        if not _result_matches(self.spec, out, tensors):
            return False
        for k, (t, (shape, dtype, rg, r)) in enumerate(zip(tensors, self.out_meta)):
            if t.shape != shape or t.dtype != dtype or t._rg != rg or r >= 0 and where(t)[1] != env.rowmap[r]:
                return False
            env.outs[self.first + k] = t
        return True


class _Steps:
    """A recording replayed as native segments (_Program) and Python steps
    (_Step) in turn (Note [Python steps])."""

    def __init__(self, tp, rec, lo, hi, result, arg_rg, grad_enabled, steps, native, roots):
        outer = _Outer(tp, rec, lo, hi, native)
        self.lo, self.size = lo, hi - lo
        calls = rec.calls
        is_step = {id(c) for c in steps}
        before = np.cumsum([0] + [id(c) in is_step for c in calls])  # steps among the first k calls
        reads = [[] for _ in range(len(steps) + 1)]  # the value reads that guard each segment
        for read, (k, depth) in zip(rec.reads, rec.read_at):
            if not (depth and id(calls[k]) in is_step):
                reads[before[k]].append(read)
        self.parts = []
        start = lo
        for j, end in enumerate([c.n0 for c in steps] + [hi]):
            if np.any(native[start - lo:end - lo]) or reads[j]:
                segment = _Program(tp, rec, start, end, ("value", None), arg_rg, grad_enabled, outer, reads[j])
                segment.rows_off = np.flatnonzero(tp.op[start:end] > CONST) + (start - lo)
                segment.local = np.arange(segment.m)
                self.parts.append(segment)
            if j < len(steps):
                self.parts.append(_Step(steps[j], outer))
                start = steps[j].n1
        _spec(result)  # what fn may return
        self.out_spec = outer.refs(result)
        self.nouts = len(outer.outs)
        self.draws = any(c.changed for c in steps)
        self.writes = any(c.wrote for c in steps)  # Note [Side effects of a replay]
        graph = [k for k, c in enumerate(calls) if c.graph]
        if graph and any(k > graph[0] and not depth for k, depth in rec.read_at):
            raise _Unsupported("it runs a backward, retains a gradient or changes a tensor that requires grad in "
                               "place before it reads a value, and a replay could not undo that where the value "
                               "differs")
        self.holders = _holders(outer.outside, (tp.owners, rec.entered, rec.made, outer.outside))
        self.reached = _reached(roots, outer.outside)
        self.segments = [p for p in self.parts if type(p) is _Program]
        for segment in self.segments:  # a fused row that a later part reads is stored
            segment._store((segment.pslot < 0) | np.isin(segment.rows_off + lo, list(outer.read_rows)))
        for segment in self.segments:  # Note [Early release] in tape/_record.py, once a segment is done
            arrays = np.array(segment.array_rows, np.int64)
            rows = (segment.rows_off[arrays] + lo).tolist()
            unread = [r not in outer.read_rows for r in rows]
            segment.unread = arrays[np.array(unread, np.bool_)] if arrays.size else arrays
            # the others' tensors are held from the segment on: a step between
            # (a backward's release) would otherwise drop a value a later one reads
            segment.read_later = [("row", r) for r, dropped in zip(rows, unread) if not dropped]
        # the step results and rows' tensors that each part is the last to read (or, for a result no part
        # reads, makes): a replay drops them once it is done, so that their values can go (Note [Early release])
        last = {}
        for j, part in enumerate(self.parts):
            if type(part) is _Step:
                for source in _sources_in((part.args, part.kwargs)):
                    last[source] = j
                for k in range(part.first, part.first + len(part.out_meta)):
                    last[("out", k)] = j
            else:
                for source in part.sources:
                    if source[0] in ("out", "row"):
                        last[source] = j
        # a step's result that is a row of its own is read as that row too
        pairs = [(("out", part.first + k), ("row", lo + r)) for part in self.parts if type(part) is _Step
                 for k, (*_, r) in enumerate(part.out_meta) if r >= 0]
        for pair in pairs:
            j = max(last.get(source, -1) for source in pair)
            for source in pair:
                last[source] = j
        kept = set(_sources_in(self.out_spec))
        kept.update(source for pair in pairs if kept.intersection(pair) for source in pair)
        for source in kept:
            last.pop(source, None)
        self.done = [[] for _ in self.parts]
        for source, j in last.items():
            self.done[j].append(source)


def _sources_in(obj):
    """The sources of the step results and rows that the _Refs in obj name."""
    if type(obj) is _Ref:
        if obj.source[0] in ("out", "row"):
            yield obj.source
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            yield from _sources_in(v)
    elif type(obj) is dict:
        for v in obj.values():
            yield from _sources_in(v)
    elif type(obj) is slice:
        yield from _sources_in((obj.start, obj.stop, obj.step))


def _plan_steps(tp, rec, lo, hi):
    """The captured calls that must be Python steps, and which op rows of
    lo..hi the segments compute (Note [Python steps])."""
    ops = tp.op[lo:hi]
    op_row = ops > CONST
    native = (op_row & _has_forward()[ops] & (tp.dt[lo:hi] == 0) & (tp.nx[lo:hi] == 0) & (tp.oi[lo:hi] == 0)
              & ((tp.flags[lo:hi] | FREED) == RG | FREED))
    for col in (tp.a0, tp.a1):
        q = col[lo:hi]
        native &= (q < 0) | (tp.dt[np.maximum(q, 0)] == 0)
    for table in (tp.python_rows, tp.hooks, tp.retained, tp.node_data):
        for r in table:
            if lo <= r < hi:
                native[r - lo] = False
    for k in np.flatnonzero(native & _sweep.ELEMENTWISE[ops] & (tp.ndim[lo:hi] > 0)).tolist():
        r = lo + k
        for q in (int(tp.m_a0[r]), int(tp.m_a1[r])):
            if q >= 0 and tp.m_ndim[q] > 0 and not _trailing(tp.shape(q), tp.shape(r)):
                native[k] = False
    steps = [c for c in rec.calls
             if c.changed or not native[c.n0 - lo:c.n1 - lo][op_row[c.n0 - lo:c.n1 - lo]].all()
             or not _gives_its_rows(c, tp)]
    for c in steps:
        native[c.n0 - lo:c.n1 - lo] = False
        op_row[c.n0 - lo:c.n1 - lo] = False
    loose = np.flatnonzero(op_row & ~native)
    if loose.size:
        raise _Unsupported(f"it uses {REGISTRY[ops[loose[0]]].name} outside the calls of tape's functions and "
                           "methods, where a replay cannot run it")
    return steps, native


def _gives_its_rows(call, tp):
    """Whether a call's result is rows it appended, its own arguments and plain values."""
    own = {id(t) for t in _tensors_in((call.args, call.kwargs))}
    for v in _tensors_in(call.out, strict=True):
        if v is None:
            return False
        t_tp, r = where(v)
        if id(v) not in own and not (t_tp is tp and call.n0 <= r < call.n1 and tp.op[r] > CONST):
            return False
    return True


def _tensors_in(obj, strict=False):
    """The tensors in obj (tuples, lists, dicts walked); with `strict`, None
    for anything but them and plain values."""
    if isinstance(obj, Tensor):
        yield obj if type(obj) is Tensor or not strict else None
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            yield from _tensors_in(v, strict)
    elif type(obj) is dict:
        for v in obj.values():
            yield from _tensors_in(v, strict)
    elif strict and not isinstance(obj, _PLAIN):
        yield None


def _replay_steps(program, tp, args):
    """Run a recording of segments and steps for the tensors `args` on tape
    tp: the result, or _FAILED when a guard or a step's check fails."""
    for holder, key, ref in program.holders:
        if not _still_held(holder, key, ref):
            return _FAILED
    if program.reached and not _still_reached(program.reached):
        return _FAILED
    if tp.replayed_segments:
        tp.drop_dead_tail()
    env = _Env(tp, args, program)
    drawn = _generator_state() if program.draws else None
    if program.writes:
        _keep_undo_log(True)
    log = _undo.log
    tp.reserve(program.size + 3)  # compacting now, if due: no compaction runs until the replay is done
    # every row and tensor of the replay is named in an epoch of its own, so
    # that the next replay may drop them all (Note [Dropping a dead tail]);
    # the constants' rows it caches are of that epoch too
    main, main_ref = tp.ep, tp.ep_ref
    seg = tp.ep = tp.segment_epoch()
    tp.ep_ref = weakref.ref(seg)
    lo, pool_lo, tensor_rows = tp.n, tp.npool, tp.tensor_rows
    tp.ep_from = lo  # older rows are named in the numbering's epoch (Tape.epoch_of)
    tp.sweeping += 1  # so that rows keep their numbers
    try:
        for part, done in zip(program.parts, program.done):
            if not (part.run(tp, env) if type(part) is _Step else _run_segment(part, tp, env)):
                break
            if done:
                env.forget(done)
        else:
            result = env.values(program.out_spec)
            # its steps may read any row below it
            tp.replayed_segment(ReplayedSegment(seg, lo, lo, tp.n, tp.tensor_rows - tensor_rows, pool_lo, tp.npool,
                                                True, False, lo))
            return result
    except _Stale:
        pass
    finally:
        tp.sweeping -= 1
        tp.ep, tp.ep_ref, tp.ep_from = main, main_ref, 0
        if program.writes:
            _keep_undo_log(False)
    if log:
        _undo_changes(log)
    if drawn is not None:
        _set_generator_state(drawn)
    return _FAILED


def _generator_state():
    """tape's generator and its state, which _set_generator_state sets back."""
    generator = _factories._rng[0]
    return generator, generator.bit_generator.state


def _set_generator_state(saved):
    generator, generator_state = saved
    _factories._rng[0] = generator
    generator.bit_generator.state = generator_state


def _run_segment(segment, tp, env):
    inputs = _inputs_now(segment, env.args, env.outs)
    if inputs is None:
        return False
    tp.reserve(segment.m + len(inputs) + 3)
    ep, rowmap, lo = tp.ep, env.rowmap, env.lo
    erows = np.array([int(rowmap[t - lo]) if kind == "row" else t._row if t._ep is ep else tp.adopt(t)
                      for (kind, _), t in zip(segment.sources, inputs)], np.int64)
    if ((tp.ndim[erows] > 0) & (tp.ptr[erows] == 0)).any():
        # a value released while a later part still reads it (a step that
        # moved a tensor to a new row once did so): fail as a guard does,
        # never read it natively at address 0
        return False
    base = _run(segment, tp, erows, ep)
    if base < 0:
        return False
    rowmap[segment.rows_off] = base + segment.local
    if segment.unread.size:
        tp.release((base + segment.unread).tolist())
    for source in segment.read_later:
        env.tensor(source)
    return True


class _Recording:
    """One recording of fn for a guard key: a prepared program and how it
    replays, or the reason it runs eagerly; `capture` when the next call
    records again, capturing Python steps (Note [Python steps])."""

    def __init__(self, program=None, refusal=None, capture=False):
        self.program = program
        self.refusal = refusal
        self.capture = capture
        self.replay = _replay_steps if type(program) is _Steps else _replay


_FAILED = object()


def _ensure_kernels(program):
    """Load the native forwards the program's rows run, and their backward
    kernels: a replay's rows then need no scan for missing kernels in the
    next sweep (_replay)."""
    missing = [kind * _sweep.NOPS + o for kind, o in program.needs_kernels if not _kernels.ADDRESSES[kind, o]]
    if missing:
        with compiling(f"the native forward kernels of {', '.join(_kernels.names(missing))}", len(missing)):
            _kernels.load(missing)
    found = np.zeros(3 * _sweep.NOPS, np.int64)
    missing = found[:_sweep._missing_kernels(program.pop, program.pndim, 0, program.m, _kernels.ADDRESSES, found)]
    if missing.size:
        with compiling(f"the native backward kernels of {', '.join(_kernels.names(missing))}", missing.size):
            _kernels.load(missing)


_called = set()  # the replay variants called once in this process


def _replay_call(replay, program, tp, bptr, erows, shape_offsets, ints_offset, base):
    return replay(program.pop, program.pa0, program.pa1, program.pc, program.pp, program.pflags, program.pnumel,
                  program.pndim, program.pshape, program.pia, program.pian, program.psaves, program.pchain,
                  program.pslot, program.chains, bptr, erows,
                  shape_offsets, ints_offset, program.gk, program.gkind, program.ga, program.gb, program.gval,
                  program.gtruth, base, tp.op, tp.a0, tp.a1,
                  tp.c, tp.p, tp.sval, tp.ptr, tp.numel, tp.ndim, tp.shp, tp.ia, tp.ian, tp.dt, tp.flags, tp.nuse,
                  tp.pool, _kernels.ADDRESSES)


def _observe(t, kind):
    """What a value read of kind `kind` gives for tensor t now."""
    if kind == "truth":
        return bool(t._item())
    if kind == "value":
        return t._item()
    return t._value if kind == "list" else np.array(t._value)


def _holds(kind, now, then):
    if kind == "array":
        return now.shape == then.shape and bool(np.array_equal(now, then, equal_nan=now.dtype.kind in "fc"))
    if kind == "list":
        return np.array_equal(np.array(now), np.array(then), equal_nan=True)
    return now == then or (now != now and then != then)


def _held_by_tape_alone(t):
    """Whether nothing but its tape holds tensor t (a leaf's row owns its
    tensor): then fn cannot reach it any more, and reaches another where it
    did (a parameter rebound through an attribute, self.w = self.w - lr * g)."""
    tp, r = where(t)
    owned = tp is not None and r >= 0 and tp.owners[r] is t
    # the references here: t, getrefcount's argument and the caller's local name
    return sys.getrefcount(t) <= _REFS_HERE + owned


_REFS_HERE = 3


def _inputs_now(program, args, outs=None):
    """The tensors a replay of `program` reads for its inputs, or None when
    one is gone or no longer what the recording read; a segment's
    (Note [Python steps]) also the steps' results `outs` and, for a row
    before it, the recorded row."""
    if program.all_arguments:  # the common case, in C: every input is an argument
        tensors = list(program.all_arguments(args)) if len(program.sources) > 1 else [program.all_arguments(args)]
    else:
        tensors = []
        for kind, value in program.sources:
            t = (args[value] if kind == "arg" else value() if kind == "tensor" else outs[value] if kind == "out"
                 else value)
            if t is None or kind == "tensor" and _held_by_tape_alone(t):
                return None
            tensors.append(t)
    for j, shape, strides, dtype, rg in program.input_meta:
        t = tensors[j]
        if t._rg != rg or t.shape != shape or t.stride() != strides or t.dtype != dtype:
            return None
    for j, kind, outcome in program.input_guards:
        if not _holds(kind, _observe(tensors[j], kind), outcome):
            return None
    for holder, key, ref in program.holders:
        if not _still_held(holder, key, ref):
            return None
    if program.reached and not _still_reached(program.reached):
        return None
    return tensors


_EPOCH, _ROW = operator.attrgetter("_ep"), operator.attrgetter("_row")


def _replay(program, tp, args):
    """Run `program` for the tensors `args` on tape tp: the result, or _FAILED
    when a guard does not hold (nothing appended then)."""
    inputs = _inputs_now(program, args)
    if inputs is None:
        return _FAILED
    scalar = program.replay is _sweep.replay_scalar
    dropped = False
    if tp.replayed_segments:
        # _run sets the owners' list right; 0-d rows are appended over the dropped ones when nothing comes first
        dropped = tp.drop_dead_tail(keep_owners=True, replayed_over=scalar and not program.first_replay)
        if tp.uncleared is not None:
            lo, hi = tp.uncleared
            if (tp.n + program.m + len(inputs) + 3 > tp.cap or tp.held_bytes > tp.bytes_limit
                    or list(map(_EPOCH, inputs)).count(tp.ep) != len(inputs)):
                tp.clear_dropped(lo, hi)  # reserve makes room, or adopt appends rows, before the replay's
            elif hi > lo + program.m:
                tp.clear_dropped(lo + program.m, hi)
    ep = tp.ep
    rows = list(map(_ROW, inputs))  # in C, as the inputs' epochs: most inputs are named on the tape already
    epochs = list(map(_EPOCH, inputs))
    named = epochs.count(ep) == len(epochs)
    scanned = tp.kernels_scanned == tp.n
    # the last segment still alive (its result kept until this call returns):
    # the one below it, if dead, takes this call's new leaf rows and its
    # replay's, which need no room then (Note [Dropping a dead tail]);
    # _ensure_kernels loaded their kernels
    fresh = [] if named else [j for j, e in enumerate(epochs) if e is not ep]
    leaves = all(inputs[j]._ep is None and inputs[j]._rg for j in fresh)
    at = -1
    if not dropped and leaves and not program.first_replay and tp.recorder is None:
        reads_below = (max(rows, default=-1) if not fresh
                       else max((r for j, r in enumerate(rows) if epochs[j] is ep), default=-1)) + 1
        at = tp.reuse_segment_below(program.m, len(fresh), reads_below, scalar)
    if at >= 0:
        inputs_lo = at
        for j, r in zip(fresh, tp.adopt_at([inputs[j] for j in fresh], at)):
            rows[j] = r
    else:
        if program.first_replay:  # its recording's rows are garbage by now: they would stay below every replay
            program.first_replay = False
            with tp.lock:
                if not tp.sweeping:
                    tp.compact()
        tp.reserve(program.m + len(inputs) + 3)
        ep = tp.ep
        if len(tp.owners) != tp.n and any(t._ep is not ep for t in inputs):
            tp.trim_owners()  # adopt appends owners
        scanned = tp.kernels_scanned == tp.n
        rows = list(map(_ROW, inputs))
        epochs = list(map(_EPOCH, inputs))
        fresh = [] if epochs.count(ep) == len(epochs) else [j for j, e in enumerate(epochs) if e is not ep]
        leaves = all(inputs[j]._ep is None and inputs[j]._rg for j in fresh)
        inputs_lo = tp.n
        for j in fresh:
            rows[j] = tp.adopt(inputs[j])
        if not leaves:  # other rows adopt adds are not the segment's to drop
            inputs_lo = tp.n
    erows = np.array(rows, np.int64)
    reads_below = int(erows.max(where=erows < inputs_lo, initial=-1)) + 1
    seg = tp.segment_epoch()  # Note [Dropping a dead tail] in tape/_tape.py
    base = _run(program, tp, erows, seg, at + len(fresh) if at >= 0 else -1)
    if base < 0:
        return _FAILED
    if scanned:  # the rows adopt added need no kernels, and _ensure_kernels loaded the program's
        tp.kernels_scanned = tp.n
    # its int attributes, pushed last, go with it (its shapes are shared: Tape.push_ints)
    tp.replayed_segment(ReplayedSegment(seg, inputs_lo, base, base + program.m, program.tensor_rows,
                                        tp.npool - program.ints.size, tp.npool, False, scalar, reads_below))
    return _build(program.out_spec, program, tp, seg, base, inputs, {})


# Note [Reused arrays]
# ~~~~~~~~~~~~~~~~~~~~
# A replay's stored rows write arrays that the one before it wrote, where
# nothing but the program holds them any more: their Tensors are dead and
# their rows released or dropped (a row's data pointer is kept alive by its
# Tensor or by the tape's `keep`, Note [Tape layout], so a reference count
# of the program's alone means no row, view or caller can read it). A large
# array that is freed and allocated again each call is otherwise fresh
# memory from the OS each time, page faults and zeroing included: W4
# compiled spent a third of its time there (measured with and without
# glibc giving freed memory back). A compiled function so keeps, between
# calls, the arrays of its last replay of each recording, the memory its
# next replay needs anyway.
# the references to a spare array in Program.arrays: the program's list, the
# local name and getrefcount's argument
_SPARE_REFS = 3


def _run(program, tp, erows, ep, at=-1):
    """Append `program`'s rows to tp, its inputs at tape rows `erows` (room
    reserved), its tensors named in epoch ep, or write them at rows at.. of
    a dropped segment (Tape.reuse_segment_below) when `at` >= 0: the row of
    its first, or -1 when a guard does not hold (nothing appended then)."""
    m = program.m
    if tp.strided:  # its inputs' values are read natively (Note [Strided values] in tape/_tape.py)
        tp.copy_strided()
    # the shapes' offsets hold while the tape's table of pooled tuples is the
    # one that gave them (compaction starts a new one)
    pooled = tp.tuple_offsets
    cached = program.shape_offsets
    if cached is not None and cached[0] is pooled:
        shape_offsets = cached[1]
    else:
        shape_offsets = np.array([tp.push_ints(s) for s in program.shapes], np.int64)
        program.shape_offsets = (pooled, shape_offsets)
    ints_offset = tp._push(program.ints) if program.ints.size else 0
    arrays = program.arrays()
    bptr = np.zeros(m, np.int64)
    if arrays:
        bptr[program.array_index] = [id(a) + DATA_FIELD for a in arrays]
    base = tp.n if at < 0 else at
    replay = program.replay
    if replay not in _called:  # Note [Compile notice] in tape/_native.py
        with compiling("tape.compile's native replay", 4 if replay is _sweep.replay_scalar else 15):
            status = _replay_call(replay, program, tp, bptr, erows, shape_offsets, ints_offset, base)
        _called.add(replay)
    else:
        status = _replay_call(replay, program, tp, bptr, erows, shape_offsets, ints_offset, base)
    if status < 0:
        tp.clear_rows(base, base + m)  # below the end, rows of no segment until a compaction drops them
        tp.trim_owners()
        return -1
    owners = tp.owners
    if at < 0:
        tp.n = base + m
        spare = len(owners) - base  # those a dropped tail left (Tape.drop_dead_tail), all None
        if spare < m:
            owners.extend(repeat(None, m - spare))
        elif spare > m:
            del owners[base + m:]
    tp.replayed = True
    tp.tensor_rows += program.tensor_rows
    if arrays:
        tp.held_bytes += program.array_bytes
        held_rows = tp.held_rows
        for k, rg, a in zip(program.array_rows, program.array_rg, arrays):
            r = base + k
            t = new_tensor(a, rg)
            t._ep, t._row = ep, r
            owners[r] = t
            held_rows.append(r)
        arrays = None
    return base


def _scalar_tensor(tp, ep, r, rg):
    """The Tensor of replayed 0-d row r (named in epoch ep), which no Tensor
    owns yet: the row's when it requires grad (`rg`), else a plain tensor of
    its value."""
    if not rg:  # eager mode records no row for it
        return new_tensor(float(tp.sval[r]))
    t = Tensor.__new__(Tensor)
    t._value = v = float(tp.sval[r])
    t._rg = True
    t._ep, t._row = ep, r
    tp.owners[r] = v  # the row's liveness token (Note [Tape layout])
    tp.m_flags[r] &= ~OWNERLESS
    return t


def _build(spec, program, tp, ep, base, inputs, built):
    """fn's result for a replay at rows base.. (named in epoch ep): `built`
    holds the tensors made so far, so that a row returned twice is one
    tensor, as in eager mode."""
    kind = spec[0]
    if kind == "tensor":
        ref = spec[1]
        if ref < -1:
            return inputs[-2 - ref]
        t = built.get(ref)
        if t is not None:
            return t
        r = base + ref
        t = tp.owners[r]
        if not isinstance(t, Tensor):
            t = _scalar_tensor(tp, ep, r, program.rg[ref])
        built[ref] = t
        return t
    if kind == "value":
        return spec[1]
    items = [_build(s, program, tp, ep, base, inputs, built) for s in spec[2]]
    if kind == "dict":
        return dict(zip(spec[1], items))
    cls = spec[1]
    if cls is tuple or cls is list:
        return cls(items)
    return cls(*items) if hasattr(cls, "_fields") else cls(items)  # a namedtuple takes its fields


_SCALAR_KEYS = {False: (float, False), True: (float, True)}  # 0-d float64 tensors, which need no shape


def _flatten(obj, tensors, key):
    """Append the tensors of an argument to `tensors` and its guard-key part to `key`."""
    kind = type(obj)
    if kind is Tensor:
        value = obj._value
        tensors.append(obj)
        key.append(_SCALAR_KEYS[obj._rg] if type(value) is float
                   else (Tensor, value.shape, value.strides, value.dtype, obj._rg))
    elif isinstance(obj, Tensor):  # a BatchedTensor (vmap over fn): fn runs as it is
        raise _Eager
    elif kind is tuple or kind is list:
        key.append((kind, len(obj)))
        for v in obj:
            if type(v) is Tensor:  # inline: a list of tensors is common
                value = v._value
                tensors.append(v)
                key.append(_SCALAR_KEYS[v._rg] if type(value) is float
                           else (Tensor, value.shape, value.strides, value.dtype, v._rg))
            else:
                _flatten(v, tensors, key)
    elif kind is dict:
        key.append((dict, tuple(obj)))
        for v in obj.values():
            _flatten(v, tensors, key)
    else:
        hash(obj)  # an unhashable argument: the caller runs fn eagerly
        key.append((type(obj), obj))


class CompiledFunction:
    """fn, recorded once per guard key and replayed natively (tape.compile)."""

    def __init__(self, fn, cache_size, fullgraph=False):
        functools.update_wrapper(self, fn)
        self._fn = fn
        self.cache_size = cache_size
        self.fullgraph = fullgraph
        self._cache = collections.OrderedDict()  # guard key -> [_Recording], most recent last
        self._lock = threading.Lock()
        self._warned = set()
        self.captures = False  # whether its recordings capture Python steps (once one needed them)
        # how many recordings were made (one that finds it needs Python steps and the next call's capturing
        # one count as one, Note [Python steps]): a test of the guards reads it
        self.recordings = 0

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        tp = state.tape
        tensors, key = [], []
        try:
            _flatten(args, tensors, key)
            _flatten(kwargs, tensors, key)
        except TypeError:
            return self._eagerly("an argument is not hashable", args, kwargs)
        except _Eager:
            return self._fn(*args, **kwargs)
        if len(tensors) != len(set(tensors)):  # Tensor hashes by identity
            # which arguments are one tensor is part of the key: a recording of f(a, a) reads one input
            first = {}
            key.append(tuple(first.setdefault(id(t), k) for k, t in enumerate(tensors)))
        if (tp.recorder is not None or tp.ep is not tp.numbering or tp.saved_hooks or anomaly.enabled
                or tp.inference or tp.graph_tasks):
            # inside another recording, fn is part of it; inside another
            # replay's Python steps (a hook's call), whose rows are named in
            # a segment's epoch, hooks, anomaly mode and inference mode, fn
            # runs eagerly (Note [Compiled replay])
            return self._fn(*args, **kwargs)
        key = (tuple(key), tp.grad_enabled, get_default_dtype())
        with self._lock:
            recordings = list(self._cache.get(key, ()))
        for recording in reversed(recordings):
            if recording.program is None:
                if recording.capture:  # Note [Python steps]
                    with self._lock:
                        if recording in self._cache.get(key, ()):
                            self._cache[key].remove(recording)
                    return self._record(key, tp, tensors, args, kwargs, capture=True, counted=True)
                return self._eagerly(recording.refusal, args, kwargs)
            result = recording.replay(recording.program, tp, tensors)
            if result is not _FAILED:
                return result
        if len(recordings) >= self.cache_size:
            # as torch.compile at its recompile_limit: fn records on most calls, which costs more than an
            # eager call, and a failed replay's Python steps ran the user's code once more each
            why = (f"its guards failed on {self.cache_size} recordings for one set of arguments (a value it reads "
                   "changes between calls, such as item() of a result): read values outside fn, branch on a "
                   "comparison of tensors (if y > 0), which is guarded by its outcome, or raise cache_size")
            with self._lock:
                self._cache[key] = [_Recording(None, why)]
            return self._eagerly(why, args, kwargs)
        return self._record(key, tp, tensors, args, kwargs, capture=self.fullgraph or self.captures)

    def _store(self, key, recording):
        """Keep `recording` for `key`: the last cache_size of each key, for the
        4 * cache_size keys used last."""
        with self._lock:
            recordings = self._cache.setdefault(key, [])
            recordings.append(recording)
            del recordings[:-self.cache_size]
            self._cache.move_to_end(key)
            while len(self._cache) > 4 * self.cache_size:
                self._cache.popitem(last=False)

    def _eagerly(self, why, args, kwargs):
        self._warn(why)
        return self._fn(*args, **kwargs)

    def _refuse(self, why):
        """fullgraph=True: a function that would run eagerly raises."""
        raise RuntimeError(f"tape.compile(fullgraph=True): {getattr(self._fn, '__qualname__', self._fn)} cannot be "
                           f"replayed natively: {why}")

    def _warn(self, why):
        """The warning, once per reason, that fn runs eagerly (Note [Compiled
        replay]); with fullgraph, the error that it would."""
        if self.fullgraph:
            self._refuse(why)
        if why not in self._warned:
            self._warned.add(why)
            warnings.warn(f"tape.compile: {getattr(self._fn, '__qualname__', self._fn)} runs eagerly on every call: "
                          f"{why}", UserWarning, stacklevel=_caller_level())

    def _record(self, key, tp, tensors, args, kwargs, capture=False, counted=False):
        """Record fn; with `capture`, its calls of tape's functions and methods
        too, for Python steps (Note [Python steps]); `counted` when it
        completes the recording before, which found it needs them."""
        grad_enabled = tp.grad_enabled
        if not grad_enabled:
            # the call under no_grad is an eager one, then a recording with grad mode on for the next calls, if
            # the eager call changed nothing but its result (Note [Side effects of a replay])
            eager, changed, eager_reads = self._eager_call(tp, args, kwargs)
            if changed:
                self._store(key, _Recording(None, _CHANGES_UNDER_NO_GRAD))
                self._warn(_CHANGES_UNDER_NO_GRAD)
                return eager
            _keep_undo_log(True)  # what the recording changes, the eager call did not: it is undone
            drawn = _generator_state()
        arg_rg = [grad_enabled and t._rg for t in tensors]
        slots = {}
        for k, t in enumerate(tensors):
            slots.setdefault(id(t), k)
        rec = _Recorder(slots, capture, repeats=not grad_enabled)
        events = _events(tp)
        tp.reserve(1)
        tp.new_epoch()
        lo = tp.n
        tp.sweeping += 1  # no compaction while the recording's rows are numbered
        tp.recorder = rec
        _install(True)
        if capture:
            _capture(True)
        try:
            with enable_grad():
                result = self._fn(*args, **kwargs)
        except Exception as e:
            if grad_enabled:
                raise  # what the eager call raises
            # recorded with grad mode on, fn may refuse what it does under no_grad: this key's next calls
            # are eager ones
            failure = f"recording it with grad mode on failed ({type(e).__name__}: {e})"
            return self._eager_after_all(key, failure, eager, drawn)
        finally:
            if capture:
                _capture(False)
            _install(False)
            tp.recorder = None
            tp.sweeping -= 1
        if not grad_enabled:
            if (rec.written or _events(tp) != events or not _same_reads(rec.reads, eager_reads)
                    or not _same_result(result, eager)):
                return self._eager_after_all(key, _OTHERWISE_WITH_GRAD, eager, drawn)
            _keep_undo_log(False)
        hi = tp.n
        self.recordings += not counted
        refusal = None
        program = None
        in_place = rec.written or any(tp.m_flags[r] & DIRTY for r in rec.entered)
        again = False  # whether the next call records again, capturing (Note [Python steps])
        try:
            steps = None
            if capture:
                steps, native = _plan_steps(tp, rec, lo, hi)
                if steps and not grad_enabled:
                    raise _Unsupported("it needs Python steps, which replay under grad mode only")
                if (_events(tp) != events or in_place or rec.functions) and not any(c.changed for c in steps):
                    raise _Unsupported("it draws random numbers, runs a backward or a custom Function or changes "
                                       "a tensor in place outside the calls of tape's functions and methods")
            elif in_place:
                raise _Unsupported("it changes a tensor in place, which replays under grad mode only")
            elif _events(tp) != events or rec.functions or any(
                    lo <= r < hi for table in (tp.python_rows, tp.hooks, tp.retained, tp.node_data) for r in table):
                raise _Unsupported("it draws random numbers, runs a backward, a custom Function or hooks, which "
                                   "replay under grad mode only")
            roots = [self._fn] + [v for v in (*args, *kwargs.values()) if not isinstance(v, _PLAIN + (Tensor,))]
            if steps:
                program = _Steps(tp, rec, lo, hi, result, arg_rg, grad_enabled, steps, native, roots)
                segments = program.segments
            else:
                program = _Program(tp, rec, lo, hi, _spec(result), arg_rg, grad_enabled)
                segments = [program]
            for segment in segments:
                outside = [v() for kind, v in segment.sources if kind == "tensor"]
                segment.holders = _holders(outside, (tp.owners, rec.entered, rec.made, tensors))
                segment.reached = _reached(roots, outside)
                _ensure_kernels(segment)
        except _Unsupported as e:
            refusal = str(e)
            again = not capture and grad_enabled
        if again:  # no warning: the next call captures, and the two count as one recording
            self.captures = True
            self._store(key, _Recording(None, refusal, capture=True))
            return result
        self._store(key, _Recording(program, refusal))
        if grad_enabled:  # the recording was the eager call
            if program is None:
                self._warn(refusal)
            return result
        if program is None:
            self._warn(refusal)
        return eager

    def _eager_call(self, tp, args, kwargs):
        """fn's eager call, whether it changed anything besides its result (a
        tensor in place, the generator's state, a gradient), and its value reads."""
        rec = _Recorder({})
        events = _events(tp)
        tp.recorder = rec
        _install(True)
        try:
            result = self._fn(*args, **kwargs)
        finally:
            _install(False)
            tp.recorder = None
        return result, bool(rec.written) or _events(tp) != events, rec.reads

    def _eager_after_all(self, key, why, eager, drawn):
        """A recording under no_grad that did not do what the eager call did:
        its changes undone, this key's calls are eager ones."""
        log = _undo.log
        _keep_undo_log(False)
        _undo_changes(log)
        _set_generator_state(drawn)
        self._store(key, _Recording(None, why))
        self._warn(why)
        return eager


_OTHERWISE_WITH_GRAD = ("it computes otherwise with grad mode on (it reads is_grad_enabled() or requires_grad), "
                        "and a call under no_grad is recorded with grad mode on")


def _same_reads(reads, others):
    """Whether two calls read the same values in the same order."""
    return len(reads) == len(others) and all(kind == other_kind and _holds(kind, outcome, other)
                                             for (_, kind, outcome), (_, other_kind, other) in zip(reads, others))


def _same_result(result, other):
    """Whether two results of fn are equal: their structure, plain values
    and tensors' shapes, dtypes and values (nan equal to nan)."""
    tensors, others = [], []
    return _result_matches(_result_spec(result, tensors), other, others) and all(
        t.shape == o.shape and t.dtype == o.dtype
        and np.array_equal(t._array(), o._array(), equal_nan=t.dtype.kind in "fc") for t, o in zip(tensors, others))


_CHANGES_UNDER_NO_GRAD = ("it draws random numbers, runs a backward or changes a tensor in place under no_grad, "
                          "which replay under grad mode only")


def _holders(tensors, ignored):
    """Where the outside tensors a recording read are held: (holder, key,
    tensor) for each dict entry, list item and closure cell that holds one,
    the tensor weakly. A replay checks that each still holds its tensor, so
    rebinding one (self.w = self.w - lr * g, params["w"] = ..., a global, a
    closure variable) records again, whatever else still holds the old one.
    `ignored` are containers of tape's own (the tape's owners)."""
    if not tensors:
        return []
    wanted = {id(t) for t in tensors}
    skip = {id(c) for c in ignored} | {id(tensors)}
    found = []
    for holder in gc.get_referrers(*tensors):
        if id(holder) in skip:
            continue
        if isinstance(holder, dict):
            items = holder.items()
        elif isinstance(holder, list):
            items = enumerate(holder)
        elif isinstance(holder, types.CellType):
            items = [(_CELL, holder.cell_contents)]
        elif isinstance(getattr(holder, "__dict__", None), dict) and not isinstance(holder, (type, Tensor)):
            # an object whose attributes CPython keeps in the object itself until its __dict__ is asked for
            holder = holder.__dict__
            items = holder.items()
        else:
            continue
        found.extend((holder, key, weakref.ref(value)) for key, value in items if id(value) in wanted)
    return found


_CELL = object()  # the key of a closure cell's contents in _holders


# Note [How fn reaches a parameter]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The holders of an outside tensor (above) miss a rebinding that changes no
# dict, list or cell holding it: an attribute of an object with __slots__, a
# global tuple rebound, a list or an object replaced by a new one while the
# old one is still held elsewhere, a list of parameters that grows. So a
# recording also finds, breadth first, a path to each outside tensor from
# what fn starts from: fn itself (its closure cells and the globals its code
# names, and so on through the functions, objects' attributes and slots,
# dicts, lists and tuples found on the way) and its non-tensor arguments. A
# replay follows each path again and checks that it ends at the same tensor,
# and that each list, tuple and dict on it has its recorded length (fn may
# loop over it). A path is a guess at the route fn takes, the shortest one
# there is: it and the holders together catch what either alone misses.
_PATH_OBJECTS = 4096  # the most objects a search visits, so that a recording of a program in a large
_PATH_DEPTH = 8  # object graph stays cheap


def _code_names(code):
    """The global and attribute names a code object and those nested in it use."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return names


def _links(obj, names):
    """(step, object) for what a search goes on to from obj; `names` are the
    names code found so far uses, the only attributes of a module followed.
    Not into tape, NumPy or Numba themselves: the tape's list of its rows'
    tensors is no route of fn's, and grows with every op."""
    if _library_own(obj):
        return
    if isinstance(obj, types.FunctionType):
        code_names = _code_names(obj.__code__)
        names |= code_names
        for k, cell in enumerate(obj.__closure__ or ()):
            try:
                yield ("cell", k), cell.cell_contents
            except ValueError:  # an empty cell
                pass
        g = obj.__globals__
        for name in code_names:
            if name in g:
                yield ("global", name), g[name]
    elif type(obj) is dict:
        yield from ((("item", key), v) for key, v in obj.items())
    elif type(obj) is list or type(obj) is tuple:
        yield from ((("item", k), v) for k, v in enumerate(obj))
    elif isinstance(obj, types.ModuleType):
        attributes = vars(obj)
        yield from ((("dict", name), attributes[name]) for name in names if name in attributes)
    elif isinstance(obj, (types.MethodType, functools.partial, CompiledFunction)):
        for name in ("__self__", "__func__", "func", "args", "keywords", "_fn"):
            if hasattr(obj, name):
                yield ("slot", name), getattr(obj, name)
    elif not isinstance(obj, (type, Tensor, np.ndarray, np.generic) + _PLAIN):
        attributes = getattr(obj, "__dict__", None)
        if type(attributes) is dict:
            yield from ((("dict", name), v) for name, v in list(attributes.items()))
        for cls in type(obj).__mro__:
            slots = cls.__dict__.get("__slots__", ())
            for name in (slots,) if isinstance(slots, str) else slots:
                if name not in ("__dict__", "__weakref__") and hasattr(obj, name):
                    yield ("slot", name), getattr(obj, name)


_LIBRARIES = ("tape.", "ops.", "numpy.", "numba.")


def _library_own(obj):
    """Whether obj is a module, function or object of tape, ops, NumPy or Numba."""
    name = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None)
    if not isinstance(name, str) and not isinstance(obj, types.FunctionType):
        name = type(obj).__module__
    return isinstance(name, str) and (name + ".").startswith(_LIBRARIES) and type(obj) is not CompiledFunction


def _reached(roots, tensors):
    """The paths from `roots` to each of `tensors` that a replay checks
    (Note [How fn reaches a parameter]): (root, steps, weak reference to the
    tensor) and (root, steps, length) of each container on a path."""
    wanted = {id(t) for t in tensors}
    if not wanted:
        return []
    found = {}
    names = set()
    queue = collections.deque((root, root, ()) for root in roots)
    seen = {id(root) for root in roots}
    while queue and len(found) < len(wanted) and len(seen) < _PATH_OBJECTS:
        root, obj, steps = queue.popleft()
        if len(steps) == _PATH_DEPTH:
            continue
        try:
            links = list(_links(obj, names))
        except Exception:  # an object whose attributes run code of its own that fails: not followed
            continue
        for step, child in links:
            if id(child) in seen:
                continue
            seen.add(id(child))
            if type(child) is Tensor:
                if id(child) in wanted:
                    found[id(child)] = (root, steps + (step,), weakref.ref(child))
            elif child is not None:
                queue.append((root, child, steps + (step,)))
    checks = list(found.values())
    lengths = {}
    for root, steps, _ in found.values():
        for k in range(len(steps)):
            container = _follow(root, steps[:k])
            if type(container) in (list, tuple, dict):
                lengths[(id(root), steps[:k])] = (root, steps[:k], len(container))
    return checks + list(lengths.values())


def _follow(obj, steps):
    """Where `steps` from obj lead (a KeyError, IndexError, AttributeError or ValueError where they do not)."""
    for kind, key in steps:
        if kind == "item":
            obj = obj[key]
        elif kind == "cell":
            obj = obj.__closure__[key].cell_contents
        elif kind == "global":
            obj = obj.__globals__[key]
        elif kind == "dict":
            obj = vars(obj)[key]
        else:
            obj = getattr(obj, key)
    return obj


def _still_reached(checks):
    """Whether each path of `checks` (_reached) still leads to its tensor, through containers of its lengths."""
    try:
        for root, steps, expected in checks:
            end = _follow(root, steps)
            if type(expected) is int:
                if len(end) != expected:
                    return False
            elif end is not expected():
                return False
    except (KeyError, IndexError, AttributeError, ValueError, TypeError):
        return False
    return True


def _still_held(holder, key, ref):
    """Whether `holder` still holds at `key` the tensor `ref` names."""
    t = ref()
    try:
        if key is _CELL:
            return holder.cell_contents is t
        return holder[key] is t
    except (KeyError, IndexError, ValueError):  # gone, or an emptied cell
        return False


def _caller_level():
    """warnings.warn's stacklevel of the first frame outside this module, from its caller's."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename == __file__:
        frame, level = frame.f_back, level + 1
    return level


# torch.compile's options that choose how it compiles: a replay has one way
_TORCH_OPTIONS = ("dynamic", "backend", "mode", "options", "name", "recompile_limit", "isolate_recompiles",
                  "shapes_spec")


def compile(model=None, *, fullgraph=False, disable=False, cache_size=8, **torch_options):
    """Record `model` (a function) on its first call and replay the
    recording natively on later calls with new tensor values (Note [Compiled
    replay] in tape/_compile.py). Usable as a decorator, with or without
    arguments. `cache_size` recordings are kept per guard key (torch's
    `recompile_limit` sets it too); with `fullgraph=True` a function that
    cannot be replayed natively raises instead of running eagerly;
    `disable=True` returns `model` itself. torch.compile's other options
    (`backend`, `mode`, `dynamic`, ...) are accepted and change nothing.

    >>> import tape
    >>> @tape.compile
    ... def f(x, a):
    ...     return (x.sin() * a).sin()
    >>> x = tape.tensor(0.5, requires_grad=True)
    >>> f(x, tape.tensor(2.0)).backward()
    >>> round(x.grad.item(), 4)
    1.0173
    """
    unknown = sorted(set(torch_options) - set(_TORCH_OPTIONS))
    if unknown:
        raise TypeError(f"compile() got an unexpected keyword argument '{unknown[0]}'")
    if torch_options.get("recompile_limit") is not None:
        cache_size = torch_options["recompile_limit"]
    if not isinstance(cache_size, int) or cache_size < 1:
        raise ValueError(f"cache_size must be a positive int, got {cache_size!r}")
    if model is None:
        return lambda fn: compile(fn, fullgraph=fullgraph, disable=disable, cache_size=cache_size)
    if not callable(model):
        raise RuntimeError("compile() can only be applied to callables")
    if disable:
        return model
    return CompiledFunction(model, cache_size, fullgraph)
