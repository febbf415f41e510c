"""Ops that select elements: where (of one tensor or another by a condition),
split, chunk and unbind (slices), flip, index_select, gather and diagonal
(elements at computed positions: a gather whose gradient scatters back),
triu and tril. where is one recorded op whose VJP is where on g; triu and
tril compose recorded ops, so their gradients of any order are those of the
composition."""
import builtins

import numpy as np

from ops._declare import declare, exports
from tape._batched import (DYNAMIC_OUTPUT, BatchedTensor, aligned, along, batched, batched_result, composite,
                           elementwise, leading, levels_of, no_rule, with_levels)

from tape._broadcast import bcast_index
from tape._dtypes import cpp_type_name, not_implemented_for, result_type, scalar_type_name
from tape._node import keep_arguments, keep_arguments_of
from tape._record import broadcast_shapes, op_result, python_number, record
from tape._registry import SAVES_ROW, SAVES_X, RowTensor, defop
from tape._tape import state
from tape._tensor import Tensor, _norm_dim, new_tensor, wrap_value

from ops.reduction import _dims
from ops.shape import (_flat_positions, _gather, _gather_native, _index_vjp, _scatter, _scatter_native, _scatter_vjp,
                       _strided_gather_native, _strided_vjp, _view_result, expand, gathered_index, getitem, sum_to)

def _where_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    # g goes to input where the condition (ints, 0 or 1 per output element) holds, else to other
    for i in range(G.size):
        if ints[i] != 0:
            if GA.size:
                GA[bcast_index(i, osh, xsh)] += G[i]
        elif GB.size:
            GB[bcast_index(i, osh, ysh)] += G[i]


def _where_vjp(ctx, g):
    mask = ctx.ints.reshape(ctx.shape) != 0
    return (sum_to(where(mask, g, 0.0), ctx.x_shape) if ctx.needs[0] else None,
            sum_to(where(mask, 0.0, g), ctx.y_shape) if ctx.needs[1] else None)


def _given_mask(held, shape):
    """The mask of `shape` that broadcast to `held` (a row's mask of every
    output element): PyTorch's node saves the mask as it was given."""
    lead = held.ndim - len(shape)
    return held[(0,) * lead + tuple(slice(None) if n == m else slice(0, 1) for n, m in zip(shape, held.shape[lead:]))]


_WHERE = defop("where", "WhereBackward0", 2, saves=SAVES_ROW, vjp=_where_vjp, native=_where_native, saved=(
    ("condition", RowTensor(lambda row, arguments: _given_mask(row.ints.reshape(row.shape) != 0,
                                                                arguments["condition_shape"]))),))


def _where_rule(op, args):
    """where of each sample, its operands broadcast; where(condition) alone,
    the indices, has a shape that depends on the values."""
    if args.arguments["input"] is None and args.arguments["other"] is None:
        return DYNAMIC_OUTPUT(op, args)
    return elementwise(op, args)


@declare(signature="condition, input=None, other=None, *, out=None", methods=(), operands=3, batch=_where_rule)
def where(condition, input=None, other=None):
    """input where condition holds, else other (tensors or numbers, broadcast);
    where(condition) alone is the tuple of the indices where it holds."""
    mask = condition._array() if isinstance(condition, Tensor) else np.asarray(condition)
    if mask.dtype != np.bool_:
        raise RuntimeError("where expected condition to be a boolean tensor, but got a tensor with "
                           f"dtype {scalar_type_name(mask.dtype)}")
    if input is None and other is None:
        return tuple(new_tensor(wrap_value(np.asarray(i, np.int64))) for i in np.nonzero(mask))
    x, y = python_number(input), python_number(other)
    xv = x._array() if isinstance(x, Tensor) else x
    yv = y._array() if isinstance(y, Tensor) else y
    shape = broadcast_shapes(broadcast_shapes(mask.shape, np.shape(xv)), np.shape(yv))  # PyTorch's error
    value = wrap_value(np.asarray(np.where(mask, xv, yv), result_type(xv, yv)))  # Note [Type promotion]
    inputs = tuple(t if isinstance(t, Tensor) and t._rg else None for t in (x, y))
    if not (state.tape.grad_enabled and inputs != (None, None)):
        return new_tensor(value)
    held = np.broadcast_to(mask, shape).reshape(-1).astype(np.int64)
    return keep_arguments(record(_WHERE, value, inputs, ints=held), condition_shape=mask.shape)


