"""vmap's batched tensors: a Tensor subclass whose physical value holds every
sample of the enclosing vmap levels, and the family batching rules that op
declarations name (Note [Op declarations] in ops/_declare.py). See Note
[Batched tensors].
"""
import itertools
import threading

import numpy as np

from ._factories import tensor
from ._tensor import Tensor

__all__ = ["BatchedTensor", "BatchedArgumentError", "active_levels", "push_level", "pop_level", "add_batch_dim",
           "remove_batch_dim", "batched", "physical", "with_levels", "aligned", "levels_of", "dim_index",
           "refuse_the_rest", "elementwise", "over_dims", "along", "leading", "in_place", "no_rule", "NO_RULE",
           "DYNAMIC_SHAPE", "composite", "DYNAMIC_OUTPUT", "in_place_as", "refuse_batched_other"]

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
# the physical value as if it were one sample: the op's public function
# catches it and runs the op's batching rule (Note [Op declarations]). Being
# a Tensor subclass that overrides the reflected operators, a BatchedTensor
# also gets `plain * batched` first.
#
# A batching rule is `rule(op, args)`: args are op's arguments bound to its
# own parameters (inspect.BoundArguments, defaults applied), some of them
# batched; it returns op's result for every sample, batched. The families
# below cover most ops; an op with its own rule declares it beside itself.

_NO_RULE = ("vmap: {what} has no batching rule for a batched tensor. Inside vmap, use the Tensor methods, "
            "operators and tape functions that have one (x.sin(), tape.sum(x, 0), x @ w, x[i], tape.stack, ...)")


class BatchedArgumentError(RuntimeError):
    """What reading a BatchedTensor's private attributes raises: a batched
    argument reached an op, whose public function runs its batching rule
    instead (Note [Batched tensors])."""


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
        return self.shape[dim_index(dim, self.ndim)]

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

    # -- helpers
    def _batch_shape(self):
        return tuple(self.phys.shape[:len(self.levels)])

    def _pdim(self, d):
        return dim_index(d, self.ndim) + len(self.levels)


def dim_index(d, n):
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


def batched_result(out, levels):
    """A result of phys's op: a Tensor, or a tuple of them (max(dim) gives values and indices)."""
    if isinstance(out, tuple):
        parts = [batched_result(o, levels) for o in out]
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


def levels_of(tensors):
    """The vmap levels of the batched ones among `tensors`, outermost first."""
    return tuple(sorted({lv for t in tensors if isinstance(t, BatchedTensor) for lv in t.levels}))


def aligned(operands):
    """(levels, the operands' physical values aligned for broadcasting)."""
    levels = levels_of(operands)
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


def _tensor_arguments(args):
    """The names of args' arguments that are tensors."""
    return [name for name, v in args.arguments.items() if isinstance(v, Tensor)]


def _call(op, args):
    return op(*args.args, **args.kwargs)


def elementwise(op, args):
    """The rule of an op that acts on each element (its tensor arguments
    broadcast together): op on the operands aligned (Note [Batched tensors])."""
    names = _tensor_arguments(args)
    levels, values = aligned([args.arguments[n] for n in names])
    args.arguments.update(zip(names, values))
    return batched_result(_call(op, args), levels)


def _first(args):
    """The name and value of op's first argument, its input."""
    return next(iter(args.arguments.items()))


def _batched_input(args, what):
    name, x = _first(args)
    if not isinstance(x, BatchedTensor):
        raise RuntimeError(_NO_RULE.format(what=f"{what} with a batched argument other than its input"))
    return name, x


def _as_tuple(dim):
    return tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)


