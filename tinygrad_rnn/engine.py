"""Reverse-mode differentiation: the backward pass over the recorded graph.

How it works (docs/engine.md derives it step by step):

1. **Topological order, iteratively.** Starting from the node that made the root tensor, a
   depth-first walk with an explicit stack lists every node after all nodes that consume its
   outputs. No recursion anywhere, so a 10,000-step unrolled RNN or a 100,000-op chain works at
   Python's default recursion limit.
2. **Accumulation.** A tensor used by several ops (a weight at every time step, the two arms
   of a diamond) receives the sum of the gradients from all its uses; nothing is overwritten.
3. **sum_to_shape.** Every gradient an op returns is reduced to its input's shape by the one
   central :func:`~tinygrad_rnn.ops.base.sum_to_shape`, and the engine checks the shape.
4. **Freeing.** After a node's backward has run, its saved arrays and inputs are dropped
   (unless ``retain_graph=True``); a second backward through it raises a clear error. Ops
   keep their inputs and never their outputs, so graphs are freed by reference counting alone.
"""
from __future__ import annotations

import bisect
import functools
import inspect
import threading
from typing import Any, Callable, Generator, Iterable

import numpy as np

from .backend import device_of, get_array_module
from .ops.base import Context, sum_to_shape

__all__ = [
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "inference_mode",
    "record_scope",
    "current_scope",
    "node_inputs",
    "is_grad_enabled",
    "run_backward",
    "observe_backward",
    "sum_to_shape",
]


class _GradMode(threading.local):
    """Whether new operations are recorded, per thread (as torch's grad mode): one thread
    inside ``no_grad`` never switches recording off in another. Every thread starts with
    recording on."""

    enabled = True


_GRAD_MODE = _GradMode()


def is_grad_enabled() -> bool:
    """True when new operations are recorded for backward in the calling thread."""
    return _GRAD_MODE.enabled


class set_grad_enabled:
    """Set gradient recording on or off in the calling thread, as a function call, a context
    manager or a decorator, as torch's ``set_grad_enabled``.

    * ``tr.set_grad_enabled(False)`` switches recording off at once (until switched back);
    * ``with tr.set_grad_enabled(False): ...`` restores the previous value on exit, also on
      an exception;
    * ``@tr.set_grad_enabled(False)`` (and ``@tr.no_grad()``, ``@tr.enable_grad()``) on a
      function runs each call in that mode; on a generator function, the mode holds inside
      the generator's body each time it resumes, and the caller's mode is restored at every
      ``yield``, so the body of ``for batch in batches(): ...`` runs in the caller's mode.

    The mode is per thread: each thread has its own, and a context entered in one thread
    never changes another's.
    """

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, (bool, np.bool_)):
            raise TypeError(
                f"set_grad_enabled: mode must be a bool, got {mode!r} ({type(mode).__name__})"
            )
        self.mode = bool(mode)
        self.prev: list[bool] = []
        # called as a function, it switches at once (torch: set_grad_enabled(False)); the
        # value it replaced is what a `with` on this object restores
        self._at_call: bool | None = _GRAD_MODE.enabled
        _GRAD_MODE.enabled = self.mode

    def __enter__(self) -> None:
        prev, self._at_call = self._at_call, None
        self.prev.append(_GRAD_MODE.enabled if prev is None else prev)
        _GRAD_MODE.enabled = self.mode

    def __exit__(self, *exc: Any) -> None:
        _GRAD_MODE.enabled = self.prev.pop()

    def __call__(self, fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"{type(self).__name__}: used as a decorator, it takes a function, "
                            f"got {fn!r}")
        if self._at_call is not None:  # a decorator changes nothing until the call
            _GRAD_MODE.enabled, self._at_call = self._at_call, None
        mode = self.mode
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def generator_wrapper(*args: Any, **kwargs: Any) -> Any:
                return (yield from _generator_in_mode(fn(*args, **kwargs), mode))

            return generator_wrapper

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with _Mode(mode):
                return fn(*args, **kwargs)

        return wrapper


class _Mode:
    """The plain context manager behind the decorators: set ``mode`` in this thread on
    entry, restore the thread's previous value on exit."""

    __slots__ = ("mode", "prev")

    def __init__(self, mode: bool) -> None:
        self.mode = mode

    def __enter__(self) -> None:
        self.prev = _GRAD_MODE.enabled
        _GRAD_MODE.enabled = self.mode

    def __exit__(self, *exc: Any) -> None:
        _GRAD_MODE.enabled = self.prev


