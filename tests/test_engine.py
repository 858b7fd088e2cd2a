"""The autograd engine against the engine rules of DESIGN.md.

Covered here: accumulation (diamond graphs, a weight used twice and at every step of a
recurrence), depth (a 10,000-step tanh recurrence and a 100,000-op chain at the default
recursion limit, deleting a deep graph), freeing by reference counting with ``gc`` disabled,
``retain_graph`` and the second-backward error, ``no_grad`` / ``enable_grad``, ``detach``,
hooks and ``retain_grad``, the version counter, backward's argument checks, ``sum_to_shape``,
``count_graph_nodes``, mixed float dtypes and integer tensors.
"""
from __future__ import annotations

import contextlib
import gc
import os
import re
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn.engine import count_graph_nodes
from tinygrad_rnn.ops.base import pairwise_sum

F = tr.functional
REPO = Path(__file__).resolve().parents[1]


def leaf(values: Any, dtype: Any = np.float64) -> tr.Tensor:
    return tr.Tensor(np.asarray(values, dtype=dtype), requires_grad=True)


@contextlib.contextmanager
def gc_disabled() -> Iterator[None]:
    """Run a block with the cyclic garbage collector off, so only reference counting frees
    objects; the previous state is restored even when the block fails."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# ----------------------------------------------------------------------------- accumulation
def test_diamond_graph_accumulates_both_branches() -> None:
    """x feeds two branches that rejoin: dL/dx is the sum of both paths."""
    xv = np.array([0.3, -1.2, 0.7])
    x = leaf(xv)
    a = x.tanh()  # branch 1
    b = x * 3.0  # branch 2
    loss = (a * b).sum()
    loss.backward()
    # d/dx [3 x tanh(x)] = 3 tanh(x) + 3 x (1 - tanh(x)^2)
    expected = 3 * np.tanh(xv) + 3 * xv * (1 - np.tanh(xv) ** 2)
    np.testing.assert_allclose(x.grad, expected, rtol=1e-13, atol=0)


def test_same_tensor_twice_in_one_op_accumulates() -> None:
    """y + y and y * y: both input slots of one node receive a gradient for the same y."""
    x = leaf([1.5, -2.0])
    y = x * 2.0
    (y + y).sum().backward()
    np.testing.assert_array_equal(x.grad, [4.0, 4.0])
    x2 = leaf([1.5, -2.0])
    (x2 * x2).sum().backward()
    np.testing.assert_array_equal(x2.grad, [3.0, -4.0])


def test_diamond_with_shared_intermediate_matches_gradcheck() -> None:
    """A longer diamond whose rejoining node is reached twice in the topological walk."""
    rng = np.random.default_rng(1)

    def f(x: tr.Tensor) -> tr.Tensor:
        h = (x * 0.5).tanh()
        left = h.sigmoid() * h
        right = h.exp() + h * h
        return (left * right).sum() + h.sum()

    assert tr.gradcheck(f, (leaf(rng.uniform(-1, 1, size=(2, 3))),))


def test_weight_used_twice_equals_sum_of_untied_copies() -> None:
    """h2 = tanh(tanh(x W) W): dL/dW is the sum of the gradients of two untied copies."""
    rng = np.random.default_rng(2)
    xv, wv = rng.normal(size=(2, 3)), rng.normal(size=(3, 3)) * 0.5
    w = leaf(wv)
    ((leaf(xv) @ w).tanh() @ w).tanh().sum().backward()
    w1, w2 = leaf(wv), leaf(wv)
    ((leaf(xv) @ w1).tanh() @ w2).tanh().sum().backward()
    np.testing.assert_allclose(w.grad, w1.grad + w2.grad, rtol=1e-13, atol=1e-15)


@given(
    steps=st.integers(1, 12),
    hidden=st.integers(1, 4),
    batch=st.integers(1, 3),
    seed=st.integers(0, 2**31 - 1),
)
def test_recurrent_weight_accumulates_over_every_step(steps: int, hidden: int, batch: int,
                                                      seed: int) -> None:
    """A weight shared by every step of h_t = tanh(h_{t-1} W + x_t + b) gets the sum of the
    per-step gradients (checked against one untied copy per step)."""
    rng = np.random.default_rng(seed)
    wv = rng.normal(size=(hidden, hidden)) / np.sqrt(hidden)
    bv = rng.normal(size=hidden) * 0.1
    xs = rng.normal(size=(steps, batch, hidden)) * 0.5

    def run(ws: list, b: tr.Tensor) -> None:
        h = tr.Tensor(np.zeros((batch, hidden)))
        for t in range(steps):
            h = (h @ ws[t] + xs[t] + b).tanh()  # (N, H)
        h.sum().backward()

    w, b = leaf(wv), leaf(bv)
    run([w] * steps, b)
    untied = [leaf(wv) for _ in range(steps)]
    b2 = leaf(bv)
    run(untied, b2)
    expected = sum(u.grad for u in untied)
    np.testing.assert_allclose(w.grad, expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(b.grad, b2.grad)


# ----------------------------------------------------------------------------- depth
def _numpy_tanh_rnn_grads(wv: np.ndarray, xs: np.ndarray) -> tuple:
    """Reference BPTT for h_t = tanh(h_{t-1} W + x_t), h_0 = 0, L = sum(h_T)."""
    hs = [np.zeros_like(xs[0])]
    for x_t in xs:
        hs.append(np.tanh(hs[-1] @ wv + x_t))
    dh = np.ones_like(hs[-1])  # dL/dh_T
    dw = np.zeros_like(wv)
    dxs = np.zeros_like(xs)
    for t in range(len(xs) - 1, -1, -1):
        da = dh * (1 - hs[t + 1] ** 2)  # through tanh
        dw += hs[t].T @ da
        dxs[t] = da
        dh = da @ wv.T
    return dw, dxs


def test_backward_through_10000_step_tanh_recurrence_at_default_recursion_limit() -> None:
    limit = sys.getrecursionlimit()
    assert limit <= 1000, "the depth tests must run at Python's default recursion limit"
    steps, batch, hidden = 10_000, 2, 3
    rng = np.random.default_rng(3)
    wv = rng.normal(size=(hidden, hidden)) * 0.4
    xs = rng.normal(size=(steps, batch, hidden)) * 0.5
    w = leaf(wv)
    x_leaves = [leaf(x_t) for x_t in xs]
    h = tr.Tensor(np.zeros((batch, hidden)))
    for x_t in x_leaves:
        h = (h @ w + x_t).tanh()
    assert count_graph_nodes(h) == 3 * steps  # MatMul, Add, Tanh per step
    h.sum().backward()
    assert sys.getrecursionlimit() == limit
    dw, dxs = _numpy_tanh_rnn_grads(wv, xs)
    np.testing.assert_allclose(w.grad, dw, rtol=1e-10, atol=1e-13)
    for t in (0, 1, steps // 2, steps - 2, steps - 1):
        np.testing.assert_allclose(x_leaves[t].grad, dxs[t], rtol=1e-10, atol=1e-13)
    assert count_graph_nodes(h) == 0  # every node was freed by the backward pass


def test_backward_through_100000_op_chain_at_default_recursion_limit() -> None:
    limit = sys.getrecursionlimit()
    assert limit <= 1000, "the depth tests must run at Python's default recursion limit"
    x = leaf([0.5, -2.0])
    y = x
    for _ in range(100_000):
        y = -y
    assert count_graph_nodes(y) == 100_000
    y.sum().backward()
    assert sys.getrecursionlimit() == limit
    np.testing.assert_array_equal(x.grad, [1.0, 1.0])  # (-1)^100000


_DELETE_DEEP_GRAPHS = """
import gc, sys, weakref
import numpy as np
import tinygrad_rnn as tr