@declare(function=False, methods=("where",), operands=3, batch=elementwise)
def _where_method(self, condition, other):
    return where(condition, self, other)


# masked_fill is where(mask, value, input) with the condition turned round, so
# that input is the row's first input, as in PyTorch's next_functions; of a
# number value (MaskedFillBackward0) it is the only one
def _masked_fill_number_vjp(ctx, g):
    return _where_vjp(ctx, g)[:1]


# the row holds where the input is kept: the mask is where it is not
_FILL_MASK = (("mask", RowTensor(lambda row, arguments: _given_mask(row.ints.reshape(row.shape) == 0,
                                                                     arguments["mask_shape"]))),)
_MASKED_FILL = defop("masked_fill", "MaskedFillBackward0", 1, saves=SAVES_ROW, vjp=_masked_fill_number_vjp,
                     native=_where_native, saved=_FILL_MASK)
_MASKED_FILL_TENSOR = defop("masked_fill_tensor", "MaskedFillBackward1", 2, saves=SAVES_ROW, vjp=_where_vjp,
                            native=_where_native, saved=_FILL_MASK)


def _bool_mask(mask, error):
    m = mask._array() if isinstance(mask, Tensor) else np.asarray(mask)
    if m.dtype != np.bool_:
        raise RuntimeError(error(m.dtype))
    return m


def _masked_fill_rule(op, args):
    """masked_fill of each sample: of a batched value (a 0-d sample), where
    with the value in input's dtype; else masked_fill on the operands aligned."""
    a = args.arguments
    if not isinstance(a["value"], BatchedTensor):
        return elementwise(op, args)
    levels, (mask, value, input) = aligned([a["mask"], a["value"], a["input"]])
    return batched(where(mask, value.to(a["input"].dtype), input), levels)


@declare(signature="input, mask, value", operands=3, batch=_masked_fill_rule)
def masked_fill(input, mask, value):
    """input with the elements where `mask` (a bool tensor, broadcast) holds
    replaced by `value`, a number or a 0-d tensor. A value that requires
    grad gets the sum of the gradient over the filled elements.

    >>> import tape
    >>> tape.tensor([1., 2., 3.]).masked_fill(tape.tensor([True, False, True]), 0.).tolist()
    [0.0, 2.0, 0.0]
    """
    m = _bool_mask(mask, lambda dtype: "masked_fill_ only supports boolean masks, but got mask with dtype "
                                       f"{cpp_type_name(dtype)}")
    if isinstance(value, Tensor) and value.ndim != 0:
        raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    shape = broadcast_shapes(m.shape, input.shape)  # PyTorch names the mask a
    v = value._array() if isinstance(value, Tensor) else python_number(value)
    out = wrap_value(np.where(m, v, input._array()).astype(input.dtype, copy=False))
    rgv = isinstance(value, Tensor) and value._rg
    if not (state.tape.grad_enabled and (input._rg or rgv)):
        return new_tensor(out)
    kept = np.broadcast_to(~m, shape).reshape(-1).astype(np.int64)
    x = input if input._rg else None
    if isinstance(value, Tensor):
        return keep_arguments(record(_MASKED_FILL_TENSOR, out, (x, value if rgv else None), ints=kept),
                              mask_shape=m.shape)
    return keep_arguments(record(_MASKED_FILL, out, (x,), ints=kept), mask_shape=m.shape)


# self is saved as gather's is; the positions it gathers do not tell a mask
# that broadcast x, which it keeps
_MASKED_SELECT = defop("masked_select", "MaskedSelectBackward0", 1, saves=SAVES_ROW | SAVES_X, vjp=_index_vjp,
                       native=_gather_native,
                       saved=(("mask", RowTensor(lambda row, arguments: arguments["mask"])), ("self", "x")))


def _masked_select_rule(op, args):
    """masked_select of each sample by a mask that every sample shares (the
    same number of elements each); a batched mask selects a different number."""
    a = args.arguments
    if isinstance(a["mask"], BatchedTensor):
        return _MASKED_SELECT_BATCHED_MASK(op, args)
    m = _bool_mask(a["mask"], _masked_select_mask_error)
    x = a["input"].expand(broadcast_shapes(m.shape, a["input"].shape))
    count = int(np.broadcast_to(m, x.shape).sum())
    return batched(op(x.phys, a["mask"]).reshape(x._batch_shape() + (count,)), x.levels)


