"""Torch habits that must never give a silently wrong result: per-thread grad mode, in-place
operators, views that share memory, writes through views into a graph, elementwise
comparisons (issue "Nothing fails silently"; docs/engine.md, section 11)."""
from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tinygrad_rnn as tr
from torch_oracle import requires_torch


def leaf(values: Any) -> tr.Tensor:
    return tr.Tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


# ----------------------------------------------------------------------------- grad mode
def _train_step(W: tr.Tensor, x: np.ndarray) -> np.ndarray:
    W.grad = None
    h = tr.Tensor(x)
    for _ in range(5):
        h = (h @ W).tanh()
    h.sum().backward()
    return W.grad.array.copy()


def test_no_grad_in_one_thread_does_not_change_another_threads_gradients() -> None:
    rng = np.random.default_rng(0)
    W = leaf(rng.normal(size=(4, 4)) * 0.5)
    xs = [rng.normal(size=(3, 4)) for _ in range(150)]
    expected = [_train_step(W, x) for x in xs]  # single-threaded reference

    stop = threading.Event()

    def evaluator() -> None:
        while not stop.is_set():
            with tr.no_grad():
                (tr.Tensor(xs[0]) @ W).tanh()

    thread = threading.Thread(target=evaluator)
    thread.start()
    try:
        got = [_train_step(W, x) for x in xs]
    finally:
        stop.set()
        thread.join()
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(g, e)
    assert tr.is_grad_enabled()


def test_interleaved_no_grad_blocks_of_two_threads_leave_gradients_on() -> None:
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def thread_a() -> None:
        with tr.no_grad():
            a_in.set()
            b_in.wait()
        a_out.set()

    def thread_b() -> None:
        a_in.wait()
        with tr.no_grad():
            b_in.set()
            a_out.wait()
        seen["b_after"] = tr.is_grad_enabled()

    threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
    for t in threads:
        t.start()
    a_in.wait()
    seen["main_while_a_inside"] = tr.is_grad_enabled()
    for t in threads:
        t.join()
    assert seen == {"main_while_a_inside": True, "b_after": True}
    assert tr.is_grad_enabled()


def test_a_new_thread_starts_with_gradients_on_whatever_its_parent_has() -> None:
    seen = []
    with tr.no_grad():
        t = threading.Thread(target=lambda: seen.append(tr.is_grad_enabled()))
        t.start()
        t.join()
    assert seen == [True]


def test_no_grad_decorator_applies_inside_a_generator_and_not_to_its_caller() -> None:
    w = leaf([1.0, 2.0, 3.0])

    @tr.no_grad()
    def batches():
        for _ in range(2):
            received = yield (w * 2).requires_grad, tr.is_grad_enabled()
            assert received is None or received == "sent"

    gen = batches()
    assert next(gen) == (False, False)
    assert tr.is_grad_enabled()  # the caller's body runs in the caller's mode
    assert (w * 2).requires_grad
    assert gen.send("sent") == (False, False)
    gen.close()
    assert tr.is_grad_enabled()
    assert list(batches()) == [(False, False), (False, False)]


def test_enable_grad_decorator_inside_no_grad_and_exceptions_restore_the_mode() -> None:
    w = leaf([1.0])

    @tr.enable_grad()
    def record() -> bool:
        return (w * 2).requires_grad

    with tr.no_grad():
        assert record() is True
        assert not tr.is_grad_enabled()
    with pytest.raises(ZeroDivisionError):
        with tr.no_grad():
            1 / 0
    assert tr.is_grad_enabled()


def test_set_grad_enabled_as_a_call_a_context_and_a_decorator() -> None:
    try:
        tr.set_grad_enabled(False)
        assert not tr.is_grad_enabled()
    finally:
        tr.set_grad_enabled(True)
    with tr.set_grad_enabled(False):
        assert not tr.is_grad_enabled()
    assert tr.is_grad_enabled()

    @tr.set_grad_enabled(False)
    def off() -> bool:
        return tr.is_grad_enabled()

    assert tr.is_grad_enabled() and off() is False and tr.is_grad_enabled()
    with tr.inference_mode():
        assert not tr.is_grad_enabled()
    with pytest.raises(TypeError, match="set_grad_enabled: mode must be a bool"):
        tr.set_grad_enabled("no")
    assert tr.is_grad_enabled()


