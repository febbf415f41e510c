"""The Wengert tape: one per thread, a struct of NumPy columns with one row per
recorded op, appended in execution order. See Note [Tape layout].
"""
import collections
import ctypes
import os
import sys
import threading
import traceback
import weakref

import numpy as np

from . import _sweep
from ._registry import CONST, LEAF

__all__ = ["Tape", "Epoch", "RowName", "StaleView", "state", "anomaly", "keep_trace", "where", "recorded_row",
           "current_row", "RG", "RETAIN", "DIRTY", "FREED", "HIDDEN", "TARGET", "MORE", "OWNERLESS"]

# Note [Tape layout]
# ~~~~~~~~~~~~~~~~~~
# Row r describes one recorded op, or a leaf (op LEAF) or constant (op CONST)
# that a recorded op used. Rows are appended in execution order, so every
# input row is below its consumer and a reverse sweep needs no sort.
#
#   op     int32    opcode (tape._registry.Op)
#   a0,a1  int64    the first two input rows; -1 for "no input", or, for an
#                   elementwise op, "this operand is the constant in c". An
#                   elementwise op's input may have fewer elements than its
#                   output (a bias over a batch): the sweep broadcasts it and
#                   sums its gradient back, so broadcasting costs no row
#   xs, nx int64    the inputs past the second (cat of 50 tensors: one row,
#                   48 of them here) at pool[xs:xs+nx]; nx is 0 for the rows
#                   of every op of at most two inputs, which keep theirs in
#                   a0 and a1: the scalar path writes two columns, not a
#                   pool entry and its offset, and the sweep reads them
#                   without an indirection. An op of three inputs may save
#                   the third, z (addmm, lerp); a variadic op (cat, a
#                   Function) saves none of its inputs, and nx is -1 for its
#                   row of one input (a1 is no input there)
#   oi     int32    the row's output number in its node: a node of k outputs
#                   (unbind, split, a custom Function) is k consecutive
#                   rows, one per output value (each needs its own value,
#                   shape and adjoint columns), whose node row is r - oi; 0
#                   for every row of a one-output op. Each output row has
#                   its op and inputs, and its own VJP (the part of the
#                   node's for that output's gradient), so the sweeps treat
#                   it as any row; nodes, hooks and compaction see the group
#                   (`outputs`), and the Python walk runs a Function's node
#                   once, on all of their gradients (Note [Function rows] in
#                   tape.autograd.function)
#   c      float64  constant operand of an elementwise op (stride 0)
#   p      float64  op parameter (exponent, alpha, 1/n); 1.0 when unused
#   sval   float64  the value, when the output is 0-d
#   ptr    int64    where the value (a C-contiguous array) keeps its data
#                   pointer, when it is not 0-d: id(array) + DATA_FIELD,
#                   which Python computes in nanoseconds where the data
#                   address itself costs a microsecond; 0 once released.
#                   The array is kept alive by `owners[r]` (its `_value`)
#                   or by `keep[r]` (a contiguous copy). A strided value
#                   waits in `keep` for its copy until a sweep or a replay
#                   (Note [Strided values]); ptr names its own data till then
#   numel, ndim     of the output; its shape is pool[shp:shp+ndim]
#   ia, ian  int64  static int attributes (axes, permutation, index map) at
#                   pool[ia:ia+ian]
#   dt     int8     0 float64, 1 float32 (adjoints are always float64)
#   flags  uint8    RG | RETAIN | DIRTY | FREED | HIDDEN | TARGET | MORE (nx > 0:
#                   the sweep reads xs and nx only where it is set) | OWNERLESS
#   stamp  int64    sweep id that last reached the row (no clearing needed)
#   sadj   float64  adjoint of a 0-d row during a sweep
#   nuse   int64    consumers that saved this row's value and have not yet
#                   been freed by a backward; at 0 the value may be released.
#                   Kept for rows with a tensor value only: a 0-d value is in
#                   sval, never released, and the sweep does not count it down
#   fresh_from  int64  for a DIRTY row that reads a value made after the
#                   write (an in-place op's original self, Note [Original
#                   self] in ops/inplace.py; a tensor sharing the written
#                   storage, which keeps its row and grad_fn), the first row
#                   recorded after that: a consumer below it saved the value
#                   the write changed and raises PyTorch's error, one from it
#                   on saved the value the row reads. NEVER for the other
#                   rows, whose every consumer raises once they are dirty
#
# Python side, parallel to the rows: `owners[r]` is a token whose reference
# count says whether the row's Tensor is alive. For a 0-d result it is the
# Python float the Tensor holds (floats are not tracked by the cyclic GC, so
# a long graph costs the GC nothing); otherwise the Tensor itself, which also
# keeps the row's memory alive (None once released). A row is live when its
# token is referenced from outside the tape, when a grad_fn node or a
# retained tensor names it, or when a live row reaches it; everything else is
# garbage, which `reserve` compacts away.
#
# Tensors and nodes name a row as (epoch, row). Compaction starts a new Epoch
# and turns the old ones into maps to the new numbering, so a tensor is
# renumbered lazily, when it is next used (`where`), and nothing scans the
# live tensors.

RG, RETAIN, DIRTY, FREED, HIDDEN, TARGET, MORE = 1, 2, 4, 8, 16, 32, 64
# a row no Tensor ever owns (its owner is None): a compiled replay's 0-d
# intermediate (tape._compile); compaction need not ask its owner
OWNERLESS = 128
NEVER = np.iinfo(np.int64).max

_COLUMNS = (("op", np.int32, 0), ("a0", np.int64, -1), ("a1", np.int64, -1),
            ("xs", np.int64, 0), ("nx", np.int64, 0), ("oi", np.int32, 0),
            ("c", np.float64, 0.0), ("p", np.float64, 1.0), ("sval", np.float64, 0.0),
            ("ptr", np.int64, 0), ("numel", np.int64, 1), ("ndim", np.int64, 0),
            ("shp", np.int64, 0), ("ia", np.int64, 0), ("ian", np.int64, 0),
            ("dt", np.int8, 0), ("flags", np.uint8, RG), ("stamp", np.int64, 0),
            ("sadj", np.float64, 0.0), ("nuse", np.int64, 0), ("fresh_from", np.int64, NEVER))
COLUMN_NAMES = tuple(name for name, _, _ in _COLUMNS)

_FLOAT64 = np.dtype(np.float64)


def _data_field_offset():
    """Where an ndarray object holds its data pointer, from the object's
    address: NumPy's array struct puts it after the object header, whose
    size depends on the CPython build, so it is found rather than assumed."""
    probe = np.empty(1)
    for offset in range(0, 64, 8):
        if ctypes.c_int64.from_address(id(probe) + offset).value == probe.ctypes.data:
            return offset
    raise ImportError("tape cannot locate the data pointer of a NumPy array")


