"""Grad modes as decorators, as torch.autograd.grad_mode and
torch.utils._contextlib make them (values from PyTorch 2.13): generators
resumed under the mode however they are resumed, and classes decorated with
PyTorch's FutureWarning."""
import warnings

import pytest

import tape


def test_a_generator_runs_under_the_mode_and_its_caller_under_its_own():
    seen = []

    @tape.no_grad()
    def gen():
        while True:
            got = yield tape.is_grad_enabled()
            seen.append((got, tape.is_grad_enabled()))

    g = gen()
    first = (next(g), tape.is_grad_enabled())
    sent = (g.send(5), tape.is_grad_enabled())

    assert (first, sent, seen) == ((False, True), (False, True), [(5, False)])


def test_closing_a_generator_runs_its_exit_handler_under_the_mode():
    seen = []

    @tape.no_grad()
    def gen():
        try:
            yield
        except GeneratorExit:
            seen.append(tape.is_grad_enabled())
            raise

    g = gen()
    next(g)
    g.close()

    assert seen == [False] and tape.is_grad_enabled()


def test_a_generator_that_returns_on_a_thrown_exception_stops_with_its_value():
    @tape.no_grad()
    def coro():
        try:
            yield 1
        except ValueError:
            return ("caught", tape.is_grad_enabled())

    c = coro()
    next(c)
    with pytest.raises(StopIteration) as stopped:
        c.throw(ValueError("x"))

    assert stopped.value.value == ("caught", False)


def test_a_generator_that_yields_on_a_thrown_exception_goes_on_under_the_mode():
    @tape.enable_grad()
    def coro():
        while True:
            try:
                yield tape.is_grad_enabled()
            except ValueError:
                yield ("caught", tape.is_grad_enabled())

    with tape.no_grad():
        c = coro()
        seen = (next(c), c.throw(ValueError()), tape.is_grad_enabled())

    assert seen == (True, ("caught", True), False)


def test_a_generator_that_returns_at_once_gives_its_value_to_yield_from():
    @tape.no_grad()
    def empty():
        return 7
        yield

    def outer():
        return (yield from empty())

    with pytest.raises(StopIteration) as stopped:
        next(outer())

    assert stopped.value.value == 7


@pytest.mark.parametrize("decorator", [tape.no_grad(), tape.no_grad], ids=["no_grad()", "no_grad"])
def test_decorating_a_class_warns_and_runs_its_construction_under_the_mode(decorator):
    with pytest.warns(FutureWarning, match=r"^Decorating classes is deprecated and will be disabled in future "
                                           r"versions\. You should only decorate functions or methods\. To "
                                           r"preserve the current behavior of class decoration, you can "
                                           r"directly decorate the `__init__` method and nothing else\.$"):
        @decorator
        class Probe:
            def __init__(self):
                self.grad_enabled = tape.is_grad_enabled()

    assert Probe().grad_enabled is False and tape.is_grad_enabled()


def test_decorating_a_function_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        @tape.no_grad()
        def f():
            return tape.is_grad_enabled()

    assert f() is False


def test_inference_mode_decorates_a_function_given_in_place_of_the_mode():
    @tape.inference_mode
    def f():
        return tape.is_inference_mode_enabled()

    assert f() is True and not tape.is_inference_mode_enabled()


def test_enable_grad_inside_inference_mode_turns_grad_mode_on_and_records_nothing():
    # PyTorch 2.13: is_grad_enabled() is True there, and x * 2 does not require grad
    x = tape.tensor(1.0, requires_grad=True)
    with tape.inference_mode():
        assert not tape.is_grad_enabled()
        with tape.enable_grad():
            assert tape.is_grad_enabled() and tape.is_inference_mode_enabled()
            assert not (x * 2).requires_grad
            with tape.inference_mode(False):
                assert (x * 2).requires_grad
            assert not (x * 2).requires_grad
        with tape.set_grad_enabled(True):
            assert tape.is_grad_enabled() and not (x * 2).requires_grad
        assert not tape.is_grad_enabled()
    assert tape.is_grad_enabled() and (x * 2).requires_grad


def test_tensors_made_in_inference_mode_are_inference_tensors_as_pytorchs():
    x = tape.tensor(1.0, requires_grad=True)
    with tape.inference_mode():
        made, factory = x * 2, tape.ones(2)
        factory.add_(1)  # allowed inside
    assert made.is_inference() and factory.is_inference() and not x.is_inference()
    assert not (factory * 2).is_inference()
    with tape.no_grad():
        assert not tape.ones(1).is_inference()
    with pytest.raises(RuntimeError, match="^Inplace update to inference tensor outside InferenceMode is not allowed"):
        factory.add_(1)
    with pytest.raises(RuntimeError, match="^Inplace update to inference tensor outside InferenceMode"):
        factory[0] = 5.0
    with pytest.raises(RuntimeError, match="^Setting requires_grad=True on inference tensor outside InferenceMode"):
        factory.requires_grad_()
    assert factory.tolist() == [2.0, 2.0]  # nothing written


@pytest.mark.parametrize("use", [lambda x, a: x * a, lambda x, a: a / x, lambda x, a: x.pow(a), lambda x, a: x @ a,
                                 lambda x, a: tape.outer(x, a), lambda x, a: tape.maximum(x, a)],
                         ids=["mul", "div", "pow", "matmul", "outer", "maximum"])
def test_an_op_that_would_save_an_inference_tensor_raises_as_pytorchs(use):
    with tape.inference_mode():
        a = tape.ones(2)
    x = tape.ones(2, requires_grad=True)
    assert a[None].is_inference()  # a view of one is one
    with pytest.raises(RuntimeError, match="^Inference tensors cannot be saved for backward. Please do not use "
                                           "Tensors created in inference mode"):
        use(x, a)
    # what saves no inference tensor records, and the tape goes on
    y = (x + a) * a.clone() + tape.cat([x, a]).sum()
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
