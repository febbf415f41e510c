"""The small Tensor API that PyTorch code reaches for: dtype aliases, device
and layout queries, casts, new_* factories, bitwise and logical ops, factory
keywords, repr wrapping and the legacy constructor. Expected values are
PyTorch 2.13's (with float64 as its default dtype)."""
import math
import warnings

import numpy as np
import pytest

import tape


# -- dtype aliases -------------------------------------------------------------

@pytest.mark.parametrize("alias, dtype", [
    (tape.float, tape.float32), (tape.double, tape.float64), (tape.half, tape.float16),
    (tape.long, tape.int64), (tape.int, tape.int32), (tape.short, tape.int16),
])
def test_dtype_aliases_are_the_same_objects(alias, dtype):
    assert alias is dtype


@pytest.mark.parametrize("dtype, numpy_dtype", [
    (tape.float16, np.float16), (tape.int8, np.int8), (tape.int16, np.int16), (tape.uint8, np.uint8),
    (tape.bool, np.bool_),
])
def test_dtypes_are_numpy_dtypes(dtype, numpy_dtype):
    assert dtype == numpy_dtype


@pytest.mark.parametrize("dtype", [tape.float, tape.double, tape.half, tape.long, tape.int, tape.short,
                                   tape.int8, tape.uint8, tape.bool])
def test_factories_and_to_take_the_aliases(dtype):
    assert tape.ones(2, dtype=dtype).dtype == dtype
    assert tape.ones(2).to(dtype).dtype == dtype


def test_float16_holds_values_but_cannot_require_grad():
    assert repr(tape.tensor([1.5, 2.0]).half() * 2) == "tensor([3., 4.], dtype=tape.float16)"
    with pytest.raises(RuntimeError, match="cannot differentiate float16"):
        tape.tensor([1.0], requires_grad=True).half()
    with pytest.raises(RuntimeError, match="cannot differentiate float16"):
        tape.zeros(2, dtype=tape.half, requires_grad=True)


# -- device ---------------------------------------------------------------------

def test_device_prints_as_pytorchs():
    device = tape.ones(2).device
    assert (repr(device), str(device), device.type, device.index) == ("device(type='cpu')", "cpu", "cpu", None)


def test_devices_compare_with_devices_not_strings():
    # as torch.device: equal to an equal device, never to a string
    assert tape.ones(2).device == tape.device("cpu")
    assert tape.ones(2).device != "cpu"
    assert tape.device("cpu:0") != tape.device("cpu")


def test_device_with_an_index():
    assert (repr(tape.device("cpu:0")), str(tape.device("cpu", 0))) == ("device(type='cpu', index=0)", "cpu:0")


@pytest.mark.parametrize("name, message", [
    ("foo", "Expected one of cpu, cuda, .* device type at start of device string: foo"),
    ("cpu:x", "Invalid device string: 'cpu:x'"),
])
def test_device_refuses_a_bad_string(name, message):
    with pytest.raises(RuntimeError, match=message):
        tape.device(name)


def test_a_cpu_tensor_stays_itself():
    t = tape.ones(2)
    assert (t.is_cuda, t.cpu() is t, t.to("cpu") is t, t.to(device="cpu") is t,
            t.to(tape.device("cpu")) is t, t.to() is t) == (False, True, True, True, True, True)


@pytest.mark.parametrize("call", [lambda t: t.cuda(), lambda t: t.to("cuda"), lambda t: t.to(device="cuda:0"),
                                  lambda t: tape.zeros(2, device="cuda")])
def test_cuda_is_refused_as_pytorch_without_cuda_refuses_it(call):
    with pytest.raises(AssertionError, match="not compiled with CUDA enabled"):
        call(tape.ones(2))


def test_another_device_is_refused():
    with pytest.raises(RuntimeError, match="not linked with support for mps devices"):
        tape.ones(2).to("mps")


# -- to() and casts ---------------------------------------------------------------

def test_to_a_device_and_dtype():
    assert repr(tape.ones(2).to("cpu", tape.float32)) == "tensor([1., 1.], dtype=tape.float32)"


def test_to_keywords():
    assert repr(tape.ones(2).to(device="cpu", dtype=tape.long)) == "tensor([1, 1])"


def test_to_another_tensor_takes_its_dtype():
    assert tape.ones(2).to(tape.zeros(1, dtype=tape.int32)).dtype == tape.int32