assert sys.getrecursionlimit() <= 1000, sys.getrecursionlimit()
gc.disable()
x = tr.Tensor(np.array([0.1, 0.2]), requires_grad=True)
y = x.tanh()
first = weakref.ref(y)
for _ in range(100_000):
    y = y * 1.0
del y
assert first() is None, "the chain was not freed by reference counting"

w = tr.Tensor(np.eye(2) * 0.5, requires_grad=True)
h = tr.Tensor(np.zeros((1, 2)))
h = (h @ w).tanh()
first = weakref.ref(h)
for _ in range(10_000):
    h = (h @ w + 0.1).tanh()
del h
assert first() is None, "the unrolled recurrence was not freed by reference counting"
print("deleted")
"""


def test_deleting_never_backwarded_deep_graphs_succeeds_in_subprocess() -> None:
    """Dropping the last reference to a 100,000-op graph (and a 10,000-step unroll) that was
    never backwarded must not crash the interpreter (C-level recursion in deallocation)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", _DELETE_DEEP_GRAPHS], env=env, capture_output=True, text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "deleted"


# ----------------------------------------------------------------------------- freeing
def _small_graph(x: tr.Tensor, refs: list, tensor_refs: list | None = None,
                 hold: list | None = None) -> tr.Tensor:
    """tanh/sigmoid/matmul chain; weakrefs to every node go to refs, to every intermediate
    tensor to tensor_refs, and the intermediate tensors themselves to hold."""
    w = tr.Tensor(np.full((3, 3), 0.2))
    h = x
    for _ in range(4):
        h = (h @ w).tanh() * (h.sigmoid() + 1.0)
        if tensor_refs is not None:
            tensor_refs.append(weakref.ref(h))
        if hold is not None:
            hold.append(h)
        refs.append(weakref.ref(h.grad_fn))
    loss = (h * h).sum()
    refs.append(weakref.ref(loss.grad_fn))
    return loss


def test_graph_freed_by_refcount_after_backward_with_gc_disabled() -> None:
    with gc_disabled():
        x = leaf(np.linspace(-1, 1, 6).reshape(2, 3))
        refs: list = []
        loss = _small_graph(x, refs)
        loss.backward()
        # the backward pass dropped every node's inputs: only the loss and its node are alive
        assert all(r() is None for r in refs[:-1])
        assert refs[-1]() is loss.grad_fn and loss.grad_fn.released
        del loss
        assert all(r() is None for r in refs)
        assert x.grad is not None


def test_graph_freed_by_refcount_without_backward_with_gc_disabled() -> None:
    with gc_disabled():
        x = leaf(np.ones((2, 3)))
        refs: list = []
        loss = _small_graph(x, refs)
        assert all(r() is not None for r in refs)
        del loss
        assert all(r() is None for r in refs)


def test_nodes_keep_intermediate_tensors_only_as_edges() -> None:
    """A node keeps an input made by another op as an Edge (producer node, output index,
    shape, dtype), not as the tensor: the intermediate tensors of a graph are freed as soon
    as the program drops them, while the graph (and what each op saved) lives on until
    backward, whose gradients are those of the same graph with every tensor held."""
    grads = []
    for hold in (False, True):
        with gc_disabled():
            x = leaf(np.linspace(-1, 1, 6).reshape(2, 3))
            refs: list = []
            tensors: list = []
            held: list = []
            loss = _small_graph(x, refs, tensors, held if hold else None)
            assert all(r() is not None for r in refs)
            assert all((r() is not None) == hold for r in tensors)
            loss.backward()
            grads.append(x.grad.numpy().tobytes())
            del held
    assert grads[0] == grads[1]


