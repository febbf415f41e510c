"""tape.linalg beyond the op table (tests/test_ops.py checks every op's
gradients): known values, PyTorch's errors and grad_fn names, singular
matrices, dtypes and empty batches."""
import numpy as np
import pytest

import tape
from tape import linalg

A = [[4.0, 1.0], [1.0, 3.0]]


def test_known_values():
    a = tape.tensor(A)
    np.testing.assert_allclose(linalg.inv(a).numpy(), np.array([[3.0, -1.0], [-1.0, 4.0]]) / 11)
    assert linalg.det(a).item() == pytest.approx(11.0)
    sign, logabsdet = linalg.slogdet(tape.tensor([[-2.0, 0.0], [0.0, 3.0]]))
    assert (sign.item(), logabsdet.item()) == (-1.0, pytest.approx(np.log(6.0)))
    np.testing.assert_allclose(linalg.solve(a, tape.tensor([5.0, 4.0])).numpy(), [1.0, 1.0])
    L = linalg.cholesky(a)
    np.testing.assert_allclose((L @ L.mT).numpy(), A)
    np.testing.assert_allclose(linalg.cholesky(a, upper=True).numpy(), L.numpy().T)
    assert linalg.norm(a).item() == pytest.approx(np.sqrt(27.0))
    assert (linalg.norm(a, 1).item(), linalg.norm(a, -np.inf).item()) == (5.0, 4.0)
    assert linalg.vector_norm(tape.tensor([3.0, -4.0]), ord=1).item() == 7.0


def test_grad_fn_names_and_tensor_methods():
    a = tape.tensor(A, requires_grad=True)
    names = {"LinalgInvExBackward0": linalg.inv(a), "LinalgDetBackward0": linalg.det(a),
             "LinalgSlogdetBackward0": linalg.slogdet(a).logabsdet,
             "LinalgSolveExBackward0": linalg.solve(a, tape.ones(2, 1)),
             "LinalgCholeskyExBackward0": linalg.cholesky(a), "LinalgVectorNormBackward0": linalg.norm(a)}
    for name, out in names.items():
        assert type(out.grad_fn).__name__ == name
    assert type(linalg.slogdet(a).sign.grad_fn).__name__ == "LinalgSlogdetBackward0"  # with no gradient
    np.testing.assert_allclose(a.inverse().detach().numpy(), linalg.inv(a).detach().numpy())
    assert a.det().item() == pytest.approx(11.0)


def test_det_at_a_singular_matrix_as_pytorch():
    # the cofactor matrix (det A^-T is 0 * inf there) in the native sweep and
    # differentiated again, and its own derivative: PyTorch 2.13's figures
    # under create_graph (its plain backward gives 0 there; README)
    a = tape.tensor([[1.0, 2.0], [2.0, 4.0]], requires_grad=True)
    linalg.det(a).backward()
    np.testing.assert_allclose(a.grad.numpy(), [[4.0, -2.0], [-2.0, 1.0]])
    (g,) = tape.autograd.grad(linalg.det(a), a, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), [[4.0, -2.0], [-2.0, 1.0]])
    (h,) = tape.autograd.grad(g.sum(), a)
    np.testing.assert_allclose(h.numpy(), [[1.0, -1.0], [-1.0, 1.0]])


@pytest.mark.parametrize("call, error, text", [
    (lambda: linalg.inv(tape.tensor([[1.0, 2.0], [2.0, 4.0]])), linalg.LinAlgError,
     "linalg.inv: The diagonal element 2 is zero, the inversion could not be completed because the input "
     "matrix is singular."),
    (lambda: linalg.inv(tape.zeros(3, 2, 2)), linalg.LinAlgError,
     r"linalg.inv: \(Batch element 0\): The diagonal element 1 is zero"),
    (lambda: linalg.inv(tape.zeros(2, 3)), RuntimeError,
     "linalg.inv: A must be batches of square matrices, but they are 2 by 3 matrices"),
    (lambda: linalg.inv(tape.ones(2, 2, dtype=tape.int64)), RuntimeError,
     "linalg.inv: Expected a floating point or complex tensor as input. Got Long"),
    (lambda: linalg.det(tape.ones(3)), RuntimeError,
     "linalg.det: The input tensor A must have at least 2 dimensions."),
    (lambda: linalg.cholesky(tape.stack([tape.eye(2), tape.tensor([[1.0, 2.0], [2.0, 1.0]])])),
     linalg.LinAlgError, r"linalg.cholesky: \(Batch element 1\): The factorization could not be completed "
     r"because the input is not positive-definite \(the leading minor of order 2 is not positive-definite\)."),
    (lambda: linalg.solve(tape.tensor([[1.0, 2.0], [2.0, 4.0]]), tape.ones(2)), linalg.LinAlgError,
     "linalg.solve: The solver failed because the input matrix is singular."),
    (lambda: linalg.solve(tape.eye(2), tape.ones(2, dtype=tape.float32)), RuntimeError,
     "Expected A and B to have the same dtype, but found A of type Double and B of type Float instead"),
    (lambda: linalg.norm(tape.ones(2, 2, 2), 1), RuntimeError,
     "linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got 3D."),
    (lambda: linalg.norm(tape.ones(2, 2), "nuc"), NotImplementedError, "needs singular values"),
])
def test_errors(call, error, text):
    with pytest.raises(error, match=text):
        call()


