"""Reductions: sum and mean, over everything or over `dim` (int or tuple),
with `keepdim`. The native kernel broadcasts g back, scaled by p (1/n for mean).
"""
import builtins
import collections
import inspect
import math
import warnings

import numpy as np

from ops._declare import declare, exports
from tape._batched import NO_RULE, BatchedTensor, along, batched, composite, elementwise, over_dims
from tape._broadcast import bcast_index, trailing_block
from tape._dtypes import as_dtype, get_default_dtype, not_implemented_for, scalar_type_name
from tape._node import int_list, keep_arguments
from tape._record import op_result, quiet, record
from tape._registry import SAVES_OUT, SAVES_ROW, SAVES_X, RowTensor, defop, native_helper
from tape._tape import state
from tape._tensor import Tensor, _norm_dim, new_tensor, wrap_value

from ops.elementwise import maximum, minimum
from ops.shape import (_gather, _gather_native, _index_vjp, _no_gradient, _no_gradient_native, cat, expand,
                       gathered_index, reshape, stack)

# the batching rules of reductions over dims given as an int or a tuple, and
# over one int dim (every dim of a sample flattened into one for "all")
_over_dims = over_dims()
_over_one_dim = over_dims(tuple_dims=False)


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


# NumPy's pairwise summation (pairwise_sum in its umath loops: blocks of 128
# summed with 8 accumulators, halves split at multiples of 8): a replay's
# full sum is then eager mode's to the bit, and 4x faster than one running
# total, whose every add waits for the one before it. NumPy before 2.3 sums
# past 8192 elements in chunks of its buffer size (np.setbufsize), added one
# after another; there the two agree to rounding
@native_helper
def _block_sum(X, lo, n):
    if n < 8:
        total = 0.0
        for i in range(lo, lo + n):
            total += X[i]
        return total
    r0, r1, r2, r3, r4, r5, r6, r7 = X[lo], X[lo + 1], X[lo + 2], X[lo + 3], X[lo + 4], X[lo + 5], X[lo + 6], X[lo + 7]
    whole = lo + n - n % 8
    for i in range(lo + 8, whole, 8):
        r0 += X[i]
        r1 += X[i + 1]
        r2 += X[i + 2]
        r3 += X[i + 3]
        r4 += X[i + 4]
        r5 += X[i + 5]
        r6 += X[i + 6]
        r7 += X[i + 7]
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(whole, lo + n):
        total += X[i]
    return total


@native_helper
def pairwise_sum(X):
    """The sum of X's elements in NumPy's order: its recursion over halves,
    walked with a stack of (start, count) to split, or -1 to add the two
    sums on top of the sums' stack."""
    starts = np.empty(192, np.int64)
    counts = np.empty(192, np.int64)
    sums = np.empty(64)
    top = 0
    starts[0], counts[0] = 0, X.size
    done = 0
    while top >= 0:
        lo, n = starts[top], counts[top]
        top -= 1
        if n < 0:
            done -= 1
            sums[done - 1] += sums[done]
        elif n <= 128:
            sums[done] = _block_sum(X, lo, n)
            done += 1
        else:
            half = n // 2
            half -= half % 8
            starts[top + 1], counts[top + 1] = 0, -1
            starts[top + 2], counts[top + 2] = lo + half, n - half
            starts[top + 3], counts[top + 3] = lo, half
            top += 3
    return 0.0 + sums[0]


def _reduce_forward(X, Y, O, osh, xsh, ysh, ints, pp):
    # the sum of X's elements over the dims ints keeps as 1, over their count
    # for a mean (pp is 1/count then): divided, as eager mode's value is
    count = X.size // O.size if O.size else 0
    if O.size == 1:
        O[0] = pairwise_sum(X) if pp == 1.0 else pairwise_sum(X) / count
        return
    for j in range(O.size):
        O[j] = 0.0
    for i in range(X.size):
        O[bcast_index(i, xsh, ints)] += X[i]
    if pp != 1.0:
        for j in range(O.size):
            O[j] /= count


def _reduce_vjp(ctx, g):
    g = expand(reshape(g, tuple(ctx.ints)), ctx.x_shape)
    return (g if ctx.p == 1.0 else g * ctx.p,)


# PyTorch's nodes of reductions over dims also show dim and keepdim as they
# were given, which the row's kept shape does not tell (a reduced dim of size 1)
_SIZES = (("self_sym_sizes", "x_shape"),)
_OVER_DIMS = (("dim", "arg"), ("keepdim", "arg"))
_NUMEL = (("self_sym_numel", lambda row: math.prod(row.x_shape)),)
_SUM_ALL = defop("sum", "SumBackward0", 1, vjp=_reduce_vjp, native=_reduce_native,
                  forward_native=_reduce_forward, saved=_SIZES)
_SUM_DIM = defop("sum_dim", "SumBackward1", 1, vjp=_reduce_vjp, native=_reduce_native,
                 forward_native=_reduce_forward, saved=_OVER_DIMS + _SIZES)
_MEAN_ALL = defop("mean", "MeanBackward0", 1, vjp=_reduce_vjp, native=_reduce_native,
                  forward_native=_reduce_forward, saved=_SIZES + _NUMEL)
_MEAN_DIM = defop("mean_dim", "MeanBackward1", 1, vjp=_reduce_vjp, native=_reduce_native,
                  forward_native=_reduce_forward, saved=_OVER_DIMS + _SIZES + _NUMEL)


def _dims(x, dim):
    """The sorted dims to reduce, or None for all; an empty list of dims
    means all of them, as in PyTorch. A 0-d tensor takes dim 0 and -1 (and
    refuses others) as PyTorch does, and has no axis: its dims are ()."""
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
    return tuple(sorted(out)) if x.ndim else ()


def _kept_shape(shape, reduced):
    """`shape` with the `reduced` dims kept as 1s: the row's ints of a
    reduction, by which its native kernel broadcasts g back."""
    return tuple(1 if k in reduced else d for k, d in enumerate(shape))


def _reduce(x, dim, keepdim, dtype, ops_all, ops_dim, mean):
    dims = _dims(x, dim)
    a = x._array()
    if dtype is not None:
        a = a.astype(as_dtype(dtype))
    elif a.dtype.kind == "u":  # NumPy sums unsigned ints as uint64, PyTorch as int64
        a = a.astype(np.int64)
    shape = a.shape
    if dims is None or not shape:  # all of it; a 0-d tensor takes dim 0 or -1, which reduces nothing
        axis = None
        count = a.size
        kshape = (1,) * len(shape)
    else:
        axis = dims
        count = math.prod([shape[k] for k in dims])
        kshape = _kept_shape(shape, dims)
    # np.add.reduce is np.sum without its Python wrapper, and np.mean is that
    # sum over the count; an empty mean is nan, without NumPy's warnings, as in PyTorch
    if mean and not count:
        value = np.full(np.add.reduce(a, axis=axis, keepdims=keepdim).shape, np.nan, a.dtype)
    else:
        # inf + -inf is nan without NumPy's warning, as in PyTorch
        value = quiet(np.add.reduce, a, axis, None, None, keepdim)
        if mean:
            value = value / count
    value = wrap_value(value)
    if not (x._rg and state.tape.grad_enabled):
        return new_tensor(value)
    # the mean of no elements is nan, as the value above: a replay's native
    # forward scales the sum (0.0) by p (its backward has no element to scale)
    p = (1.0 / count if count else math.nan) if mean else 1.0
    if dims is None:
        return record(ops_all, value, (x,), p=p, ints=kshape)
    return keep_arguments(record(ops_dim, value, (x,), p=p, ints=kshape), dim=int_list(dim), keepdim=keepdim)


