"""Tensor.new_zeros, new_ones, new_empty, new_full and new_tensor: the
factories, in the tensor's dtype unless told.
"""
from ops._declare import declare, exports
from tape._batched import batched, with_levels
from tape._factories import _tensor_of, _warn_copy_construct, empty, full, ones, zeros
from tape._tensor import Tensor


def _batched_new(op, args):
    """A new tensor of a batched one, as PyTorch's: batched as it is, each
    sample the same (a copy of its own, writable in place)."""
    name, x = next(iter(args.arguments.items()))
    args.arguments[name] = x.phys
    return batched(with_levels(op(*args.args, **args.kwargs), x.levels), x.levels)


def _new(fn):
    def new(self, *dims, size=None, dtype=None, device=None, requires_grad=False):
        return fn(*dims, size=size, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)
    new.__name__ = f"new_{fn.__name__}"
    declare(new, function=False, batch=_batched_new)


for _fn in (zeros, ones, empty):
    _new(_fn)


@declare(function=False, batch=_batched_new)
def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    return full(size, fill_value, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)


@declare(function=False, batch=_batched_new)
def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
    if isinstance(data, Tensor):
        _warn_copy_construct("tensor.new_tensor")
    return _tensor_of(data, dtype or self.dtype, device, requires_grad)


__all__ = exports(globals())
