"""PyTorch's Python signatures for the public functions. `with_signature`
makes the function exported as `tape.<name>`: torch's parameter names,
defaults and keyword-only markers, calling the op positionally (so the
op's own parameter names are free), and PyTorch's `out=`.
"""
import inspect
import warnings

import numpy as np

from tape._dtypes import as_dtype, scalar_type_name
from tape._grad_mode import no_grad
from tape._tape import state
from tape._tensor import Tensor, wrap_value

__all__ = ["with_signature"]

# Note [PyTorch's signatures]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# tape.<name> takes torch.<name>'s Python signature (ops.SIGNATURES,
# FACTORY_SIGNATURES, LINALG_SIGNATURES; tests/test_signatures.py holds them,
# and the Tensor methods, against torch 2.13's). The functions are wrappers
# made here; the Tensor methods and Python operators are the ops themselves,
# their parameters named as torch's methods name them (x.mm(mat2=m)), so
# x.sin() and x + y cost what they did. The wrapper costs tape.sin(x) about
# 60 ns on a 0-d tensor (a Python call and the keyword-only out=); taking
# out= in the op itself instead costs every call about 40 ns (x + y too:
# filling a keyword-only default is a dict lookup per call), measured.

_MISSING = inspect.Parameter.empty


def _parameters(spec):
    """The inspect.Parameters of a signature written as Python source."""
    return list(inspect.signature(eval(f"lambda {spec}: None")).parameters.values())


def with_signature(fn, name, spec, *, factory=False):
    """fn under PyTorch's signature `spec` (e.g. "input, other, *, out=None").

    Positional parameters of `spec` go to fn's positional parameters in order
    (to its *args when it has them; those beyond, to fn's keywords of their
    names); keyword-only ones to fn's parameters of the same name. `out` is handled here; a `dtype` that fn lacks casts the
    input first, as PyTorch's reductions do. fn's own keyword-only extras
    (NumPy's `axis=`) stay reachable. A parameter with nowhere to go fails at
    import, naming the op. `out` may be positional too (torch.norm). A
    `*size` goes to fn's *args. A factory's out gives the dtype when no
    dtype= does, as in PyTorch (zeros(2, out=long_tensor))."""
    torch_params = _parameters(spec)
    own = list(inspect.signature(fn).parameters.values())
    own_positional = [p for p in own if p.kind == p.POSITIONAL_OR_KEYWORD]
    own_varargs = any(p.kind == p.VAR_POSITIONAL for p in own)
    own_names = {p.name for p in own if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    positional = [p for p in torch_params if p.kind == p.POSITIONAL_OR_KEYWORD and p.name != "out"]
    keyword = [p for p in torch_params if p.kind == p.KEYWORD_ONLY or p.name == "out"]
    # torch's positional parameters beyond fn's go to fn's keywords of their names
    reach = len(positional) if own_varargs else len(own_positional)
    for p in positional[reach:]:
        if p.name not in own_names:
            raise TypeError(f"{name}: PyTorch's positional parameter {p.name!r} has no place in the op")
    args = [p.name for p in positional[:reach]] + [f"{p.name}={p.name}" for p in positional[reach:]]
    args += [f"*{p.name}" for p in torch_params if p.kind == p.VAR_POSITIONAL]
    cast_dtype = False
    for p in keyword:
        if p.name == "out":
            continue
        if p.name in own_names:
            args.append(f"{p.name}={p.name}")
        elif p.name == "dtype" and not factory:
            cast_dtype = True
        else:
            raise TypeError(f"{name}: the op has no parameter {p.name!r} of PyTorch's signature")
    torch_names = {p.name for p in torch_params}
    extras = [p for p in own if p.kind == p.KEYWORD_ONLY and p.name not in torch_names]
    args += [f"{p.name}={p.name}" for p in extras]
    defaults = {}
    params = []
    for p in torch_params + extras:
        if p.default is not _MISSING:
            defaults[f"_default_{p.name}"] = p.default
            p = p.replace(default=_Source(f"_default_{p.name}"))
        params.append(p)
    has_out = any(p.name == "out" for p in keyword)
    inputs = "".join(f", {p.name}" for p in positional)
    call = f"_fn({', '.join(args)})"
    lines = [f"def {name}{inspect.Signature(params)}:"]
    if cast_dtype:
        lines.append(f"    if dtype is not None: {positional[0].name} = _cast({positional[0].name}, dtype)")
    if has_out:
        if factory:
            lines.append("    if out is not None and dtype is None: dtype = out.dtype")
        lines += ["    if out is None:", f"        return {call}",
                  # PyTorch names a factory by its aten op here
                  f"    _refuse_recording({('aten::' + name if factory else name)!r}, out{inputs})",
                  f"    return _write_out({name!r}, out, {call})"]
    else:
        lines.append(f"    return {call}")
    namespace = {"_fn": fn, "_cast": _cast, "_refuse_recording": _refuse_recording, "_write_out": _write_out,
                 **defaults}
    exec("\n".join(lines), namespace)  # noqa: S102  (source made from the signature tables above)
    wrapper = namespace[name]
    wrapper.__doc__ = fn.__doc__
    wrapper.__module__ = fn.__module__
    wrapper.__wrapped_op__ = fn
    return wrapper


class _Source:
    """A default shown in the generated source by a name bound in its namespace."""
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


def _cast(input, dtype):
    return input.to(as_dtype(dtype)) if isinstance(input, Tensor) else input


def _tensors(values):
    for v in values:
        if isinstance(v, Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from _tensors(v)


def _refuse_recording(name, out, *inputs):
    if state.tape.grad_enabled and any(t._rg for t in _tensors((out, *inputs))):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")


def _can_cast(source, target):
    # PyTorch's canCast: not from floating to integral, nor from non-bool to bool
    if source.kind == "f" and target.kind in "biu":
        return False
    return not (source.kind != "b" and target.kind == "b")


def _write_out(name, out, result):
    """Write result (a Tensor, or a tuple of them) into out, as PyTorch does:
    an out of another shape is resized (with PyTorch's warning unless it was
    empty), the value cast to out's dtype where PyTorch can cast it."""
    if isinstance(result, tuple):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"{name}(): argument 'out' must be tuple of Tensors, not {type(out).__name__}")
        for o, r in zip(out, result):
            _write_out(name, o, r)
        return type(result)(*out) if hasattr(result, "_fields") else tuple(out)
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if not _can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"result type {scalar_type_name(result.dtype)} can't be cast to the desired output "
                           f"type {scalar_type_name(out.dtype)}")
    if out.shape != result.shape:
        if out.numel():
            warnings.warn(f"An output with one or more elements was resized since it had shape "
                          f"{list(out.shape)}, which does not match the required output shape "
                          f"{list(result.shape)}. This behavior is deprecated, and in a future PyTorch "
                          "release outputs will not be resized unless they have zero elements. You can "
                          "explicitly reuse an out tensor t by resizing it, inplace, to zero elements with "
                          "t.resize_(0).", UserWarning, stacklevel=3)
        out._set_storage(wrap_value(np.zeros(result.shape, out.dtype)))
    with no_grad():
        out.copy_(result)
    return out
