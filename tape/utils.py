"""tape.utils: activation checkpointing, as torch.utils.checkpoint: a function's
intermediates are not kept for backward but recomputed by it.
"""
import copy
import warnings

import numpy as np

from . import _factories
from ._engine import _row_tensor
from ._grad_mode import enable_grad
from ._registry import CONST, LEAF
from ._tape import RG, state, where
from ._tensor import Tensor, _unpinned, new_tensor
from .autograd.function import Function

__all__ = ["checkpoint", "CheckpointError"]


class CheckpointError(RuntimeError):
    """Raised by the non-reentrant checkpoint, as torch.utils.checkpoint.CheckpointError."""


def _unpacked_twice():
    return CheckpointError(
        "torch.utils.checkpoint: Unpack is being triggered for a tensor that was already unpacked once. "
        "If you are calling ctx.saved_tensors in backward, make sure to do so only once. Otherwise please "
        "open an issue with details on your use case.")

_REENTRANT_GRAD_MESSAGE = (
    "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or passing an "
    "`inputs` parameter to .backward(). To resolve this error, you can either set use_reentrant=False, "
    "or call .backward() without passing the `inputs` argument.")


def checkpoint(function, *args, use_reentrant=None, **kwargs):
    """`function(*args, **kwargs)`, keeping none of its intermediates for
    backward, which runs `function` again, with grad on, to backpropagate
    through it (torch.utils.checkpoint.checkpoint). The results and the
    gradients equal those of `function` itself.

    `use_reentrant=False` (recommended, as in PyTorch) follows every tensor
    that the function uses, arguments and others (a model's weights), and
    works with `autograd.grad` and `create_graph=True`. `use_reentrant=True`
    is PyTorch's older variant: gradients flow to the tensor arguments, and
    into the `.grad` of other leaves by a backward of its own, which
    `autograd.grad` cannot see, so it refuses it. Not passing it warns, as
    in PyTorch, and means True. `function` returns a Tensor or a tuple
    (non-tensor items pass through); `preserve_rng_state=True` (default)
    recomputes with the random state of the forward.

    >>> import tape
    >>> from tape.utils import checkpoint
    >>> w = tape.tensor([1.0, 2.0], requires_grad=True)
    >>> x = tape.tensor([3.0, 4.0], requires_grad=True)
    >>> y = checkpoint(lambda x: (x * w).sin().sum(), x, use_reentrant=False)
    >>> y.backward()
    >>> [round(v, 4) for v in w.grad.tolist()]
    [-2.97, -0.582]
    """
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting in "
            "PyTorch 2.9, calling checkpoint without use_reentrant will raise an exception. "
            "use_reentrant=False is recommended, but if you need to preserve the current default behavior, "
            "you can pass use_reentrant=True. Refer to docs for more details on the differences between "
            "the two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if use_reentrant:
        return CheckpointFunction.apply(function, preserve, *args)
    return _checkpoint_without_reentrant(function, preserve, args, kwargs)


class _RandomState:
    """The generator behind rand* at the forward, for the recomputation."""

    def __init__(self, preserve):
        self.saved = copy.deepcopy(_factories._rng[0]) if preserve else None

    def __enter__(self):
        if self.saved is not None:
            self.outer = _factories._rng[0]
            _factories._rng[0] = copy.deepcopy(self.saved)

    def __exit__(self, *exc):
        if self.saved is not None:
            _factories._rng[0] = self.outer


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


class CheckpointFunction(Function):
    """The reentrant checkpoint (use_reentrant=True): forward without grad
    on the arguments; backward recomputes on detached copies of them and
    runs a backward of its own, as PyTorch's CheckpointFunction."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=4)
        ctx.run_function = run_function
        ctx.random_state = _RandomState(preserve_rng_state)
        ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*(a for a in args if isinstance(a, Tensor)))
        return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        if ctx._targeted:
            raise RuntimeError(_REENTRANT_GRAD_MESSAGE)
        tensors = iter(ctx.saved_tensors)
        inputs = []
        for a in ctx.inputs:
            if a is None:
                t = next(tensors)
                a = t.detach().requires_grad_(t.requires_grad)
            inputs.append(a)
        with ctx.random_state, enable_grad():
            outputs = _as_tuple(ctx.run_function(*inputs))
        pairs = [(o, g) for o, g in zip(outputs, grads) if isinstance(o, Tensor) and o.requires_grad]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        from .autograd import backward
        backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(a.grad if isinstance(a, Tensor) else None for a in inputs)


class _Recompute:
    """What the non-reentrant checkpoint's backward runs again."""

    def __init__(self, function, args, kwargs, random_state, outputs, differentiable):
        self.function, self.args, self.kwargs = function, args, kwargs
        self.random_state = random_state
        self.outputs = outputs  # until forward returns them: then the node's outputs hold them
        self.differentiable = differentiable


