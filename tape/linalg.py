"""tape.linalg, as torch.linalg: inv, det, slogdet, solve, cholesky, norm,
vector_norm and matrix_norm (the ops are in ops/matrix.py)."""
from ops.matrix import LinAlgError, cholesky, det, inv, matrix_norm, norm, slogdet, solve, vector_norm

__all__ = ["LinAlgError", "cholesky", "det", "inv", "matrix_norm", "norm", "slogdet", "solve", "vector_norm"]
