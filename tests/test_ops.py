"""Every op, from one table: forward against NumPy, gradcheck at orders 1 and 2,
and the native sweep against the re-taped sweep (Note [Tape layout])."""
import contextlib
import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pytest

import tape
from tape._engine import force_retaped


@dataclass
class Case:
    """One op under test: `fn` over tape tensors, `ref` over NumPy arrays,
    the input shapes and the interval each input is drawn from."""
    name: str
    fn: object
    ref: object
    shapes: tuple
    low: tuple = (-2.0,)
    high: tuple = (2.0,)
    seed: int = 0
    tolerance: dict = field(default_factory=dict)
    # the inputs themselves, for an op checked at chosen points (prod at zeros)
    values: tuple = None

    def inputs(self):
        if self.values is not None:
            return [tape.tensor(v, requires_grad=True) for v in self.values]
        rng = np.random.default_rng(self.seed)
        out = []
        for k, shape in enumerate(self.shapes):
            lo = self.low[min(k, len(self.low) - 1)]
            hi = self.high[min(k, len(self.high) - 1)]
            out.append(tape.tensor(rng.uniform(lo, hi, shape), requires_grad=True))
        return out


class _ProductSin(tape.autograd.Function):
    """sin(x * y) * z as a custom Function of three inputs, its backward in tape ops."""

    @staticmethod
    def forward(ctx, x, y, z):
        ctx.save_for_backward(x, y, z)
        return (x * y).sin() * z

    @staticmethod
    def backward(ctx, g):
        x, y, z = ctx.saved_tensors
        gz = g * z * (x * y).cos()
        return gz * y, (gz * x).sum(0), (g * (x * y).sin()).sum(1, keepdim=True)


def _assigned(x, key, v):
    """x[key] = v on a copy of x (a leaf cannot be written in place)."""
    out = x * 1.0
    out[key] = v
    return out


def _assigned_ref(a, key, b):
    out = np.array(a, copy=True)
    out[key] = b
    return out


def _accumulated_ref(a, index, b):
    out = np.array(a, copy=True)
    np.add.at(out, index, b)
    return out


def _scattered_ref(a, index, b, accumulate):
    """scatter (or scatter_add) along dim 0 of NumPy arrays."""
    out = np.array(a, copy=True)
    index = np.array(index)
    columns = np.broadcast_to(np.arange(index.shape[1]), index.shape)
    if accumulate:
        np.add.at(out, (index, columns), b[:index.shape[0], :index.shape[1]])
    else:
        out[index, columns] = b[:index.shape[0], :index.shape[1]]
    return out


def _view_changed(base, v):
    """base's last columns, a view, multiplied in place by v: base's node is
    CopySlices, the view's AsStridedBackward0; the two overlap in the result."""
    view = base[..., 1:]
    view.mul_(v)
    return base[..., :2] * view


def _view_changed_ref(a, b):
    out = np.array(a, copy=True)
    out[..., 1:] *= b
    return out[..., :2] * out[..., 1:]


def _away_from_zero(x):
    return np.where(np.abs(x) < 0.2, 0.2 * np.sign(x) + (x == 0) * 0.2, x)


ELEMENTWISE_UNARY = [
    ("neg", lambda x: -x, np.negative, -2, 2),
    ("exp", lambda x: x.exp(), np.exp, -2, 2),
    ("log", lambda x: x.log(), np.log, 0.3, 3),
    ("sin", lambda x: x.sin(), np.sin, -2, 2),
    ("cos", lambda x: x.cos(), np.cos, -2, 2),
    ("tanh", lambda x: x.tanh(), np.tanh, -2, 2),
    ("sigmoid", lambda x: x.sigmoid(), lambda a: 1 / (1 + np.exp(-a)), -3, 3),
    ("relu", lambda x: x.relu(), lambda a: np.maximum(a, 0), 0.2, 2),
    ("relu_negative", lambda x: tape.relu(x), lambda a: np.maximum(a, 0), -2, -0.2),
    ("sqrt", lambda x: x.sqrt(), np.sqrt, 0.3, 3),
    ("abs", lambda x: x.abs(), np.abs, 0.2, 2),
    ("abs_negative", lambda x: abs(x), np.abs, -2, -0.2),
    ("square", lambda x: x.square(), np.square, -2, 2),
    # piecewise constant: drawn away from the jumps
    ("sign", lambda x: x.sign(), np.sign, 0.2, 2),
    ("floor", lambda x: tape.floor(x), np.floor, 0.1, 0.9),
    ("ceil", lambda x: x.ceil(), np.ceil, 0.1, 0.9),
    ("trunc", lambda x: tape.trunc(x), np.trunc, -0.9, -0.1),
    ("round", lambda x: x.round(), np.round, 0.6, 1.4),
    ("tan", lambda x: x.tan(), np.tan, -1.2, 1.2),
    ("asin", lambda x: x.asin(), np.arcsin, -0.9, 0.9),
    ("acos", lambda x: tape.acos(x), np.arccos, -0.9, 0.9),
    ("atan", lambda x: x.atan(), np.arctan, -2, 2),
    ("sinh", lambda x: x.sinh(), np.sinh, -2, 2),
    ("cosh", lambda x: tape.cosh(x), np.cosh, -2, 2),
    ("asinh", lambda x: x.asinh(), np.arcsinh, -2, 2),
    ("acosh", lambda x: x.acosh(), np.arccosh, 1.2, 3),
    ("atanh", lambda x: x.atanh(), np.arctanh, -0.9, 0.9),
    ("exp2", lambda x: x.exp2(), np.exp2, -2, 2),
    ("expm1", lambda x: x.expm1(), np.expm1, -2, 2),
    ("log2", lambda x: x.log2(), np.log2, 0.3, 3),
    ("log10", lambda x: tape.log10(x), np.log10, 0.3, 3),
    ("log1p", lambda x: x.log1p(), np.log1p, -0.5, 2),
    ("rsqrt", lambda x: x.rsqrt(), lambda a: 1 / np.sqrt(a), 0.3, 3),
    ("pow_int", lambda x: x ** 3, lambda a: a ** 3, -2, 2),
    ("pow_float", lambda x: x ** 2.5, lambda a: a ** 2.5, 0.3, 2),
    ("pow_zero", lambda x: x ** 0, lambda a: a ** 0, -2, 2),
    # native partials compute x ** 0, x ** 1 and x ** 2 without libm's pow
    ("pow_one", lambda x: x ** 1, lambda a: a ** 1, -2, 2),
    ("pow_two", lambda x: x ** 2, lambda a: a ** 2, -2, 2),
    ("rpow", lambda x: 2.0 ** x, lambda a: 2.0 ** a, -2, 2),
    ("add_number", lambda x: x + 2.5, lambda a: a + 2.5, -2, 2),
    ("rsub_number", lambda x: 1.0 - x, lambda a: 1.0 - a, -2, 2),
    ("mul_number", lambda x: 3 * x, lambda a: 3 * a, -2, 2),
    ("div_number", lambda x: x / 4.0, lambda a: a / 4.0, -2, 2),
    ("rdiv_number", lambda x: 1.5 / x, lambda a: 1.5 / a, 0.5, 2),
    ("clone", lambda x: x.clone(), np.copy, -2, 2),
    # remainders drawn away from the jumps of floor(x / y)
    ("remainder_number", lambda x: x % 1.5, lambda a: np.remainder(a, 1.5), 0.2, 1.3),
    ("erf", lambda x: x.erf(), lambda a: np.vectorize(math.erf)(a), -2, 2),
    ("silu", lambda x: tape.silu(x), lambda a: a / (1 + np.exp(-a)), -3, 3),
    ("gelu", lambda x: tape.gelu(x), lambda a: 0.5 * a * (1 + np.vectorize(math.erf)(a / math.sqrt(2))), -3, 3),
    ("gelu_tanh", lambda x: tape.gelu(x, approximate="tanh"),
     lambda a: 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3))), -3, 3),
    ("softplus", lambda x: tape.softplus(x), lambda a: np.log1p(np.exp(a)), -3, 3),
    # beta x on either side of the threshold, away from the kink at beta x = threshold
    ("softplus_beta_below", lambda x: x.softplus(beta=2.0, threshold=3.0), lambda a: np.log1p(np.exp(2 * a)) / 2,
     -2, 1.3),
    ("softplus_beta_above", lambda x: x.softplus(beta=2.0, threshold=3.0), lambda a: a * 1.0, 1.7, 3),
    # drawn away from the jumps at odd multiples of 0.05
    ("round_decimals", lambda x: tape.round(x, decimals=1) * x, lambda a: np.round(a, 1) * a, 0.21, 0.24),
]

ELEMENTWISE_BINARY = [
    ("add", lambda x, y: x + y, np.add, (-2, -2), (2, 2)),
    ("add_alpha", lambda x, y: tape.add(x, y, alpha=2.0), lambda a, b: a + 2 * b, (-2, -2), (2, 2)),
    ("sub", lambda x, y: x - y, np.subtract, (-2, -2), (2, 2)),
    ("sub_alpha", lambda x, y: tape.sub(x, y, alpha=-0.5), lambda a, b: a + 0.5 * b, (-2, -2), (2, 2)),
    ("mul", lambda x, y: x * y, np.multiply, (-2, -2), (2, 2)),
    ("div", lambda x, y: x / y, np.divide, (-2, 0.5), (2, 2)),
    ("pow_tensor", lambda x, y: x ** y, np.power, (0.5, -2), (2, 2)),
    ("remainder", lambda x, y: x % y, np.remainder, (2.2, 1.0), (2.8, 1.05)),
    ("remainder_negative", lambda x, y: tape.remainder(x, y), np.remainder, (-2.8, 1.0), (-2.2, 1.05)),
    # quotients away from the jumps of the rounding: zero gradients, as PyTorch's
    ("div_trunc", lambda x, y: tape.div(x, y, rounding_mode="trunc"), lambda a, b: np.trunc(a / b),
     (-2.8, 1.0), (-2.2, 1.05)),
    ("div_floor", lambda x, y: tape.div(x, y, rounding_mode="floor"), lambda a, b: np.floor(a / b),
     (-2.8, 1.0), (-2.2, 1.05)),
    # x above y: each input wins one of the two, away from ties
    ("maximum", lambda x, y: tape.maximum(x, y), np.maximum, (0.5, -2), (2, 0)),
    ("minimum", lambda x, y: x.minimum(y), np.minimum, (0.5, -2), (2, 0)),
    ("atan2", lambda x, y: tape.atan2(x, y), np.arctan2, (-2, 0.5), (2, 2)),
    ("xlogy", lambda x, y: tape.xlogy(x, y), lambda a, b: a * np.log(b), (-2, 0.5), (2, 2)),
    ("hypot", lambda x, y: tape.hypot(x, y), np.hypot, (-2, 0.5), (2, 2)),
    ("logaddexp", lambda x, y: x.logaddexp(y), np.logaddexp, (-2, -2), (2, 2)),
    # PyTorch's lerp computes from the nearer end: a weight on either side of 0.5
    ("lerp", lambda x, y: tape.lerp(x, y, 0.3), lambda a, b: a + 0.3 * (b - a), (-2, -2), (2, 2)),
    ("lerp_near_end", lambda x, y: x.lerp(y, 0.8), lambda a, b: b - (b - a) * 0.2, (-2, -2), (2, 2)),
]