DATA_FIELD = _data_field_offset()
_INITIAL_ROWS = 1 << 16
# Note [Dropping a dead tail]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A compiled call followed by its backward, its result then dropped (a
# training step), leaves its whole replay as garbage at the tape's end, which
# compaction paid for again (W1 compiled: a fifth of its time). A replay
# instead names its rows in an epoch of its own (`segment_epoch`, still in the
# current numbering), and the next replay first drops the last one when the
# tape still ends with it and nothing can reach it: no owner of its rows is
# alive, no node, retained gradient, hook or other table names them, and no
# sweep runs. Its rows take their defaults again, the tape's end moves back,
# and the segment's epoch maps every row to -1, so that whatever still names
# one (a version counter) names a dropped row, as after a compaction, and
# never the row that reuses its number. A compaction moves the live segments'
# epochs to the new numbering with the current one's. A replay with Python
# steps (Note [Python steps] in tape/_compile.py) makes its segment's epoch
# the tape's current one while its steps run, so the eager rows they append,
# and the constants' rows they cache, are named in it too: W7 compiled, whose
# create_graph backward keeps its forward's values saved, compacted on every
# call before. A segment of 0-d rows that a replay of 0-d rows is about to
# overwrite at once (nothing appended or compacted first) is not cleared:
# that replay writes every column its rows and their sweep change.
# A loop that keeps its result until the next call returns (`l = f(x);
# l.backward()`) leaves the last segment alive at the next replay, which
# then appended after it and compacted every few calls (W1 compiled: 2.4 ms
# a call where a dropped result's took 0.5). The segment below the last one
# is dead by then: a native replay of as many rows, reading only rows below
# it, which the last one does not read either, drops it and writes its rows
# there (reuse_segment_below), and the next one drops the last one from the
# end, so such a loop alternates between two segments and the tape stops
# growing. Rows are still in topological order: what reads the replay's
# rows comes later, at the tape's end. A leaf changed in place between
# calls (the issue's `a -= lr * a.grad`) leaves its row and takes a new one
# at its next use, which the call adopts just below its replay's rows: a
# segment counts those rows as its own, dropped with it once no graph and
# no tensor names them (the leaf has moved on, or died), and the replay
# over it adopts its own new leaves there, as many as they were.

# A replayed segment's record (Tape.replayed_segment): its epoch, the leaf
# rows inputs_lo..lo-1 its call adopted, its rows lo..hi-1, how many of
# them count in tensor_rows, the pool's part it pushed, whether Python
# steps made it and whether its rows are all 0-d elementwise ones; it reads
# no row from `reads_below` up to inputs_lo
ReplayedSegment = collections.namedtuple(
    "ReplayedSegment", "epoch inputs_lo lo hi tensor_rows pool_lo pool_hi steps scalar reads_below")

# Note [When to compact]
# ~~~~~~~~~~~~~~~~~~~~~~
# A graph dropped without backward keeps its rows' values (and their
# Tensors, the rows' owners) until compaction finds nothing reaches them:
# every value in it is saved by a consumer, so no release can drop it
# earlier. Compaction runs when the tape is full or when the values it holds
# reach twice what the last compaction kept, and at least _BYTES_FLOOR: that
# floor is what a loop of dropped graphs piles up before it gets its memory
# back. At 64 MB, a loop of 20-op graphs on 100 elements grew RSS by 75 MB
# where PyTorch's grows 0.2 MB; at 1 MB, by 3 MB. The doubling keeps
# the work amortized: a compaction costs about 0.3 us a row (half of it
# freeing the dead Tensors, which PyTorch pays at the drop), and a graph
# whose values stay live makes the limit grow with it.
_BYTES_FLOOR = 1 << 20

# Note [Strided values]
# ~~~~~~~~~~~~~~~~~~~~~
# Native code reads a row's value as C-contiguous memory (Note [Tape
# layout]); a strided one (x[::2], x.t()) needs a copy. Most are never read
# there: a slice's VJP reads no value, and neither does that of a consumer
# such as sub or rsub. So a strided float value is kept as it is (in `keep`,
# and in `strided` until copied), and copy_strided makes every such row's
# copy just before a sweep or a replay, the only native readers of values:
# W7's three slices copied 5e4 elements each as they were taken, 35 to
# 90 us a slice where PyTorch's takes 1 to 12. Until then ptr names the
# view's own data pointer, which no native code follows. The copy holds the
# value as it is at the sweep: a write into the storage since makes the
# consumers that saved it raise (mark_dirty), as in PyTorch.


def _owner_refs(owners):
    """Reference counts of all owners, counted in C (about 25 ns a row)."""
    return np.fromiter(map(sys.getrefcount, owners), np.int64, len(owners))


# References an owner has when only the tape holds it, measured in the same
# code paths rather than assumed.
_DEAD_REFS = int(_owner_refs([object()])[0])
_probe = [object()]
_DEAD_REFS_AT = sys.getrefcount(_probe[0])  # counted as release counts `owners[r]`
del _probe


class Epoch:
    """One numbering of a tape's rows; after a compaction, `remap` maps it to
    the current numbering (-1 for a dropped row)."""
    __slots__ = ("tape", "remap", "__weakref__")

    def __init__(self, tape):
        self.tape = tape
        self.remap = None


def current_row(ep, r):
    """(tape, row) for row r of epoch ep in its tape's current numbering
    (row -1 once compaction dropped it)."""
    return ep.tape, (int(ep.remap[r]) if ep.remap is not None else r)


class RowName:
    """A name of one row, `_row` of epoch `_ep`, that follows its tape's
    compactions: a grad_fn node, or a graph input's token (Note [Graphs
    across threads])."""
    __slots__ = ()

    def row(self):
        """The row in its tape's current numbering."""
        if self._ep.remap is not None:
            self._row = int(self._ep.remap[self._row])
            self._ep = self._ep.tape.numbering
        return self._row


class StaleView:
    """The `_ep` of a view whose storage was written since its row was made
    (Note [In-place ops on views] in ops/inplace.py): the view's row is made
    afresh, by `regenerate(view)`, when `where` is next asked for it, as
    PyTorch regenerates a view's grad_fn when it is next read after its
    version changed. Until then it names the view's old row (ep, row), and
    `remap` is not None, so that every read of the row takes where's slow path."""
    __slots__ = ("ep", "row", "regenerate", "remap")

    def __init__(self, ep, row, regenerate):
        self.ep, self.row, self.regenerate, self.remap = ep, row, regenerate, True


def where(t):
    """(tape, row) of tensor t in its tape's current numbering, or (None, -1)."""
    ep = t._ep
    if ep is None:
        return None, -1
    if ep.remap is not None:
        if type(ep) is StaleView:
            t._ep, t._row = ep.ep, ep.row
            ep.regenerate(t)
            return where(t)
        t._row = int(ep.remap[t._row])
        t._ep = ep = ep.tape.numbering
    return ep.tape, t._row


_FOREIGN_ROWS_LOCK = threading.Lock()
# held while a leaf that names no row is given one (Tape._adopt): without
# it, two threads could each make the leaf's home their own tape, and the
# first's graph would find its row not the leaf's
_LEAF_HOME_LOCK = threading.Lock()


def _foreign_rows_of(t):
    """t's `_foreign_rows`, made once: threads that reach t at once would each
    make a dict, and the last one set would lose the others' rows."""
    rows = t._foreign_rows
    if rows is None:
        with _FOREIGN_ROWS_LOCK:
            rows = t._foreign_rows
            if rows is None:
                rows = t._foreign_rows = {}
    return rows


def recorded_row(t):
    """(tape, row) of the row tensor t was last given, or (None, -1): a stale
    view's old row, which stays stale (StaleView)."""
    ep = t._ep
    if type(ep) is StaleView:
        return current_row(ep.ep, ep.row)
    return where(t)


# what the native sweep calls to release dead values while it runs (Note
# [Release during the sweep] in tape/_sweep.py): the span lo:hi of `work` row 2
_RELEASE_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64)


def _release_callback(tape_ref):
    def release_now(lo, hi):
        tape = tape_ref()
        if tape is not None:
            tape.release(tape.work[2, lo:hi].tolist())
    return _RELEASE_CALLBACK(release_now)


