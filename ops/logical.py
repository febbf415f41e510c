"""Bitwise and logical ops: `& | ^ ~`, `logical_*`, `all`, `any`. They take
bool and integer tensors (the logical ones any dtype) and their results are
constants: nothing is recorded, as nothing is differentiable."""
import numpy as np

from ops._declare import declare
from tape._batched import NO_RULE

from tape._dtypes import get_default_dtype, scalar_type_name
from tape._record import broadcast_shapes, operand_value
from tape._tensor import Tensor, new_tensor

from ops.comparison import _operator
from ops.reduction import _dims

__all__ = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "logical_and", "logical_or",
           "logical_xor", "logical_not", "all", "any"]


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
        raise NotImplementedError(f'"{kernel}_cpu" not implemented for '
                                  f"'{scalar_type_name(np.result_type(*floats))}'")


def _bitwise(ufunc, kernel):
    def op(input, other):
        _refuse_floats(kernel, input, other)
        if isinstance(input, Tensor) and isinstance(other, Tensor):
            broadcast_shapes(input.shape, other.shape)  # PyTorch's error text on a mismatch
        return _result(ufunc(operand_value(input), operand_value(other)))
    op.__name__ = kernel
    return op


bitwise_and = _bitwise(np.bitwise_and, "bitwise_and")
bitwise_or = _bitwise(np.bitwise_or, "bitwise_or")
bitwise_xor = _bitwise(np.bitwise_xor, "bitwise_xor")


def bitwise_not(input):
    """Each bit flipped (`~x`); for bool tensors, logical not.

    >>> import tape
    >>> tape.bitwise_not(tape.tensor([True, False]))
    tensor([False,  True])
    """
    _refuse_floats("bitwise_not", input)
    return _result(np.invert(input._array()))
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
    return op


logical_and = _logical(np.logical_and, "logical_and")
logical_or = _logical(np.logical_or, "logical_or")
logical_xor = _logical(np.logical_xor, "logical_xor")


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
    return test


all = _test_all(np.all)
any = _test_all(np.any)

for _name in __all__:
    setattr(Tensor, _name, globals()[_name])
for _name, _fn in {"and": bitwise_and, "or": bitwise_or, "xor": bitwise_xor}.items():
    setattr(Tensor, f"__{_name}__", _operator(_fn))
    setattr(Tensor, f"__r{_name}__", _operator(_fn))  # commutative: the same result either way
Tensor.__invert__ = _invert


# transitional declarations (issue 19 in progress)
declare(bitwise_and, name='bitwise_and', signature='input, other, *, out=None', methods=(), batch=NO_RULE)
declare(bitwise_or, name='bitwise_or', signature='input, other, *, out=None', methods=(), batch=NO_RULE)
declare(bitwise_xor, name='bitwise_xor', signature='input, other, *, out=None', methods=(), batch=NO_RULE)
declare(bitwise_not, name='bitwise_not', signature='input, *, out=None', methods=(), batch=NO_RULE)
declare(logical_and, name='logical_and', signature='input, other, *, out=None', methods=(), batch=NO_RULE)
declare(logical_or, name='logical_or', signature='input, other, *, out=None', methods=(), batch=NO_RULE)
declare(logical_xor, name='logical_xor', signature='input, other, *, out=None', methods=(), batch=NO_RULE)
declare(logical_not, name='logical_not', signature='input, *, out=None', methods=(), batch=NO_RULE)
declare(all, name='all', signature='input, dim=None, keepdim=False, *, out=None', methods=(), batch=NO_RULE)
declare(any, name='any', signature='input, dim=None, keepdim=False, *, out=None', methods=(), batch=NO_RULE)
