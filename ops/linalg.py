"""Matrix products: dot, mv, mm, bmm, and matmul, which reduces every case to
them (promoting 1-D operands and broadcasting batch dims explicitly); addmm,
addmv, addbmm and baddbmm, a product added to a tensor.
Native kernels call BLAS through Numba's np.dot.
"""
import builtins
import collections
import math
import string
import warnings

import numpy as np

from ops._declare import declare, exports
from tape._batched import BatchedTensor, aligned, batched, composite, levels_of, physical

from tape._dtypes import cpp_type_name, not_implemented_for, result_type, scalar_type_name
from tape._record import broadcast_shapes, formula_node, record, sum_to
from tape._registry import SAVES_X, SAVES_Y, defop, native_helper
from tape._tape import state
from tape._node import keep_arguments
from tape._tensor import Tensor, _norm_dim, contiguous_strides, new_tensor, wrap_value

from ops.comparison import _expect_tensor
from ops.elementwise import scalar_in
from ops.reduction import sum as _sum
from ops.selection import diagonal
from ops.shape import (as_new_tensor, expand, permute, reshape, squeeze, squeeze_made, transpose, unsqueeze,
                       unsafe_view)

# The forward products call np.dot, not @: the same BLAS call and result,
# 0.7 us sooner on small matrices (np.matmul's ufunc machinery). The native
# VJPs accumulate each product into the adjoint with one BLAS call
# (`add_product`, in the generated sweep), transposes as flags, on the flat
# arrays seen as matrices by `shaped` (the sweep's, without reshape's checks).

def _mm_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    m, k, n = xsh[0], xsh[1], ysh[1]
    G2 = shaped(G, (m, n))
    if GA.size:
        add_product(shaped(GA, (m, k)), G2, False, shaped(Y, (k, n)), True)
    if GB.size:
        add_product(shaped(GB, (k, n)), shaped(X, (m, k)), True, G2, False)


def _mm_forward(X, Y, O, osh, xsh, ysh, ints, pp):
    m, k, n = xsh[0], xsh[1], ysh[1]
    for i in range(O.size):
        O[i] = 0.0
    add_product(shaped(O, (m, n)), shaped(X, (m, k)), False, shaped(Y, (k, n)), False)


def _mv_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    m, k = xsh[0], xsh[1]
    G2 = shaped(G, (m, 1))
    if GA.size:
        add_product(shaped(GA, (m, k)), G2, False, shaped(Y, (1, k)), False)
    if GB.size:
        add_product(shaped(GB, (k, 1)), shaped(X, (m, k)), True, G2, False)


def _dot_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    g = G[0]
    if GA.size:
        GA += g * Y
    if GB.size:
        GB += g * X


def _bmm_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    b, m, k, n = xsh[0], xsh[1], xsh[2], ysh[2]
    G3 = shaped(G, (b, m, n))
    X3 = shaped(X, (b, m, k))
    Y3 = shaped(Y, (b, k, n))
    for i in range(b):
        if GA.size:
            add_product(shaped(GA, (b, m, k))[i], G3[i], False, Y3[i], True)
        if GB.size:
            add_product(shaped(GB, (b, k, n))[i], X3[i], True, G3[i], False)


def _need(ctx, k, fn):
    return fn() if ctx.needs[k] else None


# each input's gradient reads the other input (derivatives.yaml: mm saves
# self only if mat2 requires grad, and mat2 only if self does)
_SAVES = (SAVES_Y, SAVES_X)
_MM = defop("mm", "MmBackward0", 2, saves=_SAVES, native=_mm_native, forward_native=_mm_forward,
            saved=(("mat2", "y"), ("self", "x"), ("mat2_sym_sizes", "y_shape"), ("self_sym_sizes", "x_shape"),
                   # an operand's strides, for its own gradient's layout
                   ("mat2_sym_strides", lambda row: contiguous_strides(row.y_shape) if row.needs[1] else ()),
                   ("self_sym_strides", lambda row: contiguous_strides(row.x_shape) if row.needs[0] else ())),
            vjp=lambda ctx, g: (_need(ctx, 0, lambda: mm(g, transpose(ctx.y, 0, 1))),
                                _need(ctx, 1, lambda: mm(transpose(ctx.x, 0, 1), g))))
_MV = defop("mv", "MvBackward0", 2, saves=_SAVES, native=_mv_native, saved=(("self", "x"), ("vec", "y")),
            vjp=lambda ctx, g: (_need(ctx, 0, lambda: unsqueeze(g, 1) * ctx.y),
                                _need(ctx, 1, lambda: mv(transpose(ctx.x, 0, 1), g))))
_DOT = defop("dot", "DotBackward0", 2, saves=_SAVES, native=_dot_native, saved=(("self", "x"), ("tensor", "y")),
             vjp=lambda ctx, g: (_need(ctx, 0, lambda: g * ctx.y), _need(ctx, 1, lambda: g * ctx.x)))
