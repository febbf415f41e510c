"""Custom autograd functions, as torch.autograd.Function: a Python forward and
backward that the tape records as one node, which the Python walk runs.
"""
import functools
import inspect
import re
import warnings

import numpy as np

from .._grad_mode import no_grad
from .._node import Node
from .._record import broadcast_shapes, record, sum_to
from .._registry import defop
from .._saved import pack, unpacked
from .._tape import RETAIN, RG, anomaly, current_row, keep_trace, state, where
from .._tensor import Tensor, _dead_token, _unpinned, new_tensor, wrap_value

__all__ = ["Function", "FunctionCtx", "once_differentiable"]

# Note [Function rows]
# ~~~~~~~~~~~~~~~~~~~~
# One apply of a Function whose tensor arguments require grad records one
# node (see Note [Python-only rows] in tape._engine): a row of op function
# per output, up to its last differentiable one, numbered in the node as
# unbind's parts are (Note [Tape layout]), each over the rows of the
# arguments that require grad. A differentiable output's row holds its
# value; the row of another output before it (a non-differentiable or
# non-tensor one) holds none and no tensor names it, as PyTorch's node has
# an input for each output. The node's row (the first) keeps the apply's
# ctx in `tp.python_rows`, which names the node's type, `<Name>Backward`.
# The reverse walk runs the node once, where it first meets one of its
# rows (their consumers are above them all, so every output's gradient is
# complete there): the user's backward gets them all (zeros for undefined
# ones, unless set_materialize_grads(False)), and the node sends the
# arguments' gradients to their rows.
#
# Lifetime: the ctx lives in tp.python_rows while the node's rows do, and
# compaction drops it with them. It holds saved arguments as Tensors
# (they are below the node: no cycle; compaction looks again once it has
# dropped a ctx, whose arguments are then no longer held) but a saved output
# as its value and row, never as its Tensor, which would keep the node's rows
# live for ever; compaction keeps the node's rows together, so the saved
# output's row stays while the ctx does, for a create_graph backward through
# it. Saved arrays count in tp.held_bytes (ctx.nbytes), so a loop of applies
# without backward compacts by their size too; backward without
# retain_graph frees them.


def _node_vjp(ctx, *grad_outputs):
    return ctx._tp.python_rows[ctx._r]._backward(ctx, grad_outputs)


_NODE = defop("function", "FunctionBackward", 2, vjp=_node_vjp, python_only=True, variadic=True)
_DELAYED_ERROR = defop("delayed_error", "Error", 1, not_differentiable=(
    "trying to differentiate twice a function that was marked with @once_differentiable"))


_FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they "
    "have already been freed). Saved intermediate values of the graph are freed when you call "
    ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
    "graph a second time or if you need to access saved tensors after calling backward.")


def _op_name(t):
    """The op that made t, as PyTorch names it in the in-place error: MulBackward0 is Mul."""
    node = t.grad_fn
    return None if node is None else re.sub(r"Backward\d*$", "", node.name())


def _modified(t, index, made_by, saved_version):
    made = f", which is output {index} of {made_by}," if made_by else ""
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [{t.type()} {list(t.shape)}]{made} is at version {t._version}; expected version "
        f"{saved_version} instead. Hint: enable anomaly detection to find the operation that failed to "
        "compute its gradient, with tape.autograd.set_detect_anomaly(True, check_nan=False).")


class _SavedArgument:
    """A saved tensor that is not an output: the Tensor itself, and its version."""
    __slots__ = ("tensor", "version")

    def __init__(self, t):
        self.tensor, self.version = t, t._version

    def unpack(self):
        t = self.tensor
        if t._version != self.version:  # named by its grad_fn now, the in-place op's, as PyTorch's
            raise _modified(t, 0, _op_name(t), self.version)
        return t

    @property
    def nbytes(self):
        v = self.tensor._value
        return 0 if type(v) is float else v.nbytes


