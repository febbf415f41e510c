"""Elementwise ops. Each is one `defop` row: a scalar forward (math, for 0-d
float64), an array forward (NumPy) and its partial derivatives as
expressions over `x`, `y`, `out` (a one-element constant operand is `y`),
from which both the native kernel and the differentiable VJP are made.
"""
import builtins
import math
import operator

import numpy as np

from tape import _vecmath
from tape._dtypes import as_dtype, cpp_type_name, get_default_dtype, not_implemented_for, promoted, result_type
from tape._batched import elementwise
from tape._node import keep_arguments
from tape._record import (binary, broadcast_shapes, formula_node, operand_value, python_number, quiet, record, sum_to,
                          unary, with_constant)
from tape._registry import SAVES_X, SAVES_Y, SAVES_Z, defop, native_helper
from tape._tape import state
from tape._tensor import Tensor, check_device, made_hooks, new_tensor, refuse_half_grad, wrap_value
from tape._tensor import device as _Device

from ops._declare import declare, exports

def sigmoid_of_number(x):
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _sigmoid_array(x):
    if x.dtype.kind != "f":  # -x of a bool raises, of a uint8 wraps around
        x = x.astype(get_default_dtype())
    return 1.0 / (1.0 + np.exp(-x))


def _refusing_bool(array_fn, error):
    """array_fn, raising PyTorch's `error` for a bool tensor (NumPy computes one)."""
    def forward(x):
        if x.dtype == np.bool_:
            raise error
        return array_fn(x)
    return forward


def _relu_array(x):
    # PyTorch's x < 0 ? 0 : x, which keeps -0.0 and nan (np.maximum(-0.0, 0) is 0.0)
    return np.where(x < 0, 0, x).astype(x.dtype, copy=False)


def _not_for_bool(kernel, fn):
    return _refusing_bool(fn, not_implemented_for(kernel, np.bool_))


# below this many elements NumPy's ufunc call is as fast as the kernel, and a
# small script never loads the kernel's machine code
_KERNEL_MIN_SIZE = 64


try:
    from numpy._core._multiarray_umath import __cpu_features__ as _NUMPY_CPU_FEATURES
except ImportError:  # NumPy 1
    from numpy.core._multiarray_umath import __cpu_features__ as _NUMPY_CPU_FEATURES


def _float64_kernel(kernel, ufunc, numpy_simd=None):
    """An array forward that runs tape._vecmath's vectorized `kernel` on float64
    (NumPy's float64 sin and cos are scalar libm) and `ufunc` otherwise; or
    `ufunc` alone where this CPU has the feature `numpy_simd` with which
    NumPy vectorizes the function itself. With AVX-512 it does so for exp
    (AVX512F) and tanh (AVX512_SKX), faster than the kernel (measured on a
    Sapphire Rapids core: exp 2.0 vs 4.0 us, tanh 4.0 vs 5.0 us on 2,048
    elements; 1.2 vs 2.0 ms and 2.0 vs 2.5 ms on 10^6)."""
    if _NUMPY_CPU_FEATURES.get(numpy_simd):
        return ufunc

    def forward(x):
        if x.dtype != np.float64 or x.size < _KERNEL_MIN_SIZE:
            return ufunc(x)
        out = np.empty(x.shape)
        kernel(np.ascontiguousarray(x).reshape(-1), out.reshape(-1))
        return out
    return forward


# PyTorch's signatures of the elementwise functions
_UNARY = "input, *, out=None"
_BINARY = "input, other, *, out=None"


def _unary(name, grad_fn, partial, scalar, array, *, public=True, inplace=True, signature=_UNARY, saved=None,
           forward=None, **declaration):
    """An elementwise op of one input: its row (`saved`: PyTorch's names of
    what it saves, Note [Saved values' names] in tape._registry), and when
    `public` its declaration (Note [Op declarations]): tape.<name>,
    Tensor.<name> and, with `inplace`, Tensor.<name>_."""
    op = unary(defop(name, grad_fn, 1, partials=(partial,), saved=saved, forward=forward), scalar, array)
    if public:
        declare(op, signature=signature, inplace=inplace, batch=elementwise, **declaration)
    return op


def _binary(name, grad_fn, partials, scalar, array, saved=None, forward=None):
    return binary(defop(name, grad_fn, 2, partials=partials, saved=saved, forward=forward), scalar, array)


# x + y and x - y save alpha 1; with another alpha, add and sub are rows of
# their own that scale other's gradient by it (p), as PyTorch's nodes
_ALPHA = (("alpha", lambda row: 1),)
_add = _binary("add", "AddBackward0", ("1", "1"), operator.add, np.add, _ALPHA, forward="x + y")
_ADD_ALPHA = defop("add_alpha", "AddBackward0", 2, partials=("1", "p"), saved=(("alpha", "p"),),
                   forward="x + p * y")
def _is_bool(v):
    return isinstance(v, (bool, np.bool_)) or isinstance(v, np.ndarray) and v.dtype == np.bool_


def _subtract(x, y):
    # PyTorch refuses bools here, where NumPy would compute or raise its own error
    if _is_bool(x) and _is_bool(y):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    if _is_bool(x) or _is_bool(y):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you "
                           "are trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    return np.subtract(x, y)


_sub = _binary("sub", "SubBackward0", ("1", "-1"), operator.sub, _subtract, _ALPHA, forward="x - y")
_SUB_ALPHA = defop("sub_alpha", "SubBackward0", 2, partials=("1", "-p"), saved=(("alpha", "p"),),
                   forward="x - p * y")
mul = declare(_binary("mul", "MulBackward0", ("y", "x"), operator.mul, np.multiply, forward="x * y"), signature=_BINARY,
              methods=("mul", "__mul__", "__rmul__"), aliases=("multiply",), operands=2, batch=elementwise)
# y's partial reads x and y, not out, as PyTorch's does: a later in-place
# change to the quotient does not spoil the division's backward
# -(x / y / y), not -x / (y * y), as PyTorch's: its own derivatives stay 0,
# not 0 * inf, where y is infinite, and y * y does not overflow first; a
# product, g * -(x / y / y), as PyTorch's -grad * ((self / other) / other)
true_divide = _binary("div", "DivBackward0", ("1 / y", "-(x / y / y)"),
                      operator.truediv, np.true_divide, forward="x / y")
declare(true_divide, name="true_divide", signature=_BINARY, methods=("true_divide",), operands=2, batch=elementwise)


def _trunc_div_scalar(x, y):
    q = x / y
    return float(math.trunc(q)) if math.isfinite(q) else q


def _trunc_div_array(x, y):
    # integers as C divides them (toward zero), floats as trunc(x / y), as PyTorch's
    if np.result_type(x, y).kind in "biu":
        q = np.floor_divide(x, y)
        return np.where((np.remainder(x, y) != 0) & ((np.asarray(x) < 0) != (np.asarray(y) < 0)), q + 1, q)
    return np.trunc(np.true_divide(x, y))


# div with rounding_mode: recorded with no gradient, as PyTorch's DivBackward2
_trunc_div = _binary("trunc_div", "DivBackward2", ("0", "0"), _trunc_div_scalar, _trunc_div_array,
                     (("rounding_mode", lambda row: "trunc"),))


@declare(signature="input, other, *, rounding_mode=None, out=None", methods=("div", "__truediv__"),
         aliases=("divide",), operands=2, batch=elementwise)
def div(input, other, *, rounding_mode=None):
    """input / other; rounding_mode "trunc" or "floor" rounds the quotient, as PyTorch's."""
    if rounding_mode is None:
        return true_divide(input, other)
    if rounding_mode == "floor":
        return floor_div_op(input, other)
    if rounding_mode == "trunc":
        return _trunc_div(input, other)
    raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'")
