"""How an op is declared and exported: `declare` (Note [Op declarations]).

`export_all`, run once by ops/__init__.py after every op module is imported,
makes each declaration's public function (PyTorch's signature, `out=`, vmap's
batching rule), its Tensor methods and aliases, and BatchedTensor's methods.
"""
import inspect
import sys
import warnings
from dataclasses import dataclass

import numpy as np

from tape._batched import BatchedArgumentError, BatchedTensor, refuse_the_rest
from tape._dtypes import as_dtype, scalar_type_name
from tape._grad_mode import no_grad
from tape._tape import state
from tape._tensor import Tensor, wrap_value

__all__ = ["declare", "exports", "DECLARATIONS", "PUBLIC", "export_all", "with_signature"]

# Note [Op declarations]
# ~~~~~~~~~~~~~~~~~~~~~~
# An op is declared once, beside its forward, in its module of ops/: its rows
# (`defop`: partials or VJP, native kernel, grad_fn, saved values) and
# `declare(fn, batch=..., signature=..., methods=..., aliases=...)`: the
# names it is exported under and how vmap batches it. Everything else is
# made here from the declarations, so that adding an op is one declaration
# plus its test record:
# - tape.<name> (or tape.linalg.<name>) is fn under PyTorch's Python
#   signature (Note [PyTorch's signatures]), in `PUBLIC`, which the face reads;
#   `__all__` of ops and of the face are its keys.
# - each of `methods` is a Tensor method: fn itself where self is the only
#   tensor operand (x.sin() costs what sin does) and for Python's binary
#   operators (x + y: Python asks a batched operand first), else fn behind a
#   dispatch to its batching rule, as tape.<name> is (x.add(batched)).
# - BatchedTensor gets each method as the batching rule `batch` applied to
#   fn: a family rule of tape/_batched.py (elementwise, over dims, ...) or the
#   op's own; `NO_RULE` or `no_rule(text)` declares that vmap refuses it,
#   with PyTorch's error.
# A batched argument reaches fn's first read of it, which raises
# BatchedArgumentError (Note [Batched tensors]); the public function and the
# dispatching methods catch it around fn and run the rule instead. A try
# that raises nothing costs nothing in CPython 3.11, so eager calls pay
# nothing for it. Ops call each other directly, without the dispatch: a
# batched argument deep inside one reaches the outermost public function,
# whose rule runs.


@dataclass(eq=False)
class Declaration:
    """One op as the public sees it.

    name      tape.<name> (the first method's name for a method-only op)
    op        the function that computes it (its own parameters, positional)
    batch     its batching rule `rule(op, bound_arguments)`, or a no-rule
    signature PyTorch's Python signature of tape.<name> as source; None: op's own
    function  whether tape.<name> (tape.linalg.<name> for module "linalg") exists
    methods   the Tensor methods that are op (PyTorch's names: "add", "__add__", ...)
    aliases   further names of the function and of the methods alike (absolute, clip)
    operands  how many of its arguments may be tensors: with more than one, a
              method's other arguments may be batched when self is not
    module    "tape" or "linalg"
    inplace   an elementwise op whose in-place form `<name>_` ops.inplace makes
    """
    name: str
    op: object
    batch: object
    signature: str = None
    function: bool = True
    methods: tuple = ()
    aliases: tuple = ()
    operands: int = 1
    module: str = "tape"
    inplace: bool = False
    home: str = None  # the module that declares it
    public: object = None


DECLARATIONS = []
# the public functions by module and name, made by export_all
PUBLIC = {"tape": {}, "linalg": {}}


def declare(op=None, *, batch, name=None, signature=None, function=True, methods=None, aliases=(), operands=1,
            module="tape", inplace=False):
    """Declare the op `op` (Note [Op declarations]) and return it; a
    decorator when `op` is left out. `methods` defaults to (name,) for an op
    of module "tape", () otherwise; `batch` has no default: every op either
    has a batching rule or says that it has none."""
    def declared(fn):
        decl_name = name or fn.__name__
        decl_methods = methods if methods is not None else ((decl_name,) if module == "tape" else ())
        if not function and not decl_methods:
            raise ValueError(f"op {decl_name!r} is declared with neither a function nor a method")
        if not callable(batch):
            raise TypeError(f"op {decl_name!r}: batch must be a batching rule or NO_RULE, not {batch!r}")
        DECLARATIONS.append(Declaration(decl_name, fn, batch, signature, function, tuple(decl_methods),
                                        tuple(aliases), operands, module, inplace, _declaring_module()))
        return fn
    return declared if op is None else declared(op)


def _declaring_module():
    frame = sys._getframe(1)
    while frame.f_globals["__name__"] == __name__:
        frame = frame.f_back
    return frame.f_globals["__name__"]


def exports(namespace):
    """The names in a module's namespace of the functions declared there:
    the module's __all__."""
    functions = {id(d.op) for d in DECLARATIONS if d.function and d.home == namespace["__name__"]}
    return sorted(name for name, v in namespace.items() if id(v) in functions and not name.startswith("_"))