def _numpy_names(dim, keepdim, axis, keepdims):
    # PyTorch takes NumPy's names too: axis for dim, keepdims for keepdim
    return (dim if axis is None else axis), (keepdim if keepdims is None else keepdims)


def _numpy_named_rule(op, args):
    """The rule of sum and mean: over_dims', once NumPy's names are PyTorch's."""
    a = args.arguments
    a["dim"], a["keepdim"] = _numpy_names(a["dim"], a["keepdim"], a["axis"], a["keepdims"])
    a["axis"] = a["keepdims"] = None
    return _over_dims(op, args)


_REDUCTION = "input, dim=None, keepdim=False, *, dtype=None, out=None"


@declare(signature=_REDUCTION, batch=_numpy_named_rule)
def sum(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    """Sum of all elements, or over `dim` (an int or a tuple).

    >>> import tape
    >>> tape.sum(tape.tensor([[1., 2.], [3., 4.]]), dim=0)
    tensor([4., 6.])
    """
    dim, keepdim = _numpy_names(dim, keepdim, axis, keepdims)
    return _reduce(input, dim, keepdim, dtype, _SUM_ALL, _SUM_DIM, False)


@declare(signature=_REDUCTION, batch=_numpy_named_rule)
def mean(input, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
    """Mean of all elements, or over `dim` (an int or a tuple)."""
    if input.dtype.kind not in "fc" and dtype is None:
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a floating "
                           f"point or complex dtype. Got: {scalar_type_name(input.dtype)}")
    dim, keepdim = _numpy_names(dim, keepdim, axis, keepdims)
    return _reduce(input, dim, keepdim, dtype, _MEAN_ALL, _MEAN_DIM, True)


def _prod_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    # PyTorch's prod_backward: g * (out / x) when no element of x is 0;
    # else g times the product of the others, the exclusive running product
    # from the left times that from the right (no division: exact at zeros),
    # in PyTorch's order of rounding. ints is (dim,), or () for all of x as
    # one line; a 0-d x passes g through.
    if xsh.size == 0:
        GA[0] += G[0]
        return
    if ints.size == 0:
        outer, n, inner = 1, X.size, 1
    else:
        outer, n, inner = lines_along(xsh, ints[0])
    zeros = False
    for i in range(X.size):
        if X[i] == 0:
            zeros = True
            break
    right = np.empty(n)
    for o in range(outer):
        for k in range(inner):
            base = o * n * inner + k
            j = o * inner + k
            if not zeros:
                for t in range(n):
                    GA[base + t * inner] += G[j] * (O[j] / X[base + t * inner])
                continue
            product = 1.0
            for t in range(n - 1, -1, -1):
                right[t] = product
                product *= X[base + t * inner]
            product = 1.0
            for t in range(n):
                i = base + t * inner
                GA[i] += G[j] * (product * right[t])
                product *= X[i]


def _prod_vjp(ctx, g):
    """PyTorch's prod_backward in tape ops, so differentiable again: g * (out
    / x) when no element of x is 0, else g times the product of the others,
    cumprods of x from both ends shifted by one (exact at zeros, and their
    own gradients are cumprod's, exact there too)."""
    from ops.selection import flip
    from ops.shape import narrow
    shape = ctx.x_shape
    if not shape:  # the product of a 0-d tensor is it: g, as PyTorch's (not g * x / x)
        return (g,)
    x = ctx.x
    everything = not len(ctx.ints)
    d = 0 if everything else int(ctx.ints[0])
    kept = (1,) * len(shape) if everything else shape[:d] + (1,) + shape[d + 1:]
    if not (x._array() == 0).any():
        return (reshape(g, kept) * (reshape(ctx.out, kept) / x),)
    if everything:  # one line of every element, as PyTorch's
        x, kept = reshape(x, (-1,)), (1,)
    n = x.shape[d]
    if n == 1:
        return (reshape(g, shape),)
    ones = new_tensor(np.ones(kept, x.dtype))
    before = cumprod(cat([ones, narrow(x, d, 0, n - 1)], d), d)
    after = flip(cumprod(cat([ones, flip(narrow(x, d, 1, n - 1), d)], d), d), d)
    return (reshape(reshape(g, kept) * (before * after), shape),)


_PROD_ALL = defop("prod", "ProdBackward0", 1, saves=SAVES_X | SAVES_OUT, vjp=_prod_vjp, native=_prod_native)
_PROD_DIM = defop("prod_dim", "ProdBackward1", 1, saves=SAVES_X | SAVES_OUT, vjp=_prod_vjp, native=_prod_native,
                  saved=(("self", "x"), ("result", "out")) + _OVER_DIMS)


@declare(signature=_REDUCTION, batch=_over_one_dim)
def prod(input, dim=None, keepdim=False, *, dtype=None):
    """Product of all elements, or along dim (one int): one node, as
    PyTorch's, whose gradient is exact at zeros to every order."""
    a = input._array()
    if dtype is not None:
        a = a.astype(as_dtype(dtype), copy=False)
    elif a.dtype.kind in "bui":
        a = a.astype(np.int64, copy=False)  # PyTorch's integer products are int64
    if dim is None:
        opdef, axis, ints = _PROD_ALL, None, ()
    else:
        _one_dim("prod", dim)
        d = _norm_dim(dim, input.ndim)
        opdef, axis, ints = _PROD_DIM, d if input.ndim else None, (d,)
    # in a's dtype (NumPy's would widen small ints); inf * 0 is nan without
    # NumPy's warning, as in PyTorch
    value = quiet(np.multiply.reduce, a, axis, a.dtype, None, keepdim and input.ndim > 0)
    out = op_result(opdef, value, (input,), ints=ints)
    return out if dim is None else keep_arguments(out, dim=dim, keepdim=keepdim)


def _extreme_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    # the gradient of each output goes in equal parts to the inputs that attain it
    count = np.zeros(O.size)
    for i in range(X.size):
        j = bcast_index(i, xsh, ints)
        if X[i] == O[j]:
            count[j] += 1.0
    # g times a 0/1 mask, as PyTorch's (a nan g gives nan everywhere, as there)
    for i in range(X.size):
        j = bcast_index(i, xsh, ints)
        GA[i] += G[j] * (1.0 if X[i] == O[j] else 0.0) / count[j]


def _evenly_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    # max() and min() of all elements: a nan result is attained by the nans
    # (PyTorch's evenly_distribute_backward; amax's mask, x == out, has none)
    nan = O[0] != O[0]
    count = 0.0
    for i in range(X.size):
        if (X[i] != X[i]) if nan else (X[i] == O[0]):
            count += 1.0
    # the others get 0, not g * 0: an inf g stays off them (PyTorch's masked_fill)
    share = G[0] / count
    for i in range(X.size):
        if (X[i] != X[i]) if nan else (X[i] == O[0]):
            GA[i] += share


def _line_shares(attained, kshape, dtype):
    """A constant: 1/k on the k elements of each line (reduced to `kshape`)
    that `attained` marks, 0 elsewhere."""
    reduced = tuple(k for k, d in enumerate(kshape) if d == 1 and attained.shape[k] != 1)
    mask = attained.astype(dtype)
    return new_tensor(wrap_value(quiet(np.divide, mask, mask.sum(axis=reduced, keepdims=True))))


def _extreme_vjp(ctx, g, evenly=False):
    kshape = tuple(ctx.ints)
    x = ctx.x._array()
    out = np.reshape(ctx.out._array(), kshape)
    attained = np.isnan(x) if evenly and np.isnan(out).all() else x == out
    spread = expand(reshape(g, kshape), ctx.x_shape) * _line_shares(attained, kshape, x.dtype)
    return (spread.where(attained, 0.0) if evenly else spread,)


def _evenly_vjp(ctx, g):
    return _extreme_vjp(ctx, g, evenly=True)


_EXTREMES = {name: defop(name, grad_fn, 1, saves=SAVES_X | SAVES_OUT, vjp=vjp, native=native,
                         saved=(("self", "x"), ("result", "out")) + over)
             for name, grad_fn, over, vjp, native in (
                 ("amax", "AmaxBackward0", _OVER_DIMS, _extreme_vjp, _extreme_native),
                 ("amin", "AminBackward0", _OVER_DIMS, _extreme_vjp, _extreme_native),
                 ("max_all", "MaxBackward1", (), _evenly_vjp, _evenly_native),
                 ("min_all", "MinBackward1", (), _evenly_vjp, _evenly_native))}


def _extreme(x, dim, keepdim, ufunc, opdef, name):
    all_dims = dim is None or not isinstance(dim, (int, np.integer)) and not tuple(dim)
    a = x._array()
    if all_dims and a.size == 0:
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                           f"Specify the reduction dim with the 'dim' argument.")
    reduced = tuple(range(x.ndim)) if all_dims else _dims(x, dim)
    for given in ((dim,) if isinstance(dim, (int, np.integer)) else reduced if all_dims else tuple(dim)):
        if x.ndim and x.shape[_norm_dim(given, x.ndim)] == 0:  # named as given, as PyTorch's
            raise IndexError(f"{name}(): Expected reduction dim {given} to have non-zero size.")
    value = wrap_value(ufunc.reduce(a, axis=reduced if x.ndim else None, keepdims=keepdim))
    if not (x._rg and state.tape.grad_enabled):
        return new_tensor(value)
    kshape = _kept_shape(x.shape, reduced)
    return keep_arguments(record(opdef, value, (x,), ints=kshape), dim=int_list(dim), keepdim=keepdim)


