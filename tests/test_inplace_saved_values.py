"""What the backward of an in-place op, and of the uses around it, reads: an
in-place op's original self, a tensor whose storage another tensor wrote,
`.data` replaced on a non-leaf, index_put's broadcast value. The expected
values and messages were checked against PyTorch 2.13."""
import pytest

import tape
from tape.autograd import gradcheck, gradgradcheck

MODIFIED = "one of the variables needed for gradient computation has been modified by an inplace operation"


def rounded(t):
    return [round(v, 6) for v in t.reshape(-1).tolist()]


def test_sin_in_place_on_a_non_leaf_saves_its_original_self_to_the_second_order():
    x = tape.tensor([0.5, 1.0, -0.3], requires_grad=True)
    t = x * 2
    assert t.sin_() is t
    assert type(t.grad_fn).__name__ == "SinBackward0"
    assert [type(n).__name__ for n, _ in t.grad_fn.next_functions] == ["MulBackward0"]
    saved = t.grad_fn._saved_self
    assert saved.tolist() == [1.0, 2.0, -0.6] and saved is not t and saved is not x
    g, = tape.autograd.grad(t.sum(), x, create_graph=True)
    gg, = tape.autograd.grad(g.sum(), x)
    assert rounded(g) == [1.080605, -0.832294, 1.650671]
    assert rounded(gg) == [-3.365884, -3.63719, 2.25857]


def test_sin_in_place_on_a_0d_non_leaf_to_the_second_order():
    x = tape.tensor(0.5, requires_grad=True)
    t = x * 2
    t.sin_()
    g, = tape.autograd.grad(t, x, create_graph=True)
    gg, = tape.autograd.grad(g, x)
    assert (round(g.item(), 6), round(gg.item(), 6)) == (1.080605, -3.365884)
    assert t.grad_fn._saved_self.item() == 1.0


def test_a_use_saved_before_an_in_place_op_raises_and_the_op_itself_does_not():
    x = tape.tensor([0.5, 1.0], requires_grad=True)
    t = x * 2
    y = t * x
    t.sin_()
    with pytest.raises(RuntimeError, match=MODIFIED):
        y.sum().backward()
    t.sum().backward()
    assert rounded(x.grad) == [1.080605, -0.832294]


def test_an_in_place_op_whose_other_operand_is_itself_raises():
    x = tape.tensor([0.5, 1.0], requires_grad=True)
    t = x * 2
    t.mul_(t)
    with pytest.raises(RuntimeError, match=MODIFIED):
        t.sum().backward()


def test_chained_in_place_ops_on_a_non_leaf():
    x = tape.tensor([0.5, 1.0], requires_grad=True)
    t = x * 2
    t.sin_()
    t.cos_()
    t.mul_(x)
    t.sum().backward()
    assert rounded(x.grad) == [0.263504, 1.27104]


def test_in_place_op_on_a_view_of_a_non_leaf_with_a_saved_value():
    x = tape.tensor([0.5, 1.0, -0.3, 2.0], requires_grad=True)
    y = x * 2
    v = y[1:3]
    v.sin_()
    assert (type(y.grad_fn).__name__, type(v.grad_fn).__name__) == ("CopySlices", "AsStridedBackward0")
    assert [type(n).__name__ for n, _ in y.grad_fn.next_functions] == ["MulBackward0"]
    g, = tape.autograd.grad((y * y).sum(), x, create_graph=True)
    gg, = tape.autograd.grad(g.sum(), x)
    assert rounded(g) == [4.0, -1.513605, -1.864078, 16.0]
    assert rounded(gg) == [8.0, -5.229149, 2.898862, 8.0]


def test_a_tensor_whose_storage_is_written_through_its_detached_alias_keeps_its_grad_fn():
    x = tape.tensor([0.5, 1.0], requires_grad=True)
    y = x * 2
    before = y * x
    y.detach().add_(1)
    assert type(y.grad_fn).__name__ == "MulBackward0" and y._version == 1
    after = y.sin()
    assert after.grad_fn._saved_self is y
    (y * x).sum().backward(retain_graph=True)
    assert x.grad.tolist() == [3.0, 5.0]
    with pytest.raises(RuntimeError, match=MODIFIED):
        before.sum().backward()