def export_all():
    """Make every declaration's public function, Tensor methods and
    BatchedTensor methods; then BatchedTensor refuses the Tensor methods
    that no declaration batches. Returns the names of tape's functions."""
    owners = {}  # each exported name, and the declaration that has it
    for decl in DECLARATIONS:
        functions = [(decl.module, n) for n in (decl.name,) + decl.aliases] if decl.function else []
        for key in functions + [("Tensor", n) for n in decl.methods + _method_aliases(decl)]:
            if key in owners:
                raise ValueError(f"{'.'.join(key)} is declared by {owners[key]!r} and by {decl.name!r}")
            owners[key] = decl.name
        batched = _batched_form(decl)
        if decl.function:
            decl.public = with_signature(decl.op, decl.name, decl.signature, batched=batched)
            for public_name in (decl.name,) + decl.aliases:
                PUBLIC[decl.module][public_name] = decl.public
        method_names = decl.methods + _method_aliases(decl)
        if not method_names:
            continue
        method = decl.op if decl.operands == 1 else with_signature(decl.op, decl.name, None, batched=batched)
        for method_name in method_names:
            setattr(Tensor, method_name, decl.op if method_name in _BINARY_OPERATORS else method)
            setattr(BatchedTensor, method_name, _batched_method(batched, method_name))
    refuse_the_rest()
    return sorted(PUBLIC["tape"])


# Python asks a BatchedTensor operand's reflected operator first, before a
# plain Tensor's (`plain * batched` is batched.__rmul__(plain)): a Tensor's
# operator is the op itself, and x + y costs what the op does
_BINARY_OPERATORS = {f"__{r}{name}__" for name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
                                                    "matmul", "and", "or", "xor") for r in ("", "r")}
_BINARY_OPERATORS |= {f"__{name}__" for name in ("eq", "ne", "lt", "le", "gt", "ge")}


def _method_aliases(decl):
    return decl.aliases if decl.methods else ()


def _batched_form(decl):
    """op's batching rule, called as op is: it binds the arguments to op's
    own parameters, defaults applied."""
    rule, op = decl.batch, decl.op
    parameters = inspect.signature(op)

    def batched(*args, **kwargs):
        bound = parameters.bind(*args, **kwargs)
        bound.apply_defaults()
        return rule(op, bound)
    batched.__name__ = decl.name
    return batched


def _batched_method(batched, name):
    def method(self, *args, **kwargs):
        return batched(self, *args, **kwargs)
    method.__name__ = name
    return method


# Note [PyTorch's signatures]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# tape.<name> takes torch.<name>'s Python signature (the declarations' and
# FACTORY_SIGNATURES; tests/test_signatures.py holds them, and the Tensor
# methods, against torch 2.13's). The functions are wrappers made here; the
# Tensor methods and Python operators are the ops themselves, their
# parameters named as torch's methods name them (x.mm(mat2=m)), so x.sin()
# and x + y cost what they did. The wrapper costs tape.sin(x) about 40 ns on
# a 0-d tensor (a Python call and the keyword-only out=); taking out= in the
# op itself instead costs every call about 20 ns (x + y too: filling a
# keyword-only default is a dict lookup per call), measured.

_MISSING = inspect.Parameter.empty


def _parameters(spec):
    """The inspect.Parameters of a signature written as Python source."""
    return list(inspect.signature(eval(f"lambda {spec}: None")).parameters.values())


def _own_spec(fn):
    """fn's signature as source, its defaults as they are."""
    return str(inspect.signature(fn))[1:-1]


def with_signature(fn, name, spec, *, factory=False, batched=None):
    """fn under PyTorch's signature `spec` (e.g. "input, other, *, out=None"),
    or under its own (spec None); with `batched`, a call that meets a batched
    argument runs `batched(*the same arguments)` instead (Note [Op declarations]).

    Positional parameters of `spec` go to fn's positional parameters in order
    (to its *args when it has them; those beyond, to fn's keywords of their
    names); keyword-only ones to fn's parameters of the same name. `out` is handled here; a `dtype` that fn lacks casts the
    input first, as PyTorch's reductions do. fn's own keyword-only extras
    (NumPy's `axis=`) stay reachable. A parameter with nowhere to go fails at
    import, naming the op. `out` may be positional too (torch.norm). A
    `*size` goes to fn's *args. A factory's out gives the dtype when no
    dtype= does, as in PyTorch (zeros(2, out=long_tensor))."""
    own = list(inspect.signature(fn).parameters.values())
    if spec is None:
        torch_params = [p.replace(default=p.default) for p in own]
    else:
        torch_params = _parameters(spec)
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
        if p.name == "out" and spec is not None:
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
    args += [f"**{p.name}" for p in torch_params if p.kind == p.VAR_KEYWORD]
    defaults = {}
    params = []
    for p in torch_params + extras:
        if p.default is not _MISSING:
            defaults[f"_default_{p.name}"] = p.default
            p = p.replace(default=_Source(f"_default_{p.name}"))
        params.append(p)
    has_out = spec is not None and any(p.name == "out" for p in keyword)
    inputs = "".join(f", {p.name}" for p in positional)
    call_args = ", ".join(args)
    if batched is None:
        compute = [f"return _fn({call_args})"]
    else:
        compute = ["try:", f"    return _fn({call_args})",
                   "except _BatchedArgumentError:", f"    return _batched({call_args})"]
    lines = [f"def {name}{inspect.Signature(params)}:"]
    if cast_dtype:
        lines.append(f"    if dtype is not None: {positional[0].name} = _cast({positional[0].name}, dtype)")
    if has_out:
        if factory:
            lines.append("    if out is not None and dtype is None: dtype = out.dtype")
        lines += ["    if out is None:"] + [f"        {ln}" for ln in compute] + [
            # PyTorch names a factory by its aten op here
            f"    _refuse_recording({('aten::' + name if factory else name)!r}, out{inputs})",
            f"    return _write_out({name!r}, out, _fn({call_args}))"]
    else:
        lines += [f"    {ln}" for ln in compute]
    namespace = {"_fn": fn, "_cast": _cast, "_refuse_recording": _refuse_recording, "_write_out": _write_out,
                 "_batched": batched, "_BatchedArgumentError": BatchedArgumentError, **defaults}
    exec("\n".join(lines), namespace)  # noqa: S102  (source made from the declared signatures)
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