def _negative(x):
    if x.dtype == np.bool_:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are "
                           "trying to invert a mask, use the `~` or `logical_not()` operator instead.")
    return np.negative(x)


neg = _unary("neg", "NegBackward0", "-1", operator.neg, _negative, aliases=("negative",),
             methods=("neg", "__neg__"), forward="-x")
def _reciprocal_array(x):
    # integers and bools give the default float dtype, as in PyTorch (1 / 0 is inf)
    return np.reciprocal(x) if x.dtype.kind == "f" else np.true_divide(1, x, dtype=get_default_dtype())


reciprocal = _unary("reciprocal", "ReciprocalBackward0", "-out * out", lambda x: 1.0 / x,
                    _reciprocal_array, forward="1.0 / x")


def _with_constant(name, grad_fn, partial, scalar, array, saved=None, forward=None):
    return with_constant(defop(name, grad_fn, 1, partials=(partial,), saved=saved, forward=forward), scalar, array)


def _power(x, c):
    """np.power for a number exponent, with PyTorch's RuntimeError for
    integers to negative integer powers, empty ones too."""
    if np.result_type(x).kind in "biu" and isinstance(c, (int, np.integer)) and c < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    return np.power(x, c)


def _power_tensor(x, y):
    """np.power with a tensor exponent. Integers to negative integer powers
    follow PyTorch (NumPy refuses them): 1 for a base of 1, -1 or 1 for a base
    of -1 by the exponent's parity, 0 for any other base."""
    xa, ya = np.asarray(x), np.asarray(y)
    if xa.dtype.kind in "iu" and ya.dtype.kind in "iu" and (ya < 0).any():
        negative = np.where(xa == 1, 1, np.where(xa == -1, np.where(ya % 2 == 0, 1, -1), 0))
        return np.where(ya < 0, negative, np.power(xa, np.maximum(ya, 0))).astype(
            np.result_type(xa, ya))
    if xa.ndim and not ya.ndim and ya == 0.5:
        # NumPy takes sqrt for a repeated exponent of 0.5, which is not PyTorch's
        # pow of two tensors at -inf and -0.0 ((-inf) ** 0.5 is inf there)
        return np.power(x, np.full(xa.shape, ya))
    return np.power(x, y)


def _pow_array(x, c):
    """x ** c for a number c. Float arrays take PyTorch's shortcuts for the
    common exponents (2, 3, 0.5, -0.5, -1, -2): libm's pow costs 16 ns an element here (x ** 3 on 50,000
    elements: 820 us against 28 us as x * x * x), and NumPy has none for 1 or 3."""
    if x.dtype.kind != "f":
        return _power(x, c)
    if c == 2:
        return np.square(x)
    if c == 3:
        return np.square(x) * x
    if c == 1:
        return x.copy()
    if c == 0.5:
        return np.sqrt(x)
    if c == -0.5:
        return np.reciprocal(np.sqrt(x))
    if c == -1:
        return np.reciprocal(x)
    if c == -2:
        return np.reciprocal(np.square(x))
    return np.power(x, c)


def _pow_float(x, c):
    """x ** c of a float by _pow_array's shortcuts, which the native npow takes too."""
    if c == 2:
        return x * x
    if c == 3:
        return x * x * x
    if c == 0.5:
        return math.sqrt(x)
    if c == -0.5:
        return 1.0 / math.sqrt(x)
    if c == -1:
        return 1.0 / x
    if c == -2:
        return 1.0 / (x * x)
    return x ** c


# x ** c, c - x and c ** x for a number c, which is the constant operand `y`;
# x ** 0 has no gradient (PyTorch's zeros_like: a selection, Note [Selecting
# partials]), and is_zero(y) in the exponent keeps every order of x ** n
# finite at x = 0 (no 0 * inf)
_pow_number = _with_constant("pow_scalar", "PowBackward0", "(1 - is_zero(y)) * y * x ** (y - 1 + is_zero(y))",
                             _pow_float, _pow_array,
                             saved=(("self", "x"), ("exponent", "c")), forward="x ** y")
_rsub_number = _with_constant("rsub", "RsubBackward1", "-1", lambda x, c: c - x,
                              lambda x, c: c - x, _ALPHA, forward="y - x")
# a power's gradient for its exponent is 0 where the base is 0 and the
# exponent >= 0, as in PyTorch (not 0 * log(0), which is nan)
_rpow_number = _with_constant("rpow", "PowBackward2", "out * log(y + zero_base(y, x))",
                              lambda x, c: c ** x, lambda x, c: _power_tensor(c, x),
                              saved=(("exponent", "x"), ("self", "c"), ("result", "out")), forward="y ** x")
# and for its base y * x ** (y - 1): 0 where the exponent is 0, whatever x
# (nan too), and so is its derivative for the exponent there, as PyTorch's
# where(exponent == 0, 0, ...); the exponent is 0 there, not -1, so that no
# order is 0 * inf at x == 0
_pow_tensor = _binary("pow", "PowBackward1",
                      ("(1 - is_zero(y)) * y * x ** (y - 1 + is_zero(y))", "out * log(x + zero_base(x, y))"),
                      operator.pow, _power_tensor, saved=(("exponent", "y"), ("self", "x"), ("result", "out")),
                      forward="x ** y")
def _remainder_scalar(x, y):
    m = math.fmod(x, y)
    return m + y if m != 0 and (y < 0) != (m < 0) else m


def _integer_divisor_check(x, y):
    # integer division by zero: PyTorch raises where NumPy returns 0
    if np.result_type(x, y).kind in "iub" and not np.all(y) and np.broadcast(x, y).size:
        raise RuntimeError("ZeroDivisionError")


def _remainder_array(x, y):
    # PyTorch's kernel: fmod, moved into y's sign; unlike np.remainder, an
    # exact zero keeps the sign of x
    _integer_divisor_check(x, y)
    m = np.fmod(x, y)
    return np.where((m != 0) & ((np.asarray(y) < 0) != (m < 0)), m + y, m)


@native_helper
def floor_div(x, y):
    """PyTorch's floor division of floats (div_floor_floating): from fmod, so
    consistent with remainder, x - y * floor_div(x, y); -1, not floor(-0.0),
    for x < 0 over an infinite y."""
    if y == 0:
        return x / y  # inf or nan natively; Python raises, and its callers take NumPy's
    mod = np.fmod(x, y)
    div = (x - mod) / y
    if mod != 0 and (y < 0) != (mod < 0):
        div -= 1.0
    if div == 0:
        return math.copysign(0.0, x / y)
    whole = np.floor(div)  # a float natively (math.floor is an integer there: nan would be garbage)
    return whole + 1.0 if div - whole > 0.5 else whole * 1.0


# floor_div as an op of the partials' vocabulary (np.floor_divide is the same
# algorithm): recorded with no gradient, as PyTorch's div(rounding_mode="floor"),
# and no division to differentiate, whose 0 * inf made remainder's second
# derivative nan
floor_div_op = _binary("floor_div", "DivBackward2", ("0", "0"), floor_div, np.floor_divide,
                       (("rounding_mode", lambda row: "floor"),))
# x % y takes y's sign, as Python's % and torch.remainder do; d/dy is minus
# PyTorch's floor division of x by y (1 for x < 0 over y = inf, as x + y says)
_remainder = _binary("remainder", "RemainderBackward1", ("1", "-floor_div(x, y)"), _remainder_scalar,
                     _remainder_array)