def _generator_in_mode(gen: Generator, mode: bool) -> Generator:
    """Drive ``gen`` with gradient mode ``mode`` while its body runs, and the caller's mode
    while the caller runs (between yields). Values sent in, exceptions thrown in and
    ``close()`` reach ``gen`` as they would without the wrapper."""
    try:
        with _Mode(mode):
            request = next(gen)
    except StopIteration as stop:
        return stop.value
    while True:
        try:
            sent = yield request
        except GeneratorExit:
            with _Mode(mode):
                gen.close()
            raise
        except BaseException as err:
            try:
                with _Mode(mode):
                    request = gen.throw(err)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                with _Mode(mode):
                    request = gen.send(sent)
            except StopIteration as stop:
                return stop.value


class no_grad(set_grad_enabled):
    """Disable graph recording in this thread: ``with tr.no_grad(): ...`` or
    ``@tr.no_grad()`` (on functions and generator functions). Nothing changes until the
    block is entered."""

    def __init__(self) -> None:
        self.mode, self.prev, self._at_call = False, [], None


class inference_mode(set_grad_enabled):
    """``no_grad`` under torch's other name (``inference_mode(False)`` records as usual).
    This engine has no separate inference tensors: tensors made inside are ordinary tensors
    that do not require a gradient."""

    def __init__(self, mode: bool = True) -> None:
        if not isinstance(mode, (bool, np.bool_)):
            raise TypeError(
                f"inference_mode: mode must be a bool, got {mode!r} ({type(mode).__name__})"
            )
        self.mode, self.prev, self._at_call = not mode, [], None


class enable_grad(set_grad_enabled):
    """Re-enable graph recording inside a ``no_grad`` block (in this thread only)."""

    def __init__(self) -> None:
        self.mode, self.prev, self._at_call = True, [], None


def _topological_order(root: Context) -> list[Context]:
    """Nodes reachable from ``root``, each listed after every node that consumes it
    (iterative post-order depth-first search; reversed, it runs from the root to leaves)."""
    order: list[Context] = []
    visited: set[int] = set()
    stack: list[tuple[Context, bool]] = [(root, False)]
    rebased = REBASES.value != 0  # no recorded in-place write yet: no input has a history
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
        if not rebased:
            for t in node.inputs:
                parent = t._ctx
                if parent is not None and id(parent) not in visited:
                    stack.append((parent, False))
            continue
        needs = node.needs_input_grad
        for k, t in enumerate(node.inputs):
            if not needs[k]:  # (a stand-in for an earlier state may point anywhere)
                continue
            if t._history is not None:
                t = as_seen_by(t, node.clock)
            parent = t._ctx
            if parent is not None and id(parent) not in visited:
                stack.append((parent, False))
    return order


class _Scopes(threading.local):
    """The labels of the ``record_scope`` blocks the calling thread is inside, innermost
    last (what tinygrad_rnn.viz draws as clusters: "layer 0, t = 3")."""

    def __init__(self) -> None:
        self.stack: list = []
        self.labels: tuple = ()  # tuple(stack), kept up to date: one tuple per block, not op


_SCOPES = _Scopes()


class _ScopeCount:
    """How many ``record_scope`` blocks are open in all threads: while 0, recording an op
    reads no thread-local state at all."""

    active = 0


class record_scope:
    """Label every op recorded inside the block with ``label`` (``ctx.scope``, a tuple of
    the labels of the enclosing blocks, outermost first). Changes no result; costs one
    attribute read per recorded op while no block is open anywhere.

    >>> import tinygrad_rnn as tr
    >>> x = tr.Tensor([1.0], requires_grad=True)
    >>> with tr.engine.record_scope("t = 0"):
    ...     y = x * 2
    >>> y.grad_fn.scope
    ('t = 0',)
    """

    def __init__(self, label: Any) -> None:
        self.label = label

    def __enter__(self) -> "record_scope":
        scopes = _SCOPES
        scopes.stack.append(self.label)
        scopes.labels = tuple(scopes.stack)
        _ScopeCount.active += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        scopes = _SCOPES
        scopes.stack.pop()
        scopes.labels = tuple(scopes.stack)
        _ScopeCount.active -= 1


def current_scope() -> tuple:
    """The labels of the open ``record_scope`` blocks of this thread (outermost first)."""
    return _SCOPES.labels


class _Clock:
    """Counts recorded in-place writes that gave a tensor a new place in the graph."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


#: Bumped by every rebase (a recorded in-place write); a node remembers the value at its
#: recording (``Context.clock``), so it reaches each input as that input was then.
REBASES = _Clock()


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
    """The input tensors of ``node`` as it consumed them: ``node.inputs`` with any tensor
    rebased since by a recorded in-place write replaced by its earlier state
    (:func:`as_seen_by`). Walk graphs with this, not ``node.inputs``: after ``h += x``, the
    tensor ``h`` in an older node's inputs now stands for the write, which came later."""
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


def _output_grads(node: Context, slots: list) -> list:
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
    return grad_outs


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

