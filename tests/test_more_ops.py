"""The ops that user scripts reach for beyond API.md's list, checked against
PyTorch's figures for the same calls: the values of the ops without
gradients, and the gradients at ties, zeros and other edges. Their gradients
elsewhere go through the table of tests/test_ops.py; their errors are in
tests/test_errors.py."""
import contextlib
import math
import warnings

import numpy as np
import pytest

import tape
from tape._engine import force_retaped

NAN = float("nan")


# -- indices and sorting ---------------------------------------------------------------

def test_argmax_and_argmin_take_the_first_of_a_tie_and_the_first_nan():
    x = tape.tensor([[1.0, 3.0, 3.0, NAN], [2.0, -1.0, 2.0, 0.0]], requires_grad=True)
    y = tape.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, -1.0, 2.0, 0.0]])

    assert [x.argmax().item(), x.argmin().item(), y.argmax().item(), y.argmin().item()] == [3, 3, 1, 5]
    assert x.argmax(1).tolist() == [3, 0] and tape.argmin(x, 1).tolist() == [3, 1]
    assert y.argmax(0).tolist() == [1, 0, 0, 0] and y.argmin(1, keepdim=True).tolist() == [[3], [1]]
    assert x.argmax(keepdim=True).shape == (1, 1)
    assert x.argmax().dtype == tape.int64 and not x.argmax(1).requires_grad


def test_argmax_of_a_0d_tensor_and_of_integers():
    assert tape.tensor(5.0).argmax().item() == 0 and tape.tensor(5.0).argmin(0, keepdim=True).shape == ()
    assert tape.tensor([3, 7, 7]).argmax().item() == 1


def test_sort_is_stable_with_nan_largest_and_returns_a_named_tuple():
    z = tape.tensor([3.0, 1.0, 3.0, 2.0, 1.0, NAN, 3.0])

    up, down = tape.sort(z), z.sort(descending=True)

    assert up.indices.tolist() == [1, 4, 3, 0, 2, 6, 5]
    assert down.indices.tolist() == [5, 0, 2, 6, 3, 1, 4]
    assert np.isnan(down.values[0].item()) and down.values[1:].tolist() == [3.0, 3.0, 3.0, 2.0, 1.0, 1.0]
    assert type(up).__name__ == "sort" and up._fields == ("values", "indices")
    assert tape.argsort(z, descending=True).tolist() == down.indices.tolist()
    assert z.argsort(stable=True).tolist() == up.indices.tolist()


def test_sort_of_integers_bools_and_a_0d_tensor():
    assert tape.sort(tape.tensor([3, 1, 2])).values.tolist() == [1, 2, 3]
    assert tape.sort(tape.tensor([True, False, True])).indices.tolist() == [1, 0, 2]
    s = tape.sort(tape.tensor(2.0, requires_grad=True))
    assert s.values.item() == 2.0 and s.indices.item() == 0 and s.values.grad_fn.name() == "SortBackward0"
    assert tape.argsort(tape.tensor([True, False])).tolist() == [1, 0]


@pytest.mark.parametrize("retaped", [False, True])
def test_sort_gradient_goes_back_to_the_sorted_positions(retaped):
    # PyTorch's figures: a tie sends each gradient to its own position
    w = tape.tensor([3.0, 1.0, 3.0, 2.0], requires_grad=True)
    values, indices = tape.sort(w)
    with force_retaped() if retaped else contextlib.nullcontext():
        (values * tape.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert w.grad.tolist() == [3.0, 1.0, 4.0, 2.0] and indices.tolist() == [1, 3, 0, 2]
    assert type(values.grad_fn).__name__ == "SortBackward0"
    assert [type(f).__name__ for f, _ in values.grad_fn.next_functions] == ["AccumulateGrad"]


def test_topk_takes_the_largest_or_smallest_in_order():
    z = tape.tensor([1.0, 4.0, 2.0, 3.0, 0.5], requires_grad=True)

    top, low = tape.topk(z, 3), z.topk(2, largest=False)

    assert top.values.tolist() == [4.0, 3.0, 2.0] and top.indices.tolist() == [1, 3, 2]
    assert low.values.tolist() == [0.5, 1.0] and low.indices.tolist() == [4, 0]
    assert type(top).__name__ == "topk" and top.values.grad_fn.name() == "TopkBackward0"
    assert tape.topk(z, 0).values.shape == (0,)
    nan_first = tape.topk(tape.tensor([1.0, NAN, 3.0]), 2)
    assert np.isnan(nan_first.values[0].item()) and nan_first.indices.tolist() == [1, 2]
    top.values.sum().backward()
    assert z.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]


def test_topk_of_a_0d_tensor_is_the_element_for_k_0_and_1():
    x = tape.tensor(2.0, requires_grad=True)
    for k in (0, 1):
        values, indices = tape.topk(x, k)
        assert (values.item(), indices.item(), values.grad_fn.name()) == (2.0, 0, "TopkBackward0")


def test_msort_sorts_along_the_first_dim():
    x = tape.tensor([[2.0, 0.0], [1.0, 5.0]], requires_grad=True)
    out = tape.msort(x)
    assert out.tolist() == [[1.0, 0.0], [2.0, 5.0]] and out.grad_fn.name() == "SortBackward0"


# -- tests and masks -------------------------------------------------------------------

def test_isnan_isinf_and_isfinite():
    x = tape.tensor([1.0, NAN, np.inf, -np.inf, 0.0])
    assert tape.isnan(x).tolist() == [False, True, False, False, False]
    assert x.isinf().tolist() == [False, False, True, True, False]
    assert tape.isfinite(x).tolist() == [True, False, False, False, True]
    assert tape.isfinite(tape.tensor([1, 2])).tolist() == [True, True] and tape.isnan(x).dtype == tape.bool


def test_isclose_allclose_and_equal_as_pytorchs():
    a = tape.tensor([1.0, NAN, 1e-9, 2.0])
    b = tape.tensor([1.0 + 1e-9, NAN, 0.0, 2.1])
    assert tape.isclose(a, b).tolist() == [True, False, True, False]
    assert a.isclose(b, equal_nan=True).tolist() == [True, True, True, False]
    assert tape.isclose(a, b, rtol=0.1, atol=0).tolist() == [True, False, False, True]
    assert tape.isclose(tape.tensor([np.inf, -np.inf]), tape.tensor([np.inf, np.inf])).tolist() == [True, False]
    assert tape.isclose(tape.tensor([True, False]), tape.tensor([True, True])).tolist() == [True, False]
    assert tape.isclose(tape.tensor([100000]), tape.tensor([100001])).tolist() == [True]
    assert tape.allclose(a, b) is False and a.allclose(a, equal_nan=True) is True
    assert tape.allclose(tape.ones(2, 1), tape.ones(3)) is True
    assert tape.equal(tape.ones(2), tape.ones(2, dtype=tape.int64)) is True
    assert (tape.equal(a, a), tape.equal(tape.ones(1, 2), tape.ones(2))) == (False, False)


