"""tape.viz: the DOT source of autograd graphs (exact text for known graphs,
shared nodes drawn once, names and shapes, a million-op chain) and rendering
through graphviz, skipped where the graphviz package or dot is missing.
"""
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import tape
from test_lifetime import _in_fresh_thread

HEADER = ("digraph {\n"
          "  node [shape=box, style=filled, fillcolor=lightgrey, fontname=monospace, fontsize=10];\n")


def _labels(dot):
    return re.findall(r'label="((?:[^"\\]|\\.)*)"', dot)


def _edges(dot):
    return re.findall(r"^  (n\d+ -> n\d+);$", dot, re.M)


def _leaves():
    return tape.tensor([1., 2.], requires_grad=True), tape.tensor([3., 4.], requires_grad=True)


# -- to_dot -------------------------------------------------------------------------

def test_dot_of_mul_sin_sum_is_exact():
    x, y = _leaves()

    dot = tape.viz.to_dot((x * y).sin().sum())

    assert dot == HEADER + (
        '  n0 [label="()", fillcolor=darkolivegreen1];\n'
        '  n1 [label="SumBackward0"];\n'
        '  n2 [label="SinBackward0"];\n'
        '  n3 [label="MulBackward0"];\n'
        '  n4 [label="AccumulateGrad\\n(2)", fillcolor=lightblue];\n'
        '  n5 [label="AccumulateGrad\\n(2)", fillcolor=lightblue];\n'
        "  n0 -> n1;\n"
        "  n1 -> n2;\n"
        "  n2 -> n3;\n"
        "  n3 -> n4;\n"
        "  n3 -> n5;\n"
        "}\n")


def test_dot_is_the_same_text_for_the_same_graph_built_twice():
    def build():
        x, y = _leaves()
        return tape.viz.to_dot((x * y).exp().mean())

    assert build() == build()


def test_shared_subexpression_is_drawn_once_with_an_edge_per_use():
    x, _ = _leaves()
    a = x.exp()

    dot = tape.viz.to_dot((a * a + a).sum())

    assert (_labels(dot).count("ExpBackward0"), _edges(dot)) == (
        1, ["n0 -> n1", "n1 -> n2", "n2 -> n3", "n2 -> n4", "n3 -> n4", "n3 -> n4", "n4 -> n5"])


def test_a_leaf_used_twice_has_one_node_and_two_edges():
    x, _ = _leaves()

    dot = tape.viz.to_dot(x * x)

    assert _edges(dot) == ["n0 -> n1", "n1 -> n2", "n1 -> n2"]


def test_leaves_are_labelled_with_their_shapes():
    w = tape.ones(3, 2, requires_grad=True)
    s = tape.tensor(2.0, requires_grad=True)

    dot = tape.viz.to_dot((w * s).sum())

    assert _labels(dot)[3:] == ["AccumulateGrad\\n(3, 2)", "AccumulateGrad\\n()"]


def test_params_name_the_leaves():
    w = tape.ones(3, 2, requires_grad=True)
    v = tape.ones(2, requires_grad=True)

    dot = tape.viz.to_dot((w @ v).sum(), params={"weight": w, "v": v})

    assert _labels(dot)[3:] == ["AccumulateGrad\\nweight\\n(3, 2)", "AccumulateGrad\\nv\\n(2)"]


def test_params_name_an_output():
    x, y = _leaves()
    loss = (x * y).sum()

    dot = tape.viz.to_dot(loss, params={"loss": loss})

    assert _labels(dot)[0] == "loss\\n()"


def test_labels_escape_quotes_and_backslashes():
    x, _ = _leaves()

    dot = tape.viz.to_dot(x.sin(), params={'say "hi"\\n': x})

    assert '[label="AccumulateGrad\\nsay \\"hi\\"\\\\n\\n(2)", fillcolor=lightblue]' in dot


def test_a_tensor_that_does_not_require_grad_is_drawn_alone():
    c = tape.ones(2, 3) * 2

    dot = tape.viz.to_dot(c)

    assert dot == HEADER + '  n0 [label="(2, 3)", fillcolor=darkolivegreen1];\n}\n'


def test_a_leaf_that_requires_grad_is_drawn_alone():
    x, _ = _leaves()

    dot = tape.viz.to_dot(x)

    assert dot == HEADER + '  n0 [label="(2)", fillcolor=darkolivegreen1];\n}\n'


def test_an_input_that_does_not_require_grad_has_no_edge():
    x, _ = _leaves()
    c = tape.tensor([5., 6.])

    dot = tape.viz.to_dot((x * c + 2.0).sum())

    assert (_labels(dot)[1:], _edges(dot)) == (
        ["SumBackward0", "AddBackward0", "MulBackward0", "AccumulateGrad\\n(2)"],
        ["n0 -> n1", "n1 -> n2", "n2 -> n3", "n3 -> n4"])


def test_implicit_broadcasts_are_not_nodes():
    w = tape.ones(3, 2, requires_grad=True)
    b = tape.tensor(0.5, requires_grad=True)

    dot = tape.viz.to_dot(w + b)

    assert _labels(dot)[1:] == ["AddBackward0", "AccumulateGrad\\n(3, 2)", "AccumulateGrad\\n()"]


