"""Saved tensors on the nodes (`_saved_*`, `_raw_saved_*`: their identity and lifetime; every op's names and
values are in test_saved_names.py), node metadata,
node hooks and pre-hooks, multi-grad hooks and post-accumulate-grad hooks.
The expected values, names, orders and messages were checked against
PyTorch 2.13."""
import math

import pytest

import tape
from tape.autograd.graph import register_multi_grad_hook, saved_tensors_hooks

FREED = ("Trying to backward through the graph a second time (or directly access saved tensors after they "
         "have already been freed). Saved intermediate values of the graph are freed when you call "
         ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph "
         "a second time or if you need to access saved tensors after calling backward.")


def leaves():
    x = tape.tensor([0.5, 1.5, 2.0], requires_grad=True)
    w = tape.tensor([1.25, 0.75, 3.0], requires_grad=True)
    m = tape.tensor([[1.0, 2.0], [3.0, 4.5]], requires_grad=True)
    n = tape.tensor([[0.5, 1.0], [2.0, 1.5]], requires_grad=True)
    v = tape.tensor([1.0, 2.0], requires_grad=True)
    return {"x": x, "w": w, "m": m, "n": n, "v": v}


def test_ops_that_save_no_tensors_have_no_raw_saved_attributes():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    assert not [a for a in dir((x + x).grad_fn) if a.startswith("_raw_saved_")]
    assert [a for a in dir((x * x).grad_fn) if a.startswith("_raw_saved_")] == ["_raw_saved_other",
                                                                                  "_raw_saved_self"]


def test_a_saved_non_leaf_input_is_itself_while_alive_then_a_tensor_in_its_place():
    x = tape.tensor([0.5, 1.5, 2.0], requires_grad=True)
    h = x * 3
    z = h.sin()
    assert z.grad_fn._saved_self is h
    node = h.grad_fn
    del h
    s = z.grad_fn._saved_self
    assert s.grad_fn == node and s.requires_grad and s.tolist() == [1.5, 4.5, 6.0]


def test_a_saved_constant_tensor_is_itself_and_an_unsaved_operand_is_none():
    x = tape.tensor([0.5, 1.5], requires_grad=True)
    c = tape.tensor([1.25, 0.75])
    assert (x * c).grad_fn._saved_other is c
    assert (x * c).grad_fn._saved_self is None
    assert (c * x).grad_fn._saved_self is c
    assert (c * x).grad_fn._saved_other is None


def test_a_product_saves_only_the_operand_its_needed_gradient_reads():
    # derivatives.yaml: mm saves self only if mat2 requires grad, and mat2
    # only if self does (so mv, dot and bmm); known values from PyTorch 2.13
    a = tape.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], requires_grad=True)
    b = tape.tensor([[1.0, 2.0], [-0.5, 0.5], [3.0, -1.0]])
    v = tape.tensor([2.0, -1.0, 0.5])
    packed = []
    with tape.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t.tolist()) or t, lambda t: t):
        ys = [a.mm(b), b.t().mm(a.t()), a.mv(v), tape.mv(b.t(), a[0]), a[0].dot(v),
              a.unsqueeze(0).bmm(b.unsqueeze(0))]
    bt = [[1.0, -0.5, 3.0], [2.0, 0.5, -1.0]]
    assert packed == [b.tolist(), bt, v.tolist(), bt, v.tolist(), [b.tolist()]]
    unsaved = [[name for name in dir(y.grad_fn) if name.startswith("_saved_") and getattr(y.grad_fn, name) is None]
               for y in ys]
    assert unsaved == [["_saved_self"], ["_saved_mat2"], ["_saved_self"], ["_saved_vec"], ["_saved_self"],
                       ["_saved_self"]]
    loss = sum((y ** 2).sum() for y in ys)
    loss.backward(retain_graph=True)  # the native sweep
    assert a.grad.tolist() == [[56.0, -46.0, 186.0], [50.75, 9.5, -36.625]]
    (g,) = tape.autograd.grad(loss, a, create_graph=True)  # the re-taped one
    assert g.tolist() == [[56.0, -46.0, 186.0], [50.75, 9.5, -36.625]]
    (h,) = tape.autograd.grad(g.sum(), a)
    assert h.tolist() == [[64.0, -14.0, 75.0], [45.0, -9.0, 55.5]]