def test_nonzero_and_count_nonzero():
    m = tape.tensor([[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]])
    assert tape.nonzero(m).tolist() == [[0, 1], [0, 2], [1, 0]] and m.nonzero().dtype == tape.int64
    assert [i.tolist() for i in m.nonzero(as_tuple=True)] == [[0, 0, 1], [1, 2, 0]]
    assert tape.nonzero(tape.tensor(3.0)).shape == (1, 0) and tape.nonzero(tape.tensor(0.0)).shape == (0, 0)
    assert [i.tolist() for i in tape.nonzero(tape.tensor(3.0), as_tuple=True)] == [[0]]
    assert tape.ones(2, 0).nonzero().shape == (0, 2)
    assert tape.count_nonzero(m).item() == 3 and tape.count_nonzero(m, dim=1).tolist() == [2, 1]
    assert m.count_nonzero((0, 1)).item() == 3 and tape.count_nonzero(tape.tensor([NAN, 0.0])).item() == 1


@pytest.mark.parametrize("retaped", [False, True])
def test_masked_fill_gives_a_tensor_value_the_sum_over_the_filled_elements(retaped):
    # PyTorch's figures for the same script
    x = tape.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    v = tape.tensor(2.0, requires_grad=True)
    y = x.masked_fill(tape.tensor([True, False, True]), v)
    with force_retaped() if retaped else contextlib.nullcontext():
        (y * tape.arange(6.0).reshape(2, 3)).sum().backward()
    assert y.tolist() == [[2.0, 2.0, 2.0], [2.0, 5.0, 2.0]] and type(y.grad_fn).__name__ == "MaskedFillBackward1"
    assert x.grad.tolist() == [[0.0, 1.0, 0.0], [0.0, 4.0, 0.0]] and v.grad.item() == 10.0
    number = x.masked_fill(tape.tensor([True, False, True]), 0.5)
    assert type(number.grad_fn).__name__ == "MaskedFillBackward0" and len(number.grad_fn.next_functions) == 1


def test_masked_fill_broadcasts_and_casts_the_value_to_the_input_dtype():
    mask = tape.tensor([True, False, True])
    assert tape.ones(3).masked_fill(tape.ones(2, 3, dtype=tape.bool), 2.0).shape == (2, 3)
    assert tape.ones(3, dtype=tape.int64).masked_fill(mask, 2.7).tolist() == [2, 1, 2]
    assert tape.ones(3, dtype=tape.int64).masked_fill(mask, tape.tensor(2.7)).dtype == tape.int64


def test_masked_fill_in_place_bumps_the_version_and_records():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = tape.tensor(2.0, requires_grad=True)
    y = x * 1.0
    y.masked_fill_(tape.tensor([True, False, True]), 5.0)
    z = tape.ones(3)
    z.masked_fill_(tape.tensor([True, False, True]), v)
    assert y.tolist() == [5.0, 2.0, 5.0] and y._version == 1 and y.grad_fn.name() == "MaskedFillBackward0"
    assert z.grad_fn.name() == "MaskedFillBackward1" and z.grad_fn.next_functions[0] == (None, 0)
    (y.sum() + z.sum()).backward()
    assert x.grad.tolist() == [0.0, 1.0, 0.0] and v.grad.item() == 2.0


def test_masked_select_broadcasts_and_scatters_its_gradient_back():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    out = tape.masked_select(x, tape.tensor([[True, False], [True, True]]))
    (out * tape.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert out.tolist() == [1.0, 1.0, 2.0] and out.grad_fn.name() == "MaskedSelectBackward0"
    assert x.grad.tolist() == [3.0, 3.0]


# -- shapes ----------------------------------------------------------------------------

def test_shape_ops_carry_pytorchs_grad_fn_names():
    x = tape.arange(6.0).reshape(2, 3).requires_grad_()
    v = tape.arange(3.0).requires_grad_()
    outputs = {"RepeatBackward0": [x.repeat(2, 1), x.tile(2), tape.tile(x, ())],
               "RollBackward0": [tape.roll(x, 1), x.roll(1, 1)],
               "SliceBackward0": [x.narrow(1, 1, 2)], "SelectBackward0": [x.select(1, 2)],
               "PermuteBackward0": [tape.movedim(x, 0, 1), x.moveaxis(0, 1)],
               "AliasBackward0": [tape.movedim(tape.tensor(2.0, requires_grad=True), 0, 0)],
               "TransposeBackward0": [x.swapaxes(0, 1), tape.swapdims(x, 0, 1)],
               "CatBackward0": [tape.hstack([x, x]), tape.vstack([v, v]), tape.vstack([v])],
               "ViewBackward0": [x.ravel(), x.t().ravel(), tape.ravel(v)],
               "DiagEmbedBackward0": [tape.diag(v)], "DiagonalBackward0_copy": [x.diag(1)],
               "TraceBackward0": [tape.trace(x)], "CumprodBackward0": [x.cumprod(1)]}
    assert {name: [type(t.grad_fn).__name__ for t in ts] for name, ts in outputs.items()} == {
        name: [name] * len(ts) for name, ts in outputs.items()}
    assert tape.ravel(v) is not v


def test_shape_ops_values_as_pytorchs():
    x = tape.arange(6.0).reshape(2, 3)
    assert tape.roll(x, 1).tolist() == [[5.0, 0.0, 1.0], [2.0, 3.0, 4.0]]
    assert tape.roll(x, (1, -1), (0, 1)).tolist() == [[4.0, 5.0, 3.0], [1.0, 2.0, 0.0]]
    assert x.narrow(0, -1, 1).tolist() == [[3.0, 4.0, 5.0]] and x.narrow(0, tape.tensor(1), 1).shape == (1, 3)
    assert tape.movedim(tape.ones(2, 3, 4), (0, 1), (2, 0)).shape == (3, 4, 2)
    assert x.repeat(2, 1, 2).shape == (2, 2, 6) and tape.tile(x, (2, 1, 1)).shape == (2, 2, 3)
    assert tape.hstack([tape.tensor(1.0), tape.tensor(2.0)]).tolist() == [1.0, 2.0]
    assert tape.vstack([tape.tensor(1.0), tape.tensor(2.0)]).tolist() == [[1.0], [2.0]]
    assert tape.vstack([x, tape.ones(3)]).shape == (3, 3)
    assert tape.diag(tape.arange(3.0), 1).tolist() == [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0],
                                                        [0.0, 0.0, 0.0, 2.0], [0.0, 0.0, 0.0, 0.0]]
    assert x.diag(1).tolist() == [1.0, 5.0] and x.diag(-1).tolist() == [3.0] and x.diag(5).shape == (0,)
    assert tape.diag(tape.ones(0)).shape == (0, 0)
    assert tape.trace(x).item() == 4.0 and tape.trace(tape.ones(2, 3, dtype=tape.int64)).dtype == tape.int64
    assert tape.cumprod(tape.tensor([1, 2, 3]), 0).dtype == tape.int64
    assert tape.cumprod(tape.tensor([1.0, 2.0], dtype=tape.float32), 0, dtype=tape.float64).dtype == tape.float64


