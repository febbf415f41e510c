"""Pictures of autograd graphs: `to_dot` gives the Graphviz DOT source of the
graph behind tensors, one node per grad_fn as torchviz's make_dot draws it,
and `render` draws that to SVG or PNG through the optional `graphviz` package.
"""
import os
from collections import deque

from ._node import home_row, next_rows, node_type
from ._registry import LEAF, REGISTRY
from ._tensor import Tensor

__all__ = ["to_dot", "render"]

# Note [DOT of a graph]
# ~~~~~~~~~~~~~~~~~~~~~
# Nodes are the output tensors (green, labelled with their shapes), the
# grad_fns (labelled with their type names) and the AccumulateGrad nodes of
# leaves (blue, with the leaf's name and shape). Edges go from each output to
# its grad_fn and from each node to its next_functions, one per entry (x * x
# draws two edges to x's AccumulateGrad), None entries left out. Ids n0, n1,
# ... number the nodes in breadth-first order from the outputs, so equal
# graphs give equal text. A node is a tape row, found again by row number, so
# a subgraph that several nodes share is drawn once; the walk reads the rows
# through next_rows (the rule of next_functions) with a queue, which makes no
# Node object and no recursion, so a chain of a million ops draws too.

_HEADER = ("digraph {\n"
           "  node [shape=box, style=filled, fillcolor=lightgrey, fontname=monospace, fontsize=10];\n")
_OUTPUT_COLOR = "darkolivegreen1"  # torchviz's colours for outputs and leaves
_LEAF_COLOR = "lightblue"
_FORMATS = ("svg", "png")


def to_dot(t, *, params=None):
    """The Graphviz DOT source of the autograd graph behind `t`.

    Parameters
    ----------
    t : Tensor or list or tuple of Tensors
        The output(s) whose graph is drawn. A tensor without a grad_fn (a
        leaf, or one that does not require grad) is drawn alone.
    params : dict of str to Tensor, optional
        Names for tensors, as torchviz's make_dot takes them: a leaf's
        AccumulateGrad node (or an output) that is one of these tensors shows
        its name above its shape.

    Returns
    -------
    str
        A ``digraph``: the outputs (green, with their shapes), one node per
        grad_fn labelled with its type name (``MulBackward0``), leaves as
        ``AccumulateGrad`` nodes (blue, with name and shape), and an edge from
        each node to each node of its ``next_functions``. Node ids ``n0``,
        ``n1``, ... follow a breadth-first walk from the outputs, so the same
        graph always gives the same text.

    Examples
    --------
    >>> import tape
    >>> w = tape.tensor([1., 2.], requires_grad=True)
    >>> print(tape.viz.to_dot((w * 3).sum(), params={"w": w}))
    digraph {
      node [shape=box, style=filled, fillcolor=lightgrey, fontname=monospace, fontsize=10];
      n0 [label="()", fillcolor=darkolivegreen1];
      n1 [label="SumBackward0"];
      n2 [label="MulBackward0"];
      n3 [label="AccumulateGrad\\nw\\n(2)", fillcolor=lightblue];
      n0 -> n1;
      n1 -> n2;
      n2 -> n3;
    }
    <BLANKLINE>
    """
    outputs = _outputs(t)
    names = _names(params)
    nodes, edges = [], []
    ids = {}  # tape -> {row: node id}
    queue = deque()  # (tape, row, node id) of the nodes whose edges are still to draw
    op_lines = {}  # node class -> the label part of its nodes' lines

    def node_id(tp, r):
        if tp.graph_inputs and r in tp.graph_inputs:  # the graph goes on on another thread's tape
            tp, r = home_row(tp, r)
        seen = ids.setdefault(tp, {})
        nid = seen.get(r)
        if nid is None:
            nid = seen[r] = f"n{len(nodes)}"
            nodes.append(_node_line(tp, r, nid, names, op_lines))
            queue.append((tp, r, nid))
        return nid

    seen_outputs = set()
    for out in outputs:
        if id(out) in seen_outputs:
            continue
        seen_outputs.add(id(out))
        oid = f"n{len(nodes)}"
        nodes.append(f"  {oid} [label={_label(names.get(id(out)), out.shape)}, fillcolor={_OUTPUT_COLOR}];\n")
        fn = out.grad_fn
        if fn is None:
            continue
        edges.append(f"  {oid} -> {node_id(fn._ep.tape, fn.row())};\n")
        while queue:
            tp, r, nid = queue.popleft()
            for i in next_rows(tp, r):
                if i >= 0:
                    edges.append(f"  {nid} -> {node_id(tp, i)};\n")
    return "".join((_HEADER, *nodes, *edges, "}\n"))


