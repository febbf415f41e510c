"""Comparisons: `< <= > >= == !=` and their named forms, the tests isnan,
isinf, isfinite and isclose, and the counts nonzero and count_nonzero. Their
results are bool or int64 tensors (allclose and equal: Python bools), which
are constants: nothing is recorded."""
import numpy as np

from ops._declare import declare, exports
from tape._batched import NO_RULE, batched, elementwise, no_rule, over_dims
from tape._dtypes import promoted, scalar_type_name
from tape._record import broadcast_shapes, operand_value
from tape._tensor import Tensor, _norm_dim, compared_hooks, new_tensor, note_value_read, wrap_value

from ops.reduction import _dims

_OPERANDS = (Tensor, int, float, bool, np.ndarray, np.generic)


def _operator_rule(op, args):
    # a foreign operand gives NotImplemented, as the operator does on plain tensors
    if not isinstance(args.arguments["y"], _OPERANDS):
        return NotImplemented
    return elementwise(op, args)


def declare_operator(compare, *methods):
    """Declare the operator forms `methods` of compare (of comparisons, and
    of ops.logical's `& | ^`): other operands (None, strings, lists) are not
    ours, so Python decides (x == None is False, x < None a TypeError), as in
    PyTorch."""
    def operator(x, y):
        return compare(x, y) if isinstance(y, _OPERANDS) else NotImplemented
    operator.__name__ = methods[0]
    declare(operator, function=False, methods=methods, operands=2, batch=_operator_rule)


def _comparison(ufunc, name):
    def compare(input, other):
        if isinstance(input, Tensor) and isinstance(other, Tensor):
            broadcast_shapes(input.shape, other.shape)  # PyTorch's error text on a mismatch
        result = new_tensor(wrap_value(np.asarray(ufunc(*promoted(operand_value(input), operand_value(other))))))
        if compared_hooks:  # a branch on it is a guard of tape.compile (Note [Compiled replay])
            compared_hooks[0](result, name, input, other)
        return result
    compare.__name__ = name
    declare(compare, signature="input, other, *, out=None", operands=2, batch=elementwise)
    declare_operator(compare, f"__{name}__")
    return compare


eq = _comparison(np.equal, "eq")
ne = _comparison(np.not_equal, "ne")
lt = _comparison(np.less, "lt")
le = _comparison(np.less_equal, "le")
gt = _comparison(np.greater, "gt")
ge = _comparison(np.greater_equal, "ge")


def _expect_tensor(name, position, arg, value):
    if not isinstance(value, Tensor):
        raise TypeError(f"{name}(): argument '{arg}' (position {position}) must be Tensor, not "
                        f"{type(value).__name__}")


def _test(name, ufunc, what, signature):
    def test(input):
        _expect_tensor(name, 1, "input", input)
        return new_tensor(wrap_value(np.asarray(ufunc(input._array()))))
    test.__name__ = name
    test.__doc__ = f"""Whether each element is {what} (a bool tensor; integers and bools never are nan
    or infinite).

    >>> import tape
    >>> tape.{name}(tape.tensor([1.0, float("nan"), float("inf")])).tolist()
    {np.asarray(ufunc(np.array([1.0, np.nan, np.inf]))).tolist()}
    """
    return declare(test, signature=signature, batch=elementwise)


isnan = _test("isnan", np.isnan, "nan", "input, *, out=None")
isinf = _test("isinf", np.isinf, "infinite (either sign)", "input, *, out=None")
isfinite = _test("isfinite", np.isfinite, "finite", "input")

_TOLERANCES = "input, other, rtol=1e-05, atol=1e-08, equal_nan=False"


@declare(signature=_TOLERANCES, operands=2, batch=elementwise)
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether |input - other| <= atol + rtol * |other| elementwise (equal
    infinities are close; nan only to nan, with equal_nan).

    >>> import tape
    >>> tape.isclose(tape.tensor([1.0, 2.0]), tape.tensor([1.0 + 1e-9, 2.1])).tolist()
    [True, False]
    """
    _expect_tensor("isclose", 2, "other", other)
    if input.dtype != other.dtype:
        raise RuntimeError(f"{scalar_type_name(input.dtype)} did not match {scalar_type_name(other.dtype)}")
    for name, tolerance in (("rtol", rtol), ("atol", atol)):
        if tolerance < 0:
            raise RuntimeError(f"{name} must be greater than or equal to zero, but got {tolerance:g}")
    broadcast_shapes(input.shape, other.shape)  # PyTorch's error text on a mismatch
    a, b = input._array(), other._array()
    if a.dtype == np.bool_:  # NumPy does not subtract bools; their closeness is equality
        a, b = a.astype(np.int64), b.astype(np.int64)
    return new_tensor(wrap_value(np.asarray(np.isclose(a, b, rtol, atol, equal_nan))))


@declare(signature=_TOLERANCES, operands=2,
         batch=no_rule("vmap over torch.allclose isn't supported yet. Please file an issue at "
                       "https://github.com/pytorch/pytorch/issues if you need this feature."))
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of input is close to other's (isclose), as a Python bool.

    >>> import tape
    >>> tape.allclose(tape.tensor([1.0, 2.0]), tape.tensor([1.0, 2.0 + 1e-9]))
    True
    """
    close = isclose(input, other, rtol, atol, equal_nan)
    note_value_read(input, other)
    return bool(close._array().all())


