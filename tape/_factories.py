"""Making tensors: `tensor`, `as_tensor`, `from_numpy` and the factories,
with PyTorch's dtype rules (Python floats take the default dtype).
"""
import operator
import warnings

import numpy as np

from ._dtypes import as_dtype, get_default_dtype, promote_types, scalar_type_name
from ._tensor import Tensor, check_device, new_tensor, read_hooks, refuse_half_grad, wrap_value

__all__ = ["tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "eye", "arange", "logspace",
           "randperm", "linspace", "rand", "randn", "randint", "zeros_like", "ones_like", "full_like", "empty_like",
           "rand_like", "randn_like", "manual_seed"]

_rng = [np.random.default_rng()]


def manual_seed(seed):
    """Seed the generator behind rand*, randn* and randint."""
    _rng[0] = np.random.default_rng(int(seed))


# tape.compile's report of the tensors the factories make from Python data
# while some thread records (Note [Compiled replay] in tape/_compile.py)
static_hooks = []


def _make(array, requires_grad, device=None):
    check_device(device)
    if requires_grad and array.dtype.kind not in "fc":
        raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
    if requires_grad:
        refuse_half_grad(array.dtype)
    t = new_tensor(wrap_value(array), bool(requires_grad))
    if static_hooks:
        static_hooks[0](t)
    return t


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
            item_dtype = _infer_dtype(item)
            dtype = item_dtype if dtype is None else promote_types(dtype, item_dtype)
        return get_default_dtype() if dtype is None else dtype
    return np.asarray(data).dtype


def _unwrap(data, inside=False):
    """data with its tensors as arrays; a tensor inside a sequence is an
    element, as PyTorch reads it (through item(): one element only)."""
    if isinstance(data, Tensor):
        if inside:
            if data.numel() != 1:
                raise ValueError("only one element tensors can be converted to Python scalars")
            value = data._array().reshape(())
        else:
            value = data._array()
        if static_hooks:  # a value read, as item() is (Note [Compiled replay] in tape/_compile.py)
            read_hooks[0](data, "array", value.copy())
        return value
    if isinstance(data, (list, tuple)):
        return [_unwrap(d, True) for d in data]
    return data


def _warn_copy_construct(call):
    warnings.warn("To copy construct from a tensor, it is recommended to use sourceTensor.detach()."
                  "clone() or sourceTensor.detach().clone().requires_grad_(True), rather than "
                  f"{call}(sourceTensor).", UserWarning, stacklevel=3)


