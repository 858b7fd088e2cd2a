"""Drawing the autograd graph: ``tr.viz.graph(loss)``.

A picture of what produced a tensor, drawn from the same nodes the engine walks backward:

* **leaves** (boxes): parameters by the name ``params`` gives them, other inputs;
* **ops** (ellipses): the op's class name, its output shape and dtype;
* **edges** from each input to the op that consumed it, as the engine sees them (after a
  recorded in-place write, the state of the input the op really read:
  :func:`tinygrad_rnn.engine.as_seen_by`);
* **time**: ops recorded inside :func:`tinygrad_rnn.engine.record_scope` blocks are grouped
  into one cluster per label. The autograd recurrent layers open one block per layer and one
  per step, so an unrolled network is drawn as a row of clusters "t = 0", "t = 1", ...;
  large graphs collapse each step to one node;
* **gradients**: the norm of each tensor's gradient, printed and shown as a shade on a
  logarithmic scale (a legend gives the values). With ``color="grad"`` a vanishing gradient
  is visible on the graph itself: the clusters of early steps fade.

Where the gradient norms come from
----------------------------------
A backward pass keeps only the leaves' gradients (``.grad``) and frees the graph. So:

* ``tr.viz.graph(loss)`` before ``backward()`` draws the structure only;
* ``loss.backward(retain_graph=True)`` and then ``tr.viz.graph(loss)`` draws the structure
  with the leaves' ``.grad`` norms (and those of tensors that called ``retain_grad()``);
* ``with tr.viz.record_backward() as rec: loss.backward()`` records, during backward, the
  structure and the gradient norm of *every* tensor of the graph, as plain numbers; then
  ``tr.viz.graph(rec)`` draws it, although backward freed the graph. Outside such a block
  backward does no extra work (one ``is None`` test per node).

Drawing never changes the graph or a gradient, and the :class:`Graph` it returns holds no
reference that keeps a graph alive: everything it needs is copied into plain data (shapes,
names, norms) and leaves are remembered through weak references.

Rendering
---------
The DOT text (:attr:`Graph.source`) is written here, with the standard library only.
Turning it into SVG, PNG or PDF needs Graphviz's ``dot`` program on ``PATH``; without it
``Graph.save("g.svg")`` raises an error that says how to install Graphviz, ``.dot`` files
still work, and a notebook shows the DOT text instead of the picture.

See docs/graph.md for a guided tour.

Why one module of about 1,350 lines: one feature, the drawing of an autograd graph, in
stages that share the record of the walked graph defined here (walk the nodes, group them
into time steps, shade by gradient norm, write DOT or render it with Graphviz); nothing else
in the package uses a stage alone.
"""
from __future__ import annotations

import contextlib
import math
import numbers
import os
import shutil
import subprocess
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from . import engine
from .backend import get_array_module
from .tensor import Tensor

__all__ = ["graph", "Graph", "record_backward", "BackwardRecord", "Capture", "find_dot",
           "SMALL_OPS", "AUTO_COLLAPSE_OPS", "GraphvizNotFoundError"]

#: Ops that only reshape or re-view their input: ``hide="small"`` draws through them.
SMALL_OPS = ("Reshape", "Transpose", "BroadcastTo", "ViewOf")

#: With ``collapse="auto"``, step clusters are collapsed to one node each when the graph
#: has more ops than this.
AUTO_COLLAPSE_OPS = 250

#: A node with edges to (or from) more collapsed steps than this gets one labelled edge.
BUNDLE_STEPS = 8

#: The file types :meth:`Graph.save` writes (``.dot`` needs no Graphviz).
SAVE_SUFFIXES = (".svg", ".png", ".pdf", ".dot")

#: The fused recurrent op's per-step strip shows at most this many cells (longer sequences
#: are binned: each cell is the root mean square of its steps' norms).
STRIP_CELLS = 50

_GROUPS = ("time", "none")
_COLORS = ("grad", "none")
_RANKDIRS = ("LR", "TB", "RL", "BT")

# the shading: pale (small gradient) to dark (large gradient), linear in log10 ||grad||;
# each channel decreases, so the brightness falls monotonically with the norm
_PALE = (250, 250, 235)
_DARK = (25, 60, 150)
_NO_GRAD_FILL = "#ffffff"  # a tensor without a recorded gradient (or an exact zero)
_INPUT_FILL = "#eeeeee"  # a leaf that does not require a gradient (data)


# ----------------------------------------------------------------------------- errors
class GraphvizNotFoundError(RuntimeError):
    """Graphviz's ``dot`` program is needed (to write .svg, .png or .pdf) and not found."""


def find_dot() -> str | None:
    """The path of Graphviz's ``dot`` program, or None when it is not on ``PATH``."""
    return shutil.which("dot")


def _install_hint(what: str) -> str:
    return (
        f"{what} needs Graphviz's `dot` program, which is not on PATH. Install Graphviz: "
        f"Debian/Ubuntu `sudo apt-get install graphviz`, conda `conda install -c conda-forge "
        f"graphviz`, macOS `brew install graphviz`, Windows the installer from "
        f"https://graphviz.org/download/ (then add its bin folder to PATH). Saving as .dot "
        f"needs nothing: Graph.save('graph.dot'), or print(graph.source)."
    )


# ------------------------------------------------------------------ captured structure
@dataclass
class OpRecord:
    """One op node of a captured graph, as plain data.

    Attributes
    ----------
    key : int
        The node's number in its :class:`Capture`.
    name : str
        The op's class name (``"MatMul"``, ``"FusedRecurrent"``).
    scope : tuple
        The ``record_scope`` labels open when the op was recorded, outermost first.
    inputs : list of (str, int, int)
        Per input: ``("op", key, output index)`` or ``("leaf", key, 0)``.
    outputs : dict
        Output index -> ``(shape, dtype name)``, for the outputs that are known.
    grad_norms : dict
        Output index -> ||dL/d output||, for the outputs whose gradient was seen.
    saved : list of (tuple, str)
        Shape and dtype of each array the op saved for backward.
    detail : str
        Extra text for the label (the fused recurrent op's cell, layer and direction).
    strip : object
        For a fused recurrent op recorded with ``track_state_grads``: its
        ``(StateGradRecorder, (layer, direction))``, read when drawing; else None.
    freed : bool
        The node was freed by an earlier backward (a graph built on a tensor of an older
        graph): drawn, but its inputs are unknown.
    """

    key: int
    name: str
    scope: tuple = ()
    inputs: list = field(default_factory=list)
    outputs: dict = field(default_factory=dict)
    grad_norms: dict = field(default_factory=dict)
    saved: list = field(default_factory=list)
    detail: str = ""
    strip: Any = None
    freed: bool = False


@dataclass
class LeafRecord:
    """One leaf tensor of a captured graph: shape, dtype, whether it requires a gradient,
    the norm of its gradient (None when unknown) and a weak reference to the tensor (for
    naming it after a parameter)."""

    key: int
    shape: tuple
    dtype: str
    requires_grad: bool
    grad_norm: float | None = None
    ref: Any = None
    name: str | None = None


