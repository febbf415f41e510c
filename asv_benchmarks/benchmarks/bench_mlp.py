"""W3 small MLP: batch 32, layers 64-64-64-1, tanh hidden layers, MSE loss.

Measures small matmuls plus the gradients of every weight and bias.
"""

from .common import BACKENDS, Benchmark, import_backend, leaf, uniform

BATCH = 32
SIZES = (64, 64, 64, 1)


def _loss(x, layers, target):
    *hidden, (w, b) = layers
    out = x
    for w_h, b_h in hidden:
        out = (out @ w_h + b_h).tanh()
    out = out @ w + b
    return ((out - target) ** 2).mean()


class MLP(Benchmark):
    params = [BACKENDS]
    param_names = ["backend"]

    def setup(self, backend):
        lib = import_backend(backend)
        self.x = lib.tensor(uniform((BATCH, SIZES[0]), seed=0))
        self.target = lib.tensor(uniform((BATCH, SIZES[-1]), seed=1))
        self.layers = [
            (
                leaf(lib, uniform((fan_in, fan_out), fan_in**-0.5, seed=10 + i)),
                leaf(lib, uniform((fan_out,), fan_in**-0.5, seed=20 + i)),
            )
            for i, (fan_in, fan_out) in enumerate(zip(SIZES, SIZES[1:]))
        ]

    def time_forward(self, backend):
        _loss(self.x, self.layers, self.target)

    def time_forward_backward(self, backend):
        _loss(self.x, self.layers, self.target).backward()
