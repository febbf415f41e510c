"""vmap's batched tensors: a Tensor subclass whose physical value holds every
sample of the enclosing vmap levels, with a batching rule for each Tensor
method and operator that has one. See Note [Batched tensors].
"""
import itertools
import operator
import threading

import numpy as np

from ._factories import tensor
from ._tensor import Tensor

__all__ = ["BatchedTensor", "BatchedArgumentError", "active_levels", "push_level", "pop_level", "add_batch_dim",
           "remove_batch_dim", "batched", "physical", "with_levels", "batched_call", "refuse_the_rest"]

# Note [Batched tensors]
# ~~~~~~~~~~~~~~~~~~~~~~
# Inside vmap, f sees BatchedTensors. One holds `phys`, a plain tape Tensor
# whose first dims are the batch dims of the vmap levels in `levels`
# (ascending level ids: the outermost vmap first), followed by the dims f
# sees (the logical ones). Every rule computes on `phys` with ordinary tape
# ops, so a batched computation records and differentiates like any other,
# and runs as one array op for the whole batch. No rule mixes samples: a
# logical dim d >= 0 is physical dim d + len(levels) and a negative one is
# itself; operands of an elementwise op are aligned for broadcasting (a
# level an operand lacks, or a logical dim it lacks, becomes a size-1 dim in
# place), and matmul promotes a batched vector to a matrix first.
#
# The private attributes that ops and Tensor methods read (`_value`, `_rg`,
# ...) raise BatchedArgumentError on a BatchedTensor, so nothing computes on
# the physical value as if it were one sample. Being a Tensor subclass that
# overrides the reflected operators, it also gets `plain * batched` first.
#
# Note [Batched tape functions]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A tape function (`tape.sin(x)`, `tape.stack([x, w])`) given a batched
# argument fails on its first read of it, with BatchedArgumentError (or,
# where it reaches a NumPy function, NumPy's TypeError: it has no
# __array_ufunc__). The public functions catch that around their body and
# hand their arguments to `batched_call`, which runs their batching rule: its
# own (`_FUNCTION_RULES`: the functions of several tensors that no method
# covers, stack, cat, where, ...) or the BatchedTensor method of the same
# name and meaning, called with the function's arguments (a plain first
# argument is fine: the matmul rules align every operand, and an
# elementwise function runs on its operands aligned, numbers included).
# A try that raises nothing costs nothing in CPython 3.11, so eager calls,
# which never raise there, pay nothing for it. A function without a rule,
# and an internal op that happens to share a public name, re-raise: a clear
# RuntimeError rather than a result computed on the physical value.

_NO_RULE = ("vmap: {what} has no batching rule for a batched tensor. Inside vmap, use the Tensor methods, "
            "operators and tape functions that have one (x.sin(), tape.sum(x, 0), x @ w, x[i], tape.stack, ...)")


class BatchedArgumentError(RuntimeError):
    """What reading a BatchedTensor's private attributes raises: a batched
    argument reached code that has no batching rule for it (Note [Batched
    tape functions])."""


class _Levels(threading.local):
    """The active vmap levels of this thread (as its tape, one per thread):
    (level id, batch size), innermost last."""

    def __init__(self):
        self.stack = []


_LEVELS = _Levels()
# level ids only grow, so a batched tensor's levels sort outermost first
_next_id = itertools.count(1)


def active_levels():
    return tuple(_LEVELS.stack)


def push_level(batch_size):
    level = next(_next_id)
    _LEVELS.stack.append((level, batch_size))
    return level


def pop_level():
    _LEVELS.stack.pop()


