"""tape.compile on the public API: every case runs a function compiled and
the same function eagerly on equal inputs and checks that the results, and
their first- and second-order gradients, are eager mode's, and counts the
recordings (`CompiledFunction.recordings`) to check what re-records: value
reads (a branch, a loop bound), a change of an argument's shape, dtype or
requires_grad, Python arguments, grad modes. Then closures and parameters
updated or rebound between calls, in-place ops, several outputs, and the
Python steps of a replay: structural ops, random ops, custom Functions, hooks,
autograd.grad and backward inside fn, a step whose rows change; exceptions,
nesting, threads, the tape.func
transforms in both orders, the issue's scalar chain, arrays with a bias, the
elementwise ops of the op table of tests/test_ops.py at edge values, and a
property test over random programs of them."""
import collections
import gc
import threading
import types
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tape
from tape import autograd, func
from test_ops import ELEMENTWISE_BINARY, ELEMENTWISE_UNARY
from test_threads import _in_threads

# what a recording that cannot replay natively warns, once (Note [Compiled replay])
EAGERLY = "runs eagerly on every call"
MAY_RUN_EAGERLY = pytest.mark.filterwarnings(f"ignore:tape.compile.*{EAGERLY}:UserWarning")


def leaf(value, requires_grad=True, dtype=tape.float64):
    return tape.tensor(value, dtype=dtype, requires_grad=requires_grad)


def flat(result):
    """The tensors and other values of a result (a tensor, or sequences and dicts of them), in order."""
    if isinstance(result, tape.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [v for item in result for v in flat(item)]
    if isinstance(result, dict):
        return [v for item in result.values() for v in flat(item)]
    return [result]


def weighted_total(tensors):
    """One scalar of all `tensors` (each summed, the k-th weighted by k + 1, so
    that outputs do not stand in for each other), or None if none needs grad."""
    total = None
    for k, t in enumerate(t for t in tensors if t.requires_grad):
        term = (t.sum() if t.dim() else t) * float(k + 1)
        total = term if total is None else total + term
    return total


def numbers(tensors):
    return [t.detach().numpy().copy() for t in tensors]


def evaluate(fn, args, order=2, closure=()):
    """fn(*args): the numbers of its result, then of the first- and (with
    order 2) second-order gradients of its weighted total with respect to the
    arguments that require grad and the tensors `closure` (zeros where unused)."""
    result = fn(*args)
    values = flat(result)
    tensors = [v for v in values if isinstance(v, tape.Tensor)]
    out = [numbers([v])[0] if isinstance(v, tape.Tensor) else v for v in values]
    out.append([(v.requires_grad, v.grad_fn is None) for v in tensors])
    leaves = [a for a in args if isinstance(a, tape.Tensor) and a.requires_grad] + list(closure)
    total = weighted_total(tensors)
    if total is None or not leaves:
        return out
    first = autograd.grad(total, leaves, create_graph=order > 1, allow_unused=True)
    out += numbers([g if g is not None else tape.zeros(x.shape) for g, x in zip(first, leaves)])
    if order > 1:
        second_total = weighted_total([g for g in first if g is not None])
        if second_total is not None:
            second = autograd.grad(second_total, leaves, allow_unused=True)
            out += numbers([g if g is not None else tape.zeros(x.shape) for g, x in zip(second, leaves)])
    return out


def assert_same(compiled, eager, rtol=1e-12, atol=1e-12):
    assert len(compiled) == len(eager)
    for c, e in zip(compiled, eager):
        if isinstance(e, np.ndarray):
            assert isinstance(c, np.ndarray) and c.dtype == e.dtype and c.shape == e.shape
            np.testing.assert_allclose(c, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            assert type(c) is type(e) and c == e


def check(compiled, fn, make_args, order=2, closure=(), **tolerance):
    """compiled(*args) against fn(*args), each on its own fresh args from make_args()."""
    assert_same(evaluate(compiled, make_args(), order, closure), evaluate(fn, make_args(), order, closure),
                **tolerance)


# -- the API

def test_compile_checks_its_arguments():
    with pytest.raises(RuntimeError, match=r"compile\(\) can only be applied to callables"):
        tape.compile(3)
    for size in [0, -1, 1.5, None]:
        with pytest.raises(ValueError, match="cache_size must be a positive int"):
            tape.compile(_scaled, cache_size=size)
    with pytest.raises(TypeError, match=r"compile\(\) got an unexpected keyword argument 'fusion'"):
        tape.compile(_scaled, fusion=True)


def test_torch_compile_options():
    """torch.compile's signature: fullgraph=True raises where fn would run
    eagerly, disable=True gives fn itself, recompile_limit sets cache_size,
    the other options change nothing."""
    assert tape.compile(_scaled, disable=True) is _scaled
    assert tape.compile(_scaled, recompile_limit=3).cache_size == 3
    compiled = tape.compile(_scaled, backend="inductor", mode="max-autotune", dynamic=False, fullgraph=True)
    for value in [0.5, -1.0]:
        check(compiled, _scaled, lambda: [leaf(value), leaf(1.5)])
    strict = tape.compile(fullgraph=True)(_strided)
    for _ in range(2):
        with pytest.raises(RuntimeError, match=r"tape.compile\(fullgraph=True\): _strided cannot be replayed "
                                               "natively: it needs Python steps, which replay under grad mode only"):
            with tape.no_grad():
                strict(leaf(np.ones(6)), leaf(1.5))


def test_decorator_forms_and_the_wrapped_function():
    @tape.compile
    def plain(x):
        """Its docstring."""
        return x.sin()

    @tape.compile(cache_size=3)
    def sized(x):
        return x.cos()

    assert plain.__name__ == "plain" and plain.__doc__ == "Its docstring." and sized.cache_size == 3
    check(plain, lambda x: x.sin(), lambda: [leaf(0.5)])
    check(sized, lambda x: x.cos(), lambda: [leaf(0.5)])


def test_cache_size_bounds_the_recordings_kept_for_a_key():
    compiled = tape.compile(_branch_on_item, cache_size=2)
    for x in [0.5, -0.5] * 3:
        check(compiled, _branch_on_item, lambda: [leaf(x), leaf(1.5)])
    assert compiled.recordings == 2
    compiled = tape.compile(_branch_on_item, cache_size=1)
    with pytest.warns(UserWarning, match="_branch_on_item runs eagerly on every call: its guards failed on 1 "
                                         "recordings") as warned:
        for x in [0.5, -0.5] * 3:
            check(compiled, _branch_on_item, lambda: [leaf(x), leaf(1.5)])
    assert compiled.recordings == 1 and len(warned) == 1


class _Squared(autograd.Function):
    calls = 0

    @staticmethod
    def forward(ctx, a):
        _Squared.calls += 1
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        return 2.0 * a * g


def _function_of_a_constant(x, c):
    _Squared.apply(c)  # its result unused, its input needing no grad: no row, but user code all the same
    return x * 2.0


def test_a_custom_function_that_records_no_row_runs_on_every_call():
    compiled = tape.compile(_function_of_a_constant)
    for value in [1.0, 2.0, 3.0]:
        _Squared.calls = 0
        check(compiled, _function_of_a_constant, lambda: [leaf(value), leaf(value, requires_grad=False)])
        assert _Squared.calls == 2  # once compiled, once eagerly
    assert compiled.recordings == 1


def _function_then_item(x):
    y = _Squared.apply(x)
    return y * y.sum().item()


@MAY_RUN_EAGERLY
def test_a_value_read_that_changes_every_call_ends_in_eager_calls():
    """Past cache_size recordings of one key fn runs eagerly, as torch.compile
    past its recompile_limit: a custom Function's forward, which each failed
    replay runs once more, runs once per call again."""
    compiled = tape.compile(_function_then_item, cache_size=2)
    runs = []
    for value in [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]:
        _Squared.calls = 0
        check(compiled, _function_then_item, lambda: [leaf([value])])
        runs.append(_Squared.calls)
    assert compiled.recordings == 2 and runs[-2:] == [2, 2]  # one compiled call and one eager call each


# -- value reads: branches and loop bounds

def _branch_on_item(x, a):
    y = x.sin() * a
    if y.item() > 0:
        return y * x + a
    return (y - x).exp()


def _branch_on_float(x, a):
    y = x.sin() * a
    if float(y) > 0:
        return y * x + a
    return (y - x).exp()


def _branch_on_truth(x, a):
    y = (x.sin() * a).relu()
    if y:
        return y * x + a
    return (x - a).exp()


def _branch_on_comparison(x, a):
    y = x.sin() * a
    if y > 0:
        return y * x + a
    return (y - x).exp()


TRUTH_POINTS = [0.5, -0.5, 0.7, -0.8, 1.1, -1.3, 0.9, -0.2]


@pytest.mark.parametrize("fn", [_branch_on_truth, _branch_on_comparison])
def test_a_branch_on_the_truth_of_a_value_replays_both_branches(fn):
    compiled = tape.compile(fn)
    for k, x in enumerate(TRUTH_POINTS):
        check(compiled, fn, lambda: [leaf(x), leaf(1.5)])
        assert compiled.recordings == min(k + 1, 2)


@pytest.mark.parametrize("fn", [
    _branch_on_item,
    pytest.param(_branch_on_float, marks=pytest.mark.filterwarnings(
        "ignore:Converting a tensor with requires_grad=True to a scalar:UserWarning")),
])
def test_a_branch_on_a_value_read_replays_both_branches(fn):
    """item() and float() give fn the value itself, so that is what is
    guarded: inputs that alternate between two values replay both recordings,
    and a new value re-records."""
    compiled = tape.compile(fn)
    for k, x in enumerate([0.5, -0.5] * 4):
        check(compiled, fn, lambda: [leaf(x), leaf(1.5)])
        assert compiled.recordings == min(k + 1, 2)
    for x in [0.7, -0.8, 0.5]:
        check(compiled, fn, lambda: [leaf(x), leaf(1.5)])


def _unrolled(x, n):
    y = x
    for _ in range(int(n)):
        y = y.sin() * x + 0.5
    return y


def _unrolled_from_a_value(x, n):
    y = x
    for _ in range(int(n * 2.0)):
        y = y.sin() * x + 0.5
    return y


@pytest.mark.parametrize("fn, dtype, bounds", [
    (_unrolled, tape.float64, [3, 5, 3, 5, 1, 3]),
    (_unrolled_from_a_value, tape.float64, [3, 5, 3, 5, 0, 3]),
    (_unrolled, tape.float64, [3, 0, 3, 0]),
    (_unrolled, tape.int64, [3, 5, 3, 5, 1, 3]),
])
def test_a_loop_bound_read_from_a_tensor(fn, dtype, bounds):
    compiled = tape.compile(fn)
    for k, n in enumerate(bounds):
        check(compiled, fn, lambda: [leaf(0.3 + 0.1 * k), leaf(n, requires_grad=False, dtype=dtype)])
    assert compiled.recordings == len(set(bounds))


def test_a_recording_without_rows_checks_its_guards():
    def fn(x, n):
        return x * 2.0 if n.item() > 0 else x

    compiled = tape.compile(fn)
    for n in [0.0, 3.0]:
        check(compiled, fn, lambda: [leaf(1.0), leaf(n, requires_grad=False)])


# -- the guard key: arguments and modes

def _scaled(x, a, k=2.0):
    return (x * a).sin() * k + x


@MAY_RUN_EAGERLY
def test_shape_dtype_requires_grad_and_python_arguments_are_guarded():
    compiled = tape.compile(_scaled)
    calls = [  # (x, a, k, recordings after the call)
        (lambda: leaf(0.5), lambda: leaf(1.5), 2.0, 1),
        (lambda: leaf(-0.25), lambda: leaf(0.5), 2.0, 1),
        (lambda: leaf([0.5, 1.0, -2.0]), lambda: leaf(1.5), 2.0, 2),
        (lambda: leaf([[0.5, 1.0, -2.0]] * 2), lambda: leaf([1.5, 2.0, 0.5]), 2.0, 3),
        (lambda: leaf(0.5, dtype=tape.float32), lambda: leaf(1.5, dtype=tape.float32), 2.0, 4),
        (lambda: leaf(0.5), lambda: leaf(1.5, requires_grad=False), 2.0, 5),
        (lambda: leaf(0.5, requires_grad=False), lambda: leaf(1.5, requires_grad=False), 2.0, 6),
        (lambda: leaf(0.5), lambda: leaf(1.5), 3.0, 7),
        (lambda: leaf(0.5), lambda: leaf(1.5), 2.0, 7),
        (lambda: leaf(0.75), lambda: leaf(1.5, requires_grad=False), 2.0, 7),
        (lambda: leaf([0.5, 1.0, -2.0]), lambda: leaf(-1.5), 2.0, 7),
        (lambda: leaf(0.5), lambda: leaf(1.5), 3.0, 7),
    ]
    for x, a, k, recordings in calls:
        check(compiled, _scaled, lambda: [x(), a(), k])
        assert compiled.recordings == recordings


def test_keyword_arguments_are_guarded():
    compiled = tape.compile(_scaled)
    for k in [2.0, 3.0, 2.0, -1.0]:
        x, a = leaf(0.5), leaf(1.5)
        assert compiled(x, a, k=k).item() == pytest.approx(_scaled(x, a, k=k).item(), rel=1e-15)
    assert compiled.recordings == 3


def test_strides_of_arguments_and_outside_tensors_are_guarded():
    """A transposed argument or outside tensor of a recorded shape records
    again: view() of a result raises as in eager mode."""
    base = leaf(np.arange(12.0).reshape(3, 4))
    viewed = tape.compile(lambda x: (x * 2).view(-1))
    for k in range(4):
        x = base.t() if k % 2 else base.t().contiguous()
        if k % 2:
            with pytest.raises(RuntimeError, match="view size is not compatible with input tensor's size and stride"):
                viewed(x)
        else:
            check(viewed, lambda x: (x * 2).view(-1), lambda: [x])
    w = leaf(np.arange(6.0).reshape(2, 3))
    scaled = tape.compile(lambda x: x * w.view(-1))
    x = leaf(np.ones(6))
    check(scaled, lambda x: x * w.view(-1), lambda: [x], closure=[w])
    w.data = tape.tensor(np.arange(6.0).reshape(3, 2)).t()
    for _ in range(2):
        with pytest.raises(RuntimeError, match="view size is not compatible with input tensor's size and stride"):
            scaled(x)


@MAY_RUN_EAGERLY
def test_an_argument_that_needs_no_grad_gets_no_gradient():
    compiled = tape.compile(_scaled)
    for value in [0.5, -1.0, 2.0]:
        x, a = leaf(value), leaf(1.5, requires_grad=False)
        out = compiled(x, a)
        assert out.requires_grad and out.grad_fn is not None
        out.backward()
        assert a.grad is None
        assert x.grad.item() == pytest.approx(np.cos(value * 1.5) * 1.5 * 2.0 + 1.0, rel=1e-14)
    x, a = leaf(0.5, requires_grad=False), leaf(1.5, requires_grad=False)
    out = compiled(x, a)
    assert not out.requires_grad and out.grad_fn is None
    assert out.item() == pytest.approx(np.sin(0.75) * 2.0 + 0.5, rel=1e-15)


def test_add_and_sub_with_alpha_replay_for_operands_that_need_no_grad():
    # an optimizer's step: p.add(g, alpha=-lr); the scaled operand was a product computed without tracking
    def step(p, g):
        return tape.add(p, g, alpha=-0.1).sin() + tape.sub(g, p, alpha=2.5)
    compiled = tape.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for value in [0.5, -1.0, 2.0]:
            check(compiled, step, lambda: (leaf([value, 1.0]), leaf([2.0, value], requires_grad=False)))
    assert compiled.recordings == 1


def test_an_argument_returned_as_it_is():
    def fn(x, a):
        return x, a, x * a

    compiled = tape.compile(fn)
    for value in [0.5, 2.0]:
        x, a = leaf(value), leaf(3.0, requires_grad=False)
        out = compiled(x, a)
        assert out[0] is x and out[1] is a
        assert out[2].item() == value * 3.0
        check(compiled, fn, lambda: [leaf(value), leaf(3.0, requires_grad=False)])


@pytest.mark.parametrize("mode", [tape.no_grad, tape.inference_mode])
def test_no_grad_and_inference_mode_around_the_call(mode):
    compiled = tape.compile(_scaled)
    for value in [0.5, -1.0, 0.25]:
        x, a = leaf(value), leaf(1.5)
        with mode():
            out, expected = compiled(x, a), _scaled(x, a)
        assert out.item() == pytest.approx(expected.item(), rel=1e-15)
        assert (out.requires_grad, out.grad_fn) == (expected.requires_grad, expected.grad_fn) == (False, None)
        check(compiled, _scaled, lambda: [leaf(value), leaf(1.5)])


def _counting_when_tracked(count):
    def fn(x, w):
        y = x * w
        if y.requires_grad:  # only when the call tracks gradients: a step counter
            count.add_(1.0)
        return y.sum() * (2.0 if tape.is_grad_enabled() else 3.0)
    return fn


def test_a_call_under_no_grad_sees_grad_mode_off():
    """A call under no_grad records with grad mode on after an eager call: where
    the two differ (is_grad_enabled(), requires_grad, a change made only with
    grad mode on), the recording's changes are undone and calls are eager, with
    no warning the eager call did not give."""
    runs = []
    for compiled in [True, False]:
        count = tape.zeros(())
        fn = _counting_when_tracked(count)
        f = tape.compile(fn) if compiled else fn
        with tape.no_grad(), warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            outs = [f(leaf([1.0, 2.0]), leaf([3.0, 4.0])).item() for _ in range(3)]
        runs.append([outs, count.item(), [str(w.message) for w in warned if "computes otherwise" not in str(w.message)]])
        outs = [f(leaf([1.0, 2.0]), leaf([3.0, 4.0])).item() for _ in range(3)]  # with grad mode on: replays
        runs[-1] += [outs, count.item()]
    assert runs[0] == runs[1] == [[33.0] * 3, 0.0, [], [22.0] * 3, 3.0]


def test_a_call_under_no_grad_gives_no_warning_about_requires_grad():
    def fn(x):
        y = x * 2.0
        _ = y.grad  # a non-leaf's .grad with grad mode on only
        return x * float(x.sum())  # float() of a tensor that requires grad, with grad mode on only

    compiled = tape.compile(fn)
    with tape.no_grad(), warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        for value in [1.0, 1.0, 1.0]:
            check(compiled, fn, lambda: [leaf([value])], order=0)
    assert warned == []
    assert compiled.recordings == 1


def test_grad_mode_is_part_of_the_key():
    compiled = tape.compile(_scaled)
    for value in [0.5, -1.0]:
        with tape.no_grad():
            compiled(leaf(value), leaf(1.5))
        compiled(leaf(value), leaf(1.5))
    assert compiled.recordings == 2


@MAY_RUN_EAGERLY
def test_the_default_dtype_is_part_of_the_key():
    def fn(x):
        return x * tape.tensor(0.1) + x.sin()

    compiled = tape.compile(fn)
    check(compiled, fn, lambda: [leaf(1.5)])
    tape.set_default_dtype(tape.float32)
    try:
        check(compiled, fn, lambda: [leaf(1.5)])
        check(compiled, fn, lambda: [leaf(0.5, dtype=tape.float32)])
    finally:
        tape.set_default_dtype(tape.float64)
    check(compiled, fn, lambda: [leaf(-1.5)])
    assert compiled.recordings == 3


@pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled:UserWarning",
                            "ignore:Error detected in:UserWarning")
def test_anomaly_mode_around_the_call():
    def fn(x, a):
        return (x * a).sqrt() + x

    compiled = tape.compile(fn)
    check(compiled, fn, lambda: [leaf(2.0), leaf(0.5)])
    with tape.autograd.detect_anomaly():
        check(compiled, fn, lambda: [leaf(3.0), leaf(0.5)])
        errors = []
        for f in [compiled, fn]:
            with pytest.raises(RuntimeError) as raised:
                f(leaf(0.0), leaf(0.5)).backward()
            errors.append(str(raised.value))
        assert errors[0] == errors[1] and "returned nan values" in errors[0]
    check(compiled, fn, lambda: [leaf(0.25), leaf(0.5)])


@MAY_RUN_EAGERLY
def test_no_grad_inside_fn():
    def fn(x, a):
        with tape.no_grad():
            c = x * a
        return (x * c).sin()

    compiled = tape.compile(fn)
    for value in [0.5, -1.0, 0.25]:
        check(compiled, fn, lambda: [leaf(value), leaf(1.5)])


# -- closures, in-place ops

def test_a_compiled_method_whose_parameters_are_updated_in_place():
    class Model:
        def __init__(self, w):
            self.w = leaf(w)

        def loss(self, x):
            return ((x * self.w).sin() * self.w).exp()

        compiled_loss = tape.compile(loss)

    models = [Model([0.5, -1.0]), Model([2.0, 0.25])]
    eager_models = [Model([0.5, -1.0]), Model([2.0, 0.25])]
    for step in range(3):
        for model, eager in zip(models, eager_models):
            x = [0.1 * step, 1.0]
            check(model.compiled_loss, eager.loss, lambda: [leaf(x)])
            for m, loss in [(model, model.compiled_loss), (eager, eager.loss)]:
                loss(leaf(x, requires_grad=False)).sum().backward()
                with tape.no_grad():
                    m.w -= 0.1 * m.w.grad
                m.w.grad = None
            np.testing.assert_allclose(model.w.detach().numpy(), eager.w.detach().numpy(), rtol=1e-14)
    assert Model.compiled_loss.recordings == 4  # each model with x that requires grad, and not


def _model():
    """A model whose parameters fn reads from its closure."""
    w = leaf([0.5, -0.3, 0.8])
    b = leaf(0.1)

    def fn(x):
        return ((x * w).tanh() + b).square()

    return fn, (w, b)


def test_closure_parameters_updated_in_place_between_calls():
    eager, eager_params = _model()
    fn, params = _model()
    compiled = tape.compile(fn)
    for step in range(6):
        inputs = [0.2 * step - 0.5, 1.0, 0.3 * step]
        losses = []
        for f, ps in [(compiled, params), (eager, eager_params)]:
            loss = f(leaf(inputs, requires_grad=False)).sum()
            loss.backward()
            with tape.no_grad():
                for p in ps:
                    p -= 0.1 * p.grad
                    p.grad = None
            losses.append(loss.item())
        assert losses[0] == pytest.approx(losses[1], rel=1e-13, abs=1e-15)
        for p, q in zip(params, eager_params):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-13, atol=1e-15)
    assert compiled.recordings == 1