_remainder_number = _with_constant("remainder_scalar", "RemainderBackward0", "1", _remainder_scalar,
                                   _remainder_array)
exp = _unary("exp", "ExpBackward0", "out", math.exp, _float64_kernel(_vecmath.exp_array, np.exp, "AVX512F"),
             forward="exp(x)")
log = _unary("log", "LogBackward0", "1 / x", math.log, np.log, forward="log(x)")
sin = _unary("sin", "SinBackward0", "cos(x)", math.sin, _float64_kernel(_vecmath.sin_array, np.sin), forward="sin(x)")
cos = _unary("cos", "CosBackward0", "-sin(x)", math.cos, _float64_kernel(_vecmath.cos_array, np.cos), forward="cos(x)")
tanh_forward = _float64_kernel(_vecmath.tanh_array, np.tanh, "AVX512_SKX")
tanh = _unary("tanh", "TanhBackward0", "1 - out * out", math.tanh, tanh_forward, forward="tanh(x)")
sigmoid = _unary("sigmoid", "SigmoidBackward0", "out * (1 - out)", sigmoid_of_number,
                 _sigmoid_array, forward="sigmoid(x)")
# scalar forwards must return a new float object, never their input: the
# float is the row's liveness token (Note [Tape layout])
# relu saves its result, as PyTorch does
relu = _unary("relu", "ReluBackward0", "step(out)",
              lambda x: math.fabs(0.0) if x < 0 else x * 1.0,
              _refusing_bool(_relu_array, RuntimeError("Boolean inputs not supported for relu")),
              forward="0.0 if x < 0 else x * 1.0")
sqrt = _unary("sqrt", "SqrtBackward0", "1 / (2 * out)", math.sqrt, np.sqrt, forward="sqrt(x)")
abs = _unary("abs", "AbsBackward0", "sign(x)", math.fabs, _not_for_bool("abs_cpu", np.abs), aliases=("absolute",),
             methods=("abs", "__abs__"), forward="fabs(x)")


def _sign_scalar(x):
    return float((x > 0) - (x < 0))  # 0 for nan, as PyTorch's


def _floor_array(x):
    return np.floor(x) if x.dtype.kind == "f" else x.copy()


# Piecewise-constant ops: their derivative is 0, and it is recorded, so the
# create_graph gradients of relu, abs and remainder, whose partials use them,
# require grad and differentiate to zeros, as PyTorch's do
def _sign_array(x):
    # the sign of a bool is itself, as in PyTorch (NumPy has no loop for it)
    return x.copy() if x.dtype == np.bool_ else np.nan_to_num(np.sign(x), nan=0.0)


sign = _unary("sign", "SignBackward0", "0", _sign_scalar, _sign_array)


def _signed_whole(whole, x):
    # math's rounding gives an int: a zero result takes x's sign, as the
    # float rounding of NumPy and PyTorch (ceil(-0.2) is -0.0)
    return math.copysign(float(whole), x)
floor = _unary("floor", "FloorBackward0", "0", lambda x: _signed_whole(math.floor(x), x),
               _not_for_bool("floor_vml_cpu", _floor_array), forward="floor(x)")
# relu's partial (PyTorch's threshold_backward); not public
# 1 at nan, where relu's backward (its one use) keeps the gradient in PyTorch
step = _unary("step", "StepBackward0", "0", lambda x: float(not x <= 0),
              lambda x: (~(x <= 0)).astype(x.dtype), public=False)


def _integer_rounding(ufunc):
    # an integer tensor is already whole: a copy, in its dtype, as in PyTorch
    return lambda x: ufunc(x) if x.dtype.kind == "f" else x.copy()


ceil = _unary("ceil", "CeilBackward0", "0", lambda x: _signed_whole(math.ceil(x), x),
              _not_for_bool("ceil_vml_cpu", _integer_rounding(np.ceil)))
trunc = _unary("trunc", "TruncBackward0", "0", lambda x: _signed_whole(math.trunc(x), x),
               _not_for_bool("trunc_vml_cpu", _integer_rounding(np.trunc)), aliases=("fix",))
# half to even, as Python's round, NumPy's and PyTorch's
_round = _unary("round", "RoundBackward0", "0", lambda x: _signed_whole(builtins.round(x), x),
                _not_for_bool("round_vml_cpu", _integer_rounding(np.round)), public=False)
# to `decimals` places as PyTorch computes it, x * 10**d rounded, over 10**d
# (NumPy's formula too; Python's round(x, d) rounds the exact decimal instead)
def _round_to(x, decimals):
    if x.dtype.kind != "f":
        raise not_implemented_for("round_cpu", x.dtype)
    return np.round(x, int(decimals))


_round_decimals = _with_constant("round_decimals", "RoundBackward1", "0",
                                 lambda x, d: float(np.round(x, int(d))), _round_to)


@declare(signature="input, *, decimals=0, out=None", batch=elementwise)
def round(input, *, decimals=0):
    """Round half to even, to `decimals` decimal places."""
    return _round(input) if decimals == 0 else _round_decimals(input, decimals)
def _maximum_scalar(x, y):
    return (x if x >= y or x != x else y) * 1.0  # nan wins, as in PyTorch


def _minimum_scalar(x, y):
    return (x if x <= y or x != x else y) * 1.0


# x on a tie, as PyTorch gives it: maximum(-0.0, 0.0) is -0.0, where NumPy's
# maximum gives the second operand
def _maximum_array(x, y):
    return np.where((x >= y) | (x != x), x, y)


def _minimum_array(x, y):
    return np.where((x <= y) | (x != x), x, y)


# PyTorch's gradient: all of g to the larger input, to both where one is nan,
# half to each on a tie (inf == inf too); `within` is a constant mask, as
# PyTorch's where() on one is. within(x, -inf, y) is x <= y, within(x, y, y) x == y
maximum = _binary("maximum", "MaximumBackward0",
                  ("1 - within(x, -1e309, y) + 0.5 * within(x, y, y)",
                   "1 - within(y, -1e309, x) + 0.5 * within(y, x, x)"),
                  _maximum_scalar, _maximum_array)
declare(maximum, signature=_BINARY, operands=2, batch=elementwise)
minimum = _binary("minimum", "MinimumBackward0",
                  ("1 - within(x, y, 1e309) + 0.5 * within(x, y, y)",
                   "1 - within(y, x, 1e309) + 0.5 * within(y, x, x)"),
                  _minimum_scalar, _minimum_array)
declare(minimum, signature=_BINARY, operands=2, batch=elementwise)
# PyTorch takes 1 / (x^2 + y^2) to be 0 where it is inf: the gradient at the
# origin (or where the squares underflow) is 0, not nan
atan2 = _binary("atan2", "Atan2Backward0",
                ("y * (1 - is_zero(x * x + y * y)) / (x * x + y * y + is_zero(x * x + y * y))",
                 "-x * (1 - is_zero(x * x + y * y)) / (x * x + y * y + is_zero(x * x + y * y))"),
                math.atan2, np.arctan2, forward="atan2(x, y)")


declare(atan2, signature=_BINARY, aliases=("arctan2",), operands=2, batch=elementwise)
def _erf_array(x):
    """erf in x's float dtype (integers and bools in the default one, by unary)."""
    out = np.empty(x.shape)
    _vecmath.erf_array(np.ascontiguousarray(x, np.float64).reshape(-1), out.reshape(-1))
    return out.astype(x.dtype, copy=False) if x.dtype.kind == "f" else out


erf = _unary("erf", "ErfBackward0", "1.1283791670955126 * exp(-x * x)", math.erf, _erf_array, inplace=False,
             forward="erf(x)")