_BMM = defop("bmm", "BmmBackward0", 2, saves=_SAVES, native=_bmm_native, saved=(("mat2", "y"), ("self", "x")),
             vjp=lambda ctx, g: (_need(ctx, 0, lambda: bmm(g, transpose(ctx.y, 1, 2))),
                                 _need(ctx, 1, lambda: bmm(transpose(ctx.x, 1, 2), g))))


def _product(opdef, x, y, value):
    """The Tensor of a product `value` of x and y (an array: dot wraps its 0-d
    value itself), recorded when either requires grad."""
    rgx, rgy = x._rg, y._rg
    if not ((rgx or rgy) and state.tape.grad_enabled):
        return new_tensor(value)
    return record(opdef, value, (x, y))


def _check_float(name, x, y):
    if x.dtype == y.dtype:
        return
    if name == "dot":
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{scalar_type_name(x.dtype)} and {scalar_type_name(y.dtype)}")
    if name == "mv":
        vec, mat = scalar_type_name(y.dtype), scalar_type_name(x.dtype)
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got {vec}, {mat}, and {vec}")
    raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {cpp_type_name(x.dtype)} != "
                       f"{cpp_type_name(y.dtype)}")


# The checks read only shapes and dtypes, so that the products' batching
# rule runs them on one sample's (a batched tensor's logical ones).

def _check_dot(x, y):
    if x.ndim != 1 or y.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {x.ndim}D and {y.ndim}D tensors")
    if x.shape != y.shape:
        raise RuntimeError("inconsistent tensor size, expected tensor [%d] and src [%d] to have the "
                           "same number of elements, but got %d and %d elements respectively"
                           % (x.shape[0], y.shape[0], x.shape[0], y.shape[0]))
    _check_float("dot", x, y)


def _check_mv(x, y):
    if x.ndim != 2 or y.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {x.ndim}, {y.ndim}")
    if x.shape[1] != y.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({x.shape[0]}), mat ({x.shape[0]}x{x.shape[1]}), "
                           f"vec ({y.shape[0]})")
    _check_float("mv", x, y)


def _check_mm(x, y):
    if x.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if y.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    if x.shape[1] != y.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({x.shape[0]}x{x.shape[1]} and "
                           f"{y.shape[0]}x{y.shape[1]})")
    _check_float("mm", x, y)


def _check_bmm(x, y):
    if x.ndim != 3 or y.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if x.ndim != 3 else "batch2 must be a 3D tensor")
    if x.shape[0] != y.shape[0] or x.shape[2] != y.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{x.shape[0]}, {x.shape[2]}] but got: [{y.shape[0]}, {y.shape[1]}].")
    _check_float("bmm", x, y)


def _check_matmul(x, y):
    if not isinstance(y, Tensor) or not isinstance(x, Tensor):
        raise TypeError("matmul(): argument 'other' must be Tensor")
    if x.ndim == 0 or y.ndim == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {x.ndim}D "
                           f"and {y.ndim}D")


def _check_outer(x, y):
    for name, t in (("self", x), ("vec2", y)):
        if t.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {t.ndim}-D")


def _matmul_operand(o, levels, rank, vector_at):
    """A batched operand's physical value for matmul: a dim for each of
    `levels` (size 1 where it has none), its matrices' batch dims padded to
    `rank` dims, a vector promoted to a matrix by a size-1 dim at
    `vector_at` (0: a row, -1: a column). A plain one stays: matmul
    broadcasts it from the right."""
    if not isinstance(o, BatchedTensor):
        return o
    shape = o.shape
    if len(shape) == 1:
        shape = (1,) + shape if vector_at == 0 else shape + (1,)
    have = dict(zip(o.levels, o.phys.shape[:len(o.levels)]))
    shape = tuple(have.get(lv, 1) for lv in levels) + (1,) * (rank - len(shape)) + shape
    return o.phys if shape == o.phys.shape else reshape(o.phys, shape)


def _batched_matmul(a, b):
    """a @ b of samples, one at least batched: one matmul of the physical
    values (a batched vector promoted to a matrix, the promoted dims dropped
    from the product)."""
    va, vb = a.ndim == 1 and isinstance(a, BatchedTensor), b.ndim == 1 and isinstance(b, BatchedTensor)
    rank = builtins.max(builtins.max(a.ndim, 2) if isinstance(a, BatchedTensor) else a.ndim,
                        builtins.max(b.ndim, 2) if isinstance(b, BatchedTensor) else b.ndim)
    levels = levels_of((a, b))
    out = matmul(_matmul_operand(a, levels, rank, 0), _matmul_operand(b, levels, rank, -1))
    if va or vb:
        shape = list(out.shape)
        if vb:
            shape.pop(-1)
        if va:  # its size-1 row dim is last unless b left a column dim after it
            shape.pop(-1 if vb or b.ndim == 1 else -2)
        out = reshape(out, tuple(shape))
    return batched(out, levels)


def _batched_product(check):
    """The batching rule of a product: its checks on one sample, then matmul's."""
    def rule(op, args):
        a, b = args.args[:2]
        check(a, b)
        return _batched_matmul(a, b)
    return rule


def _batched_rmatmul(op, args):
    x, y = args.args
    _check_matmul(y, x)
    return _batched_matmul(y, x)


