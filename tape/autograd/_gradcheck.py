"""gradcheck and gradgradcheck: analytical Jacobians (one backward per output
element) against central finite differences, as torch.autograd.gradcheck.
"""
import numpy as np

from .._engine import grad
from .._tensor import Tensor, new_tensor, wrap_value

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Raised by gradcheck when the Jacobians differ (as in PyTorch)."""


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _outputs(fn, inputs):
    return tuple(o for o in _as_tuple(fn(*inputs)) if isinstance(o, Tensor))


def _flat(t):
    return np.asarray(t._array(), np.float64).reshape(-1)


def _copy(t, value=None):
    value = np.array(t._array(), copy=True) if value is None else value
    return new_tensor(wrap_value(value), t.requires_grad)


def _numerical(fn, inputs, wrt, eps):
    """J[k][i]: d out_k / d inputs[wrt[i]], shape (numel_in, numel_out), by central differences."""
    # perturbed copies keep requires_grad, as fn may itself differentiate
    # (gradgradcheck's VJP does)
    base = [_copy(t) if isinstance(t, Tensor) else t for t in inputs]
    jac = None
    for i, idx in enumerate(wrt):
        x = base[idx]
        n = x.numel()
        columns = []
        for j in range(n):
            original = x._array().reshape(-1)[j]
            values = []
            for step in (eps, -eps):
                perturbed = np.array(x._array(), copy=True)
                perturbed.reshape(-1)[j] = original + step
                args = list(base)
                args[idx] = _copy(x, perturbed)
                values.append([_flat(o) for o in _outputs(fn, args)])
            columns.append([(p - m) / (2 * eps) for p, m in zip(*values)])
        if jac is None:
            jac = [[None] * len(wrt) for _ in columns[0]] if columns else []
        for k in range(len(jac)):
            jac[k][i] = np.array([col[k] for col in columns]).reshape(n, -1)
    return jac


def _analytical(fn, inputs, wrt):
    outs = _outputs(fn, inputs)
    jac = []
    for out in outs:
        per_input = [np.zeros((inputs[idx].numel(), out.numel())) for idx in wrt]
        if out.requires_grad:
            for m in range(out.numel()):
                seed = np.zeros(out.numel(), out.dtype)
                seed[m] = 1
                grads = grad(out, [inputs[idx] for idx in wrt],
                             grad_outputs=new_tensor(wrap_value(seed.reshape(out.shape))),
                             retain_graph=True, allow_unused=True)
                for i, g in enumerate(grads):
                    if g is not None:
                        per_input[i][:, m] = _flat(g)
        jac.append(per_input)
    return jac


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, fast_mode=False):
    """Check the gradients of `func` at `inputs` against finite differences.

    >>> import tape
    >>> x = tape.tensor([0.5, 1.5], requires_grad=True)
    >>> tape.autograd.gradcheck(lambda t: (t * t).sin(), (x,))
    True
    """
    inputs = _as_tuple(inputs)
    wrt = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not wrt:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none "
                         "of them have requires_grad=True.")
    numerical = _numerical(func, inputs, wrt, eps)
    analytical = _analytical(func, inputs, wrt)
    for k, (num_k, ana_k) in enumerate(zip(numerical, analytical)):
        for i, (num, ana) in enumerate(zip(num_k, ana_k)):
            if not np.allclose(ana, num, rtol=rtol, atol=atol, equal_nan=True):
                if not raise_exception:
                    return False
                raise GradcheckError(f"Jacobian mismatch for output {k} with respect to input {wrt[i]},"
                                     f"\nnumerical:{num}\nanalytical:{ana}\n")
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, fast_mode=False):
    """Check second derivatives: gradcheck of the VJP `v -> J(inputs)^T v`."""
    inputs = _as_tuple(inputs)
    wrt = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            new_tensor(wrap_value(rng.standard_normal(o.shape).astype(o.dtype)), requires_grad=True)
            for o in _outputs(func, inputs) if o.requires_grad)
    grad_outputs = _as_tuple(grad_outputs)
    n = len(inputs)

    def vjp(*args):
        outs = [o for o in _outputs(func, args[:n]) if o.requires_grad]
        diff = [args[i] for i in wrt]
        gs = grad(outs, diff, grad_outputs=list(args[n:]), create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(vjp, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
