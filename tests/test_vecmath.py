"""The vectorized float64 sin, cos, exp and tanh (tape/_vecmath.py): within a
few ulps of NumPy over their whole domain, exact on special values, and used
by the ops' forwards and the native sweep's partials alike."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tape
from tape import _vecmath

KERNELS = {"sin": (_vecmath.sin_array, np.sin), "cos": (_vecmath.cos_array, np.cos),
           "exp": (_vecmath.exp_array, np.exp), "tanh": (_vecmath.tanh_array, np.tanh)}
# worst case measured over 10^6 uniform draws of each range below, plus one
MAX_ULPS = {"sin": 3, "cos": 3, "exp": 2, "tanh": 4}
SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324, 1e-310, 1e-300, -1e-300,
           709.78, 709.79, 710.0, -708.4, -745.1, -745.2, -746.0, 1e300, -1e300, 19.0, 19.1, 20.0,
           -20.0, 2.0 ** 23, 2.0 ** 23 + 1, -(2.0 ** 23) - 1, 1e22, math.pi, math.pi / 2, -math.pi / 2]


def _run(name, x):
    kernel, _ = KERNELS[name]
    out = np.empty_like(x)
    kernel(x, out)
    return out


def _ulps(got, want):
    both_nan = np.isnan(got) & np.isnan(want)
    same = (got == want) & (np.signbit(got) == np.signbit(want))
    with np.errstate(invalid="ignore"):
        err = np.abs(got - want) / np.spacing(np.abs(want))
    return np.where(both_nan | same, 0.0, err)


@pytest.mark.parametrize("name, low, high", [
    ("sin", -10, 10), ("sin", -1e7, 1e7), ("sin", -1e-6, 1e-6), ("sin", 1e8, 1e12),
    ("cos", -10, 10), ("cos", -1e7, 1e7), ("cos", -1e-6, 1e-6), ("cos", -1e12, -1e8),
    ("exp", -745, 710), ("exp", -1, 1), ("exp", -1e-9, 1e-9),
    ("tanh", -25, 25), ("tanh", -0.5, 0.5), ("tanh", -1e-9, 1e-9)])
def test_within_ulps_of_numpy(name, low, high):
    x = np.random.default_rng(0).uniform(low, high, 100_000)
    with np.errstate(over="ignore"):
        want = KERNELS[name][1](x)
    assert _ulps(_run(name, x), want).max() <= MAX_ULPS[name]


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_special_values_match_numpy(name):
    x = np.array(SPECIAL)
    with np.errstate(all="ignore"):
        want = KERNELS[name][1](x)
    got = _run(name, x)
    assert _ulps(got, want).max() <= MAX_ULPS[name], list(zip(x, got, want))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=70),
       st.sampled_from(sorted(KERNELS)))
def test_any_float64_within_ulps(values, name):
    x = np.array(values)
    with np.errstate(all="ignore"):
        want = KERNELS[name][1](x)
    assert _ulps(_run(name, x), want).max() <= MAX_ULPS[name]


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_op_forward_uses_kernel_for_large_float64(name):
    # 1000 elements (2-D, and a transposed view) go through the kernel, float32 through NumPy
    rng = np.random.default_rng(1)
    data = rng.uniform(-3, 3, (40, 25))
    for value in (data, data.T):
        got = getattr(tape.tensor(value), name)().numpy()
        assert _ulps(got, KERNELS[name][1](value)).max() <= MAX_ULPS[name]
    small = tape.tensor(data, dtype=tape.float32)
    got32 = getattr(small, name)()
    assert got32.dtype == tape.float32
    np.testing.assert_allclose(got32.numpy(), KERNELS[name][1](data.astype(np.float32)), rtol=1e-6)


@pytest.mark.parametrize("scale", [3.0, 1e9])
@pytest.mark.parametrize("name, derivative", [("sin", np.cos), ("cos", lambda v: -np.sin(v))])
def test_native_trig_partials_in_and_out_of_range(name, derivative, scale):
    # beyond TRIG_LIMIT the sweep's loop falls back to libm, still exact
    value = np.random.default_rng(2).uniform(-scale, scale, 1000)
    x = tape.tensor(value, requires_grad=True)
    getattr(x, name)().sum().backward()
    assert _ulps(x.grad.numpy(), derivative(value)).max() <= MAX_ULPS[name]