# ----------------------------------------------------------------------------- in-place
def test_manual_gradient_descent_with_minus_equals_keeps_the_parameter_a_leaf() -> None:
    W = leaf([[0.5, -0.25], [1.0, 0.75]])
    x = np.array([[1.0, 2.0]])
    before = id(W)
    for _ in range(3):
        loss = ((tr.Tensor(x) @ W) ** 2).sum()
        loss.backward()
        g = W.grad.array.copy()
        old = W.numpy().copy()
        with tr.no_grad():
            W -= 0.1 * W.grad
        np.testing.assert_allclose(W.numpy(), old - 0.1 * g, rtol=0, atol=1e-15)
        W.grad = None
    assert id(W) == before and W.is_leaf and W.requires_grad


@pytest.mark.parametrize("op, symbol", [("__iadd__", r"\+="), ("__isub__", "-="),
                                        ("__imul__", r"\*="), ("__itruediv__", "/=")])
def test_augmented_assignment_on_a_parameter_outside_no_grad_names_the_operator(
        op: str, symbol: str) -> None:
    W = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=f"{symbol}.*leaf.*tr.no_grad"):
        getattr(W, op)(0.5)
    np.testing.assert_array_equal(W.numpy(), [1.0, 2.0])  # nothing was written


def test_augmented_assignment_acts_in_place_on_integer_and_float_tensors() -> None:
    t = tr.tensor([1, 2, 3])
    alias = t
    t += 1
    t *= 2
    assert t is alias and t.dtype == np.int64
    np.testing.assert_array_equal(t.numpy(), [4, 6, 8])
    with pytest.raises(TypeError, match="/="):
        t /= 2
    with pytest.raises(TypeError, match=r"\+="):
        t += 0.5  # an int tensor cannot hold 4.5 (torch refuses too)
    f = tr.tensor([1.0, 2.0])
    f **= 2
    np.testing.assert_array_equal(f.numpy(), [1.0, 4.0])


def test_inplace_ops_on_an_activation_are_recorded_like_torch() -> None:
    x = leaf([0.5, -1.0, 2.0])
    w = leaf([3.0, 4.0, 5.0])
    h = x * 3.0
    s = h + 1.0  # recorded before the writes: must still see the old h
    h += w
    h *= w
    h /= 2.0
    loss = h.sum() + (s * s).sum()
    loss.backward()
    # h_final = (3 x + w) * w / 2, s = 3 x + 1
    xv, wv = x.numpy(), w.numpy()
    np.testing.assert_allclose(x.grad, 3 * wv / 2 + 2 * (3 * xv + 1) * 3, atol=1e-14)
    np.testing.assert_allclose(w.grad, (3 * xv + 2 * wv) / 2, atol=1e-14)
    t = x.tanh()  # tanh keeps its output for backward: writing into it is an error
    t += w
    with pytest.raises(RuntimeError, match="Tanh.backward.*modified in place"):
        t.sum().backward()


def test_accumulating_into_a_zeros_buffer_records_like_torch() -> None:
    xs = [leaf([1.0, 2.0]), leaf([3.0, -1.0]), leaf([0.5, 0.5])]
    total = tr.zeros(2, dtype=np.float64)
    for k, x in enumerate(xs):
        total += x * (k + 1)
    assert total.requires_grad and not total.is_leaf
    (total * total).sum().backward()
    t = sum(x.numpy() * (k + 1) for k, x in enumerate(xs))
    for k, x in enumerate(xs):
        np.testing.assert_allclose(x.grad, 2 * t * (k + 1), atol=1e-14)


# ----------------------------------------------------------------------------- views
def test_writes_through_an_index_reach_the_base() -> None:
    z = tr.zeros(3, 4)
    z[0][1] = 1
    z[1].fill_(2)
    z[2, 1:3] += 5
    z.T[3, 0] = 7  # through a transposed view
    want = np.zeros((3, 4), np.float32)
    want[0, 1], want[1], want[2, 1:3], want[0, 3] = 1, 2, 5, 7
    np.testing.assert_array_equal(z.numpy(), want)