@declare(signature="input, tensor, *, out=None", operands=2, batch=_batched_product(_check_dot))
def dot(input, tensor):
    """Inner product of two 1-D tensors."""
    x, y = input, tensor  # PyTorch's names, the formulas' short ones
    _check_dot(x, y)
    return _product(_DOT, x, y, wrap_value(np.dot(x._value, y._value)))


@declare(signature="input, vec, *, out=None", operands=2, batch=_batched_product(_check_mv))
def mv(input, vec):
    """Matrix (m, k) times vector (k,)."""
    x, y = input, vec  # PyTorch's names, the formulas' short ones
    _check_mv(x, y)
    return _product(_MV, x, y, np.dot(x._value, y._value))


@declare(signature="input, mat2, *, out=None", operands=2, batch=_batched_product(_check_mm))
def mm(input, mat2):
    """Matrix (m, k) times matrix (k, n)."""
    x, y = input, mat2  # PyTorch's names, the formulas' short ones
    _check_mm(x, y)
    return _product(_MM, x, y, np.dot(x._value, y._value))


@declare(signature="input, mat2, *, out=None", operands=2, batch=_batched_product(_check_bmm))
def bmm(input, mat2):
    """Batched (b, m, k) times (b, k, n)."""
    x, y = input, mat2  # PyTorch's names, the formulas' short ones
    _check_bmm(x, y)
    return _product(_BMM, x, y, np.matmul(x._value, y._value))


# Note [Products added to a tensor]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# addmm, addmv, addbmm and baddbmm are beta * input + alpha * product, and
# each is one node of three inputs, as PyTorch's (AddmmBackward0, ...). The
# row keeps the two factors first, which its gradients may save, and input
# third (its gradient, beta * g summed to its shape, reads nothing): c is
# beta, p is alpha. The value is the formula of the tape's ops that PyTorch's
# BLAS computes: it leaves input out where beta is 0, and the product where
# alpha is 0 (not baddbmm's), so nan and inf in them do not reach the result,
# though their gradients, zero, do. vmap batches the formula (`composite`).

def _scaled(t, s, left_out_at_zero=True):
    """s * t as PyTorch's BLAS makes it: t itself for 1; for 0 (where it
    leaves t out) zeros that take nothing of t's values, but t's graph."""
    s = scalar_in(t.dtype, s)
    if s == 1:
        return t
    if s == 0 and left_out_at_zero:
        return t.masked_fill(_EVERYWHERE, 0)
    return t * s


_EVERYWHERE = new_tensor(wrap_value(np.True_))


def _product_added(opdef, input, x, y, product, shape, beta, alpha, *, product_left_out_at_zero=True):
    """beta * input + alpha * product(x, y), input expanded to `shape`, the
    product's: one row of opdef over (x, y, input) (Note [Products added to a
    tensor])."""
    out = formula_node(
        opdef, lambda: _scaled(input.expand(shape), beta) + _scaled(product(x, y), alpha, product_left_out_at_zero),
        (x, y, input), c=float(beta), p=float(alpha))
    return keep_arguments(out, alpha=alpha, beta=beta)


def _added_input_grad(ctx, g):
    """input's gradient: beta * g, summed back to input's shape."""
    return sum_to(g if ctx.c == 1 else g * ctx.c, ctx.z_shape)


def _alpha_times(ctx, g):
    return g if ctx.p == 1 else g * ctx.p


@native_helper
def added_input_native(G, GC, osh, zsh, cc):
    """input's gradient in a product added to it: cc * G summed to its shape."""
    reduce_broadcast(G, GC, osh, zsh, cc)


@native_helper
def scaled_gradient(G, pp):
    """alpha * G, a product's gradient (G itself for alpha 1)."""
    return G if pp == 1.0 else G * pp


# `shaped` views own nothing: the scaled gradient Gs is named in each call,
# so that Numba keeps it alive through it

def _addmm_native(G, X, Y, Z, O, GA, GB, GC, osh, xsh, ysh, zsh, ints, pp, cc):
    m, k, n = xsh[0], xsh[1], ysh[1]
    Gs = scaled_gradient(G, pp)
    if GA.size:
        add_product(shaped(GA, (m, k)), shaped(Gs, (m, n)), False, shaped(Y, (k, n)), True)
    if GB.size:
        add_product(shaped(GB, (k, n)), shaped(X, (m, k)), True, shaped(Gs, (m, n)), False)
    if GC.size:
        added_input_native(G, GC, osh, zsh, cc)


def _addmv_native(G, X, Y, Z, O, GA, GB, GC, osh, xsh, ysh, zsh, ints, pp, cc):
    m, k = xsh[0], xsh[1]
    Gs = scaled_gradient(G, pp)
    if GA.size:
        add_product(shaped(GA, (m, k)), shaped(Gs, (m, 1)), False, shaped(Y, (1, k)), False)
    if GB.size:
        add_product(shaped(GB, (k, 1)), shaped(X, (m, k)), True, shaped(Gs, (m, 1)), False)
    if GC.size:
        added_input_native(G, GC, osh, zsh, cc)


