"""Measure tape against PyTorch on the workloads of DESIGN.md; print a Markdown table.

Runs the same workloads and measuring code as the asv ``track_*`` benchmarks,
directly, without asv. From the repository root::

    python asv_benchmarks/report.py                      # regular profile, ~1.5 min
    TAPE_BENCH_PROFILE=fast python asv_benchmarks/report.py
    python asv_benchmarks/report.py --write README.md    # also update README.md
    python asv_benchmarks/report.py --workloads W1,W9
    python asv_benchmarks/report.py --workloads compiled # the tape.compile rows

Each row is a workload key. ``W1C``, ``W2C``, ``W3C``, ``W4C`` and ``W7C`` are
W1, W2, W3, W4 and W7 with tape's side through ``tape.compile`` (compiled once,
timed from its second call on, when it replays) against eager PyTorch; ``W1F``
is W1's first compiled call (a fresh ``tape.compile`` each run: recording and
preparing) against tape's eager W1. ``--workloads compiled`` selects all six;
the default, all rows, puts each compiled row after its eager one.

``--write FILE`` replaces what lies between ``<!-- perf-table-start -->`` and
``<!-- perf-table-end -->`` in FILE with the table. ``TAPE_BENCH_THREADS=default``
measures with the libraries' default thread counts instead of one thread, and
writes between ``<!-- perf-table-default-threads-start -->`` and
``<!-- perf-table-default-threads-end -->``.
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# First: sets the thread variables before numpy, tape or torch load (Note [One thread]).
from benchmarks import common  # noqa: E402
from benchmarks.bench_elementwise import (ElementwiseCompiledRatio, ElementwiseRatio,  # noqa: E402
                                          memory_medians as w10_medians)
from benchmarks.bench_hessian import RosenbrockHessianRatio, RosenbrockHessianVectorizedRatio  # noqa: E402
from benchmarks.bench_hvp import (RosenbrockHVPCompiledRatio, RosenbrockHVPRatio,  # noqa: E402
                                  memory_medians as w7_memory_medians)
from benchmarks.bench_matmul import MatmulRatio  # noqa: E402
from benchmarks.bench_micrograd import ScalarMLPCompiledRatio, ScalarMLPRatio  # noqa: E402
from benchmarks.bench_mlp import MLPCompiledRatio, MLPRatio  # noqa: E402
from benchmarks.bench_scalar import (ScalarChainCompiledRatio, ScalarChainFirstCallRatio,  # noqa: E402
                                     ScalarChainRatio)
from benchmarks.bench_startup import startup_medians  # noqa: E402
from benchmarks.bench_vmap import BATCH as W8_BATCH, PerSampleGradsRatio  # noqa: E402

_TABLE = "perf-table" if common.ONE_THREAD else "perf-table-default-threads"
START_MARKER = f"<!-- {_TABLE}-start -->"
END_MARKER = f"<!-- {_TABLE}-end -->"

# The descriptions of the eager rows that compiled rows extend.
W1 = f"W1 scalar chain, {ScalarChainRatio.args[0]:,} steps"
W2 = "W2 scalar MLP 3-16-16-1, batch 4"
W3 = "W3 MLP 64-64-64-1, batch 32"
W4 = f"W4 20 elementwise ops, {ElementwiseRatio.args[0]:,} elements"
W7 = f"W7 Rosenbrock Hessian-vector product, n = {RosenbrockHVPRatio.args[0]:,}"
# (key, description, ratio benchmark class, target for tape/baseline, or None
# for a workload that issue 3's table sets no target for). The baseline is
# eager PyTorch but for W1F's, tape's eager W1 (the class's `baseline`). The
# compiled rows' targets are issue 21's.
IN_PROCESS = [
    ("W1", W1, ScalarChainRatio, 0.2),
    ("W1C", f"{W1}, compiled", ScalarChainCompiledRatio, 0.003),
    ("W1F", f"{W1}, first compiled call (record + prepare), against tape's eager W1", ScalarChainFirstCallRatio,
     1.5),
    ("W2", W2, ScalarMLPRatio, 0.2),
    ("W2C", f"{W2}, compiled", ScalarMLPCompiledRatio, 0.02),
    ("W3", W3, MLPRatio, 0.6),
    ("W3C", f"{W3}, compiled", MLPCompiledRatio, 0.3),
    ("W4", W4, ElementwiseRatio, 1.2),
    ("W4C", f"{W4}, compiled", ElementwiseCompiledRatio, 0.2),
    ("W5", f"W5 sum(tanh(A @ B)), {MatmulRatio.args[0]}x{MatmulRatio.args[0]}", MatmulRatio, 1.1),
    ("W6", f"W6 Rosenbrock dense Hessian, n = {RosenbrockHessianRatio.args[0]}", RosenbrockHessianRatio,
     None),
    ("W6V", f"W6 the same, `vectorize=True` (PyTorch's vmap)", RosenbrockHessianVectorizedRatio, None),
    ("W7", W7, RosenbrockHVPRatio, 1.2),
    ("W7C", f"{W7}, compiled", RosenbrockHVPCompiledRatio, 0.7),
    ("W8", f"W8 per-sample gradients, vmap(grad), linear model, batch {W8_BATCH}", PerSampleGradsRatio, None),
]
W9_SECONDS = 1.0
W10_RATIO = 1.0
# (key, description, medians in MB, target for tape/torch or None), each
# measured under both allocators (Note [Two allocators] in benchmarks.common)
MEMORY = [
    ("W7M", f"W7 peak memory above post-import RSS, n = {RosenbrockHVPRatio.args[0]:,}", w7_memory_medians,
     None),
    ("W10", "W10 peak memory of W4 above post-import RSS", w10_medians, W10_RATIO),
]
WORKLOADS = [key for key, *_ in IN_PROCESS] + ["W9"] + [key for key, *_ in MEMORY]
# What `--workloads compiled` stands for.
COMPILED = ["W1C", "W1F", "W2C", "W3C", "W4C", "W7C"]


def _seconds(value):
    if value >= 1:
        return f"{value:.2f} s"
    return f"{value * 1e3:#.3g}".rstrip(".") + " ms"  # 3 significant digits: 0.850, 42.5, 188


def _verdict(met):
    return "met" if met else "**missed**"


def _row(description, tape, torch, ratio, target):
    # two significant digits below 0.1: the compiled rows' targets are 0.003 and 0.02
    shown = f"{ratio:.2f}" if ratio >= 0.1 else f"{ratio:.2g}"
    return f"| {description} | {tape} | {torch} | {shown} | {target} |"


def _failed_row(description, target, error):
    message = error if len(error) <= 110 else error[:107] + "..."
    return f"| {description} | **failed** | | | {target} (**failed**: {message}) |"


def _log(message):
    print(message, file=sys.stderr, flush=True)


class WorkloadFailed(Exception):
    """A workload raised; ``args[0]`` is the exception's last line."""


