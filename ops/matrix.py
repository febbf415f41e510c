"""Matrix functions, the ops of `tape.linalg`: inv, det, slogdet, solve,
cholesky, and the vector and matrix norms.

Forward values come from NumPy's LAPACK. The native VJPs invert matrices by
Gauss-Jordan elimination (`inverse`, copied into the sweep; the sweep links
no LAPACK) and multiply through BLAS (`add_product`); the differentiable VJPs
are written with these ops, so every order of derivative exists.
"""
import builtins
import collections
import functools
import math

import numpy as np

from ops._declare import declare, exports
from tape._batched import BatchedTensor, batched, composite, leading, levels_of, over_dims
from tape._factories import eye as tape_eye

from tape._dtypes import scalar_type_name
from tape._node import keep_arguments
from tape._record import broadcast_shapes, op_result, quiet, record
from tape._registry import SAVES_OUT, SAVES_X, RowTensor, defop, native_helper
from tape._tape import state
from tape._tensor import Tensor, new_tensor, wrap_value

from ops.linalg import matmul
from ops.reduction import amax, amin, norm as _vector_norm, sum as _sum
from ops.selection import tril
from ops.shape import (_SLICE, _descriptor, _no_gradient, _no_gradient_native, _strided_view, as_new_tensor, expand,
                       squeeze, unsqueeze)

class LinAlgError(RuntimeError):
    """A matrix function's input is singular or not positive-definite
    (torch.linalg.LinAlgError)."""


@native_helper
def inverse(M, n):
    """The inverse of the n x n matrix M (flat, C order), by Gauss-Jordan
    elimination with partial pivoting; inf or nan where M is singular."""
    a = M.reshape((n, n)).copy()
    out = np.eye(n)
    for c in range(n):
        p = c
        for r in range(c + 1, n):
            if abs(a[r, c]) > abs(a[p, c]):
                p = r
        if p != c:
            for k in range(n):
                a[c, k], a[p, k] = a[p, k], a[c, k]
                out[c, k], out[p, k] = out[p, k], out[c, k]
        d = a[c, c]
        for k in range(n):
            a[c, k] /= d
            out[c, k] /= d
        for r in range(n):
            f = a[r, c]
            if r != c and f != 0.0:
                for k in range(n):
                    a[r, k] -= f * a[c, k]
                    out[r, k] -= f * out[c, k]
    return out