WEIGHT = leaf(0.5)  # a global parameter, rebound by test_a_parameter_rebound_to_a_new_tensor_between_calls


def _reading_a_parameter(path):
    """fn reading its parameter w through `path`, and the function that rebinds w."""
    if path == "global":
        def rebind(w):
            global WEIGHT
            WEIGHT = w

        return (lambda x: (x * WEIGHT).sin()), rebind
    if path == "closure":
        w = None

        def rebind(new):
            nonlocal w
            w = new

        return (lambda x: (x * w).sin()), rebind
    holder = types.SimpleNamespace(w=None) if path == "attribute" else {}
    if path == "attribute":
        return (lambda x: (x * holder.w).sin()), lambda w: setattr(holder, "w", w)
    return (lambda x: (x * holder["w"]).sin()), lambda w: holder.__setitem__("w", w)


@pytest.mark.parametrize("path", ["global", "closure", "attribute", "dict"])
@pytest.mark.parametrize("shapes", [[(), (), ()], [(), (2,), ()]], ids=["same-shape", "new-shape"])
def test_a_parameter_rebound_to_a_new_tensor_between_calls(path, shapes):
    """The functional update `w = (w - lr * g).detach().requires_grad_()`."""
    fn, rebind = _reading_a_parameter(path)
    compiled = tape.compile(fn)
    for k, shape in enumerate(shapes):
        w = leaf(np.full(shape, 0.5 + k))
        rebind(w)
        check(compiled, fn, lambda: [leaf(0.25)], closure=[w])