@dataclass
class Capture:
    """The structure of one graph and its gradient norms, as plain data: what
    :func:`graph` draws. Made from a live graph, or recorded during one backward pass by
    :func:`record_backward` (one ``Capture`` per pass, in ``BackwardRecord.passes``)."""

    ops: dict = field(default_factory=dict)  # key -> OpRecord
    leaves: dict = field(default_factory=dict)  # key -> LeafRecord
    root: tuple = ("leaf", 0, 0)  # ("op", key, output index) or ("leaf", key, 0)
    root_meta: tuple = ((), "")  # the root tensor's shape and dtype name
    origin: str = "live graph"


def _norm(array: Any) -> float:
    """||array||_2 over all entries, computed in float64 on the array's device."""
    xp = get_array_module(array)
    a = array if array.dtype == xp.float64 else array.astype(xp.float64)
    return float(xp.sqrt(xp.sum(a * a)))


def _meta(t: Tensor) -> tuple[tuple[int, ...], str]:
    return tuple(int(n) for n in t.shape), str(t.dtype)


def _scalar_text(array: Any) -> str:
    """The value of a one-element array, short ("0.5", "1", "True")."""
    value = array.reshape(-1)[0].item()
    return f"{value:g}" if isinstance(value, float) else str(value)


def _detail(node: Any) -> str:
    """The label's extra line for ops whose class name alone says too little."""
    mode, key = getattr(node, "mode", None), getattr(node, "key", None)
    if node.name == "FusedRecurrent" and isinstance(key, tuple) and len(key) == 2:
        direction = "reverse" if key[1] else "forward"
        return f"{mode}, layer {key[0]}, {direction}"
    return ""


def _strip_source(node: Any) -> Any:
    """The fused recurrent op's state-gradient record (``track_state_grads``), or None."""
    from .monitor import StateGradRecorder

    recorder = getattr(node, "recorder", None)
    if isinstance(recorder, StateGradRecorder):
        return recorder, node.key
    return None


class _Builder:
    """Copies nodes and leaves into a :class:`Capture`; shared by the live walk and the
    backward recorder, so both see a graph the same way."""

    def __init__(self, origin: str) -> None:
        self.capture = Capture(origin=origin)
        self.op_keys: dict[int, int] = {}  # id(node) -> key
        self.leaf_keys: dict[int, int] = {}  # id(tensor) -> key

    def op_key(self, node: Any) -> int:
        key = self.op_keys.get(id(node))
        if key is None:
            key = self.op_keys[id(node)] = len(self.op_keys)
        return key

    def leaf_key(self, t: Tensor) -> int:
        """The key of leaf ``t``; a new one when ``t`` died and its id was reused."""
        key = self.leaf_keys.get(id(t))
        if key is not None and self.capture.leaves[key].ref() is t:
            return key
        key = len(self.capture.leaves)
        self.leaf_keys[id(t)] = key
        name = getattr(t, "name", None) or None
        if name is None and not t.requires_grad and t._data.size == 1:
            name = f"constant {_scalar_text(t._data)}"  # 1 - z, x * 0.5, where(m, h, 0)
        self.capture.leaves[key] = LeafRecord(
            key, *_meta(t), requires_grad=bool(t.requires_grad), ref=weakref.ref(t),
            name=name)
        return key

    def ref_of(self, t: Tensor) -> tuple:
        """``("op", key, index)`` or ``("leaf", key, 0)`` for input tensor ``t``, noting the
        producing op's output shape on the way."""
        parent = t._ctx
        if parent is None:
            return ("leaf", self.leaf_key(t), 0)
        key = self.op_key(parent)
        record = self.capture.ops.get(key)
        if record is None:
            record = self.capture.ops[key] = OpRecord(key, parent.name)
        record.outputs.setdefault(t._out_index, _meta(t))
        return ("op", key, t._out_index)

    def add_node(self, node: Any) -> tuple[OpRecord, list[Tensor]]:
        """Copy ``node`` (not yet freed) and return its record and its input tensors as the
        node consumed them."""
        key = self.op_key(node)
        record = self.capture.ops.get(key)
        if record is None:
            record = self.capture.ops[key] = OpRecord(key, node.name)
        record.scope = tuple(node.scope)
        record.detail = _detail(node)
        record.strip = _strip_source(node)
        record.saved = [(tuple(int(n) for n in a.shape), str(a.dtype))
                        for a in node.saved_arrays if hasattr(a, "shape")]
        tensors = list(engine.node_inputs(node))  # as the node consumed them
        record.inputs = [self.ref_of(t) for t in tensors]
        return record, tensors

    def add_freed(self, node: Any) -> None:
        key = self.op_key(node)
        record = self.capture.ops.setdefault(key, OpRecord(key, node.name))
        record.freed = True


def capture_live(root: Tensor, where: str = "graph") -> Capture:
    """Copy the graph that produced ``root`` (iteratively: no recursion, any depth), with
    the norms of the gradients that are kept: the leaves' ``.grad`` and those of tensors
    that called ``retain_grad()``."""
    builder = _Builder("live graph")
    capture = builder.capture
    capture.root_meta = _meta(root)
    if root._ctx is None:
        capture.root = builder.ref_of(root)
        _leaf_grad(capture, root, capture.root[1])
        return capture
    if root._ctx.released:
        raise RuntimeError(
            f"{where}: the graph that produced this tensor was freed by backward() (it keeps "
            f"only the leaves' .grad). Draw it before backward(), or call "
            f"backward(retain_graph=True) first, or record it during backward: "
            f"`with tr.viz.record_backward() as rec: loss.backward()`, then "
            f"tr.viz.graph(rec) (docs/graph.md)."
        )
    capture.root = builder.ref_of(root)
    _retained_grad(capture, root, capture.root)
    stack: list[Any] = [root._ctx]
    done: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in done:
            continue
        done.add(id(node))
        if node.released:
            builder.add_freed(node)
            continue
        record, tensors = builder.add_node(node)
        for t, ref in zip(tensors, record.inputs):
            if ref[0] == "leaf":
                _leaf_grad(capture, t, ref[1])
            else:
                _retained_grad(capture, t, ref)
                if id(t._ctx) not in done:
                    stack.append(t._ctx)
    return capture


def _grad_array(t: Tensor) -> Any:
    """``t.grad`` as a raw array (None when there is none)."""
    grad = t.grad
    return grad._data if isinstance(grad, Tensor) else grad


def _leaf_grad(capture: Capture, t: Tensor, key: int) -> None:
    grad = _grad_array(t)
    if grad is not None:
        capture.leaves[key].grad_norm = _norm(grad)