def test_views_share_memory_and_the_version_counter() -> None:
    x = leaf(np.linspace(0.1, 1.2, 12).reshape(3, 4))
    y = x * 1.0
    for view in (y[1], y[:, 1:3], y.reshape(4, 3), y.view(12), y.T, y.permute(1, 0),
                 y.unsqueeze(0), y[None, ..., 2], y.narrow(1, 1, 2), y.transpose(0, 1)):
        assert np.shares_memory(view.numpy(), y.numpy())
    copies = (y[[0, 2]], y[y > 0.5])  # advanced indexing copies, as in torch
    for c in copies:
        assert not np.shares_memory(c.numpy(), y.numpy())
    z = y.tanh()  # saves its output
    with tr.no_grad():
        z[0].add_(1.0)  # a write through a view bumps the base's version
    with pytest.raises(RuntimeError, match="modified in place"):
        z.sum().backward()


def test_view_refuses_a_layout_that_needs_a_copy_and_reshape_copies() -> None:
    y = tr.Tensor(np.arange(6.0).reshape(2, 3)).T
    with pytest.raises(RuntimeError, match="view.*reshape"):
        y.view(6)
    r = y.reshape(6)
    np.testing.assert_array_equal(r.numpy(), [0, 3, 1, 4, 2, 5])
    np.testing.assert_array_equal(y.contiguous().view(6).numpy(), [0, 3, 1, 4, 2, 5])


def test_writing_into_an_expanded_view_is_refused() -> None:
    e = tr.ones(3).expand(2, 3)
    with pytest.raises(RuntimeError, match="add_.*expanded"):
        e.add_(1.0)


def test_writing_through_a_view_of_a_parameter_needs_no_grad() -> None:
    W = leaf(np.ones((2, 3)))
    with pytest.raises(RuntimeError, match="view of a leaf.*no_grad"):
        W[0].fill_(0.0)
    with tr.no_grad():
        W[0].fill_(0.0)
        W[:, 1] -= 0.5
    np.testing.assert_array_equal(W.numpy(), [[0.0, -0.5, 0.0], [1.0, 0.5, 1.0]])
    assert W.is_leaf


def test_setitem_of_time_steps_into_a_buffer_gives_torch_s_gradients() -> None:
    """The torch idiom `outputs[t] = h_t` (and `encoder_outputs[ei] += out`)."""
    rng = np.random.default_rng(1)
    W = leaf(rng.normal(size=(3, 3)) * 0.5)
    x = rng.normal(size=(4, 2, 3))
    out = tr.zeros(4, 2, 3, dtype=np.float64)
    acc = tr.zeros(4, 2, 3, dtype=np.float64)
    h = tr.Tensor(np.zeros((2, 3)))
    for t in range(4):
        h = (tr.Tensor(x[t]) + h @ W).tanh()
        out[t] = h
        acc[t] += h
    R = rng.normal(size=(4, 2, 3))
    (out * R).sum().backward(retain_graph=True)
    g_out = W.grad.array.copy()
    W.grad = None
    (acc * R).sum().backward()
    # the same without writes into buffers
    W2 = leaf(W.numpy())
    h = tr.Tensor(np.zeros((2, 3)))
    hs = []
    for t in range(4):
        h = (tr.Tensor(x[t]) + h @ W2).tanh()
        hs.append(h)
    (tr.stack(hs) * R).sum().backward()
    np.testing.assert_allclose(g_out, W2.grad, atol=1e-13)
    np.testing.assert_allclose(W.grad, W2.grad, atol=1e-13)


def test_sibling_views_see_a_recorded_write_in_their_gradients() -> None:
    x = leaf([1.0, 2.0, 3.0, 4.0])
    w = leaf([10.0, 20.0])
    base = x * 1.0
    left, whole = base[:2], base[:]
    early = whole * 1.0  # recorded before the write: the old values
    left *= w  # a recorded write through one view
    loss = (whole * whole).sum() + early.sum()  # another view, used after the write
    loss.backward()
    new = np.array([10.0, 40.0, 3.0, 4.0])
    np.testing.assert_allclose(x.grad, 2 * new * np.array([10.0, 20.0, 1.0, 1.0]) + 1)
    np.testing.assert_allclose(w.grad, 2 * new[:2] * np.array([1.0, 2.0]))