def _attribute_rebound_old_kept():
    model = types.SimpleNamespace(w=leaf(0.5))
    history = [model.w]  # what an optimizer's state or a log of parameters holds

    def change():
        model.w = leaf(3.0)
        history.append(model.w)

    return (lambda x: (x * model.w).sin()), change, lambda: [model.w]


def _dict_entries_swapped():
    params = {"a": leaf(1.0), "b": leaf(2.0)}

    def change():
        params["a"], params["b"] = params["b"], params["a"]

    return (lambda x: x * params["a"] + params["b"]), change, lambda: list(params.values())


def _layers(layers):
    """fn applying the layers it reads through `layers()` at each call."""
    def fn(x):
        for w in layers():
            x = (x * w).tanh()
        return x

    return fn


def _list_reordered():
    layers = [leaf(0.5), leaf(2.0)]
    return _layers(lambda: layers), layers.reverse, lambda: list(layers)


def _list_appended():
    layers = [leaf(0.5), leaf(2.0)]
    return _layers(lambda: layers), lambda: layers.append(leaf(3.0)), lambda: list(layers)


def _list_attribute_replaced_old_kept():
    model = types.SimpleNamespace(layers=[leaf(0.5), leaf(2.0)])
    history = [model.layers]

    def change():
        model.layers = [leaf(3.0), leaf(0.25)]
        history.append(model.layers)

    return _layers(lambda: model.layers), change, lambda: list(model.layers)


def _nested_object_replaced_old_kept():
    model = types.SimpleNamespace(inner=types.SimpleNamespace(w=leaf(0.5)))
    history = [model.inner]

    def change():
        model.inner = types.SimpleNamespace(w=leaf(3.0))
        history.append(model.inner)

    return (lambda x: (x * model.inner.w).sin()), change, lambda: [model.inner.w]


class _Slotted:
    __slots__ = ("w",)


def _slot_rebound_old_kept():
    layer = _Slotted()
    layer.w = leaf(0.5)
    history = [layer.w]

    def change():
        layer.w = leaf(3.0)
        history.append(layer.w)

    return (lambda x: (x * layer.w).sin()), change, lambda: [layer.w]


PARAMS = ()


def _global_tuple_rebound_old_kept():
    global PARAMS
    PARAMS = (leaf(0.5),)
    history = list(PARAMS)

    def change():
        global PARAMS
        PARAMS = (leaf(3.0),)
        history.extend(PARAMS)

    return (lambda x: (x * PARAMS[0]).sin()), change, lambda: list(PARAMS)


@pytest.mark.parametrize("make", [
    _attribute_rebound_old_kept, _dict_entries_swapped, _list_reordered, _list_appended,
    _list_attribute_replaced_old_kept, _nested_object_replaced_old_kept, _slot_rebound_old_kept,
    _global_tuple_rebound_old_kept,
], ids=["attribute-old-kept", "dict-swapped", "list-reordered", "list-appended", "list-attribute-replaced",
        "nested-object-replaced", "slot-rebound", "global-tuple-rebound"])
def test_parameters_reached_through_a_container_that_changes_between_calls(make):
    fn, change, params = make()
    compiled = tape.compile(fn)
    check(compiled, fn, lambda: [leaf(2.0)], closure=params())
    change()
    for _ in range(2):  # the first records again, the second replays that recording
        check(compiled, fn, lambda: [leaf(2.0)], closure=params())
    assert compiled.recordings == 2


def test_a_closure_value_read_is_guarded():
    w = leaf(0.5)

    def fn(x):
        if w.item() > 0:
            return x * w
        return (x * w).exp()

    compiled = tape.compile(fn)
    for step in [0.0, -1.0, 0.0, 1.0, 0.0]:
        with tape.no_grad():
            w += step
        check(compiled, fn, lambda: [leaf(2.0)], closure=[w])
    assert compiled.recordings == 2


@pytest.mark.parametrize("read", [lambda n: float(n.tolist()[1]), lambda n: n[1].item(), lambda n: int(n[0])],
                         ids=["tolist", "item", "int"])
@MAY_RUN_EAGERLY
def test_value_reads_of_an_argument_are_guarded(read):
    def fn(x, n):
        return x * read(n)

    compiled = tape.compile(fn)
    for n in [[1.0, 2.0], [1.0, 2.0], [1.0, 3.0], [2.0, 3.0], [1.0, 2.0]]:
        check(compiled, fn, lambda: [leaf(0.5), leaf(n, requires_grad=False)])


@pytest.mark.parametrize("fn, ks", [
    (lambda x, k: x[:k] * 2.0, [1, 2, 3, 3, 4]),
    (lambda x, k: x[k:] * 2.0, [0, 1, 3, 1]),
    (lambda x, k: x[::k] * 2.0, [1, 2, 3, 2]),
    (lambda x, k: x[k] * 2.0, [0, 1, 3, 1]),
], ids=["stop", "start", "step", "index"])
@MAY_RUN_EAGERLY
def test_an_index_given_as_a_tensor_is_guarded(fn, ks):
    compiled = tape.compile(fn)
    for k in ks:
        check(compiled, fn, lambda: [leaf([1.0, 2.0, 3.0, 4.0]), tape.tensor(k)])


@pytest.mark.parametrize("compare", [tape.equal, tape.allclose, lambda x, y: x.allclose(y), lambda x, y: x.equal(y)],
                         ids=["equal", "allclose", "Tensor.allclose", "Tensor.equal"])
@MAY_RUN_EAGERLY
def test_a_branch_on_equal_or_allclose_is_guarded(compare):
    def fn(x, y):
        return x * 2.0 if compare(x.detach(), y) else x - 1.0

    compiled = tape.compile(fn)
    for y in [[1.0, 2.0], [1.0, 2.0], [0.0, 2.0], [1.0, 2.0], [0.0, 2.0]]:
        check(compiled, fn, lambda: [leaf([1.0, 2.0]), leaf(y, requires_grad=False)])
    assert compiled.recordings == 2


@pytest.mark.parametrize("fn", [
    lambda x, n: x * 2.0 if n.requires_grad else x * 3.0,
    lambda x, n: x * float(n.numpy()[1]),
    lambda x, n: x * float(n[1]),
    lambda x, n: x * n.mul_(2.0),
], ids=["requires_grad", "numpy", "float", "in-place"])
@MAY_RUN_EAGERLY
def test_an_argument_that_needs_no_grad_looks_as_in_eager_mode_inside_fn(fn):
    compiled = tape.compile(fn)
    for n in [[1.0, 2.0], [3.0, 4.0]]:
        runs = []
        for f in [compiled, fn]:
            arg = leaf(n, requires_grad=False)
            runs.append([*evaluate(f, [leaf(0.5), arg]), arg.numpy().copy()])
        assert_same(*runs)


def _normalising(running):
    """fn that updates a running mean of its input (a buffer from its closure) in place, as batch norm does."""
    def fn(x):
        with tape.no_grad():
            running.mul_(0.9).add_(x.detach() * 0.1)
        return (x - running).tanh()

    return fn


@pytest.mark.parametrize("shape", [(), (3,)])
def test_a_buffer_updated_in_place_inside_fn(shape):
    running, eager_running = tape.zeros(shape), tape.zeros(shape)
    fn, eager = _normalising(running), _normalising(eager_running)
    compiled = tape.compile(fn)
    for step in range(4):
        check(compiled, eager, lambda: [leaf(np.full(shape, 0.5 * step - 0.25))])
        assert_same([running.numpy()], [eager_running.numpy()])
    assert compiled.recordings == 1


def _accumulate(acc, x):
    acc.add_(x.sin())
    return acc * x


@pytest.mark.parametrize("requires_grad", [False, True])
def test_an_in_place_op_on_an_argument(requires_grad):
    """acc is a plain tensor, or a non-leaf computed from a leaf that requires grad."""
    compiled = tape.compile(_accumulate)
    for value in [0.5, -1.0, 0.25]:
        runs = []
        for f in [compiled, _accumulate]:
            root, x = leaf([1.0, 2.0], requires_grad=requires_grad), leaf(value)
            acc = root * 1.0
            out = f(acc, x)
            out.sum().backward()
            runs.append([acc.detach().numpy().copy(), out.detach().numpy(), x.grad.numpy(),
                         *([root.grad.numpy()] if requires_grad else [])])
        assert_same(*runs)
    assert compiled.recordings == 1


@MAY_RUN_EAGERLY
def test_an_in_place_op_on_a_leaf_that_requires_grad_raises_as_in_eager_mode():
    compiled = tape.compile(_accumulate)
    with pytest.raises(RuntimeError) as eager:
        _accumulate(leaf([1.0, 2.0]), leaf(0.5))
    for _ in range(2):
        with pytest.raises(RuntimeError) as raised:
            compiled(leaf([1.0, 2.0]), leaf(0.5))
        assert str(raised.value) == str(eager.value)
    check(compiled, _accumulate, lambda: [leaf([1.0, 2.0]) * 1.0, leaf(0.5)])


def _add_then_branch(x, buf):
    buf.add_(x.detach())
    buf[0] = buf[0] * 2.0
    if x.sum() > 0:
        return x * buf
    return x - buf


@pytest.mark.parametrize("shape", [(), (2,)])
def test_an_in_place_change_before_a_branch_that_goes_the_other_way_happens_once(shape):
    """The replay of one branch changes buf, then its guard fails: buf is set
    back before fn records the other branch, so it changes once per call."""
    compiled = tape.compile(_add_then_branch if shape else lambda x, buf: _add_then_branch(x, buf.view(1)))
    eager_fn = _add_then_branch if shape else lambda x, buf: _add_then_branch(x, buf.view(1))
    buf, eager_buf = tape.ones(shape), tape.ones(shape)
    for value in [1.0, 0.5, -1.0, 2.0, -0.5, -0.25]:
        bufs = iter([buf, eager_buf])
        check(compiled, eager_fn, lambda: [leaf(np.full(shape, value)), next(bufs)], order=1)
        assert_same([buf.numpy()], [eager_buf.numpy()])
        assert buf._version == eager_buf._version
    if shape:  # one recording of each branch
        assert compiled.recordings == 2


def _draw_and_update(x, buf):
    buf.add_(1.0)
    return x * tape.randn(x.shape)


@MAY_RUN_EAGERLY
@pytest.mark.parametrize("mode", [tape.no_grad, tape.inference_mode])
def test_in_place_changes_and_random_numbers_under_no_grad_happen_once(mode):
    compiled = tape.compile(_draw_and_update)
    for _ in range(3):
        runs = []
        for f in [compiled, _draw_and_update]:
            buf = tape.zeros(2)
            tape.manual_seed(0)
            with mode():
                out = f(tape.ones(2), buf)
            runs.append([out.numpy(), buf.numpy(), tape.randn(()).numpy()])
        assert_same(*runs)


def _backward_then_branch(x):
    y = (x * x).sum()
    y.backward(retain_graph=True)
    if x.grad.sum() > 0:
        return y * 2.0
    return y * 3.0


def test_a_backward_before_a_branch_runs_eagerly():
    """x.grad, which a backward changed, decides the branch: no replay could
    undo the backward where the branch goes the other way."""
    compiled = tape.compile(_backward_then_branch)
    with pytest.warns(UserWarning, match="runs a backward, retains a gradient or changes a tensor that requires grad"):
        for value in [1.0, -1.0, 1.0]:
            runs = []
            for f in [compiled, _backward_then_branch]:
                x = leaf([value, 2.0 * value])
                runs.append([f(x).detach().numpy(), x.grad.numpy()])
            assert_same(*runs)


def _sgd_step_inside(w):
    def step(x):
        loss = (x * w).sum()
        loss.backward()
        with tape.no_grad():
            w.sub_(0.1 * w.grad)
        w.grad = None
        w.data = w.data * 0.5 + 0.25
        return loss.detach()
    return step


