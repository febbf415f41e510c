"""The op registry: one record per op, read by the engine, the VJP evaluator and
the generator of the native sweep (`python -m tape._gen`).

An op is defined once, in `ops/`, by `defop`: its forward lives in the op
module, and the record here carries what backward needs.
"""
import ast
import enum
from dataclasses import dataclass, field

from ._opcodes import NEXT_OPCODE, OPCODES

__all__ = ["OpDef", "defop", "native_helper", "REGISTRY", "opdefs", "NATIVE_HELPERS", "seal", "Op",
           "SAVES_X", "SAVES_Y", "SAVES_OUT", "SAVES_Z", "SAVES_ROW", "PARTIAL_FUNCTIONS", "FORWARD_FUNCTIONS",
           "MASK_FUNCTIONS", "selecting_factor", "quotient", "REFUSES_NEVER", "REFUSES_ALWAYS", "REFUSES_NATIVE",
           "SAVED_TENSORS", "when_sealed", "RowTensor"]

SAVES_X, SAVES_Y, SAVES_OUT, SAVES_Z = 1, 2, 4, 8
# a tensor PyTorch saves that the row keeps in its ints (max's indices as the
# positions of its gather, a RowTensor): nothing to count or check for
# in-place changes, but a backward frees it, as PyTorch's frees the tensor
SAVES_ROW = 16
# the saved tensors a row can hold: its first three inputs and its result, by bit
SAVED_TENSORS = {"x": SAVES_X, "y": SAVES_Y, "out": SAVES_OUT, "z": SAVES_Z}


# Note [Saved values' names]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A node shows what its op saved as PyTorch's does, under derivatives.yaml's
# names: `_saved_self`, `_saved_other`, `_saved_result`, `_saved_exponent`,
# `_saved_dim`, ... (tape/_node.py). An op declares them with `saved=`, in
# PyTorch's order, each name with where the row keeps it:
#   "x", "y", "z", "out"  a saved tensor: an input (z: the third, of an op
#                    of three) or the result. Their order is
#                    the order saved_tensors_hooks packs them in (PyTorch's:
#                    for most binary ops other, self, then the result). An
#                    elementwise operand that is the row's constant `c`
#                    comes back as a 0-d float64 tensor, PyTorch's wrapped
#                    number
#   "c", "p"         a Python number: the constant (pow's exponent), the
#                    parameter (lerp's weight)
#   "x_shape", "y_shape"  an input's sizes, a tuple (`_saved_self_sym_sizes`)
#   "arg", "scalar"  an argument of the op's call as the caller gave it
#                    (dim=-1, keepdim, correction=None, ...), which the row
#                    itself does not tell (its ints are normalized, kept
#                    shapes): the op keeps it when it records
#                    (tape._node.keep_arguments). An "arg" is an int64 (or a
#                    list of them, a bool, a str, None) and shows as
#                    PyTorch's generated getters show one, a negative int as
#                    its unsigned 64-bit twin (dim=-1 as 18446744073709551615);
#                    a "scalar" (PyTorch's Scalar: beta, ord) shows as given
#   a RowTensor      a tensor PyTorch's node saves that the row keeps in
#                    another form (max's indices as the positions of its
#                    gather): made from the row when read, `make(row,
#                    arguments)`, and under saved_tensors_hooks packed when
#                    the op keeps its arguments (after the row's own values);
#                    `of="out"` for a part of a saved result (eigh's
#                    eigenvalues of its packed [L; V]), which it then names
#   a function       any other attribute: its value from the row, `f(row)`,
#                    where row has the VJP's view of it (shape, x_shape,
#                    y_shape, ints, c, p, needs)
# The tensors named must be exactly those the VJP reads (`saves`); in an op
# of one tensor input, y is the constant, which a VJP reads but which is no
# tensor. Without `saved=`, an op names the tensors it saves by PyTorch's
# common convention: y "other", x "self", out "result", in that order.
_DEFAULT_NAMES = (("other", "y"), ("self", "x"), ("result", "out"))
_ATTRIBUTES = ("c", "p", "x_shape", "y_shape", "arg", "scalar")


class RowTensor:
    """A saved tensor that the row keeps in another form: `make(row,
    arguments)` makes it, an array, or with `many` a tuple of arrays and
    Nones (advanced indexing's indices); `of` names the saved tensor it is
    part of, when it is one ("out": eigh's eigenvalues, part of its packed
    result), else it is made from the row's ints or the call's arguments
    (Note [Saved values' names])."""
    __slots__ = ("make", "many", "of")

    def __init__(self, make, many=False, of=None):
        self.make, self.many, self.of = make, many, of


