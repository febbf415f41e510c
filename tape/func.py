"""Composable function transforms, as torch.func: grad, grad_and_value, vjp,
jvp, jacrev, jacfwd, hessian and vmap, with torch.func's signatures, pytrees
of inputs and outputs, and error texts. The derivatives run on autograd.grad
over the tape; vmap on batched tensors (tape/_batched.py).
"""
import functools
import weakref

import numpy as np

from . import _batched, _sweep
from ._engine import grad as _autograd
from ._factories import tensor, zeros, zeros_like
from ._grad_mode import enable_grad, is_grad_enabled
from ._registry import LEAF
from ._tape import RG, state, where
from ._tensor import Tensor
from .autograd.functional import _autograd_grad as _functional_grad

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap"]

# Note [Transform levels]
# ~~~~~~~~~~~~~~~~~~~~~~~
# Each call of a transform is a level, which differentiates with respect to
# fresh aliases of its inputs: a new leaf (detach().requires_grad_()) for an
# input that no enclosing graph tracks, or a recorded view (view_as) of one
# that requires grad, so that the level's results stay connected to the
# enclosing graph (an outer level's alias, or the caller's own leaves). The
# gradient with respect to a view is what flows through that view only, so a
# level never sees an enclosing level's paths (no perturbation confusion).
#
# A level needs create_graph only when what it differentiates reaches a leaf
# requiring grad that is not one of its own fresh aliases (an outer level's
# alias, a closed-over parameter, the leaf under a view alias): otherwise
# nothing outside can differentiate the result again, and the native sweep
# computes it. Results leave a level as torch.func "unwraps" them: one whose
# graph reaches no leaf but the level's own is detached, so it requires grad
# only when an enclosing level or the caller's graph needs it. Under an outer
# no_grad nothing outside can need it, and every result is detached. Once a
# level returns, its aliases count as its own for every level (_FINISHED):
# results may still reach them, but no one outside can differentiate them.
#
# Inside vmap (Note [Batched tensors], tape/_batched.py), a level's aliases
# are batched at every active vmap level, a copy per sample, and it takes
# gradients of the physical values: of the sum of the samples' outputs for
# grad, with the same cotangent for every sample for jacrev's rows. As no
# batching rule mixes samples, what reaches a sample's copy is that sample's
# gradient.

_JVP = "jvp(f, primals, tangents)"


class _Api:
    """The error texts of torch.func's vjp or jvp, which jacrev and jacfwd
    (and so hessian) raise too."""

    def __init__(self, name, floats_only):
        self.name, self.floats_only = name, floats_only


_VJP_API = _Api("vjp(f, *primals)", True)
# jacfwd runs in reverse mode, with jvp's texts (its outputs may be integer)
_JVP_API = _Api(_JVP, False)


# -- pytrees: tuples (namedtuples too), lists and dicts; anything else is a leaf

class _Spec:
    """The structure of a pytree, as torch.utils._pytree's TreeSpec (and its repr)."""
    __slots__ = ("type", "context", "children")

    def __init__(self, type_, context, children):
        self.type, self.context, self.children = type_, context, children

    @property
    def num_leaves(self):
        return 1 if self.type is None else sum(c.num_leaves for c in self.children)

    def __eq__(self, other):
        return (isinstance(other, _Spec) and self.type is other.type and self.context == other.context
                and self.children == other.children)

    def __hash__(self):
        return hash((self.type, self.num_leaves))

    def __repr__(self, indent=0):
        if self.type is None:
            return "*"
        text = f"TreeSpec({self.type.__name__}, {self.context}, ["
        if self.children:
            indent += 2
            text += self.children[0].__repr__(indent) + ("," if len(self.children) > 1 else "")
            text += ",".join("\n" + " " * indent + c.__repr__(indent) for c in self.children[1:])
        return text + "])"

    def pprint(self):
        """The tree with `*` for each leaf, as torch's treespec_pprint."""
        return repr(_unflatten([_Star()] * self.num_leaves, self))


class _Star:
    def __repr__(self):
        return "*"


_LEAF_SPEC = _Spec(None, None, ())