def test_setters_inside_fn_run_on_every_call():
    """x.grad = None and x.data = v are steps of the replay, not of the recording alone."""
    runs = []
    for compiled in [True, False]:
        w = leaf([0.5, -1.0])
        step = _sgd_step_inside(w)
        f = tape.compile(step) if compiled else step
        runs.append([[f(leaf([1.0 + i, 2.0], requires_grad=False)).numpy(), w.detach().numpy().copy(), w.grad]
                     for i in range(4)])
        if compiled:
            assert f.recordings == 1
    for c, e in zip(*runs):
        assert_same(c[:2], e[:2])
        assert c[2] is None and e[2] is None


def _set_then_branch(buf):
    def fn(x):
        buf.data = buf.data + 1.0
        if x.sum() > 0:
            return x * buf
        return x - buf
    return fn


def test_a_setter_before_a_branch_that_goes_the_other_way_happens_once():
    """A replay whose guard fails after a step set .data sets it back."""
    runs = []
    for compiled in [True, False]:
        buf = tape.zeros(2)
        fn = _set_then_branch(buf)
        f = tape.compile(fn) if compiled else fn
        runs.append([[f(leaf([v, v])).detach().numpy(), buf.numpy().copy()] for v in [1.0, -1.0, 1.0, -1.0, 2.0]])
    for c, e in zip(*runs):
        assert_same(c, e)


# -- results

def _several(x, a):
    y = x.sin() * a
    z = y.exp()
    return {"y": y, "pair": (z, y), "list": [z + 1.0, "label", 3], "n": 7}


def test_several_outputs_in_a_dict_tuple_and_list_with_other_values():
    compiled = tape.compile(_several)
    for value in [0.5, -1.0, 0.25]:
        out = compiled(leaf(value), leaf(1.5))
        assert type(out) is dict and list(out) == ["y", "pair", "list", "n"] and type(out["list"]) is list
        assert out["pair"][1] is out["y"] and out["list"][1:] == ["label", 3] and out["n"] == 7
        check(compiled, _several, lambda: [leaf(value), leaf(1.5)])
    assert compiled.recordings == 1


def test_a_tuple_result_stays_a_tuple():
    compiled = tape.compile(lambda x: (x.sin(), [x.cos()]))
    for value in [0.5, -1.0]:
        out = compiled(leaf(value))
        assert type(out) is tuple and type(out[1]) is list


Pair = collections.namedtuple("Pair", "sin cos")


def test_a_namedtuple_result():
    compiled = tape.compile(lambda x: Pair(x.sin(), x.cos()))
    for value in [0.5, -1.0]:
        out = compiled(leaf(value))
        assert type(out) is Pair
        assert (out.sin.item(), out.cos.item()) == (np.sin(value), np.cos(value))


def test_one_tensor_passed_for_two_arguments_then_two():
    def fn(a, b):
        return a * b + b

    compiled = tape.compile(fn)
    x = leaf(2.0)
    check(compiled, fn, lambda: [x, x])
    check(compiled, fn, lambda: [leaf(2.0), leaf(5.0)])


def test_two_tensors_then_one_tensor_passed_for_two_arguments():
    def fn(a, b):
        return a * b + b

    compiled = tape.compile(fn)
    check(compiled, fn, lambda: [leaf(2.0), leaf(5.0)])
    x = leaf(3.0)
    out = compiled(x, x)
    (g,) = autograd.grad(out, [x])
    assert (out.item(), g.item()) == (12.0, 7.0)


def test_the_result_of_one_call_as_the_argument_of_the_next():
    def fn(x, a):
        return (x.sin() * a).tanh()

    compiled = tape.compile(fn)
    for value in [0.5, -1.0]:
        check(compiled, fn, lambda: [leaf(value), leaf(1.5)])
        check(lambda x, a: compiled(compiled(x, a), a), lambda x, a: fn(fn(x, a), a),
              lambda: [leaf(value), leaf(1.5)])
    assert compiled.recordings == 1


def test_the_same_tensor_returned_twice():
    def fn(x):
        y = x.cos()
        return y, y, [y]

    compiled = tape.compile(fn)
    for value in [0.5, -1.0]:
        a, b, (c,) = compiled(leaf(value))
        assert a is b is c
        check(compiled, fn, lambda: [leaf(value)])


def test_an_output_in_a_larger_eager_graph():
    compiled = tape.compile(_scaled)
    for value in [[0.5, -1.0, 2.0], [0.1, 0.2, 0.3]]:
        grads = []
        for f in [compiled, _scaled]:
            x, a = leaf(value), leaf(1.5)
            u = f(x * 2.0, a)
            seen = []
            u.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 3.0)
            u.retain_grad()
            loss = (u * x).sum() + u.sum().sin() + tape.matmul(u, x)
            loss.backward()
            grads.append([x.grad.numpy(), a.grad.numpy(), u.grad.numpy(), *seen])
        assert_same(*grads)


def test_gradients_of_two_calls_accumulate_and_hooks_on_an_argument_run():
    compiled = tape.compile(_scaled)
    runs = []
    for f in [compiled, _scaled, compiled]:
        x, a = leaf(0.5), leaf(1.5)
        seen = []
        x.register_hook(lambda g: seen.append(g.item()))
        (f(x, a) + f(a, x) * f(x, x)).backward()
        runs.append([x.grad.numpy(), a.grad.numpy(), np.array(seen)])
    assert_same(runs[0], runs[1])
    assert_same(runs[2], runs[1])


def test_backward_twice_needs_retain_graph_as_in_eager_mode():
    compiled = tape.compile(_scaled)
    for f in [compiled, _scaled, compiled]:
        out = f(leaf(0.5), leaf(1.5))
        out.backward(retain_graph=True)
        out.backward()
        with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
            out.backward()


def test_create_graph_through_a_compiled_function():
    compiled = tape.compile(_scaled)
    for value in [0.5, -1.0, 0.25]:
        results = []
        for f in [compiled, _scaled]:
            x, a = leaf(value), leaf(1.5)
            (gx,) = autograd.grad(f(x, a), [x], create_graph=True)
            gxx, gxa = autograd.grad(gx, [x, a], create_graph=True)
            (gxxx,) = autograd.grad(gxx, [x])
            results.append([g.detach().numpy() for g in (gx, gxx, gxa, gxxx)])
        assert_same(*results)


# -- what needs Python: steps (structural ops, random ops, custom Functions, hooks, autograd.grad inside fn)

def _noisy(x):
    return x.sin() + tape.randn(x.shape) * 0.1 + tape.rand_like(x)


def test_random_ops_draw_as_eager_mode_and_fresh_each_call():
    compiled = tape.compile(_noisy)
    draws = []
    for f in [compiled, _noisy]:
        tape.manual_seed(7)
        draws.append([f(leaf([0.5, 1.0, -1.0])).detach().numpy() for _ in range(4)])
    for c, e in zip(*draws):
        np.testing.assert_array_equal(c, e)
    assert not np.array_equal(draws[0][0], draws[0][1]) and not np.array_equal(draws[0][2], draws[0][3])
    assert compiled.recordings == 1


def _dropout_like(x, a):
    keep = (tape.rand_like(x) > 0.5).to(tape.float64)
    return (x * a * keep).sum() + tape.randn(()) * x.sum()


def test_random_ops_replayed_after_the_same_seed_give_eager_values_and_gradients():
    compiled = tape.compile(_dropout_like)
    for seed in [3, 4, 3]:
        results = []
        for f in [compiled, _dropout_like]:
            tape.manual_seed(seed)
            results.append([evaluate(f, [leaf(np.linspace(-1.0, 1.0, 6)), leaf(1.5)], order=1) for _ in range(3)])
        for c, e in zip(*results):
            assert_same(c, e)
    assert compiled.recordings == 1


class _Cube(autograd.Function):
    calls = collections.Counter()

    @staticmethod
    def forward(ctx, x):
        _Cube.calls["forward"] += 1
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        _Cube.calls["backward"] += 1
        (x,) = ctx.saved_tensors
        return grad * 3.0 * x * x


def _with_a_function(x, a):
    return _Cube.apply(x.sin() * a) + x


def test_a_custom_function_inside_fn():
    compiled = tape.compile(_with_a_function)
    for value in [0.5, -1.0, 0.25]:
        check(compiled, _with_a_function, lambda: [leaf(value), leaf(1.5)])
        check(compiled, _with_a_function, lambda: [leaf([value, 2.0]), leaf(1.5)])
    assert compiled.recordings == 2  # one per shape
    _Cube.calls.clear()
    compiled(leaf(0.5), leaf(1.5)).backward()
    assert _Cube.calls == {"forward": 1, "backward": 1}  # a replay runs the Function's Python


def _hooked(calls):
    def fn(x, a):
        y = x.sin() * a
        y.register_hook(lambda g: calls.append(g.numpy().copy()) or g * 2.0)
        return y.exp()

    return fn


def test_a_tensor_hook_inside_fn():
    compiled_calls, eager_calls = [], []
    compiled = tape.compile(_hooked(compiled_calls))
    eager = _hooked(eager_calls)
    for k, value in enumerate([0.5, -1.0, 0.25, 2.0]):
        check(compiled, eager, lambda: [leaf(value), leaf(1.5)], order=1)
        assert_same(compiled_calls, eager_calls)
        assert len(compiled_calls) == k + 1  # the hook runs on every replayed call
    assert compiled.recordings == 1


def _strided(x, a):
    y = x[1::2] * a - x[::2] ** 2
    return tape.cat([y, x[:3].sin()]).reshape(2, -1).t().sum(0) * x[-1]


def _indexed(x, a):
    return (x[tape.tensor([2, 0, 2])] * a).exp() + x[1]


def _matmuls(m, v):
    return tape.matmul(m, v) @ m @ v + (m.reshape(2, 3, 2) @ v.reshape(2, 1)).sum() + v @ v


def _stacked(x, a):
    return tape.stack([x * a, x.flip(0), x.transpose(0, 1).transpose(0, 1)]).permute(1, 0, 2).sum((1, 2))


@pytest.mark.parametrize("fn, shapes", [
    (_strided, [(6,), ()]), (_indexed, [(4,), ()]), (_matmuls, [(6, 2), (2,)]), (_stacked, [(2, 3), ()]),
], ids=["strided", "indexed", "matmul", "stacked"])
def test_structural_ops_replay_with_eager_values_and_gradients(fn, shapes):
    compiled = tape.compile(fn)
    rng = np.random.default_rng(5)
    for _ in range(4):
        values = [rng.uniform(-1.0, 1.0, size=s) for s in shapes]
        check(compiled, fn, lambda: [leaf(v) for v in values])
    assert compiled.recordings == 1


def _rosenbrock_hvp(x, v):
    f = (100 * (x[1::2] - x[::2] ** 2) ** 2 + (1 - x[::2]) ** 2).sum()
    (g,) = autograd.grad(f, x, create_graph=True)
    (hv,) = autograd.grad((g * v).sum(), x)
    return hv


def _grad_kept(x, a):
    (g,) = autograd.grad((x.sin() * a).sum(), [x], create_graph=True)
    return g * x


@pytest.mark.parametrize("fn, order", [(_rosenbrock_hvp, 0), (_grad_kept, 2)], ids=["hvp", "create_graph"])
def test_autograd_grad_inside_fn(fn, order):
    compiled = tape.compile(fn)
    rng = np.random.default_rng(6)
    for _ in range(4):
        x, v = rng.uniform(-1.0, 1.0, size=8), rng.uniform(-1.0, 1.0, size=8)
        if order:
            check(compiled, fn, lambda: [leaf(x), leaf(v)], order=order)
        else:
            assert_same(evaluate(compiled, [leaf(x), leaf(v, False)], 0), evaluate(fn, [leaf(x), leaf(v, False)], 0))
    assert compiled.recordings == 1