@declare(signature="input, other", operands=2, batch=NO_RULE)
def equal(input, other):
    """Whether input and other have the same shape and elements (nan equals
    nothing), as a Python bool; the dtypes may differ.

    >>> import tape
    >>> tape.equal(tape.tensor([1.0, 2.0]), tape.tensor([1, 2]))
    True
    """
    _expect_tensor("equal", 2, "other", other)
    if input.shape != other.shape:
        return False
    note_value_read(input, other)
    return bool(np.array_equal(input._array(), other._array()))


# PyTorch's refusal of an op whose result's shape depends on the values
_DYNAMIC = no_rule("vmap: We do not support batching operators that can output dynamic shape. Attempted to vmap over "
                   "aten::{name}. Please file an issue at https://github.com/pytorch/pytorch/issues if you need this "
                   "feature.")


@declare(signature="input, *, out=None, as_tuple=False", batch=_DYNAMIC)
def nonzero(input, *, as_tuple=False):
    """The indices of the nonzero elements: an int64 tensor of one row per
    element and one column per dim, or with as_tuple a tuple of one index
    tensor per dim (a 0-d input counts as 1-d there, as in PyTorch).

    >>> import tape
    >>> tape.nonzero(tape.tensor([[0., 1.], [2., 0.]])).tolist()
    [[0, 1], [1, 0]]
    """
    a = input._array()
    if as_tuple:
        return tuple(new_tensor(i.astype(np.int64)) for i in np.nonzero(np.atleast_1d(a)))
    return new_tensor(np.argwhere(a).astype(np.int64))


@declare(signature="input", batch=_DYNAMIC)
def argwhere(input):
    """The indices of the nonzero elements, one row per element (nonzero).

    >>> import tape
    >>> tape.argwhere(tape.tensor([0., 1., 2.])).tolist()
    [[1], [2]]
    """
    return nonzero(input)


@declare(signature="input, sorted=True, return_inverse=False, return_counts=False, dim=None", batch=_DYNAMIC)
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements of input, sorted (or its distinct slices along
    dim); with return_inverse, where each element (slice) went, and with
    return_counts how often each occurs. No gradient.

    >>> import tape
    >>> tape.unique(tape.tensor([3, 1, 3])).tolist()
    [1, 3]
    """
    a = input._array()
    axis = None if dim is None else _norm_dim(dim, input.ndim)
    values, inverse, counts = np.unique(a, return_inverse=True, return_counts=True, axis=axis)
    inverse = inverse.reshape(a.shape if axis is None else (a.shape[axis],)).astype(np.int64)
    out = [new_tensor(wrap_value(values))]
    if return_inverse:
        out.append(new_tensor(wrap_value(inverse)))
    if return_counts:
        out.append(new_tensor(wrap_value(counts.astype(np.int64))))
    return out[0] if len(out) == 1 else tuple(out)


def _histogram(a, bins, lo, hi):
    """PyTorch's histc of array a: over [lo, hi], or over a's range when both
    are 0, widened by 1 each way when it is one value."""
    if lo == hi == 0 and a.size:
        lo, hi = float(a.min()), float(a.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    return np.histogram(a, bins, (lo, hi))[0].astype(a.dtype)


def _histc_rule(op, args):
    """histc of each sample: a histogram per row of the physical value (a
    constant: no graph to batch)."""
    x = args.arguments["input"]
    a = args.arguments
    rows = x.phys._array().reshape(x.phys.shape[:len(x.levels)] + (-1,))
    flat = rows.reshape(-1, rows.shape[-1])
    counts = np.stack([_histogram(r, a.get("bins", 100), a.get("min", 0), a.get("max", 0)) for r in flat])
    return batched(new_tensor(wrap_value(counts.reshape(rows.shape[:-1] + (-1,)))), x.levels)


@declare(signature="input, bins=100, min=0, max=0, *, out=None", batch=_histc_rule)
def histc(input, bins=100, min=0, max=0):
    """The histogram of input's elements in `bins` equal bins over [min, max]
    (the elements' own range when both are 0); elements outside are left out.
    No gradient.

    >>> import tape
    >>> tape.histc(tape.tensor([1., 2., 1.]), bins=4, min=0, max=3).tolist()
    [0.0, 2.0, 1.0, 0.0]
    """
    if input.dtype.kind not in "f":
        raise NotImplementedError(f'"histogram_cpu" not implemented for \'{scalar_type_name(input.dtype)}\'')
    return new_tensor(wrap_value(_histogram(input._array(), bins, min, max)))


@declare(signature="input, dim=None", batch=over_dims())
def count_nonzero(input, dim=None):
    """The number of nonzero elements, in all or over `dim` (an int or a tuple), as int64.

    >>> import tape
    >>> tape.count_nonzero(tape.tensor([[0., 1.], [2., 3.]]), dim=1).tolist()
    [1, 2]
    """
    dims = _dims(input, dim)
    return new_tensor(wrap_value(np.asarray(np.count_nonzero(input._array(), axis=dims or None), np.int64)))


__all__ = exports(globals())
