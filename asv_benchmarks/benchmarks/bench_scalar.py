"""W1 scalar chain: ``y = sin(y) * a + b`` for ``n`` steps on 0-d float64 tensors.

Measures the per-op cost of recording and of the reverse sweep on tiny values;
compiled, the replay of the chain through ``tape.compile``, and the first
compiled call, which records it.
"""

from .common import (BACKENDS, SCALAR_STEPS, Benchmark, RatioBenchmark, import_backend, leaf,
                     warm_up)


def _chain(x, a, b, n):
    y = x
    for _ in range(n):
        y = (y.sin() * a) + b
    return y


def _leaves(lib):
    return leaf(lib, 0.5), leaf(lib, 0.9), leaf(lib, 0.1)


def workload(lib, n):
    """W1 once, forward and backward: the callable that the ratio times."""
    x, a, b = _leaves(lib)
    return lambda: _chain(x, a, b, n).backward()


def compiled_workload(lib, n):
    """W1 through ``tape.compile``, compiled once: its first call records, later ones replay."""
    chain = lib.compile(_chain)
    x, a, b = _leaves(lib)
    return lambda: chain(x, a, b, n).backward()


def first_call_workload(lib, n):
    """W1's first compiled call: every call compiles ``_chain`` afresh, so every call records."""
    x, a, b = _leaves(lib)
    return lambda: lib.compile(_chain)(x, a, b, n).backward()


class ScalarChain(Benchmark):
    params = [SCALAR_STEPS, BACKENDS]
    param_names = ["n", "backend"]

    def setup(self, n, backend):
        lib = import_backend(backend)
        warm_up(lib, workload, 2)
        self.x, self.a, self.b = _leaves(lib)

    def time_forward(self, n, backend):
        _chain(self.x, self.a, self.b, n)

    def time_forward_backward(self, n, backend):
        _chain(self.x, self.a, self.b, n).backward()


class ScalarChainBackward(Benchmark):
    params = [SCALAR_STEPS, BACKENDS]
    param_names = ["n", "backend"]
    # Backward frees the graph, so every timed call needs the fresh graph that
    # setup builds: one call per sample, and no warmup (asv_runner before 0.3
    # warms up without re-running setup).
    number = 1
    warmup_time = 0

    def setup(self, n, backend):
        lib = import_backend(backend)
        # Without warmup the first sample would pay for loading the native sweep.
        warm_up(lib, workload, 2)
        self.y = _chain(*_leaves(lib), n)

    def time_backward(self, n, backend):
        self.y.backward()


class ScalarChainRatio(RatioBenchmark):
    workload = staticmethod(workload)
    args = (SCALAR_STEPS[-1],)
    small_args = (2,)

    def track_w1_ratio_vs_torch(self):
        return self.ratio()


class ScalarChainCompiled(Benchmark):
    """W1 through ``tape.compile`` (tape alone): replays, and the first call."""

    params = [SCALAR_STEPS]
    param_names = ["n"]

    def setup(self, n):
        lib = import_backend("tape")
        warm_up(lib, compiled_workload, 2)
        self.chain = lib.compile(_chain)
        self.x, self.a, self.b = _leaves(lib)
        self.chain(self.x, self.a, self.b, n).backward()  # records: the samples time replays
        self.first_call = first_call_workload(lib, n)

    def time_compiled_forward(self, n):
        self.chain(self.x, self.a, self.b, n)

    def time_compiled_forward_backward(self, n):
        self.chain(self.x, self.a, self.b, n).backward()

    def time_compiled_first_call(self, n):
        self.first_call()


class ScalarChainCompiledRatio(RatioBenchmark):
    workload = staticmethod(workload)
    tape_workload = staticmethod(compiled_workload)
    args = ScalarChainRatio.args
    small_args = ScalarChainRatio.small_args

    def track_w1_compiled_ratio_vs_torch(self):
        return self.ratio()


class ScalarChainFirstCallRatio(RatioBenchmark):
    """The first compiled call of W1 (recording it) against tape's eager W1."""

    baseline = "tape eager"
    args = ScalarChainRatio.args
    small_args = ScalarChainRatio.small_args

    def setup(self):
        pass  # tape alone: no torch needed

    def sides(self):
        return {"tape": ("tape", first_call_workload), "tape eager": ("tape", workload)}

    def track_w1_compiled_first_call_ratio_vs_eager(self):
        return self.ratio()