def _masked_select_mask_error(dtype):
    return "masked_select: expected BoolTensor for mask"


_MASKED_SELECT_BATCHED_MASK = no_rule(
    "vmap: Attempted to vmap over `mask` in torch.masked_select(self, mask) We cannot support this because for "
    "each batch this would return a differently shaped Tensor. Please file an issue at "
    "https://github.com/pytorch/pytorch/issues if you need this feature.")


@declare(signature="input, mask, *, out=None", operands=2, batch=_masked_select_rule)
def masked_select(input, mask):
    """The elements of input (broadcast with `mask`, a bool tensor) where mask
    holds, as a 1-D tensor; their gradient goes back to where they came from.

    >>> import tape
    >>> tape.masked_select(tape.tensor([[1., 2.], [3., 4.]]), tape.tensor([True, False])).tolist()
    [1.0, 3.0]
    """
    m = _bool_mask(mask, _masked_select_mask_error)
    shape = broadcast_shapes(m.shape, input.shape)
    positions = np.broadcast_to(_flat_positions(input), shape)[np.broadcast_to(m, shape)]
    return keep_arguments(_gather(_MASKED_SELECT, input, positions.astype(np.int64), positions.shape), mask=m)


# each part of split, chunk and unbind is a strided view, recorded under PyTorch's name
_SPLIT = defop("split", "SplitBackward0", 1, vjp=_strided_vjp, native=_strided_gather_native,
               saved=(("dim", "arg"), ("self_sym_sizes", "x_shape"), ("split_size", "arg")))
_SPLIT_WITH_SIZES = defop("split_with_sizes", "SplitWithSizesBackward0", 1, vjp=_strided_vjp,
                          saved=(("dim", "arg"), ("self_sym_sizes", "x_shape"), ("split_sizes", "arg")),
                          native=_strided_gather_native)
_UNBIND = defop("unbind", "UnbindBackward0", 1, vjp=_strided_vjp, native=_strided_gather_native,
                saved=(("dim", "arg"),))


@declare(signature="tensor, split_size_or_sections, dim=0", batch=along("dim"))
def split(tensor, split_size, dim=0):
    """Slices of `tensor` along dim: of split_size each (the last may be
    smaller), or of the given sizes."""
    if tensor.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = _norm_dim(dim, tensor.ndim)
    n = tensor.shape[d]
    if isinstance(split_size, (list, tuple)):
        sizes = [int(k) for k in split_size]
        if sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's "
                               f"size at dimension {d}), but got split_sizes={sizes}")
    else:
        size = int(split_size)
        if size == 0 and n != 0:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}")
        sizes = [min(size, n - start) for start in range(0, n, size)] if n else [0]
    starts = np.cumsum([0] + sizes[:-1]).tolist()
    before = (slice(None),) * d
    with_sizes = isinstance(split_size, (list, tuple))
    op = _SPLIT_WITH_SIZES if with_sizes else _SPLIT
    return _views_of("SplitWithSizes" if with_sizes else "Split", tensor, op,
                     [before + (slice(start, start + k),) for start, k in zip(starts, sizes)],
                     {"dim": dim, "split_sizes" if with_sizes else "split_size": tuple(sizes) if with_sizes else size})


_MULTI_VIEW = ("This view is the output of a function that returns multiple views. Such functions do not allow "
               "the output views to be modified inplace. You should replace the inplace operation by an "
               "out-of-place one.")


def _views_of(name, input, opdef, keys, arguments):
    """The parts input[key] of a function that returns several views: the
    outputs of one node of `opdef` (Note [Tape layout]), which shows
    `arguments` of the call, marked so that an in-place op on one raises
    while recording, as in PyTorch: the outputs of a node by its name, those
    of a tensor that does not require grad as views made without grad (name
    None)."""
    tp = state.tape
    recording = input._rg and tp.grad_enabled
    if recording:  # the parts' rows follow one another: input's row first
        tp.reserve(len(keys) + 1)
        tp.adopt(input)
    outputs = [getitem(input, key, recorded_as=opdef) for key in keys]
    if recording and outputs:
        if len(outputs) > 1:
            tp.number_outputs([tp.row_of(t) for t in outputs])
        keep_arguments_of(outputs[0], arguments)
    siblings = [(t._ep, t._row) for t in outputs if t._rg and t._ep is not None]
    for i, t in enumerate(outputs):
        t._refused_view = (name if t._rg else None, i, _MULTI_VIEW)
        if t._rg:
            t._siblings = siblings
    return tuple(outputs)


