"""tape.autograd: backward, grad, and the gradient checkers, as in torch.autograd."""
from .._engine import backward, grad
from ._gradcheck import gradcheck, gradgradcheck
from . import functional
from .. import _node as graph

__all__ = ["backward", "grad", "gradcheck", "gradgradcheck", "graph", "functional"]