class _SavedOutput:
    """A saved output of the apply: its value, row and version counter, not
    its Tensor (Note [Function rows]). Unpacked, it is a Tensor of that row,
    so a backward recorded under create_graph goes through the node."""
    __slots__ = ("value", "ep", "row", "vc", "version", "index", "name")

    def __init__(self, t, index, name):
        v = t._value
        self.value = _unpinned(v)  # not the row's liveness token
        self.ep, self.row = t._ep, t._row
        self.vc = t._version_counter()
        self.version = self.vc.n
        self.index, self.name = index, name

    def unpack(self):
        tp, r = current_row(self.ep, self.row)
        t = new_tensor(self.value, r >= 0)
        if r >= 0:
            t._ep, t._row = tp.epoch_of(r), r
        if self.vc.n != self.version:
            t._vc = self.vc
            raise _modified(t, self.index, self.name, self.version)
        return t

    @property
    def nbytes(self):
        return 0 if type(self.value) is float else self.value.nbytes


class _HookedSaved:
    """A saved tensor that saved_tensors_hooks packed when the apply was
    recorded (Note [Saved tensor hooks] in tape._saved): pack_hook's result,
    read through unpack_hook at each access of ctx.saved_tensors, as in
    PyTorch, in the saved tensor's place in the graph."""
    __slots__ = ("saved", "packed", "unpack_hook", "nbytes")

    def __init__(self, saved, pack_hook, unpack_hook):
        self.saved, self.unpack_hook = saved, unpack_hook
        self.packed = pack(pack_hook, saved.unpack())
        self.nbytes = saved.nbytes

    def unpack(self):
        return unpacked(self.unpack_hook, self.packed, self.saved.unpack())


