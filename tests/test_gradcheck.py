"""tape.autograd.gradcheck and gradgradcheck, as torch.autograd's (messages
and outcomes from PyTorch 2.13 on the same functions): the inputs perturbed in
place, the outputs' shapes and dtypes checked under perturbation, and
PyTorch's further checks of backward."""
import warnings

import pytest

import tape
from tape.autograd import Function, gradcheck, gradgradcheck
from tape.autograd.gradcheck import GradcheckError


def _x():
    return tape.tensor([0.5, 1.5], requires_grad=True)


class WrongBackward(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 3


class NotScaledByGradOutput(Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2 if g.abs().sum().item() > 0 else tape.ones_like(g)


def test_a_function_reading_its_input_from_a_closure_sees_the_perturbation():
    w = _x()

    assert gradcheck(lambda t: t * w, (w,))


def test_0d_inputs_and_second_order():
    s = tape.tensor(0.7, requires_grad=True)

    assert gradcheck(lambda t: (t * t).sin(), (s,)) and gradgradcheck(lambda t: t.exp() * t, (s,))


def test_an_output_whose_shape_changes_under_perturbation_is_refused():
    with pytest.raises(AssertionError, match=r"^Expected `func` to return outputs with the same shape when inputs "
                                             r"are perturbed on index \(0,\) by 1e-06, but got: shapes "
                                             r"tape\.Size\(\[2\]\) and tape\.Size\(\[1\]\)\.$"):
        gradcheck(lambda t: t[:1] if t[0].item() > 0.5 else t, (_x(),))


def test_an_output_whose_dtype_changes_under_perturbation_is_refused():
    with pytest.raises(AssertionError, match=r"same dtype when inputs are perturbed on index \(0,\) by 1e-06, but "
                                             r"got: dtypes tape\.float32 and tape\.float64\.$"):
        gradcheck(lambda t: t.float() if t[0].item() < 0.5 else t * 1, (_x(),))


def test_no_differentiable_outputs_with_a_nonzero_numerical_gradient():
    with pytest.raises(GradcheckError, match="^Numerical gradient for function expected to be zero$"):
        gradcheck(lambda t: t.detach() * 2, (_x(),))


def test_no_differentiable_outputs_and_raise_exception_false():
    assert gradcheck(lambda t: t.detach() * 2, (_x(),), raise_exception=False) is False


def test_a_wrong_backward_gives_pytorchs_mismatch_message():
    with pytest.raises(GradcheckError) as raised:
        gradcheck(WrongBackward.apply, (_x(),))

    assert str(raised.value) == ("Jacobian mismatch for output 0 with respect to input 0,\n"
                                 "numerical:tensor([[2.0000, 0.0000],\n        [0.0000, 2.0000]])\n"
                                 "analytical:tensor([[3., 0.],\n        [0., 3.]])\n")


def test_fast_mode_passes_a_right_backward_and_catches_a_wrong_one():
    assert gradcheck(lambda t: (t * t).sin(), (_x(),), fast_mode=True)
    assert gradgradcheck(lambda t: (t * t).sin(), (_x(),), fast_mode=True)
    with pytest.raises(GradcheckError, match=r"(?s)^Jacobian mismatch for output 0 with respect to input 0,.*"
                                             r"in fast mode\. .*The max per-element difference \(slow mode\) is: "
                                             r"1\.0000000001"):
        gradcheck(WrongBackward.apply, (_x(),), fast_mode=True)


def test_forward_mode_is_checked_through_tape_func_jvp():
    assert gradcheck(lambda t: (t * t).sin(), (_x(),), check_forward_ad=True)
    assert gradgradcheck(lambda t: (t * t).sin(), (_x(),), check_fwd_over_rev=True)


def test_a_backward_not_scaled_by_grad_output_is_caught():
    with pytest.raises(GradcheckError, match="^backward not multiplied by grad_output$"):
        gradcheck(NotScaledByGradOutput.apply, (_x(),))


def test_a_backward_that_cannot_take_an_undefined_gradient_is_caught():
    class NeedsItsGradient(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            if g is None:
                raise RuntimeError("no gradient")
            return g * 2

    with pytest.warns(UserWarning, match="^Backwards compatibility: New undefined gradient support checking"):
        with pytest.raises(GradcheckError, match="^Expected backward function to handle undefined output grads"):
            gradcheck(NeedsItsGradient.apply, (_x(),))
    assert gradcheck(NeedsItsGradient.apply, (_x(),), check_undefined_grad=False)


def test_check_batched_grad_compares_a_batched_backward_with_one_per_grad_output():
    assert gradcheck(lambda t: (t * t).sin(), (_x(),), check_batched_grad=True)
    unused = tape.tensor(1.0, requires_grad=True)
    assert gradcheck(lambda t, u: (t * 2).sum(), (_x(), unused), check_batched_grad=True)

    class CountsItsBackwards(tape.autograd.Function):
        calls = 0

        @staticmethod
        def forward(ctx, t):
            return t * 1.0

        @staticmethod
        def backward(ctx, g):
            CountsItsBackwards.calls += 1
            return g * CountsItsBackwards.calls

    with pytest.raises(GradcheckError, match="^For output 0 and input 0:"):
        tape.autograd.gradcheck(CountsItsBackwards.apply, (_x(),), check_batched_grad=True, check_undefined_grad=False,
                                atol=1e9, rtol=1e9, nondet_tol=1e9)


def test_a_float32_input_warns_as_pytorch():
    y = tape.tensor([0.5, 1.5], dtype=tape.float32, requires_grad=True)

    with pytest.warns(UserWarning, match=r"^Input #0 requires gradient and is not a double precision floating "
                                         r"point or complex\. This check will likely fail if all the inputs are not "
                                         r"of double precision floating point or complex\. $"):
        with pytest.raises(GradcheckError, match="Jacobian mismatch"):
            gradcheck(lambda t: t * 2, (y,), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("kwargs, message", [
    (dict(check_forward_ad=False, check_backward_ad=False),
     "Expected at least one of check_forward_ad or check_backward_ad to be True"),
    (dict(check_batched_grad=True, check_backward_ad=False, check_forward_ad=True),
     "Setting check_batched_grad=True requires check_backward_ad to be True"),
    (dict(check_batched_forward_grad=True),
     "Setting check_batched_forward_grad=True requires check_forward_ad to be True"),
])
def test_inconsistent_options_are_refused_as_in_pytorch(kwargs, message):
    with pytest.raises(AssertionError, match=f"^{message}$"):
        gradcheck(lambda t: t * 2, (_x(),), **kwargs)


def test_pytorchs_other_keywords_are_accepted():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gradcheck(lambda t: (t * t).sin(), (_x(),), nondet_tol=1e-12, check_grad_dtypes=True, masked=True)
        assert gradgradcheck(lambda t: (t * t).sin(), (_x(),), gen_non_contig_grad_outputs=True,
                             check_grad_dtypes=True, masked=False)


def test_the_gradcheck_module_is_importable_beside_the_function_as_pytorchs():
    from tape.autograd.gradcheck import GradcheckError as error, gradcheck  # as from torch.autograd.gradcheck
    assert tape.autograd.gradcheck is gradcheck and issubclass(error, RuntimeError)
