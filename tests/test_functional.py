"""tape.autograd.functional: jacobian, hessian, vjp, jvp, hvp and vhp, on
known values, against one another, and with PyTorch's strict-mode errors."""
import numpy as np
import pytest

import tape
from tape.autograd import functional as F

X = np.array([0.5, -1.0, 2.0])
V = np.array([1.0, 2.0, -0.5])


def f(x):
    return (x.sin() * x).sum()


def f_hessian(x):
    # d2/dx2 of x sin x is 2 cos x - x sin x; the Hessian is diagonal
    return np.diag(2 * np.cos(x) - x * np.sin(x))


def g(x, y):
    return (x * y).tanh()


def test_known_jacobian_and_hessian():
    x = tape.tensor([1.0, 2.0])
    np.testing.assert_allclose(F.jacobian(lambda x: x ** 2, x).numpy(), [[2, 0], [0, 4]])
    np.testing.assert_allclose(F.hessian(lambda x: (x ** 3).sum(), x).numpy(), [[6, 0], [0, 12]])
    np.testing.assert_allclose(F.hessian(f, tape.tensor(X)).numpy(), f_hessian(X), rtol=1e-12)


def test_products_agree_with_the_matrices():
    x, v = tape.tensor(X), tape.tensor(V)
    H = f_hessian(X)
    for product in (F.hvp, F.vhp):
        value, hv = product(f, x, v)
        np.testing.assert_allclose(value.item(), (np.sin(X) * X).sum())
        np.testing.assert_allclose(hv.numpy(), H @ V, rtol=1e-12)
    y = tape.tensor(np.arange(6.0).reshape(2, 3) / 5)
    w = tape.tensor(np.linspace(-1, 1, 6).reshape(2, 3))
    jx, jy = F.jacobian(g, (x, y))
    assert jx.shape == (2, 3, 3) and jy.shape == (2, 3, 2, 3)
    _, (vjp_x, vjp_y) = F.vjp(g, (x, y), w)
    np.testing.assert_allclose(vjp_x.numpy(), np.einsum("ij,ijk->k", w.numpy(), jx.numpy()))
    np.testing.assert_allclose(vjp_y.numpy(), np.einsum("ij,ijkl->kl", w.numpy(), jy.numpy()))
    out, jvp = F.jvp(g, (x, y), (v, w))
    np.testing.assert_allclose(out.numpy(), np.tanh(X * y.numpy()))
    np.testing.assert_allclose(jvp.numpy(), np.einsum("ijk,k->ij", jx.numpy(), V)
                               + np.einsum("ijkl,kl->ij", jy.numpy(), w.numpy()))


def test_tuples_in_and_out():
    x = tape.tensor(X)
    jacobians = F.jacobian(lambda x: (x ** 3, x.exp().sum()), x)
    assert isinstance(jacobians, tuple) and [j.shape for j in jacobians] == [(3, 3), (3,)]
    (only,) = F.jacobian(lambda x: x * 2, (x,))  # a tuple of inputs gives a tuple back
    np.testing.assert_allclose(only.numpy(), 2 * np.eye(3))
    hxx, hxy = F.hessian(lambda x, y: (x * y).sum(), (x, x))[0]
    np.testing.assert_allclose(hxx.numpy(), 0 * np.eye(3))
    np.testing.assert_allclose(hxy.numpy(), np.eye(3))


def test_results_are_constants_unless_create_graph():
    x = tape.tensor(X, requires_grad=True)
    assert not F.hessian(f, x).requires_grad
    H = F.hessian(lambda x: (x ** 4).sum(), x, create_graph=True)
    assert H.requires_grad
    (d,) = tape.autograd.grad(H.sum(), x)  # the sum of diag(12 x^2)
    np.testing.assert_allclose(d.numpy(), 24 * X)
    _, hv = F.hvp(lambda x: (x ** 4).sum(), x, tape.tensor(V), create_graph=True)
    (d,) = tape.autograd.grad(hv.sum(), x)
    np.testing.assert_allclose(d.numpy(), 24 * X * V)
    assert x.grad is None


def test_works_under_no_grad_and_with_one_element_without_v():
    with tape.no_grad():
        np.testing.assert_allclose(F.hessian(f, tape.tensor(X)).numpy(), f_hessian(X), rtol=1e-12)
    _, d = F.jvp(lambda x: x.exp() * 2, tape.tensor(0.5))
    assert d.item() == pytest.approx(2 * np.exp(0.5))
    _, d = F.vjp(lambda x: (x * x).sum(), tape.tensor(X))
    np.testing.assert_allclose(d.numpy(), 2 * X)