class BatchedTensor(Tensor):
    """A tensor inside vmap: the shape, methods and operators are those of one
    sample; the value holds them all (Note [Batched tensors])."""
    __slots__ = ("phys", "levels")

    # -- what ops and Tensor methods without a rule read: they raise
    def __getattr__(self, name):
        raise BatchedArgumentError(_NO_RULE.format(what=f"Tensor.{name}" if not name.startswith("_") else
                                                   "this operation"))

    @property
    def _value(self):
        raise BatchedArgumentError(_NO_RULE.format(what="this operation"))

    @property
    def _rg(self):
        raise BatchedArgumentError(_NO_RULE.format(what="this operation"))

    def __array__(self, *args, **kwargs):
        raise BatchedArgumentError(_NO_RULE.format(what="conversion to a NumPy array"))

    __array_ufunc__ = None

    # -- metadata of one sample
    @property
    def shape(self):
        return tuple(self.phys.shape[len(self.levels):])

    @property
    def ndim(self):
        return self.phys.ndim - len(self.levels)

    def dim(self):
        return self.ndim

    ndimension = dim

    def size(self, dim=None):
        if dim is None:
            return self.shape
        return self.shape[_dim_index(dim, self.ndim)]

    def numel(self):
        return int(np.prod(self.shape, dtype=np.int64))

    nelement = numel

    def __len__(self):
        if not self.ndim:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    @property
    def dtype(self):
        return self.phys.dtype

    @property
    def requires_grad(self):
        return self.phys.requires_grad

    def __repr__(self):
        return f"BatchedTensor(levels={self.levels}, value=\n{self.phys!r})"

    def contiguous(self):
        return self

    def item(self):
        raise RuntimeError("vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over "
                           "calling .item() on a Tensor, please try to rewrite what you're doing with other "
                           "operations. If error is occurring somewhere inside PyTorch internals, please file a "
                           "bug report.")

    def __bool__(self):
        raise RuntimeError("vmap: It looks like you're attempting to use a Tensor in some data-dependent control "
                           "flow. We don't support that yet, please file an issue at "
                           "https://github.com/pytorch/pytorch/issues .")

    __float__ = __int__ = __index__ = tolist = numpy = item

    def __hash__(self):
        return id(self)

    # -- shape ops
    def reshape(self, *shape):
        shape = _shape_arg(shape)
        known = int(np.prod([n for n in shape if n != -1], dtype=np.int64))
        numel = self.numel()
        if (numel != known) if -1 not in shape else (known == 0 or numel % known):
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        return batched(self.phys.reshape(self._batch_shape() + shape), self.levels)

    view = reshape

    def reshape_as(self, other):
        return self.reshape(other.shape)

    view_as = reshape_as

    def flatten(self, start_dim=0, end_dim=-1):
        if not self.ndim:
            return self.reshape(1)
        s, e = self._pdim(start_dim), self._pdim(end_dim)
        return batched(self.phys.flatten(s, e), self.levels)

    def squeeze(self, dim=None):
        shape = self.shape
        if dim is None:
            dims = {d for d, n in enumerate(shape) if n == 1}
        else:
            dims = {_dim_index(d, self.ndim) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
            dims = {d for d in dims if d < len(shape) and shape[d] == 1}
        return self.reshape(tuple(n for d, n in enumerate(shape) if d not in dims))

    def unsqueeze(self, dim):
        d = _dim_index(dim, self.ndim + 1)
        shape = self.shape
        return self.reshape(shape[:d] + (1,) + shape[d:])

    def transpose(self, dim0, dim1):
        if not self.ndim:  # PyTorch lets a 0-d tensor transpose dims 0 and -1
            _dim_index(dim0, 0)
            _dim_index(dim1, 0)
            return self
        return batched(self.phys.transpose(self._pdim(dim0), self._pdim(dim1)), self.levels)

    swapaxes = transpose

    def permute(self, *dims):
        dims = _shape_arg(dims)
        if len(dims) != self.ndim:
            raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
                               f"length of the desired ordering of dimensions i.e. input.dim() = {self.ndim} is not "
                               f"equal to len(dims) = {len(dims)}")
        nb = len(self.levels)
        return batched(self.phys.permute(tuple(range(nb)) + tuple(self._pdim(d) for d in dims)), self.levels)

    def t(self):
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
        return self if self.ndim < 2 else self.transpose(0, 1)

    @property
    def T(self):
        return self.permute(tuple(range(self.ndim - 1, -1, -1)))

    @property
    def mT(self):
        if self.ndim < 2:
            raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got "
                               f"{self.ndim}-D tensor.")
        return self.transpose(-2, -1)

    def expand(self, *sizes):
        sizes = _shape_arg(sizes)
        n, m = self.ndim, len(sizes)
        if m < n:
            raise RuntimeError(f"expand({self.dtype.name}{list(self.shape)}, size={list(sizes)}): the number "
                               f"of sizes provided ({m}) must be greater or equal to the number of dimensions in "
                               f"the tensor ({n})")
        padded = self.reshape((1,) * (m - n) + self.shape)
        return batched(padded.phys.expand(self._batch_shape() + sizes), self.levels)

    def expand_as(self, other):
        return self.expand(other.shape)

    broadcast_to = expand

    def flip(self, *dims):
        return batched(self.phys.flip(tuple(self._pdim(d) for d in _shape_arg(dims))), self.levels)

    def diagonal(self, offset=0, dim1=0, dim2=1):
        return batched(self.phys.diagonal(offset, self._pdim(dim1), self._pdim(dim2)), self.levels)

    def triu(self, diagonal=0):
        self._need_matrix("triu")
        return batched(self.phys.triu(diagonal), self.levels)

    def tril(self, diagonal=0):
        self._need_matrix("tril")
        return batched(self.phys.tril(diagonal), self.levels)

    def split(self, split_size_or_sections, dim=0):
        return tuple(batched(p, self.levels) for p in self.phys.split(split_size_or_sections, self._pdim(dim)))

    def chunk(self, chunks, dim=0):
        return tuple(batched(p, self.levels) for p in self.phys.chunk(chunks, self._pdim(dim)))

    def unbind(self, dim=0):
        return tuple(batched(p, self.levels) for p in self.phys.unbind(self._pdim(dim)))

    def index_select(self, dim, index):
        if isinstance(index, BatchedTensor):
            raise RuntimeError(_NO_RULE.format(what="index_select with a batched index"))
        return batched(self.phys.index_select(self._pdim(dim), index), self.levels)

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        arrays = []
        for k in key:
            if isinstance(k, (Tensor, np.ndarray, list)):
                if np.asarray(k).dtype == np.bool_ if not isinstance(k, Tensor) else k.dtype == np.bool_:
                    raise RuntimeError("vmap: We do not support batching operators that can support dynamic "
                                       "shape. Attempting to batch over indexing with a boolean mask.")
                if isinstance(k, BatchedTensor):
                    raise RuntimeError(_NO_RULE.format(what="indexing with a batched index"))
                arrays.append(tuple(k.shape) if isinstance(k, Tensor) else np.shape(k))
        nb = len(self.levels)
        out = self.phys[(slice(None),) * nb + key]
        if arrays:
            # as PyTorch (not NumPy), an int selects and is no index array here
            advanced = [i for i, k in enumerate(key) if isinstance(k, (Tensor, np.ndarray, list))]
            if advanced[-1] - advanced[0] + 1 != len(advanced):
                # index arrays apart put their dims first, before the batch dims here
                k = len(np.broadcast_shapes(*arrays))
                out = out.permute(tuple(range(k, k + nb)) + tuple(range(k)) + tuple(range(k + nb, out.ndim)))
        return batched(out, self.levels)

    # -- reductions and other ops over dims
    def _reduce(self, name, dim, keep, extra, kwargs):
        """phys.<name> over the logical `dim` (None: all of them), keepdim `keep`."""
        if dim is None or (isinstance(dim, (tuple, list)) and not len(dim)):
            flat = self.phys.reshape(self._batch_shape() + (-1,))
            out = getattr(flat, "a" + name if name in ("max", "min") else name)(-1, *extra, **kwargs)
            if keep:
                out = out.reshape(self._batch_shape() + (1,) * self.ndim)
            return batched(out, self.levels)
        if not self.ndim:  # one sample is 0-d: reduce a dim of one element
            for d in dim if isinstance(dim, (tuple, list)) else (dim,):
                _dim_index(d, 0)
            return _wrap_result(getattr(self.phys.unsqueeze(-1), name)(-1, *extra, **kwargs), self.levels)
        pdim = tuple(self._pdim(d) for d in dim) if isinstance(dim, (tuple, list)) else self._pdim(dim)
        return _wrap_result(getattr(self.phys, name)(pdim, *extra, keepdim=keep, **kwargs), self.levels)

    def _along(self, name, dim, *args, **kwargs):
        """phys.<name> along one logical dim, the shape kept (softmax, cumsum)."""
        if not self.ndim:
            _dim_index(dim, 0)
            return batched(getattr(self.phys.unsqueeze(-1), name)(-1, *args, **kwargs).squeeze(-1), self.levels)
        return batched(getattr(self.phys, name)(self._pdim(dim), *args, **kwargs), self.levels)

    def softmax(self, dim, dtype=None):
        return self._along("softmax", dim, dtype)

    def log_softmax(self, dim, dtype=None):
        return self._along("log_softmax", dim, dtype)

    def cumsum(self, dim, *, dtype=None):
        return self._along("cumsum", dim, dtype=dtype)

    def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
        if dim is None:
            flat = self.phys.reshape(self._batch_shape() + (-1,))
            out = flat.norm(2 if p == "fro" else p, -1, False)
            return batched(out.reshape(self._batch_shape() + (1,) * self.ndim) if keepdim else out, self.levels)
        dims = tuple(self._pdim(d) for d in dim) if isinstance(dim, (tuple, list)) else self._pdim(dim)
        return batched(self.phys.norm(p, dims, keepdim), self.levels)

    # -- products
    def __matmul__(self, other):
        return _matmul(self, other)

    def __rmatmul__(self, other):
        return _matmul(other, self)

    matmul = __matmul__

    def mm(self, mat2):
        if self.ndim != 2:
            raise RuntimeError("self must be a matrix")
        if mat2.ndim != 2:
            raise RuntimeError("mat2 must be a matrix")
        return _matmul(self, mat2)

    def mv(self, vec):
        if self.ndim != 2 or vec.ndim != 1:
            raise RuntimeError(f"vector + matrix @ vector expected, got 1, {self.ndim}, {vec.ndim}")
        return _matmul(self, vec)

    def dot(self, other):
        if self.ndim != 1 or other.ndim != 1:
            raise RuntimeError(f"1D tensors expected, but got {self.ndim}D and {other.ndim}D tensors")
        return _matmul(self, other)

    def bmm(self, mat2):
        if self.ndim != 3:
            raise RuntimeError("batch1 must be a 3D tensor")
        if mat2.ndim != 3:
            raise RuntimeError("batch2 must be a 3D tensor")
        return _matmul(self, mat2)

    def outer(self, vec2):
        for name, t in (("self", self), ("vec2", vec2)):
            if t.ndim != 1:
                raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {t.ndim}-D")
        return self.unsqueeze(-1) * (vec2.unsqueeze(-2) if isinstance(vec2, BatchedTensor) else vec2.reshape(1, -1))

    # -- helpers
    def _batch_shape(self):
        return tuple(self.phys.shape[:len(self.levels)])

    def _pdim(self, d):
        return _dim_index(d, self.ndim) + len(self.levels)

    def _need_matrix(self, name):
        if self.ndim < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")


