"""The Tensor API where it follows PyTorch's rules rather than NumPy's: dtype
inference, true division of integers, formatting and conversion, comparisons
with non-tensors, random factories, and the in-place methods of API.md."""
import re

import numpy as np
import pytest

import tape


# -- dtypes ------------------------------------------------------------------------

@pytest.mark.parametrize("data, dtype", [
    (np.float32(1.5), np.float32),
    (np.int32(3), np.int32),
    ([np.float32(1), np.float32(2)], np.float32),
    ([1, np.float32(2.5)], np.float32),  # an integer and a float32: float32, not NumPy's float64
    ([1.0, np.float32(2)], np.float64),  # a Python float is the default dtype
    ([np.array([1.0, 2.0], np.float32)], np.float32),
    ([True, 1], np.int64),
    ([[1, 2], [3, 4]], np.int64),
    ([], np.float64),
])
def test_tensor_infers_pytorchs_dtype(data, dtype):
    assert tape.tensor(data).dtype == dtype


def test_tensor_of_float32_tensors_is_float32():
    parts = [tape.tensor(1.0, dtype=tape.float32), tape.tensor(2.0, dtype=tape.float32)]

    assert tape.tensor(parts).dtype == np.float32


@pytest.mark.parametrize("numerator", [1, 1.0])
def test_number_over_an_integer_tensor_divides_truly(numerator):
    out = numerator / tape.tensor([2, 4, 0])

    assert out.dtype == np.float64
    assert out.tolist() == [0.5, 0.25, float("inf")]


def test_reciprocal_of_bools_is_float():
    assert tape.reciprocal(tape.tensor([True, False])).tolist() == [1.0, float("inf")]


# -- conversion and formatting -----------------------------------------------------

def test_0d_tensor_formats_as_its_number():
    loss = tape.tensor(2.5, requires_grad=True)

    assert (f"{loss}", f"{loss:.2f}") == ("2.5", "2.50")


def test_other_tensors_format_as_their_str_and_refuse_a_spec():
    x = tape.tensor([2.5])

    assert f"{x}" == str(x)
    with pytest.raises(TypeError, match="unsupported format string passed to Tensor.__format__"):
        f"{x:.3f}"


@pytest.mark.parametrize("convert", [float, int])
def test_float_and_int_of_several_elements_raise_value_error(convert):
    with pytest.raises(ValueError, match="only one element tensors can be converted to Python scalars"):
        convert(tape.tensor([1.0, 2.0]))


# -- comparisons -------------------------------------------------------------------

@pytest.mark.parametrize("other", [None, "a", [1.0, 3.0]])
def test_equality_with_what_is_not_a_tensor_is_false(other):
    x = tape.tensor([1.0, 2.0])

    assert (x == other) is False
    assert (x != other) is True


def test_list_index_finds_a_tensor_by_identity():
    x = tape.tensor([1.0, 2.0])

    assert [None, x].index(x) == 1


def test_ordering_against_none_is_a_type_error():
    with pytest.raises(TypeError, match="'<' not supported between instances of 'Tensor' and 'NoneType'"):
        tape.tensor([1.0]) < None


# -- random factories --------------------------------------------------------------

@pytest.mark.parametrize("args, kwargs, shape", [
    ((10, (3,)), {}, (3,)),
    ((2, 5, (2, 2)), {}, (2, 2)),
    ((10,), {"size": (4,)}, (4,)),
])
def test_randint_signatures(args, kwargs, shape):
    tape.manual_seed(0)
    out = tape.randint(*args, **kwargs)

    assert out.shape == shape and out.dtype == np.int64
    low, high = (0, args[0]) if len(args) < 3 else args[:2]
    assert all(low <= v < high for v in out.reshape(-1).tolist())


@pytest.mark.parametrize("factory, kernel", [(tape.rand, "check_uniform_bounds"),
                                             (tape.randn, "normal_kernel_cpu")])
def test_random_floats_refuse_an_integer_dtype(factory, kernel):
    with pytest.raises(NotImplementedError, match=f'"{kernel}" not implemented for \'Long\''):
        factory(2, dtype=tape.int64)


# -- indexing a 0-d tensor ---------------------------------------------------------

@pytest.mark.parametrize("key, shape", [(True, (1,)), (False, (0,)), ((), ()), (None, (1,)), (..., ())])
def test_0d_tensor_keys_that_select(key, shape):
    assert tape.tensor(5.0)[key].shape == shape


def test_0d_tensor_bool_tensor_key_selects():
    assert tape.tensor(5.0)[tape.tensor(True)].tolist() == [5.0]


@pytest.mark.parametrize("key, message", [
    (0, "invalid index of a 0-dim tensor"),
    (slice(None), "slice() cannot be applied to a 0-dim tensor."),
    ([0], "too many indices for tensor of dimension 0"),
])
def test_0d_tensor_keys_that_raise(key, message):
    with pytest.raises(IndexError, match=message.replace("(", r"\(").replace(")", r"\)")):
        tape.tensor(5.0)[key]


