"""W6 dense Hessian of the extended Rosenbrock function at n = 64.

``autograd.functional.hessian``, the same call for both engines. With its
defaults, one gradient with ``create_graph=True``, then one backward through
that gradient's graph per input element: many small sweeps of a re-taped
graph (64 elements a row). With ``vectorize=True`` PyTorch batches those
backwards through vmap; tape accepts the flag and still loops (it has no
batched backward), which the second ratio shows.
"""

from .bench_hvp import _rosenbrock
from .common import BACKENDS, HESSIAN_SIZE, Benchmark, RatioBenchmark, import_backend, uniform, warm_up


def _input(lib, n):
    return lib.tensor(uniform((n,), seed=0))


def workload(lib, n, vectorize=False):
    """W6 once: the callable that the ratio times."""
    x = _input(lib, n)
    return lambda: lib.autograd.functional.hessian(_rosenbrock, x, vectorize=vectorize)


class RosenbrockHessian(Benchmark):
    params = [[HESSIAN_SIZE], [False, True], BACKENDS]
    param_names = ["n", "vectorize", "backend"]

    def setup(self, n, vectorize, backend):
        self.lib = import_backend(backend)
        warm_up(self.lib, workload, 4)
        self.x = _input(self.lib, n)

    def time_hessian(self, n, vectorize, backend):
        self.lib.autograd.functional.hessian(_rosenbrock, self.x, vectorize=vectorize)


class RosenbrockHessianRatio(RatioBenchmark):
    workload = staticmethod(workload)
    args = (HESSIAN_SIZE,)
    small_args = (4,)

    def track_w6_ratio_vs_torch(self):
        return self.ratio()


class RosenbrockHessianVectorizedRatio(RatioBenchmark):
    workload = staticmethod(workload)
    args = (HESSIAN_SIZE, True)
    small_args = (4, True)

    def track_w6_vectorized_ratio_vs_torch(self):
        return self.ratio()
