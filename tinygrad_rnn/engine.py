"""The graph: recording it as ops run, and walking it backward.

**Recording** (:func:`record`, which is every op's ``Function.apply``): run the op's forward
on its inputs' arrays, wrap the results in tensors and, when gradients are recorded and an
input requires one, leave a node (a :class:`~tinygrad_rnn.ops.base.Context`) that points to
the inputs, never to the outputs. A leaf input is kept as it is (its ``.grad`` is where the
gradient goes); an input made by another op is kept as an :class:`Edge`, which names that
op's node and output and carries no values, so an intermediate result whose values no
backward needs is freed while the graph waits for backward (an ``Add`` keeps no data). A
recorded in-place write (``h += x``, ``out[t] = h_t``; :func:`record_write`) gives the
written tensor a new node and keeps its earlier state for the nodes recorded before it.
Whether anything is recorded is the thread's grad mode (:mod:`tinygrad_rnn.grad_mode`:
``no_grad`` and friends, re-exported here).

**Backward** (:func:`run_backward`; docs/engine.md derives it step by step):

1. **Topological order, iteratively.** Starting from the node that made the root tensor, a
   depth-first walk with an explicit stack lists every node after all nodes that produce
   its inputs (for ``x.tanh().exp().sum()``: Tanh, Exp, Sum); the backward pass runs the
   list in reverse, so each node's backward runs after every node that consumes its
   outputs. Of a node's producers, the one recorded last is visited last, so its backward
   runs soon after its consumer's and its gradient does not wait (:func:`_later_first`).
   No recursion anywhere, so a 10,000-step unrolled RNN or a 100,000-op chain works at
   Python's default recursion limit.
2. **Accumulation.** A tensor used by several ops (a weight at every time step, the two arms
   of a diamond) receives the sum of the gradients from all its uses; nothing is overwritten.
3. **sum_to_shape.** Every gradient an op returns is reduced to its input's shape by the one
   central :func:`~tinygrad_rnn.ops.base.sum_to_shape`, and the engine checks the shape.
4. **Freeing.** After a node's backward has run, its saved arrays and inputs are dropped
   (unless ``retain_graph=True``); a second backward through it raises a clear error. Ops
   keep their inputs (as edges) and never their outputs, so graphs are freed by reference
   counting alone.

Why one module of about 830 lines: recording a node, the in-place writes that rebase a
tensor's place in the graph, the edges that nodes keep, and the backward walk that reads
all three are one data structure seen from four sides; split apart, each part would import
the others' private details (the node's fields, the rebase clock, the edge's frozen state).
"""
from __future__ import annotations

import bisect
import itertools
import threading
from typing import Any, Callable, Iterable, cast

from . import backend as _backend
from .backend import device_of, get_array_module
from .grad_mode import (
    GRAD_MODE, REBASES, SCOPES, ScopeCount, current_scope, enable_grad, inference_mode,
    is_grad_enabled, no_grad, record_scope, set_grad_enabled,
)
from .ops import ViewOf, WriteRegion
from .ops.base import Context, Function, sum_to_shape

__all__ = [
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "inference_mode",
    "record_scope",
    "current_scope",
    "node_inputs",
    "is_grad_enabled",
    "record",
    "run_backward",
    "observe_backward",
    "sum_to_shape",
    "Edge",
    "edge_of",
]