def _baddbmm_native(G, X, Y, Z, O, GA, GB, GC, osh, xsh, ysh, zsh, ints, pp, cc):
    # addbmm's product is summed over the batch: its g is one matrix for every pair
    b, m, k, n = xsh[0], xsh[1], xsh[2], ysh[2]
    Gs = scaled_gradient(G, pp)
    one = Gs.size == m * n  # addbmm's
    for i in range(b):
        if GA.size:
            add_product(shaped(GA, (b, m, k))[i], shaped(Gs, (m, n)) if one else shaped(Gs, (b, m, n))[i], False,
                        shaped(Y, (b, k, n))[i], True)
        if GB.size:
            add_product(shaped(GB, (b, k, n))[i], shaped(X, (b, m, k))[i], True,
                        shaped(Gs, (m, n)) if one else shaped(Gs, (b, m, n))[i], False)
    if GC.size:
        added_input_native(G, GC, osh, zsh, cc)


def _added_product_vjp(grad_x, grad_y, spread=lambda ctx, ga: ga):
    """The VJP of an op of addmm's family: the product's gradients
    grad_x(ga, y) and grad_y(x, ga) for ga = alpha * g (`spread` over
    addbmm's batch), then input's."""
    def vjp(ctx, g):
        ga = spread(ctx, _alpha_times(ctx, g))
        return (_need(ctx, 0, lambda: grad_x(ga, ctx.y)), _need(ctx, 1, lambda: grad_y(ctx.x, ga)),
                _need(ctx, 2, lambda: _added_input_grad(ctx, g)))
    return vjp


_BMM_GRADS = (lambda ga, y: bmm(ga, transpose(y, 1, 2)), lambda x, ga: bmm(transpose(x, 1, 2), ga))
_addmm_vjp = _added_product_vjp(lambda ga, y: mm(ga, transpose(y, 0, 1)), lambda x, ga: mm(transpose(x, 0, 1), ga))
_addmv_vjp = _added_product_vjp(lambda ga, y: outer(ga, y), lambda x, ga: mv(transpose(x, 0, 1), ga))
_baddbmm_vjp = _added_product_vjp(*_BMM_GRADS)
_addbmm_vjp = _added_product_vjp(
    *_BMM_GRADS, spread=lambda ctx, ga: expand(unsqueeze(ga, 0), (ctx.x_shape[0],) + tuple(ga.shape)))


def _added_product_op(name, grad_fn, factors, native, vjp, sizes=()):
    """The op of one of addmm's family: factors x, y (PyTorch's names), input
    third; `sizes`, more of what PyTorch's node shows."""
    alpha_beta = (("alpha", "scalar"), ("beta", "scalar"))
    return defop(name, grad_fn, 3, saves=(SAVES_Y, SAVES_X, 0), native=native, vjp=vjp, edge_order=(2, 0, 1),
                 saved=((factors[0], "x"), (factors[1], "y")) + alpha_beta + sizes)


_ADDMM = _added_product_op("addmm", "AddmmBackward0", ("mat1", "mat2"), _addmm_native, _addmm_vjp, (
    ("mat1_sym_sizes", "x_shape"), ("mat1_sym_strides", lambda row: contiguous_strides(row.x_shape)),
    ("mat2_sym_sizes", "y_shape"), ("mat2_sym_strides", lambda row: contiguous_strides(row.y_shape))))
_ADDMV = _added_product_op("addmv", "AddmvBackward0", ("mat", "vec"), _addmv_native, _addmv_vjp)
_BADDBMM = _added_product_op("baddbmm", "BaddbmmBackward0", ("batch1", "batch2"), _baddbmm_native, _baddbmm_vjp)
_ADDBMM = _added_product_op("addbmm", "AddbmmBackward0", ("batch1", "batch2"), _baddbmm_native, _addbmm_vjp, (
    ("batch1_sym_argsize_0", lambda row: row.x_shape[0]), ("batch1_sym_argsize_1", lambda row: row.x_shape[1]),
    ("batch2_sym_argsize_2", lambda row: row.y_shape[2])))


def _expect_matrix(name, t):
    if t.ndim != 2:
        raise RuntimeError(f"{name} must be a matrix, got {t.ndim}-D tensor")


def _check_same_dtype(pairs):
    """PyTorch's "self and mat2" dtype checks of addmm and addbmm, in its order."""
    for (a, name_a), (b, name_b) in pairs:
        if a.dtype != b.dtype:
            raise RuntimeError(f"{name_a} and {name_b} must have the same dtype, but got "
                               f"{scalar_type_name(a.dtype)} and {scalar_type_name(b.dtype)}")


def _refuse_bool(kernel, t):
    if t.dtype == np.bool_:
        raise not_implemented_for(kernel, np.bool_)


def _size(t, dim):
    """t.size(dim), with PyTorch's IndexError for a dim t lacks."""
    if t.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    if dim >= t.ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-t.ndim}, {t.ndim - 1}], but got "
                         f"{dim})")
    return t.shape[dim]


