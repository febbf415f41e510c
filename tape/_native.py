"""Every Numba option tape compiles with, the on-disk cache keyed by a digest
of all native sources, and the one-line notice printed while a compile runs.
Each module holding native code imports its decorators from here.
"""
import hashlib
import os
import sys
import threading

from numba import cfunc, njit
from numba.core import caching, event

__all__ = ["jit", "kernel", "compiling", "NATIVE_SOURCES", "DIGEST", "QUIET_VARIABLE"]

# Note [Native cache]
# ~~~~~~~~~~~~~~~~~~~
# Numba keys a cached function by the file it is defined in, so a kernel in
# tape/_sweep.py that calls a helper of tape/_vecmath.py would keep running
# the old helper after an edit of _vecmath.py alone. Every module whose
# native code tape compiles, or that such code calls or links against, is
# listed here, and every cached function of those modules is keyed by one
# digest of all of them: its cache lives in a folder named by the digest
# (under NUMBA_CACHE_DIR when that is set, else tape/__pycache__, else the
# user's cache folder), and the digest is its source stamp. An edit of any
# of them is a new folder, so a stale kernel can never be loaded, and
# checkouts with the same sources can share one NUMBA_CACHE_DIR (the tests do).
NATIVE_SOURCES = ("_native.py", "_blas.py", "_vecmath.py", "_sweep.py")
_HERE = os.path.dirname(os.path.abspath(__file__))


def _digest():
    h = hashlib.sha256()
    for name in NATIVE_SOURCES:
        with open(os.path.join(_HERE, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


DIGEST = _digest()

_CacheImpl = getattr(caching, "CacheImpl", None) or caching._CacheImpl


class _DigestLocator(caching._CacheLocator):
    """Numba's cache locator for tape's native sources (Note [Native cache])."""

    def __init__(self, py_func, path):
        self._lineno = py_func.__code__.co_firstlineno
        self._path = path

    def get_cache_path(self):
        return self._path

    def get_source_stamp(self):
        return DIGEST

    def get_disambiguator(self):
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func, py_file):
        py_file = os.path.abspath(py_file)
        if os.path.dirname(py_file) != _HERE or os.path.basename(py_file) not in NATIVE_SOURCES:
            return None
        from numba import config
        from numba.misc.appdirs import AppDirs
        bases = ([config.CACHE_DIR] if config.CACHE_DIR else
                 [os.path.join(_HERE, "__pycache__"), AppDirs(appname="tape", appauthor=False).user_cache_dir])
        for base in bases:
            self = cls(py_func, os.path.join(base, f"tape-native-{DIGEST}"))
            try:
                self.ensure_cache_path()
            except OSError:
                continue
            return self
        return None


if _DigestLocator not in _CacheImpl._locator_classes:
    _CacheImpl._locator_classes.insert(0, _DigestLocator)


def jit(**options):
    """Numba's njit with tape's options: cache=True so a warm start only loads
    machine code (Note [Native cache]), error_model="numpy" so 1/0 gives inf as
    NumPy does, nogil so threads sweep their tapes at once."""
    return njit(**{"cache": True, "error_model": "numpy", "nogil": True, **options})


def kernel(signature, fn):
    """`fn` compiled (or loaded from the cache) as a C function of `signature`,
    whose address native code calls (a kernel the sweep reaches by opcode).
    Its multiply-adds contract to FMAs as tape._vecmath's do: without it the
    vectorized exp and tanh inlined into a kernel ran at half their speed
    (measured: 1.1 vs 0.67 ns an element for exp, 1.7 vs 0.88 for tanh), and
    a replay's forward rounded otherwise than eager mode's _vecmath arrays."""
    return cfunc(signature, cache=True, error_model="numpy", fastmath={"contract"})(fn)


# Note [Compile notice]
# ~~~~~~~~~~~~~~~~~~~~~
# Numba runs its compiler passes only when it compiles, never when it loads
# from the cache, so a listener to its "numba:run_pass" event knows that a
# compile of tape's code has begun: it prints one line, once for each
# `compiling` context (or once per process for code compiled outside one,
# the forward kernels of tape._vecmath), and nothing when the cache is warm.
QUIET_VARIABLE = "TAPE_QUIET_COMPILE"
_local = threading.local()
_GENERIC = ("tape: compiling a native kernel on its first use (once per machine, cached for later runs; "
            f"about a second each). Set {QUIET_VARIABLE}=1 to silence this.")


class _PassListener(event.Listener):
    printed = False  # whether any notice was printed in this process

    def on_start(self, ev):
        if not ev.data["module"].startswith("tape.") or os.environ.get(QUIET_VARIABLE):
            return
        notice = getattr(_local, "notice", None)
        if notice is None:
            if self.printed:  # one line per process is enough outside a context
                return
            message = _GENERIC
        elif notice.printed:
            return
        else:
            notice.printed = True
            message = notice.message
        self.printed = True
        print(message, file=sys.stderr, flush=True)

    def on_end(self, ev):
        pass


event.register("numba:run_pass", _PassListener())


class compiling:
    """Context manager around a first call that may compile `what` (about
    `seconds` on an empty cache): if it does, one line on stderr says so
    (Note [Compile notice])."""

    def __init__(self, what, seconds):
        self.message = (f"tape: compiling {what} (once per machine, cached for later runs; "
                        f"about {seconds:.0f} s). Set {QUIET_VARIABLE}=1 to silence this.")
        self.printed = False

    def __enter__(self):
        self.outer = getattr(_local, "notice", None)
        _local.notice = self if self.outer is None else self.outer
        return self

    def __exit__(self, *exc):
        _local.notice = self.outer


# Note [Numba's context at import]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Numba builds its target context at the first call of any compiled function,
# even one loaded from the cache: it imports the typing and lowering of every
# Python and NumPy feature it supports and compiles its runtime's atomics with
# LLVM, which pages in LLVM's optimizer and code generator. Measured here
# (numba 0.68.1): 38.5 MB of resident memory (11 MB of Python objects, 27.5 MB
# of libllvmlite's code) and 0.11 to 0.15 s. Its first call with an array
# argument also imports numpy.ma (typeof checks for masked arrays): 1.3 MB.
# Every backward needs them (both sweeps are Numba functions taking arrays),
# and so do the forwards of sin, cos, exp, tanh and erf on arrays, so tape
# pays them here, at import, as PyTorch loads its libraries at its import.
# Measured, a fresh process after numpy: `import tape` holds 124 MB instead
# of 81 (PyTorch's import: 190 MB) and takes 0.13 s longer; a first backward
# of a 0-d graph then adds 2.5 MB (its sweep) and 0.02 s instead of 45 MB and
# 0.13 s. Import and a first backward together cost the same either way (the
# CPU time of such a process: 0.94 s against 0.97, medians of 10); a program
# that imports tape and never calls native code pays 43 MB and 0.13 s for
# nothing.
def _build_context():
    import numpy.ma  # noqa: F401
    from numba.core.registry import cpu_target

    cpu_target.target_context.refresh()


_build_context()