def _in_process_medians(key):
    """The medians of one in-process workload, measured in a fresh child process.

    Each workload gets its own process, as each asv benchmark does, so that no
    row depends on what the workloads before it left behind (allocator state,
    tape's memory budget).
    """
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", key],
                          capture_output=True, text=True)
    if done.returncode != 0:
        _log(done.stderr)
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        raise WorkloadFailed(lines[-1])
    return json.loads(done.stdout.strip().splitlines()[-1])


def _child(key):
    """Measure one in-process workload and print its medians as JSON (``--child``)."""
    (cls,) = [cls for k, _, cls, _ in IN_PROCESS if k == key]
    benchmark = cls()
    benchmark.setup()
    print(json.dumps(benchmark.medians()))


def measure(workloads):
    """The table's rows, one per workload in ``workloads``, and whether all succeeded."""
    rows = []
    ok = True
    for key, description, cls, target in IN_PROCESS:
        if key not in workloads:
            continue
        _log(f"measuring {description} ...")
        target_text = "none set" if target is None else f"≤ {target}"
        try:
            medians = _in_process_medians(key)
        except WorkloadFailed as error:
            rows.append(_failed_row(description, target_text, str(error)))
            ok = False
            continue
        baseline = medians[cls.baseline]
        ratio = medians["tape"] / baseline
        verdict = "" if target is None else f" ({_verdict(ratio <= target)})"
        baseline_text = _seconds(baseline) + ("" if cls.baseline == "torch" else f" ({cls.baseline})")
        rows.append(_row(description, _seconds(medians["tape"]), baseline_text, ratio, target_text + verdict))
    if "W9" in workloads:
        _log("measuring W9 cold start (fresh processes) ...")
        description = "W9 cold start: interpreter to first backward"
        target_text = f"≤ {W9_SECONDS:.1f} s and ≤ PyTorch"
        try:
            medians = startup_medians()
        except RuntimeError as error:
            rows.append(_failed_row(description, target_text, str(error).strip().splitlines()[-1]))
            ok = False
        else:
            ratio = medians["tape"] / medians["torch"]
            met = medians["tape"] <= W9_SECONDS and ratio <= 1
            rows.append(_row(description, _seconds(medians["tape"]), _seconds(medians["torch"]),
                             ratio, f"{target_text} ({_verdict(met)})"))
    for key, description, medians_of, target in MEMORY:
        if key not in workloads:
            continue
        target_text = "none set" if target is None else f"≤ {target}"
        for allocator, env_overrides in common.ALLOCATORS.items():
            _log(f"measuring {description}, {allocator} (fresh processes) ...")
            labelled = f"{description}, {allocator}"
            try:
                medians = medians_of(env_overrides=env_overrides)
            except RuntimeError as error:
                rows.append(_failed_row(labelled, target_text, str(error).strip().splitlines()[-1]))
                ok = False
                continue
            ratio = medians["tape"] / medians["torch"]
            verdict = "" if target is None else f" ({_verdict(ratio <= target)})"
            rows.append(_row(labelled, f"{medians['tape']:.0f} MB", f"{medians['torch']:.0f} MB", ratio,
                             target_text + verdict))
    return rows, ok


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _versions():
    import numba
    import numpy
    import torch

    return (f"Python {platform.python_version()}, numpy {numpy.__version__}, "
            f"numba {numba.__version__}, torch {torch.__version__}")