def _refuse_integers(kernel, t):
    """PyTorch's error for an integer or bool tensor given to a kernel that has no loop for them."""
    if isinstance(t, Tensor) and t.dtype.kind in "biu":
        raise not_implemented_for(kernel, t.dtype)


def _refusing_integers(kernel, array_fn):
    """array_fn, raising PyTorch's error for integer and bool operands, which
    PyTorch's kernel has no loop for (NumPy would compute in floats)."""
    def forward(*operands):
        kinds = [np.asarray(v).dtype.kind for v in operands if not isinstance(v, (int, float))]
        if kinds and all(k in "biu" for k in kinds):
            raise not_implemented_for(kernel, np.result_type(*(v for v in operands if not isinstance(v, (int, float)))))
        return array_fn(*operands)
    return forward


def _silu_scalar(x):
    return x * sigmoid_of_number(x)


# x * sigmoid(x), PyTorch's torch.nn.functional.silu
silu = _unary("silu", "SiluBackward0", "sigmoid(x) * (1 + x * (1 - sigmoid(x)))", _silu_scalar,
              _refusing_integers("silu_cpu", lambda x: x * _sigmoid_array(x)), inplace=False, signature="input",
              forward="x * sigmoid(x)")


def _gelu_scalar(x):
    return 0.5 * x * (1.0 + math.erf(x * 0.7071067811865476))


def _gelu_array(x):
    return 0.5 * x * (1.0 + _erf_array(x * 0.7071067811865476))