def test_to_a_device_and_dtype_records_the_cast():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    assert x.to("cpu", tape.float32).grad_fn.name() == "ToCopyBackward0"


def test_to_with_copy_copies():
    t = tape.ones(2)
    assert t.to(copy=True) is not t


def test_type_names_follow_pytorchs():
    i = tape.tensor([1, 2])
    names = [t.type() for t in (tape.ones(1), tape.ones(1).float(), tape.ones(1).half(), i, i.int(),
                                i.to(tape.int16), i.to(tape.int8), i.to(tape.uint8), i.bool())]
    assert names == ["tape.DoubleTensor", "tape.FloatTensor", "tape.HalfTensor", "tape.LongTensor",
                     "tape.IntTensor", "tape.ShortTensor", "tape.CharTensor", "tape.ByteTensor",
                     "tape.BoolTensor"]


def test_type_casts_to_a_dtype_or_a_type_name():
    t = tape.tensor([1.5, 2.0])
    assert (t.type(tape.float32).dtype, t.type("tape.LongTensor").tolist(),
            t.type("torch.FloatTensor").dtype, t.type(tape.float64) is t) == (
        tape.float32, [1, 2], tape.float32, True)


def test_type_refuses_a_name_that_is_not_a_tensor_type():
    with pytest.raises(ValueError, match="invalid type: 'tape.float32'"):
        tape.ones(1).type("tape.float32")


def test_double_and_float_casts():
    t = tape.ones(2)
    assert (t.double() is t, t.float().dtype) == (True, tape.float32)


# -- layout and metadata ---------------------------------------------------------------

@pytest.mark.parametrize("shape, strides", [((), ()), ((3,), (1,)), ((2, 3), (3, 1)), ((2, 3, 4), (12, 4, 1))])
def test_stride_is_c_order(shape, strides):
    assert tape.zeros(shape).stride() == strides


def test_stride_of_one_dim():
    assert (tape.ones(2, 3).stride(1), tape.ones(2, 3).stride(-2)) == (1, 3)


@pytest.mark.parametrize("dtype, size", [(tape.float64, 8), (tape.float32, 4), (tape.float16, 2), (tape.int64, 8),
                                         (tape.int32, 4), (tape.uint8, 1), (tape.bool, 1)])
def test_element_size(dtype, size):
    assert tape.ones(2, dtype=dtype).element_size() == size


def test_is_floating_point():
    assert (tape.ones(1).is_floating_point(), tape.is_floating_point(tape.tensor([1])),
            tape.ones(1).half().is_floating_point()) == (True, False, True)


def test_module_level_queries():
    assert (tape.is_tensor(tape.ones(1)), tape.is_tensor([1.0]), tape.numel(tape.ones(2, 3))) == (True, False, 6)


def test_numel_refuses_a_non_tensor():
    with pytest.raises(TypeError, match=r"numel\(\): argument 'input' \(position 1\) must be Tensor, not list"):
        tape.numel([1])


@pytest.mark.parametrize("dim", [0, -1, 1])
def test_size_of_a_0d_tensor_refuses_every_dim(dim):
    with pytest.raises(IndexError, match=f"Dimension specified as {dim} but tensor has no dimensions"):
        tape.tensor(1.0).size(dim)


def test_bool_of_an_empty_tensor_is_ambiguous():
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with no values is ambiguous"):
        bool(tape.tensor([]))


# -- new_* -----------------------------------------------------------------------------

def test_new_factories_take_the_tensors_dtype():
    i = tape.tensor([1, 2])
    assert (repr(i.new_zeros(2)), repr(i.new_ones((1, 2))), repr(i.new_full((2,), 3.5)),
            i.new_empty(size=(3,)).shape, repr(i.new_tensor([1.5]))) == (
        "tensor([0, 0])", "tensor([[1, 1]])", "tensor([3, 3])", (3,), "tensor([1])")


def test_new_factories_take_a_dtype_and_requires_grad():
    t = tape.ones(2, dtype=tape.float32)
    assert repr(t.new_ones(2, dtype=tape.int32)) == "tensor([1, 1], dtype=tape.int32)"
    assert repr(t.new_zeros(2, requires_grad=True)) == "tensor([0., 0.], dtype=tape.float32, requires_grad=True)"