_TENSOR_SPLIT_TYPES = ("but expected one of:\n * (Tensor input, tuple of ints indices, int dim = 0)\n"
                       " * (Tensor input, Tensor tensor_indices_or_sections, int dim = 0)\n"
                       " * (Tensor input, int sections, int dim = 0)\n")


def _split_at(name, input, sections, dim):
    """input's slices along dim (PyTorch's tensor_split): `sections` equal
    parts (the first ones one longer), or the parts between the indices of a
    sequence or 1-D tensor, as Python slices them; each a view (SliceBackward0)."""
    if input.ndim == 0:
        raise RuntimeError(f"{name} expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    if isinstance(sections, Tensor):
        sections = sections.item() if sections.ndim == 0 else sections.tolist()
    d = _norm_dim(dim, input.ndim)
    n = input.shape[d]
    if isinstance(sections, (list, tuple)):
        bounds = [int(k) for k in sections]
    elif isinstance(sections, (int, np.integer)) and not isinstance(sections, bool):
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        size, longer = divmod(n, int(sections))
        bounds = np.cumsum([size + (k < longer) for k in range(int(sections) - 1)]).tolist()
    else:
        raise TypeError(f"{name}() received an invalid combination of arguments - got (Tensor, "
                        f"{type(sections).__name__}), {_TENSOR_SPLIT_TYPES}")
    before = (slice(None),) * d
    return tuple(input[before + (slice(start, end),)] for start, end in zip([0] + bounds, bounds + [None]))


@declare(signature="input, tensor_indices_or_sections=None, dim=0, *, sections=None, indices=None",
         batch=composite)
def tensor_split(input, tensor_indices_or_sections=None, dim=0, *, sections=None, indices=None):
    """input's slices along dim: `sections` parts as equal as can be (the
    first ones one longer), or the parts between `indices`.

    >>> import tape
    >>> [t.tolist() for t in tape.tensor_split(tape.arange(5.), 2)]
    [[0.0, 1.0, 2.0], [3.0, 4.0]]
    """
    given = next(v for v in (tensor_indices_or_sections, sections, indices, 1) if v is not None)
    return _split_at("tensor_split", input, given, dim)


def _split_along(name, input, sections, indices, dim, ndim):
    """hsplit, vsplit and dsplit: tensor_split along dim of a tensor of at
    least ndim dims, whose size an int `sections` must divide."""
    if input.ndim < ndim:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {ndim} dimension, but got a tensor with "
                           f"{input.ndim} dimensions!")
    given = indices if sections is None else sections
    if isinstance(given, (int, np.integer)) and not isinstance(given, bool) and given and input.shape[dim] % given:
        raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the size of the dimension "
                           f"{input.shape[dim]} is not divisible by the split_size {given}!")
    return _split_at(name, input, given, dim)


@declare(signature="input, sections=None, *, indices=None", batch=composite)
def hsplit(input, sections=None, *, indices=None):
    """tensor_split along dim 1 (dim 0 of a 1-D tensor)."""
    return _split_along("hsplit", input, sections, indices, 1 if input.ndim > 1 else 0, 1)


@declare(signature="input, sections=None, *, indices=None", batch=composite)
def vsplit(input, sections=None, *, indices=None):
    """tensor_split along dim 0 of a tensor of at least 2 dims."""
    return _split_along("vsplit", input, sections, indices, 0, 2)


@declare(signature="input, sections=None, *, indices=None", batch=composite)
def dsplit(input, sections=None, *, indices=None):
    """tensor_split along dim 2 of a tensor of at least 3 dims."""
    return _split_along("dsplit", input, sections, indices, 2, 3)