class FunctionCtx:
    """What `forward` (or `setup_context`) and `backward` of one apply share,
    as torch.autograd.function.FunctionCtx: saved tensors, marks, and any
    attribute the user sets (`ctx.k = 3`).

    Examples
    --------
    >>> import tape
    >>> class Cube(tape.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x ** 3
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         (x,) = ctx.saved_tensors
    ...         return 3 * x ** 2 * g
    >>> x = tape.tensor(2.0, requires_grad=True)
    >>> Cube.apply(x).backward()
    >>> x.grad
    tensor(12.)
    """
    _to_save = ()
    _saved = None  # the packed saved tensors, once the apply is recorded
    _freed = False
    _non_differentiable = ()
    _dirty = ()
    _materialize = True
    _targeted = False
    # what the second access to saved_tensors raises, for a Function that a
    # non-reentrant checkpoint recomputed (tape.utils), whose saved tensors
    # are read once, as PyTorch's recomputed ones
    _second_unpack = None
    _unpacked = False
    nbytes = 0

    def save_for_backward(self, *tensors):
        """Save tensors (or None) for `backward`, which reads them as `ctx.saved_tensors`."""
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save variables, but argument {i} is of "
                                f"type {type(t).__name__}")
        self._to_save = tensors

    @property
    def saved_tensors(self):
        """The tensors given to `save_for_backward`; raises PyTorch's errors
        once backward freed them, or when one was modified in place since."""
        if self._freed:
            raise RuntimeError(_FREED_MESSAGE)
        if self._saved is None:
            return tuple(self._to_save)
        if self._second_unpack is not None and self._saved:
            if self._unpacked:
                raise self._second_unpack()
            self._unpacked = True
        return tuple(None if s is None else s.unpack() for s in self._saved)

    def mark_non_differentiable(self, *args):
        """The outputs among `args` do not require grad; backward still gets a
        gradient for each (zeros, or None without materialized grads)."""
        self._non_differentiable = tuple(self._non_differentiable) + args

    def mark_dirty(self, *args):
        """The inputs among `args` were modified in place by forward, which
        returns them: they become the outputs, with this node as grad_fn."""
        self._dirty = tuple(self._dirty) + args

    def set_materialize_grads(self, value):
        """Whether backward gets zeros (True, the default) or None for an
        output whose gradient is absent."""
        self._materialize = bool(value)

    # -- the node's side (Note [Function rows]) ------------------------------
    def _node_type(self):
        return self._fn._backward_cls

    def input_rows(self, tp, r):
        """The rows of next_functions for node row r: one per tensor argument,
        -1 for one that was not recorded (tape._node.next_rows)."""
        rows = iter(_argument_rows(tp, r))
        return [next(rows) if recorded else -1
                for shape, recorded in zip(self._shapes, self._recorded) if shape is not None]

    def _pack(self, outputs_at):
        """Resolve the saved tensors once the outputs have rows:
        `outputs_at` maps id(output Tensor) to its output index."""
        name = self._fn.__name__
        saved = []
        for t in self._to_save:
            if t is None:
                saved.append(None)
            elif id(t) in outputs_at and t._rg:
                saved.append(_SavedOutput(t, outputs_at[id(t)], name))
            else:
                saved.append(_SavedArgument(t))
        hooks = self._tape.saved_hooks
        if hooks:
            saved = [None if s is None else _HookedSaved(s, *hooks[-1]) for s in saved]
        self._saved = saved
        self._to_save = ()
        self.nbytes = sum(s.nbytes for s in saved if s is not None)
        self._tape.held_bytes += self.nbytes

    def _free(self):
        if self._saved is not None:
            self._freed = True
            self._saved = None
            self._tape.held_bytes -= self.nbytes
            self.nbytes = 0

    def _backward(self, ctx, grad_outputs):
        """The node's VJP: the user's backward on the gradients of its
        output rows (None where none came), its results checked as PyTorch
        checks them and sent to the rows of the arguments that require grad."""
        name = self._fn._backward_cls.__name__
        grads = []
        for k, spec in enumerate(self._outputs):
            gk = grad_outputs[k] if k < len(grad_outputs) else None
            if gk is None and spec is not None and self._materialize:
                gk = new_tensor(wrap_value(np.zeros(spec[0], spec[1])))
            grads.append(gk)
        fn = self._fn
        # whether the walk is for autograd.grad or backward(inputs=...), where
        # a reentrant checkpoint refuses to run, as in PyTorch
        self._targeted = ctx.leads is not None
        # a Function may name its backward vjp, as in PyTorch
        user_backward = fn.vjp if fn.backward is Function.backward else fn.backward
        try:
            result = user_backward(self, *grads)
        finally:
            if not ctx.retain:
                self._free()
        if not isinstance(result, tuple):
            result = (result,)
        n = len(self._shapes)
        if len(result) > n and all(r is None for r in result[n:]):
            result = result[:n]  # PyTorch allows extra trailing Nones
        if len(result) != n:
            raise RuntimeError(f"function {name} returned an incorrect number of gradients (expected {n}, "
                               f"got {len(result)})")
        tp = ctx._tp
        rows = _argument_rows(tp, ctx._r)
        flags, leads = tp.m_flags, ctx.leads
        needs, out = [], []
        k = 0
        for i, shape in enumerate(self._shapes):
            gi = result[i]
            if gi is not None and not isinstance(gi, Tensor):
                raise RuntimeError(f"expected Variable or None (got {type(gi).__name__})")
            if gi is not None and shape is None:
                raise RuntimeError(f"function {name} returned a gradient different than None at position {i + 1}, "
                                   "but the corresponding forward input was not a Variable")
            if not self._recorded[i]:
                continue  # PyTorch ignores a gradient for an input that does not require grad
            row = rows[k]
            k += 1
            needs.append(gi is not None and bool(flags[row] & RG) and (leads is None or leads[row]))
            if gi is not None and any(gi is h for h in (*grads, *out)):
                # an incoming gradient passed on, or one tensor for two inputs: a
                # leaf's .grad of its own, since accumulation adds into it in place
                gi = gi.clone()
            out.append(None if gi is None else _fit(gi, shape, i, name))
        ctx.rows, ctx.needs = rows, needs
        return out


