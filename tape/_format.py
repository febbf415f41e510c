"""PyTorch-style printing of tensor values (`tensor([1.0000, 2.5000])`): the
algorithm of PyTorch's `torch/_tensor_str.py` with its default print options
(precision 4, line width 80, summaries above 1000 elements, 3 edge items).
"""
import math

import numpy as np

__all__ = ["tensor_repr"]

_PRECISION = 4
_LINE_WIDTH = 80
_THRESHOLD = 1000
_EDGE_ITEMS = 3


class _Formatter:
    """How every element of one tensor prints: integers as they are; floats
    in integer mode (`2.`), fixed (`2.5000`) or scientific (`2.5000e+03`),
    chosen from the nonzero finite values, all right-aligned to one width."""

    def __init__(self, values):
        self.floating = values.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.width = 1
        flat = values.reshape(-1)
        if not self.floating:
            self.width = max((len(str(v)) for v in flat.tolist()), default=1)
            return
        shown = flat[np.isfinite(flat) & (flat != 0)].astype(np.float64)
        if shown.size == 0:
            return
        magnitudes = np.abs(shown)
        low, high = magnitudes.min(), magnitudes.max()
        self.int_mode = bool(np.all(shown == np.ceil(shown)))
        if self.int_mode:
            self.sci_mode = high / low > 1000.0 or high > 1.0e8
        else:
            self.sci_mode = high / low > 1000.0 or high > 1.0e8 or low < 1.0e-4
        if self.sci_mode:
            widths = (len(f"{v:.{_PRECISION}e}") for v in shown.tolist())
        elif self.int_mode:
            widths = (len(f"{v:.0f}") + 1 for v in shown.tolist())
        else:
            widths = (len(f"{v:.{_PRECISION}f}") for v in shown.tolist())
        self.width = max(widths)

    def format(self, v):
        if not self.floating:
            text = str(v)
        elif self.sci_mode:
            text = f"{v:{self.width}.{_PRECISION}e}"
        elif self.int_mode:
            text = f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
        else:
            text = f"{v:.{_PRECISION}f}"
        return text.rjust(self.width)


def _edges(a):
    """The elements a summary shows (PyTorch's get_summarized_data)."""
    if a.ndim == 0:
        return a
    if a.ndim == 1:
        return np.concatenate([a[:_EDGE_ITEMS], a[-_EDGE_ITEMS:]]) if a.shape[0] > 2 * _EDGE_ITEMS else a
    rows = range(a.shape[0])
    if a.shape[0] > 2 * _EDGE_ITEMS:
        rows = [*range(_EDGE_ITEMS), *range(a.shape[0] - _EDGE_ITEMS, a.shape[0])]
    return np.stack([_edges(a[i]) for i in rows])


def _vector(a, indent, summarize, fmt):
    per_line = max(1, math.floor((_LINE_WIDTH - indent) / (fmt.width + 2)))
    if summarize and a.shape[0] > 2 * _EDGE_ITEMS:
        data = ([fmt.format(v) for v in a[:_EDGE_ITEMS].tolist()] + [" ..."]
                + [fmt.format(v) for v in a[-_EDGE_ITEMS:].tolist()])
    else:
        data = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _body(a, indent, summarize, fmt):
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector(a, indent, summarize, fmt)
    if summarize and a.shape[0] > 2 * _EDGE_ITEMS:
        parts = ([_body(a[i], indent + 1, summarize, fmt) for i in range(_EDGE_ITEMS)] + ["..."]
                 + [_body(a[i], indent + 1, summarize, fmt)
                    for i in range(a.shape[0] - _EDGE_ITEMS, a.shape[0])])
    else:
        parts = [_body(a[i], indent + 1, summarize, fmt) for i in range(a.shape[0])]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def tensor_repr(a, suffixes=()):
    """`tensor(<values>, <suffixes>)`; an empty tensor shows its size when not 1-d.

    As PyTorch's `_add_suffixes`, a suffix that would pass the line width goes
    on a line of its own, aligned after `tensor(`.
    """
    prefix = "tensor("
    if a.size == 0:
        text = prefix + "[]"
        if a.ndim != 1:
            suffixes = [f"size={a.shape}", *suffixes]
    else:
        summarize = a.size > _THRESHOLD
        fmt = _Formatter(_edges(a) if summarize else a)
        text = prefix + _body(a, len(prefix), summarize, fmt)
    # PyTorch's count of the last line is 2 more than its length, but not
    # after a wrap; kept, so that the lines break where PyTorch's do
    last_line = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line + len(suffix) + 2 > _LINE_WIDTH:
            text += ",\n" + " " * len(prefix) + suffix
            last_line = len(prefix) + len(suffix)
        else:
            text += ", " + suffix
            last_line += len(suffix) + 2
    return text + ")"