def _flatten(tree):
    """(the leaves of `tree` in order, its _Spec)."""
    leaves = []

    def spec_of(node):
        kids = _children(node)
        if kids is None:
            leaves.append(node)
            return _LEAF_SPEC
        context, children = kids
        return _Spec(type(node), context, tuple(spec_of(c) for c in children))
    return leaves, spec_of(tree)


def _children(node):
    """(context, children) of a pytree node, or None for a leaf."""
    if type(node) in (tuple, list):
        return None, tuple(node)
    if _is_namedtuple(node):
        return type(node), tuple(node)
    if type(node) is dict:
        return list(node), tuple(node.values())
    return None


def _is_namedtuple(node):
    return isinstance(node, tuple) and hasattr(type(node), "_fields")


def _unflatten(leaves, spec):
    """The pytree of `spec` with `leaves` in order."""
    it = iter(leaves)

    def build(s):
        if s.type is None:
            return next(it)
        kids = [build(c) for c in s.children]
        if s.type is dict:
            return dict(zip(s.context, kids))
        if s.type is list:
            return kids
        if s.type is tuple:
            return tuple(kids)
        return s.type(*kids)  # a namedtuple
    return build(spec)


def _tree_map(fn, tree):
    leaves, spec = _flatten(tree)
    return _unflatten([fn(v) for v in leaves], spec)


# -- levels (Note [Transform levels])

# the aliases of the levels that have returned: leaves that results may
# still reach, which no one outside can differentiate (Note [Transform levels])
# (by id: a Tensor's == is elementwise)
_FINISHED = weakref.WeakValueDictionary()


class _Level:
    """One transform call: its fresh aliases, and whether grad mode was on
    outside it."""

    def __init__(self):
        self.outer_grad = is_grad_enabled()
        self.own = []
        self._grad_mode = enable_grad()
        # inside vmap: the active vmap levels, at which every alias is batched
        self.levels = tuple(lv for lv, _ in _batched.active_levels())

    def __enter__(self):
        self._grad_mode.__enter__()  # f runs with grad on, whatever the mode outside
        return self

    def __exit__(self, *exc):
        self._grad_mode.__exit__(*exc)
        # the level returns: no enclosing level differentiates its aliases
        _FINISHED.update((id(t), t) for t in self.own)

    def alias(self, t):
        """The tensor the level differentiates for input t. Inside vmap, it is
        batched at every active level, so that each sample has its own copy
        and the gradient of the sum over samples is the per-sample gradient
        (no batching rule mixes samples)."""
        if not isinstance(t, Tensor):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(t)}")
        if not t.is_floating_point():
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if self.levels:
            return _batched.batched(self._alias_of(_batched.with_levels(t, self.levels)), self.levels)
        return self._alias_of(t)

    def physical(self, t):
        """Tensor t as the level's autograd sees it: inside vmap, the
        physical value with a batch dim for every active vmap level."""
        if self.levels and isinstance(t, Tensor):
            return _batched.with_levels(t, self.levels)
        return t

    def batched(self, g):
        """A physical result g as f's caller sees it (batched inside vmap)."""
        return _batched.batched(g, self.levels)

    def _alias_of(self, t):
        if self.outer_grad and t.requires_grad:
            return t.view_as(t)
        fresh = t.detach().requires_grad_()
        self.own.append(fresh)
        return fresh

    def reaches_outside(self, tensors):
        """Whether the graph behind `tensors` reaches a leaf requiring grad
        that is neither this level's alias nor a finished level's (and grad
        mode was on outside)."""
        if not self.outer_grad:
            return False
        own = {id(t) for t in self.own}
        tp = state.tape
        roots = []
        for t in map(_batched.physical, tensors):
            if not isinstance(t, Tensor) or not t._rg:
                continue
            t_tape, r = where(t)
            if t_tape is None:  # a leaf that no op has used yet
                if id(t) not in own and _FINISHED.get(id(t)) is not t:
                    return True
            elif t_tape is not tp:
                return True
            else:
                roots.append(r)
        if not roots:
            return False
        reached = tp.reachable(roots)
        for r in reached[(tp.op[reached] == LEAF) & (tp.flags[reached] & RG != 0)].tolist():
            leaf = tp.tensor_at(r)
            # a dead leaf: nothing can ask for its gradient
            if leaf is not None and id(leaf) not in own and _FINISHED.get(id(leaf)) is not leaf:
                return True
        return False

    def unwrap(self, t):
        """t as a result of the level: detached unless something outside needs its graph."""
        if isinstance(t, _batched.BatchedTensor):
            return _batched.batched(self.unwrap(t.phys), t.levels)
        if isinstance(t, Tensor) and t._rg and not self.reaches_outside((t,)):
            return t.detach()
        return t

    def unwrap_tree(self, tree):
        return _tree_map(self.unwrap, tree)


