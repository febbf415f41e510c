"""W8 per-sample gradients with vmap: a linear model, 10 features, batch 256.

``vmap(grad(loss), in_dims=(None, None, 0, 0))`` over the squared error of
``x @ w + b``: each sample's gradients for w and b, the batch run as batched
array ops. Measures tape.func's transforms against torch.func's.
"""

from .common import BACKENDS, Benchmark, RatioBenchmark, import_backend, uniform, warm_up

FEATURES = 10
BATCH = 256


def _loss(w, b, x, y):
    return (x @ w + b - y) ** 2


def _inputs(lib, batch):
    return (lib.tensor(uniform((FEATURES,), seed=0)), lib.tensor(0.1),
            lib.tensor(uniform((batch, FEATURES), seed=1)), lib.tensor(uniform((batch,), seed=2)))


def _per_sample_grads(lib):
    return lib.func.vmap(lib.func.grad(_loss, argnums=(0, 1)), in_dims=(None, None, 0, 0))


def workload(lib, batch):
    """W8 once: the callable that the ratio times."""
    inputs = _inputs(lib, batch)
    per_sample_grads = _per_sample_grads(lib)
    return lambda: per_sample_grads(*inputs)


class PerSampleGrads(Benchmark):
    params = [[BATCH], BACKENDS]
    param_names = ["batch", "backend"]

    def setup(self, batch, backend):
        lib = import_backend(backend)
        warm_up(lib, workload, 4)
        self.inputs = _inputs(lib, batch)
        self.per_sample_grads = _per_sample_grads(lib)

    def time_per_sample_grads(self, batch, backend):
        self.per_sample_grads(*self.inputs)


class PerSampleGradsRatio(RatioBenchmark):
    workload = staticmethod(workload)
    args = (BATCH,)
    small_args = (4,)

    def track_w8_ratio_vs_torch(self):
        return self.ratio()
