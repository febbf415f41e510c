"""In-place ops (`add_`, `x += y`, `zero_`, `x[key] = v`, ...). Each runs the
out-of-place op, records it like any op, and writes the result into the
tensor, which takes the new row; the rows that saw the old value become dirty
(see `Tensor.bump_version`), so a backward that needs them raises PyTorch's
error.
"""
import sys

import numpy as np

from ops._declare import DECLARATIONS, declare, exports
from tape._batched import (DYNAMIC_SHAPE, NO_RULE, BatchedTensor, active_levels, along, batched, in_place, in_place_as,
                           levels_of, no_rule, refuse_batched_other, with_levels)
from tape._broadcast import reduce_broadcast

from tape._dtypes import scalar_type_name
from tape._factories import rand, randn
from tape._grad_mode import no_grad
from tape._record import binary, record, sum_to
from tape._node import keep_arguments, keep_arguments_of
from tape._registry import SAVES_ROW, SAVES_X, RowTensor, defop, lookup, native_helper
from tape._tape import DATA_FIELD, RETAIN, StaleView, state, where
from tape._tensor import Tensor, _dead_token, _norm_dim, new_tensor, warn_once, wrap_value

from ops import elementwise, linalg
from ops.selection import masked_fill
from ops.elementwise import add, div, mul, requires_grad, sub
from ops.shape import (_INDEX, _SLICE, _gather, _index_key, _no_gradient, _no_gradient_native, _indexed, _region,
                       _strided_gather, _strided_view, advanced_indexing_arguments, as_strided_op, getitem, reshape,
                       strided_offsets, view_region)

_ZERO = defop("zero_", "ZeroBackward0", 1, vjp=_no_gradient, native=_no_gradient_native)
_FILL = defop("fill_", "FillBackward2", 1, vjp=_no_gradient, native=_no_gradient_native)
_UNIFORM = defop("uniform_", "UniformBackward0", 1, vjp=_no_gradient, native=_no_gradient_native)
_NORMAL = defop("normal_", "NormalBackward0", 1, vjp=_no_gradient, native=_no_gradient_native)


_NO_GRAD_VIEW_MADE = "A view was created in no_grad mode"
_WITH_GRAD = " with grad mode enabled"
_NO_GRAD_VIEW = (f"{_NO_GRAD_VIEW_MADE} and is being modified inplace{_WITH_GRAD}. Given that this use case is "
                 "ambiguous and error-prone, it is forbidden. You can clarify your code by moving both the view and "
                 "the inplace either both inside the no_grad block (if you don't want the inplace to be tracked) or "
                 "both outside (if you want the inplace to be tracked).")


def _check_inplace(t, recording):
    """PyTorch's refusals of an in-place op on t, before anything changes."""
    base = t._view_of
    # a view requires grad when its base does, in PyTorch even when made before
    if base is not None and state.tape.grad_enabled and (recording or base._rg):
        if t._made_in_no_grad:
            raise RuntimeError(_NO_GRAD_VIEW)
        _refuse_view_of_leaf(base)
    if recording and t._rg and t.is_leaf:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")


def _refuse_view_of_leaf(base):
    if base._rg and base.is_leaf:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place "
                           "operation.")


def _write(t, res):
    """Write `res` (a Tensor of t's shape) into t's storage and bump t's version."""
    if res.shape != t.shape:
        raise RuntimeError(f"output with shape {list(t.shape)} doesn't match the broadcast shape "
                           f"{list(res.shape)}")
    if not np.can_cast(res.dtype, t.dtype, "same_kind"):
        raise RuntimeError(f"result type {scalar_type_name(res.dtype)} can't be cast to the desired output type "
                           f"{scalar_type_name(t.dtype)}")
    t.bump_version()
    if type(t._value) is float:  # a 0-d float64 tensor's storage, which nothing views
        t._value = float(res.item())
    else:
        np.copyto(t._value, res._array(), casting="same_kind")
        if t._data_of is not None:
            t._data_of._stored_through_data()


def _rebind(t, res):
    """Give t the row that recorded `res`; the row's value lives on in keep.
    The row t leaves is no longer t's: the graphs that use it keep it (and
    its value), and it dies with them rather than with t. A retained
    gradient follows t, as PyTorch's retains_grad hook moves to the tensor's
    new grad_fn."""
    retains = t.retains_grad
    old_tape, old_row = where(t)
    if retains:
        old_tape.flags[old_row] &= ~np.uint8(RETAIN)
        del old_tape.retained[old_row]
    if old_tape is not None and old_tape.owners[old_row] is t:
        if type(t._value) is not float:
            old_tape.keep.setdefault(old_row, t._value)
        old_tape.owners[old_row] = _dead_token()
    tp, r = where(res)
    tp.owners[r] = t._value if type(t._value) is float else t
    if type(res._value) is not float:
        # a value the row could not read in place (not C-contiguous) is kept
        # as the contiguous copy that the row points to; replacing that copy
        # left the row reading freed memory
        tp.keep.setdefault(r, res._value)
    ep = tp.epoch_of(r)
    t._ep, t._row, t._rg = ep, r, True
    if t._vc is not None:
        t._vc.add_row(ep, r)
    if retains:
        t.retain_grad()


def _saves_self(name, other=None):
    """Whether op `name` of (t, other) saves t's value: for t's own gradient,
    or for other's when other requires grad."""
    saves_for = lookup(name).saves_for
    return bool(saves_for[0] & SAVES_X or requires_grad(other) and saves_for[1] & SAVES_X)


# Note [Original self]
# ~~~~~~~~~~~~~~~~~~~~~
# An in-place op on a tensor t owning its storage whose backward reads t's
# value saves t's value before the write (PyTorch's original self, a clone
# that is no node). Here the op's row reads t's old row r directly, which
# from then on reads a private copy of the value (a 0-d float64's is its
# sval already, which the write leaves). The write makes r dirty, and r is
# fresh from the op's first row on (fresh_from): the consumers that saved r
# earlier raise PyTorch's error; the op's row, and the rows its backward
# records under create_graph, read the copy.
def _on_original(t, compute, args):
    """compute(t's original self, *args), written into t (Note [Original self])."""
    tp, r = where(t)
    value = t._value
    if type(value) is float:
        copy = value * 1.0
    else:
        copy = tp.keep.get(r)
        if copy is None or copy is value:  # else the row reads a copy of its own already
            copy = tp.keep[r] = np.array(value, copy=True, order="C")
            if copy.ndim:
                tp.m_ptr[r] = id(copy) + DATA_FIELD
    original = new_tensor(copy, True)
    original._ep, original._row = tp.epoch_of(r), r
    ep, first = tp.ep, tp.n
    res = compute(original, *args)
    _write(t, res)
    if any(a is t for a in args):
        return res  # the op saved t's row as its other operand too, which the write changed
    if ep.remap is not None:  # compacted meanwhile: the rows kept below the op's first
        first = int(np.count_nonzero(ep.remap[:first] >= 0))
    tp.m_fresh_from[where(original)[1]] = first
    return res


