"""tape.func.vmap against the loop it stands for (issue 19): for every public
op of tape and tape.linalg, and the Tensor methods that are ops (in-place
forms too), `vmap(f, in_dims)(*X)` equals `tape.stack([f(*sample) for
sample in samples])` in values, dtype and the gradient of its sum with
respect to the batched inputs; nested vmap too. The ops PyTorch cannot
batch raise torch.func.vmap's error texts (PyTorch 2.13, written here as
literals)."""
import collections

import numpy as np
import pytest

import tape
from tape import func

B = 3  # the batch size of every case
_rng = np.random.default_rng(19)


def real(*shape):
    return _rng.normal(size=shape)


def positive(*shape):
    return _rng.uniform(0.5, 2.0, size=shape)


def unit(*shape):
    return _rng.uniform(-0.9, 0.9, size=shape)


def above_one(*shape):
    return _rng.uniform(1.2, 3.0, size=shape)


def ints(high, *shape):
    return _rng.integers(0, high, size=shape)


def bools(*shape):
    return _rng.integers(0, 2, size=shape).astype(bool)


def spd(*shape):
    """Symmetric positive definite matrices of shape (..., n, n)."""
    a = _rng.normal(size=shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def with_ties(*shape):
    """Values drawn from few levels, so that sorts and arg-reductions meet ties."""
    return _rng.integers(0, 3, size=shape).astype(np.float64)


# closed-over operands that every sample shares
W4 = tape.tensor(real(4))
M44 = tape.tensor(real(4, 4))
IDX = tape.tensor([[2, 0, 1, 1], [3, 3, 0, 2]])
IDX_SELECT = tape.tensor([3, 0, 0])
# repeated positions: an accumulating put adds their values up
IDX_PUT = tape.tensor([2, 0, 2])
MASK = tape.tensor(bools(2, 4))


Case = collections.namedtuple("Case", "id op f args in_dims")


def case(id, op, f, *args, in_dims=0):
    return Case(id, op, f, tuple(args), in_dims)


# -- elementwise ops, generated: (name, the domain of their input)
UNARY = {
    "abs": real, "absolute": real, "neg": real, "negative": real, "clone": real, "cos": real, "sin": real,
    "tan": unit, "exp": real, "exp2": real, "expm1": real, "log": positive, "log2": positive, "log10": positive,
    "log1p": positive, "sqrt": positive, "rsqrt": positive, "reciprocal": positive, "square": real,
    "relu": real, "sigmoid": real, "tanh": real, "sign": real, "floor": real, "ceil": real, "trunc": real,
    "round": real, "asin": unit, "acos": unit, "atan": real, "arcsin": unit, "arccos": unit, "arctan": real,
    "sinh": real, "cosh": real, "asinh": real, "acosh": above_one, "atanh": unit, "erf": real, "silu": real,
    "gelu": real, "softplus": real, "fix": real, "positive": real, "deg2rad": real, "rad2deg": real, "nan_to_num": real,
}
BINARY = {
    "add": real, "sub": real, "subtract": real, "mul": real, "multiply": real, "div": positive,
    "divide": positive, "true_divide": positive, "pow": positive, "remainder": positive,
    "floor_divide": positive, "maximum": real, "minimum": real, "atan2": real, "arctan2": real,
    "eq": with_ties, "ne": with_ties, "lt": with_ties, "le": with_ties, "gt": with_ties, "ge": with_ties,
    "xlogy": positive, "hypot": real, "logaddexp": real,
}
INTEGER_BINARY = ("bitwise_and", "bitwise_or", "bitwise_xor")
LOGICAL_BINARY = ("logical_and", "logical_or", "logical_xor")


def _elementwise_cases():
    out = []
    for name, domain in UNARY.items():
        out.append(case(name if name not in ("floor", "round") else f"{name}-function", name,
                        lambda x, n=name: getattr(tape, n)(x), domain(B, 2, 3)))
        out.append(case(f"{name}-method", name, lambda x, n=name: getattr(x, n)(), domain(2, B), in_dims=1))
        if hasattr(tape.Tensor, name + "_") and name != "clone":
            out.append(case(f"{name}_", name + "_", lambda x, n=name: getattr(x.clone(), n + "_")(), domain(B, 4)))
    out.append(case("sin-0d-sample", "sin", tape.sin, real(B)))
    for name, domain in BINARY.items():
        fn = getattr(tape, name)
        if name not in ("xlogy", "hypot", "logaddexp"):
            out.append(case(name, name, fn, domain(B, 2, 4), domain(B, 4)))
            out.append(case(f"{name}-plain", name, fn, domain(B, 4), domain(4), in_dims=(0, None)))
            out.append(case(f"{name}-plain-first", name, fn, domain(2, 4), domain(4, B), in_dims=(None, 1)))
            out.append(case(f"{name}-number", name, lambda x, n=name: getattr(tape, n)(x, 1.5), domain(B, 3)))
        if hasattr(tape.Tensor, name + "_"):
            out.append(case(f"{name}_-batched-other", name + "_", lambda x, y, n=name: getattr(x.clone(), n + "_")(y),
                            domain(B, 2, 4), domain(B, 4)))
    out += [
        case("add-alpha-kw", "add", lambda x, y: tape.add(x, y, alpha=2.0), real(B, 3), real(B, 3)),
        case("float_power", "float_power", lambda x, y: tape.float_power(x.float(), y), positive(B, 4), real(B, 4)),
        case("float_power-number", "float_power", lambda x: x.float_power(2), real(B, 4)),
        case("add-0d-samples", "add", tape.add, real(B), real(B)),
        case("xlogy", "xlogy", tape.xlogy, positive(B, 4), positive(B, 4)),
        case("xlogy-plain", "xlogy", lambda x, y: x.xlogy(y), positive(B, 4), positive(4), in_dims=(0, None)),
        case("hypot", "hypot", lambda x, y: tape.hypot(input=x, other=y), real(B, 4), real(4, B), in_dims=(0, 1)),
        case("logaddexp", "logaddexp", tape.logaddexp, real(B, 4), real(B, 4)),
        case("logaddexp-in1", "logaddexp", lambda x: x.logaddexp(W4), real(4, B), in_dims=1),
        case("lerp", "lerp", lambda x, y: tape.lerp(x, y, 0.25), real(B, 4), real(B, 4)),
        case("lerp-method", "lerp", lambda x: x.lerp(W4, weight=0.75), real(B, 4)),
        case("clamp", "clamp", lambda x: tape.clamp(x, min=-0.5, max=0.5), real(B, 5)),
        case("clamp-tensor-bounds", "clamp", lambda x, lo: tape.clamp(x, lo, lo + 1.0), real(B, 5), real(B, 5)),
        case("clamp_min", "clamp_min", lambda x: tape.clamp_min(x, 0.1), real(B, 5)),
        case("clamp_max", "clamp_max", lambda x, y: tape.clamp_max(x, y), real(B, 5), real(5), in_dims=(0, None)),
        case("clip", "clip", lambda x: tape.clip(x, -0.2, 0.3), real(B, 5)),
        case("to", "to", lambda x: tape.to(x, tape.float32), real(B, 3)),
        case("to-method", "to", lambda x: x.to(tape.float32) * 2, real(B, 3)),
        case("where", "where", lambda c, x: tape.where(c, x, -x), bools(B, 4), real(B, 4)),
        case("where-plain-condition", "where", lambda x: tape.where(MASK[0], x, 0.0), real(B, 4)),
    ]
    for name in INTEGER_BINARY:
        out.append(case(name, name, getattr(tape, name), ints(8, B, 4), ints(8, B, 4)))
    out.append(case("bitwise_not", "bitwise_not", tape.bitwise_not, ints(8, B, 4)))
    for name in LOGICAL_BINARY:
        out.append(case(name, name, getattr(tape, name), bools(B, 4), bools(4), in_dims=(0, None)))
    out.append(case("logical_not", "logical_not", tape.logical_not, real(B, 4)))
    return out


def _reduction_cases():
    return [
        case("sum", "sum", tape.sum, real(B, 2, 3)),
        case("sum-0d-sample", "sum", lambda x: tape.sum(x, dim=0), real(B)),
        case("sum-dim-kw", "sum", lambda x: tape.sum(x, dim=-1, keepdim=True), real(B, 2, 3)),
        case("mean-dims", "mean", lambda x: tape.mean(x, (0, 1)), real(2, B, 3), in_dims=1),
        case("prod", "prod", lambda x: tape.prod(x, 1), real(B, 2, 3)),
        case("amax", "amax", lambda x: tape.amax(x, dim=0), real(B, 2, 3)),
        case("amin", "amin", lambda x: tape.amin(x, -1, True), real(B, 2, 3)),
        case("max-dim", "max", lambda x: tuple(tape.max(x, dim=1)), real(B, 2, 3)),
        case("max-all", "max", tape.max, real(B, 2, 3)),
        case("max-other", "max", lambda x, y: tape.max(x, other=y), real(B, 3), real(B, 3)),
        case("min-dim-keepdim", "min", lambda x: tuple(tape.min(x, 0, keepdim=True)), real(B, 2, 3)),
        case("logsumexp", "logsumexp", lambda x: tape.logsumexp(x, -1), real(B, 2, 3)),
        case("softmax", "softmax", lambda x: tape.softmax(x, dim=-1), real(B, 2, 3)),
        case("log_softmax", "log_softmax", lambda x: tape.log_softmax(x, 0), real(2, 3, B), in_dims=2),
        case("var", "var", lambda x: tape.var(x, dim=1, correction=0), real(B, 2, 3)),
        case("std", "std", lambda x: tape.std(x, 0, keepdim=True), real(B, 4, 2)),
        case("norm", "norm", lambda x: tape.norm(x, p=3, dim=-1), real(B, 2, 3)),
        case("norm-fro", "norm", tape.norm, real(B, 2, 3)),
        case("cumsum", "cumsum", lambda x: tape.cumsum(x, dim=-1), real(B, 2, 3)),
        case("cumprod", "cumprod", lambda x: tape.cumprod(x, 1), real(B, 2, 3)),
        case("cumprod-0d", "cumprod", lambda x: tape.cumprod(x, 0), real(B)),
        case("all", "all", lambda x: tape.all(x, dim=-1), bools(B, 2, 3)),
        case("any", "any", tape.any, bools(B, 2, 3)),
        case("count_nonzero", "count_nonzero", tape.count_nonzero, ints(2, B, 2, 3)),
        case("count_nonzero-dim", "count_nonzero", lambda x: tape.count_nonzero(x, dim=0), ints(2, B, 2, 3)),
        case("argmax-dim", "argmax", lambda x: tape.argmax(x, dim=-1), with_ties(B, 2, 5)),
        case("argmax-all", "argmax", tape.argmax, with_ties(B, 2, 5)),
        case("argmin-dim-keepdim", "argmin", lambda x: x.argmin(0, keepdim=True), with_ties(5, B), in_dims=1),
    ]


def _sorting_cases():
    return [
        case("sort-dim-neg1", "sort", lambda x: tuple(tape.sort(x, dim=-1)), with_ties(B, 2, 5)),
        case("sort-dim0-in1", "sort", lambda x: tape.sort(x, 0, descending=True).values, real(4, B, 2), in_dims=1),
        case("sort-stable-kw", "sort", lambda x: tape.sort(x, stable=True).indices, with_ties(B, 6)),
        case("argsort-desc", "argsort", lambda x: tape.argsort(x, descending=True), with_ties(B, 6)),
        case("msort", "msort", tape.msort, real(B, 4, 2)),
        case("topk", "topk", lambda x: tuple(tape.topk(x, 2)), real(B, 2, 5)),
        case("topk-smallest-kw", "topk", lambda x: tape.topk(x, k=3, dim=0, largest=False).values, real(B, 5, 2)),
    ]


def _shape_cases():
    return [
        case("reshape", "reshape", lambda x: tape.reshape(x, (3, -1)), real(B, 2, 3)),
        case("view", "view", lambda x: tape.view(x, 6), real(B, 2, 3)),
        case("flatten", "flatten", lambda x: tape.flatten(x, start_dim=1), real(B, 2, 3, 2)),
        case("ravel", "ravel", tape.ravel, real(2, 3, B), in_dims=-1),
        case("squeeze", "squeeze", lambda x: tape.squeeze(x, 1), real(B, 2, 1, 3)),
        case("unsqueeze", "unsqueeze", lambda x: tape.unsqueeze(x, -1), real(B, 2, 3)),
        case("unsqueeze-0d", "unsqueeze", lambda x: tape.unsqueeze(x, 0), real(B)),
        case("transpose", "transpose", lambda x: tape.transpose(x, 0, -1), real(B, 2, 3)),
        case("t", "t", tape.t, real(B, 2, 3)),
        case("permute", "permute", lambda x: tape.permute(x, (2, 0, 1)), real(B, 2, 3, 4)),
        case("expand", "expand", lambda x: tape.expand(x, 2, 3, 4), real(B, 1, 4)),
        case("broadcast_to", "broadcast_to", lambda x: tape.broadcast_to(x, (2, 4)), real(B, 4)),
        case("movedim", "movedim", lambda x: tape.movedim(x, 0, -1), real(B, 2, 3, 4)),
        case("moveaxis", "moveaxis", lambda x: tape.moveaxis(x, (0, 1), (1, 0)), real(B, 2, 3)),
        case("swapaxes", "swapaxes", lambda x: tape.swapaxes(x, 0, 1), real(B, 2, 3)),
        case("swapdims", "swapdims", lambda x: tape.swapdims(x, -1, -2), real(B, 2, 3)),
        case("flip", "flip", lambda x: tape.flip(x, (0, -1)), real(B, 2, 3)),
        case("fliplr", "fliplr", tape.fliplr, real(B, 2, 3)),
        case("flipud-method", "flipud", lambda x: x.flipud(), real(B, 2, 3)),
        case("take_along_dim", "take_along_dim", lambda x: tape.take_along_dim(x, IDX[:, :3], dim=-1), real(B, 2, 4)),
        case("take_along_dim-flat", "take_along_dim", lambda x: x.take_along_dim(IDX_SELECT), real(B, 2, 4)),
        case("unflatten", "unflatten", lambda x: tape.unflatten(x, -1, (2, -1)), real(B, 3, 4)),
        case("sum_to_size", "sum_to_size", lambda x: x.sum_to_size(1, 4), real(B, 3, 4)),
        case("diff", "diff", lambda x: tape.diff(x, n=2, dim=0), real(B, 4, 3)),
        case("nan_to_num-values", "nan_to_num", lambda x: (x / (x > 0)).nan_to_num(0.5, 2.0), real(B, 5)),
        case("nansum", "nansum", lambda x: tape.nansum(x.log(), 1), real(B, 2, 5)),
        case("nanmean-method", "nanmean", lambda x: x.log().nanmean(), real(B, 5)),
        case("aminmax", "aminmax", lambda x: tape.aminmax(x, dim=-1).max, real(B, 3, 4)),
        case("var_mean", "var_mean", lambda x: tape.var_mean(x, 0)[0], real(B, 3, 4)),
        case("std_mean", "std_mean", lambda x: tape.std_mean(x, dim=1, correction=0)[1], real(B, 3, 4)),
        case("cross", "cross", lambda x, y: tape.cross(x, y, dim=0), real(B, 3, 2), real(B, 3, 2)),
        case("linalg.cross", "linalg.cross", tape.linalg.cross, real(B, 2, 3), real(B, 1, 3)),
        case("cdist", "cdist", lambda x, y: tape.cdist(x, y), real(B, 3, 2), real(B, 4, 2)),
        case("cdist-plain-second", "cdist", lambda x: tape.cdist(x, M44[:3, :2], p=1), real(B, 3, 2)),
        case("tensordot", "tensordot", lambda x, y: tape.tensordot(x, y, dims=([0], [1])), real(B, 3, 2),
             real(B, 4, 3)),
        case("meshgrid", "meshgrid", lambda x, y: tape.meshgrid(x, y, indexing="xy")[1], real(B, 3), real(B, 2)),
        case("kron", "kron", tape.kron, real(B, 2, 2), real(B, 1, 3)),
        case("logdet", "logdet", lambda x: tape.logdet(x @ x.mT + tape.eye(3)), real(B, 3, 3)),
        case("trapezoid", "trapezoid", lambda y, x: tape.trapezoid(y, x), real(B, 2, 4), real(B, 2, 4)),
        case("trapezoid-dx", "trapezoid", lambda y: tape.trapezoid(y, dx=0.5, dim=0), real(B, 4, 2)),
        case("linalg.vecdot", "linalg.vecdot", lambda x, y: tape.linalg.vecdot(x, y, dim=0), real(B, 3, 2),
             real(B, 3, 2)),
        case("linalg.multi_dot", "linalg.multi_dot", lambda x, y: tape.linalg.multi_dot([x, y, x.mT]), real(B, 2, 3),
             real(B, 3, 3)),
        case("linalg.eigh", "linalg.eigh", lambda x: tape.linalg.eigh(x + x.mT).eigenvalues, real(B, 3, 3)),
        case("linalg.eigh-vectors", "linalg.eigh", lambda x: tape.linalg.eigh(x, UPLO="U")[1] ** 2, real(B, 3, 3)),
        case("linalg.eigvalsh", "linalg.eigvalsh", tape.linalg.eigvalsh, real(B, 2, 2)),
        case("linalg.matrix_power", "linalg.matrix_power", lambda x: tape.linalg.matrix_power(x, -3), real(B, 3, 3)),
        case("searchsorted", "searchsorted", lambda v: tape.searchsorted(tape.tensor([-0.5, 0.0, 0.5]), v),
             real(B, 4)),
        case("searchsorted-batched-sequence", "searchsorted", lambda s, v: tape.searchsorted(s.sort().values, v),
             real(B, 5), real(B, 3)),
        case("cummax", "cummax", lambda x: tape.cummax(x, -1).values, real(B, 2, 5)),
        case("cummin-indices", "cummin", lambda x: x.cummin(0).indices, real(B, 4, 2)),
        case("median", "median", tape.median, real(B, 2, 5)),
        case("median-dim", "median", lambda x: x.median(-1, keepdim=True).values, real(B, 3, 4)),
        case("nanmedian-dim", "nanmedian", lambda x: tape.nanmedian(x.log(), 0).indices, real(B, 5, 2)),
        case("quantile", "quantile", lambda x: tape.quantile(x, 0.3), real(B, 2, 5)),
        case("quantile-dim-q-tensor", "quantile", lambda x: x.quantile(tape.tensor([0.2, 0.9]), dim=0), real(B, 4, 3)),
        case("nanquantile", "nanquantile", lambda x: tape.nanquantile(x.log(), 0.5, dim=-1, keepdim=True,
                                                                     interpolation="nearest"), real(B, 2, 5)),
        case("tensor_split", "tensor_split", lambda x: tape.tensor_split(x, 3, dim=-1)[1], real(B, 2, 7)),
        case("tensor_split-indices", "tensor_split", lambda x: x.tensor_split([1, 3])[2], real(B, 5, 2)),
        case("hsplit", "hsplit", lambda x: tape.hsplit(x, 2)[0], real(B, 3, 4)),
        case("vsplit", "vsplit", lambda x: tape.vsplit(x, [1])[1], real(B, 3, 4)),
        case("dsplit", "dsplit", lambda x: tape.dsplit(x, 2)[1], real(B, 2, 3, 4)),
        case("histc", "histc", lambda x: tape.histc(x, bins=4), real(B, 2, 5)),
        case("histc-range", "histc", lambda x: x.histc(3, -0.5, 0.5), real(B, 6)),
        case("bucketize", "bucketize", lambda v: tape.bucketize(v, tape.tensor([-0.5, 0.0, 0.5]), right=True),
             real(B, 2, 4)),
        case("diff-batched-append", "diff", lambda x, a: x.diff(append=a), real(B, 2, 3), real(B, 2, 1)),
        case("cat", "cat", lambda x, y: tape.cat([x, y, W4[None]], dim=0), real(B, 2, 4), real(B, 1, 4)),
        case("stack", "stack", lambda x, y: tape.stack((x, y), dim=-1), real(B, 4), real(4), in_dims=(0, None)),
        case("hstack", "hstack", lambda x, y: tape.hstack([x, y]), real(B, 2, 3), real(B, 2, 1)),
        case("vstack", "vstack", lambda x: tape.vstack([x, W4]), real(B, 4)),
        case("split", "split", lambda x: tape.split(x, 2), real(B, 5, 2)),
        case("split-sections-dim", "split", lambda x: tape.split(x, [1, 3], dim=-1), real(B, 2, 4)),
        case("chunk", "chunk", lambda x: tape.chunk(x, 2, dim=1), real(B, 2, 4)),
        case("unbind", "unbind", lambda x: tape.unbind(x, dim=-1), real(B, 2, 3)),
        case("index_select", "index_select", lambda x: tape.index_select(x, 1, IDX_SELECT), real(B, 2, 4)),
        case("gather", "gather", lambda x: tape.gather(x, 1, IDX), real(B, 2, 4)),
        case("gather-kw", "gather", lambda x: tape.gather(input=x, dim=-1, index=IDX), real(2, 4, B), in_dims=-1),
        case("gather-batched-index", "gather", lambda x, i: tape.gather(x, dim=1, index=i), real(B, 2, 4),
             ints(4, B, 2, 3)),
        case("diagonal", "diagonal", lambda x: tape.diagonal(x, offset=1), real(B, 3, 4)),
        case("triu", "triu", lambda x: tape.triu(x, 1), real(B, 3, 4)),
        case("tril", "tril", lambda x: tape.tril(x, diagonal=-1), real(B, 3, 4)),
        case("repeat", "repeat", lambda x: tape.repeat(x, 2, 1, 3), real(B, 2, 3)),
        case("repeat-method", "repeat", lambda x: x.repeat((2, 2)), real(B, 3)),
        case("tile", "tile", lambda x: tape.tile(x, (2,)), real(B, 2, 3)),
        case("roll", "roll", lambda x: tape.roll(x, 1), real(B, 2, 3)),
        case("roll-two-dims", "roll", lambda x: tape.roll(x, shifts=(1, -1), dims=(0, -1)), real(B, 2, 3)),
        case("narrow", "narrow", lambda x: tape.narrow(x, -1, 1, 2), real(B, 2, 4)),
        case("narrow-method", "narrow", lambda x: x.narrow(dim=0, start=1, length=1), real(2, B, 4), in_dims=1),
        case("select", "select", lambda x: tape.select(x, 1, -1), real(B, 2, 4)),
        case("select-0d-sample", "select", lambda x: tape.select(x, 0, 2), real(B, 4)),
        case("diag-vector", "diag", tape.diag, real(B, 4)),
        case("diag-matrix", "diag", tape.diag, real(B, 4, 4)),
        case("diag-offset", "diag", lambda x: tape.diag(x, diagonal=-1), real(B, 3)),
        case("trace", "trace", tape.trace, real(B, 3, 4)),
        case("masked_fill", "masked_fill", lambda x: tape.masked_fill(x, MASK, 0.5), real(B, 2, 4)),
        case("masked_fill-batched-mask", "masked_fill", lambda x, m: tape.masked_fill(x, m, -1.0), real(B, 2, 4),
             bools(B, 2, 4)),
        case("masked_fill-method", "masked_fill", lambda x, v: x.masked_fill(MASK, v), real(B, 2, 4), real(B)),
        case("masked_fill_", "masked_fill_", lambda x: tape.masked_fill_(x.clone(), MASK, 2.0), real(B, 2, 4)),
        case("masked_fill_-method", "masked_fill_", lambda x, m: x.clone().masked_fill_(m, 0.0), real(B, 2, 4),
             bools(B, 2, 4)),
        case("indexing", "__getitem__", lambda x: x[1:, IDX_SELECT], real(B, 2, 4)),
        case("index_put-batched-values", "index_put", lambda v: tape.index_put(W4, (IDX_PUT,), v, accumulate=True),
             real(B, 3)),
        case("index_put-method", "index_put", lambda x, v: x.index_put((IDX_PUT, IDX_PUT), v), real(B, 3, 4),
             real(B, 3)),
        case("index_put_", "index_put_", lambda x: tape.index_put_(x.clone(), (IDX_PUT,), W4, True), real(B, 3, 4)),
        case("index_put-batched-indices", "index_put",
             lambda i, v: M44.index_put((i, IDX_PUT[:2]), v, accumulate=True), np.array([[0, 0], [3, 1], [2, 2]]),
             real(3, 2)),
        case("scatter", "scatter", lambda x, v: tape.scatter(x, 1, IDX[:, :3], v), real(B, 2, 4), real(B, 2, 3)),
        case("scatter-value", "scatter", lambda x: x.scatter(0, tape.tensor([[1, 0, 1, 1]]), 0.5), real(B, 2, 4)),
        case("scatter_", "scatter_", lambda x, i: x.clone().scatter_(-1, i, W4[:2].expand(2, 2)), real(B, 2, 4),
             np.array([[[0, 3], [1, 1]], [[2, 0], [3, 3]], [[1, 2], [0, 0]]])),
        case("scatter_add", "scatter_add", lambda x, v: tape.scatter_add(x, 1, IDX, v), real(B, 2, 4), real(B, 2, 4)),
        case("scatter_add_", "scatter_add_", lambda x: x.clone().scatter_add_(0, IDX, M44[:2]), real(B, 4, 4)),
        case("index_add", "index_add", lambda x, v: tape.index_add(x, 0, IDX_PUT, v, alpha=2), real(B, 3, 2),
             real(B, 3, 2)),
        case("index_add-plain-input", "index_add", lambda v: M44.index_add(1, IDX_PUT, v), real(B, 4, 3)),
        case("index_add_", "index_add_", lambda x: x.clone().index_add_(-1, IDX_PUT[:2], W4[:2].expand(3, 2)),
             real(B, 3, 4)),
        case("index_put_-method", "index_put_", lambda x, v: x.clone().index_put_((IDX_PUT,), v), real(B, 3, 4),
             real(B, 3, 4)),
    ]


def _product_cases():
    return [
        case("matmul", "matmul", tape.matmul, real(B, 2, 3), real(B, 3, 4)),
        case("matmul-plain", "matmul", lambda x: tape.matmul(input=x, other=M44), real(B, 2, 4)),
        case("mm", "mm", tape.mm, real(B, 2, 3), real(3, 4), in_dims=(0, None)),
        case("mv", "mv", lambda x: tape.mv(M44, x), real(4, B), in_dims=1),
        case("dot", "dot", tape.dot, real(B, 4), real(B, 4)),
        case("bmm", "bmm", tape.bmm, real(B, 2, 2, 3), real(B, 2, 3, 2)),
        case("outer", "outer", tape.outer, real(B, 3), real(4), in_dims=(0, None)),
        case("ger", "ger", tape.ger, real(B, 3), real(B, 4)),
        case("einsum", "einsum", lambda a, b: tape.einsum("ij,jk->ik", a, b), real(B, 4, 4), real(B, 4, 4)),
        case("einsum-ellipsis", "einsum", lambda a: tape.einsum("...i,i->...", a, W4), real(B, 2, 4)),
        # the products added to a tensor: composites of the ops above
        case("addmm", "addmm", lambda i, a, b: tape.addmm(i, a, b, beta=0.5, alpha=2.0), real(B, 3), real(B, 2, 4),
             real(4, 3), in_dims=(0, 0, None)),
        case("addmm-plain-input-beta-0", "addmm", lambda a: M44.addmm(a, a, beta=0), real(B, 4, 4)),
        case("addmv", "addmv", lambda i, m, v: tape.addmv(i, m, v, alpha=-1), real(B, 2), real(B, 2, 3), real(3),
             in_dims=(0, 0, None)),
        case("addmv-in1", "addmv", lambda v: tape.addmv(W4, M44, v, beta=2), real(4, B), in_dims=1),
        case("baddbmm", "baddbmm", lambda i, a, b: tape.baddbmm(i, a, b, alpha=0.5), real(B, 3, 1), real(B, 2, 3, 4),
             real(B, 2, 4, 5)),
        case("baddbmm-method", "baddbmm", lambda a: tape.ones(1).baddbmm(a, a.mT), real(B, 2, 3, 4)),
        case("addbmm", "addbmm", lambda i, a, b: tape.addbmm(i, a, b, beta=-1), real(B, 5), real(B, 2, 3, 4),
             real(2, 4, 5), in_dims=(0, 0, None)),
        case("addcmul", "addcmul", lambda i, a, b: tape.addcmul(i, a, b, value=0.5), real(B, 2, 4), real(B, 4),
             real(4), in_dims=(0, 0, None)),
        case("addcmul-plain-self", "addcmul", lambda a: W4.addcmul(a, a), real(B, 4)),
        case("addcdiv", "addcdiv", tape.addcdiv, real(B, 4), real(B, 4), positive(B, 4)),
        case("addcdiv-plain-self", "addcdiv", lambda b: W4.addcdiv(W4, b, value=2), positive(B, 4)),
        case("lerp-tensor-weight", "lerp", tape.lerp, real(B, 4), real(B, 4), unit(B, 4)),
    ]


def _inplace_cases():
    return [
        case("add_", "add_", lambda x, y: x.clone().add_(y), real(B, 4), real(B, 4)),
        case("add_-alpha", "add_", lambda x: x.clone().add_(W4, alpha=-2.0), real(B, 4)),
        case("sub_", "sub_", lambda x, y: x.clone().sub_(y), real(B, 2, 4), real(4), in_dims=(0, None)),
        case("mul_", "mul_", lambda x, y: x.clone().mul_(y), real(B, 4), real(4, B), in_dims=(0, 1)),
        case("div_", "div_", lambda x: x.clone().div_(2.0), real(B, 4)),
        case("pow_", "pow_", lambda x: x.clone().pow_(2), positive(B, 4)),
        case("remainder_", "remainder_", lambda x: x.clone().remainder_(0.7), positive(B, 4)),
        case("clamp_", "clamp_", lambda x: x.clone().clamp_(min=-0.3, max=0.4), real(B, 4)),
        case("clip_", "clip_", lambda x: x.clone().clip_(-0.3, 0.4), real(B, 4)),
        case("fill_", "fill_", lambda x: x.clone().fill_(5.0), real(B, 4)),
        case("fill_-batched-value", "fill_", lambda x, v: x.clone().fill_(v), real(B, 4), real(B)),
        case("zero_", "zero_", lambda x: x.clone().zero_() + x, real(B, 4)),
        case("copy_", "copy_", lambda x, y: x.clone().copy_(y), real(B, 4), real(B, 4)),
        case("iadd", "__iadd__", lambda x, y: x.clone().__iadd__(y), real(B, 4), real(B, 4)),
        case("setitem", "__setitem__", lambda x, y: _assigned(x.clone(), y), real(B, 4), real(B)),
        case("tape.add_", "add_", lambda x, y: tape.add_(x.clone(), y, alpha=3.0), real(B, 4), real(B, 4)),
        case("addmm_", "addmm_", lambda x, a: x.clone().addmm_(a, tape.ones(3, 4), alpha=2), real(B, 2, 4),
             real(B, 2, 3)),
        case("addmm_-plain-others", "addmm_", lambda x: x.clone().addmm_(M44, M44, beta=0.5), real(B, 4, 4)),
        case("addmv_", "addmv_", lambda x, m: x.clone().addmv_(m, W4), real(B, 2), real(B, 2, 4)),
        case("tape.addmv_", "addmv_", lambda x: tape.addmv_(x.clone(), M44, W4), real(B, 4)),
        case("addbmm_", "addbmm_", lambda x, a: x.clone().addbmm_(a, a.mT), real(B, 3, 3), real(B, 2, 3, 4)),
        case("baddbmm_", "baddbmm_", lambda x, a: x.clone().baddbmm_(a, a.mT, beta=2), real(B, 2, 3, 3),
             real(B, 2, 3, 4)),
        case("addcmul_", "addcmul_", lambda x, y: x.clone().addcmul_(y, W4, value=-1), real(B, 4), real(B, 4)),
        case("addcdiv_", "addcdiv_", lambda x, y: x.clone().addcdiv_(W4, y), real(B, 4), positive(B, 4)),
        case("lerp_", "lerp_", lambda x, y, w: x.clone().lerp_(y, w), real(B, 4), real(B, 4), unit(B, 4)),
        case("lerp_-number", "lerp_", lambda x: x.clone().lerp_(W4, 0.3), real(B, 4)),
        case("tape.sub_", "sub_", lambda x, y: tape.sub_(x.clone(), y), real(B, 4), real(B, 4)),
        case("tape.mul_", "mul_", lambda x: tape.mul_(x.clone(), 3.0), real(B, 4)),
        case("tape.div_", "div_", lambda x, y: tape.div_(x.clone(), y), real(B, 4), positive(B, 4)),
        case("tape.fill_", "fill_", lambda x: tape.fill_(x.clone(), -1.0), real(B, 4)),
        case("tape.zero_", "zero_", lambda x: tape.zero_(x.clone()), real(B, 4)),
        case("new_zeros", "new_zeros", lambda x: x.new_zeros(2, 5), real(B, 4)),
        case("new_ones", "new_ones", lambda x: x.new_ones((2, 5)) * x.sum(), real(B, 4)),
        case("new_full", "new_full", lambda x: x.new_full((2, 5), 7.0), real(B, 4)),
        case("new_empty", "new_empty", lambda x: x.new_empty(2, 5).fill_(1.5), real(B, 4)),
    ]


def _assigned(x, value):
    x[1] = value
    return x


def _linalg_cases():
    L = tape.linalg
    return [
        case("linalg.det", "linalg.det", L.det, real(B, 3, 3)),
        case("linalg.det-in1", "linalg.det", lambda a: L.det(A=a), real(3, B, 3), in_dims=1),
        case("linalg.inv", "linalg.inv", L.inv, spd(B, 3, 3)),
        case("linalg.slogdet", "linalg.slogdet", lambda a: tuple(L.slogdet(a)), real(B, 3, 3)),
        case("linalg.cholesky", "linalg.cholesky", L.cholesky, spd(B, 3, 3)),
        case("linalg.solve", "linalg.solve", L.solve, spd(B, 3, 3), real(B, 3)),
        case("linalg.solve-plain-A", "linalg.solve", lambda b: L.solve(M44 @ M44.T + 4 * tape.eye(4), b),
             real(B, 4, 2)),
        case("linalg.norm", "linalg.norm", L.norm, real(B, 2, 3)),
        case("linalg.vector_norm", "linalg.vector_norm", lambda x: L.vector_norm(x, ord=3), real(B, 4)),
        case("linalg.vector_norm-dim", "linalg.vector_norm", lambda x: L.vector_norm(x, dim=-1, keepdim=True),
             real(B, 2, 4)),
        case("linalg.matrix_norm", "linalg.matrix_norm", L.matrix_norm, real(B, 3, 4)),
        case("linalg.matrix_norm-ord1", "linalg.matrix_norm", lambda x: L.matrix_norm(x, ord=1), real(B, 3, 4)),
        case("det-method", "det", lambda a: a.det(), real(B, 3, 3)),
        case("inverse-method", "inverse", lambda a: a.inverse(), spd(B, 3, 3)),
    ]


def _predicate_cases():
    return [
        case("isnan", "isnan", tape.isnan, np.where(bools(B, 4), np.nan, real(B, 4))),
        case("isinf", "isinf", lambda x: x.isinf(), np.where(bools(B, 4), -np.inf, real(B, 4))),
        case("isfinite", "isfinite", tape.isfinite, np.where(bools(B, 4), np.inf, real(B, 4))),
        case("isclose", "isclose", lambda x, y: tape.isclose(x, y, atol=0.5), real(B, 4), real(B, 4)),
        case("isclose-plain", "isclose", lambda x: x.isclose(W4, rtol=1.0), real(B, 4)),
        case("is_floating_point", "is_floating_point", lambda x: x * (2.0 if tape.is_floating_point(x) else 3.0),
             real(B, 2)),
        case("is_tensor", "is_tensor", lambda x: x * float(tape.is_tensor(x)), real(B, 2)),
        case("numel", "numel", lambda x: x * tape.numel(x), real(B, 2, 3)),
        case("type_as", "type_as", lambda x, y: x.type_as(y), real(B, 2), ints(5, B, 2)),
    ]


CASES = (_elementwise_cases() + _reduction_cases() + _sorting_cases() + _shape_cases() + _product_cases()
         + _inplace_cases() + _linalg_cases() + _predicate_cases())


def _params(cases):
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    return [pytest.param(c, id=c.id) for c in cases]


# -- the comparison

def _tensors(out):
    """The tensors of f's output, in order (a tuple's, a namedtuple's, nested)."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(o)]
    assert isinstance(out, tape.Tensor), f"f returned {type(out).__name__}"
    return [out]


def _in_dims(in_dims, n):
    return in_dims if isinstance(in_dims, tuple) else (in_dims,) * n


def looped(f, in_dims):
    """What vmap(f, in_dims) stands for: f on each sample, stacked."""
    def run(*args):
        dims = _in_dims(in_dims, len(args))
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        outs = [_tensors(f(*(a if d is None else a.select(d, b) for a, d in zip(args, dims))))
                for b in range(size)]
        return tuple(tape.stack([o[k] for o in outs]) for k in range(len(outs[0])))
    return run


def _leaves(args, in_dims):
    """The args as tape tensors; the batched float ones require grad."""
    out = []
    for a, d in zip(args, _in_dims(in_dims, len(args))):
        differentiable = d is not None and np.issubdtype(a.dtype, np.floating)
        out.append(tape.tensor(a, requires_grad=differentiable))
    return out


def _differentiated(outputs, leaves):
    """d(sum of the float outputs' sums)/d(leaves), None where none flows, or
    the error that backward raises (floor_divide's, as PyTorch's)."""
    wanted = [x for x in leaves if x.requires_grad]
    total = [o.sum() for o in outputs if o.requires_grad]
    if not total or not wanted:
        return None
    try:
        return tape.autograd.grad(sum(total[1:], total[0]), wanted, allow_unused=True)
    except RuntimeError as e:
        return e


def _same(actual, expected, what):
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    a, e = actual.detach().numpy(), expected.detach().numpy()
    if np.issubdtype(e.dtype, np.floating):
        np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-14, err_msg=what)
    else:
        np.testing.assert_array_equal(a, e, err_msg=what)


def check(mapped, loop, args, in_dims):
    leaves = _leaves(args, in_dims)
    expected = loop(*leaves)
    actual = _tensors(mapped(*leaves))
    assert len(actual) == len(expected), f"{len(actual)} outputs, the loop gives {len(expected)}"
    for k, (a, e) in enumerate(zip(actual, expected)):
        _same(a, e, f"output {k}")
        assert a.requires_grad == e.requires_grad, f"output {k}: requires_grad {a.requires_grad}"
    grads_expected = _differentiated(expected, leaves)
    grads_actual = _differentiated(actual, leaves)
    if isinstance(grads_expected, RuntimeError):
        assert (type(grads_actual), str(grads_actual)) == (type(grads_expected), str(grads_expected))
    elif grads_expected is not None:
        assert not isinstance(grads_actual, RuntimeError), f"vmap's backward raised {grads_actual!r}"
        for k, (a, e) in enumerate(zip(grads_actual, grads_expected)):
            assert (a is None) == (e is None), f"gradient {k}: {a} where the loop gives {e}"
            if e is not None:
                _same(a, e, f"gradient {k}")


@pytest.mark.parametrize("c", _params(CASES))
def test_vmap_equals_the_loop(c):
    check(func.vmap(c.f, c.in_dims), looped(c.f, c.in_dims), c.args, c.in_dims)


# -- nested vmap: vmap(vmap(f)) over two batch dims equals the double loop

NESTED = [
    case("nested-sin", "sin", tape.sin, real(B, 2, 3)),
    case("nested-matmul", "matmul", tape.matmul, real(B, 2, 3, 2), real(B, 2, 2, 4)),
    case("nested-sum-dim", "sum", lambda x: x.sum(-1), real(B, 2, 3, 4)),
    case("nested-stack-plain", "stack", lambda x, w: tape.stack([x, w]), real(B, 2, 4), real(4, B, 2),
         in_dims=(0, 1)),
    case("nested-sort", "sort", lambda x: tuple(tape.sort(x)), real(B, 2, 5)),
]


@pytest.mark.parametrize("c", _params(NESTED))
def test_nested_vmap_equals_the_double_loop(c):
    check(func.vmap(func.vmap(c.f, c.in_dims), c.in_dims), looped(looped(c.f, c.in_dims), c.in_dims), c.args,
          c.in_dims)


# -- what PyTorch cannot batch: torch.func.vmap's errors (PyTorch 2.13)

DYNAMIC_SHAPE = ("vmap: We do not support batching operators that can output dynamic shape. Attempted to vmap "
                 "over aten::{op}. Please file an issue at https://github.com/pytorch/pytorch/issues if you need "
                 "this feature.")
PLAIN_SELF = ("vmap: {op}(self, *extra_args) is not possible because there exists a Tensor `other` in extra_args "
              "that has more elements than `self`. This happened due to `other` being vmapped over but `self` not "
              "being vmapped over {where}. Please try to use out-of-place operators instead of {op}. If said "
              "operator is being called inside the PyTorch framework, please file a bug report instead.")
ARITHMETIC_PLAIN_SELF = PLAIN_SELF.format(op="inplace arithmetic", where="in a vmap")
P4 = real(4)

ErrorCase = collections.namedtuple("ErrorCase", "id op f args message")

ERRORS = [
    ErrorCase("error-masked_select", "masked_select", lambda x: tape.masked_select(x, x > 0), real(B, 4),
              "vmap: Attempted to vmap over `mask` in torch.masked_select(self, mask) We cannot support this "
              "because for each batch this would return a differently shaped Tensor. Please file an issue at "
              "https://github.com/pytorch/pytorch/issues if you need this feature."),
    ErrorCase("error-nonzero", "nonzero", tape.nonzero, real(B, 4), DYNAMIC_SHAPE.format(op="nonzero")),
    ErrorCase("error-argwhere", "argwhere", tape.argwhere, real(B, 4), DYNAMIC_SHAPE.format(op="argwhere")),
    ErrorCase("error-unique", "unique", lambda x: x.unique(), real(B, 4), DYNAMIC_SHAPE.format(op="unique")),
    ErrorCase("error-where-one-argument", "where", lambda x: tape.where(x > 0), real(B, 4),
              DYNAMIC_SHAPE.format(op="where")),
    ErrorCase("error-boolean-mask-indexing", "__getitem__", lambda x: x[x > 0], real(B, 4),
              "vmap: We do not support batching operators that can support dynamic shape. Attempting to batch "
              "over indexing with a boolean mask."),
    ErrorCase("error-item", "item", lambda x: x.sum().item(), real(B, 4),
              "vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over calling .item() "
              "on a Tensor, please try to rewrite what you're doing with other operations. If error is occurring "
              "somewhere inside PyTorch internals, please file a bug report."),
    ErrorCase("error-float", "__float__", lambda x: x * float(x.sum()), real(B, 4),
              "vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over calling .item() "
              "on a Tensor, please try to rewrite what you're doing with other operations. If error is occurring "
              "somewhere inside PyTorch internals, please file a bug report."),
    ErrorCase("error-control-flow", "__bool__", lambda x: x if x.sum() > 0 else -x, real(B, 4),
              "vmap: It looks like you're attempting to use a Tensor in some data-dependent control flow. We don't "
              "support that yet, please file an issue at https://github.com/pytorch/pytorch/issues ."),
    ErrorCase("error-allclose", "allclose", lambda x: x * tape.allclose(x, x), real(B, 4),
              "vmap over torch.allclose isn't supported yet. Please file an issue at "
              "https://github.com/pytorch/pytorch/issues if you need this feature."),
    ErrorCase("error-equal", "equal", lambda x: x * tape.equal(x, x), real(B, 4),
              "Batching rule not implemented for aten::equal. We could not generate a fallback."),
    # an in-place op on a plain self with a batched other: add_ fails in its broadcast (physical shapes)
    ErrorCase("error-add_-plain-self", "add_", lambda x: tape.tensor(P4).add_(x), real(B, 4),
              "output with shape [4] doesn't match the broadcast shape [3, 4]"),
    ErrorCase("error-mul_-plain-self", "mul_", lambda x: tape.tensor(P4).mul_(x), real(B, 4), ARITHMETIC_PLAIN_SELF),
    ErrorCase("error-sub_-plain-self", "sub_", lambda x: tape.tensor(P4).sub_(x), real(B, 4), ARITHMETIC_PLAIN_SELF),
    ErrorCase("error-setitem-plain-self", "__setitem__", lambda x: _assigned(tape.tensor(P4), x[0]), real(B, 4),
              ARITHMETIC_PLAIN_SELF),
    ErrorCase("error-fill_-plain-self", "fill_", lambda x: tape.tensor(P4).fill_(x.sum()), real(B, 4),
              PLAIN_SELF.format(op="fill_", where="in a vmap")),
    ErrorCase("error-pow_-plain-self", "pow_", lambda x: tape.tensor(P4).pow_(x), real(B, 4),
              PLAIN_SELF.format(op="aten::pow_", where="at level 1")),
    ErrorCase("error-addmm_-plain-self", "addmm_", lambda x: tape.ones(4, 4).addmm_(x, M44), real(B, 4, 4),
              PLAIN_SELF.format(op="aten::addmm_", where="at level 1")),
    ErrorCase("error-addcmul_-plain-self", "addcmul_", lambda x: tape.tensor(P4).addcmul_(x, x), real(B, 4),
              PLAIN_SELF.format(op="aten::addcmul_", where="at level 1")),
    ErrorCase("error-lerp_-plain-self", "lerp_", lambda x: tape.tensor(P4).lerp_(W4, x), real(B, 4),
              PLAIN_SELF.format(op="aten::lerp_", where="at level 1")),
]


@pytest.mark.parametrize("c", _params(ERRORS))
def test_vmap_raises_pytorchs_error(c):
    with pytest.raises(RuntimeError) as info:
        func.vmap(c.f)(tape.tensor(c.args))
    assert str(info.value) == c.message


# -- coverage: every public op has a case here

NOT_OPS = {
    # modules, types, dtypes, factories, defaults, grad modes
    "Tensor", "autograd", "func", "linalg", "utils", "viz", "device", "bool", "float16", "float32", "float64",
    "int8", "int16", "int32", "int64", "uint8", "half", "float", "double", "short", "int", "long",
    "get_default_dtype", "set_default_dtype", "arange", "as_tensor", "empty", "empty_like", "eye", "from_numpy",
    "full", "full_like", "linspace", "manual_seed", "ones", "ones_like", "rand", "rand_like", "randint", "randn",
    "randn_like", "tensor", "zeros", "zeros_like", "enable_grad", "inference_mode", "is_grad_enabled",
    "is_inference_mode_enabled", "no_grad", "set_grad_enabled", "is_anomaly_enabled",
    "is_anomaly_check_nan_enabled",
    # a transform of functions (tape.compile), not an op
    "compile",
    # shapes, dtype limits and constants
    "Size", "finfo", "iinfo", "pi", "e", "inf", "nan",
    "logspace", "randperm",
}


def _covered():
    return {c.op for c in CASES + NESTED} | {c.op for c in ERRORS}


def test_every_public_function_has_a_case():
    public = {n for n in tape.__all__ if n not in NOT_OPS}
    public |= {f"linalg.{n}" for n in dir(tape.linalg) if not n.startswith("_") and n != "LinAlgError"
               and callable(getattr(tape.linalg, n))}
    assert sorted(public - _covered()) == []


def test_every_in_place_method_has_a_case():
    in_place = {n for n in dir(tape.Tensor) if n.endswith("_") and not n.startswith("_")
                # not ops: autograd bookkeeping and the random fills (vmap's randomness)
                and n not in ("requires_grad_", "detach_", "uniform_", "normal_")}
    assert sorted(in_place - _covered()) == []