def test_repeat_and_roll_gradients():
    x = tape.tensor([[1.0, 2.0]], requires_grad=True)
    (x.repeat(3, 2) * tape.arange(12.0).reshape(3, 4)).sum().backward()
    assert x.grad.tolist() == [[0.0 + 2 + 4 + 6 + 8 + 10, 1.0 + 3 + 5 + 7 + 9 + 11]]
    y = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (tape.roll(y, 1) * tape.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert y.grad.tolist() == [10.0, 100.0, 1.0]


CUMPROD_AT_ZEROS = [
    # PyTorch's figures: the first derivative with weights 1..n, then the
    # second derivative of the sum of that gradient
    ([2.0, 0.0, 3.0, 0.0, 4.0], [1.0, 22.0, 0.0, 0.0, 0.0], [11.0, 161.0, 6.0, 144.0, 0.0]),
    ([0.0, 0.0, 3.0], [1.0, 0.0, 0.0], [11.0, 11.0, 0.0]),
    ([2.0, 0.5, 3.0, -1.0, 4.0], [-29.5, -122.0, -21.0, 72.0, -15.0], None),
]


@pytest.mark.parametrize("retaped", [False, True])
@pytest.mark.parametrize("values, grad, second", CUMPROD_AT_ZEROS)
def test_cumprod_gradient_is_exact_at_zeros_as_pytorchs(values, grad, second, retaped):
    c = tape.tensor(values, requires_grad=True)
    w = tape.arange(1.0, len(values) + 1)
    with force_retaped() if retaped else contextlib.nullcontext():
        (g,) = tape.autograd.grad(tape.cumprod(c, 0), c, w, create_graph=second is not None)
    np.testing.assert_allclose(g.detach().numpy(), grad, rtol=1e-14)
    if second is not None:
        (h,) = tape.autograd.grad(g.sum(), c)
        np.testing.assert_allclose(h.numpy(), second, rtol=1e-14)


# -- other names and small arithmetic --------------------------------------------------

def test_numpys_names_are_the_same_ops_and_nodes_as_pytorchs():
    x = tape.tensor([0.5, -0.3, 0.2], requires_grad=True)
    y = tape.tensor([1.5, 2.0, 0.7], requires_grad=True)
    outputs = [tape.absolute(x), x.negative(), tape.arccos(x), x.arcsin(), tape.arctan(x), x.arctan2(y),
               tape.subtract(x, y, alpha=2), x.multiply(y), tape.divide(x, y), tape.clip(x, 0, 1)]
    assert [type(t.grad_fn).__name__ for t in outputs] == [
        "AbsBackward0", "NegBackward0", "AcosBackward0", "AsinBackward0", "AtanBackward0", "Atan2Backward0",
        "SubBackward0", "MulBackward0", "DivBackward0", "ClampBackward1"]
    a, b = x.detach().numpy(), y.detach().numpy()
    np.testing.assert_allclose([t.detach().numpy() for t in outputs], [
        np.abs(a), -a, np.arccos(a), np.arcsin(a), np.arctan(a), np.arctan2(a, b), a - 2 * b, a * b, a / b,
        np.clip(a, 0, 1)], rtol=1e-15)
    z = tape.tensor([-1.0, 0.25])
    z.absolute_().arccos_()
    assert z.tolist() == np.arccos([1.0, 0.25]).tolist()


@pytest.mark.parametrize("retaped", [False, True])
def test_xlogy_is_zero_at_zero_with_pytorchs_gradients(retaped):
    # PyTorch's figures for the same script
    x = tape.tensor([0.0, 0.0, 2.0, -1.0, 1.0], requires_grad=True)
    y = tape.tensor([0.0, NAN, 3.0, 2.0, 0.0], requires_grad=True)
    out = tape.xlogy(x, y)
    with force_retaped() if retaped else contextlib.nullcontext():
        out.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), [0.0, NAN, 2 * np.log(3.0), -np.log(2.0), -np.inf])
    np.testing.assert_allclose(x.grad.numpy(), [0.0, NAN, np.log(3.0), np.log(2.0), -np.inf])
    np.testing.assert_allclose(y.grad.numpy(), [NAN, NAN, 2 / 3, -0.5, np.inf])
    assert [tape.xlogy(x, 2.0).grad_fn.name(), tape.xlogy(2.0, y).grad_fn.name()] == ["XlogyBackward2", "XlogyBackward1"]
    assert tape.xlogy(tape.tensor([1, 2]), tape.tensor([3, 4])).dtype == tape.float64


@pytest.mark.parametrize("retaped", [False, True])
def test_hypot_and_logaddexp_at_their_edges_as_pytorchs(retaped):
    h = tape.tensor([0.0], requires_grad=True)
    q = tape.tensor([-np.inf], requires_grad=True)
    with force_retaped() if retaped else contextlib.nullcontext():
        tape.hypot(h, tape.tensor([0.0])).sum().backward()
        tape.logaddexp(q, tape.tensor([-np.inf])).sum().backward()
    assert np.isnan(h.grad.item()) and np.isnan(q.grad.item())
    big = tape.logaddexp(tape.tensor([np.inf, -np.inf, 1000.0]), tape.tensor([np.inf, -np.inf, 1000.0]))
    assert big.tolist() == [np.inf, -np.inf, 1000.0 + np.log(2.0)]
    assert tape.logaddexp(tape.tensor(np.inf), tape.tensor(np.inf)).item() == np.inf


def test_lerp_gradients_of_a_number_weight_are_one_node():
    s = tape.tensor([0.0, 1.0, 2.0], requires_grad=True)
    e = tape.tensor([10.0, 10.0, 10.0], requires_grad=True)
    out = tape.lerp(s, e, 0.3)
    out.sum().backward()
    assert out.grad_fn.name() == "LerpBackward0" and len(out.grad_fn.next_functions) == 2
    np.testing.assert_allclose([s.grad.tolist(), e.grad.tolist()], [[0.7] * 3, [0.3] * 3], rtol=1e-15)


@pytest.mark.parametrize("retaped", [False, True])
def test_lerp_of_a_tensor_weight_records_pytorchs_values_and_gradients(retaped):
    s = tape.tensor([0.0, 1.0, 2.0], requires_grad=True)
    e = tape.tensor([10.0, 10.0, 10.0], requires_grad=True)
    w = tape.tensor([0.1, 0.5, 0.9], requires_grad=True)
    out = tape.lerp(s, e, w)
    with tape.no_grad():
        unrecorded = tape.lerp(s, e, w)
    assert out.tolist() == unrecorded.tolist() == [1.0, 5.5, 9.2]  # from the nearer end, as PyTorch
    with force_retaped() if retaped else contextlib.nullcontext():
        gs, ge, gw = tape.autograd.grad(out.sum(), (s, e, w), create_graph=True)
        second = tape.autograd.grad(gw.sum(), (s, e))
    np.testing.assert_allclose([gs.tolist(), ge.tolist(), gw.tolist()],
                               [[0.9, 0.5, 0.09999999999999998], [0.1, 0.5, 0.9], [10.0, 9.0, 8.0]], rtol=1e-15)
    assert [g.tolist() for g in second] == [[-1.0, -1.0, -1.0], [1.0, 1.0, 1.0]]


