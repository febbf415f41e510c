"""Every public function and Tensor method against PyTorch 2.13's Python
signatures (tests/data/torch_signatures.json, taken once from torch's binding
stubs and schemas: each name's overloads as lists of [name, kind, default]):
tape takes torch's parameter names, positions, keyword-only markers and
defaults, and out= as torch does. The table also lists the names of either
side that the other lacks."""
import ast
import inspect
import json
import keyword
import math
import pathlib
import warnings

import numpy as np
import pytest

import tape

TABLE = json.loads((pathlib.Path(__file__).parent / "data" / "torch_signatures.json").read_text())

# parameters of torch's signatures that tape does not take: devices, layouts,
# memory formats and pinned memory have one value here, and generator objects
# do not exist (tape.manual_seed seeds the one generator)
NOT_IN_TAPE = {"layout", "device", "pin_memory", "memory_format", "generator", "non_blocking", "copy",
               "sparse_grad", "out_dtype", "implicit", "inplace", "force"}


# where tape differs from torch's signatures on purpose or for now, each
# difference as _differences reports it; the test holds these exactly
_ROUNDING_MODE = ["no parameter 'rounding_mode'"]  # div_(rounding_mode=) is not implemented
# unbiased=None tells var(input, dim, unbiased, keepdim) from the correction=
# overload, so that mixing them raises torch's TypeError; None means True
_UNBIASED = ["'unbiased' defaults to None, not True"]
KNOWN_DIFFERENCES = {
    "Tensor.div_": _ROUNDING_MODE, "Tensor.divide_": _ROUNDING_MODE,
    "tape.var": _UNBIASED, "tape.std": _UNBIASED, "Tensor.var": _UNBIASED, "Tensor.std": _UNBIASED,
    "tape.var_mean": _UNBIASED, "tape.std_mean": _UNBIASED,
    # x.squeeze(0, 1) and x.count_nonzero(0, 1): tape takes the dims as one tuple
    "Tensor.squeeze": ["no *dim"], "Tensor.count_nonzero": ["no *dim"],
}


def _public(qualname):
    owner, name = (tape.linalg, qualname[len("tape.linalg."):]) if qualname.startswith("tape.linalg.") else (
        tape, qualname[len("tape."):])
    return getattr(owner, name)