def _saved_names(name, saved, saves, arity):
    """The validated (name, source) pairs of an op's `saved=` declaration,
    or its default (Note [Saved values' names])."""
    if saved is None:
        return tuple((n, s) for n, s in _DEFAULT_NAMES if saves & SAVED_TENSORS[s] and (s != "y" or arity >= 2))
    saved = tuple(saved)
    named = 0
    for n, s in saved:
        if isinstance(s, RowTensor):
            named |= SAVES_ROW if s.of is None else SAVED_TENSORS[s.of]
            continue
        if callable(s) or s in _ATTRIBUTES:
            continue
        if s not in SAVED_TENSORS or s == "y" and arity < 2 or s == "z" and arity < 3:
            raise ValueError(f"op {name!r}: saved {n!r} from {s!r}, which is no saved value")
        named |= SAVED_TENSORS[s]
    # a one-input op's y is its constant, a number: it need not be named
    tensors = saves & ~SAVES_Y if arity < 2 else saves
    if named != tensors:
        raise ValueError(f"op {name!r}: saved= names the tensors {named}, but its VJP reads {tensors}")
    if len({n for n, _ in saved}) != len(saved):
        raise ValueError(f"op {name!r}: saved= names a value twice")
    return saved


# The vocabulary of partials: the functions that may appear in a
# partial-derivative expression. Natively each is `math.<name>` (or a helper
# in the generated sweep); differentiably it is the op of the same name (its
# `function`, and its scalar forward `number` on a constant operand), looked
# up here when the VJP runs; within, zero_base and is_zero are the engine's
# constant masks (tape/_record.py).
PARTIAL_FUNCTIONS = ("sin", "cos", "sinh", "cosh", "exp", "log", "sqrt", "tanh", "erf", "sigmoid", "step", "sign",
                     "floor", "floor_div", "within", "zero_base", "is_zero")
_PARTIAL_NAMES = {"x", "y", "out", "p"}
# what a native forward expression may call besides the partials' vocabulary:
# libm's functions, as Numba compiles them
FORWARD_FUNCTIONS = PARTIAL_FUNCTIONS + ("tan", "asin", "acos", "atan", "asinh", "acosh", "atanh", "expm1", "log1p",
                                         "log2", "log10", "fabs", "atan2")
# The partial functions whose values are 0/1 masks (constants, not
# differentiable in their arguments).
MASK_FUNCTIONS = ("within", "zero_base", "is_zero", "step")