@declare(signature="input, dim=(), keepdim=False, *, out=None", batch=_over_dims)
def amax(input, dim=(), keepdim=False):
    """The largest element over `dim` (all dims by default); ties share the gradient."""
    return _extreme(input, dim, keepdim, np.maximum, _EXTREMES["amax"], "amax")


@declare(signature="input, dim=(), keepdim=False, *, out=None", batch=_over_dims)
def amin(input, dim=(), keepdim=False):
    """The smallest element over `dim` (all dims by default); ties share the gradient."""
    return _extreme(input, dim, keepdim, np.minimum, _EXTREMES["amin"], "amin")


# max(dim) and min(dim) gather the element at each index, the first that
# attains the extreme: the gradient goes there alone, as PyTorch's
_SELECTED = {name: defop(name, grad_fn, 1, saves=SAVES_ROW, vjp=_index_vjp, native=_gather_native,
                         saved=(("dim", "arg"), ("indices", RowTensor(gathered_index)), ("keepdim", "arg"),
                                ("self_sym_sizes", "x_shape")))
             for name, grad_fn in (("max_dim", "MaxBackward0"), ("min_dim", "MinBackward0"))}


def _selected(x, dim, keepdim, arg, opdef, result):
    d = _norm_dim(dim, x.ndim)
    if x.ndim == 0:
        index = np.zeros((), np.int64)
    else:
        if x.shape[d] == 0:
            raise IndexError(f"{opdef.name[:3]}(): Expected reduction dim {d} to have non-zero size.")
        index = arg(x._array(), axis=d, keepdims=True)
    grids = np.ix_(*[np.arange(n) for n in index.shape])
    flat = np.ravel_multi_index(tuple(index if k == d else grids[k] for k in range(x.ndim)), x.shape)
    if not keepdim and x.ndim:
        index = np.squeeze(index, d)
    values = keep_arguments(_gather(opdef, x, np.asarray(flat, np.int64).reshape(-1), index.shape),
                            dim=dim, keepdim=keepdim)
    return result(values, new_tensor(wrap_value(np.asarray(index, np.int64))))


def _max_or_min(name, of_two, ufunc, arg):
    result = collections.namedtuple(name, ["values", "indices"])  # as torch.return_types.max

    # PyTorch's overloads max(input, other) and max(input, dim, keepdim): a
    # tensor in dim's place, or other= by keyword, is the elementwise one
    def op(input, dim=None, keepdim=False, *, other=None):
        if other is not None:
            dim = other
        if isinstance(dim, Tensor):
            return of_two(input, dim)
        if dim is None:
            return _extreme(input, None, False, ufunc, _EXTREMES[name + "_all"], name)
        return _selected(input, dim, keepdim, arg, _SELECTED[name + "_dim"], result)
    op.__name__ = name
    op.__doc__ = (f"{name}() of all elements, {name}(dim) as (values, indices), or "
                  f"{name}(other) elementwise.")
    return op


def _max_or_min_rule(extreme):
    """The rule of max and min: elementwise's for max(other), that of
    `extreme` (amax, amin: ties share the gradient) for the max of all, and
    over one dim for max(dim)."""
    def rule(op, args):
        a = args.arguments
        if a["other"] is not None or isinstance(a["dim"], Tensor):
            return elementwise(op, args)
        if a["dim"] is None:
            over_all = inspect.signature(extreme).bind(a["input"])
            over_all.apply_defaults()
            return _over_dims(extreme, over_all)
        return _over_one_dim(op, args)
    return rule


max = declare(_max_or_min("max", maximum, np.maximum, np.argmax),
              signature="input, dim=None, keepdim=False, *, other=None, out=None", operands=2,
              batch=_max_or_min_rule(amax))
min = declare(_max_or_min("min", minimum, np.minimum, np.argmin),
              signature="input, dim=None, keepdim=False, *, other=None, out=None", operands=2,
              batch=_max_or_min_rule(amin))


def _one_dim(name, dim):
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"{name}(): argument 'dim' (position 2) must be int, not {type(dim).__name__}")


def _finite_max(a, axis):
    """The max of a over axis, kept, and 0 where it is not finite (or a is
    empty): subtracted before exp, it keeps exp from overflowing."""
    m = np.max(a, axis=axis, keepdims=True, initial=-np.inf)
    return np.where(np.isfinite(m), m, 0.0).astype(a.dtype, copy=False)


def _line_max(a, axis):
    """The max of a over axis, kept, as softmax subtracts it: an infinite or
    nan max makes the line nan, as in PyTorch (logsumexp's is _finite_max)."""
    return np.max(a, axis=axis, keepdims=True, initial=-np.inf)


# logsumexp, softmax, log_softmax, var and std are each one recorded op, as in
# PyTorch: one row, PyTorch's grad_fn name, a native kernel, and a VJP in tape
# ops (differentiable again)

def _logsumexp_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    for i in range(X.size):
        j = bcast_index(i, xsh, ints)
        GA[i] += G[j] * exp(X[i] - O[j])


def _logsumexp_vjp(ctx, g):
    kshape = tuple(ctx.ints)
    return (reshape(g, kshape) * (ctx.x - reshape(ctx.out, kshape)).exp(),)


_LOGSUMEXP = defop("logsumexp", "LogsumexpBackward0", 1, saves=SAVES_X | SAVES_OUT,
                   vjp=_logsumexp_vjp, native=_logsumexp_native,
                   saved=(("self", "x"), ("result", "out")) + _OVER_DIMS)


