"""tape.linalg, as torch.linalg: inv, det, slogdet, solve, cholesky, norm,
vector_norm and matrix_norm (the ops are in ops/matrix.py), under
torch.linalg's signatures (ops.LINALG_SIGNATURES)."""
from ops import LINALG_SIGNATURES as _SIGNATURES
from ops import matrix as _matrix
from ops._signature import with_signature as _with_signature
from ops.matrix import LinAlgError

__all__ = ["LinAlgError", "cholesky", "det", "inv", "matrix_norm", "norm", "slogdet", "solve", "vector_norm"]

cholesky, det, inv, matrix_norm, norm, slogdet, solve, vector_norm = (
    _with_signature(getattr(_matrix, name), name, _SIGNATURES[name])
    for name in ("cholesky", "det", "inv", "matrix_norm", "norm", "slogdet", "solve", "vector_norm"))