# ========================================================================= recording
def record(fn: type[Function], *inputs: Any, **constants: Any) -> Any:
    """Run op ``fn`` on ``inputs`` and, when gradients are being recorded and an input
    requires one, record the node: every op's ``fn.apply(*inputs, **constants)`` (see
    :class:`tinygrad_rnn.ops.base.Function`).

    Scalars and host arrays among the inputs become tensors under the dtype policy
    (:func:`tinygrad_rnn.dtypes.lift_inputs`), integer data meets float data as torch's
    promotion says (:func:`tinygrad_rnn.dtypes.promote_non_float`), all inputs must be on
    one device, and an output that is a view of an input shares its version counter.

    This runs once per op, so the common case (all inputs tensors of one array type, one
    output, nothing saved) takes plain loops and builds no list, set or tuple it does not
    need; the general cases branch off."""
    tensors = inputs
    for x in inputs:
        if not isinstance(x, Tensor):  # scalars and arrays become tensors
            tensors = lift_scalars_beside_floats(inputs) or lift_inputs(fn, inputs)
            break
    if tensors:
        # one array type means one device; only a mismatch pays for the full check
        # and all-float inputs need no dtype promotion: one loop tests both
        t0 = type(tensors[0]._data)
        rebased = REBASES.value  # a view is stale only after some recorded in-place write
        for t in tensors:
            if rebased and t._base is not None and t._gen != t._base._gen:
                refresh_view(t)  # its base was rebased by a recorded in-place write
            d = t._data
            if type(d) is not t0 or d.dtype.kind != "f":
                if any(type(u._data) is not t0 for u in tensors):
                    _check_devices(fn, tensors)
                # integer or boolean data meets float data or float math: torch's dtypes
                tensors = promote_non_float(fn, tensors)
                break
        # an array constant (a mask) can be on a device only once that device's module loaded
        if constants and _backend.DEVICE_MODULES:
            for name, v in constants.items():
                if type(v) in _backend.DEVICE_MODULES and type(v) is not t0:
                    _check_devices(fn, tensors, (name, v))
    ctx = Context(fn)
    # (one and two inputs, most ops, are spelled out: a list comprehension costs a call)
    n = len(tensors)
    needs: tuple[bool, ...]
    if GRAD_MODE.enabled:
        if n == 2:
            needs = (tensors[0]._requires_grad, tensors[1]._requires_grad)
        elif n == 1:
            needs = (tensors[0]._requires_grad,)
        else:
            needs = tuple([t._requires_grad for t in tensors])
        record = True in needs
    else:
        needs = (False,) * n
        record = False
    ctx.needs_input_grad = needs
    if n == 2:
        raw = fn.forward(ctx, tensors[0]._data, tensors[1]._data, **constants)
    elif n == 1:
        raw = fn.forward(ctx, tensors[0]._data, **constants)
    else:
        raw = fn.forward(ctx, *[t._data for t in tensors], **constants)
    multi = isinstance(raw, tuple)
    if multi:
        outs = raw
        results = tuple([Tensor._wrap(o) for o in raw])
    else:
        outs = (raw,)
        results = (Tensor._wrap(raw),)
    _share_versions(results, tensors)
    if record:
        # an input made by an op is kept as an Edge (its producer node, output index, shape
        # and dtype), not as the tensor, so its values are freed as soon as nobody else
        # holds them: the op saved whatever its backward needs (save_for_backward)
        if n == 2:
            a, b = tensors
            ctx.inputs = (a if a._ctx is None else edge_of(a),
                          b if b._ctx is None else edge_of(b))
        elif n == 1:
            a = tensors[0]
            ctx.inputs = (a if a._ctx is None else edge_of(a),)
        else:
            ctx.inputs = tuple([t if t._ctx is None else edge_of(t) for t in tensors])
        ctx.seq = next(_SEQUENCE)  # recording order (the backward walk's tie-break)
        if REBASES.value:
            ctx.clock = REBASES.value
        if ScopeCount.active:
            ctx.scope = SCOPES.labels  # engine.current_scope(), without the call
        ctx.n_outputs = len(outs)
        if multi:
            # what the engine needs to make a zero gradient for an output that gets none (a
            # single output always has a gradient when its node is reached)
            xp = get_array_module(*outs)
            ctx.out_meta = tuple([(o.shape, o.dtype, xp) for o in outs])
        if _mixed_float_dtypes(tensors, outs):
            ctx.mixed_dtypes = True
        if ctx.saved_arrays:
            ctx.saved_versions = _saved_versions(ctx, tensors, results)
        for i, r in enumerate(results):
            if r._data.dtype.kind == "f":
                r._ctx = ctx
                r._out_index = i
                r._requires_grad = True
    return results if multi else results[0]


#: the recording order of nodes (Context.seq), one count for all threads
_SEQUENCE = itertools.count(1)


# every op's apply: the one wiring point (the op layer cannot import the engine, so it is
# assigned here, which a type checker sees as replacing a method)
Function.apply = classmethod(record)  # type: ignore[method-assign,assignment]


def _share_versions(results: tuple, tensors: tuple) -> None:
    """An output whose data is a view of an input's data (reshape, transpose) shares that
    input's version counter, so an in-place write through either one is seen by every node
    that saved the other (otherwise ``x.T`` saved by a Mul and then ``x.add_(1)`` would give
    a silently wrong gradient)."""
    for r in results:
        o = r._data
        if getattr(o, "base", None) is None:
            # not a view: only an input returned as it is can share memory (cheap check,
            # as most ops return a fresh array)
            for t in tensors:
                if o is t._data:
                    break
            else:
                continue
        xp = get_array_module(o)
        for t in tensors:
            if xp.may_share_memory(o, t._data):
                r._version = t._version
                break


