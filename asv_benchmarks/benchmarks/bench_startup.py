"""W9 cold start: a fresh interpreter imports the library and runs a first backward.

Each sample is a new process; it uses whatever Numba cache already exists.
"""

from .common import BACKENDS, Benchmark, torch_or_skip


class Startup(Benchmark):
    params = [BACKENDS]
    param_names = ["backend"]

    def setup(self, backend):
        if backend == "torch":
            torch_or_skip()

    def timeraw_import(self, backend):
        return f"import {backend}"

    def timeraw_import_to_first_backward(self, backend):
        # A 10-op scalar graph: five rounds of sin and mul.
        return f"""
            import {backend} as lib
            x = lib.tensor(0.5, dtype=lib.float64, requires_grad=True)
            y = x
            for _ in range(5):
                y = y.sin() * x
            y.backward()
        """