# -- argnums

def _wrap_argnum(argnum, num_args):
    if not isinstance(argnum, int):
        raise RuntimeError(f"argnum must be int, got: {type(argnum)}")
    if 0 <= argnum < num_args:
        return argnum
    if -num_args <= argnum < 0:
        return argnum + num_args
    raise RuntimeError(f"Got argnum={argnum}, but only {num_args} positional inputs")


def _wrap_argnums(argnums, num_args):
    """argnums checked as torch.func checks them, negative ones made positive."""
    if isinstance(argnums, int):
        return _wrap_argnum(argnums, num_args)
    if not isinstance(argnums, tuple):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    wrapped = tuple(_wrap_argnum(a, num_args) for a in argnums)
    if not wrapped:
        raise RuntimeError("argnums must be non-empty")
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError(f"argnums elements must be unique, got {wrapped}")
    return wrapped


def _slice_argnums(args, argnums, as_tuple=False):
    """The differentiated arguments: one (argnums an int, unless `as_tuple`)
    or a tuple of them."""
    argnums = _wrap_argnums(argnums, len(args))
    if isinstance(argnums, int):
        return (args[argnums],) if as_tuple else args[argnums]
    return tuple(args[i] for i in argnums)


def _replace_args(args, new, argnums):
    argnums = _wrap_argnums(argnums, len(args))
    if isinstance(argnums, int):
        return tuple(new if i == argnums else a for i, a in enumerate(args))
    return tuple(new[argnums.index(i)] if i in argnums else a for i, a in enumerate(args))


# -- shared pieces

def _split_aux(output, api, has_aux):
    if not has_aux:
        return output, None
    if not (isinstance(output, tuple) and len(output) == 2):
        raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) if has_aux is True")
    return output


def _check_tensor_outputs(flat, api):
    """torch.func's checks of what f returned: something, and only tensors."""
    if (len(flat) == 1 and flat[0] is None) or not flat:
        raise RuntimeError(f"{api.name}: Expected f to be a function that has non-empty output (got output = "
                           f"{flat})")
    for out in flat:
        if not isinstance(out, Tensor):
            raise RuntimeError(f"{api.name}: expected f(*primals) to return only tensors, got unsupported type "
                               f"{type(out)}")
        if api.floats_only and not out.is_floating_point():
            raise RuntimeError("vjp(f, ...): All outputs of f must be floating-point or complex Tensors, got "
                               f"Tensor with dtype tape.{out.dtype.name}")


