"""First use on a new machine: the native cache is keyed by every native
source (Note [Native cache]), and a compile says so on stderr once (Note
[Compile notice]). Each test runs tape in fresh processes."""
import ast
import os
import pathlib
import shutil
import subprocess
import sys

import tape

ROOT = pathlib.Path(tape.__file__).resolve().parent.parent

SIN_GRADIENT = """
import tape
x = tape.tensor([0.5, 1.0, 2.0], requires_grad=True)
x.sin().sum().backward()
print(x.grad.tolist())
"""

SCALAR_BACKWARD = """
import tape
x = tape.tensor(0.5, requires_grad=True)
(x.sin() * x).backward()
print(x.grad.item())
"""


def _run(cwd, script, **env):
    return subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True,
                          check=True, env={**os.environ, **env})


def _copy_of_the_package(tmp_path):
    for package in ("tape", "ops"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_an_edit_of_a_helper_the_kernels_call_is_compiled_not_loaded_stale(tmp_path):
    # sin's backward kernel lives in tape/_sweep.py and calls cos from
    # tape/_vecmath.py: the file Numba itself would key the kernel by is unchanged
    copy = _copy_of_the_package(tmp_path)
    before = _run(copy, SIN_GRADIENT).stdout
    vecmath = copy / "tape" / "_vecmath.py"
    text = vecmath.read_text()
    edited = text.replace("    return _negate_if_odd(_sin_poly(r), q + 1.0)\n",
                          "    return 2.0 * _negate_if_odd(_sin_poly(r), q + 1.0)\n")
    assert edited != text
    vecmath.write_text(edited)
    after = _run(copy, SIN_GRADIENT).stdout
    assert [2 * g for g in ast.literal_eval(before)] == ast.literal_eval(after)


def test_a_compile_prints_one_line_saying_so_and_a_warm_start_prints_nothing(tmp_path):
    cold = _run(ROOT, SCALAR_BACKWARD, NUMBA_CACHE_DIR=str(tmp_path)).stderr
    warm = _run(ROOT, SCALAR_BACKWARD, NUMBA_CACHE_DIR=str(tmp_path)).stderr
    assert (cold.count("\n"), cold.startswith("tape: compiling the native backward sweep"),
            "TAPE_QUIET_COMPILE=1" in cold,
            warm) == (1, True, True, "")


def test_the_compile_notice_is_silenced_by_its_variable(tmp_path):
    cold = _run(ROOT, SCALAR_BACKWARD, NUMBA_CACHE_DIR=str(tmp_path), TAPE_QUIET_COMPILE="1")
    assert cold.stderr == ""


def test_every_native_function_of_tape_lives_in_a_source_the_cache_digest_covers():
    import importlib
    import pkgutil

    from numba.core.dispatcher import Dispatcher

    from tape._native import NATIVE_SOURCES

    outside = set()
    for info in pkgutil.walk_packages(tape.__path__, "tape."):
        if info.name in ("tape.__main__", "tape._gen"):
            continue  # the demo, and the generator (tooling)
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, Dispatcher):
                path = pathlib.Path(value.py_func.__code__.co_filename)
                if path.parent != ROOT / "tape" or path.name not in NATIVE_SOURCES:
                    outside.add(f"{info.name}.{value.py_func.__name__}")
    assert outside == set()