def test_a_0d_saved_input_has_its_value_and_place():
    a = tape.tensor(0.5, requires_grad=True)
    b = a * 3
    s = b.sin().grad_fn._saved_self
    assert s.item() == 1.5 and s.grad_fn == b.grad_fn


def test_saved_tensors_are_freed_by_backward_and_kept_by_retain_graph():
    m = tape.tensor([[1.0, 2.0], [3.0, 4.5]], requires_grad=True)
    y = m.softmax(1)
    y.sum().backward()
    with pytest.raises(RuntimeError) as e:
        y.grad_fn._saved_result
    assert str(e.value) == FREED
    assert y.grad_fn._saved_dim == 1  # attributes that are no tensors stay
    x = tape.tensor([0.5, 1.5], requires_grad=True)
    y = x * 2.0
    y.sum().backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.grad_fn._saved_other
    y = x.exp()
    y.sum().backward(retain_graph=True)
    assert y.grad_fn._saved_result.tolist() == pytest.approx([math.exp(0.5), math.exp(1.5)])


def test_a_saved_tensor_modified_in_place_refuses_to_unpack():
    x = tape.tensor([0.5, 1.5], requires_grad=True)
    e = x.exp()
    node = e.grad_fn
    e.add_(1)
    with pytest.raises(RuntimeError, match="one of the variables needed for gradient computation has been "
                                           "modified by an inplace operation"):
        node._saved_result


def order_of_packs(f, t):
    """The saved tensors pack_hook saw, named as in `t` ("out" the result)."""
    seen = []
    with saved_tensors_hooks(lambda s: seen.append(s) or s, lambda p: p):
        y = f(t)
    names = []
    for s in seen:
        name = next((k for k, v in t.items() if s is v), None)
        names.append(name or ("out" if s.shape == y.shape and s.tolist() == y.tolist() else list(s.shape)))
    return names


@pytest.mark.parametrize("f, order", [
    (lambda t: t["x"] * t["w"], ["w", "x"]),
    (lambda t: t["x"] / t["w"], ["w", "x"]),
    (lambda t: t["x"] ** t["w"], ["w", "x", "out"]),
    (lambda t: t["x"].sin(), ["x"]),
    (lambda t: t["x"].exp(), ["out"]),
    (lambda t: t["x"] ** 2, ["x"]),
    (lambda t: t["x"] * 2.0, []),
    (lambda t: t["x"] * t["c"], ["c"]),
    (lambda t: tape.hypot(t["x"], t["w"]), ["w", "x", "out"]),
    (lambda t: t["c"] ** t["w"], ["w", "c", "out"]),
    (lambda t: t["m"] @ t["n"], ["n", "m"]),
    (lambda t: t["x"].view(3, 1) @ t["w"].view(1, 3), [[1, 3], [3, 1]]),
    (lambda t: t["m3"] @ t["x"], ["m3", "x"]),
    (lambda t: t["x"] @ t["w"], ["x", "w"]),
])
def test_saved_tensors_hooks_pack_in_pytorchs_order(f, order):
    t = leaves()
    t["c"] = tape.tensor([1.25, 0.75, 3.0])
    t["m3"] = tape.ones(2, 3, requires_grad=True)
    assert order_of_packs(f, t) == order


def test_under_hooks_a_saved_tensor_is_the_unpacked_value_in_its_place():
    x = tape.tensor([0.5, 1.5], requires_grad=True)
    returned = []

    def unpack(p):
        returned.append(p * 10)
        return returned[-1]
    with saved_tensors_hooks(lambda t: t.detach() * 1, unpack):
        h = x * 2
        y = x.sin()
        e = h.exp()
    s = y.grad_fn._saved_self
    assert s is not returned[-1] and s.tolist() == [5.0, 15.0]
    assert s.requires_grad and s.is_leaf and s.grad_fn is None
    r = e.grad_fn._saved_result
    assert r.grad_fn == e.grad_fn and r.tolist() == pytest.approx([10 * math.exp(1.0), 10 * math.exp(3.0)])
    assert y.grad_fn._saved_self is not y.grad_fn._saved_self  # unpacked at each access


