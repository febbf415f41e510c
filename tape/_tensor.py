"""The Tensor: a value (a Python float for 0-d float64, else an ndarray) and,
when it requires grad, the tape row that made it. Op methods are attached by
`ops`; this module holds what is not an op.
"""
import ctypes
import threading
import warnings
import weakref

import numpy as np
from numpy.lib import array_utils as _array_utils

from ._dtypes import cpp_type_name, float16, float64, get_default_dtype, scalar_type_name
from ._tape import DATA_FIELD, RETAIN, StaleView, current_row, recorded_row, state, where
from ._registry import LEAF, SAVES_OUT
from . import _format

__all__ = ["Tensor", "Size", "device", "check_device", "is_tensor", "numel", "is_floating_point",
           "new_tensor", "refuse_half_grad", "wrap_value"]

# the device types PyTorch's device strings may name
_DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga",
                 "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")


class Size(tuple):
    """PyTorch's `torch.Size`: a shape, a tuple of ints (Tensor.shape is a
    plain tuple, which compares equal to it).

    >>> import tape
    >>> tape.Size([2, 3])
    tape.Size([2, 3])
    """
    __slots__ = ()

    def __repr__(self):
        return f"tape.Size({list(self)})"

    def numel(self):
        return int(np.prod(self, dtype=np.int64))


class device:
    """PyTorch's `torch.device`. tape computes on the CPU only: other devices
    can be named, and using one raises as PyTorch does without it.

    >>> import tape
    >>> tape.ones(2).device
    device(type='cpu')
    """
    __slots__ = ("type", "index")

    def __init__(self, type, index=None):
        if isinstance(type, device):
            type, index = type.type, type.index
        if not isinstance(type, str):
            raise RuntimeError("Cannot access accelerator device when none is available.")
        name, colon, number = type.partition(":")
        if name not in _DEVICE_TYPES:
            raise RuntimeError(f"Expected one of {', '.join(_DEVICE_TYPES)} device type at start of "
                               f"device string: {type}")
        if colon:
            if not number.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}'")
            index = int(number)
        if index is not None and index < 0:
            raise RuntimeError("Device index must not be negative")
        self.type = name
        self.index = index

    def __repr__(self):
        index = "" if self.index is None else f", index={self.index}"
        return f"device(type='{self.type}'{index})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))


# PyTorch's legacy type names ("torch.DoubleTensor"), under tape's name and torch's
_TYPE_NAMES = {f"{ns}.{scalar_type_name(np.dtype(d))}Tensor": np.dtype(d) for ns in ("tape", "torch")
               for d in ("float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")}

_CPU = device("cpu")
_Device = device  # for code where a parameter named `device` hides the class


def check_device(where):
    """Refuse a device other than the CPU (`where` as factories and `to` take it)."""
    if where is None:
        return
    where = device(where)
    if where.type == "cuda":
        raise AssertionError("Tape not compiled with CUDA enabled")
    if where.type != "cpu":
        raise RuntimeError(f"tape is not linked with support for {where.type} devices")


def is_tensor(obj):
    return isinstance(obj, Tensor)


def _expect_tensor(fn, input):
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")


def numel(input):
    _expect_tensor("numel", input)
    return input.numel()


def is_floating_point(input):
    _expect_tensor("is_floating_point", input)
    return input.is_floating_point()


# held while a version counter is made or names a row: threads share tensors
# (a leaf, a constant input), and a row one of them lost would not be marked
# dirty by an in-place change, whose backward would then not raise
_VERSION_LOCK = threading.Lock()


