"""Settings, inputs and measuring helpers shared by the tape benchmarks.

``TAPE_BENCH_PROFILE`` picks the profile: ``regular`` (the default; the sizes
of DESIGN.md) or ``fast`` (smaller sizes, few samples, for smoke runs).
``TAPE_BENCH_THREADS`` picks the threads: ``1`` (the default) or ``default``;
see Note [One thread].
"""

import os
import sys
import warnings

# Note [One thread]
# The ratios against PyTorch compare two autograd engines, not two thread
# pools, so by default every library runs on one thread. OpenBLAS/MKL, OpenMP
# and Numba read these variables once, when they load, so they are set here,
# at import: every benchmark module, and report.py, imports this module before
# tape or torch, and fresh processes (W9, W10) inherit the variables. asv's
# runner, though, has already imported numpy (asv_runner -> pympler -> numpy),
# so numpy's OpenBLAS pool is sized by then: _shrink_loaded_blas sets it to one
# thread through OpenBLAS's own call. torch gets torch.set_num_threads(1) in
# torch_or_skip. TAPE_BENCH_THREADS=default leaves all of it alone, to report
# the default-thread figures beside the one-thread ones.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS",
)
THREADS = os.environ.get("TAPE_BENCH_THREADS", "1")
if THREADS not in ("1", "default"):
    raise ValueError(f"TAPE_BENCH_THREADS must be '1' or 'default', got {THREADS!r}")
ONE_THREAD = THREADS == "1"

# Entry points that set the thread count of a loaded OpenBLAS, by build.
_OPENBLAS_SETTERS = (
    "openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads64_",  # numpy 2's bundled OpenBLAS
    "scipy_openblas_set_num_threads",
)