# -- products added to a tensor, addcmul and addcdiv (composites: tests/test_ops.py's table has their gradients)

@pytest.mark.parametrize("call, value", [
    (lambda i: tape.addmm(i, tape.tensor([[1., 2.], [3., 4.]]), tape.tensor([[1., 0.], [-1., 1.]]), beta=0),
     [[-1.0, 2.0], [-1.0, 4.0]]),
    (lambda i: tape.addmv(i[0], tape.tensor([[1., 2.], [3., 4.]]), tape.tensor([1., -1.]), beta=0), [-1.0, -1.0]),
    (lambda i: tape.baddbmm(i, tape.tensor([[[2.], [2.]], [[3.], [3.]]]), tape.tensor([[[1., 1.]], [[-1., -1.]]]), beta=0,
                             alpha=2),
     [[[4.0, 4.0], [4.0, 4.0]], [[-6.0, -6.0], [-6.0, -6.0]]]),
    (lambda i: tape.addbmm(i, tape.ones(2, 2, 3), tape.ones(2, 3, 2), beta=0), [[6.0, 6.0], [6.0, 6.0]]),
])
def test_beta_0_leaves_nan_and_inf_of_the_input_out_and_gives_it_a_zero_gradient(call, value):
    i = tape.tensor([[NAN, np.inf], [-np.inf, 1.0]], requires_grad=True)
    out = call(i)
    out.sum().backward()
    assert (out.tolist(), i.grad.tolist()) == (value, [[0.0, 0.0], [0.0, 0.0]])


def test_alpha_0_leaves_the_product_out_but_for_baddbmm_as_pytorch():
    m = tape.tensor([[NAN, 1.0]], requires_grad=True)
    out = tape.addmm(tape.tensor([[5.0]]), m, tape.tensor([[1.0], [2.0]]), alpha=0)
    out.sum().backward()
    assert (out.tolist(), m.grad.tolist()) == ([[5.0]], [[0.0, 0.0]])
    assert tape.addmv(tape.tensor([5.0]), tape.tensor([[NAN]]), tape.tensor([1.0]), alpha=0).tolist() == [5.0]
    assert tape.addbmm(tape.tensor([[5.0]]), tape.tensor([[[np.inf]]]), tape.ones(1, 1, 1), alpha=0).tolist() == [[5.0]]
    assert np.isnan(tape.baddbmm(tape.tensor([[[5.0]]]), tape.tensor([[[np.inf]]]), tape.ones(1, 1, 1), alpha=0).item())


def test_beta_0_gives_a_negative_zero_product_a_positive_sign_as_pytorchs_blas():
    minus_zero = tape.tensor([[-0.0]])
    assert np.signbit(tape.addmm(minus_zero, minus_zero, tape.tensor([[1.0]]), beta=0).item()) == False  # noqa: E712
    assert np.signbit(tape.addmm(minus_zero, minus_zero, tape.tensor([[1.0]])).item()) == True  # noqa: E712


def test_integral_products_take_beta_and_alpha_truncated_as_pytorch():
    a, eye = tape.tensor([[1, 2], [3, 4]]), tape.tensor([[1, 0], [0, 1]])
    out = tape.addmm(tape.tensor([1, 2]), a, eye, beta=2.9, alpha=-1.5)
    assert (out.tolist(), out.dtype) == ([[1, 2], [-1, 0]], tape.int64)
    assert tape.addmm(tape.tensor([1, 2]), a, eye, beta=0.5).tolist() == [[1, 2], [3, 4]]
    assert tape.addmv(tape.tensor([1, 2]), a, tape.tensor([1, 1]), alpha=2.5).tolist() == [7, 16]
    assert tape.baddbmm(tape.tensor([10]), tape.tensor([[[1, 2]]]), tape.tensor([[[3], [4]]]), beta=-0.5,
                        alpha=3.99).tolist() == [[[33]]]
    assert tape.addbmm(tape.tensor([10]), tape.tensor([[[1, 2]]]), tape.tensor([[[3], [4]]]), beta=1.5).tolist() == [[21]]


def test_addcmul_and_addcdiv_promote_and_scale_as_pytorch():
    ints = tape.addcmul(tape.tensor([1, 2]), tape.tensor([3, 4]), tape.tensor([5, 6]), value=-1.5)
    assert (ints.tolist(), ints.dtype) == ([-14, -22], tape.int64)
    mixed = tape.addcmul(tape.tensor([1, 2]), tape.tensor([0.5, 1.5], dtype=tape.float32), tape.tensor([2, 2]), value=1.5)
    assert (mixed.tolist(), mixed.dtype) == ([2.5, 6.5], tape.float32)
    assert np.isnan(tape.addcmul(tape.tensor([1.0]), tape.tensor([np.inf]), tape.tensor([1.0]), value=0).item())
    quotient = tape.addcdiv(tape.tensor([1, 2]), tape.tensor([1.0, 3.0]), tape.tensor([2, 0]), value=0.5)
    assert (quotient.tolist(), quotient.dtype) == ([1.25, np.inf], tape.float64)


def test_in_place_products_write_record_and_bump_the_version():
    x = tape.ones(2, 2, requires_grad=True)
    y = x * 1.0
    version = y._version
    a = tape.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    assert y.addmm_(a, tape.ones(2, 2), beta=0.5, alpha=2) is y
    assert (y.tolist(), y._version > version) == ([[6.5, 6.5], [14.5, 14.5]], True)
    y.sum().backward()
    assert (x.grad.tolist(), a.grad.tolist()) == ([[0.5, 0.5], [0.5, 0.5]], [[4.0, 4.0], [4.0, 4.0]])
    z = tape.ones(3)
    assert z.addcmul_(tape.tensor([1.0, 2.0, 3.0]), tape.tensor(2.0), value=0.5).tolist() == [2.0, 3.0, 4.0]
    assert z.addcdiv_(tape.tensor([2.0, 2.0, 2.0]), tape.tensor([4.0, 1.0, 2.0])).tolist() == [2.5, 5.0, 5.0]
    assert z.lerp_(tape.zeros(3), tape.tensor([0.2, 1.0, 0.6])).tolist() == [2.0, 0.0, 2.0]
    assert tape.addmv_(tape.ones(2), tape.ones(2, 3), tape.ones(3), beta=2).tolist() == [5.0, 5.0]


def test_type_as_casts_to_the_other_dtype():
    x = tape.tensor([1.5, 2.0], requires_grad=True)
    assert tape.ones(2).type_as(tape.ones(1, dtype=tape.int64)).tolist() == [1, 1]
    assert x.type_as(tape.ones(1, dtype=tape.float32)).grad_fn.name() == "ToCopyBackward0"
    assert x.type_as(x) is x