CASES = []
for name, fn, ref, lo, hi in ELEMENTWISE_UNARY:
    for shape in [(), (3,)]:
        CASES.append(Case(f"{name}{list(shape)}", fn, ref, (shape,), (lo,), (hi,)))
for name, fn, ref, lo, hi in ELEMENTWISE_BINARY:
    for shapes in [((), ()), ((3,), (3,)), ((2, 3), (3,)), ((), (2, 2))]:
        CASES.append(Case(f"{name}{[list(s) for s in shapes]}", fn, ref, shapes, lo, hi))

CASES += [
    Case("sum", lambda x: x.sum(), np.sum, ((2, 3),)),
    Case("sum_dim", lambda x: x.sum(dim=1), lambda a: a.sum(axis=1), ((2, 3),)),
    Case("sum_neg_dim_keepdim", lambda x: x.sum(-1, keepdim=True), lambda a: a.sum(-1, keepdims=True),
         ((2, 3),)),
    Case("sum_dims", lambda x: tape.sum(x, (0, 2)), lambda a: a.sum(axis=(0, 2)), ((2, 3, 2),)),
    Case("mean", lambda x: x.mean(), np.mean, ((2, 3),)),
    # random inputs: no ties, so finite differences see one smooth piece
    Case("einsum_contract", lambda x, y: tape.einsum("bij,bjk->bik", x, y), lambda a, b: np.einsum("bij,bjk->bik", a, b),
         ((2, 3, 4), (2, 4, 2))),
    Case("einsum_trace_and_broadcast", lambda x, y: tape.einsum("ii,...i->...", x * x, y),
         lambda a, b: np.einsum("ii,...i->...", a * a, b), ((3, 3), (2, 3))),
    Case("prod", lambda x: x.prod(), np.prod, ((2, 3),)),
    Case("prod_dim", lambda x: tape.prod(x, -1, keepdim=True), lambda a: a.prod(-1, keepdims=True), ((2, 5),)),
    # at zeros: one, two, all of a line, and none
    Case("prod_one_zero", lambda x: x.prod(), np.prod, ((2, 3),), values=([[1.5, 0.0, -2.0], [0.5, 3.0, 1.25]],)),
    Case("prod_two_zeros", lambda x: x.prod(), np.prod, ((4,),), values=([0.0, 2.0, 0.0, -1.5],)),
    Case("prod_dim_zeros", lambda x: tape.prod(x, 1), lambda a: a.prod(1), ((4, 3),),
         values=([[1.5, 0.0, -2.0], [0.0, 0.5, 0.0], [0.0, 0.0, 0.0], [2.0, -1.0, 0.5]],)),
    Case("prod_dim0_zeros_keepdim", lambda x: tape.prod(x, 0, keepdim=True), lambda a: a.prod(0, keepdims=True),
         ((3, 2),), values=([[0.0, 1.5], [2.0, 0.0], [-0.5, 0.0]],)),
    Case("amax", lambda x: x.amax(1), lambda a: a.max(axis=1), ((2, 3),)),
    Case("amin_dims", lambda x: tape.amin(x, (0, 2), keepdim=True),
         lambda a: a.min(axis=(0, 2), keepdims=True), ((2, 3, 2),)),
    Case("max_all", lambda x: x.max(), np.max, ((2, 3),)),
    Case("min_all", lambda x: tape.min(x), np.min, ((2, 3),)),
    Case("max_dim", lambda x: x.max(1).values, lambda a: a.max(axis=1), ((2, 3),)),
    Case("min_dim_keepdim", lambda x: x.min(0, keepdim=True)[0], lambda a: a.min(axis=0, keepdims=True),
         ((2, 3),)),
    Case("logsumexp", lambda x: tape.logsumexp(x, 1), lambda a: np.log(np.exp(a).sum(axis=1)), ((2, 3),)),
    Case("softmax", lambda x: x.softmax(-1), lambda a: np.exp(a) / np.exp(a).sum(-1, keepdims=True),
         ((2, 3),)),
    Case("log_softmax", lambda x: tape.log_softmax(x, 0),
         lambda a: a - np.log(np.exp(a).sum(0, keepdims=True)), ((2, 3),)),
    Case("logsumexp_dims", lambda x: tape.logsumexp(x, (0, 2), keepdim=True),
         lambda a: np.log(np.exp(a).sum(axis=(0, 2), keepdims=True)), ((2, 3, 2),)),
    Case("softmax_middle", lambda x: tape.softmax(x, 1), lambda a: np.exp(a) / np.exp(a).sum(1, keepdims=True),
         ((2, 3, 2),)),
    Case("log_softmax_0d", lambda x: x.log_softmax(0), lambda a: a - a, ((),)),
    Case("var", lambda x: x.var(1), lambda a: a.var(axis=1, ddof=1), ((2, 3),)),
    Case("var_keepdim", lambda x: x.var((0, 2), keepdim=True), lambda a: a.var(axis=(0, 2), ddof=1, keepdims=True),
         ((2, 3, 2),)),
    Case("std_biased", lambda x: tape.std(x, correction=0), np.std, ((2, 3),)),
    Case("std_dim", lambda x: x.std(0), lambda a: a.std(axis=0, ddof=1), ((3, 2),)),
    Case("where", lambda x, y: tape.where(x > 0, x, y), lambda a, b: np.where(a > 0, a, b), ((2, 3), (3,))),
    Case("norm", lambda x: x.norm(), np.linalg.norm, ((2, 3),)),
    Case("norm_dim", lambda x: tape.norm(x, 2, 1, keepdim=True), lambda a: np.linalg.norm(a, axis=1, keepdims=True),
         ((2, 3),)),
    Case("norm_p3", lambda x: x.norm(3, dim=0), lambda a: (np.abs(a) ** 3).sum(0) ** (1 / 3), ((2, 3),),
         low=(0.2,)),
    Case("norm_inf", lambda x: x.norm(np.inf, dim=1) * tape.linalg.vector_norm(x, -np.inf) + x.norm(1),
         lambda a: np.abs(a).max(1) * np.abs(a).min() + np.abs(a).sum(), ((2, 3),)),
    Case("cumsum", lambda x: x.cumsum(1) * tape.cumsum(x, 0), lambda a: np.cumsum(a, 1) * np.cumsum(a, 0),
         ((2, 3),)),
    Case("split", lambda x: x.split([1, 2], 1)[1] * x.split(2)[0][:, :2],
         lambda a: a[:, 1:] * a[:2, :2], ((2, 3),)),
    Case("chunk_unbind", lambda x: x.chunk(2, 1)[1] - tape.stack(x.unbind(1)[:2], 1),
         lambda a: a[:, 2:] - a[:, :2], ((2, 4),)),
    Case("flip", lambda x: x.flip(0, -1), lambda a: a[::-1, ::-1], ((2, 3),)),
    Case("index_select", lambda x: x.index_select(1, tape.tensor([2, 0, 2])), lambda a: a[:, [2, 0, 2]],
         ((2, 3),)),
    Case("gather", lambda x: x.gather(1, tape.tensor([[0, 0], [2, 1]])),
         lambda a: np.take_along_axis(a, np.array([[0, 0], [2, 1]]), 1), ((2, 3),)),
    Case("diagonal", lambda x: tape.diagonal(x, 1), lambda a: np.diagonal(a, 1), ((3, 3),)),
    Case("triu_tril", lambda x: x.triu() * 2 + tape.tril(x, -1), lambda a: np.triu(a) * 2 + np.tril(a, -1),
         ((3, 4),)),
    Case("linalg_inv", lambda x: tape.linalg.inv(x + 3 * tape.eye(3)), lambda a: np.linalg.inv(a + 3 * np.eye(3)),
         ((2, 3, 3),)),
    Case("linalg_det", lambda x: tape.linalg.det(x + 2 * tape.eye(3)), lambda a: np.linalg.det(a + 2 * np.eye(3)),
         ((2, 3, 3),)),
    Case("linalg_slogdet", lambda x: tape.linalg.slogdet(x).logabsdet, lambda a: np.linalg.slogdet(a)[1],
         ((3, 3),), seed=3),
    # outputs in the graph without a gradient of their own (locally constant)
    Case("slogdet_sign_and_norm0", lambda x: tape.linalg.slogdet(x).sign * tape.linalg.slogdet(x).logabsdet
         + tape.linalg.vector_norm(x, 0) * x.sum(),
         lambda a: np.prod(np.linalg.slogdet(a)) + np.count_nonzero(a) * a.sum(), ((3, 3),), seed=3),
    Case("linalg_solve", lambda a, b: tape.linalg.solve(a + 3 * tape.eye(3), b),
         lambda a, b: np.linalg.solve(a + 3 * np.eye(3), b), ((2, 3, 3), (2, 3, 2))),
    Case("linalg_solve_vector", lambda a, b: tape.linalg.solve(a + 3 * tape.eye(3), b),
         lambda a, b: np.linalg.solve(a + 3 * np.eye(3), b), ((3, 3), (3,))),
    Case("linalg_cholesky", lambda x: tape.linalg.cholesky(x @ x.mT + 3 * tape.eye(3)),
         lambda a: np.linalg.cholesky(a @ np.swapaxes(a, -1, -2) + 3 * np.eye(3)), ((2, 3, 3),)),
    Case("linalg_matrix_norms", lambda x: tape.linalg.norm(x, 1) * tape.linalg.norm(x, -np.inf) + tape.linalg.norm(x),
         lambda a: np.linalg.norm(a, 1) * np.linalg.norm(a, -np.inf) + np.linalg.norm(a), ((3, 4),)),
    Case("clamp_tensor_bounds", lambda x, lo, hi: tape.clamp(x, lo, hi), lambda a, lo, hi: np.clip(a, lo, hi),
         ((2, 3), (2, 3), (3,)), low=(-2.0, -2.0, 0.5), high=(2.0, -0.5, 2.0)),
    Case("clamp_min_max_tensor", lambda x, lo: x.clamp_min(lo) * tape.clamp_max(x, lo + 1),
         lambda a, lo: np.maximum(a, lo) * np.minimum(a, lo + 1), ((2, 3), (3,))),
    Case("mean_dim", lambda x: x.mean(0), lambda a: a.mean(0), ((2, 3),)),
    Case("mean_keepdim", lambda x: x.mean(1, keepdim=True), lambda a: a.mean(1, keepdims=True), ((2, 3),)),
    Case("mm", lambda x, y: x @ y, np.matmul, ((2, 3), (3, 4))),
    Case("mm_fn", lambda x, y: tape.mm(x, y), np.matmul, ((3, 2), (2, 2))),
    Case("mv", lambda x, y: x @ y, np.matmul, ((2, 3), (3,))),
    Case("dot", lambda x, y: tape.dot(x, y), np.dot, ((4,), (4,))),
    Case("vec_mat", lambda x, y: x @ y, np.matmul, ((3,), (3, 2))),
    Case("bmm", lambda x, y: tape.bmm(x, y), np.matmul, ((2, 2, 3), (2, 3, 2))),
    # the products added to a tensor, input broadcast to the product
    Case("addmm", lambda i, a, b: tape.addmm(i, a, b, beta=0.5, alpha=-2.0), lambda i, a, b: 0.5 * i - 2.0 * (a @ b),
         ((3,), (2, 4), (4, 3))),
    Case("addmm_method", lambda i, a, b: i.addmm(a, b), lambda i, a, b: i + a @ b, ((2, 3), (2, 4), (4, 3))),
    Case("addmm_beta_0", lambda i, a, b: tape.addmm(i, a, b, beta=0) * i, lambda i, a, b: (a @ b) * i,
         ((2, 1), (2, 4), (4, 3))),
    Case("addmm_", lambda i, a, b: (i * 1.0).addmm_(a, b, beta=2, alpha=0.5), lambda i, a, b: 2 * i + 0.5 * (a @ b),
         ((2, 3), (2, 4), (4, 3))),
    Case("addmv", lambda i, m, v: tape.addmv(i, m, v, beta=2, alpha=0.5), lambda i, m, v: 2 * i + 0.5 * (m @ v),
         ((1,), (3, 4), (4,))),
    Case("addmv_", lambda i, m, v: (i * 1.0).addmv_(m, v, alpha=-1), lambda i, m, v: i - m @ v, ((3,), (3, 4), (4,))),
    Case("addbmm", lambda i, a, b: tape.addbmm(i, a, b, beta=-1, alpha=3),
         lambda i, a, b: -i + 3 * (a @ b).sum(0), ((4,), (2, 3, 5), (2, 5, 4))),
    Case("addbmm_", lambda i, a, b: (i * 1.0).addbmm_(a, b), lambda i, a, b: i + (a @ b).sum(0),
         ((3, 4), (2, 3, 5), (2, 5, 4))),
    Case("baddbmm", lambda i, a, b: i.baddbmm(a, b, beta=0.25, alpha=2),
         lambda i, a, b: 0.25 * i + 2 * (a @ b), ((3, 1), (2, 3, 5), (2, 5, 4))),
    Case("baddbmm_", lambda i, a, b: (i * 1.0).baddbmm_(a, b, alpha=0), lambda i, a, b: i + 0 * (a @ b),
         ((2, 3, 4), (2, 3, 5), (2, 5, 4))),
    Case("addcmul", lambda i, a, b: tape.addcmul(i, a, b, value=-0.7), lambda i, a, b: i - 0.7 * a * b,
         ((2, 3), (3,), (2, 1))),
    Case("addcmul_", lambda i, a, b: (i * 1.0).addcmul_(a, b), lambda i, a, b: i + a * b, ((2, 3), (2, 3), (3,))),
    Case("addcdiv", lambda i, a, b: i.addcdiv(a, b, value=2), lambda i, a, b: i + 2 * a / b,
         ((3,), (2, 3), (2, 1)), low=(-2.0, -2.0, 0.5), high=(2.0, 2.0, 2.0)),
    Case("addcdiv_", lambda i, a, b: (i * 1.0).addcdiv_(a, b, value=-0.5), lambda i, a, b: i - 0.5 * a / b,
         ((2, 3), (3,), (2, 3)), low=(-2.0, -2.0, 0.5), high=(2.0, 2.0, 2.0)),
    # a tensor weight on both sides of 0.5: each element from its nearer end
    Case("lerp_tensor_weight", lambda x, y, w: tape.lerp(x, y, w),
         lambda a, b, w: np.where(np.abs(w) < 0.5, a + w * (b - a), b - (b - a) * (1 - w)),
         ((2, 3), (3,), (2, 3)), low=(-2.0, -2.0, -0.4), high=(2.0, 2.0, 1.4), seed=3),
    Case("lerp_", lambda x, y, w: (x * 1.0).lerp_(y, w), lambda a, b, w: np.where(
        np.abs(w) < 0.5, a + w * (b - a), b - (b - a) * (1 - w)), ((2, 3), (2, 3), (3,)), low=(-2.0, -2.0, 0.1),
         high=(2.0, 2.0, 0.9)),
    Case("matmul_broadcast", lambda x, y: x @ y, np.matmul, ((2, 2, 3), (3, 2))),
    Case("matmul_batched_vec", lambda x, y: tape.matmul(x, y), np.matmul, ((2, 2, 3), (3,))),
    Case("reshape", lambda x: x.reshape(3, 2), lambda a: a.reshape(3, 2), ((2, 3),)),
    # no view reshapes a transpose: a copy (CloneBackward0), reshaped (UnsafeViewBackward0)
    Case("reshape_copying", lambda x: x.t().reshape(-1), lambda a: a.T.reshape(-1), ((2, 3),)),
    Case("reshape_aliasing", lambda x: x.t().reshape(3, 1, 2), lambda a: a.T.reshape(3, 1, 2), ((2, 3),)),
    Case("view_infer", lambda x: x.view(-1), lambda a: a.reshape(-1), ((2, 3),)),
    Case("flatten", lambda x: x.flatten(1), lambda a: a.reshape(2, 6), ((2, 3, 2),)),
    Case("transpose", lambda x: x.transpose(0, 2), lambda a: a.transpose(2, 1, 0), ((2, 3, 2),)),
    Case("T", lambda x: x.T, lambda a: a.T, ((2, 3),)),
    Case("mT", lambda x: x.mT, lambda a: np.swapaxes(a, -1, -2), ((2, 2, 3),)),
    Case("t", lambda x: x.t(), lambda a: a.T, ((2, 3),)),
    Case("permute", lambda x: x.permute(1, 2, 0), lambda a: a.transpose(1, 2, 0), ((2, 3, 2),)),
    Case("unsqueeze", lambda x: x.unsqueeze(1), lambda a: a[:, None], ((3,),)),
    Case("squeeze", lambda x: x.squeeze(), lambda a: a.squeeze(), ((1, 3, 1),)),
    Case("squeeze_dim", lambda x: x.squeeze(0), lambda a: a.squeeze(0), ((1, 3),)),
    Case("expand", lambda x: x.expand(2, 3), lambda a: np.broadcast_to(a, (2, 3)), ((3,),)),
    Case("expand_new_dims", lambda x: x.expand(2, 3, 2), lambda a: np.broadcast_to(a, (2, 3, 2)),
         ((3, 1),)),
    Case("getitem_int", lambda x: x[1], lambda a: a[1], ((3, 2),)),
    Case("getitem_slice", lambda x: x[1:3], lambda a: a[1:3], ((4, 2),)),
    Case("getitem_step", lambda x: x[::2, 1], lambda a: a[::2, 1], ((4, 2),)),
    Case("getitem_none_ellipsis", lambda x: x[None, ..., 0], lambda a: a[None, ..., 0], ((2, 3),)),
    Case("getitem_int_array", lambda x: x[[0, 2, 0]], lambda a: a[[0, 2, 0]], ((3, 2),)),
    # a product, so the create_graph gradient of the gather (index_put) is recorded
    Case("getitem_int_array_product", lambda x: x[[0, 2, 0]] * x[[1, 1, 2]],
         lambda a: a[[0, 2, 0]] * a[[1, 1, 2]], ((3, 2),)),
    Case("getitem_transposed_strided", lambda x: x.t()[1:, ::2] * x.t()[:2, 1::2],
         lambda a: a.T[1:, ::2] * a.T[:2, 1::2], ((4, 3),)),
    # NumPy answers a bool scalar with a copy, not a view: recorded as an index map
    Case("getitem_numpy_bool", lambda x: x[np.True_] * x, lambda a: a[np.True_] * a, ((3,),)),
    Case("getitem_none", lambda x: x[None], lambda a: a[None], ((3,),)),
    Case("setitem_slice", lambda x, v: _assigned(x, (slice(None), 1), v * v),
         lambda a, b: _assigned_ref(a, (slice(None), 1), b * b), ((3, 2), (3,))),
    Case("setitem_broadcast_row", lambda x, v: _assigned(x, 1, v.sin()) * x,
         lambda a, b: _assigned_ref(a, 1, np.sin(b)) * a, ((2, 3), (1, 3))),
    Case("setitem_number", lambda x: _assigned(x, (0, slice(1, None)), 3.0) * x,
         lambda a: _assigned_ref(a, (0, slice(1, None)), 3.0) * a, ((2, 3),)),
    Case("setitem_int_array", lambda x, v: _assigned(x, [2, 0], v * v),
         lambda a, b: _assigned_ref(a, [2, 0], b * b), ((3,), (2,))),
    # repeated positions: the accumulating put adds both, the plain one's value gradient reads g there twice
    Case("index_put_accumulate", lambda x, v: x.index_put((tape.tensor([2, 0, 2]),), v * v, accumulate=True) * x,
         lambda a, b: _accumulated_ref(a, [2, 0, 2], b * b) * a, ((3, 2), (3, 2))),
    Case("index_put_", lambda x, v: (x * 1.0).index_put_((tape.tensor([1, 0]), tape.tensor([2, 2])), v.sin()) * x,
         lambda a, b: _assigned_ref(a, ([1, 0], [2, 2]), np.sin(b)) * a, ((2, 3), (1,))),
    Case("in_place_on_a_view", lambda x, v: _view_changed(x * 1.0, v), _view_changed_ref, ((2, 3), (2,))),
    Case("scatter", lambda x, v: x.scatter(0, tape.tensor([[2, 0], [1, 2]]), v * v) * x,
         lambda a, b: _scattered_ref(a, [[2, 0], [1, 2]], b * b, False) * a, ((3, 2), (2, 2))),
    Case("scatter_value", lambda x: (x * 1.0).scatter_(1, tape.tensor([[1], [0], [1]]), 0.5) * x,
         lambda a: _scattered_ref(a.T, [[1, 0, 1]], np.full((1, 3), 0.5), False).T * a, ((3, 2),)),
    Case("scatter_add", lambda x, v: tape.scatter_add(x, 0, tape.tensor([[2, 0], [2, 2]]), v * v) * x,
         lambda a, b: _scattered_ref(a, [[2, 0], [2, 2]], b * b, True) * a, ((3, 2), (2, 2))),
    Case("index_add", lambda x, v: x.index_add(0, tape.tensor([2, 0, 2]), v.sin(), alpha=2) * x,
         lambda a, b: _accumulated_ref(a, [2, 0, 2], 2 * np.sin(b)) * a, ((3, 2), (3, 2))),
    Case("cross", lambda x, y: tape.linalg.cross(x, y) * tape.cross(y, x, dim=0).sum(),
         lambda a, b: np.cross(a, b) * np.cross(b, a, axis=0).sum(), ((3, 3), (3, 3))),
    Case("var_mean_std_mean", lambda x: tape.var_mean(x, 1)[0] * tape.std_mean(x, 0, correction=0)[1][:2]
         + tape.var_mean(x)[1], lambda a: a.var(1, ddof=1) * a.mean(0)[:2] + a.mean(), ((2, 3),)),
    Case("aminmax", lambda x: tape.aminmax(x, dim=0).min * x.aminmax().max, lambda a: a.min(0) * a.max(), ((3, 2),)),
    Case("nansum_nanmean", lambda x: tape.nansum(x, 1) * x.nanmean(0)[:2], lambda a: a.sum(1) * a.mean(0)[:2], ((2, 3),)),
    Case("nan_to_num_deg2rad", lambda x: tape.nan_to_num(x.deg2rad()) * x.rad2deg(),
         lambda a: np.deg2rad(a) * np.rad2deg(a), ((3,),)),
    Case("cdist", lambda x, y: tape.cdist(x, y) * tape.cdist(x, y, p=1), lambda a, b: np.sqrt(
         ((a[:, None] - b[None]) ** 2).sum(-1)) * np.abs(a[:, None] - b[None]).sum(-1), ((3, 2), (2, 2))),
    Case("tensordot_kron", lambda x, y: tape.tensordot(x, y, dims=([0], [1])).sum() * tape.kron(x, y[:1]),
         lambda a, b: np.tensordot(a, b, ([0], [1])).sum() * np.kron(a, b[:1]), ((2, 3), (4, 2))),
    Case("meshgrid", lambda x, y: tape.meshgrid(x, y, indexing="xy")[0] * tape.meshgrid(x, y, indexing="ij")[1].T,
         lambda a, b: np.meshgrid(a, b, indexing="xy")[0] * np.meshgrid(a, b, indexing="ij")[1].T, ((3,), (2,))),
    Case("logdet_matrix_power", lambda x: tape.logdet(x @ x.mT + tape.eye(2)) * tape.linalg.matrix_power(x, -2),
         lambda a: np.log(np.linalg.det(a @ a.T + np.eye(2))) * np.linalg.matrix_power(a, -2), ((2, 2),),
         low=(1.0,), high=(2.0,), seed=3),
    # the eigenvectors' signs are arbitrary: their squares, and the eigenvalues (the gradient is symmetric, as
    # PyTorch's, so the matrix is: finite differences of one triangle would see half of it)
    Case("eigh", lambda x: tape.linalg.eigh(x + x.mT).eigenvectors ** 2 * tape.linalg.eigvalsh(x + x.mT, UPLO="U"),
         lambda a: np.linalg.eigh(a + a.T)[1] ** 2 * np.linalg.eigvalsh(a + a.T), ((3, 3),), seed=4),
    Case("multi_dot_vecdot", lambda x, y: tape.linalg.multi_dot([x, y, x.mT]) * tape.linalg.vecdot(x, x)[:, None],
         lambda a, b: a @ b @ a.T * (a * a).sum(-1)[:, None], ((2, 3), (3, 3))),
    Case("trapezoid", lambda y, x: tape.trapezoid(y, x) * tape.trapezoid(y, dx=0.5, dim=0).sum(),
         lambda b, a: np.trapezoid(b, a) * np.trapezoid(b, dx=0.5, axis=0).sum(), ((2, 3), (2, 3))),
    Case("median", lambda x: tape.median(x) * x.median(1).values * tape.nanmedian(x, 0, keepdim=True).values[:, :2],
         lambda a: np.sort(a, None)[2] * np.sort(a, 1)[:, 1] * np.sort(a, 0)[:1, :2], ((2, 3),)),
    Case("quantile", lambda x: tape.quantile(x, 0.3) * x.quantile(tape.tensor([0.25, 0.6]), dim=1).sum()
         * tape.nanquantile(x, 0.5, dim=0, interpolation="midpoint")[:1],
         lambda a: np.quantile(a, 0.3) * np.quantile(a, [0.25, 0.6], axis=1).sum()
         * np.quantile(a, 0.5, axis=0, method="midpoint")[:1], ((2, 3),)),
    Case("tensor_split", lambda x: tape.tensor_split(x, 3, dim=1)[0] * tape.hsplit(x, [1, 3])[1]
         + tape.vsplit(x, 2)[1][:, :2], lambda a: a[:, :2] * a[:, 1:3] + a[1:, :2], ((2, 5),)),
    Case("cummax_cummin", lambda x: tape.cummax(x, 1).values * x.cummin(0).values,
         lambda a: np.maximum.accumulate(a, 1) * np.minimum.accumulate(a, 0), ((3, 4),)),
    Case("diff", lambda x, a: tape.diff(x * x, n=2, dim=0, append=a), lambda b, c: np.diff(b * b, 2, 0, append=c),
         ((3, 2), (1, 2))),
    Case("take_along_dim", lambda x: tape.take_along_dim(x, tape.tensor([[2, 0]]), dim=1) * x[:, :1],
         lambda a: np.take_along_axis(a, np.array([[2, 0]] * 3), 1) * a[:, :1], ((3, 3),)),
    Case("unflatten_fliplr_flipud", lambda x: tape.fliplr(x.unflatten(1, (2, 2))).flipud() * x[0, 0],
         lambda a: a.reshape(3, 2, 2)[::-1, ::-1] * a[0, 0], ((3, 4),)),
    Case("sum_to_size", lambda x: x.sum_to_size(3, 1) * x.sum_to_size(2,), lambda a: a.sum(1, keepdims=True) * a.sum(0),
         ((3, 2),)),
    Case("float_power", lambda x, y: tape.float_power(x, y) * x.float_power(2), lambda a, b: a ** b * a ** 2,
         ((3,), (3,)), low=(0.5, -1.0), high=(2.0, 1.0)),
    # x.t() * 1 keeps the transposed layout, as in PyTorch: the view's region in it is flat positions
    Case("in_place_on_a_view_of_a_transposed_result", lambda x, v: _view_changed(x.t() * 1.0, v),
         lambda a, b: _view_changed_ref(a.T, b), ((3, 2), (2,))),
    Case("getitem_ellipsis", lambda x: x[...] * x, lambda a: a * a, ((3,),)),
    Case("zero_", lambda x: (x * 1.0).zero_() + x, lambda a: a, ((3,),)),
    Case("fill_", lambda x: (x * 1.0).fill_(2.0) * x, lambda a: 2.0 * a, ((3,),)),
    # clamp's bounds drawn away from the inputs: its derivative jumps there
    Case("clamp", lambda x: tape.clamp(x, 0.8, 1.6) * x, lambda a: np.clip(a, 0.8, 1.6) * a, ((5,),)),
    Case("clamp_min", lambda x: x.clamp_min(1.05) * x, lambda a: np.maximum(a, 1.05) * a, ((5,),)),
    Case("clamp_max", lambda x: x.clamp_max(1.05) * x, lambda a: np.minimum(a, 1.05) * a, ((5,),)),
    Case("clamp_", lambda x: (x * 1.0).clamp_(min=1.05) * x, lambda a: np.maximum(a, 1.05) * a, ((5,),)),
    Case("copy_", lambda x, v: (x * 1.0).copy_(v * v) * x, lambda a, b: b * b * a, ((2, 3), (3,))),
    Case("pow_", lambda x: (x * 1.0).pow_(3) * x, lambda a: a ** 4, ((3,),)),
    # in-place ops whose backward reads the old value (PyTorch's original self);
    # exp_ saves its result, so it comes last
    Case("inplace_unary", lambda x: (x * 0.5).cos_().abs_().log_().exp_() * x,
         lambda a: np.exp(np.log(np.abs(np.cos(a * 0.5)))) * a, ((3,),)),
    Case("cat", lambda x, y: tape.cat([x, y, x], dim=1), lambda a, b: np.concatenate([a, b, a], axis=1),
         ((2, 3), (2, 2))),
    Case("cat_one", lambda x: tape.cat([x]), np.copy, ((2, 3),)),
    Case("stack", lambda x, y: tape.stack([x, y], dim=-1), lambda a, b: np.stack([a, b], axis=-1),
         ((2, 3), (2, 3))),
    Case("stack_scalars", lambda x, y: tape.stack([x, y, x * y]), lambda a, b: np.stack([a, b, a * b]),
         ((), ())),
    Case("to_float32_and_back", lambda x: x.float().double() * x,
         lambda a: a.astype(np.float32).astype(np.float64) * a, ((3,),),
         tolerance=dict(eps=1e-3, atol=1e-3, rtol=1e-3)),
    Case("sort", lambda x: x.sort(1).values * tape.sort(x, 0, descending=True)[0],
         lambda a: np.sort(a, 1) * -np.sort(-a, 0), ((3, 4),)),
    Case("msort", lambda x: tape.msort(x), lambda a: np.sort(a, 0), ((3, 2),)),
    Case("topk", lambda x: x.topk(2).values * tape.topk(x, 3, dim=0, largest=False).values[:, :2],
         lambda a: -np.sort(-a, 1)[:, :2] * np.sort(a, 0)[:, :2], ((3, 4),)),
    Case("masked_fill", lambda x: x.masked_fill(tape.tensor([True, False, True]), 0.5) * x,
         lambda a: np.where([True, False, True], 0.5, a) * a, ((2, 3),)),
    # the mask broadcasts the input up, and the value is a 0-d tensor (MaskedFillBackward1)
    Case("masked_fill_tensor_value", lambda x, v: tape.masked_fill(x, tape.tensor([[True], [False]]), v * v) * x,
         lambda a, b: np.where([[True], [False]], b * b, a) * a, ((3,), ())),
    Case("masked_fill_", lambda x, v: (x * 1.0).masked_fill_(tape.tensor([False, True]), v) * x,
         lambda a, b: np.where([False, True], b, a) * a, ((3, 2), ())),
    Case("masked_select", lambda x: tape.masked_select(x, tape.tensor([[True], [False], [True]])) * x[0, 0],
         lambda a: a[[0, 2]].reshape(-1) * a[0, 0], ((3, 2),)),
    Case("repeat", lambda x: x.repeat(2, 1, 2), lambda a: np.tile(a, (2, 1, 2)), ((2, 3),)),
    Case("tile", lambda x: tape.tile(x, (2,)) * x.tile(1, 2), lambda a: np.tile(a, 2) * np.tile(a, (1, 2)), ((2, 3),)),
    Case("roll", lambda x: tape.roll(x, (1, -1), (0, 1)) * x.roll(2), lambda a: np.roll(a, (1, -1), (0, 1)) * np.roll(a, 2),
         ((2, 3),)),
    Case("narrow_select", lambda x: x.narrow(1, 1, 2) * tape.select(x, 1, -3)[:, None],
         lambda a: a[:, 1:3] * a[:, 0][:, None], ((2, 3),)),
    Case("movedim", lambda x: tape.movedim(x, (0, 1), (2, 0)) * x.moveaxis(0, -1),
         lambda a: np.moveaxis(a, (0, 1), (2, 0)) * np.moveaxis(a, 0, -1), ((2, 2, 2),)),
    Case("swapaxes", lambda x: tape.swapaxes(x, 0, 2) + x.swapdims(2, 0), lambda a: 2 * np.swapaxes(a, 0, 2),
         ((2, 3, 2),)),
    Case("hstack", lambda x, y: tape.hstack([x, y, x]), lambda a, b: np.hstack([a, b, a]), ((2, 3), (2, 1))),
    Case("vstack", lambda x, y: tape.vstack([x, y]), lambda a, b: np.vstack([a, b]), ((2, 3), (3,))),
    Case("ravel", lambda x: x.t().ravel(), lambda a: a.T.ravel(), ((2, 3),)),
    Case("diag_embed", lambda x: tape.diag(x, 1) * tape.diag(x * x, 1), lambda a: np.diag(a, 1) * np.diag(a * a, 1),
         ((3,),)),
    Case("diag_of_matrix", lambda x: tape.diag(x, -1) * x.diag()[:2], lambda a: np.diag(a, -1) * np.diag(a)[:2],
         ((3, 4),)),
    Case("trace", lambda x: tape.trace(x) * x, lambda a: np.trace(a) * a, ((3, 4),)),
    Case("cumprod", lambda x: x.cumprod(1), lambda a: np.cumprod(a, 1), ((2, 4),)),
    Case("cumprod_dim0", lambda x: tape.cumprod(x, 0), lambda a: np.cumprod(a, 0), ((3, 2, 2),)),
    Case("xlogy_numbers", lambda x: tape.xlogy(x, 2.5) * tape.xlogy(1.5, x), lambda a: a * np.log(2.5) * 1.5 * np.log(a),
         ((3,),), low=(0.3,)),
    # bounds that leave one value, so the fill is the same at every call
    Case("uniform_normal_", lambda x: (x * 1.0).uniform_(2.0, 2.0) * x + (x * 1.0).normal_(1.5, 0.0) * x,
         lambda a: 2.0 * a + 1.5 * a, ((3,),)),
    Case("getitem_scalar", lambda x: x[1, 0] * x[0, 1], lambda a: a[1, 0] * a[0, 1], ((2, 2),)),
    Case("chain", lambda x, y: ((x * y).sin() + x.exp()).tanh().sum(dim=0),
         lambda a, b: np.tanh(np.sin(a * b) + np.exp(a)).sum(axis=0), ((2, 3), (3,))),
    Case("custom_function", lambda x, y, z: _ProductSin.apply(x, y, z),
         lambda a, b, c: np.sin(a * b) * c, ((2, 3), (3,), (2, 1))),
]