def _square(name, A):
    """Check A is a batch of square float matrices, PyTorch's way; return n."""
    if A.ndim < 2:
        raise RuntimeError(f"linalg.{name}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.{name}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    if A.dtype.kind not in "fc":
        raise RuntimeError(f"linalg.{name}: Expected a floating point or complex tensor as input. Got "
                           f"{scalar_type_name(A.dtype)}")
    return A.shape[-1]


def _square_matrices(name):
    """The batching rule of a function of each square matrix of its input:
    its checks on one sample, then the op on the physical value, whose
    batch dims are matrices' batch dims to it (`leading`)."""
    def rule(op, args):
        _square(name, args.args[0])
        return leading(op, args)
    return rule


def _first_zero_pivot(a):
    """LAPACK getrf's info for one matrix: the 1-based column of the first
    zero pivot of its LU factorization with partial pivoting, or 0."""
    a = a.astype(np.float64)
    n = a.shape[0]
    for c in range(n):
        p = c + int(np.argmax(np.abs(a[c:, c])))
        if a[p, c] == 0:
            return c + 1
        a[[c, p]] = a[[p, c]]
        a[c + 1:] -= np.outer(a[c + 1:, c] / a[c, c], a[c])
    return 0


def _singular_error(name, a, message):
    """PyTorch's LinAlgError for the first singular matrix of the batch a."""
    batch = a.reshape((-1,) + a.shape[-2:])
    for b, matrix in enumerate(batch):
        column = _first_zero_pivot(matrix)
        if column:
            where_ = f"(Batch element {b}): " if a.ndim > 2 else ""
            return LinAlgError(f"linalg.{name}: {where_}{message(column)}")
    return LinAlgError(f"linalg.{name}: {message(a.shape[-1])}")


# inv: d(A^-1) = -A^-1 dA A^-1, so the VJP is -out^T g out^T

def _inv_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    n = osh[osh.size - 1]
    for b in range(0, O.size, n * n if n else 1):
        Ob = O[b:b + n * n].reshape((n, n))
        T = np.zeros((n, n))
        add_product(T, Ob, True, G[b:b + n * n].reshape((n, n)), False)
        T *= -1.0
        add_product(GA[b:b + n * n].reshape((n, n)), T, False, Ob, True)


def _inv_vjp(ctx, g):
    out_t = ctx.out.mT
    return (-matmul(matmul(out_t, g), out_t),)


_INV = defop("inv", "LinalgInvExBackward0", 1, saves=SAVES_OUT, vjp=_inv_vjp, native=_inv_native,
             saved=(("inverse", "out"),))


@declare(signature="A, *, out=None", methods=("inverse",), module="linalg", batch=_square_matrices("inv"))
def inv(A):
    """The inverse of each square matrix of A; LinAlgError where one is singular.

    >>> import tape
    >>> tape.linalg.inv(tape.tensor([[2., 0.], [0., 4.]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.2500]])
    """
    _square("inv", A)
    a = A._array()
    try:
        value = np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise _singular_error("inv", a, lambda k: f"The diagonal element {k} is zero, the inversion could not "
                                                  "be completed because the input matrix is singular.") from None
    return op_result(_INV, value, (A,))


@native_helper
def cofactor(M, n, i, j):
    """The (i, j) cofactor of the n x n matrix M (flat, C order): the signed
    determinant of M without row i and column j, by Gaussian elimination with
    partial pivoting."""
    m = n - 1
    a = np.empty((m, m))
    for r in range(m):
        for k in range(m):
            a[r, k] = M[(r + (r >= i)) * n + k + (k >= j)]
    d = 1.0 if (i + j) % 2 == 0 else -1.0
    for c in range(m):
        p = c
        for r in range(c + 1, m):
            if abs(a[r, c]) > abs(a[p, c]):
                p = r
        if p != c:
            d = -d
            for k in range(m):
                a[c, k], a[p, k] = a[p, k], a[c, k]
        d *= a[c, c]
        if a[c, c] != 0.0:
            for r in range(c + 1, m):
                f = a[r, c] / a[c, c]
                for k in range(c, m):
                    a[r, k] -= f * a[c, k]
    return d


# det: d det(A) = det(A) tr(A^-1 dA), so the VJP is g det(A) A^-T, which is
# g times the cofactor matrix; where det(A) is 0 (A^-T infinite) the
# cofactors themselves, as PyTorch's

def _det_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    # pp 1: det, g det A^-T; pp 0: slogdet's logabsdet, g A^-T
    n = xsh[xsh.size - 1]
    for m in range(G.size):
        b = m * n * n
        if pp and O[m] == 0.0:
            for i in range(n):
                for j in range(n):
                    GA[b + i * n + j] += G[m] * cofactor(X[b:b + n * n], n, i, j)
            continue
        scale = G[m] * O[m] if pp else G[m]
        if scale != 0.0:
            Ainv = inverse(X[b:b + n * n], n)
            for i in range(n):
                for j in range(n):
                    GA[b + i * n + j] += scale * Ainv[j, i]


def _cofactors(A):
    """The cofactor matrices of A, each element the signed determinant of
    its minor: all n^2 minors of a matrix are one indexing and one batched det."""
    n = A.shape[-1]
    others = np.array([[k for k in range(n) if k != i] for i in range(n)], np.int64)
    minors = A[..., others.reshape(n, 1, n - 1, 1), others.reshape(1, n, 1, n - 1)]
    signs = 1.0 - 2.0 * (np.add.outer(np.arange(n), np.arange(n)) % 2)
    return det(minors) * new_tensor(signs.astype(A.dtype))


def _det_vjp(ctx, g):
    # differentiated again, PyTorch's gradient at a singular matrix is the
    # cofactor matrix (through an SVD there), which det A^-T is elsewhere
    out, A = ctx.out, ctx.x
    scale = unsqueeze(unsqueeze(g, -1), -1)
    if (out._array() == 0).any():
        return (scale * _cofactors(A),)
    return (scale * unsqueeze(unsqueeze(out, -1), -1) * inv(A).mT,)


def _slogdet_vjp(ctx, g):
    return (unsqueeze(unsqueeze(g, -1), -1) * inv(ctx.x).mT,)


# PyTorch's nodes also save the LU factors and pivots, which tape recomputes
_DET = defop("det", "LinalgDetBackward0", 1, saves=SAVES_X | SAVES_OUT, vjp=_det_vjp, native=_det_native,
             saved=(("A", "x"), ("result", "out")))
_SLOGDET = defop("slogdet", "LinalgSlogdetBackward0", 1, saves=SAVES_X, vjp=_slogdet_vjp, native=_det_native,
                 saved=(("A", "x"),))
_SLOGDET_SIGN = defop("slogdet_sign", "LinalgSlogdetBackward0", 1, vjp=_no_gradient, native=_no_gradient_native)


@declare(signature="A, *, out=None", methods=("det",), module="linalg", batch=_square_matrices("det"))
def det(A):
    """The determinant of each square matrix of A.

    >>> import tape
    >>> tape.linalg.det(tape.tensor([[2., 1.], [1., 3.]]))
    tensor(5.0000)
    """
    _square("det", A)
    return op_result(_DET, quiet(np.linalg.det, A._array()), (A,), p=1.0)  # nan without a warning


_SlogdetResult = collections.namedtuple("linalg_slogdet", ["sign", "logabsdet"])


@declare(signature="A, *, out=None", methods=("slogdet",), module="linalg", batch=_square_matrices("slogdet"))
def slogdet(A):
    """(sign, logabsdet): the sign and the log of the absolute value of the
    determinant of each square matrix of A. The sign requires grad with A and
    sends it no gradient, as PyTorch's."""
    _square("slogdet", A)
    sign, logabsdet = quiet(np.linalg.slogdet, A._array())
    return _SlogdetResult(op_result(_SLOGDET_SIGN, sign, (A,)), op_result(_SLOGDET, logabsdet, (A,), p=0.0))


@declare(signature="input", batch=composite)
def logdet(input):
    """The log of the determinant of each square matrix: nan where it is
    negative, -inf where it is 0 (slogdet's log|det|, selected by its sign).

    >>> import tape
    >>> tape.logdet(tape.eye(2) * 2).item() == 2 * math.log(2)
    True
    """
    sign, logabsdet = input.slogdet()
    return logabsdet.masked_fill(sign < 0, math.nan)


@declare(signature="A, n, *, out=None", methods=("matrix_power",), module="linalg", batch=composite)
def matrix_power(A, n):
    """A to the integer power n by repeated squaring (A's inverse for n < 0),
    each product an mm, as PyTorch's."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"matrix_power(): argument 'n' must be int, not {type(n).__name__}")
    _square("matrix_power", A)
    if n == 0:
        return tape_eye(A.shape[-1], dtype=A.dtype).expand(A.shape).clone()
    base, n, result = (A.inverse() if n < 0 else A), builtins.abs(int(n)), None
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


@declare(signature="tensors, *, out=None", module="linalg", batch=composite)
def multi_dot(tensors):
    """The product of a list of matrices (the first and last may be vectors),
    left to right."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    return functools.reduce(lambda a, b: a @ b, tensors)


# eigh: one row whose value is [L; V] (..., n + 1, n), the eigenvalues
# above the eigenvectors, shown as the two results of one node by hidden
# slices (HIDDEN, Note [Tape layout]). Its gradient is PyTorch's
# linalg_eig_backward for a symmetric A, gA = V (diag(gL) + skew(V^T gV) / E)
# V^T with E_ij = L_j - L_i. Where the eigenvectors get no gradient (all 0:
# only the eigenvalues were used) the skew term is left out, as PyTorch
# leaves it out for an undefined gradient, so that repeated eigenvalues give
# no 0 / 0 there.
def _eigh_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    n = osh[osh.size - 1]
    block = (n + 1) * n
    count = O.size // block if block else 0
    vectors_used = False
    for m in range(count):
        for k in range(m * block + n, (m + 1) * block):
            vectors_used = vectors_used or G[k] != 0.0
    for m in range(count):
        at = m * block
        V = O[at + n:at + block].reshape((n, n))
        M = np.zeros((n, n))
        if vectors_used:
            add_product(M, V, True, G[at + n:at + block].reshape((n, n)), False)
        R = np.empty((n, n))
        for i in range(n):
            for j in range(n):
                R[i, j] = G[at + i] if i == j else 0.0 if not vectors_used else (
                    0.5 * (M[i, j] - M[j, i]) / (O[at + j] - O[at + i]))
        T = np.zeros((n, n))
        add_product(T, V, False, R, False)
        add_product(GA[m * n * n:(m + 1) * n * n].reshape((n, n)), T, False, V, True)


def _eigh_vjp(ctx, g):
    out = ctx.out
    n = out.shape[-1]
    L, V = out[..., 0, :], out[..., 1:, :]
    R = g[..., 0, :].unsqueeze(-1) * tape_eye(n, dtype=out.dtype)
    gV = g[..., 1:, :]
    if gV._array().any():
        M = V.mT @ gV
        # the diagonal of the skew part is 0: divided by 1 there
        R = R + (M - M.mT) * 0.5 / (L.unsqueeze(-2) - L.unsqueeze(-1)).masked_fill(tape_eye(n, dtype=np.bool_), 1.0)
    return (V @ R @ V.mT,)


_EIGH = defop("linalg_eigh", "LinalgEighBackward0", 1, saves=SAVES_OUT, vjp=_eigh_vjp, native=_eigh_native,
              saved=(("eigenvalues", RowTensor(lambda row, arguments: row.out._value[..., 0, :], of="out")),
                     ("eigenvectors", RowTensor(lambda row, arguments: row.out._value[..., 1:, :], of="out"))))
_EighResult = collections.namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])  # torch.return_types