# -- random fills ----------------------------------------------------------------------

def test_uniform_and_normal_fills_draw_from_tapes_seeded_generator():
    tape.manual_seed(7)
    expected_uniform = -1.0 + 2.0 * tape.rand(4, 3).numpy()
    expected_normal = 0.5 + 0.01 * tape.randn(5).numpy()
    tape.manual_seed(7)
    w = tape.empty(4, 3).uniform_(-1, 1)
    b = tape.zeros(5).normal_(0.5, 0.01)
    assert w.numpy().tolist() == expected_uniform.tolist() and b.numpy().tolist() == expected_normal.tolist()
    assert tape.empty(2, dtype=tape.float32).uniform_().dtype == tape.float32


def test_random_fills_initialise_weights_in_place():
    w = tape.zeros(3, 2, requires_grad=True)
    with tape.no_grad():
        out = w.uniform_(-0.5, 0.5)
    assert out is w and w._version == 1 and w.requires_grad and w.grad_fn is None
    assert ((w.detach().numpy() >= -0.5) & (w.detach().numpy() < 0.5)).all()
    w.data.normal_()  # .data is a detached alias: allowed with grad on
    assert not w.data.requires_grad and w.detach().numpy().std() > 0
    assert (tape.empty(2).uniform_(1.0, 1.0)).tolist() == [1.0, 1.0]


def test_a_random_fill_of_a_recorded_tensor_is_recorded_with_no_gradient():
    x = tape.ones(3, requires_grad=True)
    y = x * 1.0
    y.uniform_()
    z = x * 1.0
    z.normal_(2.0, 0.5)
    assert (y.grad_fn.name(), z.grad_fn.name(), y._version) == ("UniformBackward0", "NormalBackward0", 1)
    (y.sum() + z.sum()).backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_cumprod_along_a_dim_of_one_passes_the_gradient_through_as_pytorch():
    # PyTorch returns g itself there: a constant g gives a gradient without grad_fn
    x = tape.tensor([[2.0], [3.0]], requires_grad=True)
    (g,) = tape.autograd.grad(tape.cumprod(x, 1).sum(), x, create_graph=True)
    assert g.tolist() == [[1.0], [1.0]] and not g.requires_grad


def test_diff_take_along_dim_and_friends_give_pytorchs_values_and_nodes():
    # PyTorch 2.13 on the same inputs
    x = tape.tensor([[0.0, 1.0, 4.0, 9.0], [16.0, 25.0, 36.0, 49.0], [64.0, 81.0, 100.0, 121.0]], requires_grad=True)
    assert tape.diff(x, n=2, dim=0).tolist() == [[32.0, 32.0, 32.0, 32.0]]
    assert tape.diff(x, n=7).shape == (3, 0)
    assert tape.diff(x, prepend=tape.zeros(3, 1)).tolist()[0] == [0.0, 1.0, 3.0, 5.0]
    assert type(tape.diff(x).grad_fn).__name__ == "SubBackward0"
    assert tape.diff(tape.tensor([True, False, False])).tolist() == [True, False]
    assert (tape.diff(tape.tensor([1, 4, 9])).tolist(), tape.diff(tape.tensor([1, 4, 9])).dtype) == ([3, 5], tape.int64)
    taken = tape.take_along_dim(x, tape.tensor([[0], [2], [1]]), dim=1)
    assert (taken.tolist(), type(taken.grad_fn).__name__) == ([[0.0], [36.0], [81.0]], "GatherBackward0")
    assert tape.take_along_dim(x, tape.tensor([0, 5, 11])).tolist() == [0.0, 25.0, 121.0]
    assert tape.take_along_dim(x[:1], tape.tensor([[0], [3]]), dim=1).tolist() == [[0.0], [9.0]]
    assert tape.fliplr(x).tolist()[0] == [9.0, 4.0, 1.0, 0.0] and x.flipud().tolist()[0] == [64.0, 81.0, 100.0, 121.0]
    power = tape.float_power(tape.tensor([2, 3]), 2)
    assert (power.tolist(), power.dtype) == ([4.0, 9.0], tape.float64)
    assert type(tape.float_power(x.float(), 2).grad_fn).__name__ == "PowBackward0"
    assert tape.positive(x) is x and x.sum_to_size(3, 4) is x
    assert x.sum_to_size(1, 4).tolist() == [[80.0, 107.0, 140.0, 179.0]]
    assert type(x.sum_to_size((4,)).grad_fn).__name__ == "ViewBackward0"
    assert x.unflatten(1, (2, -1)).shape == (3, 2, 2) and type(x.unflatten(1, (2, 2)).grad_fn).__name__ == "ViewBackward0"
    assert type(tape.fix(x * 0.3).grad_fn).__name__ == "TruncBackward0" and tape.ger(x[0], x[1]).shape == (4, 4)


@pytest.mark.parametrize("call, message", [
    (lambda x: tape.diff(x, n=-1), "order must be non-negative but got -1"),
    (lambda x: tape.diff(tape.tensor(1.0)), "diff expects input to be at least one-dimensional"),
    (lambda x: tape.diff(x, prepend=tape.zeros(2, 1)), "diff expects the shape of tensor to prepend or append to match "
     "that of input except along the differencing dimension; input.size(0) = 3, but got tensor.size(0) = 2"),
    (lambda x: tape.diff(x, append=tape.zeros(1)), "diff expects prepend or append to be the same dimension as input"),
    (lambda x: tape.take_along_dim(x, tape.tensor([0]), dim=0), "torch.take_along_dim(): input and indices should "
     "have the same number of dimensions, but got 2 dimensions for input, and 1 dimensions for indices"),
    (lambda x: tape.take_along_dim(x, tape.tensor([[0]], dtype=tape.int32), dim=0),
     "torch.take_along_dim(): dtype of indices should be Long but got Int"),
    (lambda x: tape.take_along_dim(x, tape.tensor([[0, 1]]), dim=0),
     "The size of tensor a (4) must match the size of tensor b (2) at non-singleton dimension 1"),
    (lambda x: tape.fliplr(tape.ones(3)), "Input must be >= 2-d."),
    (lambda x: tape.flipud(tape.tensor(1.0)), "Input must be >= 1-d."),
    (lambda x: tape.positive(tape.tensor([True])), "The `+` operator, on a bool tensor is not supported."),
    (lambda x: x.unflatten(1, (3, 2)),
     "unflatten: Provided sizes [3, 2] don't multiply up to the size of dim 1 (4) in the input tensor"),
    (lambda x: x.unflatten(1, ()), "unflatten: sizes must be non-empty"),
    (lambda x: x.sum_to_size(2, 4), "size {[2, 4]} is not expandable to size {[3, 4]}."),
])
def test_diff_take_along_dim_and_friends_refuse_as_pytorch(call, message):
    with pytest.raises(RuntimeError) as info:
        call(tape.zeros(3, 4, requires_grad=True))
    assert str(info.value) == message


