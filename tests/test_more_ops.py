"""The ops that user scripts reach for beyond API.md's list, checked against
PyTorch's figures for the same calls: the values of the ops without
gradients, and the gradients at ties, zeros and other edges. Their gradients
elsewhere go through the table of tests/test_ops.py; their errors are in
tests/test_errors.py."""
import contextlib

import numpy as np
import pytest

import tape
from tape._engine import force_retaped

NAN = float("nan")


# -- indices and sorting ---------------------------------------------------------------

def test_argmax_and_argmin_take_the_first_of_a_tie_and_the_first_nan():
    x = tape.tensor([[1.0, 3.0, 3.0, NAN], [2.0, -1.0, 2.0, 0.0]], requires_grad=True)
    y = tape.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, -1.0, 2.0, 0.0]])

    assert [x.argmax().item(), x.argmin().item(), y.argmax().item(), y.argmin().item()] == [3, 3, 1, 5]
    assert x.argmax(1).tolist() == [3, 0] and tape.argmin(x, 1).tolist() == [3, 1]
    assert y.argmax(0).tolist() == [1, 0, 0, 0] and y.argmin(1, keepdim=True).tolist() == [[3], [1]]
    assert x.argmax(keepdim=True).shape == (1, 1)
    assert x.argmax().dtype == tape.int64 and not x.argmax(1).requires_grad


def test_argmax_of_a_0d_tensor_and_of_integers():
    assert tape.tensor(5.0).argmax().item() == 0 and tape.tensor(5.0).argmin(0, keepdim=True).shape == ()
    assert tape.tensor([3, 7, 7]).argmax().item() == 1


def test_sort_is_stable_with_nan_largest_and_returns_a_named_tuple():
    z = tape.tensor([3.0, 1.0, 3.0, 2.0, 1.0, NAN, 3.0])

    up, down = tape.sort(z), z.sort(descending=True)

    assert up.indices.tolist() == [1, 4, 3, 0, 2, 6, 5]
    assert down.indices.tolist() == [5, 0, 2, 6, 3, 1, 4]
    assert np.isnan(down.values[0].item()) and down.values[1:].tolist() == [3.0, 3.0, 3.0, 2.0, 1.0, 1.0]
    assert type(up).__name__ == "sort" and up._fields == ("values", "indices")
    assert tape.argsort(z, descending=True).tolist() == down.indices.tolist()
    assert z.argsort(stable=True).tolist() == up.indices.tolist()


def test_sort_of_integers_bools_and_a_0d_tensor():
    assert tape.sort(tape.tensor([3, 1, 2])).values.tolist() == [1, 2, 3]
    assert tape.sort(tape.tensor([True, False, True])).indices.tolist() == [1, 0, 2]
    s = tape.sort(tape.tensor(2.0, requires_grad=True))
    assert s.values.item() == 2.0 and s.indices.item() == 0 and s.values.grad_fn.name() == "SortBackward0"
    assert tape.argsort(tape.tensor([True, False])).tolist() == [1, 0]


@pytest.mark.parametrize("retaped", [False, True])
def test_sort_gradient_goes_back_to_the_sorted_positions(retaped):
    # PyTorch's figures: a tie sends each gradient to its own position
    w = tape.tensor([3.0, 1.0, 3.0, 2.0], requires_grad=True)
    values, indices = tape.sort(w)
    with force_retaped() if retaped else contextlib.nullcontext():
        (values * tape.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert w.grad.tolist() == [3.0, 1.0, 4.0, 2.0] and indices.tolist() == [1, 3, 0, 2]
    assert type(values.grad_fn).__name__ == "SortBackward0"
    assert [type(f).__name__ for f, _ in values.grad_fn.next_functions] == ["AccumulateGrad"]


def test_topk_takes_the_largest_or_smallest_in_order():
    z = tape.tensor([1.0, 4.0, 2.0, 3.0, 0.5], requires_grad=True)

    top, low = tape.topk(z, 3), z.topk(2, largest=False)

    assert top.values.tolist() == [4.0, 3.0, 2.0] and top.indices.tolist() == [1, 3, 2]
    assert low.values.tolist() == [0.5, 1.0] and low.indices.tolist() == [4, 0]
    assert type(top).__name__ == "topk" and top.values.grad_fn.name() == "TopkBackward0"
    assert tape.topk(z, 0).values.shape == (0,)
    nan_first = tape.topk(tape.tensor([1.0, NAN, 3.0]), 2)
    assert np.isnan(nan_first.values[0].item()) and nan_first.indices.tolist() == [1, 2]
    top.values.sum().backward()
    assert z.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]


def test_topk_of_a_0d_tensor_is_the_element_for_k_0_and_1():
    x = tape.tensor(2.0, requires_grad=True)
    for k in (0, 1):
        values, indices = tape.topk(x, k)
        assert (values.item(), indices.item(), values.grad_fn.name()) == (2.0, 0, "TopkBackward0")


def test_msort_sorts_along_the_first_dim():
    x = tape.tensor([[2.0, 0.0], [1.0, 5.0]], requires_grad=True)
    out = tape.msort(x)
    assert out.tolist() == [[1.0, 0.0], [2.0, 5.0]] and out.grad_fn.name() == "SortBackward0"
