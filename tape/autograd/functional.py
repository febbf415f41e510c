"""Higher-level derivatives of functions, as torch.autograd.functional:
jacobian, hessian, vjp, jvp, hvp and vhp, with PyTorch's signatures,
results and error texts.

Each is built from autograd.grad on a fresh graph of `func`. The Jacobian
takes one reverse sweep per output element (``vectorize=True`` is accepted
and gives the same numbers by the same sweeps). jvp and hvp use PyTorch's
double-backward trick: the VJP is linear in its cotangent u, so the gradient
of <VJP(u), v> with respect to u is the forward-mode product.
"""
from .._engine import _as_list, _size, grad as _grad
from .._factories import zeros_like
from .._grad_mode import enable_grad, is_grad_enabled, set_grad_enabled
from .._tensor import Tensor

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _as_tuple(inp, arg_name, fn_name):
    """(whether inp was a tuple, inp as a tuple of Tensors)."""
    is_tuple = isinstance(inp, tuple)
    if not is_tuple:
        inp = (inp,)
    for i, el in enumerate(inp):
        if not isinstance(el, Tensor):
            if is_tuple:
                raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                                f"Tensors but the value at index {i} has type {type(el)}.")
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                            f"Tensors but the given {arg_name} has type {type(el)}.")
    return is_tuple, inp


def _tuple_postprocess(res, to_unpack):
    """Undo _as_tuple: to_unpack is one flag, or (outputs', inputs') for a
    tuple of tuples."""
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _grad_preprocess(inputs, create_graph, need_graph):
    """New Tensors for the inputs, so that func's graph starts from them: a
    view keeps the caller's graph for create_graph, a detached copy cuts it."""
    return tuple(inp.view_as(inp) if create_graph and inp.requires_grad
                 else inp.detach().requires_grad_(need_graph) for inp in inputs)


def _grad_postprocess(inputs, create_graph):
    if isinstance(inputs[0], Tensor):
        return inputs if create_graph else tuple(inp.detach() for inp in inputs)
    return tuple(_grad_postprocess(inp, create_graph) for inp in inputs)


def _validate_v(v, other, is_other_tuple):
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if el_v.size() != el_other.size():
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(f"{prepend}v has invalid size: should be {_size(el_other.shape)} but got "
                               f"{_size(el_v.shape)}.")


_INDEPENDENT = {
    "hessian": ("The hessian of the user-provided function with respect to input {i} is independent of "
                "the input. This is not allowed in strict mode. You should ensure that your function is "
                "thrice differentiable and that the hessian depends on the inputs."),
    "jacobian": ("While computing the hessian, found that the jacobian of the user-provided function with "
                 "respect to input {i} is independent of the input. This is not allowed in strict mode. You "
                 "should ensure that your function is twice differentiable and that the jacobian depends on "
                 "the inputs (this would be violated by a linear function for example)."),
    "grad_inputs": ("The gradient with respect to input {i} is independent of the inputs of the "
                    "user-provided function. This is not allowed in strict mode."),
    "outputs": ("Output {i} of the user-provided function does not require gradients. The outputs must be "
                "computed in a differentiable manner from the input when running in strict mode."),
}