def test_an_edge_says_what_it_stands_for_and_keeps_no_values() -> None:
    x = leaf(np.ones((2, 3)))
    y = (x * 2.0).tanh()
    edge = y.grad_fn.inputs[0]
    assert isinstance(edge, tr.engine.Edge)
    assert edge.grad_fn is not None and edge.grad_fn.name == "Mul"
    assert edge.shape == (2, 3) and edge.dtype == x.dtype and edge.requires_grad
    assert "Mul" in repr(edge) and "(2, 3)" in repr(edge)
    for read in (edge.numpy, edge.item, edge.tolist, lambda: edge.data,
                 lambda: np.asarray(edge)):
        with pytest.raises(RuntimeError, match=r"edge of the recorded graph.*Mul"):
            read()


def test_an_edge_is_frozen_at_recording_while_the_tensor_is_written_in_place() -> None:
    x = leaf(np.array([0.5, -0.25, 1.0]))
    a = x * 3.0
    b = a.tanh()          # consumed a before the write
    a += x                # a gets a new node; b's edge still leads to Mul
    loss = (b.sum() + a.sum())
    loss.backward()
    want = 3.0 * (1 - np.tanh(3.0 * x.numpy()) ** 2) + 4.0
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)


def test_backward_frees_each_steps_weight_transpose_gradient_at_once() -> None:
    """The order of backward (producers recorded last visited last): each step's W.T node
    runs right after the step's MatMul, so its gradient does not wait for the earlier steps
    (which would keep T gradients of W's size alive at once)."""
    w = leaf(np.full((3, 3), 0.1))
    h = leaf(np.ones((1, 3)))
    order = []
    for _ in range(5):
        h = (h @ w.T).tanh()
    nodes = tr.engine._topological_order(h.sum().grad_fn)  # noqa: SLF001
    order = [n.name for n in reversed(nodes)]
    # Sum, then per step: Tanh, MatMul, Transpose (its W.T), down to the first step
    assert order == ["Sum"] + ["Tanh", "MatMul", "Transpose"] * 5


def test_retained_graph_freed_by_refcount_after_dropping_it_with_gc_disabled() -> None:
    with gc_disabled():
        x = leaf(np.ones((2, 3)))
        refs: list = []
        loss = _small_graph(x, refs)
        loss.backward(retain_graph=True)
        assert all(r() is not None for r in refs)  # retained: still there
        del loss
        assert all(r() is None for r in refs)


def test_graph_with_hooks_and_retain_grad_freed_with_gc_disabled() -> None:
    with gc_disabled():
        x = leaf(np.ones(3))
        h = x.tanh()
        h.retain_grad()
        h.register_hook(lambda g: g * 2.0)
        node = weakref.ref(h.grad_fn)
        h_ref = weakref.ref(h)
        loss = (h * 3.0).sum()
        loss.backward()
        del h, loss
        assert h_ref() is None and node() is None


# ----------------------------------------------------------------------------- retain_graph
def test_retain_graph_allows_second_backward_and_accumulates() -> None:
    x = leaf([0.2, -0.4, 1.1])
    loss = (x.tanh() * x).sum()
    loss.backward(retain_graph=True)
    first = x.grad.array.copy()
    loss.backward(retain_graph=True)
    np.testing.assert_array_equal(x.grad, 2 * first)  # g + g is exact
    loss.backward()  # the last one may free the graph
    np.testing.assert_array_equal(x.grad, 3 * first)


def test_second_backward_through_freed_graph_raises_naming_op_and_retain_graph() -> None:
    x = leaf([0.2, -0.4])
    y = x.tanh()
    loss = (y * 2.0).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="retain_graph") as info:
        loss.backward()
    assert "Sum" in str(info.value)
    # a backward from an intermediate of the freed graph fails the same way, naming its op
    with pytest.raises(RuntimeError, match="retain_graph") as info:
        y.backward(np.ones(2))
    assert "Tanh" in str(info.value)


def test_second_backward_reaching_a_freed_node_from_a_new_root_raises() -> None:
    x = leaf([0.2, -0.4])
    y = x.exp()
    y.sum().backward()  # frees Exp
    z = (y * 3.0).sum()  # new nodes on top of the freed one
    with pytest.raises(RuntimeError, match=r"Exp.*retain_graph"):
        z.backward()


# ----------------------------------------------------------------------------- no_grad
def test_no_grad_context_manager_records_nothing_and_restores() -> None:
    x = leaf([1.0, 2.0])
    assert tr.is_grad_enabled()
    with tr.no_grad():
        assert not tr.is_grad_enabled()
        y = x * 2.0
    assert tr.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf
    with pytest.raises(RuntimeError):
        y.sum().backward()


def test_no_grad_decorator_restores_previous_state() -> None:
    @tr.no_grad()
    def double(t: tr.Tensor) -> tr.Tensor:
        assert not tr.is_grad_enabled()
        return t * 2.0

    x = leaf([1.0])
    y = double(x)
    assert y.grad_fn is None and not y.requires_grad
    assert tr.is_grad_enabled()
    with tr.no_grad():  # called inside no_grad, it leaves no_grad in place
        double(x)
        assert not tr.is_grad_enabled()
    assert tr.is_grad_enabled()


def test_no_grad_nesting_and_enable_grad_inside() -> None:
    x = leaf([1.0, 2.0])
    with tr.no_grad():
        with tr.no_grad():
            assert not tr.is_grad_enabled()
        assert not tr.is_grad_enabled()  # the inner exit restored False, not True
        with tr.enable_grad():
            assert tr.is_grad_enabled()
            y = x * 3.0
        assert not tr.is_grad_enabled()
        z = x * 3.0
    assert tr.is_grad_enabled()
    assert y.grad_fn is not None and z.grad_fn is None
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])