def test_new_factories_do_not_require_grad_by_default():
    assert tape.ones(2, requires_grad=True).new_zeros(2).requires_grad is False


def test_new_tensor_from_a_tensor_warns_as_pytorch():
    with pytest.warns(UserWarning, match=r"rather than tensor.new_tensor\(sourceTensor\)"):
        tape.ones(2).new_tensor(tape.ones(2))


# -- bitwise and logical ops --------------------------------------------------------

_b = tape.tensor([True, False])
_i = tape.tensor([1, 2])


@pytest.mark.parametrize("make, expected", [
    (lambda: _b & _b, "tensor([ True, False])"),
    (lambda: _b | tape.tensor([False, False]), "tensor([ True, False])"),
    (lambda: _b ^ _b, "tensor([False, False])"),
    (lambda: ~_b, "tensor([False,  True])"),
    (lambda: ~_i, "tensor([-2, -3])"),
    (lambda: _b & True, "tensor([ True, False])"),
    (lambda: True & _b, "tensor([ True, False])"),
    (lambda: _b & 1, "tensor([1, 0])"),
    (lambda: 1 & _b, "tensor([1, 0])"),
    (lambda: _i ^ 3, "tensor([2, 1])"),
    (lambda: 5 | _i, "tensor([5, 7])"),
    (lambda: _i & _b, "tensor([1, 0])"),
    (lambda: _i.int() & _i, "tensor([1, 2])"),
    (lambda: _i.to(tape.uint8) & _i.to(tape.int8), "tensor([1, 2], dtype=tape.int16)"),
    (lambda: tape.bitwise_not(_i), "tensor([-2, -3])"),
    (lambda: _i.bitwise_and(1), "tensor([1, 0])"),
])
def test_bitwise_ops(make, expected):
    assert repr(make()) == expected


@pytest.mark.parametrize("make, kernel, name", [
    (lambda: tape.ones(2) & tape.ones(2), "bitwise_and", "Double"),
    (lambda: tape.ones(2, dtype=tape.float32) | 1, "bitwise_or", "Float"),
    (lambda: tape.ones(2, dtype=tape.float32) ^ 1.5, "bitwise_xor", "Float"),
    (lambda: _b & 1.5, "bitwise_and", "Double"),
    (lambda: tape.ones(2).bitwise_not(), "bitwise_not", "Double"),
])
def test_bitwise_ops_refuse_floats(make, kernel, name):
    with pytest.raises(NotImplementedError, match=f'"{kernel}_cpu" not implemented for \'{name}\''):
        make()


def test_invert_refuses_floats():
    with pytest.raises(TypeError, match=r"~ \(operator.invert\) is only implemented on integer and Boolean-type"):
        ~tape.ones(2)


def test_bitwise_ops_leave_other_operands_to_python():
    with pytest.raises(TypeError, match="unsupported operand type"):
        _b & None


def test_bitwise_ops_broadcast_with_pytorchs_error():
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(2\) must match the size of tensor b \(3\)"):
        _b & tape.ones(3, dtype=tape.bool)


def test_masks_from_comparisons_combine_without_grad():
    x = tape.tensor([1.5, 0.0, 3.0], requires_grad=True)
    mask = (x > 0) & ~(x > 2)
    assert (repr(mask), mask.requires_grad) == ("tensor([ True, False, False])", False)


@pytest.mark.parametrize("make, expected", [
    (lambda: tape.logical_and(_b, _i), "tensor([ True, False])"),
    (lambda: _b.logical_or(tape.tensor([0.0, 0.0])), "tensor([ True, False])"),
    (lambda: tape.logical_xor(_b, tape.tensor([1, 1])), "tensor([False,  True])"),
    (lambda: tape.tensor([1.5, 0.0], requires_grad=True).logical_not(), "tensor([False,  True])"),
    (lambda: tape.tensor(0.0).logical_not(), "tensor(True)"),
])
def test_logical_ops(make, expected):
    assert repr(make()) == expected


def test_logical_ops_take_tensors_only():
    with pytest.raises(TypeError, match=r"logical_xor\(\): argument 'other' \(position 2\) must be Tensor, not int"):
        tape.logical_xor(_b, 1)


_m = tape.tensor([[1, 0], [1, 1]])


