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
import numpy as np

from ._batched import BatchedTensor
from ._engine import RemovableHandle
from ._registry import LEAF, REGISTRY, SAVED_TENSORS, RowTensor, opdefs
from ._saved import SavedTensor, pack_kept, saved_row_tensor, saved_tensor
from ._tape import HIDDEN, RG, RowName, where
from ._tensor import Tensor

__all__ = ["Node", "AccumulateGrad", "node_for", "node_type", "next_rows", "next_edges", "output_edge", "home_row",
           "keep_arguments", "keep_arguments_of", "int_list"]


class Node(RowName):
    """The grad_fn of the tensor recorded at one tape row.

    A live node keeps its row (and what it reaches) on the tape, as a
    PyTorch grad_fn keeps its graph alive.
    """
    __slots__ = ("_ep", "_row", "__weakref__")

    def name(self):
        return type(self).__name__

    @property
    def next_functions(self):
        tp = self._ep.tape
        return tuple((None, 0) if i < 0 else (node_for(tp, i), nr) for i, nr in next_edges(tp, self.row()))

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
    """A node's Python state that PyTorch keeps on the node object, and the
    arguments of the call that recorded its row (keep_arguments), or the
    function that makes them when first read (keep_arguments_of)."""
    __slots__ = ("metadata", "raw_saved", "_arguments")

    def __init__(self, arguments=None):
        self.metadata, self.raw_saved, self._arguments = {}, {}, arguments

    @property
    def arguments(self):
        if callable(self._arguments):
            self._arguments = self._arguments()
        return {} if self._arguments is None else self._arguments


def keep_arguments(t, **arguments):
    """Keep, for the node of the row that recorded t, the arguments of its
    call that the node shows as they were given (the "arg" and "scalar"
    sources of Note [Saved values' names] in tape._registry); nothing for a
    tensor no row recorded, nor for one inside vmap (its rows are of all
    the samples, recorded by the ops it batches). Returns t."""
    return keep_arguments_of(t, arguments)


def keep_arguments_of(t, arguments):
    """keep_arguments with the arguments as a dict, or as a function that
    makes it, called when the node first shows one (indexing's, whose
    arguments take longer to work out than to keep the key)."""
    if type(t) is BatchedTensor:
        return t
    tp, r = where(t)
    if tp is not None:
        entry = tp.node_data.get(r)
        if entry is None:
            tp.node_data[r] = entry = _RowData(arguments)
        else:
            entry._arguments = arguments
        if tp.saved_hooks:  # Note [Saved tensor hooks] in tape._saved
            pack_kept(tp, r, entry.arguments)
    return t


def int_list(value):
    """An int[] argument as PyTorch keeps it: one int as a 1-tuple, a list as
    a tuple, None as None."""
    if value is None or isinstance(value, tuple):
        return value
    return (value,) if isinstance(value, (int, np.integer)) else tuple(value)


_UINT64 = 1 << 64


def _as_int64_getter_shows(value):
    """`value` as PyTorch's generated node getters show an int64 argument
    (or an int64 list): through an unsigned conversion, a negative int as
    its two's complement."""
    if isinstance(value, tuple):
        return tuple(_as_int64_getter_shows(v) for v in value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value) % _UINT64
    return value


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
        if source in ("arg", "scalar") or isinstance(source, RowTensor):
            try:
                return _from_arguments(node, tp, r, name, source)
            except KeyError:  # a row a VJP recorded under create_graph keeps no call's arguments
                raise AttributeError(f"'{type(node).__name__}' object has no attribute '_saved_{name}'") from None
        return saved_tensor(tp, r, source)
    return property(get, doc=f"PyTorch's `_saved_{name}`: what the node's op saved as {name}")


def _from_arguments(node, tp, r, name, source):
    arguments = _row_data(node).arguments
    if source == "arg":
        return _as_int64_getter_shows(arguments[name])
    if source == "scalar":
        return arguments[name]
    return saved_row_tensor(tp, r, name, source, arguments)


