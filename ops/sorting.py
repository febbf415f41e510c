"""Indices and sorting: argmax and argmin (int64 results, constants), sort,
argsort, msort and topk. The values of sort and topk are the input's elements
at computed positions, recorded as a gather (one row under PyTorch's
grad_fn name) whose gradient scatters back to the sorted positions."""
import collections

import numpy as np

from ops._declare import declare, exports
from tape._batched import along, elementwise, over_dims
from tape._node import keep_arguments
from tape._registry import SAVES_ROW, RowTensor, defop
from tape._tensor import Tensor, _norm_dim, new_tensor, wrap_value

from ops.shape import _flat_positions, _gather, _gather_native, _index_vjp, gathered_index


def _arg_extreme(name, arg):
    def op(input, dim=None, keepdim=False):
        a = input._array()
        if a.dtype == np.bool_:
            raise RuntimeError(f"{name}(): does not support bool input")
        if dim is None:
            if a.size == 0:
                raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")
            index = np.asarray(arg(a), np.int64)
            if keepdim:
                index = index.reshape((1,) * a.ndim)
        elif a.ndim == 0:
            _norm_dim(dim, 0)
            index = np.zeros((), np.int64)
        else:
            d = _norm_dim(dim, a.ndim)
            if a.shape[d] == 0:
                raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
            index = np.asarray(arg(a, axis=d, keepdims=keepdim), np.int64)
        return new_tensor(wrap_value(index))
    op.__name__ = name
    op.__doc__ = f"""The index of the {'largest' if name == 'argmax' else 'smallest'} element, over the
    flattened tensor or along `dim`: the first one on a tie, and the first nan
    if there is one, as in PyTorch. The result is int64 and has no gradient.

    >>> import tape
    >>> tape.{name}(tape.tensor([[1., 3., 3.], [2., 0., 2.]]), dim=1).tolist()
    {[1, 0] if name == 'argmax' else [0, 1]}
    """
    return op


# the index over all dims is that into each sample flattened
argmax = declare(_arg_extreme("argmax", np.argmax), signature="input, dim=None, keepdim=False, *, out=None",
                 batch=over_dims(tuple_dims=False))
argmin = declare(_arg_extreme("argmin", np.argmin), signature="input, dim=None, keepdim=False, *, out=None",
                 batch=over_dims(tuple_dims=False))

# named tuples, as torch.return_types.sort and torch.return_types.topk
_SortResult = collections.namedtuple("sort", ["values", "indices"])
_TopkResult = collections.namedtuple("topk", ["values", "indices"])

_SAVED = (("dim", "arg"), ("indices", RowTensor(gathered_index)), ("self_sym_sizes", "x_shape"))
_SORT = defop("sort", "SortBackward0", 1, saves=SAVES_ROW, vjp=_index_vjp, native=_gather_native, saved=_SAVED)
_TOPK = defop("topk", "TopkBackward0", 1, saves=SAVES_ROW, vjp=_index_vjp, native=_gather_native, saved=_SAVED)


def _sorted_order(a, d, descending):
    """The stable order of `a` along dim d, nan counting as the largest value
    (PyTorch's). Descending is the ascending order of the reversed lines,
    reversed: ties keep their order, and nan comes first."""
    if not descending:
        return np.argsort(a, axis=d, kind="stable")
    n = a.shape[d]
    return n - 1 - np.flip(np.argsort(np.flip(a, d), axis=d, kind="stable"), d)


def _selected(opdef, input, dim, d, order, result):
    """(input's elements at `order` along dim d, order) as `result`; `dim` as given."""
    positions = np.take_along_axis(_flat_positions(input), order, d)
    values = keep_arguments(_gather(opdef, input, positions.reshape(-1), order.shape), dim=dim)
    return result(values, new_tensor(wrap_value(order.astype(np.int64))))


@declare(signature="input, dim=-1, descending=False, *, stable=False, out=None", batch=along("dim"))
def sort(input, dim=-1, descending=False, *, stable=False):
    """The elements of `input` sorted along `dim`, and their indices there.

    The sort is stable whatever `stable` says (PyTorch's CPU sort is too);
    nan counts as the largest value. The values' gradient goes back to the
    positions they came from.

    >>> import tape
    >>> tape.sort(tape.tensor([3., 1., 2.]), descending=True).indices.tolist()
    [0, 2, 1]
    """
    d = _norm_dim(dim, input.ndim)
    if input.ndim == 0:
        return _SortResult(keep_arguments(_gather(_SORT, input, np.zeros(1, np.int64), ()), dim=dim),
                           new_tensor(np.zeros((), np.int64)))
    return _selected(_SORT, input, dim, d, _sorted_order(input._array(), d, descending), _SortResult)