def _ids(cases):
    return [c.name for c in cases]


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_forward_matches_numpy(case):
    xs = case.inputs()
    out = case.fn(*xs)
    np.testing.assert_allclose(out.detach().numpy(), case.ref(*(x.detach().numpy() for x in xs)),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_gradcheck(case):
    assert tape.autograd.gradcheck(case.fn, case.inputs(), **case.tolerance)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_gradgradcheck(case):
    assert tape.autograd.gradgradcheck(case.fn, case.inputs(), **case.tolerance)


def _projected_grads(case, xs):
    out = case.fn(*xs)
    w = tape.tensor(np.random.default_rng(7).standard_normal(out.shape))
    return [g.numpy() for g in tape.autograd.grad((out * w).sum(), xs)]


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_native_sweep_matches_retaped(case):
    xs = case.inputs()
    native = _projected_grads(case, xs)
    with force_retaped():
        retaped = _projected_grads(case, xs)
    # through float32 rows the re-taped gradients round to float32 (PyTorch's
    # engine casts a gradient to its input's dtype); the native adjoints stay float64
    rtol = case.tolerance.get("rtol", 1e-12)
    for n, r in zip(native, retaped):
        np.testing.assert_allclose(n, r, rtol=rtol, atol=1e-14)


def _ops_in_graph(outputs):
    from tape._registry import REGISTRY
    seen = set()
    stack = [t.grad_fn for t in outputs]
    while stack:
        node = stack.pop()
        if node is None or type(node).__name__ == "AccumulateGrad":
            continue
        seen.add(REGISTRY[node._ep.tape.op[node.row()]].name)
        stack.extend(fn for fn, _ in node.next_functions)
    return seen


def test_every_op_is_covered():
    """A new op must join the table above: its graphs, and the graphs of its
    create_graph gradients, must together use every registered op (but one
    that is not differentiable, whose own test checks that backward refuses
    it, and the python-only ops of custom Functions, which the custom_function
    case runs and tests/test_function.py covers)."""
    from tape._registry import opdefs
    seen = set()
    for case in CASES:
        xs = case.inputs()
        out = case.fn(*xs)
        grads = tape.autograd.grad(out.sum(), xs, create_graph=True)
        seen |= _ops_in_graph([out, *grads])
    # python-only ops: a custom Function's case is in the table, and
    # tests/test_function.py checks that an apply records all of them
    untested = {d.name for d in opdefs() if d.arity > 0 and d.not_differentiable is None
                and not d.python_only} - seen
    assert not untested, f"ops without a test case: {sorted(untested)}"


def test_third_derivative_of_integer_power_is_finite_at_zero():
    x = tape.tensor(0.0, requires_grad=True)
    y = x ** 3
    (g1,) = tape.autograd.grad(y, x, create_graph=True)
    (g2,) = tape.autograd.grad(g1, x, create_graph=True)
    (g3,) = tape.autograd.grad(g2, x, create_graph=True)
    (g4,) = tape.autograd.grad(g3, x, allow_unused=True, materialize_grads=True)
    assert [g1.item(), g2.item(), g3.item(), g4.item()] == [0.0, 0.0, 6.0, 0.0]


def test_gradients_of_a_power_are_zero_where_pytorch_masks_them():
    # as PyTorch: for the exponent, 0 where base == 0 and exponent >= 0 (not
    # 0 * log(0)); for the base, 0 where the exponent is 0 (not 0 * 0 ** -1)
    x = tape.tensor([0.0, 0.0, 2.0, 0.0], requires_grad=True)
    y = tape.tensor([2.0, 0.0, 1.5, -1.0], requires_grad=True)
    gx, gy = tape.autograd.grad((x ** y).sum(), [x, y])
    np.testing.assert_allclose(gx.numpy(), [0.0, 0.0, 1.5 * 2.0 ** 0.5, -np.inf])
    np.testing.assert_allclose(gy.numpy(), [0.0, 0.0, 2.0 ** 1.5 * np.log(2.0), -np.inf])
    e = tape.tensor([0.0, 1.0], requires_grad=True)
    (ge,) = tape.autograd.grad((0.0 ** e).sum(), e)
    assert ge.tolist() == [0.0, 0.0]
    with force_retaped():
        retaped = tape.autograd.grad((x ** y).sum(), [x, y])
    for native, r in zip((gx, gy), retaped):
        np.testing.assert_allclose(r.numpy(), native.numpy())


def test_relu_and_abs_have_zero_derivative_at_zero():
    x = tape.tensor([0.0, 0.0], requires_grad=True)
    (x.relu().sum() + x.abs().sum()).backward()
    assert x.grad.tolist() == [0.0, 0.0]


def test_float32_grads_stay_float32():
    x = tape.tensor([0.5, 1.5], dtype=tape.float32, requires_grad=True)
    (x.sin() * x).sum().backward()
    expected = np.cos([0.5, 1.5]) * [0.5, 1.5] + np.sin([0.5, 1.5])
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6)