def _fit(g, shape, i, name):
    """Input i's gradient g in its shape: one that broadcasts to it is summed
    back (PyTorch's validate_outputs), another is an error."""
    if g.shape == shape:
        return g
    try:
        compatible = broadcast_shapes(shape, g.shape) == g.shape
    except RuntimeError:
        compatible = False
    if not compatible:
        raise RuntimeError(f"Function {name} returned an invalid gradient at index {i} - got "
                           f"{list(g.shape)} but expected shape compatible with {list(shape)}")
    return sum_to(g, shape)


def _argument_rows(tp, r):
    """The rows of node r's arguments that require grad, in order (Note [Function rows])."""
    return [q for q in tp.inputs(r) if q >= 0]


class FunctionNode(Node):
    """The grad_fn of a custom Function's outputs (`ExpBackward` for a
    Function named Exp). As in PyTorch, where the node is the ctx, the
    ctx's attributes read through it (`y.grad_fn.saved_tensors`)."""
    __slots__ = ()

    def __getattr__(self, name):
        if name.startswith("__") or name in Node.__slots__:
            raise AttributeError(name)
        ctx = self._ep.tape.python_rows.get(self.row())
        if ctx is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        return getattr(ctx, name)


def _is_setup_context_defined(fn):
    return fn is not Function.setup_context


class _FunctionMeta(type):
    """Gives each Function its node type, `<Name>Backward`, as PyTorch's FunctionMeta."""

    def __init__(cls, name, bases, attrs):
        cls._backward_cls = type(name + "Backward", (FunctionNode,), {"__slots__": ()})
        super().__init__(name, bases, attrs)


class Function(metaclass=_FunctionMeta):
    """Base class of custom differentiable operations, as torch.autograd.Function.

    Subclass it with static `forward(ctx, *args)` and `backward(ctx, *grads)`,
    or with `forward(*args)` and `setup_context(ctx, inputs, output)`, and
    call `Fn.apply(*args)`. forward runs with grad mode off; backward returns
    one gradient per argument of forward (None where there is none) and runs
    with grad mode on only under create_graph, so one written with tape ops
    is differentiable again.

    Examples
    --------
    >>> import tape
    >>> class Exp(tape.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         y = x.exp()
    ...         ctx.save_for_backward(y)
    ...         return y
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         (y,) = ctx.saved_tensors
    ...         return g * y
    >>> x = tape.tensor([0.0, 1.0], requires_grad=True)
    >>> y = Exp.apply(x)
    >>> y.grad_fn.name()
    'ExpBackward'
    >>> y.sum().backward()
    >>> x.grad
    tensor([1.0000, 2.7183])
    """

    def __init__(self, *args, **kwargs):
        warnings.warn(f"{type(self)} should not be instantiated. Methods on autograd functions are all "
                      "static, so you should invoke them on the class itself. Instantiating an autograd "
                      "function will raise an error in a future version of PyTorch.", DeprecationWarning,
                      stacklevel=2)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. "
                           "Please use new-style autograd function with static forward method. "
                           "(Example: https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    vjp = backward

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run forward on `args` and record it, when an argument requires grad
        and grad mode is on, as one node whose backward is `cls.backward`."""
        setup = _is_setup_context_defined(cls.setup_context)
        if kwargs or setup:
            # keyword arguments are arguments too (PyTorch binds them to
            # forward's parameters), and setup_context sees the defaults
            signature = inspect.signature(cls.forward)
            if setup:
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                args, kwargs = bound.args, bound.kwargs
            else:
                bound = signature.bind(None, *args, **kwargs)
                args, kwargs = bound.args[1:], bound.kwargs
        ctx = FunctionCtx()
        ctx._fn = cls
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._rg for a in args)
        tp = state.tape
        if tp.recorder is not None:  # tape.compile replays the call, recorded or not (Note [Python steps])
            tp.recorder.functions += 1
        recording = tp.grad_enabled and any(ctx.needs_input_grad)
        with no_grad():
            if setup:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        single = not isinstance(output, tuple)
        outputs = (output,) if single else output
        _check_dirty(ctx, args, outputs)
        if recording:
            outputs = _record(tp, ctx, args, outputs)
        else:
            outputs = tuple(o if any(o is t for t in ctx._dirty) else _alias(o, args) for o in outputs)
        return outputs[0] if single else outputs


def _check_dirty(ctx, args, outputs):
    for t in ctx._dirty:
        if not any(t is a for a in args):
            warnings.warn("ctx.mark_dirty() received a tensor that was not an input. Only input Tensors "
                          "that have been mutated should be passed to ctx.mark_dirty().", UserWarning,
                          stacklevel=4)
        elif not any(t is o for o in outputs):
            raise RuntimeError("Some elements marked as dirty during the forward method were not returned "
                               "as output. The inputs that are modified inplace must all be outputs of the "
                               "Function.")
        elif t._rg and t.is_leaf and state.tape.grad_enabled:
            raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")


def _alias(o, args):
    """An output that is an argument returned unchanged is a new tensor
    sharing its storage, as PyTorch's view of it (unless marked dirty)."""
    if isinstance(o, Tensor) and any(o is a for a in args):
        return o.detach()
    return o