def _apply(t, compute, *args, saves_self=False, fills=False):
    """t changed in place to compute(t, *args), recorded as PyTorch records
    it: on a tensor owning its storage, the op's node becomes t's grad_fn; on
    a view, the op runs on the view's elements of its base, whose grad_fn
    becomes CopySlices of its old one and the op (Note [In-place ops on
    views]). Either way every live view of the storage follows. An op that
    `fills` t with one value may write an expanded tensor, as in PyTorch."""
    recording = state.tape.grad_enabled and (t._rg or any(requires_grad(a) for a in args))
    if t._refused_view is not None and (recording or t._rg and state.tape.grad_enabled):
        name, i, why = t._refused_view
        made = _NO_GRAD_VIEW_MADE if name is None else f"Output {i} of {name} is a view"
        raise RuntimeError(f"{made} and is being modified inplace{_WITH_GRAD if name is None else ''}. {why}")
    if not fills:
        _check_overlap(t)
    _check_inplace(t, recording)
    base = t._view_of
    if not recording:
        with no_grad():
            res = compute(t, *args)
        _write(t, res)  # a leaf leaves its row, dirty for the graphs that saved it
        rebound = None
    elif base is None:
        if t._rg and saves_self:
            res = _on_original(t, compute, args)
        else:
            # a constant's old value must survive the write for the VJP that saved it
            res = compute(t if t._rg else new_tensor(wrap_value(np.array(t._value, copy=True))), *args)
            _write(t, res)
        _rebind(t, res)
        rebound = t
    else:
        _apply_to_view(t, base, compute, args, saves_self)
        rebound = base
    _rebase_sharers(t._vc, rebound)
    return t


# Note [In-place ops on views]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# An in-place op on a view v of base b, recorded, is PyTorch's rebase: b's
# new row is CopySlices(b's old row, op(v's elements of b's old row)), whose
# gradient is b's with v's region taken out for the first input and v's
# region for the second (put_vjp). The op reads v's elements through a
# hidden as_strided row of b's old row (a copy of them when its backward
# reads them), not through v's own row: the node of v's old row, and the
# hooks on it, are not on the new path, as in PyTorch, where CopySlices runs
# the op's node itself: that row and the CopySlices row are the two halves
# of PyTorch's CopySlices::apply (the gradient's view region through the
# op's node, the rest to the base), no node of their own. Then every live
# tensor sharing the storage reads the new value (_rebase_sharers), v among
# them: a view becomes stale (tape._tape.StaleView) and, as PyTorch
# regenerates a view's grad_fn when it is next read after its version
# changed, takes a fresh row, AsStridedBackward0 of its base's row then, when
# its row is next asked for (a write costs no row per live view); a tensor
# owning its storage keeps its row and grad_fn, which reads the new value
# for the consumers recorded from then on (fresh_from, Note [Tape layout]).
def _apply_to_view(t, base, compute, args, saves_self):
    region = view_region(base._value, t._value)
    if base._rg:
        value = np.array(t._value, copy=True) if saves_self else t._value
        x = record(as_strided_op(region), value, (base,), ints=region, hidden=True)
    else:
        x = new_tensor(wrap_value(np.array(t._value, copy=True)))
    res = compute(x, *args)
    _write(t, res)
    # the op's result is the view's new value in PyTorch, which a later write changes
    base._vc.add_row(res._ep, res._row)
    ints = region + t.shape if type(region) is tuple else _flat_region_ints(region, t.shape)
    copy = record(_VIEW_COPY_SLICES if type(region) is tuple else _VIEW_COPY_SLICES_AT, base._value,
                  (base if base._rg else None, res), ints=ints)
    _rebind(base, copy)


# references to a tensor in _rebase_sharers's loop when nothing else holds
# it: its local name and getrefcount's argument
_UNUSED_REFS = 2


def _rebase_sharers(vc, rebound):
    """After a write into the storage of version counter vc: each tensor
    sharing it that requires grad, but `rebound` (which has its new row),
    reads the new value in its uses from now on, which are not those of a
    value modified since it was saved (the graphs that saved the old value
    raise): a view through a fresh row, AsStridedBackward0 of its base's
    row, made when the view is next used (StaleView); any other through
    its own row, whose grad_fn stays, and which the next write makes dirty
    again. Tensors that only the tape holds (an op's
    internal views) cannot be used again."""
    if vc is None:
        return
    live = []
    for ref in vc.views:
        v = ref()
        if v is None or v is rebound or type(v._ep) is StaleView:  # a stale view stays so
            continue
        tp, r = where(v)
        if sys.getrefcount(v) > _UNUSED_REFS + (r >= 0 and tp.owners[r] is v):
            live.append(v)
    for v in live:
        if v._view_of is None and v._rg and not v.is_leaf:
            tp, r = where(v)
            tp.reread(r, v._value)
            vc.add_row(tp.epoch_of(r), r)
    for v in live:
        base = v._view_of
        if base is not None and base._rg and type(v._ep) is not StaleView:
            if v._ep is None:  # no row to name until then: one now
                _regenerate(v)
            else:
                v._ep = StaleView(v._ep, v._row, _regenerate)


def _regenerate(v):
    """A view's fresh row after a write into its storage (StaleView):
    AsStridedBackward0 of its base's current row."""
    base = v._view_of
    region = view_region(base._value, v._value)
    _rebind(v, record(as_strided_op(region), v._value, (base,), ints=region))


def _overlaps(v):
    """Whether value v has elements at one memory location (an expanded tensor's)."""
    return type(v) is np.ndarray and v.size and any(s == 0 and d > 1 for s, d in zip(v.strides, v.shape))


