"""W2 scalar MLP, micrograd style: a 3-16-16-1 network on 0-d float64 tensors.

Every neuron is ``tanh(b + w0*x0 + w1*x1 + ...)`` (the output neuron too, as in
micrograd's demo), every weight and bias its own 0-d leaf that requires grad
(353 of them); a batch of 4 samples, summed squared loss. About 2,700 scalar
ops per forward: the per-op cost of recording and sweeping, in a realistic mix;
compiled, the replay of the loss through ``tape.compile``.
"""

from .common import BACKENDS, Benchmark, RatioBenchmark, import_backend, leaf, uniform, warm_up

SIZES = (3, 16, 16, 1)
# micrograd's demo batch.
INPUTS = ((2.0, 3.0, -1.0), (3.0, -1.0, 0.5), (0.5, 1.0, 1.0), (1.0, 1.0, -1.0))
TARGETS = (1.0, -1.0, -1.0, 1.0)


def _network(lib):
    """Layers of neurons, each neuron a (weights, bias) pair of 0-d leaves."""
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(SIZES, SIZES[1:])):
        weights = uniform((fan_out, fan_in), seed=30 + i)
        biases = uniform((fan_out,), seed=40 + i)
        layers.append([
            ([leaf(lib, float(w)) for w in weights[j]], leaf(lib, float(biases[j])))
            for j in range(fan_out)
        ])
    return layers


def _batch(lib):
    xs = [[lib.tensor(v, dtype=lib.float64) for v in sample] for sample in INPUTS]
    ys = [lib.tensor(v, dtype=lib.float64) for v in TARGETS]
    return xs, ys


def _neuron(weights, bias, inputs):
    act = bias
    for w, x in zip(weights, inputs):
        act = act + w * x
    return act.tanh()


def _loss(layers, xs, ys):
    loss = None
    for x, y in zip(xs, ys):
        out = x
        for layer in layers:
            out = [_neuron(weights, bias, out) for weights, bias in layer]
        term = (out[0] - y) ** 2
        loss = term if loss is None else loss + term
    return loss


def workload(lib):
    """W2 once, forward and backward: the callable that the ratio times."""
    layers = _network(lib)
    xs, ys = _batch(lib)
    return lambda: _loss(layers, xs, ys).backward()


def compiled_workload(lib):
    """W2 through ``tape.compile``, compiled once: its first call records, later ones replay."""
    loss = lib.compile(_loss)
    layers = _network(lib)
    xs, ys = _batch(lib)
    return lambda: loss(layers, xs, ys).backward()


class ScalarMLP(Benchmark):
    params = [BACKENDS]
    param_names = ["backend"]

    def setup(self, backend):
        lib = import_backend(backend)
        warm_up(lib, workload)
        self.layers = _network(lib)
        self.xs, self.ys = _batch(lib)

    def time_forward(self, backend):
        _loss(self.layers, self.xs, self.ys)

    def time_forward_backward(self, backend):
        _loss(self.layers, self.xs, self.ys).backward()


class ScalarMLPBackward(Benchmark):
    params = [BACKENDS]
    param_names = ["backend"]
    # A fresh graph per timed call: see ScalarChainBackward.
    number = 1
    warmup_time = 0

    def setup(self, backend):
        lib = import_backend(backend)
        warm_up(lib, workload)
        xs, ys = _batch(lib)
        self.loss = _loss(_network(lib), xs, ys)

    def time_backward(self, backend):
        self.loss.backward()


class ScalarMLPRatio(RatioBenchmark):
    workload = staticmethod(workload)

    def track_w2_ratio_vs_torch(self):
        return self.ratio()


class ScalarMLPCompiled(Benchmark):
    """W2 through ``tape.compile`` (tape alone), replayed."""

    def setup(self):
        lib = import_backend("tape")
        warm_up(lib, compiled_workload)
        self.loss = lib.compile(_loss)
        self.layers = _network(lib)
        self.xs, self.ys = _batch(lib)
        self.loss(self.layers, self.xs, self.ys).backward()  # records: the samples time replays

    def time_compiled_forward(self):
        self.loss(self.layers, self.xs, self.ys)

    def time_compiled_forward_backward(self):
        self.loss(self.layers, self.xs, self.ys).backward()


class ScalarMLPCompiledRatio(RatioBenchmark):
    workload = staticmethod(workload)
    tape_workload = staticmethod(compiled_workload)

    def track_w2_compiled_ratio_vs_torch(self):
        return self.ratio()