@declare(signature="input, mat1, mat2, *, beta=1, alpha=1, out=None", operands=3, batch=composite)
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2), input broadcast to the product
    (Note [Products added to a tensor]).

    >>> import tape
    >>> tape.addmm(tape.ones(2), tape.ones(2, 3), tape.ones(3, 2), beta=0.5).tolist()
    [[3.5, 3.5], [3.5, 3.5]]
    """
    for position, (name, t) in enumerate((("input", input), ("mat1", mat1), ("mat2", mat2)), 1):
        _expect_tensor("addmm", position, name, t)
    _check_same_dtype((((input, "self"), (mat2, "mat2")), ((mat1, "mat1"), (mat2, "mat2"))))
    _expect_matrix("mat1", mat1)
    _expect_matrix("mat2", mat2)
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x{mat1.shape[1]} and "
                           f"{mat2.shape[0]}x{mat2.shape[1]})")
    _refuse_bool("addmm_impl_cpu_", input)
    return _product_added(_ADDMM, input, mat1, mat2, Tensor.mm, (mat1.shape[0], mat2.shape[1]), beta, alpha)


@declare(signature="input, mat, vec, *, beta=1, alpha=1, out=None", operands=3, batch=composite)
def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec), input (a vector, or one element)
    broadcast to the product (Note [Products added to a tensor])."""
    for position, (name, t) in enumerate((("input", input), ("mat", mat), ("vec", vec)), 1):
        _expect_tensor("addmv", position, name, t)
    if input.ndim > 1 or mat.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.ndim}, {mat.ndim}, {vec.ndim}")
    if mat.shape[1] != vec.shape[0] or input.numel() not in (1, mat.shape[0]):
        raise RuntimeError(f"size mismatch, got input ({_size(input, 0)}), mat ({mat.shape[0]}x{mat.shape[1]}), "
                           f"vec ({vec.shape[0]})")
    if not input.dtype == mat.dtype == vec.dtype:
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got {scalar_type_name(input.dtype)}, "
                           f"{scalar_type_name(mat.dtype)}, and {scalar_type_name(vec.dtype)}")
    _refuse_bool("addmv_impl_cpu", input)
    return _product_added(_ADDMV, input, mat, vec, Tensor.mv, (mat.shape[0],), beta, alpha)


def _check_batches(batch1, batch2):
    for name, t in (("batch1", batch1), ("batch2", batch2)):
        if t.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")


@declare(signature="input, batch1, batch2, *, beta=1, alpha=1, out=None", operands=3, batch=composite)
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * (batch1 @ batch2), a product of each pair of
    matrices, input broadcast to them (Note [Products added to a tensor])."""
    for position, (name, t) in enumerate((("input", input), ("batch1", batch1), ("batch2", batch2)), 1):
        _expect_tensor("baddbmm", position, name, t)
    shape = (_size(batch1, 0), _size(batch1, 1), _size(batch2, 2))
    input.expand(shape)  # PyTorch's error text
    if input.dtype != batch1.dtype:
        raise RuntimeError(f"Input dtypes must be the same, got: input {cpp_type_name(input.dtype)}, batch1: "
                           f"{cpp_type_name(batch1.dtype)}, batch2: {cpp_type_name(batch2.dtype)}")
    _check_batches(batch1, batch2)
    if batch2.shape[:2] != (batch1.shape[0], batch1.shape[2]):
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{batch1.shape[0]}, {batch1.shape[2]}] but got: [{batch2.shape[0]}, {batch2.shape[1]}].")
    if batch2.dtype != batch1.dtype:
        raise RuntimeError(f"expected scalar type {scalar_type_name(batch1.dtype)} but found "
                           f"{scalar_type_name(batch2.dtype)}")
    _refuse_bool("baddbmm", input)
    return _product_added(_BADDBMM, input, batch1, batch2, Tensor.bmm, shape, beta, alpha, product_left_out_at_zero=False)


@declare(signature="input, batch1, batch2, *, beta=1, alpha=1, out=None", operands=3, batch=composite)
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * the sum of the products of each pair of
    matrices, input broadcast to it (Note [Products added to a tensor])."""
    for position, (name, t) in enumerate((("input", input), ("batch1", batch1), ("batch2", batch2)), 1):
        _expect_tensor("addbmm", position, name, t)
    shape = (_size(batch1, 1), _size(batch2, 2))
    input.expand(shape)  # PyTorch's error text
    _check_batches(batch1, batch2)
    if batch1.shape[0] != batch2.shape[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got {batch1.shape[0]} and "
                           f"{batch2.shape[0]}")
    if batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(f"Incompatible matrix sizes for bmm ({batch1.shape[1]}x{batch1.shape[2]} and "
                           f"{batch2.shape[1]}x{batch2.shape[2]})")
    _check_same_dtype((((input, "self"), (batch2, "mat2")), ((batch1, "mat1"), (batch2, "mat2"))))
    _refuse_bool("addmm_impl_cpu_", input)
    return _product_added(_ADDBMM, input, batch1, batch2, lambda x, y: x.bmm(y).sum(0), shape, beta, alpha)