def test_a_linalg_error_leaves_the_tape_working():
    a = tape.tensor([[1.0, 2.0], [2.0, 4.0]], requires_grad=True)
    with pytest.raises(RuntimeError):
        linalg.inv(a)
    linalg.solve(a + tape.eye(2), tape.ones(2)).sum().backward()
    B = np.array([[2.0, 2.0], [2.0, 5.0]])
    # x = B^-1 1; the gradient in B is -(B^-T 1) x^T
    np.testing.assert_allclose(a.grad.numpy(), -np.outer(np.linalg.solve(B.T, np.ones(2)),
                                                         np.linalg.solve(B, np.ones(2))))


def test_float32_and_empty_batches():
    a = tape.tensor(A, dtype=tape.float32, requires_grad=True)
    outputs = [linalg.inv(a), linalg.det(a), linalg.cholesky(a), linalg.solve(a, tape.ones(2, dtype=tape.float32))]
    assert all(out.dtype == tape.float32 for out in outputs)
    sum(out.sum() for out in outputs).backward()
    assert a.grad.dtype == tape.float32
    empty = tape.zeros(0, 3, 3, requires_grad=True)
    assert linalg.inv(empty).shape == (0, 3, 3) and linalg.det(empty).shape == (0,)
    assert linalg.det(tape.zeros(0, 0)).item() == 1.0


def _chain(fn, depth=3):
    if fn is None or depth == 0:
        return None if fn is None else type(fn).__name__
    return [type(fn).__name__] + [_chain(f, depth - 1) for f, _ in fn.next_functions]


# (a's shape, b's shape, whether each requires grad, a @ b's nodes to depth 3,
# the sums of the gradients of ((a @ b) ** 2).sum()), from torch 2.13: a
# batch against a matrix or vector folds into one mm or mv, as PyTorch's
_MATMUL_NODES = [
    ((2, 3, 4), (4, 5), True, True,
     ['UnsafeViewBackward0', ['MmBackward0', ['ViewBackward0', 'AccumulateGrad'], ['AccumulateGrad']]],
     11.89083, 75.583905),
    ((2, 3, 4), (4, 5), False, True,
     ['UnsafeViewBackward0', ['MmBackward0', None, ['AccumulateGrad']]],
     None, 75.583905),
    ((2, 3, 4), (4,), True, False,
     ['UnsafeViewBackward0', ['MvBackward0', ['ViewBackward0', 'AccumulateGrad'], None]],
     -0.657662, None),
    ((4,), (2, 4, 3), True, True,
     ['UnsafeViewBackward0', ['MvBackward0', ['UnsafeViewBackward0', 'CloneBackward0'], ['AccumulateGrad']]],
     -0.342065, 3.406524),
    ((3, 4), (2, 4, 5), True, True,
     ['CloneBackward0', ['TransposeBackward0', ['UnsafeViewBackward0', 'MmBackward0']]],
     -6.371975, 6.407096),
    ((3, 4), (2, 4, 5), True, False,
     ['CloneBackward0', ['TransposeBackward0', ['UnsafeViewBackward0', 'MmBackward0']]],
     -6.371975, None),
    ((2, 3, 4), (2, 4, 5), True, True,
     ['UnsafeViewBackward0', ['BmmBackward0', ['ViewBackward0', 'ExpandBackward0'],
                              ['ViewBackward0', 'ExpandBackward0']]],
     18.610185, 50.275698),
    ((2, 1, 3, 4), (5, 4, 2), True, True,
     ['UnsafeViewBackward0', ['BmmBackward0', ['UnsafeViewBackward0', 'CloneBackward0'],
                              ['UnsafeViewBackward0', 'CloneBackward0']]],
     32.641701, 106.486405),
    ((4,), (2, 4, 3), False, True,
     ['UnsafeViewBackward0', ['BmmBackward0', None, ['ViewBackward0', 'ExpandBackward0']]],
     None, 3.406524),
    # a vector by a matrix: mm's product squeezed in place (squeeze_), at version 1
    ((4,), (4, 5), True, True,
     ['SqueezeBackward4', ['MmBackward0', ['UnsqueezeBackward0', 'AccumulateGrad'], ['AccumulateGrad']]],
     -2.5904, 5.300891),
    ((4,), (4, 5), False, True,
     ['SqueezeBackward4', ['MmBackward0', None, ['AccumulateGrad']]],
     None, 5.300891),
]


