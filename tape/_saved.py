"""Saved-tensor hooks: the context manager of tape.autograd.graph, and how a
recorded row packs the values its VJP will read (Note [Saved tensor hooks]).
"""
import contextlib

from ._registry import CONST, REGISTRY, SAVED_TENSORS, SAVES_OUT, SAVES_X, SAVES_Y, SAVES_Z, RowTensor
from ._tape import DIRTY, FREED, RG, state, where
from ._tensor import DetachedInPlace, Tensor, _unpinned, new_tensor

__all__ = ["saved_tensors_hooks", "disable_saved_tensors_hooks", "pack_row", "pack", "unpacked", "unpack_saved",
           "keep_stand_in_reads", "drop_packed", "row_tensor", "saved_tensor", "SavedTensor", "FREED_MESSAGE",
           "pack_kept", "saved_row_tensor"]

# Note [Saved tensor hooks]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# `tp.saved_hooks` is the thread's stack of (pack_hook, unpack_hook) pairs,
# kept on its tape as grad mode is. While it is not empty, each recording
# op (`record`, `_scalar_row` in tape._record) calls `pack_row`, one
# attribute test when it is empty: for each value the row saves (its op's
# saves_for, for the inputs that require grad) the innermost pack_hook runs,
# with grad mode off as in PyTorch, on a Tensor of that value in that row's
# place in the graph, and `tp.packed[r]` keeps what it returns with the
# unpack_hook of the pair. A tensor PyTorch saves that the row keeps in its
# ints (a RowTensor: max's indices) is made when the op keeps its call's
# arguments (tape._node.keep_arguments): a row of such an op packs then,
# everything it saves in its op's order (`pack_kept`). The VJP reads the
# ints, not what unpack_hook returns for a RowTensor; the node's
# `_saved_<name>` reads that.
#
# The native sweep cannot call Python, so `_reaches_a_python_row` counts
# the packed rows as Python rows: their graphs go through the Python walk,
# whose _Ctx reads a packed value through unpack_hook once per walk of the
# row, as a tensor of the unpacked value in the saved row's place (`unpacked`):
# under create_graph the gradient flows into the saved tensor's history, as
# PyTorch's SavedVariable::unpack grafts it. The tensor has no row of its
# own: it names the saved row, and stands in for it in the VJP, whose
# recorded rows compute with its value but would read the saved row's in a
# later backward. So the rows the VJP records that save a stand-in's row
# keep the stand-in's value in a _Packed entry of their own, which unpacks
# as itself (`keep_stand_in_reads`): a second-order backward reads it there.
#
# The row's own value stays on the tape, as every row keeps what it saved:
# hooks change what the VJP reads, not the memory the tape holds. Packed
# Tensors count in tp.held_bytes, so a loop that packs copies compacts by
# their size too. An entry goes when a backward without retain_graph walks
# (and frees) its row, and when compaction drops the row.
#
# A node's `_raw_saved_<name>` (SavedTensor.register_hooks) packs one value
# of a row that no saved_tensors_hooks packed, with its own pair of hooks:
# each value of an entry keeps its unpack_hook.

_NOT_SAVED = object()

# the position of each saved tensor in a _Packed entry
_SLOT = {"x": 0, "y": 1, "out": 2, "z": 3}

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they "
    "have already been freed). Saved intermediate values of the graph are freed when you call .backward() "
    "or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time "
    "or if you need to access saved tensors after calling backward.")

_INPLACE = ("A saved tensor pack hook is modifying its input in place. Tensors provided as input to pack "
            "hook cannot be modified by in-place operations as this can lead to unexpected side-effects. "
            "Please open an issue if you need to perform in-place operations on the input to a pack hook.")