def _retained_grad(capture: Capture, t: Tensor, ref: tuple) -> None:
    """An intermediate tensor's ``.grad`` (kept by ``retain_grad()``) as its output norm."""
    grad = _grad_array(t)
    if ref[0] == "op" and grad is not None:
        capture.ops[ref[1]].grad_norms.setdefault(ref[2], _norm(grad))


# ----------------------------------------------------------------- backward recording
class BackwardRecord:
    """What :func:`record_backward` saw: one :class:`Capture` per backward pass, in order
    (``passes``). Each holds the structure of the graph and the norm of the gradient of
    every tensor in it, copied while backward ran (before it freed the graph).

    Pass it to :func:`graph` to draw the last pass (``tr.viz.graph(rec)``), or one of
    ``rec.passes`` to draw another."""

    def __init__(self) -> None:
        self.passes: list[Capture] = []
        self._builder: _Builder | None = None

    # the three calls of engine.observe_backward
    def begin(self, root: Tensor, grad: Any) -> None:
        self._builder = _Builder("recorded during backward")
        capture = self._builder.capture
        capture.root_meta = _meta(root)
        capture.root = self._builder.ref_of(root)
        self.passes.append(capture)

    def node(self, node: Any, grad_outs: Any) -> None:
        assert self._builder is not None, "begin() opens every backward pass"
        record, _ = self._builder.add_node(node)
        for i, g in enumerate(grad_outs):
            record.outputs.setdefault(i, (tuple(int(n) for n in g.shape), str(g.dtype)))
            record.grad_norms[i] = _norm(g)

    def leaf(self, t: Tensor, grad: Any) -> None:
        assert self._builder is not None, "begin() opens every backward pass"
        key = self._builder.leaf_key(t)
        self._builder.capture.leaves[key].grad_norm = _norm(grad)

    def __repr__(self) -> str:
        sizes = ", ".join(f"{len(c.ops)} ops" for c in self.passes)
        return f"BackwardRecord({len(self.passes)} passes: {sizes or 'none'})"


@contextlib.contextmanager
def record_backward() -> Iterator[BackwardRecord]:
    """Record the structure and every gradient norm of the backward passes run inside the
    block (in this thread), for drawing after backward has freed the graph.

    Yields
    ------
    BackwardRecord
        Filled in as backward runs; ``tr.viz.graph(rec)`` draws its last pass.

    Notes
    -----
    The norms are those of the gradients backward computes anyway (each op's output
    gradient as its backward receives it, each leaf's contribution of this pass); nothing is
    recomputed and no gradient changes. The cost is one norm per tensor, in float64, and a
    small record per node. The record keeps no tensor or node alive.

    Examples
    --------
    >>> import tinygrad_rnn as tr
    >>> w = tr.Tensor([1.0, -2.0], requires_grad=True)
    >>> with tr.viz.record_backward() as rec:
    ...     (w * w).sum().backward()
    >>> g = tr.viz.graph(rec, params={"w": w})
    >>> len(g.nodes), len(g.edges)
    (3, 2)
    """
    rec = BackwardRecord()
    with engine.observe_backward(rec):
        yield rec


# ------------------------------------------------------------------------- the picture
@dataclass
class DrawnNode:
    """A node of the picture: ``kind`` is "op", "leaf", "step" (a collapsed cluster),
    "saved" (a saved array) or "note" (what the cap left out); ``norm`` is the gradient
    norm it is shaded by (None when unknown); ``fill`` its colour; ``cluster`` the DOT id
    of the cluster drawn around it (None outside clusters); ``ops`` how many ops it stands
    for."""

    id: str
    kind: str
    label: str
    norm: float | None = None
    fill: str = _NO_GRAD_FILL
    cluster: str | None = None
    ops: int = 1
    name: str = ""
    html: str | None = None
    attrs: dict = field(default_factory=dict)


@dataclass
class DrawnCluster:
    """A cluster of the picture (one ``record_scope`` label): its title, the DOT id of the
    cluster it sits in, the ids of the nodes directly in it, its op count (nested clusters
    included) and its gradient norm: that of everything the ops inside hand on to ops
    outside (for a recurrent step: the state it passes on, ||dL/dh_t||, and for the LSTM
    the pair (h_t, c_t))."""

    id: str
    title: str
    parent: str | None
    scope: tuple
    members: list = field(default_factory=list)
    ops: int = 0
    norm: float | None = None
    fill: str = "#f7f7f7"


class Graph:
    """A drawing of an autograd graph, returned by :func:`graph`.

    Attributes
    ----------
    source : str
        The DOT text (Graphviz's language), ready for ``dot -Tsvg``.
    nodes : dict
        DOT id -> :class:`DrawnNode`, in drawing order (the root first).
    edges : list of (str, str)
        ``(input id, consumer id)`` pairs, the data flow, as drawn.
    edge_labels : dict
        ``(input id, consumer id)`` -> label, for the bundled edges ("to 100 steps": one
        edge drawn for a node used by every collapsed step).
    clusters : dict
        DOT id -> :class:`DrawnCluster`.
    elided : int
        How many nodes the ``max_nodes`` cap left out (0 when none).
    scale : tuple or None
        ``(smallest, largest)`` positive gradient norm of the log colour scale.

    In a notebook a Graph shows itself as SVG (when Graphviz is installed) or as its DOT
    text. :meth:`save` writes .svg, .png, .pdf or .dot files.
    """

    def __init__(self, source: str, nodes: dict, edges: list, clusters: dict, elided: int,
                 scale: tuple | None, edge_labels: dict | None = None) -> None:
        self.source = source
        self.nodes = nodes
        self.edges = edges
        self.edge_labels = edge_labels or {}
        self.clusters = clusters
        self.elided = elided
        self.scale = scale

    def __repr__(self) -> str:
        ops = sum(1 for n in self.nodes.values() if n.kind == "op")
        leaves = sum(1 for n in self.nodes.values() if n.kind == "leaf")
        steps = sum(1 for n in self.nodes.values() if n.kind == "step")
        text = f"Graph({ops} ops, {leaves} leaves"
        if steps:
            text += f", {steps} collapsed clusters"
        text += f", {len(self.edges)} edges, {len(self.clusters)} clusters"
        if self.elided:
            text += f", {self.elided} nodes not drawn"
        return text + ")"

    def render(self, fmt: str = "svg") -> bytes:
        """The picture in ``fmt`` ("svg", "png" or "pdf"), made by Graphviz's ``dot``.

        Raises
        ------
        GraphvizNotFoundError
            ``dot`` is not on PATH (the message says how to install it).
        RuntimeError
            ``dot`` failed (its message is included).
        """
        if fmt not in ("svg", "png", "pdf"):
            raise ValueError(f"Graph.render: fmt must be 'svg', 'png' or 'pdf', got {fmt!r}")
        dot = find_dot()
        if dot is None:
            raise GraphvizNotFoundError(_install_hint(f"Graph.render({fmt!r})"))
        done = subprocess.run([dot, f"-T{fmt}"], input=self.source.encode("utf-8"),
                              capture_output=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"Graph.render: `dot -T{fmt}` failed with exit status "
                               f"{done.returncode}: {done.stderr.decode(errors='replace')}")
        return done.stdout

    def save(self, path: str | os.PathLike) -> str:
        """Write the drawing to ``path``, all or nothing (a temporary file renamed into
        place); the suffix picks the format: .svg, .png, .pdf (Graphviz's ``dot``) or .dot
        (the DOT text; always works). Returns the absolute path written.

        Raises
        ------
        TypeError
            ``path`` is not a str or path-like.
        ValueError
            Another suffix.
        FileNotFoundError
            The folder of ``path`` does not exist (it is not created).
        GraphvizNotFoundError
            .svg/.png/.pdf without ``dot`` on PATH (nothing is written).
        """
        try:
            path = os.fspath(path)
        except TypeError:
            raise TypeError(f"Graph.save: path must be a str or os.PathLike, got "
                            f"{type(path).__name__}") from None
        if not isinstance(path, str):
            path = os.fsdecode(path)
        suffix = os.path.splitext(path)[1].lower()
        if suffix not in SAVE_SUFFIXES:
            raise ValueError(f"Graph.save: path must end in .svg, .png, .pdf or .dot, got "
                             f"{path!r}")
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"Graph.save: the folder {folder!r} of {path!r} does not "
                                    f"exist; create it first")
        if suffix == ".dot":
            data = self.source.encode("utf-8")
        else:
            data = self.render(suffix[1:])
        from .io import atomic_write

        def write(f: Any) -> None:
            f.write(data)

        return atomic_write(path, write, what="Graph.save")

    # notebook display: SVG when Graphviz is there, else the DOT text
    def _repr_svg_(self) -> str | None:
        if find_dot() is None:
            return None
        return self.render("svg").decode("utf-8")

    def _repr_markdown_(self) -> str | None:
        if find_dot() is not None:
            return None
        note = "*Graphviz's `dot` is not installed; the DOT text of the graph:*\n\n"
        return note + "```dot\n" + self.source + "```\n"