# with approximate="tanh": 0.5 x (1 + tanh(k (x + 0.044715 x^3))), k = sqrt(2 / pi)
def _gelu_tanh_scalar(x):
    return 0.5 * x * (1.0 + math.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def _gelu_tanh_array(x):
    return 0.5 * x * (1.0 + tanh_forward(0.7978845608028654 * (x + 0.044715 * x * x * x)))


_gelu = _unary("gelu", "GeluBackward0",
               "0.5 * (1 + erf(x * 0.7071067811865476)) + x * 0.3989422804014327 * exp(-0.5 * x * x)",
               _gelu_scalar, _gelu_array, public=False, saved=(("self", "x"), ("approximate", lambda row: "none")),
               forward="0.5 * x * (1.0 + erf(x * 0.7071067811865476))")
_gelu_tanh = _unary("gelu_tanh", "GeluBackward0",
                    "0.5 * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))) + 0.5 * x * "
                    "(1 - tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)) ** 2) * 0.7978845608028654 * "
                    "(1 + 0.134145 * x * x)", _gelu_tanh_scalar, _gelu_tanh_array, public=False,
                    saved=(("self", "x"), ("approximate", lambda row: "tanh")))


@declare(signature="input, *, approximate='none', out=None", batch=elementwise)
def gelu(input, *, approximate="none"):
    """x times the standard normal CDF of x (PyTorch's torch.nn.functional.gelu);
    approximate="tanh" is its tanh approximation."""
    _refuse_integers("GeluKernelImpl", input)
    if approximate == "none":
        return _gelu(input)
    if approximate == "tanh":
        return _gelu_tanh(input)
    raise RuntimeError("approximate argument must be either none or tanh.")
# softplus of u = beta x: u above the threshold, else log(1 + exp(u)); the
# threshold rides as the constant operand y. Its gradient is sigmoid(u) below
# the threshold and 1 above, as PyTorch's
def _softplus_scalar(u, threshold):
    return u * 1.0 if u > threshold else math.log1p(math.exp(u))


def _softplus_array(u, threshold):
    return np.where(u > threshold, u, np.log1p(np.exp(np.minimum(u, threshold))))


_softplus = _with_constant("softplus", "SoftplusBackward0",
                           "within(x, -1e309, y) * sigmoid(x) + (1 - within(x, -1e309, y))",
                           _softplus_scalar, _softplus_array,
                           # the row's softplus is of beta * input: its beta is 1
                           saved=(("self", "x"), ("beta", "scalar"), ("threshold", "scalar")))


@declare(signature="input, beta=1, threshold=20, *, out=None", batch=elementwise)
def softplus(input, beta=1, threshold=20):
    """log(1 + exp(beta x)) / beta, and x where beta x > threshold (PyTorch's
    torch.nn.functional.softplus)."""
    _refuse_integers("softplus_cpu", input)
    if beta == 1:  # PyTorch's node shows its Scalars as given
        return keep_arguments(_softplus(input, threshold), beta=beta, threshold=threshold)
    return _softplus(input * beta, threshold) / beta
# the rest of the elementwise functions of one input; each partial is written
# with the functions that native partials have (sin, cos, exp, log, sqrt, tanh)
_LN2, _LN10 = math.log(2.0), math.log(10.0)
tan = _unary("tan", "TanBackward0", "1 + out * out", math.tan, np.tan, forward="tan(x)")
asin = _unary("asin", "AsinBackward0", "1 / sqrt(1 - x * x)", math.asin, np.arcsin, aliases=("arcsin",),
              forward="asin(x)")
acos = _unary("acos", "AcosBackward0", "-1 / sqrt(1 - x * x)", math.acos, np.arccos, aliases=("arccos",),
              forward="acos(x)")
atan = _unary("atan", "AtanBackward0", "1 / (1 + x * x)", math.atan, np.arctan, aliases=("arctan",), forward="atan(x)")
# PyTorch's grad * cosh(x) and grad * sinh(x): as exp(x) and exp(-x), the second
# order at x = inf met inf * exp(-inf) = nan
sinh = _unary("sinh", "SinhBackward0", "cosh(x)", math.sinh, np.sinh, forward="sinh(x)")
cosh = _unary("cosh", "CoshBackward0", "sinh(x)", math.cosh, np.cosh, forward="cosh(x)")
asinh = _unary("asinh", "AsinhBackward0", "1 / sqrt(x * x + 1)", math.asinh, np.arcsinh, forward="asinh(x)")
acosh = _unary("acosh", "AcoshBackward0", "1 / sqrt(x * x - 1)", math.acosh, np.arccosh, forward="acosh(x)")
atanh = _unary("atanh", "AtanhBackward0", "1 / (1 - x * x)", math.atanh, np.arctanh, forward="atanh(x)")
exp2 = _unary("exp2", "Exp2Backward0", f"out * {_LN2!r}", lambda x: 2.0 ** x, np.exp2, forward="2.0 ** x")
expm1 = _unary("expm1", "Expm1Backward0", "out + 1", math.expm1, np.expm1, forward="expm1(x)")
log2 = _unary("log2", "Log2Backward0", f"1 / (x * {_LN2!r})", math.log2, np.log2, forward="log2(x)")
log10 = _unary("log10", "Log10Backward0", f"1 / (x * {_LN10!r})", math.log10, np.log10, forward="log10(x)")
log1p = _unary("log1p", "Log1PBackward0", "1 / (x + 1)", math.log1p, np.log1p, forward="log1p(x)")
rsqrt = _unary("rsqrt", "RsqrtBackward0", "-0.5 * out * out * out", lambda x: 1.0 / math.sqrt(x),
               lambda x: 1.0 / np.sqrt(x), forward="1.0 / sqrt(x)")
def _square_array(x):
    # a bool squared is int64, as PyTorch's x ** 2 (NumPy's would be bool)
    return np.square(x.astype(np.int64) if x.dtype == np.bool_ else x)


square = _unary("square", "PowBackward0", "2 * x", lambda x: x * x, _square_array,
                saved=(("self", "x"), ("exponent", lambda row: 2)), forward="x * x")
clone = _unary("clone", "CloneBackward0", "1", lambda x: x * 1.0, np.copy, inplace=False, signature="input",
               forward="x * 1.0")
_to_copy = defop("to_copy", "ToCopyBackward0", 1, partials=("1",))


def _xlogy_array(x, y):
    # 0 where x is 0, unless y is nan, as PyTorch's (NumPy: 0 * log(0) is nan);
    # in the result's dtype, as PyTorch computes (log of a float32 y times a
    # float64 x is float64 with float32's rounding)
    dtype = np.result_type(x, y)
    if dtype.kind == "f":
        x, y = np.asarray(x, dtype), np.asarray(y, dtype)
    return np.where((np.asarray(x) == 0) & ~np.isnan(y), 0.0, x * np.log(y))


def _xlogy_scalar(x, y):
    if x == 0 and y == y:
        return 0.0
    return x * math.log(y)  # math refuses y <= 0; the unary factories fall back to NumPy


# d/dx is log(y), x == 0 included, but none where x == 0 and y <= 0: PyTorch's
# xlogy(g, y).masked_fill((x == 0) & (y <= 0), 0), a selection (Note
# [Selecting partials])
_XLOGY_X = "(1 - is_zero(x) * within(y, -1e309, 0)) * log(y)"
_xlogy = _binary("xlogy", "XlogyBackward0", (_XLOGY_X, "x / y"), _xlogy_scalar, _xlogy_array)
_xlogy_number = _with_constant("xlogy_scalar_other", "XlogyBackward2", _XLOGY_X, _xlogy_scalar, _xlogy_array,
                               saved=(("self", "x"), ("other", "c")))
# a number's xlogy of a tensor: the tensor is x, the number the constant y
_rxlogy_number = _with_constant("xlogy_scalar_self", "XlogyBackward1", "y / x",
                                lambda x, c: _xlogy_scalar(c, x), lambda x, c: _xlogy_array(c, x),
                                saved=(("other", "x"), ("self", "c")))


@declare(signature=_BINARY, operands=2, batch=elementwise)
def xlogy(input, other):
    """input * log(other), and 0 where input is 0 (unless other is nan).

    >>> import tape
    >>> tape.xlogy(tape.tensor([0., 2.]), tape.tensor([0., 1.])).tolist()
    [0.0, 0.0]
    """
    return _by_operands(input, other, _xlogy_number, _rxlogy_number, _xlogy)


def _by_operands(x, y, tensor_number, number_tensor, tensors):
    """The op of x and y by their kinds: tensor_number(x, c) for a tensor and
    a number, number_tensor(y, c) for a number and a tensor (the number rides
    as the constant operand), tensors(x, y) otherwise."""
    x, y = python_number(x), python_number(y)
    if isinstance(x, Tensor) and type(y) in _NUMBER:
        return tensor_number(x, y)
    if type(x) in _NUMBER and isinstance(y, Tensor):
        return number_tensor(y, x)
    return tensors(x, y)


def _tensor_other(name, fn):
    """fn(input, other) for two tensors, with PyTorch's TypeError for a number other."""
    def op(input, other):
        if not isinstance(other, Tensor):
            raise TypeError(f"{name}(): argument 'other' (position 2) must be Tensor, not {type(other).__name__}")
        return fn(input, other)
    op.__name__ = name
    return op


# the gradient at the origin is 0 / 0, nan, as PyTorch's
hypot = _tensor_other("hypot", _binary("hypot", "HypotBackward0", ("x / out", "y / out"), math.hypot,
                                       _refusing_integers("hypot_cpu", np.hypot)))
hypot.__doc__ = """sqrt(input ** 2 + other ** 2), without overflow.

    >>> import tape
    >>> tape.hypot(tape.tensor([3.]), tape.tensor([4.])).tolist()
    [5.0]
    """
declare(hypot, signature=_BINARY, operands=2, batch=elementwise)


def _logaddexp_scalar(x, y):
    # NumPy's npy_logaddexp: equal arguments (infinities included) first
    if x == y:
        return x + _LN2
    d = x - y
    if d > 0:
        return x + math.log1p(math.exp(-d))
    if d <= 0:
        return y + math.log1p(math.exp(d))
    return d  # nan


# PyTorch's gradient, 1 / (1 + exp(other - self)): nan where both are -inf
logaddexp = _tensor_other("logaddexp", _binary("logaddexp", "LogaddexpBackward0",
                                               ("1 / (1 + exp(y - x))", "1 / (1 + exp(x - y))"), _logaddexp_scalar,
                                               _refusing_integers("logaddexp_cpu", np.logaddexp)))
logaddexp.__doc__ = """log(exp(input) + exp(other)), without overflow.

    >>> import tape
    >>> tape.logaddexp(tape.tensor([1000.]), tape.tensor([1000.]))
    tensor([1000.6931])
    """
declare(logaddexp, signature=_BINARY, operands=2, batch=elementwise)


def _lerp_array(x, y, w):
    # PyTorch's kernel: from the nearer end, so that weight 1 gives end exactly
    return np.where(np.abs(w) < 0.5, x + w * (y - x), y - (y - x) * (1 - w))


_LERP = defop("lerp", "LerpBackward0", 2, partials=("1 - p", "p"), saved=(("weight", "p"),))


@declare(signature="input, end, weight, *, out=None", operands=3, batch=elementwise)
def lerp(input, end, weight):
    """input + weight * (end - input), computed from the nearer end.

    A number weight is PyTorch's LerpBackward0, a tensor weight its
    LerpBackward1, of three inputs.

    >>> import tape
    >>> tape.lerp(tape.tensor([0., 1.]), tape.tensor([10., 10.]), 0.5).tolist()
    [5.0, 5.5]
    """
    if not isinstance(end, Tensor):
        raise TypeError(f"lerp(): argument 'end' (position 2) must be Tensor, not {type(end).__name__}")
    if input.dtype.kind not in "fc":
        kernel = "lerp_kernel_tensor" if isinstance(weight, Tensor) else "lerp_kernel_scalar"
        raise not_implemented_for(kernel, input.dtype)
    # PyTorch takes a 0-d weight of any dtype, as a number
    for name, t in (("end", end), ("weight", weight)):
        if isinstance(t, Tensor) and t.dtype != input.dtype and not (t is weight and t.ndim == 0):
            raise RuntimeError(f"expected dtype {cpp_type_name(input.dtype)} for `{name}` but got dtype "
                               f"{cpp_type_name(t.dtype)}")
    broadcast_shapes(input.shape, end.shape)  # PyTorch's error text
    w = weight._array().astype(input.dtype) if isinstance(weight, Tensor) else float(weight)
    out = wrap_value(np.asarray(quiet(_lerp_array, input._array(), end._array(), w), input.dtype))
    rgx, rgy = input._rg, end._rg
    recording = state.tape.grad_enabled and (rgx or rgy or isinstance(weight, Tensor) and weight._rg)
    if not recording:
        return new_tensor(out)
    if isinstance(weight, Tensor):  # Note [Elementwise ops of three inputs]
        return formula_node(_LERP_TENSOR, lambda: new_tensor(out), (input, end, to(weight, input.dtype)))
    return record(_LERP, out, (input if rgx else None, end if rgy else None), p=w)


def scalar_in(dtype, s):
    """A scalar argument (alpha, beta, value) as PyTorch's kernels take it:
    converted to the result's type, so that 0.5 is 0 for an integral one."""
    return int(s) if dtype.kind in "biu" else s


def _added_product_operands(name, input, tensor1, tensor2):
    """addcmul's and addcdiv's operands, checked as PyTorch checks them and
    converted to the result's dtype, which it returns too."""
    for position, (arg, t) in enumerate((("input", input), ("tensor1", tensor1), ("tensor2", tensor2)), 1):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}(): argument '{arg}' (position {position}) must be Tensor, not {type(t).__name__}")
    broadcast_shapes(broadcast_shapes(input.shape, tensor1.shape), tensor2.shape)  # PyTorch's error text
    dtype = result_type(input, tensor1, tensor2)
    if dtype == np.bool_:
        raise not_implemented_for(f"{name}_cpu_out", np.bool_)
    return dtype, to(input, dtype), to(tensor1, dtype), to(tensor2, dtype)


