"""Truncated BPTT (tinygrad_rnn/truncation.py): both variants against brute force.

* full BPTT is k >= T: one window, bit for bit the gradient of the plain forward/backward;
* chunked TBPTT(k) equals autograd through a cell unrolled step by step with ``.detach()`` of
  the state every k steps, the loss a sum of per-step losses and one backward (1e-10, float64);
* Williams & Peng's TBPTT(k1, k2) equals a brute-force reference that, for every update,
  recomputes the window from the detached true state at its start and puts the loss on its
  last k1 steps (per-window gradients, 1e-10);
* the fused and the autograd engines agree through ``run_truncated`` (1e-10);
* the carried state is a detached leaf at every window, and the live graph stays bounded over
  1,000 chunks (``count_graph_nodes`` and weak references, with ``gc`` disabled);
* ``windows``: the loss ranges partition [0, T) for any T and k1 <= k2; invalid schedules
  raise;
* the truncation-bias meter: 0 / 1 for k >= T, smaller error for k = T - 1 than for k = 1 on a
  contracting RNN, and the numbers it reports are the definitions;
* docs/truncation.md numbers its equations (TB1)... and embeds the timeline figure.
"""
from __future__ import annotations

import gc
import re
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn import truncation as trn
from tinygrad_rnn.truncation import (
    Truncation, TruncationBias, Window, chunked, detach_state, full, run_truncated,
    truncation_bias, williams_peng, windows,
)
from tinygrad_rnn.engine import count_graph_nodes
from tinygrad_rnn.nn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "truncation.md"
SAME = 1e-10  # |a - b| <= SAME * max(1, |b|)


# --------------------------------------------------------------------------------------------
# models and references
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    mode: str
    options: tuple = ()

    @property
    def is_lstm(self) -> bool:
        return self.mode == "LSTM"

    def layer(self, D: int, H: int, engine: str, seed: int, batch_first: bool = False) -> Any:
        cls = {"RNN": RNN, "GRU": GRU, "LSTM": LSTM}[self.mode]
        return cls(D, H, batch_first=batch_first, engine=engine, dtype=np.float64,
                   generator=seed, **dict(self.options))

    def cell_sharing(self, layer: Any) -> Any:
        """A cell whose parameters ARE the layer's (same Parameter objects)."""
        cls = {"RNN": RNNCell, "GRU": GRUCell, "LSTM": LSTMCell}[self.mode]
        cell = cls(layer.input_size, layer.hidden_size, dtype=np.float64, **dict(self.options))
        for name, p in layer._params(0, 0).items():
            setattr(cell, name, p)
        return cell

    def __str__(self) -> str:
        return "-".join([self.mode.lower()] + [f"{k}={v}" for k, v in self.options])


VARIANTS = [
    Variant("RNN", (("nonlinearity", "tanh"),)), Variant("RNN", (("nonlinearity", "relu"),)),
    Variant("GRU", (("reset", "after"),)), Variant("GRU", (("reset", "before"),)),
    Variant("LSTM"), Variant("LSTM", (("peephole", True),)), Variant("LSTM", (("coupled", True),)),
]
VARIANT_IDS = [str(v) for v in VARIANTS]
ENGINES = ("fused", "autograd")


@dataclass
class Problem:
    """A stream x (T, N, D), an initial state and per-step targets y (T, N, H); the loss of
    steps [a, b) is sum_t 0.5 ||h_t - y_t||^2 (a sum, so windows add up)."""

    variant: Variant
    x: np.ndarray
    h0: np.ndarray
    c0: np.ndarray | None
    y: np.ndarray

    @property
    def T(self) -> int:
        return self.x.shape[0]

    def state(self) -> Any:
        h0 = tr.Tensor(self.h0.copy())
        return (h0, tr.Tensor(self.c0.copy())) if self.c0 is not None else h0

    def loss_fn(self, out: Any, a: int, b: int) -> Any:
        diff = out - tr.Tensor(self.y[a:b])
        return 0.5 * (diff * diff).sum()

    def step_loss(self, h: Any, t: int) -> Any:
        diff = h - tr.Tensor(self.y[t])
        return 0.5 * (diff * diff).sum()