def over_dims(*, tuple_dims=True):
    """The rule of a reduction over its argument `dim` (an int, a tuple, or
    None for every dim) with `keepdim`: op over the same dims of each sample.
    For an op whose dim is one int (`tuple_dims=False`), every dim of a
    sample is its dims flattened into one."""
    def rule(op, args):
        name, x = _batched_input(args, op.__name__)
        a, nb = args.arguments, len(x.levels)
        dim, keep = a.get("dim"), bool(a.get("keepdim", False))
        everything = dim is None or (isinstance(dim, (tuple, list)) and not len(dim))
        if not x.ndim:  # one sample is 0-d: reduce a dim of one element
            if not everything:
                for d in _as_tuple(dim):
                    dim_index(d, 0)
            a[name], a["dim"] = x.phys.unsqueeze(-1), nb
            if "keepdim" in a:
                a["keepdim"] = False
        elif everything and tuple_dims:
            a[name], a["dim"] = x.phys, tuple(range(nb, nb + x.ndim))
        elif everything:
            a[name], a["dim"] = x.phys.reshape(x.phys.shape[:nb] + (-1,)), nb
            if "keepdim" in a:
                a["keepdim"] = False
            out = _call(op, args)
            if keep:
                out = out.reshape(out.shape[:nb] + (1,) * x.ndim)
            return batched_result(out, x.levels)
        else:
            a[name] = x.phys
            a["dim"] = (tuple(dim_index(d, x.ndim) + nb for d in dim) if isinstance(dim, (tuple, list))
                        else dim_index(dim, x.ndim) + nb)
        return batched_result(_call(op, args), x.levels)
    return rule


def along(*dims, new=0):
    """The rule of an op that works along the dims named by `dims` (each an
    int or a sequence of ints) and keeps the rest: op along the same dims of
    each sample, its tensor arguments given every level's batch dims. `new`
    is how many dims the op adds (unsqueeze, stack: a dim may be ndim). A
    0-d sample is taken as one element along dim 0 or -1, as PyTorch does."""
    def rule(op, args):
        a = args.arguments
        names = [n for n, v in a.items() if isinstance(v, Tensor) or _is_tensor_list(v)]
        levels = levels_of([t for n in names for t in _as_tuple(a[n])])
        ndim = next(v.ndim for n in names for v in _as_tuple(a[n]))
        nb = len(levels)
        zero_d = ndim == 0 and not new
        for n in names:
            v = a[n]
            lifted = [with_levels(t, levels) for t in _as_tuple(v)]
            if zero_d:
                lifted = [t.unsqueeze(-1) for t in lifted]
            a[n] = type(v)(lifted) if _is_tensor_list(v) else lifted[0]
        for d in dims:
            if a.get(d) is not None:
                a[d] = _shifted(a[d], max(ndim, 1) if zero_d else ndim + new, nb, zero_d)
        out = _call(op, args)
        if zero_d:
            out = _squeezed(out, nb)
        return batched_result(out, levels)
    return rule


def _is_tensor_list(v):
    return isinstance(v, (tuple, list)) and len(v) and all(isinstance(t, Tensor) for t in v)


def _shifted(dim, ndim, nb, zero_d):
    if isinstance(dim, (tuple, list)):
        return type(dim)(_shifted(d, ndim, nb, zero_d) for d in dim)
    if zero_d:
        dim_index(dim, 0)
        return nb
    return dim_index(dim, ndim) + nb


def _squeezed(out, nb):
    if isinstance(out, tuple):
        parts = [_squeezed(o, nb) for o in out]
        return type(out)(*parts) if hasattr(type(out), "_fields") else tuple(parts)
    return out.squeeze(-1) if out.ndim > nb else out


def leading(op, args):
    """The rule of an op that acts on the last dims of its input and takes
    every dim before them as a batch dim (det, inv, cholesky): op on the
    physical value itself."""
    name, x = _batched_input(args, op.__name__)
    if any(isinstance(v, BatchedTensor) for n, v in args.arguments.items() if n != name):
        raise RuntimeError(_NO_RULE.format(what=f"{op.__name__} with a batched argument other than its input"))
    args.arguments[name] = x.phys
    return batched_result(_call(op, args), x.levels)


_IN_PLACE_BATCHED_OTHER = (
    "vmap: {name}(self, *extra_args) is not possible because there exists a Tensor `other` in extra_args that "
    "has more elements than `self`. This happened due to `other` being vmapped over but `self` not being vmapped "
    "over in a vmap. Please try to use out-of-place operators instead of {name}. If said operator is being "
    "called inside the PyTorch framework, please file a bug report instead.")


def in_place(op, args):
    """The rule of an in-place op (x.add_(y), x.zero_()): op on self's
    physical value, its other tensors aligned to self's levels; refused, as
    PyTorch does, when another is batched at a level self is not."""
    return _written_in_place(op, args, op.__name__, False)