def test_enable_grad_decorator_and_set_grad_enabled() -> None:
    @tr.enable_grad()
    def record(t: tr.Tensor) -> tr.Tensor:
        return t * 2.0

    x = leaf([1.0])
    with tr.no_grad():
        y = record(x)
        assert not tr.is_grad_enabled()
    assert y.grad_fn is not None
    with tr.set_grad_enabled(False):
        assert not tr.is_grad_enabled()
        with tr.set_grad_enabled(True):
            assert tr.is_grad_enabled()
        assert not tr.is_grad_enabled()
    assert tr.is_grad_enabled()


def test_grad_mode_restored_after_exception() -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with tr.no_grad():
            raise Boom
    assert tr.is_grad_enabled()

    @tr.no_grad()
    def fails() -> None:
        raise Boom

    with pytest.raises(Boom):
        fails()
    assert tr.is_grad_enabled()

    with tr.no_grad():
        with pytest.raises(Boom):
            with tr.enable_grad():
                raise Boom
        assert not tr.is_grad_enabled()
    assert tr.is_grad_enabled()


def test_same_no_grad_object_reentered() -> None:
    ctx = tr.no_grad()
    with ctx:
        with ctx:
            assert not tr.is_grad_enabled()
        assert not tr.is_grad_enabled()
    assert tr.is_grad_enabled()


# ----------------------------------------------------------------------------- detach
def test_detach_cuts_graph_and_shares_data() -> None:
    x = leaf([1.0, -2.0, 3.0])
    y = x * 2.0
    d = y.detach()
    assert d.is_leaf and not d.requires_grad and d.grad_fn is None
    assert np.shares_memory(d.array, y.array)
    # the detached value acts as a constant: d/dx (x * d) = d, not d + 2x
    (x * d).sum().backward()
    np.testing.assert_array_equal(x.grad, y.array)


def test_detach_stops_gradient_in_recurrence() -> None:
    """Truncated BPTT: detaching the carried state means earlier steps get no gradient."""
    w = leaf(np.eye(2) * 0.5)
    x0 = leaf(np.ones((1, 2)))
    h = (x0 @ w).tanh()
    h = h.detach()
    out = (h @ w).tanh().sum()
    out.backward()
    assert x0.grad is None
    assert count_graph_nodes(out) == 0


# ----------------------------------------------------------------------------- hooks
def test_leaf_hook_called_once_with_total_gradient() -> None:
    x = leaf([1.0, 2.0])
    seen: list = []
    x.register_hook(lambda g: seen.append(g.copy()))
    (x * 3.0 + x * 4.0).sum().backward()
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], [7.0, 7.0])
    np.testing.assert_array_equal(x.grad, [7.0, 7.0])


def test_nonleaf_hook_called_once_with_total_gradient_and_replacement_flows_on() -> None:
    x = leaf([1.0, 2.0])
    h = x * 2.0
    seen: list = []

    def hook(g: np.ndarray) -> np.ndarray:
        seen.append(g.copy())
        return g * 10.0

    h.register_hook(hook)
    (h * 3.0 + h).sum().backward()
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], [4.0, 4.0])  # total over both uses of h
    np.testing.assert_array_equal(x.grad, [80.0, 80.0])  # 10 * 4 * dh/dx (= 2)


def test_leaf_hook_replacement_becomes_grad_and_none_keeps_it() -> None:
    x = leaf([1.0, 2.0])
    x.register_hook(lambda g: None)
    x.register_hook(lambda g: -g)
    (x * 5.0).sum().backward()
    np.testing.assert_array_equal(x.grad, [-5.0, -5.0])


def test_hook_handle_remove() -> None:
    x = leaf([1.0])
    h = x * 2.0
    calls: list = []
    handle_leaf = x.register_hook(lambda g: calls.append("leaf"))
    handle_h = h.register_hook(lambda g: calls.append("h"))
    handle_leaf.remove()
    handle_h.remove()
    handle_h.remove()  # removing twice is harmless
    h.sum().backward()
    assert calls == []
    np.testing.assert_array_equal(x.grad, [2.0])


def test_hook_returning_wrong_shape_raises() -> None:
    x = leaf([1.0, 2.0])
    h = x * 2.0
    h.register_hook(lambda g: np.ones(3))
    with pytest.raises(RuntimeError, match=r"\(3,\)"):
        h.sum().backward()


def test_hook_on_tensor_without_grad_raises() -> None:
    with pytest.raises(RuntimeError, match="register_hook"):
        tr.Tensor([1.0]).register_hook(lambda g: g)


def test_hook_sees_gradient_of_unused_output_as_zeros() -> None:
    """A multi-output op whose second output is unused still calls that output's hook."""
    x = leaf(np.arange(4.0))
    a, b = tr.split(x, 2)
    seen: list = []
    b.register_hook(lambda g: seen.append(g.copy()))
    (a * 2.0).sum().backward()
    np.testing.assert_array_equal(seen[0], [0.0, 0.0])
    np.testing.assert_array_equal(x.grad, [2.0, 2.0, 0.0, 0.0])


# ----------------------------------------------------------------------------- retain_grad
def test_retain_grad_on_nonleaf_keeps_total_gradient() -> None:
    x = leaf([0.5, -0.5])
    h = x.tanh()
    h.retain_grad()
    other = x.exp()
    (h * 2.0 + h * other).sum().backward()
    np.testing.assert_allclose(h.grad, 2.0 + np.exp([0.5, -0.5]), rtol=1e-15)
    assert other.grad is None  # not retained
    assert x.grad is not None