def _check_devices(fn: type, tensors: tuple, const: tuple | None = None) -> None:
    """RuntimeError naming the op and both devices when its inputs (or an array constant,
    such as a mask) live on different devices."""
    d0 = device_of(tensors[0]._data)
    for k, t in enumerate(tensors):
        d = device_of(t._data)
        if d != d0:
            raise RuntimeError(
                f"{fn.__name__}: expected all tensors on one device, but input 0 "
                f"(shape {tensors[0].shape}) is on {d0} and input {k} (shape {t.shape}) is on "
                f"{d}; move one with .to({d0!r}) or .to({d!r})"
            )
    if const is not None:
        name, v = const
        d = device_of(v)
        if d != d0:
            raise RuntimeError(
                f"{fn.__name__}: the input (shape {tensors[0].shape}) is on {d0} but {name} "
                f"(shape {v.shape}) is on {d}; move {name} to {d0}"
            )


def _saved_versions(ctx: Context, tensors: tuple, results: tuple) -> list:
    """(counter, version now, "input"/"output", index, shape) for every saved array that is
    an input's or an output's data; the engine checks them before the node's backward."""
    versions = []
    for a in ctx.saved_arrays:
        for k, t in enumerate(tensors):
            if a is t._data:
                versions.append((t._version, t._version.value, "input", k, a.shape))
        for k, r in enumerate(results):
            if a is r._data:
                versions.append((r._version, r._version.value, "output", k, a.shape))
    return versions


def _mixed_float_dtypes(tensors: tuple, outs: tuple) -> bool:
    """True when the op's inputs and outputs hold more than one float dtype (then the
    engine casts each input gradient to its input's dtype)."""
    if len(outs) == 1:  # the common case, one output with its inputs' dtype: no sets needed
        dtype = outs[0].dtype
        for t in tensors:
            d = t._data.dtype
            if d is not dtype and d != dtype:
                break
        else:
            return False
    dtypes = {t._data.dtype for t in tensors}
    dtypes.update(o.dtype for o in outs)
    return len({d for d in dtypes if d.kind == "f"}) > 1


# ------------------------------------------------------------------------- recorded writes
# In-place writes that gradients flow through (tinygrad_rnn.tensor, "in-place writes"):
# the new values are written by the op WriteRegion into the base tensor's memory, and the
# base is rebased onto that node; nodes recorded earlier keep reaching the old state
# (as_seen_by). docs/engine.md, section 11, "Views and in-place writes".
def write_is_recorded(tensor: Tensor, op: str, value: Any = None) -> bool:
    """Whether the in-place write ``op`` of ``value`` into ``tensor`` must be recorded;
    RuntimeError when it would be a write into a parameter outside ``no_grad``."""
    if tensor._base is not None and tensor._gen != tensor._base._gen:
        refresh_view(tensor)
    if not GRAD_MODE.enabled:
        return False
    root = tensor if tensor._base is None else tensor._base
    if root._ctx is None and root._requires_grad:
        what = "a leaf tensor" if root is tensor else "a view of a leaf tensor"
        raise RuntimeError(
            f"{op}: in-place write to {what} that requires a gradient (shape "
            f"{root.shape}) would not be recorded; do it inside `with tr.no_grad():` "
            f"(e.g. the parameter update `with tr.no_grad(): W -= lr * W.grad`), or "
            f"write into a copy (x = x.clone())"
        )
    return tensor._requires_grad or (isinstance(value, Tensor) and value._requires_grad)

def snapshot(tensor: Tensor) -> Tensor:
    """A stand-in for ``tensor``'s current place in the graph (same data, node and
    version counter), for the nodes that consumed it before a rebase."""
    earlier = Tensor._wrap(tensor._data)
    earlier._ctx, earlier._out_index = tensor._ctx, tensor._out_index
    earlier._requires_grad, earlier._version = tensor._requires_grad, tensor._version
    return earlier