def make_problem(variant: Variant, T: int, N: int, D: int, H: int, seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, N, D))
    if variant.mode == "RNN" and dict(variant.options).get("nonlinearity") == "relu":
        x = x + 0.5  # pushes pre-activations away from relu's kink at 0 on average
    h0 = 0.5 * rng.standard_normal((1, N, H))
    c0 = 0.5 * rng.standard_normal((1, N, H)) if variant.is_lstm else None
    y = 0.5 * rng.standard_normal((T, N, H))
    return Problem(variant, x, h0, c0, y)


def layer_forward(layer: Any) -> Callable[[Any, Any], tuple]:
    return lambda xw, state: layer(xw, state)


def grads(layer: Any) -> dict[str, np.ndarray]:
    return {n: np.zeros(p.shape) if p.grad is None else np.array(p.grad)
            for n, p in layer.named_parameters()}


def assert_same(got: dict, want: dict, tol: float = SAME) -> None:
    assert got.keys() == want.keys()
    for name in want:
        err = np.abs(got[name] - want[name]) / np.maximum(1.0, np.abs(want[name]))
        assert float(err.max(initial=0.0)) <= tol, f"{name}: max rel err {err.max():.3e}"


def cell_step(cell: Any, x_t: Any, state: Any) -> Any:
    """One step of a cell on (N, D) with state h or (h, c) of shape (N, H)."""
    return cell(x_t, state)


def squeeze_state(state: Any) -> Any:
    """The layer's (1, N, H) state(s) as the cell's (N, H)."""
    if isinstance(state, tuple):
        return tuple(s[0] for s in state)
    return state[0]


def output_of(state: Any) -> Any:
    return state[0] if isinstance(state, tuple) else state


def true_states(problem: Problem, cell: Any) -> list:
    """Values of the state s_t for t = 0..T along the undetached trajectory (no graph)."""
    with tr.no_grad():
        s = squeeze_state(problem.state())
        out = [s]
        for t in range(problem.T):
            s = cell_step(cell, tr.Tensor(problem.x[t]), s)
            out.append(s)
    return out


def detach_cell_state(s: Any) -> Any:
    return tuple(v.detach() for v in s) if isinstance(s, tuple) else s.detach()


# --------------------------------------------------------------------------------------------
# full BPTT is k >= T
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_k_at_least_T_is_full_bptt_bit_for_bit(variant: Variant, engine: str) -> None:
    T = 7
    problem = make_problem(variant, T, 2, 3, 4, seed=1)
    layer = variant.layer(3, 4, engine, seed=2)
    out, _ = layer(tr.Tensor(problem.x), problem.state())
    problem.loss_fn(out, 0, T).backward()
    want = grads(layer)
    for schedule in (full(T), chunked(T), chunked(T + 3), williams_peng(T, T + 5)):
        layer.zero_grad()
        losses, _ = run_truncated(layer_forward(layer), tr.Tensor(problem.x), schedule,
                                  problem.loss_fn, state=problem.state())
        assert len(losses) == 1
        got = grads(layer)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)


# --------------------------------------------------------------------------------------------
# chunked TBPTT(k) == a cell unrolled with .detach() every k steps
# --------------------------------------------------------------------------------------------
def chunked_reference(problem: Problem, cell: Any, k: int) -> float:
    """Unroll the cell step by step, detaching the state every k steps; the loss is the sum
    of the per-step losses; ONE backward. Returns the loss."""
    s = squeeze_state(problem.state())
    total = None
    for t in range(problem.T):
        if t > 0 and t % k == 0:
            s = detach_cell_state(s)
        s = cell_step(cell, tr.Tensor(problem.x[t]), s)
        step = problem.step_loss(output_of(s), t)
        total = step if total is None else total + step
    total.backward()
    return float(total.item())


@given(variant=st.sampled_from(VARIANTS), engine=st.sampled_from(ENGINES),
       T=st.integers(1, 12), k=st.integers(1, 14), N=st.integers(1, 3),
       seed=st.integers(0, 2**31))