def test_retain_grad_accumulates_across_backward_calls_and_leaf_noop() -> None:
    x = leaf([1.0, 2.0])
    x.retain_grad()  # a leaf keeps its gradient anyway
    h = x * 3.0
    h.retain_grad()
    loss = h.sum()
    loss.backward(retain_graph=True)
    loss.backward()
    np.testing.assert_array_equal(h.grad, [2.0, 2.0])
    np.testing.assert_array_equal(x.grad, [6.0, 6.0])


# ----------------------------------------------------------------------------- versions
_VERSION_MSG = re.compile(r"saved for backward at version \d+ .*now version \d+")

# (op name in the error, function of x, what is saved: "input" x or the "output")
SAVING_OPS: list[tuple[str, Callable[[tr.Tensor], tr.Tensor], str]] = [
    # (Mul keeps x only when the other factor needs a gradient, as torch)
    ("Mul", lambda x: x * tr.Tensor(np.full((2, 3), 1.5), requires_grad=True), "input"),
    ("Div", lambda x: tr.Tensor(np.full((2, 3), 1.5)) / x, "input"),
    ("MatMul", lambda x: x @ tr.Tensor(np.ones((3, 2))), "input"),
    ("Pow", lambda x: x ** 3.0, "input"),
    ("Log", lambda x: x.log(), "input"),
    ("Abs", lambda x: x.abs(), "input"),
    ("Maximum", lambda x: x.maximum(tr.Tensor(np.full((2, 3), 0.2))), "input"),
    ("BCEWithLogits", lambda x: F.binary_cross_entropy_with_logits(
        x, tr.Tensor(np.full((2, 3), 0.5)), reduction="none"), "input"),
    ("Exp", lambda x: x.exp(), "output"),
    ("Tanh", lambda x: x.tanh(), "output"),
    ("Sigmoid", lambda x: x.sigmoid(), "output"),
    ("Sqrt", lambda x: x.sqrt(), "output"),
    ("ReLU", lambda x: x.relu(), "output"),
    ("Softmax", lambda x: x.softmax(axis=-1), "output"),
]

MUTATIONS: dict[str, Callable[[tr.Tensor], Any]] = {
    "data": lambda t: setattr(t, "data", t.array + 1.0),
    "setitem": lambda t: t.__setitem__((0, 1), 0.25),
    "add_": lambda t: t.add_(1.0),
    "sub_": lambda t: t.sub_(0.5),
    "mul_": lambda t: t.mul_(2.0),
    "div_": lambda t: t.div_(2.0),
    "copy_": lambda t: t.copy_(np.full(t.shape, 0.75)),
    "fill_": lambda t: t.fill_(0.5),
    "zero_": lambda t: t.zero_(),
    "clip_": lambda t: t.clip_(0.1, 0.2),
}


def _positive_leaf() -> tr.Tensor:
    return leaf(np.linspace(0.3, 1.8, 6).reshape(2, 3))


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@pytest.mark.parametrize("op_name, fn, saved", SAVING_OPS, ids=[c[0] for c in SAVING_OPS])
def test_inplace_write_to_saved_tensor_makes_backward_raise(op_name: str, fn: Callable,
                                                            saved: str, mutation: str) -> None:
    x = _positive_leaf()
    y = fn(x)
    target = x if saved == "input" else y
    with tr.no_grad():
        MUTATIONS[mutation](target)
    with pytest.raises(RuntimeError, match=_VERSION_MSG) as info:
        y.sum().backward()
    assert f"{op_name}.backward" in str(info.value)


def test_version_error_names_the_versions() -> None:
    x = _positive_leaf()
    y = x.tanh()
    with tr.no_grad():
        y.add_(1.0)
        y.mul_(2.0)
    with pytest.raises(RuntimeError, match=r"Tanh\.backward.*version 0.*now version 2"):
        y.sum().backward()


def test_inplace_write_through_a_view_or_detached_alias_is_detected() -> None:
    """Regression: x.T and x.reshape share x's memory, so they share its version counter; a
    write to x after a Mul saved x.T used to give a silently wrong gradient."""
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    y = x.T
    z = (y * y).sum()
    with tr.no_grad():
        x.add_(10.0)
    with pytest.raises(RuntimeError, match="Mul.backward"):
        z.backward()

    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    v = x.reshape(4)
    z = (x * x).sum()
    with tr.no_grad():
        v[0] = 100.0  # a write through the view changes x's saved data
    with pytest.raises(RuntimeError, match="Mul.backward"):
        z.backward()

    x = leaf([1.0, 2.0])
    z = (x * x).sum()
    x.detach()[0] = 5.0  # the detached alias needs no no_grad: it does not require grad
    with pytest.raises(RuntimeError, match="Mul.backward"):
        z.backward()


def test_view_of_a_written_tensor_keeps_working_when_nothing_was_saved() -> None:
    """Sharing the version counter must not break ops taken after the write."""
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    with tr.no_grad():
        x.add_(1.0)  # version 1 before any view exists
    y = x.T
    (y * y).sum().backward()
    np.testing.assert_array_equal(x.grad, 2 * x.array)


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_inplace_write_to_unsaved_tensors_does_not_raise(mutation: str) -> None:
    """Add, Sub, Neg, Sum, Reshape, Transpose, cat and basic indexing save no arrays, so
    writing into their inputs changes no gradient."""
    x = _positive_leaf()
    c = tr.Tensor(np.full((2, 3), 2.0))
    parts = [x + c, x - c, -x, x.reshape(3, 2).T, tr.cat([x, c], axis=0)[:2], x[1]]
    loss = parts[0].sum()
    for p in parts[1:]:
        loss = loss + p.sum()
    with tr.no_grad():
        MUTATIONS[mutation](c)
        MUTATIONS[mutation](x)
    loss.backward()
    expected = np.full((2, 3), 3.0)  # 1 + 1 - 1 + 1 + 1, and +1 in row 1
    expected[1] += 1.0
    np.testing.assert_array_equal(x.grad, expected)


