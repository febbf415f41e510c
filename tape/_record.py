"""How ops record themselves: the elementwise op factories (with the scalar
fast path and central broadcasting) and `record` for structural ops.
"""
import numpy as np

from ._dtypes import _default as _default_dtype, float16, float32, float64, get_default_dtype, promoted
from ._registry import PARTIAL_FUNCTIONS, SAVES_OUT, SAVES_X, SAVES_Y, SAVES_Z, lookup
from ._saved import pack_row
from ._tape import HIDDEN, RG, anomaly, keep_trace, state
from ._tensor import Tensor, inference_made, made_hooks, new_tensor, wrap_value

__all__ = ["record", "record_many", "formula_node", "op_result", "unary", "binary", "with_constant", "quiet", "broadcast_shapes", "value_of", "elementwise_vjp",
           "operand_value", "python_number", "sum_to"]

_NUMBER = (float, int)
_FLOATING = (float64, float32, float16)


def value_of(t):
    """The NumPy-facing value of a tensor (0-d float64 as np.float64, so that
    promotion sees a 0-d tensor, not a Python number: Note [Type promotion])."""
    v = t._value
    return np.float64(v) if type(v) is float else v


def python_number(v):
    """A NumPy scalar operand as the Python number it holds: as in PyTorch, a
    number operand does not promote a tensor's dtype, and x ** c is PowBackward0."""
    return v.item() if isinstance(v, np.generic) else v


def operand_value(v):
    # a Tensor subclass's value is read too: a BatchedTensor's read raises
    # (Note [Batched tensors])
    return value_of(v) if isinstance(v, Tensor) else v


def broadcast_shapes(sa, sb):
    """NumPy broadcasting of two shapes, with PyTorch's error text."""
    if sa == sb:
        return sa
    n = max(len(sa), len(sb))
    pa, pb = (1,) * (n - len(sa)) + tuple(sa), (1,) * (n - len(sb)) + tuple(sb)
    for k in range(n - 1, -1, -1):  # PyTorch names the last mismatch
        da, db = pa[k], pb[k]
        if da != db and da != 1 and db != 1:
            raise RuntimeError(f"The size of tensor a ({da}) must match the size of tensor b ({db}) "
                               f"at non-singleton dimension {k}")
    return tuple(db if da == 1 else da for da, db in zip(pa, pb))


# Note [Early release]
# ~~~~~~~~~~~~~~~~~~~~
# In an expression like (a - b) ** 2, a - b dies as soon as ** records, so
# each record looks at the inputs of the op before it and releases the
# values whose Tensors are dead and that no consumer saved: their memory
# goes back to the allocator at once, for the next result, as reference
# counting frees it in PyTorch (W4's peak memory). For small values that
# look costs more than it returns (half a microsecond an op, 5% of a small
# MLP's forward); they wait for the release after the next backward.
_EARLY_RELEASE_NUMEL = 1 << 13


def record(opdef, value, inputs, *, c=0.0, p=1.0, ints=None, hidden=False):
    """Record `opdef` producing `value` from `inputs` (Tensors, or None for "the
    constant in c"); return the result Tensor, which requires grad."""
    tp = state.tape
    if tp.n > tp.limit or tp.held_bytes > tp.bytes_limit:
        tp.reserve(3)
    ep = tp.ep
    a = b = -1
    if inputs:
        x = inputs[0]
        if x is not None:
            a = x._row if x._ep is ep else tp.adopt(x)
        if len(inputs) > 1:
            y = inputs[1]
            if y is not None:
                b = y._row if y._ep is ep else tp.adopt(y)
    if tp.last_inputs:  # Note [Early release]
        tp.release(tp.last_inputs)
    numel = tp.m_numel
    tp.last_inputs = ((a, b) if a >= 0 and numel[a] >= _EARLY_RELEASE_NUMEL
                      or b >= 0 and numel[b] >= _EARLY_RELEASE_NUMEL else ())
    saves_for = opdef.saves_for
    saves = 0  # which of x, y and out the row saves: those its inputs that require grad need
    if saves_for != _SAVES_NOTHING:
        flags = tp.m_flags
        saves = ((saves_for[0] if a >= 0 and flags[a] & RG else 0)
                 | (saves_for[1] if b >= 0 and flags[b] & RG else 0))
        if inference_made[0]:
            _refuse_saving_inference(saves, inputs)
    out = Tensor.__new__(Tensor)
    out._value = value
    out._rg = True
    out._ep = ep
    # a 0-d result's token is its float (Note [Tape layout])
    r = tp.append(opdef.code, value, value if type(value) is float else out, a, b, c, p, ints,
                  RG | HIDDEN if hidden else RG)
    out._row = r
    if anomaly.enabled:
        keep_trace(tp, r)
    if tp.saved_hooks:  # Note [Saved tensor hooks]
        pack_row(tp, opdef.code, r, inputs[0] if inputs else None,
                 inputs[1] if len(inputs) > 1 else None, out)
    if saves:
        nuse = tp.m_nuse
        if saves & SAVES_X and a >= 0:
            nuse[a] += 1
        if saves & SAVES_Y and b >= 0:
            nuse[b] += 1
        if saves & SAVES_OUT:
            nuse[r] += 1
    return out


