"""Values, gradients and second derivatives at the edges (0, ties, inf, nan,
singular matrices), each class of issue 18 against PyTorch 2.13's figures
for the same script, through the native sweep and the re-taped one."""
import contextlib
import math
import warnings

import numpy as np
import pytest

import tape
from tape._engine import force_retaped

nan, inf = math.nan, math.inf
SWEEPS = pytest.mark.parametrize("retaped", [False, True], ids=["native", "retaped"])


def _sweep(retaped):
    return force_retaped() if retaped else contextlib.nullcontext()


def _grads_for(fn, inputs, g, retaped):
    """The gradients of fn(*inputs) for a gradient g (a number, everywhere)."""
    xs = [tape.tensor(v, requires_grad=True) for v in inputs]
    out = fn(*xs)
    with _sweep(retaped):
        return [r.tolist() for r in tape.autograd.grad(out, xs, tape.full_like(out, g))]


# Note [Selecting partials]: an upstream nan where the op masks its gradient
# out gives 0, as PyTorch's where(mask, grad, 0)
MASKED = [
    ("clamp", lambda x: x.clamp(0.0, 1.0), ([-1.0, 0.5, 2.0],), [[0.0, nan, 0.0]]),
    ("clamp_tensor_bounds", lambda x, lo, hi: x.clamp(lo, hi), ([-1.0, 0.5, 2.0], [0.0] * 3, [1.0] * 3),
     [[0.0, nan, 0.0], [nan, 0.0, 0.0], [0.0, 0.0, nan]]),
    ("clamp_min_tensor", lambda x, lo: x.clamp_min(lo), ([-1.0, 0.5, 2.0], [0.0] * 3),
     [[0.0, nan, nan], [nan, 0.0, 0.0]]),
    ("clamp_max_0d", lambda x: tape.clamp_max(x, 0.0), (1.0,), [0.0]),
    ("floor", lambda x: x.floor(), ([0.5],), [[0.0]]),
    ("ceil", lambda x: x.ceil(), ([0.5],), [[0.0]]),
    ("trunc", lambda x: x.trunc(), ([0.5],), [[0.0]]),
    ("round", lambda x: x.round(), ([0.5],), [[0.0]]),
    ("sign_0d", lambda x: x.sign(), (0.5,), [0.0]),
    ("maximum", tape.maximum, ([1.0, 2.0, 3.0], [2.0] * 3), [[0.0, nan, nan], [nan, nan, 0.0]]),
    ("max_of_two", tape.max, ([1.0, 2.0, 3.0], [2.0] * 3), [[0.0, nan, nan], [nan, nan, 0.0]]),
    ("minimum", tape.minimum, ([1.0, 2.0, 3.0], [2.0] * 3), [[nan, nan, 0.0], [0.0, nan, nan]]),
    ("relu", lambda x: x.relu(), ([-1.0, 1.0, 0.0],), [[0.0, nan, 0.0]]),
    ("xlogy", tape.xlogy, ([0.0, 1.0, 1.0, 0.0], [0.0, 0.0, -1.0, -1.0]), [[0.0, nan, nan, 0.0], [nan] * 4]),
    ("pow_number_zero", lambda x: x ** 0, ([0.0, 2.0],), [[0.0, 0.0]]),
]


@SWEEPS
@pytest.mark.parametrize("name, fn, inputs, expected", MASKED, ids=[m[0] for m in MASKED])
def test_a_nan_gradient_where_the_op_masks_it_out_gives_zero(name, fn, inputs, expected, retaped):
    np.testing.assert_equal(_grads_for(fn, inputs, nan, retaped), expected)


@SWEEPS
def test_an_ordinary_partial_multiplies_a_nan_gradient(retaped):
    # mul's partial is y: nan * 0 is nan there, as in PyTorch (no selection)
    got = _grads_for(tape.mul, ([0.0, 1.0], [0.0, 2.0]), nan, retaped)
    assert all(np.isnan(got).ravel())
    got = _grads_for(lambda x: x.abs(), ([0.0, 1.0],), inf, retaped)
    np.testing.assert_equal(got, [[nan, inf]])


@SWEEPS
def test_second_derivatives_through_sign_and_floor_select_too(retaped):
    # abs's gradient is sign(x), remainder's for y -floor(x / y): their own
    # gradients are zeros, so a nan arriving there gives 0
    x = tape.tensor([0.0, 1.5], requires_grad=True)
    y = tape.tensor([2.0, 2.0], requires_grad=True)
    (ga,) = tape.autograd.grad(x.abs().sum(), x, create_graph=True)
    (gy,) = tape.autograd.grad((x % y).sum(), y, create_graph=True)
    with _sweep(retaped):
        (h,) = tape.autograd.grad(ga, x, tape.full_like(ga, nan))
        hx, hy = tape.autograd.grad(gy, [x, y], tape.full_like(gy, nan))
    assert h.tolist() == [0.0, 0.0] and hx.tolist() == [0.0, 0.0] and hy.tolist() == [0.0, 0.0]