def _shape_arg(shape):
    """A shape given as sizes or as one sequence."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def _dim_index(d, n):
    """Logical dim d of n dims as 0..n-1, with PyTorch's error (a 0-d tensor takes -1 and 0)."""
    lo, hi = (-n, n - 1) if n else (-1, 0)
    if not isinstance(d, (int, np.integer)) or not lo <= d <= hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {d})")
    return int(d) % n if n else 0


def batched(phys, levels):
    """phys as a batched tensor of `levels` (phys itself when there are none)."""
    if not levels:
        return phys
    t = BatchedTensor.__new__(BatchedTensor)
    t.phys, t.levels = phys, tuple(levels)
    return t


def _wrap_result(out, levels):
    """A result of phys's op: a Tensor, or a tuple of them (max(dim) gives values and indices)."""
    if isinstance(out, tuple):
        parts = [_wrap_result(o, levels) for o in out]
        return type(out)(*parts) if hasattr(type(out), "_fields") else tuple(parts)
    return batched(out, levels)


def with_levels(t, levels):
    """t (batched or not) with a batch dim for each of `levels` (the active
    ones, a superset of its own), expanded to each level's size: a
    physical Tensor of shape (sizes..., t.shape...)."""
    sizes = dict(_LEVELS.stack)
    own = t.levels if isinstance(t, BatchedTensor) else ()
    base = t.phys if isinstance(t, BatchedTensor) else t
    logical = tuple(base.shape[len(own):])
    have = dict(zip(own, base.shape[:len(own)]))
    shape = tuple(have.get(lv, 1) for lv in levels) + logical
    full = tuple(sizes[lv] for lv in levels) + logical
    if shape == full and own == tuple(levels):
        return base
    if not base.requires_grad:  # a fresh contiguous copy: it becomes a leaf
        return tensor(np.ascontiguousarray(np.broadcast_to(base.numpy().reshape(shape), full)))
    return base.reshape(shape).expand(full)