def test_a_replay_with_steps_releases_what_no_later_part_reads():
    """The slices' values and the gradient the second grad reads go as
    soon as nothing reads them (Note [Early release] in tape/_record.py): a
    replay leaves the tape holding no more than an eager call does."""
    compiled = tape.compile(_rosenbrock_hvp)
    rng = np.random.default_rng(7)
    x, v = leaf(rng.uniform(-1.0, 1.0, size=64)), leaf(rng.uniform(-1.0, 1.0, size=64), False)
    tp = tape._tape.state.tape

    def held_after(fn):  # what one call adds to the values held, from a compacted tape
        gc.collect()  # earlier tests' cycles, which would die during one of the calls
        tp.compact()
        before = tp.held_bytes
        fn(x, v)
        return tp.held_bytes - before

    for _ in range(3):  # records, records again capturing the steps, replays
        compiled(x, v)
    assert compiled.recordings == 1
    assert held_after(compiled) <= held_after(_rosenbrock_hvp)


def test_many_replays_with_steps_keep_the_tape_as_eager_mode_does():
    """200 replays leave no more rows and held bytes on the tape than 200
    eager calls (the garbage of both waits for a compaction when the tape is full)."""
    compiled = tape.compile(_rosenbrock_hvp)
    rng = np.random.default_rng(8)
    x, v = leaf(rng.uniform(-1.0, 1.0, size=16)), leaf(rng.uniform(-1.0, 1.0, size=16), False)
    tp = tape._tape.state.tape

    def after_calls(fn):  # the rows and held bytes 200 calls add to a compacted tape
        gc.collect()
        tp.compact()
        n, held = tp.n, tp.held_bytes
        for _ in range(200):
            fn(x, v)
        return tp.n - n, tp.held_bytes - held

    for _ in range(3):
        compiled(x, v)
    rows, held = after_calls(compiled)
    eager_rows, eager_held = after_calls(_rosenbrock_hvp)
    assert compiled.recordings == 1
    assert rows <= eager_rows and held <= eager_held
    assert_same(numbers([compiled(x, v)]), numbers([_rosenbrock_hvp(x, v)]))


def _backward_inside(x, a):
    y = (x * a).sin().sum()
    y.backward(retain_graph=True)
    return y * x.grad


def test_backward_inside_fn():
    compiled = tape.compile(_backward_inside)
    for value in [0.5, -1.0, 0.25]:
        check(compiled, _backward_inside, lambda: [leaf([value, 1.0]), leaf(1.5)], order=1)
    assert compiled.recordings == 1


def _masked(x):
    return (x[x > 0] * 2.0).sum() + x.sum()


def test_a_step_that_appends_other_rows_records_again():
    """x[x > 0] has as many elements as x has positive ones: a replay whose
    step gives another shape fails as a guard does and records again."""
    compiled = tape.compile(_masked)
    for k, value in enumerate([[1.0, -1.0, 2.0], [3.0, -2.0, 1.0], [1.0, 1.0, 1.0], [2.0, -1.0, 0.5]]):
        check(compiled, _masked, lambda: [leaf(value)])
        assert compiled.recordings == [1, 1, 2, 2][k]


def _branch_after_a_step(x):
    y = x[::2].sum()
    if y > 0:
        return y * x
    return (y - x).exp()


def test_a_branch_on_a_value_computed_by_a_step():
    compiled = tape.compile(_branch_after_a_step)
    for k, value in enumerate([1.0, -1.0, 0.5, -0.5, 2.0]):
        check(compiled, _branch_after_a_step, lambda: [leaf([value, 3.0, value])])
        assert compiled.recordings == [1, 1, 2, 2, 2][k]  # the second call records the other branch


def test_threads_calling_a_compiled_function_with_steps():
    compiled = tape.compile(_strided)
    points = {k: [np.linspace(-1.0, 0.2 * k + 0.1 * i, 6) for i in range(4)] for k in range(4)}
    results = {}

    def work(k):
        results[k] = [evaluate(compiled, [leaf(v), leaf(1.5)]) for v in points[k]]

    errors = _in_threads(work, 4)
    assert not errors, errors
    for k in range(4):
        for v, got in zip(points[k], results[k]):
            assert_same(got, evaluate(_strided, [leaf(v), leaf(1.5)]))


def test_fullgraph_accepts_python_steps():
    compiled = tape.compile(_strided, fullgraph=True)
    for value in [0.5, -1.0, 0.25]:
        check(compiled, _strided, lambda: [leaf(np.linspace(value, 1.0, 6)), leaf(1.5)])
    assert compiled.recordings == 1


def _replayable_chain(x, a):
    return (x.sin() * a + 0.5).tanh() * x - a.exp() / (x.square() + 1.0)


def _in_place_intermediate(x, a):
    y = x * a
    y.mul_(2.0)
    return y.sin()


def _a_sum(x, a):
    return (x * a).sin().sum()


def _a_matmul(x, a):
    return tape.matmul(x * a, x)


def _random(x, a):
    return x * a + tape.rand_like(x)


@pytest.mark.parametrize("fn, shape, requires_grad", [
    (_replayable_chain, (), True),
    (_replayable_chain, (4,), True),
    (_replayable_chain, (), False),
    (_branch_on_truth, (), True),
    (_branch_on_comparison, (), True),
    (_in_place_intermediate, (), True),
    (_a_sum, (4,), True),
    (_a_matmul, (4,), True),
    (_random, (), True),
    (_with_a_function, (), True),
    (_hooked([]), (), True),
], ids=["chain", "chain-array", "chain-no-grad", "branch", "comparison", "in-place", "sum", "matmul", "random",
        "function", "hook"])
def test_replays_without_running_eagerly(fn, shape, requires_grad):
    """The issue's scope: ops without a native forward run in Python at their
    place inside the replay, never making the whole call eager (which warns)."""
    compiled = tape.compile(fn)
    for value in [0.5, 0.75, 0.25]:
        compiled(leaf(np.full(shape, value), requires_grad), leaf(1.5, requires_grad))
    assert compiled.recordings == 1


# -- exceptions

def _checked(x):
    y = x.sin()
    if y.item() > 0.9:
        raise ValueError("too large")
    return y * x


def test_an_exception_raised_inside_fn_on_a_later_call():
    compiled = tape.compile(_checked)
    with pytest.raises(ValueError, match="too large"):
        compiled(leaf(1.4))
    before = leaf(0.3).exp()  # an eager graph recorded before the calls that raise works after them
    for _ in range(2):
        check(compiled, _checked, lambda: [leaf(0.5)])
        check(compiled, _checked, lambda: [leaf(0.6)])
        with pytest.raises(ValueError, match="too large"):
            compiled(leaf(1.4))
        check(compiled, _checked, lambda: [leaf(0.5)])
        y = leaf(0.25).sin() * 2.0  # and eager mode after it
        y.backward()
    before.backward()
    assert compiled.recordings == 2


def test_an_exception_from_an_op_on_a_new_shape():
    compiled = tape.compile(_scaled)
    check(compiled, _scaled, lambda: [leaf([1.0, 2.0]), leaf([0.5, 0.25])])
    with pytest.raises(RuntimeError) as eager:
        _scaled(leaf([1.0, 2.0]), leaf([0.5, 0.25, 1.0]))
    with pytest.raises(RuntimeError) as raised:
        compiled(leaf([1.0, 2.0]), leaf([0.5, 0.25, 1.0]))
    assert str(raised.value) == str(eager.value)
    check(compiled, _scaled, lambda: [leaf([3.0, 2.0]), leaf([0.5, 0.75])])
    assert compiled.recordings == 1


# -- composition

def _inner(x, a):
    return (x * a).sin() + a


def test_nested_compile():
    inner = tape.compile(_inner)

    def outer(x, a):
        return inner(x, a) * inner(a, x) + x

    def eager(x, a):
        return _inner(x, a) * _inner(a, x) + x

    compiled = tape.compile(outer)
    check(inner, _inner, lambda: [leaf(0.3), leaf(0.7)])
    for value in [0.5, -1.0, 0.25]:
        check(compiled, eager, lambda: [leaf(value), leaf(1.5)])
        check(inner, _inner, lambda: [leaf(value), leaf(1.5)])
    assert compiled.recordings == 1 and inner.recordings == 1


def _chain_of(w):
    def fn(x, a):
        y = x
        for _ in range(20):
            y = (y.sin() * a + w).tanh()
        return y

    return fn


def _branches_of(w):
    def fn(x, a):
        y = (x * a + w).sin()
        if y > 0:
            return (y * x).exp()
        return y * w - x

    return fn


@pytest.mark.parametrize("make", [_chain_of, _branches_of])
@pytest.mark.parametrize("shared", [False, True], ids=["own-leaves", "shared-leaf"])
def test_threads_calling_one_compiled_function(make, shared):
    """Four threads, each with its own leaves, call one compiled function at
    once; fn adds a Python number, or a leaf all threads share from its
    closure (then this thread records each branch first, so that no two
    recordings overlap: test_two_threads_recording_at_once_with_a_shared_leaf)."""
    w = leaf(0.7) if shared else 0.7
    closure = [w] if shared else []
    fn = make(w)
    compiled = tape.compile(fn)
    if shared:
        for x in [0.1, -2.0]:
            check(compiled, fn, lambda: [leaf(x), leaf(1.5)], closure=closure)
    points = {k: [0.4 * k - 0.9 + 0.05 * i * (-1) ** i for i in range(6)] for k in range(4)}
    results = {}

    def work(k):
        results[k] = [evaluate(compiled, [leaf(v), leaf(1.5)], closure=closure) for v in points[k]]

    errors = _in_threads(work, 4)
    assert not errors, errors
    for k in range(4):
        for v, got in zip(points[k], results[k]):
            assert_same(got, evaluate(fn, [leaf(v), leaf(1.5)], closure=closure))
    assert 1 <= compiled.recordings <= 8


def test_two_threads_recording_at_once_with_a_shared_leaf():
    w = leaf(0.7)
    both_recording = threading.Barrier(2, timeout=10)
    recordings_waited = []

    def fn(x):
        y = x * w
        if len(recordings_waited) < 2:  # Python in fn runs while it records: the two recordings overlap here
            recordings_waited.append(True)
            both_recording.wait()
        return y.sin()

    compiled = tape.compile(fn)
    results = {}

    def work(k):
        results[k] = [evaluate(compiled, [leaf(0.1 * k + i)], closure=[w]) for i in range(3)]

    errors = _in_threads(work, 2)
    assert not errors, errors
    for k in range(2):
        for i, got in enumerate(results[k]):
            assert_same(got, evaluate(fn, [leaf(0.1 * k + i)], closure=[w]))


def _scalar_loss(x, a):
    return ((x.sin() * a).exp() + x * x) * a


def _vjp(f):
    def pulled(x, a):
        out, pull = func.vjp(f, x, a)
        return pull(tape.ones_like(out))

    return pulled


def _jvp(f):
    return lambda x, a: func.jvp(f, (x, a), (tape.ones_like(x), tape.full_like(a, 0.5)))


# (transform, the shape of x) for _scalar_loss(x, a), a 0-d
TRANSFORMS = [
    pytest.param(lambda f: func.grad(f), (), id="grad"),
    pytest.param(lambda f: func.grad(f, argnums=(0, 1)), (), id="grad-argnums"),
    pytest.param(lambda f: func.grad(func.grad(f)), (), id="grad-grad"),
    pytest.param(lambda f: func.grad_and_value(f), (), id="grad_and_value"),
    pytest.param(lambda f: func.hessian(f, argnums=(0, 1)), (), id="hessian"),
    pytest.param(lambda f: func.jacrev(f), (3,), id="jacrev"),
    pytest.param(lambda f: func.jacfwd(f), (3,), id="jacfwd"),
    pytest.param(_vjp, (3,), id="vjp"),
    pytest.param(_jvp, (3,), id="jvp"),
    pytest.param(lambda f: func.vmap(f, in_dims=(0, None)), (3,), id="vmap"),
    pytest.param(lambda f: func.vmap(func.grad(f), in_dims=(0, None)), (3,), id="vmap-grad"),
]


def _same_results(got, expected, shape):
    """got(x, a) and expected(x, a) on a few inputs that need no grad."""
    for value in [0.5, -1.0, 0.25]:
        x = np.linspace(value, 2 * value, 3) if shape else value
        args = lambda: [leaf(x, requires_grad=False), leaf(1.5, requires_grad=False)]
        assert_same(numbers(flat(got(*args()))), numbers(flat(expected(*args()))))