def tensor(data, *, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of `data` (numbers, nested lists, arrays, tensors).

    >>> import tape
    >>> tape.tensor([1.0, 2.0], requires_grad=True)
    tensor([1., 2.], requires_grad=True)
    """
    if isinstance(data, Tensor):
        _warn_copy_construct("tape.tensor")
    return _tensor_of(data, dtype, device, requires_grad)


def _tensor_of(data, dtype, device, requires_grad):
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
    return _make(array, requires_grad, device)


def as_tensor(data, dtype=None, device=None):
    """`data` as a tensor, sharing memory with a NumPy array of the same dtype."""
    check_device(device)
    if isinstance(data, Tensor):
        return data if dtype is None or data.dtype == as_dtype(dtype) else data.to(dtype)
    if isinstance(data, np.ndarray) and (dtype is None or data.dtype == as_dtype(dtype)):
        return from_numpy(data)
    return tensor(data, dtype=dtype)


def from_numpy(ndarray):
    """A tensor sharing memory with `ndarray`."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    if ndarray.dtype.kind not in "fiub":
        raise TypeError(f"can't convert np.ndarray of type numpy.{ndarray.dtype.type.__name__}. The "
                        "only supported types are: float64, float32, float16, int64, int32, int16, "
                        "int8, uint64, uint32, uint16, uint8, and bool.")
    return new_tensor(ndarray)


def _size_index(d):
    """A dimension: an int, or what stands for one (a 0-d integer tensor), not a float."""
    try:
        return operator.index(d)
    except TypeError:
        raise TypeError(f"argument 'size' must be tuple of ints, but found element of type "
                        f"{type(d).__name__}") from None


def _size(dims, size=None, negative=None):
    """The shape from a factory's arguments: ints, or one tuple or list, or
    PyTorch's `size=` keyword; a negative dimension raises `negative`, or
    PyTorch's usual text."""
    if size is not None:
        if dims:
            raise TypeError("got multiple values for argument 'size'")
        dims = (size,)
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    shape = tuple(_size_index(d) for d in dims)
    for d in shape:
        if d < 0:
            raise RuntimeError(negative or f"Trying to create tensor with negative dimension {d}: "
                                           f"{list(shape)}")
    return shape


def _fill(shape, value, dtype, device, requires_grad):
    dtype = as_dtype(dtype) or get_default_dtype()
    return _make(np.full(shape, value, dtype), requires_grad, device)


def zeros(*dims, size=None, dtype=None, device=None, requires_grad=False):
    shape = _size(dims, size, "zeros: Dimension size must be non-negative.")
    return _fill(shape, 0, dtype, device, requires_grad)


def ones(*dims, size=None, dtype=None, device=None, requires_grad=False):
    return _fill(_size(dims, size), 1, dtype, device, requires_grad)


def empty(*dims, size=None, dtype=None, device=None, requires_grad=False):
    return _fill(_size(dims, size), 0, dtype, device, requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    if dtype is None:
        dtype = _infer_dtype(fill_value)
    return _make(np.full(_size((size,)), fill_value, as_dtype(dtype)), requires_grad, device)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    for name, v in (("n", n), ("m", m)):
        if v is not None and v < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {v}")
    return _make(np.eye(n, m, dtype=as_dtype(dtype) or get_default_dtype()), requires_grad, device)


def arange(start=None, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    """Values from `start` (0 unless given) up to `end`, by `step`: arange(end)
    or arange(start, end, step), or with PyTorch's keywords (arange(end=4))."""
    if end is None:
        if start is None:
            raise TypeError('arange() missing 1 required positional arguments: "end"')
        start, end = 0, start
    elif start is None:
        start = 0
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is None:
        dtype = _infer_dtype([start, end, step])
    return _make(np.arange(start, end, step, dtype=as_dtype(dtype)), requires_grad, device)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    return _make(np.linspace(start, end, int(steps), dtype=as_dtype(dtype) or get_default_dtype()),
                 requires_grad, device)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    return _make(np.logspace(start, end, int(steps), base=base, dtype=as_dtype(dtype) or get_default_dtype()),
                 requires_grad, device)


def _float_dtype(dtype, kernel):
    dtype = as_dtype(dtype) or get_default_dtype()
    if dtype.kind != "f":
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{scalar_type_name(dtype)}'")
    return dtype


def rand(*dims, size=None, dtype=None, device=None, requires_grad=False):
    dtype = _float_dtype(dtype, "check_uniform_bounds")
    return _make(_rng[0].random(_size(dims, size)).astype(dtype), requires_grad, device)


def randn(*dims, size=None, dtype=None, device=None, requires_grad=False):
    dtype = _float_dtype(dtype, "normal_kernel_cpu")
    return _make(_rng[0].standard_normal(_size(dims, size)).astype(dtype), requires_grad, device)


def randperm(n, *, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0..n-1, from the generator manual_seed seeds."""
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    return _make(_rng[0].permutation(int(n)).astype(as_dtype(dtype) or np.int64), requires_grad, device)


def randint(low=0, high=None, size=(), *, dtype=None, device=None, requires_grad=False):
    """Integers uniform on [low, high): randint(high, size), randint(low, high,
    size), or with PyTorch's keywords (randint(high=5, size=(3,)))."""
    if isinstance(high, (tuple, list)):
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    return _make(_rng[0].integers(low, high, _size((size,))).astype(as_dtype(dtype) or np.int64),
                 requires_grad, device)


def _like(fn):
    def like(input, *, dtype=None, device=None, requires_grad=False):
        return fn(input.shape, dtype=dtype or input.dtype, device=device, requires_grad=requires_grad)
    like.__name__ = f"{fn.__name__}_like"
    return like


zeros_like = _like(zeros)
ones_like = _like(ones)
empty_like = _like(empty)
rand_like = _like(rand)
randn_like = _like(randn)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False):
    return full(input.shape, fill_value, dtype=dtype or input.dtype, device=device, requires_grad=requires_grad)