def _default(text):
    """torch's default as a Python value, or ... where it names a torch object."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return ...
    return tuple(value) if isinstance(value, list) else value


def _differences(fn, overloads, method):
    """Where fn's signature does not take one of torch's overloads."""
    params = list(inspect.signature(fn).parameters.values())
    if method:
        params = params[1:]
    by_name = {p.name: p for p in params}
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    varargs = next((i for i, p in enumerate(params) if p.kind == p.VAR_POSITIONAL), None)
    varkw = any(p.kind == p.VAR_KEYWORD for p in params)
    # keyword-only in one overload, positional in another (sort's stable=
    # overload): positional-or-keyword in one Python signature
    somewhere_positional = {name for overload in overloads for name, kind, _ in overload if kind == "pos"}
    # where overloads name a position differently (arange(end) and
    # arange(start, end), max(input, other) and max(input, dim)), tape's name
    # is one of them and the others are keywords
    names_at = {}
    for overload in overloads:
        for at, (name, _, _) in enumerate(p for p in overload if p[1] in ("pos", "posonly", "var")):
            names_at.setdefault(at, set()).add(name)
    found = []
    for overload in overloads:
        index = 0
        for name, kind, default in overload:
            at = index
            if kind in ("pos", "posonly", "var"):
                index += 1
            if name in NOT_IN_TAPE or keyword.iskeyword(name.rstrip("_")):
                continue  # uniform_(from=...): no Python function can name it
            if kind == "var":
                if varargs is None:
                    found.append(f"no *{name}")
                continue
            if kind in ("pos", "posonly"):
                if varargs is not None and at >= varargs:
                    continue  # an int list that tape takes as *args (x.reshape(2, 3))
                if kind == "posonly":
                    if at >= len(positional):
                        found.append(f"no positional {at}")
                    continue
                if at >= len(positional) or positional[at].name != name and not (
                        positional[at].name in names_at[at] and name in by_name):
                    found.append(f"positional {at} is {name!r}")
                    continue
            p = by_name.get(name)
            if p is None:
                if kind == "var" and varargs is not None:
                    continue
                if not varkw:
                    found.append(f"no parameter {name!r}")
                continue
            if kind == "kw" and p.kind != p.KEYWORD_ONLY and name not in somewhere_positional:
                found.append(f"{name!r} is not keyword-only")
            if default is not None:
                if p.default is p.empty:
                    found.append(f"{name!r} has no default")
                elif (expected := _default(default)) is not ... and not _same(p.default, expected):
                    found.append(f"{name!r} defaults to {p.default!r}, not {expected!r}")
    return sorted(set(found))


def _same(a, b):
    if isinstance(a, list):
        a = tuple(a)
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return math.isclose(a, b)
    return type(a) is type(b) and a == b or (isinstance(a, (int, float)) and not isinstance(a, bool)
                                             and not isinstance(b, bool) and a == b)


FUNCTIONS = sorted(k for k, v in TABLE["functions"].items() if v is not None)
METHODS = sorted(k for k, v in TABLE["methods"].items() if v is not None)


@pytest.mark.parametrize("qualname", FUNCTIONS)
def test_function_takes_torch_signature(qualname):
    assert _differences(_public(qualname), TABLE["functions"][qualname], False) == KNOWN_DIFFERENCES.get(qualname, [])


@pytest.mark.parametrize("name", METHODS)
def test_method_takes_torch_signature(name):
    assert _differences(getattr(tape.Tensor, name), TABLE["methods"][name], True) == KNOWN_DIFFERENCES.get(
        f"Tensor.{name}", [])


def test_the_table_covers_every_public_name():
    functions = {f"tape.{n}" for n in tape.__all__ if inspect.isfunction(getattr(tape, n))}
    functions |= {f"tape.linalg.{n}" for n in tape.linalg.__all__ if inspect.isfunction(getattr(tape.linalg, n))}
    methods = {n for n, v in vars(tape.Tensor).items() if callable(v) and not n.startswith("_")}
    assert (functions - set(TABLE["functions"]), methods - set(TABLE["methods"])) == (set(), set())


def test_keyword_calls_as_in_torch():
    a, b = tape.tensor([[1., 2.], [3., 4.]]), tape.tensor([[0., 1.], [1., 0.]])
    assert tape.matmul(input=a, other=b).tolist() == [[2., 1.], [4., 3.]]
    assert tape.sin(input=tape.tensor(0.)).item() == 0.0
    assert a.pow(exponent=2).tolist() == [[1., 4.], [9., 16.]]
    assert tape.reshape(input=a, shape=(4,)).tolist() == [1., 2., 3., 4.]
    total = tape.sum(a, dim=0, keepdim=True, dtype=tape.float32)
    assert (total.tolist(), total.dtype) == ([[4., 6.]], tape.float32)
    assert tape.zeros_like(input=a, dtype=tape.float32).dtype == tape.float32


def test_out_while_recording_raises_pytorchs_error():
    a = tape.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"^mul\(\): functions with out=\.\.\. arguments don't support "
                                           r"automatic differentiation, but one of the arguments requires grad\.$"):
        tape.mul(a, a, out=tape.empty(2))


def test_out_that_requires_grad_raises_too():
    with pytest.raises(RuntimeError, match=r"^sin\(\): functions with out=\.\.\. arguments"):
        tape.sin(tape.ones(2), out=tape.empty(2, requires_grad=True))


def test_out_is_written_and_returned():
    out = tape.zeros(2)
    version = out._version
    result = tape.mul(tape.tensor([1., 2.]), 3, out=out)
    assert (result is out, out.tolist(), out._version > version) == (True, [3., 6.], True)


def test_out_is_written_under_no_grad():
    a, out = tape.ones(2, requires_grad=True), tape.empty(2)
    with tape.no_grad():
        tape.mul(a, a, out=out)
    assert (out.tolist(), out.requires_grad) == ([1., 1.], False)


def test_an_empty_out_is_resized_silently():
    out = tape.empty(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tape.add(tape.ones(2, 3), 1, out=out)
    assert out.shape == (2, 3)


def test_an_out_of_another_shape_is_resized_with_pytorchs_warning():
    out = tape.empty(3)
    with pytest.warns(UserWarning, match=r"An output with one or more elements was resized since it had shape "
                                         r"\[3\], which does not match the required output shape \[2\]\."):
        tape.mul(tape.ones(2), 2, out=out)
    assert out.tolist() == [2., 2.]


def test_out_of_an_integer_dtype_refuses_a_float_result():
    with pytest.raises(RuntimeError, match="^result type Float can't be cast to the desired output type Long$"):
        tape.mul(tape.ones(2, dtype=tape.float32), 2, out=tape.empty(2, dtype=tape.int64))


def test_out_casts_within_a_category():
    out = tape.empty(2, dtype=tape.float32)
    tape.mul(tape.ones(2), 2, out=out)
    assert (out.dtype, out.tolist()) == (tape.float32, [2., 2.])


def test_out_writes_through_a_view():
    base = tape.zeros(4)
    tape.sin(tape.zeros(2), out=base[:2])
    np.testing.assert_array_equal(base.numpy(), np.zeros(4))
    tape.exp(tape.zeros(2), out=base[1:3])
    assert base.tolist() == [0., 1., 1., 0.]


def test_out_of_a_reduction_and_a_zero_dim_result():
    out = tape.empty(0)
    tape.sum(tape.tensor([1., 2.]), out=out)
    assert (out.shape, out.item()) == ((), 3.0)


def test_a_factorys_out_that_requires_grad_raises_with_the_aten_name():
    with pytest.raises(RuntimeError, match=r"^aten::zeros\(\): functions with out=\.\.\. arguments"):
        tape.zeros(2, out=tape.empty(2, requires_grad=True))


def test_a_factorys_out_gives_the_dtype():
    out = tape.empty(0, dtype=tape.int64)
    assert (tape.zeros(3, out=out).dtype, out.tolist()) == (tape.int64, [0, 0, 0])


def test_out_that_is_not_a_tensor_raises_pytorchs_type_error():
    with pytest.raises(TypeError, match=r"^sin\(\): argument 'out' must be Tensor, not int$"):
        tape.sin(tape.ones(2), out=3)


def test_out_of_a_function_of_two_results_takes_a_tuple():
    values, indices = tape.empty(0), tape.empty(0, dtype=tape.int64)
    result = tape.max(tape.tensor([[1., 3.], [2., 0.]]), 1, out=(values, indices))
    assert (result.values is values, values.tolist(), indices.tolist()) == (True, [3., 2.], [1, 0])


def test_torch_positional_parameter_beyond_the_ops_goes_by_keyword():
    assert tape.subtract(tape.ones(2), 2, 3).tolist() == [-5., -5.]  # x - 3 * 2, as torch.subtract
