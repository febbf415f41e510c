"""Anomaly detection (tape.autograd.detect_anomaly), against PyTorch 2.13's texts."""
import math
import warnings

import pytest

import tape

_ENABLED = "Anomaly Detection has been enabled"


@pytest.fixture(autouse=True)
def anomaly_off_after():
    yield
    tape.autograd.set_detect_anomaly(False)


def _detect(**kwargs):
    with pytest.warns(UserWarning, match=_ENABLED):
        return tape.autograd.detect_anomaly(**kwargs)


def test_nan_gradient_raises_and_warns_with_the_forward_call():
    x = tape.tensor([0.0, 1.0], requires_grad=True)
    with _detect():
        y = x.sqrt() * 0  # sqrt's gradient at 0 is inf, times the 0 from mul
        with pytest.warns(UserWarning, match=r"(?s)Error detected in SqrtBackward0\. Traceback of forward "
                                             r"call that caused the error:.*test_anomaly\.py"):
            with pytest.raises(RuntimeError, match=r"^Function 'SqrtBackward0' returned nan values in its "
                                                   r"0th output\.$"):
                y.sum().backward()


def test_the_index_is_the_input_whose_gradient_is_nan():
    a = tape.tensor(math.inf, requires_grad=True)
    b = tape.tensor(0.0, requires_grad=True)
    with _detect(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="Function 'MulBackward0' returned nan values in its 1th output"):
            ((a * b) * 0).backward()


def test_op_recorded_before_anomaly_mode_has_no_forward_information():
    x = tape.tensor(0.0, requires_grad=True)
    y = x.sqrt() * 0
    with _detect():
        with pytest.warns(UserWarning, match="No forward pass information available"):
            with pytest.raises(RuntimeError, match="SqrtBackward0"):
                y.backward()


def test_without_check_nan_the_nan_reaches_grad():
    x = tape.tensor([0.0, 1.0], requires_grad=True)
    with _detect(check_nan=False):
        (x.sqrt() * 0).sum().backward()
    assert math.isnan(x.grad[0].item()) and x.grad[1].item() == 0.0


def test_set_detect_anomaly_is_a_call_and_a_context_manager_that_restores():
    assert not tape.is_anomaly_enabled()
    tape.autograd.set_detect_anomaly(True, check_nan=False)
    assert tape.is_anomaly_enabled() and not tape.is_anomaly_check_nan_enabled()
    with tape.autograd.set_detect_anomaly(False):
        assert not tape.is_anomaly_enabled()
    assert tape.is_anomaly_enabled() and not tape.is_anomaly_check_nan_enabled()
    tape.autograd.set_detect_anomaly(False)
    assert not tape.is_anomaly_enabled() and tape.is_anomaly_check_nan_enabled()


def test_detect_anomaly_as_a_decorator():
    @_detect()
    def inside():
        return tape.is_anomaly_enabled()

    assert inside() and not tape.is_anomaly_enabled()


def test_backward_after_an_anomaly_is_right():
    x = tape.tensor([0.0, 1.0], requires_grad=True)
    with _detect(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError):
            (x.sqrt() * 0).sum().backward()
        (x * x).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 5.0]


def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught]


def test_an_in_place_error_warns_with_the_forward_call_of_the_node_that_saved_the_value():
    # PyTorch 2.13: the enabling warning, then "Error detected in PowBackward0"
    def run():
        with tape.autograd.detect_anomaly():
            a = tape.ones(5, requires_grad=True)
            d1 = a + 1
            d2 = d1 ** 2
            d1 += 1
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                tape.autograd.grad(d2.sum(), a)

    messages = _warnings_of(run)

    assert len(messages) == 2 and _ENABLED in messages[0]
    assert messages[1].startswith("Error detected in PowBackward0. Traceback of forward call that caused "
                                  "the error:\n") and "d2 = d1 ** 2" in messages[1]


def test_an_error_a_functions_backward_raises_warns_with_its_forward_call():
    class Boom(tape.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")

    def run():
        x = tape.tensor([1.0], requires_grad=True)
        with tape.autograd.detect_anomaly():
            y = Boom.apply(x)
            with pytest.raises(ValueError, match="boom"):
                y.sum().backward()

    messages = _warnings_of(run)

    assert len(messages) == 2
    assert messages[1].startswith("Error detected in BoomBackward. Traceback of forward call that caused "
                                  "the error:\n") and "y = Boom.apply(x)" in messages[1]
