"""float64 sin, cos, exp and tanh written so that LLVM vectorizes loops over them.

NumPy's float64 sin and cos (and exp and tanh without AVX-512) call scalar
libm, 10-16 ns an element on an AVX2 machine; PyTorch vectorizes them (SLEEF).
These are branch-free (selects only) so a Numba loop over an array runs 4 lanes
at a time on AVX2; the sweep's native kernels call the same functions for the
partials, and the ops' forwards where NumPy does not vectorize (ops.elementwise).

Method: Cody-Waite range reduction with constants split so each product by
the quotient is exact, then a Taylor polynomial long enough that truncation
is far below an ulp; results stay within a few ulps of libm. sin and cos are
exact only for |x| <= TRIG_LIMIT: an array with any larger element takes
libm's scalar path instead (`in_trig_range` tells which).
"""
import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ._native import jit

__all__ = ["sin", "cos", "exp", "tanh", "sin_array", "cos_array", "exp_array", "tanh_array", "erf_array",
           "TRIG_LIMIT", "in_trig_range"]

# contract: the polynomials run as fused multiply-adds, twice as fast here, and no
# less accurate (one rounding per step instead of two)
_OPTIONS = dict(fastmath={"contract"})

# pi and pi/2 in four parts; the first three have at most 28 significant bits,
# so q * part is exact for |q| < 2**25
_PI_A, _PI_B, _PI_C, _PI_D = (float.fromhex("0x1.921fb54000000p+1"), float.fromhex("0x1.10b4610000000p-29"),
                              float.fromhex("0x1.a626330000000p-57"), float.fromhex("0x1.45c06e0e68948p-85"))
_INV_PI = float.fromhex("0x1.45f306dc9c883p-2")
# |x| beyond which the reduction above loses exactness (2q+1 must stay < 2**25)
TRIG_LIMIT = float(2 ** 23)
# ln 2 in two parts; the first has 40 significant bits, so q * part is exact
# for every q an exp in range needs (|q| < 1100)
_LN2_A, _LN2_B = float.fromhex("0x1.62e42fefa2000p-1"), float.fromhex("0x1.9ef35793c7673p-41")
_INV_LN2 = float.fromhex("0x1.71547652b82fep+0")
# adding 1.5 * 2**52 rounds a double below 2**51 to an integer, which then sits
# in the low mantissa bits
_ROUNDER = 6755399441055744.0
_ROUNDER_BITS = 0x4338000000000000


@intrinsic
def _bits(typingctx, x):
    """The int64 with the same bits as float64 x."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


@intrinsic
def _from_bits(typingctx, i):
    """The float64 with the same bits as int64 i."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@jit(inline="always", **_OPTIONS)
def _sin_poly(r):
    # sin(r) for |r| <= pi/2: odd Taylor terms to r**23 (truncation < 1e-20)
    s = r * r
    u = 1.0 / 25852016738884976640000.0
    u = u * s - 1.0 / 51090942171709440000.0
    u = u * s + 1.0 / 121645100408832000.0
    u = u * s - 1.0 / 355687428096000.0
    u = u * s + 1.0 / 1307674368000.0
    u = u * s - 1.0 / 6227020800.0
    u = u * s + 1.0 / 39916800.0
    u = u * s - 1.0 / 362880.0
    u = u * s + 1.0 / 5040.0
    u = u * s - 1.0 / 120.0
    u = u * s + 1.0 / 6.0
    return r - r * s * u


@jit(inline="always", **_OPTIONS)
def _reduce_pi(x, m):
    # x - m * pi, exact in the first three steps for |m| < 2**25
    r = x - m * _PI_A
    r = r - m * _PI_B
    r = r - m * _PI_C
    return r - m * _PI_D


@jit(inline="always", **_OPTIONS)
def _negate_if_odd(r, q):
    half = q * 0.5
    return -r if half != math.floor(half) else r


@jit(inline="always", **_OPTIONS)
def sin(x):
    # x = q pi + r, |r| <= pi/2, sin x = (-1)**q sin r
    q = (x * _INV_PI + _ROUNDER) - _ROUNDER
    return _negate_if_odd(_sin_poly(_reduce_pi(x, q)), q)