# -- in-place methods --------------------------------------------------------------

@pytest.mark.parametrize("method, args, expected", [
    ("pow_", (2,), [1.0, 4.0]), ("neg_", (), [-1.0, -2.0]), ("exp_", (), list(np.exp([1.0, 2.0]))),
    ("log_", (), list(np.log([1.0, 2.0]))), ("sin_", (), list(np.sin([1.0, 2.0]))),
    ("cos_", (), list(np.cos([1.0, 2.0]))), ("tanh_", (), list(np.tanh([1.0, 2.0]))),
    ("sigmoid_", (), list(1 / (1 + np.exp([-1.0, -2.0])))), ("relu_", (), [1.0, 2.0]),
    ("abs_", (), [1.0, 2.0]), ("sqrt_", (), list(np.sqrt([1.0, 2.0]))),
    ("copy_", (tape.tensor(7.0),), [7.0, 7.0]), ("remainder_", (1.5,), [1.0, 0.5]),
])
def test_in_place_method_writes_the_tensor_and_bumps_its_version(method, args, expected):
    x = tape.tensor([1.0, 2.0])
    alias = x

    assert getattr(x, method)(*args) is x
    np.testing.assert_allclose(alias.tolist(), expected, rtol=1e-15)
    assert x._version == 1


@pytest.mark.parametrize("statement, expected", [("x **= 2", [1.0, 4.0]), ("x %= 1.5", [1.0, 0.5])])
def test_augmented_power_and_remainder_are_in_place(statement, expected):
    x = tape.tensor([1.0, 2.0])
    alias = x
    namespace = {"x": x}

    exec(statement, namespace)

    assert namespace["x"] is alias and alias.tolist() == expected


def test_augmented_power_on_a_leaf_that_requires_grad_raises():
    x = tape.tensor([1.0, 2.0], requires_grad=True)

    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        x **= 2


@pytest.mark.parametrize("apply, dx", [
    # the in-place op's backward reads the old value: PyTorch keeps the original
    (lambda y, z: y.mul_(z), lambda x, z: z * 1.5),
    (lambda y, z: y.pow_(3), lambda x, z: 3 * 1.5 ** 3 * x ** 2),
    (lambda y, z: y.sin_(), lambda x, z: 1.5 * np.cos(1.5 * x)),
    (lambda y, z: y.exp_(), lambda x, z: 1.5 * np.exp(1.5 * x)),
])
def test_in_place_op_that_saves_the_old_value_backprops(apply, dx):
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    z = tape.tensor([2.0, 3.0], requires_grad=True)
    y = x * 1.5

    apply(y, z)
    y.sum().backward()

    np.testing.assert_allclose(x.grad.numpy(), dx(x.detach().numpy(), z.detach().numpy()))


def test_fill_with_a_tensor_that_requires_grad_passes_it_the_gradient():
    a = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = a * 1.0

    x.fill_(w[1])
    (x * x).sum().backward()

    assert w.grad.tolist() == [0.0, 12.0, 0.0] and a.grad.tolist() == [0.0, 0.0, 0.0]


def test_in_place_on_an_advanced_indexing_result_leaves_the_base_alone():
    # a copy in PyTorch too: allowed on a leaf's result, and the base keeps its value
    base = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    picked = base[[0, 1]]
    picked.add_(1.0)

    assert picked.tolist() == [2.0, 3.0] and base.tolist() == [1.0, 2.0, 3.0] and base._version == 0
    plain = tape.arange(4.0)
    plain[[0, 1]].add_(1.0)
    assert plain.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_augmented_floor_division_is_in_place_and_its_backward_raises():
    x = tape.tensor([5.0, 7.0])
    alias = x
    x //= 2

    assert alias.tolist() == [2.0, 3.0] and alias._version == 1
    y = tape.tensor([5.0, 7.0], requires_grad=True) * 1.0
    y //= 2
    assert y.tolist() == [2.0, 3.0] and y.grad_fn.name() == "torch::autograd::NotImplemented"
    with pytest.raises(RuntimeError, match="derivative for aten::floor_divide"):
        y.sum().backward()


def test_clamp_names_and_gradients_follow_pytorch():
    x = tape.tensor([-1.0, 0.5, 2.0, 1.0], requires_grad=True)
    y = tape.clamp(x, 0.0, 1.0)
    z = x.clamp(min=0.0)  # clamp with one bound is still ClampBackward1
    w = tape.clamp_max(x, 1.0)

    (y.sum() + (z * z).sum() + w.sum()).backward()

    assert y.tolist() == [0.0, 0.5, 1.0, 1.0]
    assert [t.grad_fn.name() for t in (y, z, w)] == ["ClampBackward1", "ClampBackward1",
                                                     "ClampMaxBackward0"]
    assert x.grad.tolist() == [1.0, 3.0, 4.0, 4.0]  # a bound itself passes the gradient


def test_clamp_of_integers_with_a_float_bound_promotes():
    assert tape.clamp(tape.tensor([1, 2]), min=1.5).tolist() == [1.5, 2.0]
    assert tape.clamp(tape.tensor([1, 5]), max=3).dtype == np.int64


