"""Dtypes are NumPy dtype objects, so `t.dtype == numpy.float64` holds."""
import numpy as np

__all__ = ["float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool_",
           "get_default_dtype", "set_default_dtype", "as_dtype", "scalar_type_name", "cpp_type_name"]

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


def cpp_type_name(dtype):
    """The C++ name of `dtype`, which some PyTorch errors use ("double" for float64)."""
    return _CPP_TYPE_NAMES.get(dtype.name, dtype.name)