# ----------------------------------------------------------------------- argument checks
def _check_root(root: Any) -> Capture:
    if isinstance(root, Tensor):
        return capture_live(root)
    if isinstance(root, BackwardRecord):
        if not root.passes:
            raise ValueError("graph: the BackwardRecord holds no backward pass; call "
                             "backward() inside `with tr.viz.record_backward() as rec:`")
        return root.passes[-1]
    if isinstance(root, Capture):
        return root
    raise TypeError(f"graph: root must be a Tensor or a BackwardRecord (from "
                    f"tr.viz.record_backward()), got {type(root).__name__}")


def _check_params(params: Any) -> dict[int, tuple[str, Tensor]]:
    """id(tensor) -> (name, tensor) for ``params`` (a mapping name -> Tensor, or a
    Module)."""
    if params is None:
        return {}
    if callable(getattr(params, "named_parameters", None)) and not isinstance(params, Mapping):
        params = dict(params.named_parameters())
    if not isinstance(params, Mapping):
        raise TypeError(f"graph: params must be a mapping name -> Tensor (such as "
                        f"dict(model.named_parameters())) or a Module, got "
                        f"{type(params).__name__}")
    names: dict[int, tuple[str, Tensor]] = {}
    for name, t in params.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"graph: params[{name!r}] must be a Tensor, got "
                            f"{type(t).__name__}")
        names.setdefault(id(t), (str(name), t))
    return names


def _check_choice(value: Any, choices: tuple, name: str) -> str:
    if not isinstance(value, str) or value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise ValueError(f"graph: {name} must be one of {options}, got {value!r}")
    return value


def _check_max_nodes(max_nodes: Any) -> int | None:
    if max_nodes is None:
        return None
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, numbers.Integral) \
            or max_nodes < 1:
        raise ValueError(f"graph: max_nodes must be a whole number >= 1 or None, got "
                         f"{max_nodes!r}")
    return int(max_nodes)


def _check_hide(hide: Any) -> frozenset:
    if hide is None:
        return frozenset()
    if isinstance(hide, str):
        if hide != "small":
            raise ValueError(f"graph: hide must be None, 'small' or a collection of op "
                             f"names, got {hide!r}")
        return frozenset(SMALL_OPS)
    try:
        names = frozenset(hide)
    except TypeError:
        raise TypeError(f"graph: hide must be None, 'small' or a collection of op names, "
                        f"got {type(hide).__name__}") from None
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise TypeError(f"graph: hide must hold op names (str), got {bad[0]!r}")
    return names


def _check_collapse(collapse: Any) -> Any:
    if collapse == "auto" and isinstance(collapse, str):
        return collapse
    if isinstance(collapse, (bool, np.bool_)):
        return bool(collapse)
    raise ValueError(f"graph: collapse must be True, False or 'auto', got {collapse!r}")


# ---------------------------------------------------------------------------- graph()
def graph(root: Any, params: Any = None, *, group: str = "time", color: str = "grad",
          collapse: Any = "auto", hide: Any = None, show_saved: bool = False,
          max_nodes: int | None = 500, rankdir: str = "LR") -> Graph:
    """Draw the autograd graph that produced ``root``.

    Parameters
    ----------
    root : Tensor or BackwardRecord
        A tensor (usually the loss): its graph is walked as it is now, before backward or
        after ``backward(retain_graph=True)``. Or what :func:`record_backward` recorded,
        to draw a graph that backward has freed, with every gradient norm.
    params : mapping or Module, optional
        Names for leaves: ``{name: tensor}`` (``dict(model.named_parameters())``) or a
        Module. Other leaves are called by their ``name`` attribute, else "input" (no
        gradient required) or "leaf".
    group : {"time", "none"}
        "time": one cluster per :func:`tinygrad_rnn.engine.record_scope` label (for the
        autograd recurrent layers: one per layer and one per time step); "none": flat.
    color : {"grad", "none"}
        "grad": shade every node and cluster by its gradient norm on a log scale, with a
        legend (white: no gradient known, or exactly 0); "none": no shading.
    collapse : True, False or "auto"
        Draw each innermost cluster (a time step) as one node. "auto" collapses when the
        graph has more than :data:`AUTO_COLLAPSE_OPS` ops.
    hide : None, "small" or collection of str
        Op names to draw through (their inputs connect to their consumers); "small" is
        :data:`SMALL_OPS`, the ops that only reshape or re-view.
    show_saved : bool
        Also draw each array an op saved for backward (dashed box), when still known.
    max_nodes : int or None
        Draw at most this many op, step and leaf nodes, those nearest the root (breadth
        first; among equally near ones the later inputs, so of an unrolled sequence the last
        steps); a note says how many were left out, and of which ops. None: no cap.
    rankdir : {"LR", "TB", "RL", "BT"}
        Graphviz's layout direction ("LR": inputs left, the loss right, time to the right).

    Returns
    -------
    Graph
        With the DOT text (``.source``), the drawn ``nodes``, ``edges`` and ``clusters``,
        ``save(path)`` and notebook display.

    Raises
    ------
    TypeError
        ``root`` is not a Tensor or BackwardRecord; ``params`` is not a mapping of Tensors.
    ValueError
        An unknown ``group``, ``color``, ``collapse``, ``hide`` or ``rankdir``; a
        ``max_nodes`` that is not a whole number >= 1.
    RuntimeError
        ``root``'s graph was freed by backward (the message gives the three ways to draw it).

    Examples
    --------
    >>> import tinygrad_rnn as tr
    >>> x = tr.Tensor([[1.0, 2.0]])
    >>> w = tr.Tensor([[0.5], [-0.5]], requires_grad=True)
    >>> loss = (x @ w).tanh().sum()
    >>> g = tr.viz.graph(loss, params={"w": w})
    >>> sorted(n.label.split("\\n")[0] for n in g.nodes.values())
    ['MatMul', 'Sum', 'Tanh', 'input', 'w']
    """
    names = _check_params(params)
    group = _check_choice(group, _GROUPS, "group")
    color = _check_choice(color, _COLORS, "color")
    collapse = _check_collapse(collapse)
    hidden = _check_hide(hide)
    if not isinstance(show_saved, (bool, np.bool_)):
        raise TypeError(f"graph: show_saved must be True or False, got {show_saved!r}")
    cap = _check_max_nodes(max_nodes)
    rankdir = _check_choice(rankdir, _RANKDIRS, "rankdir")
    capture = _check_root(root)
    layout = _Layout(capture, names, group, collapse, hidden, bool(show_saved), cap)
    return layout.finish(color, rankdir)