@declare(signature="input, dim, keepdim=False, *, out=None", batch=_over_dims)
def logsumexp(input, dim, keepdim=False):
    """log(sum(exp(input), dim)), computed without overflow."""
    x = input if input.dtype.kind in "fc" else input.to(get_default_dtype())  # as PyTorch's
    dims = _dims(x, dim)
    a = x._array()
    m = _finite_max(a, dims)
    total = np.add.reduce(np.exp(a - m), axis=dims, keepdims=True)
    value = quiet(np.log, total) + m
    reduced = range(x.ndim) if dims is None else dims
    if not keepdim and x.ndim:
        value = value.reshape([d for k, d in enumerate(x.shape) if k not in reduced])
    return keep_arguments(op_result(_LOGSUMEXP, value, (x,), ints=_kept_shape(x.shape, reduced)),
                          dim=int_list(dim), keepdim=keepdim)


@native_helper
def lines_along(shape, d):
    """(outer, n, inner) of the lines along dim d of a C-ordered shape: element
    t of line (o, k) is at (o * n + t) * inner + k. A 0-d shape is one line
    of one element."""
    if shape.size == 0:
        return 1, 1, 1
    outer = 1
    for k in range(d):
        outer *= shape[k]
    inner = 1
    for k in range(d + 1, shape.size):
        inner *= shape[k]
    return outer, shape[d], inner


def _softmax_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    # along the dim: softmax (pp 1) out * (g - sum(g * out)), log_softmax
    # (pp 0) g - exp(out) * sum(g)
    outer, n, inner = lines_along(osh, ints[0])
    for o in range(outer):
        for k in range(inner):
            base = o * n * inner + k
            s = 0.0
            for t in range(n):
                i = base + t * inner
                s += G[i] * O[i] if pp else G[i]
            for t in range(n):
                i = base + t * inner
                GA[i] += O[i] * (G[i] - s) if pp else G[i] - exp(O[i]) * s


def _softmax_vjp(ctx, g):
    out = ctx.out
    return (out * (g - sum(g * out, int(ctx.ints[0]), keepdim=True)),)


def _log_softmax_vjp(ctx, g):
    return (g - ctx.out.exp() * sum(g, int(ctx.ints[0]), keepdim=True),)


_SOFTMAX = defop("softmax", "SoftmaxBackward0", 1, saves=SAVES_OUT, vjp=_softmax_vjp,
                 native=_softmax_native, saved=(("result", "out"), ("dim", "arg")))
_LOG_SOFTMAX = defop("log_softmax", "LogSoftmaxBackward0", 1, saves=SAVES_OUT, vjp=_log_softmax_vjp,
                     native=_softmax_native, saved=(("result", "out"), ("dim", "arg")))


def _softmax_input(name, input, dim, dtype):
    """(input in `dtype`, dim as a dim of it), once dim is known to be one int;
    PyTorch has no softmax kernel for integers (an empty tensor needs none)."""
    _one_dim(name, dim)
    x = input if dtype is None else input.to(dtype)
    if x.dtype.kind not in "fc" and x.numel():
        kernel = "lastdim_kernel_impl" if x.ndim == 0 or _norm_dim(dim, x.ndim) == x.ndim - 1 else "kernel_impl"
        raise not_implemented_for(f"{name}_{kernel}", x.dtype)
    return x, _norm_dim(dim, x.ndim)


def _softmax_lines(x):
    """x's value as softmax reads it: 0-d as one line, an (empty) integer tensor as floats."""
    a = x._array().reshape(x.shape or (1,))
    return a if a.dtype.kind in "fc" else a.astype(np.float64)


def _softmax_op(opdef, x, dim, d, value):
    value = value.reshape(x.shape).astype(x.dtype, copy=False)  # an empty integer input's dtype
    return keep_arguments(op_result(opdef, value, (x,), p=1.0 if opdef is _SOFTMAX else 0.0, ints=(d,)), dim=dim)


@declare(signature="input, dim, dtype=None, *, out=None", batch=along("dim"))
def softmax(input, dim, dtype=None):
    """exp(input) over its sum along dim."""
    x, d = _softmax_input("softmax", input, dim, dtype)
    a = _softmax_lines(x)
    e = quiet(np.exp, quiet(np.subtract, a, _line_max(a, d)))
    return _softmax_op(_SOFTMAX, x, dim, d, quiet(np.divide, e, np.add.reduce(e, axis=d, keepdims=True)))


@declare(signature="input, dim, dtype=None, *, out=None", batch=along("dim"))
def log_softmax(input, dim, dtype=None):
    """input less its logsumexp along dim, as (input - max) - log(sum(exp(input - max))):
    adding the max back first would round large logits (1e10 + 1) to its ulp."""
    x, d = _softmax_input("log_softmax", input, dim, dtype)
    a = _softmax_lines(x)
    # quiet: a +inf logit gives inf - inf there, nan as in PyTorch, with no NumPy warning
    z = quiet(np.subtract, a, _line_max(a, d))
    log_sum = quiet(np.log, np.add.reduce(np.exp(z), axis=d, keepdims=True))
    return _softmax_op(_LOG_SOFTMAX, x, dim, d, quiet(np.subtract, z, log_sum))


def _spread(name, input, dim, unbiased, correction):
    """(the dims reduced; their count of
    elements; the degrees of freedom: the count less Bessel's correction
    unless correction=0 or unbiased=False)."""
    if input.dtype.kind not in "fc":
        raise RuntimeError("std and var only support floating point and complex dtypes")
    if correction is None:
        correction = 0 if unbiased is False else 1
    dims = _dims(input, dim) if dim is not None else tuple(range(input.ndim))
    count = math.prod(input.shape[k] for k in dims)
    if count - correction <= 0:
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than the "
                      "reduction factor (input numel divided by output numel).", UserWarning, stacklevel=3)
    return dims, count, count - correction


@native_helper
def group_means(X, xsh, kept):
    """The mean of X over each group of elements that broadcast from one
    element of shape `kept`."""
    n = 1
    for d in kept:
        n *= d
    means = np.zeros(n)
    for i in range(X.size):
        means[bcast_index(i, xsh, kept)] += X[i]
    if n:
        means /= X.size // n if X.size else 1
    return means


def _var_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    # 2 (x - mean) / dof times g; pp is 1 / dof, or nan where PyTorch's
    # gradient is g times nan where x is its mean, else inf (_moment)
    means = group_means(X, xsh, ints)
    for i in range(X.size):
        j = bcast_index(i, xsh, ints)
        if pp != pp:
            GA[i] += G[j] * (np.nan if X[i] == means[j] else np.inf)
        else:
            GA[i] += G[j] * 2.0 * (X[i] - means[j]) * pp


def _std_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    # (x - mean) / (dof * std) times g, and 0 where std is 0, as PyTorch's
    means = group_means(X, xsh, ints)
    for i in range(X.size):
        j = bcast_index(i, xsh, ints)
        if O[j] != 0:
            GA[i] += G[j] * (X[i] - means[j]) * pp / O[j]


def _centred(ctx):
    """x less its mean over the reduced dims (the 1s of the kept shape; a
    size-1 dim that was not reduced is its own mean)."""
    kshape = tuple(ctx.ints)
    return ctx.x - mean(ctx.x, tuple(k for k, d in enumerate(kshape) if d == 1), keepdim=True), kshape


def _var_vjp(ctx, g):
    if math.isnan(ctx.p):  # no degrees of freedom over all elements (_moment): a constant factor
        x = ctx.x._array()
        return (g * new_tensor(wrap_value(np.where(x == x.mean(), np.nan, np.inf).astype(x.dtype))),)
    centred, kshape = _centred(ctx)
    return (reshape(g, kshape) * centred * (2.0 * ctx.p),)