def test_raw_saved_tensor_register_hooks_packs_now_and_unpacks_where_read():
    x = tape.tensor([0.5, 1.5, 2.0], requires_grad=True)
    w = tape.tensor([1.25, 0.75, 3.0], requires_grad=True)
    y = x * w
    raw = y.grad_fn._raw_saved_self
    assert y.grad_fn._raw_saved_self is raw
    calls = []
    raw.register_hooks(lambda t: calls.append("pack") or t * 2, lambda p: calls.append("unpack") or p + 1)
    assert calls == ["pack"]
    assert y.grad_fn._saved_self.tolist() == [2.0, 4.0, 5.0] and calls == ["pack", "unpack"]
    with pytest.raises(RuntimeError) as e:
        raw.register_hooks(lambda t: t, lambda t: t)
    assert str(e.value) == ("Calling register_hooks on a saved tensor whose hooks have already been set. "
                            "Hint: only one pair of hooks is allowed at a time.")
    y.sum().backward()
    assert w.grad.tolist() == [2.0, 4.0, 5.0] and x.grad.tolist() == [1.25, 0.75, 3.0]
    assert calls == ["pack", "unpack", "unpack"]
    with pytest.raises(RuntimeError) as e:
        raw.register_hooks(lambda t: t, lambda t: t)
    assert str(e.value) == (
        "Calling register_hooks on a saved tensor after it has been freed. Saved intermediate values of the "
        "graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
        "backward through the graph a second time or if you need to access saved variables after calling "
        "backward.")


def test_raw_saved_tensor_refusals():
    x = tape.tensor([0.5, 1.5], requires_grad=True)
    with pytest.raises(RuntimeError, match="^Calling register_hooks on a saved tensor with value None is "
                                           "forbidden$"):
        (x * 2.0).grad_fn._raw_saved_self.register_hooks(lambda t: t, lambda t: t)
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        y = x * x
    with pytest.raises(RuntimeError, match="whose hooks have already been set"):
        y.grad_fn._raw_saved_self.register_hooks(lambda t: t, lambda t: t)
    y = x * x
    y.grad_fn._raw_saved_self.register_hooks(lambda t: t, lambda t: 5)
    with pytest.raises(TypeError, match="^Output of saved tensor unpack_hook expected to be a Tensor but got "
                                        "result of type int$"):
        y.grad_fn._saved_self


def test_node_metadata_is_one_dict_per_node():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = x.sin()
    assert y.grad_fn.metadata == {}
    y.grad_fn.metadata["k"] = 1
    assert y.grad_fn.metadata == {"k": 1} and y.grad_fn.metadata is y.grad_fn.metadata
    assert x.cos().grad_fn.metadata == {}


def test_node_hooks_and_prehooks_run_in_pytorchs_order_and_replace_gradients():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    w = tape.tensor([3.0, 4.0], requires_grad=True)
    y = x * w
    log = []
    y.register_hook(lambda g: log.append(("tensor", g.tolist())) or g * 2)
    y.grad_fn.register_prehook(lambda go: log.append(("pre", [g.tolist() for g in go])) or (go[0] + 1,))
    y.grad_fn.register_hook(lambda gi, go: log.append(("post", [g.tolist() for g in gi], [g.tolist() for g in go]))
                            or (gi[0] * 10, gi[1]))
    y.retain_grad()
    y.sum().backward()
    assert log == [("tensor", [1.0, 1.0]), ("pre", [[2.0, 2.0]]),
                   ("post", [[9.0, 12.0], [3.0, 6.0]], [[3.0, 3.0]])]
    assert (x.grad.tolist(), w.grad.tolist(), y.grad.tolist()) == ([90.0, 120.0], [3.0, 6.0], [2.0, 2.0])


def test_a_node_hook_sees_none_for_an_input_that_needs_no_gradient_and_handles_remove_hooks():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    y = x * 2.0
    handle = y.grad_fn.register_hook(lambda gi, go: seen.append((gi[0].tolist(), gi[1], go[0].tolist())))
    y.sum().backward(retain_graph=True)
    assert seen == [([2.0, 2.0], None, [1.0, 1.0])]
    handle.remove()
    y.sum().backward()
    assert len(seen) == 1 and x.grad.tolist() == [4.0, 4.0]


