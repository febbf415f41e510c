"""Elementwise ops. Each is one `defop` row: a scalar forward (math, for 0-d
float64), an array forward (NumPy) and its partial derivatives as
expressions over `x`, `y`, `out` (a one-element constant operand is `y`),
from which both the native kernel and the differentiable VJP are made.
"""
import math
import operator

import numpy as np

from tape._dtypes import as_dtype
from tape._record import _scalar_row, binary, record, unary
from tape._registry import defop
from tape._tape import state
from tape._tensor import Tensor, new_tensor, wrap_value

__all__ = ["add", "sub", "mul", "div", "true_divide", "neg", "pow", "exp", "log", "sin", "cos", "tanh",
           "sigmoid", "relu", "sqrt", "abs", "square", "clone", "to"]


def _sigmoid_scalar(x):
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _sigmoid_array(x):
    return 1.0 / (1.0 + np.exp(-x))


def _relu_array(x):
    return np.maximum(x, 0).astype(x.dtype, copy=False)


def _unary(name, grad_fn, partial, scalar, array):
    return unary(defop(name, grad_fn, 1, partials=(partial,)), scalar, array)


def _binary(name, grad_fn, partials, scalar, array):
    return binary(defop(name, grad_fn, 2, partials=partials), scalar, array)


_add = _binary("add", "AddBackward0", ("1", "1"), operator.add, np.add)
_sub = _binary("sub", "SubBackward0", ("1", "-1"), operator.sub, np.subtract)
mul = _binary("mul", "MulBackward0", ("y", "x"), operator.mul, np.multiply)
div = _binary("div", "DivBackward0", ("1 / y", "-out / y"),
              operator.truediv, np.true_divide)
true_divide = div
neg = _unary("neg", "NegBackward0", "-1", operator.neg, np.negative)
# x ** c for a number c: the exponent rides as the constant operand `y`, and
# the y == 0 branch keeps every order finite at x = 0 (no 0 * inf)
_pow_scalar = defop("pow_scalar", "PowBackward0", 1,
                    partials=("0.0 if y == 0 else y * x ** (y - 1)",))
_pow_tensor = _binary("pow", "PowBackward1", ("y * x ** (y - 1)", "out * log(x)"),
                      operator.pow, np.power)
exp = _unary("exp", "ExpBackward0", "out", math.exp, np.exp)
log = _unary("log", "LogBackward0", "1 / x", math.log, np.log)
sin = _unary("sin", "SinBackward0", "cos(x)", math.sin, np.sin)
cos = _unary("cos", "CosBackward0", "-sin(x)", math.cos, np.cos)
tanh = _unary("tanh", "TanhBackward0", "1 - out * out", math.tanh, np.tanh)
sigmoid = _unary("sigmoid", "SigmoidBackward0", "out * (1 - out)", _sigmoid_scalar,
                 _sigmoid_array)
# scalar forwards must return a new float object, never their input: the
# float is the row's liveness token (Note [Tape layout])
relu = _unary("relu", "ReluBackward0", "step(x)", lambda x: x * 1.0 if x > 0 else math.fabs(x * 0.0),
              _relu_array)
sqrt = _unary("sqrt", "SqrtBackward0", "0.5 / out", math.sqrt, np.sqrt)
abs = _unary("abs", "AbsBackward0", "sign(x)", math.fabs, np.abs)
square = _unary("square", "PowBackward0", "2 * x", lambda x: x * x, np.square)
clone = _unary("clone", "CloneBackward0", "1", lambda x: x * 1.0, np.copy)
_to_copy = defop("to_copy", "ToCopyBackward0", 1, partials=("1",))


def add(x, y, *, alpha=1):
    """x + alpha * y, broadcasting like NumPy.

    >>> import tape
    >>> tape.add(tape.tensor([1., 2.]), 1)
    tensor([2., 3.])
    """
    return _add(x, y if alpha == 1 else mul(y, alpha))


def sub(x, y, *, alpha=1):
    """x - alpha * y, broadcasting like NumPy."""
    return _sub(x, y if alpha == 1 else mul(y, alpha))


def _pow_scalar_value(x, c):
    try:
        r = x ** c
    except (ArithmeticError, ValueError):
        r = None
    if type(r) is not float:  # overflow, 0 ** -1, or a complex root of a negative base
        with np.errstate(all="ignore"):
            r = float(np.power(np.float64(x), c))
    return r


def pow(x, exponent):
    """x ** exponent. A number exponent gives PowBackward0, a tensor one PowBackward1.

    >>> import tape
    >>> tape.pow(tape.tensor(3.0), 2)
    tensor(9.)
    """
    if type(exponent) not in (int, float) or not isinstance(x, Tensor):
        return _pow_tensor(x, exponent)
    xv = x._value
    if type(xv) is float:
        out = _pow_scalar_value(xv, exponent)
        if x._rg and state.tape.grad_enabled:
            return _scalar_row(state.tape, _pow_scalar.code, out, x, None, exponent)
        return new_tensor(out)
    with np.errstate(all="ignore"):
        out = wrap_value(np.power(xv, exponent))
    if x._rg and state.tape.grad_enabled:
        return record(_pow_scalar, out, (x, None), c=float(exponent))
    return new_tensor(out)


def to(x, dtype):
    """A copy converted to `dtype` (differentiable between float dtypes)."""
    dtype = as_dtype(dtype)
    if x.dtype == dtype:
        return x
    out = wrap_value(x._array().astype(dtype))
    if x._rg and state.tape.grad_enabled and dtype.kind == "f":
        return record(_to_copy, out, (x,))
    return new_tensor(out)


def _rsub(x, y):
    return sub(y, x)


def _rdiv(x, y):
    return div(y, x)


def _rpow(x, y):
    return _pow_tensor(y, x)


for _name, _fn in {"__add__": _add, "__radd__": lambda x, y: _add(y, x), "__sub__": _sub, "__rsub__": _rsub,
                   "__mul__": mul, "__rmul__": lambda x, y: mul(y, x), "__truediv__": div,
                   "__rtruediv__": _rdiv, "__pow__": pow, "__rpow__": _rpow, "__neg__": neg,
                   "__abs__": abs, "add": add, "sub": sub, "mul": mul, "div": div, "neg": neg,
                   "pow": pow, "exp": exp, "log": log, "sin": sin, "cos": cos, "tanh": tanh,
                   "sigmoid": sigmoid, "relu": relu, "sqrt": sqrt, "abs": abs, "square": square,
                   "clone": clone, "to": to}.items():
    setattr(Tensor, _name, _fn)
Tensor.float = lambda self: to(self, np.float32)
Tensor.double = lambda self: to(self, np.float64)
