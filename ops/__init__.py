"""The operator library of `tape`. Every op is defined once, in the module of
its kind, and is also reachable as `tape.<name>` and as a Tensor method.
"""
# defined first: tape's __init__ reads it, also while this package is importing
__all__ = ["abs", "add", "clamp", "clamp_min", "clamp_max", "clone", "cos", "div", "exp", "floor_divide", "log", "mul", "neg", "pow",
           "reciprocal", "relu", "remainder", "sigmoid", "sign", "floor", "sin", "sqrt", "square", "sub", "tanh", "to", "true_divide",
           "broadcast_to", "expand", "flatten", "permute", "reshape", "squeeze", "t", "transpose",
           "unsqueeze", "view", "mean", "sum", "bmm", "dot", "matmul", "mm", "mv", "outer", "add_",
           "div_", "fill_", "mul_", "sub_", "zero_", "eq", "ge", "gt", "le", "lt", "ne",
           "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "logical_and", "logical_or",
           "logical_xor", "logical_not", "all", "any", "ceil", "trunc", "round", "tan", "asin", "acos",
           "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "exp2", "expm1", "log2", "log10", "log1p",
           "rsqrt", "maximum", "minimum", "atan2", "cat", "stack", "amax", "amin", "max", "min", "logsumexp", "softmax", "log_softmax", "var", "std", "norm", "cumsum", "where", "split", "chunk", "unbind", "flip",
           "index_select", "gather", "diagonal", "triu", "tril", "erf", "silu", "gelu", "softplus", "prod", "einsum",
           "argmax", "argmin", "sort", "argsort", "msort", "topk",
           "isnan", "isinf", "isfinite", "isclose", "allclose", "equal", "nonzero", "count_nonzero",
           "masked_fill", "masked_fill_", "masked_select",
           "repeat", "roll", "tile", "narrow", "select", "movedim", "moveaxis", "swapaxes", "swapdims", "hstack",
           "vstack", "ravel", "diag", "trace", "cumprod",
           "absolute", "negative", "subtract", "multiply", "divide", "arccos", "arcsin", "arctan", "arctan2", "clip",
           "xlogy", "hypot", "logaddexp", "lerp"]

from tape import _registry

from ops.elementwise import (abs, absolute, acos, acosh, add, arccos, arcsin, arctan, arctan2, asin, asinh, atan, atan2,
                             atanh, ceil, clamp, clamp_max, clamp_min, clip, clone, cos, cosh, div, divide, erf, exp, exp2,
                             expm1, floor, floor_divide, gelu, hypot, lerp, log, log10, log1p, log2, logaddexp, maximum,
                             minimum, mul, multiply, neg, negative, pow, reciprocal, relu, remainder, round, rsqrt,
                             sigmoid, sign, silu, sin, sinh, softplus, sqrt, square, sub, subtract, tan, tanh, to,
                             true_divide, trunc, xlogy)
from ops.shape import (broadcast_to, cat, expand, flatten, hstack, moveaxis, movedim, narrow, permute, ravel, repeat,
                       reshape, roll, select, squeeze, stack, swapaxes, swapdims, t, tile, transpose, unsqueeze, view,
                       vstack)
from ops.reduction import (amax, amin, cumprod, cumsum, log_softmax, logsumexp, max, mean, min, norm, prod, softmax, std,
                           sum, var)
from ops.linalg import bmm, dot, einsum, matmul, mm, mv, outer
from ops import matrix  # noqa: F401  (tape.linalg's ops)
from ops.sorting import argmax, argmin, argsort, msort, sort, topk
from ops.selection import (chunk, diag, diagonal, flip, gather, index_select, masked_fill, masked_select, split, tril,
                           trace, triu, unbind, where)
from ops.inplace import add_, div_, fill_, masked_fill_, mul_, sub_, zero_
from ops.comparison import (allclose, count_nonzero, eq, equal, ge, gt, isclose, isfinite, isinf, isnan, le, lt,
                            ne, nonzero)
from ops.logical import (all, any, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, logical_and,
                         logical_not, logical_or, logical_xor)


_registry.seal()

# every op is also tape.<name>; set from here so that `import ops` works
# before `import tape` as well as after it
import tape as _tape  # noqa: E402

for _name in __all__:
    setattr(_tape, _name, globals()[_name])