# Note [Elementwise ops of three inputs]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# addcmul, addcdiv and lerp of a tensor weight are one node of three
# inputs, as PyTorch's (AddcmulBackward0, AddcdivBackward0, LerpBackward1),
# broadcast together. The row keeps first the inputs its gradients may read
# (addcmul's tensor1, tensor2, then input; lerp's input, end, weight); its
# value is the formula of the tape's ops in the order of PyTorch's kernel
# (`formula_node`). The native kernels read each operand at the result's
# size and sum each gradient back to its input's shape.

def _addcmul_native(G, X, Y, Z, O, GA, GB, GC, osh, xsh, ysh, zsh, ints, pp, cc):
    if GA.size:
        reduce_broadcast(G * full_size(Y, ysh, osh), GA, osh, xsh, pp)
    if GB.size:
        reduce_broadcast(G * full_size(X, xsh, osh), GB, osh, ysh, pp)
    if GC.size:
        reduce_broadcast(G, GC, osh, zsh, 1.0)


def _addcdiv_native(G, X, Y, Z, O, GA, GB, GC, osh, xsh, ysh, zsh, ints, pp, cc):
    Yf = full_size(Y, ysh, osh)
    if GA.size:
        reduce_broadcast(G / Yf, GA, osh, xsh, pp)
    if GB.size:
        reduce_broadcast(G * full_size(X, xsh, osh) / (Yf * Yf), GB, osh, ysh, -pp)
    if GC.size:
        reduce_broadcast(G, GC, osh, zsh, 1.0)


def _lerp_native(G, X, Y, Z, O, GA, GB, GC, osh, xsh, ysh, zsh, ints, pp, cc):
    if GA.size or GB.size:
        W = full_size(Z, zsh, osh)
        if GA.size:
            reduce_broadcast(G * (1.0 - W), GA, osh, xsh, 1.0)
        if GB.size:
            reduce_broadcast(G * W, GB, osh, ysh, 1.0)
    if GC.size:
        reduce_broadcast(G * (full_size(Y, ysh, osh) - full_size(X, xsh, osh)), GC, osh, zsh, 1.0)


@native_helper
def full_size(X, xsh, osh):
    """X (shape xsh) at the size of shape osh, which it broadcasts to."""
    n = 1
    for d in osh:
        n *= d
    return X if X.size == n else expand_flat(X, xsh, osh)


def _value_times(ctx, t):
    return t if ctx.p == 1 else t * ctx.p


def _addcmul_vjp(ctx, g):
    return (sum_to(g * _value_times(ctx, ctx.y), ctx.x_shape) if ctx.needs[0] else None,
            sum_to(g * _value_times(ctx, ctx.x), ctx.y_shape) if ctx.needs[1] else None,
            sum_to(g, ctx.z_shape) if ctx.needs[2] else None)


def _addcdiv_vjp(ctx, g):
    return (sum_to(g * _value_times(ctx, 1 / ctx.y), ctx.x_shape) if ctx.needs[0] else None,
            sum_to(-g * _value_times(ctx, ctx.x) / (ctx.y * ctx.y), ctx.y_shape) if ctx.needs[1] else None,
            sum_to(g, ctx.z_shape) if ctx.needs[2] else None)


def _lerp_vjp(ctx, g):
    return (sum_to(g * (1 - ctx.z), ctx.x_shape) if ctx.needs[0] else None,
            sum_to(g * ctx.z, ctx.y_shape) if ctx.needs[1] else None,
            sum_to(g * (ctx.y - ctx.x), ctx.z_shape) if ctx.needs[2] else None)


def _addc_op(name, grad_fn, native, vjp, saves):
    """The op of addcmul or addcdiv: tensor1, tensor2, then input, and the value in p."""
    return defop(name, grad_fn, 3, saves=saves, native=native, vjp=vjp,
                 edge_order=(2, 0, 1), saved=(("tensor1", "x"), ("tensor2", "y"), ("value", "scalar")))


_ADDCMUL = _addc_op("addcmul", "AddcmulBackward0", _addcmul_native, _addcmul_vjp, (SAVES_Y, SAVES_X, 0))
_ADDCDIV = _addc_op("addcdiv", "AddcdivBackward0", _addcdiv_native, _addcdiv_vjp, (SAVES_Y, SAVES_X | SAVES_Y, 0))
_LERP_TENSOR = defop("lerp_tensor", "LerpBackward1", 3, saves=(SAVES_Z, SAVES_Z, SAVES_X | SAVES_Y),
                     native=_lerp_native, vjp=_lerp_vjp,
                     edge_order=(0, 1, 2), saved=(("end", "y"), ("self", "x"), ("weight", "z")))


@declare(signature="input, tensor1, tensor2, *, value=1, out=None", operands=3, batch=elementwise)
def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2, broadcast together.

    >>> import tape
    >>> tape.addcmul(tape.ones(2), tape.tensor([1., 2.]), tape.tensor([3., 4.]), value=0.5).tolist()
    [2.5, 5.0]
    """
    dtype, input, tensor1, tensor2 = _added_product_operands("addcmul", input, tensor1, tensor2)
    value = scalar_in(dtype, value)
    return keep_arguments(formula_node(_ADDCMUL, lambda: input + (tensor1 if value == 1 else tensor1 * value) * tensor2,
                                       (tensor1, tensor2, input), p=float(value)), value=value)


@declare(signature="input, tensor1, tensor2, *, value=1, out=None", operands=3, batch=elementwise)
def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2, broadcast together; integral
    tensor1 and tensor2 are refused, as PyTorch refuses them.

    >>> import tape
    >>> tape.addcdiv(tape.ones(2), tape.tensor([1., 2.]), tape.tensor([4., 4.]), value=2).tolist()
    [1.5, 2.0]
    """
    if all(isinstance(t, Tensor) and t.dtype.kind in "biu" for t in (tensor1, tensor2)):
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform a "
            "true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + "
            "value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * "
            "tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter implementation: "
            "(input + value * tensor1 / tensor2), for all dtypes.")
    dtype, input, tensor1, tensor2 = _added_product_operands("addcdiv", input, tensor1, tensor2)
    value = scalar_in(dtype, value)
    return keep_arguments(formula_node(_ADDCDIV, lambda: input + (tensor1 if value == 1 else tensor1 * value) / tensor2,
                                       (tensor1, tensor2, input), p=float(value)), value=value)


def _scaled(other, alpha, tensors):
    """alpha * other for add and sub, with PyTorch's refusal of a float alpha
    for integer tensors."""
    if alpha == 1:
        return other
    if isinstance(alpha, float) and all(isinstance(t, Tensor) and t.dtype.kind in "biu"
                                        for t in tensors if isinstance(t, Tensor)):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point "
                           "number.")
    if not isinstance(other, Tensor):
        return other * alpha
    # scaled in the sum's dtype, as PyTorch's kernel: an int64 other times 0.5
    # must not make float32 - int64 a float64
    dtype = result_type(*(operand_value(t) for t in tensors))
    return mul(other if other.dtype == dtype else other.to(dtype), alpha)