def test_recorded_write_with_repeated_advanced_indices_is_refused() -> None:
    base = leaf([1.0, 2.0, 3.0]) * 1.0
    with pytest.raises(ValueError, match="more than once"):
        base[[0, 0]] = leaf([5.0, 6.0])


def test_a_view_whose_base_is_rebased_in_a_second_step_tracks_both() -> None:
    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0])
    buf = tr.zeros(2, 2, dtype=np.float64)
    row0, row1 = buf[0], buf[1]
    row0 += a
    row1 += b * 2
    (buf.sum() + (row0 * row1).sum()).backward()
    np.testing.assert_allclose(a.grad, 1 + 2 * b.numpy())
    np.testing.assert_allclose(b.grad, 2 + 2 * a.numpy())


# ----------------------------------------------------------------------------- comparisons
def test_comparisons_are_elementwise_boolean_tensors() -> None:
    y = tr.tensor([0, 1, 2, 1])
    pred = tr.tensor([0, 1, 1, 1])
    correct = (pred == y)
    assert correct.dtype == np.bool_
    assert correct.sum().item() == 3
    assert (y != 1).tolist() == [True, False, True, False]
    assert (y == np.array([0, 0, 2, 2])).tolist() == [True, False, True, False]
    assert (np.array([0, 0, 2, 2]) == y).tolist() == [True, False, True, False]
    mask = (y > 0) & (y < 2)
    assert mask.tolist() == [False, True, False, True]
    assert (~mask).tolist() == [True, False, True, False]
    assert len({y, pred}) == 2 and y in [y, pred] and y in {y}
    with pytest.raises(ValueError, match="ambiguous"):
        bool(y == 1)


# ----------------------------------------------------------------------------- messages
def test_carrying_a_state_without_detach_says_to_detach_not_retain_graph() -> None:
    rng = np.random.default_rng(0)
    lstm = tr.nn.LSTM(3, 4, engine="autograd", dtype=np.float64)
    hidden = None
    with pytest.raises(RuntimeError) as info:
        for _ in range(2):
            out, hidden = lstm(tr.Tensor(rng.normal(size=(2, 1, 3))), hidden)
            out.sum().backward()
    msg = str(info.value)
    assert "detach" in msg and "truncation" in msg
    assert "Do not pass retain_graph=True" in msg
    # the same loss twice is the other mistake, with the other fix
    x = leaf([1.0])
    y = (x * 2).tanh()
    y.backward()
    with pytest.raises(RuntimeError, match="second time.*retain_graph=True"):
        y.backward()


# ----------------------------------------------------------------------------- torch parity
@st.composite
def basic_indices(draw: Any, shape: tuple) -> tuple:
    """A basic index for ``shape``: per axis an int, a slice with a positive step, or the
    full slice; sometimes None (a new axis) or an Ellipsis in place of the last axes."""
    index: list[Any] = []
    ndim = len(shape)
    stop_at = draw(st.integers(0, ndim))
    for n in shape[:stop_at]:
        kind = draw(st.sampled_from(["int", "slice", "full"]))
        if kind == "int":
            index.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            start = draw(st.one_of(st.none(), st.integers(-n, n)))
            stop = draw(st.one_of(st.none(), st.integers(-n, n)))
            index.append(slice(start, stop, draw(st.integers(1, 3))))
        else:
            index.append(slice(None))
        if draw(st.integers(0, 5)) == 0:
            index.append(None)
    if stop_at < ndim and draw(st.booleans()):
        index.append(Ellipsis)
    return tuple(index)


SHAPE = (3, 4, 2)
WRITES = ["iadd", "imul", "setitem", "fill", "sub_then_read"]