_SAVES_NOTHING = (0, 0, 0)


def _refuse_saving_inference(saves, inputs):
    """PyTorch's error where a recorded op would save an inference tensor."""
    for k, bit in ((0, SAVES_X), (1, SAVES_Y)):
        if saves & bit and len(inputs) > k and inputs[k] is not None and inputs[k]._inference:
            raise RuntimeError("Inference tensors cannot be saved for backward. Please do not use Tensors created "
                               "in inference mode in computation tracked by autograd. To work around this, you can "
                               "make a clone to get a normal tensor and use it in autograd, or use "
                               "`torch.no_grad()` instead of `torch.inference_mode()`.")


def record_many(opdef, value, inputs, *, c=0.0, p=1.0, ints=None):
    """`record` for an op of more than two inputs, or a variadic op (cat,
    stack) of any number: `inputs` are Tensors, or None for one that needs
    no gradient (Note [Tape layout])."""
    tp = state.tape
    tp.reserve(len(inputs) + 3)
    for t in inputs:  # rows for leaves first: every input row is below its consumer
        if t is not None:
            tp.adopt(t)
    hooks, tp.saved_hooks = tp.saved_hooks, []  # packed below, once the row has all its inputs
    try:
        out = record(opdef, value, inputs[:2], c=c, p=p, ints=ints)
    finally:
        tp.saved_hooks = hooks
    if len(inputs) != 2:
        rows = [-1 if t is None else tp.adopt(t) for t in inputs[2:]]
        tp.more_inputs(out._row, rows if inputs[1:] else None)
        z = rows[0] if rows else -1
        saves_for = opdef.saves_for
        if z >= 0 and (saves_for[2] or (saves_for[0] | saves_for[1]) & SAVES_Z):
            # what record counted for the first two inputs, and what z's gradient adds
            a, b = tp.m_a0[out._row], tp.m_a1[out._row]
            flags, nuse = tp.m_flags, tp.m_nuse
            counted = ((saves_for[0] if a >= 0 and flags[a] & RG else 0)
                       | (saves_for[1] if b >= 0 and flags[b] & RG else 0))
            saves = counted | (saves_for[2] if flags[z] & RG else 0)
            added = saves & ~counted
            if added & SAVES_X and a >= 0:
                nuse[a] += 1
            if added & SAVES_Y and b >= 0:
                nuse[b] += 1
            if added & SAVES_OUT:
                nuse[out._row] += 1
            if saves & SAVES_Z:
                nuse[z] += 1
    if hooks:  # Note [Saved tensor hooks]
        pack_row(tp, opdef.code, out._row, inputs[0], inputs[1], out, inputs[2] if len(inputs) > 2 else None)
    return out


_INPUT_BITS = (SAVES_X, SAVES_Y, SAVES_Z)