# ---------------------------------------------------------------------------- layout
def _fmt_norm(value: float | None) -> str:
    if value is None:
        return "?"
    if value == 0:
        return "0"
    return f"{value:.2e}"


def _fmt_shape(shape: tuple) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _outputs_text(outputs: dict) -> str:
    """"(4, 16) float32", or for several outputs their shapes (equal ones counted)."""
    if not outputs:
        return ""
    metas = [outputs[i] for i in sorted(outputs)]
    if len(metas) == 1:
        return f"{_fmt_shape(metas[0][0])} {metas[0][1]}"
    counts = Counter(metas)
    if len(counts) == 1:
        (shape, dtype), n = next(iter(counts.items()))
        return f"{n} x {_fmt_shape(shape)} {dtype}"
    return ", ".join(_fmt_shape(s) for s, _ in metas) + f" {metas[0][1]}"


def _combined(norms: Iterable[float]) -> float | None:
    """The norm of several gradients together: sqrt(sum of squares); None when none."""
    values = list(norms)
    if not values:
        return None
    return math.sqrt(sum(v * v for v in values))


def _strip_norms(strip: Any) -> np.ndarray | None:
    """Per-step ||dL/dh_t|| of a fused recurrent op, once its backward has run."""
    if strip is None:
        return None
    from .monitor import state_grad_norms

    recorder, key = strip
    grads = recorder.grads.get(key, {}).get("h")
    if grads is None or grads.shape[0] == 0:
        return None
    return state_grad_norms(grads, recorder.lengths)


def _breadth_first(root: tuple, inputs: dict, last_first: bool) -> list[tuple]:
    """Every unit reachable from ``root`` through ``inputs``, nearest first (a queue, no
    recursion); each unit's inputs in their order, or last input first."""
    order: list[tuple] = [root]
    seen = {root}
    i = 0
    while i < len(order):
        srcs = inputs.get(order[i], ())
        for src in (reversed(srcs) if last_first else srcs):
            if src not in seen:
                seen.add(src)
                order.append(src)
        i += 1
    return order