@declare(signature="input, other, *, alpha=1, out=None", operands=2, batch=elementwise)
def add(input, other, *, alpha=1):
    """input + alpha * other, broadcasting like NumPy.

    >>> import tape
    >>> tape.add(tape.tensor([1., 2.]), 1)
    tensor([2., 3.])
    """
    return _with_alpha(_add, _ADD_ALPHA, input, other, alpha)
@declare(signature="input, other, *, alpha=1, out=None", operands=2, batch=elementwise)
@declare(name="subtract", signature="input, other, alpha=1, *, out=None", operands=2, batch=elementwise)
def sub(input, other, *, alpha=1):
    """input - alpha * other, broadcasting like NumPy."""
    return _with_alpha(_sub, _SUB_ALPHA, input, other, alpha)


def _with_alpha(combine, opdef, input, other, alpha):
    """input + alpha * other (combine: _add or _sub): with an alpha other
    than 1 and an input that requires grad, one row of `opdef`, PyTorch's
    AddBackward0 or SubBackward0 saving alpha, not a product's row beside it."""
    tensors = (input, other)
    if (alpha == 1 or type(input) is not Tensor or type(other) not in (Tensor, int, float)
            or not (state.tape.grad_enabled and (input._rg or type(other) is Tensor and other._rg))):
        return combine(input, _scaled(other, alpha, tensors))
    tensor_other = type(other) is Tensor
    value = combine(input.detach(), _scaled(other.detach() if tensor_other else other, alpha, tensors))._value
    if not tensor_other:  # a number rides in c
        return record(opdef, value, (input, None), c=float(other), p=float(alpha))
    # an operand that needs no grad is kept while tape.compile records: a replay reads its row
    operands = tuple(t if t._rg or made_hooks else None for t in tensors)
    return record(opdef, value, operands, p=float(alpha))


@declare(signature="input, exponent, *, out=None", methods=("pow", "__pow__"), operands=2, batch=elementwise)
def pow(x, exponent):
    """x ** exponent. A number exponent gives PowBackward0, a tensor one PowBackward1.

    >>> import tape
    >>> tape.pow(tape.tensor(3.0), 2)
    tensor(9.)
    """
    return _by_operands(x, exponent, _pow_number, _rpow_number, _pow_tensor)


@declare(signature="input, nan=None, posinf=None, neginf=None, *, out=None", batch=elementwise)
def nan_to_num(input, nan=None, posinf=None, neginf=None):
    """input with nan, inf and -inf replaced by `nan`, `posinf` and `neginf`
    (by default 0 and the dtype's largest and smallest finite values); the
    replaced elements get no gradient."""
    if input.dtype.kind not in "fc":
        return input.clone()
    finfo = np.finfo(input.dtype)
    return (input.masked_fill(input.isnan(), 0.0 if nan is None else nan)
            .masked_fill(input == math.inf, finfo.max if posinf is None else posinf)
            .masked_fill(input == -math.inf, finfo.min if neginf is None else neginf))


@declare(signature="input, *, out=None", batch=elementwise)
def deg2rad(input):
    """input converted from degrees to radians."""
    return input * (math.pi / 180)


@declare(signature="input, *, out=None", batch=elementwise)
def rad2deg(input):
    """input converted from radians to degrees."""
    return input * (180 / math.pi)


def _in_float64(v):
    """A float_power operand computed in float64: a tensor cast (differentiably), a number as a float."""
    if isinstance(v, Tensor):
        return v if v.dtype == np.float64 else v.double()
    return float(v)


@declare(signature="input, exponent, *, out=None", operands=2, batch=elementwise)
def float_power(input, exponent):
    """input ** exponent in float64, whatever the operands' dtypes (either may be a number).

    >>> import tape
    >>> tape.float_power(tape.tensor([2, 3]), 2).tolist()
    [4.0, 9.0]
    """
    return pow(_in_float64(input), _in_float64(exponent))


@declare(signature="input", batch=elementwise)
def positive(input):
    """input itself (unary +), refused for bools as PyTorch does."""
    if input.dtype == np.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


# clamp's bounds are numbers: the lower rides as the constant y, the upper as
# p (an absent one is infinite); its gradient passes where lo <= x <= hi
def _bound(value):
    """A clamp bound as PyTorch saves it: None for an absent (infinite) one."""
    return None if math.isinf(value) else value


_CLAMP = {kind: defop(name, grad_fn, 1, partials=("within(x, y, p)",), saved=(("self", "x"), *bounds))
          for kind, name, grad_fn, bounds in (
              ("both", "clamp", "ClampBackward1", (("min", lambda row: _bound(row.c)), ("max", lambda row: _bound(row.p)))),
              ("min", "clamp_min", "ClampMinBackward0", (("min", "c"),)),
              ("max", "clamp_max", "ClampMaxBackward0", (("max", "p"),)))}


def _clamp_scalar(x, lo, hi):
    # min(max(x, lo), hi), as PyTorch (hi wins when lo > hi), and nan stays
    # nan; a new float, never x itself: the float is the row's liveness token
    if lo != lo or hi != hi:  # a nan bound makes the result nan, as NumPy's and PyTorch's
        return math.nan
    v = lo if x < lo else x
    return (hi if v > hi else v) * 1.0


@declare(signature="input, min=None, max=None, *, out=None", aliases=("clip",), operands=3, batch=elementwise)
def clamp(x, min=None, max=None):
    """x limited to [min, max] (either bound may be None).

    >>> import tape
    >>> tape.clamp(tape.tensor([-1.0, 0.5, 2.0]), 0.0, 1.0)
    tensor([0.0000, 0.5000, 1.0000])
    """
    return _clamp(x, min, max, "both")
@declare(signature="input, min, *, out=None", operands=2, batch=elementwise)
def clamp_min(x, min):
    return _clamp(x, min, None, "min")
@declare(signature="input, max, *, out=None", operands=2, batch=elementwise)
def clamp_max(x, max):
    return _clamp(x, None, max, "max")
# a tensor bound is an op of x and the bound: g goes to x where it is within the
# bound (ties included), to the bound where x is beyond it. clamp_min and
# clamp_max are PyTorch's ClampMin/MaxBackward1; clamp() with tensor bounds is
# its ClampBackward0, one node there, one per bound here
_LOWER = ("within(x, y, 1e309)", "within(x, -1e309, y) - within(x, y, y)")
_UPPER = ("within(x, -1e309, y)", "within(x, y, 1e309) - within(x, y, y)")


def _bound_op(name, grad_fn, upper, other_bound):
    """The op of x and a tensor bound; with `other_bound`, its node shows
    the other bound, which it does not have, as None (clamp()'s)."""
    bound = "max" if upper else "min"
    saved = ((bound, "y"), ("self", "x")) + (((other_bound, lambda row: None),) if other_bound else ())
    if upper:
        return _binary(name, grad_fn, _UPPER, _minimum_scalar, np.minimum, saved)
    return _binary(name, grad_fn, _LOWER, _maximum_scalar, np.maximum, saved)


# (lower, upper) by kind of clamp
_TENSOR_BOUNDS = {"both": (_bound_op("clamp_tensor_lower", "ClampBackward0", False, "max"),
                           _bound_op("clamp_tensor_upper", "ClampBackward0", True, "min")),
                  "min": (_bound_op("clamp_min_tensor", "ClampMinBackward1", False, None), None),
                  "max": (None, _bound_op("clamp_max_tensor", "ClampMaxBackward1", True, None))}


