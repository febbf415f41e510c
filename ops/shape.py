"""Shape ops: expand (also the engine's implicit broadcast), the reshape
family, permutations, and indexing. Each registers a differentiable VJP and
a native kernel; the native kernels work on flat C-order buffers.
"""
import functools
import operator
import re
import warnings

import numpy as np

from ops._declare import declare, exports
from tape._batched import (DYNAMIC_SHAPE, BatchedTensor, along, batched, batched_result, composite, dim_index,
                           levels_of, with_levels)

from tape._broadcast import reduce_broadcast
from tape._dtypes import promoted
from tape._node import int_list, keep_arguments, keep_arguments_of
from tape._record import op_result, record, record_many, sum_to
from tape._registry import SAVES_ROW, RowTensor, defop, lookup, native_helper
from tape._tape import state
from tape._tensor import Tensor, _address, _norm_dim, _shape_dim, new_tensor, warn_once, wrap_value

def _expand_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    reduce_broadcast(G, GA, osh, xsh, 1.0)


def _flat_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    for i in range(G.size):
        GA[i] += G[i]


def _permute_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    nd = osh.size
    xstride = np.ones(nd, np.int64)
    for k in range(nd - 2, -1, -1):
        xstride[k] = xstride[k + 1] * xsh[k + 1]
    for i in range(G.size):
        rem = i
        j = 0
        for k in range(nd - 1, -1, -1):
            d = osh[k]
            j += (rem % d) * xstride[ints[k]]
            rem //= d
        GA[j] += G[i]


@native_helper
def strided_lines(shape, ints):
    """(starts, length, stride) of the lines along the last dim of `shape`,
    in C order, in the strided descriptor `ints` (offset, then one stride
    per dim of `shape`); a 0-d shape is one line of one. The callers loop
    over each line themselves, a loop that vectorizes: stepping every element
    through an odometer, its counters in memory, was 16% of a Hessian-vector
    product sliced by [::2]."""
    nd = shape.size
    lines = 1
    for k in range(nd - 1):
        lines *= shape[k]
    if nd > 0 and shape[nd - 1] == 0:
        lines = 0
    starts = np.empty(lines, np.int64)
    idx = np.zeros(nd, np.int64)
    base = ints[0]
    for i in range(lines):
        starts[i] = base
        d = nd - 2
        while d >= 0:  # an odometer over the other dims, last fastest
            idx[d] += 1
            base += ints[1 + d]
            if idx[d] < shape[d]:
                break
            base -= idx[d] * ints[1 + d]
            idx[d] = 0
            d -= 1
    return (starts, shape[nd - 1], ints[nd]) if nd > 0 else (starts, 1, 0)


@native_helper
def strided_offsets(shape, ints):
    """The flat offsets, in C order over `shape`, that the strided descriptor
    `ints` selects."""
    starts, length, stride = strided_lines(shape, ints)
    offs = np.empty(starts.size * length, np.int64)
    for i in range(starts.size):
        for j in range(length):
            offs[i * length + j] = starts[i] + j * stride
    return offs


def _strided_gather_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    starts, length, stride = strided_lines(osh, ints)
    for i in range(starts.size):
        for j in range(length):
            GA[starts[i] + j * stride] += G[i * length + j]


def _strided_scatter_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    starts, length, stride = strided_lines(xsh, ints)
    for i in range(starts.size):
        for j in range(length):
            GA[i * length + j] += G[starts[i] + j * stride]


# An op whose result requires grad and sends its input no gradient, as
# PyTorch's outputs whose derivative is not defined (slogdet's sign, the
# 0-norm, fill_): the result stays in the graph, the input gets None
def _no_gradient_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    return


def _no_gradient(ctx, g):
    return (None,)


def _gather_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    for i in range(G.size):
        GA[ints[i]] += G[i]


def _scatter_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    for i in range(GA.size):
        GA[i] += G[ints[i]]


def _reshape_vjp(ctx, g):
    return (reshape(g, ctx.x_shape),)


_SIZES = (("self_sym_sizes", "x_shape"),)
_EXPAND = defop("expand", "ExpandBackward0", 1, vjp=lambda ctx, g: (sum_to(g, ctx.x_shape),),
                native=_expand_native, saved=_SIZES)
_VIEW = defop("view", "ViewBackward0", 1, vjp=_reshape_vjp, native=_flat_native, saved=_SIZES)
# reshape's other nodes: a view of a tensor not in C order, and the reshape of
# the contiguous copy (CloneBackward0) of a tensor no view can reshape
_RESHAPE_ALIAS = defop("reshape_alias", "ReshapeAliasBackward0", 1, vjp=_reshape_vjp, native=_flat_native,
                       saved=_SIZES)
_UNSAFE_VIEW = defop("unsafe_view", "UnsafeViewBackward0", 1, vjp=_reshape_vjp, native=_flat_native, saved=_SIZES)
_UNSQUEEZE = defop("unsqueeze", "UnsqueezeBackward0", 1, vjp=_reshape_vjp, native=_flat_native, saved=(("dim", "arg"),))
_SQUEEZE_ALL = defop("squeeze", "SqueezeBackward0", 1, vjp=_reshape_vjp, native=_flat_native, saved=_SIZES)
_SQUEEZE_DIM = defop("squeeze_dim", "SqueezeBackward1", 1, vjp=_reshape_vjp, native=_flat_native,
                     saved=(("dim", "arg"),) + _SIZES)
# squeeze_(dim) of a tensor an op made internally (matmul of a vector by a matrix)
_SQUEEZE_DIM_ = defop("squeeze_dim_", "SqueezeBackward4", 1, vjp=_reshape_vjp, native=_flat_native,
                      saved=(("dim", "arg"),) + _SIZES)


def _permute_vjp(ctx, g):
    return (permute(g, tuple(np.argsort(ctx.ints).tolist())),)


_PERMUTE = defop("permute", "PermuteBackward0", 1, vjp=_permute_vjp, native=_permute_native, saved=(("dims", "arg"),))
_TRANSPOSE = defop("transpose", "TransposeBackward0", 1, vjp=_permute_vjp, native=_permute_native,
                   saved=(("dim0", "arg"), ("dim1", "arg")))
_T = defop("t", "TBackward0", 1, vjp=_permute_vjp, native=_permute_native)


# Basic indexing (ints, slices, None, ...) selects a strided view, recorded as
# a descriptor of O(ndim) ints: (offset, stride per result dim) into the
# input's C-order flat index. Advanced indexing records a flat index map.
def _strided_vjp(ctx, g):
    return (_strided_scatter(g, ctx.ints, ctx.x_shape),)


def _strided_scatter_vjp(ctx, g):
    return (_strided_gather(_SLICE, g, ctx.ints, ctx.x_shape),)


def _index_vjp(ctx, g):
    return (_scatter(g, ctx.ints, ctx.x_shape, unique=False),)


def _scatter_vjp(ctx, g):
    return (_gather(_INDEX, g, ctx.ints, ctx.x_shape),)


# a key of several parts is one row here, a chain of PyTorch's nodes there:
# the row shows the last of them (_indexing_arguments)
_SELECT = defop("select", "SelectBackward0", 1, vjp=_strided_vjp, native=_strided_gather_native,
                saved=(("dim", "arg"), ("index", "arg"), ("self_sym_sizes", "arg")))
_SLICE = defop("slice", "SliceBackward0", 1, vjp=_strided_vjp, native=_strided_gather_native,
               saved=(("dim", "arg"), ("end", "arg"), ("self_sym_sizes", "arg"), ("start", "arg"), ("step", "arg")))