def formula_node(opdef, formula, inputs, *, c=0.0, p=1.0):
    """The result of `formula()` (a Tensor, computed with the engine's ops)
    as one row of `opdef` over `inputs` (Tensors, in the row's order) when
    one requires grad: an op of three inputs whose value a formula of the
    tape's ops gives exactly (PyTorch's kernel's order of operations), and
    whose node is PyTorch's one (AddmmBackward0). An input that needs no
    gradient has a row only when a needed gradient reads it."""
    tp = state.tape
    # a batched operand (vmap's BatchedTensor, the one Tensor subclass) runs
    # the formula, whose ops batch
    if any(type(t) is not Tensor for t in inputs) or not (tp.grad_enabled and any(t._rg for t in inputs)):
        return formula()
    tp.grad_enabled = False
    try:
        value = formula()._value
    finally:
        tp.grad_enabled = True
    reads = 0
    for t, saves in zip(inputs, opdef.saves_for):
        if t._rg:
            reads |= saves
    return record_many(opdef, value, [t if t._rg or reads & bit else None for t, bit in zip(inputs, _INPUT_BITS)],
                       c=c, p=p)


def op_result(opdef, value, inputs, **kwargs):
    """The Tensor of `value` computed by `opdef` from `inputs`: a recorded row
    when one of them requires grad and grad mode is on, a constant otherwise."""
    value = wrap_value(value)
    if state.tape.grad_enabled and any(t is not None and t._rg for t in inputs):
        return record(opdef, value, inputs, **kwargs)
    return new_tensor(value)


def _operand(t, read):
    """(input, c) of an elementwise row for operand t (a Tensor, a number or
    an array) that does not require grad: None when no needed partial reads
    it (no row); a Tensor's constant row, so that an in-place change to it
    before backward raises PyTorch's error; else its float in c when it has
    one element (stride 0), or a constant row. An operand of fewer elements
    than the result (a bias over a batch) keeps its shape: the sweep
    broadcasts it (Note [Tape layout]). While tape.compile records, the
    operand is kept even when no partial reads it: a replay recomputes the
    value from the row (Note [Compiled replay] in tape/_compile.py)."""
    if not read and not made_hooks:
        return None, 0.0
    if type(t) is Tensor:
        return t, 0.0
    if type(t) in _NUMBER:
        return None, float(t)
    value = np.asarray(t)
    if value.size == 1:
        return None, float(value.reshape(-1)[0])
    return new_tensor(value), 0.0


def _signed_zero(tp, t, c):
    """t, whose row's constant is c: a row's c is written only when it is
    truthy, so a -0.0 (1 / -0.0 is -inf in the partial) is written here."""
    if c == 0.0:
        tp.m_c[t._row] = c
    return t


def _scalar_row(tp, code, out, x, y, c):
    """The hot path: append a row for a 0-d float64 result of x and y
    (Tensors, or None for the constant c) and return its Tensor."""
    r = tp.n
    if r > tp.limit:
        tp.reserve(3)
    ep = tp.ep
    a = -1 if x is None else (x._row if x._ep is ep else tp.adopt(x))
    b = -1 if y is None else (y._row if y._ep is ep else tp.adopt(y))
    r = tp.n
    tp.n = r + 1
    tp.m_op[r] = code
    tp.m_a0[r] = a
    if b >= 0:
        tp.m_a1[r] = b
    if c:
        tp.m_c[r] = c
    tp.m_sval[r] = out
    t = Tensor.__new__(Tensor)
    t._value = out
    t._rg = True
    t._row = r
    t._ep = ep
    tp.owners.append(out)  # the liveness token (Note [Tape layout]); out is a fresh float
    if anomaly.enabled:
        keep_trace(tp, r)
    if tp.saved_hooks:  # Note [Saved tensor hooks]
        pack_row(tp, code, r, x, y, t)
    return t


# NumPy warns on overflow, 0/0 and the like; PyTorch returns inf or nan
# silently, and so do we. np.errstate costs about 2.5 us, more than a small
# ufunc, so set NumPy's floating-point state directly (a context variable in
# NumPy 2), falling back to np.errstate where that is not available.
try:
    from numpy._core._ufunc_config import _extobj_contextvar as _FP_STATE
    with np.errstate(all="ignore"):
        _FP_IGNORE = _FP_STATE.get()
except ImportError:
    _FP_STATE = None


