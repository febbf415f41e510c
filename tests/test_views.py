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

import numpy as np
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


# -- layout: (name, make from x, shape, stride(), storage_offset(), is_contiguous(),
# _is_view() (and then _base is x), whether it shares x's storage), from torch 2.13
# for x = arange(24.).reshape(2, 3, 4) * 1
LAYOUTS = [
    ('view', lambda x: x.view(6, 4), (6, 4), (4, 1), 0, True, True, True),
    ('reshape', lambda x: x.reshape(-1), (24,), (1,), 0, True, True, True),
    ('t-reshape', lambda x: x.transpose(0, 1).reshape(-1), (24,), (1,), 0, True, False, False),
    ('transpose', lambda x: x.transpose(0, 2), (4, 3, 2), (1, 4, 12), 0, False, True, True),
    ('permute', lambda x: x.permute(2, 0, 1), (4, 2, 3), (1, 12, 4), 0, False, True, True),
    ('mT', lambda x: x.mT, (2, 4, 3), (12, 1, 4), 0, False, True, True),
    ('unsq0', lambda x: x.unsqueeze(0), (1, 2, 3, 4), (24, 12, 4, 1), 0, True, True, True),
    ('unsq1', lambda x: x.unsqueeze(1), (2, 1, 3, 4), (12, 12, 4, 1), 0, True, True, True),
    ('unsq-1', lambda x: x.unsqueeze(-1), (2, 3, 4, 1), (12, 4, 1, 1), 0, True, True, True),
    ('None', lambda x: x[None], (1, 2, 3, 4), (24, 12, 4, 1), 0, True, True, True),
    ('None mid', lambda x: x[:, None], (2, 1, 3, 4), (12, 12, 4, 1), 0, True, True, True),
    ('None2', lambda x: x[None, None, :, None], (1, 1, 2, 1, 3, 4), (24, 24, 12, 12, 4, 1), 0, True, True, True),
    ('squeeze', lambda x: x[:1].squeeze(), (3, 4), (4, 1), 0, True, True, True),
    ('squeeze0', lambda x: x[:1].squeeze(0), (3, 4), (4, 1), 0, True, True, True),
    ('expand', lambda x: x[:, :1].expand(2, 5, 4), (2, 5, 4), (12, 0, 1), 0, False, True, True),
    ('expand new', lambda x: x[0, 0].expand(2, 4), (2, 4), (0, 1), 0, False, True, True),
    ('narrow', lambda x: x.narrow(1, 1, 2), (2, 2, 4), (12, 4, 1), 4, False, True, True),
    ('select', lambda x: x.select(2, 1), (2, 3), (12, 4), 1, False, True, True),
    ('int', lambda x: x[1], (3, 4), (4, 1), 12, True, True, True),
    ('int2', lambda x: x[1, 2], (4,), (1,), 20, True, True, True),
    ('elem', lambda x: x[1, 2, 3], (), (), 23, True, True, True),
    ('slice', lambda x: x[:, ::2, 1:], (2, 2, 3), (12, 8, 1), 1, False, True, True),
    ('ell', lambda x: x[..., 1], (2, 3), (12, 4), 1, False, True, True),
    ('ell2', lambda x: x[...], (2, 3, 4), (12, 4, 1), 0, True, True, True),
    ('diag', lambda x: x.diagonal(0, 1, 2), (2, 3), (12, 5), 0, False, True, True),
    ('diag1', lambda x: x.diagonal(1, 1, 2), (2, 3), (12, 5), 1, False, True, True),
    ('diag-1', lambda x: x.diagonal(-1, 1, 2), (2, 2), (12, 5), 4, False, True, True),
    ('diag02', lambda x: x.diagonal(0, 0, 2), (3, 2), (4, 13), 0, False, True, True),
    ('unbind', lambda x: x.unbind(1)[1], (2, 4), (12, 1), 4, False, True, True),
    ('split', lambda x: x.split(2, 2)[1], (2, 3, 2), (12, 4, 1), 2, False, True, True),
    ('chunk', lambda x: x.chunk(2, 1)[1], (2, 1, 4), (12, 4, 1), 8, False, True, True),
    ('view of view', lambda x: x[1].view(12), (12,), (1,), 12, True, True, True),
    ('detach', lambda x: x.detach(), (2, 3, 4), (12, 4, 1), 0, True, False, True),
    ('data', lambda x: x.data, (2, 3, 4), (12, 4, 1), 0, True, False, True),
    ('detach slice', lambda x: x[1:].detach(), (1, 3, 4), (12, 4, 1), 12, True, False, True),
    ('data slice', lambda x: x[:, 1].data, (2, 4), (12, 1), 4, False, False, True),
    ('T2', lambda x: x[0].T, (4, 3), (1, 4), 0, False, True, True),
    ('t', lambda x: x[0].t(), (4, 3), (1, 4), 0, False, True, True),
    ('contig of t', lambda x: x.transpose(0, 1).contiguous(), (3, 2, 4), (8, 4, 1), 0, True, False, False),
    ('zeros31', lambda x: tape.zeros(3, 1), (3, 1), (1, 1), 0, True, False, False),
    ('0d', lambda x: tape.tensor(2.), (), (), 0, True, False, False),
    ('mul of t', lambda x: x.transpose(0, 2) * 2, (4, 3, 2), (1, 4, 12), 0, False, False, False),
    ('clone of t', lambda x: x.transpose(0, 2).clone(), (4, 3, 2), (1, 4, 12), 0, False, False, False),
    ('flatten', lambda x: x.flatten(), (24,), (1,), 0, True, True, True),
    ('flatten t', lambda x: x.mT.flatten(), (24,), (1,), 0, True, False, False),
    ('ravel', lambda x: x.ravel(), (24,), (1,), 0, True, True, True),
    ('movedim', lambda x: x.movedim(0, -1), (3, 4, 2), (4, 1, 12), 0, False, True, True),
    ('swapaxes', lambda x: x.swapaxes(0, 1), (3, 2, 4), (4, 12, 1), 0, False, True, True),
    ('view_as', lambda x: x.view_as(tape.zeros(4, 6)), (4, 6), (6, 1), 0, True, True, True),
    ('expand_as', lambda x: x[:1].expand_as(x), (2, 3, 4), (0, 4, 1), 0, False, True, True),
    ('reshape to its shape', lambda x: x.reshape(2, 3, 4), (2, 3, 4), (12, 4, 1), 0, True, True, True),
    ('unflatten', lambda x: x.reshape(2, 12).reshape(2, 3, 4), (2, 3, 4), (12, 4, 1), 0, True, True, True),
]


