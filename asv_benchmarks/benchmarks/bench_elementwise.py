"""W4 elementwise chain: 20 ops cycling through sin, exp, tanh, square, ``* x`` and
``+ x`` on a large float64 vector, then a sum; W10 is its peak memory.
"""

from .common import BACKENDS, ELEMENTWISE_SIZE, Benchmark, import_backend, leaf, uniform

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


class Elementwise(Benchmark):
    params = [[ELEMENTWISE_SIZE], BACKENDS]
    param_names = ["size", "backend"]

    def setup(self, size, backend):
        self.x = leaf(import_backend(backend), uniform((size,)))

    def time_forward(self, size, backend):
        _chain(self.x)

    def time_forward_backward(self, size, backend):
        _chain(self.x).backward()

    def peakmem_forward_backward(self, size, backend):
        _chain(self.x).backward()