def _as_result(out, fn, *operands):
    """fn(*operands), computed as `out`, as a Tensor holds it (wrap_value);
    where NumPy made a float of another dtype from bool or integer tensors
    (sin of int8 is float16 there, exact to three digits), fn again on the
    operands in the default dtype, which is what PyTorch computes in."""
    out = wrap_value(out)
    # a Python number operand does not count: PyTorch's int tensor + 0.5 is
    # in the default dtype too
    if (type(out) is np.ndarray and out.dtype.kind == "f" and out.dtype != get_default_dtype()
            and all(np.asarray(v).dtype.kind in "biu" for v in operands if type(v) not in _NUMBER)):
        dtype = get_default_dtype()
        return wrap_value(quiet(fn, *(np.asarray(v, dtype) for v in operands)))
    return out


def _result(fn, *operands):
    """fn(*operands) quietly (see quiet), as a Tensor holds it (_as_result).
    One call for both, and the common case tested first: a call costs about
    100 ns, a tenth of a small ufunc op."""
    if _FP_STATE is None:
        out = quiet(fn, *operands)
    else:
        token = _FP_STATE.set(_FP_IGNORE)
        try:
            out = fn(*operands)
        finally:
            _FP_STATE.reset(token)
    if type(out) is np.ndarray and out.dtype is float64 and out.ndim and _default_dtype[0] is float64:
        return out
    return _as_result(out, fn, *operands)


def quiet(fn, *args):
    """fn(*args) with NumPy's floating-point warnings off."""
    if _FP_STATE is None:
        with np.errstate(all="ignore"):
            return fn(*args)
    token = _FP_STATE.set(_FP_IGNORE)
    try:
        return fn(*args)
    finally:
        _FP_STATE.reset(token)


def _scalar_fallback(array_fn, *args):
    """Where math raises (overflow, domain) or leaves the reals, NumPy's answer."""
    return float(quiet(array_fn, *(np.float64(a) for a in args)))


def unary(opdef, scalar_fn, array_fn):
    """The public function of an elementwise op of one input."""
    code = opdef.code

    def op(x):
        xv = x._value
        if type(xv) is float:
            try:
                out = scalar_fn(xv)
            except (ArithmeticError, ValueError):
                out = None
            if type(out) is not float:
                out = _scalar_fallback(array_fn, xv)
            if x._rg:
                tp = state.tape
                if tp.grad_enabled:
                    return _scalar_row(tp, code, out, x, None, 0.0)
            return new_tensor(out)
        out = _result(array_fn, xv)
        if x._rg and state.tape.grad_enabled:
            return record(opdef, out, (x,))
        return new_tensor(out)
    op.__name__ = opdef.name
    opdef.function, opdef.number = op, scalar_fn
    return op


def with_constant(opdef, scalar_fn, array_fn):
    """The function of an elementwise op of a tensor x and a Python number c,
    which rides as the constant operand `y` (x ** c, c - x, c ** x)."""
    code = opdef.code

    def op(x, c):
        xv = x._value
        if type(xv) is float:
            try:
                out = scalar_fn(xv, c)
            except (ArithmeticError, ValueError):
                out = None
            if type(out) is not float:  # overflow, 0 ** -1, or a complex root
                out = _scalar_fallback(array_fn, xv, c)
            if x._rg:
                tp = state.tape
                if tp.grad_enabled:
                    return _scalar_row(tp, code, out, x, None, c)
            return new_tensor(out)
        out = _result(array_fn, xv, c)
        if x._rg and state.tape.grad_enabled:
            return record(opdef, out, (x, None), c=float(c))
        return new_tensor(out)
    op.__name__ = opdef.name
    return op