class Checkpoint(Function):
    """The non-reentrant checkpoint's node: its arguments are the tensors
    requiring grad that the checkpointed function's graph starts from (its
    arguments, and weights it closes over), found by recording it once."""

    @staticmethod
    def forward(ctx, run, *sources):
        ctx.run = run
        ctx.save_for_backward(*sources)
        # the ctx must not hold its outputs (Note [Function rows])
        outputs, run.outputs = run.outputs, None
        ctx.mark_non_differentiable(*(o for o, needed in zip(_as_tuple(outputs), run.differentiable)
                                      if isinstance(o, Tensor) and not needed))
        return outputs

    @staticmethod
    def backward(ctx, *grads):
        run = ctx.run
        sources = ctx.saved_tensors
        tp = state.tape
        create_graph = tp.grad_enabled
        # The recomputed graph reads each source through a leaf of its value,
        # where its gradients are taken: taken at the sources themselves, the
        # walk went on below them (a source that another source was computed
        # from: h = w * x, with h and w sources), freeing their graph and
        # counting those paths twice. Under create_graph, the rows recorded
        # since (the recomputed graph and its gradients') then read the
        # sources in the leaves' place, which joins them to the sources'
        # histories.
        tp.reserve(2 * len(sources))
        leaves = [new_tensor(_unpinned(s._value), True) for s in sources]
        source_rows = [tp.adopt(s) for s in sources]
        leaf_rows = [tp.adopt(leaf) for leaf in leaves]
        uses = tp.nuse[source_rows].tolist()
        start = tp.n
        with run.random_state, enable_grad():
            outputs = _as_tuple(run.function(*run.args, **run.kwargs))
        tp.redirect(start, source_rows, leaf_rows, uses)
        for r, fn_ctx in tp.python_rows.items():
            if r >= start:
                fn_ctx._second_unpack = _unpacked_twice
        pairs = [(o, g) for o, g, needed in zip(outputs, grads, run.differentiable)
                 if needed and g is not None and isinstance(o, Tensor) and o.requires_grad]
        if not pairs:
            return (None,) * (1 + len(sources))
        from .autograd import grad
        found = grad([o for o, _ in pairs], leaves, [g for _, g in pairs], create_graph=create_graph,
                     allow_unused=True)
        if create_graph:
            tp.redirect(start, leaf_rows, source_rows, [0] * len(leaf_rows))
        return (None, *found)


def _checkpoint_without_reentrant(function, preserve, args, kwargs):
    """Record `function` once to find the rows its graph starts from, cut
    the recorded graph off (its values go now), and put one Checkpoint
    node from those rows to the outputs in its place."""
    tp = state.tape
    random_state = _RandomState(preserve)
    epoch, start = tp.ep, tp.n
    outputs = function(*args, **kwargs)
    recorded = [o for o in _as_tuple(outputs) if isinstance(o, Tensor) and o._rg]
    if not recorded or not tp.grad_enabled:
        return outputs
    if epoch.remap is not None:
        # compaction ran inside the function: it keeps the order of rows, so
        # the function's rows start after the kept ones from before it
        start = int(np.count_nonzero(epoch.remap[:start] >= 0))
    sources = _sources(tp, start, recorded, args, kwargs)
    # new tensors of the values: a detach() would keep the recorded outputs,
    # and so their graph, as its base
    detached = tuple(new_tensor(_unpinned(o._value)) if isinstance(o, Tensor) else o
                     for o in _as_tuple(outputs))
    run = _Recompute(function, args, kwargs, random_state,
                     detached if isinstance(outputs, tuple) else detached[0],
                     [isinstance(o, Tensor) and o._rg for o in _as_tuple(outputs)])
    del outputs, recorded
    tp.drop_cut_off(start, tp.n)
    return Checkpoint.apply(run, *sources)


def _sources(tp, start, recorded, args, kwargs):
    """The tensors of the rows that the graph recorded from row `start` on
    reads from before it, or from leaves first used in it, in row order:
    the arguments as given, leaves as themselves, other rows as tensors
    naming them."""
    roots = np.array([where(o)[1] for o in recorded], np.int64)
    reached = tp.reachable(roots[roots >= start], start, tp.n)
    op, flags = tp.op, tp.flags
    inside = reached[op[reached] > CONST]
    more = inside[tp.nx[inside] > 0].tolist()
    inputs = np.concatenate([tp.a0[inside], tp.a1[inside], roots, reached[op[reached] == LEAF],
                             np.array([q for r in more for q in tp.inputs(r)[2:]], np.int64)])
    inputs = inputs[inputs >= 0]
    rows = np.unique(inputs[((inputs < start) | (op[inputs] == LEAF)) & (flags[inputs] & RG != 0)])
    given = {}
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor) and a._rg and where(a)[0] is tp:
            given.setdefault(where(a)[1], a)
    sources = []
    for r in rows.tolist():
        t = given.get(r)
        if t is None and op[r] == LEAF:
            t = tp.tensor_at(r)
        sources.append(t if isinstance(t, Tensor) else _row_tensor(tp, r))
    return sources
