"""Each op's opcode comes from the committed table tape/_opcodes.py (Note
[Stable opcodes] in tape/_registry.py)."""
import ast
import pathlib
import subprocess
import sys

import tape
from tape import _opcodes
from tape._registry import REGISTRY, opdefs

ROOT = pathlib.Path(tape.__file__).resolve().parent.parent

# Runs tape with the committed table less "sin": as if sin had just been
# defined and the generator not run yet.
UNTABLED_SIN = """
import pathlib, sys, types
table = types.ModuleType("tape._opcodes")
exec(pathlib.Path("tape/_opcodes.py").read_text(), table.__dict__)
tabled = table.OPCODES.pop("sin")
sys.modules["tape._opcodes"] = table
import tape
from tape import _gen, _sweep
from tape._registry import REGISTRY, lookup
x = tape.tensor([0.5, 2.0], requires_grad=True)
y = x.sin()
try:
    y.sum().backward()
    refusal = None
except RuntimeError as e:
    refusal = str(e)
print(repr(dict(hole=REGISTRY[tabled] is None, sin=lookup("sin").code, next=table.NEXT_OPCODE,
                others_kept=all(lookup(n).code == c for n, c in table.OPCODES.items()),
                forward=y.tolist(), refusal=refusal, table=_gen.render_opcodes(),
                sweep_stale=_gen.digest() != _sweep.REGISTRY_DIGEST)))
"""


def test_every_op_has_the_opcode_of_the_committed_table():
    assert {d.name: d.code for d in opdefs()} == _opcodes.OPCODES, \
        "tape/_opcodes.py does not match the op registry: run `python -m tape._gen`"
    assert all(REGISTRY[d.code] is d for d in opdefs())
    assert len(set(_opcodes.OPCODES.values())) == len(_opcodes.OPCODES)
    assert max(_opcodes.OPCODES.values()) < _opcodes.NEXT_OPCODE == len(REGISTRY)


def test_an_op_missing_from_the_table_takes_the_next_number_and_the_sweep_is_stale():
    out = subprocess.run([sys.executable, "-c", UNTABLED_SIN], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    seen = ast.literal_eval(out)
    assert seen["hole"] and seen["others_kept"]
    assert seen["sin"] == seen["next"]
    assert seen["forward"] == [0.479425538604203, 0.9092974268256817]
    assert seen["refusal"] == ("tape/_sweep.py does not match the op registry; regenerate it with "
                               "`python -m tape._gen`")
    # the generator tables sin at that number and never gives it again
    assert f'    "sin": {seen["next"]},\n' in seen["table"]
    assert seen["table"].endswith(f"NEXT_OPCODE = {seen['next'] + 1}\n")
    assert seen["sweep_stale"]
