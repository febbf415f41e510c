"""grad_fn nodes: thin views of tape rows, made on demand, equal by (tape, row).

Each op's node type is a subclass named after PyTorch's (`SinBackward0`), so
`type(node).__name__` and `repr(node)` read as in PyTorch.
"""
from ._registry import LEAF, REGISTRY
from ._tape import HIDDEN, RG

__all__ = ["Node", "AccumulateGrad", "node_for", "edge"]


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
        r = self.row()
        tp = self._ep.tape
        return tuple(edge(tp, int(i)) for i in (tp.a0[r], tp.a1[r])[:REGISTRY[tp.op[r]].arity])

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


def node_for(tp, r):
    while tp.flags[r] & HIDDEN:  # implicit broadcasts and copies are not PyTorch nodes
        r = int(tp.a0[r])
    if tp.python_rows:
        state = tp.python_rows.get(r)
        if state is not None:  # a custom Function's node names its type (Note [Python-only rows])
            return _made(state._node_type(), tp, r)
    name = REGISTRY[tp.op[r]].grad_fn
    cls = _TYPES.get(name)
    if cls is None:
        attrs = {"__slots__": ()}
        if name in _NAMESPACED:
            attrs["name"] = _namespaced_name
        cls = _TYPES[name] = type(name, (Node,), attrs)
    return _made(cls, tp, r)


def _made(cls, tp, r):
    node = cls.__new__(cls)
    node._ep, node._row = tp.ep, r
    tp.nodes.add(node)
    return node


def edge(tp, i):
    """The (node, 0) pair of next_functions for input row i, or (None, 0)."""
    if i < 0 or not tp.flags[i] & RG:
        return (None, 0)
    while tp.flags[i] & HIDDEN:
        i = int(tp.a0[i])
    if tp.op[i] == LEAF and tp.tensor_at(i) is None:
        return (None, 0)
    return (node_for(tp, i), 0)