class Tape:
    """One thread's tape. Ops write rows through `append`; see Note [Tape layout]."""

    def __init__(self):
        self.n = 0
        self.cap = 0
        self.owners = []
        self.keep = {}
        self.strided = {}  # row -> its value, a strided float array not yet copied (Note [Strided values])
        # dirty row -> (its storage's version counter, the version it saved), for PyTorch's error
        self.dirtied = {}
        self.retained = {}
        self.hooks = {}  # row -> the hooks registered on its tensor (engine.register_hook)
        # row -> the rows of the outputs of its node, when one of them has hooks (Note
        # [Undefined gradients] in tape._engine)
        self.hook_groups = {}
        self.traces = {}  # row -> its forward call's stack, kept while anomaly mode is on
        # row -> the Python state of a python-only op's row (a custom
        # Function's ctx), dropped with the row (Note [Python-only rows] in
        # tape._engine); empty means no graph needs the check for them
        self.python_rows = {}
        # the thread's saved_tensors_hooks pairs, innermost last, and row ->
        # what they packed of its saved values (Note [Saved tensor hooks] in
        # tape._saved); both empty unless hooks were used
        self.saved_hooks = []
        self.packed = {}
        self.saved_hooks_disabled = None  # disable_saved_tensors_hooks's message
        # the stand-ins that unpacked saved values made during the running
        # create_graph VJP, None outside one (tape._saved.keep_stand_in_reads)
        self.stand_ins = None
        # row -> what PyTorch keeps on its node object (metadata, SavedTensors),
        # and row -> its node's (hooks, pre-hooks) (tape._node)
        self.node_data = {}
        self.node_hooks = {}
        self.post_accumulate_hooks = {}  # leaf row -> its post-accumulate-grad hooks
        self.graph_tasks = []  # the running backwards, innermost last (engine._backward_scope)
        # the live names of rows (grad_fn nodes, other threads' graph inputs): roots for compaction
        self.nodes = weakref.WeakSet()
        # row -> its live grad_fn node, so that a row has one node object, as
        # PyTorch's Node has one Python object while it is referenced
        self.node_of = weakref.WeakValueDictionary()
        # held while anything sweeps, renumbers or reallocates the rows (Note [Graphs across threads])
        self.lock = threading.RLock()
        self.graph_inputs = set()  # rows standing for another thread's rows (Note [Graphs across threads])
        self.swept_across = False  # while another thread's backward sweeps this tape
        self.ep_from = 0  # the first row `ep` names, where it is not the numbering's (epoch_of)
        self._start_epoch()
        self.old_epochs = []
        self.pool = np.zeros(1 << 12, np.int64)
        self.npool = 0
        self.tuple_offsets = {}
        self.tuple_at = {}  # the inverse of tuple_offsets: a row's shape without slicing the pool
        self.pooled_end = 0  # the pool's end after the last tuple pooled: a dropped tail's pool below it stays
        self.held_rows = []  # rows that may hold a tensor value, for release_dead
        self.dead_saved = []  # rows release_dead found dead but saved by a consumer
        self.last_inputs = ()  # input rows of the last op `record`ed, for release
        self.sweep_id = 0
        self.held_bytes = 0
        self.bytes_limit = _BYTES_FLOOR
        self.tensor_rows = 0  # rows not on the 0-d fast path; while 0, backward uses sweep_scalar
        self.kernels_scanned = 0  # rows below it have their kernels loaded (Note [Kernels by opcode])
        self.sweeping = 0  # > 0 while a re-taped sweep holds row numbers: no compaction then
        self.target_rows = None  # the rows the running autograd.grad marked TARGET (engine._run)
        self.grad_scratch = np.zeros(0)  # backward()'s flat gradients (engine._native)
        # where the native sweep makes its adjoints, and its counts: used, asked, the largest asked
        # (Note [Adjoint arena] in tape._engine)
        self.adjoint_arena = np.zeros(0)
        self.arena_at = np.zeros(3, np.int64)
        # the sweep's release callback, kept alive here, and its address
        self.release_callback = _release_callback(weakref.ref(self))
        self.release_address = ctypes.cast(self.release_callback, ctypes.c_void_p).value
        # grad mode is per thread, kept here so a recording op reads one
        # thread-local (the tape) rather than two
        self.grad_enabled = True
        self.inference = False
        self.grad_in_inference = False  # grad mode turned on inside inference mode (tape._grad_mode)
        self.recorder = None  # tape.compile's recorder while this thread records (tape._compile)
        # whether a replay appended rows that no Tensor owns (owner None; tape._compile)
        self.replayed = False
        # the epochs of replayed segments still in the current numbering, and
        # the last segment, which may be dropped whole (Note [Dropping a dead tail])
        self.segments = []
        self.replayed_segments = []  # ReplayedSegment: the last one, and the one directly below it
        self.uncleared = None  # (lo, hi): a dropped segment's rows left for the replay to overwrite
        self._resize(_INITIAL_ROWS)

    # -- storage ---------------------------------------------------------
    def _resize(self, cap):
        for name, dtype, default in _COLUMNS:
            col = np.full(cap, default, dtype)
            if self.cap:
                col[:self.n] = getattr(self, name)[:self.n]
            setattr(self, name, col)
        self.cap = cap
        # the sweep's scratch rows: the rows it captures, visits and releases,
        # its marks of the rows that lead to autograd.grad's inputs, and the
        # captured rows' offsets into its flat adjoints (at most n + 1 < cap)
        self.work = np.zeros((5, cap), np.int64)
        self.dropped = np.full(cap, -1, np.int64)  # the map of a dropped segment's epoch (drop_dead_tail)
        self.m_work_leads = memoryview(self.work[3])
        self.limit = cap - 3  # the scalar path appends at most 3 rows per op
        # writes of single items through memoryviews (m_op, m_a0, ...) are
        # about twice as fast as NumPy item assignment
        for name in COLUMN_NAMES:
            setattr(self, "m_" + name, memoryview(getattr(self, name)))

    def push_ints(self, values):
        """Store ints in the pool; return their offset. Pool entries are never
        written again, so rows with equal tuples (shapes, mostly: they repeat
        every iteration of a loop) share one entry until compaction repacks."""
        if type(values) is tuple:
            off = self.tuple_offsets.get(values)
            if off is None:
                off = self.tuple_offsets[values] = self._push(values)
                self.tuple_at[off] = values
                self.pooled_end = self.npool
            return off
        return self._push(values)

    def _push(self, values):
        k = len(values)
        off = self.npool
        if off + k > len(self.pool):
            grown = np.zeros(max(2 * len(self.pool), off + k), np.int64)
            grown[:off] = self.pool[:off]
            self.pool = grown
        self.pool[off:off + k] = values
        self.npool = off + k
        return off

    def shape(self, r):
        s, k = self.m_shp[r], self.m_ndim[r]
        shape = self.tuple_at.get(s)
        if shape is not None and len(shape) == k:
            return shape
        return tuple(self.pool[s:s + k].tolist())

    def ints(self, r):
        s = self.ia[r]
        return self.pool[s:s + self.ian[r]]

    # -- appending ---------------------------------------------------------
    def reserve(self, k):
        """Make room for k more rows, compacting garbage or growing first.

        Callers reserve before reading input rows, since compaction renumbers."""
        if self.n + k > self.cap or self.held_bytes > self.bytes_limit:
            with self.lock:  # another thread's backward may be sweeping these rows
                self._make_room(k)

    def _make_room(self, k):
        """reserve's slow path: compact, or grow, or both."""
        cap = self.cap
        if self.sweeping:
            # a re-taped sweep holds row numbers, so the garbage waits for
            # the first reserve after it (Note [When to compact]); room
            # for 3x the rows would have let 3x the garbage pile up
            while self.n + k > cap:
                cap *= 2
        else:
            self.compact()
            # keep at least 3/4 free after compacting, so compaction work
            # stays a small constant per appended row; give back what a
            # past large graph made us take
            need = 4 * (self.n + k)
            while need > cap:
                cap *= 2
            while cap > _INITIAL_ROWS and need <= cap // 4:
                cap //= 2
        if cap != self.cap:
            self._resize(cap)

    def append(self, op, value, owner, a0=-1, a1=-1, c=0.0, p=1.0, ints=None, flags=RG):
        """Append a row for `owner` (a Tensor whose value is `value`); return the row.
        The caller has reserved room."""
        r = self.n
        self.n = r + 1
        if op > CONST:
            self.tensor_rows += 1
        # rows past n hold the column defaults (compaction resets them), so
        # only other values are written
        self.m_op[r] = op
        self.m_a0[r] = a0
        if a1 != -1:
            self.m_a1[r] = a1
        if c:
            self.m_c[r] = c
        if p != 1.0:
            self.m_p[r] = p
        if flags != RG:
            self.m_flags[r] = flags
        if ints is not None:
            self.m_ia[r] = self.push_ints(ints)
            self.m_ian[r] = len(ints)
        if type(value) is float:
            self.m_sval[r] = value
        elif value.ndim == 0:
            self.m_sval[r] = float(value)
            if value.dtype is not _FLOAT64:
                self.m_dt[r] = 0 if value.dtype == _FLOAT64 else 1
        else:
            if value.dtype is not _FLOAT64 or not value.flags.c_contiguous:
                value = self._keep_float(r, value)
            self.m_ptr[r] = id(value) + DATA_FIELD
            self.m_numel[r] = value.size
            shape = value.shape
            self.m_ndim[r] = len(shape)
            off = self.tuple_offsets.get(shape)
            self.m_shp[r] = self.push_ints(shape) if off is None else off
            self.held_bytes += value.nbytes
            self.held_rows.append(r)
        self.owners.append(owner)
        return r

    def _keep_float(self, r, value):
        """The float value the native code reads for row r: float32 stays
        float32 (dt 1), other dtypes become float64, a copy that is kept; a
        strided float value is kept as it is until native code reads it
        (Note [Strided values])."""
        dtype = value.dtype
        if dtype.kind != "f":
            value = self.keep[r] = np.ascontiguousarray(value, np.float64)
            return value
        if dtype != _FLOAT64:
            self.m_dt[r] = 1
        if not value.flags.c_contiguous:
            self.keep[r] = self.strided[r] = value
        return value

    def copy_strided(self):
        """Give each row whose value is still strided the C-contiguous copy
        that the sweeps and replays read (Note [Strided values])."""
        keep, ptr, strided = self.keep, self.m_ptr, self.strided
        while strided:  # popped one by one: the tape's own thread may add rows meanwhile (a sweep across threads)
            r, value = strided.popitem()
            if keep.get(r) is value:  # else released, dropped or read anew since
                copy = keep[r] = np.ascontiguousarray(value)
                ptr[r] = id(copy) + DATA_FIELD

    def adopt(self, t):
        """The row of tensor `t` on this tape, registering a leaf or constant row."""
        r = self._adopt(t)
        if self.recorder is not None:
            self.recorder.adopted(t, r)
        return r

    def _adopt(self, t):
        if type(t._ep) is StaleView:
            where(t)  # its row, made on this tape, before t's home is asked for
        ep = t._ep
        if ep is not None and ep.tape is self:
            return where(t)[1]
        if ep is not None and t._rg:
            return self._foreign_row(t)
        if t._rg:
            with _LEAF_HOME_LOCK:
                if t._ep is None:
                    r = self.append(LEAF, t._value, t)
                    t._ep, t._row = self.ep, r
                    if t._vc is not None:
                        t._vc.add_row(self.ep, r)
                    return r
            return self._foreign_row(t)
        # a constant's row is private to the graphs that use it (its tensor
        # keeps no row and is not a root, as a leaf is), but its version
        # counter names the row, so an in-place change to the constant makes
        # the VJP that saved it raise, as in PyTorch. One row serves every use
        # while the constant is unchanged (same epoch, not dirty, its value
        # not replaced: keep_recorded_value forgets the row): a fixed input
        # batch costs a row per use otherwise
        cached = t._const_row
        if cached is not None:
            ep_ref, r = cached
            if ep_ref is self.ep_ref and not self.m_flags[r] & DIRTY and self.owners[r] is t:
                return r
        r = self.append(CONST, t._value, t, flags=0)
        t._version_counter().add_row(self.ep, r)
        t._const_row = (self.ep_ref, r)
        return r

    def row_of(self, t):
        """The row of tensor t on this tape, or -1: its own row, or the one
        this tape registered for a leaf of another thread's (Note [Leaves
        shared by threads])."""
        ep = t._ep
        if ep is None:
            return -1
        if ep.tape is self:
            return where(t)[1]
        entry = t._foreign_rows.get(self) if t._foreign_rows is not None else None
        return -1 if entry is None else current_row(entry[0], entry[1])[1]

    def _foreign_row(self, t):
        """The row on this tape of t, which requires grad and names a row of
        another thread's tape: a leaf's own row here (Note [Leaves shared by
        threads]), or a graph input (Note [Graphs across threads])."""
        home = t._ep.tape
        with home.lock:  # t's row is read in a numbering that no compaction changes meanwhile
            r = where(t)[1]
            if home.op[r] != LEAF:
                return self._graph_input_row(t, home, r)
            # a re-taped VJP's Tensor for a leaf row stands for the leaf
            leaf = home.tensor_at(r)
        return self._foreign_leaf_row(t if leaf is None else leaf)

    def _graph_input_row(self, t, home, r):
        """The row standing for row r of `home`, t's, on this tape; home's lock is held."""
        rows = t._foreign_rows
        entry = rows.get(self) if rows is not None else None
        # (unless an in-place op has moved t to a new row since)
        if entry is not None and type(entry[2]) is _GraphInput and entry[2].row() == r:
            return current_row(entry[0], entry[1])[1]
        token = _GraphInput(t)
        token._ep, token._row = home.epoch_of(r), r
        home.nodes.add(token)
        q = self.append(LEAF, t._value, token)
        if type(t._value) is not float:
            self.keep[q] = t._value
        t._version_counter().add_row(self.ep, q)
        self.graph_inputs.add(q)
        _foreign_rows_of(t)[self] = (self.ep, q, token)
        return q

    def _foreign_leaf_row(self, t):
        """The row of leaf t on this tape when its own row is on another
        thread's (Note [Leaves shared by threads])."""
        r = self.row_of(t)
        if r >= 0:
            return r
        rows = _foreign_rows_of(t)
        token = _ForeignLeaf(t)
        r = self.append(LEAF, t._value, token)
        if type(t._value) is not float:
            self.keep[r] = t._value
        t._version_counter().add_row(self.ep, r)
        rows[self] = (self.ep, r, token)
        return r

    # -- lifetime ------------------------------------------------------------
    def tensor_at(self, r):
        """The Tensor that owns row r (a leaf, a retained or a non-0-d result), or None."""
        owner = self.owners[r]
        return owner() if isinstance(owner, weakref.ref) else owner

    def _roots(self):
        n = self.n
        released = (self.ndim[:n] > 0) & (self.ptr[:n] == 0)  # owners[r] is None there
        # a constant's row (shared by its uses, see adopt) lives only while a
        # row that used it does: its owner is the constant, which outlives it
        # (a training loop's input kept its rows forever)
        ownerless = (self.flags[:n] & OWNERLESS) != 0 if self.replayed else None
        if ownerless is not None and ownerless.any():
            # a replay's rows: ask only the owners of the others (each is in one more list here)
            asked = np.flatnonzero(~ownerless)
            owners = self.owners
            refs = np.zeros(n, np.int64)
            refs[asked] = _owner_refs([owners[r] for r in asked.tolist()]) - 1
        else:
            refs = _owner_refs(self.owners)
        owned = (refs > _DEAD_REFS) & ~released & (self.op[:n] != CONST)
        roots = np.flatnonzero(owned).tolist()
        for node in self.nodes:
            roots.append(node.row())
        self.retained = {r: ref for r, ref in self.retained.items() if ref() is not None}
        roots.extend(self.retained)
        return np.array(roots, np.int64)

    def compact(self):
        """Drop every row no live Tensor or node can reach; renumber the rest
        in a new epoch (see Note [Tape layout])."""
        self.trim_owners()
        n = self.n
        kept = self._with_nodes(self.reachable(self._roots(), 0, n))
        while self.python_rows:
            # a dead Function's ctx still holds the tensors it saved, which
            # made their rows roots: without it, they may be garbage too. A
            # live one keeps its node's rows, with the outputs it saved: a
            # create_graph backward goes through them
            rows = np.fromiter(self.python_rows, np.int64, len(self.python_rows))
            dropped = rows[~np.isin(rows, kept)].tolist()
            if not dropped:
                break
            for r in dropped:
                del self.python_rows[r]
            kept = self._with_nodes(self.reachable(self._roots(), 0, n))
        m = len(kept)
        newidx = np.full(n, -1, np.int64)
        newidx[kept] = np.arange(m)
        pool, npool = _sweep.compact_rows(self.a0, self.a1, self.xs, self.nx, self.shp, self.ndim, self.ia,
                                          self.ian, self.pool, self.npool, kept, newidx)
        for name, _, default in _COLUMNS:
            col = getattr(self, name)
            if name not in ("a0", "a1", "xs", "nx", "shp", "ia"):
                col[:m] = col[kept]
            col[m:n] = default
        # a boundary between rows becomes the number of kept rows below it
        fresh_from = self.fresh_from[:m]
        fresh = fresh_from != NEVER
        fresh_from[fresh] = np.searchsorted(kept, fresh_from[fresh])
        self.pool, self.npool = pool, npool
        self.tuple_offsets = {}
        self.tuple_at = {}
        self.pooled_end = 0
        owners = self.owners
        self.owners = [owners[r] for r in kept.tolist()]
        self.keep = {int(newidx[r]): v for r, v in self.keep.items() if newidx[r] >= 0}
        self.strided = {r: v for r, v in self.keep.items() if not v.flags.c_contiguous}
        if self.dirtied:
            self.dirtied = {int(newidx[r]): v for r, v in self.dirtied.items() if newidx[r] >= 0}
        self.retained = {int(newidx[r]): v for r, v in self.retained.items() if newidx[r] >= 0}
        self.hooks = {int(newidx[r]): v for r, v in self.hooks.items() if v and newidx[r] >= 0}
        self.traces = {int(newidx[r]): v for r, v in self.traces.items() if newidx[r] >= 0}
        if self.hook_groups:
            self.hook_groups = {int(newidx[r]): tuple(int(newidx[q]) if q >= 0 else -1 for q in group)
                                for r, group in self.hook_groups.items() if newidx[r] >= 0}
        self.python_rows = {int(newidx[r]): v for r, v in self.python_rows.items() if newidx[r] >= 0}
        if self.graph_inputs:
            self.graph_inputs = {int(newidx[r]) for r in self.graph_inputs if newidx[r] >= 0}
        if self.packed:
            self.packed = {int(newidx[r]): v for r, v in self.packed.items() if newidx[r] >= 0}
        if self.node_data:
            self.node_data = {int(newidx[r]): v for r, v in self.node_data.items() if newidx[r] >= 0}
        if self.node_hooks:  # rows whose hooks were all removed send no graph through the Python walk
            self.node_hooks = {int(newidx[r]): v for r, v in self.node_hooks.items()
                               if (v[0] or v[1]) and newidx[r] >= 0}
        if self.post_accumulate_hooks:
            self.post_accumulate_hooks = {int(newidx[r]): v for r, v in self.post_accumulate_hooks.items()
                                          if v and newidx[r] >= 0}
        if self.node_of:
            self.node_of = weakref.WeakValueDictionary(
                {int(newidx[r]): node for r, node in list(self.node_of.items()) if newidx[r] >= 0})
        self._renumber(newidx)
        self.n = m
        op = self.op[:m]
        scalar = _sweep.ELEMENTWISE[op] & (self.ndim[:m] == 0) & (self.dt[:m] == 0)
        self.tensor_rows = int(np.count_nonzero((op > CONST) & ~scalar))
        self.kernels_scanned = 0  # renumbered: the next sweep looks at every row again
        held = (self.ndim[:m] > 0) & (self.ptr[:m] != 0)
        # what python rows hold outside the rows (a Function's saved tensors) counts too
        itemsize = np.where(self.dt[:m][held] == 1, 4, 8)  # float32 values stay float32
        self.held_bytes = int((self.numel[:m][held] * itemsize).sum()) + sum(
            state.nbytes for state in self.python_rows.values()) + sum(
            entry.nbytes for entry in self.packed.values())
        self.bytes_limit = max(_BYTES_FLOOR, 2 * self.held_bytes)
        self.held_rows = np.flatnonzero(held).tolist()
        self.dead_saved = []
        # the early release still looks at the last op's inputs (Note [Early
        # release] in tape._record): a compaction between two ops of a large
        # graph kept a dead value until the next backward (W10: +8 MB)
        self.last_inputs = tuple(int(newidx[r]) if r >= 0 else -1 for r in self.last_inputs)

    def epoch_of(self, r):
        """The epoch to name row r in: `ep` for a row appended since it began
        naming rows, the numbering's for an older one, which a replay with
        Python steps does not drop with its own (Note [Dropping a dead tail])."""
        return self.ep if r >= self.ep_from else self.numbering

    def segment_epoch(self):
        """The epoch that names the rows a replay is about to append (Note
        [Dropping a dead tail])."""
        ep = Epoch(self)
        segments = self.segments
        segments.append(weakref.ref(ep))
        if len(segments) >= 64:
            segments[:] = [ref for ref in segments if ref() is not None and ref().remap is None]
        return ep

    def drop_dead_tail(self, keep_owners=False, replayed_over=False):
        """Move the tape's end back over the last replayed segment when
        nothing can reach its rows any more (Note [Dropping a dead tail]);
        return whether it did.
        With `keep_owners`, for a native replay about to append its rows
        again, the owners' list keeps its length (its entries past n None):
        a list that shrinks and grows by 30,000 entries a call (W1) spent a
        sixth of the call there; the replay or trim_owners sets it right.
        With `replayed_over`, for a replay of 0-d rows about to append its
        rows where the segment's were, a segment of such rows is left
        uncleared, in `self.uncleared` as (lo, hi): that replay writes every
        column they and their sweep changed (a clear and a rewrite of each
        row were a tenth of W1 compiled), and the caller clears them with
        clear_dropped unless its rows come at once at lo."""
        self.uncleared = None
        segments = self.replayed_segments
        if not segments or segments[-1].hi != self.n:
            self.replayed_segments = []
            return False
        tail = segments[-1]
        if not self._drop_segment(tail, keep_owners, replayed_over):
            return False
        del segments[-1]
        lo = tail.lo
        if tail.inputs_lo < lo and self._dead_inputs(tail):
            self._clear_inputs(tail)
            lo = tail.inputs_lo
            if self.uncleared is not None:  # the inputs' rows hold the defaults: the replay may write there
                self.uncleared = (lo, tail.hi)
        self.n = lo
        self.kernels_scanned = min(self.kernels_scanned, lo)
        if not keep_owners:
            del self.owners[lo:]
        # the pool goes back too unless a tuple was pooled in it (a replay's
        # steps pool the shapes they meet first), which later rows and the
        # programs' cached offsets share
        if self.npool == tail.pool_hi and self.pooled_end <= tail.pool_lo:
            self.npool = tail.pool_lo
        return True

    def reuse_segment_below(self, m, k, reads_below, replayed_over=False):
        """Drop the replayed segment just below the tape's last one for a
        native replay of m rows, whose call adopts k new leaf rows and reads
        other rows below `reads_below` only, when the two are of one layout,
        the last one reads nothing of it and nothing can reach it (Note
        [Dropping a dead tail]): the row at which that call's leaves go
        (adopt_at), its replay's rows after them; or -1. `replayed_over` as
        for drop_dead_tail."""
        self.uncleared = None
        segments = self.replayed_segments
        if len(segments) < 2:
            return -1
        below, tail = segments[-2], segments[-1]
        if (tail.hi != self.n or below.hi != tail.inputs_lo or below.hi - below.lo != m
                or below.lo - below.inputs_lo != k or below.steps or tail.reads_below > below.inputs_lo
                or reads_below > below.inputs_lo):
            return -1
        if k and not self._dead_inputs(below):
            return -1
        if not self._drop_segment(below, True, replayed_over):
            return -1
        if k:
            self._clear_inputs(below)
        del segments[-2]
        return below.inputs_lo

    def adopt_at(self, leaves, at):
        """The rows of `leaves`, tensors that require grad and name no row,
        adopted at rows at.. of a dropped segment (reuse_segment_below)
        rather than at the tape's end."""
        n, self.n = self.n, at
        owners = self.owners
        try:
            rows = [self.adopt(t) for t in leaves]
        finally:
            owners[at:self.n] = owners[n:]
            del owners[n:]
            self.n = n
        return rows

    def _dead_inputs(self, segment):
        """Whether nothing reaches the leaf rows segment.inputs_lo..lo-1 its
        call adopted: their tensors have left them (changed in place since)
        or died, and no graph but the segment's own read them, nor their
        version counter (a write through `.data` leaves it naming them)."""
        lo, hi = segment.inputs_lo, segment.lo
        owners, flags = self.owners, self.m_flags
        for r in range(lo, hi):
            if flags[r] & ~(RG | FREED | OWNERLESS | DIRTY):
                return False
            if owners[r] is None:
                continue
            if sys.getrefcount(owners[r]) > _DEAD_REFS_AT:  # counted before a name of it here adds one
                return False
            owner = owners[r]
            left = owner() if isinstance(owner, weakref.ref) else None
            if left is not None and left._vc is not None and any(q == r for _, q in left._vc.rows):
                return False
        return not self._named_elsewhere(lo, hi, (self.retained, self.hooks, self.hook_groups, self.traces,
                                                  self.python_rows, self.packed, self.node_hooks,
                                                  self.post_accumulate_hooks, self.graph_inputs))

    def _clear_inputs(self, segment):
        """Drop the leaf rows of a segment's inputs that _dead_inputs found
        unreachable: every column takes its default again."""
        lo, hi = segment.inputs_lo, segment.lo
        with self.lock:
            self.clear_dropped(lo, hi)
            self.clear_rows(lo, hi)
            for r in range(lo, hi):
                self.owners[r] = None
                self.dirtied.pop(r, None)
            self._forget_rows(lo, hi)

    def _named_elsewhere(self, lo, hi, tables):
        """Whether a row lo..hi-1 is in one of `tables` or has a node alive."""
        for table in tables:
            if table and max(table) >= lo and any(lo <= r < hi for r in table):
                return True
        return bool(self.nodes) and any(lo <= node.row() < hi for node in self.nodes)

    def _drop_segment(self, segment, keep_owners, replayed_over):
        """Drop the replayed segment's rows when nothing can reach them: no
        owner of its rows is alive, no node, retained gradient, hook or other
        table names them, and no sweep runs; return whether it did. Its
        owners become None, the caller moves the tape's end."""
        lo, hi = segment.lo, segment.hi
        if segment.epoch.remap is not None or self.sweeping or self.swept_across or self.graph_tasks:
            return False
        owned = _sweep.owned_rows(lo, hi, self.flags, self.work[2])
        if owned < 0:
            return False
        owners, op = self.owners, self.op
        owned = self.work[2, :owned].tolist()
        for r in owned:
            # a constant's row is no root (compaction's _roots): its live
            # tensor (a fixed input) keeps it only through a cache of this
            # segment's epoch, which no later use matches
            if owners[r] is not None and op[r] != CONST and sys.getrefcount(owners[r]) > _DEAD_REFS_AT:
                return False
        if self._named_elsewhere(lo, hi, (self.retained, self.hooks, self.hook_groups, self.traces, self.python_rows,
                                          self.packed, self.node_hooks, self.post_accumulate_hooks,
                                          self.graph_inputs)):
            return False
        uncleared = replayed_over and segment.scalar
        with self.lock:
            if uncleared:
                self.uncleared = (lo, hi)
            else:
                self.clear_dropped(lo, hi)
            if segment.steps:  # eager rows write columns a native replay leaves alone (dt, oi, nx, xs, fresh_from)
                self.clear_rows(lo, hi)
            if keep_owners:
                for r in owned:
                    owners[r] = None
            segment.epoch.remap = self.dropped  # every name of its rows is of a dropped row
            self.tensor_rows -= segment.tensor_rows
            self._forget_rows(lo, hi)
        return True

    def _forget_rows(self, lo, hi):
        """Take the dropped rows lo..hi-1 out of the tables that list rows.
        `keep` holds values only rows of the segment read (a view's
        contiguous copy, the value before an in-place op): they go too."""
        if self.keep and max(self.keep) >= lo:
            for r in [r for r in self.keep if lo <= r < hi]:
                del self.keep[r]
        if self.held_rows:
            self.held_rows = [r for r in self.held_rows if not lo <= r < hi]
        if self.dead_saved:
            self.dead_saved = [r for r in self.dead_saved if not lo <= r < hi]
        if self.node_data:  # what nodes of the rows would show: no node of them is alive
            self.node_data = {r: v for r, v in self.node_data.items() if not lo <= r < hi}
        if self.last_inputs:
            self.last_inputs = tuple(-1 if lo <= r < hi else r for r in self.last_inputs)

    def replayed_segment(self, segment):
        """Note `segment` (a ReplayedSegment whose rows a replay has just
        written) as one the next replay may drop: the last one, unless it
        came below it (reuse_segment_below)."""
        segments = self.replayed_segments
        if segment.hi == self.n:
            # the one it follows directly may be dropped under it by the next
            self.replayed_segments = [s for s in segments[-1:] if s.hi == segment.inputs_lo] + [segment]
        else:
            segments.insert(len(segments) - 1, segment)

    def clear_dropped(self, lo, hi):
        """Give the rows lo..hi-1 of a dropped segment of a native replay
        their columns' defaults (drop_dead_tail)."""
        self.held_bytes -= _sweep.clear_segment(lo, hi, self.a1, self.c, self.p, self.flags, self.ndim, self.nuse,
                                                self.numel, self.shp, self.ptr, self.ia, self.ian)

    def trim_owners(self):
        """The owners' list as long as the tape again, after
        drop_dead_tail(keep_owners=True)."""
        if len(self.owners) > self.n:
            del self.owners[self.n:]

    def clear_rows(self, lo, hi):
        """Give rows lo..hi-1, past n, their columns' defaults again (a replay
        whose guard failed wrote them: rows past n hold the defaults)."""
        for name, _, default in _COLUMNS:
            getattr(self, name)[lo:hi] = default

    def new_epoch(self):
        """Start a new epoch without renumbering: every tensor of the old one
        goes through `adopt` at its next use (tape.compile's recording)."""
        old = self.ep
        old.remap = np.arange(self.n, dtype=np.int64)
        self.old_epochs.append(weakref.ref(old))
        self.replayed_segments = []  # the old epoch names their rows: they stay
        self._start_epoch()

    def _start_epoch(self):
        """A new epoch of the current numbering, which names the rows appended now."""
        self.ep = Epoch(self)
        # the epoch to which a name of an old epoch moves when next used:
        # `ep` itself, but while a replay with Python steps names its rows in
        # a segment's epoch (Note [Dropping a dead tail])
        self.numbering = self.ep
        # names the current epoch without keeping it alive (Tensor._const_row):
        # each live old epoch is remapped at every compaction
        self.ep_ref = weakref.ref(self.ep)

    def _with_nodes(self, kept):
        """The rows `kept` (ascending) with every output row of their nodes:
        a node's outputs stay together, so that each keeps its number (their
        inputs are the node's, which every output row reaches)."""
        n = self.n
        oi = self.oi[:n]
        if not (oi[kept].any() or oi[np.minimum(kept + 1, n - 1)].any()):
            return kept
        group = np.arange(n) - oi
        live_group = np.zeros(n, np.bool_)
        live_group[group[kept]] = True
        return np.flatnonzero(live_group[group])

    def _renumber(self, newidx):
        """Start a new epoch; older epochs still in use map straight to it."""
        old = self.ep
        old.remap = newidx
        alive = [old]
        for ref in self.segments:  # in the current numbering, as the current epoch
            ep = ref()
            if ep is not None and ep.remap is None:
                ep.remap = newidx
                alive.append(ep)
        self.segments = []
        self.replayed_segments = []
        for ref in self.old_epochs:
            ep = ref()
            if ep is not None:
                m = ep.remap
                ep.remap = np.where(m >= 0, newidx[np.maximum(m, 0)], -1)
                alive.append(ep)
        self.old_epochs = [weakref.ref(ep) for ep in alive]
        self._start_epoch()

    def release(self, rows):
        """Drop the values of `rows` (row numbers) whose Tensors are dead and
        that no recorded consumer saved.

        Called after a sweep for the rows it freed (nuse is read again: a
        re-taped sweep may have saved a row since its walk listed it), and by
        each recording op for the large inputs of the op before it (Note
        [Early release] in tape._record); release_dead catches the rest after
        backward."""
        owners, ptr, nuse, numel, dt = self.owners, self.m_ptr, self.m_nuse, self.m_numel, self.m_dt
        dropped_bytes = 0
        for r in rows:
            owner = owners[r] if r >= 0 and ptr[r] and not nuse[r] else None
            # (`owner` is one more reference to it here)
            if owner is not None and sys.getrefcount(owner) <= _DEAD_REFS_AT + 1:
                # _drop_value, inline: a sweep releases a row per saved value it walked
                if not isinstance(owner, weakref.ref):
                    owners[r] = None
                if self.keep:
                    self.keep.pop(r, None)
                ptr[r] = 0
                dropped_bytes += numel[r] * (4 if dt[r] == 1 else 8)
            owner = None
        self.held_bytes -= dropped_bytes

    def release_dead(self):
        """Drop the values of rows whose Tensors are dead and that no recorded
        consumer saved: nothing can read them again. Run after each backward,
        so a loop's temporaries go back to the allocator an iteration later,
        where the next iteration reuses them, rather than at the next
        compaction, after which they are fresh memory to fault in.

        A row is looked at once while its Tensor is alive (then it is left to
        compaction), and again while it is dead and saved, since a backward
        may free it. Those saved rows are looked at again only once as many
        new rows have come in: a graph dropped without backward keeps its
        rows saved until compaction, and looking at them on every backward
        made each one cost the size of all such garbage (measured: 5x)."""
        owners, ptr, nuse = self.owners, self.m_ptr, self.m_nuse
        rows, saved = self.held_rows, self.dead_saved
        if len(saved) <= len(rows):
            rows.extend(saved)
            saved = []
        for r in rows:
            if ptr[r] == 0 or owners[r] is None or sys.getrefcount(owners[r]) > _DEAD_REFS_AT:
                continue
            if nuse[r] == 0:
                self._drop_value(r)
            else:
                saved.append(r)
        self.held_rows = []
        self.dead_saved = saved

    def redirect(self, lo, old, new, old_uses):
        """Make rows lo..n-1 read row new[k] where they read row old[k]
        (rows below lo), moving the saved-value counts those rows added to
        old[k] (its nuse now, less `old_uses[k]`, its count before them)."""
        n = self.n
        nuse = self.nuse
        more = np.flatnonzero(self.nx[lo:n] > 0) + lo
        extra = [self.pool[s:s + k] for s, k in zip(self.xs[more].tolist(), self.nx[more].tolist())]
        for o, p, before in zip(old, new, old_uses):
            for seg in (self.a0[lo:n], self.a1[lo:n], *extra):
                seg[seg == o] = p
            moved = nuse[o] - before
            nuse[o] -= moved
            nuse[p] += moved

    def reread(self, r, value):
        """Row r reads `value`, its tensor's after a write into its storage
        (or `.data`) that left the tensor on the row, for the consumers
        recorded from now on (fresh_from): a value of its own that the row
        kept is stale."""
        self.m_fresh_from[r] = self.n
        if type(value) is float or value.ndim == 0:
            self.m_sval[r] = float(value)
        self.keep.pop(r, None)
        if type(value) is not float and value.ndim:
            self.m_ptr[r] = id(self._keep_float(r, value)) + DATA_FIELD

    def mark_dirty(self, r, vc=None, written=None):
        """Row r's value changed in place: every consumer that saved it
        raises, until the row reads a value made after the write (Note [Tape
        layout], fresh_from). `vc`, the storage's version counter before the
        write, names the version the consumers saved, for the error, and
        `written`, the tensor written (a view's base), names the op: its
        grad_fn then, as PyTorch's error does (AddBackward0 of an add_)."""
        if vc is not None and (not self.m_flags[r] & DIRTY or self.m_fresh_from[r] != NEVER):
            self.dirtied[r] = (vc, vc.n, None if written is None else weakref.ref(written))
        self.m_flags[r] |= DIRTY
        self.m_fresh_from[r] = NEVER

    def reachable(self, roots, lo=0, hi=None):
        """The rows among lo..hi-1 (hi: past the highest root) that `roots`
        (rows in that range) reach along input edges that stay in it,
        ascending: the work is the range's, however long the tape below it."""
        roots = np.asarray(roots, np.int64)
        if hi is None:
            hi = int(roots.max()) + 1 if roots.size else lo
        return _sweep.reachable(self.a0, self.a1, self.xs, self.nx, self.pool, lo, hi, roots)

    def inputs(self, r):
        """The input rows of row r, in order (-1 for a constant operand or a
        missing one), as many as its op takes (`arity`; all of a variadic op's)."""
        rows = (int(self.m_a0[r]), int(self.m_a1[r]))
        k = self.m_nx[r]
        if k > 0:
            s = self.m_xs[r]
            return rows + tuple(self.pool[s:s + k].tolist())
        return rows[:1] if k < 0 else rows

    def number_outputs(self, rows):
        """Make `rows`, just appended one after the other, the outputs of one
        node, numbered in order (Note [Tape layout])."""
        first = rows[0]
        if list(rows) != list(range(first, first + len(rows))):
            raise RuntimeError(f"tape: the outputs of one node were recorded at rows {rows}, not one after "
                               "the other")
        for j, r in enumerate(rows):
            self.m_oi[r] = j

    def outputs(self, r):
        """The rows of the outputs of row r's node, in order."""
        node = r - self.m_oi[r]
        end = node + 1
        while end < self.n and self.m_oi[end] == end - node:
            end += 1
        return range(node, end)

    def more_inputs(self, r, rows):
        """Give row r of a variadic op (just appended, with inputs a0 and a1)
        its input rows past the second, or none past the first (`rows` None:
        nx -1, Note [Tape layout])."""
        if rows is None:
            self.m_nx[r] = -1
        elif rows:
            self.m_xs[r] = self._push(rows)
            self.m_nx[r] = len(rows)
            self.m_flags[r] |= MORE

    def drop_cut_off(self, lo, hi):
        """Drop the values of rows lo..hi-1 that nothing live reaches, saved
        by a consumer or not: a graph cut off as a whole (a checkpoint's
        forward, which its backward recomputes) gives its memory back now,
        not at compaction. The rows stay, for compaction to drop."""
        owners = self.owners
        live = [r for r in range(lo, hi) if owners[r] is not None
                and sys.getrefcount(owners[r]) > _DEAD_REFS_AT]
        live.extend(r for r in (*(node.row() for node in self.nodes), *self.retained, *self.hooks)
                    if lo <= r < hi)
        reached = set(self.reachable(live, lo, hi).tolist()) if live else set()
        op, ptr = self.m_op, self.m_ptr
        for r in range(lo, hi):
            if ptr[r] and op[r] > CONST and r not in reached:
                self._drop_value(r)
                self.m_nuse[r] = 0

    def _drop_value(self, r):
        # a leaf that has left its row still gets the row's gradient (_LeafRef)
        if not isinstance(self.owners[r], weakref.ref):
            self.owners[r] = None
        if self.keep:
            self.keep.pop(r, None)
        self.m_ptr[r] = 0
        self.held_bytes -= self.m_numel[r] * (4 if self.m_dt[r] == 1 else 8)  # what append counted