@pytest.mark.parametrize("make, expected", [
    (lambda: _m.all(), "tensor(False)"),
    (lambda: _m.any(), "tensor(True)"),
    (lambda: _m.all(dim=1), "tensor([False,  True])"),
    (lambda: _m.any(0, keepdim=True), "tensor([[True, True]])"),
    (lambda: _m.all(dim=(0, 1)), "tensor(False)"),
    (lambda: _m.all(keepdim=True), "tensor([[False]])"),
    (lambda: tape.tensor([1.5, 2.0], requires_grad=True).all(), "tensor(True)"),
    (lambda: tape.tensor([]).all(), "tensor(True)"),
    (lambda: tape.tensor([]).any(), "tensor(False)"),
    (lambda: tape.tensor(2).all(0), "tensor(True)"),
    (lambda: tape.any(_b, 0), "tensor(True)"),
    (lambda: _i.to(tape.uint8).all(), "tensor(1, dtype=tape.uint8)"),
])
def test_all_and_any(make, expected):
    assert repr(make()) == expected


def test_all_refuses_a_dim_out_of_range():
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"):
        _m.all(2)


def test_unary_plus_is_the_tensor_itself():
    x = tape.tensor([1.0, -2.0], requires_grad=True)
    assert +x is x


def test_unary_plus_refuses_bool():
    with pytest.raises(RuntimeError, match="The `\\+` operator, on a bool tensor is not supported."):
        +_b


# -- factory keywords ------------------------------------------------------------------

@pytest.mark.parametrize("make, shape", [
    (lambda: tape.zeros(size=(2, 3)), (2, 3)),
    (lambda: tape.ones(size=[2]), (2,)),
    (lambda: tape.empty(size=(2,)), (2,)),
    (lambda: tape.rand(size=(2,)), (2,)),
    (lambda: tape.randn(size=(2, 1)), (2, 1)),
    (lambda: tape.randint(high=5, size=(3,)), (3,)),
    (lambda: tape.randint(low=1, high=5, size=(3,)), (3,)),
    (lambda: tape.Tensor(2, 3), (2, 3)),
])
def test_factories_take_size_keywords(make, shape):
    assert make().shape == shape


def test_full_and_arange_keywords():
    assert (repr(tape.full(size=(2,), fill_value=3)), repr(tape.arange(end=4)),
            repr(tape.arange(start=1, end=4)), repr(tape.arange(0, end=4, step=2))) == (
        "tensor([3, 3])", "tensor([0, 1, 2, 3])", "tensor([1, 2, 3])", "tensor([0, 2])")


def test_size_keyword_keeps_pytorchs_negative_size_error():
    with pytest.raises(RuntimeError, match="zeros: Dimension size must be non-negative."):
        tape.zeros(size=(-1,))


# -- repr wrapping -----------------------------------------------------------------------

# the first would fit in 79 characters on one line: PyTorch's count wraps it
@pytest.mark.parametrize("n, dtype, expected", [
    (6, tape.float64, "tensor([0.0000, 1.5000, 3.0000, 4.5000, 6.0000, 7.5000],\n"
                      "       grad_fn=<MulBackward0>)"),
    (7, tape.float32, "tensor([0.0000, 1.5000, 3.0000, 4.5000, 6.0000, 7.5000, 9.0000],\n"
                      "       dtype=tape.float32, grad_fn=<MulBackward0>)"),
    (12, tape.float32, "tensor([ 0.0000,  1.5000,  3.0000,  4.5000,  6.0000,  7.5000,  9.0000, 10.5000,\n"
                       "        12.0000, 13.5000, 15.0000, 16.5000], dtype=tape.float32,\n"
                       "       grad_fn=<MulBackward0>)"),
    (3, tape.float32, "tensor([0.0000, 1.5000, 3.0000], dtype=tape.float32, grad_fn=<MulBackward0>)"),
])
def test_repr_puts_a_suffix_past_the_line_width_on_a_new_line(n, dtype, expected):
    x = (tape.arange(float(n), dtype=dtype) * 1.5).requires_grad_()
    assert repr(x * 1) == expected


def test_repr_wraps_requires_grad_of_a_leaf():
    x = tape.tensor([0.0, 1.5, 3.0, 4.5, 6.0, 7.5, 9.0], requires_grad=True)
    assert repr(x) == ("tensor([0.0000, 1.5000, 3.0000, 4.5000, 6.0000, 7.5000, 9.0000],\n"
                       "       requires_grad=True)")


