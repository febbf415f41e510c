"""In-place ops (`add_`, `x += y`, `zero_`, ...). Each runs the out-of-place
op, records it like any op, and writes the result into the tensor, which
takes the new row; the rows that saw the old value become dirty (see
`Tensor.bump_version`), so a backward that needs them raises PyTorch's error.
"""
import numpy as np

from tape._grad_mode import no_grad
from tape._record import record
from tape._registry import defop, lookup
from tape._tape import state, where
from tape._tensor import Tensor, new_tensor, wrap_value

from ops.elementwise import add, div, mul, sub

__all__ = ["add_", "sub_", "mul_", "div_", "zero_", "fill_"]


def _no_gradient_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    return


def _no_gradient(ctx, g):
    return (None,)


_ZERO = defop("zero_", "ZeroBackward0", 1, vjp=_no_gradient, native=_no_gradient_native)
_FILL = defop("fill_", "FillBackward0", 1, vjp=_no_gradient, native=_no_gradient_native)


def _requires_grad(v):
    return isinstance(v, Tensor) and v._rg


def _check_inplace(t, recording):
    if not recording:
        return
    if t._rg and t.is_leaf:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    views = t._vc.other_views(t) if t._vc is not None else []
    if (t._base is not None and (t._rg or t._base._rg)) or any(v._rg for v in views):
        raise RuntimeError("in-place operations on a tensor that shares storage with a view, while "
                           "recording for autograd, are not supported yet; use the out-of-place op")


def _write(t, res):
    """Write `res` (a Tensor of t's shape) into t's storage and bump t's version."""
    if res.shape != t.shape:
        raise RuntimeError(f"output with shape {list(t.shape)} doesn't match the broadcast shape "
                           f"{list(res.shape)}")
    if not np.can_cast(res.dtype, t.dtype, "same_kind"):
        raise RuntimeError(f"result type {res.dtype.name} can't be cast to the desired output type "
                           f"{t.dtype.name}")
    t.bump_version()
    if type(t._value) is float or t.ndim == 0 and not isinstance(t._value, np.ndarray):
        t._value = float(res.item())
        if t._base is not None and type(t._base._value) is float:
            t._base._set_storage(t._value)
    else:
        np.copyto(t._value, res._array(), casting="same_kind")


def _rebind(t, res):
    """Give t the row that recorded `res`; the row's value lives on in keep."""
    tp, r = where(res)
    tp.owners[r] = t._value if type(t._value) is float else t
    if type(res._value) is not float:
        tp.keep[r] = res._value
    t._ep, t._row, t._rg = tp.ep, r, True
    if t._vc is not None:
        t._vc.rows.append((tp.ep, r))


def _apply(t, compute, *args):
    recording = state.tape.grad_enabled and (t._rg or any(_requires_grad(a) for a in args))
    _check_inplace(t, recording)
    if recording:
        # a constant's old value must survive the write for the VJP that saved it
        x = t if t._rg else new_tensor(wrap_value(np.array(t._value, copy=True)))
        res = compute(x, *args)
        _write(t, res)
        _rebind(t, res)
        return t
    was_recorded = t._rg and not t.is_leaf
    with no_grad():
        res = compute(t, *args)
    if t._rg and t.is_leaf:
        t._drop_row()  # the next use registers the new value
    _write(t, res)
    if was_recorded:
        # keep the history, as PyTorch does: a fresh row whose value is the new one
        clone = lookup("clone")
        res = record(clone, t._value, (t,))
        _rebind(t, res)
    return t


def add_(t, other, *, alpha=1):
    return _apply(t, lambda x, y: add(x, y, alpha=alpha), other)


def sub_(t, other, *, alpha=1):
    return _apply(t, lambda x, y: sub(x, y, alpha=alpha), other)


def mul_(t, other):
    return _apply(t, mul, other)


def div_(t, other):
    return _apply(t, div, other)


def _constant_op(opdef, fill):
    def compute(x):
        value = wrap_value(np.full(x.shape, fill, x.dtype))
        if x._rg and state.tape.grad_enabled:
            return record(opdef, value, (x,))
        return new_tensor(value)
    return compute


def zero_(t):
    return _apply(t, _constant_op(_ZERO, 0))


def fill_(t, value):
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                               f"{value.ndim} dimensions.")
        value = value.item()
    return _apply(t, _constant_op(_FILL, value))


for _name, _fn in {"add_": add_, "sub_": sub_, "mul_": mul_, "div_": div_, "zero_": zero_,
                   "fill_": fill_, "__iadd__": add_, "__isub__": sub_, "__imul__": mul_,
                   "__itruediv__": div_}.items():
    setattr(Tensor, _name, _fn)