def _check_overlap(t):
    """PyTorch's refusal to write into an expanded tensor, before anything
    changes (NumPy's broadcast view is read-only: a ValueError, late)."""
    if _overlaps(t._value):
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor "
                           "refers to a single memory location. Please clone() the tensor before "
                           "performing the operation.")


# PyTorch's refusals of another tensor batched where self is not (Note
# [Batched tensors]) name the op in one of three ways
_ARITHMETIC = in_place_as("inplace arithmetic")


def _at_level(name):
    return in_place_as(f"aten::{name}", at_level=True)


@declare(methods=("add_", "__iadd__"), operands=2, batch=in_place_as(None))
def add_(t, other, *, alpha=1):
    return _apply(t, lambda x, y: add(x, y, alpha=alpha), other)


@declare(methods=("sub_", "__isub__", "subtract_"), operands=2, batch=_ARITHMETIC)
def sub_(t, other, *, alpha=1):
    return _apply(t, lambda x, y: sub(x, y, alpha=alpha), other)


@declare(methods=("mul_", "__imul__", "multiply_"), operands=2, batch=_ARITHMETIC)
def mul_(t, other):
    return _apply(t, mul, other, saves_self=_saves_self("mul", other))


@declare(methods=("div_", "__itruediv__", "divide_"), operands=2, batch=_ARITHMETIC)
def div_(t, other):
    return _apply(t, div, other, saves_self=_saves_self("div", other))


@declare(function=False, methods=("pow_", "__ipow__"), operands=2, batch=_at_level("pow_"))
def pow_(t, exponent):
    saves_self = _saves_self("pow" if isinstance(exponent, Tensor) else "pow_scalar", exponent)
    return _apply(t, elementwise.pow, exponent, saves_self=saves_self)


@declare(function=False, methods=("remainder_", "__imod__"), operands=2, batch=_at_level("remainder_"))
def remainder_(t, other):
    saves_self = isinstance(other, Tensor) and _saves_self("remainder", other)
    return _apply(t, elementwise.remainder, other, saves_self=saves_self)


@declare(function=False, operands=3, batch=_at_level("clamp_"))
@declare(name="clip_", function=False, operands=3, batch=_at_level("clip_"))
def clamp_(t, min=None, max=None):
    return _apply(t, lambda x: elementwise.clamp(x, min, max), saves_self=_saves_self("clamp"))


@declare(function=False, methods=("floor_divide_", "__ifloordiv__"), operands=2,
         batch=_at_level("floor_divide_"))
def floor_divide_(t, other):
    # recorded as PyTorch records it: a node whose backward raises
    return _apply(t, elementwise.floor_divide, other)


# the backwards of these read none of self's values (Note [Elementwise ops
# of three inputs]), so self needs no saved copy
@declare(function=False, operands=3, batch=_at_level("addcmul_"))
def addcmul_(t, tensor1, tensor2, *, value=1):
    return _apply(t, lambda x, a, b: elementwise.addcmul(x, a, b, value=value), tensor1, tensor2)


@declare(function=False, operands=3, batch=_at_level("addcdiv_"))
def addcdiv_(t, tensor1, tensor2, *, value=1):
    return _apply(t, lambda x, a, b: elementwise.addcdiv(x, a, b, value=value), tensor1, tensor2)


@declare(function=False, operands=3, batch=_at_level("lerp_"))
def lerp_(t, end, weight):
    # a tensor weight's gradient reads self (Note [Elementwise ops of three inputs])
    return _apply(t, elementwise.lerp, end, weight, saves_self=isinstance(weight, Tensor) and requires_grad(weight))


def _same_shape(t, result):
    """result, which an in-place product writes into t, or PyTorch's error:
    such an op does not broadcast t."""
    if result.shape != t.shape:
        raise RuntimeError(f"Bad in-place call: input tensor size {list(t.shape)} and output tensor size "
                           f"{list(result.shape)} should match")
    return result


def _product_written(op, t, a, b, beta, alpha):
    """An in-place product added to t (addmm_, ...): op out of place, written into t."""
    return _apply(t, lambda x, a, b: _same_shape(x, op(x, a, b, beta=beta, alpha=alpha)), a, b)


def _product_written_rule(op, name):
    """The batching rule of an in-place product: op (whose rule is
    `composite`) on the batched tensors, copied into self; refused, as
    PyTorch refuses it, where another tensor is batched and self is not."""
    def rule(_, args):
        t, a, b = args.args
        refuse_batched_other(t, [a, b], f"aten::{name}", at_level=True)
        # op reads a copy of self: its views of self (input expanded) would
        # make the write into self a write into a viewed tensor
        return t.copy_(_same_shape(t, op(t.clone(), a, b, **args.kwargs)))
    return rule


@declare(function=False, operands=3, batch=_product_written_rule(linalg.addmm, "addmm_"))
def addmm_(t, mat1, mat2, *, beta=1, alpha=1):
    return _product_written(linalg.addmm, t, mat1, mat2, beta, alpha)


@declare(signature="input, mat, vec, *, beta=1, alpha=1", operands=3,
         batch=_product_written_rule(linalg.addmv, "addmv_"))
def addmv_(t, mat, vec, *, beta=1, alpha=1):
    return _product_written(linalg.addmv, t, mat, vec, beta, alpha)


@declare(function=False, operands=3, batch=_product_written_rule(linalg.addbmm, "addbmm_"))
def addbmm_(t, batch1, batch2, *, beta=1, alpha=1):
    return _product_written(linalg.addbmm, t, batch1, batch2, beta, alpha)


@declare(function=False, operands=3, batch=_product_written_rule(linalg.baddbmm, "baddbmm_"))
def baddbmm_(t, batch1, batch2, *, beta=1, alpha=1):
    return _product_written(linalg.baddbmm, t, batch1, batch2, beta, alpha)


def _inplace_unary(op):
    saves_self = _saves_self(op.__name__)

    def inplace(t):
        return _apply(t, op, saves_self=saves_self)
    inplace.__name__ = op.__name__ + "_"
    return inplace


# the in-place forms of the elementwise ops that have one, under their
# names and aliases (abs_, absolute_), as Tensor methods
for _decl in [d for d in DECLARATIONS if d.inplace]:
    declare(_inplace_unary(_decl.op), function=False, aliases=tuple(f"{a}_" for a in _decl.aliases),
            batch=in_place)