def physical(t):
    return t.phys if isinstance(t, BatchedTensor) else t


def _levels_of(tensors):
    """The vmap levels of the batched ones among `tensors`, outermost first."""
    return tuple(sorted({lv for t in tensors if isinstance(t, BatchedTensor) for lv in t.levels}))


def _aligned(operands):
    """(levels, the operands' physical values aligned for broadcasting)."""
    levels = _levels_of(operands)
    rank = max((o.ndim for o in operands if isinstance(o, Tensor)), default=0)
    out = []
    for o in operands:
        if isinstance(o, BatchedTensor):
            have = dict(zip(o.levels, o.phys.shape[:len(o.levels)]))
            shape = tuple(have.get(lv, 1) for lv in levels) + (1,) * (rank - o.ndim) + o.shape
            out.append(o.phys if shape == o.phys.shape else o.phys.reshape(shape))
        else:
            out.append(o)  # a plain tensor or number broadcasts from the right
    return levels, out


def _elementwise(name):
    def method(self, *args, **kwargs):
        keys = list(kwargs)
        levels, (x, *rest) = _aligned((self, *args, *kwargs.values()))
        values = rest[len(args):]
        return batched(getattr(x, name)(*rest[:len(args)], **dict(zip(keys, values))), levels)
    method.__name__ = name
    method.elementwise = True
    return method