def _gradients(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """autograd.grad of the outputs that require grad, with zeros for the
    inputs they do not reach (torch.func's _autograd_grad)."""
    grads = _functional_grad(outputs, inputs, grad_outputs, create_graph=create_graph, retain_graph=retain_graph)
    return tuple(zeros_like(inp) if g is None else g for g, inp in zip(grads, inputs))


class _Linearized:
    """f run once at its primals, ready for vector-Jacobian products: the
    level, the flat outputs (still attached), the flat differentiated
    aliases and the structures of both."""

    def __init__(self, func, primals, argnums, has_aux, api):
        with _Level() as level:
            self.level = level
            if argnums is None:
                diff = _tree_map(level.alias, primals)
                args = diff
            else:
                diff = _tree_map(level.alias, _slice_argnums(primals, argnums))
                args = _replace_args(primals, diff, argnums)
            output, aux = _split_aux(func(*args), api.name, has_aux)
            self.aux = level.unwrap_tree(aux) if has_aux else None
            self.flat_out, self.out_spec = _flatten(output)
            _check_tensor_outputs(self.flat_out, api)
            self.phys_out = [level.physical(o) for o in self.flat_out]
            self.flat_diff, self.diff_spec = _flatten(diff)
            self.phys_diff = [_batched.physical(a) for a in self.flat_diff]
        self.output = _unflatten([level.unwrap(o) for o in self.flat_out], self.out_spec)

    def pull(self, outputs, cotangents, create_graph, retain_graph=True):
        """The gradients of `outputs` (some of phys_out) with `cotangents`
        with respect to the aliases, unwrapped. Inside vmap, each sample's
        cotangent gives that sample's gradient (Note [Transform levels])."""
        level = self.level
        cotangents = [level.physical(c) for c in cotangents]
        graph = create_graph and level.reaches_outside(list(outputs) + cotangents)
        grads = _gradients(outputs, self.phys_diff, cotangents, create_graph=graph, retain_graph=retain_graph)
        return [level.batched(level.unwrap(g) if graph else g) for g in grads]


# -- the transforms

def vjp(func, *primals, has_aux=False):
    """(func(*primals), vjp_fn) [, aux]: vjp_fn(cotangents) gives the
    vector-Jacobian product with respect to each primal, as torch.func.vjp.

    Parameters
    ----------
    func : callable
        Takes the primals (Tensors, or tuples, lists and dicts of them) and
        returns a Tensor or a pytree of Tensors (with `has_aux`, a pair
        (output, aux)).
    *primals : Tensor or pytree of Tensors
    has_aux : bool

    Returns
    -------
    (output, vjp_fn) or (output, vjp_fn, aux). ``vjp_fn(cotangents,
    retain_graph=True, create_graph=None)`` takes cotangents of the output's
    structure and returns a tuple with one gradient per primal.

    Examples
    --------
    >>> import tape
    >>> out, vjp_fn = tape.func.vjp(lambda x: x ** 2, tape.tensor([1., 2.]))
    >>> vjp_fn(tape.tensor([1., 1.]))
    (tensor([2., 4.]),)
    """
    lin = _Linearized(func, primals, None, has_aux, _VJP_API)

    def vjp_fn(cotangents, retain_graph=True, create_graph=None):
        if create_graph is None:
            create_graph = is_grad_enabled()
        flat_cot, cot_spec = _flatten(cotangents)
        if cot_spec != lin.out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure of "
                               f"outputs to the function. cotangents: {cot_spec.pprint()}, primal output: "
                               f"{lin.out_spec.pprint()}")
        return _unflatten(lin.pull(lin.phys_out, flat_cot, create_graph, retain_graph), lin.diff_spec)

    if has_aux:
        return lin.output, vjp_fn, lin.aux
    return lin.output, vjp_fn