class _Layout:
    """Turns a :class:`Capture` into drawn nodes, edges and clusters: hides ops, groups by
    scope, collapses clusters, applies the cap. Every walk is a loop over lists (no
    recursion)."""

    def __init__(self, capture: Capture, names: dict, group: str, collapse: Any,
                 hidden: frozenset, show_saved: bool, cap: int | None) -> None:
        self.capture = capture
        self.names = names
        self.show_saved = show_saved
        ops = capture.ops
        root_kind, root_key, _ = capture.root
        self.root_item = (root_kind, root_key)
        # 1. which ops are drawn: all but the hidden ones (never the root)
        self.hidden = {k for k, r in ops.items() if r.name in hidden and r.inputs
                       and (root_kind, root_key) != ("op", k)}
        # 2. the scope each drawn op is clustered by
        self.scope = {k: (r.scope if group == "time" else ()) for k, r in ops.items()}
        # 3. edges between items ("op", key) / ("leaf", key), hidden ops drawn through
        self.item_edges = self._item_edges()
        # 4. clusters, their op counts and norms, and which ones collapse
        visible = [k for k in ops if k not in self.hidden]
        if collapse == "auto":
            collapse = len(visible) > AUTO_COLLAPSE_OPS
        self.cluster_of_scope = self._clusters(visible)
        self.collapsed = self._collapsed_scopes() if collapse else set()
        # 5. the drawn nodes, in the order of a breadth-first walk from the root
        self.nodes: dict[str, DrawnNode] = {}
        self.edges: list[tuple[str, str]] = []
        self.edge_labels: dict[tuple[str, str], str] = {}
        self.elided = 0
        self._draw(cap)

    # -- edges
    def _inputs_drawn(self, key: int) -> list[tuple]:
        """The drawn items that feed op ``key``: its inputs, with hidden ops replaced by
        their own inputs (iteratively)."""
        out: list[tuple] = []
        stack = list(reversed(self.capture.ops[key].inputs))
        seen: set[tuple] = set()
        while stack:
            kind, k, _ = stack.pop()
            item = (kind, k)
            if item in seen:
                continue
            seen.add(item)
            if kind == "op" and k in self.hidden:
                stack.extend(reversed(self.capture.ops[k].inputs))
            else:
                out.append(item)
        return out

    def _item_edges(self) -> dict[tuple, list[tuple]]:
        """consumer item -> its input items (drawn ones only)."""
        edges: dict[tuple, list[tuple]] = {}
        for k in self.capture.ops:
            if k not in self.hidden:
                edges[("op", k)] = self._inputs_drawn(k)
        return edges

    # -- clusters
    def _clusters(self, visible: list[int]) -> dict[tuple, DrawnCluster]:
        clusters: dict[tuple, DrawnCluster] = {}
        for k in visible:
            scope = self.scope[k]
            for depth in range(1, len(scope) + 1):
                prefix = scope[:depth]
                cluster = clusters.get(prefix)
                if cluster is None:
                    parent = clusters[prefix[:-1]].id if depth > 1 else None
                    cluster = clusters[prefix] = DrawnCluster(
                        f"cluster_{len(clusters)}", str(prefix[-1]), parent, prefix)
                cluster.ops += 1
        self._cluster_norms(clusters)
        return clusters

    def _cluster_norms(self, clusters: dict[tuple, DrawnCluster]) -> None:
        """Each cluster's norm: that of the gradients of the op outputs inside it that are
        used outside it (or are the root)."""
        exported: dict[tuple, set] = {prefix: set() for prefix in clusters}
        ops = self.capture.ops
        root = self.capture.root
        for consumer_key, record in ops.items():
            outer = self.scope[consumer_key]
            for kind, k, index in record.inputs:
                if kind != "op":
                    continue
                inner = self.scope[k]
                for depth in range(1, len(inner) + 1):
                    prefix = inner[:depth]
                    # (a cluster of hidden ops only is not drawn, so it has no entry)
                    if outer[:depth] != prefix and prefix in exported:
                        exported[prefix].add((k, index))
        if root[0] == "op":
            scope = self.scope[root[1]]
            for depth in range(1, len(scope) + 1):
                if scope[:depth] in exported:
                    exported[scope[:depth]].add((root[1], root[2]))
        for prefix, cluster in clusters.items():
            norms = [ops[k].grad_norms[i] for k, i in exported[prefix]
                     if i in ops[k].grad_norms]
            cluster.norm = _combined(norms)

    def _collapsed_scopes(self) -> set[tuple]:
        """The innermost clusters (those with no cluster inside)."""
        parents = {prefix[:-1] for prefix in self.cluster_of_scope if len(prefix) > 1}
        return {prefix for prefix in self.cluster_of_scope if prefix not in parents}

    def _collapsed_prefix(self, key: int) -> tuple | None:
        scope = self.scope[key]
        for depth in range(1, len(scope) + 1):
            if scope[:depth] in self.collapsed:
                return scope[:depth]
        return None

    # -- nodes
    def _unit(self, item: tuple) -> tuple:
        """The drawn unit of an item: itself, or ("step", scope) inside a collapsed
        cluster (for a leaf: a constant used only inside one collapsed cluster)."""
        if item[0] == "op" and self.collapsed:
            prefix = self._collapsed_prefix(item[1])
            if prefix is not None:
                return ("step", prefix)
        elif item[0] == "leaf" and item in self.absorbed:
            return self.absorbed[item]
        return item

    def _absorbed_leaves(self) -> dict[tuple, tuple]:
        """One-element leaves that need no gradient and are used only inside one collapsed
        cluster (the constants of a step, such as the 1 of 1 - z_t): drawn as part of that
        step."""
        homes: dict[tuple, set] = {}
        for item, inputs in self.item_edges.items():
            unit = self._unit(item)
            for src in inputs:
                if src[0] == "leaf":
                    homes.setdefault(src, set()).add(unit)
        absorbed = {}
        for leaf, units in homes.items():
            if len(units) != 1:
                continue
            unit = next(iter(units))
            record = self.capture.leaves[leaf[1]]
            if unit[0] == "step" and not record.requires_grad \
                    and math.prod(record.shape) == 1:
                absorbed[leaf] = unit
        return absorbed

    def _draw(self, cap: int | None) -> None:
        self.absorbed: dict[tuple, tuple] = {}
        if self.collapsed:
            self.absorbed = self._absorbed_leaves()
        # the drawn units and the edges between them
        unit_inputs: dict[tuple, list[tuple]] = {}
        members: dict[tuple, list[int]] = {}
        for item, inputs in self.item_edges.items():
            unit = self._unit(item)
            if unit[0] == "step":
                members.setdefault(unit, []).append(item[1])
            ins = unit_inputs.setdefault(unit, [])
            for src in inputs:
                src_unit = self._unit(src)
                if src_unit != unit and src_unit not in ins:
                    ins.append(src_unit)
        root_unit = self._unit(self.root_item)
        # breadth-first from the root: the drawing order
        order = _breadth_first(root_unit, unit_inputs, last_first=False)
        kept, dropped = order, []
        if cap is not None and len(order) > cap:
            # the cap keeps the nodes nearest the root; among equally near ones, the later
            # inputs (the stack of all steps lists step T-1 last: it is kept first)
            nearest = set(_breadth_first(root_unit, unit_inputs, last_first=True)[:cap])
            kept = [unit for unit in order if unit in nearest]
            dropped = [unit for unit in order if unit not in nearest]
        ids = {unit: f"n{j}" for j, unit in enumerate(kept)}
        for unit in kept:
            node = self._make_node(unit, ids[unit])
            self.nodes[node.id] = node
        for unit in kept:
            for src in unit_inputs.get(unit, ()):
                if src in ids:
                    self.edges.append((ids[src], ids[unit]))
        self._bundle()
        if self.show_saved:
            self._saved_nodes(kept, ids)
        if dropped:
            assert cap is not None  # nodes are left out only under a cap
            self._note(dropped, kept, ids, unit_inputs, members, cap)

    def _bundle(self) -> None:
        """Draw a node's edges to (or from) more than :data:`BUNDLE_STEPS` collapsed steps
        as one labelled edge: the weight used at every step, the input projection split
        into steps, the stack of all outputs. (One edge per step would cross the whole row
        of steps: unreadable, and Graphviz needs minutes to lay it out at T = 100.)"""
        kinds = {node_id: node.kind for node_id, node in self.nodes.items()}
        fan_out: dict[str, list[int]] = {}
        fan_in: dict[str, list[int]] = {}
        for j, (src, dst) in enumerate(self.edges):
            if kinds[dst] == "step" and kinds[src] != "step":
                fan_out.setdefault(src, []).append(j)
            if kinds[src] == "step" and kinds[dst] != "step":
                fan_in.setdefault(dst, []).append(j)
        drop: set[int] = set()
        for node_id, edges in fan_out.items():
            if len(edges) > BUNDLE_STEPS:
                self.edge_labels[self.edges[edges[0]]] = f"to {len(edges)} steps"
                drop.update(edges[1:])
        for node_id, edges in fan_in.items():
            if len(edges) > BUNDLE_STEPS:
                self.edge_labels[self.edges[edges[-1]]] = f"from {len(edges)} steps"
                drop.update(edges[:-1])
        self.edges = [e for j, e in enumerate(self.edges) if j not in drop]

    def _make_node(self, unit: tuple, node_id: str) -> DrawnNode:
        kind, key = unit
        is_root = unit == self._unit(self.root_item)
        if kind == "leaf":
            node = self._leaf_node(key, node_id)
        elif kind == "step":
            node = self._step_node(key, node_id)
        else:
            node = self._op_node(key, node_id)
        if is_root:
            node.attrs["peripheries"] = "2"
            root_text = f"{_fmt_shape(self.capture.root_meta[0])} {self.capture.root_meta[1]}"
            node.attrs["tooltip"] = f"root {root_text}"
        return node

    def _leaf_node(self, key: int, node_id: str) -> DrawnNode:
        leaf = self.capture.leaves[key]
        tensor = leaf.ref() if leaf.ref is not None else None
        name = None
        if tensor is not None and id(tensor) in self.names:
            name, param = self.names[id(tensor)]
            if param is not tensor:
                name = None
        if name is None:
            name = leaf.name or ("leaf" if leaf.requires_grad else "input")
        lines = [name, f"{_fmt_shape(leaf.shape)} {leaf.dtype}"]
        if leaf.grad_norm is not None:
            lines.append(f"||grad|| {_fmt_norm(leaf.grad_norm)}")
        node = DrawnNode(node_id, "leaf", "\n".join(lines), leaf.grad_norm, name=name)
        if not leaf.requires_grad:
            node.fill = _INPUT_FILL
        return node

    def _op_node(self, key: int, node_id: str) -> DrawnNode:
        record = self.capture.ops[key]
        lines = [record.name]
        if record.detail:
            lines.append(record.detail)
        shapes = _outputs_text(record.outputs)
        if shapes:
            lines.append(shapes)
        norm = _combined(record.grad_norms.values())
        if record.freed:
            lines.append("(freed by an earlier backward)")
        elif norm is not None:
            lines.append(f"||grad|| {_fmt_norm(norm)}")
        cluster = self.cluster_of_scope.get(self.scope[key])
        node = DrawnNode(node_id, "op", "\n".join(lines), norm, name=record.name,
                         cluster=cluster.id if cluster is not None else None)
        strip = _strip_norms(record.strip)
        if strip is not None:
            node.attrs["strip"] = strip
        return node

    def _step_node(self, prefix: tuple, node_id: str) -> DrawnNode:
        cluster = self.cluster_of_scope[prefix]
        lines = [cluster.title, f"{cluster.ops} ops"]
        if cluster.norm is not None:
            lines.append(f"||grad out|| {_fmt_norm(cluster.norm)}")
        parent = self.cluster_of_scope.get(prefix[:-1]) if len(prefix) > 1 else None
        return DrawnNode(node_id, "step", "\n".join(lines), cluster.norm, ops=cluster.ops,
                         name=cluster.title, cluster=parent.id if parent else None)

    def _saved_nodes(self, kept: list[tuple], ids: dict) -> None:
        for unit in kept:
            if unit[0] != "op":
                continue
            for j, (shape, dtype) in enumerate(self.capture.ops[unit[1]].saved):
                node_id = f"{ids[unit]}s{j}"
                owner = self.nodes[ids[unit]]
                self.nodes[node_id] = DrawnNode(
                    node_id, "saved", f"saved {_fmt_shape(shape)} {dtype}", ops=0,
                    name="saved", cluster=owner.cluster)
                self.edges.append((node_id, ids[unit]))

    def _note(self, dropped: list[tuple], kept: list[tuple], ids: dict,
              unit_inputs: dict, members: dict, cap: int) -> None:
        """One node that says what the cap left out, linked to the nodes that lost an
        input."""
        counts: Counter = Counter()
        for unit in dropped:
            if unit[0] == "leaf":
                counts["leaf"] += 1
            elif unit[0] == "step":
                for k in members.get(unit, ()):
                    counts[self.capture.ops[k].name] += 1
            else:
                counts[self.capture.ops[unit[1]].name] += 1
        self.elided = len(dropped)
        top = ", ".join(f"{n} {name}" for name, n in counts.most_common(6))
        more = "" if len(counts) <= 6 else ", ..."
        label = (f"{len(dropped)} more nodes not drawn (max_nodes={cap}):\n{top}{more}")
        self.nodes["elided"] = DrawnNode("elided", "note", label, ops=0, name="elided")
        dropped_set = set(dropped)
        for unit in kept:
            if any(src in dropped_set for src in unit_inputs.get(unit, ())):
                self.edges.append(("elided", ids[unit]))

    # -- colour and DOT
    def finish(self, color: str, rankdir: str) -> Graph:
        drawn_clusters = {c.id: c for prefix, c in self.cluster_of_scope.items()
                          if prefix not in self.collapsed}
        for node in self.nodes.values():
            if node.cluster is not None and node.cluster in drawn_clusters:
                drawn_clusters[node.cluster].members.append(node.id)
        # keep only clusters that hold something drawn (directly or in a child)
        used = {c.id for c in drawn_clusters.values() if c.members}
        changed = True
        while changed:
            changed = False
            for c in drawn_clusters.values():
                if c.id in used and c.parent is not None and c.parent not in used:
                    used.add(c.parent)
                    changed = True
        clusters = {cid: c for cid, c in drawn_clusters.items() if cid in used}
        scale = None
        if color == "grad":
            scale = _Shade.scale(self.nodes.values(), clusters.values())
        if scale is not None:
            shade = _Shade(*scale)
            for node in self.nodes.values():
                if node.kind in ("op", "leaf", "step") and node.norm is not None:
                    node.fill = shade.fill(node.norm)
            inner = {c.scope for c in self.cluster_of_scope.values()} - {
                c.scope[:-1] for c in self.cluster_of_scope.values()}
            for c in clusters.values():
                # only the innermost clusters (the steps) are tinted; an outer one (the
                # layer) would tint everything in it
                if c.norm is not None and c.scope in inner:
                    c.fill = shade.tint(c.norm)
        else:
            shade = None
        source = _write_dot(self.nodes, self.edges, self.edge_labels, clusters, shade,
                            rankdir)
        return Graph(source, self.nodes, self.edges, clusters, self.elided, scale,
                     self.edge_labels)