def _part(packed, key):
    """A hidden slice of eigh's packed row: one of its node's results."""
    desc = _descriptor(packed.shape, key)
    value = np.array(_strided_view(packed._value, desc, np.shape(packed._value[key])))
    return record(_SLICE, wrap_value(value), (packed,), ints=desc, hidden=True)


@declare(signature="A, UPLO='L', *, out=None", module="linalg", batch=_square_matrices("eigh"))
def eigh(A, UPLO="L"):
    """The eigenvalues (ascending) and eigenvectors (the columns) of each
    symmetric matrix of A, from its lower triangle (UPLO "U": the upper), a
    named tuple; differentiable to any order, as PyTorch's (a gradient of the
    eigenvectors at repeated eigenvalues is inf or nan there).

    >>> import tape
    >>> tape.linalg.eigh(tape.tensor([[2., 1.], [1., 2.]])).eigenvalues.tolist()
    [1.0, 3.0]
    """
    _square("eigh", A)
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    w, v = quiet(np.linalg.eigh, A._array(), UPLO)
    if not (A._rg and state.tape.grad_enabled):
        return _EighResult(new_tensor(wrap_value(w)), new_tensor(wrap_value(v)))
    packed = keep_arguments(record(_EIGH, wrap_value(np.concatenate([w[..., None, :], v], axis=-2)), (A,)),
                            UPLO=UPLO)
    return _EighResult(_part(packed, (Ellipsis, 0, slice(None))),
                       _part(packed, (Ellipsis, slice(1, None), slice(None))))