def _record(tp, ctx, args, outputs):
    """Append the apply's node (Note [Function rows]) and return its outputs."""
    tensors = [a for a in args if isinstance(a, Tensor)]
    tp.reserve(2 * len(tensors) + len(outputs) + 2)
    recorded = [isinstance(a, Tensor) and a._rg for a in args]
    rows = [tp.adopt(a) for a, rec in zip(args, recorded) if rec]
    ctx._tape = tp
    # the arguments' shapes, not the arguments: what is not saved goes (Note [Function rows])
    ctx._shapes = [a.shape if isinstance(a, Tensor) else None for a in args]
    ctx._recorded = recorded
    non_differentiable = ctx._non_differentiable
    differentiable = [isinstance(o, Tensor) and o.dtype.kind == "f" and not any(o is t for t in non_differentiable)
                      for o in outputs]
    count = max([k + 1 for k, d in enumerate(differentiable) if d], default=0)
    node = tp.n
    specs, results, outputs_at = [], [], {}
    for k, o in enumerate(outputs):
        specs.append((o.shape, o.dtype) if isinstance(o, Tensor) else None)
        dirty = any(o is t for t in ctx._dirty)
        if not differentiable[k]:
            results.append(o if dirty else _alias(o, args))
            if k < count:
                _node_row(tp, rows)
            continue
        repeated = id(o) in outputs_at
        out = _output_row(tp, rows, o, args, dirty, repeated)
        if not dirty and _views_an_input(o, args):
            out._refused_view = (ctx._fn.__name__, k, _CUSTOM_VIEW)
        outputs_at[id(out)] = k
        results.append(out)
    if not count:  # no output is differentiable: the node has a row still, which nothing reaches
        _node_row(tp, rows)
    if tp.n - node > 1:
        tp.number_outputs(range(node, tp.n))
    if anomaly.enabled:
        keep_trace(tp, node)
    ctx._outputs = specs
    ctx._pack(outputs_at)
    tp.python_rows[node] = ctx
    return tuple(results)


_CUSTOM_VIEW = ("This view was created inside a custom Function (or because an input was returned as-is) and the "
                "autograd logic to handle view+inplace would override the custom backward associated with the "
                "custom Function, leading to incorrect gradients. This behavior is forbidden. You can fix this "
                "by cloning the output of the custom Function.")