def binary(opdef, scalar_fn, array_fn):
    """The public function of an elementwise op of two inputs (tensors or numbers)."""
    code = opdef.code

    def op(x, other):
        # the common case first: two 0-d float64 tensors; `other` is
        # PyTorch's name of the second operand (x.mul(other=y))
        if type(x) is Tensor and type(other) is Tensor:
            xv = x._value
            yv = other._value
            if type(xv) is float and type(yv) is float:
                return _scalar(xv, yv, x, other, x._rg, other._rg)
            return _arrays(x, other, value_of(x), value_of(other), True, True)
        return _mixed(x, other)

    def _scalar(xv, yv, x, y, rgx, rgy):
        try:
            out = scalar_fn(xv, yv)
        except (ArithmeticError, ValueError):
            out = None
        if type(out) is not float:
            out = _scalar_fallback(array_fn, xv, yv)
        if rgx or rgy:
            tp = state.tape
            if tp.grad_enabled:
                if rgx and rgy:
                    return _scalar_row(tp, code, out, x, y, 0.0)
                # a constant that the partial reads is a row when it is a
                # Tensor (see _operand); a number rides in c
                # (kept while tape.compile records: a replay reads the row, Note [Compiled replay])
                if rgx:
                    return _signed_zero(tp, _scalar_row(tp, code, out, x, y if reads_y or made_hooks else None, yv), yv)
                return _signed_zero(tp, _scalar_row(tp, code, out, x if reads_x or made_hooks else None, y, xv), xv)
        return new_tensor(out)

    def _mixed(x, y):
        # a Python number needs no conversion: skipping the calls is a fifth
        # of x * 2.0 on a 0-d tensor
        if type(x) not in _NUMBER:
            x = python_number(x)
        if type(y) not in _NUMBER:
            y = python_number(y)
        # a 0-d float64 tensor with a Python number still takes the scalar path
        if type(x) is Tensor and type(x._value) is float and type(y) in _NUMBER:
            return _scalar(x._value, y, x, None, x._rg, False)
        if type(y) is Tensor and type(y._value) is float and type(x) in _NUMBER:
            return _scalar(x, y._value, None, y, False, y._rg)
        return _general(x, y)

    def _general(x, y):
        # a Tensor subclass's value is read too: a BatchedTensor's read
        # raises (Note [Batched tensors])
        tx, ty = isinstance(x, Tensor), isinstance(y, Tensor)
        if not (tx or ty):
            raise TypeError(f"{opdef.name}(): expected a Tensor, got {type(x).__name__} and "
                            f"{type(y).__name__}")
        return _arrays(x, y, value_of(x) if tx else x, value_of(y) if ty else y, tx, ty)

    def _arrays(x, y, xv, yv, tx, ty):
        """x op y off the scalar path: x and y Tensors (tx, ty) or numbers or
        arrays, whose values are xv and yv."""
        try:
            # operands of one dtype, or a float tensor and a number, need no
            # cast (Note [Type promotion]); testing that first keeps small ops fast
            if not (type(xv) is np.ndarray and (yv.dtype is xv.dtype if type(yv) is np.ndarray
                                                else type(yv) in _NUMBER and xv.dtype in _FLOATING)):
                xv, yv = promoted(xv, yv)
            out = _result(array_fn, xv, yv)
        except ValueError:
            broadcast_shapes(np.shape(xv), np.shape(yv))  # raises with PyTorch's text
            raise
        rgx = tx and x._rg
        rgy = ty and y._rg
        if not ((rgx or rgy) and state.tape.grad_enabled):
            return new_tensor(out)
        # the operand values that the partials of the inputs requiring grad read
        if rgx and rgy:
            return record(opdef, out, (x, y))
        reads = (saves_for[0] if rgx else 0) | (saves_for[1] if rgy else 0)
        a, ca = (x, 0.0) if rgx else _operand(x, reads & SAVES_X)
        b, cb = (y, 0.0) if rgy else _operand(y, reads & SAVES_Y)
        c = cb if rgx else ca
        return _signed_zero(state.tape, record(opdef, out, (a, b), c=c), c)
    saves_for = opdef.saves_for
    reads_y = saves_for[0] & SAVES_Y
    reads_x = saves_for[1] & SAVES_X
    op.__name__ = opdef.name
    opdef.function, opdef.number = op, scalar_fn
    return op


def _constant_mask(predicate):
    """A 0/1 mask in a partial, a constant (not differentiable in its
    arguments): `predicate` of tensors' values and numbers, compared as
    PyTorch's comparisons promote them (a 0-d float64 bound of a float32 x
    in float32: the tie its forward saw), in the dtype of the first tensor,
    or a float when all are numbers."""
    def mask(*args):
        if not any(type(a) is Tensor for a in args):
            return 1.0 if predicate(*args) else 0.0
        values = [a._array() if type(a) is Tensor else a for a in args]
        dtype = next(v.dtype for v in values if isinstance(v, np.ndarray))
        return new_tensor(wrap_value(predicate(*promoted(*values)).astype(dtype)))
    return mask