def _check_requires_grad(inputs, input_type, strict):
    if not strict:
        return
    for i, inp in enumerate(inputs):
        if inp is None:
            raise RuntimeError(f"The output of the user-provided function is independent of input {i}. "
                               "This is not allowed in strict mode.")
        if not inp.requires_grad:
            raise RuntimeError(_INDEPENDENT[input_type].format(i=i))


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """autograd.grad of the outputs that require grad (None for every input
    when none does), unused inputs giving None."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    kept = [(out, g) for out, g in zip(outputs, grad_outputs) if out is not None and out.requires_grad]
    if not kept:
        return (None,) * len(inputs)
    return _grad([out for out, _ in kept], inputs, [g for _, g in kept], allow_unused=True,
                 create_graph=create_graph, retain_graph=retain_graph)


_ZERO_IN_STRICT = {
    "back": "The output of the user-provided function is independent of input {i}. This is not allowed in "
            "strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the grad_outputs "
                  "when using the double backward trick to compute forward mode gradients. This is not "
                  "allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. This is not "
                   "allowed in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry {i} in the "
                         "grad_jacobian. This is not allowed in strict mode as it prevents from using the double "
                         "backward trick to replace forward mode AD.",
}


def batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads):
    """autograd.grad with is_grads_batched=True: the first dimension of each
    grad_output is a batch, one backward for each of its slices (PyTorch
    vmaps one backward over it; the gradients are the same), stacked. An
    input no slice reached is None, or materialized unbatched, as PyTorch's."""
    from ops import stack
    outputs = _as_list(outputs)
    grad_outputs = [None] * len(outputs) if grad_outputs is None else _as_list(grad_outputs)
    if len(grad_outputs) != len(outputs) or any(not isinstance(g, Tensor) for g in grad_outputs):
        raise RuntimeError("grad can be implicitly created only for scalar outputs")
    for i, (g, out) in enumerate(zip(grad_outputs, outputs)):
        if g.ndim == 0 or tuple(g.shape[1:]) != tuple(out.shape):
            raise RuntimeError(
                "If `is_grads_batched=True`, we interpret the first dimension of each grad_output as the batch "
                "dimension. The sizes of the remaining dimensions are expected to match the shape of "
                f"corresponding output, but a mismatch was detected: grad_output[{i}] has a shape of "
                f"{list(g.shape[1:])} and output[{i}] has a shape of {list(out.shape)}. If you only want some "
                "tensors in `grad_output` to be considered batched, consider using vmap.")
    sizes = {g.shape[0] for g in grad_outputs}
    if len(sizes) > 1:
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{[g.shape[0] for g in grad_outputs]} for the mapped dimension")
    (n,) = sizes
    if n == 0:
        raise IndexError("index 0 is out of bounds for dimension 0 with size 0")
    keep = create_graph if retain_graph is None else retain_graph
    per_slice = [_grad(outputs, inputs, [g[k] for g in grad_outputs], retain_graph=keep or k < n - 1,
                       create_graph=create_graph, allow_unused=True) for k in range(n)]
    result = []
    for i, (t, grads) in enumerate(zip(_as_list(inputs), zip(*per_slice))):
        if all(g is None for g in grads):
            if not (allow_unused or materialize_grads):
                raise RuntimeError(f"The differentiated Tensor at index {i} appears to not have been used in the "
                                   "graph. Set allow_unused=True if this is the desired behavior.")
            result.append(zeros_like(t, requires_grad=bool(create_graph)) if materialize_grads else None)
        else:
            result.append(stack([zeros_like(t) if g is None else g for g in grads], 0))
    return tuple(result)


def _fill_in_zeros(grads, refs, strict, create_graph, stage):
    """grads with each None replaced by zeros shaped as its ref (an error
    in strict mode)."""
    res = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(_ZERO_IN_STRICT[stage].format(i=i))
            g = zeros_like(refs[i])
        elif strict and create_graph and not g.requires_grad:
            of = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(f"The {of} of the user-provided function is independent of input {i}. This is "
                               "not allowed in strict mode when create_graph=True.")
        res.append(g)
    return tuple(res)


def _single_tensor_v(v, against, is_tuple, fn_name, what, create_graph):
    """v preprocessed and checked against `against`, or None where it may be
    left out (one single-element Tensor)."""
    if v is not None:
        _, v = _as_tuple(v, "v", fn_name)
        v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
        _validate_v(v, against, is_tuple)
        return v
    if len(against) != 1 or against[0].nelement() != 1:
        raise RuntimeError(f"The vector v can only be None if the {what} a single Tensor with a single "
                           "element.")
    return None


def _prepared(inputs, fn_name, create_graph):
    """(whether inputs was a tuple, fresh inputs for func's graph)."""
    is_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    return is_tuple, _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)


def _called(func, inputs, fn_name, strict):
    """(whether func returned a tuple, its outputs as a tuple)."""
    is_tuple, outputs = _as_tuple(func(*inputs), "outputs of the user-provided function", fn_name)
    _check_requires_grad(outputs, "outputs", strict=strict)
    return is_tuple, outputs