class saved_tensors_hooks:
    """Context manager: every value saved for backward while it is active
    goes through `pack_hook(tensor)` when the op records, and what that
    returns through `unpack_hook(packed)`, which must return a tensor, when
    backward needs the value; as torch.autograd.graph.saved_tensors_hooks.
    Nested, the innermost pair applies. Hooks run with grad mode off, except
    unpack_hook under create_graph=True.

    A graph that saved values through hooks is walked in Python, not by the
    native sweep. The tape still holds each row's own value (its rows keep
    what they save), so a pack_hook that moves the value elsewhere saves no
    memory here, unlike in PyTorch.

    Examples
    --------
    >>> import tape
    >>> x = tape.tensor([1.0, 2.0], requires_grad=True)
    >>> with tape.autograd.graph.saved_tensors_hooks(lambda t: t * 2, lambda p: p):
    ...     y = (x * x).sum()
    >>> y.backward()
    >>> x.grad
    tensor([4., 8.])
    """

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        tp = state.tape
        if tp.saved_hooks_disabled is not None:
            raise RuntimeError(tp.saved_hooks_disabled)
        tp.saved_hooks.append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc):
        state.tape.saved_hooks.pop()
        return False


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message):
    """Context manager (and decorator) under which saved_tensors_hooks raises
    RuntimeError(error_message), as does entering it while hooks are active,
    as torch.autograd.graph.disable_saved_tensors_hooks.

    >>> import tape
    >>> from tape.autograd.graph import disable_saved_tensors_hooks, saved_tensors_hooks
    >>> with disable_saved_tensors_hooks("no hooks here"):
    ...     try:
    ...         with saved_tensors_hooks(lambda t: t, lambda p: p):
    ...             pass
    ...     except RuntimeError as e:
    ...         print(e)
    no hooks here
    """
    tp = state.tape
    if tp.saved_hooks:
        raise RuntimeError(error_message)
    previous, tp.saved_hooks_disabled = tp.saved_hooks_disabled, error_message
    try:
        yield
    finally:
        tp.saved_hooks_disabled = previous


class _Packed:
    """What saved-tensor hooks made of one row's saved values: x, y, out and z
    (pack_hook's results, or _NOT_SAVED), and the unpack_hook of each; and
    its RowTensors', by name, each with its unpack_hook."""
    __slots__ = ("values", "unpack_hooks", "nbytes", "row_tensors")

    def __init__(self, values, unpack_hooks, nbytes):
        self.values, self.unpack_hooks, self.nbytes = values, unpack_hooks, nbytes
        self.row_tensors = {}


def _packed_bytes(packed):
    return packed._value.nbytes if type(packed) is Tensor and type(packed._value) is not float else 0


def pack(pack_hook, t, itself=False):
    """pack_hook(t) for a saved tensor t, run as PyTorch runs it, with grad
    mode off; refused when it modifies its argument in place. With `itself`
    (an op's input) the hook gets t, as PyTorch's does; else a tensor of t's
    value in t's place in the graph: a result's own Tensor, kept by what the
    hook returns, would keep its row, and so what was packed for it, alive
    for good (Note [Tape layout])."""
    given = t if itself else placed(t._value, t)
    version = given._version
    tp = state.tape
    enabled = tp.grad_enabled
    tp.grad_enabled = False
    try:
        packed = pack_hook(given)
    finally:
        tp.grad_enabled = enabled
    if given._version != version:
        raise RuntimeError(_INPLACE)
    return packed


def placed(value, like):
    """A new Tensor of `value` (copied if a 0-d float, _unpinned) in `like`'s place in the graph."""
    out = new_tensor(_unpinned(value), like._rg)
    out._ep, out._row = like._ep, like._row
    return out


def row_saves(tp, r):
    """The values row r saved: its op's saves_for, for the inputs that require grad."""
    saves_for = REGISTRY[tp.m_op[r]].saves_for
    flags = tp.m_flags
    a, b, z = _saved_inputs(tp, r)
    return ((saves_for[0] if a >= 0 and flags[a] & RG else 0)
            | (saves_for[1] if b >= 0 and flags[b] & RG else 0)
            | (saves_for[2] if z >= 0 and flags[z] & RG else 0))


