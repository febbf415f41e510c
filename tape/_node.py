"""grad_fn nodes: thin views of tape rows, made on demand, equal by (tape, row).

Each op's node type is a subclass named after PyTorch's (`SinBackward0`), so
`type(node).__name__` and `repr(node)` read as in PyTorch.
"""
from ._registry import LEAF, REGISTRY
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


_TYPES = {"AccumulateGrad": AccumulateGrad}
# nodes PyTorch implements in C++ by hand rather than generates: their name()
# carries the namespace
_NAMESPACED = {"CopySlices"}


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
        attrs = {"__slots__": ()}
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
    itself (a custom Function's arguments, past the rows that join them)."""
    a0, flags = tp.m_a0, tp.m_flags
    state = tp.python_rows.get(r) if tp.python_rows else None
    inputs = (state.input_rows(tp, r) if state is not None
              else (a0[r], tp.m_a1[r])[:REGISTRY[tp.m_op[r]].arity])
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
