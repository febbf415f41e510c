"""tape.autograd: backward, grad, custom Functions, the gradient checkers and anomaly detection, as in
torch.autograd."""
from .._engine import backward, grad
# the functions; the module stays importable, as torch.autograd.gradcheck (its GradcheckError)
from .gradcheck import gradcheck, gradgradcheck
from . import functional
from . import function
from .function import Function
from .anomaly_mode import detect_anomaly, set_detect_anomaly
from . import graph
from .variable import Variable
# the grad modes, as torch.autograd exports them (torch.autograd.grad_mode.no_grad too)
from .. import _grad_mode as grad_mode
from .._grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled

__all__ = ["backward", "grad", "Function", "Variable", "function", "gradcheck", "gradgradcheck", "graph", "functional", "detect_anomaly",
           "set_detect_anomaly", "grad_mode", "enable_grad", "inference_mode", "no_grad", "set_grad_enabled"]