@pytest.mark.parametrize("transform, shape", TRANSFORMS)
def test_a_func_transform_of_a_compiled_function(transform, shape):
    _same_results(transform(tape.compile(_scalar_loss)), transform(_scalar_loss), shape)


@pytest.mark.parametrize("transform, shape", TRANSFORMS)
@MAY_RUN_EAGERLY
def test_compile_of_a_func_transform(transform, shape):
    _same_results(tape.compile(transform(_scalar_loss)), transform(_scalar_loss), shape)


# -- the example and arrays

def _chain(x, a, b):
    y = x
    for _ in range(1000):
        y = y.sin() * a + b
    return y


def test_the_scalar_chain_in_an_optimisation_loop():
    compiled = tape.compile(_chain)
    runs = []
    for f in [compiled, _chain]:
        x, a, b = leaf(0.5), leaf(0.9), leaf(0.1)
        trace = []
        for _ in range(8):
            loss = f(x, a, b)
            loss.backward()
            trace.append([loss.item(), x.grad.item(), a.grad.item(), b.grad.item()])
            with tape.no_grad():
                a -= 0.01 * a.grad
                b -= 0.01 * b.grad
            x.grad = a.grad = b.grad = None
        runs.append(trace)
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-12, atol=1e-12)
    assert compiled.recordings == 1


@pytest.mark.parametrize("fn", [lambda x: x + 2.0, lambda x: x - 2.0, lambda x: -2.0 + x, lambda x: 2.0 - x,
                                lambda x: x * 2.0, lambda x: x / 2.0, lambda x: 2.0 / x, lambda x: x ** 3,
                                lambda x: 2.0 ** x, lambda x: x + tape.tensor(2.0), lambda x: x * tape.tensor(2.0)],
                         ids=["x+2", "x-2", "-2+x", "2-x", "x*2", "x/2", "2/x", "x**3", "2**x", "x+tensor(2)",
                              "x*tensor(2)"])
@pytest.mark.parametrize("shape", [(), (2,)])
def test_a_python_number_in_an_op(fn, shape):
    compiled = tape.compile(fn)
    for value in [1.5, -0.5, 3.0]:
        check(compiled, fn, lambda: [leaf(np.full(shape, value))])
    assert compiled.recordings == 1


def _layer(x, w, b):
    return ((x * w + b).tanh() * x).sigmoid() - b.exp() / (x.square() * 0.5 + b.cosh())


def _layer_with_added_constants(x, w, b):
    return ((x * w + b).tanh() * x).sigmoid() - b.exp() / (x.square() + 1.0)


@pytest.mark.parametrize("fn, bias_shape", [
    (_layer, (8,)), (_layer, (1, 8)), (_layer, ()), (_layer, (32, 1)),
    (_layer_with_added_constants, (8,)),
])
@MAY_RUN_EAGERLY
def test_an_elementwise_chain_on_arrays_with_a_bias(fn, bias_shape):
    rng = np.random.default_rng(3)
    compiled = tape.compile(fn)
    for _ in range(3):
        x, w, b = rng.normal(size=(32, 8)), rng.normal(size=(32, 8)), rng.normal(size=bias_shape)
        check(compiled, fn, lambda: [leaf(x), leaf(w), leaf(b)], rtol=1e-11)
    assert compiled.recordings == 1


def _two_layers(x, w1, b1, w2):
    return ((x @ w1 + b1).tanh() @ w2).sum()


def test_replays_before_and_after_the_tape_is_compacted():
    # a replay's rows name its shapes in the tape's pool, where a compaction
    # between two calls puts them elsewhere: the next replay names them anew
    rng = np.random.default_rng(5)
    compiled = tape.compile(_two_layers)
    for compact in [False, False, True, False, True]:
        if compact:
            tape._tape.state.tape.compact()
        x, w1, b1, w2 = rng.normal(size=(5, 3)), rng.normal(size=(3, 4)), rng.normal(size=(4,)), rng.normal(size=(4, 2))
        check(compiled, _two_layers, lambda: [leaf(x, False), leaf(w1), leaf(b1), leaf(w2)], rtol=1e-11)
    assert compiled.recordings == 1


def _w4_chain(x, b):
    """W4's cycle of ops with a bias: a replay runs it as one fused chain,
    whose rows that backward does not read are not stored."""
    y = x
    for i in range(14):
        y = [y.sin, y.exp, y.tanh, y.square, lambda: y * x, lambda: y + b][i % 6]()
    return y.sum()


@pytest.mark.parametrize("shape, bias_shape", [
    ((5000,), (5000,)), ((70, 61), (61,)), ((300, 7), (1, 7)), ((3, 2), ()), ((3,), (3,)), ((0, 4), (4,)),
], ids=["tiles", "bias-tiles", "small-bias", "0-d-bias", "one-tile", "empty"])
def test_a_fused_elementwise_chain(shape, bias_shape):
    rng = np.random.default_rng(5)
    compiled = tape.compile(_w4_chain, fullgraph=True)
    for _ in range(3):
        x, b = rng.uniform(-1, 1, size=shape), rng.uniform(-1, 1, size=bias_shape)
        check(compiled, _w4_chain, lambda: [leaf(x), leaf(b)], rtol=1e-11)
    assert compiled.recordings == 1


def _read_twice(x):
    y = x.sin() * 2.0  # read by two rows of the chain and by sum, outside it
    z = (y.exp() + y.cos()).tanh()
    return z.sum() + y.sum()


def _intermediate_returned(x):
    y = x.sin() + 1.0  # not saved by any op, but returned
    return (y.exp() * 3.0).sum(), y


def _chain_end_read_by_a_step(x):
    y = x.sin().exp().tanh()  # cat, a Python step, reads the chain's last row
    return (tape.cat([y, x.sin()]) * 2.0).sum()


def _chain_start_read_by_a_step(x):
    s = x.sin()  # saved by nothing in its chain, but cat, a Python step, reads it
    return tape.cat([s, s.exp()]).square().sum()


@pytest.mark.parametrize("fn", [_read_twice, _intermediate_returned, _chain_end_read_by_a_step,
                                _chain_start_read_by_a_step])
def test_values_a_fused_chain_shares_with_other_rows_and_its_results(fn):
    rng = np.random.default_rng(6)
    compiled = tape.compile(fn, fullgraph=True)
    for _ in range(3):
        x = rng.uniform(-1, 1, size=(3000,))
        check(compiled, fn, lambda: [leaf(x)], rtol=1e-11)
    assert compiled.recordings == 1


def test_hooks_and_retain_grad_on_an_intermediate_a_fused_chain_returns():
    compiled = tape.compile(_intermediate_returned, fullgraph=True)
    x = np.linspace(-1, 1, 2500)
    seen = []
    for f in [compiled, compiled, _intermediate_returned]:
        total, y = f(leaf(x))
        y.retain_grad()
        hooked = []
        y.register_hook(lambda g: hooked.append(g.numpy().copy()))
        total.backward()
        seen.append((y.detach().numpy().copy(), y.grad.numpy().copy(), hooked[0]))
    for replayed, eager in zip(seen[1], seen[2]):
        np.testing.assert_allclose(replayed, eager, rtol=1e-12, atol=1e-12)
    assert compiled.recordings == 1


def test_graphs_of_two_replays_of_a_fused_chain_are_independent():
    compiled = tape.compile(_w4_chain, fullgraph=True)
    x1, x2, b = (leaf(np.linspace(lo, lo + 1, 3000)) for lo in (-1.0, -0.5, 0.0))
    compiled(x1, b)  # records
    first, second = compiled(x1, b), compiled(x2, b)
    second.backward()
    first.backward()
    replayed = [x1.grad.numpy().copy(), x2.grad.numpy().copy(), b.grad.numpy().copy()]
    x1.grad = x2.grad = b.grad = None
    first, second = _w4_chain(x1, b), _w4_chain(x2, b)
    second.backward()
    first.backward()
    for c, e in zip(replayed, [x1.grad.numpy(), x2.grad.numpy(), b.grad.numpy()]):
        np.testing.assert_allclose(c, e, rtol=1e-11, atol=1e-12)


def test_a_fused_chain_under_no_grad():
    compiled = tape.compile(_read_twice)
    x = np.linspace(-1, 1, 4100)
    with tape.no_grad():
        for _ in range(2):
            check(compiled, _read_twice, lambda: [leaf(x)], rtol=1e-11)


EDGE_VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, np.inf, -np.inf, np.nan]


def _at_edges(fn, columns, rows):
    """fn compiled against eager on arrays of `columns`, and on 0-d `rows` in turn."""
    compiled = tape.compile(fn)
    for _ in range(2):
        check(compiled, fn, lambda: [leaf(c) for c in columns])
    compiled = tape.compile(fn)
    for row in rows:
        check(compiled, fn, lambda: [leaf(v) for v in row])


@pytest.mark.parametrize("record", ELEMENTWISE_UNARY, ids=[r[0] for r in ELEMENTWISE_UNARY])
@MAY_RUN_EAGERLY
def test_unary_ops_at_edge_values(record):
    _at_edges(record[1], [np.array(EDGE_VALUES)], [(v,) for v in EDGE_VALUES])


@pytest.mark.parametrize("record", ELEMENTWISE_BINARY, ids=[r[0] for r in ELEMENTWISE_BINARY])
@MAY_RUN_EAGERLY
def test_binary_ops_at_edge_values(record):
    x, y = np.meshgrid(EDGE_VALUES, EDGE_VALUES)
    _at_edges(record[1], [x.ravel(), y.ravel()], zip(EDGE_VALUES, EDGE_VALUES[3:] + EDGE_VALUES[:3]))


# -- a property test over random elementwise programs

SHAPES = [(), (3,), (2, 3)]  # any two broadcast as a trailing block
GROWN = {(): (3,), (3,): (2, 3), (2, 3): (1, 3)}  # a shape of each that still broadcasts with the others
PROGRAMS = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def programs(draw):
    """(leaf shapes, steps): a step applies record k of ELEMENTWISE_UNARY to
    value i, or of ELEMENTWISE_BINARY to values i and j, of the program, whose
    first values are its leaves."""
    n_leaves = draw(st.integers(1, 3))
    shapes = [()] * n_leaves if draw(st.booleans()) else [draw(st.sampled_from(SHAPES)) for _ in range(n_leaves)]
    steps = []
    for n in range(n_leaves, n_leaves + draw(st.integers(1, 5))):
        if draw(st.booleans()):
            steps.append(("unary", draw(st.integers(0, len(ELEMENTWISE_UNARY) - 1)), draw(st.integers(0, n - 1))))
        else:
            steps.append(("binary", draw(st.integers(0, len(ELEMENTWISE_BINARY) - 1)), draw(st.integers(0, n - 1)),
                          draw(st.integers(0, n - 1))))
    return shapes, steps


def _program(steps, constant):
    """The program as a function of its leaves. Each operand is first mapped
    into its op's interval (lo, hi) as lo + (hi - lo) * sigmoid(v), with lo
    and hi - lo as `constant` makes them: Python numbers, or 0-d tensors fn
    reads from its closure."""
    maps = []
    for step in steps:
        table = ELEMENTWISE_UNARY if step[0] == "unary" else ELEMENTWISE_BINARY
        _, op, _, lo, hi = table[step[1]]
        bounds = [(lo, hi)] if step[0] == "unary" else list(zip(lo, hi))
        maps.append((op, [(constant(float(a)), constant(float(b - a))) for a, b in bounds]))

    def fn(*leaves):
        values = list(leaves)
        for step, (op, bounds) in zip(steps, maps):
            values.append(op(*(lo + scale * values[i].sigmoid() for i, (lo, scale) in zip(step[2:], bounds))))
        return values[-1]

    return fn


