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

# PyTorch 2.13's Python signatures of the functions tape.<name> (torch's
# overloads merged into one Python signature); ops/_signature.py binds them.
# Names whose overloads no one Python signature holds (max, min, var, std,
# where, split, einsum, to, norm) and the in-place functions keep the op's own.
_UNARY = "input, *, out=None"
_BINARY = "input, other, *, out=None"
SIGNATURES = {
    **dict.fromkeys(("abs", "absolute", "cos", "exp", "log", "neg", "negative", "reciprocal", "relu", "sigmoid",
                     "sign", "floor", "sin", "sqrt", "square", "tanh", "ceil", "trunc", "tan", "asin", "acos",
                     "atan", "arcsin", "arccos", "arctan", "sinh", "cosh", "asinh", "acosh", "atanh", "exp2",
                     "expm1", "log2", "log10", "log1p", "rsqrt", "erf", "bitwise_not", "logical_not", "isnan",
                     "isinf", "msort", "trace"), _UNARY),
    **dict.fromkeys(("mul", "multiply", "floor_divide", "remainder", "true_divide", "eq", "ne", "lt", "le", "gt",
                     "ge", "bitwise_and", "bitwise_or", "bitwise_xor", "logical_and", "logical_or", "logical_xor",
                     "maximum", "minimum", "atan2", "arctan2", "xlogy", "hypot", "logaddexp", "matmul"), _BINARY),
    **dict.fromkeys(("add", "sub"), "input, other, *, alpha=1, out=None"),
    # torch.subtract also has (input, Number other, alpha=1): subtract(x, 2, 3) is x - 6
    "subtract": "input, other, alpha=1, *, out=None",
    **dict.fromkeys(("div", "divide"), "input, other, *, out=None"),
    **dict.fromkeys(("clamp", "clip"), "input, min=None, max=None, *, out=None"),
    "clamp_min": "input, min, *, out=None",
    "clamp_max": "input, max, *, out=None",
    "clone": "input",
    "pow": "input, exponent, *, out=None",
    "round": "input, *, decimals=0, out=None",
    "isfinite": "input",
    "broadcast_to": "input, size",
    "flatten": "input, start_dim=0, end_dim=-1",
    "permute": "input, dims",
    "reshape": "input, shape",
    "squeeze": "input, dim=None",
    "t": "input",
    "transpose": "input, dim0, dim1",
    "unsqueeze": "input, dim",
    **dict.fromkeys(("mean", "sum", "prod"), "input, dim=None, keepdim=False, *, dtype=None, out=None"),
    **dict.fromkeys(("mm", "bmm"), "input, mat2, *, out=None"),
    "dot": "input, tensor, *, out=None",
    "mv": "input, vec, *, out=None",
    "outer": "input, vec2, *, out=None",
    **dict.fromkeys(("all", "any", "argmax", "argmin"), "input, dim=None, keepdim=False, *, out=None"),
    **dict.fromkeys(("cat", "stack"), "tensors, dim=0, *, out=None"),
    **dict.fromkeys(("hstack", "vstack"), "tensors, *, out=None"),
    **dict.fromkeys(("amax", "amin"), "input, dim=(), keepdim=False, *, out=None"),
    "logsumexp": "input, dim, keepdim=False, *, out=None",
    **dict.fromkeys(("softmax", "log_softmax"), "input, dim, dtype=None, *, out=None"),
    **dict.fromkeys(("cumsum", "cumprod"), "input, dim, *, dtype=None, out=None"),
    "chunk": "input, chunks, dim=0",
    "split": "tensor, split_size_or_sections, dim=0",
    **dict.fromkeys(("max", "min"), "input, dim=None, keepdim=False, *, other=None, out=None"),
    **dict.fromkeys(("var", "std"), "input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None"),
    "norm": "input, p='fro', dim=None, keepdim=False, out=None, dtype=None",
    "where": "condition, input=None, other=None, *, out=None",
    "fill_": "input, value",
    "zero_": "input",
    "unbind": "input, dim=0",
    "flip": "input, dims, *, out=None",
    "index_select": "input, dim, index, *, out=None",
    "gather": "input, dim, index, *, out=None",
    "diagonal": "input, offset=0, dim1=0, dim2=1",
    **dict.fromkeys(("triu", "tril", "diag"), "input, diagonal=0, *, out=None"),
    "silu": "input",
    "gelu": "input, *, approximate='none', out=None",
    "softplus": "input, beta=1, threshold=20, *, out=None",
    "sort": "input, dim=-1, descending=False, *, stable=False, out=None",
    "argsort": "input, dim=-1, descending=False, *, stable=False, out=None",
    "topk": "input, k, dim=-1, largest=True, sorted=True, *, out=None",
    **dict.fromkeys(("isclose", "allclose"), "input, other, rtol=1e-05, atol=1e-08, equal_nan=False"),
    "equal": "input, other",
    "nonzero": "input, *, out=None, as_tuple=False",
    "count_nonzero": "input, dim=None",
    "masked_fill": "input, mask, value",
    "masked_select": "input, mask, *, out=None",
    "roll": "input, shifts, dims=()",
    "tile": "input, dims",
    "narrow": "input, dim, start, length",
    "select": "input, dim, index",
    **dict.fromkeys(("movedim", "moveaxis"), "input, source, destination"),
    "swapaxes": "input, axis0, axis1",
    "swapdims": "input, dim0, dim1",
    "ravel": "input",
    "lerp": "input, end, weight, *, out=None",
}
# and of tape's factories (layout=, pin_memory= and generator= left out: tape has one of
# each); torch's *size is *dims here, so that size= (zeros(size=(2, 3))) can be a keyword too
_SIZED = "*dims, out=None, dtype=None, device=None, requires_grad=False"
FACTORY_SIGNATURES = {
    **dict.fromkeys(("zeros", "ones", "empty", "rand", "randn"), _SIZED),
    "full": "size, fill_value, *, out=None, dtype=None, device=None, requires_grad=False",
    "eye": "n, m=None, *, out=None, dtype=None, device=None, requires_grad=False",
    "arange": "start=None, end=None, step=1, *, out=None, dtype=None, device=None, requires_grad=False",
    "linspace": "start, end, steps, *, out=None, dtype=None, device=None, requires_grad=False",
    "randint": "low=0, high=None, size=(), *, out=None, dtype=None, device=None, requires_grad=False",
}
# and of tape.linalg's, as torch.linalg's Python bindings name them
LINALG_SIGNATURES = {
    "cholesky": "input, *, upper=False, out=None",
    **dict.fromkeys(("det", "inv", "slogdet"), "A, *, out=None"),
    "solve": "A, B, *, left=True, out=None",
    "norm": "input, ord=None, dim=None, keepdim=False, *, dtype=None, out=None",
    "vector_norm": "input, ord=2, dim=None, keepdim=False, *, dtype=None, out=None",
    "matrix_norm": "input, ord='fro', dim=(-2, -1), keepdim=False, *, dtype=None, out=None",
}

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

from ops._signature import with_signature  # noqa: E402

for _name in __all__:
    if _name in SIGNATURES:
        globals()[_name] = with_signature(globals()[_name], _name, SIGNATURES[_name])
    setattr(_tape, _name, globals()[_name])
