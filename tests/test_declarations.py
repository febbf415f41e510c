"""Op declarations (Note [Op declarations]): every op is declared once, with a
PyTorch signature and a batching rule; the exports are made from them; the
engine never imports ops; and import order changes nothing."""
import ast
import json
import pathlib
import subprocess
import sys

import pytest

import tape
from ops._declare import DECLARATIONS

ROOT = pathlib.Path(__file__).resolve().parent.parent
# the engine: every module of tape/ but the face and the transforms built on ops
CLIENTS = {"__init__.py", "__main__.py", "linalg.py", "func.py", "utils.py", "viz.py", "_gen.py",
           "autograd/functional.py"}


def _imported_modules(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            # `from tape import _registry` imports the engine's module
            yield from (f"{node.module}.{a.name}" if node.module == "tape" else node.module for a in node.names)


@pytest.mark.parametrize("path", sorted(str(p.relative_to(ROOT / "tape")) for p in (ROOT / "tape").rglob("*.py")
                                        if str(p.relative_to(ROOT / "tape")) not in CLIENTS))
def test_the_engine_never_imports_ops(path):
    imported = [m for m in _imported_modules(ROOT / "tape" / path) if m == "ops" or m.startswith("ops.")]
    assert not imported, f"tape/{path} imports {imported}"


@pytest.mark.parametrize("path", sorted(str(p.relative_to(ROOT / "ops")) for p in (ROOT / "ops").glob("*.py")))
def test_ops_never_import_the_face_or_a_transform(path):
    clients = {"tape.func", "tape.linalg", "tape.utils", "tape.viz", "tape.autograd.functional"}
    imported = [m for m in _imported_modules(ROOT / "ops" / path)
                if m == "tape" or m in clients or m.startswith("tape.") and not m.split(".")[1].startswith("_")
                and m != "tape.autograd"]
    assert not imported, f"ops/{path} imports {imported}"


_STATE = r"""
import json, sys
if sys.argv[1] == "ops-first":
    import ops
import tape
from tape._registry import opdefs
from tape._batched import BatchedTensor


def described(fn):
    return getattr(fn, "__qualname__", type(fn).__name__) + ":" + str(getattr(fn, "__module__", ""))


methods = {n: described(v) for n, v in vars(tape.Tensor).items() if callable(v)}
batched = {n: described(v) for n, v in vars(BatchedTensor).items() if callable(v)}
x = tape.arange(6.0).reshape(2, 3)
try:
    argmax = tape.func.vmap(lambda v: v.argmax())(x).tolist()
except Exception as e:
    argmax = [type(e).__name__, str(e)]
print(json.dumps({"registry": [(d.name, d.code) for d in opdefs()], "methods": methods, "batched": batched,
                  "all": sorted(tape.__all__), "linalg": sorted(tape.linalg.__all__), "argmax": argmax}))
"""


def test_import_order_changes_nothing():
    """`import ops; import tape` and `import tape` give the same registry,
    Tensor methods, exports and vmap behaviour."""
    states = [json.loads(subprocess.run([sys.executable, "-c", _STATE, order], capture_output=True, text=True,
                                        check=True, cwd=ROOT).stdout) for order in ("ops-first", "tape-first")]
    assert states[0] == states[1]
    assert states[0]["argmax"] == [2, 2]


def test_every_public_op_is_declared_with_a_batching_rule():
    """Each of tape's ops and tape.linalg's is a declaration's function, whose
    batching rule is a rule or declares that there is none."""
    declared = {id(d.public) for d in DECLARATIONS if d.function}
    for module, names in (("tape", tape.__all__), ("tape.linalg", tape.linalg.__all__)):
        owner = tape if module == "tape" else tape.linalg
        for name in names:
            value = getattr(owner, name)
            # the factories are the face's own (tape.FACTORY_SIGNATURES)
            if (callable(value) and getattr(value, "__wrapped_op__", None) is not None
                    and name not in tape.FACTORY_SIGNATURES):
                assert id(value) in declared, f"{module}.{name}"
    assert all(callable(d.batch) for d in DECLARATIONS)


def test_a_declaration_without_a_batching_rule_fails_at_import():
    from ops._declare import declare
    with pytest.raises(TypeError, match="batch"):
        declare(lambda x: x, name="nothing")


def test_a_no_rule_op_raises_its_text_inside_vmap():
    refused = [d for d in DECLARATIONS if getattr(d.batch, "no_rule", False) and d.function]
    assert refused
    for d in refused:
        with pytest.raises(RuntimeError) as caught:
            d.batch(d.op, None)
        assert "vmap" in str(caught.value) or "Batching rule" in str(caught.value), d.name


def test_exports_are_made_from_the_declarations():
    """tape.<name>, its aliases and its Tensor methods are one declaration's."""
    for d in DECLARATIONS:
        owner = tape if d.module == "tape" else tape.linalg
        if d.function:
            for name in (d.name, *d.aliases):
                assert getattr(owner, name) is d.public, name
        for name in d.methods:
            method = getattr(tape.Tensor, name)
            assert method is d.op or getattr(method, "__wrapped_op__", None) is d.op, name
