"""Eager calls: ``lib.sin(x)``, ``x.sin()`` and ``x + y`` on a 0-d and on a
3-element float64 tensor that requires grad, recorded and without grad; each
sample times 1,000 calls (so its microseconds are nanoseconds per call).

The per-call cost of an op's public function, its Tensor method and its
operator (Note [Op declarations]: the function takes PyTorch's signature, the
method and the operator are the op itself).
"""

from .common import BACKENDS, Benchmark, import_backend, leaf, warm_up

CALLS = {
    "function": lambda lib, x, y: lib.sin(x),
    "method": lambda lib, x, y: x.sin(),
    "operator": lambda lib, x, y: x + y,
}
SHAPES = {"0-d": (0.5, 0.7), "3": ([0.5, 0.1, 0.2], [0.7, 0.3, 0.4])}
# calls per timed sample: enough that the loop's own cost is small, few
# enough that tape's rows do not outgrow what one graph holds
REPEAT = 1_000


class EagerCall(Benchmark):
    params = [list(CALLS), list(SHAPES), ["recorded", "no_grad"], BACKENDS]
    param_names = ["call", "shape", "grad", "backend"]

    def setup(self, call, shape, grad, backend):
        lib = self.lib = import_backend(backend)
        warm_up(lib)
        self.x, self.y = (leaf(lib, v) for v in SHAPES[shape])
        self.call = CALLS[call]
        self.mode = lib.enable_grad if grad == "recorded" else lib.no_grad

    def time_call(self, call, shape, grad, backend):
        lib, x, y, fn = self.lib, self.x, self.y, self.call
        with self.mode():
            for _ in range(REPEAT):
                fn(lib, x, y)
