"""Errors of the core (API.md "Errors"): each raises PyTorch's exception type
with the quoted text, and leaves the tape working: the next forward and
backward still give the right numbers.
"""
import re

import numpy as np
import pytest

import tape
from tape import autograd


def assert_tape_still_works():
    """A fresh graph of 0-d and 1-d values backprops to the known gradients,
    first order (native sweep) and second order (re-taped sweep)."""
    s = tape.tensor(2.0, requires_grad=True)
    v = tape.tensor([1.0, 2.0], requires_grad=True)

    (s * s * s + (v * v * v).sum() * s).backward()
    ds, = autograd.grad(s ** 3, s, create_graph=True)
    d2s, = autograd.grad(ds, s)

    # d/ds = 3 s^2 + sum(v^3) = 21, d/dv = 3 v^2 s = [6, 24], d2/ds2 (s^3) = 6 s = 12
    assert [s.grad.item(), *v.grad.tolist(), d2s.item()] == pytest.approx([21.0, 6.0, 24.0, 12.0])


def test_helper_passes_on_a_clean_tape():
    assert_tape_still_works()


# -- backward ----------------------------------------------------------------------

def test_non_scalar_backward_without_gradient():
    x = tape.tensor([1.0, 2.0], requires_grad=True)

    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        (x * x).backward()
    assert_tape_still_works()


SAVING_GRAPHS = [
    pytest.param(lambda x: (x * x).sum(), [1.0, 2.0], id="(x * x).sum()"),
    pytest.param(lambda x: x.exp().sum(), [1.0, 2.0], id="x.exp().sum()"),
    pytest.param(lambda x: x * x, 2.0, id="0-d x * x"),
    pytest.param(lambda x: x.exp(), 2.0, id="0-d x.exp()"),
]


@pytest.mark.parametrize("build, value", SAVING_GRAPHS)
def test_second_backward_through_a_freed_graph(build, value):
    x = tape.tensor(value, requires_grad=True)
    out = build(x)
    out.backward()

    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        out.backward()
    assert_tape_still_works()


@pytest.mark.parametrize("build, value", SAVING_GRAPHS)
def test_second_autograd_grad_through_a_freed_graph(build, value):
    x = tape.tensor(value, requires_grad=True)
    out = build(x)
    autograd.grad(out, x)

    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        autograd.grad(out, x)
    assert_tape_still_works()


def test_backward_of_a_tensor_that_does_not_require_grad():
    c = tape.tensor([1.0, 2.0])

    with pytest.raises(RuntimeError,
                       match="element 0 of tensors does not require grad and does not have a grad_fn"):
        c.sum().backward()
    assert_tape_still_works()


def test_autograd_grad_of_an_output_that_does_not_require_grad():
    x = tape.tensor(1.0, requires_grad=True)
    c = tape.tensor(1.0)

    with pytest.raises(RuntimeError,
                       match="element 0 of tensors does not require grad and does not have a grad_fn"):
        autograd.grad(c * 2, x)
    assert_tape_still_works()


def test_autograd_grad_of_an_unused_input():
    a = tape.tensor(2.0, requires_grad=True)
    b = tape.tensor(5.0, requires_grad=True)

    with pytest.raises(RuntimeError, match="The differentiated Tensor at index 1 appears to not have "
                                           "been used in the graph"):
        autograd.grad(a * a, [a, b])
    assert_tape_still_works()


# -- in-place -----------------------------------------------------------------------

MODIFIED_IN_PLACE = re.escape("one of the variables needed for gradient computation has been "
                              "modified by an inplace operation")


def test_issue_example_saved_output_modified_in_place():
    a = tape.ones(3, requires_grad=True)
    b = a.exp()
    b.add_(1)

    with pytest.raises(RuntimeError, match=MODIFIED_IN_PLACE):
        b.sum().backward()
    assert_tape_still_works()


def test_saved_input_modified_in_place():
    a = tape.ones(3, requires_grad=True)
    b = a * 1
    c = b * b
    b.add_(1)

    with pytest.raises(RuntimeError, match=MODIFIED_IN_PLACE):
        c.sum().backward()
    assert_tape_still_works()


def test_saved_0d_output_modified_in_place():
    a = tape.tensor(1.0, requires_grad=True)
    b = a.exp()
    b.add_(1)

    with pytest.raises(RuntimeError, match=MODIFIED_IN_PLACE):
        b.backward()
    assert_tape_still_works()


@pytest.mark.parametrize("use", [lambda a, c: a * c, lambda a, c: a / c, lambda a, c: c @ a,
                                 lambda a, c: a ** c])
def test_constant_saved_for_backward_then_modified_in_place(use):
    a = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    c = tape.tensor([1.0, 2.0, 3.0])
    out = use(a, c)
    c.add_(1.0)

    with pytest.raises(RuntimeError, match="modified by an inplace operation: \\[tape.DoubleTensor \\[3\\]\\] is at version 1; "
                                           "expected version 0 instead"):
        out.sum().backward()
    assert_tape_still_works()


@pytest.mark.parametrize("constant", [lambda: tape.tensor(2.0), lambda: tape.tensor([2.0]),
                                      lambda: tape.tensor([2.0, 3.0])[0]])
@pytest.mark.parametrize("x", [lambda: tape.ones(3, requires_grad=True),
                               lambda: tape.tensor(1.0, requires_grad=True)])
def test_one_element_constant_saved_then_modified_in_place(constant, x):
    # as for larger constants: a one-element one is a row of the graph, not a
    # number copied into it, so the change is caught (PyTorch raises too)
    w, c = x(), constant()
    out = (w * c).sum()
    c.mul_(2.0)

    with pytest.raises(RuntimeError, match=MODIFIED_IN_PLACE):
        out.backward()
    assert_tape_still_works()