@SWEEPS
def test_amax_multiplies_its_mask_as_pytorch(retaped):
    np.testing.assert_equal(_grads_for(lambda x: x.amax(), ([1.0, 2.0, 2.0],), nan, retaped), [[nan] * 3])


@SWEEPS
def test_second_derivative_of_a_division_by_an_infinite_divisor_is_zero(retaped):
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = tape.tensor([inf, -inf], requires_grad=True)
    (g,) = tape.autograd.grad((x / y).sum(), y, create_graph=True)
    with _sweep(retaped):
        hx, hy = tape.autograd.grad(g.sum(), [x, y])
    assert g.tolist() == [-0.0, -0.0] and hx.tolist() == [-0.0, -0.0] and hy.tolist() == [0.0, -0.0]


PNORMS = [
    (0.5, [0.0, 1.0, 2.0], [0.0, 2.414213562373095, 1.7071067811865472]),
    (0.5, [0.0, 0.0], [0.0, 0.0]),
    (0.5, [-1.0, 0.0], [-1.0, 0.0]),
    (3.0, [0.0, 0.0], [0.0, 0.0]),
    (1.5, [0.0, 0.0], [0.0, 0.0]),
    (2.5, [0.0, 0.0], [0.0, 0.0]),
    (-1.0, [0.0, 1.0], [0.0, 0.0]),
]


@SWEEPS
@pytest.mark.parametrize("p, x, expected", PNORMS)
def test_p_norm_gradient_is_zero_at_zero_entries_and_zero_vectors(p, x, expected, retaped):
    (g,) = _grads_for(lambda v: tape.linalg.vector_norm(v, p), (x,), 1.0, retaped)
    np.testing.assert_allclose(g, expected, rtol=1e-14, atol=0)


# the exact sums of products (PyTorch's create_graph figures where the line
# has a zero; without one it divides by x, and its first-order backward skips
# the terms past a zero: [inf, nan, inf] and [3, 1, inf, 0] there; README)
@SWEEPS
@pytest.mark.parametrize("x, expected", [([2.0, nan, 3.0], [nan, 8.0, nan]), ([2.0, inf, 3.0], [inf, 8.0, inf]),
                                         ([0.0, inf, 3.0], [inf, 0.0, nan]), ([inf, 0.0, 2.0], [1.0, inf, nan]),
                                         ([1.0, 2.0, 0.0, inf], [nan, nan, inf, 0.0]),
                                         ([inf, 2.0, 0.0], [3.0, nan, inf]), ([nan], [1.0]), ([inf], [1.0]),
                                         (3.0, 1.0)])
def test_cumprod_gradient_at_nan_and_inf_is_exact(x, expected, retaped):
    (g,) = _grads_for(lambda v: tape.cumprod(v, 0).sum(), (x,), 1.0, retaped)
    np.testing.assert_equal(g, expected)


@SWEEPS
def test_cumprod_of_one_element_lines_passes_g_through(retaped):
    g = _grads_for(lambda v: tape.cumprod(v, 0) * tape.tensor([[nan, 1.0]]), ([[2.0, inf]],), 1.0, retaped)
    np.testing.assert_equal(g, [[[nan, 1.0]]])


@SWEEPS
def test_var_and_std_with_correction_at_least_n_are_pytorchs(retaped):
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        std = _grads_for(lambda v: v.std(correction=2), ([1.0, 2.0],), 1.0, retaped)
        std_dim = _grads_for(lambda v: v.std(1, correction=2).sum(), ([[1.0, 2.0], [3.0, 5.0]],), 1.0, retaped)
        var_one = _grads_for(lambda v: v.var(), ([1.5],), 1.0, retaped)
        var_dim = _grads_for(lambda v: v.var(1, correction=2).sum(), ([[1.0, 2.0], [3.0, 5.0]],), 1.0, retaped)
        std_negative_dof = _grads_for(lambda v: v.std(0, correction=3), ([1.0, 2.0],), 1.0, retaped)
    np.testing.assert_equal(std, [[nan, nan]])
    np.testing.assert_equal(std_dim, [[[nan, nan], [nan, nan]]])
    np.testing.assert_equal(var_one, [[nan]])
    np.testing.assert_equal(var_dim, [[[-inf, inf], [-inf, inf]]])
    assert std_negative_dof == [[0.0, 0.0]]  # PyTorch's is [0., -0.]: the sign of a zero is issue 18's other class


@SWEEPS
def test_xlogy_derivative_for_x_at_zero_is_log_y(retaped):
    gx, gy = _grads_for(tape.xlogy, ([0.0, 0.0], [2.0, 0.5]), 1.0, retaped)
    np.testing.assert_allclose(gx, [math.log(2.0), math.log(0.5)], rtol=1e-15)
    assert gy == [0.0, 0.0]
    assert _grads_for(tape.xlogy, ([0.0], [2.0]), inf, retaped)[0] == [inf]


