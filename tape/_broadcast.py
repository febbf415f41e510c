"""Broadcasting on flat C-order buffers, for native kernels: the engine's
elementwise VJPs (an operand that broadcasts to the output, such as a bias
over a batch) and the ops that broadcast explicitly (expand, the reductions).
Plain Python, copied into the generated sweep (see `native_helper`).
"""
import numpy as np

from ._registry import native_helper

__all__ = ["bcast_index", "trailing_block", "reduce_broadcast", "expand_flat"]


@native_helper
def bcast_index(i, full, reduced):
    """Flat index into `reduced` of element i of `full`, where `reduced`
    broadcasts to `full` (right-aligned, size-1 dims repeat)."""
    j = 0
    stride = 1
    nf = full.size
    lead = nf - reduced.size
    for k in range(nf - 1, -1, -1):
        d = full[k]
        q = i % d
        i //= d
        if k >= lead:
            dr = reduced[k - lead]
            if dr != 1:
                j += q * stride
            stride *= dr
    return j


@native_helper
def trailing_block(full, reduced):
    """When `reduced` broadcasts to `full` along leading dims only (a bias
    over a batch), the number of elements of `reduced`; otherwise -1."""
    k = 0
    while k < reduced.size and reduced[k] == 1:
        k += 1
    lead = full.size - (reduced.size - k)
    block = 1
    for j in range(k, reduced.size):
        if reduced[j] != full[lead + j - k]:
            return -1
        block *= reduced[j]
    return block


@native_helper
def reduce_broadcast(G, GA, full, reduced, scale):
    """GA (shape `reduced`) += scale * G (shape `full`) summed over the broadcast dims."""
    block = trailing_block(full, reduced)
    if block > 0:
        for o in range(0, G.size, block):
            for j in range(block):
                GA[j] += G[o + j] * scale
    else:
        for i in range(G.size):
            GA[bcast_index(i, full, reduced)] += G[i] * scale


@native_helper
def expand_flat(X, reduced, full):
    """X (shape `reduced`) broadcast to shape `full`, as a new flat buffer."""
    n = 1
    for d in full:
        n *= d
    out = np.empty(n)
    block = trailing_block(full, reduced)
    if block > 0:
        for o in range(0, n, block):
            for j in range(block):
                out[o + j] = X[j]
    else:
        for i in range(n):
            out[i] = X[bcast_index(i, full, reduced)]
    return out