def rebase(tensor: Tensor, new: Tensor) -> Tensor:
    """Make ``tensor`` stand for ``new``'s place in the graph (after a recorded in-place
    write), keeping its earlier state for the nodes recorded before; returns that
    earlier state."""
    REBASES.value += 1
    earlier = snapshot(tensor)
    if tensor._requires_grad:  # an earlier state nobody can need a gradient for is dropped
        if tensor._history is None:
            tensor._history = ([], [])
        tensor._history[0].append(REBASES.value)
        tensor._history[1].append(earlier)
    tensor._ctx, tensor._out_index = new._ctx, new._out_index
    tensor._requires_grad = new._requires_grad
    tensor._gen += 1
    return earlier

def refresh_view(tensor: Tensor) -> None:
    """Re-record the view ``tensor`` from its base, which a recorded in-place write rebased since
    the view's graph was made (only while gradients are recorded; until then the view
    keeps its old graph)."""
    base = tensor._base
    assert base is not None  # only views are refreshed
    if not GRAD_MODE.enabled:
        return
    if base._requires_grad:
        rebase(tensor, ViewOf.apply(base, steps=tensor._view_steps))
    tensor._gen = base._gen

def record_write(tensor: Tensor, op: str, value: Any, index: Any = None) -> Tensor:
    """Write ``value`` (a tensor or constant) into ``tensor``, at ``index`` when given,
    as a recorded op, and rebase the base tensor onto it."""
    root = tensor if tensor._base is None else tensor._base
    steps = tensor._view_steps
    if index is not None:
        steps = steps + (("index", index),)
    written = WriteRegion.apply(root, value, steps=steps, op=op)
    earlier = rebase(root, written)
    if written._ctx is not None:  # the write consumed root's earlier state, not itself
        written._ctx.inputs = (earlier,) + written._ctx.inputs[1:]
    root._bump()
    if tensor is not root:
        refresh_view(tensor)
    return tensor

def record_update(tensor: Tensor, op: str, result: Tensor) -> Tensor:
    """Write ``result`` (the new values, computed out of place from ``tensor``) back
    into its memory as a recorded op. The node that computed ``result`` gets
    copies of any array it saved from this memory, which is about to change (torch keeps
    the original values the same way: ``a *= b`` needs the old ``a`` for dL/db)."""
    if result.shape != tensor.shape:
        raise RuntimeError(
            f"{op}: the result has shape {result.shape} but the tensor written in place has "
            f"shape {tensor.shape}; an in-place operation cannot change the shape (broadcast "
            f"the other operand to {tensor.shape}, or use the out-of-place form)"
        )
    ctx = result._ctx
    if ctx is not None:  # computed from this tensor's state before the write
        ctx.inputs = tuple(snapshot(tensor) if t is tensor else t for t in ctx.inputs)
    if ctx is not None and ctx.saved_arrays:
        xp = get_array_module(tensor._data)
        mine = tensor._version
        ctx.saved_arrays = tuple(a.copy() if xp.may_share_memory(a, tensor._data) else a
                                 for a in ctx.saved_arrays)
        ctx.saved_versions = tuple(v for v in ctx.saved_versions if v[0] is not mine)
    return record_write(tensor, op, result)


# ========================================================================= the backward walk
def _topological_order(root: Context) -> list[Context]:
    """Nodes reachable from ``root``, each listed after every node that produces one of its
    inputs (an iterative post-order depth-first search: producers first, ``root`` last). The
    backward pass walks the list in reverse, from the root to the leaves, so each node runs
    after every node that consumes its outputs."""
    order: list[Context] = []
    visited: set[int] = set()
    stack: list[tuple[Context, bool]] = [(root, False)]
    rebased = REBASES.value != 0  # no recorded in-place write yet: no input has a history
    # exercise: topological_order begin
    while stack:
        node, children_done = stack.pop()
        if children_done:
            order.append(node)
            continue
        if id(node) in visited:
            continue
        if node.released:
            raise RuntimeError(_freed_graph_message(node, root))
        visited.add(id(node))
        stack.append((node, True))
        first = len(stack)
        if not rebased:
            for t in node.inputs:
                parent = t._ctx
                if parent is not None and id(parent) not in visited:
                    stack.append((parent, False))
        else:
            needs = node.needs_input_grad
            for k, t in enumerate(node.inputs):
                if not needs[k]:  # (a stand-in for an earlier state may point anywhere)
                    continue
                if t._history is not None:
                    t = as_seen_by(t, node.clock)
                parent = t._ctx
                if parent is not None and id(parent) not in visited:
                    stack.append((parent, False))
        if len(stack) - first > 1:
            # the producer recorded last is visited last, so backward runs it right after
            # this node and drops its gradient at once (see below the function)
            stack[first:] = sorted(stack[first:], key=_later_first)
    return order
    # exercise: end


