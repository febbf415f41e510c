"""Randomly generated programs over the op table of tests/test_ops.py, drawn by
hypothesis: chains of its elementwise ops on leaves of broadcasting shapes
(0-d and empty included), in float32 and float64, with in-place steps, and
checked for what needs no reference: gradients against finite differences
and gradgradcheck (smooth programs), and, at edge values (0, ties, inf, nan),
the native sweep against the re-taped one, backward() against
autograd.grad, the dtypes of results and gradients, and a tape that works
after a backward refused an in-place change.

A few seconds in the suite; TAPE_PROGRAMS=<n> runs n programs a test.
"""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tape
from tape._engine import force_retaped
from test_ops import ELEMENTWISE_BINARY, ELEMENTWISE_UNARY

_PROGRAMS = int(os.environ.get("TAPE_PROGRAMS", "25"))
_SETTINGS = settings(max_examples=_PROGRAMS, deadline=None, derandomize="TAPE_PROGRAMS" not in os.environ,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# in-place steps on an intermediate (never a leaf): number operands, so the
# dtype stays; each is recorded as its op, or refused by backward where a
# row saved the value it changes
INPLACE = [
    ("add_", lambda v: v.add_(1.5)),
    ("mul_", lambda v: v.mul_(-2.0)),
    ("clamp_", lambda v: v.clamp_(min=-0.5)),
    ("sin_", lambda v: v.sin_()),
    ("neg_", lambda v: v.neg_()),
]

EDGE_VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, np.inf, -np.inf, np.nan]


def _unit_interval(v):
    """v mapped smoothly into (0, 1): each step's operand is lo + (hi - lo) *
    this, inside the interval the op's record draws from (away from its
    jumps and the edges of its domain)."""
    return v.sigmoid()


@st.composite
def programs(draw, min_side=1, max_steps=4):
    """(leaf shapes, steps): a step is ("unary", k, i), ("binary", k, i, j)
    or ("inplace", k, i), applying record k of its table to values i (and j)
    of the program, whose first values are the leaves."""
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=min_side,
                                                    max_side=3)).input_shapes
    steps = []
    for n in range(2, 2 + draw(st.integers(1, max_steps))):
        kind = draw(st.sampled_from(["unary", "unary", "binary", "binary", "inplace"]))
        i = draw(st.integers(0, n - 1))
        if kind == "unary":
            steps.append(("unary", draw(st.integers(0, len(ELEMENTWISE_UNARY) - 1)), i))
        elif kind == "binary":
            steps.append(("binary", draw(st.integers(0, len(ELEMENTWISE_BINARY) - 1)), i,
                          draw(st.integers(0, n - 1))))
        else:
            steps.append(("inplace", draw(st.integers(0, len(INPLACE) - 1)), i))
    return list(shapes), steps


def _run(steps, leaves, smooth):
    """The program's values, leaves first; with `smooth`, every operand is
    first mapped into its op's interval. An in-place step changes a copy of
    a leaf or, unless `smooth`, the intermediate value itself (which a
    backward refuses where a row saved it), and its result joins the values."""
    values = list(leaves)
    for step in steps:
        if step[0] == "unary":
            _, fn, _, lo, hi = ELEMENTWISE_UNARY[step[1]]
            x = values[step[2]]
            values.append(fn(lo + (hi - lo) * _unit_interval(x) if smooth else x))
        elif step[0] == "binary":
            _, fn, _, lo, hi = ELEMENTWISE_BINARY[step[1]]
            x, y = values[step[2]], values[step[3]]
            if smooth:
                x = lo[0] + (hi[0] - lo[0]) * _unit_interval(x)
                y = lo[1] + (hi[1] - lo[1]) * _unit_interval(y)
            values.append(fn(x, y))
        else:
            v = values[step[2]]
            if smooth or step[2] < len(leaves):
                v = v * 1.0
            values.append(INPLACE[step[1]][1](v))
    return values


def _loss(values, weights):
    """A scalar of every value the program made, so every step is on a path
    to it: the sum of each value times its fixed weights."""
    total = None
    for v, w in zip(values, weights):
        term = (v * tape.tensor(w, dtype=v.dtype)).sum()
        total = term if total is None else total + term.to(total.dtype)
    return total


def _weights(values, seed):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1.0, 1.0, v.shape) for v in values]


def _smooth_program(shapes, steps, seed):
    rng = np.random.default_rng(seed)
    leaves = [tape.tensor(rng.uniform(-1.0, 1.0, s), requires_grad=True) for s in shapes]
    weights = _weights(_run(steps, [x.detach() for x in leaves], True), seed)
    return leaves, lambda *xs: _loss(_run(steps, xs, True)[len(xs):], weights[len(xs):])