def grad_and_value(func, argnums=0, has_aux=False):
    """A function returning (gradient, value) of `func`, whose output is a
    0-d Tensor, with respect to the arguments `argnums` (with `has_aux`,
    (gradient, (value, aux))), as torch.func.grad_and_value.

    Examples
    --------
    >>> import tape
    >>> g, value = tape.func.grad_and_value(lambda x: (x ** 2).sum())(tape.tensor([1., 2.]))
    >>> g, value
    (tensor([2., 4.]), tensor(5.))
    """
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with _Level() as level:
            diff = _tree_map(level.alias, _slice_argnums(args, argnums))
            output, aux = _split_aux(func(*_replace_args(args, diff, argnums), **kwargs),
                                     "grad_and_value(f)(*args)", has_aux)
            if not isinstance(output, Tensor):
                raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got "
                                   f"{type(output)}")
            if output.ndim != 0:
                raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                                   f"tensor with {output.ndim} dims. Maybe you wanted to use the vjp or jacrev "
                                   "APIs instead?")
            flat_diff, spec = _flatten(diff)
            # inside vmap, the samples' outputs summed (see _Level.alias)
            target = output.phys.sum() if isinstance(output, _batched.BatchedTensor) else output
            graph = level.reaches_outside((target,))
            grads = _gradients((target,), [_batched.physical(a) for a in flat_diff], create_graph=graph)
            if graph:
                grads = [level.unwrap(g) for g in grads]
            grads = [level.batched(g) for g in grads]
            value = output if graph else level.unwrap(output)
            result = _unflatten(grads, spec)
            if has_aux:
                return result, (value, level.unwrap_tree(aux))
            return result, value
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """The gradient of `func` (whose output is a 0-d Tensor) with respect to
    the arguments `argnums`, as a function (torch.func.grad): a Tensor, or a
    tuple of them for a tuple `argnums`, shaped as the arguments (pytrees
    too); with `has_aux`, (gradient, aux). Inputs need not require grad;
    the gradient requires grad only when an enclosing transform or the
    caller's graph needs it, so ``grad(grad(f))`` is the second derivative.

    Parameters
    ----------
    func : callable
    argnums : int or tuple of int
    has_aux : bool
        `func` returns (output, aux); aux is passed through, detached.

    Examples
    --------
    >>> import tape
    >>> x = tape.tensor(0.0)
    >>> tape.func.grad(tape.sin)(x)
    tensor(1.)
    >>> tape.func.grad(tape.func.grad(tape.sin))(x)
    tensor(0.)
    """
    inner = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = inner(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """(func(*primals), J v) [, aux]: the Jacobian-vector product of func at
    `primals` with `tangents`, as torch.func.jvp. Computed in reverse mode
    by the double-vjp trick (the VJP is linear in its cotangent u, so the
    gradient of <VJP(u), v> with respect to u is J v), which gives forward
    mode's results.

    Examples
    --------
    >>> import tape
    >>> out, tangent = tape.func.jvp(lambda x: x ** 2, (tape.tensor([1., 2.]),), (tape.tensor([1., 1.]),))
    >>> tangent
    tensor([2., 4.])
    """
    if not isinstance(primals, tuple):
        raise RuntimeError(f"{_JVP}: Expected primals to be a tuple. E.g. it should be valid to call f(*primals).")
    flat_primals, primals_spec = _flatten(primals)
    flat_tangents, tangents_spec = _flatten(tangents)
    if primals_spec != tangents_spec:
        raise RuntimeError(f"{_JVP}: Expected primals and tangents to have the same python structure. For "
                           "example, if primals is a tuple of 3 tensors, tangents also must be. Got primals "
                           f"with structure {primals_spec!r} and tangents with structure {tangents_spec!r}")
    for name, flat in (("primals", flat_primals), ("tangents", flat_tangents)):
        if not flat:
            raise RuntimeError(f"{_JVP}: Expected {name} to contain at least one Tensor.")
        for t in flat:
            if not isinstance(t, Tensor):
                raise RuntimeError(f"{_JVP}: Expected {name} to only contain Tensors, got {type(t)}")
    for p, t in zip(flat_primals, flat_tangents):
        _check_dual(p, t)
    with _Level() as level:
        aliases = [level.alias(p) for p in flat_primals]
        output, aux = _split_aux(func(*_unflatten(aliases, primals_spec)), _JVP, has_aux)
        flat_out, out_spec = _flatten(output)
        _check_tensor_outputs(flat_out, _JVP_API)
        tangents_out = _pushed(level, flat_out, aliases, flat_tangents, strict)
        primals_out = _unflatten([level.unwrap(o) for o in flat_out], out_spec)
        tangents_out = _unflatten(tangents_out, out_spec)
        if has_aux:
            return primals_out, tangents_out, level.unwrap_tree(aux)
        return primals_out, tangents_out


def _check_dual(primal, tangent):
    """What torch's make_dual checks of a primal and its tangent."""
    if not primal.is_floating_point():
        raise ValueError(f"Expected primal to be floating point or complex, but got: tape.{primal.dtype.name}")
    if tangent.shape != primal.shape:
        raise RuntimeError("Trying to set a forward gradient that has a different size than that of the original "
                           f"Tensor, this is not supported. Tensor is of size {list(primal.shape)} while the given "
                           f"forward gradient is of size {list(tangent.shape)}.")


def _pushed(level, flat_out, aliases, flat_tangents, strict):
    """J v for each output, by the double-vjp trick (see jvp), on the
    physical values inside vmap."""
    phys_out = [level.physical(o) for o in flat_out]
    aliases = [_batched.physical(a) for a in aliases]
    diff = [k for k, out in enumerate(phys_out) if out._rg and out.is_floating_point()]
    # the VJP is linear in these, so their value (zeros) does not matter
    u = [zeros_like(phys_out[k], requires_grad=True) for k in diff]
    level.own.extend(u)
    pushed = [None] * len(flat_out)
    if diff:
        vjps = _autograd([phys_out[k] for k in diff], aliases, u, create_graph=True, allow_unused=True)
        kept = [(g, level.physical(t)) for g, t in zip(vjps, flat_tangents) if g is not None and g._rg]
        if kept:
            graph = level.reaches_outside([g for g, _ in kept] + [t for _, t in kept])
            jv = _autograd([g for g, _ in kept], u, [t for _, t in kept], create_graph=graph, allow_unused=True)
            for k, g in zip(diff, jv):
                if g is not None:
                    pushed[k] = level.batched(level.unwrap(g) if graph else g)
    for k, out in enumerate(flat_out):
        if pushed[k] is None:
            if strict:
                raise RuntimeError("jvp(f, primals, tangents, strict=True): The output of f is independent of "
                                   "the inputs. This is not allowed with strict=True.")
            pushed[k] = level.batched(zeros_like(phys_out[k]))
    return pushed


def _chunk_size_checked(name, chunk_size):
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError(f"{name}: `chunk_size` should be greater than 0.")


def _jacobian(func, args, argnums, has_aux, api):
    """The Jacobian of func at args with respect to `argnums`, in reverse
    mode (one sweep per output element), in torch.func's structure: for
    each output (its pytree), for each differentiated argument (unpacked
    for an int argnums), a Tensor of shape output.shape + input.shape."""
    lin = _Linearized(func, args, argnums, has_aux, api)
    flat_primals, primals_spec = _flatten(_slice_argnums(args, argnums, as_tuple=True))
    create_graph = is_grad_enabled()
    per_output = []
    for out, phys in zip(lin.flat_out, lin.phys_out):
        if not out.is_floating_point():  # jacfwd's integer output: its tangents are zeros
            rows = [zeros(out.shape + p.shape, dtype=out.dtype) for p in flat_primals]
        else:
            rows = _jacobian_of(lin, out, phys, flat_primals, create_graph)
        jac = _unflatten(rows, primals_spec)
        per_output.append(jac[0] if isinstance(argnums, int) else jac)
    result = _unflatten(per_output, lin.out_spec)
    return (result, lin.aux) if has_aux else result


def _jacobian_of(lin, out, phys, flat_primals, create_graph):
    """The Jacobians of one output (`phys` its physical value) with respect
    to each flat primal; inside vmap, each sample's."""
    from ops import stack
    n = out.numel()
    if n == 0 or not phys._rg:
        return [zeros(out.shape + p.shape, dtype=p.dtype) for p in flat_primals]
    rows = [[] for _ in flat_primals]
    for k in range(n):
        seed = np.zeros(n, out.dtype)
        seed[k] = 1
        for row, g in zip(rows, lin.pull((phys,), (tensor(seed.reshape(out.shape)),), create_graph)):
            row.append(_batched.physical(g))
    nb = len(lin.level.levels)
    return [lin.level.batched(stack(row, nb).reshape(tuple(row[0].shape[:nb]) + out.shape + p.shape))
            for row, p in zip(rows, flat_primals)]


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """The Jacobian of `func` with respect to the arguments `argnums`, by
    reverse mode, as a function (torch.func.jacrev): for an output of shape
    (m...) and an input of shape (n...), a Tensor of shape (m..., n...);
    tuples (pytrees) for several outputs or a tuple `argnums`. `chunk_size`
    is checked and accepted; every chunk size gives the same numbers, one
    reverse sweep per output element.

    Examples
    --------
    >>> import tape
    >>> A = tape.tensor([[1., 2.], [3., 4.]])
    >>> tape.func.jacrev(lambda x: A @ x)(tape.tensor([5., 6.]))
    tensor([[1., 2.],
            [3., 4.]])
    """
    _chunk_size_checked("jacrev", chunk_size)

    @functools.wraps(func)
    def wrapper(*args):
        return _jacobian(func, args, argnums, has_aux, _VJP_API)
    return wrapper


_RANDOMNESS = ("error", "different", "same")


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian of `func` with respect to the arguments `argnums`, as a
    function (torch.func.jacfwd): the results, shapes and errors of
    forward mode, computed here by reverse mode (tape has no forward-mode
    AD), one sweep per output element. `randomness` is checked as
    torch.func's; func's random ops draw once, as in a single forward call.

    Examples
    --------
    >>> import tape
    >>> tape.func.jacfwd(tape.sin)(tape.tensor([0., 0.]))
    tensor([[1., 0.],
            [0., 1.]])
    """
    @functools.wraps(func)
    def wrapper(*args):
        flat_primals, _ = _flatten(_slice_argnums(args, argnums))
        for p in flat_primals:
            p.numel()  # as torch.func's jacfwd, a non-Tensor fails here
        for p in flat_primals:
            if not p.is_floating_point():
                raise ValueError(f"Expected primal to be floating point or complex, but got: tape.{p.dtype.name}")
        if randomness not in _RANDOMNESS:
            raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got "
                               f"{randomness}")
        return _jacobian(func, args, argnums, has_aux, _JVP_API)
    return wrapper


def hessian(func, argnums=0):
    """The Hessian of `func` with respect to the arguments `argnums`, as a
    function: ``jacfwd(jacrev(func, argnums), argnums)``, as torch.func.hessian
    (for an output of shape (m...) and an input of shape (n...), shape
    (m..., n..., n...)).

    Examples
    --------
    >>> import tape
    >>> tape.func.hessian(lambda x: (x ** 3).sum())(tape.tensor([1., 2.]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    return jacfwd(jacrev(func, argnums), argnums)


# -- vmap (Note [Batched tensors] in tape/_batched.py)

def _func_name(func):
    if hasattr(func, "__name__"):
        return func.__name__
    if isinstance(func, functools.partial):
        return f"functools.partial({_func_name(func.func)}, ...)"
    return repr(func)


def _broadcast_prefix(prefix, spec):
    """The leaves of `prefix` (a pytree prefix of the tree of `spec`), each
    repeated over the leaves of its subtree there; None if it is no prefix."""
    kids = _children(prefix)
    if kids is None:
        return [prefix] * spec.num_leaves
    context, children = kids
    if spec.type is not type(prefix) or spec.context != context or len(spec.children) != len(children):
        return None
    flat = []
    for child, child_spec in zip(children, spec.children):
        part = _broadcast_prefix(child, child_spec)
        if part is None:
            return None
        flat.extend(part)
    return flat


def _batch_inputs(func, in_dims, args):
    """(batch size, flat in_dims, flat args, args' spec), checked as torch.func.vmap checks them."""
    name = _func_name(func)
    if not isinstance(in_dims, (int, tuple)):
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int or a "
                         f"(potentially nested) tuple matching the structure of inputs, got: {type(in_dims)}.")
    if not args:
        raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are "
                         "trying to vmap over a function with no inputs. The latter is unsupported.")
    flat_args, args_spec = _flatten(args)
    flat_in_dims = _broadcast_prefix(in_dims, args_spec)
    if flat_in_dims is None:
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the "
                         f"structure of `inputs`. in_dims has structure {_flatten(in_dims)[1]!r} but inputs has "
                         f"structure {args_spec!r}.")
    for i, (arg, in_dim) in enumerate(zip(flat_args, flat_in_dims)):
        if not isinstance(in_dim, int) and in_dim is not None:
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={in_dim} for an input "
                             "but in_dim must be either an integer dimension or None.")
        if isinstance(in_dim, int) and not isinstance(arg, Tensor):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={in_dim} for an input "
                             f"but the input is of type {type(arg)}. We cannot vmap over non-Tensor arguments, "
                             "please use None as the respective in_dim")
        if in_dim is not None and not -arg.dim() <= in_dim < arg.dim():
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={in_dim} for some "
                             f"input, but that input is a Tensor of dimensionality {arg.dim()} so expected in_dim "
                             f"to satisfy -{arg.dim()} <= in_dim < {arg.dim()}.")
        if in_dim is not None and in_dim < 0:
            flat_in_dims[i] = in_dim % arg.dim()
    sizes = [arg.size(d) for d, arg in zip(flat_in_dims, flat_args) if d is not None]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(n != sizes[0] for n in sizes):
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{sizes} for the mapped dimension")
    return sizes[0], flat_in_dims, flat_args, args_spec


