"""Grad modes, per thread: context managers that also work as decorators,
modelled on torch/autograd/grad_mode.py.
"""
import functools
import inspect
import sys
import threading
import warnings

from . import _tensor
from ._tape import state

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
           "is_inference_mode_enabled"]


def is_grad_enabled():
    """True when grad mode is on in this thread (ops record unless inference mode is on too)."""
    tp = state.tape
    return tp.grad_enabled or tp.grad_in_inference


def _set_grad_mode(mode):
    """Grad mode on or off; inside inference mode, ops still record nothing
    (tape.grad_enabled says whether they record), as PyTorch's."""
    tp = state.tape
    if tp.inference:
        tp.grad_in_inference = mode
    else:
        tp.grad_enabled = mode


def is_inference_mode_enabled():
    return state.tape.inference


def _wrap_generator(mode_factory, gen_fn):
    """A generator function whose every resumption (start, send, throw,
    close) runs under a fresh `mode_factory()`, the caller's code between
    them under the caller's mode, as torch.utils._contextlib's."""

    @functools.wraps(gen_fn)
    def generator_context(*args, **kwargs):
        gen = gen_fn(*args, **kwargs)
        # the generator finishing, however it is resumed, ends this one with its value
        try:
            with mode_factory():
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    # the generator learns of its closing under the mode too
                    with mode_factory():
                        gen.close()
                    raise
                except BaseException:
                    with mode_factory():
                        response = gen.throw(*sys.exc_info())
                else:
                    with mode_factory():
                        response = gen.send(request)
        except StopIteration as e:
            return e.value

    return generator_context


class _Mode:
    """Base: a context manager that saves and restores the thread's mode,
    and a decorator that runs the function (or generator) under a fresh
    copy of the mode (`clone`), as torch.utils._contextlib's
    _DecoratorContextManager."""

    def __call__(self, orig_func):
        if inspect.isclass(orig_func):
            warnings.warn("Decorating classes is deprecated and will be disabled in future versions. You "
                          "should only decorate functions or methods. To preserve the current behavior of "
                          "class decoration, you can directly decorate the `__init__` method and nothing "
                          "else.", FutureWarning, stacklevel=2)
            fn = lambda *args, **kwargs: orig_func(*args, **kwargs)  # noqa: E731 (PyTorch's wrapper)
        else:
            fn = orig_func
        if inspect.isgeneratorfunction(fn):
            return _wrap_generator(self.clone, fn)

        @functools.wraps(fn)
        def decorate_context(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return decorate_context

    def clone(self):
        return self.__class__()

    def __enter__(self):
        tp = state.tape
        self._saved = (tp.grad_enabled, tp.inference, tp.grad_in_inference)
        self._apply()
        return None

    def __exit__(self, *exc):
        tp = state.tape
        tp.grad_enabled, tp.inference, tp.grad_in_inference = self._saved
        return False


class _NoParamMode(_Mode):
    """A mode usable as `@mode`, `@mode()` and `with mode():`."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)

    def __init__(self, orig_func=None):
        pass


class no_grad(_NoParamMode):
    """Context manager and decorator: ops inside record nothing.

    >>> import tape
    >>> x = tape.tensor(1.0, requires_grad=True)
    >>> with tape.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    """

    def _apply(self):
        _set_grad_mode(False)


class enable_grad(_NoParamMode):
    """Context manager and decorator: ops inside record (undoes `no_grad`)."""

    def _apply(self):
        _set_grad_mode(True)


class set_grad_enabled(_Mode):
    """Set grad mode: as a plain call, a context manager or a decorator."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled(): argument 'enabled' (position 1) must be bool, not "
                            f"{type(mode).__name__}")
        self.mode = mode
        tp = state.tape
        self._prev = (tp.grad_enabled, tp.grad_in_inference)
        _set_grad_mode(self.mode)

    def __enter__(self):
        tp = state.tape
        self._saved = (self._prev[0], tp.inference, self._prev[1])
        _set_grad_mode(self.mode)

    def __call__(self, fn):
        tp = state.tape
        tp.grad_enabled, tp.grad_in_inference = self._prev
        return super().__call__(fn)

    def clone(self):
        return self.__class__(self.mode)

    def _apply(self):
        _set_grad_mode(self.mode)


_inference_lock = threading.Lock()
_inference_entered = [0]  # inference_mode(True) contexts open in all threads


def _mark_inference(t):
    if state.tape.inference:
        t._inference = True
        _tensor.inference_made[0] = True


class inference_mode(_Mode):
    """Like `no_grad` (and reported by `is_inference_mode_enabled`); the
    tensors made inside are inference tensors (`is_inference()`), which
    refuse requires_grad and in-place changes outside it, as PyTorch's."""

    def __init__(self, mode=True):
        self.mode = bool(mode)

    def __new__(cls, mode=True):
        if isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)

    def clone(self):
        return self.__class__(self.mode)

    def _apply(self):
        # inference_mode(False) turns grad mode on, even inside no_grad, as PyTorch's
        tp = state.tape
        tp.grad_enabled = not self.mode
        tp.inference = self.mode
        tp.grad_in_inference = False
        if self.mode:
            with _inference_lock:
                _inference_entered[0] += 1
                _tensor.inference_marks[:] = [_mark_inference]

    def __exit__(self, *exc):
        super().__exit__(*exc)
        if self.mode:
            with _inference_lock:
                _inference_entered[0] -= 1
                if not _inference_entered[0]:
                    _tensor.inference_marks.clear()
        return False