def _batched_outer(op, args):
    """outer of samples: the column x times the row y, aligned as an
    elementwise product's operands."""
    x, y = args.args
    _check_outer(x, y)
    column = batched(unsqueeze(x.phys, -1), x.levels) if isinstance(x, BatchedTensor) else unsqueeze(x, 1)
    row = batched(unsqueeze(y.phys, -2), y.levels) if isinstance(y, BatchedTensor) else unsqueeze(y, 0)
    levels, (c, r) = aligned([column, row])
    return batched(c * r, levels)


def _cross(input, other, dim):
    """The cross product of 3-vectors along dim: a rolled product of the
    operands (component i is a[i+1] b[i+2] - a[i+2] b[i+1]), written with
    methods so that vmap's rules run for batched operands (`composite`)."""
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    d = _norm_dim(dim, input.ndim)
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {input.shape[d]} and "
                           f"{other.shape[d]}")
    return input.roll(-1, d) * other.roll(-2, d) - input.roll(-2, d) * other.roll(-1, d)


@declare(signature="input, other, *, dim=-1, out=None", operands=2, module="linalg", batch=composite)
def cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along dim, the operands broadcast.

    >>> import tape
    >>> tape.linalg.cross(tape.tensor([1., 0., 0.]), tape.tensor([0., 1., 0.])).tolist()
    [0.0, 0.0, 1.0]
    """
    return _cross(input, other, dim)


@declare(signature="x, y, *, dim=-1, out=None", operands=2, module="linalg", batch=composite)
def vecdot(x, y, *, dim=-1):
    """The dot product of x and y along dim, broadcast."""
    return (x * y).sum(dim)


@declare(signature="x1, x2, p=2.0, compute_mode='use_mm_for_euclid_dist_if_necessary'", methods=(), operands=2,
         batch=composite)
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of x1 and each row of x2 (over
    the leading batch dims): the norm of their differences, whose gradient
    at a zero distance is 0, as PyTorch's."""
    if x1.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X2 got: {x2.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    return (x1.unsqueeze(-2) - x2.unsqueeze(-3)).norm(p, dim=-1)


def _tensordot_dims(a, b, dims):
    """The dims of a and of b that tensordot contracts, PyTorch's way."""
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, (int, np.integer)):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > builtins.min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        return list(range(a.ndim - dims, a.ndim)), list(range(dims))
    da, db = dims
    da, db = ([da] if isinstance(da, int) else list(da)), ([db] if isinstance(db, int) else list(db))
    if len(da) != len(db):
        raise RuntimeError("both dimension lists should have same length")
    return [_norm_dim(d, a.ndim) for d in da], [_norm_dim(d, b.ndim) for d in db]


@declare(signature="a, b, dims=2, out=None", methods=(), operands=2, batch=composite)
def tensordot(a, b, dims=2):
    """The sum of products of a and b over the dims `dims` names (the last
    `dims` of a with the first of b, or two lists), as one matrix product."""
    da, db = _tensordot_dims(a, b, dims)
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[i]} in dim {i} "
                               f"and second has size {b.shape[j]} in dim {j}")
    fa = [d for d in range(a.ndim) if d not in da]
    fb = [d for d in range(b.ndim) if d not in db]
    k = int(np.prod([a.shape[d] for d in da], dtype=np.int64))
    left = a.permute(fa + da).reshape(-1, k)
    right = b.permute(db + fb).reshape(k, -1)
    return (left @ right).reshape([a.shape[d] for d in fa] + [b.shape[d] for d in fb])


@declare(signature="input, other, *, out=None", operands=2, batch=composite)
def kron(input, other):
    """The Kronecker product: every element of input times all of other, laid out in blocks."""
    nd = builtins.max(input.ndim, other.ndim)
    a = input.reshape((1,) * (nd - input.ndim) + input.shape)
    b = other.reshape((1,) * (nd - other.ndim) + other.shape)
    # a's dim k, then b's: their products interleave into the blocks
    spread = a.reshape([n for d in a.shape for n in (d, 1)]) * b.reshape([n for d in b.shape for n in (1, d)])
    return spread.reshape([x * y for x, y in zip(a.shape, b.shape)])