def test_unused_inputs_get_zeros_and_strict_mode_refuses():
    x = tape.tensor(X)
    _, (dx, dy) = F.vjp(lambda x, y: x * 2, (x, x), tape.tensor(V))
    np.testing.assert_allclose(dy.numpy(), 0 * X)
    with pytest.raises(RuntimeError, match="The output of the user-provided function is independent of input 1"):
        F.vjp(lambda x, y: x * 2, (x, x), tape.tensor(V), strict=True)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not require gradients"):
        F.jacobian(lambda x: x.detach(), x, strict=True)
    with pytest.raises(RuntimeError, match="the jacobian of the user-provided function with respect to input 0 "
                                           "is independent of the input"):
        F.hessian(lambda x: x.sum(), x, strict=True)
    with pytest.raises(RuntimeError, match="The output of the user-provided function is independent of input 1"):
        F.jvp(lambda x, y: x * 2, (x, x), (x, x), strict=True)  # PyTorch's text for jvp too


@pytest.mark.parametrize("call, error, text", [
    (lambda x: F.vjp(lambda x: x * 2, x), RuntimeError,
     "v can only be None if the user-provided function returns a single Tensor with a single element"),
    (lambda x: F.jvp(lambda x: x * 2, x), RuntimeError,
     "v can only be None if the input to the user-provided function is a single Tensor"),
    (lambda x: F.vjp(lambda x: x * 2, x, tape.ones(2, 3)), RuntimeError,
     r"v has invalid size: should be tape.Size\(\[3\]\) but got tape.Size\(\[2, 3\]\)"),
    (lambda x: F.jvp(lambda x, y: x, (x, x), (x,)), RuntimeError,
     "v is a tuple of invalid length: should be 2 but got 1"),
    (lambda x: F.hessian(lambda x: x * 2, x), RuntimeError,
     "The Tensor returned by the function given to hessian should contain a single element"),
    (lambda x: F.hvp(lambda x: (x.sum(), x.sum()), x, x), RuntimeError,
     "The function given to hvp should return a single Tensor"),
    (lambda x: F.jacobian(lambda x: x, [1.0]), TypeError,
     "The inputs given to jacobian must be either a Tensor or a tuple of Tensors but the given inputs has type"),
    (lambda x: F.jacobian(lambda x: 3.0, x), TypeError,
     "The outputs of the user-provided function given to jacobian must be either a Tensor"),
    (lambda x: F.jacobian(lambda x: x, x, strategy="forward-mode"), NotImplementedError,
     "only implemented for `vectorize=True`"),
])
def test_errors(call, error, text):
    with pytest.raises(error, match=text):
        call(tape.tensor(X))


def test_jacobian_refuses_strict_with_vectorize_as_pytorch():
    with pytest.raises(RuntimeError, match="`strict=True` and `vectorized=True` are not supported together"):
        tape.autograd.functional.jacobian(lambda x: x * 2, tape.ones(2), strict=True, vectorize=True)


def test_grad_with_is_grads_batched_gives_one_gradient_per_slice():
    # known values from PyTorch 2.13
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = tape.tensor(3.0, requires_grad=True)
    gx, gy = tape.autograd.grad(x * x, (x, y), tape.eye(2), is_grads_batched=True, allow_unused=True)
    assert gx.tolist() == [[2.0, 0.0], [0.0, 4.0]] and gy is None
    _, gy = tape.autograd.grad(x * x, (x, y), tape.eye(2), is_grads_batched=True, materialize_grads=True)
    assert gy.shape == () and gy.item() == 0.0
    (g,) = tape.autograd.grad(x * x, x, tape.eye(2), is_grads_batched=True, create_graph=True)
    assert tape.autograd.grad(g.sum(), x)[0].tolist() == [2.0, 2.0]
    z = x * x
    tape.autograd.grad(z, x, tape.eye(2), is_grads_batched=True)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        tape.autograd.grad(z, x, tape.eye(2), is_grads_batched=True)
    with pytest.raises(RuntimeError, match="we interpret the first dimension of each grad_output as the batch"):
        tape.autograd.grad(x * x, x, tape.ones(3, 3), is_grads_batched=True)
    with pytest.raises(ValueError, match="Expected all tensors to have the same size in the mapped dimension"):
        tape.autograd.grad((x * x, x.sum()), x, (tape.ones(3, 2), tape.ones(2)), is_grads_batched=True)
    assert tape.autograd.grad(x.sum(), x, tape.ones(3), is_grads_batched=True)[0].tolist() == [[1.0, 1.0]] * 3