def render(t, path, format=None, *, params=None):
    """Draw the graph of :func:`to_dot` into an SVG or PNG file.

    Needs the ``graphviz`` Python package (``pip install graphviz``, or the
    ``viz`` extra: ``pip install "tape[viz]"``) and Graphviz's ``dot``
    program (Debian and Ubuntu: ``apt-get install graphviz``).

    Parameters
    ----------
    t : Tensor or list or tuple of Tensors
        The output(s) whose graph is drawn, as for :func:`to_dot`.
    path : str or os.PathLike
        The file to write.
    format : {"svg", "png"}, optional
        The image format; by default the suffix of `path`.
    params : dict of str to Tensor, optional
        Names for tensors, as for :func:`to_dot`.

    Returns
    -------
    str
        `path`, written.

    Raises
    ------
    ValueError
        For a format other than SVG and PNG.
    ImportError
        When the ``graphviz`` package is not installed.
    RuntimeError
        When Graphviz's ``dot`` program is not found.

    Examples
    --------
    >>> import pathlib, tempfile, tape
    >>> x = tape.tensor(2.0, requires_grad=True)
    >>> path = tape.viz.render((x * x).sin(), pathlib.Path(tempfile.mkdtemp()) / "graph.svg")
    >>> pathlib.Path(path).read_text().count("<svg")
    1
    """
    path = os.fspath(path)
    fmt = (format if format is not None else os.path.splitext(path)[1][1:]).lower()
    if fmt not in _FORMATS:
        raise ValueError(f"tape.viz.render writes svg or png, not {fmt!r} (from "
                         f"{'format' if format is not None else 'the suffix of ' + repr(path)})")
    source = to_dot(t, params=params)
    try:
        import graphviz
    except ImportError:
        raise ImportError("tape.viz.render needs the graphviz Python package: pip install graphviz "
                          "(or pip install \"tape[viz]\")", name="graphviz") from None
    try:
        image = graphviz.pipe("dot", fmt, source.encode())
    except graphviz.ExecutableNotFound as e:
        raise RuntimeError("tape.viz.render needs Graphviz's dot program on PATH: install Graphviz (Debian "
                           "and Ubuntu: apt-get install graphviz; macOS: brew install graphviz)") from e
    with open(path, "wb") as f:
        f.write(image)
    return path


def _outputs(t):
    if isinstance(t, Tensor):
        return (t,)
    if isinstance(t, (list, tuple)) and all(isinstance(o, Tensor) for o in t):
        return t
    raise TypeError(f"to_dot() expects a Tensor or a list or tuple of Tensors, but got {type(t).__name__}")


def _names(params):
    """id(tensor) -> name, for the tensors of `params`."""
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise TypeError(f"to_dot() expects params as a dict of names to Tensors, but got "
                        f"{type(params).__name__}")
    names = {}
    for name, p in params.items():
        if not isinstance(p, Tensor):
            raise TypeError(f"to_dot() expects params as a dict of names to Tensors, but params[{name!r}] "
                            f"is a {type(p).__name__}")
        names[id(p)] = str(name)
    return names


def _node_line(tp, r, nid, names, op_lines):
    """The DOT statement of the node at row r (see Note [DOT of a graph])."""
    op = tp.m_op[r]
    if op == LEAF:
        leaf = tp.tensor_at(r)  # next_rows names a leaf's row only while its tensor lives
        return (f"  {nid} [label={_label(names.get(id(leaf)), leaf.shape, REGISTRY[op].grad_fn)}, "
                f"fillcolor={_LEAF_COLOR}];\n")
    cls = node_type(tp, r)  # a custom Function's node is named by its class
    rest = op_lines.get(cls)
    if rest is None:
        rest = op_lines[cls] = f" [label={_quote(cls.__name__)}];\n"
    return f"  {nid}{rest}"


def _label(name, shape, kind=None):
    """A quoted label of lines: `kind`, `name` (those given) and the shape,
    written as torchviz writes sizes: (2, 3), (3), ()."""
    shape_text = "(" + ", ".join(map(str, shape)) + ")"
    return _quote("\n".join(s for s in (kind, name, shape_text) if s is not None))


def _quote(text):
    """`text` as a DOT string: backslashes and quotes escaped, so a name
    cannot end the string or act as a Graphviz escape (\\l, \\N), and line
    breaks as DOT's \\n."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