def test_one_element_constant_modified_where_no_partial_reads_it():
    w, c = tape.ones(3, requires_grad=True), tape.tensor(2.0)
    out = (w + c).sum()
    c.mul_(2.0)

    out.backward()

    assert w.grad.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("write", [lambda x: x.add_(1), lambda x: x[:, 1:].sub_(1), lambda x: x.mul_(x)])
def test_in_place_on_an_expanded_tensor(write):
    x = tape.zeros(3).expand(2, 3)

    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers "
                                           "to a single memory location"):
        write(x)
    assert x._version == 0 and x.tolist() == [[0.0] * 3] * 2
    assert_tape_still_works()


def test_a_fill_or_a_write_of_one_row_of_an_expanded_tensor_is_allowed():
    # torch 2.13: zero_ writes one value everywhere, x[0] has no repeated element
    x = tape.ones(3).expand(2, 3)
    x.zero_()
    x[0] = 2.0
    assert x._version == 2 and x.tolist() == [[2.0] * 3] * 2


@pytest.mark.parametrize("x", [lambda: tape.tensor([1.0, 2.0], requires_grad=True),
                               lambda: tape.tensor(1.0, requires_grad=True)])
def test_grad_saved_by_a_graph_then_accumulated_into(x):
    # accumulation changes .grad in place, as in PyTorch: a graph that saved
    # it raises rather than read the new values
    x, w = x(), tape.tensor(3.0, requires_grad=True)
    (x * x).sum().backward()
    penalty = (w * x.grad).sum()
    (x * x).sum().backward()

    with pytest.raises(RuntimeError, match=MODIFIED_IN_PLACE):
        penalty.backward()
    (w * x.grad).sum().backward()  # saved after the change: fine
    assert w.grad.item() == float(x.grad.sum().item())
    assert_tape_still_works()


def test_quotient_changed_in_place_still_backprops():
    # division saves its operands, not its result, as in PyTorch
    a = tape.tensor([1.0, 2.0], requires_grad=True)
    w = tape.tensor([2.0, 4.0], requires_grad=True)
    q = a / w
    q.add_(1.0)

    q.sum().backward()

    assert (a.grad.tolist(), w.grad.tolist()) == ([0.5, 0.25], [-0.25, -0.125])


def test_relu_input_changed_in_place_still_backprops():
    # relu saves its result, not its input, as in PyTorch
    a = tape.tensor([1.0, -2.0], requires_grad=True)
    h = a * 1.0
    y = h.relu()
    h.add_(5.0)

    y.sum().backward()

    assert a.grad.tolist() == [1.0, 0.0]


def test_leaf_that_was_modified_in_place_still_backprops_after_the_error():
    a = tape.ones(3, requires_grad=True)
    b = a.exp()
    b.add_(1)
    with pytest.raises(RuntimeError, match=MODIFIED_IN_PLACE):
        b.sum().backward()

    (a * 2).sum().backward()

    assert a.grad.tolist() == [2.0, 2.0, 2.0]


LEAF_IN_PLACE = [
    pytest.param(lambda t: t.add_(1.0), id="add_"),
    pytest.param(lambda t: t.mul_(2.0), id="mul_"),
    pytest.param(lambda t: t.zero_(), id="zero_"),
    pytest.param(lambda t: t.fill_(3.0), id="fill_"),
    pytest.param(lambda t: t.__iadd__(1.0), id="+="),
]


@pytest.mark.parametrize("value", [1.0, [1.0, 2.0]], ids=["0-d", "1-d"])
@pytest.mark.parametrize("op", LEAF_IN_PLACE)
def test_in_place_on_a_leaf_that_requires_grad(op, value):
    leaf = tape.tensor(value, requires_grad=True)

    with pytest.raises(RuntimeError, match=re.escape(
            "a leaf Variable that requires grad is being used in an in-place operation.")):
        op(leaf)
    assert_tape_still_works()


def test_leaf_refused_in_place_keeps_its_value():
    leaf = tape.tensor([1.0, 2.0], requires_grad=True)

    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        leaf.add_(1.0)

    assert leaf.tolist() == [1.0, 2.0]


# -- dtypes ------------------------------------------------------------------------

def test_integer_tensor_cannot_require_grad_at_creation():
    with pytest.raises(RuntimeError, match="Only Tensors of floating point"):
        tape.tensor([1, 2], requires_grad=True)
    assert_tape_still_works()


def test_integer_mean_names_the_dtype_as_pytorch_does():
    with pytest.raises(RuntimeError, match="floating point or complex dtype. Got: Long"):
        tape.tensor([1, 2]).mean()
    assert_tape_still_works()


def test_integers_to_negative_integer_powers():
    # a number exponent is refused; a tensor one follows PyTorch's integer rule
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed."):
        tape.tensor([2, 3]) ** -1
    base = tape.tensor([2, 3, 1, -1, -1, 0])
    assert (base ** tape.tensor([-1, 2, -3, -3, -2, 2])).tolist() == [0, 9, 1, -1, 1, 0]
    assert (2 ** tape.tensor([-1, 3])).tolist() == [0, 8]
    assert_tape_still_works()


def test_integer_factory_cannot_require_grad():
    with pytest.raises(RuntimeError, match="Only Tensors of floating point"):
        tape.zeros(2, dtype=tape.int64, requires_grad=True)
    assert_tape_still_works()


def test_integer_tensor_cannot_require_grad_in_place():
    i = tape.tensor([1, 2])

    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        i.requires_grad_()
    assert_tape_still_works()


@pytest.mark.parametrize("build", [lambda x: (x.exp() * x).sum(), lambda x: x.exp().sin().sum(),
                                   lambda x: (x.tanh() * x).sum()])