@SWEEPS
@pytest.mark.parametrize("A, expected", [
    ([[1.0, 2.0], [1.0, 2.0]], [[2.0, -1.0], [-2.0, 1.0]]),
    ([[2.0, 1.0], [4.0, 2.0]], [[2.0, -4.0], [-1.0, 2.0]]),
    ([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [4.0, 5.0, 7.0]], [[-1.0, 5.0, -3.0], [1.0, -5.0, 3.0], [0.0, 0.0, 0.0]]),
    ([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], [[-3.0, 6.0, -3.0], [6.0, -12.0, 6.0], [-3.0, 6.0, -3.0]]),
])
def test_det_of_a_singular_matrix_is_zero_with_the_adjugate_as_gradient(A, expected, retaped):
    # PyTorch's figures under create_graph; its plain backward gives 0 (README)
    x = tape.tensor(A, requires_grad=True)
    d = tape.linalg.det(x)
    with _sweep(retaped):
        (g,) = tape.autograd.grad(d, x)
    assert d.item() == 0.0
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-12, atol=1e-12)


@SWEEPS
def test_det_second_derivative_at_a_singular_matrix_is_pytorchs(retaped):
    x = tape.tensor([[1.0, 2.0], [1.0, 2.0]], requires_grad=True)
    (g,) = tape.autograd.grad(tape.linalg.det(x), x, create_graph=True)
    with _sweep(retaped):
        (h,) = tape.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), [[1.0, -1.0], [-1.0, 1.0]], rtol=1e-12)


def test_det_of_a_matrix_holding_nan_is_nan():
    x = tape.tensor([[nan, 1.0], [2.0, 3.0]], requires_grad=True)
    d = tape.linalg.det(x)
    (g,) = tape.autograd.grad(d, x)
    assert math.isnan(d.item()) and np.isnan(g.numpy()).all()


@SWEEPS
def test_power_mixed_second_derivative_at_a_zero_exponent_is_pytorchs(retaped):
    # the gradient for a is where(b == 0, 0, b * a ** (b - 1)) there, whose
    # derivative for b is 0 (PyTorch 2.13), not the limit 1 / a
    a = tape.tensor([2.0, 0.5], requires_grad=True)
    b = tape.tensor([0.0, 0.0], requires_grad=True)
    (ga,) = tape.autograd.grad((a ** b).sum(), a, create_graph=True)
    with _sweep(retaped):
        (h,) = tape.autograd.grad(ga.sum(), b)
    assert ga.tolist() == [0.0, 0.0] and h.tolist() == [0.0, 0.0]


# x ** c at -0.0, -inf and inf for PyTorch's shortcut exponents (sqrt, rsqrt
# and the reciprocals are not pow there) and one without: (c, values, gradients)
POWERS_AT_EDGES = [
    (3, [-0.0, -inf, inf], [0.0, inf, inf]),
    (0.5, [-0.0, nan, inf], [-inf, nan, 0.0]),
    (-0.5, [-inf, nan, 0.0], [-inf, -0.0, -0.0]),
    (-1, [-inf, -0.0, 0.0], [-inf, -0.0, -0.0]),
    (-2, [inf, 0.0, 0.0], [inf, 0.0, -0.0]),
    (1.5, [0.0, inf, inf], [-0.0, nan, inf]),
]


def _signed(values):
    return [(v, math.copysign(1.0, v)) if not math.isnan(v) else "nan" for v in values]


@SWEEPS
@pytest.mark.parametrize("c, values, grads", POWERS_AT_EDGES, ids=[str(p[0]) for p in POWERS_AT_EDGES])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_a_power_of_a_number_at_signed_zero_and_infinity_is_pytorchs(c, values, grads, compiled, retaped):
    """0-d (one contribution each: the gradient keeps its -0.0) and an array."""
    power = tape.compile(lambda x: x ** c) if compiled else (lambda x: x ** c)
    for _ in range(2):  # a compiled one records, then replays
        xs = [tape.tensor(v, requires_grad=True) for v in (-0.0, -inf, inf)]
        outs = [power(x) for x in xs]
        with _sweep(retaped):
            got = [tape.autograd.grad(y, x)[0].item() for x, y in zip(xs, outs)]
        assert _signed([y.item() for y in outs]) == _signed(values) and _signed(got) == _signed(grads)
        x = tape.tensor([-0.0, -inf, inf], requires_grad=True)
        y = power(x)
        with _sweep(retaped):
            (g,) = tape.autograd.grad(y.sum(), x)
        assert _signed(y.tolist()) == _signed(values) and _signed(g.tolist()) == _signed(grads)