@declare(name="round_", function=False, batch=in_place)
def _round_(t, *, decimals=0):
    return _apply(t, lambda x: elementwise.round(x, decimals=decimals))


def _copy_array(x, src):
    out = np.empty(np.broadcast_shapes(np.shape(x), np.shape(src)), np.result_type(x))
    out[...] = src
    return out


# copy_'s result is src broadcast to the tensor, in the tensor's dtype: the
# old value gets no gradient, src all of it
_copy = binary(defop("copy", "CopyBackwards", 2, partials=("0", "1")), lambda x, src: src * 1.0,
               _copy_array)


@declare(function=False, operands=2, batch=_ARITHMETIC)
def copy_(t, other):
    """Write other (broadcast, cast to t's dtype) into t; differentiable in other."""
    src = other
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'src' must be Tensor, not {type(src).__name__}")
    if not np.can_cast(src.dtype, t.dtype, "same_kind"):  # copy_ casts any dtype, floats to ints by truncation
        src = src.to(t.dtype)
    return _apply(t, _copy, src)


def _constant_op(opdef, fill):
    def compute(x):
        value = wrap_value(np.full(x.shape, fill, x.dtype))
        if x._rg and state.tape.grad_enabled:
            return record(opdef, value, (x,))
        return new_tensor(value)
    return compute


def _random_op(opdef, draw):
    """A fill with fresh random values, draw(x) (from the generator that
    tape.manual_seed seeds, drawn once the in-place checks have passed),
    recorded, when x requires grad, as PyTorch's node whose gradient is none."""
    def compute(x):
        value = wrap_value(np.asarray(draw(x), x.dtype))
        if x._rg and state.tape.grad_enabled:
            return record(opdef, value, (x,))
        return new_tensor(value)
    return compute


# PyTorch's text under vmap's default randomness="error", the only one its rules see
_RANDOM = no_rule("vmap: called random operation while in randomness error mode. Please either use the 'same' or "
                  "'different' randomness flags on vmap or perform the randomness operation out of vmap")


@declare(function=False, batch=_RANDOM)
def uniform_(t, from_=0, to=1):
    """Fill t with numbers drawn uniformly from [a, b), in place: weight
    initialisation, reproducible after tape.manual_seed.

    >>> import tape
    >>> tape.manual_seed(0)
    >>> w = tape.empty(3).uniform_(-1, 1)
    >>> bool(((w >= -1) & (w < 1)).all())
    True
    """
    a, b = from_, to  # PyTorch's from= cannot be a Python parameter's name

    def draw(x):
        values = rand(*x.shape, dtype=x.dtype)  # PyTorch's error for an integer tensor comes first
        if a > b:
            raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={a:g} > to={b:g}")
        return a + (b - a) * values._array()
    return _apply(t, _random_op(_UNIFORM, draw))


@declare(function=False, batch=_RANDOM)
def normal_(t, mean=0, std=1):
    """Fill t with numbers drawn from the normal distribution of `mean` and
    `std`, in place: weight initialisation, reproducible after tape.manual_seed.

    >>> import tape
    >>> tape.manual_seed(0)
    >>> tape.zeros(2, 3).normal_(0.0, 0.01).shape
    (2, 3)
    """
    def draw(x):
        values = randn(*x.shape, dtype=x.dtype)
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
        return mean + std * values._array()
    return _apply(t, _random_op(_NORMAL, draw))


@declare(signature="input", batch=in_place)
def zero_(t):
    return _apply(t, _constant_op(_ZERO, 0), fills=True)


def _check_fill_value(value):
    if value.ndim != 0:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                           f"{value.ndim} dimensions.")


_FILL_IN_PLACE = in_place_as("fill_")


def _batched_fill(op, args):
    """fill_ inside vmap; a batched value (0-d in each sample) is copied,
    aligned to self, as one value per sample."""
    value = args.arguments["value"]
    if isinstance(value, BatchedTensor):
        _check_fill_value(value)
        return _FILL_IN_PLACE(copy_, args)
    return _FILL_IN_PLACE(op, args)


@declare(signature="input, value", operands=2, batch=_batched_fill)
def fill_(t, value):
    if isinstance(value, Tensor):
        _check_fill_value(value)
        if value._rg:  # differentiable in the value: a copy of it, broadcast
            return _apply(t, _copy, value, fills=True)
        value = value.item()
    return _apply(t, _constant_op(_FILL, value), fills=True)


def _batched_masked_fill(op, args):
    """masked_fill_ inside vmap: PyTorch names its refusal of a batched mask
    as arithmetic's, of a batched value by the op."""
    t, mask = args.arguments["t"], args.arguments["mask"]
    own = t.levels if isinstance(t, BatchedTensor) else ()
    mask_beyond = any(lv not in own for lv in levels_of([mask]))
    return (_ARITHMETIC if mask_beyond else _MASKED_FILL_AT_LEVEL)(op, args)


_MASKED_FILL_AT_LEVEL = _at_level("masked_fill_")


@declare(operands=3, batch=_batched_masked_fill)
def masked_fill_(t, mask, value):
    """Fill t where `mask` (a bool tensor that broadcasts to t) holds with
    `value` (a number or a 0-d tensor), in place; differentiable in both.

    >>> import tape
    >>> x = tape.zeros(3)
    >>> x.masked_fill_(tape.tensor([False, True, True]), 2.).tolist()
    [0.0, 2.0, 2.0]
    """
    return _apply(t, lambda x, v: masked_fill(x, mask, v), value)


# x[key] = v, out of place: x with the region `key` selects replaced by v,
# which broadcasts to the region. The region is a strided descriptor for
# basic indexing (CopySlices, ints = descriptor then the region's shape) or a
# flat index map for advanced indexing (IndexPutBackward0, ints = the map,
# the region's shape, its length). x's gradient is g with the region zeroed;
# v's is g's region, summed back over the dims v broadcasts along, as
# PyTorch's engine sums a gradient to its input's shape. index_put with
# accumulate=True adds v into the region instead (repeated positions add up),
# so x's gradient is all of g (`overwrites` False).
@native_helper
def put_vjp(G, GA, GB, offs, region, ysh, overwrites):
    if GA.size:
        overwritten = np.zeros(G.size, np.bool_)
        if overwrites:
            for k in range(offs.size):
                overwritten[offs[k]] = True
        for i in range(G.size):
            if not overwritten[i]:
                GA[i] += G[i]
    if GB.size == offs.size:
        for k in range(GB.size):
            GB[k] += G[offs[k]]
    elif GB.size:
        FB = np.empty(offs.size)
        for k in range(offs.size):
            FB[k] = G[offs[k]]
        reduce_broadcast(FB, GB, region, ysh, 1.0)