class _Version:
    """A version counter shared by a tensor and its views (PyTorch's `_version`).

    `rows` are the (epoch, row) pairs whose recorded values alias the storage,
    marked dirty when it is modified in place; `views` are weak references to
    the tensors sharing it.
    """
    __slots__ = ("n", "rows", "views", "prune_at", "views_prune_at")

    def __init__(self):
        self.n = 0
        self.rows = []
        self.views = []
        self.prune_at = 64
        self.views_prune_at = 64

    def add_row(self, ep, r):
        """Name one more row aliasing the storage. A constant used on every
        iteration of a loop adds a row each time, so the rows that compaction
        has dropped are pruned as the list doubles, and whenever a row of a
        new epoch comes: an entry of an old epoch keeps that epoch alive, and
        each live old epoch costs every later compaction a pass over its map
        (W2 compiled: a fifth of its time)."""
        rows = self.rows
        with _VERSION_LOCK:  # a pruning would lose the row another thread adds meanwhile
            if rows and rows[-1][0] is not ep:
                rows[:] = [(e, q) if e.remap is None else (e.tape.numbering, int(e.remap[q])) for e, q in rows
                           if e.remap is None or e.remap[q] >= 0]
            rows.append((ep, r))
            if len(rows) >= self.prune_at:
                rows[:] = [(e, q) for e, q in rows if e.remap is None or e.remap[q] >= 0]
                self.prune_at = 2 * len(rows) + 64

    def add_view(self, t):
        """Name one more tensor sharing the storage. A view made on every
        iteration of a loop (W.T) adds one each time, so the dead are pruned
        as the list doubles."""
        views = self.views
        views.append(weakref.ref(t))
        if len(views) >= self.views_prune_at:
            views[:] = [ref for ref in views if ref() is not None]
            self.views_prune_at = 2 * len(views) + 64

    def other_views(self, t):
        return [v for ref in self.views if (v := ref()) is not None and v is not t]


def _address(a):
    """The address of array a's first element, read where the array object
    keeps it (__array_interface__ costs ten times as much)."""
    return _read_int64(id(a) + DATA_FIELD).value


_read_int64 = ctypes.c_int64.from_address


class UntypedStorage:
    """The memory that a tensor and its views share, as far as PyTorch's
    `Tensor.untyped_storage()` shows it: where it starts and its size."""
    __slots__ = ("_array",)

    def __init__(self, array):
        self._array = array

    def data_ptr(self):
        return _array_utils.byte_bounds(self._array)[0]

    def nbytes(self):
        low, high = _array_utils.byte_bounds(self._array)
        return high - low

    size = nbytes


class _LeafRef(weakref.ref):
    """The owner of a leaf row that its leaf has left: it reaches the leaf
    for `.grad` without keeping the row live (a subclass, so that CPython
    never shares the weakref object with another holder)."""
    __slots__ = ()


def _dead_token():
    return object()


class DetachedInPlace:
    """The owner token of the row that a tensor left by detach_(): its graphs
    reach the tensor no more, and one whose backward reads its value raises
    PyTorch's error (tape._engine)."""
    __slots__ = ()


def _unpinned(v):
    """A copy of a 0-d float value: the float object itself is the tape's
    liveness token for the row (Note [Tape layout]), so handing it out would
    keep the graph alive."""
    return v * 1.0 if type(v) is float else v


def wrap_value(v):
    """Normalise a computed value: 0-d float64 becomes a Python float."""
    if type(v) is float:
        return v
    if type(v) is not np.ndarray:
        v = np.asarray(v)
    if v.ndim == 0 and v.dtype == float64:
        return float(v)
    return v


# tape.compile's report of the tensors made while some thread records (Note
# [Compiled replay] in tape/_compile.py); empty otherwise
made_hooks = []
# and of the values fn reads and the comparisons it makes: set by tape._compile
read_hooks = []
compared_hooks = []
written_hooks = []
set_hooks = []  # called as set_hooks[0](t, name) before grad, data or requires_grad of t changes
# marks the tensors made in inference mode while some thread is in it (tape._grad_mode)
inference_marks = []
inference_made = [False]  # whether any inference tensor was made: record then checks what it saves


def _repeating():
    """Whether this thread records a call under no_grad with grad mode on
    (tape.compile), after an eager call that gave the warnings due."""
    rec = state.tape.recorder
    return rec is not None and rec.repeats


def note_value_read(*tensors):
    """An op's report that its Python-level answer (equal, allclose) depends
    on all of the tensors' values, which tape.compile then guards."""
    if made_hooks:
        for t in tensors:
            read_hooks[0](t, "array", t._array().copy())


def new_tensor(value, requires_grad=False):
    t = Tensor.__new__(Tensor)
    t._value = value
    t._rg = requires_grad
    t._row = -1
    t._ep = None
    if made_hooks:
        made_hooks[0](t)
    if inference_marks:
        inference_marks[0](t)
    return t



def contiguous_strides(shape):
    """The element strides of a tensor of `shape` laid out in C order."""
    strides = []
    step = 1
    for d in reversed(shape):
        strides.insert(0, step)
        step *= d
    return tuple(strides)