def _clamp(x, min, max, kind):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        if min is not None and max is not None and not (isinstance(min, Tensor) and isinstance(max, Tensor)):
            names = ", ".join(type(v).__name__ for v in (x, min, max))
            raise TypeError(f"clamp() received an invalid combination of arguments - got ({names}), but "
                            "expected one of: (Tensor input, Tensor min, Tensor max) or (Tensor input, "
                            "Number min, Number max)")
        lower, upper = _TENSOR_BOUNDS[kind]
        out = x if min is None else lower(x, min)
        return out if max is None else upper(out, max)
    lo = -math.inf if min is None else float(min)
    hi = math.inf if max is None else float(max)
    xv = x._value
    if type(xv) is float:
        out = _clamp_scalar(xv, lo, hi)
    else:
        # an integer tensor clamped to float bounds is a float one (Note [Type promotion])
        xv = promoted(xv, *(python_number(b) for b in (min, max) if b is not None))[0]
        out = xv if min is None else np.maximum(xv, min)
        out = wrap_value(np.asarray(out if max is None else np.minimum(out, max)))
    if not (x._rg and state.tape.grad_enabled):
        return new_tensor(out)
    return record(_CLAMP[kind], out, (x, None), c=lo, p=hi)


@declare(methods=(), operands=2, batch=elementwise)
def to(x, dtype):
    """A copy converted to `dtype` (differentiable between float dtypes)."""
    dtype = as_dtype(dtype)
    if x.dtype == dtype:
        return x
    out = wrap_value(quiet(x._array().astype, dtype))  # nan and inf to an int, without NumPy's warning
    if x._rg and state.tape.grad_enabled and dtype.kind == "f":
        return record(_to_copy, out, (x,))
    return new_tensor(out)
# NumPy's and PyTorch's other names of the same ops (declared with them): the
# same functions, so the same nodes
absolute, negative, subtract, multiply, divide = abs, neg, sub, mul, div
arccos, arcsin, arctan, arctan2, clip = acos, asin, atan, atan2, clamp


_NUMBER = (int, float)


@declare(function=False, methods=("__rsub__",), operands=2, batch=elementwise)
def _rsub(x, y):
    y = python_number(y)
    if type(y) in _NUMBER:
        if x.dtype == np.bool_:
            _subtract(y, x._value)  # raises PyTorch's refusal
        return _rsub_number(x, y)
    return _sub(y, x)


@declare(signature=_BINARY, methods=("remainder", "__mod__"), operands=2, batch=elementwise)
def remainder(input, other):
    """input % other, the result taking other's sign (Python's and PyTorch's rule).

    >>> import tape
    >>> tape.remainder(tape.tensor([-2.5, 3.0]), 2)
    tensor([1.5000, 1.0000])
    """
    x, y = input, other
    if type(x) is Tensor and type(y) in _NUMBER:
        return _remainder_number(x, y)
    if type(x) in _NUMBER and type(y) is Tensor:
        out = wrap_value(quiet(_remainder_array, x, y._value))
        if y._rg and state.tape.grad_enabled:
            return record(_RREMAINDER, out, (None, y))
        return new_tensor(out)
    return _remainder(x, y)
# a number % a tensor: PyTorch records it with a node whose backward raises
_RREMAINDER = defop("rremainder", "NotImplemented", 2,
                    not_differentiable="derivative for aten::remainder is not implemented")


# PyTorch records x // y with a node whose backward raises
_FLOOR_DIVIDE = defop("floor_divide", "NotImplemented", 2,
                      not_differentiable="derivative for aten::floor_divide is not implemented")


@declare(signature=_BINARY, methods=("floor_divide", "__floordiv__"), operands=2, batch=elementwise)
def floor_divide(input, other):
    """input // other, rounded toward minus infinity. As in PyTorch, the result of an
    input that requires grad requires grad, and a backward through it raises."""
    x, y = input, other
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        raise TypeError(f"floor_divide(): expected a Tensor, got {type(x).__name__} and "
                        f"{type(y).__name__}")
    xv, yv = promoted(operand_value(x), operand_value(y))
    broadcast_shapes(np.shape(xv), np.shape(yv))  # PyTorch's error text
    _integer_divisor_check(xv, yv)
    out = wrap_value(quiet(np.floor_divide, xv, yv))
    rgx, rgy = requires_grad(x), requires_grad(y)
    if (rgx or rgy) and state.tape.grad_enabled:
        return record(_FLOOR_DIVIDE, out, (x if rgx else None, y if rgy else None))
    return new_tensor(out)


def requires_grad(v):
    """Whether v (a Tensor or a number) is a tensor that requires grad."""
    return isinstance(v, Tensor) and v._rg


@declare(function=False, methods=("__rtruediv__",), operands=2, batch=elementwise)
def _rdiv(x, y):
    # c / x is reciprocal(x) * c, as in PyTorch (grad_fn MulBackward0)
    y = python_number(y)
    return mul(reciprocal(x), y) if type(y) in _NUMBER else div(y, x)


@declare(function=False, methods=("__rpow__",), operands=2, batch=elementwise)
def _rpow(x, y):
    return pow(y, x)


# c + x and c * x keep the tensor first, as PyTorch's __radd__ and __rmul__ do
# (next_functions of 2 * x is ((AccumulateGrad, 0), (None, 0)))
# x + y and x - y: the ops without alpha. c + x and c * x keep the tensor
# first, as PyTorch's __radd__ and __rmul__ do (next_functions of 2 * x is
# ((AccumulateGrad, 0), (None, 0)))
declare(_add, function=False, methods=("__add__", "__radd__"), operands=2, batch=elementwise)
declare(_sub, function=False, methods=("__sub__",), operands=2, batch=elementwise)


@declare(function=False, methods=("__rmod__",), operands=2, batch=elementwise)
def _rremainder(x, y):
    return remainder(y, x)


@declare(function=False, methods=("__rfloordiv__",), operands=2, batch=elementwise)
def _rfloor_divide(x, y):
    return floor_divide(y, x)


def _to_dtype(name, dtype):
    def method(self):
        return to(self, dtype)
    method.__name__ = name
    declare(method, function=False, batch=elementwise)


for _name, _dtype in (("float", np.float32), ("double", np.float64), ("long", np.int64), ("int", np.int32),
                      ("bool", np.bool_)):
    _to_dtype(_name, _dtype)


@declare(function=False, operands=2, batch=elementwise)
def type_as(self, other):
    return to(self, other.dtype)


@declare(name="to", function=False, operands=2, batch=elementwise)
def tensor_to(self, *args, device=None, dtype=None, non_blocking=False, copy=False, memory_format=None):
    """`Tensor.to` with PyTorch's three forms: `to(dtype)`, `to(device=None,
    dtype=None)` and `to(other)` (other's dtype and device); `copy=True`
    copies even when nothing changes.

    >>> import tape
    >>> tape.ones(2).to("cpu", tape.float32)
    tensor([1., 1.], dtype=tape.float32)
    """
    where = device
    if args and isinstance(args[0], Tensor):
        where, dtype = args[0].device, args[0].dtype
    elif args and isinstance(args[0], (str, _Device, int)):
        where = args[0]
        dtype = args[1] if len(args) > 1 else dtype
    elif args:
        dtype = args[0]
    check_device(where)
    if dtype is None:
        return self.clone() if copy else self
    dtype = as_dtype(dtype)
    if self._rg and state.tape.grad_enabled:
        refuse_half_grad(dtype)
    out = to(self, dtype)
    return self.clone() if copy and out is self else out


__all__ = exports(globals())