def test_repr_of_an_empty_tensor_lists_size_then_dtype():
    assert repr(tape.zeros(0, 3, dtype=tape.int32)) == "tensor([], size=(0, 3), dtype=tape.int32)"


# -- legacy constructor ------------------------------------------------------------------------

def test_legacy_constructor_takes_data_in_the_default_dtype():
    assert repr(tape.Tensor([1, 2])) == "tensor([1., 2.])"


def test_legacy_constructor_with_a_tuple_takes_it_as_data():
    assert tape.Tensor((2, 3)).tolist() == [2.0, 3.0]


def test_legacy_constructor_without_arguments_is_empty():
    assert repr(tape.Tensor()) == "tensor([])"


def test_legacy_constructor_follows_the_default_dtype():
    tape.set_default_dtype(tape.float32)
    try:
        assert tape.Tensor([1.0]).dtype == tape.float32
    finally:
        tape.set_default_dtype(tape.float64)


@pytest.mark.parametrize("op", [tape.sin, lambda x: x / tape.tensor([2, 2, 2]), lambda x: x + 0.5,
                                lambda x: x * 2.5, lambda x: 0.5 - x, lambda x: x ** 0.5])
def test_float_results_of_integer_tensors_take_the_default_dtype(op):
    # NumPy gives float64 for them whatever the default; PyTorch its default dtype
    tape.set_default_dtype(tape.float32)
    try:
        out = op(tape.tensor([1, 2, 3]))
    finally:
        tape.set_default_dtype(tape.float64)
    assert out.dtype == tape.float32


def test_legacy_constructor_refuses_a_number():
    with pytest.raises(TypeError, match=r"new\(\): data must be a sequence \(got float\)"):
        tape.Tensor(2.5)



def test_T_off_matrices_warns_once_as_pytorch(monkeypatch):
    from tape import _tensor
    monkeypatch.setattr(_tensor, "_WARNED", set())  # the process's once-only warnings, given afresh
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tape.ones(3).T.shape == (3,) and tape.ones(2, 3, 4).T.shape == (4, 3, 2)
        assert tape.tensor(1.0).T.shape == ()
        assert tape.ones(2, 3).T.shape == (3, 2)
    assert [str(w.message)[:24] for w in caught] == ["The use of `x.T` on tens",
                                                      "Tensor.T is deprecated o"]


def test_constants_dtype_limits_size_and_autograd_grad_modes_as_pytorch():
    # PyTorch 2.13: torch.pi and friends, finfo/iinfo of Python numbers with its repr, torch.Size a tuple
    assert (tape.pi, tape.e, tape.inf) == (math.pi, math.e, math.inf) and math.isnan(tape.nan)
    f32 = tape.finfo(tape.float32)
    assert (f32.eps, f32.max, f32.tiny, f32.bits, f32.dtype) == (1.1920928955078125e-07, 3.4028234663852886e+38,
                                                                  1.1754943508222875e-38, 32, "float32")
    assert repr(f32) == ("finfo(resolution=1e-06, min=-3.40282e+38, max=3.40282e+38, eps=1.19209e-07, "
                         "smallest_normal=1.17549e-38, tiny=1.17549e-38, dtype=float32)")
    assert tape.finfo().eps == 2.220446049250313e-16  # the default dtype's
    assert (tape.iinfo(tape.int64).max, tape.iinfo(tape.int32).bits) == (9223372036854775807, 32)
    with pytest.raises(TypeError, match=r"^torch\.finfo\(\) requires a floating point input type\."):
        tape.finfo(tape.int64)
    with pytest.raises(TypeError, match=r"^torch\.iinfo\(\) requires an integer input type\."):
        tape.iinfo(tape.float32)
    size = tape.Size([2, 3])
    assert (repr(size), size == (2, 3), size.numel(), tape.zeros(size).shape) == ("tape.Size([2, 3])", True, 6, (2, 3))
    x = tape.ones(2, requires_grad=True)
    with tape.autograd.no_grad():
        assert not (x * 2).requires_grad
    with tape.autograd.grad_mode.set_grad_enabled(False):
        with tape.autograd.enable_grad():
            assert (x * 2).requires_grad