def pack_row(tp, code, r, x, y, out, z=None):
    """Pack the values row r (op `code`, inputs x, y and z: Tensors or None,
    result `out`) saves, with the innermost hooks, in its op's order (Note
    [Saved tensor hooks], Note [Saved values' names] in tape._registry)."""
    pack_hook, unpack_hook = tp.saved_hooks[-1]
    saves = row_saves(tp, r)
    if not saves & (SAVES_X | SAVES_Y | SAVES_OUT | SAVES_Z) or REGISTRY[code].row_tensors:
        return  # an op that saves RowTensors packs all once it kept its arguments (pack_kept)
    values = [_NOT_SAVED] * 4
    nbytes = 0
    given = {"x": x, "y": y, "out": out, "z": z}
    for source in REGISTRY[code].pack_order:
        t = given[source]
        if saves & SAVED_TENSORS[source] and t is not None:
            packed = values[_SLOT[source]] = pack(pack_hook, t, source != "out")
            nbytes += _packed_bytes(packed)
    tp.packed[r] = _Packed(values, [unpack_hook] * 4, nbytes)
    tp.held_bytes += nbytes


def pack_kept(tp, r, arguments):
    """Pack what row r saves when its op saves RowTensors (made from the row
    and the arguments its op kept): with the innermost hooks, in the op's
    order (PyTorch's: gather's index, then self), once the op kept them
    (Note [Saved tensor hooks])."""
    opdef = REGISTRY[tp.m_op[r]]
    if not opdef.row_tensors:
        return
    pack_hook, unpack_hook = tp.saved_hooks[-1]
    saves = row_saves(tp, r)
    entry = tp.packed[r] = _Packed([_NOT_SAVED] * 4, [unpack_hook] * 4, 0)
    for name, source in opdef.saved:
        if isinstance(source, RowTensor):
            made = make_row_tensor(tp, r, source, arguments)
            if source.many:
                packed = tuple(None if t is None else pack(pack_hook, t, True) for t in made)
                nbytes = sum(_packed_bytes(p) for p in packed if p is not None)
            else:
                packed = pack(pack_hook, made, True)
                nbytes = _packed_bytes(packed)
            entry.row_tensors[name] = (packed, unpack_hook)
        elif type(source) is str and source in SAVED_TENSORS and saves & SAVED_TENSORS[source]:
            # the input itself, as pack_row gives it, or a new Tensor of the result
            packed = entry.values[_SLOT[source]] = pack(pack_hook, saved_tensor(tp, r, source), True)
            nbytes = _packed_bytes(packed)
        else:
            continue
        entry.nbytes += nbytes
        tp.held_bytes += nbytes


def make_row_tensor(tp, r, source, arguments):
    """The Tensor (or tuple of Tensors and Nones) a RowTensor makes of row r."""
    from ._engine import _Ctx
    made = source.make(_Ctx(tp, r), arguments)
    if source.many:
        return tuple(None if a is None else new_tensor(a) for a in made)
    return new_tensor(made)


def saved_row_tensor(tp, r, name, source, arguments):
    """A node's `_saved_<name>` for a RowTensor: made from the row, or what
    unpack_hook returns when hooks packed it; PyTorch's error after a
    backward freed the row."""
    if tp.m_flags[r] & FREED:
        raise RuntimeError(FREED_MESSAGE)
    entry = tp.packed.get(r)
    if entry is not None and name in entry.row_tensors:
        packed, unpack_hook = entry.row_tensors[name]
        if source.many:
            return tuple(None if p is None else _unpack_hook_result(unpack_hook, p) for p in packed)
        return _unpack_hook_result(unpack_hook, packed)
    return make_row_tensor(tp, r, source, arguments)


def unpacked(unpack_hook, packed, like):
    """unpack_hook(packed), checked as PyTorch checks it, as a tensor of the
    value it gave in `like`'s place in the graph. In a create_graph VJP, a
    stand-in for like's row: the ops the VJP records on it save its value
    (keep_stand_in_reads) and pass their gradient into like's history."""
    t = placed(_unpinned(_unpack_hook_result(unpack_hook, packed)._value), like)
    tp = state.tape
    if tp.stand_ins is not None and like._rg and tp.grad_enabled and where(like)[0] is tp:
        tp.stand_ins.append(t)
    return t