@pytest.mark.parametrize("create_graph", [False, True])
def test_accumulate_grad_node_hooks_run_around_the_accumulation(create_graph):
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    acc = y.grad_fn.next_functions[0][0]
    log = []
    x.register_hook(lambda g: log.append(("tensor", g.tolist())) or g * 2)
    acc.register_prehook(lambda go: log.append(("pre", [g.tolist() for g in go])) or (go[0] + 1,))
    acc.register_hook(lambda gi, go: log.append(("post", gi, [g.tolist() for g in go], x.grad.tolist())))
    y.sum().backward(create_graph=create_graph)
    assert log == [("tensor", [3.0, 3.0]), ("pre", [[6.0, 6.0]]), ("post", (), [[7.0, 7.0]], [7.0, 7.0])]
    assert x.grad.tolist() == [7.0, 7.0]
    log.clear()
    tape.autograd.grad((x * 3).sum(), x)
    assert log == [("tensor", [3.0, 3.0])]


def test_autograd_grad_does_not_run_the_node_of_its_input():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2.0
    z = y.sin()
    ran = []
    y.grad_fn.register_prehook(lambda go: ran.append("pre"))
    z.grad_fn.register_hook(lambda gi, go: ran.append("post"))
    tape.autograd.grad(z.sum(), y)
    assert ran == ["post"]


@pytest.mark.parametrize("register, message, error", [
    (lambda n: n.register_hook(lambda gi, go: (gi[0], gi[0])), "can't replace a None gradient with a non-None value",
     RuntimeError),
    (lambda n: n.register_prehook(lambda go: (go[0], go[0])),
     "hook '<lambda>' has returned an incorrect number of values (got 2, but expected 1)", RuntimeError),
    (lambda n: n.register_hook(lambda gi, go: 5), "expected tuple, but hook returned 'int'", TypeError),
    (lambda n: n.register_hook(lambda gi, go: (tape.ones(3),)),
     "hook '<lambda>' has returned an incorrect number of values (got 1, but expected 2)", RuntimeError),
    (lambda n: n.register_hook(lambda gi, go: (tape.ones(3), None)), "hook '<lambda>' has changed the size of value",
     RuntimeError),
    (lambda n: n.register_prehook(lambda go: (tape.ones(3),)), "hook '<lambda>' has changed the size of value",
     RuntimeError),
])
def test_node_hook_results_are_checked_as_pytorchs(register, message, error):
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2.0
    register(y.grad_fn)
    with pytest.raises(error) as e:
        y.sum().backward()
    assert str(e.value) == message


def test_multi_grad_hook_all_runs_once_per_backward_with_every_reached_gradient():
    a, b, c = (tape.tensor(v, requires_grad=True) for v in (1.0, 2.0, 3.0))
    calls = []
    handle = register_multi_grad_hook((a, b, c), lambda grads: calls.append(
        [None if g is None else g.item() for g in grads]))
    (a * 2 + b * 3).backward()
    (a * 2 + b * 3 + c * c).backward()
    assert calls == [[2.0, 3.0, None], [2.0, 3.0, 6.0]]
    handle.remove()
    (a * 2).backward()
    assert len(calls) == 2
    i, j = a * 1, b * 1
    register_multi_grad_hook((i, j), lambda grads: calls.append([g.item() for g in grads]))
    (i * 5 + j * 7).backward()
    assert calls[2:] == [[5.0, 7.0]]


def test_multi_grad_hook_any_runs_on_the_first_gradient_of_each_backward():
    a, b = tape.tensor(1.0, requires_grad=True), tape.tensor(2.0, requires_grad=True)
    calls = []
    register_multi_grad_hook((a, b), lambda g: calls.append(g.item()), mode="any")
    (a * 2 + b * 3).backward()
    (a * 4).backward()
    assert len(calls) == 2 and calls[0] in (2.0, 3.0) and calls[1] == 4.0
    with pytest.raises(ValueError) as e:
        register_multi_grad_hook((a, b), lambda g: None, mode="x")
    assert str(e.value) == "Expects mode to be one of ('all', 'any') but got x"


def test_post_accumulate_grad_hooks_run_after_backward_accumulates():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    handle = x.register_post_accumulate_grad_hook(lambda t: seen.append((t is x, t.grad.tolist())))
    (x * 3).sum().backward()
    assert seen == [(True, [3.0, 3.0])]
    tape.autograd.grad((x * 3).sum(), x)
    assert len(seen) == 1
    (x * 3).sum().backward()
    assert seen[1] == (True, [6.0, 6.0])
    handle.remove()
    (x * 3).sum().backward()
    assert len(seen) == 2 and x.grad.tolist() == [9.0, 9.0]