def test_scatter_scatter_add_and_index_add_give_pytorchs_values_gradients_and_nodes():
    # PyTorch 2.13 on the same inputs
    x = tape.zeros(3, 4, requires_grad=True)
    src = tape.tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]], requires_grad=True)
    index = tape.tensor([[0, 1, 2, 0], [2, 2, 0, 1]])
    added = tape.scatter_add(x, 0, index, src)
    assert added.tolist() == [[1.0, 0.0, 7.0, 4.0], [0.0, 2.0, 0.0, 8.0], [5.0, 6.0, 3.0, 0.0]]
    node = added.grad_fn
    assert (type(node).__name__, node._saved_dim, node._saved_index.tolist()) == (
        "ScatterAddBackward0", 0, [[0, 1, 2, 0], [2, 2, 0, 1]])
    gx, gsrc = tape.autograd.grad((added * added).sum(), (x, src))
    assert gx.tolist() == (2 * added).tolist()
    assert gsrc.tolist() == [[2.0, 4.0, 6.0, 8.0], [10.0, 12.0, 14.0, 16.0]]
    written = x.scatter(1, tape.tensor([[0, 3]]), src[:1, :2])
    assert written.tolist()[0] == [1.0, 0.0, 0.0, 2.0] and type(written.grad_fn).__name__ == "ScatterBackward0"
    filled = x.scatter(1, tape.tensor([[0], [2]]), 2.5)
    assert filled.tolist()[:2] == [[2.5, 0.0, 0.0, 0.0], [0.0, 0.0, 2.5, 0.0]]
    assert type(filled.grad_fn).__name__ == "ScatterBackward1"
    summed = x.index_add(1, tape.tensor([3, 0, 3]), tape.ones(3, 3), alpha=2)
    assert summed.tolist()[0] == [2.0, 0.0, 0.0, 4.0]
    assert (type(summed.grad_fn).__name__, summed.grad_fn._saved_alpha) == ("IndexAddBackward0", 2)
    assert (x * 1).scatter_add_(0, index, src).tolist() == added.tolist()


@pytest.mark.parametrize("call, error, message", [
    (lambda x, s: tape.scatter_add(x, 0, tape.tensor([[5]]), s), RuntimeError,
     "index 5 is out of bounds for dimension 0 with size 3"),
    (lambda x, s: tape.scatter_add(x, 0, tape.zeros(2, 5, dtype=tape.int64), s), RuntimeError,
     "Expected index [2, 5] to be no larger than self [3, 4] apart from dimension 0 and to be no larger size than "
     "src [3, 4]"),
    (lambda x, s: tape.scatter_add(x, 0, tape.zeros(2, dtype=tape.int64), s), RuntimeError,
     "Index tensor must have the same number of dimensions as self tensor"),
    (lambda x, s: tape.scatter(x, 0, tape.zeros(1, 1, dtype=tape.int64), s.float()), RuntimeError,
     "scatter(): Expected self.dtype to be equal to src.dtype"),
    (lambda x, s: tape.scatter(x, 0, tape.zeros(1, 1), s), RuntimeError,
     "scatter(): Expected dtype int32/int64 for index"),
    (lambda x, s: tape.index_add(x, 0, tape.tensor([0]), s[:2]), RuntimeError,
     "index_add_(): Number of indices (1) should be equal to source.size(dim): (2), for dim: 0"),
    (lambda x, s: tape.index_add(x, 0, tape.tensor([[0]]), s[:1]), IndexError,
     "index_add_(): Index is supposed to be a vector, but got dim: 2 with type: Long and size: [1, 1]"),
    (lambda x, s: tape.index_add(x, 0, tape.tensor([0]), s[:1, :2]), RuntimeError,
     "source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = "
     "[3, 4] source.shape = [1, 2]"),
    (lambda x, s: x.scatter_add_(0, tape.zeros(1, 1, dtype=tape.int64), s), RuntimeError,
     "a leaf Variable that requires grad is being used in an in-place operation."),
])
def test_scatter_and_index_add_refuse_as_pytorch(call, error, message):
    x = tape.zeros(3, 4, requires_grad=True)
    with pytest.raises(error) as info:
        call(x, tape.ones(3, 4))
    assert str(info.value) == message


def test_cross_moments_and_nan_reductions_give_pytorchs_values():
    # PyTorch 2.13 on the same inputs
    a = tape.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    b = tape.tensor([[0.0, 1.0, -1.0], [2.0, 0.0, 1.0]])
    assert tape.linalg.cross(a, b).tolist() == [[-5.0, 1.0, 1.0], [5.0, 8.0, -10.0]]
    assert tape.linalg.cross(a, b[:1]).tolist() == [[-5.0, 1.0, 1.0], [-11.0, 4.0, 4.0]]
    with pytest.warns(UserWarning, match=r"^Using torch\.cross without specifying the dim arg is deprecated\."):
        assert tape.cross(a, b).tolist() == [[-5.0, 1.0, 1.0], [5.0, 8.0, -10.0]]
    assert tape.var_mean(a, 1, keepdim=True)[0].tolist() == [[1.0], [1.0]]
    assert [t.tolist() for t in tape.std_mean(a, 0, correction=0)] == [[1.5, 1.5, 1.5], [2.5, 3.5, 4.5]]
    assert tape.var_mean(a, False)[0].item() == pytest.approx(35 / 12)
    lo, hi = tape.aminmax(a, dim=1)
    assert (lo.tolist(), hi.tolist(), type(tape.aminmax(a)).__name__) == ([1.0, 4.0], [3.0, 6.0], "aminmax")
    n = tape.tensor([1.0, NAN, 3.0], requires_grad=True)
    assert (tape.nansum(n).item(), tape.nanmean(n).item()) == (4.0, 2.0)
    assert tape.autograd.grad(tape.nanmean(n), n)[0].tolist() == [0.5, 0.0, 0.5]
    inf = float("inf")
    assert tape.nan_to_num(tape.tensor([NAN, inf, -inf, 1.0]), nan=0.5, posinf=9.0, neginf=-9.0).tolist() == [
        0.5, 9.0, -9.0, 1.0]
    assert tape.nan_to_num(tape.tensor([inf], dtype=tape.float32)).item() == 3.4028234663852886e+38
    assert tape.deg2rad(tape.tensor([180])).tolist() == [math.pi]


@pytest.mark.parametrize("call, message", [
    (lambda a: tape.linalg.cross(a[:, :2], a[:, :2]),
     "linalg.cross: inputs dimension -1 must have length 3. Got 2 and 2"),
    (lambda a: tape.linalg.cross(a[0], a), "linalg.cross: inputs must have the same number of dimensions."),
    (lambda a: tape.cross(a[:, :2], a[:, :2]), "no dimension of size 3 in input"),
    (lambda a: tape.aminmax(tape.zeros(0)),
     "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity."),
    (lambda a: tape.nanmean(tape.tensor([1, 2])),
     "nanmean(): expected input to have floating point or complex dtype but got Long"),
])
def test_cross_and_nan_reductions_refuse_as_pytorch(call, message):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError) as info:
            call(tape.ones(2, 3))
    assert str(info.value) == message