def test_sweep_module_is_up_to_date():
    """tape/_sweep.py is generated from the registry: `python -m tape._gen`."""
    from tape import _gen, _sweep
    assert _sweep.REGISTRY_DIGEST == _gen.digest(), "tape/_sweep.py is stale: run `python -m tape._gen`"


def test_create_graph_gradients_through_piecewise_linear_ops_require_grad():
    # PyTorch's gradients of relu, abs and remainder record their masks, so a
    # second derivative is zeros rather than "does not require grad"
    x = tape.tensor([-1.0, 0.5, 2.0], requires_grad=True)
    y = tape.tensor([1.5, 0.7, 0.9], requires_grad=True)
    for out, wrt in ((x.relu(), x), (x.abs(), x), (x % y, y)):
        (g,) = tape.autograd.grad(out.sum(), wrt, create_graph=True)
        assert g.requires_grad
        (h,) = tape.autograd.grad((g * g).sum(), wrt)
        assert h.tolist() == [0.0, 0.0, 0.0]


def test_division_by_a_constant_zero_under_create_graph_gives_inf():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    for out in (x / 0, x / tape.tensor(0.0)):
        (g,) = tape.autograd.grad(out.sum(), x, create_graph=True)
        assert g.tolist() == [np.inf, np.inf]


