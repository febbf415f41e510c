"""grad_fn nodes: thin views of tape rows, made on demand, equal by (tape, row).

Each op's node type is a subclass named after PyTorch's (`SinBackward0`), so
`type(node).__name__` and `repr(node)` read as in PyTorch, with the
`_saved_<name>` and `_raw_saved_<name>` attributes of what its ops save
(Note [Saved values' names] in tape._registry).

What PyTorch keeps on a node object, tape keeps per row, since nodes are made
on demand: `tp.node_data[r]` (metadata, the SavedTensor objects) and
`tp.node_hooks[r]` (hooks and pre-hooks: a non-leaf's send the graphs that
reach its row through the Python walk, Note [Python-only rows] in
tape._engine; an AccumulateGrad node's run where backward() accumulates).
"""
from ._engine import RemovableHandle
from ._registry import LEAF, REGISTRY, SAVED_TENSORS, opdefs
from ._saved import SavedTensor, saved_tensor
from ._tape import HIDDEN, RG

__all__ = ["Node", "AccumulateGrad", "node_for", "node_type", "next_rows"]


class Node:
    """The grad_fn of the tensor recorded at one tape row.

    A live node keeps its row (and what it reaches) on the tape, as a
    PyTorch grad_fn keeps its graph alive.
    """
    __slots__ = ("_ep", "_row", "__weakref__")

    def row(self):
        """The node's row in its tape's current numbering."""
        if self._ep.remap is not None:
            self._row = int(self._ep.remap[self._row])
            self._ep = self._ep.tape.ep
        return self._row

    def name(self):
        return type(self).__name__

    @property
    def next_functions(self):
        tp = self._ep.tape
        return tuple((None, 0) if i < 0 else (node_for(tp, i), 0) for i in next_rows(tp, self.row()))

    @property
    def metadata(self):
        """A dict kept with the node while its row lives, as PyTorch's Node.metadata."""
        return _row_data(self).metadata

    def register_hook(self, fn):
        """Register `fn(grad_inputs, grad_outputs)`, called after the node
        computes its inputs' gradients (None for inputs that need none); a
        tuple it returns replaces grad_inputs, as torch.autograd.graph.Node's."""
        return _add_node_hook(self, 0, fn)

    def register_prehook(self, fn):
        """Register `fn(grad_outputs)`, called before the node runs; a tuple
        it returns replaces grad_outputs, as torch.autograd.graph.Node's."""
        return _add_node_hook(self, 1, fn)

    def __eq__(self, other):
        return (isinstance(other, Node) and self._ep.tape is other._ep.tape
                and self.row() == other.row())

    def __hash__(self):
        return hash((id(self._ep.tape), self.row()))

    def __repr__(self):
        # PyTorch's repr uses the class name, also where name() differs
        return f"<{type(self).__name__} object at {id(self):#x}>"


class AccumulateGrad(Node):
    """The node that accumulates into a leaf's `.grad`; `.variable` is the leaf."""
    __slots__ = ()

    @property
    def variable(self):
        return self._ep.tape.tensor_at(self.row())

    @property
    def next_functions(self):
        return ()

    def name(self):
        return "torch::autograd::AccumulateGrad"  # PyTorch's name() for this node


class _RowData:
    """A node's Python state that PyTorch keeps on the node object."""
    __slots__ = ("metadata", "raw_saved")

    def __init__(self):
        self.metadata, self.raw_saved = {}, {}


def _row_data(node):
    data = node._ep.tape.node_data
    r = node.row()
    entry = data.get(r)
    if entry is None:
        entry = data[r] = _RowData()
    return entry


def _add_node_hook(node, kind, fn):
    """Register fn as a hook (kind 0) or pre-hook (kind 1) of node's row
    (an AccumulateGrad node's: its leaf's row, run by backward())."""
    hooks = node._ep.tape.node_hooks.setdefault(node.row(), ([], []))[kind]
    hooks.append(fn)
    return RemovableHandle(hooks, fn)


def _source_of(node, name):
    """Where node's row keeps its saved value `name`; AttributeError when
    the row's op does not save it (another op of the same node type may)."""
    tp = node._ep.tape
    for n, source in REGISTRY[tp.op[node.row()]].saved:
        if n == name:
            return source
    raise AttributeError(f"'{type(node).__name__}' object has no attribute '_saved_{name}'")