def _deprecated_cross(input, other, dim=None):
    """torch.cross: without dim, along the first dim of size 3, with PyTorch's warning."""
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the dim "
                      "explicitly or simply use torch.linalg.cross.\nThe default value of dim will change to agree "
                      "with that of linalg.cross in a future release.", UserWarning, stacklevel=3)
        dim = next((k for k, n in enumerate(input.shape) if n == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return _cross(input, other, dim)


declare(_deprecated_cross, name="cross", signature="input, other, dim=None, *, out=None", operands=2, batch=composite)


@declare(signature="input, vec2, *, out=None", operands=2, batch=_batched_outer, aliases=("ger",))
def outer(input, vec2):
    """Outer product of two 1-D tensors."""
    x, y = input, vec2  # PyTorch's names, the formulas' short ones
    _check_outer(x, y)
    return unsqueeze(x, 1) * unsqueeze(y, 0)


def _folds(x, y):
    """PyTorch's should_fold: whether matmul of x and y, one of at least 3
    dims (t1, transposed when it is y) and the other of at most 2, is mm or
    mv of t1 with its batch folded into its rows. It folds when the other
    requires grad (its gradient is then one matrix product, not a batch of
    them summed), else where the fold is a view and needs no transpose back."""
    x_larger = x.ndim >= y.ndim
    t1, other = (x, y) if x_larger else (y.mT, x)
    if t1.ndim < 3 or other.ndim > 2:
        return False
    if other.requires_grad:
        return True
    if x.ndim == 2:
        return False
    if t1.numel() == 0:
        return True
    sizes, strides = t1.shape, t1.stride()
    return all(strides[i] == strides[i + 1] * sizes[i + 1] for i in range(t1.ndim - 2))


def _folded_matmul(x, y):
    """matmul as PyTorch's fold (`_folds`): UnsafeViewBackward0 of MmBackward0
    or MvBackward0, of t1 reshaped to a matrix; a transposed fold of a
    matrix transposes its result back and copies it to C order."""
    transpose = y.ndim > x.ndim
    t1 = y.mT if transpose else x
    t2 = (x.t() if x.ndim == 2 else x) if transpose else y
    shape = t1.shape[:-1]
    folded = reshape(t1, (math.prod(shape), t1.shape[-1]))
    if t2.ndim == 1:
        return unsafe_view(mv(folded, t2), shape)
    out = unsafe_view(mm(folded, t2), shape + (t2.shape[1],))
    return out.mT.contiguous() if transpose else out


@declare(signature="input, other, *, out=None", methods=("matmul", "__matmul__"), operands=2,
         batch=_batched_product(_check_matmul))
def matmul(input, other):
    """Matrix product with NumPy's rules: 1-D operands are promoted, batch
    dims broadcast.

    >>> import tape
    >>> (tape.ones(2, 3) @ tape.ones(3)).tolist()
    [3.0, 3.0]
    """
    x, y = input, other  # PyTorch's names, the formulas' short ones
    if not isinstance(y, Tensor) or not isinstance(x, Tensor):
        raise TypeError("matmul(): argument 'other' must be Tensor")
    xv, yv = x._value, y._value
    # the common case first, with mm's checks folded into one test
    if (type(xv) is np.ndarray and type(yv) is np.ndarray and xv.ndim == 2 and yv.ndim == 2
            and xv.shape[1] == yv.shape[0] and xv.dtype == yv.dtype):
        return _product(_MM, x, y, np.dot(xv, yv))
    _check_matmul(x, y)
    if x.ndim == 1 and y.ndim == 1:
        return dot(x, y)
    if x.ndim == 2 and y.ndim == 1:
        return mv(x, y)
    if x.ndim == 2 and y.ndim == 2:
        return mm(x, y)
    if x.ndim == 1 and y.ndim == 2:
        return squeeze_made(mm(unsqueeze(x, 0), y), 0)
    if _folds(x, y):
        return _folded_matmul(x, y)
    xb = unsqueeze(x, 0) if x.ndim == 1 else x
    yb = unsqueeze(y, -1) if y.ndim == 1 else y
    batch = broadcast_shapes(xb.shape[:-2], yb.shape[:-2])
    m, k, n = xb.shape[-2], xb.shape[-1], yb.shape[-1]
    nb = int(np.prod(batch))
    if k != yb.shape[-2]:  # as bmm of the flattened batch reports it
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{nb}, {k}] but got: [{nb}, {yb.shape[-2]}].")
    x3 = reshape(expand(xb, batch + (m, k)), (nb, m, k))
    y3 = reshape(expand(yb, batch + (k, n)), (nb, k, n))
    out = bmm(x3, y3)
    # as PyTorch: a vector y's dim squeezed, a vector x's left out of the shape
    return unsafe_view(squeeze(out, -1) if y.ndim == 1 else out, batch + (m,) * (x.ndim > 1) + (n,) * (y.ndim > 1))


@declare(function=False, methods=("__rmatmul__",), operands=2, batch=_batched_rmatmul)
def _rmatmul(x, y):
    return matmul(y, x)


def _batched_einsum(op, args):
    """einsum of samples: the same equation with a label of its own for
    each vmap level in front of each batched operand's, and of the output."""
    equation, operands = args.args[0], args.args[1:]
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    if not arrow:  # PyTorch's implicit output, written out before labels join
        counts = collections.Counter(lhs.replace("...", "").replace(",", ""))
        rhs = ("..." if "..." in lhs else "") + "".join(sorted(l for l, n in counts.items() if n == 1))
    levels = levels_of(operands)
    free = [l for l in string.ascii_letters if l not in equation]
    label = dict(zip(levels, free))
    terms = [("".join(label[lv] for lv in t.levels) if isinstance(t, BatchedTensor) else "") + term
             for term, t in zip(lhs.split(","), operands)]
    batched_equation = ",".join(terms) + "->" + "".join(label[lv] for lv in levels) + rhs
    return batched(op(batched_equation, *(physical(t) for t in operands)), levels)


@declare(methods=(), operands=2, batch=_batched_einsum)
def einsum(equation, *operands):
    """Einstein summation (`"ij,jk->ik"`, `"bij,bjk->bik"`, `"ii->i"`,
    `"...ij->...ji"`), as PyTorch's: repeated labels of one operand take the
    diagonal, labels of one operand only that the output lacks are summed, and
    the operands are contracted left to right, each pair by one bmm, so it is
    differentiable to any order as its parts are."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation"
                           if len(operands) > len(terms) else
                           "einsum(): fewer operands were provided than specified in the equation")
    # one dtype for all, by PyTorch's rule (Note [Type promotion]), before the pairs meet in bmm
    dtype = result_type(*operands)
    operands = [t if t.dtype == dtype else t.to(dtype) for t in operands]
    # the dims under "..." take labels of their own, aligned to the right as broadcasting aligns them
    spans = [t.ndim - len(term.replace("...", "")) for term, t in zip(terms, operands)]
    width = builtins.max([k for k, term in zip(spans, terms) if "..." in term], default=0)
    ellipsis = [chr(0x100 + k) for k in range(width)]
    labelled = []
    for term, t, k in zip(terms, operands, spans):
        labels = list(term.replace("...", "\0"))
        if "\0" in labels:
            at = labels.index("\0")
            labels[at:at + 1] = ellipsis[width - k:]
        if len(labels) != t.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(labels)}) does not "
                               f"match the number of dimensions ({t.ndim}) for operand {len(labelled)}"
                               + ("" if "..." in term else " and no ellipsis was given"))
        labelled.append((t, labels))
    seen = {}
    for i, (t, labels) in enumerate(labelled):
        for l, d in zip(labels, t.shape):
            if seen.setdefault(l, d) != d and 1 not in (d, seen[l]):
                raise RuntimeError(f"einsum(): subscript {l} has size {d} for operand {i} which does not "
                                   f"broadcast with previously seen size {seen[l]}")
            seen[l] = builtins.max(seen[l], d)
    # counted before the diagonals are taken: "ii" uses i twice, so its
    # implicit output is the trace, not the diagonal
    counts = collections.Counter(l for _, labels in labelled for l in labels)
    labelled = [_distinct_labels(t, labels) for t, labels in labelled]
    if arrow:
        out = list(rhs.replace("...", "\0"))
        if "\0" in out:
            at = out.index("\0")
            out[at:at + 1] = ellipsis
    else:  # PyTorch's implicit output: the "..." dims, then the labels used once, sorted
        out = ellipsis + sorted(l for l, n in counts.items() if n == 1 and l not in ellipsis)
    for l in out:
        if l not in counts:
            raise RuntimeError(f"einsum(): output subscript {l} does not appear in the equation for any input "
                               "operand")
    (x, labels), *rest = labelled
    for k, (y, other) in enumerate(rest):
        needed = set(out).union(*(ls for _, ls in rest[k + 1:]))
        x, labels = _contract(x, labels, y, other, needed)
    x, labels = _sum_labels(x, labels, set(out))
    return permute(x, [labels.index(l) for l in out]) if labels != out else x


def _distinct_labels(t, labels):
    """(t, labels) with each repeated label's dims replaced by their diagonal."""
    for l in list(dict.fromkeys(labels)):
        while labels.count(l) > 1:
            p = labels.index(l)
            q = labels.index(l, p + 1)
            t = diagonal(t, 0, p, q)
            labels = [m for i, m in enumerate(labels) if i not in (p, q)] + [l]
    return t, labels


def _sum_labels(t, labels, needed):
    """t summed over the dims whose labels are not needed."""
    dims = [i for i, l in enumerate(labels) if l not in needed]
    if not dims:
        return t, labels
    return _sum(t, tuple(dims)), [l for l in labels if l in needed]


def _contract(x, lx, y, ly, needed):
    """x (labels lx) times y (labels ly), summed over the shared labels not
    needed later, as one bmm: batch, x's own and y's own labels follow."""
    x, lx = _sum_labels(x, lx, needed | set(ly))
    y, ly = _sum_labels(y, ly, needed | set(lx))
    batch = [l for l in lx if l in ly and l in needed]
    summed = [l for l in lx if l in ly and l not in needed]
    own_x = [l for l in lx if l not in ly]
    own_y = [l for l in ly if l not in lx]
    size = {}  # sizes broadcast (einsum checked that they do)
    for t, ls in ((x, lx), (y, ly)):
        for l, d in zip(ls, t.shape):
            size[l] = builtins.max(size.get(l, d), d)

    def arranged(t, ls, order):
        t = permute(t, [ls.index(l) for l in order]) if ls != order else t
        full = tuple(size[l] for l in order)
        return expand(t, full) if t.shape != full else t

    def count(ls):
        return math.prod(size[l] for l in ls)

    x3 = reshape(arranged(x, lx, batch + own_x + summed), (count(batch), count(own_x), count(summed)))
    y3 = reshape(arranged(y, ly, batch + summed + own_y), (count(batch), count(summed), count(own_y)))
    product = bmm(x3, y3)
    return reshape(product, tuple(size[l] for l in batch + own_x + own_y)), batch + own_x + own_y



__all__ = exports(globals())