@jit(inline="always", **_OPTIONS)
def cos(x):
    # x = (q + 1/2) pi + r, |r| <= pi/2, cos x = (-1)**(q+1) sin r
    q = (x * _INV_PI - 0.5 + _ROUNDER) - _ROUNDER
    r = _reduce_pi(x, q + 0.5)
    return _negate_if_odd(_sin_poly(r), q + 1.0)


@jit(inline="always", **_OPTIONS)
def _expm1_poly(r):
    # exp(r) - 1 for |r| <= ln2 / 2: Taylor terms to r**15 (truncation < 1e-19)
    u = 1.0 / 1307674368000.0
    u = u * r + 1.0 / 87178291200.0
    u = u * r + 1.0 / 6227020800.0
    u = u * r + 1.0 / 479001600.0
    u = u * r + 1.0 / 39916800.0
    u = u * r + 1.0 / 3628800.0
    u = u * r + 1.0 / 362880.0
    u = u * r + 1.0 / 40320.0
    u = u * r + 1.0 / 5040.0
    u = u * r + 1.0 / 720.0
    u = u * r + 1.0 / 120.0
    u = u * r + 1.0 / 24.0
    u = u * r + 1.0 / 6.0
    u = u * r + 0.5
    return r + r * r * u


@jit(inline="always", **_OPTIONS)
def _scale(u, t):
    # u * 2**q where t = q + _ROUNDER, |q| <= 1100: two factors, so neither
    # power leaves the normal range
    q = _bits(t) - _ROUNDER_BITS
    half = q >> 1
    return (u * _from_bits((half + 1023) << 52)) * _from_bits((q - half + 1023) << 52)


@jit(inline="always", **_OPTIONS)
def exp(x):
    # clamped so q stays small; exp overflows at 709.79 and is 0 below -745.2,
    # and the scaling reaches both on its own
    xc = min(max(x, -746.0), 710.0)
    t = xc * _INV_LN2 + _ROUNDER
    q = t - _ROUNDER
    r = (xc - q * _LN2_A) - q * _LN2_B
    e = _scale(1.0 + _expm1_poly(r), t)
    return x if x != x else e


@jit(inline="always", **_OPTIONS)
def tanh(x):
    # tanh|x| = expm1(2|x|) / (expm1(2|x|) + 2); past |x| = 20 it rounds to 1
    y = min(2.0 * abs(x), 40.0)
    t = y * _INV_LN2 + _ROUNDER
    q = t - _ROUNDER
    r = (y - q * _LN2_A) - q * _LN2_B
    p = _expm1_poly(r)
    m = p if q == 0.0 else _scale(1.0 + p, t) - 1.0
    return x if x != x else math.copysign(m / (m + 2.0), x)


@jit(**_OPTIONS)
def in_trig_range(x):
    """Whether sin and cos above are exact for every element of x (NaN counts:
    they return NaN for it, as libm does)."""
    outside = 0
    for i in range(x.size):
        outside += abs(x[i]) > TRIG_LIMIT
    return outside == 0


@jit(**_OPTIONS)
def sin_array(x, out):
    if in_trig_range(x):
        for i in range(x.size):
            out[i] = sin(x[i])
    else:
        for i in range(x.size):
            out[i] = math.sin(x[i])


@jit(**_OPTIONS)
def cos_array(x, out):
    if in_trig_range(x):
        for i in range(x.size):
            out[i] = cos(x[i])
    else:
        for i in range(x.size):
            out[i] = math.cos(x[i])


@jit(**_OPTIONS)
def exp_array(x, out):
    for i in range(x.size):
        out[i] = exp(x[i])


@jit(**_OPTIONS)
def tanh_array(x, out):
    for i in range(x.size):
        out[i] = tanh(x[i])


@jit(**_OPTIONS)
def erf_array(x, out):
    # libm's erf, element by element: NumPy has no erf at all
    for i in range(x.size):
        out[i] = math.erf(x[i])