def keep_stand_in_reads(tp, lo):
    """Give the rows recorded from row lo on (by a create_graph VJP) that
    save the row of one of the stand-ins `unpacked` made meanwhile as an
    input the stand-in's value as that saved value: a _Packed entry that
    unpacks as itself, read by the Python walk (Note [Saved tensor hooks]).
    A row that saved-tensor hooks packed has the stand-in's value already."""
    by_row = {where(t)[1]: new_tensor(t._value) for t in tp.stand_ins}
    for r in range(lo, tp.n):
        saves = row_saves(tp, r)
        if not saves & (SAVES_X | SAVES_Y | SAVES_Z) or r in tp.packed:
            continue
        values = [_NOT_SAVED] * 4
        for source, q in zip(("x", "y", "z"), _saved_inputs(tp, r)):
            if saves & SAVED_TENSORS[source] and q in by_row:
                values[_SLOT[source]] = by_row[q]
        kept = [v for v in values if v is not _NOT_SAVED]
        if kept:
            nbytes = sum(map(_packed_bytes, kept))
            tp.packed[r] = _Packed(values, [_itself] * 4, nbytes)
            tp.held_bytes += nbytes


def _saved_inputs(tp, r):
    """Row r's inputs x, y and z (-1 for none)."""
    return int(tp.m_a0[r]), int(tp.m_a1[r]), int(tp.pool[tp.m_xs[r]]) if tp.m_nx[r] > 0 else -1


def _itself(packed):
    """The unpack_hook of what keep_stand_in_reads keeps: the value as it is."""
    return packed


def _unpack_hook_result(unpack_hook, packed):
    t = unpack_hook(packed)
    if not isinstance(t, Tensor):
        raise TypeError(f"Output of saved tensor unpack_hook expected to be a Tensor but got result of "
                        f"type {type(t).__name__}")
    return t


def unpack_saved(tp, r, k, like):
    """Saved value k (0 x, 1 y, 2 out) of row r as its VJP reads it: `like`
    (the row's own tensor) when the row did not pack it."""
    entry = tp.packed.get(r)
    if entry is None or entry.values[k] is _NOT_SAVED:
        return like
    return unpacked(entry.unpack_hooks[k], entry.values[k], like)


def row_tensor(tp, r):
    """A Tensor naming row r, for a VJP to compute with (its value, its graph)."""
    owner = tp.tensor_at(r)
    if tp.ndim[r] == 0 and tp.dt[r] == 0:
        value = float(tp.sval[r])  # not the owner, a float: `.data` may have replaced it (Tensor._set_storage)
    elif r in tp.keep:
        value = tp.keep[r]
    elif owner is not None:
        value = owner._value
    else:
        raise RuntimeError("Trying to backward through the graph a second time (or directly access "
                           "saved tensors after they have already been freed).")
    t = new_tensor(value, bool(tp.flags[r] & RG))
    t._ep, t._row = tp.epoch_of(r), r
    return t


def _saved_row(tp, r, source):
    """The row whose value row r saved as `source`; -1 for the row's
    constant operand."""
    return (r if source == "out" else int(tp.pool[tp.m_xs[r]]) if source == "z"
            else int((tp.m_a0 if source == "x" else tp.m_a1)[r]))


def _check_saved(tp, r, source):
    """Whether row r saved `source`; raise PyTorch's error when a backward
    freed it or an in-place op changed it since."""
    if not row_saves(tp, r) & SAVED_TENSORS[source]:
        return False
    if tp.m_flags[r] & FREED:
        raise RuntimeError(FREED_MESSAGE)
    i = _saved_row(tp, r, source)
    # one detached in place still reads (only a backward refuses it, as PyTorch's)
    if (i >= 0 and tp.m_flags[i] & DIRTY and r < tp.m_fresh_from[i]
            and type(tp.owners[i]) is not DetachedInPlace):
        from ._engine import raise_modified
        raise_modified(tp, i)
    return True