def _later_first(entry: tuple[Context, bool]) -> int:
    """Sort key of :func:`_topological_order`'s stack entries: the node recorded last first.

    Which producer the depth-first search visits last decides the order backward runs
    them in: the one visited last comes first after their consumer. Visiting the producer
    recorded last (the most recent, usually a small side branch such as ``W.T`` of this step)
    after the earlier ones (the long chain of earlier steps) lets backward run it right
    after its consumer, so its gradient is used and freed at once. Visited the other way
    round, the gradient of every step's ``W.T`` (1 MiB at H = 256) would wait until backward
    had gone through all earlier steps: 512 MiB for an LSTM over 512 steps."""
    return -entry[0].seq



def as_seen_by(t: Any, clock: int) -> Any:
    """The state of tensor ``t`` that a node recorded at ``clock`` consumed.

    A recorded in-place write (``h += x``, ``out[t] = h_t``) gives ``t`` a new node in the
    graph and keeps its earlier state in ``t._history`` (clocks and stand-in tensors, in
    order). A node recorded before a rebase took the value from before it, so its gradient
    must flow to that earlier state, not through the write: torch keeps the same edges in its
    graph nodes."""
    clocks, earlier = t._history
    i = bisect.bisect_right(clocks, clock)
    return earlier[i] if i < len(earlier) else t


def node_inputs(node: Context) -> tuple:
    """The inputs of ``node`` as it consumed them: leaves as tensors, inputs made by ops as
    :class:`Edge` s (node, output index, shape, dtype; no values), and any leaf rebased
    since by a recorded in-place write replaced by its earlier state (:func:`as_seen_by`).
    Walk graphs with this, not ``node.inputs``: after ``h += x``, a tensor ``h`` in an older
    node's inputs would stand for the write, which came later."""
    return tuple(t if t._history is None else as_seen_by(t, node.clock)
                 for t in node.inputs)


def _freed_graph_message(node: Context, root: Context) -> str:
    """Why a backward reached ``node``, whose saved state an earlier backward freed, and the
    fix. When the root itself was freed, the same loss is backpropagated twice
    (``retain_graph=True`` is the fix); when only a node inside was, the new graph was built
    on a tensor from an earlier graph: almost always a recurrent state carried from the
    previous iteration without ``detach()`` (truncated BPTT), where ``retain_graph`` would
    be the wrong fix (it backpropagates into every earlier batch, ever more slowly)."""
    if node is root:
        return (
            f"backward through the graph a second time: the saved state of {node.name} was "
            f"freed by the first backward. Pass retain_graph=True to the first backward() "
            f"if you really need to backpropagate through the same graph twice."
        )
    return (
        f"backward reached {node.name}, part of an older graph whose saved state an earlier "
        f"backward() freed: this graph was built on a tensor computed before that backward. "
        f"The usual cause is a recurrent state (h, or the LSTM pair (h, c)) carried from the "
        f"previous batch into this one: detach it at the start of each batch, "
        f"`h = h.detach()` (for an LSTM `hidden = tuple(s.detach() for s in hidden)`), "
        f"which is truncated backpropagation through time (docs/truncation.md, section 5, "
        f"'Why the carried state is detached'). Do not pass retain_graph=True for this: it "
        f"would backpropagate into every earlier batch, ever more slowly."
    )


def _check_versions(node: Context) -> None:
    for box, version, kind, k, shape in node.saved_versions:
        if box.value != version:
            raise RuntimeError(
                f"{node.name}.backward: {kind} {k} of shape {shape} was saved for backward at "
                f"version {version} "
                f"but has been modified in place since (now version {box.value}); its "
                f"gradient would be wrong. Clone the tensor before writing into it."
                + (f" {node.version_hint}" if node.version_hint else "")
            )