def _check_program(program, seed, constant):
    """For several fresh inputs, the compiled program's values and gradients
    of both orders are eager mode's; changes of requires_grad, shape and grad
    mode re-record once each."""
    shapes, steps = program
    fn = _program(steps, constant)
    compiled = tape.compile(fn)
    rng = np.random.default_rng(seed)

    def run(shapes, requires_grad):
        values = [rng.uniform(-2, 2, size=s) for s in shapes]
        check(compiled, fn, lambda: [leaf(v, requires_grad=rg) for v, rg in zip(values, requires_grad)],
              rtol=1e-10, atol=1e-12)

    all_rg = [True] * len(shapes)
    for _ in range(3):
        run(shapes, all_rg)
    assert compiled.recordings == 1
    run(shapes, [False] + all_rg[1:])
    assert compiled.recordings == 2
    run([GROWN[shapes[0]]] + shapes[1:], all_rg)
    assert compiled.recordings == 3
    with tape.no_grad():
        run(shapes, all_rg)
    assert compiled.recordings == 4
    run(shapes, all_rg)
    assert compiled.recordings == 4


@PROGRAMS
@given(programs(), st.integers(0, 2 ** 32 - 1))
@MAY_RUN_EAGERLY
def test_random_elementwise_programs(program, seed):
    _check_program(program, seed, tape.tensor)


@PROGRAMS
@given(programs(), st.integers(0, 2 ** 32 - 1))
@MAY_RUN_EAGERLY
def test_random_elementwise_programs_with_python_numbers(program, seed):
    _check_program(program, seed, float)


# Note [Dropping a dead tail] in tape/_tape.py: a replay whose result is dead
# by the next call is dropped from the tape's end, whatever else is alive

def _sin_chain_of(n):
    def chain(x, a, b):
        y = x
        for _ in range(n):
            y = y.sin() * a + b
        return y

    return chain


def _tape_rows_after_calls(compiled, args, calls):
    tp = tape._tape.state.tape
    rows = []
    for _ in range(calls):
        compiled(*args).backward()
        rows.append(tp.n)
    return rows


def test_a_dropped_replay_is_taken_off_the_tape_s_end():
    def run():
        chain = _sin_chain_of(50)
        x, a, b = leaf(0.5), leaf(0.9), leaf(0.1)
        rows = _tape_rows_after_calls(tape.compile(chain), (x, a, b), 6)
        grads = [x.grad.item(), a.grad.item(), b.grad.item()]
        x2, a2, b2 = leaf(0.5), leaf(0.9), leaf(0.1)
        for _ in range(6):
            chain(x2, a2, b2).backward()
        return rows, grads, [x2.grad.item(), a2.grad.item(), b2.grad.item()]

    rows, grads, eager = _in_fresh_thread(run)
    assert len(set(rows[2:])) == 1  # one replay's rows, however many calls
    np.testing.assert_allclose(grads, eager, rtol=1e-13)


def test_replays_over_a_dropped_segment_of_other_lengths_leave_later_eager_rows_right():
    # a replay of 0-d rows writes over the dropped segment uncleared: a shorter
    # recording's rows, a failed guard's and an eager graph's must still find defaults
    def branchy(x, a, b):
        y = x
        for _ in range(30 if x > 0 else 5):
            y = y.sin() * a + b
        return y

    values = [0.5, 0.7, -0.5, -0.6, 0.5, -0.5, 0.8, 0.3, -0.1]

    def run(fn):
        x, a, b = leaf(0.0), leaf(0.9), leaf(0.1)
        results = []
        for value in values:
            with tape.no_grad():
                x.fill_(value)
            x.grad = a.grad = b.grad = None
            fn(x, a, b).backward()
            y = fn(x, a, b)
            z = ((a * 3.0).exp() * b).tanh() / (b + 2.0)  # eager rows where dropped ones were
            (y + z).backward()
            results.append([y.item(), x.grad.item(), a.grad.item(), b.grad.item()])
        return results

    compiled = tape.compile(branchy)
    np.testing.assert_allclose(_in_fresh_thread(lambda: run(compiled)), run(branchy), rtol=1e-13)
    assert compiled.recordings == 2


def test_a_result_of_an_earlier_call_keeps_its_rows_while_later_calls_replay():
    chain = tape.compile(_sin_chain_of(20))
    x, a, b = leaf(0.5), leaf(0.9), leaf(0.1)
    chain(x, a, b).backward()
    kept = chain(x, a, b)  # alive while the next calls run and are dropped
    for _ in range(4):
        chain(x, a, b).backward()
    x.grad = a.grad = b.grad = None
    kept.backward()
    expected = [g.item() for g in _grads_of(_sin_chain_of(20))]
    np.testing.assert_allclose([x.grad.item(), a.grad.item(), b.grad.item()], expected, rtol=1e-13)
    assert kept.item() == pytest.approx(_sin_chain_of(20)(leaf(0.5), leaf(0.9), leaf(0.1)).item(), rel=1e-13)


def _grads_of(fn):
    x, a, b = leaf(0.5), leaf(0.9), leaf(0.1)
    fn(x, a, b).backward()
    return x.grad, a.grad, b.grad


def test_a_loop_that_keeps_its_result_until_the_next_call_alternates_between_two_segments():
    # `l = f(x); l.backward()`: the last result is alive at the next call,
    # whose rows go where the one before it were (Tape.reuse_segment_below)
    def run():
        chain = tape.compile(_sin_chain_of(40))
        x, a, b = leaf(0.5), leaf(0.9), leaf(0.1)
        tp = tape._tape.state.tape
        rows, grads = [], []
        for _ in range(8):
            result = chain(x, a, b)
            result.backward()
            rows.append(tp.n)
            grads.append([x.grad.item(), a.grad.item(), b.grad.item()])
            x.grad = a.grad = b.grad = None
        return rows, grads

    rows, grads = _in_fresh_thread(run)
    assert len(set(rows[3:])) == 1
    np.testing.assert_allclose(grads, [[g.item() for g in _grads_of(_sin_chain_of(40))]] * 8, rtol=1e-13)


def _train(chain, steps):
    """The issue's loop: the result kept until the next call, a leaf updated
    in place between calls; the tape's rows after each step, the loss and
    the leaf's values."""
    x, a, b = leaf(0.5), leaf(0.9), leaf(0.1)
    tp = tape._tape.state.tape
    rows, seen = [], []
    for _ in range(steps):
        result = chain(x, a, b)
        result.backward()
        seen.append([result.item(), a.item(), x.grad.item(), b.grad.item()])
        with tape.no_grad():
            a -= 0.01 * a.grad
        x.grad = a.grad = b.grad = None
        rows.append(tp.n)
    return rows, seen


def test_a_loop_that_updates_a_leaf_in_place_between_calls_reuses_its_rows():
    # a's row is left at each update and a new one adopted at the next call,
    # with the replay's rows, where the dead segment below the live one was
    rows, compiled = _in_fresh_thread(lambda: _train(tape.compile(_sin_chain_of(40)), 12))
    _, eager = _in_fresh_thread(lambda: _train(_sin_chain_of(40), 12))
    assert len(set(rows[4:])) <= 2
    np.testing.assert_allclose(compiled, eager, rtol=1e-13)


def test_a_replay_over_the_segment_below_leaves_the_live_result_above_it_whole():
    def run():
        chain = tape.compile(_sin_chain_of(30))
        x, a, b = leaf(0.5), leaf(0.9), leaf(0.1)
        tp = tape._tape.state.tape
        chain(x, a, b).backward()
        first = chain(x, a, b)
        first.backward()
        second = chain(x, a, b)  # first is alive: appended above it
        rows = tp.n
        del first
        third = chain(x, a, b)  # where first's rows were, below second's
        grown = tp.n - rows
        results = []
        for y in (second, third):
            x.grad = a.grad = b.grad = None
            y.backward()
            results.append([y.item(), x.grad.item(), a.grad.item(), b.grad.item()])
        return grown, results

    grown, results = _in_fresh_thread(run)
    eager = _sin_chain_of(30)
    x, a, b = leaf(0.5), leaf(0.9), leaf(0.1)
    y = eager(x, a, b)
    y.backward()
    assert grown == 0
    np.testing.assert_allclose(results, [[y.item(), x.grad.item(), a.grad.item(), b.grad.item()]] * 2, rtol=1e-13)


@pytest.mark.parametrize("hold", ["grad_fn", "retain_grad", "hook"])
def test_a_node_a_retained_gradient_or_a_hook_on_a_dead_result_keeps_its_rows(hold):
    def run():
        chain = tape.compile(_sin_chain_of(10))
        x, a, b = leaf(0.5), leaf(0.9), leaf(0.1)
        chain(x, a, b).backward()
        y = chain(x, a, b)
        seen = []
        if hold == "grad_fn":
            held = y.grad_fn
        elif hold == "retain_grad":
            y.retain_grad()
            held = None
        else:
            held = y.register_hook(lambda g: seen.append(g.item()))
        tp = tape._tape.state.tape
        rows = tp.n
        del y
        chain(x, a, b).backward()
        return tp.n - rows, held, seen

    grown, held, seen = _in_fresh_thread(run)
    assert grown > 0 and seen == []
    if hold == "grad_fn":
        assert held.name() == "AddBackward0" and len(held.next_functions) == 2


def test_a_detached_result_changed_in_place_leaves_later_replays_alone():
    # the detached tensor keeps the result, and its rows, alive; its version
    # counter names the result's row, which no later replay may reuse
    def run():
        w = leaf(np.linspace(0.1, 0.8, 8))
        compiled = tape.compile(lambda w: (w * 2.0).tanh())
        for _ in range(2):
            compiled(w).sum().backward()
        y = compiled(w)
        view = y.detach()
        del y
        w.grad = None
        out = compiled(w)
        view.add_(1.0)
        out.sum().backward()
        return w.grad.numpy().copy()

    expected = 2.0 * (1 - np.tanh(2.0 * np.linspace(0.1, 0.8, 8)) ** 2)
    np.testing.assert_allclose(_in_fresh_thread(run), expected, rtol=1e-13)


def test_dropped_replays_in_threads_at_once():
    chain = tape.compile(_sin_chain_of(30))
    expected = {}
    for k in range(3):
        expected[k] = [g.item() for g in _grads_of_at(0.2 * k + 0.1)]
    results = {}

    def work(k):
        x, a, b = leaf(0.2 * k + 0.1), leaf(0.9), leaf(0.1)
        for _ in range(5):
            x.grad = a.grad = b.grad = None
            chain(x, a, b).backward()
        results[k] = [x.grad.item(), a.grad.item(), b.grad.item()]

    errors = _in_threads(work, 3)
    assert not errors, errors
    for k in range(3):
        np.testing.assert_allclose(results[k], expected[k], rtol=1e-13)


def _grads_of_at(x0):
    x, a, b = leaf(x0), leaf(0.9), leaf(0.1)
    _sin_chain_of(30)(x, a, b).backward()
    return x.grad, a.grad, b.grad


def _in_fresh_thread(fn):
    """fn() on a thread of its own, on a fresh tape; its result."""
    out = []
    errors = _in_threads(lambda k: out.append(fn()), 1)
    assert not errors, errors
    return out[0]


def _stored_chain(x):
    # sin saves its input, exp its output: both are stored arrays of the replay
    return (x * 2.0).sin().exp()


def test_a_replay_reuses_no_array_anything_still_reads():
    # Note [Reused arrays]: a view of an earlier result, that result's saved
    # values (its graph) and another live result keep their arrays
    compiled = tape.compile(_stored_chain)
    v1, v2 = np.linspace(-1.0, 1.0, 500), np.linspace(0.5, 2.5, 500)
    x1, x2 = leaf(v1), leaf(v2)
    compiled(x1).sum().backward()  # records
    compiled(x1).sum().backward()  # replays; its arrays are spare after this line
    first = compiled(x1)
    view = first.detach().numpy()[100:]
    second = compiled(x2)
    del first
    third = compiled(x2)
    np.testing.assert_allclose(view, np.exp(np.sin(2.0 * v1))[100:], rtol=1e-13)
    x1.grad = x2.grad = None
    second.sum().backward()
    np.testing.assert_allclose(x2.grad.numpy(), np.exp(np.sin(2.0 * v2)) * np.cos(2.0 * v2) * 2.0, rtol=1e-13)
    np.testing.assert_allclose(third.detach().numpy(), np.exp(np.sin(2.0 * v2)), rtol=1e-13)