@pytest.mark.parametrize("sa, sb, ga, gb, nodes, grad_a, grad_b", _MATMUL_NODES)
def test_batched_matmul_has_pytorchs_nodes_and_gradients(sa, sb, ga, gb, nodes, grad_a, grad_b):
    a = tape.tensor(np.arange(np.prod(sa), dtype=float).reshape(sa) / 7 - 1, requires_grad=ga)
    b = tape.tensor(np.cos(np.arange(np.prod(sb), dtype=float)).reshape(sb), requires_grad=gb)
    out = a @ b
    assert _chain(out.grad_fn) == nodes
    assert not out._is_view() and out.is_contiguous()
    assert out._version == (1 if len(sa) == 1 and len(sb) == 2 else 0)
    (out * out).sum().backward()
    assert (None if a.grad is None else round(float(a.grad.sum()), 6)) == grad_a
    assert (None if b.grad is None else round(float(b.grad.sum()), 6)) == grad_b


def test_eigh_values_and_gradients_to_second_order_are_pytorchs():
    # PyTorch 2.13 on the same matrix: the eigenvectors' squares do not depend on their signs
    a = tape.tensor([[2.0, 1.0, 0.5], [1.0, 3.0, -1.0], [0.5, -1.0, 1.0]], requires_grad=True)
    values, vectors = tape.linalg.eigh(a)
    assert type(values.grad_fn).__name__ == "LinalgEighBackward0" and values.grad_fn is vectors.grad_fn
    np.testing.assert_allclose(values.tolist(), [0.1599281908357783, 2.077063898617895, 3.7630079105463254],
                               rtol=1e-12)
    (g,) = tape.autograd.grad((values * tape.tensor([1.0, 2.0, 3.0])).sum() + (vectors ** 4).sum(), a,
                              create_graph=True)
    (h,) = tape.autograd.grad((g * g).sum(), a)
    np.testing.assert_allclose(g.tolist(), [[1.905533645773937, 0.23657070906949573, 0.21393546923597506],
                                            [0.2365707090694955, 2.8790494671206988, -0.626185126160125],
                                            [0.21393546923597528, -0.626185126160125, 1.2154168871053663]],
                               rtol=1e-10)
    np.testing.assert_allclose(h.tolist(), [[0.2884134652275453, -0.5137639098667833, -0.18587616192677195],
                                            [-0.5137639098667833, 0.11870946202365719, 0.04112051779470582],
                                            [-0.18587616192677195, 0.04112051779470574, -0.40712292725120275]],
                               rtol=1e-9, atol=1e-12)
    assert tape.linalg.eigvalsh(a, UPLO="U").tolist() == tape.linalg.eigh(a, "U").eigenvalues.tolist()


@pytest.mark.parametrize("call, message", [
    (lambda: tape.linalg.eigh(tape.ones(2, 3)),
     "linalg.eigh: A must be batches of square matrices, but they are 2 by 3 matrices"),
    (lambda: tape.linalg.eigh(tape.ones(2, 2), UPLO="X"), "Expected UPLO argument to be 'L' or 'U', but got X"),
    (lambda: tape.linalg.eigh(tape.ones(3)), "linalg.eigh: The input tensor A must have at least 2 dimensions."),
])
def test_eigh_refuses_as_pytorch(call, message):
    with pytest.raises(RuntimeError) as info:
        call()
    assert str(info.value) == message
