"""tape: a PyTorch-compatible reverse-mode autograd engine. Forward ops append
rows to a flat struct-of-arrays tape; backward is one Numba-compiled sweep.

>>> import tape
>>> x = tape.tensor(2.0, requires_grad=True)
>>> y = (x * x).sin()
>>> y.backward()
>>> round(x.grad.item(), 4)
-2.6146
"""
import math as _math

from ._dtypes import (bool_ as bool, finfo, float16, float32, float64, get_default_dtype, iinfo, int8, int16, int32,
                      int64, set_default_dtype, uint8)
from ._tensor import Size, Tensor, device, is_floating_point, is_tensor, numel
from ._factories import (as_tensor, empty_like, from_numpy, full_like, manual_seed, ones_like, rand_like,
                         randn_like, tensor, zeros_like)
from ._grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,
                         no_grad, set_grad_enabled)
from . import _factories, autograd
from ._compile import compile
from .autograd.anomaly_mode import is_anomaly_check_nan_enabled, is_anomaly_enabled

# Note [The face]
# ~~~~~~~~~~~~~~~
# This module is the engine's face and a client of ops: the ops' functions
# (tape.<name>), tape.linalg and the transforms built on the ops (func, utils,
# viz) come from ops' declarations (Note [Op declarations]). After `import
# ops` first, ops imports the engine, and so this module, before any op
# exists; so the face fills itself when ops is complete (the registry's
# `when_sealed`), whichever import came first: `import ops; import tape` and
# `import tape` give the same module. (Not a module __getattr__: CPython
# 3.11 then looks up every `tape.<name>` the slow way, 30 ns a call.)
from . import _registry  # noqa: E402
from ops._declare import PUBLIC as _PUBLIC, with_signature as _with_signature  # noqa: E402

# the factories under PyTorch's signatures, with out= (layout=, pin_memory=
# and generator= left out: tape has one of each); torch's *size is *dims
# here, so that size= (zeros(size=(2, 3))) can be a keyword too
_SIZED = "*dims, out=None, dtype=None, device=None, requires_grad=False"
FACTORY_SIGNATURES = {
    **dict.fromkeys(("zeros", "ones", "empty", "rand", "randn"), _SIZED),
    "full": "size, fill_value, *, out=None, dtype=None, device=None, requires_grad=False",
    "eye": "n, m=None, *, out=None, dtype=None, device=None, requires_grad=False",
    "arange": "start=None, end=None, step=1, *, out=None, dtype=None, device=None, requires_grad=False",
    "linspace": "start, end, steps, *, out=None, dtype=None, device=None, requires_grad=False",
    "logspace": "start, end, steps, base=10.0, *, out=None, dtype=None, device=None, requires_grad=False",
    "randperm": "n, *, out=None, dtype=None, device=None, requires_grad=False",
    "randint": "low=0, high=None, size=(), *, out=None, dtype=None, device=None, requires_grad=False",
}
arange, empty, eye, full, linspace, logspace, ones, rand, randint, randn, randperm, zeros = (
    _with_signature(getattr(_factories, _name), _name, FACTORY_SIGNATURES[_name], factory=True)
    for _name in ("arange", "empty", "eye", "full", "linspace", "logspace", "ones", "rand", "randint", "randn",
                  "randperm", "zeros"))

# PyTorch's names of dtypes, the same objects as ours (tape.float is tape.float32)
half, float, double = float16, float32, float64
short, int, long = int16, int32, int64
# and its constants
pi, e, inf, nan = _math.pi, _math.e, _math.inf, _math.nan

__version__ = "0.1.0"
_MODULES = ("autograd", "func", "linalg", "utils", "viz")
_ENGINE = ["Tensor", "Size", "device", "finfo", "iinfo", "pi", "e", "inf", "nan", "bool", "float16", "float32",
           "float64", "int8", "int16", "int32", "int64", "uint8", "half", "float", "double", "short", "int", "long",
           "get_default_dtype", "set_default_dtype", "is_floating_point", "is_tensor", "numel", "arange",
           "as_tensor", "empty", "empty_like", "eye", "from_numpy", "full", "full_like", "linspace", "logspace",
           "manual_seed", "ones", "ones_like", "rand", "rand_like", "randint", "randn", "randn_like", "randperm",
           "tensor", "zeros", "zeros_like", "enable_grad", "inference_mode", "is_grad_enabled",
           "is_inference_mode_enabled", "no_grad", "set_grad_enabled", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled", "compile"]


def _fill():
    """The ops' names and the modules built on them (Note [The face])."""
    global __all__
    globals().update(_PUBLIC["tape"])
    from . import func, linalg, utils, viz  # noqa: F401
    __all__ = list(_MODULES) + _ENGINE + sorted(_PUBLIC["tape"])


_registry.when_sealed(_fill)
import ops  # noqa: E402,F401  (binds every op's Tensor methods; fills the face once complete)