def _shrink_loaded_blas():
    """Set every OpenBLAS already loaded in this process to one thread.

    Returns False when none could be set (not Linux and no threadpoolctl).
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        pass
    else:
        threadpool_limits(limits=1, user_api="blas")
        return True
    import ctypes

    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:
        return False
    done = False
    for path in sorted(p for p in paths if p.startswith("/")):
        library = ctypes.CDLL(path)
        for name in _OPENBLAS_SETTERS:
            setter = getattr(library, name, None)
            if setter is not None:
                setter(1)
                done = True
                break
    return done


if ONE_THREAD:
    for _name in THREAD_VARIABLES:
        os.environ[_name] = "1"
    if "numpy" in sys.modules and not _shrink_loaded_blas():
        warnings.warn(
            "benchmarks.common imported after numpy, and its BLAS could not be set to one "
            "thread: the one-thread figures may use more",
            RuntimeWarning,
            stacklevel=2,
        )

import gc  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from functools import lru_cache  # noqa: E402

import numpy as np  # noqa: E402

PROFILE = os.environ.get("TAPE_BENCH_PROFILE", "regular")
if PROFILE not in ("fast", "regular"):
    raise ValueError(f"TAPE_BENCH_PROFILE must be 'fast' or 'regular', got {PROFILE!r}")
FAST = PROFILE == "fast"

BACKENDS = ["tape", "torch"]

# Sizes. Where a workload has several, the ratio against torch uses the last.
SCALAR_STEPS = [1_000] if FAST else [1_000, 10_000]  # W1
ELEMENTWISE_SIZE = 10**5 if FAST else 10**6  # W4, W10
MATMUL_SIZES = [128] if FAST else [128, 512]  # W5
HESSIAN_SIZE = 16 if FAST else 64  # W6
ROSENBROCK_SIZE = 10_000 if FAST else 100_000  # W7

# Interleaved measurements (track_ benchmarks and report.py): rounds, and the
# time one backend gets per round (a round repeats the workload to fill it).
RATIO_ROUNDS = 5 if FAST else 11
RATIO_ROUND_SECONDS = 0.05 if FAST else 0.2
# W9 and W10 run one fresh process per sample.
PROCESS_ROUNDS = 3 if FAST else 7
MEMORY_ROUNDS = 1 if FAST else 3


def torch_or_skip():
    """Import torch, the baseline, or skip the benchmark that asks for it.

    asv reports a benchmark whose setup raises NotImplementedError as skipped.
    """
    try:
        import torch
    except ImportError:
        raise NotImplementedError("torch is not installed") from None
    if ONE_THREAD:
        torch.set_num_threads(1)
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


def warm_up(lib, workload=None, *args):
    """Pay, untimed, what tape pays once per process: loading its native code.

    tape loads (or compiles) its native sweep at the first backward of a
    process, and more Numba kernels, one per new argument type, at the first
    op of a kind (such as the first matmul of 2-d arrays). So: a tiny first-
    and second-order backward, then ``workload(lib, *args)()`` once, which
    should be given small sizes: it reaches the same kernels at little cost.
    The callable runs twice: a compiled workload records at its first call
    and replays from its second, which loads the native replay.
    """
    for data in (0.5, [0.5, 0.25]):
        x = leaf(lib, data)
        (g,) = lib.autograd.grad((x.sin() * x).sum(), x, create_graph=True)
        g.sum().backward()
        (x.tanh() * x).sum().backward()
    if workload is not None:
        run = workload(lib, *args)
        run()
        run()


@lru_cache
def uniform(shape, bound=1.0, seed=0):
    """A read-only float64 array, uniform on [-bound, bound], the same on every call."""
    array = np.random.default_rng(seed).uniform(-bound, bound, size=shape)
    array.flags.writeable = False
    return array


def _seconds_per_call(run, number):
    gc_was_enabled = gc.isenabled()
    gc.disable()  # as timeit does
    try:
        start = time.perf_counter()
        for _ in range(number):
            run()
        return (time.perf_counter() - start) / number
    finally:
        if gc_was_enabled:
            gc.enable()


def interleaved_medians(runs, rounds=RATIO_ROUNDS, round_seconds=RATIO_ROUND_SECONDS):
    """Median seconds per call of each zero-argument callable in ``runs``.

    The callables are timed in turn, round after round (tape, torch, tape,
    torch, ...), so that a change in the machine's speed during the
    measurement affects all of them alike. Each is first called once
    untimed, then once timed, to size the number of calls that fills
    ``round_seconds`` per round.

    >>> interleaved_medians({"a": lambda: None}, rounds=3)["a"] < 1e-3
    True
    """
    numbers = {}
    for name, run in runs.items():
        run()
        start = time.perf_counter()
        run()
        once = time.perf_counter() - start
        numbers[name] = max(1, int(round_seconds / max(once, 1e-9)))
    samples = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            samples[name].append(_seconds_per_call(run, numbers[name]))
    return {name: statistics.median(values) for name, values in samples.items()}


def process_seconds(source):
    """Seconds from starting ``python -c source`` to its first line of output.

    The clock starts before the interpreter does, so this includes interpreter
    start-up, and stops when the child prints, so it excludes its exit.
    """
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", source],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = child.stdout.readline()
    seconds = time.perf_counter() - start
    out, err = child.communicate()
    if child.returncode != 0 or not line.strip():
        raise RuntimeError(f"benchmark subprocess failed ({child.returncode}):\n{err}")
    return seconds


def _run_process(source, env=None):
    """What ``python -c source`` prints; RuntimeError if it fails."""
    done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"benchmark subprocess failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def process_output(source, env_overrides=None):
    """The first line that ``python -c source`` prints, as a float; the
    process gets this one's environment with ``env_overrides`` set."""
    env = None if not env_overrides else {**os.environ, **env_overrides}
    return float(_run_process(source, env).split()[0])


def warm_up_process(source):
    """Run ``python -c source`` once, unrecorded, with bytecode writing on.

    A warm start is a user's second run: Numba's cache and Python's bytecode
    cache (the .pyc files) are both there. Where PYTHONDONTWRITEBYTECODE is set,
    as on this project's machines, Python never writes tape's, so every sample
    would compile its 8,700 lines of source again (0.12 s), which an installed
    package such as torch, compiled by pip, does not pay; this run writes them.
    """
    _run_process(source, {key: value for key, value in os.environ.items()
                          if key != "PYTHONDONTWRITEBYTECODE"})


def interleaved_process_medians(sources, measure=process_seconds, rounds=PROCESS_ROUNDS,
                                warm=True):
    """Median of ``measure(source)`` for each source in ``sources``, run in turn.

    One fresh process per sample, alternating between the sources round after
    round. With ``warm``, a first, unrecorded round warms the file cache,
    Numba's cache and Python's bytecode cache (see warm_up_process).
    """
    if warm:
        for source in sources.values():
            warm_up_process(source)
    samples = {name: [] for name in sources}
    for _ in range(rounds):
        for name, source in sources.items():
            samples[name].append(measure(source))
    return {name: statistics.median(values) for name, values in samples.items()}