def _copy_slices_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    nd = (ints.size - 1) // 2
    put_vjp(G, GA, GB, strided_offsets(ints[1 + nd:], ints[:1 + nd]), ints[1 + nd:], ysh, True)


def _index_put_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    nd = ints[ints.size - 1]
    end = ints.size - 1 - nd
    put_vjp(G, GA, GB, ints[:end], ints[end:ints.size - 1], ysh, True)


def _index_put_accumulate_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    nd = ints[ints.size - 1]
    end = ints.size - 1 - nd
    put_vjp(G, GA, GB, ints[:end], ints[end:ints.size - 1], ysh, False)


def _copy_slices_vjp(ctx, g):
    ints = tuple(ctx.ints.tolist())
    nd = (len(ints) - 1) // 2
    return _put_vjp(ctx, g, ints[:1 + nd], ints[1 + nd:])


def _index_put_vjp(ctx, g):
    ints = ctx.ints
    end = len(ints) - 1 - int(ints[-1])
    return _put_vjp(ctx, g, ints[:end], tuple(ints[end:-1].tolist()))


def _index_put_accumulate_vjp(ctx, g):
    ints = ctx.ints
    end = len(ints) - 1 - int(ints[-1])
    return _put_vjp(ctx, g, ints[:end], tuple(ints[end:-1].tolist()), overwrites=False)


def _flat_region_ints(where_, shape):
    """The ints of a row putting into a flat region (Note above)."""
    return np.concatenate((where_, shape, (len(shape),))).astype(np.int64)


def _put_vjp(ctx, g, where_, shape, overwrites=True):
    gx = (_put(g, where_, shape, 0.0) if overwrites else g) if ctx.needs[0] else None
    if not ctx.needs[1]:
        return (gx, None)
    if isinstance(where_, tuple):
        gv = _strided_gather(_SLICE, g, where_, shape)
    else:
        gv = _gather(_INDEX, g, where_, shape)
    return (gx, sum_to(gv, ctx.y_shape))


_COPY_SLICES = defop("copy_slices", "CopySlices", 2, vjp=_copy_slices_vjp, native=_copy_slices_native)
# the base of a view changed in place: CopySlices of the in-place op's result,
# whose node it runs (Note [In-place ops on views]); the region flat positions
# where the base's memory is not in C order
_VIEW_COPY_SLICES = defop("view_copy_slices", "CopySlices", 2, vjp=_copy_slices_vjp,
                          native=_copy_slices_native, runs_second=True)
_VIEW_COPY_SLICES_AT = defop("view_copy_slices_at", "CopySlices", 2, vjp=_index_put_vjp,
                             native=_index_put_native, runs_second=True)
_PUT_SAVED = (("accumulate", "arg"), ("indices", RowTensor(lambda row, arguments: arguments["indices"], many=True)))
_INDEX_PUT = defop("index_put_", "IndexPutBackward0", 2, saves=SAVES_ROW, vjp=_index_put_vjp,
                   native=_index_put_native, saved=_PUT_SAVED)
_INDEX_PUT_ACCUMULATE = defop("index_put_accumulate", "IndexPutBackward0", 2, saves=SAVES_ROW,
                              vjp=_index_put_accumulate_vjp, native=_index_put_accumulate_native, saved=_PUT_SAVED)
# scatter and index_add are puts at flat positions too, with nodes of their own
_SCATTER_SAVED = (("dim", "arg"), ("index", RowTensor(lambda row, arguments: arguments["index"])))
_SCATTER_SRC = defop("scatter_src", "ScatterBackward0", 2, saves=SAVES_ROW, vjp=_index_put_vjp,
                     native=_index_put_native, saved=_SCATTER_SAVED)
_SCATTER_VALUE = defop("scatter_value", "ScatterBackward1", 2, saves=SAVES_ROW, vjp=_index_put_vjp,
                       native=_index_put_native, saved=_SCATTER_SAVED)
_SCATTER_ADD = defop("scatter_add", "ScatterAddBackward0", 2, saves=SAVES_ROW, vjp=_index_put_accumulate_vjp,
                     native=_index_put_accumulate_native, saved=_SCATTER_SAVED)
# scatter with reduce=: recorded, and refused by backward, as PyTorch's
_SCATTER_REDUCE = defop("scatter_reduce_legacy", "NotImplemented", 2,
                        not_differentiable="derivative for aten::scatter is not implemented")
_INDEX_ADD = defop("index_add", "IndexAddBackward0", 2, saves=SAVES_ROW, vjp=_index_put_accumulate_vjp,
                   native=_index_put_accumulate_native, saved=(
                       ("alpha", "scalar"), ("dim", "arg"),
                       ("index", RowTensor(lambda row, arguments: arguments["index"])), ("source_dim", "arg")))


def _put(x, where_, shape, v, kept=None, opdef=None):
    """x with the region (a descriptor or a flat index map) set to v (a Tensor
    that broadcasts to the region's shape, or a number). A flat map's row is
    `opdef` (index_put_'s, or scatter's), its node showing the arguments
    `kept` (index_put's: accumulate and the advanced index's indices,
    advanced_indexing_arguments)."""
    value = np.array(x._array(), copy=True, order="C")
    v_value = v._array() if isinstance(v, Tensor) else v
    if isinstance(where_, tuple):
        _strided_view(value, where_, shape)[...] = v_value  # value is C-contiguous: a view into it
        opdef, ints = _COPY_SLICES, where_ + tuple(shape)
    else:
        value.reshape(-1)[where_] = np.broadcast_to(v_value, shape).reshape(-1)
        opdef, ints = opdef or _INDEX_PUT, _flat_region_ints(where_, shape)
    rgv = isinstance(v, Tensor) and v._rg
    if not ((x._rg or rgv) and state.tape.grad_enabled):
        return new_tensor(wrap_value(value))
    c = 0.0 if isinstance(v, Tensor) else float(v)
    out = record(opdef, wrap_value(value), (x, v if isinstance(v, Tensor) else None), c=c, ints=ints)
    return out if opdef is _COPY_SLICES else keep_arguments_of(out, kept or _PLAIN_PUT)