@example(variant=VARIANTS[0], engine="fused", T=12, k=5, N=2, seed=0)
@example(variant=VARIANTS[1], engine="autograd", T=9, k=2, N=2, seed=1)
@example(variant=VARIANTS[2], engine="fused", T=10, k=3, N=2, seed=2)
@example(variant=VARIANTS[3], engine="autograd", T=10, k=4, N=1, seed=3)
@example(variant=VARIANTS[4], engine="fused", T=11, k=3, N=2, seed=4)
@example(variant=VARIANTS[5], engine="autograd", T=8, k=1, N=2, seed=5)
@example(variant=VARIANTS[6], engine="fused", T=12, k=7, N=3, seed=6)
def test_chunked_equals_cell_unrolled_with_detach_every_k(variant: Variant, engine: str,
                                                          T: int, k: int, N: int,
                                                          seed: int) -> None:
    D, H = 2, 3
    problem = make_problem(variant, T, N, D, H, seed)
    layer = variant.layer(D, H, engine, seed=seed + 1)
    losses, final = run_truncated(layer_forward(layer), tr.Tensor(problem.x), chunked(k),
                                  problem.loss_fn, state=problem.state())
    got = grads(layer)
    layer.zero_grad()
    cell = variant.cell_sharing(layer)
    total = chunked_reference(problem, cell, k)
    assert_same(got, grads(layer))
    assert len(losses) == -(-T // k)
    assert abs(sum(losses) - total) <= SAME * max(1.0, abs(total))
    # the carried state is the true trajectory's state at T
    s_T = true_states(problem, cell)[-1]
    for g, w in zip(final if isinstance(final, tuple) else (final,),
                    s_T if isinstance(s_T, tuple) else (s_T,)):
        np.testing.assert_allclose(g.numpy()[0], w.numpy(), rtol=SAME, atol=SAME)


# --------------------------------------------------------------------------------------------
# TBPTT(k1, k2) == brute force: per update window, recompute from the detached true state
# --------------------------------------------------------------------------------------------
def williams_peng_reference(problem: Problem, cell: Any, k1: int, k2: int) -> list[dict]:
    """For each update time b = k1, 2 k1, ..., T (the last one T): the loss is on the steps
    since the previous update, [a, b); the window reaches k2 - k1 steps further back (never
    before 0), starts from the *true* state there, detached, and is backpropagated alone.
    Returns each window's parameter gradients."""
    states = true_states(problem, cell)
    out = []
    a = 0
    while a < problem.T:
        b = min(a + k1, problem.T)
        start = max(0, a - (k2 - k1))
        s = detach_cell_state(states[start])
        loss = None
        for t in range(start, b):
            s = cell_step(cell, tr.Tensor(problem.x[t]), s)
            if t >= a:
                step = problem.step_loss(output_of(s), t)
                loss = step if loss is None else loss + step
        cell.zero_grad()
        loss.backward()
        out.append({n: np.zeros(p.shape) if p.grad is None else np.array(p.grad)
                    for n, p in cell.named_parameters()})
        a = b
    return out


@given(variant=st.sampled_from(VARIANTS), engine=st.sampled_from(ENGINES),
       T=st.integers(1, 12), k1=st.integers(1, 6), extra=st.integers(0, 6),
       seed=st.integers(0, 2**31))
@example(variant=VARIANTS[0], engine="fused", T=12, k1=3, extra=2, seed=0)
@example(variant=VARIANTS[1], engine="autograd", T=11, k1=2, extra=3, seed=1)
@example(variant=VARIANTS[2], engine="fused", T=10, k1=3, extra=4, seed=2)
@example(variant=VARIANTS[3], engine="autograd", T=10, k1=4, extra=1, seed=3)
@example(variant=VARIANTS[4], engine="autograd", T=11, k1=3, extra=5, seed=4)
@example(variant=VARIANTS[5], engine="fused", T=9, k1=1, extra=2, seed=5)
@example(variant=VARIANTS[6], engine="fused", T=12, k1=5, extra=6, seed=6)
def test_williams_peng_equals_brute_force_per_window(variant: Variant, engine: str, T: int,
                                                     k1: int, extra: int, seed: int) -> None:
    k2 = k1 + extra
    D, H, N = 2, 3, 2
    problem = make_problem(variant, T, N, D, H, seed)
    layer = variant.layer(D, H, engine, seed=seed + 1)
    per_window: list[dict] = []
    seen: list[Window] = []

    def on_window(w: Window, loss: Any) -> None:
        seen.append(w)
        per_window.append(grads(layer))
        layer.zero_grad()

    losses, _ = run_truncated(layer_forward(layer), tr.Tensor(problem.x),
                              williams_peng(k1, k2), problem.loss_fn, state=problem.state(),
                              on_window=on_window)
    assert seen == windows(T, williams_peng(k1, k2)) and len(losses) == len(seen)
    want = williams_peng_reference(problem, variant.cell_sharing(layer), k1, k2)
    assert len(want) == len(per_window)
    for got_w, want_w in zip(per_window, want):
        assert_same(got_w, {n: want_w[n[:-len("_l0")]] for n in got_w})


def test_williams_peng_k1_equals_k2_is_chunked() -> None:
    variant = VARIANTS[4]
    problem = make_problem(variant, 13, 2, 2, 3, seed=7)
    layer = variant.layer(2, 3, "fused", seed=8)
    run_truncated(layer_forward(layer), tr.Tensor(problem.x), williams_peng(4, 4),
                  problem.loss_fn, state=problem.state())
    a = grads(layer)
    layer.zero_grad()
    run_truncated(layer_forward(layer), tr.Tensor(problem.x), chunked(4), problem.loss_fn,
                  state=problem.state())
    for name, g in grads(layer).items():
        np.testing.assert_array_equal(a[name], g)
    assert williams_peng(4, 4) == chunked(4) and chunked(4).name == "TBPTT(4)"
    assert williams_peng(2, 5).name == "TBPTT(2, 5)"


# --------------------------------------------------------------------------------------------
# both engines, batch-first streams
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("schedule", [chunked(1), chunked(3), williams_peng(2, 5),
                                      williams_peng(3, 4), full(10)], ids=str)
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_fused_and_autograd_engines_agree_through_run_truncated(variant: Variant,
                                                                schedule: Truncation) -> None:
    problem = make_problem(variant, 10, 2, 2, 3, seed=11)
    results = []
    for engine in ENGINES:
        layer = variant.layer(2, 3, engine, seed=12)
        layer.track_state_grads = True
        norms: list[np.ndarray] = []

        def on_window(w: Window, loss: Any, layer: Any = layer, norms: list = norms) -> None:
            norms.append(tr.monitor.state_grad_norms(layer.state_grads[(0, 0)]["h"]))

        losses, final = run_truncated(layer_forward(layer), tr.Tensor(problem.x), schedule,
                                      problem.loss_fn, state=problem.state(),
                                      on_window=on_window)
        results.append((losses, final, grads(layer), norms))
    (l_f, s_f, g_f, n_f), (l_a, s_a, g_a, n_a) = results
    np.testing.assert_allclose(l_f, l_a, rtol=SAME, atol=SAME)
    for a, b in zip(s_f if isinstance(s_f, tuple) else (s_f,),
                    s_a if isinstance(s_a, tuple) else (s_a,)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=SAME, atol=SAME)
    assert_same(g_f, g_a)
    assert len(n_f) == len(n_a) == len(windows(10, schedule))
    for a, b in zip(n_f, n_a):
        np.testing.assert_allclose(a, b, rtol=SAME, atol=SAME)


@pytest.mark.parametrize("schedule", [chunked(3), williams_peng(2, 5)], ids=str)
def test_batch_first_stream_with_time_axis_1(schedule: Truncation) -> None:
    variant = VARIANTS[2]
    problem = make_problem(variant, 9, 2, 2, 3, seed=13)
    tm = variant.layer(2, 3, "fused", seed=14)
    bf = variant.layer(2, 3, "fused", seed=14, batch_first=True)
    l_tm, s_tm = run_truncated(layer_forward(tm), tr.Tensor(problem.x), schedule,
                               problem.loss_fn, state=problem.state())
    y_bf = problem.y.transpose(1, 0, 2)

    def loss_bf(out: Any, a: int, b: int) -> Any:
        diff = out - tr.Tensor(y_bf[:, a:b])
        return 0.5 * (diff * diff).sum()

    l_bf, s_bf = run_truncated(layer_forward(bf), tr.Tensor(problem.x.transpose(1, 0, 2)),
                               schedule, loss_bf, state=problem.state(), time_axis=1)
    np.testing.assert_allclose(l_bf, l_tm, rtol=SAME)
    np.testing.assert_allclose(s_bf.numpy(), s_tm.numpy(), rtol=SAME, atol=SAME)
    assert_same(grads(bf), grads(tm))


# --------------------------------------------------------------------------------------------
# the carried state is detached; the graph stays bounded
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("schedule", [chunked(3), williams_peng(2, 5)], ids=str)
def test_every_window_starts_from_a_detached_leaf(schedule: Truncation) -> None:
    variant = VARIANTS[4]
    problem = make_problem(variant, 11, 2, 2, 3, seed=15)
    layer = variant.layer(2, 3, "autograd", seed=16)
    calls: list = []                                   # states given to forward, and "|"

    def forward(xw: Any, state: Any) -> tuple:
        calls.append(state)
        return layer(xw, state)

    def on_window(w: Window, loss: Any) -> None:
        calls.append("|")

    run_truncated(forward, tr.Tensor(problem.x), schedule, problem.loss_fn,
                  state=problem.state(), on_window=on_window)
    starts = [calls[0]] + [calls[i + 1] for i, c in enumerate(calls[:-1]) if isinstance(c, str)]
    assert len(starts) == len(windows(11, schedule))
    for state in starts:                               # the first piece of every window
        for s in state:
            assert s._ctx is None and not s.requires_grad


def test_live_graph_stays_bounded_over_1000_chunks() -> None:
    rnn = RNN(2, 2, dtype=np.float64, generator=0)
    x = tr.Tensor(np.random.default_rng(0).standard_normal((2000, 1, 2)))
    in_nodes, out_nodes, alive_at_window = [], [], []
    refs: list = []

    def forward(xw: Any, h: Any) -> tuple:
        in_nodes.append(0 if h is None else count_graph_nodes(h))
        out, h_n = rnn(xw, h)
        out_nodes.append(count_graph_nodes(h_n))
        refs.append(weakref.ref(out))
        refs.append(weakref.ref(h_n))
        return out, h_n

    def loss_fn(out: Any, a: int, b: int) -> Any:
        return (out * out).sum()

    def on_window(w: Window, loss: Any) -> None:
        alive_at_window.append(sum(r() is not None for r in refs))

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        losses, h = run_truncated(forward, x, chunked(2), loss_fn, on_window=on_window)
        del losses
        alive_after = sum(r() is not None for r in refs)
    finally:
        if was_enabled:
            gc.enable()
    assert len(in_nodes) == 1000
    assert set(in_nodes) == {0}                        # the carried state has no graph
    assert len(set(out_nodes)) == 1                    # every chunk builds the same graph
    assert max(alive_at_window) <= 2                   # only the current chunk's tensors
    assert alive_after == 0                            # freed by reference counting alone
    assert count_graph_nodes(h) == 0 and h._ctx is None


# --------------------------------------------------------------------------------------------
# windows
# --------------------------------------------------------------------------------------------
@given(T=st.integers(0, 60), k1=st.integers(1, 12), extra=st.integers(0, 12))
@example(T=0, k1=1, extra=0)
@example(T=10, k1=3, extra=0)
@example(T=10, k1=3, extra=20)
@example(T=3, k1=7, extra=1)
def test_windows_loss_ranges_partition_the_stream(T: int, k1: int, extra: int) -> None:
    k2 = k1 + extra
    ws = windows(T, williams_peng(k1, k2))
    covered = [t for w in ws for t in range(w.loss_start, w.stop)]
    assert covered == list(range(T))                   # a partition, in order
    assert len(ws) == -(-T // k1)
    for j, w in enumerate(ws):
        assert 0 <= w.start <= w.loss_start < w.stop <= T
        assert w.stop - w.loss_start <= k1
        assert w.loss_start - w.start == min(k2 - k1, w.loss_start)
        if j + 1 < len(ws):
            assert w.stop == (j + 1) * k1
            assert ws[j + 1].start == w.carry and w.start <= w.carry <= w.stop
        else:
            assert w.stop == T and w.carry is None
    chunks = windows(T, chunked(k1))
    assert all(w.start == w.loss_start and w.carry in (w.stop, None) for w in chunks)
    assert list(trn.iter_windows(T, chunked(k1))) == chunks


def test_windows_of_a_small_example_by_hand() -> None:
    assert windows(11, williams_peng(3, 5)) == [
        Window(0, 0, 3, 1), Window(1, 3, 6, 4), Window(4, 6, 9, 7), Window(7, 9, 11, None)]
    assert windows(10, chunked(4)) == [Window(0, 0, 4, 4), Window(4, 4, 8, 8),
                                       Window(8, 8, 10, None)]
    assert windows(5, full(5)) == [Window(0, 0, 5, None)]


@pytest.mark.parametrize("make", [
    lambda: Truncation(0, 0), lambda: Truncation(0, 3), lambda: Truncation(3, 2),
    lambda: Truncation(-1, 4), lambda: chunked(0), lambda: chunked(-2),
    lambda: williams_peng(4, 3), lambda: williams_peng(0, 5),
])
def test_invalid_schedules_raise_value_error(make: Callable) -> None:
    with pytest.raises(ValueError, match="k1 <= k2"):
        make()


@pytest.mark.parametrize("k1, k2", [(2.0, 3), (2, 3.5), (True, True), ("2", 3), (None, 2)])
def test_non_integer_schedules_raise_type_error(k1: Any, k2: Any) -> None:
    """Regression: a float k was accepted and only failed later inside range()."""
    with pytest.raises(TypeError, match="integer"):
        Truncation(k1, k2)


def test_numpy_integers_are_accepted() -> None:
    assert windows(7, chunked(np.int64(3))) == windows(7, chunked(3))


def test_detach_state_handles_none_tensors_and_nested_tuples() -> None:
    w = tr.Tensor(np.ones(2), requires_grad=True)
    h, c = w * 2.0, w * 3.0
    out = detach_state((h, [c, None]))
    assert isinstance(out, tuple) and isinstance(out[1], list) and out[1][1] is None
    for t, src in ((out[0], h), (out[1][0], c)):
        assert t._ctx is None and not t.requires_grad
        np.testing.assert_array_equal(t.numpy(), src.numpy())
    assert detach_state(None) is None
    with pytest.raises(TypeError, match="ndarray"):
        detach_state(np.ones(2))


# --------------------------------------------------------------------------------------------
# the truncation-bias meter
# --------------------------------------------------------------------------------------------
def contracting_rnn(T: int, seed: int = 0) -> tuple[Any, Problem]:
    problem = make_problem(VARIANTS[0], T, 3, 2, 4, seed)
    rnn = VARIANTS[0].layer(2, 4, "fused", seed)
    with tr.no_grad():
        rnn.weight_hh_l0.mul_(0.6 / float(tr.monitor.singular_values(rnn.weight_hh_l0)[0]))
    return rnn, problem


def test_truncation_bias_is_zero_for_k_at_least_T() -> None:
    T = 9
    rnn, problem = contracting_rnn(T)
    res = truncation_bias(layer_forward(rnn), tr.Tensor(problem.x), problem.loss_fn,
                          rnn.parameters(), [T, T + 1, 50, williams_peng(T, T + 2)],
                          state=problem.state())
    assert [r.k for r in res] == [T, T + 1, 50, T + 2]
    for r in res:
        assert isinstance(r, TruncationBias)
        assert r.relative_error == 0.0
        assert abs(r.cosine - 1.0) <= 1e-15


def test_truncation_bias_shrinks_from_k_1_to_k_T_minus_1_on_a_contracting_rnn() -> None:
    T = 16
    rnn, problem = contracting_rnn(T, seed=3)
    k1_bias, long_bias = truncation_bias(layer_forward(rnn), tr.Tensor(problem.x),
                                         problem.loss_fn, rnn.parameters(), [1, T - 1],
                                         state=problem.state())
    assert k1_bias.relative_error > 0.0 and k1_bias.cosine < 1.0
    # k = 1 cuts the history of every step's loss; k = T - 1 only that of the last step
    # (one boundary). Not monotone in k in general, but these two ends are ordered.
    assert long_bias.relative_error < k1_bias.relative_error
    assert long_bias.cosine > k1_bias.cosine


def test_truncation_bias_reports_the_definitions_and_restores_grads() -> None:
    T = 8
    rnn, problem = contracting_rnn(T, seed=5)
    params = list(rnn.parameters())
    marker = [np.full(p.shape, 7.0) for p in params]
    for p, m in zip(params, marker):
        p.grad = m
    res = truncation_bias(layer_forward(rnn), tr.Tensor(problem.x), problem.loss_fn, params,
                          [2, williams_peng(2, 4)], state=problem.state())
    for p, m in zip(params, marker):
        assert p.grad.array is m                        # the caller's gradients are back

    def grad_vector(schedule: Truncation) -> np.ndarray:
        for p in params:
            p.grad = None
        run_truncated(layer_forward(rnn), tr.Tensor(problem.x), schedule, problem.loss_fn,
                      state=problem.state())
        return np.concatenate([p.grad.array.ravel() for p in params])

    g_full = grad_vector(full(T))
    for r, schedule in zip(res, [chunked(2), williams_peng(2, 4)]):
        g = grad_vector(schedule)
        assert r.schedule == schedule
        rel = np.linalg.norm(g - g_full) / np.linalg.norm(g_full)
        cos = g @ g_full / (np.linalg.norm(g) * np.linalg.norm(g_full))
        assert abs(r.relative_error - rel) <= 1e-12 * rel
        assert abs(r.cosine - cos) <= 1e-12
        assert r.relative_error > 0


def test_truncation_bias_of_a_zero_gradient_is_nan() -> None:
    rnn, problem = contracting_rnn(4)

    def zero_loss(out: Any, a: int, b: int) -> Any:
        return (out * 0.0).sum()

    (r,) = truncation_bias(layer_forward(rnn), tr.Tensor(problem.x), zero_loss,
                           rnn.parameters(), [1], state=problem.state())
    assert np.isnan(r.relative_error) and np.isnan(r.cosine)


def test_truncation_is_exported() -> None:
    for name in ("truncation_bias", "TruncationBias", "run_truncated", "windows"):
        assert name in trn.__all__


# --------------------------------------------------------------------------------------------
# docs/truncation.md
# --------------------------------------------------------------------------------------------
def test_truncation_page_numbers_its_equations_and_embeds_the_timeline() -> None:
    """Page-specific checks; tests/docs/test_docs.py runs the page's code blocks and checks
    that every "Implemented by" / "Tested by" reference exists."""
    text = PAGE.read_text(encoding="utf-8")
    tags = re.findall(r"\\tag\{([^}]*)\}", text)
    assert tags == [f"TB{k}" for k in range(1, len(tags) + 1)] and len(tags) >= 9
    assert "](figures/truncation_timeline.png)" in text
    assert (ROOT / "docs" / "figures" / "truncation_timeline.png").is_file()
    tested = set(re.findall(r"tests/test_truncation\.py::(\w+)", text))
    assert len(tested) >= 10
    src = Path(__file__).read_text(encoding="utf-8")
    for name in tested:
        assert re.search(rf"^def {name}\(", src, flags=re.M), name