def _returned(outputs, is_outputs_tuple, result, is_result_tuple, create_graph):
    return (_tuple_postprocess(_grad_postprocess(outputs, create_graph), is_outputs_tuple),
            _tuple_postprocess(_grad_postprocess(result, create_graph), is_result_tuple))


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product at `inputs`.

    >>> import tape
    >>> vjp(lambda x: x ** 2, tape.tensor([1., 2.]), tape.tensor([1., 1.]))[1]
    tensor([2., 4.])
    """
    with enable_grad():
        is_inputs_tuple, inputs = _prepared(inputs, "vjp", create_graph)
        is_outputs_tuple, outputs = _called(func, inputs, "vjp", strict)
        v = _single_tensor_v(v, outputs, is_outputs_tuple, "vjp", "user-provided function returns",
                             create_graph)
        with set_grad_enabled(create_graph or is_grad_enabled()):
            grad_res = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
            result = _fill_in_zeros(grad_res, inputs, strict, create_graph, "back")
    return _returned(outputs, is_outputs_tuple, result, is_inputs_tuple, create_graph)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product at `inputs`.

    >>> import tape
    >>> jvp(lambda x: x ** 2, tape.tensor([1., 2.]), tape.tensor([1., 1.]))[1]
    tensor([2., 4.])
    """
    with enable_grad():
        is_inputs_tuple, inputs = _prepared(inputs, "jvp", create_graph)
        v = _single_tensor_v(v, inputs, is_inputs_tuple, "jvp", "input to the user-provided function is",
                             create_graph)
        is_outputs_tuple, outputs = _called(func, inputs, "jvp", strict)
        # the VJP is linear in these, so their value (zeros) does not matter
        grad_outputs = tuple(zeros_like(out, requires_grad=True) for out in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
        with set_grad_enabled(create_graph or is_grad_enabled()):
            grad_res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
            result = _fill_in_zeros(grad_res, outputs, strict, create_graph, "back_trick")
    return _returned(outputs, is_outputs_tuple, result, is_outputs_tuple, create_graph)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of func at `inputs`: for output i and input j, a Tensor of
    shape output_i.shape + input_j.shape (unpacked where func or inputs are
    not tuples).

    >>> import tape
    >>> jacobian(lambda x: x ** 2, tape.tensor([1., 2.]))
    tensor([[2., 0.],
            [0., 4.]])
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
                             'function has linear dependence on the inputs, the strategy "forward-mode" may be '
                             'faster')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError("torch.autograd.functional.jacobian: `create_graph=True` and "
                                      "`strategy=\"forward-mode\"` are not supported together (yet). Please "
                                      "either set `create_graph=False` or make sure that `strategy=\"reverse-mode\"`.")
        if not vectorize:
            # PyTorch's text, its missing space too
            raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
                                      "only implemented for `vectorize=True`.")
    from ops import stack
    with enable_grad():
        is_inputs_tuple, inputs = _prepared(inputs, "jacobian", create_graph)
        is_outputs_tuple, outputs = _called(func, inputs, "jacobian", strict)
        if vectorize and strict:
            raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
                               "supported together. Please either set `strict=False` or `vectorize=False`.")
        result = []
        for i, out in enumerate(outputs):
            rows = [[] for _ in inputs]
            flat = out.reshape(-1)
            for j in range(out.nelement()):
                vj = _autograd_grad((flat[j],), inputs, retain_graph=True, create_graph=create_graph)
                for k, (row, g, inp) in enumerate(zip(rows, vj, inputs)):
                    if g is None:
                        if strict:
                            raise RuntimeError(f"Output {i} of the user-provided function is independent of "
                                               f"input {k}. This is not allowed in strict mode.")
                        g = zeros_like(inp)
                    elif strict and create_graph and not g.requires_grad:
                        raise RuntimeError(f"The jacobian of the user-provided function is independent of "
                                           f"input {i}. This is not allowed in strict mode when "
                                           "create_graph=True.")
                    row.append(g)
            result.append(tuple(stack(row, 0).view(tuple(out.shape) + tuple(inp.shape))
                                for row, inp in zip(rows, inputs)))
        result = _grad_postprocess(tuple(result), create_graph)
    return _tuple_postprocess(result, (is_outputs_tuple, is_inputs_tuple))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a function of one element at `inputs`: for inputs i and
    j, a Tensor of shape input_i.shape + input_j.shape.

    >>> import tape
    >>> hessian(lambda x: (x ** 3).sum(), tape.tensor([1., 2.]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def single_output(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        if is_out_tuple or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.nelement() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should contain a single "
                               "element")
        return out.squeeze()

    def jac_func(*inp):
        if outer_jacobian_strategy == "forward-mode":
            inp = tuple(t.requires_grad_(True) for t in inp)
        jac = jacobian(single_output, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _hessian_product(name, func, inputs, v, create_graph, strict, trick):
    with enable_grad():
        is_inputs_tuple, inputs = _prepared(inputs, name, create_graph)
        v = _single_tensor_v(v, inputs, is_inputs_tuple, name, "input to the user-provided function is",
                             create_graph)
        is_outputs_tuple, outputs = _called(func, inputs, name, strict)
        if is_outputs_tuple or not isinstance(outputs[0], Tensor):
            raise RuntimeError(f"The function given to {name} should return a single Tensor")
        if outputs[0].nelement() != 1:
            raise RuntimeError(f"The Tensor returned by the function given to {name} should contain a single "
                               "element")
        jac = _autograd_grad(outputs, inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        if trick:
            # H v as the gradient of (v^T H) u in u, which is linear
            grad_jac = tuple(zeros_like(inp, requires_grad=True) for inp in inputs)
            double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
            _check_requires_grad(jac, "hessian", strict=strict)
    with set_grad_enabled(create_graph or is_grad_enabled()):
        if trick:
            grad_res = _autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
        else:
            grad_res = _autograd_grad(jac, inputs, v, create_graph=create_graph)
        result = _fill_in_zeros(grad_res, inputs, strict, create_graph,
                                "double_back_trick" if trick else "double_back")
    return _returned(outputs, is_outputs_tuple, result, is_inputs_tuple, create_graph)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H): the vector-Hessian product of a function of one
    element."""
    return _hessian_product("vhp", func, inputs, v, create_graph, strict, trick=False)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v): the Hessian-vector product of a function of one
    element, by the double-backward trick (equal to vhp where H is symmetric)."""
    return _hessian_product("hvp", func, inputs, v, create_graph, strict, trick=True)
