"""Classes of disagreement with PyTorch 2.13 that randomly generated programs
found (issue 18), one test class each: type promotion, errors, and
requires_grad / graph membership. Every expected value was computed by
PyTorch in a throwaway script and is written here as a literal."""
import math

import pytest

import tape
from tape import _tensor, autograd


def _f32(data, requires_grad=False):
    return tape.tensor(data, dtype=tape.float32, requires_grad=requires_grad)


class TestTypePromotion:
    """PyTorch's category-based promotion (Note [Type promotion]): tensors
    with dims, then 0-d tensors, then Python numbers, a later tier counting
    only where its category (bool < integer < floating) is higher."""

    X32 = [1.5, -2.25]

    @pytest.mark.parametrize("compute, expected, dtype", [
        (lambda x: x + tape.tensor(0.1), [1.600000023841858, -2.1500000953674316], tape.float32),
        (lambda x: x * tape.tensor([3, 4]), [4.5, -9.0], tape.float32),
        (lambda x: tape.tensor([1, 2]) + tape.tensor(0.5, dtype=tape.float32), [1.5, 2.5], tape.float32),
        (lambda x: tape.tensor([100, 27], dtype=tape.int8) + tape.tensor(1), [101, 28], tape.int8),
        (lambda x: tape.tensor([True, False]) * 2.5, [2.5, 0.0], tape.float64),
        (lambda x: tape.tensor([1, 2]) + tape.tensor([0.5, 0.25], dtype=tape.float16), [1.5, 2.25], tape.float16),
        (lambda x: tape.tensor([1, 3]) / tape.tensor([2, 4]), [0.5, 0.75], tape.float64),
        (lambda x: tape.where(tape.tensor([True, False]), x, tape.tensor(0.1)), [1.5, 0.10000000149011612],
         tape.float32),
        (lambda x: tape.where(tape.tensor([True, False]), x, tape.tensor([7, 8])), [1.5, 8.0], tape.float32),
        (lambda x: tape.clamp(x, tape.tensor(-1.0), tape.tensor(1.0)), [1.0, -1.0], tape.float32),
        (lambda x: tape.clamp(tape.tensor([0, 5]), tape.tensor(0.5, dtype=tape.float32),
                              tape.tensor(2.5, dtype=tape.float32)), [0.5, 2.5], tape.float32),
        (lambda x: tape.clamp(tape.tensor([0, 5]), 0.5, 2.5), [0.5, 2.5], tape.float64),
        (lambda x: tape.hypot(tape.tensor(True), tape.tensor(2.0, dtype=tape.float32)), 2.2360680103302,
         tape.float32),
        (lambda x: tape.hypot(tape.tensor(3), tape.tensor(4.0)), 5.0, tape.float64),
        (lambda x: tape.maximum(x, tape.tensor(0.1)), [1.5, 0.10000000149011612], tape.float32),
        (lambda x: x.abs() ** tape.tensor(0.5), [1.2247449159622192, 1.5], tape.float32),
        (lambda x: tape.tensor([0.1, 0.2], dtype=tape.float32) == tape.tensor(0.1), [True, False], tape.bool),
        (lambda x: tape.cat([x, tape.tensor([3])]), [1.5, -2.25, 3.0], tape.float32),
        (lambda x: x // tape.tensor(2.0), [0.0, -2.0], tape.float32),
        (lambda x: tape.lerp(x, _f32([0.0, 0.0]), tape.tensor(0.5)), [0.75, -1.125], tape.float32),
        (lambda x: tape.tensor(1.5, dtype=tape.float32) * tape.tensor(3), 4.5, tape.float32),
        (lambda x: tape.tensor(1.5, dtype=tape.float32) + tape.tensor(0.1), 1.6, tape.float64),
    ])
    def test_result_dtype_and_value(self, compute, expected, dtype):
        x = _f32(self.X32)

        out = compute(x)

        assert out.dtype == dtype
        assert out.tolist() == pytest.approx(expected, rel=1e-7)

    def test_a_gradient_takes_its_inputs_dtype_to_second_order(self):
        x = _f32([1.5, 2.5], requires_grad=True)
        y = tape.tensor(3.0, requires_grad=True)

        out = x * y
        gx, gy = autograd.grad(out.sum(), (x, y), create_graph=True)
        hx, hy = autograd.grad((gx * gx).sum() + gy * gy, (x, y))

        assert (out.dtype, gx.dtype, gy.dtype, hx.dtype, hy.dtype) == (
            tape.float32, tape.float32, tape.float64, tape.float32, tape.float64)
        assert (gx.tolist(), gy.item(), hx.tolist(), hy.item()) == ([3.0, 3.0], 4.0, [8.0, 8.0], 12.0)

    def test_einsum_promotes_its_operands(self):
        a = tape.tensor([1.5, 2.5], requires_grad=True)
        b = _f32([2.0, 4.0], requires_grad=True)

        out = tape.einsum("i,i->i", a, b)
        out.sum().backward()

        assert (out.dtype, out.tolist()) == (tape.float64, [3.0, 10.0])
        assert (a.grad.dtype, a.grad.tolist(), b.grad.dtype, b.grad.tolist()) == (
            tape.float64, [2.0, 4.0], tape.float32, [1.5, 2.5])

    def test_einsum_promotes_where_it_contracts(self):
        # PyTorch raises here ("expected scalar type Double but found Float");
        # the values are its einsum of the operands promoted by hand
        a = tape.tensor([[1.5, 2.5]], requires_grad=True)
        b = _f32([[1.0], [2.0]], requires_grad=True)

        out = tape.einsum("ij,jk->ik", a, b)
        out.sum().backward()

        assert (out.dtype, out.tolist()) == (tape.float64, [[6.5]])
        assert (a.grad.tolist(), b.grad.dtype, b.grad.tolist()) == ([[1.0, 2.0]], tape.float32, [[1.5], [2.5]])

    def test_an_in_place_result_that_cannot_be_cast_names_pytorchs_dtypes(self):
        x = tape.ones(3, dtype=tape.int64)

        with pytest.raises(RuntimeError, match="^result type Float can't be cast to the desired output type Long$"):
            x.add_(tape.tensor(1.0, dtype=tape.float32))


class TestErrors:
    """PyTorch's exception types and texts, and PyTorch's results where it
    has no error; nothing leaks from NumPy (AxisError, read-only arrays)."""

    def test_flip_of_a_0d_tensor_is_the_tensor(self):
        x = tape.tensor(2.0, requires_grad=True)

        y = x.flip(0)
        y.backward()

        assert (y.item(), type(y.grad_fn).__name__, x.grad.item()) == (2.0, "FlipBackward0", 1.0)

    def test_mT_of_a_0d_tensor_is_the_tensor_with_pytorchs_warning(self, monkeypatch):
        monkeypatch.setattr(_tensor, "_WARNED", set())  # the process's once-only warnings, given afresh
        x = tape.tensor(2.0)

        with pytest.warns(UserWarning, match="Tensor.mT is deprecated on 0-D tensors. This function is the "
                                             "identity in these cases."):
            y = x.mT

        assert (y.shape, y.item()) == ((), 2.0)

    @pytest.mark.parametrize("shape, dim, shapes", [((0,), 0, [(0,)] * 3), ((2, 0), 1, [(2, 0)] * 3),
                                                    ((0, 4), 0, [(0, 4)] * 3)])
    def test_chunk_of_an_empty_dim_gives_n_chunks(self, shape, dim, shapes):
        x = tape.ones(*shape)

        pieces = x.chunk(3, dim)

        assert [p.shape for p in pieces] == shapes

    @pytest.mark.parametrize("reduce", [lambda x: tape.logsumexp(x, 1), lambda x: x.std(1), lambda x: x.var(1),
                                        lambda x: x.amax(1), lambda x: x.flip(1), lambda x: tape.count_nonzero(x, 1)])
    def test_a_0d_tensor_refuses_dims_other_than_0_and_minus_1(self, reduce):
        x = tape.tensor(2.0)

        with pytest.raises(IndexError, match=r"^Dimension out of range \(expected to be in range of \[-1, 0\], "
                                             r"but got 1\)$"):
            reduce(x)

    def test_a_0d_tensor_takes_dim_0_and_minus_1(self):
        x = tape.tensor(2.0)

        values = [tape.logsumexp(x, 0).item(), tape.logsumexp(x, -1).item(), x.amax(0).item(), x.sum(-1).item()]

        assert values == [2.0, 2.0, 2.0, 2.0]

    @pytest.mark.parametrize("kwargs, text", [
        (dict(dim=(0, 1, 2, 3)), "linalg.matrix_norm: dim must be a 2-tuple. Got 0 1 2 3"),
        (dict(p="fro", dim=(0, 1, 2)), "linalg.matrix_norm: dim must be a 2-tuple. Got 0 1 2"),
    ])
    def test_tensor_norm_hands_a_long_dim_with_a_string_order_to_matrix_norm(self, kwargs, text):
        x = tape.ones(2, 2, 2, 2)

        with pytest.raises(RuntimeError, match=f"^{text}$"):
            x.norm(**kwargs)

    def test_tensor_norm_with_a_number_order_over_three_dims_is_a_vector_norm(self):
        x = tape.ones(2, 2, 2)

        assert x.norm(p=2, dim=(0, 1, 2)).item() == pytest.approx(2.8284271247461903)

    @pytest.mark.parametrize("shape, ord, dim, text", [
        ((0,), float("inf"), None, "linalg.vector_norm cannot compute the inf norm on an empty tensor because the "
                                   "operation does not have an identity"),
        ((2, 0), float("-inf"), 1, "linalg.vector_norm cannot compute the -inf norm on the dimension 1because this "
                                   "dimension is empty and the operation does not have an identity"),
        ((0, 2), float("inf"), -2, "linalg.vector_norm cannot compute the inf norm on the dimension -2because this "
                                   "dimension is empty and the operation does not have an identity"),
    ])
    def test_an_inf_norm_over_nothing_raises_pytorchs_error(self, shape, ord, dim, text):
        x = tape.ones(*shape)

        with pytest.raises(RuntimeError, match=f"^{text}$"):
            tape.linalg.vector_norm(x, ord, dim)

    @pytest.mark.parametrize("matrix, order", [([[float("nan"), 0.0], [0.0, 1.0]], 1),
                                               ([[1.0, float("nan")], [float("nan"), 1.0]], 2)])
    def test_cholesky_of_a_matrix_holding_nan_raises_linalg_error(self, matrix, order):
        A = tape.tensor(matrix)

        with pytest.raises(tape.linalg.LinAlgError,
                           match=f"^linalg.cholesky: The factorization could not be completed because the input is "
                                 rf"not positive-definite \(the leading minor of order {order} is not "
                                 r"positive-definite\).$"):
            tape.linalg.cholesky(A)

    def test_a_write_into_a_row_of_an_expanded_tensor_reaches_its_storage(self):
        x = tape.ones(3)
        expanded = x.expand(2, 3).detach()

        expanded[0][1] = 5.0

        assert (x.tolist(), expanded.tolist(), x._version) == ([1.0, 5.0, 1.0], [[1.0, 5.0, 1.0], [1.0, 5.0, 1.0]], 1)

    def test_a_write_into_all_of_an_expanded_tensor_raises_pytorchs_error(self):
        expanded = tape.ones(3).expand(2, 3).detach()

        with pytest.raises(RuntimeError, match="^unsupported operation: more than one element of the written-to "
                                               "tensor refers to a single memory location"):
            expanded.add_(1.0)


def _signs(values):
    return [math.copysign(1.0, v) for v in values]


class TestGraphMembership:
    """What requires grad and stays in the graph: outputs without a gradient,
    empty tensors, leaves changed in place, and structural zeros."""

    def test_slogdets_sign_requires_grad_and_sends_no_gradient(self):
        A = tape.tensor([[2.0, 1.0], [1.0, 3.0]], requires_grad=True)

        sign, logabsdet = tape.linalg.slogdet(A)
        (2 * sign + logabsdet).backward()

        assert (sign.requires_grad, type(sign.grad_fn).__name__) == (True, "LinalgSlogdetBackward0")
        assert A.grad.reshape(-1).tolist() == pytest.approx([0.6, -0.2, -0.2, 0.4])

    def test_the_0_norm_requires_grad_and_sends_no_gradient(self):
        x = tape.tensor([1.0, 0.0, 2.0], requires_grad=True)

        n = tape.linalg.vector_norm(x, 0)
        (n + x.sum()).backward()

        assert (n.item(), type(n.grad_fn).__name__, x.grad.tolist()) == (2.0, "LinalgVectorNormBackward0",
                                                                         [1.0, 1.0, 1.0])

    @pytest.mark.parametrize("join", [tape.cat, tape.hstack])
    def test_an_empty_leaf_that_is_joined_gets_an_empty_gradient(self, join):
        a = tape.ones(0, requires_grad=True)
        b = tape.tensor([1.0, 2.0], requires_grad=True)

        (join([a, b]) * tape.tensor([3.0, 4.0])).sum().backward()

        assert (a.grad.shape, b.grad.tolist()) == ((0,), [3.0, 4.0])

    def test_the_product_of_nothing_stays_in_the_graph(self):
        a = tape.ones(0, requires_grad=True)

        p = a.prod()
        p.backward()

        assert (p.item(), p.requires_grad, a.grad.shape) == (1.0, True, (0,))

    def test_an_in_place_add_into_an_empty_tensor_keeps_the_operands_gradient(self):
        a = tape.ones(0, requires_grad=True)
        t = tape.zeros(0)

        t.add_(a)
        t.sum().backward()

        assert (type(t.grad_fn).__name__, a.grad.shape) == ("AddBackward0", (0,))

    def test_an_in_place_op_on_a_detached_leaf_keeps_earlier_graphs(self):
        x = tape.tensor([1.0, 2.0], requires_grad=True)
        y = (x * 3.0).sum()

        x.detach().add_(2.0)
        (g,) = autograd.grad(y, x)

        assert (g.tolist(), x.tolist()) == ([3.0, 3.0], [3.0, 4.0])

    def test_an_in_place_op_under_no_grad_through_indexing_keeps_earlier_graphs(self):
        x = tape.tensor([1.0, 2.0], requires_grad=True)
        y = (x * 3.0).sum()

        with tape.no_grad():
            x[0].add_(2.0)
        (g,) = autograd.grad(y, x)

        assert (g.tolist(), x.tolist()) == ([3.0, 3.0], [3.0, 2.0])

    def test_a_graph_that_saved_a_leaf_changed_in_place_raises_the_version_error(self):
        x = tape.tensor([1.0, 2.0], requires_grad=True)
        y = (x * x).sum()

        x.detach().mul_(2.0)

        with pytest.raises(RuntimeError, match="one of the variables needed for gradient computation has been "
                                               "modified by an inplace operation"):
            autograd.grad(y, x)

    @pytest.mark.parametrize("name, expected", [("sqrt_", [0.25, 1.0]), ("exp_", [54.598150033144236, 1.0])])
    def test_an_in_place_op_that_saves_its_result_through_basic_indexing(self, name, expected):
        x = tape.tensor([4.0, 9.0], requires_grad=True)
        v = x * 1.0

        getattr(v[:1], name)()
        v.sum().backward()

        assert x.grad.tolist() == pytest.approx(expected)

    def test_a_structurally_zero_gradient_is_a_constant(self):
        x = tape.tensor([1.5, -0.5], requires_grad=True)
        w = tape.tensor([2.0, 3.0], requires_grad=True)

        gx, gw = autograd.grad((tape.ceil(x) * w).sum(), (x, w), create_graph=True)

        assert (gx.tolist(), gx.requires_grad, gw.tolist(), gw.requires_grad) == ([0.0, 0.0], False, [2.0, -0.0], True)

    def test_a_structurally_zero_gradient_is_plus_zero(self):
        x = tape.tensor([1.5, -0.5], requires_grad=True)

        (g,) = autograd.grad(-tape.floor(x).sum(), x, create_graph=True)

        assert _signs(g.tolist()) == [1.0, 1.0]
