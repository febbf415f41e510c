"""The BLAS lookup of tape._blas: every dgemm it can pick multiplies correctly
when called the way the sweep calls it, and finding none is a clear ImportError."""
import ctypes

import numpy as np
import pytest

import tape
from tape import _blas


def dgemm_product(address, A, B):
    """A @ B through the Fortran dgemm at address, with the arguments the
    sweep passes: flags as bytes, integers in int64 slots, C^T = B^T A^T."""
    m, k = A.shape
    n = B.shape[1]
    C = np.zeros((m, n))
    ints = np.array([n, m, k, n, k, n], np.int64)
    scalars = np.array([1.0, 0.0])
    flag = ctypes.c_char(b"N")
    function = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 13)(address)

    def at(array, i=0):
        return array.ctypes.data + i * array.itemsize

    function(ctypes.addressof(flag), ctypes.addressof(flag), at(ints, 0), at(ints, 1),
             at(ints, 2), at(scalars, 0), at(B), at(ints, 3), at(A), at(ints, 4),
             at(scalars, 1), at(C), at(ints, 5))
    return C


def providers():
    found = [_blas.dgemm_in_library(path) for path in _blas._numpy_blas_libraries()]
    return [f for f in found if f is not None] + [_blas.dgemm_in_scipy()]


@pytest.mark.parametrize("index", range(len(providers())))
def test_each_dgemm_found_multiplies(index):
    provider = providers()[index]
    if provider is None:
        pytest.skip("SciPy is not installed")
    address, width = provider
    assert width in (4, 8)
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((5, 3)), rng.standard_normal((3, 4))
    np.testing.assert_allclose(dgemm_product(address, A, B), A @ B, rtol=1e-12)


def test_numpys_blas_comes_before_scipys():
    in_numpy = [f for f in map(_blas.dgemm_in_library, _blas._numpy_blas_libraries()) if f]
    if not in_numpy:
        pytest.skip("this NumPy's BLAS is not among the libraries tape looks in")
    assert _blas.find_dgemm() == in_numpy[0]


def test_no_blas_found_is_an_import_error(monkeypatch):
    monkeypatch.setattr(_blas, "_numpy_blas_libraries", lambda: [])
    monkeypatch.setattr(_blas, "dgemm_in_scipy", lambda: None)
    with pytest.raises(ImportError, match="found none in NumPy's libraries; installing SciPy"):
        _blas.find_dgemm()


def test_backward_products_use_the_registered_dgemm():
    # transposed operands on both sides of the sweep's add_product
    rng = np.random.default_rng(1)
    a = tape.tensor(rng.standard_normal((6, 4)), requires_grad=True)
    b = tape.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    g = rng.standard_normal((6, 3))
    (a @ b).backward(tape.tensor(g))
    np.testing.assert_allclose(a.grad.numpy(), g @ b.detach().numpy().T, rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), a.detach().numpy().T @ g, rtol=1e-12)