def _fit_grad(node: Context, index: int, grad: Any, tensor: Any) -> Any:
    """Reduce an op's input gradient to the input's shape and check shape, dtype and
    device."""
    if type(grad) is not type(tensor._data) and device_of(grad) != device_of(tensor._data):
        raise RuntimeError(
            f"{node.name}.backward returned a gradient on {device_of(grad)} for input "
            f"{index} on {device_of(tensor._data)} (a backward must compute with the array "
            f"module of its arrays, tinygrad_rnn.backend.get_array_module)"
        )
    try:
        grad = sum_to_shape(grad, tensor.shape)
    except ValueError:
        grad_shape = getattr(grad, "shape", None)
        raise RuntimeError(
            f"{node.name}.backward returned a gradient of shape {grad_shape} for input "
            f"{index} of shape {tensor.shape}, and it is not a broadcast of that shape"
        ) from None
    if grad.shape != tensor.shape:
        raise RuntimeError(
            f"{node.name}.backward returned a gradient of shape {grad.shape} for input "
            f"{index} of shape {tensor.shape}"
        )
    if grad.dtype != tensor.dtype:
        if node.mixed_dtypes:
            grad = grad.astype(tensor.dtype)
        else:
            raise RuntimeError(
                f"{node.name}.backward returned a {grad.dtype} gradient for input {index} "
                f"of dtype {tensor.dtype} (an op must not change the dtype of a gradient)"
            )
    return grad


class _Accum:
    """Sum of gradient contributions to one value. The first contribution is kept as it is
    (it may be a view of an upstream gradient, which must never be mutated); from the second
    on, the sum lives in an array this class owns and updates in place."""

    __slots__ = ("value", "owned")

    def __init__(self, value: Any) -> None:
        self.value = value
        self.owned = False

    def add(self, grad: Any) -> None:
        if self.owned:
            self.value += grad
        else:
            self.value = self.value + grad
            self.owned = True


def _accumulate_into_grad(tensor: Any, grad: Any) -> None:
    xp = get_array_module(grad)
    if tensor._grad is None:
        # always a fresh array: .grad never aliases an upstream gradient or another .grad
        tensor._grad = xp.array(grad, dtype=tensor.dtype, copy=True)
    else:
        tensor._grad = tensor._grad + grad


def _run_hooks(hooks: Iterable[Callable], grad: Any) -> Any:
    """Call each hook on the gradient; a non-None return value (same shape, same device)
    replaces it."""
    for hook in hooks:
        new = hook(grad)
        if new is not None:
            if new.shape != grad.shape:
                raise RuntimeError(
                    f"a gradient hook returned shape {new.shape}, expected {grad.shape}"
                )
            if type(new) is not type(grad) and device_of(new) != device_of(grad):
                raise RuntimeError(
                    f"a gradient hook returned an array on {device_of(new)} for a gradient "
                    f"on {device_of(grad)}; return an array on {device_of(grad)} (use the "
                    f"array module of the gradient, tinygrad_rnn.backend.get_array_module)"
                )
            grad = new
    return grad


def _output_grads(node: Context, slots: list) -> tuple:
    """The upstream gradient of each of ``node``'s outputs: zeros for an output that got
    none, then the output's hooks, then its retained ``.grad``."""
    grad_outs = []
    for i, acc in enumerate(slots):
        if acc is None:
            shape, dtype, xp = node.out_meta[i]
            g = xp.zeros(shape, dtype=dtype)
        else:
            g = acc.value
        hooks = node.out_hooks.get(i) if node.out_hooks else None
        if hooks:
            g = _run_hooks(hooks, g)
        ref = node.out_retain.get(i) if node.out_retain else None
        if ref is not None:
            t = ref()
            if t is not None:
                _accumulate_into_grad(t, g)
        grad_outs.append(g)
    return tuple(grad_outs)


class _Observer(threading.local):
    """The object that watches the backward passes of the calling thread, or None (the
    default: backward then does one extra ``is None`` test per node and nothing else)."""

    current: Any = None


_OBSERVER = _Observer()


class observe_backward:
    """While the block runs, every backward pass of this thread reports to ``observer``:

    * ``observer.begin(root, grad)`` once, before anything else;
    * ``observer.node(node, grad_outs)`` for each node, just before its backward runs (its
      ``inputs`` and saved state are still there; ``grad_outs`` are the gradients of its
      outputs, after their hooks, exactly what its backward receives);
    * ``observer.leaf(tensor, grad)`` for each leaf, with the gradient this pass adds to
      ``tensor.grad`` (after the leaf's hooks).

    The observer must only read: the arrays it is given are the engine's own. This is the
    hook behind :func:`tinygrad_rnn.viz.record_backward` (gradient norms of every tensor of
    the graph, and the graph's structure, kept while backward frees the graph). Blocks nest;
    the innermost observer is the one called.
    """

    def __init__(self, observer: Any) -> None:
        for method in ("begin", "node", "leaf"):
            if not callable(getattr(observer, method, None)):
                raise TypeError(f"observe_backward: observer must have a {method}() method, "
                                f"got {type(observer).__name__}")
        self.observer = observer
        self.prev: list[Any] = []

    def __enter__(self) -> Any:
        self.prev.append(_OBSERVER.current)
        _OBSERVER.current = self.observer
        return self.observer

    def __exit__(self, *exc: Any) -> None:
        _OBSERVER.current = self.prev.pop()