def _over_nonzero(g, out):
    """g / out, and 0 where out is 0 (PyTorch's masked std and norm backward)."""
    zero = new_tensor(wrap_value((out._array() == 0).astype(out.dtype)))  # a constant mask
    return g * (1 - zero) / (out + zero)


def _std_vjp(ctx, g):
    centred, kshape = _centred(ctx)
    return (_over_nonzero(reshape(g, kshape), reshape(ctx.out, kshape)) * centred * ctx.p,)


_MOMENT_ARGUMENTS = (("correction", "scalar"), ("dim", "arg"), ("keepdim", "arg"))
_VAR = defop("var", "VarBackward0", 1, saves=SAVES_X, vjp=_var_vjp, native=_var_native,
             saved=(("self", "x"),) + _MOMENT_ARGUMENTS)
_STD = defop("std", "StdBackward0", 1, saves=SAVES_X | SAVES_OUT, vjp=_std_vjp, native=_std_native,
             saved=(("self", "x"), ("result", "out")) + _MOMENT_ARGUMENTS)


def _shown_correction(dim, unbiased, correction):
    """The correction PyTorch's node shows: as given, else 0 or 1 for
    unbiased, 1 when dim is given (PyTorch's overload of dim and unbiased),
    else None (its overload of correction). A correction=None or dim=None
    given by name reads here as not given."""
    if correction is not None:
        return correction
    if unbiased is not None:
        return int(unbiased)
    return None if dim is None else 1


def _moment(opdef, name, input, dim, unbiased, keepdim, correction):
    if isinstance(dim, bool):  # var(unbiased), PyTorch's older signature
        dim, unbiased = None, dim
    dims, count, dof = _spread(name, input, dim, unbiased, correction)
    a = input._array()
    centred = a - quiet(np.divide, np.add.reduce(a, axis=dims, keepdims=True), count)
    value = quiet(np.divide, np.add.reduce(centred * centred, axis=dims, keepdims=keepdim), builtins.max(dof, 0))
    if opdef is _STD:
        value = np.sqrt(value)
    reduced = range(input.ndim) if dims is None else dims
    # PyTorch's gradient divides by the degrees of freedom even where they
    # are not positive (1 / 0 is inf), but over all elements (no dim, or a
    # 0-d input) without any it is g times nan where x is the mean, else
    # inf, a constant (p nan; std's is nan throughout then: g / inf times it)
    p = math.nan if dof <= 0 and (dim is None or input.ndim == 0) else 1.0 / dof if dof else math.inf
    out = op_result(opdef, value.astype(a.dtype, copy=False), (input,), p=p, ints=_kept_shape(input.shape, reduced))
    return keep_arguments(out, correction=_shown_correction(dim, unbiased, correction), dim=int_list(dim),
                          keepdim=keepdim)


def _moment_rule(op, args):
    """The rule of var and std: over_dims', once a bool in dim's place (the
    older signature var(input, unbiased)) is unbiased."""
    a = args.arguments
    if isinstance(a["dim"], bool):
        a["dim"], a["unbiased"] = None, a["dim"]
    return _over_dims(op, args)


_MOMENT = "input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None"


@declare(signature=_MOMENT, batch=_moment_rule)
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The variance over dim (all by default)."""
    return _moment(_VAR, "var", input, dim, unbiased, keepdim, correction)


@declare(signature=_MOMENT, batch=_moment_rule)
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """The standard deviation over dim (all by default); its gradient is 0
    where it is 0, as PyTorch's."""
    return _moment(_STD, "std", input, dim, unbiased, keepdim, correction)


def _norm2_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    # x / |x| times g, and 0 where the norm is 0, as PyTorch's
    for i in range(X.size):
        j = bcast_index(i, xsh, ints)
        if O[j] != 0:
            GA[i] += G[j] * X[i] / O[j]


def _norm2_vjp(ctx, g):
    kshape = tuple(ctx.ints)
    return (ctx.x * _over_nonzero(reshape(g, kshape), reshape(ctx.out, kshape)),)


_NORM_SAVED = (("self", "x"), ("result", "out"), ("ord", "scalar")) + _OVER_DIMS
_NORM2 = defop("norm", "LinalgVectorNormBackward0", 1, saves=SAVES_X | SAVES_OUT, vjp=_norm2_vjp,
               native=_norm2_native, saved=_NORM_SAVED)
# its gradient is 0, but PyTorch's node saves (and packs) x and the result as for any order
_NORM0 = defop("norm0", "LinalgVectorNormBackward0", 1, saves=SAVES_X | SAVES_OUT, vjp=_no_gradient,
               native=_no_gradient_native, saved=_NORM_SAVED)


def _exact_where_one(a, norms):
    """`norms` of a, or |a| where each norm is of one element, as PyTorch's
    (a power of 1e-300 or 1e300 would under- or overflow)."""
    if a.size and a.size == np.size(norms):
        return np.abs(a).reshape(np.shape(norms))
    return norms