def _program(lib: Any, x: Any, w_full: Any, index: tuple, write: str) -> tuple:
    base = x * 1.0
    view = base[index]
    w = w_full[index]
    if write == "iadd":
        view += w
    elif write == "imul":
        view *= w
    elif write == "setitem":
        view[...] = w * 3.0
    elif write == "fill":
        view.fill_(0.5)
    else:
        view -= w
        view = base[index]  # a fresh view after the write
    R = lib.tensor(np.arange(np.prod(SHAPE), dtype=np.float64).reshape(SHAPE) / 7.0)
    loss = (base * R).sum() + (view * view).sum()
    return loss, base, view


@requires_torch
@settings(max_examples=60)
@given(index=basic_indices(SHAPE), write=st.sampled_from(WRITES))
@example(index=(0, 1), write="imul")
@example(index=(Ellipsis,), write="setitem")
@example(index=(slice(None), None, 2), write="iadd")
def test_views_and_writes_through_them_match_torch(index: tuple, write: str) -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x0 = rng.normal(size=SHAPE)
    w0 = rng.normal(size=SHAPE)
    xt = torch.tensor(x0, requires_grad=True)
    wt = torch.tensor(w0, requires_grad=True)
    ours_x, ours_w = leaf(x0), leaf(w0)
    loss_t, base_t, view_t = _program(torch, xt, wt, index, write)
    loss_o, base_o, view_o = _program(tr, ours_x, ours_w, index, write)
    assert view_o.shape == tuple(view_t.shape)
    np.testing.assert_allclose(base_o.numpy(), base_t.detach().numpy(), rtol=0, atol=1e-13)
    np.testing.assert_allclose(view_o.numpy(), view_t.detach().numpy(), rtol=0, atol=1e-13)
    assert np.shares_memory(view_o.numpy(), base_o.numpy()) or view_o.numpy().size == 0
    loss_t.backward()
    loss_o.backward()
    np.testing.assert_allclose(float(loss_o.item()), float(loss_t.item()), rtol=1e-13)
    np.testing.assert_allclose(ours_x.grad, xt.grad.numpy(), rtol=0, atol=1e-12)
    if wt.grad is None:  # w not used (fill_)
        assert ours_w.grad is None
    else:
        np.testing.assert_allclose(ours_w.grad, wt.grad.numpy(), rtol=0, atol=1e-12)


@settings(max_examples=60)
@given(index=basic_indices(SHAPE))
def test_basic_index_values_and_shared_memory_match_numpy(index: tuple) -> None:
    data = np.arange(np.prod(SHAPE), dtype=np.float64).reshape(SHAPE)
    t = tr.Tensor(data.copy())
    view = t[index]
    np.testing.assert_array_equal(view.numpy(), data[index])
    with tr.no_grad():
        view.fill_(-1.0)
    expected = data.copy()
    expected[index] = -1.0
    np.testing.assert_array_equal(t.numpy(), expected)


# ----------------------------------------------------------------------------- NumPy interop
def test_numpy_arithmetic_with_a_tensor_stays_in_the_graph() -> None:
    x = leaf([1.0, 2.0])
    y = np.array([3.0, 4.0]) * x + np.float64(1.0)        # ndarray (op) tensor: recorded
    z = np.array([[1.0, 1.0]]) @ y.reshape(2, 1)
    assert isinstance(z, tr.Tensor) and z.requires_grad
    z.sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 4.0])
    assert (np.array([1.0, 1.5]) < x).tolist() == [False, True]   # comparisons: bool tensors


def test_numpy_functions_refuse_a_tensor_in_a_graph_instead_of_cutting_it() -> None:
    x = leaf([0.5, -1.0])
    for fn in (np.exp, np.tanh, lambda t: np.maximum(t, 0.0)):
        with pytest.raises(TypeError, match="requires a gradient.*outside the graph"):
            fn(x)
    with pytest.raises(ValueError, match="read-only"):
        x.numpy()[0] = 9.0                                 # a write would bypass the version
    with tr.no_grad():                                      # plain numbers: allowed
        np.testing.assert_allclose(np.exp(x), np.exp([0.5, -1.0]))
    np.testing.assert_allclose(np.exp(x.detach()), np.exp([0.5, -1.0]))
    a = np.zeros(2)
    a += tr.ones(2, dtype=tr.float64)                       # no graph involved: plain NumPy
    np.testing.assert_array_equal(a, [1.0, 1.0])
