"""tape.autograd.graph, as torch.autograd.graph: the graph's node types and
the saved-tensor hooks."""
from .._node import AccumulateGrad, Node, next_rows, node_for, node_type
from .._saved import disable_saved_tensors_hooks, saved_tensors_hooks

__all__ = ["Node", "AccumulateGrad", "node_for", "node_type", "next_rows", "saved_tensors_hooks",
           "disable_saved_tensors_hooks"]