# ----------------------------------------------------------------------------- colour
class _Shade:
    """The log colour scale: norm -> fill colour, pale for the smallest norm drawn and dark
    for the largest; 0 and unknown norms stay white."""

    def __init__(self, lo: float, hi: float) -> None:
        self.lo, self.hi = lo, hi
        self.log_lo = math.log10(lo)
        self.span = math.log10(hi) - self.log_lo

    @staticmethod
    def scale(nodes: Iterable[DrawnNode], clusters: Iterable[DrawnCluster]
              ) -> tuple[float, float] | None:
        values = [n.norm for n in nodes if n.norm is not None]
        values += [c.norm for c in clusters if c.norm is not None]
        for n in nodes:
            strip = n.attrs.get("strip")
            if strip is not None:
                values.extend(float(v) for v in strip)
        positive = [v for v in values if v > 0 and math.isfinite(v)]
        if not positive:
            return None
        return min(positive), max(positive)

    def position(self, norm: float) -> float | None:
        """Where ``norm`` sits on the scale, 0 (smallest) to 1 (largest); None for 0 or
        a non-finite norm."""
        if not (norm > 0 and math.isfinite(norm)):
            return None
        if self.span == 0:
            return 1.0
        return min(1.0, max(0.0, (math.log10(norm) - self.log_lo) / self.span))

    def fill(self, norm: float) -> str:
        pos = self.position(norm)
        if pos is None:
            return _NO_GRAD_FILL
        return _mix(_PALE, _DARK, pos)

    def tint(self, norm: float) -> str:
        """A cluster's background: the node colour, halfway to white (nodes stay
        readable on it)."""
        pos = self.position(norm)
        if pos is None:
            return _NO_GRAD_FILL
        return _mix((255, 255, 255), _DARK, 0.55 * pos + 0.05)