def test_clamp_needs_a_bound():
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max' must not be None"):
        tape.clamp(tape.tensor([1.0]))


@pytest.mark.parametrize("make, message", [
    (lambda: tape.zeros(-1), "zeros: Dimension size must be non-negative."),
    (lambda: tape.ones(2, -1), "Trying to create tensor with negative dimension -1: [2, -1]"),
    (lambda: tape.rand(-2), "Trying to create tensor with negative dimension -2: [-2]"),
    (lambda: tape.arange(0, 5, 0), "step must be nonzero"),
    (lambda: tape.arange(5, 0), "upper bound and lower bound inconsistent with step sign"),
    (lambda: tape.linspace(0, 1, -1), "number of steps must be non-negative"),
    (lambda: tape.eye(2, -1), "m must be greater or equal to 0, got -1"),
    (lambda: tape.tensor(None), "Could not infer dtype of NoneType"),
    (lambda: -tape.tensor([True]), "Negation, the `-` operator, on a bool tensor is not supported."),
    (lambda: tape.tensor([True]) - tape.tensor([False]), "with two bool tensors is not supported"),
    (lambda: tape.tensor([3]) - True, "Subtraction, the `-` operator, with a bool tensor is not supported"),
])
def test_bad_arguments_raise_pytorchs_runtime_error(make, message):
    with pytest.raises(RuntimeError, match=re.escape(message)):
        make()


# -- printing ----------------------------------------------------------------------

@pytest.mark.parametrize("data, dtype, expected", [
    ([1.0, 1001.0], None, "tensor([1.0000e+00, 1.0010e+03])"),  # integers over 3 decades: scientific
    ([float("inf"), 1.0], None, "tensor([inf, 1.])"),  # widths come from the finite values
    ([1e8], None, "tensor([100000000.])"),
    ([-0.0, 1.0], None, "tensor([-0., 1.])"),
    ([0.1, 1e-5], None, "tensor([1.0000e-01, 1.0000e-05])"),
    ([1, 2], np.int32, "tensor([1, 2], dtype=tape.int32)"),
    ([2.5], np.float32, "tensor([2.5000], dtype=tape.float32)"),
])
def test_repr_matches_pytorch(data, dtype, expected):
    assert repr(tape.tensor(data, dtype=dtype)) == expected


def test_repr_of_empty_tensors_names_a_dtype_it_cannot_show():
    assert repr(tape.zeros(0, dtype=tape.int64)) == "tensor([], dtype=tape.int64)"
    assert repr(tape.zeros(0, 2)) == "tensor([], size=(0, 2))"


def test_repr_summarizes_and_wraps_like_pytorch():
    assert repr(tape.arange(2000.0)) == ("tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, "
                                         "1.9980e+03,\n        1.9990e+03])")
    assert repr(tape.arange(30.0).reshape(5, 6)) == (
        "tensor([[ 0.,  1.,  2.,  3.,  4.,  5.],\n        [ 6.,  7.,  8.,  9., 10., 11.],\n"
        "        [12., 13., 14., 15., 16., 17.],\n        [18., 19., 20., 21., 22., 23.],\n"
        "        [24., 25., 26., 27., 28., 29.]])")


def test_numpy_of_a_tensor_that_requires_grad_is_allowed_inside_no_grad():
    x = tape.tensor([1.0, 2.0], requires_grad=True)

    with tape.no_grad():
        assert x.numpy().tolist() == [1.0, 2.0] and np.asarray(x).tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
        x.numpy()


def test_integer_and_bool_casts_truncate_and_do_not_require_grad():
    x = tape.tensor([1.7, -2.5, 0.0], requires_grad=True)

    assert x.long().tolist() == [1, -2, 0] and x.long().dtype == tape.int64
    assert x.int().dtype == tape.int32 and x.int().tolist() == [1, -2, 0]
    assert x.bool().tolist() == [True, True, False] and x.bool().dtype == tape.bool
    assert not x.long().requires_grad


def test_a_0d_tensor_shares_memory_with_numpy_as_pytorchs():
    """t.numpy(), np.asarray(t) and from_numpy share a 0-d float64 tensor's
    memory (the tensor holds a Python float until then)."""
    t = tape.tensor(1.0)
    n = t.numpy()
    n += 1
    assert t.item() == 2.0 and t.sin().item() == np.sin(2.0)
    np.asarray(t)[()] = 5.0
    assert t.item() == 5.0
    a = np.array(2.0)
    u = tape.from_numpy(a)
    a += 1
    assert u.item() == 3.0
    u.add_(1)
    assert a == 4.0


def test_a_0d_result_whose_memory_numpy_shares_keeps_its_graph():
    x = tape.tensor(0.5, requires_grad=True)
    y = x * 3.0
    y.numpy(force=True)
    for _ in range(70_000):  # past a compaction of the tape's garbage
        x * 2.0
    y.backward()
    assert y.grad_fn.name() == "MulBackward0" and x.grad.item() == 3.0