def test_multiple_outputs_share_their_graph():
    x, y = _leaves()
    z = x.sin()

    dot = tape.viz.to_dot([z, (z * y).sum()])

    assert dot == HEADER + (
        '  n0 [label="(2)", fillcolor=darkolivegreen1];\n'
        '  n1 [label="SinBackward0"];\n'
        '  n2 [label="AccumulateGrad\\n(2)", fillcolor=lightblue];\n'
        '  n3 [label="()", fillcolor=darkolivegreen1];\n'
        '  n4 [label="SumBackward0"];\n'
        '  n5 [label="MulBackward0"];\n'
        '  n6 [label="AccumulateGrad\\n(2)", fillcolor=lightblue];\n'
        "  n0 -> n1;\n"
        "  n1 -> n2;\n"
        "  n3 -> n4;\n"
        "  n4 -> n5;\n"
        "  n5 -> n1;\n"
        "  n5 -> n6;\n"
        "}\n")


class _Scaled(tape.autograd.Function):
    @staticmethod
    def forward(ctx, x, k, w):
        ctx.save_for_backward(w)
        return x * w * k

    @staticmethod
    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        return g * w, None, None


def test_a_custom_function_is_one_node_named_by_its_class_with_an_edge_per_tensor_argument():
    x, y = _leaves()

    dot = tape.viz.to_dot(_Scaled.apply(x * 2, 3.0, y.detach()).sum())

    assert _labels(dot) == ["()", "SumBackward0", "_ScaledBackward", "MulBackward0", "AccumulateGrad\\n(2)"]
    assert _edges(dot) == ["n0 -> n1", "n1 -> n2", "n2 -> n3", "n3 -> n4"]


def test_an_output_given_twice_is_drawn_once():
    x, _ = _leaves()
    z = x.sin()

    assert tape.viz.to_dot((z, z)) == tape.viz.to_dot(z)


def test_the_graph_is_drawn_after_its_backward_freed_it():
    x, y = _leaves()
    loss = (x * y).sin().sum()
    before = tape.viz.to_dot(loss)

    loss.backward()

    assert tape.viz.to_dot(loss) == before


def test_a_million_op_chain_draws_without_recursion():
    def draw():
        x = tape.tensor(1.0, requires_grad=True)
        y = x
        for _ in range(1_000_000):
            y = -y  # the cheapest op to record
        dot = tape.viz.to_dot(y)
        return dot.count(" -> "), dot[-40:]

    # the output's edge, one per op, and the edge of the last op to its leaf
    assert _in_fresh_thread(draw) == (1_000_001, ' -> n1000000;\n  n1000000 -> n1000001;\n}\n')


def test_to_dot_refuses_what_is_not_a_tensor():
    with pytest.raises(TypeError, match="expects a Tensor or a list or tuple of Tensors, but got float"):
        tape.viz.to_dot(1.5)


def test_to_dot_refuses_params_that_are_not_tensors():
    x, _ = _leaves()

    with pytest.raises(TypeError, match=r"params\['x'\] is a list"):
        tape.viz.to_dot(x.sin(), params={"x": [1.0, 2.0]})


def test_the_tape_works_after_a_refused_call():
    x, y = _leaves()
    with pytest.raises(TypeError):
        tape.viz.to_dot([x.sin(), "not a tensor"])

    (x * y).sum().backward()

    assert x.grad.tolist() == [3.0, 4.0]


def test_import_tape_gives_tape_viz():
    script = "import tape; print(tape.viz.__all__, 'viz' in tape.__all__)"

    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)

    assert out.stdout == "['to_dot', 'render'] True\n"


# -- render ---------------------------------------------------------------------------

def _needs_dot():
    pytest.importorskip("graphviz")
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot program is not installed")


def test_render_writes_svg(tmp_path):
    _needs_dot()
    x, y = _leaves()

    path = tape.viz.render((x * y).sin().sum(), tmp_path / "graph.svg")

    assert "SinBackward0" in pathlib.Path(path).read_text()


def test_render_writes_png(tmp_path):
    _needs_dot()
    x, y = _leaves()

    path = tape.viz.render((x * y).sin().sum(), tmp_path / "graph.png")

    assert pathlib.Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_render_takes_the_format_over_the_suffix(tmp_path):
    _needs_dot()
    x, _ = _leaves()

    path = tape.viz.render(x.exp(), tmp_path / "graph.img", format="svg")

    assert path == str(tmp_path / "graph.img") and "ExpBackward0" in pathlib.Path(path).read_text()


def test_render_refuses_other_formats(tmp_path):
    x, _ = _leaves()

    with pytest.raises(ValueError, match="writes svg or png, not 'pdf'"):
        tape.viz.render(x.exp(), tmp_path / "graph.pdf")


def test_render_without_the_graphviz_package_names_it_and_pip(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)  # makes `import graphviz` raise ImportError
    x, _ = _leaves()

    with pytest.raises(ImportError, match="needs the graphviz Python package: pip install graphviz"):
        tape.viz.render(x.exp(), tmp_path / "graph.svg")


def test_render_without_dot_says_to_install_graphviz(tmp_path, monkeypatch):
    pytest.importorskip("graphviz")
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without dot
    x, _ = _leaves()

    with pytest.raises(RuntimeError, match="needs Graphviz's dot program on PATH"):
        tape.viz.render(x.exp(), tmp_path / "graph.svg")