def _raw_saved_attribute(name):
    def get(node):
        source = _source_of(node, name)
        raw = _row_data(node).raw_saved
        saved = raw.get(name)
        if saved is None:
            saved = raw[name] = SavedTensor(node, name, source, _row_data(node).arguments)
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
                # (PyTorch's `_raw_saved_` of a list of tensors is a list of SavedTensors: not here)
                if (isinstance(source, RowTensor) and not source.many
                        or not callable(source) and source in SAVED_TENSORS):
                    attrs[f"_raw_saved_{name}"] = _raw_saved_attribute(name)
    return attrs


_TYPES = {"AccumulateGrad": AccumulateGrad}
# nodes PyTorch implements in C++ by hand rather than generates: their name()
# carries the namespace
_NAMESPACED = {"CopySlices", "Error", "NotImplemented"}


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


def output_edge(tp, r):
    """(the row of the node, the output number) of the tensor at row r:
    past the rows that are no PyTorch node (implicit broadcasts and
    copies), to the node's row (Note [Tape layout])."""
    flags, a0 = tp.m_flags, tp.m_a0
    while flags[r] & HIDDEN:
        r = a0[r]
    oi = tp.m_oi[r]
    return int(r - oi), int(oi)


def node_for(tp, r):
    r = output_edge(tp, r)[0]
    if tp.graph_inputs and r in tp.graph_inputs:  # another thread's node
        return node_for(*home_row(tp, r))
    node = tp.node_of.get(r)
    if node is None:
        cls = node_type(tp, r)
        node = cls.__new__(cls)
        node._ep, node._row = tp.epoch_of(r), r
        tp.nodes.add(node)
        tp.node_of[r] = node
    return node


def home_row(tp, r):
    """(tape, row) of the row that graph input r of tape tp stands for, on
    another thread's tape (Note [Graphs across threads])."""
    token = tp.owners[r]
    home = token._ep.tape
    with home.lock:  # the row, in a numbering that no compaction changes meanwhile
        return home, token.row()


def next_edges(tp, r):
    """The (row, output number) of the nodes in row r's `next_functions`,
    (-1, 0) where it has None: the one rule of which input reaches which
    node, shared with walks that make no Node objects (tape.viz). A
    python-only row names its inputs itself (a custom Function's arguments);
    a node that runs its second input's node names that node's inputs past
    its first (OpDef.runs_second)."""
    state = tp.python_rows.get(r) if tp.python_rows else None
    if state is not None:
        return _edges_of(tp, state.input_rows(tp, r))
    opdef = REGISTRY[tp.m_op[r]]
    if opdef.runs_second:
        return _edges_of(tp, (tp.m_a0[r],)) + next_edges(tp, int(tp.m_a1[r]))[1:]
    inputs = tp.inputs(r) if opdef.variadic else tp.inputs(r)[:opdef.arity]
    if opdef.edge_order is not None:
        inputs = [inputs[k] for k in opdef.edge_order]
    return _edges_of(tp, inputs)


def _edges_of(tp, inputs):
    """The (row, output number) of the nodes of input rows `inputs`, (-1, 0)
    for an input that is none or needs no gradient. A graph input's row
    stands for another thread's node (node_for)."""
    flags = tp.m_flags
    edges = []
    for i in inputs:
        edge = output_edge(tp, i) if i >= 0 and flags[i] & RG else (-1, 0)
        q = edge[0]
        if q >= 0 and tp.graph_inputs and q in tp.graph_inputs:
            edge = (q, output_edge(*home_row(tp, q))[1])
        elif q >= 0 and tp.m_op[q] == LEAF and tp.tensor_at(q) is None:
            edge = (-1, 0)
        edges.append(edge)
    return edges


def next_rows(tp, r):
    """The rows of the nodes in row r's `next_functions`, -1 where it has None."""
    return [i for i, _ in next_edges(tp, r)]


def _output_nr(self):
    """This tensor's output number in its grad_fn (0 for a leaf), as PyTorch's."""
    if self.is_leaf:
        return 0
    return output_edge(*where(self))[1]


Tensor.output_nr = property(_output_nr)