@pytest.mark.parametrize("name, make, shape, stride, offset, contiguous, is_view, shares",
                         LAYOUTS, ids=[row[0] for row in LAYOUTS])
def test_layout_of_views_is_pytorchs(name, make, shape, stride, offset, contiguous, is_view, shares):
    x = tape.arange(24.).reshape(2, 3, 4) * 1
    t = make(x)
    assert (t.shape, t.stride(), t.storage_offset(), t.is_contiguous(), t._is_view()) == \
        (shape, stride, offset, contiguous, is_view)
    assert (t._base is x) if is_view else t._base is None
    assert (t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()) == shares
    if shares:
        assert t.data_ptr() - x.data_ptr() == offset * t.element_size()
    assert (t.contiguous() is t) == contiguous


def test_contiguous_copies_a_strided_tensor_in_c_order():
    # torch 2.13: a CloneBackward0 node, C-order strides, gradient the identity's
    x = tape.arange(6., requires_grad=True)
    t = (x * 1).reshape(2, 3).t()
    c = t.contiguous()
    assert (c.stride(), c.is_contiguous(), type(c.grad_fn).__name__) == ((2, 1), True, "CloneBackward0")
    assert c.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    (c * tape.tensor([[1., 2.], [3., 4.], [5., 6.]])).sum().backward()
    assert x.grad.tolist() == [1.0, 3.0, 5.0, 2.0, 4.0, 6.0]


def test_views_share_the_version_counter_and_see_writes_to_the_base():
    b = tape.zeros(2, 3)
    views = [b.view(6), b.t(), b[1], b[0, 2], b.diagonal(), b.unsqueeze(0), b.detach(), b.narrow(1, 1, 2)]
    b.add_(1)
    b[0, 2] = 7.0
    assert [v._version for v in views] == [2] * len(views)
    assert views[3].item() == 7.0 and views[4].tolist() == [1.0, 1.0] and views[0].tolist()[2] == 7.0
    data = b.data
    data.mul_(2)  # .data shares the storage, not the version counter
    assert (b._version, data._version, b.tolist()) == (2, 1, [[2.0, 2.0, 14.0], [2.0, 2.0, 2.0]])


