"""Views share their base's storage and version counter, and an in-place op
on a view or on a base with live views rebases the graph as PyTorch's does
(Note [In-place ops on views] in ops/inplace.py).

tests/data/views_table.json holds what torch 2.13 gives for each view op x
in-place op x kind of base, from a throwaway script that ran `_case` below
with torch in place of tape (float64 default dtype, values rounded to 10
digits): the base's values, its grad_fn and next_functions, the view's, the
gradients of a loss through the base and the view, to second order, or the
error.
"""
import json
import pathlib

import pytest

import tape

TABLE = json.loads((pathlib.Path(__file__).parent / "data" / "views_table.json").read_text())

VIEWS = {
    "view": lambda b: b.view(6),
    "reshape": lambda b: b.reshape(3, 2),
    "transpose": lambda b: b.transpose(0, 1),
    "t": lambda b: b.t(),
    "T": lambda b: b.T,
    "mT": lambda b: b.mT,
    "permute": lambda b: b.permute(1, 0),
    "unsqueeze": lambda b: b.unsqueeze(0),
    "squeeze of a slice": lambda b: b[:1].squeeze(0),
    "narrow": lambda b: b.narrow(1, 1, 2),
    "select": lambda b: b.select(0, 1),
    "index": lambda b: b[1, 1:],
    "none and ellipsis": lambda b: b[None, ..., 0],
    "element": lambda b: b[1, 2],
    "diagonal": lambda b: b.diagonal(),
    "expand of one": lambda b: b[:1].expand(1, 3),
    "detach": lambda b: b.detach(),
}


def _ops(w):
    return {
        "mul_(2)": lambda v: v.mul_(2),
        "mul_(w)": lambda v: v.mul_(w),
        "sin_()": lambda v: v.sin_(),
        "exp_()": lambda v: v.exp_(),
        "copy_(w)": lambda v: v.copy_(w),
        "zero_()": lambda v: v.zero_(),
        "add_(w)": lambda v: v.add_(w),
    }


def _names(fn):
    return None if fn is None else [None if f is None else type(f).__name__ for f, _ in fn.next_functions]


def _rounded(x):
    return [_rounded(y) for y in x] if isinstance(x, list) else round(x, 10)


def _case(view, op, kind):
    """What torch 2.13 was asked in the table's script, asked of tape."""
    a = tape.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=tape.float64, requires_grad=True)
    w = tape.tensor(0.3, dtype=tape.float64, requires_grad=True)
    make, change = VIEWS[view], _ops(w)[op]
    weights = tape.tensor([[1., 2., 3.], [4., 5., 6.]], dtype=tape.float64)
    res = {}
    try:
        if kind == "leaf":
            b = a
            v = make(b)
            change(v)
        elif kind == "non-leaf":
            b = a * 1
            v = make(b)
            change(v)
        elif kind == "no_grad":
            b = a * 1
            with tape.no_grad():
                v = make(b)
                change(v)
        else:
            b = tape.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=tape.float64)
            v = make(b)
            change(v)
    except RuntimeError as e:
        return {"error": str(e)}
    res["b"] = _rounded(b.tolist())
    res["b.grad_fn"] = None if b.grad_fn is None else type(b.grad_fn).__name__
    res["b.next"] = _names(b.grad_fn)
    if kind != "no_grad":
        res["v.grad_fn"] = None if v.grad_fn is None else type(v.grad_fn).__name__
        res["v.next"] = _names(v.grad_fn)
    if b.requires_grad:
        loss = (b * weights).sum() + ((v * v).sum() if kind != "no_grad" and v.requires_grad else 0)
        inputs = [t for t in (a, w) if t.requires_grad]
        grads = tape.autograd.grad(loss, inputs, create_graph=True, allow_unused=True)
        res["grads"] = [None if g is None else _rounded(g.tolist()) for g in grads]
        squares = [(g * g).sum() for g in grads if g is not None and g.requires_grad]
        if squares:
            second = tape.autograd.grad(sum(squares), inputs, allow_unused=True)
            res["grads2"] = [None if g is None else _rounded(g.tolist()) for g in second]
        else:
            res["grads2"] = None
    return res


@pytest.mark.parametrize("key", sorted(TABLE))
def test_in_place_op_on_a_view_matches_pytorch(key):
    assert _case(*key.split("|")) == TABLE[key]