def test_a_use_between_two_writes_through_an_alias_raises():
    x = tape.tensor([0.5, 1.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    d.add_(1)
    between = y * x
    d.add_(1)
    (y * x).sum().backward()
    assert x.grad.tolist() == [4.0, 6.0]
    with pytest.raises(RuntimeError, match=MODIFIED):
        between.sum().backward()


def test_data_written_on_a_0d_non_leaf_is_what_its_uses_backward_reads():
    x = tape.tensor(0.5, requires_grad=True)
    t = x * 2
    y = t * x  # saved t before the write: PyTorch's saved input shares what .data replaces
    t.data = tape.tensor(3.0)
    z = t * x
    (y + z).backward()
    assert x.grad.item() == 8.0


def test_data_written_on_a_non_leaf_then_an_in_place_op():
    x = tape.full((2,), 0.5, requires_grad=True)
    t = x * 2
    t.data = tape.full((2,), 3.0)
    t.sin_()
    t.sum().backward()
    assert rounded(x.grad) == [-1.979985, -1.979985]


@pytest.mark.parametrize("start, new, grad, second", [
    (0.5, 3.0, [9.892328], [15.328891]),
    ([0.5, 1.0], [3.0, 4.0], [9.892328, 21.746255], [15.328891, 36.524367]),
])
def test_data_written_on_a_non_leaf_whose_backward_reads_its_result(start, new, grad, second):
    # its own backward reads the result it made, later uses the new value
    x = tape.tensor(start, requires_grad=True)
    y = x.exp()
    y.data = tape.tensor(new)
    z = y * y
    assert type(z.grad_fn).__name__ == "MulBackward0"
    assert [type(n).__name__ for n, _ in z.grad_fn.next_functions] == ["ExpBackward0", "ExpBackward0"]
    assert rounded(z.grad_fn._saved_self) == rounded(tape.tensor(new))
    assert z.grad_fn._saved_self is y or y.ndim == 0  # a 0-d result's row holds its float, not y
    assert rounded(y.grad_fn._saved_result) == rounded(tape.tensor(start).exp())
    g, = tape.autograd.grad(z.sum(), x, create_graph=True)
    gg, = tape.autograd.grad(g.sum(), x)
    assert rounded(g) == grad and rounded(gg) == second


def test_data_written_on_a_non_leaf_shares_the_version_its_saved_result_checks():
    x = tape.tensor(0.5, requires_grad=True)
    y = x.exp()
    y.data = tape.tensor(3.0)
    y.mul_(2)
    with pytest.raises(RuntimeError, match=r"\[tape.DoubleTensor \[\]\], which is output 0 of Exp, is at version 1; "
                                           r"expected version 0 instead"):
        y.backward()


def test_the_modified_error_names_the_versions_and_pytorchs_hint():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    y.add_(1)
    y.add_(1)
    message = (r"^one of the variables needed for gradient computation has been modified by an inplace operation: "
               r"\[tape.DoubleTensor \[2\]\], which is output 0 of Exp, is at version 2; expected version 0 instead. "
               r"Hint: enable anomaly detection to find the operation that failed to compute its gradient, with "
               r"tape.autograd.set_detect_anomaly\(True, check_nan=False\).$")
    with pytest.raises(RuntimeError, match=message):
        y.sum().backward()
    z = x.exp()
    z.add_(1)
    with tape.autograd.set_detect_anomaly(True), pytest.warns(UserWarning, match="Error detected in ExpBackward0"):
        with pytest.raises(RuntimeError, match=r"is at version 1; expected version 0 instead. Hint: the backtrace "
                                               r"further above shows the operation that failed to compute its "
                                               r"gradient. The variable in question was changed in there or "
                                               r"anywhere later. Good luck!$"):
            z.sum().backward()


def test_index_put_with_a_broadcast_value_requiring_grad():
    x = tape.tensor([[0.5, 1.0, 1.5], [2.0, 2.5, 3.0], [3.5, 4.0, 4.5]], requires_grad=True)
    v = tape.tensor([1.0, -2.0, 0.5], requires_grad=True)
    y = x * 1
    y[tape.tensor([0, 2])] = v * v
    assert type(y.grad_fn).__name__ == "IndexPutBackward0"
    assert [type(n).__name__ for n, _ in y.grad_fn.next_functions] == ["MulBackward0", "MulBackward0"]
    w = tape.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    gx, gv = tape.autograd.grad((y * y * w).sum(), (x, v), create_graph=True)
    gg, = tape.autograd.grad(gv.sum(), v)
    assert gx.reshape(-1).tolist() == [0.0, 0.0, 0.0, 16.0, 25.0, 36.0, 0.0, 0.0, 0.0]
    assert gv.tolist() == [32.0, -320.0, 6.0]
    assert gg.tolist() == [96.0, 480.0, 36.0]


def test_index_put_and_copy_slices_with_a_broadcast_value_pass_gradcheck():
    x = tape.tensor([[0.5, 1.0, 1.5], [2.0, 2.5, 3.0], [3.5, 4.0, 4.5]], requires_grad=True)
    v = tape.tensor([1.0, -2.0, 0.5], requires_grad=True)
    idx = tape.tensor([0, 2])

    def advanced(x, v):
        y = x * x
        y[idx] = v.sin()
        return y * y

    def basic(x, v):
        y = x * x
        y[:, 1:] = v.sin()[:2]
        return y * y
    for f in (advanced, basic):
        assert gradcheck(f, (x, v)) and gradgradcheck(f, (x, v))


# Known texts from PyTorch 2.13: a saved input is named by its grad_fn after
# the write (the in-place op's, CopySlices for a write through a view), a
# saved result by the op that made it, and a leaf by nothing.
@pytest.mark.parametrize("program, named", [
    (lambda x: (lambda a: (a * a, a.add_(1)))(x * 1)[0], "[tape.DoubleTensor [2]], which is output 0 of Add,"),
    (lambda x: (lambda a: (a.sin(), a.zero_()))(x.clone())[0], "[tape.DoubleTensor [2]], which is output 0 of Zero,"),
    (lambda x: (lambda a: (a.sin(), a.__setitem__(0, 5.0)))(x * 1)[0],
     "[tape.DoubleTensor [2]], which is output 0 of torch::autograd::CopySlices,"),
    (lambda x: (lambda a: (a.sin(), a[:1].mul_(2)))(x * 1)[0],
     "[tape.DoubleTensor [2]], which is output 0 of torch::autograd::CopySlices,"),
    (lambda x: (lambda y: (y, y.add_(1)))(x.exp())[0], "[tape.DoubleTensor [2]], which is output 0 of Exp,"),
    (lambda x: (lambda y: (y, y.mul_(2)))(x.float().exp())[0], "[tape.FloatTensor [2]], which is output 0 of Exp,"),
])
def test_the_modified_error_names_the_op_as_pytorch_does(program, named):
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    out = program(x)
    with pytest.raises(RuntimeError) as info:
        out.sum().backward()
    assert named in str(info.value)
    assert "is at version 1; expected version 0 instead" in str(info.value)
