"""Dtypes are NumPy dtype objects, so `t.dtype == numpy.float64` holds."""
import numpy as np

__all__ = ["float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool_",
           "get_default_dtype", "set_default_dtype", "as_dtype", "scalar_type_name", "cpp_type_name",
           "promote_types", "result_type", "promoted", "finfo", "iinfo"]

# NumPy makes one dtype object per type, so PyTorch's aliases (tape.float,
# tape.long, ...) are the same objects: `tape.float is tape.float32`
float64 = np.dtype(np.float64)
float32 = np.dtype(np.float32)
float16 = np.dtype(np.float16)  # values only: the sweep computes in float32 and float64
int64 = np.dtype(np.int64)
int32 = np.dtype(np.int32)
int16 = np.dtype(np.int16)
int8 = np.dtype(np.int8)
uint8 = np.dtype(np.uint8)
bool_ = np.dtype(np.bool_)

_default = [float64]


def get_default_dtype():
    """The dtype of tensors made from Python floats (float64 unless changed)."""
    return _default[0]


def set_default_dtype(dtype):
    """Set the dtype of tensors made from Python floats: float32 or float64."""
    dtype = as_dtype(dtype)
    if dtype not in (float32, float64):
        raise TypeError(f"only floating-point types are supported as the default type, got {dtype}")
    _default[0] = dtype


def as_dtype(dtype):
    if dtype is None:
        return None
    if dtype is float:
        return _default[0]
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    return np.dtype(dtype)


# Note [Type promotion]
# ~~~~~~~~~~~~~~~~~~~~~
# Results follow PyTorch's promotion, not NumPy's. Operands fall into three
# tiers: tensors with dimensions, 0-d tensors, Python numbers (a float is the
# default dtype, an int int64, a bool bool). Each tier promotes its own dtypes
# (promote_types); a later tier decides the result only where its category
# (bool < integer < floating) is higher than the earlier tiers'. So a float32
# tensor with a 0-d float64 tensor, an int64 tensor or 2.0 stays float32, an
# int64 tensor with a 0-d float32 tensor is float32, with 2.5 the default
# dtype, and an int8 tensor with a 0-d int64 tensor stays int8 (NumPy would
# give float64, float64, float64, float64 and int64).
# Ops apply the rule to values: an ndarray or a NumPy scalar is a tensor's,
# of its ndim (a 0-d float64 tensor enters as np.float64, see value_of in
# tape/_record.py); a Python bool, int or float is a number.
_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}
_PYTHON_NUMBERS = (bool, int, float)


def promote_types(a, b):
    """PyTorch's promotion of two dtypes: the higher category's dtype (int64
    with float16 is float16, where NumPy widens to float64); within one
    category, the wider (NumPy's rule there is PyTorch's)."""
    ca, cb = _CATEGORY.get(a.kind, 3), _CATEGORY.get(b.kind, 3)
    if ca != cb:
        return a if ca > cb else b
    return np.promote_types(a, b)


def result_type(*operands):
    """The dtype of an op's result on `operands` (tensors or their values, and
    Python numbers) by PyTorch's rule (Note [Type promotion])."""
    tiers = [None, None, None]  # dimensioned tensors, 0-d tensors, numbers
    for v in operands:
        if type(v) in _PYTHON_NUMBERS:
            tier, dtype = 2, (bool_ if type(v) is bool else int64 if type(v) is int else _default[0])
        else:
            tier, dtype = (0 if np.ndim(v) else 1), v.dtype
        tiers[tier] = dtype if tiers[tier] is None else promote_types(tiers[tier], dtype)
    result = None
    for dtype in tiers:
        if dtype is not None and (result is None or _CATEGORY[dtype.kind] > _CATEGORY[result.kind]):
            result = dtype
    return result


def promoted(*operands):
    """`operands` with the tensors' values cast to their result_type; the
    numbers stay numbers, which NumPy computes in the arrays' dtype."""
    dtype = result_type(*operands)
    with np.errstate(over="ignore", invalid="ignore"):  # 1e300 as a float32 is inf, as in PyTorch
        return tuple(v if type(v) in _PYTHON_NUMBERS or v.dtype == dtype and type(v) is np.ndarray
                     else np.asarray(v, dtype) for v in operands)


# PyTorch's C++ names of dtypes, which its error messages use
_SCALAR_TYPE_NAMES = {"float64": "Double", "float32": "Float", "float16": "Half", "int64": "Long",
                      "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
                      "bool": "Bool"}


def scalar_type_name(dtype):
    """PyTorch's name of `dtype` in error messages ("Long" for int64)."""
    return _SCALAR_TYPE_NAMES.get(dtype.name, dtype.name)


_CPP_TYPE_NAMES = {"float64": "double", "float32": "float", "float16": "c10::Half", "int64": "long int",
                   "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
                   "bool": "bool"}


def not_implemented_for(kernel, dtype):
    """PyTorch's error for a kernel that has no loop for `dtype`
    ('"silu_cpu" not implemented for 'Long''), to raise."""
    return NotImplementedError(f'"{kernel}" not implemented for \'{scalar_type_name(np.dtype(dtype))}\'')


def cpp_type_name(dtype):
    """The C++ name of `dtype`, which some PyTorch errors use ("double" for float64)."""
    return _CPP_TYPE_NAMES.get(dtype.name, dtype.name)



class finfo:
    """The limits of a floating dtype (the default dtype without `type`), as
    torch.finfo: Python numbers, from NumPy's finfo.

    >>> import tape
    >>> tape.finfo(tape.float32).eps
    1.1920928955078125e-07
    """

    def __init__(self, type=None):
        dtype = _default[0] if type is None else as_dtype(type)
        if dtype.kind != "f":
            raise TypeError("torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
                            "'torch.finfo'")
        info = np.finfo(dtype)
        self.bits, self.dtype = info.bits, dtype.name
        self.eps, self.max, self.min, self.resolution = (float(v) for v in (info.eps, info.max, info.min,
                                                                             info.resolution))
        self.tiny = self.smallest_normal = float(info.smallest_normal)

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """The limits of an integer dtype, as torch.iinfo (bits, max, min: Python ints)."""

    def __init__(self, type):
        dtype = as_dtype(type)
        if dtype.kind not in "iub":
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to handle 'torch.iinfo'")
        info = np.iinfo(dtype)
        self.bits, self.max, self.min, self.dtype = info.bits, int(info.max), int(info.min), dtype.name

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
