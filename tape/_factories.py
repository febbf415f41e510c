"""Making tensors: `tensor`, `as_tensor`, `from_numpy` and the factories,
with PyTorch's dtype rules (Python floats take the default dtype).
"""
import warnings

import numpy as np

from ._dtypes import as_dtype, get_default_dtype, scalar_type_name
from ._tensor import Tensor, new_tensor, wrap_value

__all__ = ["tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "eye", "arange",
           "linspace", "rand", "randn", "randint", "zeros_like", "ones_like", "full_like", "empty_like",
           "rand_like", "randn_like", "manual_seed"]

_rng = [np.random.default_rng()]


def manual_seed(seed):
    """Seed the generator behind rand*, randn* and randint."""
    _rng[0] = np.random.default_rng(int(seed))


def _make(array, requires_grad):
    if requires_grad and array.dtype.kind not in "fc":
        raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
    return new_tensor(wrap_value(array), bool(requires_grad))


_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2}


def _promote(a, b):
    """PyTorch's promotion of inferred dtypes: the higher category wins
    (bool < integer < float) with its own dtype; within one, the wider."""
    if a is None:
        return b
    ra, rb = _KIND_RANK.get(a.kind, 3), _KIND_RANK.get(b.kind, 3)
    if ra != rb:
        return a if ra > rb else b
    return np.promote_types(a, b)


def _infer_dtype(data):
    """PyTorch's inference: a Python float is the default dtype, an int int64,
    a bool bool; NumPy arrays and scalars (and tensors) keep their dtype;
    a sequence promotes its elements' (an empty one is the default dtype)."""
    if isinstance(data, (np.ndarray, np.generic)):
        return data.dtype
    if isinstance(data, bool):
        return np.dtype(np.bool_)
    if isinstance(data, int):
        return np.dtype(np.int64)
    if isinstance(data, float):
        return get_default_dtype()
    if isinstance(data, (list, tuple)):
        dtype = None
        for item in data:
            dtype = _promote(dtype, _infer_dtype(item))
        return get_default_dtype() if dtype is None else dtype
    return np.asarray(data).dtype


def _unwrap(data):
    if isinstance(data, Tensor):
        return data._array()
    if isinstance(data, (list, tuple)):
        return [_unwrap(d) for d in data]
    return data


def tensor(data, *, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of `data` (numbers, nested lists, arrays, tensors).

    >>> import tape
    >>> tape.tensor([1.0, 2.0], requires_grad=True)
    tensor([1., 2.], requires_grad=True)
    """
    if isinstance(data, Tensor):
        warnings.warn("To copy construct from a tensor, it is recommended to use "
                      "sourceTensor.clone().detach() or sourceTensor.clone().detach()."
                      "requires_grad_(True), rather than tape.tensor(sourceTensor).", UserWarning,
                      stacklevel=2)
    data = _unwrap(data)
    if data is None:
        raise RuntimeError("Could not infer dtype of NoneType")
    dtype = as_dtype(dtype) or _infer_dtype(data)
    try:
        array = np.array(data, dtype=dtype)
    except (ValueError, TypeError) as e:
        raise ValueError(f"could not build a tensor from {type(data).__name__}: {e}") from None
    if array.dtype.kind not in "fiub":
        raise TypeError(f"can't convert data of dtype {array.dtype} to a tensor")
    return _make(array, requires_grad)


def as_tensor(data, dtype=None, device=None):
    """`data` as a tensor, sharing memory with a NumPy array of the same dtype."""
    if isinstance(data, Tensor):
        return data if dtype is None or data.dtype == as_dtype(dtype) else data.to(dtype)
    if isinstance(data, np.ndarray) and (dtype is None or data.dtype == as_dtype(dtype)):
        return from_numpy(data)
    return tensor(data, dtype=dtype)


def from_numpy(ndarray):
    """A tensor sharing memory with `ndarray`."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    if ndarray.ndim == 0 and ndarray.dtype == np.float64:
        return new_tensor(float(ndarray))
    return new_tensor(ndarray)


def _size(size, negative=None):
    """The shape that `size` (ints, or one tuple or list) gives; a negative
    dimension raises `negative`, or PyTorch's usual text."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    shape = tuple(int(s) for s in size)
    for d in shape:
        if d < 0:
            raise RuntimeError(negative or f"Trying to create tensor with negative dimension {d}: "
                                           f"{list(shape)}")
    return shape


def _fill(size, value, dtype, requires_grad, negative=None):
    dtype = as_dtype(dtype) or get_default_dtype()
    return _make(np.full(_size(size, negative), value, dtype), requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _fill(size, 0, dtype, requires_grad, "zeros: Dimension size must be non-negative.")


def ones(*size, dtype=None, device=None, requires_grad=False):
    return _fill(size, 1, dtype, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    return _fill(size, 0, dtype, requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    if dtype is None:
        dtype = _infer_dtype(fill_value)
    return _make(np.full(_size((size,)), fill_value, as_dtype(dtype)), requires_grad)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    for name, v in (("n", n), ("m", m)):
        if v is not None and v < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {v}")
    return _make(np.eye(n, m, dtype=as_dtype(dtype) or get_default_dtype()), requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is None:
        dtype = _infer_dtype([start, end, step])
    return _make(np.arange(start, end, step, dtype=as_dtype(dtype)), requires_grad)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    return _make(np.linspace(start, end, int(steps), dtype=as_dtype(dtype) or get_default_dtype()),
                 requires_grad)


def _float_dtype(dtype, kernel):
    dtype = as_dtype(dtype) or get_default_dtype()
    if dtype.kind != "f":
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{scalar_type_name(dtype)}'")
    return dtype


def rand(*size, dtype=None, device=None, requires_grad=False):
    dtype = _float_dtype(dtype, "check_uniform_bounds")
    return _make(_rng[0].random(_size(size)).astype(dtype), requires_grad)


def randn(*size, dtype=None, device=None, requires_grad=False):
    dtype = _float_dtype(dtype, "normal_kernel_cpu")
    return _make(_rng[0].standard_normal(_size(size)).astype(dtype), requires_grad)


def randint(low, high=None, size=(), *, dtype=None, device=None, requires_grad=False):
    """Integers uniform on [low, high): randint(high, size) or randint(low, high, size)."""
    if isinstance(high, (tuple, list)):
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    return _make(_rng[0].integers(low, high, _size((size,))).astype(as_dtype(dtype) or np.int64),
                 requires_grad)


def _like(fn):
    def like(t, *, dtype=None, device=None, requires_grad=False):
        return fn(t.shape, dtype=dtype or t.dtype, requires_grad=requires_grad)
    return like


zeros_like = _like(zeros)
ones_like = _like(ones)
empty_like = _like(empty)
rand_like = _like(rand)
randn_like = _like(randn)


def full_like(t, fill_value, *, dtype=None, device=None, requires_grad=False):
    return full(t.shape, fill_value, dtype=dtype or t.dtype, requires_grad=requires_grad)