def test_a_write_through_any_view_reaches_the_base_and_every_other_view():
    b = tape.zeros(3, 4)
    row, column, element = b[1], b[:, 2], b[1, 2]
    column.add_(1)
    row.mul_(3)
    element.sub_(10)
    assert b.tolist() == [[0, 0, 1, 0], [0, 0, -7, 0], [0, 0, 1, 0]]
    assert (row.tolist(), column.tolist(), element.item()) == ([0, 0, -7, 0], [1, -7, 1], -7.0)


def test_compaction_keeps_live_views_and_their_rebased_graph():
    # values, grad_fn names, gradient and versions as torch 2.13 gives them
    a = tape.tensor([[1., 2., 3.], [4., 5., 6.]], dtype=tape.float64, requires_grad=True)
    b = a * 1
    v = b[:, 1:]
    w = b.t()
    v.mul_(a[:, :2])
    garbage = [(a * 2).sum() for _ in range(10)]
    del garbage
    rows = tape._tape.state.tape.n
    tape._tape.state.tape.compact()
    assert tape._tape.state.tape.n < rows
    w.sin_()
    tape._tape.state.tape.compact()
    u = w[2]
    u.add_(b[0, 0])
    tape._tape.state.tape.compact()
    assert b.tolist() == [[0.8414709848078965, 0.9092974268256817, 0.5620554866089706],
                          [-0.7568024953079282, 0.9129452507276277, -0.14656063928496532]]
    assert [type(t.grad_fn).__name__ for t in (b, v, w, u)] == ["CopySlices"] + ["AsStridedBackward0"] * 3
    (b * b).sum().backward()
    assert a.grad.reshape(-1).tolist() == pytest.approx(
        [-0.1553219156, 2.4812113708, 2.1586759108, 4.714924049, 2.7091663486, -0.2260719111], abs=1e-9)
    assert (v._version, w._version, u._version) == (3, 3, 3)


def test_live_views_written_one_after_another_each_read_their_base_s_latest_node():
    # each write leaves the other views stale; each takes its row when next
    # read, of the base's node then (values, names and versions from torch 2.13)
    x = tape.tensor([[1., 2.], [3., 4.], [5., 6.]], dtype=tape.float64, requires_grad=True)
    b = x * 1
    vs = [b[i] for i in range(3)]
    for k, v in enumerate(vs):
        v.mul_(k + 2)
    vs[0].add_(1)
    assert [type(v.grad_fn).__name__ for v in vs] == ["AsStridedBackward0"] * 3
    assert [[type(f).__name__ for f, _ in v.grad_fn.next_functions] for v in vs] == [["CopySlices"]] * 3
    assert [v._version for v in vs] == [4, 4, 4] and b.tolist() == [[3., 5.], [9., 12.], [20., 24.]]
    loss = b.sum() + sum((v * v).sum() for v in vs)
    g, = tape.autograd.grad(loss, x, create_graph=True)
    gg, = tape.autograd.grad((g * g).sum(), x)
    assert g.tolist() == [[14., 22.], [57., 75.], [164., 196.]]
    assert gg.tolist() == [[224., 352.], [2052., 2700.], [10496., 12544.]]


def test_the_issue_s_0d_view_changed_in_place_reaches_the_gradient():
    # torch 2.13: x.grad is cos(0.5)
    x = tape.tensor(0.5, dtype=tape.float64, requires_grad=True)
    y = x.clone()
    y.view([]).sin_()
    y.backward()
    assert x.grad.item() == pytest.approx(0.8775825618903728)


def test_a_hook_on_a_view_before_an_in_place_op_on_it_does_not_run():
    # torch 2.13: the view's old node is not on the path; a hook registered after is
    a = tape.ones(3, requires_grad=True)
    b = a * 1
    v = b[:2]
    before, after = [], []
    v.register_hook(lambda g: before.append(g.tolist()))
    v.mul_(2)
    v.register_hook(lambda g: after.append(g.tolist()))
    (b.sum() + v.sum()).backward()
    assert (before, after, a.grad.tolist()) == ([], [[1.0, 1.0]], [4.0, 4.0, 1.0])


