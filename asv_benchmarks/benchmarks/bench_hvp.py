"""W7 Hessian-vector product of the extended Rosenbrock function, by double backward.

``f = sum(100 * (x[1::2] - x[::2]**2)**2 + (1 - x[::2])**2)``; ``g = df/dx`` with
``create_graph=True``; ``hv = d(g . v)/dx`` for a fixed ``v``. Measures strided
slicing, the re-taped backward (create_graph) and a second sweep over it;
compiled, all of it (forward and both backwards) through ``tape.compile``.
"""

from .common import (BACKENDS, MEMORY_ROUNDS, ROSENBROCK_SIZE, Benchmark, MemoryRatioBenchmark, RatioBenchmark,
                     import_backend, leaf, peak_memory_medians, uniform, warm_up)


def _rosenbrock(x):
    return (100 * (x[1::2] - x[::2] ** 2) ** 2 + (1 - x[::2]) ** 2).sum()


def _hvp(lib, f, x, v):
    (g,) = lib.autograd.grad(f, x, create_graph=True)
    (hv,) = lib.autograd.grad((g * v).sum(), x)
    return hv


def _forward_hvp(lib, x, v):
    return _hvp(lib, _rosenbrock(x), x, v)


def memory_inputs(n):
    return uniform((n,), seed=0), uniform((n,), seed=1)


def _inputs(lib, n, data=None):
    x, v = memory_inputs(n) if data is None else data
    return leaf(lib, x), lib.tensor(v)


def memory_run(lib, data):
    """W7's peak-memory run: one W7 from tensors made of `data`."""
    x, v = _inputs(lib, len(data[0]), data)
    _forward_hvp(lib, x, v)


def memory_medians(n=ROSENBROCK_SIZE, env_overrides=None, rounds=MEMORY_ROUNDS):
    """W7's peak memory above the post-import baseline in MB, median over
    fresh processes: {"tape": MB, "torch": MB}."""
    return peak_memory_medians("bench_hvp", n, env_overrides, rounds)


def workload(lib, n):
    """W7 once, forward and both backwards: the callable that the ratio times."""
    x, v = _inputs(lib, n)
    return lambda: _forward_hvp(lib, x, v)


def compiled_workload(lib, n):
    """W7 through ``tape.compile``, compiled once: its first call records, later ones replay."""
    hvp = lib.compile(_forward_hvp)
    x, v = _inputs(lib, n)
    return lambda: hvp(lib, x, v)


class RosenbrockHVP(Benchmark):
    params = [[ROSENBROCK_SIZE], BACKENDS]
    param_names = ["n", "backend"]

    def setup(self, n, backend):
        self.lib = import_backend(backend)
        warm_up(self.lib, workload, 16)
        self.x, self.v = _inputs(self.lib, n)

    def time_forward(self, n, backend):
        _rosenbrock(self.x)

    def time_forward_hvp(self, n, backend):
        _forward_hvp(self.lib, self.x, self.v)

    def peakmem_forward_hvp(self, n, backend):
        _forward_hvp(self.lib, self.x, self.v)


class RosenbrockHVPBackward(Benchmark):
    """The two backward passes alone, given f."""

    params = [[ROSENBROCK_SIZE], BACKENDS]
    param_names = ["n", "backend"]
    # The second backward frees the graph: a fresh one per timed call, see
    # ScalarChainBackward.
    number = 1
    warmup_time = 0

    def setup(self, n, backend):
        self.lib = import_backend(backend)
        warm_up(self.lib, workload, 16)
        self.x, self.v = _inputs(self.lib, n)
        self.f = _rosenbrock(self.x)

    def time_hvp(self, n, backend):
        _hvp(self.lib, self.f, self.x, self.v)


class RosenbrockHVPRatio(RatioBenchmark):
    workload = staticmethod(workload)
    args = (ROSENBROCK_SIZE,)
    small_args = (16,)

    def track_w7_ratio_vs_torch(self):
        return self.ratio()


class RosenbrockHVPCompiled(Benchmark):
    """W7 through ``tape.compile`` (tape alone), replayed."""

    params = [[ROSENBROCK_SIZE]]
    param_names = ["n"]

    def setup(self, n):
        self.lib = import_backend("tape")
        warm_up(self.lib, compiled_workload, 16)
        self.hvp = self.lib.compile(_forward_hvp)
        self.x, self.v = _inputs(self.lib, n)
        self.hvp(self.lib, self.x, self.v)  # records: the samples time replays

    def time_compiled_forward_hvp(self, n):
        self.hvp(self.lib, self.x, self.v)


class RosenbrockHVPCompiledRatio(RatioBenchmark):
    workload = staticmethod(workload)
    tape_workload = staticmethod(compiled_workload)
    args = RosenbrockHVPRatio.args
    small_args = RosenbrockHVPRatio.small_args

    def track_w7_compiled_ratio_vs_torch(self):
        return self.ratio()


class RosenbrockHVPMemoryRatio(MemoryRatioBenchmark):
    """W7's peak memory above the post-import baseline, fresh processes,
    under each allocator (Note [Two allocators] in common)."""

    memory_medians = staticmethod(memory_medians)

    def track_w7_peak_memory_ratio_vs_torch(self, allocator):
        return self.memory_ratio(allocator)
