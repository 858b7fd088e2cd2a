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

import functools
from typing import Any, Callable, Iterable

from .backend import device_of, get_array_module
from .ops.base import Context, sum_to_shape

__all__ = [
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
    "run_backward",
    "sum_to_shape",
]


class _GradMode:
    enabled = True


def is_grad_enabled() -> bool:
    """True when new operations are recorded for backward."""
    return _GradMode.enabled


class set_grad_enabled:
    """Context manager and decorator that sets gradient recording on or off and restores
    the previous value on exit (also on an exception)."""

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self.prev: list[bool] = []

    def __enter__(self) -> None:
        self.prev.append(_GradMode.enabled)
        _GradMode.enabled = self.mode

    def __exit__(self, *exc: Any) -> None:
        _GradMode.enabled = self.prev.pop()

    def __call__(self, fn: Callable) -> Callable:
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return wrapper


class no_grad(set_grad_enabled):
    """Disable graph recording: ``with tr.no_grad(): ...`` or ``@tr.no_grad()``."""

    def __init__(self) -> None:
        super().__init__(False)


class enable_grad(set_grad_enabled):
    """Re-enable graph recording inside a ``no_grad`` block."""

    def __init__(self) -> None:
        super().__init__(True)


def _topological_order(root: Context) -> list[Context]:
    """Nodes reachable from ``root``, each listed after every node that consumes it
    (iterative post-order depth-first search; reversed, it runs from the root to leaves)."""
    order: list[Context] = []
    visited: set[int] = set()
    stack: list[tuple[Context, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if children_done:
            order.append(node)
            continue
        if id(node) in visited:
            continue
        if node.released:
            raise RuntimeError(
                f"backward through the graph a second time: the saved state of "
                f"{node.name} was freed by the first backward. Pass retain_graph=True to "
                f"the first backward() if you need to backward twice."
            )
        visited.add(id(node))
        stack.append((node, True))
        for t in node.inputs:
            parent = t._ctx
            if parent is not None and id(parent) not in visited:
                stack.append((parent, False))
    return order


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
    if tensor.grad is None:
        # always a fresh array: .grad never aliases an upstream gradient or another .grad
        tensor.grad = xp.array(grad, dtype=tensor.dtype, copy=True)
    else:
        tensor.grad = tensor.grad + grad


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


def run_backward(root: Any, grad: Any, retain_graph: bool = False) -> None:
    """Backpropagate ``grad`` (dL/droot) from tensor ``root`` to every leaf that requires
    a gradient, accumulating into ``leaf.grad``. Called by :meth:`Tensor.backward`.

    The loop body runs once per node of the graph, so the common case (one output, no
    hooks, gradients already of their input's shape, dtype and array type) takes the
    shortest path; everything else goes through the general helpers."""
    if root._ctx is None:
        if root.requires_grad:
            g = _run_hooks(root._hooks, grad)
            _accumulate_into_grad(root, g)
        return

    order = _topological_order(root._ctx)
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
        stack.extend(t._ctx for t in node.inputs if t._ctx is not None)
    return len(seen)

