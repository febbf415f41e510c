"""tape.linalg, as torch.linalg: inv, det, slogdet, solve, cholesky, norm,
vector_norm and matrix_norm, under torch.linalg's signatures; the ops are
declared in ops/matrix.py (Note [Op declarations])."""
from ops import PUBLIC as _PUBLIC
from ops.matrix import LinAlgError

globals().update(_PUBLIC["linalg"])
__all__ = ["LinAlgError", *sorted(_PUBLIC["linalg"])]