def _written_in_place(op, args, what, at_level):
    """op on self's physical value, its other tensors aligned to it: self,
    written; refused in PyTorch's words for `what` when another is batched
    at a level self is not (`refuse_batched_other`), unless `what` is None."""
    name, x = _first(args)
    others = [n for n in _tensor_arguments(args) if n != name]
    if what is not None:
        refuse_batched_other(x, [args.arguments[n] for n in others], what, at_level=at_level)
    _, values = aligned([x] + [args.arguments[n] for n in others])
    args.arguments.update(zip([name] + others, values))
    _call(op, args)
    return x


def no_rule(message):
    """The rule of an op that vmap cannot batch: it raises RuntimeError(message)."""
    def rule(op, args):
        raise RuntimeError(message.format(name=op.__name__))
    rule.no_rule = True
    return rule


# PyTorch's texts (torch.func.vmap, 2.13) for an op it has no batching rule
# for, and for one whose result's shape depends on the values
NO_RULE = no_rule("Batching rule not implemented for aten::{name}. We could not generate a fallback.")
DYNAMIC_SHAPE = no_rule("vmap: We do not support batching operators that can support dynamic shape. Attempting "
                        "to batch over indexing with a boolean mask.")


def _without_rule(name):
    def method(self, *args, **kwargs):
        raise RuntimeError(_NO_RULE.format(what=f"Tensor.{name}"))
    method.__name__ = name
    return method


def refuse_the_rest():
    """Give BatchedTensor a refusing method for each Tensor method that no
    declaration batches (the engine's own, as `register_hook`): it would
    compute on the physical value as one sample (Note [Batched tensors]).
    Called by ops' export_all once every op has set its methods."""
    for name in dir(Tensor):
        if (not name.startswith("_") and name not in vars(BatchedTensor) and callable(getattr(Tensor, name))
                and name not in ("is_floating_point", "element_size", "cpu")):
            setattr(BatchedTensor, name, _without_rule(name))


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
    d = dim_index(out_dim, n + 1)
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


_IN_PLACE_AT_LEVEL = (
    "vmap: {name}(self, *extra_args) is not possible because there exists a Tensor `other` in extra_args that "
    "has more elements than `self`. This happened due to `other` being vmapped over but `self` not being vmapped "
    "over at level {level}. Please try to use out-of-place operators instead of {name}. If said operator is being "
    "called inside the PyTorch framework, please file a bug report instead.")


def in_place_as(what, *, at_level=False):
    """The rule `in_place`, its refusal of another tensor batched at a level
    self is not in PyTorch's words for the op (`refuse_batched_other`).
    `what` None refuses nothing: the op meets the physical values and fails
    as PyTorch's add_ does, in its broadcast."""
    def rule(op, args):
        return _written_in_place(op, args, what, at_level)
    return rule


def refuse_batched_other(x, others, what, *, at_level=False):
    """PyTorch's refusal of an in-place op on x when one of `others` is
    batched at a level x is not: the op named `what` ("inplace arithmetic",
    "fill_", "aten::pow_"), with that vmap level (1 the outermost) where
    `at_level`."""
    own = x.levels if isinstance(x, BatchedTensor) else ()
    beyond = [lv for lv in levels_of(others) if lv not in own]
    if not beyond:
        return
    if at_level:
        depth = 1 + [lv for lv, _ in _LEVELS.stack].index(beyond[0])
        raise RuntimeError(_IN_PLACE_AT_LEVEL.format(name=what, level=depth))
    raise RuntimeError(_IN_PLACE_BATCHED_OTHER.format(name=what))


def composite(op, args):
    """The rule of an op written with Tensor methods (x.reshape(...), x[...])
    that have rules of their own: op itself, on the batched arguments."""
    return _call(op, args)


# PyTorch's text for an op whose result's shape depends on the values
DYNAMIC_OUTPUT = no_rule("vmap: We do not support batching operators that can output dynamic shape. Attempted to "
                         "vmap over aten::{name}. Please file an issue at https://github.com/pytorch/pytorch/issues "
                         "if you need this feature.")