def test_gradient_of_two_overlapping_views_changed_in_place():
    # torch 2.13: b [10, 13, 9], a.grad [20, 104, 384]
    a = tape.tensor([1., 2., 3.], dtype=tape.float64, requires_grad=True)
    b = a * 1
    v, w = b[1:], b[:2]
    v.mul_(a[1:])
    w.add_(b[2:])
    (b * b).sum().backward()
    assert (b.tolist(), a.grad.tolist()) == ([10.0, 13.0, 9.0], [20.0, 104.0, 384.0])


def test_an_expanded_tensor_is_written_where_its_region_does_not_overlap():
    # torch 2.13: e[0] = 5 writes b; e[0].mul_ on a graph is CopySlices of b
    b = tape.ones(3)
    e = b.expand(2, 3)
    e[0] = 5.0
    e[1, 1:] = tape.tensor([7., 8.])
    assert b.tolist() == [5.0, 7.0, 8.0]
    c = tape.ones(3, requires_grad=True) * 1
    c.expand(2, 3)[0].mul_(2)
    assert (c.tolist(), type(c.grad_fn).__name__) == ([2.0, 2.0, 2.0], "CopySlices")


_OVERLAP = ("^unsupported operation: more than one element of the written-to tensor refers to a single memory "
            "location. Please clone\\(\\) the tensor before performing the operation.$")


@pytest.mark.parametrize("write", [lambda e: e.mul_(2), lambda e: e.__setitem__(0, 5.0), lambda e: e[0].add_(1)])
@pytest.mark.parametrize("requires_grad", [False, True])
def test_a_write_into_an_overlapping_expanded_tensor_raises_pytorchs_error(write, requires_grad):
    b = tape.ones(1, 3, requires_grad=requires_grad) * 1
    e = b.expand(2, 2, 3)
    with pytest.raises(RuntimeError, match=_OVERLAP):
        write(e)
    assert b.tolist() == [[1.0, 1.0, 1.0]] and b._version == 0


_MULTIPLE_WHY = ("This view is the output of a function that returns multiple views. Such functions do not allow "
                 "the output views to be modified inplace. You should replace the inplace operation by an "
                 "out-of-place one.")
_MULTIPLE = f"is a view and is being modified inplace. {_MULTIPLE_WHY}"


@pytest.mark.parametrize("make, name", [(lambda b: b.unbind(0)[0], "Output 0 of Unbind"),
                                        (lambda b: b.split(1)[0], "Output 0 of Split"),
                                        (lambda b: b.chunk(3)[1], "Output 1 of Split"),
                                        (lambda b: b.split([1, 2])[1], "Output 1 of SplitWithSizes"),
                                        (lambda b: b.unbind(0)[0].view([]), "Output 0 of View"),
                                        (lambda b: b.unbind(0)[1][...], "Output 0 of Alias")])
def test_in_place_on_an_output_of_a_multi_view_function_raises_pytorchs_error(make, name):
    b = tape.ones(3, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match=f"^{name} {_MULTIPLE}$"):
        make(b).mul_(2)
    assert b.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("make", [lambda b: b.unbind(0)[0], lambda b: b.unbind(0)[0][1:],
                                  lambda b: b.split(1)[1].view(3)])
def test_recording_an_in_place_op_on_a_multi_view_output_of_a_constant_raises_pytorchs_error(make):
    # torch 2.13 names such views made without grad
    b = tape.ones(2, 3)
    view = make(b)
    with pytest.raises(RuntimeError, match="^A view was created in no_grad mode and is being modified inplace with "
                                           f"grad mode enabled. {_MULTIPLE_WHY}$"):
        view.mul_(tape.ones(view.shape, requires_grad=True))
    view.mul_(2)
    assert b.sum().item() == 6 + view.numel()


def test_in_place_on_an_unbind_output_without_grad_writes_the_base():
    b = tape.ones(3)
    b.unbind(0)[0].mul_(2)
    with tape.no_grad():
        c = tape.ones(3, requires_grad=True) * 1
        c.split(1)[0].mul_(2)
    assert (b.tolist(), c.tolist()) == ([2.0, 1.0, 1.0], [2.0, 1.0, 1.0])


_NO_GRAD_VIEW = ("^A view was created in no_grad mode and is being modified inplace with grad mode enabled. "
                 "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your "
                 "code by moving both the view and the inplace either both inside the no_grad block \\(if you "
                 "don't want the inplace to be tracked\\) or both outside \\(if you want the inplace to be "
                 "tracked\\).$")