# Note [Leaves shared by threads]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A leaf names one row, on the tape of the thread that first used it (its
# `_ep`, `_row`). Another thread that uses it gets a row of its own, which
# the leaf keeps in `_foreign_rows` (tape -> (epoch, row, token)): re-homing
# the leaf there instead made each thread's use take it from the graphs
# another thread was recording, whose autograd.grad then found it unused.
# The row's owner is the token, a weak reference to the leaf that the leaf
# itself holds: the row is live while the leaf is and names it (tensor_at,
# for `.grad`), without the tape keeping the leaf alive; the row keeps the
# leaf's array (`keep`) for the graphs that saved it. A leaf that leaves its
# row (`Tensor._drop_row`) forgets these rows too, and their tokens die.


class _ForeignLeaf(weakref.ref):
    """The owner of a leaf's row on another thread's tape (Note [Leaves shared by threads])."""
    __slots__ = ()


# Note [Graphs across threads]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A graph recorded on one thread's tape (A) can be used in another's (B), as
# in PyTorch. A tensor t that names a non-leaf row of A gets a row on B when
# B first uses it (Tape._foreign_row): a graph input, a LEAF row of t's value
# whose owner is a _GraphInput token naming A's row. B's sweeps reach it as a
# leaf, and B's backward (engine._run_across) hands the adjoint it captured
# there on to a backward over A from that row, run in B's thread, tape by
# tape until no graph input is reached: one sweep per tape, with every
# adjoint that reached that tape's rows as its roots. What A's sweep reaches
# is A's: its leaves' `.grad` (backward) or autograd.grad's inputs that have
# a row on A, and A's own graph inputs, handed on in turn; create_graph
# records the re-taped VJPs of A's rows on B, whose uses of A's rows are
# graph inputs again. A's sweep frees A's rows as its own does, so a second
# backward raises PyTorch's "Trying to backward through the graph a second
# time".
#
# A's rows stay valid for B because:
# - the token is in A's `nodes`, as a grad_fn node is: a root of A's
#   compaction while B's row (its owner; a weak reference to t, so B keeps
#   the token when it releases the value, and t is not kept alive) lives;
# - `A.lock` is held by everything that renumbers, reallocates or sweeps A's
#   rows: A's compaction and growth (reserve), A's own backwards, and B's
#   backward over A (and B's reading of t's row when it makes the token).
#   Appending is not locked, and need not be: a sweep reads only rows below
#   its roots, all written before the root was, and the kernels of the rows
#   above them are scanned again by A's next sweep (engine._hand_on);
# - t's row is cached in `t._foreign_rows` (as a leaf's is), checked
#   against t's current row, since an in-place op on t moves t to a new row.
# What A records meanwhile writes existing rows too, outside the lock: a
# new consumer's count of the values it saves (`nuse`), an in-place op's
# DIRTY mark. A sweep that frees writes the same columns (it counts saved
# values down and marks FREED), with the GIL released, so B's sweep over A
# (`A.swept_across`) frees into copies of them: its FREED marks are merged
# back a row at a time under the GIL (engine._merge_freed), and its counts
# are dropped, so the values of A's rows that B's backward freed stay until
# A's compaction drops the rows, where A's own backward releases them at
# once. Backward's other bookkeeping of releases (A's `held_rows`,
# `held_bytes`) may race with A's appends; A's next compaction recomputes it.
# B's sweep of its own rows ends before it hands on, so no thread holds one
# tape's lock while waiting for another's, except through user code: hooks
# and Functions that a backward runs, and the re-taped VJPs of another
# tape's rows, which record on (and may grow) the calling thread's tape.
# The tapes are swept each after every tape whose graph inputs lead to it
# (engine._tape_order), so each is swept once, with all of its gradients.
# Where the tapes' graphs lead to each other (A -> B -> A: a second-order
# backward of a gradient that another thread's create_graph made), a tape
# is swept once per visit; that is exact, but a row that two of its sweeps
# reach and that saved values makes the second raise the freed-graph error
# without retain_graph=True, where PyTorch, sweeping one graph, does not.
# autograd.grad hands on along the graph inputs whose graphs lead to one of
# its inputs only (engine._leading_inputs, decided before it sweeps), so it
# frees only the rows on paths to its inputs, as PyTorch's engine does.