def _binary(fn, reflected=False):
    def method(self, other):
        levels, (x, y) = _aligned((self, other))
        return batched(fn(y, x) if reflected else fn(x, y), levels)
    return method


def _reduction(name, keep_pos):
    """A reduction's method; its dim is the first argument, keepdim the
    argument at keep_pos."""
    def method(self, *args, **kwargs):
        args = list(args)
        dim = args.pop(0) if args else kwargs.pop("dim", kwargs.pop("axis", None))
        if len(args) >= keep_pos:
            keep = bool(args.pop(keep_pos - 1))
        else:
            keep = bool(kwargs.pop("keepdim", kwargs.pop("keepdims", False)))
        return self._reduce(name, dim, keep, args, kwargs)
    method.__name__ = name
    return method


def _matmul(a, b):
    """a @ b for a, b batched or plain, one at least batched."""
    la, lb = a.ndim, b.ndim
    if not la or not lb:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {la}D and {lb}D")
    # a batched vector is promoted to a matrix here (the physical value has more dims)
    va, vb = la == 1 and isinstance(a, BatchedTensor), lb == 1 and isinstance(b, BatchedTensor)
    if va:
        a = a.unsqueeze(0)
    if vb:
        b = b.unsqueeze(-1)
    levels, (pa, pb) = _aligned_for_matmul(a, b)
    out = pa @ pb
    if va or vb:
        shape = list(out.shape)
        if vb:
            shape.pop(-1)
        if va:  # its size-1 row dim is last unless b left a column dim after it
            shape.pop(-1 if vb or lb == 1 else -2)
        out = out.reshape(tuple(shape))
    return batched(out, levels)