# d(mutation(y))/dy entrywise, for y = 2 x with x = _positive_leaf() (entries 0.3 to 1.8)
MUTATION_SLOPES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "setitem": lambda y: np.where(np.arange(6).reshape(2, 3) == 1, 0.0, 1.0),
    "add_": lambda y: np.ones_like(y),
    "sub_": lambda y: np.ones_like(y),
    "mul_": lambda y: np.full_like(y, 2.0),
    "div_": lambda y: np.full_like(y, 0.5),
    "copy_": lambda y: np.zeros_like(y),
    "fill_": lambda y: np.zeros_like(y),
    "zero_": lambda y: np.zeros_like(y),
    "clip_": lambda y: ((y > 0.1) & (y < 0.2)).astype(float),
}


@pytest.mark.parametrize("mutation", sorted(set(MUTATIONS) - {"data"}))
def test_inplace_on_leaf_that_requires_grad_raises_and_on_non_leaf_is_recorded(
        mutation: str) -> None:
    x = _positive_leaf()
    with pytest.raises(RuntimeError, match="in-place.*tr.no_grad"):
        MUTATIONS[mutation](x)
    y = x * 2.0  # a non-leaf: the write is recorded, as in torch
    y_before = y.numpy().copy()
    MUTATIONS[mutation](y)
    assert y.requires_grad and not y.is_leaf
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, 2.0 * MUTATION_SLOPES[mutation](y_before))
    with tr.no_grad():  # allowed under no_grad (a parameter update)
        MUTATIONS[mutation](x)


# ----------------------------------------------------------------------------- backward args
def test_backward_on_nonscalar_without_grad_raises() -> None:
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"one-element.*\(2,\)"):
        (x * 2.0).backward()
    assert x.grad is None
    y = leaf([[3.0]])
    (y * 2.0).backward()  # a one-element tensor of any rank may omit grad
    np.testing.assert_array_equal(y.grad, [[2.0]])


def test_backward_with_wrongly_shaped_grad_raises_value_error() -> None:
    x = leaf(np.ones((2, 3)))
    y = x * 2.0
    with pytest.raises(ValueError, match=r"\(3, 2\).*\(2, 3\)"):
        y.backward(np.ones((3, 2)))
    with pytest.raises(ValueError):
        y.backward(np.ones(6))


def test_backward_on_tensor_without_graph_raises() -> None:
    with pytest.raises(RuntimeError, match="does not require a gradient"):
        tr.Tensor([1.0]).backward()


def test_backward_grad_given_as_tensor_and_other_dtype() -> None:
    x = leaf(np.ones(2, dtype=np.float32), dtype=np.float32)
    (x * 2.0).backward(tr.Tensor(np.array([1.0, 3.0])))  # float64 upstream, float32 tensor
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad, [2.0, 6.0])


def test_backward_does_not_mutate_upstream_gradient() -> None:
    x = leaf([1.0, 2.0])
    h = x * 1.0
    g = np.array([1.0, 1.0])
    (h + h).backward(g)
    np.testing.assert_array_equal(g, [1.0, 1.0])
    np.testing.assert_array_equal(x.grad, [2.0, 2.0])
    assert not np.shares_memory(x.grad, g)


# ----------------------------------------------------------------------------- sum_to_shape
@st.composite
def broadcast_cases(draw: st.DrawFn) -> tuple:
    """(target shape, broadcast shape, leading axes, expanded axes): the broadcast shape
    adds leading axes and grows some size-1 axes of the target."""
    target = tuple(draw(st.lists(st.integers(1, 4), max_size=4)))
    lead = tuple(draw(st.lists(st.integers(1, 4), max_size=2)))
    grown = []
    expanded = []
    for i, s in enumerate(target):
        if s == 1 and draw(st.booleans()):
            grown.append(draw(st.integers(2, 4)))
            expanded.append(len(lead) + i)
        else:
            grown.append(s)
    return target, lead + tuple(grown), len(lead), tuple(expanded)


@given(case=broadcast_cases(), seed=st.integers(0, 2**31 - 1))
@example(case=((3,), (4, 3), 1, ()), seed=0)  # the RNN bias (N, H) + (H,)
@example(case=((1, 3), (5, 4, 3), 1, (1,)), seed=0)
def test_sum_to_shape_equals_explicit_sum(case: tuple, seed: int) -> None:
    target, big, n_lead, expanded = case
    # integer-valued floats make every summation order exact
    grad = np.random.default_rng(seed).integers(-5, 6, size=big).astype(np.float64)
    expected = grad.sum(axis=tuple(range(n_lead))) if n_lead else grad
    for ax in expanded:
        expected = expected.sum(axis=ax - n_lead, keepdims=True)
    out = tr.sum_to_shape(grad, target)
    assert out.shape == target
    np.testing.assert_array_equal(out, expected)