# Note [Two allocators]
# Peak memory depends on whether freed memory goes back to the system. By
# default glibc's malloc keeps freed blocks below its mmap threshold, which it
# raises as large blocks are freed, and PyTorch's CPU allocator caches blocks
# too; with MALLOC_MMAP_THRESHOLD_=65536 every block of 64 kB or more is
# mapped and unmapped, so each side's peak is what it holds at once. The
# memory figures are measured under both.
ALLOCATORS = {"default allocator": None, "MALLOC_MMAP_THRESHOLD_=65536": {"MALLOC_MMAP_THRESHOLD_": "65536"}}


def peak_memory_source(module, backend, size):
    """Code for a fresh process that prints, in MB, the peak resident memory
    of ``module.memory_run(lib, inputs)`` above the resident memory after
    import, where ``inputs = module.memory_inputs(size)`` exist before the
    baseline is taken: the tensors made from them, every intermediate, and
    whatever the first run loads, count."""
    return f"""
import sys
sys.path.insert(0, {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))!r})
from benchmarks.common import memory_megabytes, peak_memory_megabytes, reset_peak_memory
from benchmarks.{module} import memory_inputs, memory_run
inputs = memory_inputs({size!r})
import {backend} as lib
baseline = memory_megabytes()
reset_peak_memory()
memory_run(lib, inputs)
print(peak_memory_megabytes() - baseline)
"""


def peak_memory_medians(module, size, env_overrides=None, rounds=MEMORY_ROUNDS):
    """peak_memory_source's MB, median over fresh processes run in turn:
    {"tape": MB, "torch": MB}. Memory does not depend on warm caches: no
    warm-up round."""
    sources = {backend: peak_memory_source(module, backend, size) for backend in BACKENDS}
    return interleaved_process_medians(
        sources, measure=lambda source: process_output(source, env_overrides), rounds=rounds, warm=False)


def _proc_status_megabytes(key):
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return None


def memory_megabytes():
    """Resident memory of this process now, in MB (Linux; None elsewhere)."""
    return _proc_status_megabytes("VmRSS")


def reset_peak_memory():
    """Make the peak resident memory start again from now (Linux 4.0+); True on success."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return True
    except OSError:
        return False


def peak_memory_megabytes():
    """Peak resident memory of this process, in MB: VmHWM, or else ru_maxrss."""
    peak = _proc_status_megabytes("VmHWM")
    if peak is None:
        import resource

        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        peak = maxrss / 2**20 if sys.platform == "darwin" else maxrss / 1024  # bytes or kB
    return peak


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


class RatioBenchmark:
    """Base class of the ``track_<workload>_ratio_vs_torch`` benchmarks.

    A subclass sets ``workload``, a function ``(lib, *args) -> run`` whose
    ``run()`` does the whole workload once, ``args``, and ``small_args`` (the
    same, small, for warm_up). Its ``track_`` method returns ``self.ratio()``:
    median(tape) / median(torch), both timed in this one process by
    ``interleaved_medians``. report.py calls ``medians()`` of the same classes.

    A compiled variant also sets ``tape_workload``, the same workload through
    ``tape.compile``: tape's side runs it, torch's runs ``workload``, eagerly.
    A subclass that measures tape against something other than eager torch
    overrides ``sides()`` and names that side in ``baseline``.
    """

    unit = "ratio"
    timeout = 120 if FAST else 300
    args = ()
    small_args = ()
    tape_workload = None
    baseline = "torch"

    def setup(self):
        torch_or_skip()

    def sides(self):
        """What is timed: {side: (backend, workload)}, "tape" and ``baseline``."""
        return {"tape": ("tape", self.tape_workload or self.workload), "torch": ("torch", self.workload)}

    def medians(self):
        """Median seconds per run of each side's workload: {"tape": s, baseline: s}."""
        runs = {}
        for side, (backend, workload) in self.sides().items():
            lib = import_backend(backend)
            warm_up(lib, workload, *self.small_args)
            runs[side] = workload(lib, *self.args)
        return interleaved_medians(runs)

    def ratio(self):
        medians = self.medians()
        return medians["tape"] / medians[self.baseline]


class MemoryRatioBenchmark(RatioBenchmark):
    """Base class of the peak-memory ratios against PyTorch, in fresh
    processes, under each allocator (Note [Two allocators]). A subclass sets
    ``memory_medians``, a function ``(env_overrides=...) -> {"tape": MB,
    "torch": MB}``; its ``track_`` method returns ``self.memory_ratio(allocator)``."""

    params = [list(ALLOCATORS)]
    param_names = ["allocator"]

    def setup(self, allocator):
        super().setup()

    def memory_ratio(self, allocator):
        medians = type(self).memory_medians(env_overrides=ALLOCATORS[allocator])
        return medians["tape"] / medians["torch"]