def run_backward(root: Any, grad: Any, retain_graph: bool = False) -> None:
    """Backpropagate ``grad`` (dL/droot) from tensor ``root`` to every leaf that requires
    a gradient, accumulating into ``leaf.grad``. Called by :meth:`Tensor.backward`.

    The loop body runs once per node of the graph, so the common case (one output, no
    hooks, gradients already of their input's shape, dtype and array type) takes the
    shortest path; everything else goes through the general helpers."""
    observer = _OBSERVER.current  # None unless inside observe_backward
    if observer is not None:
        observer.begin(root, grad)
    if root._ctx is None:
        if root.requires_grad:
            g = _run_hooks(root._hooks, grad)
            if observer is not None:
                observer.leaf(root, g)
            _accumulate_into_grad(root, g)
        return

    order = _topological_order(root._ctx)
    rebased = REBASES.value != 0  # (see _topological_order)
    # node -> one _Accum (or None) per output; nodes are keyed by identity
    pending: dict[Context, list] = {root._ctx: [None] * root._ctx.n_outputs}
    pending[root._ctx][root._out_index] = _Accum(grad)
    leaves: dict[int, list] = {}  # id -> [tensor, _Accum], in order of first arrival

    for node in reversed(order):
        slots = pending.pop(node, None)
        if slots is None:
            continue
        if node.saved_versions:
            _check_versions(node)
        if node.out_hooks or node.out_retain or len(slots) != 1:
            grad_outs = _output_grads(node, slots)
        else:  # one output, no hooks: its gradient goes to backward as it is
            grad_outs = (slots[0].value,)
        if observer is not None:
            observer.node(node, grad_outs)

        in_grads = node.fn.backward(node, *grad_outs)
        if not isinstance(in_grads, tuple):
            in_grads = (in_grads,)
        inputs = node.inputs
        if len(in_grads) != len(inputs):
            raise RuntimeError(
                f"{node.name}.backward returned {len(in_grads)} gradients for "
                f"{len(inputs)} inputs"
            )
        needs = node.needs_input_grad
        for k, g in enumerate(in_grads):
            if g is None or not needs[k]:
                continue
            t = inputs[k]
            if rebased and t._history is not None:
                t = as_seen_by(t, node.clock)
            d = t._data
            # a gradient of its input's array type, shape and dtype needs no fitting
            if type(g) is not type(d) or g.shape != d.shape or g.dtype != d.dtype:
                g = _fit_grad(node, k, g, t)
            parent = t._ctx
            if parent is None:
                entry = leaves.get(id(t))
                if entry is None:
                    leaves[id(t)] = [t, _Accum(g)]
                else:
                    entry[1].add(g)
            else:
                slots_t = pending.get(parent)
                if slots_t is None:
                    slots_t = pending[parent] = [None] * parent.n_outputs
                acc = slots_t[t._out_index]
                if acc is None:
                    slots_t[t._out_index] = _Accum(g)
                else:
                    acc.add(g)
        if not retain_graph:
            node.release()

    for t, acc in leaves.values():
        g = _run_hooks(t._hooks, acc.value)
        if observer is not None:
            observer.leaf(t, g)
        _accumulate_into_grad(t, g)


def count_graph_nodes(root: Any) -> int:
    """Number of live (not yet freed) op nodes reachable from ``root``; for tests and for
    checking that truncated BPTT keeps the graph bounded."""
    if root._ctx is None:
        return 0
    seen: set[int] = set()
    stack = [root._ctx]
    while stack:
        node = stack.pop()
        if id(node) in seen or node.released:
            continue
        seen.add(id(node))
        for t in node.inputs:
            if t._history is not None:
                t = as_seen_by(t, node.clock)
            if t._ctx is not None:
                stack.append(t._ctx)
    return len(seen)


# The tensor and the dtype policy build on this module's recording and import it, so they
# are imported last: each finds the other's names defined whichever is imported first (the
# functions above use them only when called).
from .dtypes import lift_inputs, lift_scalars_beside_floats, promote_non_float  # noqa: E402
from .tensor import Tensor  # noqa: E402