# what the node of x[key] = v shows (PyTorch's index_put_ of the key's indices)
_PLAIN_PUT = {"accumulate": False, "indices": ()}


def _put_sum(x, where_, shape, v, kept, opdef=None):
    """x with tensor v (broadcast to the region's shape) added into the
    region at flat positions where_, repeated ones adding up: index_put
    with accumulate=True, scatter_add and index_add (`opdef`, whose node
    shows `kept`)."""
    value = np.array(x._array(), copy=True, order="C")
    np.add.at(value.reshape(-1), where_, np.broadcast_to(v._array(), shape).reshape(-1))
    if not ((x._rg or v._rg) and state.tape.grad_enabled):
        return new_tensor(wrap_value(value))
    out = record(opdef or _INDEX_PUT_ACCUMULATE, wrap_value(value), (x, v), ints=_flat_region_ints(where_, shape))
    return keep_arguments_of(out, kept)


def _fit(v, shape):
    """v, which broadcasts to the region's shape as NumPy assignment does
    (leading 1-dims of v beyond the region's are dropped), or PyTorch's error."""
    extra = v.ndim - len(shape)
    fits = extra <= 0 or all(d == 1 for d in v.shape[:extra])
    trimmed = v.shape[extra:] if extra > 0 else v.shape
    if fits:
        try:
            fits = np.broadcast_shapes(trimmed, shape) == tuple(shape)
        except ValueError:
            fits = False
    if not fits:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(v.shape)} cannot be broadcast "
                           f"to indexing result of shape {list(shape)}")
    if extra > 0:
        v = reshape(v, trimmed)
    return v


def _batched_setitem(op, args):
    """t[key] = value inside vmap: the key indexes each sample (after a
    full slice of each vmap dim); a batched value takes t's vmap dims and,
    after them, the dims it broadcasts over in the region."""
    t, key, value = args.arguments["t"], args.arguments["key"], args.arguments["value"]
    refuse_batched_other(t, [value], "inplace arithmetic")
    nb = len(t.levels)
    phys_key = _batched_key(key, nb)
    if isinstance(value, BatchedTensor):
        region = t.phys[phys_key].ndim - nb
        shape = value.shape[max(0, value.ndim - region):]
        v = with_levels(value, t.levels)
        value = v.reshape(v.shape[:nb] + (1,) * (region - len(shape)) + shape)
    op(t.phys, phys_key, value)


def _batched_key(key, nb):
    return (slice(None),) * nb + (key if isinstance(key, tuple) else (key,))


def _dtypes_differ(t, value):
    return RuntimeError(f"Index put requires the source and destination dtypes match, got "
                        f"{scalar_type_name(t.dtype)} for the destination and {scalar_type_name(value.dtype)} "
                        "for the source.")


def _fills_a_mask(key, value):
    """Whether t[key] = value is PyTorch's masked_fill_ (of the view the
    key's basic parts select), which casts a 0-d value: a key whose one
    tensor index is a bool mask (index_put_ takes the value's dtype as it is)."""
    arrays = [k for k in (key if isinstance(key, tuple) else (key,)) if isinstance(k, np.ndarray)]
    return value.ndim == 0 and len(arrays) == 1 and arrays[0].dtype == np.bool_


@declare(function=False, methods=("__setitem__",), operands=2, batch=_batched_setitem)
def setitem(t, key, value):
    """t[key] = value: an in-place op, differentiable in both t and value."""
    given = key
    key, selected, opdef = _indexed(t, key)
    shape = np.shape(selected)
    if isinstance(value, Tensor):
        if opdef is _INDEX and value.dtype != t.dtype and not _fills_a_mask(key, value):
            raise _dtypes_differ(t, value)
        value = _fit(value, shape)
    elif not isinstance(value, (int, float, bool, np.number)):
        raise TypeError(f"can't assign a {type(value).__name__} to a Tensor")
    recording = state.tape.grad_enabled and (t._rg or requires_grad(value))
    if recording and t._rg and t.is_leaf:  # PyTorch writes through a view of t here
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    if opdef is not _INDEX and _overlaps(t._value):
        # the region of an expanded tensor may be written where the whole may
        # not: through its view, as PyTorch writes every basic-indexing region
        region = getitem(t, key)
        _apply(region, _copy if isinstance(value, Tensor) else _constant_op(_FILL, value),
               *((value,) if isinstance(value, Tensor) else ()))
        return
    _check_overlap(t)
    if not recording and isinstance(t._value, np.ndarray) and t._vc is None and not t._rg:
        t.bump_version()  # first: a replay's undo log keeps the value before the write
        t._value[key] = value._array() if isinstance(value, Tensor) else value
        return
    where_ = _region(t.shape, key, opdef)
    indices = () if isinstance(where_, tuple) else advanced_indexing_arguments(t.shape, _index_key(given))["indices"]
    _apply(t, lambda x, v: _put(x, where_, shape, v, {"accumulate": False, "indices": indices}), value)