def test_clamp_of_a_0d_tensor_takes_max_when_bounds_cross():
    # min(max(x, lo), hi), as PyTorch, for scalars as for arrays
    assert tape.clamp(tape.tensor(0.0), 1.0, -1.0).item() == -1.0
    assert tape.clamp(tape.tensor([0.0]), 1.0, -1.0).tolist() == [-1.0]
    assert np.isnan(tape.clamp(tape.tensor(np.nan), 1.0, 2.0).item())


def test_add_and_sub_scale_a_number_by_alpha():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    assert tape.add(x, 2, alpha=3).tolist() == [7.0, 8.0]
    assert x.sub(2, alpha=3).tolist() == [-5.0, -4.0]
    assert tape.add(input=x, other=x, alpha=2).tolist() == [3.0, 6.0]
    y = x * 1.0
    y.add_(2.0, alpha=3)
    assert y.tolist() == [7.0, 8.0]
    with pytest.raises(RuntimeError, match="argument alpha must not be a floating point number"):
        tape.add(tape.tensor([1, 2]), tape.tensor([1, 2]), alpha=2.5)


def test_add_and_sub_with_alpha_are_one_node_saving_alpha_as_pytorch():
    # PyTorch 2.13: AddBackward0 / SubBackward0 straight to the leaves, _saved_alpha the alpha
    x, y = tape.tensor([1.0, 2.0], requires_grad=True), tape.tensor([3.0, 4.0], requires_grad=True)
    for out, name, alpha in ((tape.add(x, y, alpha=2), "AddBackward0", 2.0), (x.sub(y, alpha=-0.5), "SubBackward0", -0.5),
                             (tape.add(x, 2, alpha=3), "AddBackward0", 3.0), (x + y, "AddBackward0", 1)):
        node = out.grad_fn
        assert (node.name(), node._saved_alpha) == (name, alpha)
        assert [f and f.name() for f, _ in node.next_functions][0] == "torch::autograd::AccumulateGrad"
    assert [f.name() for f, _ in tape.add(x, y, alpha=2).grad_fn.next_functions] == ["torch::autograd::AccumulateGrad"] * 2
    gx, gy = tape.autograd.grad(tape.sub(x, y, alpha=3).sum(), (x, y))
    assert (gx.tolist(), gy.tolist()) == ([1.0, 1.0], [-3.0, -3.0])


