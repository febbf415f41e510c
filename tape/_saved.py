"""Saved-tensor hooks: the context manager of tape.autograd.graph, and how a
recorded row packs the values its VJP will read (Note [Saved tensor hooks]).
"""
import contextlib

from ._registry import REGISTRY, SAVES_OUT, SAVES_X, SAVES_Y, lookup
from ._tape import RG, state
from ._tensor import Tensor, _unpinned, new_tensor

__all__ = ["saved_tensors_hooks", "disable_saved_tensors_hooks", "pack_row", "pack", "unpacked", "unpack_saved", "drop_packed"]

# Note [Saved tensor hooks]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# `tp.saved_hooks` is the thread's stack of (pack_hook, unpack_hook) pairs,
# kept on its tape as grad mode is. While it is not empty, each recording
# op (`record`, `_scalar_row` in tape._record) calls `pack_row`, one
# attribute test when it is empty: for each value the row saves (its op's
# saves_for, for the inputs that require grad) the innermost pack_hook runs,
# with grad mode off as in PyTorch, on a Tensor of that value in that row's
# place in the graph, and `tp.packed[r]` keeps what it returns with the
# unpack_hook of the pair.
#
# The native sweep cannot call Python, so `_reaches_a_python_row` counts
# the packed rows as Python rows: their graphs go through the Python walk,
# whose _Ctx reads a packed value through unpack_hook once per walk of the
# row, as a tensor of the unpacked value in the saved row's place (`unpacked`):
# under create_graph the gradient flows into the saved tensor's history, as
# PyTorch's SavedVariable::unpack grafts it.
#
# The row's own value stays on the tape, as every row keeps what it saved:
# hooks change what the VJP reads, not the memory the tape holds. Packed
# Tensors count in tp.held_bytes, so a loop that packs copies compacts by
# their size too. An entry goes when a backward without retain_graph walks
# (and frees) its row, and when compaction drops the row.

_NOT_SAVED = object()

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
    """What saved_tensors_hooks made of one row's saved values: x, y and out
    (pack_hook's results, or _NOT_SAVED), and the unpack_hook for them."""
    __slots__ = ("values", "unpack_hook", "nbytes")

    def __init__(self, values, unpack_hook, nbytes):
        self.values, self.unpack_hook, self.nbytes = values, unpack_hook, nbytes


def pack(pack_hook, t):
    """pack_hook(t) for a saved tensor t, run as PyTorch runs it: on a tensor
    of t's value in t's place in the graph, with grad mode off; refused when
    it modifies that tensor in place."""
    given = new_tensor(_unpinned(t._value), t._rg)
    given._ep, given._row = t._ep, t._row
    tp = state.tape
    enabled = tp.grad_enabled
    tp.grad_enabled = False
    try:
        packed = pack_hook(given)
    finally:
        tp.grad_enabled = enabled
    if given._version:
        raise RuntimeError(_INPLACE)
    return packed


def pack_row(tp, code, r, x, y, out):
    """Pack the values row r (op `code`, inputs x and y: Tensors or None, result
    `out`) saves, with the innermost hooks (Note [Saved tensor hooks])."""
    pack_hook, unpack_hook = tp.saved_hooks[-1]
    saves_for = REGISTRY[code].saves_for
    flags = tp.m_flags
    a, b = tp.m_a0[r], tp.m_a1[r]
    saves = ((saves_for[0] if a >= 0 and flags[a] & RG else 0)
             | (saves_for[1] if b >= 0 and flags[b] & RG else 0))
    if not saves:
        return
    values = [_NOT_SAVED] * 3
    nbytes = 0
    for k, (t, bit) in enumerate(((x, SAVES_X), (y, SAVES_Y), (out, SAVES_OUT))):
        if saves & bit and t is not None:
            packed = values[k] = pack(pack_hook, t)
            if type(packed) is Tensor and type(packed._value) is not float:
                nbytes += packed._value.nbytes
    tp.packed[r] = _Packed(values, unpack_hook, nbytes)
    tp.held_bytes += nbytes


def unpacked(unpack_hook, packed, like):
    """unpack_hook(packed), checked as PyTorch checks it, as a tensor of the
    value it gave in `like`'s place in the graph: `like`'s row when grad mode
    is off (the VJP only computes with it), else a hidden clone row over it,
    so that ops a create_graph VJP records on it save the unpacked value and
    pass their gradient into `like`'s history."""
    t = unpack_hook(packed)
    if not isinstance(t, Tensor):
        raise TypeError(f"Output of saved tensor unpack_hook expected to be a Tensor but got result of "
                        f"type {type(t).__name__}")
    value = _unpinned(t._value)
    if like._rg and state.tape.grad_enabled:
        from ._record import record
        return record(lookup("clone"), value, (like,), hidden=True)
    out = new_tensor(value, like._rg)
    out._ep, out._row = like._ep, like._row
    return out


def unpack_saved(tp, r, k, like):
    """Saved value k (0 x, 1 y, 2 out) of row r as its VJP reads it: `like`
    (the row's own tensor) when the row did not pack it."""
    entry = tp.packed.get(r)
    if entry is None or entry.values[k] is _NOT_SAVED:
        return like
    return unpacked(entry.unpack_hook, entry.values[k], like)


def drop_packed(tp, rows):
    """Forget what `rows` packed: a backward freed them."""
    packed = tp.packed
    for r in rows:
        entry = packed.pop(r, None)
        if entry is not None:
            tp.held_bytes -= entry.nbytes