@_SETTINGS
@given(programs(), st.integers(0, 2**16))
def test_smooth_programs_pass_gradcheck_and_gradgradcheck(program, seed):
    shapes, steps = program
    leaves, fn = _smooth_program(shapes, steps, seed)
    assert tape.autograd.gradcheck(fn, leaves, atol=1e-6, rtol=1e-5)
    assert tape.autograd.gradgradcheck(fn, leaves, atol=1e-5, rtol=1e-4)


@st.composite
def edge_leaves(draw, shapes):
    """Leaves of `shapes` holding edge values and ties, in float32 or float64:
    one dtype when 0-d leaves meet others (PyTorch promotes a 0-d tensor by
    category alone, which is issue 18's promotion class, tested there)."""
    mixed = all(len(s) for s in shapes) or not any(len(s) for s in shapes)
    common = draw(st.sampled_from([np.float32, np.float64]))
    leaves = []
    for s in shapes:
        dtype = draw(st.sampled_from([np.float32, np.float64])) if mixed else common
        cells = int(np.prod(s))
        values = draw(st.lists(st.sampled_from(EDGE_VALUES), min_size=cells, max_size=cells))
        leaves.append(np.array(values, dtype).reshape(s))
    return leaves


def _expected_dtype(steps, leaf_dtypes):
    """Result dtypes by the promotion rule of float tensors: an elementwise
    op of one input keeps its dtype, of two takes the wider."""
    dtypes = list(leaf_dtypes)
    for step in steps:
        if step[0] == "binary":
            dtypes.append(np.promote_types(dtypes[step[2]], dtypes[step[3]]))
        else:
            dtypes.append(dtypes[step[2]])
    return dtypes


def _grads(steps, arrays, seed, retaped, use_backward):
    leaves = [tape.tensor(a, requires_grad=True) for a in arrays]
    values = _run(steps, leaves, False)
    loss = _loss(values[len(leaves):], _weights(values, seed)[len(leaves):])
    with force_retaped() if retaped else _NoContext():
        if use_backward:
            loss.backward()
            grads = [x.grad for x in leaves]
        else:
            grads = tape.autograd.grad(loss, leaves, allow_unused=True)
    return values, grads


class _NoContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# what a program may be refused, as PyTorch refuses it: a backward that needs
# a value an in-place step changed, lerp of two dtypes
_REFUSALS = ("modified by an inplace operation", "expected dtype")


def _assert_same(a, b, dtype):
    rtol = 1e-5 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(a, b, rtol=rtol, atol=0, equal_nan=True)


def _still_usable():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]


@_SETTINGS
@given(st.data())
def test_programs_at_edge_values_agree_across_sweeps_and_apis(data):
    shapes, steps = data.draw(programs(min_side=0))
    arrays = data.draw(edge_leaves(shapes))
    seed = data.draw(st.integers(0, 2**16))
    try:
        values, native = _grads(steps, arrays, seed, False, False)
    except RuntimeError as e:
        assert any(refusal in str(e) for refusal in _REFUSALS), e
        _still_usable()
        return
    for v, dtype in zip(values, _expected_dtype(steps, [a.dtype for a in arrays])):
        assert v.dtype == dtype
    _, retaped = _grads(steps, arrays, seed, True, False)
    _, by_backward = _grads(steps, arrays, seed, False, True)
    for a, n, r, b in zip(arrays, native, retaped, by_backward):
        if n is None:  # a leaf that no step used
            assert r is None and b is None
            continue
        assert n.dtype == a.dtype and r.dtype == a.dtype and b.dtype == a.dtype
        assert n.shape == a.shape
        _assert_same(n.numpy(), r.numpy(), a.dtype)
        _assert_same(n.numpy(), b.numpy(), a.dtype)


@pytest.mark.parametrize("shape", [(0,), (2, 0), (0, 3)])
def test_programs_on_empty_tensors_give_empty_gradients(shape):
    x = tape.tensor(np.zeros(shape), requires_grad=True)
    for name, fn, *_ in ELEMENTWISE_UNARY:
        (g,) = tape.autograd.grad(fn(x).sum(), x, allow_unused=True, materialize_grads=True)
        assert g.shape == shape, name
    for name, fn, *_ in ELEMENTWISE_BINARY:
        (g,) = tape.autograd.grad(fn(x, x).sum(), x, allow_unused=True, materialize_grads=True)
        assert g.shape == shape, name