def test_grad_of_a_gradient_whose_forward_graph_was_freed(build):
    # create_graph without retain_graph frees the forward's saved values, which
    # the gradient's own graph reaches back into
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    (g,) = autograd.grad(build(x), x, create_graph=True, retain_graph=False)

    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        autograd.grad(g.sum(), x)
    assert_tape_still_works()


# -- shapes ------------------------------------------------------------------------

BROADCAST_MISMATCH = re.escape(
    "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 0")
# PyTorch names the last dimension that does not match
LAST_MISMATCH = re.escape(
    "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1")


def test_broadcast_shape_mismatch():
    with pytest.raises(RuntimeError, match=BROADCAST_MISMATCH):
        tape.ones(3) + tape.ones(4)
    assert_tape_still_works()


def test_broadcast_shape_mismatch_names_the_last_dimension():
    with pytest.raises(RuntimeError, match=LAST_MISMATCH):
        tape.zeros(2, 3) * tape.zeros(3, 2)
    assert_tape_still_works()


def test_broadcast_shape_mismatch_while_recording():
    x = tape.ones(3, requires_grad=True)

    with pytest.raises(RuntimeError, match=BROADCAST_MISMATCH):
        x * tape.ones(4, requires_grad=True)
    assert_tape_still_works()


def test_mm_shape_mismatch():
    a = tape.ones(2, 3, requires_grad=True)

    with pytest.raises(RuntimeError, match=re.escape("mat1 and mat2 shapes cannot be multiplied "
                                                     "(2x3 and 4x2)")):
        a.mm(tape.ones(4, 2))
    assert_tape_still_works()


def test_reshape_to_an_invalid_size():
    a = tape.ones(2, 3, requires_grad=True)

    with pytest.raises(RuntimeError, match=re.escape("shape '[4, 2]' is invalid for input of size 6")):
        a.reshape(4, 2)
    assert_tape_still_works()


def test_inputs_of_a_failed_op_still_backprop():
    x = tape.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=BROADCAST_MISMATCH):
        x * tape.ones(4)

    (x * x).sum().backward()

    assert x.grad.tolist() == [2.0, 4.0, 6.0]