def _mix(a: tuple, b: tuple, t: float) -> str:
    rgb = [round(x + (y - x) * t) for x, y in zip(a, b)]
    return "#" + "".join(f"{c:02x}" for c in rgb)


def brightness(fill: str) -> float:
    """Perceived brightness of a ``#rrggbb`` colour, 0 (black) to 1 (white): the tests
    check that shading darkens as the gradient norm grows."""
    r, g, b = (int(fill[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _font_for(fill: str) -> str:
    return "white" if brightness(fill) < 0.45 else "black"


# -------------------------------------------------------------------------- DOT writer
def _quote(text: str) -> str:
    """A DOT string literal: quotes and backslashes escaped, newlines as centred line
    breaks."""
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\n", "\\n") + '"'


def _html(text: str) -> str:
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _binned(values: np.ndarray) -> list[float]:
    """At most :data:`STRIP_CELLS` values: each the root mean square of its bin."""
    if len(values) <= STRIP_CELLS:
        return [float(v) for v in values]
    edges = np.linspace(0, len(values), STRIP_CELLS + 1).astype(int)
    return [float(np.sqrt(np.nanmean(np.square(values[a:b]))))
            for a, b in zip(edges[:-1], edges[1:])]


def _strip_label(node: DrawnNode, shade: _Shade | None) -> str:
    """An HTML-like label: the op's text above a row of cells, one per step t, shaded by
    ||dL/dh_t||."""
    values = _binned(node.attrs["strip"])
    head = "<br/>".join(_html(line) for line in node.label.split("\n"))
    cells = []
    for v in values:
        fill = shade.fill(v) if shade is not None and math.isfinite(v) else _NO_GRAD_FILL
        cells.append(f'<td bgcolor="{fill}" border="1" width="8" height="12"></td>')
    n = len(values)
    steps = len(node.attrs["strip"])
    first, last = _fmt_norm(float(node.attrs["strip"][0])), _fmt_norm(
        float(node.attrs["strip"][-1]))
    caption = _html(f"||dL/dh_t||, t = 0..{steps - 1}: {first} ... {last}")
    return (f'<<table border="0" cellborder="0" cellspacing="0" cellpadding="1">'
            f'<tr><td colspan="{n}">{head}</td></tr><tr>{"".join(cells)}</tr>'
            f'<tr><td colspan="{n}"><font point-size="9">{caption}</font></td></tr>'
            f'</table>>')


def _node_line(node: DrawnNode, shade: _Shade | None) -> str:
    attrs: dict[str, str] = {}
    if node.kind == "leaf":
        attrs.update(shape="box", style="filled")
    elif node.kind == "op":
        attrs.update(shape="ellipse", style="filled")
    elif node.kind == "step":
        attrs.update(shape="box3d", style="filled")
    elif node.kind == "saved":
        attrs.update(shape="box", style="dashed", fontsize="9")
    else:
        attrs.update(shape="note", style="filled", fillcolor="#fff3c4")
    if node.kind != "note" and node.kind != "saved":
        attrs["fillcolor"] = node.fill
        attrs["fontcolor"] = _font_for(node.fill)
    for k, v in node.attrs.items():
        if k != "strip":
            attrs[k] = v
    if "strip" in node.attrs:
        attrs["shape"] = "box"
        label = _strip_label(node, shade)
    else:
        label = _quote(node.label)
    parts = [f"label={label}"] + [f"{k}={_quote(v)}" for k, v in attrs.items()]
    return f"{node.id} [{', '.join(parts)}]"


def _legend(shade: _Shade) -> str:
    """A row of swatches from the smallest to the largest norm on the scale."""
    cells = []
    for k in range(6):
        pos = k / 5
        value = 10 ** (shade.log_lo + pos * shade.span)
        fill = _mix(_PALE, _DARK, pos)
        cells.append(f'<td bgcolor="{fill}"><font color="{_font_for(fill)}" '
                     f'point-size="9">{_fmt_norm(value)}</font></td>')
    return ('legend [shape=plaintext, label=<<table border="0" cellspacing="0" '
            'cellborder="1"><tr><td colspan="6">||grad|| (log scale; white: '
            f'none recorded or 0)</td></tr><tr>{"".join(cells)}</tr></table>>]')


def _write_dot(nodes: dict, edges: list, edge_labels: dict, clusters: dict,
               shade: _Shade | None, rankdir: str) -> str:
    """The DOT text: global settings, the clusters (nested, each with its nodes), the nodes
    outside clusters, the edges, the legend."""
    lines = ["digraph autograd {",
             f"  rankdir={rankdir};",
             '  node [fontname="Helvetica", fontsize=10];',
             '  edge [color="#555555", arrowsize=0.6];',
             "  compound=true;"]
    children: dict[str | None, list[str]] = {}
    for cid, c in clusters.items():
        children.setdefault(c.parent if c.parent in clusters else None, []).append(cid)
    # clusters written depth first with an explicit stack: ("open", id) / ("close", id)
    stack: list[tuple[str, str]] = [("open", cid) for cid in reversed(children.get(None, []))]
    depth = 1
    while stack:
        action, cid = stack.pop()
        c = clusters[cid]
        pad = "  " * depth
        if action == "close":
            depth -= 1
            lines.append("  " * depth + "}")
            continue
        title = c.title
        if c.norm is not None:
            title += f"   ||grad out|| {_fmt_norm(c.norm)}"
        lines.append(f"{pad}subgraph {cid} {{")
        lines.append(f"{pad}  label={_quote(title)}; style=\"filled,rounded\"; "
                     f"fillcolor={_quote(c.fill)}; color=\"#999999\";")
        for node_id in c.members:
            lines.append(f"{pad}  {_node_line(nodes[node_id], shade)};")
        stack.append(("close", cid))
        for child in reversed(children.get(cid, [])):
            stack.append(("open", child))
        depth += 1
    for node in nodes.values():
        if node.cluster is None or node.cluster not in clusters:
            lines.append(f"  {_node_line(node, shade)};")
    for src, dst in edges:
        style = ""
        if nodes[src].kind in ("saved", "note"):
            style = " [style=dashed, arrowhead=none]"
        elif (src, dst) in edge_labels:
            style = f" [label={_quote(edge_labels[(src, dst)])}, penwidth=2, fontsize=9]"
        lines.append(f"  {src} -> {dst}{style};")
    if shade is not None:
        lines.append("  " + _legend(shade) + ";")
    lines.append("}")
    return "\n".join(lines) + "\n"