_ALIAS = defop("alias", "AliasBackward0", 1, vjp=_strided_vjp, native=_strided_gather_native)
_INDEX_UNSQUEEZE = defop("index_unsqueeze", "UnsqueezeBackward0", 1, vjp=_strided_vjp,
                         native=_strided_gather_native, saved=(("dim", "arg"),))
_STRIDED_SCATTER = defop("strided_scatter", "IndexPutBackward0", 1, vjp=_strided_scatter_vjp,
                         native=_strided_scatter_native)
_INDEX = defop("index", "IndexBackward0", 1, saves=SAVES_ROW, vjp=_index_vjp, native=_gather_native,
               saved=(("indices", RowTensor(lambda row, arguments: arguments["indices"], many=True)),
                      ("self_sym_sizes", "arg")))
_SCATTER = defop("index_put", "IndexPutBackward0", 1, vjp=_scatter_vjp, native=_scatter_native)
# the grad_fn PyTorch gives a view after an in-place change to its storage:
# the view's elements of its base, a strided descriptor or, where the base's
# memory is not in C order, flat positions (view_region)
_AS_STRIDED = defop("as_strided", "AsStridedBackward0", 1, vjp=_strided_vjp, native=_strided_gather_native,
                    saved=(("size", lambda row: tuple(row.shape)), ("stride", lambda row: tuple(int(k) for k in row.ints[1:])),
                           ("storage_offset", lambda row: int(row.ints[0]))))
_AS_STRIDED_AT = defop("as_strided_at", "AsStridedBackward0", 1, vjp=_index_vjp, native=_gather_native,
                       saved=(("size", lambda row: tuple(row.shape)),))


def as_strided_op(region):
    """The op that records a view's elements of its base at `region` (view_region)."""
    return _AS_STRIDED if type(region) is tuple else _AS_STRIDED_AT


