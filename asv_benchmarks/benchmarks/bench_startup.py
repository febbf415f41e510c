"""W9 cold start: a fresh interpreter imports the library and runs a first
backward, with whatever Numba cache already exists; and the first use on a
new machine, the same with an empty cache (FirstUse).

Each sample is a new process.
"""

from .common import (BACKENDS, FAST, PROCESS_ROUNDS, Benchmark, RatioBenchmark,
                     interleaved_process_medians, process_seconds, torch_or_skip)


def first_backward_source(backend):
    """Import, a 10-op scalar graph (five rounds of sin and mul), its backward."""
    return f"""
import {backend} as lib
x = lib.tensor(0.5, dtype=lib.float64, requires_grad=True)
y = x
for _ in range(5):
    y = y.sin() * x
y.backward()
"""


def startup_medians(backends=BACKENDS, rounds=PROCESS_ROUNDS):
    """W9 in seconds, median over fresh processes run in turn: {backend: s}.

    From the parent starting the interpreter to the child printing after its
    first backward: interpreter start-up counts, its exit does not.
    """
    sources = {b: first_backward_source(b) + "print('done', flush=True)\n" for b in backends}
    return interleaved_process_medians(sources, measure=process_seconds, rounds=rounds)


class Startup(Benchmark):
    params = [BACKENDS]
    param_names = ["backend"]

    def setup(self, backend):
        if backend == "torch":
            torch_or_skip()

    def timeraw_import(self, backend):
        return f"import {backend}"

    def timeraw_import_to_first_backward(self, backend):
        return first_backward_source(backend)


class StartupSeconds:
    """W9 of tape alone, measured from outside the child process."""

    unit = "seconds"
    timeout = 300

    def track_w9_seconds(self):
        return startup_medians(["tape"])["tape"]


class StartupRatio(RatioBenchmark):
    """W9 of tape over W9 of torch, their processes run in turn."""

    def track_w9_ratio_vs_torch(self):
        medians = startup_medians()
        return medians["tape"] / medians["torch"]


# A new machine: an empty Numba cache, so the first backward compiles the
# native sweep and the kernels of its graph's ops (README, "Set up").
_EMPTY_CACHE = """
import os, shutil, tempfile
cache = tempfile.mkdtemp(prefix="tape-bench-numba-")
os.environ["NUMBA_CACHE_DIR"] = cache
os.environ["TAPE_QUIET_COMPILE"] = "1"
import tape
"""

_SCALAR_GRAPH = """
x = tape.tensor(0.5, requires_grad=True)
y = x
for _ in range(5):
    y = y.sin() * x + 1.0
y.backward()
"""

# a small network's step: matmul, bias, tanh, squared error, mean
_TENSOR_GRAPH = """
x = tape.randn(8, 4)
w = tape.randn(4, 3, requires_grad=True)
b = tape.zeros(3, requires_grad=True)
((tape.tanh(x @ w + b) - 1.0) ** 2).mean().backward()
"""


class FirstUse:
    """The first backward on a new machine, with its compiles."""

    timeout = 600
    warmup_time = 0
    repeat = 1 if FAST else (1, 3, 60.0)

    def timeraw_first_backward_of_0d_tensors_empty_cache(self):
        return _EMPTY_CACHE + _SCALAR_GRAPH + "shutil.rmtree(cache)\n"

    def timeraw_first_backward_of_tensors_empty_cache(self):
        return _EMPTY_CACHE + _TENSOR_GRAPH + "shutil.rmtree(cache)\n"