def table(rows):
    """The Markdown table and the lines that say how and where it was measured."""
    threads = "one thread" if common.ONE_THREAD else "default threads"
    lines = [
        "| workload | tape | PyTorch | ratio (tape/torch) | target |",
        "|---|---|---|---|---|",
        *rows,
        "",
        f"Medians of forward + backward (W6: the whole Hessian; W7: forward and both backwards; "
        f"W8: the per-sample gradients); "
        f"compiled rows: tape through `tape.compile`, compiled once and timed from its second call, "
        f"against eager PyTorch (W1F: the first call of a fresh `tape.compile`, against tape's eager W1), "
        f"float64, {threads}; "
        f"tape and PyTorch timed in turn in one process per workload, "
        f"{common.RATIO_ROUNDS} rounds; "
        f"W9 and peak memory in fresh processes, {common.PROCESS_ROUNDS} and {common.MEMORY_ROUNDS} "
        f"rounds (profile `{common.PROFILE}`).",
        "",
        f"Machine: {platform.platform()}, {_cpu_model()}, {os.cpu_count()} CPUs; {_versions()}. "
        f"Date: {datetime.date.today().isoformat()}.",
    ]
    return "\n".join(lines)


def _marked_span(path):
    """The file's text and where the text between the perf-table markers lies."""
    with open(path, encoding="utf-8") as file:
        content = file.read()
    start = content.find(START_MARKER)
    end = content.find(END_MARKER)
    if start < 0 or end < start:
        raise SystemExit(f"{path}: needs {START_MARKER} followed by {END_MARKER}")
    return content, start + len(START_MARKER), end


def write_between_markers(path, text):
    """Replace what lies between the perf-table markers in ``path`` with ``text``."""
    content, start, end = _marked_span(path)
    with open(path, "w", encoding="utf-8") as file:
        file.write(content[:start] + "\n" + text + "\n" + content[end:])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", metavar="FILE",
                        help=f"replace the text between {START_MARKER} and {END_MARKER} in FILE")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help="comma-separated subset of %(default)s; `compiled` stands for "
                             + ",".join(COMPILED))
    parser.add_argument("--child", metavar="WORKLOAD", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child)
        return
    workloads = [w.strip().upper() for w in args.workloads.split(",") if w.strip()]
    if "COMPILED" in workloads:
        workloads += COMPILED
        workloads.remove("COMPILED")
    unknown = sorted(set(workloads) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workloads {', '.join(unknown)}; "
                     f"choose among {', '.join(WORKLOADS)}")
    if args.write:
        _marked_span(args.write)  # fail before measuring, not after
    try:
        common.torch_or_skip()
    except NotImplementedError:
        raise SystemExit("report.py compares against PyTorch: install torch") from None
    rows, ok = measure(workloads)
    text = table(rows)
    print(text)
    if not ok:
        # The table says which workload failed; a file keeps only complete tables.
        raise SystemExit("some workloads failed (their errors are above)"
                         + (f"; {args.write} left unchanged" if args.write else ""))
    if args.write:
        write_between_markers(args.write, text)
        _log(f"wrote the table into {args.write}")


if __name__ == "__main__":
    main()