def _checked_indices(t, indices, values, name):
    """index_put's `indices` (a tuple or list of index tensors) as a key,
    and `values`, with PyTorch's errors."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"{name}(): argument 'indices' (position 1) must be tuple of Tensors, not "
                        f"{type(indices).__name__}")
    for k, index in enumerate(indices):
        if not isinstance(index, Tensor):
            raise TypeError(f"expected Tensor as element {k} in argument 0, but got {type(index).__name__}")
    if not isinstance(values, Tensor):
        raise TypeError(f"{name}(): argument 'values' (position 2) must be Tensor, not {type(values).__name__}")
    if values.dtype != t.dtype:
        raise _dtypes_differ(t, values)
    spanned = sum(i.ndim if i.dtype in (np.bool_, np.uint8) else 1 for i in indices)  # a mask, one per dim
    if spanned > t.ndim:
        raise IndexError(f"too many indices for tensor of dimension {t.ndim} (got {spanned})")
    return tuple(indices)


def _put_values(t, key, values, accumulate):
    """compute(x, v) for _apply: x with `values` put (or with `accumulate`
    added) at the flat positions of t that `key` selects; and `values`
    broadcast to their shape (Note above)."""
    normalized, selected, _ = _indexed(t, key)
    shape = np.shape(selected)
    where_ = _region(t.shape, normalized, _INDEX)
    kept = {"accumulate": accumulate, "indices": advanced_indexing_arguments(t.shape, _index_key(key))["indices"]}
    put = _put_sum if accumulate else _put
    return (lambda x, v: put(x, where_, shape, v, kept)), _fit(values, shape)


def _index_put_rule(op, args):
    """index_put(_) of each sample, for indices that are not batched: the
    op on the physical values, after a full slice of each vmap dim; the
    values take the input's vmap dims and, after them, the dims they
    broadcast over in the region (as _batched_setitem)."""
    a = args.arguments
    t, values, accumulate = a["input"], a["values"], a.get("accumulate", False)
    key = _checked_indices(t, a["indices"], values, op.__name__)
    in_place = op.__name__.endswith("_")
    if in_place:
        refuse_batched_other(t, [values, *key], op.__name__)
    levels = levels_of([t, values, *key])
    x = with_levels(t, levels)
    phys_key = (slice(None),) * len(levels) + key if not levels_of(key) else _per_sample_key(key, levels)
    region = x[phys_key].ndim - len(levels)
    v = with_levels(values, levels)
    shape = values.shape[max(0, values.ndim - region):]
    v = v.reshape(v.shape[:len(levels)] + (1,) * (region - len(shape)) + shape)
    compute, v = _put_values(x, phys_key, v, accumulate)
    if in_place:
        _apply(x, compute, v)
        return t
    return batched(compute(x, v), levels)


def _per_sample_key(key, levels):
    """A physical key for index tensors some of which are batched: an arange
    per vmap dim, then each index with its vmap dims, all broadcast
    together, so that sample b's positions index sample b."""
    if any(i.dtype in (np.bool_, np.uint8) for i in key):
        DYNAMIC_SHAPE(getitem, None)
    sizes = [n for lv, n in active_levels() if lv in levels]
    nb = len(levels)
    rank = max(i.ndim for i in key)
    aranges = tuple(np.arange(n).reshape((1,) * j + (n,) + (1,) * (nb - 1 - j + rank)) for j, n in enumerate(sizes))
    indices = tuple(with_levels(i, levels)._array() for i in key)
    return aranges + tuple(i.reshape(i.shape[:nb] + (1,) * (rank + nb - i.ndim) + i.shape[nb:]) for i in indices)


@declare(signature="input, indices, values, accumulate=False", operands=3, batch=_index_put_rule)
def index_put(input, indices, values, accumulate=False):
    """input with `values` put at the positions `indices` (a tuple of index
    tensors, as in input[indices]) select, or added there with `accumulate`
    (repeated positions add up); differentiable in input and values.

    >>> import tape
    >>> tape.zeros(3).index_put((tape.tensor([0, 0, 2]),), tape.tensor(1.), accumulate=True).tolist()
    [2.0, 0.0, 1.0]
    """
    compute, v = _put_values(input, _checked_indices(input, indices, values, "index_put"), values, accumulate)
    return compute(input, v)


@declare(signature="input, indices, values, accumulate=False", operands=3, batch=_index_put_rule)
def index_put_(input, indices, values, accumulate=False):
    """index_put, in place: input is changed and returned."""
    compute, v = _put_values(input, _checked_indices(input, indices, values, "index_put_"), values, accumulate)
    _apply(input, compute, v)
    return input


def _index_of(name, index):
    a = index._array() if isinstance(index, Tensor) else np.asarray(index)
    if a.dtype.kind not in "iu":
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index")
    return a


def _scatter_positions(input, dim, index, src_shape):
    """The flat positions in input of the elements of index: each one's
    own position with its coordinate along dim replaced by its value;
    PyTorch's errors (scatter and scatter_add)."""
    given = _index_of("scatter", index)
    d = _norm_dim(dim, input.ndim)
    shape = input.shape or (1,)  # a 0-d input is one element along dim 0, and so is a 0-d index then
    a = given if input.ndim else given.reshape(given.shape or (1,))
    if a.ndim != len(shape) and a.size:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if any(n > s or k != d and n > i for k, (n, s, i) in enumerate(zip(a.shape, src_shape or (1,), shape))):
        raise RuntimeError(f"Expected index {list(a.shape)} to be no larger than self {list(input.shape)} apart from "
                           f"dimension {d} and to be no larger size than src {list(src_shape)}")
    bad = a[(a < 0) | (a >= shape[d])]
    if bad.size:
        raise RuntimeError(f"index {bad.flat[0]} is out of bounds for dimension {d} with size {shape[d]}")
    grid = list(np.indices(a.shape))
    grid[d] = a
    return np.ravel_multi_index(tuple(grid), shape).reshape(-1).astype(np.int64), given