def test_distances_contractions_grids_and_searches_give_pytorchs_values():
    # PyTorch 2.13 on the same inputs
    x = tape.tensor([[0.0, 0.0], [1.0, 2.0], [3.0, 1.0]], requires_grad=True)
    y = tape.tensor([[0.0, 0.0], [2.0, 2.0]], requires_grad=True)
    d = tape.cdist(x, y)
    assert d[1, 1].item() == 1.0 and d[0, 1].item() == math.sqrt(8)
    gx, gy = tape.autograd.grad((d * d).sum(), (x, y))  # a zero distance sends no gradient
    assert (gx.tolist(), gy.tolist()) == ([[-4.0, -4.0], [0.0, 4.0], [8.0, 0.0]], [[-8.0, -6.0], [4.0, 6.0]])
    assert tape.tensordot(x, y, dims=([1], [1])).tolist() == [[0.0, 0.0], [0.0, 6.0], [0.0, 8.0]]
    rows, columns = tape.meshgrid(tape.tensor([1, 2]), tape.tensor([3, 4, 5]), indexing="xy")
    assert (rows.shape, columns.tolist()[0]) == ((3, 2), [3, 3])
    with pytest.warns(UserWarning, match="it will be required to pass the indexing argument"):
        tape.meshgrid(tape.tensor([1, 2]), tape.tensor([3]))
    assert tape.kron(tape.tensor([1, 2]), tape.tensor([[1, 10]])).tolist() == [[1, 10, 2, 20]]
    assert tape.linalg.matrix_power(tape.tensor([[1.0, 1.0], [0.0, 1.0]]), 5).tolist() == [[1.0, 5.0], [0.0, 1.0]]
    assert tape.linalg.matrix_power(tape.tensor([[2.0, 0.0], [0.0, 4.0]]), -1).tolist() == [[0.5, 0.0], [0.0, 0.25]]
    assert math.isnan(tape.logdet(tape.tensor([[0.0, 1.0], [1.0, 0.0]])).item())
    assert tape.logdet(tape.tensor([[0.0, 0.0], [1.0, 0.0]])).item() == -math.inf
    assert tape.trapezoid(tape.tensor([1.0, 2.0, 4.0]), tape.tensor([0.0, 1.0, 3.0])).item() == 7.5
    assert tape.logspace(0, 2, 3).tolist() == [1.0, 10.0, 100.0]
    sequence = tape.tensor([1.0, 2.0, 3.0])
    assert tape.searchsorted(sequence, tape.tensor([0.5, 2.0, 3.5])).tolist() == [0, 1, 3]
    assert tape.searchsorted(sequence, tape.tensor([2.0]), right=True).tolist() == [2]
    assert tape.searchsorted(tape.tensor([[1.0, 2.0, 3.0], [0.0, 5.0, 6.0]]), tape.tensor([[2.5], [1.0]])).tolist() == [
        [2], [1]]
    assert tape.searchsorted(sequence, tape.tensor([2.0]), out_int32=True).dtype == tape.int32
    assert tape.bucketize(tape.tensor([0.5, 2.0, 3.5]), sequence).tolist() == [0, 1, 3]


@pytest.mark.parametrize("call, message", [
    (lambda x: tape.cdist(x[0], x), "cdist only supports at least 2D tensors, X1 got: 1D"),
    (lambda x: tape.cdist(x, x[:, :1]), "X1 and X2 must have the same number of columns. X1: 2 X2: 1"),
    (lambda x: tape.tensordot(x, x, dims=([1], [0])),
     "contracted dimensions need to match, but first has size 2 in dim 1 and second has size 3 in dim 0"),
    (lambda x: tape.linalg.multi_dot([x]), "multi_dot(): expected at least 2 tensors but got 1"),
    (lambda x: tape.linalg.matrix_power(x, 2), "linalg.matrix_power: A must be batches of square matrices, but they "
     "are 3 by 2 matrices"),
    (lambda x: tape.searchsorted(x[0], x[0], side="middle"),
     "torch.searchsorted(): side can only be 'left' or 'right' but got middle"),
    (lambda x: tape.bucketize(x[0], x), "boundaries tensor must be 1 dimension, but got dim(2)"),
])
def test_distances_contractions_and_searches_refuse_as_pytorch(call, message):
    with pytest.raises(RuntimeError) as info:
        call(tape.ones(3, 2))
    assert str(info.value) == message


def test_argwhere_unique_histc_and_randperm_give_pytorchs_values():
    # PyTorch 2.13 on the same inputs
    x = tape.tensor([[3.0, 1.0, 3.0], [0.0, 1.0, 2.0]])
    assert tape.argwhere(x).tolist() == [[0, 0], [0, 1], [0, 2], [1, 1], [1, 2]]
    assert (tape.argwhere(tape.tensor(1.0)).shape, tape.argwhere(tape.tensor(0.0)).shape) == ((1, 0), (0, 0))
    values, inverse = tape.unique(x, return_inverse=True)
    assert (values.tolist(), inverse.tolist()) == ([0.0, 1.0, 2.0, 3.0], [[3, 1, 3], [0, 1, 2]])
    assert tape.unique(x, return_counts=True)[1].tolist() == [1, 2, 1, 2]
    columns, where, counts = tape.unique(x, dim=1, return_inverse=True, return_counts=True)
    assert (columns.tolist(), where.tolist(), counts.tolist()) == ([[1.0, 3.0, 3.0], [1.0, 0.0, 2.0]], [1, 0, 2],
                                                                  [1, 1, 1])
    assert tape.histc(x, bins=4).tolist() == [1.0, 2.0, 1.0, 2.0]
    assert tape.histc(x, bins=3, min=1, max=3).tolist() == [2.0, 1.0, 2.0]
    assert tape.histc(tape.tensor([1.0, 1.0]), bins=2).tolist() == [0.0, 2.0]
    with pytest.raises(NotImplementedError, match=r"^\"histogram_cpu\" not implemented for 'Long'$"):
        tape.histc(tape.tensor([1, 2]))
    tape.manual_seed(0)
    first = tape.randperm(6)
    tape.manual_seed(0)
    assert (first.dtype, sorted(first.tolist())) == (tape.int64, list(range(6)))
    assert tape.randperm(6).tolist() == first.tolist()  # the generator manual_seed seeds
    with pytest.raises(RuntimeError, match=r"^Trying to create tensor with negative dimension -1: \[-1\]$"):
        tape.randperm(-1)