def _check_out_dims(func, out_dims):
    for d in _flatten(out_dims)[0]:
        if d is not None and not isinstance(d, int):
            raise ValueError(f"vmap({_func_name(func)}, ..., out_dims={out_dims}): `out_dims` must be an int, "
                             "None or a python collection of ints representing where in the outputs the vmapped "
                             "dimension should appear.")


def _unbatch_outputs(func, out, out_dims, level, batch_size):
    name = _func_name(func)
    flat_out, out_spec = _flatten(out)
    if isinstance(out, Tensor):
        flat_dims = list(out_dims) if isinstance(out_dims, tuple) and len(out_dims) == 1 else (
            [out_dims] if out_dims is None or isinstance(out_dims, int) else None)
    else:
        flat_dims = _broadcast_prefix(out_dims, out_spec)
    if flat_dims is None:
        raise ValueError(f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with the "
                         f"structure of `outputs`. out_dims has structure {_flatten(out_dims)[1]!r} but outputs "
                         f"has structure {out_spec!r}.")
    result = []
    for t, d in zip(flat_out, flat_dims):
        if d is None:
            if isinstance(t, _batched.BatchedTensor) and level in t.levels:
                raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
            result.append(t)
            continue
        if not isinstance(t, Tensor):
            raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(t)}. Did you "
                             "mean to set out_dims= to None for output?")
        result.append(_batched.remove_batch_dim(t, level, batch_size, d))
    return _unflatten(result, out_spec)


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """`func` mapped over a dim of its inputs, as torch.func.vmap: the batch
    runs as batched array ops (one tape op per op of func, for all samples),
    not a Python loop. Inside, func sees tensors of one sample's shape
    (x.sum() sums one sample, x @ w with a vector x is a dot product).

    Parameters
    ----------
    func : callable
    in_dims : int, None, or a tuple (pytree prefix of the arguments)
        The dim of each input that is mapped over; None for an input that
        every sample shares.
    out_dims : int, None or a pytree prefix of the outputs
        Where the mapped dim goes in each output.
    randomness : str
        Checked as torch.func's ('error', 'different', 'same'). tape's
        random functions know nothing of vmap: inside it they draw one
        value for all samples, as 'same'.
    chunk_size : int or None
        Checked and accepted: every chunk size gives the same results, and
        the whole batch runs at once.

    Notes
    -----
    Inside vmap, the Tensor methods and operators have batching rules
    (elementwise ops, reductions over dims, the matmul family, shape ops,
    indexing), and so do the tape functions of the same names and
    ``tape.stack``, ``cat``, ``where`` and ``einsum`` (Note [Batched tape
    functions]); in-place ops and the functions without a rule raise a
    RuntimeError rather than compute a wrong result. The other
    transforms work inside vmap (``vmap(grad(f))`` gives per-sample
    gradients, ``vmap(jacrev(f))`` per-sample Jacobians) and around it.

    Examples
    --------
    >>> import tape
    >>> w = tape.tensor([1., 2.])
    >>> x = tape.tensor([[1., 1.], [2., 0.], [0., 3.]])
    >>> tape.func.vmap(lambda x: x @ w)(x)
    tensor([3., 2., 6.])
    >>> tape.func.vmap(tape.func.grad(lambda w, x: (x @ w) ** 2), in_dims=(None, 0))(w, x)
    tensor([[ 6.,  6.],
            [ 8.,  0.],
            [ 0., 36.]])
    """
    if randomness not in _RANDOMNESS:
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got "
                           f"{randomness}")
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size > 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        _check_out_dims(func, out_dims)
        batch_size, flat_in_dims, flat_args, args_spec = _batch_inputs(func, in_dims, args)
        level = _batched.push_level(batch_size)
        try:
            batched = [a if d is None else _batched.add_batch_dim(a, d, level)
                       for a, d in zip(flat_args, flat_in_dims)]
            out = func(*_unflatten(batched, args_spec), **kwargs)
            return _unbatch_outputs(func, out, out_dims, level, batch_size)
        finally:
            _batched.pop_level()
    return wrapped