@pytest.mark.parametrize("make_base, change", [
    (lambda: tape.ones(3, requires_grad=True) * 1, lambda v: v.mul_(2)),
    (lambda: tape.ones(3, requires_grad=True), lambda v: v.mul_(2)),
    (lambda: tape.ones(3), lambda v: v.mul_(tape.ones(2, requires_grad=True)))])
def test_in_place_with_grad_on_a_view_made_in_no_grad_raises_pytorchs_error(make_base, change):
    b = make_base()
    with tape.no_grad():
        v = b[:2]
    with pytest.raises(RuntimeError, match=_NO_GRAD_VIEW):
        change(v)
    assert b.tolist() == [1.0, 1.0, 1.0]


def test_in_place_on_a_view_made_before_its_base_required_grad_raises_pytorchs_error():
    a = tape.ones(3)
    b = a[:]
    a.requires_grad = True
    with pytest.raises(RuntimeError, match="^a view of a leaf Variable that requires grad is being used in an "
                                           "in-place operation.$"):
        b.add_(5)


class _ViewOfInput(tape.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view(-1)

    @staticmethod
    def backward(ctx, g):
        return g


_CUSTOM = ("is a view and is being modified inplace. This view was created inside a custom Function \\(or because "
           "an input was returned as-is\\) and the autograd logic to handle view\\+inplace would override the "
           "custom backward associated with the custom Function, leading to incorrect gradients. This behavior "
           "is forbidden. You can fix this by cloning the output of the custom Function.$")


def test_in_place_on_a_view_a_custom_function_returned_raises_pytorchs_error():
    b = tape.ones(3, requires_grad=True) * 1
    y = _ViewOfInput.apply(b)
    assert y._is_view() and y._base is b
    with pytest.raises(RuntimeError, match=f"^Output 0 of _ViewOfInput {_CUSTOM}"):
        y.mul_(2)
    with pytest.raises(RuntimeError, match=f"^Output 0 of View {_CUSTOM}"):
        y.view(3).mul_(2)


def test_detach_in_place_of_a_view_raises_pytorchs_error():
    with pytest.raises(RuntimeError, match="^Can't detach views in-place. Use detach\\(\\) instead. If you are "
                                           "using DistributedDataParallel"):
        tape.ones(3)[:2].detach_()


def test_a_write_through_detach_regenerates_the_views_of_the_base():
    # torch 2.13: b keeps CloneBackward0, its view's grad_fn becomes AsStridedBackward0 of it
    b = tape.ones(3, requires_grad=True).clone()
    v = b[:2]
    b.detach().mul_(2)
    assert (type(b.grad_fn).__name__, type(v.grad_fn).__name__, b._version) == ("CloneBackward0",
                                                                              "AsStridedBackward0", 1)
    assert [type(f).__name__ for f, _ in v.grad_fn.next_functions] == ["CloneBackward0"]


_NEW_RESULTS = [  # (product, m's gradient of 2 * product(m, v), from torch 2.13; None: refused)
    (lambda m, v: v @ m, [[2.0, 2.0, 2.0], [4.0, 4.0, 4.0], [6.0, 6.0, 6.0]]),
    (lambda m, v: m.expand(2, 3, 3) @ m, [[48.0, 84.0, 120.0], [60.0, 96.0, 132.0], [72.0, 108.0, 144.0]]),
    (lambda m, v: m.expand(2, 3, 3) @ v, [[4.0, 8.0, 12.0], [4.0, 8.0, 12.0], [4.0, 8.0, 12.0]]),
    (lambda m, v: tape.linalg.solve(m + tape.eye(3), v), None),  # its backward reads the changed result
]


@pytest.mark.parametrize("product, gradient", _NEW_RESULTS)
def test_results_that_pytorch_makes_new_are_no_views_and_can_be_changed_in_place(product, gradient):
    m = tape.arange(9., dtype=tape.float64).reshape(3, 3).requires_grad_()
    v = tape.tensor([1., 2., 3.], dtype=tape.float64, requires_grad=True)
    out = product(m, v)
    assert not out._is_view() and out._base is None
    out.mul_(2)
    if gradient is None:
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()
    else:
        out.sum().backward()
        assert m.grad.tolist() == gradient


@pytest.mark.parametrize("fill, value", [(lambda e: e.zero_(), 0.0), (lambda e: e.fill_(3.0), 3.0)])
@pytest.mark.parametrize("requires_grad", [False, True])
def test_a_fill_of_an_overlapping_expanded_tensor_writes_its_base(fill, value, requires_grad):
    # torch 2.13: allowed (one value everywhere); with grad, e's grad_fn is AsStridedBackward0
    b = tape.ones(1, 3, requires_grad=requires_grad) * 1
    e = b.expand(2, 2, 3)
    fill(e)
    assert (b.tolist(), e.tolist(), b._version) == ([[value] * 3], [[[value] * 3] * 2] * 2, 1)
    assert (type(e.grad_fn).__name__, type(b.grad_fn).__name__) == (
        ("AsStridedBackward0", "CopySlices") if requires_grad else ("NoneType", "NoneType"))


@pytest.mark.parametrize("view", [lambda b: b.t(), lambda b: b[:, ::2], lambda b: b.permute(1, 0)])
def test_grad_with_respect_to_a_view_runs_no_kernel_of_the_view_itself(view):
    # autograd.grad captures the view; its own node passes nothing on (its
    # input leads to no other input), so its kernel must not run: it wrote
    # into the gradient of an input that has none (heap corruption)
    base = tape.tensor(np.arange(12.).reshape(4, 3), requires_grad=True)
    x = view(base)
    for _ in range(50):
        (g,) = tape.autograd.grad((x * x).sum(), [x])
        assert np.array_equal(g.numpy(), 2 * x.detach().numpy())
    assert base.grad is None


# Strided values are copied for native code only when a sweep or a replay
# reads them (Note [Strided values] in tape/_tape.py): these known values,
# from torch 2.13, cover a write into the base before and after a consumer
# saved the view, a strided result that saves itself, float32, a view that
# outlives the backward, and a compiled replay reading a slice.
def _strided_base():
    x = tape.tensor(np.arange(1.0, 7.0), requires_grad=True)
    return x, x * 1


def test_a_write_into_the_base_before_the_consumer_is_what_the_consumer_reads():
    x, b = _strided_base()
    a = b[::2]
    b.mul_(2)
    (a ** 2).sum().backward()
    assert x.grad.tolist() == [8.0, 0.0, 24.0, 0.0, 40.0, 0.0]


def test_a_write_into_the_base_after_a_consumer_saved_the_view_raises():
    x, b = _strided_base()
    y = (b[::2] ** 2).sum()
    b.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_strided_values_reach_the_sweep_as_their_own_elements():
    m = tape.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    (m.t().exp() * tape.tensor(np.arange(6.0).reshape(3, 2))).sum().backward()
    np.testing.assert_allclose(m.grad.numpy(), [[0.0, 5.43656366, 29.5562244], [20.08553692, 163.79445, 742.0657955]])
    x32 = tape.tensor(np.arange(1.0, 7.0, dtype=np.float32), requires_grad=True)
    v = x32[1::2]
    (v * v).sum().backward()
    assert x32.grad.dtype == tape.float32 and x32.grad.tolist() == [0.0, 4.0, 0.0, 8.0, 0.0, 12.0]
    x = tape.tensor(np.arange(1.0, 9.0), requires_grad=True)
    kept = x[1::3]
    (kept.sin() * kept).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 0.07700375, 0.0, 0.0, 0.45938665, 0.0, 0.0, -0.17464202],
                               atol=1e-8)
    (kept * kept).sum().backward()  # the view, copied by the first sweep, again
    np.testing.assert_allclose(x.grad.numpy()[[1, 4, 7]], [0.07700375 + 4, 0.45938665 + 10, -0.17464202 + 16],
                               atol=1e-8)


def test_a_compiled_replay_reads_a_fresh_slice_of_new_values():
    f = tape.compile(lambda x: (x[1::2] - x[::2] ** 2).sum())
    for start in (1.0, 2.0, 3.0):
        x = tape.tensor(np.arange(start, start + 6), requires_grad=True)
        f(x).backward()
        evens = np.arange(start, start + 6)[::2]
        expected = np.zeros(6)
        expected[::2] = -2 * evens
        expected[1::2] = 1
        np.testing.assert_array_equal(x.grad.numpy(), expected)