@given(case=broadcast_cases(), seed=st.integers(0, 2**31 - 1))
def test_engine_reduces_broadcast_gradient_of_add(case: tuple, seed: int) -> None:
    """a (target shape) + b (broadcast shape): a.grad is sum_to_shape of the upstream."""
    target, big, _, _ = case
    rng = np.random.default_rng(seed)
    a, b = leaf(rng.normal(size=target)), leaf(rng.normal(size=big))
    g = rng.integers(-5, 6, size=big).astype(np.float64)
    (a + b).backward(g)
    assert a.grad.shape == target and b.grad.shape == big
    np.testing.assert_array_equal(a.grad, tr.sum_to_shape(g, target))
    np.testing.assert_array_equal(b.grad, g)


def test_rnn_bias_gradient_sums_over_batch() -> None:
    h = leaf([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])  # (N, H) = (2, 3)
    b = leaf([0.1, 0.2, 0.3])  # (H,)
    g = np.array([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]])
    (h + b).backward(g)
    np.testing.assert_array_equal(b.grad, [11.0, 22.0, 33.0])
    np.testing.assert_array_equal(h.grad, g)


def _relative_error(approx: np.ndarray, exact: np.ndarray) -> float:
    approx = np.asarray(approx, dtype=np.float64)
    return float(np.linalg.norm(approx - exact) / np.linalg.norm(exact))


def test_float32_bias_gradient_error_does_not_grow_with_the_batch() -> None:
    """(N, H) + (H,) with N = 200,000 in float32: NumPy's sum over axis 0 adds row after
    row, which left the bias gradient about 1e-5 off (relative; torch: 2e-7). Summed
    pairwise it stays near float32's resolution, and it is still float32. The same holds for
    a size-1 axis, (N, H) * (1, H)."""
    rng = np.random.default_rng(0)
    g = rng.standard_normal((200_000, 7)).astype(np.float32)
    exact = g.astype(np.float64).sum(axis=0)
    z = tr.Tensor(np.ones(g.shape, np.float32), requires_grad=True)
    b = tr.Tensor(np.zeros(7, np.float32), requires_grad=True)
    (z + b).backward(g)
    assert b.grad.dtype == np.float32
    assert _relative_error(b.grad, exact) < 1e-6
    s = tr.Tensor(np.ones((1, 7), np.float32), requires_grad=True)
    (z * s).backward(g)                                 # dL/ds = sum over N of g * 1
    assert s.grad.dtype == np.float32 and s.grad.shape == (1, 7)
    assert _relative_error(s.grad[0], exact) < 1e-6


def test_float64_bias_gradient_is_numpys_sum_bit_for_bit() -> None:
    """float64 gradients are reduced by NumPy's own sum, exactly as before."""
    g = np.random.default_rng(1).standard_normal((5000, 3, 4))
    b = tr.Tensor(np.zeros((1, 4)), requires_grad=True)
    (tr.Tensor(np.zeros((5000, 3, 4))) + b).backward(g)
    np.testing.assert_array_equal(b.grad, np.sum(g, axis=(0, 1), keepdims=True)[0])


@st.composite
def reductions(draw: st.DrawFn) -> tuple:
    """(array, axes, keepdims): an integer-valued array (every summation order is exact)
    with sides long enough to be halved, odd and even, in a C or Fortran layout, or as a
    transposed, strided or broadcast view; axes a sorted tuple of distinct axes."""
    shape = tuple(draw(st.lists(st.integers(0, 75), min_size=1, max_size=3)))
    seed = draw(st.integers(0, 2**31 - 1))
    a = np.random.default_rng(seed).integers(-8, 9, size=shape).astype(np.float32)
    layout = draw(st.sampled_from(["C", "F", "transposed", "strided", "broadcast"]))
    if layout == "F":
        a = np.asfortranarray(a)
    elif layout == "transposed":
        a = a.T
    elif layout == "strided":
        a = np.repeat(a, 2, axis=-1)[..., ::2]
    elif layout == "broadcast":
        a = np.broadcast_to(a[:1], a.shape)
    axes = tuple(sorted(draw(st.sets(st.integers(0, a.ndim - 1)))))
    return a, axes, draw(st.booleans())


@given(case=reductions())
@example(case=(np.ones((33, 2), np.float32), (0,), False))  # the first odd length halved
@example(case=(np.ones((40, 50, 3), np.float32), (0, 1), True))
def test_pairwise_sum_is_the_sum(case: tuple) -> None:
    """Halving (odd lengths included, on any layout) adds every entry exactly once: with
    integer values the float32 result equals the float64 sum; shape and dtype are NumPy's."""
    a, axes, keepdims = case
    out = pairwise_sum(a, axes, keepdims)
    expected = np.sum(a.astype(np.float64), axis=axes, keepdims=keepdims)
    assert np.shape(out) == expected.shape and out.dtype == np.float32
    np.testing.assert_array_equal(out, expected)


def test_pairwise_sum_of_float16_accumulates_in_float32_and_rounds_once() -> None:
    """3,000 ones in float16 down axis 0: added one after another in float16 the sum
    stops at 2048 (2048 + 1 rounds back to 2048); accumulated in float32, it is 3000."""
    ones = np.ones((3000, 2), np.float16)
    out = pairwise_sum(ones, (0,))
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, [3000.0, 3000.0])
    b = tr.Tensor(np.zeros(2, np.float16), requires_grad=True)
    (tr.Tensor(np.zeros((3000, 2), np.float16)) + b).backward(ones)   # the bias gradient
    np.testing.assert_array_equal(b.grad, [3000.0, 3000.0])


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64, bool])
def test_pairwise_sum_leaves_float64_and_integers_to_numpy(dtype: Any) -> None:
    a = np.random.default_rng(2).integers(0, 3, size=(300, 40)).astype(dtype)
    if dtype == np.float64:
        a = a + np.random.default_rng(3).standard_normal(a.shape)
    for axes in [(0,), (1,), (0, 1)]:
        out = pairwise_sum(a, axes)
        expected = np.sum(a, axis=axes)
        assert out.dtype == expected.dtype
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("grad_shape, target", [
    ((3,), (4,)), ((2, 3), (3, 3)), ((3,), (2, 3)), ((2, 4), (2, 1, 4)), ((5, 2), (1, 3)),
])
def test_sum_to_shape_rejects_shapes_that_are_not_a_broadcast(grad_shape: tuple,
                                                              target: tuple) -> None:
    with pytest.raises(ValueError, match="sum_to_shape"):
        tr.sum_to_shape(np.ones(grad_shape), target)


