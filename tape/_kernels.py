"""The native sweep's table of kernels, by kind and opcode, each compiled
(or loaded from the cache) when a sweep first meets its op: see Note
[Kernels by opcode] in tape/_sweep.py."""
import threading

import numpy as np

from . import _native, _sweep

__all__ = ["ADDRESSES", "load", "names"]

# ADDRESSES[kind, opcode]: the address of that kernel, which the sweep calls;
# 0 until it is loaded
ADDRESSES = np.zeros((_sweep.KINDS, len(_sweep.KERNELS)), np.int64)

_loaded = {}  # kernel function -> its compiled C function (kept alive: ADDRESSES points into it)
_lock = threading.Lock()


def _split(missing):
    return [divmod(int(m), _sweep.NOPS) for m in missing]


def names(missing):
    """The ops of the missing kernels a sweep reported, for the compile notice."""
    return sorted({_sweep.OPCODES[o] for _, o in _split(missing)})


def load(missing):
    """Load, compiling on an empty cache, the kernels a sweep reported missing
    (kind * len(OPCODES) + opcode each)."""
    with _lock:
        for kind, o in _split(missing):
            fn, signature = _sweep.KERNELS[o][kind]
            if fn not in _loaded:
                _loaded[fn] = _native.kernel(signature, fn)
            ADDRESSES[kind, o] = _loaded[fn].address
