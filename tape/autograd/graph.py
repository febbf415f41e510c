"""tape.autograd.graph, as torch.autograd.graph: the graph's node types, the
saved-tensor hooks and hooks over several tensors."""
import threading

from .._engine import RemovableHandle, current_graph_task_id, will_execute
from .._node import AccumulateGrad, Node, next_rows, node_for, node_type
from .._saved import disable_saved_tensors_hooks, saved_tensors_hooks

__all__ = ["Node", "AccumulateGrad", "node_for", "node_type", "next_rows", "saved_tensors_hooks",
           "disable_saved_tensors_hooks", "register_multi_grad_hook"]


class _MultiHandle(RemovableHandle):
    """What register_multi_grad_hook returns: `remove()` removes the hook
    from every tensor."""

    def __init__(self, handles):
        self._handles = handles

    def remove(self):
        for handle in self._handles:
            handle.remove()


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """Register `fn` over several tensors, as torch.autograd.graph's: with
    mode "all", `fn(grads)` once per backward, when every tensor of
    `tensors` that the backward reaches has its gradient (None for the
    others); with mode "any", `fn(grad)` on the first gradient computed
    among them, once per backward.

    >>> import tape
    >>> a = tape.tensor(1.0, requires_grad=True)
    >>> b = tape.tensor(2.0, requires_grad=True)
    >>> handle = tape.autograd.graph.register_multi_grad_hook((a, b), print)
    >>> (a * 2).backward()
    [tensor(2.), None]
    """
    supported_modes = ("all", "any")
    if mode not in supported_modes:
        raise ValueError(f"Expects mode to be one of {supported_modes} but got {mode}")
    lock = threading.Lock()
    tensors = tuple(tensors)
    if mode == "all":
        # per backward (graph task): how many gradients came, how many will, and they
        counts, expected, buffers = {}, {}, {}

        def inner_hook(idx):
            def hook(grad):
                task = current_graph_task_id()
                with lock:
                    seen = counts.get(task, 0)
                    counts[task] = seen + 1
                    if seen == 0:
                        expected[task] = sum(map(will_execute, tensors))
                        buffers[task] = [None] * len(tensors)
                    buffers[task][idx] = grad
                    done = seen + 1 == expected[task]
                    if done:
                        grads = buffers.pop(task)
                        del counts[task], expected[task]
                if done:
                    fn(grads)
            return hook

        return _MultiHandle(tuple(t.register_hook(inner_hook(i)) for i, t in enumerate(tensors)))
    ran = set()  # the backwards in which fn ran

    def any_hook(grad):
        task = current_graph_task_id()
        with lock:
            if task in ran:
                return
            ran.add(task)
        fn(grad)

    return _MultiHandle(tuple(t.register_hook(any_hook) for t in tensors if t.requires_grad))
