"""W4 elementwise chain: 20 ops cycling through sin, exp, tanh, square, ``* x`` and
``+ x`` on a large float64 vector, then a sum; W10 is its peak memory.
"""

import os

from .common import (BACKENDS, ELEMENTWISE_SIZE, MEMORY_ROUNDS, Benchmark, RatioBenchmark,
                     import_backend, interleaved_process_medians, leaf, process_output, uniform,
                     warm_up)

N_OPS = 20
_STEPS = (
    lambda y, x: y.sin(),
    lambda y, x: y.exp(),
    lambda y, x: y.tanh(),
    lambda y, x: y.square(),
    lambda y, x: y * x,
    lambda y, x: y + x,
)
_ASV_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _chain(x):
    # With x in [-1, 1] every intermediate stays within [-2, e], so nothing overflows.
    y = x
    for i in range(N_OPS):
        y = _STEPS[i % len(_STEPS)](y, x)
    return y.sum()


def workload(lib, size):
    """W4 once, forward and backward: the callable that the ratio times."""
    x = leaf(lib, uniform((size,)))
    return lambda: _chain(x).backward()


def memory_source(backend, size=ELEMENTWISE_SIZE):
    """Code for a fresh process that prints W10 in MB: the peak resident memory
    of one W4 (forward and backward) above the resident memory after import.

    The input array exists before the baseline is taken; the tensor copied from
    it, every intermediate, and whatever the first backward loads, count.
    """
    return f"""
import sys
sys.path.insert(0, {_ASV_DIR!r})
from benchmarks.common import (leaf, memory_megabytes, peak_memory_megabytes,
                               reset_peak_memory, uniform)
from benchmarks.bench_elementwise import _chain
data = uniform(({size},))
import {backend} as lib
baseline = memory_megabytes()
reset_peak_memory()
_chain(leaf(lib, data)).backward()
print(peak_memory_megabytes() - baseline)
"""


def memory_medians(size=ELEMENTWISE_SIZE, rounds=MEMORY_ROUNDS):
    """W10 in MB, median over fresh processes: {"tape": MB, "torch": MB}."""
    sources = {backend: memory_source(backend, size) for backend in BACKENDS}
    # Memory does not depend on warm caches: no warm-up round.
    return interleaved_process_medians(sources, measure=process_output, rounds=rounds, warm=False)


class Elementwise(Benchmark):
    params = [[ELEMENTWISE_SIZE], BACKENDS]
    param_names = ["size", "backend"]

    def setup(self, size, backend):
        lib = import_backend(backend)
        warm_up(lib, workload, 16)
        self.x = leaf(lib, uniform((size,)))

    def time_forward(self, size, backend):
        _chain(self.x)

    def time_forward_backward(self, size, backend):
        _chain(self.x).backward()

    def peakmem_forward_backward(self, size, backend):
        _chain(self.x).backward()


class ElementwiseRatio(RatioBenchmark):
    workload = staticmethod(workload)
    args = (ELEMENTWISE_SIZE,)
    small_args = (16,)

    def track_w4_ratio_vs_torch(self):
        return self.ratio()


class ElementwiseMemoryRatio(RatioBenchmark):
    """W10: peak memory of W4 above the post-import baseline, fresh processes."""

    def track_w10_ratio_vs_torch(self):
        medians = memory_medians()
        return medians["tape"] / medians["torch"]
