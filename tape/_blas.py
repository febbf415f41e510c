"""The BLAS the native sweep's matrix products call: the one NumPy loaded.

The sweep calls Fortran dgemm as the external symbol ``tape_dgemm``
(`add_product` in tape/_gen.py). Importing this module finds dgemm's address
and registers it under that name with LLVM, which resolves the symbol when a
compiled (or cached) sweep is linked, so this module must be imported before
the first sweep runs: tape._sweep imports it.

Note [Which BLAS]
NumPy's wheels bundle OpenBLAS, already loaded by ``import numpy``; its dgemm
is the cheapest to reach and the same BLAS as the forward products. Numba's
own np.dot goes through SciPy's ``cython_blas`` instead, and importing
``scipy.linalg`` costs 0.3 s of cold start, so SciPy is only the fallback for
NumPy builds whose BLAS is not found here (Accelerate on macOS).

Integer arguments are passed as pointers to int64 slots. An ILP64 dgemm (the
``64_`` names) reads all 8 bytes; an LP64 one reads the first 4, which on a
little-endian machine hold the same value, so LP64 providers are only used
there.
"""
import ctypes
import glob
import os
import sys

import numpy as np
from llvmlite import binding as llvm

SYMBOL = "tape_dgemm"

# dgemm's exported names, ILP64 first: (name, bytes per integer argument)
DGEMM_NAMES = (("scipy_dgemm_64_", 8), ("dgemm_64_", 8), ("scipy_dgemm_", 4), ("dgemm_", 4))


def _numpy_blas_libraries():
    """Paths of the shared libraries that may hold NumPy's BLAS, likeliest
    first: the OpenBLAS its wheels bundle, then (on Linux) every mapped
    library with "blas" in its name, which covers distribution and conda
    builds (read only if the bundled one has no dgemm)."""
    root = os.path.dirname(np.__file__)
    bundled = []
    for folder in (os.path.join(root, os.pardir, "numpy.libs"), os.path.join(root, ".dylibs")):
        bundled += sorted(glob.glob(os.path.join(folder, "*openblas*")))
    yield from bundled
    try:
        with open("/proc/self/maps") as maps:
            mapped = {line.split()[-1] for line in maps if "blas" in line.lower()}
    except OSError:
        return
    yield from sorted(p for p in mapped if p.startswith("/") and p not in bundled)


def _usable(width):
    return width == 8 or sys.byteorder == "little"


def dgemm_in_library(path):
    """(address, bytes per integer) of the dgemm that the library at path
    exports, or None."""
    try:
        library = ctypes.CDLL(path)
    except OSError:
        return None
    for name, width in DGEMM_NAMES:
        function = getattr(library, name, None)
        if function is not None and _usable(width):
            return ctypes.cast(function, ctypes.c_void_p).value, width
    return None


def dgemm_in_scipy():
    """(address, bytes per integer) of SciPy's cython_blas dgemm, or None
    without SciPy. cython_blas declares its integers ``int``: LP64."""
    try:
        from scipy.linalg import cython_blas
    except ImportError:
        return None
    if not _usable(4):
        return None
    capsule = cython_blas.__pyx_capi__["dgemm"]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return get_pointer(capsule, get_name(capsule)), 4


def find_dgemm():
    """(address, bytes per integer) of the dgemm the sweep calls (Note [Which BLAS])."""
    for path in _numpy_blas_libraries():
        found = dgemm_in_library(path)
        if found is not None:
            return found
    found = dgemm_in_scipy()
    if found is None:
        raise ImportError(
            "tape needs a BLAS dgemm for matrix products in backward, and found none in "
            "NumPy's libraries; installing SciPy provides one (pip install scipy)")
    return found


llvm.add_symbol(SYMBOL, find_dgemm()[0])