def test_post_accumulate_grad_hooks_are_for_leaves_that_require_grad():
    x = tape.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="^post accumulate grad hooks cannot be registered on non-leaf "
                                           "tensors$"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="^cannot register a hook on a tensor that doesn't require gradient$"):
        tape.ones(2).register_post_accumulate_grad_hook(lambda t: None)


def test_the_arguments_a_node_shows_survive_compaction_and_backward():
    a = tape.tensor([[1.0, 2.5, 0.5], [3.0, -1.0, 2.0]], requires_grad=True)
    y = a.sum(-1, keepdim=True)
    values, indices = a.max(1)
    for _ in range(3):
        (a * 2).sin()  # rows that die
    tape._tape.state.tape.compact()
    assert (y.grad_fn._saved_dim, y.grad_fn._saved_keepdim) == ((18446744073709551615,), True)
    assert values.grad_fn._saved_indices.tolist() == indices.tolist() == [1, 0]
    values.sum().backward()
    assert values.grad_fn._saved_dim == 1 and values.grad_fn._saved_keepdim is False
    with pytest.raises(RuntimeError) as e:
        values.grad_fn._saved_indices
    assert str(e.value) == FREED


def test_under_hooks_a_saved_index_is_what_unpack_hook_returns():
    x = tape.tensor([3.0, 1.0, 2.0], requires_grad=True)
    packed = []
    with saved_tensors_hooks(lambda t: packed.append(t.tolist()) or ("packed", t), lambda p: p[1] * 10):
        y = x.sort().values
    assert packed == [[1, 2, 0]]
    assert y.grad_fn._saved_indices.tolist() == [10, 20, 0]
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]


def test_mm_saves_each_operand_only_for_the_others_gradient():
    m = tape.tensor([[1.0, 2.0], [3.0, 4.5]], requires_grad=True)
    n = tape.tensor([[0.5, 1.0], [2.0, 1.5]])
    h = m * 1
    y = h @ n
    assert y.grad_fn._saved_self is None and y.grad_fn._saved_mat2 is n
    h.mul_(2)  # not saved: only mat2's gradient would read it
    y.sum().backward()
    assert m.grad.tolist() == [[1.5, 3.5], [1.5, 3.5]]
    y = (m * 1) @ n
    n.mul_(2)  # saved for self's gradient
    with pytest.raises(RuntimeError, match="^one of the variables needed for gradient computation has been "
                                           "modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.parametrize("f", [lambda x: x.sort()[0], lambda x: x.max(0)[0], lambda x: x.topk(1)[0],
                               lambda x: x.index_select(0, tape.tensor([1])), lambda x: x.gather(0, tape.tensor([1]))],
                         ids=["sort", "max", "topk", "index_select", "gather"])
def test_a_second_backward_through_a_saved_index_is_refused(f):
    x = tape.tensor([3.0, 1.0, 2.0], requires_grad=True)
    y = f(x).sum()
    y.backward()
    with pytest.raises(RuntimeError) as e:
        y.backward()
    assert str(e.value) == FREED


def test_raw_saved_index_register_hooks_packs_it_now_and_unpacks_where_read():
    x = tape.tensor([3.0, 1.0, 2.0], requires_grad=True)
    y = x.sort()[0]
    raw = y.grad_fn._raw_saved_indices
    assert raw is y.grad_fn._raw_saved_indices
    packed = []
    raw.register_hooks(lambda t: packed.append(t.tolist()) or t * 2, lambda p: p // 2)
    assert packed == [[1, 2, 0]] and y.grad_fn._saved_indices.tolist() == [1, 2, 0]
    with pytest.raises(RuntimeError, match="^Calling register_hooks on a saved tensor whose hooks have already "
                                           "been set"):
        raw.register_hooks(lambda t: t, lambda p: p)
    (y * tape.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert x.grad.tolist() == [3.0, 1.0, 2.0]
    with pytest.raises(RuntimeError, match="^Calling register_hooks on a saved tensor after it has been freed"):
        raw.register_hooks(lambda t: t, lambda p: p)