# 1 where lo <= x <= hi (PyTorch's clamp gradient is a where() on a mask)
_within = _constant_mask(lambda x, lo, hi: (x >= lo) & (x <= hi))
# 1 where base == 0 and exponent >= 0: there PyTorch takes the exponent's
# gradient of a power to be 0, where out * log(base) would be 0 * -inf;
# log(base + zero_base) makes it so
_zero_base = _constant_mask(lambda base, exponent: (base == 0) & (exponent >= 0))
_is_zero = _constant_mask(lambda v: v == 0)
_CONSTANT_MASKS = {"within": _within, "zero_base": _zero_base, "is_zero": _is_zero}


def _on_tensor_or_number(opdef):
    """A partial may apply a function to a constant operand, a Python float."""
    op, number = opdef.function, opdef.number
    return lambda *v: op(*v) if Tensor in map(type, v) else number(*v)


def sum_to(g, shape):
    """Sum `g` down to `shape`, undoing a broadcast (differentiable)."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + k for k, d in enumerate(shape)
                                      if d == 1 and g.shape[lead + k] != 1)
    return g.sum(dims, keepdim=True).reshape(shape)


def elementwise_vjp(opdef):
    """The differentiable VJP of an elementwise op: g times each partial,
    evaluated with tape ops so it records when create_graph is on."""
    # the vocabulary's functions are the ops of their names, but the constant masks
    functions = {name: _CONSTANT_MASKS.get(name) or _on_tensor_or_number(lookup(name))
                 for name in PARTIAL_FUNCTIONS}

    # each partial is evaluated with just the operands it names: making a
    # Tensor for x, y or out costs microseconds
    operands = [[name for name in ("x", "y", "out", "p") if name in code.co_names]
                for code in opdef.compiled_partials]
    # a partial that is the constant 1 passes g on itself, as PyTorch's add;
    # one that evaluates to 1 (x * 1.0's) gives a new tensor, as its mul
    passes_on = [partial.strip() == "1" for partial in opdef.partials]

    def evaluate(code, env, names):
        try:
            return eval(code, env)
        except (ArithmeticError, ValueError):
            # math refuses a number operand (1 / 0.0, log(-1.0)); as 0-d
            # tensors they give PyTorch's inf or nan
            env.update({name: new_tensor(v) for name in names if type(v := env[name]) is float})
            return eval(code, env)

    def vjp(ctx, g):
        grads = []
        for need, partial, selection, q, names, shape, passes in zip(
                ctx.needs, opdef.compiled_partials, opdef.compiled_selections, opdef.compiled_quotients, operands,
                ("x_shape", "y_shape"), passes_on):
            if not need:
                grads.append(None)
                continue
            env = dict(functions)
            for name in names:
                env[name] = getattr(ctx, name)
            if q is not None:  # g * numerator / denominator, in that order (tape._registry.quotient)
                denominator = evaluate(q[1], env, names)
                gi = (g if q[0] is None else g * evaluate(q[0], env, names)) / denominator
                grads.append(sum_to(_selected(gi, selection, env), getattr(ctx, shape)))
                continue
            d = evaluate(partial, env, names)
            if not names and type(d) in _NUMBER and d == 0:
                # a partial that is 0 whatever the operands (floor's): PyTorch's
                # zeros_like(grad), a constant, +0 (g * 0 would require grad
                # with g, and be -0 where g < 0); one that is 0 for these
                # operands (x * 0.0's) is PyTorch's grad * 0, nan where g is inf
                grads.append(new_tensor(wrap_value(np.zeros(getattr(ctx, shape), g.dtype))))
                continue
            if type(d) in _NUMBER:
                gi = g if d == 1 and passes else (-g if d == -1 else g * d)
            else:
                gi = g * d
            # an input that broadcast to the output gets its gradient summed back
            grads.append(sum_to(_selected(gi, selection, env), getattr(ctx, shape)))
        return tuple(grads)
    return vjp


def _selected(gi, selection, env):
    """gi, and 0 where the partial's mask factor is 0 (Note [Selecting partials])."""
    if selection is not None:
        mask = eval(selection, env)
        kept = mask._array() != 0 if type(mask) is Tensor else mask != 0
        if not (type(kept) is bool and kept):
            gi = gi.where(kept, 0.0)
    return gi