@declare(signature="input, chunks, dim=0", batch=along("dim"))
def chunk(input, chunks, dim=0):
    """input split into `chunks` slices of equal size along dim (the last may be smaller)."""
    if input.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = input.shape[_norm_dim(dim, input.ndim)]
    if n == 0:  # PyTorch's `chunks` empty pieces
        return split(input, [0] * chunks, dim)
    return split(input, -(-n // chunks), dim)


@declare(signature="input, dim=0", batch=along("dim"))
def unbind(input, dim=0):
    """The slices of input at each index along dim, without that dim."""
    d = _norm_dim(dim, input.ndim)
    if input.ndim == 0:
        raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
    return _views_of("Unbind", input, _UNBIND, [(slice(None),) * d + (i,) for i in range(input.shape[d])],
                     {"dim": dim})


def _taken(name, grad_fn, saved, saves=0):
    return defop(name, grad_fn, 1, saves=saves, vjp=_index_vjp, native=_gather_native, saved=saved)


_SIZES = (("self_sym_sizes", "x_shape"),)
_DIAGONAL_SAVED = (("dim1", "arg"), ("dim2", "arg"), ("offset", "arg")) + _SIZES
_FLIP = _taken("flip", "FlipBackward0", (("dims", "arg"),))
_INDEX_SELECT = _taken("index_select", "IndexSelectBackward0",
                       (("dim", "arg"), ("index", RowTensor(lambda row, arguments: arguments["index"]))) + _SIZES,
                       SAVES_ROW)
# self, which the gradient does not read, is saved as PyTorch's saves it (its
# hooks pack it, an in-place change to it refuses the backward)
_GATHER = _taken("gather", "GatherBackward0", (("dim", "arg"), ("index", RowTensor(gathered_index)), ("self", "x"),
                                               ("sparse_grad", "arg")), SAVES_ROW | SAVES_X)
_DIAGONAL = _taken("diagonal", "DiagonalBackward0", _DIAGONAL_SAVED)


def _take(opdef, x, positions):
    """The elements of x at `positions`, an array of flat indices into x
    shaped as the result."""
    return _gather(opdef, x, np.asarray(positions, np.int64).reshape(-1), np.shape(positions))


@declare(signature="input, dims, *, out=None", batch=along("dims"))
def flip(input, *dims):
    """input reversed along dims."""
    dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
    positions = _flat_positions(input)
    return keep_arguments(_take(_FLIP, input, np.asarray(np.flip(positions, _dims(input, dims))) if dims else positions),
                          dims=tuple(dims))


@declare(signature="input", batch=composite)
def fliplr(input):
    """input reversed along dim 1 (left to right)."""
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return input.flip(1)  # methods: vmap's rules run for a batched input (`composite`)


@declare(signature="input", batch=composite)
def flipud(input):
    """input reversed along dim 0 (up to down)."""
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return input.flip(0)


def _index_array(name, index):
    a = index._array() if isinstance(index, Tensor) else np.asarray(index)
    if a.dtype.kind not in "iu":
        raise RuntimeError(f"{name}(): Expected dtype int32 or int64 for index")
    return a


def _index_select_rule(op, args):
    """index_select of each sample: by a shared index, along the sample's dim
    shifted past the batch dims (a 0-d sample as one element along a dim of
    its own); by a batched index, a gather of each sample's positions, the
    index expanded along the other dims."""
    a = args.arguments
    x, index = a["input"], a["index"]
    levels = levels_of([x, index])
    nb = len(levels)
    if not isinstance(index, BatchedTensor):
        if not x.ndim:
            _norm_dim(a["dim"], 0)
            return batched(op(x.phys.unsqueeze(-1), nb, index).squeeze(-1), levels)
        a["input"], a["dim"] = x.phys, x._pdim(a["dim"])
        return batched_result(op(*args.args), levels)
    d = _norm_dim(a["dim"], x.ndim)
    values = with_levels(x, levels)
    k = index.numel()
    positions = with_levels(index, levels).reshape(values.shape[:nb] + (1,) * d + (k,) + (1,) * (x.ndim - d - 1))
    return batched(gather(values, nb + d, positions.expand(values.shape[:nb + d] + (k,) + values.shape[nb + d + 1:])),
                   levels)


@declare(signature="input, dim, index, *, out=None", operands=2, batch=_index_select_rule)
def index_select(input, dim, index):
    """The slices of input at `index` (a vector of ints) along dim."""
    a = _index_array("index_select", index)
    if a.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    d = _norm_dim(dim, input.ndim)
    n = input.shape[d] if input.ndim else 1
    bad = a[(a < 0) | (a >= n)]
    if bad.size:
        raise IndexError("index out of range in self")
    return keep_arguments(_take(_INDEX_SELECT, input, np.take(_flat_positions(input), a.reshape(-1), axis=d)
                                if input.ndim else _flat_positions(input)), dim=dim, index=a)
@declare(signature="input, dim, index, *, out=None", operands=2, batch=along("dim"))
def gather(input, dim, index):
    """out[i][j] = input[index[i][j]][j] for dim 0, and so on: index has
    input's number of dims, and sets the result's shape."""
    a = _index_array("gather", index)
    d = _norm_dim(dim, input.ndim)
    if a.ndim != input.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    size = input.shape[d] if input.ndim else 1  # a 0-d input is one element along dim 0
    bad = a[(a < 0) | (a >= size)]
    if bad.size:
        raise RuntimeError(f"index {bad.flat[0]} is out of bounds for dimension {d} with size {size}")
    if input.ndim == 0:
        return keep_arguments(_take(_GATHER, input, _flat_positions(input)), dim=dim, sparse_grad=False)
    grid = list(np.indices(a.shape, sparse=True))
    grid[d] = a
    return keep_arguments(_take(_GATHER, input, _flat_positions(input)[tuple(grid)]), dim=dim, sparse_grad=False)


@declare(signature="input, indices, dim=None, *, out=None", operands=2, batch=composite)
def take_along_dim(input, indices, dim=None):
    """The elements of input at `indices` along dim, input and indices
    broadcast to each other along the other dims (numpy.take_along_axis);
    without dim, of the flattened input at the flattened indices.

    >>> import tape
    >>> tape.take_along_dim(tape.tensor([[1., 5.], [4., 2.]]), tape.tensor([[1], [0]]), dim=1).tolist()
    [[5.0], [4.0]]
    """
    if indices.dtype != np.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{scalar_type_name(indices.dtype)}")
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    if input.ndim != indices.ndim:
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same number of dimensions, "
                           f"but got {input.ndim} dimensions for input, and {indices.ndim} dimensions for indices")
    d = _norm_dim(dim, input.ndim)
    others = list(broadcast_shapes(input.shape[:d] + (1,) + input.shape[d + 1:],
                                   indices.shape[:d] + (1,) + indices.shape[d + 1:]))
    return input.expand(others[:d] + [input.shape[d]] + others[d + 1:]).gather(
        d, indices.expand(others[:d] + [indices.shape[d]] + others[d + 1:]))


@declare(signature="input, offset=0, dim1=0, dim2=1", batch=along("dim1", "dim2"))
def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal (above it for offset > 0) of the planes of dims dim1 and dim2, as the last dim."""
    d1, d2 = _norm_dim(dim1, input.ndim), _norm_dim(dim2, input.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    positions = np.diagonal(_flat_positions(input), offset, d1, d2)
    ints = np.asarray(positions, np.int64).reshape(-1) if input._rg and state.tape.grad_enabled else None
    return keep_arguments(_view_result(_DIAGONAL, input, _diagonal_view(input._memory(), offset, d1, d2), ints=ints),
                          dim1=dim1, dim2=dim2, offset=offset)


def _diagonal_view(a, offset, d1, d2):
    """The diagonal of a as a writable view of a's memory, as PyTorch's (NumPy's is read-only)."""
    start = [slice(None)] * a.ndim
    if offset >= 0:
        start[d2] = slice(min(offset, a.shape[d2]), None)
    else:
        start[d1] = slice(min(-offset, a.shape[d1]), None)
    first = a[tuple(start)]
    diagonal = np.diagonal(first, 0, d1, d2)
    return np.lib.stride_tricks.as_strided(first, diagonal.shape, diagonal.strides)


# diag of a vector places it on a diagonal of zeros: the gradient gathers g
# from there (the index_put kernel); diag of a matrix gathers a diagonal, a
# copy, which PyTorch records as DiagonalBackward0_copy
_DIAG_EMBED = defop("diag_embed", "DiagEmbedBackward0", 1, vjp=_scatter_vjp, native=_scatter_native,
                    saved=(("dim1", "arg"), ("dim2", "arg"), ("offset", "arg")))
_DIAG_COPY = _taken("diag_copy", "DiagonalBackward0_copy", _DIAGONAL_SAVED)


def _diag(input, diagonal, ndim):
    """diag of input's last `ndim` dims, a vector or a matrix; the dims before
    them are batch dims (vmap's)."""
    if ndim == 2:
        return keep_arguments(_take(_DIAG_COPY, input, np.diagonal(_flat_positions(input), diagonal, -2, -1)),
                              dim1=0, dim2=1, offset=diagonal)
    if ndim != 1:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {ndim}D")
    k = int(diagonal)
    n = input.shape[-1] + builtins.abs(k)
    lead = input.shape[:-1]
    count = int(np.prod(lead, dtype=np.int64))
    diagonal_at = np.diagonal(np.arange(n * n).reshape(n, n), k).astype(np.int64)
    positions = (np.arange(count, dtype=np.int64)[:, None] * (n * n) + diagonal_at).reshape(-1)
    value = np.zeros(count * n * n, input.dtype)
    value[positions] = input._array().reshape(-1)
    return keep_arguments(op_result(_DIAG_EMBED, value.reshape(lead + (n, n)), (input,), ints=positions),
                          dim1=-2, dim2=-1, offset=diagonal)


def _diag_rule(op, args):
    x = args.arguments["input"]
    return batched(_diag(x.phys, args.arguments["diagonal"], x.ndim), x.levels)


@declare(signature="input, diagonal=0, *, out=None", batch=_diag_rule)
def diag(input, diagonal=0):
    """Of a vector, the square matrix with it on the `diagonal`-th diagonal
    (above the main one for diagonal > 0); of a matrix, that diagonal, a copy.

    >>> import tape
    >>> tape.diag(tape.tensor([1., 2.])).tolist()
    [[1.0, 0.0], [0.0, 2.0]]
    >>> tape.diag(tape.tensor([[1., 2.], [3., 4.]]), 1).tolist()
    [2.0]
    """
    return _diag(input, diagonal, input.ndim)


def _trace_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    for k in range(ints.size):
        GA[ints[k]] += G[0]


def _trace_vjp(ctx, g):
    return (_scatter(expand(g, (len(ctx.ints),)), ctx.ints, ctx.x_shape, unique=True),)


_TRACE = defop("trace", "TraceBackward0", 1, vjp=_trace_vjp, native=_trace_native, saved=_SIZES)


def _a_matrix(input):
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    if input.dtype == np.bool_:
        raise not_implemented_for("trace", np.bool_)


def _trace_rule(op, args):
    """trace of each sample: the sum of its diagonal."""
    x = args.arguments["input"]
    _a_matrix(x)
    return x.diagonal(0, -2, -1).sum(-1)


@declare(signature="input, *, out=None", batch=_trace_rule)
def trace(input):
    """The sum of the main diagonal of a matrix (int64 for integer matrices).

    >>> import tape
    >>> tape.trace(tape.tensor([[1., 2.], [3., 4.]])).item()
    5.0
    """
    _a_matrix(input)
    a = input._array()
    positions = np.diagonal(_flat_positions(input)).astype(np.int64)
    value = np.trace(a, dtype=np.int64 if a.dtype.kind in "iu" else None)
    return op_result(_TRACE, value, (input,), ints=positions)


def _triangle_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    # g where the element is kept: column - row - diagonal >= 0 for triu (pp
    # 1), <= 0 for tril (pp -1)
    rows, cols = osh[osh.size - 2], osh[osh.size - 1]
    for i in range(G.size):
        if pp * ((i % cols) - (i // cols) % rows - ints[0]) >= 0:
            GA[i] += G[i]


def _triangle_vjp(ctx, g):
    return ((triu if ctx.p == 1.0 else tril)(g, int(ctx.ints[0])),)


_TRIU = defop("triu", "TriuBackward0", 1, vjp=_triangle_vjp, native=_triangle_native, saved=(("diagonal", "arg"),))
_TRIL = defop("tril", "TrilBackward0", 1, vjp=_triangle_vjp, native=_triangle_native, saved=(("diagonal", "arg"),))


def _matrices(name, input):
    if input.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")


def _triangle_rule(op, args):
    """triu and tril of each sample: of the last two dims, the batch dims in front."""
    _matrices(op.__name__, args.arguments["input"])
    return leading(op, args)


def _triangle(name, opdef, keep, side):
    def op(input, diagonal=0):
        _matrices(name, input)
        return keep_arguments(op_result(opdef, keep(input._array(), diagonal), (input,), p=side, ints=(int(diagonal),)),
                              diagonal=diagonal)
    op.__name__ = name
    op.__doc__ = f"input with the elements {'below' if name == 'triu' else 'above'} the diagonal zeroed."
    return declare(op, signature="input, diagonal=0, *, out=None", batch=_triangle_rule)


triu = _triangle("triu", _TRIU, np.triu, 1.0)
tril = _triangle("tril", _TRIL, np.tril, -1.0)


__all__ = exports(globals())
