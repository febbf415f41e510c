"""Dropped graphs: a loop that builds a 20-op graph on 100 elements and drops
it, without backward or after ``autograd.grad(create_graph=True)`` whose
result is dropped too. Its resident memory should stay flat, as PyTorch's,
whose graphs go when their last tensor does.
"""

import os

from .common import ALLOCATORS, BACKENDS, Benchmark, process_output, torch_or_skip

ITERATIONS = 20_000
WARM_UP = 500
BACKWARDS = ["none", "create_graph"]
_ASV_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def loop_source(backend, backward, iterations=ITERATIONS):
    """Code for a fresh process that prints, in MB, the peak resident memory
    of the loop after WARM_UP iterations above the resident memory then."""
    return f"""
import sys
sys.path.insert(0, {_ASV_DIR!r})
from benchmarks.common import leaf, memory_megabytes, uniform
import {backend} as lib
x = leaf(lib, uniform((100,)))
steps = (lambda y: y.sin(), lambda y: y * x, lambda y: y.tanh(), lambda y: y + x)
peak = baseline = None
for i in range({iterations}):
    y = x
    for k in range(20):
        y = steps[k % 4](y)
    out = y.sum()
    if {backward == "create_graph"}:
        lib.autograd.grad(out, x, create_graph=True)
    del y, out
    if i == {WARM_UP}:
        peak = baseline = memory_megabytes()
    elif i > {WARM_UP}:
        peak = max(peak, memory_megabytes())
print(peak - baseline)
"""


class DroppedGraphs(Benchmark):
    """Resident memory growth of the loop, in a fresh process per sample."""

    params = [BACKWARDS, list(ALLOCATORS), BACKENDS]
    param_names = ["backward", "allocator", "backend"]
    unit = "MB"
    number = 1
    repeat = 1
    timeout = 600

    def setup(self, backward, allocator, backend):
        if backend == "torch":
            torch_or_skip()

    def track_rss_growth(self, backward, allocator, backend):
        return process_output(loop_source(backend, backward), ALLOCATORS[allocator])