def _aligned_for_matmul(a, b):
    """As _aligned, with the batch dims of the matrices (all but the last
    two logical dims) padded to the same count."""
    levels = _levels_of((a, b))
    rank = max(a.ndim, b.ndim)
    out = []
    for o in (a, b):
        if isinstance(o, BatchedTensor):
            have = dict(zip(o.levels, o.phys.shape[:len(o.levels)]))
            pad = (1,) * (rank - o.ndim) if o.ndim >= 2 else ()
            shape = tuple(have.get(lv, 1) for lv in levels) + pad + o.shape
            out.append(o.phys if shape == o.phys.shape else o.phys.reshape(shape))
        else:
            out.append(o)
    return levels, out


for _name in ("abs acos acosh asin asinh atan atanh ceil clone cos cosh erf exp exp2 expm1 floor gelu log log10 "
              "log1p log2 neg negative reciprocal relu round rsqrt sigmoid sign silu sin sinh softplus sqrt square "
              "tan tanh trunc logical_not bitwise_not to float double half int long bool detach add sub mul div "
              "true_divide pow remainder floor_divide maximum minimum atan2 eq ne lt le gt ge logical_and "
              "logical_or logical_xor bitwise_and bitwise_or bitwise_xor clamp clamp_min clamp_max clip where "
              # these act on the last two dims, so the batch dims in front are batch dims to them too
              "det inverse").split():
    setattr(BatchedTensor, _name, _elementwise(_name))

for _name, _fn in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("truediv", operator.truediv), ("floordiv", operator.floordiv), ("mod", operator.mod),
                   ("pow", operator.pow), ("and", operator.and_), ("or", operator.or_), ("xor", operator.xor)):
    setattr(BatchedTensor, f"__{_name}__", _binary(_fn))
    setattr(BatchedTensor, f"__r{_name}__", _binary(_fn, reflected=True))

for _name, _fn in (("eq", operator.eq), ("ne", operator.ne), ("lt", operator.lt), ("le", operator.le),
                   ("gt", operator.gt), ("ge", operator.ge)):
    setattr(BatchedTensor, f"__{_name}__", _binary(_fn))

for _name, _fn in (("neg", operator.neg), ("abs", operator.abs), ("invert", operator.invert),
                   ("pos", operator.pos)):
    setattr(BatchedTensor, f"__{_name}__", (lambda fn: lambda self: batched(fn(self.phys), self.levels))(_fn))

for _name, _keep in (("sum", 1), ("mean", 1), ("prod", 1), ("amax", 1), ("amin", 1), ("logsumexp", 1),
                     ("all", 1), ("any", 1), ("max", 1), ("min", 1), ("var", 2), ("std", 2)):
    setattr(BatchedTensor, _name, _reduction(_name, _keep))



def _in_place(name):
    def method(self, *args, **kwargs):
        raise RuntimeError(_NO_RULE.format(what=f"the in-place Tensor.{name}"))
    method.__name__ = name
    method.no_rule = True
    return method


def _without_rule(name):
    def method(self, *args, **kwargs):
        raise RuntimeError(_NO_RULE.format(what=f"Tensor.{name}"))
    method.__name__ = name
    method.no_rule = True
    return method


def refuse_the_rest():
    """Give BatchedTensor a refusing method for each Tensor method without a
    rule; called by `tape` once every op has set its Tensor methods."""
    # in-place ops would change the batched value behind f's back: no rule
    for name in [n for n in dir(Tensor) if n.endswith("_") and not n.startswith("_")] + ["__setitem__"]:
        setattr(BatchedTensor, name, _in_place(name))
    # every other Tensor method would compute on the physical value as one
    # sample; it raises, naming itself (Note [Batched tensors])
    for name in dir(Tensor):
        if (not name.startswith("_") and name not in vars(BatchedTensor) and callable(getattr(Tensor, name))
                and name not in ("is_floating_point", "element_size", "cpu")):
            setattr(BatchedTensor, name, _without_rule(name))


# -- the batching rules of tape functions (Note [Batched tape functions])