@declare(signature="input, dim=-1, descending=False, *, stable=False, out=None", batch=along("dim"))
def argsort(input, dim=-1, descending=False, *, stable=False):
    """The indices that sort `input` along `dim` (`sort(...).indices`).

    >>> import tape
    >>> tape.argsort(tape.tensor([3., 1., 2.])).tolist()
    [1, 2, 0]
    """
    d = _norm_dim(dim, input.ndim)
    if input.ndim == 0:
        return new_tensor(np.zeros((), np.int64))
    return new_tensor(_sorted_order(input._array(), d, descending).astype(np.int64))


def _msort_rule(op, args):
    """msort's rule: sort's along dim 0 of each sample (the method of a
    batched tensor is its rule)."""
    return args.arguments["input"].sort(0).values


@declare(signature="input, *, out=None", batch=_msort_rule)
def msort(input):
    """`input` sorted along its first dim (`sort(input, dim=0).values`).

    >>> import tape
    >>> tape.msort(tape.tensor([[2., 0.], [1., 5.]])).tolist()
    [[1.0, 0.0], [2.0, 5.0]]
    """
    return sort(input, 0).values


@declare(signature="input, k, dim=-1, largest=True, sorted=True, *, out=None", batch=along("dim"))
def topk(input, k, dim=-1, largest=True, sorted=True):
    """The `k` largest (or smallest) elements of `input` along `dim`, and
    their indices, largest first (smallest first for largest=False).

    nan counts as the largest value. Ties are taken in the order of their
    positions; PyTorch's partial sort may take tied indices in another order.
    `sorted=False` returns them sorted too (PyTorch leaves the order unspecified).

    >>> import tape
    >>> tape.topk(tape.tensor([1., 4., 2., 3.]), 2).values.tolist()
    [4.0, 3.0]
    """
    d = _norm_dim(dim, input.ndim)
    n = input.shape[d] if input.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    if input.ndim == 0:  # the element, for k = 0 too, as PyTorch gives it
        return _TopkResult(keep_arguments(_gather(_TOPK, input, np.zeros(1, np.int64), ()), dim=dim),
                           new_tensor(np.zeros((), np.int64)))
    order = _sorted_order(input._array(), d, largest)
    return _selected(_TOPK, input, dim, d, np.take(order, np.arange(k), axis=d), _TopkResult)


def _positions(sorted_sequence, values, right, side, out_int32):
    """Where values would go in sorted_sequence (each row of it for a
    batch): np.searchsorted of each row, as int64 (int32 with out_int32)."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("side and right can't be set to opposites, got side of left while right was True")
        right = side == "right"
    seq = sorted_sequence._array() if isinstance(sorted_sequence, Tensor) else np.asarray(sorted_sequence)
    v = values._array() if isinstance(values, Tensor) else np.asarray(values)
    side = "right" if right else "left"
    if seq.ndim <= 1:
        out = np.searchsorted(seq, v, side)
    else:
        if seq.shape[:-1] != v.shape[:-1]:
            raise RuntimeError(f"torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                               f"dimensions of boundaries tensor and input value tensor must match, but we got "
                               f"boundaries tensor {list(seq.shape)} and input value tensor {list(v.shape)}")
        rows = seq.reshape(-1, seq.shape[-1])
        out = np.stack([np.searchsorted(r, w, side) for r, w in zip(rows, v.reshape(len(rows), -1))]).reshape(v.shape)
    return new_tensor(wrap_value(np.asarray(out, np.int32 if out_int32 else np.int64)))


@declare(signature="sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None, out=None",
         methods=(), operands=2, batch=elementwise)
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """The indices where the elements of input would be inserted into
    sorted_sequence (along its last dim) to keep it sorted; no gradient."""
    if sorter is not None:
        sorted_sequence = sorted_sequence.gather(-1, sorter)
    return _positions(sorted_sequence, input, right, side, out_int32)


@declare(signature="input, boundaries, *, out_int32=False, right=False, out=None", methods=(), operands=2,
         batch=elementwise)
def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The index of the bucket of `boundaries` (1-D, sorted) each element of input falls in; no gradient."""
    if isinstance(boundaries, Tensor) and boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return _positions(boundaries, input, right, None, out_int32)


__all__ = exports(globals())