@SWEEPS
def test_remainder_gradient_for_an_infinite_divisor_follows_its_forward(retaped):
    # x % inf is x, or inf for x < 0 (x + y): d/dy is 0 or 1, as PyTorch's
    x = tape.tensor([1.0, -1.0, 0.0, 1.0, -1.0], requires_grad=True)
    y = tape.tensor([inf, inf, inf, -inf, -inf], requires_grad=True)
    r = tape.remainder(x, y)
    with _sweep(retaped):
        gx, gy = tape.autograd.grad(r.sum(), [x, y])
    assert r.tolist() == [1.0, inf, 0.0, -inf, -1.0]
    assert gx.tolist() == [1.0] * 5 and gy.tolist() == [-0.0, 1.0, -0.0, 1.0, -0.0]


@SWEEPS
def test_remainder_gradient_for_nan_operands_is_nan(retaped):
    x = tape.tensor([nan, 1.0, 0.0], requires_grad=True)
    y = tape.tensor([1.0, nan, 0.0], requires_grad=True)
    with _sweep(retaped):
        gx, gy = tape.autograd.grad(tape.remainder(x, y).sum(), [x, y])
    np.testing.assert_equal(gy.numpy(), [nan, nan, nan])
    (g0,) = tape.autograd.grad(tape.remainder(x[0], y[0]), y)
    assert math.isnan(g0[0].item())


def test_einsum_implicit_output_of_a_repeated_label_is_the_trace():
    A = tape.tensor([[1.0, 2.0], [3.0, 4.0]])
    B = tape.tensor([[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]])
    assert tape.einsum("ii", A).item() == 5.0
    assert tape.einsum("iij", B).tolist() == [8.0, 10.0]
    assert tape.einsum("ij", A).shape == (2, 2)


def test_data_written_into_a_0d_non_leaf_is_read_by_later_backward():
    a = tape.tensor([1.0, 2.0], requires_grad=True)
    b = tape.tensor([3.0, 4.0], requires_grad=True)
    s = a @ b
    s.data = tape.tensor(10.0)
    (s * s).backward()
    assert a.grad.tolist() == [60.0, 80.0] and b.grad.tolist() == [20.0, 40.0]
    assert s.grad_fn.name() == "DotBackward0"


def test_an_in_place_write_through_data_of_a_0d_non_leaf_is_read_by_later_backward():
    a = tape.tensor([1.0, 2.0], requires_grad=True)
    s = a.sum()
    s.data.fill_(10.0)
    (s * s).backward()
    assert a.grad.tolist() == [20.0, 20.0]


def test_xlogy_of_float64_and_float32_computes_in_float64():
    # found by the differential run: log(y) was taken in y's float32
    x = tape.tensor([0.5], dtype=tape.float64)
    y = tape.tensor([0.5], dtype=tape.float32)
    assert tape.xlogy(x, y).tolist() == [0.5 * math.log(0.5)]


def test_log_softmax_of_a_row_holding_inf_warns_nothing():
    # the suite turns warnings into errors; the row is nan, as PyTorch 2.13's
    x = tape.tensor([[1.0, math.inf, 2.0]], requires_grad=True)

    out = tape.log_softmax(x, dim=1)

    assert str(out.tolist()) == "[[nan, nan, nan]]"


def test_maximum_and_minimum_give_the_first_operand_on_a_tie_of_signed_zeros():
    # PyTorch 2.13: torch.maximum(tensor([-0.0, 0.0]), tensor([0.0, -0.0])) is
    # tensor([-0., 0.]), and so is torch.minimum; NumPy's give the second
    a, b = tape.tensor([-0.0, 0.0, np.nan, 1.0]), tape.tensor([0.0, -0.0, 1.0, np.nan])
    for op in (tape.maximum, tape.minimum):
        out = op(a, b).numpy()
        assert np.signbit(out[:2]).tolist() == [True, False]
        assert np.isnan(out[2:]).all()