# Note [Selecting partials]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's "no gradient here" is a selection, where(mask, grad, 0): an
# upstream gradient that is nan or inf where the op masks it out gives 0,
# not nan * 0. A partial says so by its form: a product one of whose factors
# is built from masks and numbers alone (`within(x, y, p)`, `0`,
# `(1 - is_zero(x)) * log(y)`, maximum's `1 - within(..) + 0.5 * within(..)`).
# Where that factor is 0, the input's gradient is 0 whatever g is; elsewhere
# it is g times the partial. Every other partial multiplies (mul's `y`: nan *
# 0 is nan there, as in PyTorch). Both VJPs read the factor from here: the
# native kernels as a conditional (tape/_gen.py), the differentiable one as a
# where() (tape/_record.py).
def _is_mask_only(node):
    """Whether `node` is built from numbers and mask functions alone."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float))
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id in MASK_FUNCTIONS
    if isinstance(node, ast.UnaryOp):
        return _is_mask_only(node.operand)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        return _is_mask_only(node.left) and _is_mask_only(node.right)
    return False


def _factors(node):
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _factors(node.left) + _factors(node.right)
    return [node]


def quotient(expr):
    """(numerator, denominator) as source of partial `expr` when it is a
    quotient, the numerator None where it is 1; else None. The gradient is
    then g * numerator / denominator, in that order, as PyTorch's formulas
    divide the gradient (log's grad / self): g * (1 / x) rounds twice, and
    is 0 * inf = nan where x is tiny (1 / x overflows) but g / x is 0."""
    node = ast.parse(expr, mode="eval").body
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
        return None
    one = isinstance(node.left, ast.Constant) and node.left.value == 1
    return None if one else ast.unparse(node.left), ast.unparse(node.right)


def selecting_factor(expr):
    """The mask factor of partial `expr` as source (Note [Selecting
    partials]), or None for a partial that multiplies."""
    masks = [f for f in _factors(ast.parse(expr, mode="eval").body) if _is_mask_only(f)
             # a number selects only if it is 0 (floor's partial)
             and (any(isinstance(n, ast.Call) for n in ast.walk(f)) or eval(ast.unparse(f)) == 0)]
    return " * ".join(f"({ast.unparse(f)})" for f in masks) if masks else None


@dataclass
class OpDef:
    """What the engine knows of one op.

    name      op name, as in `ops` (`"sin"`); also the opcode's name
    grad_fn   PyTorch's node type name (`"SinBackward0"`)
    arity     number of tensor inputs (0 for leaves and constants)
    partials  elementwise ops: one expression per input, over `x`, `y`, `out`, `p`
    saves     bit mask of the values backward reads (SAVES_X | SAVES_Y | SAVES_OUT |
              SAVES_Z, SAVES_ROW)
    saves_for the values read for each input's gradient (inputs 0, 1 and 2): a
              value is saved only when an input whose gradient reads it requires
              grad (x * 2 saves nothing, as in PyTorch)
    edge_order  the row's inputs in PyTorch's order of next_functions, when the
              row keeps them in another (an op of three inputs keeps those it
              may save first: addmm's row is mat1, mat2, self)
    vjp       differentiable VJP: `vjp(ctx, g) -> tuple` of input gradients or None
    native    structural ops: a plain-Python kernel copied into the generated sweep
    not_differentiable  for an op that PyTorch records but cannot differentiate
              (its grad_fn is "NotImplemented"): the error a backward that
              reaches it raises, in the native and the re-taped sweep alike
    python_only  for an op whose VJP calls Python code (a custom autograd
              Function): it has no native kernel, the native sweep refuses
              it, and the engine sends every graph that reaches one of its
              rows through the Python walk (Note [Python-only rows])
    saved     PyTorch's names of what the row saves, (name, source) pairs in
              PyTorch's order (Note [Saved values' names])
    variadic  an op of any number of tensor inputs (cat, a custom Function):
              its rows keep those past the second in the pool (Note [Tape
              layout]); it saves no input, and its native kernel takes its
              inputs two at a time (tape/_gen.py's _more_vjps)
    runs_second  for an op whose node runs its second input's node inside
              itself (CopySlices runs the in-place op's): its next_functions
              are its first input's node, then that node's past its first
    forward   elementwise ops: the value as an expression over `x`, `y` (the
              second input, or the constant operand) and `p`, in the
              vocabulary of partials; the native forward kernels that
              tape.compile's replay runs are generated from it (Note
              [Compiled replay] in tape/_compile.py). None: the op has none,
              and a recording that uses it runs eagerly
    forward_native  structural ops: their native forward for the replay, a
              plain-Python kernel `(X, Y, O, osh, xsh, ysh, ints, pp)` that
              writes the value O of inputs X and Y (flat) as the row records
              it, copied into the generated module like `native`
    """
    name: str
    grad_fn: str
    arity: int
    partials: tuple = None
    saves: int = 0
    vjp: object = None
    native: object = None
    code: int = -1
    compiled_partials: tuple = field(default=None, repr=False)
    compiled_selections: tuple = field(default=None, repr=False)
    compiled_quotients: tuple = field(default=None, repr=False)  # per partial: None, or (numerator, denominator)
    saves_for: tuple = (0, 0, 0)
    not_differentiable: str = None
    python_only: bool = False
    saved: tuple = ()
    variadic: bool = False
    edge_order: tuple = None
    runs_second: bool = False
    forward: str = None
    forward_native: object = None
    # an elementwise op's function and scalar forward, set by tape/_record.py's
    # factories: the vocabulary of partials reaches them here
    function: object = field(default=None, repr=False)
    number: object = field(default=None, repr=False)

    @property
    def pack_order(self):
        """The saved tensors' sources ("x", "y", "out") in the order
        saved_tensors_hooks packs them."""
        return tuple(s for _, s in self.saved if type(s) is str and s in SAVED_TENSORS)

    @property
    def row_tensors(self):
        """The (name, RowTensor) pairs of what the row saves, in PyTorch's order."""
        return tuple((n, s) for n, s in self.saved if isinstance(s, RowTensor))

    @property
    def elementwise(self):
        return self.partials is not None

    @property
    def refusal(self):
        """What the native sweep does with a row of this op that passes a
        gradient on: REFUSES_NEVER (runs its kernel), REFUSES_ALWAYS (a
        not-differentiable op) or REFUSES_NATIVE (python-only: only when
        computing, which the engine never asks of it)."""
        if self.not_differentiable is not None:
            return REFUSES_ALWAYS
        return REFUSES_NATIVE if self.python_only else REFUSES_NEVER


REFUSES_NEVER, REFUSES_ALWAYS, REFUSES_NATIVE = 0, 1, 2


# Note [Stable opcodes]
# ~~~~~~~~~~~~~~~~~~~~~
# An op's opcode is its number in the committed table tape/_opcodes.py, not
# its place in import order: defining an op between two others renumbers
# nothing, so the generated sweep's tables and kernels of every other op stay
# as they were. `python -m tape._gen` keeps each tabled number, gives a new op
# the next free one, and never reuses a removed op's number (its opcode stays
# a hole: None in REGISTRY, a "no kernel" entry in the sweep's tables, never
# the opcode of a row). An op defined but not yet tabled still works in
# Python: it takes the next number above the table at import, which is the
# number the generator will give it, and the sweep module is stale until it
# is regenerated (the engine refuses a backward through a stale sweep and
# test_sweep_module_is_up_to_date fails, both naming the generator).

# Each op's OpDef, at its opcode; None at an opcode that no defined op holds
REGISTRY = [None] * NEXT_OPCODE
NATIVE_HELPERS = []
_BY_NAME = {}
Op = None


def _names_in(expr, opname, functions=PARTIAL_FUNCTIONS):
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise ValueError(f"op {opname!r}: partial {expr!r} is not an expression: {e}") from None
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    unknown = names - _PARTIAL_NAMES - set(functions)
    if unknown:
        raise ValueError(f"op {opname!r}: partial {expr!r} uses unknown names {sorted(unknown)}")
    return names


def _saves_of(names):
    return (SAVES_X if "x" in names else 0) | (SAVES_Y if "y" in names else 0) | (
        SAVES_OUT if "out" in names else 0) | (SAVES_Z if "z" in names else 0)


def defop(name, grad_fn, arity, *, partials=None, saves=None, vjp=None, native=None,
          not_differentiable=None, python_only=False, saved=None, variadic=False, edge_order=None,
          runs_second=False, forward=None, forward_native=None):
    """Register an op and return its `OpDef` (with its opcode).

    Elementwise ops give `partials` (one expression per input); the saved values
    and both VJPs derive from them. Structural ops give `saves`, `vjp` and
    `native`: `saves` is the mask of the values every input's gradient reads,
    or a tuple of one mask per input (mm's gradient for x reads y, and for y
    x), so that a row saves only what the gradients of its inputs that
    require grad read, as PyTorch's derivatives.yaml does. A `python_only`
    op gives `vjp` alone. Definitions are validated
    here, so a bad one fails at import. `saved` gives PyTorch's names of
    what the row saves (Note [Saved values' names]); `edge_order` is for an
    op of three inputs, `variadic` for one of any number; `runs_second` marks
    a node that runs its second input's node (OpDef).
    """
    if Op is not None:
        raise RuntimeError(f"op {name!r}: the registry is sealed; define ops before tape.seal()")
    if name in _BY_NAME:
        raise ValueError(f"op {name!r} is defined twice")
    if forward_native is not None and (partials is not None or native is None or arity > 2):
        raise ValueError(f"op {name!r}: a native forward kernel is for a structural op of at most two inputs")
    if forward is not None:
        if partials is None:
            raise ValueError(f"op {name!r}: only an elementwise op declares a native forward expression")
        if "out" in _names_in(forward, name, FORWARD_FUNCTIONS):
            raise ValueError(f"op {name!r}: forward {forward!r} reads out, the value it computes")
    if partials is not None:
        if len(partials) != arity:
            raise ValueError(f"op {name!r}: {arity} inputs but {len(partials)} partials")
        if vjp is not None or native is not None:
            raise ValueError(f"op {name!r}: elementwise ops derive vjp and native from partials")
        saves_for = tuple(_saves_of(_names_in(e, name)) for e in partials) + (0,) * (3 - arity)
        saves = saves_for[0] | saves_for[1]
        # PyTorch saves an op's result whichever input requires grad (an
        # input only for the gradients that read it): pow's for self's too
        if saves & SAVES_OUT:
            saves_for = tuple(s | SAVES_OUT for s in saves_for[:arity]) + saves_for[arity:]
    elif python_only:
        if vjp is None or native is not None or saves or not_differentiable is not None:
            raise ValueError(f"op {name!r}: a python-only op has a vjp and no native, saves or "
                             "not_differentiable (the sweep checks nothing for it)")
        saves_for = (0, 0, 0)
    elif not_differentiable is not None:
        if vjp is not None or native is not None:
            raise ValueError(f"op {name!r}: an op that is not differentiable has no vjp or native")
        vjp = _refusal(not_differentiable)
        saves_for = (0, 0, 0)
    else:
        if arity > 0 and (vjp is None or native is None):
            raise ValueError(f"op {name!r}: a structural op needs both vjp= and native=")
        if isinstance(saves, tuple):
            if len(saves) != arity:
                raise ValueError(f"op {name!r}: {arity} inputs but saves= gives {len(saves)} masks")
            saves_for = saves + (0,) * (3 - arity)
        else:
            saves_for = (saves or 0,) * 3 if arity > 0 else (0, 0, 0)
        saves = saves_for[0] | saves_for[1] | saves_for[2]
    if arity > 3 or arity == 3 and (partials is not None or edge_order is None):
        raise ValueError(f"op {name!r}: an op of three inputs is structural or python-only and gives "
                         "edge_order; one of more is variadic")
    if variadic and (arity != 2 or partials is not None or (saves or 0) & (SAVES_X | SAVES_Y | SAVES_Z)):
        raise ValueError(f"op {name!r}: a variadic op is structural or python-only, of arity 2 (its "
                         "first two inputs), and saves no input")
    opdef = OpDef(name, grad_fn, arity, tuple(partials) if partials is not None else None,
                  saves or 0, vjp, native, code=OPCODES.get(name, len(REGISTRY)), saves_for=saves_for,
                  not_differentiable=not_differentiable, python_only=python_only,
                  saved=_saved_names(name, saved, saves or 0, arity), variadic=variadic,
                  edge_order=None if edge_order is None else tuple(edge_order), runs_second=runs_second,
                  forward=forward, forward_native=forward_native)
    if partials is not None:
        opdef.compiled_partials = tuple(compile(e, f"<partial {i} of {name}>", "eval")
                                        for i, e in enumerate(partials))
        opdef.compiled_selections = tuple(
            None if (m := selecting_factor(e)) is None else compile(m, f"<mask of partial {i} of {name}>", "eval")
            for i, e in enumerate(partials))
        opdef.compiled_quotients = tuple(
            None if (q := quotient(e)) is None else
            tuple(None if part is None else compile(part, f"<quotient of partial {i} of {name}>", "eval") for part in q)
            for i, e in enumerate(partials))
    if opdef.code == len(REGISTRY):
        REGISTRY.append(opdef)
    else:
        REGISTRY[opdef.code] = opdef
    _BY_NAME[name] = opdef
    return opdef


def _refusal(message):
    def vjp(ctx, g):
        raise RuntimeError(message)
    return vjp


def native_helper(fn):
    """Mark a plain-Python function that native kernels call; the generator
    copies it into the sweep module next to them."""
    NATIVE_HELPERS.append(fn)
    return fn


def lookup(name):
    return _BY_NAME[name]


def opdefs():
    """Every defined op's OpDef, by opcode (REGISTRY without its holes)."""
    return [d for d in REGISTRY if d is not None]


def seal():
    """Freeze the registry into the `Op` IntEnum; called once all ops are
    defined and exported. Then run what waited for the ops (`when_sealed`)."""
    global Op
    if Op is None:
        missing = [name for name in PARTIAL_FUNCTIONS if name not in ("within", "zero_base", "is_zero")
                   and (name not in _BY_NAME or _BY_NAME[name].function is None)]
        if missing:
            raise RuntimeError(f"the partials' vocabulary names no elementwise op {missing}")
        Op = enum.IntEnum("Op", {d.name.upper(): d.code for d in opdefs()})
        while _WAITING:
            _WAITING.pop(0)()
    return Op


_WAITING = []


def when_sealed(fn):
    """Call fn once every op is defined and exported: now, if they are
    (the face fills itself so, Note [The face] in tape/__init__.py)."""
    if Op is None:
        _WAITING.append(fn)
    else:
        fn()


# Engine rows that are not ops: a leaf that requires grad, and a constant
# operand whose value some VJP reads. Neither has inputs, so a sweep stops there.
LEAF = defop("leaf", "AccumulateGrad", 0).code
CONST = defop("const", "Constant", 0).code