def test_sum_and_mean_over_no_dims_reduce_everything():
    x = tape.ones(2, 3, requires_grad=True)
    assert x.sum(dim=()).item() == 6.0
    assert x.sum(dim=[]).grad_fn.name() == "SumBackward1"
    x.mean(dim=()).backward()
    assert np.allclose(x.grad.numpy(), 1 / 6)


@pytest.mark.parametrize("dim", [0, -1, [0], (0,)])
def test_sum_and_mean_of_a_0d_tensor_take_dim_0_and_minus_1(dim):
    x = tape.tensor(2.0, requires_grad=True)
    assert x.sum(dim).item() == 2.0
    assert x.mean(dim, keepdim=True).shape == ()
    x.sum(dim).backward()
    assert x.grad.item() == 1.0
    with pytest.raises(IndexError, match=r"range of \[-1, 0\], but got 1"):
        x.sum(1)


def test_sum_and_mean_take_numpys_axis_and_keepdims():
    x = tape.ones(2, 3)
    assert x.sum(axis=1, keepdims=True).shape == (2, 1)
    assert x.mean(axis=0).tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        x.sum((0, -2))


def test_mean_of_nothing_is_nan_without_warnings():
    x = tape.zeros(2, 0, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(tape.zeros(0).mean().item())
        m = x.mean(1)
        assert np.isnan(m.numpy(force=True)).all() and m.shape == (2,)
        assert tape.zeros(0, dtype=tape.float32).mean().dtype == tape.float32
    m.sum().backward()
    assert x.grad.shape == (2, 0)


@pytest.mark.parametrize("retaped", [False, True])
def test_relu_and_abs_gradients_at_nan_are_pytorchs(retaped):
    # relu keeps the gradient where its output is not <= 0; abs's is sgn, 0 at nan
    x = tape.tensor([float("nan"), 0.0, -1.0, 2.0], requires_grad=True)
    s = tape.tensor(float("nan"), requires_grad=True)
    with force_retaped() if retaped else contextlib.nullcontext():
        (relu,) = tape.autograd.grad(x.relu().sum(), x)
        (abs_,) = tape.autograd.grad(x.abs().sum(), x)
        (relu_0d, abs_0d) = tape.autograd.grad(s.relu() + s.abs(), s), tape.autograd.grad(s.abs(), s)
    assert relu.tolist() == [1.0, 0.0, 0.0, 1.0]
    assert abs_.tolist() == [0.0, 0.0, -1.0, 1.0]
    assert relu_0d[0].item() == 1.0 and abs_0d[0].item() == 0.0


def test_maximum_and_minimum_split_a_tie_as_pytorch():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = tape.tensor([1.0, 5.0, 0.0], requires_grad=True)
    (tape.maximum(x, y) + 10 * tape.minimum(x, y)).sum().backward()
    assert x.grad.tolist() == [5.5, 10.0, 1.0] and y.grad.tolist() == [5.5, 1.0, 10.0]
    assert np.isnan(tape.maximum(tape.tensor(1.0), tape.tensor(np.nan)).item())


@pytest.mark.parametrize("retaped", [False, True])
def test_maximum_and_minimum_give_both_inputs_the_gradient_at_nan_and_halves_at_inf_ties(retaped):
    # PyTorch's figures for the same script
    x = tape.tensor([1.0, np.nan, np.inf, -np.inf], requires_grad=True)
    y = tape.tensor([np.nan, 1.0, np.inf, -np.inf], requires_grad=True)
    with force_retaped() if retaped else contextlib.nullcontext():
        (tape.maximum(x, y) + 10 * tape.minimum(x, y)).sum().backward()
    assert x.grad.tolist() == [11.0, 11.0, 5.5, 5.5] and y.grad.tolist() == [11.0, 11.0, 5.5, 5.5]


@pytest.mark.parametrize("retaped", [False, True])
def test_atan2_gradient_is_zero_at_the_origin_as_pytorchs(retaped):
    x = tape.tensor([0.0, 1e-200, 3.0], requires_grad=True)
    y = tape.tensor([0.0, 1e-200, 4.0], requires_grad=True)
    with force_retaped() if retaped else contextlib.nullcontext():
        tape.atan2(x, y).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 4 / 25] and y.grad.tolist() == [0.0, 0.0, -3 / 25]


# PyTorch's figures (torch.erf and torch.nn.functional's silu, gelu and softplus)
# at x = -800, -3, 0.4, 2.5, 25: values, then first derivatives
ACTIVATIONS = [
    ("erf", lambda x: tape.erf(x), [-1.0, -0.9999779095030014, 0.42839235504666845, 0.999593047982555, 1.0],
     [0.0, 0.00013925305194674786, 0.9615412988393078, 0.00217828423035271, 4.1534010636398965e-272]),
    ("silu", lambda x: tape.silu(x), [-0.0, -0.14227761953270035, 0.2394750640449808, 2.3103545499468914,
                                      24.9999999996528],
     [-0.0, -0.08810410601516962, 0.6947919584090636, 1.0994011113415267, 1.000000000333312]),
    ("gelu", lambda x: tape.gelu(x), [-0.0, -0.00404969409489031, 0.2621686966441297, 2.4844758366855597, 25.0],
     [0.0, -0.01194564720418392, 0.8027297977316535, 1.037611085908145, 1.0]),
    ("gelu_tanh", lambda x: tape.gelu(x, approximate="tanh"),
     [-0.0, -0.0036373920817729943, 0.2621611694273562, 2.484915733910001, 25.0],
     [0.0, -0.011584166630969648, 0.8026588344205614, 1.037951576212666, 1.0]),
    ("softplus", lambda x: tape.softplus(x), [0.0, 0.04858735157374206, 0.9130152523999526, 2.5788897342925496, 25.0],
     [0.0, 0.04742587317756679, 0.598687660112452, 0.9241418199787564, 1.0]),
]