@pytest.mark.parametrize("call, error, message", [
    (lambda: tape.ones(2, 2) @ tape.ones(2, 2, dtype=tape.float32), RuntimeError,
     "expected m1 and m2 to have the same dtype, but got: double != float"),
    (lambda: tape.ones(2, 2).mm(tape.ones(2, 2, dtype=tape.int64)), RuntimeError,
     "expected m1 and m2 to have the same dtype, but got: double != long int"),
    (lambda: tape.ones(2).dot(tape.ones(2, dtype=tape.float32)), RuntimeError,
     "dot : expected both vectors to have same dtype, but found Double and Float"),
    (lambda: tape.ones(2, 2).mv(tape.ones(2, dtype=tape.float32)), RuntimeError,
     "addmv input tensors must have the same dtype, but got Float, Double, and Float"),
    (lambda: tape.ones(5, 2, 3) @ tape.ones(5, 4, 4), RuntimeError,
     "Expected size for first two dimensions of batch2 tensor to be: [5, 3] but got: [5, 4]."),
    (lambda: tape.tensor(1.0).transpose(0, 1), IndexError,
     "Dimension out of range (expected to be in range of [-1, 0], but got 1)"),
    (lambda: tape.tensor(1.0).flatten(1), IndexError,
     "Dimension out of range (expected to be in range of [-1, 0], but got 1)"),
    (lambda: tape.tensor(1.0).permute(), TypeError,
     'permute() missing 1 required positional arguments: "dims"'),
    (lambda: tape.ones(3)[::-1], ValueError, "step must be greater than zero"),
    (lambda: tape.ones(2, 3)[0, 1.0], IndexError,
     "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid "
     "indices (got float)"),
    (lambda: tape.ones(3)[tape.tensor(1.5)], IndexError,
     "tensors used as indices must be long, int, byte or bool tensors"),
    (lambda: 1 - tape.tensor([True, False]), RuntimeError,
     "Subtraction, the `-` operator, with a bool tensor is not supported."),
    (lambda: tape.cat([tape.ones(2, 3), tape.ones(2, 4)]), RuntimeError,
     "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for tensor "
     "number 1 in the list."),
    (lambda: tape.cat([]), ValueError, "torch.cat(): expected a non-empty list of Tensors"),
    (lambda: tape.cat([tape.tensor(1.0)]), RuntimeError,
     "zero-dimensional tensor (at position 0) cannot be concatenated"),
    (lambda: tape.cat([tape.ones(2, 3), tape.ones(3)]), RuntimeError,
     "Tensors must have same number of dimensions: got 2 and 1"),
    (lambda: tape.cat(tape.ones(2)), TypeError,
     "cat(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor"),
    (lambda: tape.stack([tape.ones(2, 3), tape.ones(2, 4)]), RuntimeError,
     "stack expects each tensor to be equal size, but got [2, 3] at entry 0 and [2, 4] at entry 1"),
    (lambda: tape.stack([]), RuntimeError, "stack expects a non-empty TensorList"),
    (lambda: tape.ones(2, 3).split([1, 1], 1), RuntimeError,
     "split_with_sizes expects split_sizes to sum exactly to 3 (input tensor's size at dimension 1), "
     "but got split_sizes=[1, 1]"),
    (lambda: tape.ones(2, 3).chunk(0), RuntimeError, "chunk expects `chunks` to be greater than 0, got: 0"),
    (lambda: tape.ones(2, 3).index_select(1, tape.tensor([[0]])), IndexError,
     "index_select(): Index is supposed to be a vector"),
    (lambda: tape.ones(2, 3).gather(1, tape.tensor([0])), RuntimeError,
     "Index tensor must have the same number of dimensions as input tensor"),
    (lambda: tape.ones(2, 3).gather(1, tape.tensor([[4]])), RuntimeError,
     "index 4 is out of bounds for dimension 1 with size 3"),
    (lambda: tape.ones(3).triu(), RuntimeError, "triu: input tensor must have at least 2 dimensions"),
    (lambda: tape.where(tape.tensor([True, False]), tape.ones(3), 0.0), RuntimeError,
     "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0"),
    (lambda: tape.ones(0).amax(), RuntimeError,
     "amax(): Expected reduction dim to be specified for input.numel() == 0."),
    (lambda: tape.ones(0, 3).amax(0), IndexError, "amax(): Expected reduction dim 0 to have non-zero size."),
    (lambda: tape.where(tape.tensor([1.0, 0.0]), tape.ones(2), 0.0), RuntimeError,
     "where expected condition to be a boolean tensor, but got a tensor with dtype Double"),
    (lambda: tape.autograd.grad(tape.ones(1, requires_grad=True).sum(), [1.0]), RuntimeError,
     "all inputs have to be Tensors or GradientEdges, but got float"),
    (lambda: tape.zeros(0).argmax(), IndexError,
     "argmax(): Expected reduction dim to be specified for input.numel() == 0."),
    (lambda: tape.zeros(2, 0).argmin(1), IndexError, "argmin(): Expected reduction dim 1 to have non-zero size."),
    (lambda: tape.zeros(3).argmax(1), IndexError,
     "Dimension out of range (expected to be in range of [-1, 0], but got 1)"),
    (lambda: tape.tensor([True, False]).argmin(), RuntimeError, "argmin(): does not support bool input"),
    (lambda: tape.topk(tape.ones(3, requires_grad=True), 4), RuntimeError, "selected index k out of range"),
    (lambda: tape.ones(3).topk(-1), RuntimeError, "selected index k out of range"),
    (lambda: tape.sort(tape.ones(3, requires_grad=True), 2), IndexError,
     "Dimension out of range (expected to be in range of [-1, 0], but got 2)"),
    (lambda: tape.isclose(tape.ones(2), 2.0), TypeError,
     "isclose(): argument 'other' (position 2) must be Tensor, not float"),
    (lambda: tape.isclose(tape.ones(2, dtype=tape.int64), tape.ones(2)), RuntimeError, "Long did not match Double"),
    (lambda: tape.isclose(tape.ones(2), tape.ones(2), rtol=-1.0), RuntimeError,
     "rtol must be greater than or equal to zero, but got -1"),
    (lambda: tape.allclose(tape.ones(2), tape.ones(3)), RuntimeError,
     "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0"),
    (lambda: tape.equal(tape.ones(2), 1.0), TypeError, "equal(): argument 'other' (position 2) must be Tensor, not float"),
    (lambda: tape.isnan(1.0), TypeError, "isnan(): argument 'input' (position 1) must be Tensor, not float"),
    (lambda: tape.ones(3, requires_grad=True).masked_fill(tape.tensor([1, 0, 1]), 2.0), RuntimeError,
     "masked_fill_ only supports boolean masks, but got mask with dtype long int"),
    (lambda: tape.ones(3, requires_grad=True).masked_fill(tape.tensor([True, False, True]), tape.ones(3)),
     RuntimeError, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 dimension(s)."),
    (lambda: tape.ones(2, 3, requires_grad=True).masked_fill(tape.tensor([True, False]), 2.0), RuntimeError,
     "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 1"),
    (lambda: tape.ones(3, requires_grad=True).masked_fill_(tape.tensor([True, False, True]), 2.0), RuntimeError,
     "a leaf Variable that requires grad is being used in an in-place operation."),
    (lambda: (tape.ones(3, requires_grad=True) * 2).masked_fill_(tape.ones(2, 3, dtype=tape.bool), 2.0),
     RuntimeError, "output with shape [3] doesn't match the broadcast shape [2, 3]"),
    (lambda: tape.ones(3, requires_grad=True).masked_select(tape.tensor([1, 0, 1])), RuntimeError,
     "masked_select: expected BoolTensor for mask"),
    (lambda: tape.ones(2, 3, requires_grad=True).repeat(2), RuntimeError,
     "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"),
    (lambda: tape.ones(2, 3).repeat(-1, 1), RuntimeError, "Trying to create tensor with negative dimension -2: [-2, 3]"),
    (lambda: tape.tile(tape.ones(2), 2), TypeError, "tile(): argument 'dims' (position 2) must be tuple of ints, not int"),
    (lambda: tape.roll(tape.ones(2, 3, requires_grad=True), (1, 2), (0,)), RuntimeError,
     "shifts and dimensions must align. shifts: 2, dims:1"),
    (lambda: tape.roll(tape.tensor(2.0), 1, 0), IndexError, "Dimension specified as 0 but tensor has no dimensions"),
    (lambda: tape.ones(2, 3, requires_grad=True).narrow(1, 2, 2), RuntimeError,
     "start (2) + length (2) exceeds dimension size (3)."),
    (lambda: tape.ones(2, 3).narrow(1, 4, 0), IndexError,
     "start out of range (expected to be in range of [-3, 3], but got 4)"),
    (lambda: tape.ones(2, 3).narrow(1, 0, -1), RuntimeError, "narrow(): length must be non-negative."),
    (lambda: tape.ones(2, 3, requires_grad=True).select(1, 3), IndexError,
     "select(): index 3 out of range for tensor of size [2, 3] at dimension 1"),
    (lambda: tape.tensor(1.0).select(0, 0), IndexError, "select() cannot be applied to a 0-dim tensor."),
    (lambda: tape.movedim(tape.ones(2, 3), (0, 1), (0,)), RuntimeError,
     "movedim: Invalid source or destination dims: source ([0, 1] dims) should contain the same number of dims as "
     "destination ([0] dims)"),
    (lambda: tape.movedim(tape.ones(2, 3), (0, 0), (0, 1)), RuntimeError, "movedim: repeated dim in `source` ([0, 0])"),
    (lambda: tape.hstack([]), RuntimeError, "hstack expects a non-empty TensorList"),
    (lambda: tape.vstack(tape.ones(2)), TypeError,
     "vstack(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor"),
    (lambda: tape.diag(tape.ones(2, 2, 2, requires_grad=True)), RuntimeError, "diag(): Supports 1D or 2D tensors. Got 3D"),
    (lambda: tape.trace(tape.ones(3, requires_grad=True)), RuntimeError,
     "trace: expected a matrix, but got tensor with dim 1"),
    (lambda: tape.ones(2, 3, requires_grad=True).cumprod(2), IndexError,
     "Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
    (lambda: tape.ones(2, 3).cumprod((0,)), TypeError, "cumprod(): argument 'dim' (position 2) must be int, not tuple"),
    (lambda: tape.hypot(tape.tensor([1, 2]), tape.tensor([1, 2])), NotImplementedError,
     "\"hypot_cpu\" not implemented for 'Long'"),
    (lambda: tape.hypot(tape.ones(2, requires_grad=True), 2.0), TypeError,
     "hypot(): argument 'other' (position 2) must be Tensor, not float"),
    (lambda: tape.logaddexp(tape.tensor([1, 2]), tape.tensor([1, 2])), NotImplementedError,
     "\"logaddexp_cpu\" not implemented for 'Long'"),
    (lambda: tape.lerp(tape.tensor([1, 2]), tape.tensor([1, 2]), 0.5), NotImplementedError,
     "\"lerp_kernel_scalar\" not implemented for 'Long'"),
    (lambda: tape.lerp(tape.ones(3, requires_grad=True), tape.ones(3, dtype=tape.float32), 0.5), RuntimeError,
     "expected dtype double for `end` but got dtype float"),
    (lambda: tape.lerp(tape.ones(3, requires_grad=True), tape.ones(3), tape.ones(3, dtype=tape.float32)), RuntimeError,
     "expected dtype double for `weight` but got dtype float"),
    # the products added to a tensor, in PyTorch's order of checks
    (lambda: tape.addmm(tape.ones(2, 5), tape.ones(2, 3), tape.ones(4, 5)), RuntimeError,
     "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
    (lambda: tape.addmm(tape.ones(2, 5), tape.ones(3), tape.ones(4, 5)), RuntimeError,
     "mat1 must be a matrix, got 1-D tensor"),
    (lambda: tape.addmm(tape.ones(2, 5), tape.ones(2, 3), tape.ones(3)), RuntimeError,
     "mat2 must be a matrix, got 1-D tensor"),
    (lambda: tape.addmm(tape.ones(3, 3), tape.ones(2, 3), tape.ones(3, 2)), RuntimeError,
     "The expanded size of the tensor (2) must match the existing size (3) at non-singleton dimension 1.  "
     "Target sizes: [2, 2].  Tensor sizes: [3, 3]"),
    (lambda: tape.addmm(tape.ones(2, 2, dtype=tape.float32), tape.ones(3), tape.ones(3, 2)), RuntimeError,
     "self and mat2 must have the same dtype, but got Float and Double"),
    (lambda: tape.addmm(tape.ones(2, 2), tape.ones(2, 3, dtype=tape.float32), tape.ones(3, 2)), RuntimeError,
     "mat1 and mat2 must have the same dtype, but got Float and Double"),
    (lambda: tape.addmm(tape.ones(2, 2, dtype=tape.bool), tape.ones(2, 3, dtype=tape.bool),
                        tape.ones(3, 2, dtype=tape.bool)), NotImplementedError,
     "\"addmm_impl_cpu_\" not implemented for 'Bool'"),
    (lambda: tape.addmm(tape.ones(1, 1), tape.ones(1, 1), 2), TypeError,
     "addmm(): argument 'mat2' (position 3) must be Tensor, not int"),
    (lambda: tape.addmv(tape.ones(2), tape.ones(2, 3), tape.ones(4)), RuntimeError,
     "size mismatch, got input (2), mat (2x3), vec (4)"),
    (lambda: tape.addmv(tape.ones(3), tape.ones(2, 3), tape.ones(3)), RuntimeError,
     "size mismatch, got input (3), mat (2x3), vec (3)"),
    (lambda: tape.addmv(tape.ones(2, 1), tape.ones(2, 3), tape.ones(3)), RuntimeError,
     "vector + matrix @ vector expected, got 2, 2, 1"),
    (lambda: tape.addmv(tape.tensor(1.0), tape.ones(2, 3), tape.ones(2)), IndexError,
     "Dimension specified as 0 but tensor has no dimensions"),
    (lambda: tape.addmv(tape.ones(2), tape.ones(2, 3, dtype=tape.float32), tape.ones(3)), RuntimeError,
     "addmv input tensors must have the same dtype, but got Double, Float, and Double"),
    (lambda: tape.baddbmm(tape.ones(2, 3, 5), tape.ones(2, 3, 4), tape.ones(3, 4, 5)), RuntimeError,
     "Expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [3, 4]."),
    (lambda: tape.baddbmm(tape.ones(2, 3, 5), tape.ones(2, 3, 4), tape.ones(4, 5)), IndexError,
     "Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
    (lambda: tape.baddbmm(tape.ones(2, 3, 5), tape.ones(2, 3, 4, 1), tape.ones(2, 4, 5)), RuntimeError,
     "batch1 must be a 3D tensor"),
    (lambda: tape.baddbmm(tape.ones(2, 3, 5, dtype=tape.int64), tape.ones(2, 3, 4), tape.ones(2, 4, 5)),
     RuntimeError, "Input dtypes must be the same, got: input long int, batch1: double, batch2: double"),
    (lambda: tape.baddbmm(tape.ones(2, 3, 5), tape.ones(2, 3, 4), tape.ones(2, 4, 5, dtype=tape.float32)),
     RuntimeError, "expected scalar type Double but found Float"),
    (lambda: tape.addbmm(tape.ones(3, 5), tape.ones(2, 3, 4), tape.ones(3, 4, 5)), RuntimeError,
     "batch1 and batch2 must have same number of batches, got 2 and 3"),
    (lambda: tape.addbmm(tape.ones(3, 5), tape.ones(2, 3, 4), tape.ones(2, 3, 5)), RuntimeError,
     "Incompatible matrix sizes for bmm (3x4 and 3x5)"),
    (lambda: tape.addbmm(tape.ones(3, 5), tape.ones(2, 3, 4), tape.ones(2, 4, 5, 1)), RuntimeError,
     "batch2 must be a 3D tensor"),
    (lambda: tape.ones(2).addmm_(tape.ones(2, 3), tape.ones(3, 2)), RuntimeError,
     "Bad in-place call: input tensor size [2] and output tensor size [2, 2] should match"),
    (lambda: tape.ones(2, 1, 5).baddbmm_(tape.ones(2, 3, 4), tape.ones(2, 4, 5)), RuntimeError,
     "Bad in-place call: input tensor size [2, 1, 5] and output tensor size [2, 3, 5] should match"),
    (lambda: tape.addcmul(tape.ones(2), tape.ones(2, 1), tape.ones(3)), RuntimeError,
     "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 1"),
    (lambda: tape.addcmul(tape.ones(2, dtype=tape.bool), tape.ones(2, dtype=tape.bool), tape.ones(2, dtype=tape.bool)),
     NotImplementedError, "\"addcmul_cpu_out\" not implemented for 'Bool'"),
    (lambda: tape.addcmul(2, tape.ones(2), tape.ones(2)), TypeError,
     "addcmul(): argument 'input' (position 1) must be Tensor, not int"),
    (lambda: tape.addcdiv(tape.ones(2), tape.tensor([1, 2]), tape.tensor([True, True])), RuntimeError,
     "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform a true "
     "division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + value * "
     "torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / tensor2) "
     "for float inputs. The future addcdiv behavior is just the latter implementation: (input + value * tensor1 / "
     "tensor2), for all dtypes."),
    (lambda: tape.ones(1).addcmul_(tape.ones(2), tape.ones(2)), RuntimeError,
     "output with shape [1] doesn't match the broadcast shape [2]"),
    (lambda: tape.ones(2, dtype=tape.int64).addcdiv_(tape.ones(2), tape.ones(2)), RuntimeError,
     "result type Double can't be cast to the desired output type Long"),
    (lambda: tape.ones(3, requires_grad=True).uniform_(), RuntimeError,
     "a leaf Variable that requires grad is being used in an in-place operation."),
    (lambda: tape.ones(3, requires_grad=True).normal_(), RuntimeError,
     "a leaf Variable that requires grad is being used in an in-place operation."),
    (lambda: tape.ones(3, dtype=tape.int64).uniform_(1, 0), NotImplementedError,
     "\"check_uniform_bounds\" not implemented for 'Long'"),
    (lambda: tape.ones(3, dtype=tape.int64).normal_(), NotImplementedError,
     "\"normal_kernel_cpu\" not implemented for 'Long'"),
    (lambda: tape.ones(3).uniform_(1.5, 0), RuntimeError,
     "uniform_ expects to return a [from, to) range, but found from=1.5 > to=0"),
    (lambda: (tape.ones(3, requires_grad=True) * 1).normal_(0, -1), RuntimeError,
     "normal expects std >= 0.0, but found std -1"),
])
def test_errors_with_pytorchs_type_and_text(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()
    assert_tape_still_works()


def test_numpy_scalars_act_as_python_numbers():
    # as in PyTorch: the graph of a number operand, and no promotion by it
    x = tape.ones(2, requires_grad=True)
    assert (x ** np.float64(2)).grad_fn.name() == "PowBackward0"
    assert (np.float64(2.5) - x).grad_fn.name() == "RsubBackward1"
    assert (np.float64(2.5) ** x).grad_fn.name() == "PowBackward2"
    assert (tape.ones(2, dtype=tape.float32) * np.float64(2)).dtype == tape.float32


def test_factory_sizes_must_be_ints():
    for make in (lambda: tape.zeros(2.0), lambda: tape.ones(2, 3.0), lambda: tape.empty((2, 1.5))):
        with pytest.raises(TypeError, match="must be tuple of ints, but found element of type float"):
            make()
    assert tape.ones(np.int64(2), 3).shape == (2, 3)
    assert tape.zeros(tape.tensor(3)).shape == (3,)  # a 0-d integer tensor stands for an int


def test_from_numpy_refuses_object_arrays():
    with pytest.raises(TypeError, match="can't convert np.ndarray of type numpy.object_"):
        tape.from_numpy(np.array([1, None]))


@pytest.mark.parametrize("view", [lambda b: b.view(2, 2), lambda b: b[0:2], lambda b: b[0]])
def test_detach_in_place_refuses_views(view):
    b = tape.ones(4, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="Can't detach views in-place. Use detach\\(\\) instead."):
        view(b).detach_()
    assert_tape_still_works()


@pytest.mark.parametrize("start", [tape.ones(3), tape.tensor(1.0)], ids=["1d", "0d"])
@pytest.mark.parametrize("how", ["backward", "grad"])
def test_a_saved_tensor_detached_in_place_raises_pytorchs_error_when_used(start, how):
    # torch 2.13: detach_() itself is allowed; unpacking the saved value raises
    w = start.clone().requires_grad_()
    a = w * 1
    y = a.sin()
    a.detach_()
    message = ("^Trying to use a saved tensor that has been detached in-place, i.e. with .detach_\\(\\).This is "
               "not supported, please use out-of-place `.detach\\(\\)` instead$")
    with pytest.raises(RuntimeError, match=message):
        if how == "backward":
            y.sum().backward()
        else:
            tape.autograd.grad(y.sum(), w)
    assert_tape_still_works()


def test_the_saved_value_of_a_tensor_detached_in_place_still_reads():
    # torch 2.13: _saved_self gives the detached tensor's value
    a = tape.ones(3, requires_grad=True) * 1
    y = a.sin()
    a.detach_()
    assert y.grad_fn._saved_self.tolist() == [1.0, 1.0, 1.0]


def test_a_tensor_detached_in_place_that_no_backward_reads_is_allowed():
    w = tape.ones(3, requires_grad=True)
    a = w * 1
    y = a * 2
    a.detach_()
    y.sum().backward()
    assert w.grad.tolist() == [2.0, 2.0, 2.0]


def test_a_number_remainder_a_tensor_records_but_cannot_be_differentiated():
    x = tape.tensor(1.5, requires_grad=True)

    y = 2 % x

    assert y.item() == 0.5 and y.requires_grad and type(y.grad_fn).__name__ == "NotImplemented"
    with pytest.raises(RuntimeError, match="derivative for aten::remainder is not implemented"):
        y.backward()


def test_grad_of_no_outputs_finds_every_input_unused():
    x = tape.tensor(1.0, requires_grad=True)

    with pytest.raises(RuntimeError, match="index 0 appears to not have been used in the graph"):
        tape.autograd.grad([], x)
    assert tape.autograd.grad([], [x], allow_unused=True) == (None,)


def test_data_of_a_tensor_requiring_grad_must_stay_floating_point():
    x = tape.tensor([1.0, 2.0], requires_grad=True)

    with pytest.raises(RuntimeError, match="data set to a tensor that requires gradients must be floating"):
        x.data = tape.tensor([5, 6])
    assert x.dtype == tape.float64 and x.tolist() == [1.0, 2.0]


def test_index_select_out_of_range_is_an_index_error():
    with pytest.raises(IndexError, match="index out of range in self"):
        tape.zeros(3).index_select(0, tape.tensor([5]))


@pytest.mark.parametrize("op", [tape.softmax, tape.log_softmax])
def test_softmax_takes_one_dim(op):
    with pytest.raises(TypeError, match=r"argument 'dim' \(position 2\) must be int, not tuple"):
        op(tape.zeros(2, 2), (0, 1))


BOOL = tape.tensor([True, False])
LONG = tape.tensor([1, 2])


@pytest.mark.parametrize("call, error, message", [
    (lambda: tape.relu(BOOL), RuntimeError, "Boolean inputs not supported for relu"),
    (lambda: tape.abs(BOOL), NotImplementedError, "\"abs_cpu\" not implemented for 'Bool'"),
    (lambda: tape.floor(BOOL), NotImplementedError, "\"floor_vml_cpu\" not implemented for 'Bool'"),
    (lambda: tape.ceil(BOOL), NotImplementedError, "\"ceil_vml_cpu\" not implemented for 'Bool'"),
    (lambda: tape.round(BOOL), NotImplementedError, "\"round_vml_cpu\" not implemented for 'Bool'"),
    (lambda: tape.trunc(BOOL), NotImplementedError, "\"trunc_vml_cpu\" not implemented for 'Bool'"),
    (lambda: tape.round(LONG, decimals=1), NotImplementedError, "\"round_cpu\" not implemented for 'Long'"),
    (lambda: tape.softmax(LONG, 0), NotImplementedError,
     "\"softmax_lastdim_kernel_impl\" not implemented for 'Long'"),
    (lambda: tape.softmax(tape.ones(2, 2, dtype=tape.int64), 0), NotImplementedError,
     "\"softmax_kernel_impl\" not implemented for 'Long'"),
    (lambda: tape.log_softmax(LONG, 0), NotImplementedError,
     "\"log_softmax_lastdim_kernel_impl\" not implemented for 'Long'"),
    (lambda: tape.norm(LONG), RuntimeError,
     "linalg.vector_norm: Expected a floating point or complex tensor as input. Got Long"),
    (lambda: LONG.var(), RuntimeError, "std and var only support floating point and complex dtypes"),
    (lambda: LONG.std(), RuntimeError, "std and var only support floating point and complex dtypes"),
    (lambda: tape.outer(tape.ones(2, 3), tape.ones(4)), RuntimeError,
     "outer: Expected 1-D argument self, but got 2-D"),
    (lambda: tape.outer(tape.ones(3), tape.ones(2, 4)), RuntimeError,
     "outer: Expected 1-D argument vec2, but got 2-D"),
    (lambda: tape.ones(24).reshape(-2, 12), RuntimeError,
     r"invalid shape dimension -2 at index 0 of shape \[-2, 12\]"),
    (lambda: tape.ones(24).view(4, -3), RuntimeError, r"invalid shape dimension -3 at index 1 of shape \[4, -3\]"),
    (lambda: tape.ones(2).cumsum((0,)), TypeError, "argument 'dim' \\(position 2\\) must be int, not tuple"),
    (lambda: tape.tensor([tape.tensor([1.0, 3.0]), tape.tensor([2.0, 4.0])]), ValueError,
     "only one element tensors can be converted to Python scalars"),
])
def test_dtype_and_argument_errors_with_pytorchs_type_and_text(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_gradcheck_without_an_input_requiring_grad_says_so_in_pytorchs_words():
    with pytest.raises(ValueError, match="but none of them have requires_grad=True"):
        tape.autograd.gradcheck(lambda x: x * 2, (tape.ones(2),))


@pytest.mark.parametrize("views, name, index", [
    (lambda y: y.unbind(), "Unbind", 1), (lambda y: y.split(1), "Split", 1),
    (lambda y: y.chunk(2), "Split", 1), (lambda y: y.split(2), "Split", 0),
    (lambda y: y.split([1, 1]), "SplitWithSizes", 1)])
def test_in_place_on_an_output_of_a_multi_view_function_raises_while_recording(views, name, index):
    y = tape.ones(2, 2, requires_grad=True) * 1
    out = views(y)[index]

    with pytest.raises(RuntimeError, match=f"Output {index} of {name} is a view and is being modified inplace"):
        out.add_(1)
    with tape.no_grad():  # as PyTorch: allowed without recording, and it writes through
        out.add_(1)
    assert y.sum().item() == 4.0 + out.numel()


@pytest.mark.parametrize("view, name", [
    (lambda u: u[:2], "Slice"), (lambda u: u[0], "Select"), (lambda u: u.view(3), "View"),
    (lambda u: u.reshape(3, 1), "View"), (lambda u: u.t(), "T"), (lambda u: u.unsqueeze(0), "Unsqueeze"),
    (lambda u: u.narrow(0, 0, 2), "Slice"), (lambda u: u.unsqueeze(0).transpose(0, 1), "Transpose"),
    (lambda u: u[:2][0], "Select"), (lambda u: u.unsqueeze(0).diagonal(), "Diagonal"),
    (lambda u: u.expand(3), "Expand"), (lambda u: u.permute(0), "Permute"), (lambda u: u[None], "Unsqueeze")])
@pytest.mark.parametrize("output", [lambda a: a.unbind(0)[1], lambda a: a.chunk(2)[1].view(3)],
                         ids=["unbind", "chunk"])
def test_in_place_on_a_view_of_an_output_of_a_multi_view_function_raises_pytorchs_error(output, view, name):
    # torch 2.13's texts: the view is named by its own op, as output 0
    a = tape.ones(2, 3, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match=f"^Output 0 of {name} is a view and is being modified inplace. This "
                                           "view is the output of a function that returns multiple views. Such "
                                           "functions do not allow the output views to be modified inplace. You "
                                           "should replace the inplace operation by an out-of-place one.$"):
        view(output(a)).mul_(2)
    assert a.tolist() == [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]


def test_setting_requires_grad_on_integers_says_so_in_pytorchs_words():
    with pytest.raises(RuntimeError, match="^only Tensors of floating point dtype can require gradients$"):
        tape.tensor([1, 2]).requires_grad_()


def test_assigning_a_grad_of_another_dtype_names_both():
    x = tape.ones(2)

    with pytest.raises(RuntimeError, match="attempting to assign a gradient with dtype 'float' to a tensor "
                                           "with grad_dtype 'Double'"):
        x.grad = tape.ones(2, dtype=tape.float32)


def test_setitem_on_a_leaf_that_requires_grad_names_the_view():
    x = tape.ones(2, requires_grad=True)

    with pytest.raises(RuntimeError, match="^a view of a leaf Variable that requires grad is being used"):
        x[0] = 1.0


@pytest.mark.parametrize("op", ["var", "std"])
def test_variance_without_degrees_of_freedom_warns_and_is_nan(op):
    with pytest.warns(UserWarning, match=f"{op}\\(\\): degrees of freedom is <= 0"):
        assert np.isnan(getattr(tape.tensor([1.0]), op)().item())


def test_broadcast_to_takes_sizes_as_arguments():
    assert tape.ones(2).broadcast_to(3, 2).shape == (3, 2)


def test_requires_grad_set_on_an_integer_tensor_is_pytorchs_setter_text():
    with pytest.raises(RuntimeError, match="^only Tensors of floating point and complex dtype can require gradients$"):
        tape.tensor([1]).requires_grad = True


def test_deprecated_only_inputs_and_grad_variables_are_taken_as_pytorch_takes_them():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = tape.tensor(3.0, requires_grad=True)
    # positional, as PyTorch's order: grad_outputs, retain_graph, create_graph, only_inputs, allow_unused
    gx, gy = tape.autograd.grad((x * x).sum(), [x, y], None, None, False, True, True)
    assert gx.tolist() == [2.0, 4.0] and gy is None
    with pytest.warns(FutureWarning, match="^only_inputs argument is deprecated and is ignored now"):
        tape.autograd.grad((x * x).sum(), x, only_inputs=False)
    with pytest.warns(FutureWarning, match="^`grad_variables` is deprecated. Use `grad_tensors` instead.$"):
        tape.autograd.backward(x * 2, grad_variables=tape.ones(2))
    assert x.grad.tolist() == [2.0, 2.0]
    with pytest.warns(FutureWarning), pytest.raises(RuntimeError, match="arguments both passed to `backward\\(\\)`"):
        tape.autograd.backward(x * 2, grad_tensors=tape.ones(2), grad_variables=tape.ones(2))
    assert tape.autograd.grad((x * y).sum(), {"x": x, "y": y})["y"].item() == 3.0


def test_variable_is_a_detached_tensor_and_every_tensor_is_one():
    from tape.autograd import Variable
    x = tape.tensor([1.0, 2.0])
    v = Variable(x, requires_grad=True)
    assert type(v) is tape.Tensor and v.requires_grad and v.is_leaf and isinstance(x, Variable)
    assert not isinstance(3.0, Variable) and Variable().shape == (0,)
    with pytest.raises(TypeError, match="^Variable data has to be a tensor, but got list$"):
        Variable([1.0])


def test_register_hooks_on_a_saved_tensor_wants_two_callables_in_pybind11s_words():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    saved = (x * x).grad_fn._raw_saved_self
    for args in ((lambda t: t,), (1, 2), ()):
        with pytest.raises(TypeError, match="^register_hooks\\(\\): incompatible function arguments"):
            saved.register_hooks(*args)
