"""Reductions: sum and mean, over everything or over `dim` (int or tuple),
with `keepdim`. The native kernel broadcasts g back, scaled by p (1/n for mean).
"""
import math

import numpy as np

from tape._broadcast import bcast_index, trailing_block
from tape._dtypes import as_dtype, scalar_type_name
from tape._record import record
from tape._registry import defop
from tape._tape import state
from tape._tensor import Tensor, _norm_dim, new_tensor, wrap_value

from ops.shape import expand, reshape

__all__ = ["sum", "mean"]


def _reduce_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    block = trailing_block(xsh, ints)
    if G.size == 1:
        g = G[0] * pp
        for i in range(GA.size):
            GA[i] += g
    elif block > 0:
        for o in range(0, GA.size, block):
            for j in range(block):
                GA[o + j] += G[j] * pp
    else:
        for i in range(GA.size):
            GA[i] += G[bcast_index(i, xsh, ints)] * pp


def _reduce_vjp(ctx, g):
    g = expand(reshape(g, tuple(ctx.ints)), ctx.x_shape)
    return (g if ctx.p == 1.0 else g * ctx.p,)


_SUM_ALL = defop("sum", "SumBackward0", 1, vjp=_reduce_vjp, native=_reduce_native)
_SUM_DIM = defop("sum_dim", "SumBackward1", 1, vjp=_reduce_vjp, native=_reduce_native)
_MEAN_ALL = defop("mean", "MeanBackward0", 1, vjp=_reduce_vjp, native=_reduce_native)
_MEAN_DIM = defop("mean_dim", "MeanBackward1", 1, vjp=_reduce_vjp, native=_reduce_native)


def _dims(x, dim):
    """The sorted dims to reduce, or None for all; an empty list of dims
    means all of them, as in PyTorch."""
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    if not dims:
        return tuple(range(x.ndim))
    out = []
    for d in dims:
        d = _norm_dim(d, x.ndim)
        if d in out:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        out.append(d)
    return tuple(sorted(out))


def _reduce(x, dim, keepdim, dtype, ops_all, ops_dim, mean):
    dims = _dims(x, dim)
    a = x._array()
    if dtype is not None:
        a = a.astype(as_dtype(dtype))
    axis = None if dims is None or x.ndim == 0 else dims
    shape = x.shape
    # a 0-d tensor takes dim 0 or -1, which reduces nothing
    reduced = range(len(shape)) if dims is None else dims if shape else ()
    count = math.prod(shape[k] for k in reduced)
    # np.add.reduce is np.sum without its Python wrapper, and np.mean is that
    # sum over the count (an empty mean is left to np.mean: nan, with its warning)
    if mean and not count:
        value = np.mean(a, axis=axis, keepdims=keepdim)
    else:
        value = np.add.reduce(a, axis=axis, keepdims=keepdim)
        if mean:
            value = value / count
    value = wrap_value(value)
    if not (x._rg and state.tape.grad_enabled):
        return new_tensor(value)
    kshape = tuple(1 if k in reduced else d for k, d in enumerate(shape))
    p = 1.0 / count if mean and count else 1.0
    return record(ops_all if dims is None else ops_dim, value, (x,), p=p, ints=kshape)


def _numpy_names(dim, keepdim, axis, keepdims):
    # PyTorch takes NumPy's names too: axis for dim, keepdims for keepdim
    return (dim if axis is None else axis), (keepdim if keepdims is None else keepdims)


def sum(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    """Sum of all elements, or over `dim` (an int or a tuple).

    >>> import tape
    >>> tape.sum(tape.tensor([[1., 2.], [3., 4.]]), dim=0)
    tensor([4., 6.])
    """
    dim, keepdim = _numpy_names(dim, keepdim, axis, keepdims)
    return _reduce(input, dim, keepdim, dtype, _SUM_ALL, _SUM_DIM, False)


def mean(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    """Mean of all elements, or over `dim` (an int or a tuple)."""
    if input.dtype.kind not in "fc" and dtype is None:
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a floating "
                           f"point or complex dtype. Got: {scalar_type_name(input.dtype)}")
    dim, keepdim = _numpy_names(dim, keepdim, axis, keepdims)
    return _reduce(input, dim, keepdim, dtype, _MEAN_ALL, _MEAN_DIM, True)


Tensor.sum = sum
Tensor.mean = mean