def _refuse_empty_extreme(x, order, dim):
    """PyTorch's refusal of an inf-norm over nothing (the max has no identity),
    naming the first empty dim as it was given."""
    given = () if dim is None else (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    if not given and x.numel() == 0:
        raise RuntimeError(f"linalg.vector_norm cannot compute the {order} norm on an empty tensor because the "
                           "operation does not have an identity")
    for d in given:
        if x.ndim and x.shape[_norm_dim(d, x.ndim)] == 0:
            # sic: PyTorch's text has no space before "because"
            raise RuntimeError(f"linalg.vector_norm cannot compute the {order} norm on the dimension {d}because this "
                               "dimension is empty and the operation does not have an identity")


def _normp_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    # PyTorch's: sgn(x) |x|^(p-1) (0 where x is 0) times g / norm^(p-1) (0
    # where the norm is 0), so p < 1 at a zero entry and a zero vector give 0
    for i in range(X.size):
        j = bcast_index(i, xsh, ints)
        scaled = 0.0 if X[i] == 0 else sign(X[i]) * abs(X[i]) ** (pp - 1.0)
        scale = 0.0 if O[j] == 0 else G[j] / O[j] ** (pp - 1.0)
        GA[i] += scaled * scale


def _normp_vjp(ctx, g):
    from ops.elementwise import abs as _abs, sign
    from ops.selection import where
    kshape, p = tuple(ctx.ints), ctx.p
    x, out = ctx.x, reshape(ctx.out, kshape)
    scaled = where(x == 0, 0.0, sign(x) * _abs(x) ** (p - 1.0))
    return (scaled * where(out == 0, 0.0, reshape(g, kshape) / out ** (p - 1.0)),)


_NORMP = defop("norm_p", "LinalgVectorNormBackward0", 1, saves=SAVES_X | SAVES_OUT, vjp=_normp_vjp,
               native=_normp_native, saved=_NORM_SAVED)


def _norminf_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    # PyTorch's: sgn(x) g / k on the k elements of a line at its norm or nan
    # (sgn(nan) is 0, so a line holding nan gets no gradient), 0 elsewhere
    count = np.zeros(O.size)
    for i in range(X.size):
        j = bcast_index(i, xsh, ints)
        if abs(X[i]) == O[j] or X[i] != X[i]:
            count[j] += 1.0
    for i in range(X.size):
        j = bcast_index(i, xsh, ints)
        if abs(X[i]) == O[j] and X[i] != 0.0:
            GA[i] += (1.0 if X[i] > 0.0 else -1.0) * G[j] / count[j]


def _norminf_vjp(ctx, g):
    from ops.elementwise import sign
    kshape = tuple(ctx.ints)
    x = ctx.x._array()
    attained = (np.abs(x) == np.reshape(ctx.out._array(), kshape)) | np.isnan(x)
    return (sign(ctx.x) * expand(reshape(g, kshape), ctx.x_shape) * _line_shares(attained, kshape, x.dtype),)


# the inf- and -inf-norms: the max or min of |x|, one node as PyTorch's (not amax's of abs's)
_NORMINF = defop("norm_inf", "LinalgVectorNormBackward0", 1, saves=SAVES_X | SAVES_OUT, vjp=_norminf_vjp,
                 native=_norminf_native, saved=_NORM_SAVED)


def _norm_rule(op, args):
    """The rule of norm: a vector norm of all dims is that of each sample
    flattened; a matrix norm ("nuc", "fro" over more than two dims) keeps them."""
    p = args.arguments["p"]
    return (_over_dims if isinstance(p, str) and p != "fro" else _over_one_dim)(op, args)


@declare(signature="input, p='fro', dim=None, keepdim=False, out=None, dtype=None", batch=_norm_rule)
def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """The vector p-norm over dim (all dims by default): 2 ("fro"), 1, inf,
    -inf, 0 or any other number. The 2-norm's gradient is 0 where it is 0."""
    x = input if dtype is None else input.to(dtype)
    if x.dtype.kind not in "fc":
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {scalar_type_name(x.dtype)}")
    if isinstance(p, str) and not (p == "fro" and (dim is None or isinstance(dim, (int, np.integer))
                                                    or len(dim) <= 2)):
        from ops.matrix import matrix_norm  # as PyTorch's Tensor.norm: ops.matrix imports this module
        return matrix_norm(x, p, tuple(range(x.ndim)) if dim is None else dim, keepdim)
    dims = _dims(x, dim) if dim is not None else None
    axis = None if dims is None or not x.ndim else dims
    kshape = _kept_shape(x.shape, range(x.ndim) if axis is None else axis)
    a = x._array()
    if p is None or p == "fro" or p == 2:
        value = wrap_value(_exact_where_one(a, np.sqrt(np.add.reduce(quiet(np.multiply, a, a), axis=axis,
                                                                     keepdims=keepdim))))
        if not (x._rg and state.tape.grad_enabled):
            return new_tensor(value)
        # PyTorch's node shows the order as given: 2 for "fro", 2.0 for None
        return keep_arguments(record(_NORM2, value, (x,), ints=kshape), ord=2 if p == "fro" else 2.0 if p is None else p,
                              dim=int_list(dim), keepdim=keepdim)
    if p in (math.inf, -math.inf):
        _refuse_empty_extreme(x, "inf" if p > 0 else "-inf", dim)
        value = wrap_value((np.max if p > 0 else np.min)(np.abs(a), axis=axis, keepdims=keepdim))
        if not (x._rg and state.tape.grad_enabled):
            return new_tensor(value)
        return keep_arguments(record(_NORMINF, value, (x,), ints=kshape), ord=p, dim=int_list(dim), keepdim=keepdim)
    if p == 0:  # the count of nonzeros: in x's graph, with no gradient, as PyTorch's
        return keep_arguments(op_result(_NORM0, sum((x != 0).to(x.dtype), dim, keepdim)._value, (x,)),
                              ord=p, dim=int_list(dim), keepdim=keepdim)
    value = wrap_value(_exact_where_one(a, quiet(lambda: np.add.reduce(np.abs(a) ** p, axis=axis,
                                                                       keepdims=keepdim) ** (1.0 / p))))
    if not (x._rg and state.tape.grad_enabled):
        return new_tensor(value)
    return keep_arguments(record(_NORMP, value, (x,), p=float(p), ints=kshape), ord=p, dim=int_list(dim),
                          keepdim=keepdim)


def _cumsum_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    # the gradient of a running sum is the running sum of G from the end
    outer, n, inner = lines_along(osh, ints[0])
    for o in range(outer):
        for k in range(inner):
            total = 0.0
            for t in range(n - 1, -1, -1):
                i = (o * n + t) * inner + k
                total += G[i]
                GA[i] += total


def _cumsum_vjp(ctx, g):
    from ops.selection import flip
    d = int(ctx.ints[0])
    return (flip(cumsum(flip(g, d), d), d),)


_CUMSUM = defop("cumsum", "CumsumBackward0", 1, vjp=_cumsum_vjp, native=_cumsum_native, saved=(("dim", "arg"),))


def _moment_and_mean(moment, input, dim, unbiased, keepdim, correction):
    if isinstance(dim, bool):  # var_mean(x, True): the unbiased overload
        dim, unbiased = None, dim
    dims = dim if dim is not None else tuple(range(input.ndim))
    return (getattr(input, moment)(dim, unbiased, keepdim, correction=correction),
            input.mean(dims, keepdim=keepdim) if input.ndim else input.mean())


@declare(signature=_MOMENT, methods=(), batch=composite)
def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(var, mean) over dim (all by default), as a tuple.

    >>> import tape
    >>> tape.var_mean(tape.tensor([1., 2., 3.]))
    (tensor(1.), tensor(2.))
    """
    return _moment_and_mean("var", input, dim, unbiased, keepdim, correction)


@declare(signature=_MOMENT, methods=(), batch=composite)
def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(std, mean) over dim (all by default), as a tuple."""
    return _moment_and_mean("std", input, dim, unbiased, keepdim, correction)


_AminmaxResult = collections.namedtuple("aminmax", ["min", "max"])  # as torch.return_types.aminmax


@declare(signature="input, *, dim=None, keepdim=False, out=None", batch=composite)
def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) over dim (all dims by default), a named tuple; ties share
    each one's gradient, as amin's and amax's."""
    dims = () if dim is None else dim
    if input.numel() == 0 and (dim is None or input.shape[_norm_dim(dim, input.ndim)] == 0):
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                           "identity.")
    return _AminmaxResult(input.amin(dims, keepdim), input.amax(dims, keepdim))


@declare(signature="input, dim=None, keepdim=False, *, dtype=None, out=None", batch=composite)
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """The sum over dim (all by default) of the elements that are not nan, which get the gradient."""
    return input.masked_fill(input.isnan(), 0).sum(dim, keepdim, dtype=dtype)


@declare(signature="input, dim=None, keepdim=False, *, dtype=None, out=None", batch=composite)
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """The mean over dim (all by default) of the elements that are not nan."""
    if input.dtype.kind not in "fc":
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype but got "
                           f"{scalar_type_name(input.dtype)}")
    kept = ~input.isnan()
    return input.nansum(dim, keepdim, dtype=dtype) / kept.sum(dim, keepdim)


