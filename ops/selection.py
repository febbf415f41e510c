"""where: elements of one tensor or another by a boolean condition. It is a
composition of recorded ops (the other operand broadcast and copied, then the
chosen elements of the first assigned into it), so its gradients of any order
are theirs: each input gets the gradient where it was chosen."""
import numpy as np

from tape._dtypes import scalar_type_name
from tape._record import broadcast_shapes, python_number
from tape._tape import state
from tape._tensor import Tensor, new_tensor, wrap_value

from ops.elementwise import clone, to
from ops.inplace import setitem
from ops.shape import expand, getitem

__all__ = ["where"]


def where(condition, input=None, other=None):
    """input where condition holds, else other (tensors or numbers, broadcast);
    where(condition) alone is the tuple of the indices where it holds."""
    mask = condition._array() if isinstance(condition, Tensor) else np.asarray(condition)
    if mask.dtype != np.bool_:
        raise RuntimeError("where expected condition to be a boolean tensor, but got a tensor with "
                           f"dtype {scalar_type_name(mask.dtype)}")
    if input is None and other is None:
        return tuple(new_tensor(wrap_value(np.asarray(i, np.int64))) for i in np.nonzero(mask))
    x, y = python_number(input), python_number(other)
    xv = x._array() if isinstance(x, Tensor) else x
    yv = y._array() if isinstance(y, Tensor) else y
    value = np.where(mask, xv, yv)
    grad = state.tape.grad_enabled and any(isinstance(t, Tensor) and t._rg for t in (x, y))
    if not grad:
        return new_tensor(wrap_value(value))
    shape = broadcast_shapes(broadcast_shapes(mask.shape, np.shape(xv)), np.shape(yv))
    mask = np.broadcast_to(mask, shape)
    out = clone(_full(y, shape, value.dtype))
    setitem(out, mask, getitem(_full(x, shape, value.dtype), mask))
    return out


def _full(v, shape, dtype):
    """Operand v (a tensor or a number) as a tensor of `shape` and `dtype`."""
    if not isinstance(v, Tensor):
        return new_tensor(wrap_value(np.full(shape, v, dtype)))
    return expand(to(v, dtype), shape)


Tensor.where = lambda self, condition, other: where(condition, self, other)
