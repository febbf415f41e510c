"""Bitwise and logical ops: `& | ^ ~`, `logical_*`, `all`, `any`. They take
bool and integer tensors (the logical ones any dtype) and their results are
constants: nothing is recorded, as nothing is differentiable."""
import numpy as np

from ops._declare import declare, exports
from tape._batched import elementwise, over_dims
from tape._dtypes import get_default_dtype, not_implemented_for
from tape._record import broadcast_shapes, operand_value
from tape._tensor import Tensor, new_tensor

from ops.comparison import declare_operator
from ops.reduction import _dims


def _result(array):
    return new_tensor(np.asarray(array))


def _refuse_floats(kernel, *operands):
    """PyTorch's error for a bitwise op that would compute in a float dtype,
    named as PyTorch promotes it."""
    floats = [v.dtype for v in operands if isinstance(v, Tensor) and v.dtype.kind == "f"]
    # a Python float is weak: the default dtype, unless a float tensor takes it
    if not floats and float in map(type, operands):
        floats = [get_default_dtype()]
    if floats:
        raise not_implemented_for(f"{kernel}_cpu", np.result_type(*floats))


_BINARY = "input, other, *, out=None"


def _bitwise(ufunc, kernel, operator):
    def op(input, other):
        _refuse_floats(kernel, input, other)
        if isinstance(input, Tensor) and isinstance(other, Tensor):
            broadcast_shapes(input.shape, other.shape)  # PyTorch's error text on a mismatch
        return _result(ufunc(operand_value(input), operand_value(other)))
    op.__name__ = kernel
    declare(op, signature=_BINARY, operands=2, batch=elementwise)
    # commutative: the reflected operator gives the same result
    declare_operator(op, f"__{operator}__", f"__r{operator}__")
    return op


bitwise_and = _bitwise(np.bitwise_and, "bitwise_and", "and")
bitwise_or = _bitwise(np.bitwise_or, "bitwise_or", "or")
bitwise_xor = _bitwise(np.bitwise_xor, "bitwise_xor", "xor")


@declare(signature="input, *, out=None", batch=elementwise)
def bitwise_not(input):
    """Each bit flipped (`~x`); for bool tensors, logical not.

    >>> import tape
    >>> tape.bitwise_not(tape.tensor([True, False]))
    tensor([False,  True])
    """
    _refuse_floats("bitwise_not", input)
    return _result(np.invert(input._array()))


@declare(function=False, methods=("__invert__",), batch=elementwise)
def _invert(input):
    if input.dtype.kind == "f":
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    return bitwise_not(input)


def _logical(ufunc, name):
    def op(input, other):
        if not isinstance(other, Tensor):
            raise TypeError(f"{name}(): argument 'other' (position 2) must be Tensor, not "
                            f"{type(other).__name__}")
        broadcast_shapes(input.shape, other.shape)
        return _result(ufunc(input._array(), other._array()))
    op.__name__ = name
    return declare(op, signature=_BINARY, operands=2, batch=elementwise)


logical_and = _logical(np.logical_and, "logical_and")
logical_or = _logical(np.logical_or, "logical_or")
logical_xor = _logical(np.logical_xor, "logical_xor")


@declare(signature="input, *, out=None", batch=elementwise)
def logical_not(input):
    return _result(np.logical_not(input._array()))


def _test_all(reduce):
    def test(input, dim=None, keepdim=False):
        dims = _dims(input, dim)
        out = reduce(input._array(), axis=None if dims is None or input.ndim == 0 else dims,
                     keepdims=keepdim)
        # as PyTorch, uint8 in gives uint8 out (its result type before bool existed)
        return _result(out.astype(np.uint8) if input.dtype == np.uint8 else out)
    test.__name__ = reduce.__name__
    test.__doc__ = f"""Whether {reduce.__name__} elements are nonzero, over everything or `dim`
    (an int or a tuple), with `keepdim`."""
    return declare(test, signature="input, dim=None, keepdim=False, *, out=None", batch=over_dims())


all = _test_all(np.all)
any = _test_all(np.any)

__all__ = exports(globals())
