"""W3 small MLP: batch 32, layers 64-64-64-1, tanh hidden layers, MSE loss.

Measures small matmuls plus the gradients of every weight and bias; compiled,
the replay of the loss through ``tape.compile``.
"""

from .common import BACKENDS, Benchmark, RatioBenchmark, import_backend, leaf, uniform, warm_up

BATCH = 32
SIZES = (64, 64, 64, 1)


def _loss(x, layers, target):
    *hidden, (w, b) = layers
    out = x
    for w_h, b_h in hidden:
        out = (out @ w_h + b_h).tanh()
    out = out @ w + b
    return ((out - target) ** 2).mean()


def _inputs(lib):
    x = lib.tensor(uniform((BATCH, SIZES[0]), seed=0))
    target = lib.tensor(uniform((BATCH, SIZES[-1]), seed=1))
    layers = [
        (
            leaf(lib, uniform((fan_in, fan_out), fan_in**-0.5, seed=10 + i)),
            leaf(lib, uniform((fan_out,), fan_in**-0.5, seed=20 + i)),
        )
        for i, (fan_in, fan_out) in enumerate(zip(SIZES, SIZES[1:]))
    ]
    return x, layers, target


def workload(lib):
    """W3 once, forward and backward: the callable that the ratio times."""
    x, layers, target = _inputs(lib)
    return lambda: _loss(x, layers, target).backward()


def compiled_workload(lib):
    """W3 through ``tape.compile``, compiled once: its first call records, later ones replay."""
    loss = lib.compile(_loss)
    x, layers, target = _inputs(lib)
    return lambda: loss(x, layers, target).backward()


class MLP(Benchmark):
    params = [BACKENDS]
    param_names = ["backend"]

    def setup(self, backend):
        lib = import_backend(backend)
        warm_up(lib, workload)
        self.x, self.layers, self.target = _inputs(lib)

    def time_forward(self, backend):
        _loss(self.x, self.layers, self.target)

    def time_forward_backward(self, backend):
        _loss(self.x, self.layers, self.target).backward()


class MLPAfterForwardOnlyPasses(Benchmark):
    """W3 forward and backward with 500 graphs dropped without backward still
    on the tape (an evaluation pass with grad enabled). The first backward
    frees their values (PyTorch frees them as they die), so setup runs it;
    the later ones must not pay for garbage they do not walk (each once
    rescanned all of it)."""

    params = MLP.params
    param_names = MLP.param_names
    time_forward_backward = MLP.time_forward_backward

    def setup(self, backend):
        MLP.setup(self, backend)
        for _ in range(500):
            _loss(self.x, self.layers, self.target)
        self.time_forward_backward(backend)


class MLPRatio(RatioBenchmark):
    workload = staticmethod(workload)

    def track_w3_ratio_vs_torch(self):
        return self.ratio()


class MLPCompiled(Benchmark):
    """W3 through ``tape.compile`` (tape alone), replayed."""

    def setup(self):
        lib = import_backend("tape")
        warm_up(lib, compiled_workload)
        self.loss = lib.compile(_loss)
        self.x, self.layers, self.target = _inputs(lib)
        self.loss(self.x, self.layers, self.target).backward()  # records: the samples time replays

    def time_compiled_forward(self):
        self.loss(self.x, self.layers, self.target)

    def time_compiled_forward_backward(self):
        self.loss(self.x, self.layers, self.target).backward()


class MLPCompiledRatio(RatioBenchmark):
    workload = staticmethod(workload)
    tape_workload = staticmethod(compiled_workload)

    def track_w3_compiled_ratio_vs_torch(self):
        return self.ratio()