def saved_tensor(tp, r, source):
    """A node's `_saved_<name>` for a saved tensor (Note [Saved values' names]
    in tape._registry): None when the row did not save it, else as PyTorch's
    SavedVariable unpacks it: a saved input as the same Tensor while that
    Tensor still holds the saved value (a 0-d result holds a float, not its
    Tensor, and comes back as a new one); the result, the constant operand
    and a dead input as a new Tensor of the value in its place in the graph;
    when hooks packed it, a new Tensor of what unpack_hook returns, in that
    place."""
    if not _check_saved(tp, r, source):
        return None
    i = _saved_row(tp, r, source)
    like = new_tensor(float(tp.m_c[r])) if i < 0 else row_tensor(tp, i)
    entry = tp.packed.get(r)
    k = _SLOT[source]
    if entry is not None and entry.values[k] is not _NOT_SAVED:
        return placed(_unpack_hook_result(entry.unpack_hooks[k], entry.values[k])._value, like)
    if source != "out" and i >= 0:
        t = tp.tensor_at(i)
        # a constant's Tensor names no row: its row keeps it (Tape.adopt)
        if type(t) is Tensor and (where(t) == (tp, i) or tp.m_op[i] == CONST):
            return t
    return like


_FREED_HOOKS = ("Calling register_hooks on a saved tensor after it has been freed. Saved intermediate values "
                "of the graph are freed when you call .backward() or autograd.grad(). Specify "
                "retain_graph=True if you need to backward through the graph a second time or if you need to "
                "access saved variables after calling backward.")


class SavedTensor:
    """A node's `_raw_saved_<name>`: one saved tensor of its row, as
    torch._C._autograd.SavedTensor; `register_hooks(pack_hook, unpack_hook)`
    packs it now and unpacks it wherever it is read (Note [Saved tensor
    hooks]). Of a RowTensor, `arguments` are those its op kept."""
    __slots__ = ("_node", "_name", "_source", "_arguments")

    def __init__(self, node, name, source, arguments):
        self._node, self._name, self._source, self._arguments = node, name, source, arguments

    def register_hooks(self, *hooks):
        # two callables, else pybind11's error, as PyTorch's binding raises it
        if len(hooks) != 2 or not all(callable(h) for h in hooks):
            raise TypeError("register_hooks(): incompatible function arguments. The following argument types are "
                            "supported:\n    1. (self: tape.SavedTensor, arg0: Callable, arg1: Callable) -> None\n\n"
                            f"Invoked with: {', '.join(map(repr, (self, *hooks)))}")
        pack_hook, unpack_hook = hooks
        tp, r = self._node._ep.tape, self._node.row()
        source = self._source
        of_row = isinstance(source, RowTensor)
        if not of_row and not row_saves(tp, r) & SAVED_TENSORS[source]:
            raise RuntimeError("Calling register_hooks on a saved tensor with value None is forbidden")
        if tp.m_flags[r] & FREED:
            raise RuntimeError(_FREED_HOOKS)
        entry = tp.packed.get(r)
        if entry is not None and (self._name in entry.row_tensors if of_row
                                  else entry.values[_SLOT[source]] is not _NOT_SAVED):
            raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have already been set. "
                               "Hint: only one pair of hooks is allowed at a time.")
        # the input itself, as pack_hook gets it, or a new Tensor of the result (or of what the row keeps)
        packed = pack(pack_hook, make_row_tensor(tp, r, source, self._arguments) if of_row
                      else saved_tensor(tp, r, source), True)
        if entry is None:
            entry = tp.packed[r] = _Packed([_NOT_SAVED] * 4, [None] * 4, 0)
        if of_row:
            entry.row_tensors[self._name] = (packed, unpack_hook)
        else:
            entry.values[_SLOT[source]], entry.unpack_hooks[_SLOT[source]] = packed, unpack_hook
        nbytes = _packed_bytes(packed)
        entry.nbytes += nbytes
        tp.held_bytes += nbytes


def drop_packed(tp, rows):
    """Forget what `rows` packed: a backward freed them."""
    packed = tp.packed
    for r in rows:
        entry = packed.pop(r, None)
        if entry is not None:
            tp.held_bytes -= entry.nbytes