@declare(signature="A, UPLO='L', *, out=None", module="linalg", batch=_square_matrices("eigvalsh"))
def eigvalsh(A, UPLO="L"):
    """The eigenvalues (ascending) of each symmetric matrix of A: eigh's."""
    return eigh(A, UPLO).eigenvalues


# solve: X = A^-1 B, so gB = A^-T g and gA = -gB X^T

def _solve_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    n, k = osh[osh.size - 2], osh[osh.size - 1]
    for m in range(O.size // (n * k) if n * k else 0):
        Ainv = inverse(X[m * n * n:(m + 1) * n * n], n)
        T = np.zeros((n, k))
        add_product(T, Ainv, True, G[m * n * k:(m + 1) * n * k].reshape((n, k)), False)
        if GB.size:
            GB[m * n * k:(m + 1) * n * k] += T.reshape(-1)
        if GA.size:
            T *= -1.0
            add_product(GA[m * n * n:(m + 1) * n * n].reshape((n, n)), T, False,
                        O[m * n * k:(m + 1) * n * k].reshape((n, k)), True)


def _solve_vjp(ctx, g):
    gb = _solve(ctx.x.mT, g)
    return (-matmul(gb, ctx.out.mT) if ctx.needs[0] else None, gb if ctx.needs[1] else None)


_SOLVE = defop("solve", "LinalgSolveExBackward0", 2, saves=SAVES_X | SAVES_OUT, vjp=_solve_vjp,
               native=_solve_native, saved=(("A", "x"), ("result", "out"), ("left", lambda row: True)))


def _solve(A, B):
    """A^-1 B for A (..., n, n) and B (..., n, k) with the same batch dims."""
    try:
        value = np.linalg.solve(A._array(), B._array())
    except np.linalg.LinAlgError:
        raise LinAlgError("linalg.solve: The solver failed because the input matrix is singular.") from None
    return op_result(_SOLVE, value, (A, B))


def _is_vector(A, B):
    """Whether solve takes B as a vector (or a batch of them) for A."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])


def _solve_operand(t, levels, rank):
    """t's physical value for solve inside vmap: a dim for each of `levels`
    (size 1 where it has none; solve broadcasts it), its matrices' batch
    dims padded to `rank` dims, so that the two operands have as many dims
    and solve takes neither for a batch of vectors."""
    have = dict(zip(t.levels, t.phys.shape[:len(t.levels)])) if isinstance(t, BatchedTensor) else {}
    value = t.phys if isinstance(t, BatchedTensor) else t
    shape = tuple(have.get(lv, 1) for lv in levels) + (1,) * (rank - t.ndim) + t.shape
    return value if shape == value.shape else value.reshape(shape)


def _batched_solve(op, args):
    """solve of samples: B taken as a vector by one sample's shapes, then
    solve of the physical matrices, their vmap dims broadcast as batch dims."""
    A, B, left = args.arguments["A"], args.arguments["B"], args.arguments["left"]
    _square("solve", A)
    vector = left and isinstance(B, Tensor) and _is_vector(A, B)
    if vector:
        B = batched(unsqueeze(B.phys, -1), B.levels) if isinstance(B, BatchedTensor) else unsqueeze(B, -1)
    levels = levels_of((A, B))
    rank = max(A.ndim, B.ndim)
    X = op(_solve_operand(A, levels, rank), _solve_operand(B, levels, rank), left=left)
    return batched(squeeze(X, -1) if vector else X, levels)


@declare(signature="A, B, *, left=True, out=None", operands=2, module="linalg", batch=_batched_solve)
def solve(A, B, *, left=True):
    """The solution X of A X = B (X A = B where left=False) for square A; B
    may be a vector (or a batch of vectors) and broadcasts with A.

    >>> import tape
    >>> tape.linalg.solve(tape.tensor([[2., 0.], [0., 4.]]), tape.tensor([2., 2.]))
    tensor([1.0000, 0.5000])
    """
    n = _square("solve", A)
    if not isinstance(B, Tensor):
        raise TypeError(f"linalg_solve(): argument 'B' (position 2) must be Tensor, not {type(B).__name__}")
    if A.dtype != B.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
                           f"{scalar_type_name(A.dtype)} and B of type {scalar_type_name(B.dtype)} instead")
    if not left:
        return as_new_tensor(solve(A.mT, B.mT).mT)
    vector = _is_vector(A, B)
    M = unsqueeze(B, -1) if vector else B
    if M.shape[-2] != n:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
                           f"({A.shape[-2]}x{A.shape[-1]} and {M.shape[-2]}x{M.shape[-1]})")
    batch = broadcast_shapes(A.shape[:-2], M.shape[:-2])
    if A.shape[:-2] != batch:
        A = expand(A, batch + A.shape[-2:])
    if M.shape[:-2] != batch:
        M = expand(M, batch + M.shape[-2:])
    X = _solve(A, M)
    return as_new_tensor(squeeze(X, -1)) if vector else X


# cholesky: A = L L^T; the VJP (Murray, arXiv 1602.07527, as PyTorch's) is
# L^-T P L^-1 with P = (Phi + Phi_strictly_lower^T) / 2, Phi = tril(L^T g)

@native_helper
def cholesky_middle(L, g, n):
    """P of the Cholesky VJP for one matrix: tril(L^T g), symmetrized with
    its diagonal halved."""
    M = np.zeros((n, n))
    add_product(M, L, True, g, False)
    P = np.zeros((n, n))
    for i in range(n):
        P[i, i] = 0.5 * M[i, i]
        for j in range(i):
            P[i, j] = 0.5 * M[i, j]
            P[j, i] = 0.5 * M[i, j]
    return P


def _cholesky_native(G, X, Y, O, GA, GB, osh, xsh, ysh, ints, pp):
    n = osh[osh.size - 1]
    for b in range(0, O.size, n * n if n else 1):
        L = O[b:b + n * n].reshape((n, n))
        Linv = inverse(O[b:b + n * n], n)
        P = cholesky_middle(L, G[b:b + n * n].reshape((n, n)), n)
        T = np.zeros((n, n))
        add_product(T, Linv, True, P, False)
        add_product(GA[b:b + n * n].reshape((n, n)), T, False, Linv, False)


def _cholesky_vjp(ctx, g):
    L = ctx.out
    M = tril(matmul(L.mT, g))
    P = 0.5 * (M + tril(M, -1).mT)
    Linv = inv(L)
    return (matmul(matmul(Linv.mT, P), Linv),)


_CHOLESKY = defop("cholesky", "LinalgCholeskyExBackward0", 1, saves=SAVES_OUT, vjp=_cholesky_vjp,
                  native=_cholesky_native, saved=(("L", "out"), ("upper", lambda row: False)))


def _failing_minor(a):
    """The order of the first leading minor of the symmetric matrix a that
    is not positive-definite, as LAPACK potrf reports it; 0 if none."""
    n = a.shape[0]
    L = np.zeros((n, n))
    for j in range(n):
        d = a[j, j] - L[j, :j] @ L[j, :j]
        if not d > 0:
            return j + 1
        L[j, j] = np.sqrt(d)
        L[j + 1:, j] = (a[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
    return 0


@declare(signature="input, *, upper=False, out=None", module="linalg", batch=_square_matrices("cholesky"))
def cholesky(A, *, upper=False):
    """L, lower triangular, with A = L L^T for each symmetric positive-definite
    matrix of A (its lower triangle is read); L^T where upper=True."""
    _square("cholesky", A)
    a = A._array()
    try:
        value = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        value = None
    # NumPy computes through a nan, where LAPACK's potrf (PyTorch's) stops: d > 0 fails
    if value is None or np.isnan(value).any():
        matrices = a.reshape((-1,) + a.shape[-2:])
        # the first failing matrix; the last when rounding fails NumPy only
        b, order = next(((b, order) for b, m in enumerate(matrices)
                         if (order := _failing_minor(np.tril(m) + np.tril(m, -1).T))),
                        (len(matrices) - 1, a.shape[-1]))
        where_ = f"(Batch element {b}): " if a.ndim > 2 else ""
        raise LinAlgError(f"linalg.cholesky: {where_}The factorization could not be completed because the "
                          f"input is not positive-definite (the leading minor of order {order} is not "
                          "positive-definite).")
    L = op_result(_CHOLESKY, value, (A,))
    return L.mT if upper else L


@declare(signature="input, ord=2, dim=None, keepdim=False, *, dtype=None, out=None", module="linalg",
         batch=over_dims())
def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The vector ord-norm of x over dim (all of it by default)."""
    return _vector_norm(x, ord, dim, keepdim, dtype)


def _check_matrix_norm(A, dim):
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(str(d) for d in dim)}")


