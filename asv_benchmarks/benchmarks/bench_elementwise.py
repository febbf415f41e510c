"""W4 elementwise chain: 20 ops cycling through sin, exp, tanh, square, ``* x`` and
``+ x`` on a large float64 vector, then a sum; compiled, the chain through
``tape.compile`` (a fused replay); W10 is its peak memory.
"""

from .common import (BACKENDS, ELEMENTWISE_SIZE, MEMORY_ROUNDS, Benchmark, MemoryRatioBenchmark, RatioBenchmark,
                     import_backend, leaf, peak_memory_medians, uniform, warm_up)

N_OPS = 20
_STEPS = (
    lambda y, x: y.sin(),
    lambda y, x: y.exp(),
    lambda y, x: y.tanh(),
    lambda y, x: y.square(),
    lambda y, x: y * x,
    lambda y, x: y + x,
)


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


def compiled_workload(lib, size):
    """W4 through ``tape.compile``, compiled once: its first call records, later ones replay."""
    chain = lib.compile(_chain)
    x = leaf(lib, uniform((size,)))
    return lambda: chain(x).backward()


def memory_inputs(size):
    return uniform((size,))


def memory_run(lib, data):
    """W10's run: one W4, forward and backward, from a tensor made of `data`."""
    _chain(leaf(lib, data)).backward()


def memory_medians(size=ELEMENTWISE_SIZE, env_overrides=None, rounds=MEMORY_ROUNDS):
    """W10 in MB, median over fresh processes: {"tape": MB, "torch": MB}."""
    return peak_memory_medians("bench_elementwise", size, env_overrides, rounds)


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


class ElementwiseCompiled(Benchmark):
    """W4 through ``tape.compile`` (tape alone), replayed."""

    params = [[ELEMENTWISE_SIZE]]
    param_names = ["size"]

    def setup(self, size):
        lib = import_backend("tape")
        warm_up(lib, compiled_workload, 16)
        self.chain = lib.compile(_chain)
        self.x = leaf(lib, uniform((size,)))
        self.chain(self.x).backward()  # records: the samples time replays

    def time_compiled_forward(self, size):
        self.chain(self.x)

    def time_compiled_forward_backward(self, size):
        self.chain(self.x).backward()


class ElementwiseCompiledRatio(RatioBenchmark):
    workload = staticmethod(workload)
    tape_workload = staticmethod(compiled_workload)
    args = ElementwiseRatio.args
    small_args = ElementwiseRatio.small_args

    def track_w4_compiled_ratio_vs_torch(self):
        return self.ratio()


class ElementwiseMemoryRatio(MemoryRatioBenchmark):
    """W10: peak memory of W4 above the post-import baseline, fresh
    processes, under each allocator (Note [Two allocators] in common)."""

    memory_medians = staticmethod(memory_medians)

    def track_w10_ratio_vs_torch(self, allocator):
        return self.memory_ratio(allocator)