# ========================================================================= edges
class Edge(Tensor):
    """How a node keeps an input that another op made: that op's node (``grad_fn``) and
    output index, and the input's shape, dtype and device, but not its values.

    A node that kept the input tensor itself would keep its array alive until backward,
    even when the op's backward never reads it (``Add``, ``Split``, ``Reshape``, the
    argument of ``Sigmoid``, which saves its output): on the autograd LSTM at T = 512 those
    arrays were 488 MiB of a 790 MiB step (benchmarks/graph_memory.py). What a backward does
    need, the op saves with ``save_for_backward``; the edge is only the way back to the
    producer, as in torch's graph. An edge is frozen at recording: a later in-place write to
    the tensor gives the tensor a new node, and the edge still leads to the state the op
    consumed.

    It is a :class:`~tinygrad_rnn.tensor.Tensor` for the code that walks graphs
    (``grad_fn``, ``requires_grad``, ``shape``, ``dtype``, ``device``; ``grad`` is the
    gradient kept by ``retain_grad()`` on the tensor it stands for), but its values are
    gone: reading them raises. Its ``_data`` is a read-only zero-stride placeholder of the
    right shape, dtype and array type (one element of memory, shared by all edges of that
    shape), which the engine's shape and device checks read.
    """

    __slots__ = ()
    # the slots an edge never sets read as these defaults (a class attribute hides the slot)
    _grad = None
    _grad_view = None
    _requires_grad = True
    name = None
    _base = None
    _view_steps = ()
    _gen = 0
    _history = None

    @property
    def _node(self) -> Context:
        """The node that made the tensor this edge stands for (an edge always has one)."""
        return cast(Context, self._ctx)

    def _no_values(self, what: str) -> RuntimeError:
        return RuntimeError(
            f"{what}: this is an edge of the recorded graph (input of a node, made by "
            f"{self._node.name} as its output {self._out_index}, shape {self.shape}, dtype "
            f"{self.dtype}); it keeps no values, which were freed with the tensor they "
            f"belonged to. Keep a reference to that tensor to read them.")

    @property
    def grad(self) -> "Tensor | None":
        """The ``.grad`` that ``retain_grad()`` kept on the tensor this edge stands for, if
        that tensor is still alive; else None."""
        retained = self._node.out_retain
        ref = retained.get(self._out_index) if retained else None
        t = ref() if ref is not None else None
        return None if t is None else t.grad

    @grad.setter
    def grad(self, value: Any) -> None:
        raise self._no_values("Edge.grad = ...")

    @property
    def array(self) -> Any:
        raise self._no_values("Edge.array")

    @property
    def data(self) -> "Tensor":
        raise self._no_values("Edge.data")

    @data.setter
    def data(self, value: Any) -> None:
        raise self._no_values("Edge.data = ...")

    def numpy(self) -> Any:
        raise self._no_values("Edge.numpy")

    def item(self) -> Any:
        raise self._no_values("Edge.item")

    def tolist(self) -> Any:
        raise self._no_values("Edge.tolist")

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise self._no_values("Edge.__array__")

    def __repr__(self) -> str:
        return (f"Edge(grad_fn={self._node.name}, output {self._out_index}, shape "
                f"{self.shape}, dtype {self.dtype}, device {self.device!r})")


#: (array type, shape, dtype) -> the read-only zero-stride placeholder of edges
_PLACEHOLDERS: dict[tuple, Any] = {}
_new_edge = object.__new__


def edge_of(t: Tensor) -> Edge:
    """The :class:`Edge` for tensor ``t``, made by an op: its node, output index, shape,
    dtype and device, without its values."""
    d = t._data
    key: tuple = (type(d), d.shape, d.dtype)
    ph = _PLACEHOLDERS.get(key)
    if ph is None:
        ph = _placeholder(d, key)
    e = _new_edge(Edge)
    e._data = ph
    e._ctx = t._ctx
    e._out_index = t._out_index
    return e


def _placeholder(d: Any, key: tuple) -> Any:
    """The placeholder for arrays like ``d`` (its array type, so its device kind, shape and
    dtype: all that the engine's checks read), made once and kept under ``key``."""
    if len(_PLACEHOLDERS) > 4096:  # many shapes seen (a long run with varying lengths)
        _PLACEHOLDERS.clear()
    xp = get_array_module(d)
    ph = _PLACEHOLDERS[key] = xp.broadcast_to(xp.zeros((), dtype=d.dtype), d.shape)
    return ph
