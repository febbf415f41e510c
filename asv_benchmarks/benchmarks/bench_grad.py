"""autograd.grad of a small graph, with a long graph alive below it on the tape.

A training step that calls ``autograd.grad(loss, params)`` while other graphs
stay alive (a running total, a graph kept for a later backward): the step
should cost what its own graph costs, whatever the tape holds below it. The
``rows_below`` grid shows it (marking the rows that lead to the inputs once
cost every call the whole tape). Not one of DESIGN.md's workloads.
"""

from .common import BACKENDS, Benchmark, import_backend, leaf, uniform, warm_up

ROWS_BELOW = [0, 50_000]


def _step(lib, w, x):
    return lib.autograd.grad(((x @ w).tanh() ** 2).sum(), w)


def workload(lib, n):
    """One step on an 8-feature model, batch n: the callable timed."""
    w, x = leaf(lib, uniform((8,), seed=0)), lib.tensor(uniform((n, 8), seed=1))
    return lambda: _step(lib, w, x)


class GradOverALongTape(Benchmark):
    params = [ROWS_BELOW, BACKENDS]
    param_names = ["rows_below", "backend"]

    def setup(self, rows_below, backend):
        lib = import_backend(backend)
        warm_up(lib, workload, 4)
        self.lib = lib
        self.w, self.x = leaf(lib, uniform((8,), seed=0)), lib.tensor(uniform((16, 8), seed=1))
        _step(lib, self.w, self.x)  # the leaf's row sits below what follows, as a parameter's does
        chain = leaf(lib, 0.5)
        for _ in range(rows_below):
            chain = chain * 1.0
        self.alive = chain

    def time_grad(self, rows_below, backend):
        _step(self.lib, self.w, self.x)