@declare(signature="input, n=1, dim=-1, prepend=None, append=None, *, out=None", batch=along("dim"))
def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim, x[i + 1] - x[i] (for bools,
    x[i + 1] ^ x[i]), of input with `prepend` and `append` joined before
    and after it along dim.

    >>> import tape
    >>> tape.diff(tape.tensor([1., 4., 9., 16.])).tolist()
    [3.0, 5.0, 7.0]
    """
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = _norm_dim(dim, input.ndim)
    for extra in (prepend, append):
        if extra is None:
            continue
        if extra.ndim != input.ndim:
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
        for k, (size, other) in enumerate(zip(input.shape, extra.shape)):
            if k != d and size != other:
                raise RuntimeError("diff expects the shape of tensor to prepend or append to match that of input "
                                   f"except along the differencing dimension; input.size({k}) = {size}, but got "
                                   f"tensor.size({k}) = {other}")
    parts = [t for t in (prepend, input, append) if t is not None]
    x = cat(parts, d) if len(parts) > 1 else input
    if n == 0:
        return x.clone()
    for _ in range(builtins.min(n, x.shape[d])):  # a difference of an empty dim is empty
        length = x.shape[d] - 1
        later, earlier = x.narrow(d, 1, length), x.narrow(d, 0, length)
        x = later ^ earlier if x.dtype == np.bool_ else later - earlier
    return x


@declare(signature="y, x=None, *, dx=1, dim=-1", methods=(), operands=2, batch=composite)
def trapezoid(y, x=None, *, dx=1, dim=-1):
    """The trapezoidal rule's integral of y along dim, at the sample points
    x (a tensor) or with the spacing dx."""
    d = _norm_dim(dim, y.ndim)
    length = y.shape[d]
    if length == 0:
        return y.sum(d)
    pairs = y.narrow(d, 1, length - 1) + y.narrow(d, 0, length - 1)
    if isinstance(x, Tensor):
        xd = _norm_dim(dim, x.ndim)
        widths = x.narrow(xd, 1, x.shape[xd] - 1) - x.narrow(xd, 0, x.shape[xd] - 1)
        if x.ndim == 1 and y.ndim > 1:  # the sample points along dim, the same for every row
            widths = widths.reshape([-1 if k == d else 1 for k in range(y.ndim)])
        return (pairs * widths).sum(d) / 2
    return pairs.sum(d) * dx / 2


def _expandable(shape, to):
    """Whether `shape` broadcasts to `to`."""
    return len(shape) <= len(to) and all(s in (1, t) for s, t in zip(reversed(shape), reversed(to)))


@declare(function=False, methods=("sum_to_size",), batch=composite)
def sum_to_size(input, *size):
    """input summed down to `size`, a shape that broadcasts to input's: over
    its leading dims and the dims where `size` is 1, as broadcasting's
    gradient is.

    >>> import tape
    >>> tape.ones(2, 3).sum_to_size(1, 3).tolist()
    [[2.0, 2.0, 2.0]]
    """
    shape = tuple(int_list(size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size))
    if not _expandable(shape, input.shape):
        raise RuntimeError(f"size {{{list(shape)}}} is not expandable to size {{{list(input.shape)}}}.")
    if shape == input.shape:
        return input
    lead = input.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + k for k, s in enumerate(shape) if s == 1 and input.shape[lead + k] != 1)
    out = input.sum(dims, keepdim=True)
    return out.view(shape) if lead else out


_MedianResult = {name: collections.namedtuple(name, ["values", "indices"]) for name in ("median", "nanmedian")}


def _median(name, input, dim, keepdim, skip_nan):
    """median and nanmedian: of all elements, the lower middle one (nan when
    one is nan, unless skip_nan), its gradient shared by the elements equal
    to it; along dim, the values and indices of the middle of a stable sort,
    the gradient to the indices."""
    a = input._array()
    if dim is None:
        flat = a.reshape(-1)
        kept = flat[~np.isnan(flat)] if skip_nan else flat
        if not flat.size:
            return input.sum() * math.nan
        value = math.nan if not kept.size or np.isnan(kept).any() else np.sort(kept)[(kept.size - 1) // 2]
        if math.isnan(value):  # the nans share the gradient (PyTorch's evenly_distribute_backward)
            nan = input.isnan()
            return input.masked_fill(~nan, 0.0).sum() / nan.sum()
        return input.masked_fill(input != float(value), -math.inf).amax()
    d = _norm_dim(dim, input.ndim) if input.ndim else 0
    if input.ndim and input.shape[d] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    rows = np.moveaxis(a.reshape(a.shape or (1,)), d, -1)
    order = np.argsort(rows, axis=-1, kind="stable")  # nan last
    nan = np.isnan(rows)
    count = (rows.shape[-1] - nan.sum(-1)) if skip_nan else np.full(rows.shape[:-1], rows.shape[-1])
    middle = np.maximum(count - 1, 0) // 2
    picked = np.take_along_axis(order, middle[..., None], -1)[..., 0]
    if not skip_nan:  # a nan's row gives its first nan
        picked = np.where(nan.any(-1), np.argmax(nan, -1), picked)
    index = picked if input.ndim else picked.reshape(())
    if input.ndim and keepdim:
        index = np.expand_dims(index, d)
    t = new_tensor(wrap_value(index.astype(np.int64)))
    if not input.ndim:
        return _MedianResult[name](input * 1, t)
    values = input.gather(d, t if keepdim else t.unsqueeze(d))
    return _MedianResult[name](values if keepdim else values.squeeze(d), t)


def _median_rule(op, args):
    """median of each sample: along dim as the op along it; of all of a
    sample's elements, along the flattened sample (its gradient then goes to
    one of equal middles, not shared among them)."""
    a = args.arguments
    if a.get("dim") is not None:
        return _ALONG_DIM(op, args)
    x = a["input"]
    nb = len(x.levels)
    return batched(op(x.phys.reshape(x.phys.shape[:nb] + (-1,)), -1).values, x.levels)


_ALONG_DIM = along("dim")


@declare(signature="input, dim=None, keepdim=False, *, out=None", batch=_median_rule)
def median(input, dim=None, keepdim=False):
    """The lower median of all elements (nan if one is), or along dim the
    values and indices of each slice's, a named tuple; as PyTorch's."""
    return _median("median", input, dim, keepdim, False)


@declare(signature="input, dim=None, keepdim=False, *, out=None", batch=_median_rule)
def nanmedian(input, dim=None, keepdim=False):
    """median, leaving nan out."""
    return _median("nanmedian", input, dim, keepdim, True)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(name, input, q, dim, keepdim, interpolation, skip_nan):
    """quantile and nanquantile: each q-th quantile of input along dim (of
    all elements without dim) as PyTorch computes it, from its stable sort
    (nan last): the elements at rank q (n - 1) and around it, interpolated
    (lerp for "linear"); nan where a slice holds one, unless skip_nan, which
    ranks the others. A tensor q of one dim adds it in front."""
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest, "
                           f"but got {interpolation}")
    if input.dtype.kind != "f":
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    qs = q._array() if isinstance(q, Tensor) else np.asarray(float(q))
    if qs.ndim > 1:
        raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
    if ((qs < 0) | (qs > 1)).any():
        raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {float(q)}" if qs.ndim == 0 else
                           f"{name}() q values must be in the range [0, 1]")
    if input.numel() == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    x, d = (input.reshape(-1), 0) if dim is None else (input, _norm_dim(dim, input.ndim) if input.ndim else 0)
    x = x if x.ndim else x.reshape(1)
    ordered = x.sort(d).values
    a = x._array()
    nan = np.isnan(a)
    count = (a.shape[d] - nan.sum(d, keepdims=True)) if skip_nan else np.full_like(nan.sum(d, keepdims=True),
                                                                                    a.shape[d])
    out = []
    for qv in np.atleast_1d(qs).tolist():
        rank = qv * np.maximum(count - 1, 0)
        if not skip_nan:  # a slice with a nan ranks it (the last of the sort)
            rank = np.where(nan.any(d, keepdims=True), a.shape[d] - 1, rank)
        lo, hi = np.floor(rank).astype(np.int64), np.ceil(rank).astype(np.int64)
        if interpolation in ("lower", "higher", "nearest"):
            at = {"lower": lo, "higher": hi, "nearest": np.round(rank).astype(np.int64)}[interpolation]
            value = ordered.gather(d, new_tensor(wrap_value(at)))
        else:
            low = ordered.gather(d, new_tensor(wrap_value(lo)))
            high = ordered.gather(d, new_tensor(wrap_value(hi)))
            weight = np.full(rank.shape, 0.5) if interpolation == "midpoint" else rank - lo
            value = low.lerp(high, new_tensor(wrap_value(weight.astype(a.dtype))))
        if not keepdim or not input.ndim:  # a 0-d input's quantile is 0-d, kept dim or not
            value = value.squeeze(d)
        elif dim is None:
            value = value.reshape((1,) * input.ndim)
        out.append(value)
    return out[0] if qs.ndim == 0 else stack(out, 0)


def _quantile_rule(op, args):
    """quantile of each sample, for a q that is not batched: the op on the
    physical value along the dim past the vmap dims (the flattened sample
    without dim), a tensor q's dim moved behind the vmap dims."""
    a = args.arguments
    x, q = a["input"], a["q"]
    if not isinstance(x, BatchedTensor) or isinstance(q, BatchedTensor):
        NO_RULE(op, args)
    nb = len(x.levels)
    if a.get("dim") is None:
        a["input"], a["dim"] = x.phys.reshape(x.phys.shape[:nb] + (-1,)), -1
    else:
        a["input"], a["dim"] = x.phys, _norm_dim(a["dim"], x.ndim) + nb
    out = op(*args.args, **args.kwargs)
    return batched(out.movedim(0, nb) if isinstance(q, Tensor) and q.ndim == 1 else out, x.levels)