def _is_batched(v):
    return isinstance(v, BatchedTensor) or (isinstance(v, (tuple, list))
                                            and any(isinstance(t, BatchedTensor) for t in v))


def _joined(name, tensors, dim, new_dim):
    """stack or cat of batched and plain tensors: each expanded to every
    level's batch size, joined along the logical dim shifted past the batch dims."""
    import ops
    tensors = list(tensors)
    levels = _levels_of(tensors)
    d = _dim_index(dim, tensors[0].ndim + new_dim)
    return batched(getattr(ops, name)([with_levels(t, levels) for t in tensors], d + len(levels)), levels)


def _where(condition, input=None, other=None):
    if input is None and other is None:
        raise RuntimeError(_NO_RULE.format(what="tape.where(condition) (nonzero)"))
    import ops
    levels, (c, x, y) = _aligned((condition, input, other))
    return batched(ops.where(c, x, y), levels)


_FUNCTION_RULES = {
    "stack": lambda tensors, dim=0: _joined("stack", tensors, dim, 1),
    "cat": lambda tensors, dim=0: _joined("cat", tensors, dim, 0),
    "where": _where,
}


def batched_call(fn, *args, **kwargs):
    """The public tape function fn applied to arguments of which one is
    batched, by its batching rule; BatchedArgumentError naming it where it
    has none (Note [Batched tape functions])."""
    import tape
    name = fn.__name__
    public = getattr(tape, name, None)
    # tape.<name> may be fn under PyTorch's signature (ops/_signature.py); any
    # other fn is an internal op: its public caller has the rule, if any
    if public is not fn and getattr(public, "__wrapped_op__", None) is not fn:
        raise BatchedArgumentError(_NO_RULE.format(what="this operation")) from None
    if any(map(_is_batched, args)) or any(map(_is_batched, kwargs.values())):
        rule = _FUNCTION_RULES.get(name)
        if rule is not None:
            return rule(*args, **kwargs)
        method = vars(BatchedTensor).get(name)
        if getattr(method, "elementwise", False):
            # fn itself on the aligned operands: any of them may be the batched one, or a number
            levels, operands = _aligned((*args, *kwargs.values()))
            return batched(fn(*operands[:len(args)], **dict(zip(kwargs, operands[len(args):]))), levels)
        if method is not None and not getattr(method, "no_rule", False):
            return method(*args, **kwargs)
    raise BatchedArgumentError(_NO_RULE.format(what=f"tape.{name}")) from None


def add_batch_dim(t, in_dim, level):
    """t (plain or batched) with its logical dim in_dim as the batch dim of
    the new, innermost `level`."""
    if isinstance(t, BatchedTensor):
        nb = len(t.levels)
        p = in_dim + nb
        order = tuple(range(nb)) + (p,) + tuple(d for d in range(nb, t.phys.ndim) if d != p)
        return batched(t.phys.permute(order) if order != tuple(range(t.phys.ndim)) else t.phys,
                    t.levels + (level,))
    if in_dim:
        t = t.permute((in_dim,) + tuple(d for d in range(t.ndim) if d != in_dim))
    return batched(t, (level,))


def remove_batch_dim(t, level, batch_size, out_dim):
    """vmap's output t with the batch dim of `level` moved to its logical dim
    out_dim (an output not batched at that level is expanded to it)."""
    levels = t.levels if isinstance(t, BatchedTensor) else ()
    n = t.ndim
    d = _dim_index(out_dim, n + 1)
    if level not in levels:
        shape = t.shape
        return t.reshape(shape[:d] + (1,) + shape[d:]).expand(shape[:d] + (batch_size,) + shape[d:])
    k = levels.index(level)
    rest = tuple(lv for lv in levels if lv != level)
    others = [i for i in range(len(levels)) if i != k]
    logical = list(range(len(levels), t.phys.ndim))
    order = tuple(others) + tuple(logical[:d]) + (k,) + tuple(logical[d:])
    phys = t.phys.permute(order) if order != tuple(range(t.phys.ndim)) else t.phys
    return batched(phys, rest)