def test_replays_in_threads_at_once_reuse_arrays_of_their_own():
    compiled = tape.compile(_stored_chain)
    values = {k: np.linspace(-1.0, 1.0, 4000) + k for k in range(4)}
    results = {}

    def work(k):
        x = leaf(values[k])
        for _ in range(30):
            x.grad = None
            y = compiled(x)
            y.sum().backward()
        results[k] = (y.detach().numpy().copy(), x.grad.numpy().copy())

    errors = _in_threads(work, 4)
    assert not errors, errors
    for k, v in values.items():
        np.testing.assert_allclose(results[k][0], np.exp(np.sin(2.0 * v)), rtol=1e-13)
        np.testing.assert_allclose(results[k][1], np.exp(np.sin(2.0 * v)) * np.cos(2.0 * v) * 2.0, rtol=1e-13)


def _compiled_hvp_of_32(seed):
    """A compiled _rosenbrock_hvp, its x and its constant v, and this thread's tape."""
    rng = np.random.default_rng(seed)
    x, v = leaf(rng.uniform(-1.0, 1.0, size=32)), leaf(rng.uniform(-1.0, 1.0, size=32), False)
    return tape.compile(_rosenbrock_hvp), x, v, tape._tape.state.tape


def test_a_dropped_replay_with_steps_is_taken_off_the_tape_s_end():
    # Note [Dropping a dead tail]: the eager rows of the steps, the constant's
    # (v) among them, are named in the segment's epoch and go with it
    def run():
        compiled, x, v, tp = _compiled_hvp_of_32(9)
        rows, results = [], []
        for _ in range(8):
            results.append(compiled(x, v).numpy().copy())
            rows.append(tp.n)
        eager = _rosenbrock_hvp(x, v).numpy()
        return rows, results, eager, compiled.recordings

    rows, results, eager, recordings = _in_fresh_thread(run)
    assert recordings == 1
    assert len(set(rows[3:])) == 1  # one replay's rows, however many calls
    for r in results:
        np.testing.assert_allclose(r, eager, rtol=1e-13)


def test_tensors_a_replay_with_steps_renames_keep_their_rows_after_it_is_dropped():
    # a compaction between two calls renames x and the constant lazily, when
    # the replay next uses them: into the tape's numbering, never the
    # segment's epoch that the call after drops
    def run():
        compiled, x, v, tp = _compiled_hvp_of_32(10)
        got = []
        for k in range(9):
            if k % 3 == 0:
                tp.compact()
            got.append(compiled(x, v).numpy().copy())
        (x * v).sum().backward()
        return got, _rosenbrock_hvp(x, v).numpy(), x.grad.numpy().copy(), v.numpy().copy()

    got, eager, x_grad, v_value = _in_fresh_thread(run)
    for r in got:
        np.testing.assert_allclose(r, eager, rtol=1e-13)
    np.testing.assert_array_equal(x_grad, v_value)


def test_a_dropped_replay_of_a_strided_view_is_taken_off_the_tape_s_end():
    # the view's row reads a contiguous copy that the tape keeps; it goes
    # with the segment
    def run():
        compiled = tape.compile(lambda x: x[::2])
        x = leaf(np.arange(10.0))
        tp = tape._tape.state.tape
        rows, results = [], []
        for _ in range(8):
            results.append(compiled(x).detach().numpy().copy())
            rows.append(tp.n)
        return rows, results

    rows, results = _in_fresh_thread(run)
    assert len(set(rows[3:])) == 1
    for r in results:
        np.testing.assert_array_equal(r, np.arange(0.0, 10.0, 2.0))


@pytest.mark.parametrize("n", [0, 1, 7, 8, 127, 128, 129, 1000, 4099, 100_003])
def test_a_replay_sums_and_averages_as_eager_mode_does_to_the_bit(n):
    # NumPy's pairwise order, and the mean a division by the count; NumPy
    # before 2.3 sums past its 8192-element buffer in chunks, one after another
    chunked = n > 8192 and np.lib.NumpyVersion(np.__version__) < "2.3.0"
    fn = lambda x: ((x * 1.0).sum(), (x * 1.0).mean(), (x * 1.0).reshape(1, -1).mean(dim=1))
    compiled = tape.compile(fn)
    rng = np.random.default_rng(n)
    for _ in range(3):
        x = leaf(rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6, n))
        got, want = compiled(x), fn(x)
        for g, w in zip(got, want):
            if chunked:
                np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-14, atol=0)
            else:
                np.testing.assert_array_equal(g.detach().numpy(), w.detach().numpy())


_doubled_sine = tape.compile(lambda x: (x * 2.0).sin())


class _SineOfDouble(autograd.Function):
    """A custom Function whose forward calls a compiled function: during a
    replay it runs as a step (Note [Python steps])."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _doubled_sine(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2.0 * (x * 2.0).cos()


def test_a_compiled_function_called_by_a_step_of_a_replay_runs_eagerly():
    # its rows would be named in the replay's segment epoch, which its own
    # recording or replay would replace as the tape's
    compiled = tape.compile(lambda x: (_SineOfDouble.apply(x.exp()) * x).sum())
    for value in (0.25, 0.5, 0.75, 1.0, 1.25):
        x = leaf(np.full(3, value))
        tape._tape.state.tape.compact()
        y = compiled(x)
        y.backward()
        e = np.exp(value)
        np.testing.assert_allclose(y.item(), 3 * np.sin(2.0 * e) * value, rtol=1e-13)
        np.testing.assert_allclose(x.grad.numpy(), 2.0 * np.cos(2.0 * e) * e * value + np.sin(2.0 * e),
                                   rtol=1e-13)
    assert compiled.recordings == 1 and _doubled_sine.recordings == 0


# what a dropped replay's steps leave: eager rows write columns a native
# replay never does (dt, nx, oi), and name rows below the replay's own

def _through_float32(x):
    return (x.float() * 3.0).sum().double()


def _through_one_input_cat(x):
    return (tape.cat([x * 5.0]) * 2.0).sum()


def _through_unbind(x):
    a, b = x.unbind(0)
    return (a * b).sum()


def _graph_of(t):
    """The grad_fn graph behind t, as names and edges, breadth first."""
    seen, order, edges = {}, [t.grad_fn], []
    for node in order:
        for child, _ in node.next_functions:
            if child is not None and child not in seen:
                seen[child] = len(order)
                order.append(child)
            edges.append((type(node).__name__, None if child is None else type(child).__name__))
    return edges


def _eager_after(x, b):
    """What runs on the row numbers a dropped replay left: values, the graph
    and gradients to second order."""
    y = x * b
    z = ((y * y).exp() * 0.5).sin() * b
    gx, gb = autograd.grad(z.sum(), (x, b), create_graph=True)
    (h,) = autograd.grad((gx * gb).sum(), b)
    return _graph_of(z), gx.detach().numpy(), gb.detach().numpy(), h.numpy()


@pytest.mark.parametrize("steps_fn", [_through_float32, _through_one_input_cat, _through_unbind],
                         ids=["float32", "cat", "unbind"])
@pytest.mark.parametrize("after", ["replay", "eager"])
def test_rows_a_dropped_replay_with_steps_leaves_take_their_defaults_again(steps_fn, after):
    # the next call (a native replay) drops the last one and appends its own
    # rows, or eager ops do, on the steps' row numbers
    def squares(x):
        y = x * 2.0
        return ((y * y).exp() * 0.5).sum()

    v = np.linspace(0.1, 0.6, 6).reshape(2, 3)

    def run():
        dropping, native, tiny = tape.compile(steps_fn), tape.compile(squares), tape.compile(lambda x: x * 2.0)
        x, b = leaf(v), leaf(np.full((2, 3), 0.5))
        b * 1.0  # b's row comes first, so that x * b lands on the steps' second row
        for _ in range(3):  # records and replays once: no compaction later
            native(x)
            tiny(x)
        for _ in range(4):
            dropping(x).backward()
        x.grad = None
        if after == "replay":
            native(x).backward()
            return x.grad.numpy()
        tiny(x)  # drops the tail and appends one row: the eager ops' land on the steps' numbers
        return _eager_after(x, b)

    if after == "replay":
        np.testing.assert_allclose(_in_fresh_thread(run), np.exp(4 * v * v) * 4 * v, rtol=1e-13)
        return
    graph, *grads = _in_fresh_thread(run)
    expected_graph, *expected = _in_fresh_thread(lambda: _eager_after(leaf(v), leaf(np.full((2, 3), 0.5))))
    assert graph == expected_graph
    for g, e in zip(grads, expected):
        np.testing.assert_allclose(g, e, rtol=1e-13)


@pytest.mark.parametrize("change", ["detached", "no_grad"])
def test_a_leaf_a_step_changes_in_place_still_reaches_the_graphs_before(change):
    # the leaf's old row, below the replay's, is named in the tape's
    # numbering (Tape.epoch_of), not in the replay's epoch the next call drops
    def run():
        w = leaf(np.array([1.0, 2.0, 3.0]))

        def body(x):
            if change == "detached":
                w.detach().mul_(1.0)
            else:
                with tape.no_grad():
                    w.mul_(1.0)
            return (x * 2.0).sum()

        compiled = tape.compile(body)
        x = leaf(np.ones(2))
        for _ in range(4):
            compiled(x).backward()
        y = (w * 3.0).sum()
        compiled(x).backward()
        compiled(x).backward()
        return autograd.grad(y, w)[0].numpy(), compiled.recordings

    grad, recordings = _in_fresh_thread(run)
    np.testing.assert_array_equal(grad, [3.0, 3.0, 3.0])
    assert recordings == 1


def _slice_after_a_grad(x, w):
    y = (x * w).sin()
    (g,) = autograd.grad(y.sum(), x, create_graph=True)
    return (g * g).sum() + y[::3].sum()


def test_a_value_a_later_step_reads_outlives_a_grad_step_between():
    # y, which only the slice reads, is not saved by any backward formula:
    # the grad step's release would drop it unless the replay holds it
    compiled = tape.compile(_slice_after_a_grad)
    for lo in (-1.0, -0.5, 0.0, 0.5):  # records, records capturing the steps, replays
        check(compiled, _slice_after_a_grad, lambda: [leaf(np.linspace(lo, lo + 1.0, 6)), leaf(np.linspace(0.5, 1.5, 6))])
    assert compiled.recordings == 1


@pytest.mark.parametrize("shape, dim", [((0,), None), ((2, 0), 1), ((0, 3), 0)])
def test_the_mean_of_no_elements_is_nan_in_a_replay(shape, dim):
    fn = (lambda a: a.mean().sigmoid()) if dim is None else (lambda a: a.mean(dim=dim).sigmoid())
    compiled = tape.compile(fn)
    for _ in range(3):
        a = leaf(np.zeros(shape))
        out = compiled(a)
        assert np.isnan(out.detach().numpy()).all() and out.shape == fn(leaf(np.zeros(shape))).shape
        out.sum().backward()
        assert a.grad.shape == shape


def _view_then_leaf_changed(a1, a2):
    v = a2.view(-1)
    y = a1 + v
    with tape.no_grad():
        a2.mul_(1.0)
    return y.sum()


def _slice_then_leaf_changed(a1, a2):
    v = a2[::2]
    y = a1[:3] + v
    with tape.no_grad():
        a2.add_(0.0)
    return y.sum()


def _view_then_base_changed(a1, a2):
    w = a2 * 1.0
    v = w.view(-1)
    y = a1 + v
    w.mul_(2.0)
    return y.sum() + w.sum()


@pytest.mark.parametrize("fn", [_view_then_leaf_changed, _slice_then_leaf_changed, _view_then_base_changed],
                         ids=["view-leaf", "slice-leaf", "view-nonleaf"])
def test_a_view_whose_base_changes_in_place_later_in_fn(fn):
    # the in-place op moves the view to a new row; the parts between read
    # the row the view step gave (it was released after the step, then read
    # natively at address 0)
    compiled = tape.compile(fn)
    for lo in (0.0, 1.0, 2.0, 3.0):
        check(compiled, fn, lambda: [leaf(np.linspace(lo, lo + 1.0, 6)), leaf(np.linspace(0.5, 1.5, 6))])
    assert compiled.recordings == 1