@declare(signature="input, q, dim=None, keepdim=False, *, interpolation='linear', out=None", operands=2,
         batch=_quantile_rule)
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles of input (all elements, or along dim), as PyTorch's
    (nan where a slice holds one); differentiable through the sort."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


@declare(signature="input, q, dim=None, keepdim=False, *, interpolation='linear', out=None", operands=2,
         batch=_quantile_rule)
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """quantile, leaving nan out."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


def _running_extreme(name, ufunc, input, dim):
    """(values, indices) of cummax (ufunc np.maximum) or cummin along dim:
    the running extreme and where it is, the last of equal ones, nan from the
    first nan on (its index); the values gathered from input, which sends
    their gradient to those indices."""
    if input.ndim == 0:
        return _CUMULATIVE[name](input * 1, new_tensor(wrap_value(np.zeros((), np.int64))))
    d = _norm_dim(dim, input.ndim)
    a = input._array()
    values = ufunc.accumulate(a, axis=d)
    positions = np.arange(a.shape[d]).reshape([-1 if k == d else 1 for k in range(a.ndim)])
    indices = np.maximum.accumulate(np.where(a == values, positions, -1), axis=d)
    nan = np.isnan(a)
    if nan.any():
        first = np.maximum.accumulate(np.where(nan, positions, -1), axis=d)  # a nan's own index...
        first = np.where(first >= 0, np.argmax(nan, axis=d, keepdims=True), -1)  # ...is the first one's
        indices = np.where(first >= 0, first, indices)
    index = new_tensor(wrap_value(indices.astype(np.int64)))
    return _CUMULATIVE[name](input.gather(d, index), index)


_CUMULATIVE = {name: collections.namedtuple(name, ["values", "indices"]) for name in ("cummax", "cummin")}


@declare(signature="input, dim, *, out=None", batch=along("dim"))
def cummax(input, dim):
    """The running maximum along dim and its indices, a named tuple; the
    gradient goes to the indices, as PyTorch's."""
    return _running_extreme("cummax", np.maximum, input, dim)


@declare(signature="input, dim, *, out=None", batch=along("dim"))
def cummin(input, dim):
    """The running minimum along dim and its indices, a named tuple."""
    return _running_extreme("cummin", np.minimum, input, dim)


@declare(signature="input, dim, *, dtype=None, out=None", batch=along("dim"))
def cumsum(input, dim, *, dtype=None):
    """The running sum along dim."""
    _one_dim("cumsum", dim)
    x = input if dtype is None else input.to(dtype)
    d = _norm_dim(dim, x.ndim)
    if x.ndim == 0:  # its one element, integers as int64 (the sum's dtype)
        return x.to(np.int64) if x.dtype.kind in "bui" and x.dtype != np.int64 else x.clone()
    a = x._array()
    return keep_arguments(op_result(_CUMSUM, np.cumsum(a, axis=d, dtype=np.int64 if a.dtype.kind in "bui" else None),
                                    (x,), ints=(d,)), dim=dim)


def _cumprod_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    # PyTorch's gradient, exact at zeros: before a line's first zero z,
    # (the running sum of g * out from z back) / x; at z, the sum over j >= z
    # of g_j times the product of x up to j without x_z; after z, 0
    outer, n, inner = lines_along(osh, ints[0])
    if n == 1:  # the running product of one element is it: g, as PyTorch's (not g * x / x)
        for i in range(G.size):
            GA[i] += G[i]
        return
    for o in range(outer):
        for k in range(inner):
            base = o * n * inner + k
            z = n
            finite = True
            for t in range(n):
                finite = finite and math.isfinite(X[base + t * inner])
                if X[base + t * inner] == 0 and z == n:
                    z = t
            if not finite:
                # a line holding inf or nan: the exact sums, without the
                # division (inf / inf) or the shortcut past a zero (0 * inf),
                # as the differentiable VJP computes them
                for c in range(n):
                    product = 1.0
                    total = 0.0
                    for t in range(n):
                        i = base + t * inner
                        if t != c:
                            product *= X[i]
                        if t >= c:
                            total += G[i] * product
                    GA[base + c * inner] += total
                continue
            total = 0.0
            for t in range(z - 1, -1, -1):
                i = base + t * inner
                total += G[i] * O[i]
                GA[i] += total / X[i]
            if z < n:
                product = O[base + (z - 1) * inner] if z > 0 else 1.0
                total = 0.0
                for t in range(z, n):
                    i = base + t * inner
                    if t > z:
                        product *= X[i]
                    total += G[i] * product
                GA[base + z * inner] += total


def _cumprod_vjp(ctx, g):
    """grad_k = sum over j >= k of g_j times the product of x_i for i <= j
    but k: the cumprod along each row k of x with x_k set to 1, masked to
    j >= k. No division, so exact at zeros, inf and nan, and differentiable
    again."""
    from ops.selection import triu, where
    from ops.shape import movedim, unsqueeze
    d = int(ctx.ints[0])
    if not ctx.x_shape or ctx.x_shape[d] == 1:  # the running product of one element is it: g, as PyTorch's
        return (g,)
    x = movedim(ctx.x, d, -1)
    n = x.shape[-1]
    others = where(new_tensor(np.eye(n, dtype=np.bool_)), 1.0, unsqueeze(x, -2))
    products = cumprod(others, -1) * unsqueeze(movedim(g, d, -1), -2)
    return (movedim(sum(triu(products), -1), -1, d),)


_CUMPROD = defop("cumprod", "CumprodBackward0", 1, saves=SAVES_X | SAVES_OUT, vjp=_cumprod_vjp,
                 native=_cumprod_native, saved=(("self", "x"), ("result", "out"), ("dim", "arg")))


@declare(signature="input, dim, *, dtype=None, out=None", batch=along("dim"))
def cumprod(input, dim, *, dtype=None):
    """The running product along dim; its gradient is exact where elements are 0.

    >>> import tape
    >>> tape.cumprod(tape.tensor([1., 2., 3.]), 0).tolist()
    [1.0, 2.0, 6.0]
    """
    _one_dim("cumprod", dim)
    x = input if dtype is None else input.to(dtype)
    d = _norm_dim(dim, x.ndim)
    a = x._array()
    value = quiet(np.cumprod, a.reshape(x.shape or (1,)), d, np.int64 if a.dtype.kind in "bui" else None)
    return keep_arguments(op_result(_CUMPROD, value.reshape(x.shape), (x,), ints=(d,)), dim=dim)


__all__ = exports(globals())