def _scattered(input, dim, index, src, value, accumulate, reduce=None):
    """compute for _apply and its operands: scatter's put of src (or of the
    number `value`; with `reduce`, added or multiplied in) and scatter_add's,
    at _scatter_positions."""
    if src is not None and src.dtype != input.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if reduce is not None and reduce not in ("add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    where_, a = _scatter_positions(input, dim, index, src.shape if src is not None else index.shape)
    kept = {"dim": dim, "index": a}
    if src is not None and src.shape != a.shape:  # src's leading block, as PyTorch reads it
        src = src[tuple(slice(0, n) for n in a.shape)]
    if reduce is not None:
        if src is not None:
            warn_once("The reduce argument of torch.scatter with Tensor src is deprecated and will be removed in a "
                      "future PyTorch release. Use torch.scatter_reduce instead for more reduction options.", 4)
        ufunc = np.add if reduce == "add" else np.multiply

        def reduced(x, *v):
            out = np.array(x._array(), copy=True, order="C")
            ufunc.at(out.reshape(-1), where_, np.broadcast_to(v[0]._array() if v else value, a.shape).reshape(-1))
            if not ((x._rg or v and v[0]._rg) and state.tape.grad_enabled):
                return new_tensor(wrap_value(out))
            return record(_SCATTER_REDUCE, wrap_value(out), (x, v[0] if v else None))
        return reduced, (() if src is None else (src,))
    if accumulate:
        return (lambda x, v: _put_sum(x, where_, a.shape, v, kept, _SCATTER_ADD)), (src,)
    if src is None:
        return (lambda x: _put(x, where_, a.shape, value, kept, _SCATTER_VALUE)), ()
    return (lambda x, v: _put(x, where_, a.shape, v, kept, _SCATTER_SRC)), (src,)


def _src_or_value(src, value):
    """scatter's source: a tensor `src`, or a number given as `value` (or as src)."""
    if isinstance(src, Tensor):
        return src, None
    number = value if src is None else src
    if not isinstance(number, (int, float, bool, np.number)):
        raise TypeError(f"scatter() received an invalid combination of arguments - got src of type "
                        f"{type(number).__name__}")
    return None, number


@declare(signature="input, dim, index, src=None, value=None, *, reduce=None, out=None", operands=3,
         batch=along("dim"))
def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """input with the elements of src (or the number `value`) written at
    the positions `index` gives along dim: out[index[i][j]][j] = src[i][j]
    for dim 0, and so on (the reverse of gather). With reduce "add" or
    "multiply" they are added or multiplied in, recorded without a gradient
    (backward raises), as in PyTorch.

    >>> import tape
    >>> tape.zeros(3).scatter(0, tape.tensor([2, 0]), tape.tensor([1., 2.])).tolist()
    [2.0, 0.0, 1.0]
    """
    compute, operands = _scattered(input, dim, index, *_src_or_value(src, value), False, reduce)
    return compute(input, *operands)


@declare(function=False, methods=("scatter_",), operands=3, batch=along("dim"))
def scatter_(input, dim, index, src=None, value=None, *, reduce=None):
    """scatter, in place."""
    compute, operands = _scattered(input, dim, index, *_src_or_value(src, value), False, reduce)
    _apply(input, compute, *operands)
    return input


@declare(signature="input, dim, index, src, *, out=None", operands=3, batch=along("dim"))
def scatter_add(input, dim, index, src):
    """input with the elements of src added at the positions `index` gives
    along dim (repeated positions add up); differentiable in input and src.

    >>> import tape
    >>> tape.zeros(3).scatter_add(0, tape.tensor([2, 0, 2]), tape.tensor([1., 2., 3.])).tolist()
    [2.0, 0.0, 4.0]
    """
    compute, operands = _scattered(input, dim, index, src, None, True)
    return compute(input, *operands)


@declare(function=False, methods=("scatter_add_",), operands=3, batch=along("dim"))
def scatter_add_(input, dim, index, src):
    """scatter_add, in place."""
    compute, (v,) = _scattered(input, dim, index, src, None, True)
    _apply(input, compute, v)
    return input


def _index_added(input, dim, index, source, alpha):
    """compute(x, v) for _apply and its v: index_add's sum of alpha * source
    into input at the positions index (a vector) gives along dim."""
    a = _index_of("index_add_", index)
    if a.ndim > 1:
        raise IndexError(f"index_add_(): Index is supposed to be a vector, but got dim: {a.ndim} with type: "
                         f"{scalar_type_name(a.dtype)} and size: {list(a.shape)}")
    a = a.reshape(-1)
    d = _norm_dim(dim, input.ndim)
    shape = input.shape or (1,)
    source_shape = source.shape or (1,)
    if a.size != source_shape[d]:
        raise RuntimeError(f"index_add_(): Number of indices ({a.size}) should be equal to source.size(dim): "
                           f"({source_shape[d]}), for dim: {dim}")
    if len(source_shape) != len(shape) or any(k != d and n != s for k, (n, s) in
                                             enumerate(zip(source_shape, shape))):
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the specified dimension. "
                           f"Got self.shape = {list(input.shape)} source.shape = {list(source.shape)}")
    bad = a[(a < 0) | (a >= shape[d])]
    if bad.size:
        raise RuntimeError(f"index {bad.flat[0]} is out of bounds for dimension {d} with size {shape[d]}")
    if source.dtype != input.dtype:
        raise RuntimeError(f"index_add_(): self ({scalar_type_name(input.dtype)}) and source "
                           f"({scalar_type_name(source.dtype)}) must have the same scalar type")
    grid = list(np.indices(source_shape))
    grid[d] = a[grid[d]]
    where_ = np.ravel_multi_index(tuple(grid), shape).reshape(-1).astype(np.int64)
    kept = {"alpha": alpha, "dim": dim, "index": a, "source_dim": source.ndim}
    v = source.reshape(source_shape) * alpha if alpha != 1 else source.reshape(source_shape)
    return (lambda x, u: _put_sum(x, where_, source_shape, u, kept, _INDEX_ADD)), v


def _index_add_rule(op, args):
    """index_add(_) of each sample, for an index that is not batched: the op
    on the physical values, dim past the vmap dims."""
    a = args.arguments
    input, index, source = a["input"], a["index"], a["source"]
    if levels_of([index]):
        NO_RULE(op, args)
    if op.__name__.endswith("_"):
        refuse_batched_other(input, [source], op.__name__)
    levels = levels_of([input, source])
    x, s = with_levels(input, levels), with_levels(source, levels)
    d = _norm_dim(a["dim"], input.ndim) + len(levels)
    compute, v = _index_added(x, d, index, s, a.get("alpha", 1))
    if op.__name__.endswith("_"):
        _apply(x, compute, v)
        return input
    return batched(compute(x, v), levels)


@declare(signature="input, dim, index, source, *, alpha=1, out=None", operands=3, batch=_index_add_rule)
def index_add(input, dim, index, source, *, alpha=1):
    """input with alpha * source added along dim at the positions `index`
    (a vector) gives: out[index[i]] += alpha * source[i] for dim 0
    (repeated positions add up).

    >>> import tape
    >>> tape.zeros(3).index_add(0, tape.tensor([2, 2]), tape.tensor([1., 2.])).tolist()
    [0.0, 0.0, 3.0]
    """
    compute, v = _index_added(input, dim, index, source, alpha)
    return compute(input, v)


@declare(function=False, methods=("index_add_",), operands=3, batch=_index_add_rule)
def index_add_(input, dim, index, source, *, alpha=1):
    """index_add, in place."""
    compute, v = _index_added(input, dim, index, source, alpha)
    _apply(input, compute, v)
    return input


__all__ = exports(globals())