class _WrongShapeGrad(tr.Function):
    """A deliberately broken op: its backward drops the last element."""

    @staticmethod
    def forward(ctx: Any, x: np.ndarray) -> np.ndarray:
        return x * 2

    @staticmethod
    def backward(ctx: Any, grad_out: np.ndarray) -> np.ndarray:
        return grad_out[..., :-1]


class _WrongDtypeGrad(tr.Function):
    """A deliberately broken op: its backward returns float32 for a float64 input."""

    @staticmethod
    def forward(ctx: Any, x: np.ndarray) -> np.ndarray:
        return x * 2

    @staticmethod
    def backward(ctx: Any, grad_out: np.ndarray) -> np.ndarray:
        return (grad_out * 2).astype(np.float32)


class _TooManyGrads(tr.Function):
    @staticmethod
    def forward(ctx: Any, x: np.ndarray) -> np.ndarray:
        return x * 2

    @staticmethod
    def backward(ctx: Any, grad_out: np.ndarray) -> tuple:
        return grad_out, grad_out


class _BroadcastGrad(tr.Function):
    """A correct op whose backward leaves the reduction to the engine: y = x + 0 * ones(N, H)."""

    @staticmethod
    def forward(ctx: Any, x: np.ndarray) -> np.ndarray:
        return np.broadcast_to(x, (4,) + x.shape).copy()

    @staticmethod
    def backward(ctx: Any, grad_out: np.ndarray) -> np.ndarray:
        return grad_out  # (4, H): the engine sums it to (H,)


def test_engine_asserts_gradient_shapes_and_dtypes_of_custom_ops() -> None:
    x = leaf([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match=r"_WrongShapeGrad.*\(2,\).*\(3,\)"):
        _WrongShapeGrad.apply(x).sum().backward()
    with pytest.raises(RuntimeError, match=r"_WrongDtypeGrad.*float32.*float64"):
        _WrongDtypeGrad.apply(x).sum().backward()
    with pytest.raises(RuntimeError, match=r"_TooManyGrads.*2 gradients.*1 input"):
        _TooManyGrads.apply(x).sum().backward()
    y = _BroadcastGrad.apply(x)
    y.backward(np.arange(12.0).reshape(4, 3))
    np.testing.assert_array_equal(x.grad, [18.0, 22.0, 26.0])


# ----------------------------------------------------------------------------- graph count
def test_count_graph_nodes() -> None:
    x = leaf([1.0, 2.0])
    assert count_graph_nodes(x) == 0
    y = x * 2.0  # 1
    a, b = y.tanh(), y.exp()  # 2 and 3 (diamond: y's node counted once)
    loss = (a + b).sum()  # Add, Sum: 5
    assert count_graph_nodes(loss) == 5
    assert count_graph_nodes(a) == 2
    loss.backward(retain_graph=True)
    assert count_graph_nodes(loss) == 5
    loss.backward()
    assert count_graph_nodes(loss) == 0
    with tr.no_grad():
        assert count_graph_nodes(x * 2.0) == 0


# ----------------------------------------------------------------------------- dtypes
def test_mixed_float32_float64_grads_in_each_inputs_dtype() -> None:
    av = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    bv = np.array([0.3, -0.6, 0.9])
    a32 = leaf(av.astype(np.float32), dtype=np.float32)
    b64 = leaf(bv)
    out = (a32 * b64).tanh() @ b64
    assert out.dtype == np.float64
    out.sum().backward()
    assert a32.grad.dtype == np.float32 and b64.grad.dtype == np.float64
    # the same computation fully in float64 is the reference
    a_ref, b_ref = leaf(av.astype(np.float32).astype(np.float64)), leaf(bv)
    ((a_ref * b_ref).tanh() @ b_ref).sum().backward()
    np.testing.assert_allclose(a32.grad, a_ref.grad, rtol=1e-6)
    np.testing.assert_allclose(b64.grad, b_ref.grad, rtol=1e-13)


def test_float32_graph_keeps_float32_gradients() -> None:
    x = leaf(np.array([0.5, -0.5], dtype=np.float32), dtype=np.float32)
    loss = ((x * 2.0).tanh() * np.float64(3.0) + 1.0).sum()
    assert loss.dtype == np.float32
    loss.backward()
    assert x.grad.dtype == np.float32


def test_grad_of_int_tensor_cannot_be_requested() -> None:
    with pytest.raises(TypeError, match="int64"):
        tr.Tensor(np.array([1, 2, 3]), requires_grad=True)
    ids = tr.Tensor(np.array([1, 2, 3]))
    with pytest.raises(TypeError, match="int64"):
        ids.requires_grad_()
    with pytest.raises(TypeError, match="int64"):
        ids.requires_grad = True
    w = leaf(np.ones((4, 2)))
    F.embedding(ids, w).sum().backward()  # int data next to float parameters is fine
    np.testing.assert_array_equal(w.grad, [[0, 0], [1, 1], [1, 1], [1, 1]])
    assert ids.grad is None and not ids.requires_grad
