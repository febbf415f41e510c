"""W9 cold start: a fresh interpreter imports the library and runs a first backward.

Each sample is a new process; it uses whatever Numba cache already exists.
"""

from .common import (BACKENDS, PROCESS_ROUNDS, Benchmark, RatioBenchmark,
                     interleaved_process_medians, process_seconds, torch_or_skip)


def first_backward_source(backend):
    """Import, a 10-op scalar graph (five rounds of sin and mul), its backward."""
    return f"""
import {backend} as lib
x = lib.tensor(0.5, dtype=lib.float64, requires_grad=True)
y = x
for _ in range(5):
    y = y.sin() * x
y.backward()
"""


def startup_medians(backends=BACKENDS, rounds=PROCESS_ROUNDS):
    """W9 in seconds, median over fresh processes run in turn: {backend: s}.

    From the parent starting the interpreter to the child printing after its
    first backward: interpreter start-up counts, its exit does not.
    """
    sources = {b: first_backward_source(b) + "print('done', flush=True)\n" for b in backends}
    return interleaved_process_medians(sources, measure=process_seconds, rounds=rounds)


class Startup(Benchmark):
    params = [BACKENDS]
    param_names = ["backend"]

    def setup(self, backend):
        if backend == "torch":
            torch_or_skip()

    def timeraw_import(self, backend):
        return f"import {backend}"

    def timeraw_import_to_first_backward(self, backend):
        return first_backward_source(backend)


class StartupSeconds:
    """W9 of tape alone, measured from outside the child process."""

    unit = "seconds"
    timeout = 300

    def track_w9_seconds(self):
        return startup_medians(["tape"])["tape"]


class StartupRatio(RatioBenchmark):
    """W9 of tape over W9 of torch, their processes run in turn."""

    def track_w9_ratio_vs_torch(self):
        medians = startup_medians()
        return medians["tape"] / medians["torch"]
