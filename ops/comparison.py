"""Comparisons: `< <= > >= == !=` and their named forms. Their results are
bool tensors, which are constants: nothing is recorded."""
import numpy as np

from tape._record import broadcast_shapes, operand_value
from tape._tensor import Tensor, new_tensor, wrap_value

__all__ = ["eq", "ne", "lt", "le", "gt", "ge"]


def _comparison(ufunc):
    def compare(x, y):
        if isinstance(x, Tensor) and isinstance(y, Tensor):
            broadcast_shapes(x.shape, y.shape)  # PyTorch's error text on a mismatch
        return new_tensor(wrap_value(np.asarray(ufunc(operand_value(x), operand_value(y)))))
    compare.__name__ = ufunc.__name__
    return compare


eq = _comparison(np.equal)
ne = _comparison(np.not_equal)
lt = _comparison(np.less)
le = _comparison(np.less_equal)
gt = _comparison(np.greater)
ge = _comparison(np.greater_equal)

_OPERANDS = (Tensor, int, float, bool, np.ndarray, np.generic)


def _operator(compare):
    """The operator form (of comparisons, and of ops.logical's `& | ^`): other
    operands (None, strings, lists) are not ours, so Python decides (x == None
    is False, x < None a TypeError), as in PyTorch."""
    def operator(x, y):
        return compare(x, y) if isinstance(y, _OPERANDS) else NotImplemented
    return operator


for _name, _fn in {"eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt, "ge": ge}.items():
    setattr(Tensor, _name, _fn)
    setattr(Tensor, f"__{_name}__", _operator(_fn))