# Known values from PyTorch 2.13 (torch.set_default_dtype(torch.float64)).
@SWEEPS
def test_max_and_min_of_all_elements_give_a_nan_result_gradient_to_the_nans(retaped):
    x = [[-0.0, -0.0, nan], [0.7, -0.5, nan]]
    assert _grads_for(lambda t: t.max(), [x], 1.0, retaped) == [[[0.0, 0.0, 0.5], [0.0, 0.0, 0.5]]]
    assert _grads_for(lambda t: t.min(), [x], 2.0, retaped) == [[[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]]
    # amax's mask is x == out, which no element of a nan line meets: nan, as there
    got = _grads_for(lambda t: t.amax(1), [[[1.0, nan], [2.0, 3.0]]], 1.0, retaped)[0]
    assert math.isnan(got[0][0]) and math.isnan(got[0][1]) and got[1] == [0.0, 1.0]


@pytest.mark.parametrize("logits, softmax", [
    ([inf, inf, 2.0], [nan, nan, nan]), ([inf, 1.0, 2.0], [nan, nan, nan]), ([-inf, -inf], [nan, nan]),
    ([-inf, 1.0], [0.0, 1.0]), ([nan, 1.0], [nan, nan]), ([1e308, 1e308], [0.5, 0.5])])
def test_softmax_of_infinite_logits_is_pytorchs(logits, softmax):
    x = tape.tensor(logits)
    np.testing.assert_array_equal(x.softmax(0).numpy(), softmax)
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(x.log_softmax(0).numpy(), np.log(softmax), rtol=1e-15)


@SWEEPS
def test_a_tensor_power_with_exponent_zero_has_no_gradient_for_its_base(retaped):
    # x ** y at y == 0: 0 for x even where x is nan, and 0 for the cross
    # derivative (PyTorch's where(exponent == 0, 0, ...)), not 1 / x
    assert _grads_for(lambda x, y: x ** y, [nan, 0.0], 1.0, retaped)[0] == 0.0
    x, y = tape.tensor(1.0, requires_grad=True), tape.tensor(0.0, requires_grad=True)
    with _sweep(retaped):
        gx, gy = tape.autograd.grad(x ** y, (x, y), create_graph=True)
        assert [h.item() for h in tape.autograd.grad(gx + 2 * gy, (x, y))] == [2.0, 0.0]


def test_add_and_sub_with_alpha_scale_in_the_sums_dtype():
    a, i = tape.tensor(2.0, dtype=tape.float32), tape.tensor([1, 2])
    assert tape.sub(a, tape.tensor(1), alpha=0.5).dtype == tape.float32
    assert tape.add(tape.tensor([1.0, 2.0], dtype=tape.float32), i, alpha=2).dtype == tape.float32
    assert tape.add(i, i, alpha=2).dtype == tape.int64 and tape.add(i, 1.5, alpha=2).dtype == tape.float64


@pytest.mark.parametrize("fn, kernel", [(tape.silu, "silu_cpu"), (tape.gelu, "GeluKernelImpl"),
                                        (tape.softplus, "softplus_cpu")])
@pytest.mark.parametrize("data, name", [([1, 0, 2], "Long"), ([True, False], "Bool")])
def test_activations_refuse_integer_and_bool_tensors_as_pytorch(fn, kernel, data, name):
    with pytest.raises(NotImplementedError, match=f"^\"{kernel}\" not implemented for '{name}'$"):
        fn(tape.tensor(data))


def test_a_bool_squared_is_int64_and_an_empty_reduction_names_the_dim_as_given():
    assert tape.tensor([True, False]).square().dtype == tape.int64
    with pytest.raises(IndexError, match=r"^amax\(\): Expected reduction dim -1 to have non-zero size\.$"):
        tape.zeros(2, 0).amax(-1)
    with pytest.raises(IndexError, match=r"^max\(\): Expected reduction dim 1 to have non-zero size\.$"):
        tape.zeros(2, 0).max(-1)


def test_a_power_of_two_tensors_is_cs_pow_and_a_0d_reduction_takes_dim_minus_one():
    # PyTorch 2.13: pow of two tensors has no sqrt shortcut, (-inf) ** 0.5 is inf, (-0.0) ** 0.5 is +0.0
    x = tape.tensor([0.7, -inf, -0.0])
    for out in (x ** tape.tensor(0.5), x ** tape.tensor([0.5] * 3)):
        assert out.tolist()[1:] == [inf, 0.0] and math.copysign(1.0, out.tolist()[2]) == 1.0
    assert (tape.tensor(-inf) ** tape.tensor(0.5)).item() == inf
    assert tape.tensor(1.5).amax(-1).item() == 1.5 and tape.tensor(2).amax(-1).item() == 2


def test_0d_clamp_rounding_and_a_signed_zero_constant_are_pytorchs():
    # PyTorch 2.13: a nan bound gives nan; ceil(-0.22) is -0.0; the partial of x / -0.0 is -inf
    assert math.isnan(tape.clamp(tape.tensor(0.6), max=nan).item())
    assert math.isnan(tape.tensor(0.6).clamp(min=nan).item())
    for out in (tape.tensor(-0.22).ceil(), tape.tensor(-0.4).round(), tape.tensor(-0.7).trunc(), tape.tensor(-0.0).floor()):
        assert out.item() == 0.0 and math.copysign(1.0, out.item()) == -1.0
    for data in ([1.0, -2.0], 1.0):
        a = tape.tensor(data, requires_grad=True)
        assert np.all(tape.autograd.grad((a / -0.0).sum(), a)[0].numpy() == -inf)
        assert np.all(np.signbit(tape.autograd.grad((a * -0.0).sum(), a)[0].numpy()))


def test_div_rounds_as_pytorchs_rounding_modes():
    a, i = tape.tensor([7.0, -7.0, 5.5], requires_grad=True), tape.tensor([7, -7, 5])
    assert tape.div(a, 2.0, rounding_mode="floor").tolist() == [3.0, -4.0, 2.0]
    trunc = a.div(tape.tensor(2.0), rounding_mode="trunc")
    assert trunc.tolist() == [3.0, -3.0, 2.0] and tape.autograd.grad(trunc.sum(), a)[0].tolist() == [0.0] * 3
    assert (trunc.grad_fn.name(), trunc.grad_fn._saved_rounding_mode) == ("DivBackward2", "trunc")
    assert tape.div(a, 2.0, rounding_mode="floor").grad_fn._saved_rounding_mode == "floor"
    assert tape.div(i, 2, rounding_mode="trunc").tolist() == [3, -3, 2]
    assert tape.div(i, -2, rounding_mode="floor").tolist() == [-4, 3, -3]
    assert tape.div(i, 2, rounding_mode=None).tolist() == [3.5, -3.5, 2.5]
    with pytest.raises(RuntimeError, match="^div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
                                           "found 'x'$"):
        tape.div(a, 2, rounding_mode="x")


@SWEEPS
def test_max_of_all_elements_keeps_an_infinite_gradient_off_the_others(retaped):
    # PyTorch 2.13's masked_fill: 0 where the max is not attained, not inf * 0
    assert _grads_for(lambda t: t.max(), [[1.0, 3.0, 2.0]], inf, retaped) == [[0.0, inf, 0.0]]
    assert _grads_for(lambda t: t.min(), [[1.0, 3.0, 1.0]], inf, retaped) == [[inf, 0.0, inf]]


def test_0d_gather_split_unbind_and_cumsum_are_pytorchs():
    # PyTorch 2.13: a 0-d gather takes its one element; split, chunk and unbind refuse a 0-d tensor
    x = tape.tensor(3.0, requires_grad=True)
    y = x.gather(-1, tape.tensor(0))
    assert y.item() == 3.0 and y.grad_fn.name() == "GatherBackward0"
    assert tape.autograd.grad(y, x)[0].item() == 1.0
    with pytest.raises(RuntimeError, match="^index 1 is out of bounds for dimension 0 with size 1$"):
        x.gather(0, tape.tensor(1))
    with pytest.raises(RuntimeError, match="^split expects at least a 1-dimensional tensor$"):
        x.split(1)
    with pytest.raises(RuntimeError, match="^chunk expects at least a 1-dimensional tensor$"):
        x.chunk(1)
    with pytest.raises(IndexError, match="^Dimension specified as 0 but tensor has no dimensions$"):
        x.unbind(-1)
    for value, dtype in [(True, tape.bool), (3, tape.int32)]:
        out = tape.tensor(value, dtype=dtype).cumsum(0)
        assert out.dtype == tape.int64 and out.item() == int(value)


def test_copy_casts_to_the_tensors_dtype_as_pytorchs():
    # PyTorch 2.13: copy_ truncates floats into ints, nan to int64's minimum, with no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tape.zeros(2, dtype=tape.int64).copy_(tape.tensor([1.5, -2.5])).tolist() == [1, -2]
        assert tape.zeros(1, dtype=tape.int64).copy_(tape.tensor([nan])).tolist() == [-2 ** 63]
    assert tape.zeros(2, dtype=tape.bool).copy_(tape.tensor([1.5, 0.0])).tolist() == [True, False]
    out = tape.zeros(2, dtype=tape.int64).copy_(tape.tensor([1.5, 2.0], requires_grad=True))
    assert out.tolist() == [1, 2] and not out.requires_grad


def test_a_norm_of_one_element_is_its_magnitude_as_pytorchs():
    # PyTorch 2.13: the p-norm of one element is |x| (no square under- or overflows), gradient sign(x)
    for value, p, dim, norms, grads in [(1e-300, 2, None, 1e-300, 1.0), ([[1e-300], [-2e-300]], 2, 1, [1e-300, 2e-300],
                                         [[1.0], [-1.0]]), (-1e-300, 0.5, None, 1e-300, -1.0),
                                        ([1e-300, 0.0], 2, None, 0.0, [0.0, 0.0])]:
        x = tape.tensor(value, requires_grad=True)
        y = x.norm(p=p, dim=dim)
        assert y.tolist() == norms and tape.autograd.grad(y.sum(), x)[0].tolist() == grads
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tape.tensor([1e300, 1.0]).norm().item() == inf


def test_softmax_pow_and_floor_divide_of_empty_integer_tensors_are_pytorchs():
    # PyTorch 2.13: an empty integer softmax is an empty tensor of its dtype, an
    # integer to a negative power raises even when empty, // 0 of nothing is nothing
    out = tape.log_softmax(tape.zeros(2, 0, dtype=tape.int32), -1)
    assert out.shape == (2, 0) and out.dtype == tape.int32
    for base in (tape.zeros(0, dtype=tape.int64), tape.tensor([True])):
        with pytest.raises(RuntimeError, match="^Integers to negative integer powers are not allowed.$"):
            base ** -1
    assert (tape.zeros(0, dtype=tape.int64) // 0).shape == (0,)
    with pytest.raises(RuntimeError, match="^ZeroDivisionError$"):
        tape.tensor([1]) // 0


def test_a_0d_float64_operand_of_a_float32_op_ties_as_it_was_cast():
    # PyTorch 2.13: the 0-d float64 operand is cast to float32 (1e-300 -> 0, 1e300 -> inf) before the
    # gradient's masks compare it, and without an overflow warning
    g = tape.tensor([0.5, 1.0, 1.5], dtype=tape.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for fn, xs, y, expected in [(tape.minimum, [1.0, 0.0, 0.5], 1e-300, [0.0, 0.5, 0.0]),
                                    (lambda x, y: tape.clamp(x, max=y), [inf, 3.0, 0.7], 1e300, [0.5, 1.0, 1.5])]:
            x = tape.tensor(xs, dtype=tape.float32, requires_grad=True)
            out = fn(x, tape.tensor(y))
            assert out.dtype == tape.float32 and tape.autograd.grad(out, x, g)[0].tolist() == expected


def test_a_0d_float64_operand_of_a_float32_op_changed_in_place_raises_as_pytorch():
    # PyTorch 2.13: mul saved the float64 operand, which the in-place change then spoils
    x = tape.tensor([1.0, 0.5], dtype=tape.float32, requires_grad=True)
    y = tape.tensor(3.0)
    out = x * y
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


@SWEEPS
def test_the_inf_norm_is_one_node_whose_gradient_skips_a_line_holding_nan(retaped):
    # PyTorch 2.13: LinalgVectorNormBackward0 for every order; sgn(x) g / k on the k elements at the norm
    # or nan, and sgn(nan) is 0
    assert _grads_for(lambda t: t.norm(inf), [[nan, -inf, 0.7]], 1.0, retaped) == [[0.0, 0.0, 0.0]]
    assert _grads_for(lambda t: t.norm(inf), [[3.0, -4.0, 4.0]], 1.0, retaped) == [[0.0, -0.5, 0.5]]
    assert _grads_for(lambda t: t.norm(1), [[nan, 2.0, -1.0]], 1.0, retaped) == [[0.0, 1.0, -1.0]]
    x = tape.tensor([3.0, -4.0], requires_grad=True)
    assert {x.norm(p).grad_fn.name() for p in (inf, -inf, 1)} == {"LinalgVectorNormBackward0"}


@pytest.mark.parametrize("create_graph", [False, True])
def test_a_product_by_a_zero_operand_passes_nan_on_from_an_infinite_gradient(create_graph):
    # PyTorch 2.13: grad * 0 is nan where grad is inf, with or without create_graph; only a partial that is
    # 0 whatever the operands (floor's) gives zeros_like(grad)
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    for zero in (0.0, tape.tensor(0.0), tape.tensor(0.0, dtype=tape.float32)):
        out = (x * zero) * tape.tensor([np.inf, 1.0])
        (g,) = tape.autograd.grad(out.sum(), x, create_graph=create_graph)
        assert np.isnan(g[0].item()) and g[1].item() == 0.0
    (g,) = tape.autograd.grad(x.floor(), x, tape.tensor([np.inf, -1.0]), create_graph=create_graph)
    assert g.tolist() == [0.0, 0.0] and not g.requires_grad


@pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0:UserWarning")
@pytest.mark.parametrize("create_graph", [False, True])
def test_var_without_degrees_of_freedom_has_pytorchs_constant_gradient(create_graph):
    # PyTorch 2.13's var_backward over all elements (or of a 0-d input) with no degrees of freedom: g times
    # nan where x is the mean, else +inf (not 2 (x - mean) / 0), a constant: no second order
    cases = [(lambda x: x.var(), [0.5], [np.nan]), (lambda x: x.var(correction=2), [1.0, 3.0], [np.inf, np.inf]),
             (lambda x: x.var(correction=5), [1.0, 2.0, -1.0], [np.inf] * 3), (lambda x: x.var(dim=0), 0.7, np.nan)]
    for fn, value, expected in cases:
        x = tape.tensor(value, requires_grad=True)
        (g,) = tape.autograd.grad(fn(x) * 1.5, x, create_graph=create_graph)
        np.testing.assert_array_equal(g.numpy(), expected)
        assert not g.requires_grad
    # over dims it divides by them: 2 (x - mean) / 0
    x = tape.tensor([1.0, 3.0], requires_grad=True)
    (g,) = tape.autograd.grad(x.var(dim=0, correction=2), x, create_graph=create_graph)
    assert g.tolist() == [-np.inf, np.inf] and g.requires_grad == create_graph


@pytest.mark.parametrize("create_graph", [False, True])
def test_a_quotient_partial_divides_the_gradient_as_pytorch(create_graph):
    # PyTorch 2.13: log's grad / self and div's grad / other, one rounding (not grad * (1 / x))
    x = tape.tensor([3.0, 7.0, 0.1], requires_grad=True)
    w = np.array([0.7, 1.1, 2.9])
    (g,) = tape.autograd.grad((tape.log(x) * tape.tensor(w)).sum(), x, create_graph=create_graph)
    assert [v.hex() for v in g.tolist()] == ["0x1.dddddddddddddp-3", "0x1.41d41d41d41d5p-3", "0x1.cffffffffffffp+4"]
    (g,) = tape.autograd.grad((x / tape.tensor([3.0, 9.0, 0.3]) * tape.tensor(w)).sum(), x, create_graph=create_graph)
    assert [v.hex() for v in g.tolist()] == ["0x1.dddddddddddddp-3", "0x1.f49f49f49f4a0p-4", "0x1.3555555555555p+3"]


def test_the_second_order_of_a_quotient_partial_stays_finite_where_no_gradient_flows():
    # PyTorch 2.13: d(g / x)/dx is 0 where g is 0, even at a tiny x, whose 1 / x squared overflows
    x = tape.tensor([1e-300, 2.0], requires_grad=True)
    (g,) = tape.autograd.grad(tape.log(x)[1:].sum(), x, create_graph=True)
    (g2,) = tape.autograd.grad((g * g).sum(), x)
    assert g.tolist() == [0.0, 0.5] and g2.tolist() == [0.0, -0.25]


def test_sinh_and_cosh_second_order_at_infinity_is_pytorchs():
    # PyTorch 2.13: grad * cosh(x) and grad * sinh(x), so d2/dx2 at inf is inf (not inf * exp(-inf) = nan)
    for fn, first, second in ((tape.sinh, [np.inf, np.inf], [np.inf, -np.inf]),
                              (tape.cosh, [np.inf, -np.inf], [np.inf, -np.inf])):
        x = tape.tensor([np.inf, -np.inf], requires_grad=True)
        (g,) = tape.autograd.grad(fn(x).sum(), x, create_graph=True)
        (g2,) = tape.autograd.grad((g * g).sum(), x)
        assert g.tolist() == first and g2.tolist() == second
        names = [f.name() for f, _ in g.grad_fn.next_functions if f is not None]
        assert ("CoshBackward0" if fn is tape.sinh else "SinhBackward0") in names


def test_relu_keeps_negative_zero_and_nan_as_pytorch():
    # PyTorch 2.13: x < 0 ? 0 : x, eager, in place, 0-d and compiled
    def signs(values):
        return [math.copysign(1.0, v) if not math.isnan(v) else "nan" for v in values]

    expected = [-1.0, 1.0, 1.0, "nan", 1.0]
    for dtype in (tape.float64, tape.float32):
        x = tape.tensor([-0.0, 0.0, -1.0, np.nan, 2.0], dtype=dtype)
        assert signs(tape.relu(x).tolist()) == expected and signs(x.clone().relu_().tolist()) == expected
        assert signs([tape.relu(tape.tensor(-0.0, dtype=dtype, requires_grad=True)).item()]) == [-1.0]
    compiled = tape.compile(lambda x: tape.relu(x * 1.0))
    for _ in range(3):
        assert signs(compiled(tape.tensor([-0.0, -1.0], requires_grad=True)).tolist()) == [-1.0, 1.0]
        assert signs([compiled(tape.tensor(-0.0, requires_grad=True)).item()]) == [-1.0]


@pytest.mark.parametrize("create_graph", [False, True])
def test_a_float64_bound_of_a_float32_op_ties_as_it_was_cast(create_graph):
    # PyTorch 2.13: a 0-d float64 operand (that requires grad) or a number bound of a float32 op is
    # computed, and compared in its gradient, as float32: x == float32(y) is a tie
    y_value = 0.20172329260193544
    x = tape.tensor([np.float32(y_value), 0.5, 0.1], dtype=tape.float32, requires_grad=True)
    y = tape.tensor(y_value, requires_grad=True)
    for fn, gx, gy in ((lambda: tape.maximum(x, y), [0.5, 1.0, 0.0], 1.5), (lambda: tape.minimum(y, x), [0.5, 0.0, 1.0], 1.5),
                       (lambda: tape.clamp(x, min=y), [1.0, 1.0, 0.0], 1.0)):
        got = tape.autograd.grad(fn().sum(), (x, y), create_graph=create_graph)
        assert (got[0].tolist(), got[1].item()) == (gx, gy)
    (g,) = tape.autograd.grad(tape.clamp(x, min=y_value).sum(), x, create_graph=create_graph)
    assert g.tolist() == [1.0, 1.0, 0.0]