class _GraphInput(weakref.ref, RowName):
    """The owner of a graph input's row: a weak reference to the tensor, and
    the name of its row on its own tape (Note [Graphs across threads]).
    Compared by identity, as a node in `nodes` is (a weak reference
    compares its referents, and a Tensor's == is elementwise)."""
    __slots__ = ("_ep", "_row", "__weakref__")
    __eq__ = object.__eq__
    __hash__ = object.__hash__


class _Anomaly:
    """Anomaly detection (tape.autograd.detect_anomaly): global, as PyTorch's."""
    enabled = False
    check_nan = True


anomaly = _Anomaly()


# the packages whose frames a forward trace leaves out: the op's own calls
_INTERNAL_DIRS = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), name, "")
                       for name in ("tape", "ops"))


def keep_trace(tp, r):
    """In anomaly mode: keep the stack of the forward call that recorded row
    r, up to the caller's frame that called into tape (however deep the op's
    own calls go)."""
    stack = traceback.extract_stack()
    while stack and stack[-1].filename.startswith(_INTERNAL_DIRS):
        stack.pop()
    tp.traces[r] = traceback.format_list(stack)


class _ThreadState(threading.local):
    """Per-thread tape, which also holds the thread's grad mode."""

    def __init__(self):
        self.tape = Tape()


state = _ThreadState()
