"""Settings and inputs shared by the tape benchmarks.

``TAPE_BENCH_PROFILE`` picks the profile: ``regular`` (the default; the sizes
of DESIGN.md) or ``fast`` (smaller sizes, one sample each, for smoke runs).
"""

import os
from functools import lru_cache

import numpy as np

PROFILE = os.environ.get("TAPE_BENCH_PROFILE", "regular")
if PROFILE not in ("fast", "regular"):
    raise ValueError(f"TAPE_BENCH_PROFILE must be 'fast' or 'regular', got {PROFILE!r}")
FAST = PROFILE == "fast"

BACKENDS = ["tape", "torch"]
SCALAR_STEPS = [1_000] if FAST else [1_000, 10_000]
ELEMENTWISE_SIZE = 10**5 if FAST else 10**6


def torch_or_skip():
    """Import torch, the baseline, or skip the benchmark that asks for it.

    asv reports a benchmark whose setup raises NotImplementedError as skipped.
    """
    try:
        import torch
    except ImportError:
        raise NotImplementedError("torch is not installed") from None
    return torch


def import_backend(name):
    """The module a ``backend`` parameter names: tape, or torch as the baseline."""
    if name == "tape":
        import tape

        return tape
    return torch_or_skip()


def leaf(lib, data):
    """A float64 leaf tensor of ``lib`` that requires grad."""
    return lib.tensor(data, dtype=lib.float64, requires_grad=True)


@lru_cache
def uniform(shape, bound=1.0, seed=0):
    """A read-only float64 array, uniform on [-bound, bound], the same on every call."""
    array = np.random.default_rng(seed).uniform(-bound, bound, size=shape)
    array.flags.writeable = False
    return array


class Benchmark:
    """Base class: asv's timing attributes for the chosen profile."""

    if FAST:
        timeout = 120
        warmup_time = 0
        repeat = 1
        number = 1
        min_run_count = 1
    else:
        timeout = 300
        warmup_time = 1
        repeat = (3, 50, 10.0)