def _checked_over_dims(check):
    """The rule `over_dims`, after the op's checks on one sample."""
    reduce = over_dims()

    def rule(op, args):
        check(*args.args[:3])
        return reduce(op, args)
    return rule


@declare(signature="input, ord='fro', dim=(-2, -1), keepdim=False, *, dtype=None, out=None", module="linalg",
         batch=_checked_over_dims(lambda A, ord, dim: _check_matrix_norm(A, dim)))
def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The Frobenius norm ("fro"), or the max (1, inf) or min (-1, -inf) of
    the absolute column (1) or row (inf) sums, of the matrices over `dim`."""
    _check_matrix_norm(A, dim)
    d0, d1 = (d % A.ndim for d in dim)
    if ord == "fro":
        return _vector_norm(A, 2, (d0, d1), keepdim, dtype)
    if ord in ("nuc", 2, -2):
        raise NotImplementedError(f"linalg.matrix_norm: ord={ord!r} needs singular values, which tape does not "
                                  "compute yet")
    if ord not in (1, -1, np.inf, -np.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    # the 1-norm sums over rows (d0) and takes the extreme over columns (d1)
    summed, over = (d0, d1) if abs(ord) == 1 else (d1, d0)
    totals = _sum(A.abs() if dtype is None else A.to(dtype).abs(), summed, keepdim=keepdim)
    return (amax if ord > 0 else amin)(totals, over - (not keepdim and summed < over), keepdim=keepdim)


def _check_norm(A, ord, dim):
    if dim is None and ord is not None and A.ndim not in (1, 2):
        raise RuntimeError("linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
                           f"Got {A.ndim}D.")


@declare(signature="input, ord=None, dim=None, keepdim=False, *, dtype=None, out=None", module="linalg",
         batch=_checked_over_dims(_check_norm))
def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.norm: the vector 2-norm of all of A when ord and dim are
    None; a vector norm over one dim; a matrix norm over two (or of a 2-D A
    when only ord is given)."""
    if isinstance(dim, int):
        dim = (dim,)
    _check_norm(A, ord, dim)
    if dim is None and ord is not None:
        dim = tuple(range(A.ndim))
    if dim is not None and len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: unsupported order {ord!r}")
    return _vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype)


__all__ = exports(globals()) + ["LinAlgError"]