def view_region(base, view):
    """Where the elements of array `view` lie among those of array `base`,
    whose memory it views, in base's C order (the order the tape's rows
    index): a strided descriptor (offset, then a stride per dim of view)
    when base is C-contiguous, else an array of flat positions."""
    item = base.itemsize
    start, at = _address(base), _address(view)
    if base.flags.c_contiguous:
        return ((at - start) // item if view.size else 0,) + tuple(s // item for s in view.strides)
    # base's C-order positions written into memory laid out as base's, read back through view's layout
    low, high = np.lib.array_utils.byte_bounds(base)
    positions = np.zeros(max((high - low) // item, 1), np.int64)
    laid_out = [s * positions.itemsize // item for s in base.strides]
    np.lib.stride_tricks.as_strided(positions[(start - low) // item:], base.shape, laid_out)[...] = \
        np.arange(base.size).reshape(base.shape)
    read = [s * positions.itemsize // item for s in view.strides]
    return np.array(np.lib.stride_tricks.as_strided(positions[(at - low) // item:], view.shape, read)).reshape(-1)


def _view_result(opdef, x, value, ints=None):
    """Record a view op: `value`, made from x's memory (`x._memory()`), is a
    view of it, and the result shares x's storage and version counter,
    unless NumPy had to copy (reshape of a transpose), as in PyTorch."""
    shares = _shares(value, x._value)
    if not shares:
        value = wrap_value(value)
    if x._rg and state.tape.grad_enabled:
        out = record(opdef, value, (x,), ints=ints)
    else:
        out = new_tensor(value)
    if shares:
        x._share_storage(out)
        if x._inference:  # a view of an inference tensor is one, as in PyTorch
            out._inference = True
        if not state.tape.grad_enabled:
            out._made_in_no_grad = True
        _inherit_refusal(out, x)
    return out


def _shares(value, memory):
    """Whether array `value` views array `memory` (an empty one has no
    memory to share: its NumPy base tells)."""
    if type(value) is not np.ndarray:
        return False
    if value.size:
        return np.may_share_memory(value, memory)
    return _owner(value) is _owner(memory)


def _owner(a):
    """The object that owns array a's memory (as_strided's views name
    theirs through a holder, which has the array as its base too)."""
    while getattr(a, "base", None) is not None:
        a = a.base
    return a


def as_new_tensor(t):
    """t, the result of an op that PyTorch returns as a new tensor but that
    is a view of a tensor the op made internally here (matmul's squeeze of
    its matrix product): it is no view. Its version counter stays the
    internal tensor's, so an in-place change to t still makes the rows that
    saved that tensor dirty."""
    if t._view_of is not None:
        t._view_of = None
        t.__dict__.pop("_made_in_no_grad", None)
    return t


def squeeze_made(x, dim):
    """x.squeeze_(dim) for a tensor x an op made internally and no one else
    holds, as PyTorch's matmul squeezes its product of a vector by a matrix:
    a SqueezeBackward4 node, and the result at version 1, no view."""
    shape = x.shape[:dim] + x.shape[dim + 1:] if x.shape[dim] == 1 else x.shape
    out = keep_arguments(op_result(_SQUEEZE_DIM_, x._value.reshape(shape), (x,)), dim=dim)
    out._version_counter().n = 1
    return out


def unsafe_view(x, shape):
    """x, C-contiguous, as a new tensor of `shape`: PyTorch's _unsafe_view
    (UnsafeViewBackward0), which reshapes the result of an op that made it
    internally (batched matmul's bmm) and is no view of it."""
    return op_result(_UNSAFE_VIEW, x._value.reshape(shape), (x,))


def _inherit_refusal(view, x):
    """A view of a view that PyTorch refuses to modify in place is refused
    too: made while recording, named by its own op (`Output 0 of Slice`); of
    a tensor that does not require grad, as a view made without grad."""
    if x._refused_view is not None and (view._rg or not x._rg):
        name = re.sub(r"Backward\d*$", "", view.grad_fn.name()) if view._rg else None
        view._refused_view = (name, 0, x._refused_view[2])


def _shape_arg(shape):
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        shape = shape[0]
    return tuple(int(s) for s in shape)


def _infer_shape(shape, numel):
    shape = list(shape)
    for i, s in enumerate(shape):
        if s < -1:
            raise RuntimeError(f"invalid shape dimension {s} at index {i} of shape {shape}")
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = int(np.prod([s for s in shape if s != -1]))
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape[shape.index(-1)] = numel // known
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def _reshape_rule(op, args):
    """reshape and view of each sample: its shape after the batch dims."""
    x = args.arguments["x"]
    shape = _infer_shape(_shape_arg(args.arguments["shape"]), x.numel())
    args.arguments["x"], args.arguments["shape"] = x.phys, (x._batch_shape() + shape,)
    return batched_result(op(*args.args), x.levels)


@declare(signature="input, shape", batch=_reshape_rule)
def reshape(x, *shape):
    """x with a new shape of the same number of elements (-1 is inferred).

    >>> import tape
    >>> tape.arange(6.).reshape(2, 3).shape
    (2, 3)
    """
    shape = _infer_shape(_shape_arg(shape), x.numel())
    memory = x._memory()
    value = memory.view() if shape == x.shape else memory.reshape(shape)
    if _shares(value, memory):
        return _view_result(_VIEW if memory.flags.c_contiguous else _RESHAPE_ALIAS, x, value)
    # as PyTorch: a copy in C order, reshaped (its result is no view)
    return op_result(_UNSAFE_VIEW, value, (op_result(lookup("clone"), np.ascontiguousarray(memory), (x,)),))


@declare(batch=_reshape_rule)
def view(x, *shape):
    """Like `reshape`, but only where no copy is needed (as in PyTorch)."""
    shape = _infer_shape(_shape_arg(shape), x.numel())
    a = x._memory().view()
    try:
        a.shape = shape
    except AttributeError:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least "
                           "one dimension spans across two contiguous subspaces). Use .reshape(...) "
                           "instead.") from None
    return _view_result(_VIEW, x, a)


def _flatten_rule(op, args):
    """flatten of each sample: its dims shifted past the batch dims; a 0-d
    sample is one element along a dim of its own, which the result keeps."""
    a = args.arguments
    x, nb = a["x"], len(a["x"].levels)
    if x.ndim:
        a["x"], a["start_dim"], a["end_dim"] = x.phys, x._pdim(a["start_dim"]), x._pdim(a["end_dim"])
    else:
        dim_index(a["start_dim"], 0)
        dim_index(a["end_dim"], 0)
        a["x"], a["start_dim"], a["end_dim"] = x.phys.unsqueeze(-1), nb, nb
    return batched_result(op(*args.args), x.levels)


@declare(signature="input, start_dim=0, end_dim=-1", batch=_flatten_rule)
def flatten(x, start_dim=0, end_dim=-1):
    s, e = _norm_dim(start_dim, x.ndim), _norm_dim(end_dim, x.ndim)
    if x.ndim == 0:
        return reshape(x, 1)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = x.shape[:s] + (int(np.prod(x.shape[s:e + 1])),) + x.shape[e + 1:]
    return x if shape == x.shape else reshape(x, shape)


def _squeeze_rule(op, args):
    """squeeze of each sample: its size-1 dims among `dim` (all of them for
    None), never a batch dim."""
    x, dim = args.arguments["x"], args.arguments["dim"]
    dims = range(x.ndim) if dim is None else {dim_index(d, x.ndim) for d in _dim_list(dim)}
    args.arguments["x"] = x.phys
    args.arguments["dim"] = tuple(d + len(x.levels) for d in dims if d < x.ndim and x.shape[d] == 1)
    return batched_result(op(*args.args), x.levels)


@declare(signature="input, dim=None", batch=_squeeze_rule)
def squeeze(x, dim=None):
    if dim is None:
        return _view_result(_SQUEEZE_ALL, x, x._memory().reshape([d for d in x.shape if d != 1]))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    dims = {_norm_dim(d, x.ndim) for d in dims}
    shape = [d for k, d in enumerate(x.shape) if not (k in dims and d == 1)]
    return keep_arguments(_view_result(_SQUEEZE_DIM, x, x._memory().reshape(shape)),
                          dim=int_list(dim) if isinstance(dim, (tuple, list)) else dim)


@declare(signature="input, dim", batch=along("dim", new=1))
def unsqueeze(x, dim):
    d = _norm_dim(dim, x.ndim + 1)
    return keep_arguments(_view_result(_UNSQUEEZE, x, np.expand_dims(x._memory(), d)), dim=dim)


def _permute_rule(op, args):
    """permute of each sample: the batch dims first, in place."""
    x = args.arguments["x"]
    dims = _shape_arg(args.arguments["dims"])
    if len(dims) != x.ndim:
        raise _permute_length_error(x.ndim, dims)
    nb = len(x.levels)
    args.arguments["x"], args.arguments["dims"] = x.phys, (tuple(range(nb)) + tuple(x._pdim(d) for d in dims),)
    return batched_result(op(*args.args), x.levels)


def _permute_length_error(ndim, dims):
    return RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
                        f"length of the desired ordering of dimensions i.e. input.dim() = {ndim} is not equal to "
                        f"len(dims) = {len(dims)}")


@declare(signature="input, dims", batch=_permute_rule)
def permute(x, *dims):
    """x with its dimensions reordered (a view)."""
    if not dims:
        raise TypeError('permute() missing 1 required positional arguments: "dims"')
    given = _shape_arg(dims)
    if len(given) != x.ndim:
        raise _permute_length_error(x.ndim, given)
    dims = tuple(_norm_dim(d, x.ndim) for d in given)
    if len(set(dims)) != len(dims):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return keep_arguments(_view_result(_PERMUTE, x, x._memory().transpose(dims), ints=dims), dims=tuple(given))


def _swap(x, opdef, d0, d1):
    perm = list(range(x.ndim))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return _view_result(opdef, x, x._memory().transpose(perm), ints=perm)


@declare(signature="input, dim0, dim1", batch=along("dim0", "dim1"))
def transpose(x, dim0, dim1):
    """x with dims dim0 and dim1 swapped (a view)."""
    d0, d1 = _norm_dim(dim0, x.ndim), _norm_dim(dim1, x.ndim)
    out = _view_result(_TRANSPOSE, x, x._memory().view(), ints=()) if x.ndim == 0 else _swap(x, _TRANSPOSE, d0, d1)
    return keep_arguments(out, dim0=dim0, dim1=dim1)


def _at_most_2d(x):
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")


def _t_rule(op, args):
    """t of each sample: a transpose of its first and last dims (itself when it has fewer than 2)."""
    x = args.arguments["x"]
    _at_most_2d(x)
    return x.transpose(0, -1)


@declare(signature="input", batch=_t_rule)
def t(x):
    """The transpose of a tensor of at most 2 dimensions."""
    _at_most_2d(x)
    if x.ndim < 2:
        return _view_result(_T, x, x._memory().view(), ints=tuple(range(x.ndim)))
    return _swap(x, _T, 0, 1)


# PyTorch's deprecation warnings for x.T off matrices (0-D, and the other
# dims), each given once per process as PyTorch gives them
_T_DEPRECATED = (
    "Tensor.T is deprecated on 0-D tensors. This function is the identity in these cases.",
    "The use of `x.T` on tensors of dimension other than 2 to reverse their shape is deprecated and "
    "it will throw an error in a future release. Consider `x.mT` to transpose batches of matrices "
    "or `x.permute(*torch.arange(x.ndim - 1, -1, -1))` to reverse the dimensions of a tensor.")


# through Tensor methods, so that a batched tensor's properties batch
def _T_property(x):
    if x.ndim != 2:
        warn_once(_T_DEPRECATED[int(x.ndim != 0)], stacklevel=2)
    return x.permute(tuple(range(x.ndim - 1, -1, -1)))


def _mT_property(x):
    if x.ndim == 0:  # PyTorch 2.13's identity, deprecated
        warn_once("Tensor.mT is deprecated on 0-D tensors. This function is the identity in these cases.",
                  stacklevel=2)
        return x.permute(())
    if x.ndim < 2:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. Got "
                           f"{x.ndim}-D tensor.")
    return x.transpose(-2, -1)


def _enough_sizes(x, sizes):
    if len(sizes) < x.ndim:
        raise RuntimeError(f"expand({x.dtype}{list(x.shape)}, size={list(sizes)}): the number of sizes "
                           f"provided ({len(sizes)}) must be greater or equal to the number of "
                           f"dimensions in the tensor ({x.ndim})")


def _expand_rule(op, args):
    """expand and broadcast_to of each sample: its new leading dims placed
    after the batch dims, which keep their sizes."""
    x, name = args.arguments["x"], list(args.arguments)[1]  # expand's sizes, broadcast_to's shape
    sizes = _shape_arg(args.arguments[name])
    _enough_sizes(x, sizes)
    padded = x.phys.reshape(x._batch_shape() + (1,) * (len(sizes) - x.ndim) + x.shape)
    args.arguments["x"], args.arguments[name] = padded, (x._batch_shape() + sizes,)
    return batched_result(op(*args.args), x.levels)


@declare(batch=_expand_rule)
def expand(x, *sizes):
    """x broadcast to `sizes` (-1 keeps a dim) without copying."""
    sizes = _shape_arg(sizes)
    _enough_sizes(x, sizes)
    lead = len(sizes) - x.ndim
    shape = list(sizes)
    for k in reversed(range(len(sizes))):  # PyTorch names the last mismatch
        s, have = sizes[k], x.shape[k - lead] if k >= lead else None
        if s == -1:
            if have is None:
                raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a leading, "
                                   f"non-existing dimension {k}")
            s = have
        elif have is not None and have != 1 and have != s:
            raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing size "
                               f"({have}) at non-singleton dimension {k}.  Target sizes: {list(sizes)}.  "
                               f"Tensor sizes: {list(x.shape)}")
        shape[k] = s
    shape = tuple(shape)
    if shape == x.shape and not x._rg:
        return x
    # writable, as PyTorch's expanded storage is: a write through a part
    # without repeated elements reaches x (_check_overlap refuses the rest)
    value = x._memory()
    strides = np.broadcast_to(value, shape).strides
    return _view_result(_EXPAND, x, np.lib.stride_tricks.as_strided(value, shape, strides, writeable=True),
                        ints=shape)


@declare(signature="input, size", batch=_expand_rule)
def broadcast_to(x, *shape):
    """x broadcast to `shape` (a tuple, or the sizes as arguments), a view."""
    return expand(x, *shape)


def _index_key(key):
    if isinstance(key, tuple):
        return tuple(_index_key(k) for k in key)
    if isinstance(key, slice):
        # a tensor bound is read once, as an int (tape.compile guards the read)
        key = slice(*(k if k is None or type(k) is int else operator.index(k) for k in (key.start, key.stop,
                                                                                        key.step)))
        if key.step is not None and key.step <= 0:
            raise ValueError("step must be greater than zero")
    if isinstance(key, (float, np.floating)):
        raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte "
                         f"Variables are valid indices (got {type(key).__name__})")
    if isinstance(key, Tensor) and key.dtype.kind == "f":
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    if isinstance(key, Tensor) and key.dtype == np.uint8:
        # a mask, as in PyTorch (NumPy would take the bytes for positions)
        warnings.warn("indexing with dtype tape.uint8 is now deprecated, please use a dtype tape.bool "
                      "instead.", UserWarning, stacklevel=4)
        return key._array().astype(np.bool_)
    if isinstance(key, Tensor):
        # a 0-d integer tensor indexes as its int does (a view in PyTorch)
        return operator.index(key) if key.ndim == 0 and key.dtype.kind in "iu" else key._array()
    if isinstance(key, list):
        if not key:  # no positions, not NumPy's float array
            return np.zeros(0, np.int64)
        return np.asarray([k._array() if isinstance(k, Tensor) else k for k in key])
    return key


def _is_int(k):
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


def _select_first(key, shape):
    """`key` as NumPy must read it to index as PyTorch does where ints and
    index arrays mix. PyTorch takes an int's dim away first (a select), then
    indexes with the arrays, whose dims stand where the arrays do when they
    are adjacent: x[0, :, [1, 2]] is x[0][:, [1, 2]]. NumPy counts the int
    among the arrays and, the slice splitting them, puts their dims first,
    which transposes the result. Where the two differ, every dim is indexed
    by an array here (a slice by its range, shaped along its own result dim),
    which both read alike."""
    if not isinstance(key, tuple) or not any(map(_is_int, key)):
        return key
    parts = []
    for k in key:  # a mask indexes as the positions of its True elements
        if isinstance(k, np.ndarray) and k.dtype == np.bool_ and k.ndim:
            parts.extend(k.nonzero())
        else:
            parts.append(k)
    if (not any(isinstance(k, np.ndarray) and k.ndim for k in parts)
            or any(isinstance(k, (bool, np.bool_)) or isinstance(k, np.ndarray) and not k.ndim for k in parts)):
        return key
    used = len([k for k in parts if k is not None and k is not Ellipsis])
    if used > len(shape):
        return key  # NumPy raises PyTorch's error
    ellipsis = [i for i, k in enumerate(parts) if k is Ellipsis]
    if ellipsis:
        at = ellipsis[0]
        parts[at:at + 1] = [slice(None)] * (len(shape) - used)
    advanced = [i for i, k in enumerate(parts) if isinstance(k, np.ndarray) or _is_int(k)]
    arrays = [i for i in advanced if isinstance(parts[i], np.ndarray)]
    group = [i for i in range(arrays[0], arrays[-1] + 1) if i not in advanced]
    if advanced == list(range(advanced[0], advanced[-1] + 1)) or group:
        return key  # NumPy's order is PyTorch's: one adjacent group, or arrays apart
    batch = np.broadcast_shapes(*(parts[i].shape for i in arrays))
    # each part's place among the result dims in PyTorch's order: a slice or
    # None has one, the arrays share theirs, at the first array's place
    places, dims = [], 0
    for i, k in enumerate(parts):
        places.append(dims)
        if i == arrays[0]:
            dims += len(batch)
        elif not (isinstance(k, np.ndarray) or _is_int(k)):
            dims += 1
    lead = places[arrays[0]] + len(batch)
    rewritten, d = [], 0
    for k, place in zip(parts, places):
        if k is None:
            continue  # its result dim is the 1 that every index array has there
        if isinstance(k, np.ndarray):
            k = k.reshape((1,) * (lead - k.ndim) + k.shape + (1,) * (dims - lead))
        elif isinstance(k, slice):
            k = np.arange(*k.indices(shape[d])).reshape((1,) * place + (-1,) + (1,) * (dims - place - 1))
        rewritten.append(k)
        d += 1
    return tuple(rewritten)


_INT64_MAX = (1 << 63) - 1


def _indexing_arguments(shape, key):
    """The arguments of the last of PyTorch's view ops for basic index `key`
    of a tensor of `shape` (applied left to right, a full slice skipped):
    select's dim and index, slice's dim, start, end and step (None as 0,
    INT64_MAX and 1), unsqueeze's dim, and the sizes of the tensor it viewed."""
    parts = key if isinstance(key, tuple) else (key,)
    # an Ellipsis spans the dims no int or slice names
    spanned = len(shape) - len([k for k in parts if k is not None and k is not Ellipsis])
    shape, d, last = list(shape), 0, {}
    for k in parts:
        if k is Ellipsis:
            d += spanned
        elif k is None:
            last, shape = {"dim": d}, shape[:d] + [1] + shape[d:]
            d += 1
        elif isinstance(k, slice):
            if k != slice(None):
                last = {"dim": d, "start": 0 if k.start is None else int(k.start),
                        "end": _INT64_MAX if k.stop is None else int(k.stop), "step": 1 if k.step is None else int(k.step),
                        "self_sym_sizes": tuple(shape)}
                shape[d] = len(range(*k.indices(shape[d])))
            d += 1
        else:
            last = {"dim": d, "index": int(k), "self_sym_sizes": tuple(shape)}
            del shape[d]
    return last


def advanced_indexing_arguments(shape, key):
    """The indices and sizes PyTorch's IndexBackward0 and IndexPutBackward0
    save for advanced index `key` (normalized by _index_key) of a tensor of
    `shape`: PyTorch applies its ints, slices and Nones first, as views (a
    bool as a None indexed by [0] or []), then indexes their result by the
    arrays, one entry each (None for a dim no array indexes, trailing ones
    dropped; a mask one entry for all its dims)."""
    parts = key if isinstance(key, tuple) else (key,)

    def spans(k):
        if k is None or k is Ellipsis or isinstance(k, (bool, np.bool_)):
            return 0
        return k.ndim if isinstance(k, np.ndarray) and k.dtype == np.bool_ else 1
    spanned = len(shape) - sum(map(spans, parts))
    view, entries, d = list(shape), [], 0
    for k in parts:
        if k is Ellipsis:
            entries += [None] * spanned
            d += spanned
        elif k is None or isinstance(k, (bool, np.bool_)):
            view.insert(d, 1)
            entries.append(None if k is None else np.zeros(1 if k else 0, np.int64))
            d += 1
        elif isinstance(k, slice):
            view[d] = len(range(*k.indices(view[d])))
            entries.append(None)
            d += 1
        elif isinstance(k, np.ndarray):
            entries.append(k)
            d += spans(k)
        else:
            del view[d]
    while entries and entries[-1] is None:
        entries.pop()
    return {"indices": tuple(entries), "self_sym_sizes": tuple(view)}


def _getitem_op(key):
    parts = key if isinstance(key, tuple) else (key,)
    if any(isinstance(k, (np.ndarray, list, bool, np.bool_)) for k in parts):
        return _INDEX
    for k in reversed(parts):
        if isinstance(k, (int, np.integer)):
            return _SELECT
        if isinstance(k, slice) and k != slice(None):
            return _SLICE
        if k is None:
            return _INDEX_UNSQUEEZE
    return _SLICE if any(isinstance(k, slice) for k in parts) else _ALIAS


@functools.lru_cache(maxsize=64)
def _probe(shape):
    # one byte an element, never written (so never resident): byte strides
    # and byte offsets of its views count elements
    probe = np.empty(shape, np.int8)
    return probe, probe.__array_interface__["data"][0]


def _descriptor(shape, key):
    """The strided descriptor of basic-indexing `key` on an array of `shape`,
    or None when NumPy answers `key` with a copy rather than a view."""
    parts = key if isinstance(key, tuple) else (key,)
    hashable = tuple((slice, k.start, k.stop, k.step) if isinstance(k, slice) else k for k in parts)
    try:
        return _cached_descriptor(shape, hashable)
    except TypeError:  # a part that does not hash (NumPy integer arrays go elsewhere)
        return _probed_descriptor(shape, parts)


# slices do not hash before Python 3.12: the cache key spells them as
# (slice, start, stop, step)
@functools.lru_cache(maxsize=256)
def _cached_descriptor(shape, hashable):
    parts = tuple(slice(*k[1:]) if isinstance(k, tuple) and k and k[0] is slice else k
                  for k in hashable)
    return _probed_descriptor(shape, parts)


def _probed_descriptor(shape, parts):
    probe, start = _probe(shape)
    if not any(k is Ellipsis for k in parts):
        parts += (Ellipsis,)  # with an Ellipsis NumPy returns a 0-d view, not a scalar copy
    view = probe[parts]
    if view.base is not probe:
        return None
    offset = view.__array_interface__["data"][0] - start
    return (offset if view.size else 0,) + view.strides


def _flat_index(shape, key):
    """The flat C-order indices that `key` selects from an array of `shape`."""
    return np.asarray(np.arange(int(np.prod(shape))).reshape(shape)[key], np.int64).reshape(-1)


def _strided_view(a, desc, shape):
    # the descriptor indexes C order: a broadcast or permuted array is copied first
    flat = np.ascontiguousarray(a).reshape(-1)
    return np.lib.stride_tricks.as_strided(flat[int(desc[0]):], shape,
                                           tuple(int(s) * flat.itemsize for s in desc[1:]))


def _strided_gather(opdef, x, desc, shape):
    value = wrap_value(np.array(_strided_view(x._array(), desc, shape)))
    if x._rg and state.tape.grad_enabled:
        return record(opdef, value, (x,), ints=desc)
    return new_tensor(value)


def _strided_scatter(g, desc, shape):
    """g placed where `desc` points in zeros(shape)."""
    out = np.zeros(shape, g.dtype)
    if any(s == 0 and d > 1 for s, d in zip(desc[1:], g.shape)):  # an expanded view's elements repeat: they add up
        positions = _strided_view(np.arange(out.size), desc, g.shape)
        np.add.at(out.reshape(-1), positions.reshape(-1), g._array().reshape(-1))
    else:
        _strided_view(out, desc, g.shape)[...] = g._array()
    value = wrap_value(out)
    if g._rg and state.tape.grad_enabled:
        return record(_STRIDED_SCATTER, value, (g,), ints=desc)
    return new_tensor(value)


def _gather(opdef, x, flat_index, shape):
    value = wrap_value(x._array().reshape(-1)[flat_index].reshape(shape))
    if x._rg and state.tape.grad_enabled:
        return record(opdef, value, (x,), ints=flat_index)
    return new_tensor(value)


def gathered_index(row, arguments):
    """The index along the kept argument `dim` of each element a gather row
    took from its input (its ints, flat positions into it), shaped as the
    result: the indices PyTorch's nodes of max(dim), sort, topk and gather
    save, as a RowTensor makes them."""
    shape = row.x_shape
    if not shape:
        return np.zeros(row.shape, np.int64)
    d = _norm_dim(arguments["dim"], len(shape))
    return np.unravel_index(row.ints, shape)[d].reshape(row.shape).astype(np.int64)


def _scatter(g, flat_index, shape, unique):
    """g placed at `flat_index` of zeros(shape); repeated indices add up,
    which only advanced indexing can produce (np.add.at is far slower)."""
    out = np.zeros(int(np.prod(shape)), g.dtype)
    if unique:
        out[flat_index] = g._array().reshape(-1)
    else:
        np.add.at(out, flat_index, g._array().reshape(-1))
    value = wrap_value(out.reshape(shape))
    if g._rg and state.tape.grad_enabled:
        return record(_SCATTER, value, (g,), ints=flat_index)
    return new_tensor(value)


def _indexed(x, key):
    """(key normalised, x[key] as NumPy indexes it: for basic indexing a view
    of x's memory, the op that records it), with PyTorch's errors; what
    getitem and setitem share."""
    key = _select_first(_index_key(key), x.shape)
    if x.ndim == 0 and isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
        raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                         "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
    if x.ndim == 0 and isinstance(key, slice):
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    opdef = _getitem_op(key)
    try:
        value = x._array()[key] if opdef is _INDEX else _basic_view(x._memory(), key)
    except IndexError as e:
        if str(e).startswith("too many indices"):
            raise IndexError(f"too many indices for tensor of dimension {x.ndim}") from None
        raise IndexError(re.sub(r"\baxis\b", "dimension", str(e))) from None
    return key, value, opdef


def _basic_view(a, key):
    """a[key] for a key of ints, slices, None and Ellipsis, as the view of a
    that PyTorch's indexing gives: an element too is a 0-d view (NumPy
    copies it out, but not with an Ellipsis), and a new dim's stride is
    PyTorch's unsqueeze's (the next dim's extent; NumPy's is 0)."""
    parts = key if isinstance(key, tuple) else (key,)
    if not any(k is Ellipsis for k in parts):
        parts += (Ellipsis,)
    view = a[parts]
    if any(k is None for k in parts):
        strides = list(view.strides)
        shape = view.shape
        for k in range(view.ndim - 1, -1, -1):
            if shape[k] == 1 and strides[k] == 0:
                strides[k] = strides[k + 1] * shape[k + 1] if k + 1 < view.ndim else view.itemsize
        view = np.lib.stride_tricks.as_strided(view, shape, strides)
    return view


def _region(shape, key, opdef):
    """Where `key` selects in an array of `shape`: a strided descriptor, or a
    flat index map for advanced indexing (and any key NumPy answers with a copy)."""
    desc = _descriptor(shape, key) if opdef is not _INDEX else None
    return desc if desc is not None else _flat_index(shape, key)


def _is_index_array(k):
    return isinstance(k, (Tensor, np.ndarray, list)) and not (isinstance(k, Tensor) and not k.ndim
                                                            and k.dtype.kind in "iu")


def _is_mask(k):
    return _is_index_array(k) and (k.dtype in (np.bool_, np.uint8) if isinstance(k, Tensor)
                                   else np.asarray(k).dtype == np.bool_)


def _getitem_rule(op, args):
    """x[key] of each sample: x's physical value indexed by a full slice of
    each batch dim, then key. Index arrays apart (after the ints, which
    select first) put their dims first, in PyTorch as in NumPy: before the
    batch dims here, which move back in front."""
    a = args.arguments
    x, key = a["x"], a["key"]
    parts = key if isinstance(key, tuple) else (key,)
    if any(map(_is_mask, parts)):
        DYNAMIC_SHAPE(op, args)
    if any(isinstance(k, BatchedTensor) for k in parts):
        return _getitem_by_batched_index(op, args, parts)
    nb = len(x.levels)
    a["x"], a["key"] = x.phys, (slice(None),) * nb + parts
    out = op(*args.args)
    unselected = [k for k in parts if not _is_int(k)]
    at = [i for i, k in enumerate(unselected) if _is_index_array(k)]
    if at and at[-1] - at[0] + 1 != len(at):
        k = len(np.broadcast_shapes(*(tuple(np.shape(unselected[i])) for i in at)))
        out = out.permute(tuple(range(k, k + nb)) + tuple(range(k)) + tuple(range(k + nb, out.ndim)))
    return batched_result(out, x.levels)


def _getitem_by_batched_index(op, args, parts):
    """x[key] of each sample where some of key's index arrays (or ints) are
    batched: each batch dim indexed by its positions (an arange), an index
    array among the others, so that the arrays give each sample its own
    positions. The arrays' dims come first, after the batch dims; where the
    sample's arrays are adjacent after other dims, they move there."""
    a = args.arguments
    x = a["x"]
    levels = levels_of((x,) + parts)
    nb = len(levels)
    values = with_levels(x, levels)
    at = [i for i, k in enumerate(parts) if isinstance(k, BatchedTensor) or _is_index_array(k)]
    shape = np.broadcast_shapes(*(tuple(np.shape(parts[i])) for i in at))
    r = len(shape)
    positions = [np.arange(n).reshape((1,) * j + (n,) + (1,) * (nb - j - 1 + r))
                 for j, n in enumerate(values.shape[:nb])]
    key = tuple(with_levels(k, levels).reshape(values.shape[:nb] + (1,) * (r - k.ndim) + k.shape)
                if isinstance(k, BatchedTensor) else k for k in parts)
    a["x"], a["key"] = values, tuple(positions) + key
    out = op(*args.args)
    unselected = [k for k in parts if isinstance(k, BatchedTensor) or not _is_int(k)]
    arrays = [i for i, k in enumerate(unselected) if isinstance(k, BatchedTensor) or _is_index_array(k)]
    if arrays[-1] - arrays[0] + 1 == len(arrays) and arrays[0]:
        # the sample's arrays stand in place, after the dims of what precedes them
        consumed = len([k for k in parts if k is not None and k is not Ellipsis])
        before = sum(x.ndim - consumed if k is Ellipsis else 1 for k in unselected[:arrays[0]])
        out = out.permute(tuple(range(nb)) + tuple(range(nb + r, nb + r + before)) + tuple(range(nb, nb + r))
                          + tuple(range(nb + r + before, out.ndim)))
    return batched_result(out, levels)


@declare(function=False, methods=("__getitem__",), operands=2, batch=_getitem_rule)
def getitem(x, key, recorded_as=None):
    """x[key] for ints, slices, None, Ellipsis, bool masks and integer arrays.
    `recorded_as` is the strided op that records a part of split or unbind,
    for PyTorch's grad_fn name (SplitBackward0, UnbindBackward0)."""
    given = key
    key, value, opdef = _indexed(x, key)
    recording = x._rg and state.tape.grad_enabled
    if opdef is _INDEX:  # advanced indexing gives a copy, in PyTorch too
        if not recording:
            return new_tensor(wrap_value(value))
        return keep_arguments_of(_gather(_INDEX, x, _region(x.shape, key, opdef), np.shape(value)),
                                 functools.partial(advanced_indexing_arguments, x.shape, _index_key(given)))
    out = _view_result(recorded_as or opdef, x, value, ints=_descriptor(x.shape, key) if recording else None)
    if recording and recorded_as is None and opdef.saved:
        keep_arguments_of(out, functools.partial(_indexing_arguments, x.shape, key))
    return out


# cat and stack are one row of all their tensors (a variadic op: Note [Tape
# layout]), ints = (where each tensor starts along dim, where the last ends,
# dim): for stack, a new dim, where tensor j is at j


def _join_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    # inputs two at a time (tape/_gen.py's _more_vjps): ints from this pair's first entry on
    d = ints[ints.size - 1]
    inner = 1
    for k in range(d + 1, osh.size):
        inner *= osh[k]
    width = osh[d] * inner
    x0, y0 = ints[0] * inner, ints[1] * inner
    ix = y0 - x0
    iy = (ints[2] - ints[1]) * inner if GB.size else 0
    for o in range(G.size // max(width, 1)):
        start = o * width
        if GA.size:
            for j in range(ix):
                GA[o * ix + j] += G[start + x0 + j]
        if GB.size:
            for j in range(iy):
                GB[o * iy + j] += G[start + y0 + j]


def _join_grads(ctx, part):
    """The gradients of a join's inputs, `part(j, start, end)` of g for input j."""
    ints = ctx.ints
    grads = [part(j, int(ints[j]), int(ints[j + 1])) if need else None
             for j, need in zip(range(len(ints) - 2), ctx.needs)]
    return tuple(grads) + (None,) * (len(ctx.needs) - len(grads))


def _cat_vjp(ctx, g):
    before = (slice(None),) * int(ctx.ints[-1])

    def part(j, start, end):
        piece = getitem(g, before + (slice(start, end),))
        shape = ctx.input_shape(j)  # an empty 1-D input that cat skipped has a gradient of its own shape
        return piece if piece.shape == shape else reshape(piece, shape)
    return _join_grads(ctx, part)


def _stack_vjp(ctx, g):
    before = (slice(None),) * int(ctx.ints[-1])
    return _join_grads(ctx, lambda j, start, end: getitem(g, before + (j,)))


_CAT = defop("cat", "CatBackward0", 2, vjp=_cat_vjp, native=_join_native, variadic=True,
             saved=(("dim", lambda row: int(row.ints[-1])),))
_STACK = defop("stack", "StackBackward0", 2, vjp=_stack_vjp, native=_join_native, variadic=True,
               saved=(("dim", lambda row: int(row.ints[-1])),))


def _join(opdef, value, tensors, starts, dim):
    """The joined `value` of `tensors`, as one row when one requires grad."""
    value = wrap_value(value)
    if not (state.tape.grad_enabled and any(t._rg for t in tensors)):
        return new_tensor(value)
    return record_many(opdef, value, [t if t._rg else None for t in tensors], ints=(*starts, dim))


def _tensor_list(name, tensors):
    if isinstance(tensors, Tensor):
        raise TypeError(f"{name}(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor")
    tensors = list(tensors)
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {type(t).__name__}")
    return tensors


@declare(signature="tensors, dim=0, *, out=None", methods=(), batch=along("dim"))
def cat(tensors, dim=0):
    """The tensors joined along an existing dim `dim`.

    >>> import tape
    >>> tape.cat([tape.ones(1, 2), tape.zeros(1, 2)]).tolist()
    [[1.0, 1.0], [0.0, 0.0]]
    """
    tensors = _tensor_list("cat", tensors)
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    # PyTorch's legacy rule: empty 1-D tensors are skipped (acc = cat([acc, x]) from tensor([]))
    # in the checks of shapes; they still count in the dtype and the graph
    given = tensors
    joined = [t for t in tensors if t.shape != (0,)]
    tensors = joined or tensors
    for i, t in enumerate(tensors):
        if t.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    first = tensors[0]
    d = _norm_dim(dim, first.ndim)
    for i, t in enumerate(tensors[1:], 1):
        if t.ndim != first.ndim:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {first.ndim} and {t.ndim}")
        for k in range(first.ndim):
            if k != d and t.shape[k] != first.shape[k]:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected size "
                                   f"{first.shape[k]} but got size {t.shape[k]} for tensor number {i} in "
                                   f"the list.")
    arrays = promoted(*(t._array() for t in given))  # Note [Type promotion]
    kept = [a for a, t in zip(arrays, given) if t.shape != (0,)] or arrays
    # a skipped tensor is an input of no width, its own node's, as in PyTorch's graph
    widths = [0 if t.shape == (0,) else t.shape[d] for t in given]
    return _join(_CAT, np.concatenate(kept, axis=d), given, np.cumsum([0] + widths).tolist(), d)


@declare(signature="tensors, dim=0, *, out=None", methods=(), batch=along("dim", new=1))
def stack(tensors, dim=0):
    """The tensors, all of one shape, joined along a new dim `dim`."""
    tensors = _tensor_list("stack", tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    for i, t in enumerate(tensors[1:], 1):
        if t.shape != tensors[0].shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(tensors[0].shape)} "
                               f"at entry 0 and {list(t.shape)} at entry {i}")
    d = _norm_dim(dim, tensors[0].ndim + 1)
    value = np.stack(promoted(*(t._array() for t in tensors)), axis=d)
    return _join(_STACK, value, tensors, range(len(tensors) + 1), d)


swapaxes = declare(transpose, name="swapaxes", signature="input, axis0, axis1", methods=(),
                   batch=along("dim0", "dim1"))
swapdims = declare(transpose, name="swapdims", signature="input, dim0, dim1", batch=along("dim0", "dim1"))


def _dim_list(dims):
    return [int(dims)] if isinstance(dims, (int, np.integer)) else [int(d) for d in dims]


@declare(signature="input, source, destination", batch=composite)
def movedim(input, source, destination):
    """input with the dims `source` (an int or a sequence) moved to the
    places `destination`, the others keeping their order (a permute).

    >>> import tape
    >>> tape.movedim(tape.ones(2, 3, 4), 0, -1).shape
    (3, 4, 2)
    """
    src, dst = _dim_list(source), _dim_list(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) should contain "
                           f"the same number of dims as destination ({dst} dims)")
    src_n = [_norm_dim(d, input.ndim) for d in src]
    dst_n = [_norm_dim(d, input.ndim) for d in dst]
    for name, given, normed in (("source", src, src_n), ("destination", dst, dst_n)):
        if len(set(normed)) != len(normed):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({given})")
    if input.ndim == 0:  # PyTorch's alias of the tensor
        return input[...]
    order = [None] * input.ndim
    for s_, d_ in zip(src_n, dst_n):
        order[d_] = s_
    rest = iter(k for k in range(input.ndim) if k not in src_n)
    return input.permute(tuple(k if k is not None else next(rest) for k in order))


moveaxis = declare(movedim, name="moveaxis", signature="input, source, destination", batch=composite)


@declare(signature="input", batch=composite)
def ravel(input):
    """input flattened to 1-D (a view where it can be one).

    >>> import tape
    >>> tape.ravel(tape.ones(2, 3)).shape
    (6,)
    """
    return input.contiguous().view(-1)  # as PyTorch's: a copy is CloneBackward0, then ViewBackward0


@declare(signature="*tensors, indexing=None", methods=(), batch=composite)
def meshgrid(*tensors, indexing=None):
    """Grids of the 0-d or 1-D tensors: the k-th result is tensor k along
    dim k, expanded to every tensor's length ("ij" indexing; "xy" swaps the
    first two dims), each a view.

    >>> import tape
    >>> [g.tolist() for g in tape.meshgrid(tape.tensor([1, 2]), tape.tensor([3, 4, 5]), indexing="ij")][0]
    [[1, 1, 1], [2, 2, 2]]
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.",
                      UserWarning, stacklevel=3)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t}")
    if len({t.dtype for t in tensors}) > 1:
        raise RuntimeError("torch.meshgrid: Expected all tensors in the tensor list to have the same dtype.")
    swap = indexing == "xy" and len(tensors) >= 2
    order = [1, 0, *range(2, len(tensors))] if swap else list(range(len(tensors)))
    sizes = [tensors[k].numel() for k in order]
    out = []
    for k, t in enumerate(tensors):
        at = order.index(k)
        out.append(t.reshape([-1 if d == at else 1 for d in range(len(sizes))]).expand(sizes))
    return tuple(out)


@declare(signature="input, dim, sizes", batch=composite)
def unflatten(input, dim, sizes):
    """input with dim `dim` split into dims of `sizes` (one of them may be
    -1, inferred), a view.

    >>> import tape
    >>> tape.ones(2, 6).unflatten(1, (3, -1)).shape
    (2, 3, 2)
    """
    given = int_list(sizes)
    if not given:
        raise RuntimeError("unflatten: sizes must be non-empty")
    d = _norm_dim(dim, input.ndim)
    n, known = input.shape[d], int(np.prod([s for s in given if s != -1]))
    new = [n // known if s == -1 and given.count(-1) == 1 and known and n % known == 0 else s for s in given]
    if int(np.prod(new)) != n or any(s < 0 for s in new):
        raise RuntimeError(f"unflatten: Provided sizes {list(given)} don't multiply up to the size of dim {dim} "
                           f"({n}) in the input tensor")
    return input.view(input.shape[:d] + tuple(new) + input.shape[d + 1:])


@declare(signature="input, dim, start, length", batch=composite)
def narrow(input, dim, start, length):
    """The `length` elements of input along `dim` from `start` (a slice, a view).

    >>> import tape
    >>> tape.arange(5.).narrow(0, 1, 3).tolist()
    [1.0, 2.0, 3.0]
    """
    if input.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = _norm_dim(dim, input.ndim)
    start, length, n = int(start), int(length), input.shape[d]
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but got {start})")
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    start %= n if n else 1
    if start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    out = input[(slice(None),) * d + (slice(start, start + length),)]
    # PyTorch's slice of narrow has dim as given and start as a dim's index
    return keep_arguments(out, dim=dim, start=start, end=start + length, step=1, self_sym_sizes=input.shape)


@declare(signature="input, dim, index", batch=composite)
def select(input, dim, index):
    """The slice of input at `index` along `dim`, without that dim (a view).

    >>> import tape
    >>> tape.arange(6.).reshape(2, 3).select(1, -1).tolist()
    [2.0, 5.0]
    """
    if input.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = _norm_dim(dim, input.ndim)
    index, n = int(index), input.shape[d]
    if not -n <= index < n:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(input.shape)} at "
                         f"dimension {d}")
    return keep_arguments(input[(slice(None),) * d + (index,)], dim=dim, index=index, self_sym_sizes=input.shape)


# repeat and roll gather the input's elements at computed positions
_REPEAT = defop("repeat", "RepeatBackward0", 1, vjp=_index_vjp, native=_gather_native,
                saved=(("repeats", "arg"),) + _SIZES)
_ROLL = defop("roll", "RollBackward0", 1, vjp=_index_vjp, native=_gather_native,
              saved=(("dims", "arg"), ("shifts", "arg")))


def _flat_positions(x):
    """The flat C-order index of each element of x, shaped as x: indexed as x
    would be, the positions of a gather."""
    return np.arange(x.numel()).reshape(x.shape)


def _repeat_rule(op, args):
    """repeat of each sample: its new leading dims after the batch dims, each batch dim repeated once."""
    x = args.arguments["input"]
    reps = _shape_arg(args.arguments["repeats"])
    nb, lead = len(x.levels), max(len(reps) - x.ndim, 0)
    args.arguments["input"] = x.phys.reshape(x._batch_shape() + (1,) * lead + x.shape)
    args.arguments["repeats"] = ((1,) * nb + reps,)
    return batched_result(op(*args.args), x.levels)


@declare(batch=_repeat_rule)
def repeat(input, *repeats):
    """input repeated `repeats[k]` times along dim k; more repeats than dims
    add leading dims. Each element's gradient is the sum over its copies.

    >>> import tape
    >>> tape.tensor([1., 2.]).repeat(2, 2).tolist()
    [[1.0, 2.0, 1.0, 2.0], [1.0, 2.0, 1.0, 2.0]]
    """
    if not repeats:
        raise TypeError('repeat() missing 1 required positional arguments: "repeats"')
    reps = _shape_arg(repeats)
    if len(reps) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions "
                           "of tensor")
    shape = (1,) * (len(reps) - input.ndim) + input.shape
    sizes = [k * r for k, r in zip(shape, reps)]
    if any(r < 0 for r in reps):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(sizes)}: {sizes}")
    positions = np.tile(_flat_positions(input).reshape(shape), reps)
    return keep_arguments(_gather(_REPEAT, input, positions.reshape(-1), positions.shape), repeats=tuple(reps))


@declare(signature="input, dims", methods=(), batch=composite)
def tile(input, dims):
    """input repeated `dims[k]` times along dim k, as repeat, where fewer
    dims than input's repeat the last ones.

    >>> import tape
    >>> tape.tile(tape.tensor([[1., 2.]]), (2,)).tolist()
    [[1.0, 2.0, 1.0, 2.0]]
    """
    if isinstance(dims, (int, np.integer)):
        raise TypeError(f"tile(): argument 'dims' (position 2) must be tuple of ints, not {type(dims).__name__}")
    reps = tuple(int(k) for k in dims)
    return input.repeat((1,) * (input.ndim - len(reps)) + reps)


# torch's Tensor.swapaxes names its dims as NumPy does; tape.swapaxes is under its signature
@declare(function=False, methods=("swapaxes",), batch=along("axis0", "axis1"))
def _swapaxes_method(self, axis0, axis1):
    return transpose(self, axis0, axis1)


@declare(function=False, methods=("tile",), batch=composite)
def _tile_method(self, *dims):
    return tile(self, _shape_arg(dims))


def _roll_arguments(shifts, dims):
    """shifts and dims (None: PyTorch's default () as NumPy writes it) as lists, with PyTorch's errors."""
    shifts = _dim_list(shifts)
    dims = [] if dims is None else _dim_list(dims)
    if not shifts:
        raise RuntimeError("`shifts` required")
    if len(shifts) != len(dims) and (dims or len(shifts) != 1):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    return shifts, dims


_along_dims = along("dims")


def _roll_rule(op, args):
    """roll of each sample: along its dims shifted past the batch dims, or,
    without dims, along the flattened sample."""
    a = args.arguments
    x = a["input"]
    shifts, dims = _roll_arguments(a["shifts"], a["dims"])
    if dims:
        return _along_dims(op, args)
    flat = op(x.phys.reshape(x._batch_shape() + (-1,)), shifts, len(x.levels))
    return batched(flat.reshape(x.phys.shape), x.levels)


@declare(signature="input, shifts, dims=()", batch=_roll_rule)
def roll(input, shifts, dims=()):
    """input's elements shifted by `shifts` along `dims` (ints or sequences),
    those pushed off one end coming back at the other; without dims, over the
    flattened tensor.

    >>> import tape
    >>> tape.roll(tape.tensor([1., 2., 3.]), 1).tolist()
    [3.0, 1.0, 2.0]
    """
    shifts, dims = _roll_arguments(shifts, dims)
    axis = tuple(_shape_dim(d, input.ndim) for d in dims) if dims else None
    positions = np.roll(_flat_positions(input), shifts if dims else shifts[0], axis)
    return keep_arguments(_gather(_ROLL, input, positions.reshape(-1), positions.shape), dims=tuple(dims),
                          shifts=tuple(shifts))


# hstack and vstack: each tensor's shape made that of the parts (`lifted`),
# which are joined by cat along the dim that the first one's shape gives
def _hstack_shape(shape):
    return shape or (1,)


def _hstack_dim(shape):
    return 0 if len(shape) == 1 else 1


def _vstack_shape(shape):
    return shape if len(shape) >= 2 else (1, int(np.prod(shape)))


def _vstack_dim(shape):
    return 0


def _lift(t, lifted):
    """t in the shape `lifted` gives, as PyTorch's atleast_1d/atleast_2d make
    it: a vector gets its leading dim by unsqueeze, a 0-d tensor by a view."""
    shape = lifted(t.shape)
    if shape == t.shape:
        return t
    return unsqueeze(t, 0) if t.ndim == 1 else reshape(t, shape)


def _stacked(name, tensors, lifted, dim_of):
    tensors = _tensor_list(name, tensors)
    if not tensors:
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    parts = [_lift(t, lifted) for t in tensors]
    return cat(parts, dim_of(parts[0].shape))


def _stacked_rule(lifted, dim_of):
    """The rule of hstack or vstack: each sample's part made after the batch
    dims of every level, joined along its dim shifted past them."""
    def rule(op, args):
        tensors = _tensor_list(op.__name__, args.arguments["tensors"])
        levels = levels_of(tensors)
        parts = [with_levels(t, levels) for t in tensors]
        nb = len(levels)
        parts = [reshape(p, p.shape[:nb] + lifted(t.shape)) for p, t in zip(parts, tensors)]
        return batched(cat(parts, nb + dim_of(lifted(tensors[0].shape))), levels)
    return rule


@declare(signature="tensors, *, out=None", methods=(), batch=_stacked_rule(_hstack_shape, _hstack_dim))
def hstack(tensors):
    """The tensors joined along dim 1 (dim 0 when they are 1-D; 0-d ones count as 1-D).

    >>> import tape
    >>> tape.hstack([tape.ones(2, 1), tape.zeros(2, 2)]).shape
    (2, 3)
    """
    return _stacked("hstack", tensors, _hstack_shape, _hstack_dim)


@declare(signature="tensors, *, out=None", methods=(), batch=_stacked_rule(_vstack_shape, _vstack_dim))
def vstack(tensors):
    """The tensors, made at least 2-D (a vector as a row), joined along dim 0.

    >>> import tape
    >>> tape.vstack([tape.ones(3), tape.zeros(3)]).shape
    (2, 3)
    """
    return _stacked("vstack", tensors, _vstack_shape, _vstack_dim)


def _as_shape_of(name, method):
    """The method `name`: self.<method>(other.shape), which batches as that method does."""
    def op(self, other):
        return getattr(self, method)(other.shape)
    op.__name__ = name
    op.__doc__ = f"self.{method}(other.shape)."
    return declare(op, function=False, batch=composite)


view_as = _as_shape_of("view_as", "view")
reshape_as = _as_shape_of("reshape_as", "reshape")
expand_as = _as_shape_of("expand_as", "expand")
Tensor.T = property(_T_property)
Tensor.mT = property(_mT_property)

__all__ = exports(globals())