def _saved_attribute(name):
    def get(node):
        source = _source_of(node, name)
        tp, r = node._ep.tape, node.row()
        if callable(source):
            from ._engine import _Ctx
            return source(_Ctx(tp, r))
        if source == "c":
            return float(tp.c[r])
        if source == "p":
            return float(tp.p[r])
        if source in ("x_shape", "y_shape"):
            return tuple(int(d) for d in tp.shape(int((tp.a0 if source == "x_shape" else tp.a1)[r])))
        if source == "int":
            (value,) = tp.ints(r)
            return int(value)
        return saved_tensor(tp, r, source)
    return property(get, doc=f"PyTorch's `_saved_{name}`: what the node's op saved as {name}")


def _raw_saved_attribute(name):
    def get(node):
        source = _source_of(node, name)
        raw = _row_data(node).raw_saved
        saved = raw.get(name)
        if saved is None:
            saved = raw[name] = SavedTensor(node, source)
        return saved
    return property(get, doc=f"PyTorch's `_raw_saved_{name}`: the SavedTensor of {name}")


def _saved_attributes(grad_fn):
    """The `_saved_*` and `_raw_saved_*` properties of node type `grad_fn`:
    those of every op recorded under that name."""
    attrs = {}
    for opdef in opdefs():
        if opdef.grad_fn == grad_fn:
            for name, source in opdef.saved:
                attrs[f"_saved_{name}"] = _saved_attribute(name)
                if not callable(source) and source in SAVED_TENSORS:
                    attrs[f"_raw_saved_{name}"] = _raw_saved_attribute(name)
    return attrs


_TYPES = {"AccumulateGrad": AccumulateGrad}
# nodes PyTorch implements in C++ by hand rather than generates: their name()
# carries the namespace
_NAMESPACED = {"CopySlices", "Error"}


def _namespaced_name(self):
    return f"torch::autograd::{type(self).__name__}"


def node_type(tp, r):
    """The node class of row r (a row that is not hidden), named after
    PyTorch's grad_fn type, or a custom Function's (Note [Python-only rows])."""
    if tp.python_rows:
        state = tp.python_rows.get(r)
        if state is not None:
            return state._node_type()
    name = REGISTRY[tp.op[r]].grad_fn
    cls = _TYPES.get(name)
    if cls is None:
        attrs = {"__slots__": (), **_saved_attributes(name)}
        if name in _NAMESPACED:
            attrs["name"] = _namespaced_name
        cls = _TYPES[name] = type(name, (Node,), attrs)
    return cls


def node_for(tp, r):
    while tp.flags[r] & HIDDEN:  # implicit broadcasts and copies are not PyTorch nodes
        r = int(tp.a0[r])
    cls = node_type(tp, r)
    node = cls.__new__(cls)
    node._ep, node._row = tp.ep, r
    tp.nodes.add(node)
    return node


def next_rows(tp, r):
    """The rows of the nodes in row r's `next_functions`, -1 where it has None:
    the one rule of which input reaches which node, shared with walks that
    make no Node objects (tape.viz). A python-only row names its inputs
    itself (a custom Function's arguments, past the rows that join them); a
    node that runs its second input's node names that node's inputs past its
    first (OpDef.runs_second)."""
    state = tp.python_rows.get(r) if tp.python_rows else None
    if state is not None:
        return _nodes_of(tp, state.input_rows(tp, r))
    opdef = REGISTRY[tp.m_op[r]]
    if opdef.runs_second:
        return _nodes_of(tp, (tp.m_a0[r],)) + next_rows(tp, int(tp.m_a1[r]))[1:]
    return _nodes_of(tp, (tp.m_a0[r], tp.m_a1[r])[:opdef.arity])


def _nodes_of(tp, inputs):
    """The rows of the nodes of input rows `inputs` (past hidden rows), -1
    for an input that is none or needs no gradient."""
    a0, flags = tp.m_a0, tp.m_flags
    rows = []
    for i in inputs:
        if i >= 0 and flags[i] & RG:
            while flags[i] & HIDDEN:
                i = a0[i]
            if tp.m_op[i] == LEAF and tp.tensor_at(i) is None:
                i = -1
        else:
            i = -1
        rows.append(i)
    return rows
