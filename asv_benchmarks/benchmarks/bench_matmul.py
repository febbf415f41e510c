"""W5 matmul: ``sum(tanh(A @ B))`` with A and B of n x n, gradients of both.

Measures the overhead around BLAS: the forward and the two matmuls of the
backward are the same calls for every engine.
"""

from .common import (BACKENDS, MATMUL_SIZES, Benchmark, RatioBenchmark, import_backend, leaf,
                     uniform, warm_up)


def _loss(a, b):
    return (a @ b).tanh().sum()


def _leaves(lib, n):
    # Entries of A @ B have a standard deviation of 1/3: tanh is not saturated.
    return leaf(lib, uniform((n, n), n**-0.5, seed=0)), leaf(lib, uniform((n, n), seed=1))


def workload(lib, n):
    """W5 once, forward and backward: the callable that the ratio times."""
    a, b = _leaves(lib, n)
    return lambda: _loss(a, b).backward()


class Matmul(Benchmark):
    params = [MATMUL_SIZES, BACKENDS]
    param_names = ["n", "backend"]

    def setup(self, n, backend):
        lib = import_backend(backend)
        warm_up(lib, workload, 4)
        self.a, self.b = _leaves(lib, n)

    def time_forward(self, n, backend):
        _loss(self.a, self.b)

    def time_forward_backward(self, n, backend):
        _loss(self.a, self.b).backward()


class MatmulBackward(Benchmark):
    params = [MATMUL_SIZES, BACKENDS]
    param_names = ["n", "backend"]
    # A fresh graph per timed call: see ScalarChainBackward.
    number = 1
    warmup_time = 0

    def setup(self, n, backend):
        lib = import_backend(backend)
        warm_up(lib, workload, 4)
        self.loss = _loss(*_leaves(lib, n))

    def time_backward(self, n, backend):
        self.loss.backward()


class MatmulRatio(RatioBenchmark):
    workload = staticmethod(workload)
    args = (MATMUL_SIZES[-1],)
    small_args = (4,)

    def track_w5_ratio_vs_torch(self):
        return self.ratio()
