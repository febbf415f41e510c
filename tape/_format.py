"""PyTorch-style printing of tensor values (`tensor([1.0000, 2.5000])`)."""
import numpy as np

__all__ = ["tensor_repr"]


def _float_formatter(a):
    finite = a[np.isfinite(a)]
    if finite.size == 0 or np.all(finite == np.round(finite)) and np.abs(finite).max() < 1e8:
        return lambda v: _special(v) or f"{v:.0f}."
    big, small = np.abs(finite).max(), np.abs(finite[finite != 0]).min() if np.any(finite) else 1.0
    if big >= 1e8 or small < 1e-4 or big / small > 1e3:
        return lambda v: _special(v) or f"{v:.4e}"
    return lambda v: _special(v) or f"{v:.4f}"


def _special(v):
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return None


def _padded(fmt, a):
    """Right-align every element to the widest, as PyTorch prints."""
    flat = a.ravel()
    shown = flat if flat.size <= 1000 else np.concatenate([flat[:3], flat[-3:]])
    width = max((len(fmt(v)) for v in shown), default=0)
    return lambda v: fmt(v).rjust(width)


def tensor_repr(a, suffix=""):
    prefix = "tensor("
    if a.dtype.kind == "f":
        fmt = {"float_kind": _padded(_float_formatter(a.astype(np.float64).ravel()), a)}
    elif a.dtype.kind == "b":
        fmt = {"bool": _padded(lambda v: "True" if v else "False", a)}
    else:
        fmt = {"int": _padded(str, a)}
    if a.size == 0:
        body = "[]" if a.ndim == 1 else f"[], size={a.shape}"
    else:
        body = np.array2string(a, separator=", ", prefix=prefix, formatter=fmt, threshold=1000,
                               edgeitems=3, max_line_width=80)
    return f"{prefix}{body}{suffix})"