class Tensor:
    """A tensor, as PyTorch users know it. Make one with `tape.tensor(data)`.

    Examples
    --------
    >>> import tape
    >>> x = tape.tensor(2.0, requires_grad=True)
    >>> (x * x).backward()
    >>> x.grad
    tensor(4.)
    """
    # The hot attributes are slots; the rarely set ones default on the class
    # and land in the instance dict when set, so making a tensor writes four.
    __slots__ = ("_value", "_rg", "_row", "_ep", "__dict__", "__weakref__")
    _inference = False  # made in inference mode: set in the instance's __dict__ (inference_marks)
    _grad = None
    _vc = None
    # the tensor whose storage this one views, when it is a view that autograd
    # follows (PyTorch's `_base`: the first tensor of a chain of views, never
    # a view itself); None for a tensor that owns its storage and for what
    # detach() and .data make, which share storage without history
    _view_of = None
    # a view made while grad mode was off, which PyTorch refuses to modify in
    # place with grad mode on (ops.inplace)
    _made_in_no_grad = False
    # the 0-d tensor whose `.data` this is (Tensor._stored_through_data)
    _data_of = None
    # the tensor whose storage a result of detach() or .data shares (Tensor._storage_array)
    _storage_of = None
    _left_rows = ()
    _left_rows_prune_at = 64
    # (weak reference to the epoch, row) of the row that a constant's uses share (Tape.adopt)
    _const_row = None
    # (name, output index, why) for a view that PyTorch refuses to modify in
    # place while grad is on (ops.inplace): an output of unbind or split, or
    # a custom Function's output that views an input, and the views of it
    # made while recording, named by their own op
    _refused_view = None
    # the (epoch, row) of each output requiring grad of the node that made this
    # tensor, when it made several (unbind, split, a Function): Note [Undefined
    # gradients] in tape._engine
    _siblings = None
    # a leaf's rows on the tapes of threads other than its own (Note [Leaves shared by threads])
    _foreign_rows = None
    __array_priority__ = 1000

    def __init__(self, *args, device=None):
        """PyTorch's legacy constructor: `Tensor(data)` copies a sequence in the
        default dtype, `Tensor(*sizes)` is an uninitialised tensor of that shape,
        `Tensor()` an empty one. Prefer `tape.tensor` and the factories."""
        from ._factories import empty, tensor
        if len(args) == 1 and not isinstance(args[0], (int, np.integer)):
            if not isinstance(args[0], (list, tuple, np.ndarray)):
                raise TypeError(f"new(): data must be a sequence (got {type(args[0]).__name__})")
            made = tensor(args[0], dtype=get_default_dtype(), device=device)
        else:
            made = empty(*(args or (0,)), device=device)
        self._value, self._rg, self._row, self._ep = made._value, False, -1, None

    # -- metadata ------------------------------------------------------------
    @property
    def shape(self):
        v = self._value
        return () if type(v) is float else v.shape

    @property
    def dtype(self):
        v = self._value
        return float64 if type(v) is float else v.dtype

    @property
    def ndim(self):
        v = self._value
        return 0 if type(v) is float else v.ndim

    def dim(self):
        return self.ndim

    ndimension = dim

    def size(self, dim=None):
        if dim is None:
            return self.shape
        return self.shape[_shape_dim(dim, self.ndim)]

    def stride(self, dim=None):
        """The strides of this tensor's memory in elements, as PyTorch's: a
        view's are its own (a transpose's swapped, an expand's 0)."""
        v = self._value
        strides = () if type(v) is float else tuple(s // v.itemsize for s in v.strides)
        return strides if dim is None else strides[_shape_dim(dim, self.ndim)]

    def is_contiguous(self, memory_format=None):
        v = self._value
        return type(v) is float or v.flags.c_contiguous

    def contiguous(self, memory_format=None):
        """self when its memory is in C order, else a copy that is (CloneBackward0)."""
        if self.is_contiguous():
            return self
        from ._record import op_result
        from ._registry import lookup
        return op_result(lookup("clone"), np.ascontiguousarray(self._value), (self,))

    def storage_offset(self):
        """Where this tensor's first element is in its storage, in elements."""
        v = self._memory()
        return (_address(v) - _array_utils.byte_bounds(self._storage_array())[0]) // v.itemsize

    def data_ptr(self):
        return _address(self._memory())

    def untyped_storage(self):
        return UntypedStorage(self._storage_array())

    def _storage_array(self):
        """The array whose memory is this tensor's storage: the memory of the
        tensor that a chain of views, detach() and .data leads back to."""
        t = self
        while True:
            if t._view_of is not None:
                t = t._view_of
            elif t._storage_of is not None:
                t = t._storage_of
            else:
                return t._memory()

    def element_size(self):
        return self.dtype.itemsize

    def is_floating_point(self):
        return self.dtype.kind == "f"

    @property
    def device(self):
        return _CPU

    is_cuda = False

    def cpu(self):
        return self

    def cuda(self, device=None, non_blocking=False):
        return self.to("cuda")

    def type(self, dtype=None, non_blocking=False):
        """PyTorch's type name (`'tape.DoubleTensor'`) with no argument, else
        the tensor cast to `dtype` (a dtype, or a type name)."""
        if dtype is None:
            return f"tape.{scalar_type_name(self.dtype)}Tensor"
        if isinstance(dtype, str):
            if dtype not in _TYPE_NAMES:
                raise ValueError(f"invalid type: '{dtype}'")
            dtype = _TYPE_NAMES[dtype]
        return self.to(dtype)

    def half(self):
        return self.to(float16)

    def numel(self):
        v = self._value
        return 1 if type(v) is float else v.size

    nelement = numel

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def _array(self):
        v = self._value
        return np.array(v) if type(v) is float else v

    # -- autograd attributes -------------------------------------------------
    @property
    def requires_grad(self):
        return self._rg

    @requires_grad.setter
    def requires_grad(self, flag):
        if flag and self.is_leaf and self.dtype.kind not in "fc":  # the setter's text differs from requires_grad_'s
            raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
        self.requires_grad_(flag)

    def is_inference(self):
        """Whether the tensor was made in inference mode, as PyTorch's."""
        return self._inference

    def requires_grad_(self, requires_grad=True):
        if requires_grad and self._inference and not state.tape.inference:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
        if not self.is_leaf:
            if not requires_grad:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to use a "
                    "computed variable in a subgraph that doesn't require differentiation use "
                    "var_no_grad = var.detach().")
            return self
        if requires_grad and self.dtype.kind not in "fc":  # PyTorch's text here, unlike its factories'
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if requires_grad:
            refuse_half_grad(self.dtype)
        if bool(requires_grad) != self._rg:
            if set_hooks:
                set_hooks[0](self, "requires_grad")
            self._drop_row()
            self._rg = bool(requires_grad)
        return self

    @property
    def is_leaf(self):
        if not self._rg:
            return True
        tp, r = recorded_row(self)  # a stale view is none, and stays stale
        return tp is None or bool(tp.op[r] == LEAF)

    @property
    def grad_fn(self):
        if self.is_leaf:
            return None
        from ._node import node_for
        return node_for(*where(self))

    @property
    def grad(self):
        if self._grad is None and not self.is_leaf and not self.retains_grad and not _repeating():
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
                "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
                "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. "
                "If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor "
                "instead. See github.com/pytorch/pytorch/pull/30531 for more information.",
                UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                                f"{type(value).__name__}")
            if value.shape != self.shape:
                raise RuntimeError(f"attempting to assign a gradient of size '{list(value.shape)}' to a "
                                   f"tensor of size '{list(self.shape)}'. Please ensure that the "
                                   "gradient and the tensor are the same size")
            if value.dtype != self.dtype:
                raise RuntimeError(
                    f"attempting to assign a gradient with dtype '{cpp_type_name(value.dtype).lower()}' to a "
                    f"tensor with grad_dtype '{scalar_type_name(self.dtype)}'. The gradient must match the "
                    "tensor's grad_dtype (defaults to the tensor's dtype). You can set the tensor's grad_dtype "
                    "attribute with a specific dtype, or None to allow any dtype. Set grad_dtype with caution. "
                    "Diverging the dtypes of a tensor and its gradient may break downstream systems that "
                    "assume they match.")
        if set_hooks:
            set_hooks[0](self, "grad")
        self._grad = value

    @grad.deleter
    def grad(self):
        if set_hooks:
            set_hooks[0](self, "grad")
        self._grad = None

    def retain_grad(self):
        if not self._rg:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if not self.is_leaf:
            tp, r = where(self)
            tp.flags[r] |= RETAIN
            tp.retained[r] = weakref.ref(self)

    @property
    def retains_grad(self):
        if self.is_leaf:
            return False
        tp, r = where(self)
        return bool(tp.flags[r] & RETAIN)

    @property
    def _version(self):
        return 0 if self._vc is None else self._vc.n

    def detach(self):
        """A new tensor sharing storage and version counter, with no history."""
        view = new_tensor(self._memory())
        self._share_storage(view, differentiable=False)
        view._storage_of = self
        return view

    def detach_(self):
        if self._view_of is not None:
            raise RuntimeError(
                "Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel "
                "(DDP) for training, and gradient_as_bucket_view is set as True, gradients are views of DDP "
                "buckets, and hence detach_() cannot be called on these gradients. To fix this error, please "
                "refer to the Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution.")
        self._drop_row(detached=True)
        self._rg = False
        return self

    @property
    def data(self):
        """A tensor sharing this one's storage, with no history and, unlike
        detach()'s, a version counter of its own, as in PyTorch."""
        t = new_tensor(self._memory())
        t._storage_of = self
        if self.ndim == 0:  # the rows of a 0-d value hold a copy of it (sval): see _stored_through_data
            t._data_of = self
        return t

    def _stored_through_data(self):
        """After a write through `.data` into this 0-d tensor's memory. As in
        PyTorch, where .data shares the storage but not the version counter,
        a non-leaf's graphs read the new value, also those recorded before:
        its row takes the value in place (the row's sval). A leaf leaves its
        row, which keeps the old value for the graphs that used it."""
        tp, r = where(self)
        if tp is None:
            return
        if self.is_leaf:
            self._drop_row()
        else:
            tp.m_sval[r] = float(self._value)

    @property
    def _base(self):
        return self._view_of

    def _is_view(self):
        return self._view_of is not None

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be a Tensor, not {type(value).__name__}")
        if self._rg and value.dtype.kind not in "fc":
            raise RuntimeError("data set to a tensor that requires gradients must be floating point "
                               "or complex dtype")
        if set_hooks:
            set_hooks[0](self, "data")
        self._set_storage(value._value)

    def keep_recorded_value(self):
        """Before this tensor lets go of its array: the rows that recorded the
        array (its own, and constants' rows in its version counter) keep it,
        so their graphs read the value they saved, as PyTorch's saved tensors
        keep their storage (the tape holds the tensor, not the array)."""
        self._const_row = None  # its uses from now on read the new value
        value = self._value
        if type(value) is not np.ndarray:
            return
        address = id(value) + DATA_FIELD
        tp, r = recorded_row(self)
        named = [(tp.ep, r)] if tp is not None else []
        if self._vc is not None:
            named += self._vc.rows
        for ep, r in named:
            tp, r = current_row(ep, r)
            if r >= 0 and tp.m_ptr[r] == address:
                tp.keep.setdefault(r, value)

    def _drop_row(self, detached=False):
        """Stop naming a row (a leaf about to change, or detach_). Graphs that
        use the row keep it, with the value it had; it no longer counts as
        live, and the next use of a leaf registers a new row. After detach_,
        as in PyTorch, those graphs give a leaf no gradient, and those that
        saved a non-leaf's value refuse to run."""
        self._foreign_rows = None
        tp, r = where(self)
        if tp is None:
            return
        if type(self._value) is not float:
            tp.keep.setdefault(r, self._value)
        if detached:
            if tp.op[r] != LEAF:
                tp.mark_dirty(r)
            tp.owners[r] = DetachedInPlace()
        elif tp.op[r] == LEAF:
            tp.owners[r] = _LeafRef(self)
            # graphs built before the change reach the leaf through this row
            # (autograd.grad(y, x) after x.detach().add_(1)): it is x's too.
            # A training loop's p.data -= ... leaves a row a step: the rows
            # that compaction dropped are pruned as the list doubles
            # (a row a dropped segment's inputs gave back may be left twice: Tape.adopt_at)
            left = (tp.epoch_of(r), r)
            rows = [*self._left_rows, left] if left not in self._left_rows else list(self._left_rows)
            if len(rows) >= self._left_rows_prune_at:
                rows = self._live_left_rows()
                self._left_rows_prune_at = 2 * len(rows) + 64
            self._left_rows = rows
        else:
            tp.owners[r] = _dead_token()
        self._ep, self._row = None, -1

    def _live_left_rows(self):
        """The (epoch, row) pairs of the leaf rows this tensor left that its
        tape still holds for it."""
        live = []
        for ep, r in self._left_rows:
            tp, q = current_row(ep, r)
            owner = tp.owners[q] if q >= 0 else None
            if type(owner) is _LeafRef and owner() is self:
                live.append((ep, r))
        return live

    def _left_rows_on(self, tp):
        """The leaf rows of tape tp that this tensor left, in its numbering now."""
        if not self._left_rows:  # the common case, on every autograd.grad
            return ()
        return [q for row_tape, q in (current_row(ep, r) for ep, r in self._live_left_rows()) if row_tape is tp]

    def _version_counter(self):
        vc = self._vc
        if vc is None:
            with _VERSION_LOCK:
                vc = self._vc
                if vc is None:
                    vc = _Version()
                    vc.views.append(weakref.ref(self))
                    if self._ep is not None:
                        vc.rows.append((self._ep, self._row))
                    self._vc = vc
        return vc

    def _share_storage(self, view, differentiable=True):
        """Make `view` share this tensor's storage and version counter; a
        differentiable view names the first tensor of the chain of views."""
        vc = self._version_counter()
        view._vc = vc
        if differentiable:
            view._view_of = self if self._view_of is None else self._view_of
        vc.add_view(view)
        if view._ep is not None:
            vc.add_row(view._ep, view._row)

    def _set_storage(self, value):
        """Replace the value without history (`.data = ...`).

        A registered leaf row keeps the old value; the next use registers
        afresh. A non-leaf's row reads a new value of its layout, so the
        backward of its uses, earlier and later, reads it, as PyTorch's
        saved inputs share the storage that .data replaces; unless its own
        backward reads it (a saved result, which PyTorch's keeps as it was,
        sharing the tensor's version counter): one row holds one value, so
        there the row keeps the old one (keep_recorded_value) and the tensor
        moves to a copy row of the new one, which is no node (its grad_fn
        is still the row's) and passes its uses' gradient to the row.
        """
        from ._saved import row_saves
        self.keep_recorded_value()
        old = self._value
        if self.is_leaf:
            self._drop_row()
        elif self._ep is not None and type(value) is type(old) and (
                type(value) is float or value.shape == old.shape and value.dtype == old.dtype):
            tp, r = where(self)
            if row_saves(tp, r) & SAVES_OUT:
                from ._record import record
                from ._registry import lookup
                if type(value) is float:
                    value = value * 1.0  # a float of its own: it is the copy row's liveness token
                vc = self._version_counter()
                copy = record(lookup("clone"), value, (self,), hidden=True)
                if type(value) is not float:
                    tp.owners[r] = _dead_token()  # the row lives while the copy row reaches it
                    tp.owners[copy._row] = self
                vc.add_row(tp.ep, r)  # a later write changes what the row saved, as PyTorch's
                self._ep, self._row = copy._ep, copy._row
                vc.add_row(copy._ep, copy._row)
            else:
                if type(value) is float and tp.owners[r] is old:
                    value = value * 1.0  # a float of its own: it is the row's liveness token
                    tp.owners[r] = value
                tp.reread(r, value)
        self._value = value

    def bump_version(self):
        """Record an in-place change: rows aliasing the old value become dirty."""
        if self._inference and not state.tape.inference:
            raise RuntimeError("Inplace update to inference tensor outside InferenceMode is not allowed.You can "
                               "make a clone to get a normal tensor before doing inplace update.See "
                               "https://github.com/pytorch/rfcs/pull/17 for more details.")
        if written_hooks:  # tape.compile's recording or a replay's undo log (Note [Side effects of a replay])
            written_hooks[0](self)
        vc = self._version_counter()
        tp, r = recorded_row(self)  # a stale view's old row, not a new one to dirty
        # what names the write's op (mark_dirty), wanted only where a row is dirtied
        written = (self if self._view_of is None else self._view_of) if tp is not None or vc.rows else None
        if tp is not None:
            tp.mark_dirty(r, vc, written)
        for ep, r in vc.rows:
            row_tape, r = current_row(ep, r)
            if r >= 0:
                row_tape.mark_dirty(r, vc, written)
        vc.rows = []
        vc.n += 1
        # a leaf changed through itself or a view (under no_grad) leaves its
        # dirty row to the graphs that used it; its next use registers anew
        for t in (self, *vc.other_views(self)):
            if t._rg and t._ep is not None and type(t._ep) is not StaleView and t.is_leaf:
                t._drop_row()

    # -- conversion ----------------------------------------------------------
    def _refuse_if_grad(self, what):
        # as PyTorch: allowed where grad mode is off (inside no_grad)
        if self._rg and state.tape.grad_enabled:
            raise RuntimeError(f"Can't call {what}() on Tensor that requires grad. "
                               f"Use tensor.detach().{what}() instead.")

    def numpy(self, *, force=False):
        if not force:
            self._refuse_if_grad("numpy")
        a = self._memory()
        if made_hooks:
            read_hooks[0](self, "array", a.copy())
        return a

    def __array__(self, dtype=None, copy=None):
        self._refuse_if_grad("numpy")
        a = self._memory()
        if made_hooks:
            read_hooks[0](self, "array", a.copy())
        return a if dtype is None else a.astype(dtype)

    def _memory(self):
        """The value as the array that is this tensor's memory, which NumPy
        shares (`t.numpy()`), as PyTorch's. A 0-d float64 tensor holds a
        Python float until then (Note [Tape layout]), and an array from then
        on: its row's liveness token, the float, becomes the tensor."""
        v = self._value
        if type(v) is not float:
            return v
        tp, r = where(self)
        if tp is not None and tp.owners[r] is v:
            tp.owners[r] = self
        self._value = a = np.array(v)
        return a

    def item(self):
        v = self._item()
        if made_hooks:
            read_hooks[0](self, "value", v)
        return v

    def _item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        v = self._value
        return _unpinned(v) if type(v) is float else v.reshape(()).item()

    def tolist(self):
        v = self._value
        v = _unpinned(v) if type(v) is float else v.tolist()
        if made_hooks:
            read_hooks[0](self, "list", v)
        return v

    def _scalar(self, kind):
        if self.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        if self._rg and kind is float and not _repeating():  # PyTorch warns for float() only
            warn_once("Converting a tensor with requires_grad=True to a scalar may lead to unexpected "
                      "behavior.\nConsider using tensor.detach() first.", stacklevel=3)
        return kind(self.item())

    def __float__(self):
        return self._scalar(float)

    def __int__(self):
        return self._scalar(int)

    def __bool__(self):
        if self.numel() != 1:
            amount = "no values" if self.numel() == 0 else "more than one value"
            raise RuntimeError(f"Boolean value of Tensor with {amount} is ambiguous")
        truth = bool(self._item())
        if made_hooks:
            read_hooks[0](self, "truth", truth)
        return truth

    def __index__(self):
        if self.dtype.kind not in "iub" or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __format__(self, spec):
        # PyTorch's rule: a 0-d tensor formats as its number (f"{loss}" too);
        # any other takes object's, which is str() and refuses a spec
        if self.ndim == 0:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def __repr__(self):
        suffixes = []
        # PyTorch shows a dtype it would not infer: any but the default float,
        # int64 and bool; for an empty tensor any but the default float
        inferred = (get_default_dtype(),) if self.numel() == 0 else (get_default_dtype(), np.int64, np.bool_)
        if self.dtype not in inferred:
            suffixes.append(f"dtype=tape.{self.dtype.name}")
        if self._rg:
            fn = self.grad_fn
            suffixes.append(f"grad_fn=<{type(fn).__name__}>" if fn is not None else "requires_grad=True")
        return _format.tensor_repr(self._array(), suffixes)

    def __pos__(self):
        if self.dtype.kind == "b":
            raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
        return self

    __hash__ = object.__hash__

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __reduce__(self):
        raise TypeError("pickling tape tensors is not supported yet; use t.detach().numpy()")

    # Tensor.backward is attached by tape._engine, which imports this module


_WARNED = set()


def warn_once(message, stacklevel):
    """A UserWarning the first time `message` is given in this process, as
    PyTorch's TORCH_WARN_ONCE; `stacklevel` counts from the caller."""
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, UserWarning, stacklevel=stacklevel + 1)


def refuse_half_grad(dtype):
    """tape holds float16 values but cannot differentiate them (the sweep
    computes in float32 and float64): refuse to make one that requires grad."""
    if dtype == float16:
        raise RuntimeError("tape cannot differentiate float16 (Half) tensors; use float32 or float64")


def _shape_dim(dim, ndim):
    """`dim` as an index into a shape: PyTorch's size() and stride() refuse
    any dim of a 0-d tensor, which ops take as dim 0."""
    if ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return _norm_dim(dim, ndim)


def _norm_dim(dim, ndim):
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim % n


Tensor.__module__ = "tape"