@pytest.mark.parametrize("retaped", [False, True])
@pytest.mark.parametrize("name, fn, values, grads", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activations_match_pytorchs_figures(name, fn, values, grads, retaped):
    x = tape.tensor([-800.0, -3.0, 0.4, 2.5, 25.0], requires_grad=True)
    y = fn(x)
    with force_retaped() if retaped else contextlib.nullcontext():
        y.sum().backward()
    np.testing.assert_allclose(y.tolist(), values, rtol=1e-12, atol=0)
    np.testing.assert_allclose(x.grad.tolist(), grads, rtol=1e-12, atol=0)
    assert type(y.grad_fn).__name__ == {"gelu_tanh": "GeluBackward0"}.get(name, name.capitalize() + "Backward0")


nan, inf = math.nan, math.inf
PROD_AT_ZEROS = [
    # PyTorch's figures: (x, dim, keepdim, prod, its gradient with weights
    # 1..n, the second and third derivatives of the sum of the one before)
    ([2.0, 0.0, 4.0], None, False, 0.0, [0.0, 8.0, 0.0], [4.0, 6.0, 2.0], [2.0, 2.0, 2.0]),
    ([0.0, 3.0, 0.0], None, False, 0.0, [0.0, 0.0, 0.0], [3.0, 0.0, 3.0], [2.0, 2.0, 2.0]),
    ([0.0, 0.0, 0.0], None, False, 0.0, [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [2.0, 2.0, 2.0]),
    ([[1.0, 0.0, 3.0], [0.0, 5.0, 0.0], [2.0, 4.0, 0.5]], 1, False, [0.0, 0.0, 4.0],
     [[0.0, 3.0, 0.0], [0.0, 0.0, 0.0], [6.0, 3.0, 24.0]], [[3.0, 4.0, 1.0], [10.0, 0.0, 10.0], [13.5, 7.5, 18.0]],
     [[2.0, 2.0, 2.0], [4.0, 4.0, 4.0], [6.0, 6.0, 6.0]]),
    ([[1.0, 0.0, 3.0], [0.0, 5.0, 0.0], [2.0, 4.0, 0.5]], 0, True, [[0.0, 0.0, 0.0]],
     [[0.0, 40.0, 0.0], [2.0, 0.0, 4.5], [0.0, 0.0, 0.0]], [[2.0, 18.0, 1.5], [3.0, 8.0, 10.5], [1.0, 10.0, 9.0]],
     [[2.0, 4.0, 6.0], [2.0, 4.0, 6.0], [2.0, 4.0, 6.0]]),
    ([[[1.5, 0.0], [2.0, -1.0]], [[0.5, 3.0], [0.0, 0.0]]], 1, True, [[[3.0, 0.0]], [[0.0, 0.0]]],
     [[[2.0, -2.0], [1.5, 0.0]], [[0.0, 0.0], [1.5, 12.0]]], [[[1.0, 2.0], [1.0, 2.0]], [[3.0, 4.0], [3.0, 4.0]]],
     [[[0.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]]),
    ([[[1.5, 0.0], [2.0, -1.0]], [[0.5, 3.0], [0.0, 0.0]]], None, False, 0.0, [[[0.0] * 2] * 2] * 2,
     [[[0.0] * 2] * 2] * 2, [[[0.0, -9.0], [0.0, 0.0]], [[0.0, 0.0], [-9.0, -9.0]]]),
    # nan and inf, with PyTorch's branches: g * out / x where x has no zero
    # (inf / inf is nan), else the product of the others (0 * inf is nan)
    ([2.0, nan, 4.0], None, False, nan, [nan, nan, nan], None, None),
    ([2.0, inf, 4.0], None, False, inf, [inf, nan, inf], None, None),
    ([0.0, inf, 4.0], None, False, nan, [inf, 0.0, nan], None, None),
    ([[2.0, inf, 3.0], [0.0, 1.0, 1.0]], 1, False, [inf, 0.0], [[inf, 6.0, inf], [2.0, 0.0, 0.0]], None, None),
    ([[inf], [2.0]], 1, False, [inf, 2.0], [[nan], [2.0]], None, None),
    ([[inf], [0.0]], 1, False, [inf, 0.0], [[1.0], [2.0]], None, None),
    ([[2.0, inf, 0.0], [nan, 0.0, 1.0], [2.0, 4.0, 0.5]], 1, False, [nan, nan, 4.0],
     [[nan, 0.0, inf], [0.0, nan, nan], [6.0, 3.0, 24.0]], [[inf, 2.0, inf], [2.0, nan, nan], [13.5, 7.5, 18.0]],
     None),
]


@pytest.mark.parametrize("retaped", [False, True])
@pytest.mark.parametrize("values, dim, keepdim, value, grad, second, third", PROD_AT_ZEROS)
def test_prod_gradients_are_pytorchs_at_zeros_nan_and_inf_to_third_order(values, dim, keepdim, value, grad, second,
                                                                          third, retaped):
    x = tape.tensor(values, requires_grad=True)
    y = x.prod() if dim is None else x.prod(dim, keepdim)
    w = tape.arange(1.0, y.numel() + 1).reshape(y.shape)
    higher = [d for d in (second, third) if d is not None]
    with force_retaped() if retaped else contextlib.nullcontext():
        derivatives = list(tape.autograd.grad(y, x, w, create_graph=bool(higher)))
        for k in range(len(higher)):
            derivatives += tape.autograd.grad(derivatives[-1].sum(), x, create_graph=k + 1 < len(higher))
    np.testing.assert_allclose(y.detach().numpy(), value, rtol=1e-15)
    assert len(derivatives) == 1 + len(higher)
    for got, expected in zip(derivatives, [grad] + higher):
        np.testing.assert_allclose(got.detach().numpy(), expected, rtol=1e-15)


def test_prod_is_one_node_as_pytorchs():
    x = tape.tensor([[2.0, 3.0], [4.0, 5.0]], requires_grad=True)
    s = tape.tensor(0.5, requires_grad=True)
    outputs = {"ProdBackward0": [x.prod(), tape.prod(x), (x * 2).prod(), x.prod(dtype=tape.float32), s.prod()],
               "ProdBackward1": [x.prod(1), tape.prod(x, 0, keepdim=True), (x * 2).prod(-1), s.prod(0),
                                 tape.ones(2, 0, requires_grad=True).prod(1)]}
    assert {name: [type(t.grad_fn).__name__ for t in ts] for name, ts in outputs.items()} == {
        name: [name] * len(ts) for name, ts in outputs.items()}
    assert [[type(f).__name__ for f, _ in t.grad_fn.next_functions] for t in outputs["ProdBackward0"]] == [
        ["AccumulateGrad"], ["AccumulateGrad"], ["MulBackward0"], ["AccumulateGrad"], ["AccumulateGrad"]]
    assert x.prod(1).grad_fn.next_functions[0] == (x.prod().grad_fn.next_functions[0][0], 0)


def test_prod_of_one_element_passes_the_gradient_through_as_pytorchs():
    # a 0-d x: g, not g * x / x (nan at inf); prod(dtype=float32) gives x a float64 gradient
    s = tape.tensor(inf, requires_grad=True)
    for y in (s.prod(), s.prod(0), s.prod(-1, keepdim=True)):
        (g,) = tape.autograd.grad(y, s, create_graph=True)
        assert y.shape == () and g.item() == 1.0 and g.grad_fn is None
    x = tape.tensor([2.0, 3.0], requires_grad=True)
    y = x.prod(dtype=tape.float32)
    y.backward()
    assert y.dtype == tape.float32 and x.grad.dtype == tape.float64 and x.grad.tolist() == [3.0, 2.0]
    e = tape.ones(2, 0, requires_grad=True)
    e.prod(1).sum().backward()
    assert e.grad.shape == (2, 0)


def test_prod_dtypes_and_the_empty_product_as_pytorchs():
    assert tape.tensor([1, 2, 3], dtype=tape.uint8).prod().dtype == tape.int64
    assert tape.tensor([True, True]).prod().tolist() == 1
    assert tape.ones(2, 0).prod(1).tolist() == [1.0, 1.0]
    assert tape.prod(tape.ones(2, 3), 1, dtype=tape.float32).dtype == tape.float32
    # an integer dtype asked for is kept, and wraps as PyTorch's
    u = tape.tensor([200, 2], dtype=tape.uint8)
    assert u.prod(dtype=tape.uint8).dtype == tape.uint8 and u.prod(0, dtype=tape.uint8).item() == 144
    assert tape.tensor([True, False]).prod(dtype=tape.bool).tolist() is False


EINSUMS = [("ij,jk->ik", [(3, 4), (4, 5)]), ("i,j->ij", [(3,), (4,)]), ("ij->ji", [(3, 4)]), ("ii->i", [(3, 3)]),
           ("ii->", [(3, 3)]), ("ij->j", [(3, 4)]), ("ij,kj", [(3, 4), (5, 4)]), ("...ij->...ji", [(2, 3, 4)]),
           ("...ij,...jk->...ik", [(1, 3, 4), (2, 4, 5)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
           ("iij->j", [(3, 3, 4)]), ("ijk,ik->j", [(2, 3, 4), (2, 4)]), ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
           ("...i,...i", [(2, 3), (3,)]), ("ab,cd->abcd", [(2, 3), (4, 5)]), ("ii,i->i", [(3, 3), (3,)])]


@pytest.mark.parametrize("equation, shapes", EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum_matches_numpy_and_its_gradient_is_the_product_rule(equation, shapes):
    rng = np.random.default_rng(0)
    arrays = [rng.uniform(-1, 1, s) for s in shapes]
    xs = [tape.tensor(a, requires_grad=True) for a in arrays]

    out = tape.einsum(equation, *xs)
    out.sum().backward()

    expected = np.einsum(equation, *arrays)
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-12, atol=1e-12)
    # d sum(out) / d x_0 by finite differences of NumPy's einsum (linear in x_0)
    basis = np.zeros_like(arrays[0])
    grad = np.zeros_like(arrays[0])
    for index in np.ndindex(basis.shape):
        basis[index] = 1.0
        grad[index] = np.einsum(equation, basis, *arrays[1:]).sum()
        basis[index] = 0.0
    np.testing.assert_allclose(xs[0].grad.numpy(), grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("equation, shapes, message", [
    ("ij,jk->ik", [(3, 4), (5, 6)], "subscript j has size 5 for operand 1 which does not broadcast with "
                                    "previously seen size 4"),
    ("ij,jk->ik", [(3, 4)], "fewer operands were provided than specified in the equation"),
    ("ij->ik", [(3, 4)], "output subscript k does not appear in the equation for any input operand"),
    ("ijk->ij", [(3, 4)], r"the number of subscripts in the equation \(3\) does not match the number of dimensions"),
])
def test_einsum_errors_as_pytorchs(equation, shapes, message):
    with pytest.raises(RuntimeError, match=message):
        tape.einsum(equation, *[tape.ones(*s) for s in shapes])


def test_where_is_one_node_with_pytorchs_name_and_broadcast_gradients():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = tape.tensor([[10.0], [20.0]], requires_grad=True)

    out = tape.where(tape.tensor([True, False, True]), x, y)
    (out * tape.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).sum().backward()

    # PyTorch's figures for the same script
    assert type(out.grad_fn).__name__ == "WhereBackward0"
    assert [type(f).__name__ for f, _ in out.grad_fn.next_functions] == ["AccumulateGrad", "AccumulateGrad"]
    assert x.grad.tolist() == [5.0, 0.0, 9.0] and y.grad.tolist() == [[2.0], [5.0]]


def test_softmax_logsumexp_var_std_triu_and_tril_are_one_op_each():
    # one row each, named as PyTorch names them, straight after the leaf
    x = tape.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    outputs = {"SoftmaxBackward0": x.softmax(1), "LogSoftmaxBackward0": tape.log_softmax(x, 0),
               "LogsumexpBackward0": x.logsumexp(1), "VarBackward0": x.var(),
               "StdBackward0": x.std(1), "TriuBackward0": x.triu(), "TrilBackward0": tape.tril(x, 1)}
    for name, out in outputs.items():
        assert type(out.grad_fn).__name__ == name
        assert [type(f).__name__ for f, _ in out.grad_fn.next_functions] == ["AccumulateGrad"]


def test_var_gradient_divides_by_negative_degrees_of_freedom_as_pytorchs():
    # one element, correction 2: the value is 0 / 0, the gradient 2 / -1 times x - mean = 0
    x = tape.tensor([[1.0], [2.0]], requires_grad=True)
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        v = tape.var(x, 1, correction=2)
    v.sum().backward()
    assert np.isnan(v.detach().numpy()).all()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0], [0.0]])


def test_clamp_with_tensor_bounds_as_pytorchs():
    x = tape.tensor([0.0, 1.0, 2.0, 3.0], requires_grad=True)
    lo = tape.tensor([1.0, 1.0, 0.0, 0.0], requires_grad=True)
    hi = tape.tensor([2.0, 2.0, 2.0, 2.0], requires_grad=True)
    y = tape.clamp(x, lo, hi)
    assert y.tolist() == [1.0, 1.0, 2.0, 2.0] and type(y.grad_fn).__name__ == "ClampBackward0"
    # ties go to x, as PyTorch's mask lo <= x <= hi
    (y * tape.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert (x.grad.tolist(), lo.grad.tolist(), hi.grad.tolist()) == (
        [0.0, 2.0, 3.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 4.0])
    assert [type(f(x, lo).grad_fn).__name__ for f in (tape.clamp_min, tape.clamp_max)] == [
        "ClampMinBackward1", "ClampMaxBackward1"]
    with pytest.raises(TypeError, match="clamp\\(\\) received an invalid combination of arguments"):
        tape.clamp(x, lo, 1.5)


def test_parts_of_split_chunk_and_unbind_carry_pytorchs_grad_fn_names():
    x = tape.ones(4, 3, requires_grad=True)

    parts = [x.split(2)[0], x.split([1, 3])[1], x.chunk(2, 1)[1], x.unbind(1)[2]]

    assert [type(p.grad_fn).__name__ for p in parts] == [
        "SplitBackward0", "SplitWithSizesBackward0", "SplitBackward0", "UnbindBackward0"]


def test_gelu_refuses_an_unknown_approximation():
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        tape.gelu(tape.ones(2), approximate="fast")


def test_amax_shares_a_tie_and_max_dim_picks_the_first():
    x = tape.tensor([[1.0, 3.0, 3.0], [2.0, -1.0, 2.0]], requires_grad=True)
    x.amax(1).sum().backward()
    assert x.grad.tolist() == [[0.0, 0.5, 0.5], [0.5, 0.0, 0.5]]
    x.grad = None
    values, indices = x.max(1)
    values.sum().backward()
    assert indices.tolist() == [1, 0] and x.grad.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]


def test_softmax_and_logsumexp_do_not_overflow():
    x = tape.tensor([800.0, 0.0], requires_grad=True)
    assert tape.logsumexp(x, 0).item() == 800.0
    p = x.softmax(0)
    assert p.tolist() == [1.0, 0.0]
    (p[0] * 2).backward()
    assert np.isfinite(x.grad.numpy()).all()


def test_where_picks_elementwise_and_passes_gradients_where_picked():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    out = tape.where(x > 1.5, x * x, 0.0)
    out.sum().backward()
    assert out.tolist() == [0.0, 4.0, 9.0] and x.grad.tolist() == [0.0, 4.0, 6.0]
    assert [i.tolist() for i in tape.where(tape.tensor([[True, False], [False, True]]))] == [[0, 1], [0, 1]]


def test_the_gradient_of_a_zero_2_norm_is_zero():
    # PyTorch masks x / |x| where the norm is 0
    x = tape.tensor([[3.0, 4.0], [0.0, 0.0]], requires_grad=True)
    x.norm(dim=1).sum().backward()
    assert x.grad.tolist() == [[0.6, 0.8], [0.0, 0.0]]


def test_std_of_a_constant_has_zero_gradient():
    # through the 2-norm, masked at 0 as PyTorch's std backward
    x = tape.tensor([2.0, 2.0, 2.0], requires_grad=True)
    x.std().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_math_on_bools_and_small_integers_gives_the_default_dtype():
    # NumPy would give float16 (exp of bool or uint8) or float32 (of int16)
    assert tape.tensor([True, False]).exp().dtype == tape.float64
    assert tape.tensor([1, 2], dtype=tape.uint8).sqrt().dtype == tape.float64
    assert tape.tensor([1, 2], dtype=tape.int16).sin().dtype == tape.float64
    assert tape.tensor([1.0], dtype=tape.float32).exp().dtype == tape.float32


def test_in_place_forms_of_the_unary_ops():
    x = tape.tensor([0.5, 2.0], requires_grad=True)
    y = x * 1
    y.tan_()
    assert y.grad_fn.name() == "TanBackward0"
    y.sum().backward()
    assert np.allclose(x.grad.numpy(), 1 / np.cos([0.5, 2.0]) ** 2)
    z = tape.tensor([1.4, -2.6])
    z.round_()
    z.sign_()
    assert z.tolist() == [1.0, -1.0]


def test_sign_of_nan_is_zero_as_pytorchs():
    assert tape.sign(tape.tensor([np.nan, 2.0])).tolist() == [0.0, 1.0]
    assert tape.tensor(np.nan).sign().item() == 0.0


def test_cat_skips_empty_1d_tensors_as_pytorch():
    # the accumulate-from-tensor([]) idiom
    x = tape.ones(2, 3, requires_grad=True)
    assert tape.cat([x, tape.tensor([])]).shape == (2, 3)
    acc = tape.tensor([])
    for i in range(3):
        acc = tape.cat([acc, x[0, i:i + 1] * i])
    acc.sum().backward()
    assert acc.tolist() == [0.0, 1.0, 2.0] and x.grad.tolist() == [[0.0, 1.0, 2.0], [0.0, 0.0, 0.0]]


@pytest.mark.parametrize("create_graph", [False, True])
def test_an_empty_1d_tensor_cat_skips_is_still_an_input_of_its_node(create_graph):
    # PyTorch 2.13: CatBackward0's next_functions name every tensor, the skipped
    # ones too (no view of them), and each gets a gradient of its own shape
    a, b = tape.zeros(0, requires_grad=True), tape.zeros(0, requires_grad=True)
    c = tape.ones(2, 3, requires_grad=True)
    leaf = "torch::autograd::AccumulateGrad"
    for out, inputs, names in ((tape.cat([a, b]), (a, b), [leaf] * 2), (tape.cat([a, c]), (a, c), [leaf] * 2),
                               (tape.cat([c, a, c], dim=1), (a, c), [leaf] * 3)):
        assert [f.name() for f, _ in out.grad_fn.next_functions] == names
        grads = tape.autograd.grad((out * out).sum() + out.sum(), inputs, create_graph=create_graph)
        assert [g.shape for g in grads] == [t.shape for t in inputs]
    (ga, gc) = tape.autograd.grad((tape.cat([c, a, c], dim=1) * 2).sum(), (a, c))
    assert ga.shape == (0,) and gc.tolist() == [[4.0] * 3] * 2
