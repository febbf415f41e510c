"""tape: a PyTorch-compatible reverse-mode autograd engine. Forward ops append
rows to a flat struct-of-arrays tape; backward is one Numba-compiled sweep.

>>> import tape
>>> x = tape.tensor(2.0, requires_grad=True)
>>> y = (x * x).sin()
>>> y.backward()
>>> round(x.grad.item(), 4)
-2.6146
"""
from ._dtypes import (bool_ as bool, float16, float32, float64, get_default_dtype, int8, int16, int32,
                      int64, set_default_dtype, uint8)
from ._tensor import Tensor, device, is_floating_point, is_tensor, numel, tensor_to
from ._factories import (as_tensor, empty_like, from_numpy, full_like, manual_seed, ones_like, rand_like,
                         randn_like, tensor, zeros_like)
from ._grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,
                         no_grad, set_grad_enabled)
from . import autograd
from .autograd.anomaly_mode import is_anomaly_check_nan_enabled, is_anomaly_enabled

import ops  # noqa: E402  (which sets every op as tape.<name>)
from . import _factories  # noqa: E402
from ops._signature import with_signature as _with_signature  # noqa: E402

# the factories under PyTorch's signatures, with out=
arange, empty, eye, full, linspace, ones, rand, randint, randn, zeros = (
    _with_signature(getattr(_factories, _name), _name, ops.FACTORY_SIGNATURES[_name], factory=True)
    for _name in ("arange", "empty", "eye", "full", "linspace", "ones", "rand", "randint", "randn", "zeros"))
from . import linalg  # noqa: E402
from . import func  # noqa: E402
from . import _batched  # noqa: E402
from . import utils  # noqa: E402
from . import viz  # noqa: E402

# PyTorch's Tensor.to also takes a device or another tensor; ops sets the op
# to(x, dtype) as the method, so the method of all three forms goes on after it
Tensor.to = tensor_to
# now that every Tensor method is set, vmap's BatchedTensor refuses those without a batching rule
_batched.refuse_the_rest()

# PyTorch's names of dtypes, the same objects as ours (tape.float is tape.float32)
half, float, double = float16, float32, float64
short, int, long = int16, int32, int64

__version__ = "0.1.0"
__all__ = ["Tensor", "autograd", "func", "linalg", "utils", "viz", "device", "bool", "float16", "float32",
           "float64", "int8", "int16", "int32", "int64", "uint8", "half", "float", "double", "short", "int", "long",
           "get_default_dtype", "set_default_dtype", "is_floating_point", "is_tensor", "numel", "arange",
           "as_tensor", "empty", "empty_like", "eye", "from_numpy", "full", "full_like", "linspace",
           "manual_seed", "ones", "ones_like", "rand", "rand_like", "randint", "randn", "randn_like",
           "tensor", "zeros", "zeros_like", "enable_grad", "inference_mode", "is_grad_enabled",
           "is_inference_mode_enabled", "no_grad", "set_grad_enabled", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled", *ops.__all__]