def test_scatter_with_reduce_adds_or_multiplies_and_refuses_backward_as_pytorch():
    x = tape.ones(2, 3, requires_grad=True)
    src = tape.full((1, 3), 2.0, requires_grad=True)
    index = tape.tensor([[0, 1, 0]])
    with warnings.catch_warnings(record=True) as caught:  # once per process, as PyTorch's TORCH_WARN_ONCE
        warnings.simplefilter("always")
        added = tape.scatter(x, 0, index, src, reduce="add")
    deprecated = ("The reduce argument of torch.scatter with Tensor src is deprecated and will be removed in a future "
                  "PyTorch release. Use torch.scatter_reduce instead for more reduction options.")
    assert [str(w.message) for w in caught] in ([], [deprecated]) and deprecated in tape._tensor._WARNED
    assert added.tolist() == [[3.0, 1.0, 3.0], [1.0, 3.0, 1.0]] and type(added.grad_fn).__name__ == "NotImplemented"
    assert tape.scatter(x, 0, index, 3.0, reduce="multiply").tolist() == [[3.0, 1.0, 3.0], [1.0, 3.0, 1.0]]
    assert tape.ones(2, 3).scatter_(0, index, 3.0, reduce="add").tolist() == [[4.0, 1.0, 4.0], [1.0, 4.0, 1.0]]
    with pytest.raises(RuntimeError, match="^derivative for aten::scatter is not implemented$"):
        added.sum().backward()
    with pytest.raises(RuntimeError, match="^reduce argument must be either add or multiply.$"):
        tape.scatter(x, 0, index, src, reduce="mean")


def test_cummax_and_cummin_give_pytorchs_values_indices_and_gradients():
    # PyTorch 2.13: the last of equal extremes, nan from the first nan on, the gradient to the indices
    x = tape.tensor([1.0, 3.0, 3.0, 2.0, 5.0, NAN, 4.0], requires_grad=True)
    top = tape.cummax(x, 0)
    assert type(top).__name__ == "cummax" and top.indices.tolist() == [0, 1, 2, 2, 4, 5, 5]
    assert top.values.tolist()[:5] == [1.0, 3.0, 3.0, 3.0, 5.0] and math.isnan(top.values.tolist()[6])
    assert x.cummin(0).indices.tolist() == [0, 0, 0, 0, 0, 5, 5]
    assert tape.autograd.grad(top.values[:5].sum(), x)[0].tolist() == [1.0, 1.0, 2.0, 0.0, 1.0, 0.0, 0.0]
    assert tape.cummax(tape.tensor([[1.0, 3.0], [3.0, 1.0]]), 0).indices.tolist() == [[0, 0], [1, 0]]


def test_median_and_nanmedian_give_pytorchs_values_indices_and_gradients():
    # PyTorch 2.13: the lower middle; ties share the gradient of the median of all elements, and the middle of a
    # stable sort gives the index along a dim; a nan makes it nan (its first index), which nanmedian leaves out
    x = tape.tensor([1.0, 2.0, 2.0, 3.0], requires_grad=True)
    assert tape.autograd.grad(tape.median(x), x)[0].tolist() == [0.0, 0.5, 0.5, 0.0]
    assert tape.median(x, 0).indices.item() == 1 and tape.tensor([3.0, 1.0, 2.0, 2.0]).median(0).indices.item() == 2
    assert tape.tensor([2.0, 2.0, 2.0]).median(0).indices.item() == 1
    n = tape.tensor([NAN, 1.0, NAN], requires_grad=True)
    assert math.isnan(tape.median(n).item()) and tape.autograd.grad(tape.median(n), n)[0].tolist() == [0.5, 0.0, 0.5]
    assert (tape.median(n, 0).indices.item(), tape.nanmedian(n, 0).values.item(), tape.nanmedian(n).item()) == (
        0, 1.0, 1.0)
    m = tape.median(tape.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]]), 0, keepdim=True)
    assert (type(m).__name__, m.values.tolist(), m.indices.tolist()) == ("median", [[0.0, 1.0, 2.0]], [[1, 0, 0]])
    with pytest.raises(IndexError, match=r"^median\(\): Expected reduction dim 1 to have non-zero size\.$"):
        tape.median(tape.zeros(2, 0), 1)
    assert math.isnan(tape.median(tape.tensor([])).item())


def test_quantile_and_nanquantile_give_pytorchs_values_gradients_and_errors():
    # PyTorch 2.13: linear interpolation between the sorted neighbours, whose gradient splits by the weight
    x = tape.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    q = tape.quantile(x, 0.4)
    assert q.item() == pytest.approx(2.2) and tape.autograd.grad(q, x)[0].tolist() == pytest.approx([0, 0.8, 0.2, 0])
    assert tape.quantile(x, tape.tensor([0.25, 0.5])).tolist() == [1.75, 2.5]
    assert [tape.quantile(x, 0.4, interpolation=i).item() for i in ("lower", "higher", "nearest", "midpoint")] == [
        2.0, 3.0, 2.0, 2.5]
    assert math.isnan(tape.quantile(tape.tensor([1.0, NAN]), 0.5).item())
    assert tape.nanquantile(tape.tensor([1.0, NAN, 3.0]), 0.5).item() == 2.0
    for call, message in ((lambda: tape.quantile(x, 1.5), "quantile() q must be in the range [0, 1] but got 1.5"),
                          (lambda: tape.quantile(x, tape.tensor([0.5, 2.0])),
                           "quantile() q values must be in the range [0, 1]"),
                          (lambda: tape.quantile(tape.tensor([1, 2]), 0.5),
                           "quantile() input tensor must be either float or double dtype"),
                          (lambda: tape.quantile(tape.tensor([]), 0.5), "quantile() input tensor must be non-empty")):
        with pytest.raises(RuntimeError) as info:
            call()
        assert str(info.value) == message


def test_tensor_split_and_hsplit_vsplit_dsplit_as_pytorch():
    # PyTorch 2.13: the first parts one longer, indices sliced as Python slices, each part a SliceBackward0 view
    x = tape.arange(10.0).reshape(2, 5).requires_grad_()
    parts = tape.tensor_split(x, 3, dim=1)
    assert [p.shape for p in parts] == [(2, 2), (2, 2), (2, 1)] and type(parts[0].grad_fn).__name__ == "SliceBackward0"
    assert [p.shape for p in tape.tensor_split(x, [3, 1], dim=1)] == [(2, 3), (2, 0), (2, 4)]
    assert [p.shape for p in x.tensor_split(tape.tensor(2), dim=1)] == [(2, 3), (2, 2)]
    assert [p.shape for p in tape.tensor_split(x, indices=[-2], dim=1)] == [(2, 3), (2, 2)]
    assert [p.shape for p in tape.hsplit(x, 5)] == [(2, 1)] * 5 and [p.shape for p in tape.vsplit(x, [1])] == [
        (1, 5), (1, 5)]
    for call, message in (
            (lambda: tape.tensor_split(x, 0, dim=1), "number of sections must be larger than 0, got 0"),
            (lambda: tape.hsplit(x, 3), "torch.hsplit attempted to split along dimension 1, but the size of the "
                                        "dimension 5 is not divisible by the split_size 3!"),
            (lambda: tape.dsplit(x, 1), "torch.dsplit requires a tensor with at least 3 dimension, but got a tensor "
                                        "with 2 dimensions!"),
            (lambda: tape.tensor_split(tape.tensor(1.0), 1),
             "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")):
        with pytest.raises(RuntimeError) as info:
            call()
        assert str(info.value) == message
