"""tape.func: grad, grad_and_value, vjp, jvp, jacrev, jacfwd and hessian on
known values, nested, with argnums, has_aux and pytrees, torch.func's error
texts, and against tape.autograd.functional."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tape
from tape import func
from tape.autograd import functional

X = np.array([0.3, -1.2, 2.0])
Y = np.array([1.5, 0.5, -0.7])
A = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])


def f(x):
    return (x.sin() * x ** 2).sum()


def f_grad(x):
    return np.cos(x) * x ** 2 + 2 * x * np.sin(x)


def f_second(x):
    # d2/dx2 of x^2 sin x, per element (the Hessian is diagonal)
    return -np.sin(x) * x ** 2 + 4 * x * np.cos(x) + 2 * np.sin(x)


def close(actual, expected):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=1e-12, atol=1e-12)


# -- known values

@pytest.mark.parametrize("point", [0.0, 0.5, math.pi / 3, -2.0])
def test_grad_of_sin_is_cos(point):
    assert func.grad(tape.sin)(tape.tensor(point)).item() == pytest.approx(math.cos(point), abs=1e-15)


def test_grad_of_a_sum():
    close(func.grad(f)(tape.tensor(X)).numpy(), f_grad(X))


def test_results_do_not_require_grad():
    g = func.grad(f)(tape.tensor(X))
    assert not g.requires_grad


def test_grad_and_value():
    g, value = func.grad_and_value(f)(tape.tensor(X))
    close([*g.tolist(), value.item()], [*f_grad(X), (np.sin(X) * X ** 2).sum()])


def test_jacobian_of_a_linear_map_is_its_matrix():
    close(func.jacrev(lambda x: tape.tensor(A) @ x)(tape.tensor(X)).numpy(), A)


def test_jacfwd_of_a_linear_map_is_its_matrix():
    close(func.jacfwd(lambda x: tape.tensor(A) @ x)(tape.tensor(X)).numpy(), A)


def test_hessian_of_a_quadratic_form():
    M = tape.tensor(A.T @ A)
    close(func.hessian(lambda x: x @ M @ x)(tape.tensor(X)).numpy(), 2 * A.T @ A)


def test_jacobian_shape_is_output_shape_then_input_shape():
    jac = func.jacrev(lambda x: x.sum(0) * 2)(tape.ones(4, 3))
    assert jac.shape == (3, 4, 3)


def test_vjp():
    out, vjp_fn = func.vjp(lambda x, y: x * y, tape.tensor(X), tape.tensor(Y))
    gx, gy = vjp_fn(tape.ones(3))
    close([*out.tolist(), *gx.tolist(), *gy.tolist()], [*(X * Y), *Y, *X])


def test_jvp():
    out, tangent = func.jvp(lambda x: x.exp() * x, (tape.tensor(X),), (tape.tensor(Y),))
    close([*out.tolist(), *tangent.tolist()], [*(np.exp(X) * X), *((np.exp(X) * (1 + X)) * Y)])


def test_jvp_of_a_function_independent_of_its_input_is_zero():
    _, tangent = func.jvp(lambda x: tape.ones(3), (tape.tensor(X),), (tape.tensor(Y),))
    close(tangent.numpy(), np.zeros(3))


def test_unused_argument_gets_a_zero_gradient():
    g = func.grad(lambda x, y: x.sum(), argnums=1)(tape.tensor(X), tape.tensor(Y))
    close(g.numpy(), np.zeros(3))


def test_float32():
    g = func.grad(lambda x: (x ** 2).sum())(tape.tensor([1.0, 2.0], dtype=tape.float32))
    assert (g.dtype, g.tolist()) == (tape.float32, [2.0, 4.0])


# -- nesting

def test_grad_through_an_in_place_op_on_a_view_of_a_0d_result():
    # torch.func.grad gives cos(0.5)
    def f(x):
        y = x.clone()
        y.view([]).sin_()
        return y
    assert func.grad(f)(tape.tensor(0.5)).item() == pytest.approx(0.8775825618903728)


def test_grad_of_grad():
    close(func.grad(lambda x: func.grad(f)(x).sum())(tape.tensor(X)).numpy(), f_second(X))


def test_third_derivative_of_sin():
    d3 = func.grad(func.grad(func.grad(tape.sin)))(tape.tensor(0.7))
    assert d3.item() == pytest.approx(-math.cos(0.7), abs=1e-15)


def test_fourth_derivative():
    d4 = func.grad(func.grad(func.grad(func.grad(lambda s: s.exp() * s.sin()))))(tape.tensor(0.7))
    assert d4.item() == pytest.approx(-4 * math.exp(0.7) * math.sin(0.7), rel=1e-12)


def test_jacrev_of_jacrev_of_jacrev():
    jac3 = func.jacrev(func.jacrev(func.jacrev(lambda x: (x ** 3).sum())))(tape.tensor(X))
    expected = np.zeros((3, 3, 3))
    expected[range(3), range(3), range(3)] = 6
    close(jac3.numpy(), expected)


def test_jacfwd_of_jacrev_equals_jacrev_of_jacrev():
    def g(x):
        return x.sin() * x[0]
    x = tape.tensor(X)
    close(func.jacfwd(func.jacrev(g))(x).numpy(), func.jacrev(func.jacrev(g))(x).numpy())


def test_hessian_equals_the_diagonal_of_second_derivatives():
    close(func.hessian(f)(tape.tensor(X)).numpy(), np.diag(f_second(X)))


def test_grad_of_a_function_that_closes_over_the_outer_input():
    # d/dx sum_i d/dy (x . sin y) at y = x: d/dx sum(x cos x) = cos x - x sin x
    def outer(x):
        return func.grad(lambda y: (x * y.sin()).sum())(x).sum()
    close(func.grad(outer)(tape.tensor(X)).numpy(), np.cos(X) - X * np.sin(X))


def test_inner_grad_does_not_see_the_outer_variable():
    # d/dy (x . y) * sum(x) is x * sum(x); its sum's gradient in x is 2 sum(x) everywhere
    def outer(x):
        return func.grad(lambda y: (x * y).sum() * x.sum())(tape.tensor(Y)).sum()
    close(func.grad(outer)(tape.tensor(X)).numpy(), np.full(3, 2 * X.sum()))


def test_jvp_inside_grad():
    def directional(x):
        return func.jvp(lambda u: (u ** 3).sum(), (x,), (tape.tensor(Y),))[1]
    close(func.grad(directional)(tape.tensor(X)).numpy(), 6 * X * Y)


def test_grad_inside_jvp_is_a_hessian_vector_product():
    _, hv = func.jvp(func.grad(lambda u: (u ** 3).sum()), (tape.tensor(X),), (tape.tensor(Y),))
    close(hv.numpy(), 6 * X * Y)


def test_vjp_of_an_outer_variable():
    # v -> |J^T v|^2 for J = diag(cos x * x + sin x): its gradient is 2 J^2 v
    def norm2(v):
        return (func.vjp(lambda x: x.sin() * x, tape.tensor(X))[1](v)[0] ** 2).sum()
    d = np.cos(X) * X + np.sin(X)
    close(func.grad(norm2)(tape.tensor(Y)).numpy(), 2 * d * d * Y)


def test_nested_results_do_not_require_grad():
    g = func.grad(lambda v: (func.vjp(lambda x: x.sin() * x, tape.tensor(X))[1](v)[0] ** 2).sum())(
        tape.tensor(Y))
    assert not g.requires_grad


def test_grad_stays_connected_to_the_callers_graph():
    x = tape.tensor(X, requires_grad=True)
    (second,) = tape.autograd.grad(func.grad(f)(x).sum(), x)
    close(second.numpy(), f_second(X))


def test_grad_stays_connected_to_a_closed_over_parameter():
    w = tape.tensor(Y, requires_grad=True)
    (gw,) = tape.autograd.grad(func.grad(lambda x: (w * x ** 2).sum())(tape.tensor(X)).sum(), w)
    close(gw.numpy(), 2 * X)


def test_under_no_grad_results_do_not_require_grad():
    x = tape.tensor(X, requires_grad=True)
    with tape.no_grad():
        g = func.grad(f)(x)
    assert not g.requires_grad


# -- argnums, has_aux, pytrees

def test_tuple_argnums_gives_a_tuple():
    gx, gy = func.grad(lambda x, y: (x * y ** 2).sum(), argnums=(0, 1))(tape.tensor(X), tape.tensor(Y))
    close([*gx.tolist(), *gy.tolist()], [*(Y ** 2), *(2 * X * Y)])


def test_negative_argnums():
    g = func.grad(lambda x, y: (x * y ** 2).sum(), argnums=-1)(tape.tensor(X), tape.tensor(Y))
    close(g.numpy(), 2 * X * Y)


def test_has_aux_passes_aux_through_detached():
    g, aux = func.grad(lambda x: ((x ** 2).sum(), {"double": x * 2}), has_aux=True)(tape.tensor(X))
    assert (aux["double"].tolist(), aux["double"].requires_grad) == ((X * 2).tolist(), False)


def test_dict_and_list_pytree_inputs():
    g = func.grad(lambda d: (d["a"] * d["b"][0]).sum())({"a": tape.tensor(X), "b": [tape.tensor(Y)]})
    close([*g["a"].tolist(), *g["b"][0].tolist()], [*Y, *X])


def test_pytree_outputs_of_jacrev():
    jac = func.jacrev(lambda x: {"a": x * 2, "b": [x.sum()]})(tape.tensor(X))
    close([*jac["a"].numpy().ravel(), *jac["b"][0].tolist()], [*np.eye(3).ravel() * 2, 1, 1, 1])


def test_jacrev_of_tuple_argnums():
    jx, jy = func.jacrev(lambda x, y: x * y, argnums=(0, 1))(tape.tensor(X), tape.tensor(Y))
    close(np.stack([jx.numpy(), jy.numpy()]), np.stack([np.diag(Y), np.diag(X)]))


def test_hessian_of_tuple_argnums():
    (hxx, hxy), (hyx, hyy) = func.hessian(lambda x, y: (x * y).sum() ** 2, argnums=(0, 1))(
        tape.tensor(X), tape.tensor(Y))
    s = (X * Y).sum()
    expected = [2 * np.outer(Y, Y), 2 * np.outer(Y, X) + 2 * s * np.eye(3),
                2 * np.outer(X, Y) + 2 * s * np.eye(3), 2 * np.outer(X, X)]
    close(np.stack([h.numpy() for h in (hxx, hxy, hyx, hyy)]), np.stack(expected))


def test_jacfwd_with_aux():
    jac, aux = func.jacfwd(lambda x: (x.cos(), x.sum()), has_aux=True)(tape.tensor(X))
    close([*np.diag(jac.numpy()), aux.item()], [*-np.sin(X), X.sum()])


def test_vjp_with_tuple_output_and_aux():
    (a, b), vjp_fn, aux = func.vjp(lambda x: ((x.exp(), x.sum()), x * 3), tape.tensor(X), has_aux=True)
    (g,) = vjp_fn((tape.tensor(Y), tape.tensor(2.0)))
    close(g.numpy(), np.exp(X) * Y + 2)


def test_jvp_with_tuple_output():
    (_, _), (ta, tb) = func.jvp(lambda x, y: (x * y, x.sum()), (tape.tensor(X), tape.tensor(Y)),
                                (tape.tensor(Y), tape.tensor(X)))
    close([*ta.tolist(), tb.item()], [*(Y * Y + X * X), Y.sum()])


# -- against tape.autograd.functional

def test_agrees_with_functional():
    x, v = tape.tensor(X), tape.tensor(Y)
    g = lambda x: (x.tanh() * x.exp()).sum()  # noqa: E731
    ours = [func.jacrev(lambda x: x.tanh() * x)(x), func.hessian(g)(x), func.vjp(g, x)[1](tape.tensor(1.0))[0],
            func.jvp(lambda x: x.tanh() * x, (x,), (v,))[1]]
    theirs = [functional.jacobian(lambda x: x.tanh() * x, x), functional.hessian(g, x),
              functional.vjp(g, x)[1], functional.jvp(lambda x: x.tanh() * x, x, v)[1]]
    close(np.concatenate([t.numpy().ravel() for t in ours]), np.concatenate([t.numpy().ravel() for t in theirs]))


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=0, max_size=3), st.lists(st.integers(1, 3), min_size=0, max_size=2))
def test_jacobian_shapes(in_shape, out_extra):
    # f(x) = c * sum(x) for a constant c of shape out_extra: J = c (outer) ones
    c = tape.tensor(np.arange(1.0, 1 + int(np.prod(out_extra))).reshape(out_extra))
    x = tape.ones(*in_shape) if in_shape else tape.tensor(1.0)
    jac = func.jacrev(lambda x: c * x.sum())(x)
    close(jac.numpy(), np.multiply.outer(c.numpy(), np.ones(in_shape)))


def test_jacrev_and_jacfwd_agree_with_functional_jacobian_on_several_inputs():
    x, y = tape.tensor(X), tape.tensor(A)
    h = lambda x, y: (y @ x).sin()  # noqa: E731
    ours = func.jacrev(h, argnums=(0, 1))(x, y) + func.jacfwd(h, argnums=(0, 1))(x, y)
    theirs = functional.jacobian(h, (x, y)) * 2
    close(np.concatenate([t.numpy().ravel() for t in ours]), np.concatenate([t.numpy().ravel() for t in theirs]))


# -- errors, with torch.func's types and texts

def _x():
    return tape.tensor(X)


ERRORS = [
    (lambda: func.grad(lambda x: x.sin())(_x()), RuntimeError,
     "grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor with 1 dims. "
     "Maybe you wanted to use the vjp or jacrev APIs instead?"),
    (lambda: func.grad(lambda x: 3.0)(_x()), RuntimeError,
     "grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got <class 'float'>"),
    (lambda: func.grad(lambda x: x.sum(), argnums=1)(_x()), RuntimeError,
     "Got argnum=1, but only 1 positional inputs"),
    (lambda: func.grad(lambda x: x.sum(), argnums=())(_x()), RuntimeError, "argnums must be non-empty"),
    (lambda: func.grad(lambda x, y: x.sum(), argnums=(0, -2))(_x(), _x()), RuntimeError,
     "argnums elements must be unique, got (0, 0)"),
    (lambda: func.grad(lambda x: x.sum(), argnums=[0])(_x()), RuntimeError,
     "argnums must be int or Tuple[int, ...], got: <class 'list'>"),
    (lambda: func.grad(lambda x, y: x.sum(), argnums=(0, 1.0))(_x(), _x()), RuntimeError,
     "argnum must be int, got: <class 'float'>"),
    (lambda: func.grad(lambda x: x.sum(), has_aux=True)(_x()), RuntimeError,
     "grad_and_value(f)(*args): output of function f should be a tuple: (output, aux) if has_aux is True"),
    (lambda: func.grad(lambda x: x.sum())(3.0), ValueError,
     "Thing passed to transform API must be Tensor, got <class 'float'>"),
    (lambda: func.grad(lambda x: x.sum())(tape.tensor([1, 2])), RuntimeError,
     "only Tensors of floating point dtype can require gradients"),
    (lambda: func.vjp(lambda x: 3.0, _x()), RuntimeError,
     "vjp(f, *primals): expected f(*primals) to return only tensors, got unsupported type <class 'float'>"),
    (lambda: func.vjp(lambda x: None, _x()), RuntimeError,
     "vjp(f, *primals): Expected f to be a function that has non-empty output (got output = [None])"),
    (lambda: func.vjp(lambda x: x > 0, _x()), RuntimeError,
     "vjp(f, ...): All outputs of f must be floating-point or complex Tensors, got Tensor with dtype tape.bool"),
    (lambda: func.vjp(lambda x: x, _x(), has_aux=True), RuntimeError,
     "vjp(f, *primals): output of function f should be a tuple: (output, aux) if has_aux is True"),
    (lambda: func.vjp(lambda x: (x * 2, x.sum()), _x())[1](_x()), RuntimeError,
     "Expected pytree structure of cotangents to be the same as pytree structure of outputs to the function. "
     "cotangents: *, primal output: (*, *)"),
    (lambda: func.vjp(lambda x: x * 2, _x())[1](tape.ones(2)), RuntimeError,
     "Mismatch in shape: grad_output[0] has a shape of tape.Size([2]) and output[0] has a shape of "
     "tape.Size([3])."),
    (lambda: func.jvp(lambda x: x, _x(), _x()), RuntimeError,
     "jvp(f, primals, tangents): Expected primals to be a tuple. E.g. it should be valid to call f(*primals)."),
    (lambda: func.jvp(lambda x: x, (_x(),), [_x()]), RuntimeError,
     "jvp(f, primals, tangents): Expected primals and tangents to have the same python structure. For "
     "example, if primals is a tuple of 3 tensors, tangents also must be. Got primals with structure "
     "TreeSpec(tuple, None, [*]) and tangents with structure TreeSpec(list, None, [*])"),
    (lambda: func.jvp(lambda x: x, (), ()), RuntimeError,
     "jvp(f, primals, tangents): Expected primals to contain at least one Tensor."),
    (lambda: func.jvp(lambda x: x, (_x(),), (3.0,)), RuntimeError,
     "jvp(f, primals, tangents): Expected tangents to only contain Tensors, got <class 'float'>"),
    (lambda: func.jvp(lambda x: x, (_x(),), (tape.ones(2),)), RuntimeError,
     "Trying to set a forward gradient that has a different size than that of the original Tensor, this is "
     "not supported. Tensor is of size [3] while the given forward gradient is of size [2]."),
    (lambda: func.jvp(lambda x: x.sum(), (tape.tensor([1, 2]),), (tape.tensor([1, 2]),)), ValueError,
     "Expected primal to be floating point or complex, but got: tape.int64"),
    (lambda: func.jvp(lambda x: 3.0, (_x(),), (_x(),)), RuntimeError,
     "jvp(f, primals, tangents): expected f(*primals) to return only tensors, got unsupported type "
     "<class 'float'>"),
    (lambda: func.jvp(lambda x: tape.ones(3), (_x(),), (_x(),), strict=True), RuntimeError,
     "jvp(f, primals, tangents, strict=True): The output of f is independent of the inputs. This is not "
     "allowed with strict=True."),
    (lambda: func.jacrev(lambda x: x, chunk_size=0), ValueError, "jacrev: `chunk_size` should be greater than 0."),
    (lambda: func.jacrev(lambda x: 3.0)(_x()), RuntimeError,
     "vjp(f, *primals): expected f(*primals) to return only tensors, got unsupported type <class 'float'>"),
    (lambda: func.jacfwd(lambda x: 3.0)(_x()), RuntimeError,
     "jvp(f, primals, tangents): expected f(*primals) to return only tensors, got unsupported type "
     "<class 'float'>"),
    (lambda: func.jacfwd(lambda x: x, has_aux=True)(_x()), RuntimeError,
     "jvp(f, primals, tangents): output of function f should be a tuple: (output, aux) if has_aux is True"),
    (lambda: func.jacfwd(lambda x: x, randomness="bogus")(_x()), RuntimeError,
     "Only allowed values for randomness are 'error', 'different', or 'same'. Got bogus"),
    (lambda: func.jacfwd(lambda x: x.sum())(tape.tensor([1, 2])), ValueError,
     "Expected primal to be floating point or complex, but got: tape.int64"),
    (lambda: func.jacrev(lambda x: x > 0)(_x()), RuntimeError,
     "vjp(f, ...): All outputs of f must be floating-point or complex Tensors, got Tensor with dtype tape.bool"),
]


@pytest.mark.parametrize("call, exc, text", ERRORS)
def test_errors(call, exc, text):
    with pytest.raises(exc) as info:
        call()
    assert str(info.value) == text


def test_tape_keeps_working_after_an_error():
    with pytest.raises(RuntimeError):
        func.grad(lambda x: x.sin())(_x())
    x = tape.tensor(X, requires_grad=True)
    f(x).backward()
    close([*x.grad.tolist(), *func.grad(f)(_x()).tolist()], [*f_grad(X), *f_grad(X)])


def test_jacfwd_of_a_bool_output_is_false():
    jac = func.jacfwd(lambda x: x > 0)(_x())
    assert (jac.shape, jac.any().item()) == ((3, 3), False)


def test_empty_output_jacobian():
    assert func.jacrev(lambda x: x[:0])(_x()).shape == (0, 3)


# -- vmap

RNG = np.random.default_rng(7)
XB = RNG.normal(size=(4, 3))
ZB = RNG.normal(size=(4, 3, 2))
M = RNG.normal(size=(3, 2))


def vmapped(fn, *args, **kwargs):
    return func.vmap(fn, **kwargs)(*(tape.tensor(a) for a in args)).numpy()


def test_vmap_per_sample_gradients_of_a_linear_model():
    # DESIGN.md W8: 10 features, batch 256; d/dw (x.w - t)^2 = 2 (x.w - t) x
    rng = np.random.default_rng(0)
    w, x, t = rng.normal(size=10), rng.normal(size=(256, 10)), rng.normal(size=256)
    per_sample = func.vmap(func.grad(lambda w, x, t: (x @ w - t) ** 2), in_dims=(None, 0, 0))(
        tape.tensor(w), tape.tensor(x), tape.tensor(t))
    close(per_sample.numpy(), 2 * (x @ w - t)[:, None] * x)


def test_vmap_sum_reduces_one_sample():
    close(vmapped(lambda x: x.sum(), XB), XB.sum(1))


def test_vmap_vector_matmul_is_a_dot_product():
    w = tape.tensor(XB[0])
    close(vmapped(lambda x: x @ w, XB), XB @ XB[0])


def test_vmap_matrix_times_batched_vector():
    m = tape.tensor(M)
    close(vmapped(lambda x: m.T @ x, XB), XB @ M)


def test_vmap_batched_matmul_of_two_batched_tensors():
    close(vmapped(lambda z, x: x @ z, ZB, XB), np.einsum("bi,bij->bj", XB, ZB))


def test_vmap_shapes_seen_by_f_exclude_the_batch_dim():
    seen = []
    func.vmap(lambda z: seen.append((z.shape, z.ndim, z.size(-1), len(z))) or z)(tape.tensor(ZB))
    assert seen == [((3, 2), 2, 2, 3)]


def test_vmap_indexing():
    close(vmapped(lambda z: z[1:, 0], ZB), ZB[:, 1:, 0])


def test_vmap_indexing_with_an_index_tensor():
    index = tape.tensor([2, 0])
    close(vmapped(lambda z: z[index], ZB), ZB[:, [2, 0]])


def test_vmap_reductions_over_dims():
    out = func.vmap(lambda z: (z.mean(0), z.amax(-1, keepdim=True), z.softmax(1), z.max(0).indices))(tape.tensor(ZB))
    expected = [ZB.mean(1), ZB.max(-1, keepdims=True), np.exp(ZB) / np.exp(ZB).sum(-1, keepdims=True),
                ZB.argmax(1)]
    close(np.concatenate([o.numpy().ravel() for o in out]), np.concatenate([e.ravel() for e in expected]))


def test_vmap_shape_ops():
    out = func.vmap(lambda z: z.T.reshape(-1).unsqueeze(0).flip(1))(tape.tensor(ZB))
    close(out.numpy(), ZB.transpose(0, 2, 1).reshape(4, 1, 6)[:, :, ::-1])


def test_vmap_in_dims_and_out_dims():
    out = func.vmap(lambda x, m: x @ m, in_dims=(1, None), out_dims=1)(tape.tensor(XB.T), tape.tensor(M))
    close(out.numpy(), (XB @ M).T)


def test_vmap_negative_in_dim():
    close(vmapped(lambda x: x * 2, XB.T, in_dims=-1), XB * 2)


def test_vmap_pytree_inputs_and_outputs():
    out = func.vmap(lambda d: {"s": d["a"].sum(), "p": [d["a"] * d["b"]]})({"a": tape.tensor(XB), "b": tape.tensor(XB)})
    close(np.concatenate([out["s"].numpy(), out["p"][0].numpy().ravel()]),
          np.concatenate([XB.sum(1), (XB * XB).ravel()]))


def test_vmap_output_independent_of_the_batch_is_expanded():
    close(vmapped(lambda x: tape.ones(2), XB), np.ones((4, 2)))


def test_nested_vmap():
    close(vmapped(func.vmap(lambda a: a.sum()), ZB), ZB.sum(-1))


def test_nested_vmap_over_different_inputs():
    # outer over the rows of x, inner over the columns of m: x_i . m_j
    out = func.vmap(lambda x: func.vmap(lambda m: x @ m, in_dims=1)(tape.tensor(M)))(tape.tensor(XB))
    close(out.numpy(), XB @ M)


def test_vmap_of_second_derivatives():
    s = XB[:, 0]
    d2 = func.vmap(func.grad(func.grad(lambda s: s.sin() * s)))(tape.tensor(s))
    close(d2.numpy(), 2 * np.cos(s) - s * np.sin(s))


def test_grad_of_vmap():
    w = XB[0]
    g = func.grad(lambda w: func.vmap(lambda x: (x @ w).tanh())(tape.tensor(XB)).sum())(tape.tensor(w))
    close(g.numpy(), ((1 - np.tanh(XB @ w) ** 2)[:, None] * XB).sum(0))


def test_jacrev_of_vmap():
    w = XB[0]
    jac = func.jacrev(lambda w: func.vmap(lambda x: x @ w)(tape.tensor(XB)))(tape.tensor(w))
    close(jac.numpy(), XB)


def test_vmap_grad_of_a_matrix_parameter():
    g = func.vmap(func.grad(lambda m, x: ((x @ m).tanh() ** 2).sum()), in_dims=(None, 0))(tape.tensor(M),
                                                                                         tape.tensor(XB))
    h = np.tanh(XB @ M)
    close(g.numpy(), np.einsum("bi,bj->bij", XB, 2 * h * (1 - h ** 2)))


def test_vmap_stays_connected_to_the_callers_graph():
    x = tape.tensor(XB, requires_grad=True)
    (g,) = tape.autograd.grad(func.vmap(lambda x: (x ** 2).sum())(x).sum(), x)
    close(g.numpy(), 2 * XB)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 4), st.lists(st.integers(1, 3), min_size=1, max_size=3), st.integers(0, 2))
def test_vmap_equals_a_loop_over_samples(batch, shape, where):
    # f reduces over its last dim and mixes in a shared tensor, for a batch dim at any position
    data = np.random.default_rng(batch).normal(size=[batch] + shape)
    d = where % data.ndim
    shared = tape.tensor(np.linspace(0.5, 1.5, shape[-1]))
    out = func.vmap(lambda x: (x.sin() * shared).sum(-1), in_dims=d)(tape.tensor(np.moveaxis(data, 0, d)))
    close(out.numpy(), np.stack([(np.sin(s) * shared.numpy()).sum(-1) for s in data]))


VMAP_ERRORS = [
    (lambda: func.vmap(lambda x: x.sum().item())(tape.ones(2, 3)), RuntimeError,
     "vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over calling .item() on a "
     "Tensor, please try to rewrite what you're doing with other operations. If error is occurring somewhere "
     "inside PyTorch internals, please file a bug report."),
    (lambda: func.vmap(lambda x: bool(x.sum() > 0))(tape.ones(2, 3)), RuntimeError,
     "vmap: It looks like you're attempting to use a Tensor in some data-dependent control flow. We don't "
     "support that yet, please file an issue at https://github.com/pytorch/pytorch/issues ."),
    (lambda: func.vmap(lambda x: x, chunk_size=0), ValueError, "vmap: chunk_size should be None or greater than 0. "
     "(got 0)"),
    (lambda: func.vmap(lambda x: x, randomness="bogus"), RuntimeError,
     "Only allowed values for randomness are 'error', 'different', or 'same'. Got bogus"),
    (lambda: func.vmap(lambda x: 3.0)(tape.ones(2, 3)), ValueError,
     "vmap(<lambda>, ...): `<lambda>` must only return Tensors, got type <class 'float'>. Did you mean to set "
     "out_dims= to None for output?"),
    (lambda: func.vmap(lambda x: x, out_dims=2)(tape.ones(2, 3)), IndexError,
     "Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
    (lambda: func.vmap(lambda x: x, out_dims="a")(tape.ones(2, 3)), ValueError,
     "vmap(<lambda>, ..., out_dims=a): `out_dims` must be an int, None or a python collection of ints "
     "representing where in the outputs the vmapped dimension should appear."),
    (lambda: func.vmap(lambda x: x, in_dims=2)(tape.ones(2, 3)), ValueError,
     "vmap(<lambda>, in_dims=2, ...)(<inputs>): Got in_dim=2 for some input, but that input is a Tensor of "
     "dimensionality 2 so expected in_dim to satisfy -2 <= in_dim < 2."),
    (lambda: func.vmap(lambda x: x, in_dims=[0])(tape.ones(2, 3)), ValueError,
     "vmap(<lambda>, in_dims=[0], ...)(<inputs>): expected `in_dims` to be int or a (potentially nested) tuple "
     "matching the structure of inputs, got: <class 'list'>."),
    (lambda: func.vmap(lambda x: x, in_dims=(0, 0))(tape.ones(2, 3)), ValueError,
     "vmap(<lambda>, in_dims=(0, 0), ...)(<inputs>): in_dims is not compatible with the structure of `inputs`. "
     "in_dims has structure TreeSpec(tuple, None, [*,\n  *]) but inputs has structure TreeSpec(tuple, None, [*])."),
    (lambda: func.vmap(lambda x: x, in_dims=(None,))(tape.ones(2, 3)), ValueError,
     "vmap: Expected at least one Tensor to vmap over"),
    (lambda: func.vmap(lambda x, y: x, in_dims=(0, 0))(tape.ones(2, 3), 3.0), ValueError,
     "vmap(<lambda>, in_dims=(0, 0), ...)(<inputs>): Got in_dim=0 for an input but the input is of type "
     "<class 'float'>. We cannot vmap over non-Tensor arguments, please use None as the respective in_dim"),
    (lambda: func.vmap(lambda x, y: x + y)(tape.ones(2, 3), tape.ones(3, 2)), ValueError,
     "vmap: Expected all tensors to have the same size in the mapped dimension, got sizes [2, 3] for the mapped "
     "dimension"),
    (lambda: func.vmap(lambda x: x)(), ValueError,
     "vmap(<lambda>)(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are trying to vmap over a "
     "function with no inputs. The latter is unsupported."),
    (lambda: func.vmap(lambda x: x, out_dims=None)(tape.ones(2, 3)), ValueError,
     "vmap(<lambda>, ...): `<lambda>` can not return a BatchedTensor when out_dim is None"),
    (lambda: func.vmap(lambda x: x.sum(2))(tape.ones(2, 3)), IndexError,
     "Dimension out of range (expected to be in range of [-1, 0], but got 2)"),
    (lambda: func.vmap(lambda x: x.mT)(tape.ones(2, 3)), RuntimeError,
     "tensor.mT is only supported on matrices or batches of matrices. Got 1-D tensor."),
    (lambda: func.vmap(lambda x: x.sum() @ x)(tape.ones(2, 3)), RuntimeError,
     "both arguments to matmul need to be at least 1D, but they are 0D and 1D"),
    (lambda: func.vmap(lambda x: x[x > 1])(tape.ones(2, 3)), RuntimeError,
     "vmap: We do not support batching operators that can support dynamic shape. Attempting to batch over "
     "indexing with a boolean mask."),
    (lambda: func.vmap(lambda x: x.reshape(2, 2))(tape.ones(2, 3)), RuntimeError,
     "shape '[2, 2]' is invalid for input of size 3"),
    (lambda: func.vmap(func.grad(lambda x: x.sin()))(tape.ones(2, 3)), RuntimeError,
     "grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor with 1 dims. Maybe you "
     "wanted to use the vjp or jacrev APIs instead?"),
]


@pytest.mark.parametrize("call, exc, text", VMAP_ERRORS)
def test_vmap_errors(call, exc, text):
    with pytest.raises(exc) as info:
        call()
    assert str(info.value) == text


@pytest.mark.parametrize("fn, text", [
    (lambda x: tape.equal(x, x), "Batching rule not implemented for aten::equal. We could not generate a fallback."),
    (lambda x: x.register_hook(lambda g: g), "vmap: Tensor.register_hook has no batching rule for a batched tensor"),
])
def test_vmap_refuses_what_it_cannot_batch(fn, text):
    with pytest.raises(RuntimeError) as info:
        func.vmap(fn)(tape.ones(2, 3))
    assert str(info.value).startswith(text)


# -- tape functions inside vmap (Note [Op declarations])

W3 = RNG.normal(size=3)
M3 = RNG.normal(size=(3, 3))
YB = RNG.normal(size=(4, 3))
MASK = np.array([True, False, True])


def loop_over_samples(fn, args, in_dims):
    """fn applied to each sample outside vmap, the results stacked."""
    n = next(a.shape[d] for a, d in zip(args, in_dims) if d is not None)
    return np.stack([fn(*(tape.tensor(a if d is None else np.take(a, k, d)) for a, d in zip(args, in_dims))).numpy()
                     for k in range(n)])


# (fn of one sample, its arguments, in_dims)
VMAP_FUNCTIONS = [
    (lambda x: tape.sin(x), (XB,), 0),
    (lambda x: tape.exp(x) + tape.tanh(x) + tape.sigmoid(x), (XB,), 0),
    (lambda x: tape.log1p(tape.abs(x)) * tape.sqrt(tape.square(x) + 1), (XB,), 0),
    (lambda x: tape.relu(x) + tape.gelu(x) + tape.softplus(x, 2.0), (XB,), 0),
    (lambda x, w: tape.mul(w, x), (XB, W3), (0, None)),
    (lambda x, y: tape.add(x, y, alpha=2) - tape.sub(y, x), (XB, YB), 0),
    (lambda x: tape.div(x, 3.0) + tape.pow(x, 3) + tape.pow(2.0, x), (XB,), 0),
    (lambda x, w: tape.pow(tape.abs(x) + 1, w), (XB, W3), (0, None)),
    (lambda x: tape.maximum(x, 0.2) + tape.minimum(0.1, x), (XB,), 0),
    (lambda x, w: tape.maximum(w, x) * tape.atan2(x, w), (XB, W3), (0, None)),
    (lambda x, y: tape.minimum(x, y), (XB, YB), 0),
    (lambda x: tape.clamp(x, -0.5, 0.5) + tape.clamp_min(x, 0.1) + tape.clamp(x, max=0.3), (XB,), 0),
    (lambda x: tape.sum(x), (XB,), 0),
    (lambda z: tape.sum(z, 1, keepdim=True) + tape.mean(z, dim=0), (ZB,), 0),
    (lambda z: tape.sum(z, axis=0), (ZB,), 0),
    (lambda x: tape.prod(x, 0) + tape.amax(x, 0) + tape.amin(x) + tape.max(x), (XB,), 0),
    (lambda z: tape.max(z, 1).values + tape.min(z, 1)[1], (ZB,), 0),
    (lambda z: tape.var(z, 0) + tape.std(z) + tape.norm(z), (ZB,), 0),
    (lambda x: tape.softmax(x, 0) + tape.log_softmax(x, -1) + tape.logsumexp(x, 0) + tape.cumsum(x, 0), (XB,), 0),
    (lambda x, w: tape.dot(x, w) + tape.dot(w, x), (XB, W3), (0, None)),
    (lambda x, y: tape.dot(x, y), (XB, YB), 0),
    (lambda x, m: tape.mv(m, x) + tape.matmul(x, m) + tape.matmul(m, x), (XB, M3), (0, None)),
    (lambda z, m: tape.mm(m, z) + tape.mm(tape.t(m), z), (ZB, M3), (0, None)),
    (lambda x, w: tape.outer(x, w) + tape.outer(w, x), (XB, W3), (0, None)),
    (lambda x, m: tape.einsum("i,ij->j", x, m), (XB, M3), (0, None)),
    (lambda x, y: tape.einsum("i,j", x, y), (XB, YB), 0),
    (lambda z: tape.einsum("...i->i", z) + tape.einsum("ii->i", z[:2]), (ZB,), 0),
    (lambda x, w: tape.stack([x, w]), (XB, W3), (0, None)),
    (lambda x, y, w: tape.stack([x, y, w], -1), (XB, YB, W3), (0, 0, None)),
    (lambda x, w: tape.cat([w, x, x]), (XB, W3), (0, None)),
    (lambda z: tape.cat([z, tape.ones(3, 1)], 1), (ZB,), 0),
    (lambda x: tape.where(tape.tensor(MASK), x, 0.0), (XB,), 0),
    (lambda x, y: tape.where(x > y, x, y), (XB, YB), 0),
    (lambda x, w: tape.where(x > 0, x, w), (XB, W3), (0, None)),
    (lambda x, w: tape.gt(w, x).to(tape.float64) + tape.eq(x, x), (XB, W3), (0, None)),
    (lambda x: tape.squeeze(tape.unsqueeze(tape.reshape(x, (3, 1)), 0), 0), (XB,), 0),
    (lambda z: tape.transpose(z, 0, 1) + tape.permute(z, (1, 0)), (ZB,), 0),
    (lambda z: tape.flatten(z), (ZB,), 0),
]


@pytest.mark.parametrize("fn, args, in_dims", VMAP_FUNCTIONS)
def test_vmap_of_tape_functions_equals_a_loop_over_samples(fn, args, in_dims):
    dims = (in_dims,) * len(args) if isinstance(in_dims, int) else in_dims
    close(vmapped(fn, *args, in_dims=in_dims), loop_over_samples(fn, args, dims))


def test_vmap_of_tape_functions_with_in_dims_and_out_dims():
    out = func.vmap(lambda x, w: tape.sin(x) * tape.sum(w), in_dims=(1, None), out_dims=1)(
        tape.tensor(XB.T), tape.tensor(W3))
    close(out.numpy(), np.sin(XB.T) * W3.sum())


def test_nested_vmap_of_tape_functions():
    inner = func.vmap(lambda x, y: tape.stack([tape.sum(tape.softmax(x, 0) * y), tape.dot(x, y)]), in_dims=(0, None))
    out = func.vmap(inner, in_dims=(None, 0))(tape.tensor(XB), tape.tensor(YB))
    softmax = np.exp(XB) / np.exp(XB).sum(1, keepdims=True)
    # out[j, i] is the pair for x = XB[i], y = YB[j]
    close(out.numpy(), np.stack([YB @ softmax.T, YB @ XB.T], -1))


def test_nested_vmap_cat_of_a_batched_and_a_plain_tensor():
    out = func.vmap(func.vmap(lambda z: tape.cat([tape.sin(z), tape.tensor(W3)])))(tape.tensor(ZB))
    close(out.numpy(), np.concatenate([np.sin(ZB), np.broadcast_to(W3, (4, 3, 3))], -1))


def test_vmap_grad_of_a_function_of_tape_functions():
    # d/dw [sum sin(x w) + (x . w)^2] = x cos(x w) + 2 (x . w) x
    g = func.vmap(func.grad(lambda w, x: tape.sum(tape.sin(tape.mul(x, w))) + tape.dot(x, w) ** 2),
                  in_dims=(None, 0))(tape.tensor(W3), tape.tensor(XB))
    close(g.numpy(), XB * np.cos(XB * W3) + 2 * (XB @ W3)[:, None] * XB)


def test_vmap_jacrev_of_a_stack():
    # the Jacobian of (sum x, x . x) is the rows 1 and 2 x
    jac = func.vmap(func.jacrev(lambda x: tape.stack([tape.sum(x), tape.dot(x, x)])))(tape.tensor(XB))
    close(jac.numpy(), np.stack([np.ones_like(XB), 2 * XB], 1))


def test_vmap_of_jacrev_gives_per_sample_jacobians():
    # d/dx (x sin x0) = diag(x0 cos x) + e0-column sin x
    jac = func.vmap(func.jacrev(lambda x: x.sin() * x[0]))(tape.tensor(XB))
    expected = np.stack([np.diag(x[0] * np.cos(x)) + np.outer(np.sin(x), np.eye(3)[0]) for x in XB])
    close(jac.numpy(), expected)


def test_vmap_of_jacfwd_with_a_shared_parameter():
    jac = func.vmap(func.jacfwd(lambda m, x: x @ m), in_dims=(None, 0))(tape.tensor(M), tape.tensor(XB))
    close(jac.numpy(), np.einsum("bi,jk->bjik", XB, np.eye(2)))


def test_vmap_of_hessian():
    close(func.vmap(func.hessian(f))(tape.tensor(XB)).numpy(), np.stack([np.diag(f_second(x)) for x in XB]))


def test_vmap_of_vjp_and_jvp():
    x, v = tape.tensor(XB), tape.tensor(XB[::-1].copy())
    vjps = func.vmap(lambda x, v: func.vjp(lambda u: u.exp() * u, x)[1](v)[0])(x, v)
    jvps = func.vmap(lambda x, v: func.jvp(lambda u: u.exp() * u, (x,), (v,))[1])(x, v)
    d = np.exp(XB) * (1 + XB)
    close(np.stack([vjps.numpy(), jvps.numpy()]), np.stack([d * XB[::-1], d * XB[::-1]]))


def test_tape_keeps_working_after_a_vmap_error():
    with pytest.raises(RuntimeError):
        func.vmap(lambda x: tape.equal(x, x))(tape.ones(2, 3))
    x = tape.tensor(XB, requires_grad=True)
    x.sin().sum().backward()
    close([*x.grad.numpy().ravel(), *vmapped(lambda x: x.sum(), XB)], [*np.cos(XB).ravel(), *XB.sum(1)])


def test_grad_of_per_sample_gradients():
    # meta-gradient: d/dw sum_i |d/dw (x_i . w)^2|^2 = d/dw sum_i 4 (x_i . w)^2 |x_i|^2
    w = XB[0]
    meta = func.grad(lambda w: (func.vmap(func.grad(lambda w, x: (x @ w) ** 2), in_dims=(None, 0))(
        w, tape.tensor(XB)) ** 2).sum())(tape.tensor(w))
    close(meta.numpy(), (8 * (XB @ w) * (XB ** 2).sum(1)) @ XB)


def test_per_sample_gradients_stay_connected_to_the_callers_graph():
    w = tape.tensor(XB[0], requires_grad=True)
    g = func.vmap(func.grad(lambda w, x: (x @ w) ** 2), in_dims=(None, 0))(w, tape.tensor(XB))
    (gw,) = tape.autograd.grad(g.sum(), w)
    close(gw.numpy(), 2 * XB.T @ XB.sum(1))