def _views_an_input(o, args):
    """Whether forward's output o is an argument or a view of one (sharing
    its storage): PyTorch refuses an in-place op on it, which would bypass
    the Function's backward."""
    return any(isinstance(a, Tensor) and (o is a or o._vc is not None and o._vc is a._vc) for a in args)


def _node_row(tp, inputs, value=0.0, owner=None):
    """Append one row of the node over `inputs`, the rows of its arguments
    that require grad: an output's, with its value and the row's owner
    (Note [Tape layout]), or one that no tensor names (Note [Function rows])."""
    r = tp.append(_NODE.code, value, _dead_token() if owner is None else owner, inputs[0],
                  inputs[1] if len(inputs) > 1 else -1, flags=RG if owner is not None else 0)
    if len(inputs) != 2:
        tp.more_inputs(r, inputs[2:] if inputs[1:] else None)
    return r


def _output_row(tp, inputs, o, args, dirty, repeated=False):
    """The Tensor of the output o, given its row of the node: the forward's
    own tensor when it is fresh or a dirty argument, else a new one sharing
    its storage (an argument returned, a tensor with a row). A tensor
    forward returned already (`return out, out`) is one tensor, as
    PyTorch's, which moves to this output (its output_nr is the last): the
    earlier output's row is left to no tensor, and gets no gradient."""
    value = o._value
    if repeated:
        out = o
        old_tape, old_row = where(out)
        old_tape.owners[old_row] = _dead_token()
        value = _unpinned(value)
    elif dirty:
        out = o
        out.bump_version()  # as PyTorch's mark_dirty, on top of forward's own in-place op
        retains = out.retains_grad
        if retains:  # the retained gradient follows the tensor, as in ops.inplace
            old_tape, old_row = where(out)
            old_tape.flags[old_row] &= ~np.uint8(RETAIN)
            del old_tape.retained[old_row]
    elif o._ep is None and not o._rg and not any(o is a for a in args):
        out = o
        value = _unpinned(value)  # a float of its own: the row's liveness token
    else:
        out = new_tensor(_unpinned(value))
        value = out._value
        if type(value) is not float:
            o._share_storage(out)
    r = _node_row(tp, inputs, value, value if type(value) is float else out)
    out._value, out._rg, out._ep, out._row = value, True, tp.ep, r
    if out._vc is not None:
        out._vc.add_row(tp.ep, r)
    if dirty and retains:
        out.retain_grad()
    return out


def once_differentiable(fn):
    """Decorate a Function's backward that is not differentiable itself: it
    runs with grad mode off, and differentiating its result under
    create_graph raises, as torch.autograd.function.once_differentiable.

    >>> import tape
    >>> from tape.autograd.function import once_differentiable
    >>> class Square(tape.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x * x
    ...     @staticmethod
    ...     @once_differentiable
    ...     def backward(ctx, g):
    ...         (x,) = ctx.saved_tensors
    ...         return 2 * x * g
    >>> x = tape.tensor(3.0, requires_grad=True)
    >>> tape.autograd.grad(Square.apply(x), x)
    (tensor(6.),)
    """
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            outputs = fn(ctx, *args)
        if not state.tape.grad_enabled:
            return outputs
        # as PyTorch: when a gradient coming in requires grad, the results
        # do too, through a node that raises when a backward reaches it
        if not any(isinstance(a, Tensor) and a._rg for a in args):
            return outputs
        single = not isinstance(outputs, tuple)
        wrapped = tuple(_delayed_error(o) for o in ((outputs,) if single else outputs))
        return wrapped[0] if single else wrapped
    return wrapper


def _delayed_error(o):
    if not isinstance(o, Tensor):
        return o
    leaf = o.detach().requires_grad_()
    out = record(_DELAYED_ERROR, _unpinned(leaf._value), (leaf,))
    # PyTorch's node keeps the leaf, its AccumulateGrad's variable (next_functions); here the result does
    out._delayed_error_leaf = leaf
    return out


